use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use crate::output::{human_bytes, print_json};
use crate::paths::Context;

#[derive(Debug, Args)]
pub struct Opts {
    /// The plfs file whose index logs to merge.
    file: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(context: &Context, opts: &Opts) -> Result<ExitCode> {
    let target = context.resolve_plfs(&opts.file)?;
    target.require_file()?;
    let report = target.plfs.flatten(&target.path).map_err(|e| target.error(e))?;
    if opts.json {
        print_json(&report)?;
    } else {
        println!(
            "{}: flattened {} logs into {} extents, {} of data ({} bytes), eof {}",
            target.shown().display(),
            report.logs,
            report.extents,
            human_bytes(report.bytes),
            report.bytes,
            report.eof
        );
    }
    Ok(ExitCode::SUCCESS)
}
