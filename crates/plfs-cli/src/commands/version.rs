use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use plfs::tools::VersionRecord;
use serde::Serialize;

use crate::output::print_json;
use crate::paths::Context;

#[derive(Debug, Args)]
pub struct Opts {
    /// A plfs file: show the format and library version that created it.
    file: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Report {
    library_version: String,
    format_version: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<FileReport>,
}

#[derive(Serialize)]
struct FileReport {
    path: String,
    format_version: u16,
    library_version: String,
}

pub fn run(context: &Context, opts: &Opts) -> Result<ExitCode> {
    let current = VersionRecord::current();
    let file = match &opts.file {
        Some(path) => {
            let target = context.resolve_plfs(path)?;
            target.require_file()?;
            let record = target.plfs.file_version(&target.path).map_err(|e| target.error(e))?;
            Some(FileReport {
                path: target.shown().display().to_string(),
                format_version: record.format_version,
                library_version: record.library_version,
            })
        }
        None => None,
    };
    let report =
        Report { library_version: current.library_version, format_version: current.format_version, file };
    if opts.json {
        print_json(&report)?;
    } else {
        println!("plfs library {}", report.library_version);
        println!("format version {}", report.format_version);
        if let Some(file) = &report.file
            && file.format_version == 0
        {
            // Format 0: no plfs format; the file is a 2.5 container.
            println!(
                "{}: {} container, read in place (read-only); `plfs migrate` converts it",
                file.path, file.library_version
            );
        } else if let Some(file) = &report.file {
            println!(
                "{}: format version {}, created by plfs {}",
                file.path, file.format_version, file.library_version
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
