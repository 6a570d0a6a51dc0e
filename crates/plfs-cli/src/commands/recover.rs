use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde::Serialize;

use crate::output::{count, print_json, serde_name};
use crate::paths::Context;

#[derive(Debug, Args)]
#[command(after_help = "Exit status: 0 if nothing was found or everything found was fixed, \
    1 if problems remain (or on error).")]
pub struct Opts {
    /// The plfs file to check, or a directory: then what removed files
    /// left there (deleted) and, with --fix, crash debris in it.
    file: PathBuf,
    /// Repair what is found: remove stale open records, cut torn index
    /// tails, publish missing size records, replace size records that
    /// count index records lost from a log cut short (so stat agrees with
    /// reads), clear debris. Damaged data, headers and version files are
    /// reported, not repaired.
    #[arg(long)]
    fix: bool,
    /// Also read every data byte and check it against the CRC32C in its
    /// index record (reads the whole file).
    #[arg(long)]
    verify: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Report<'a> {
    file: String,
    findings: &'a [plfs::tools::Finding],
    unfixed: usize,
}

pub fn run(context: &Context, opts: &Opts) -> Result<ExitCode> {
    let target = context.resolve_plfs(&opts.file)?;
    let directory =
        target.plfs.stat(&target.path).is_ok_and(|attr| attr.kind == plfs::attr::FileKind::Directory);
    // A damaged file cannot be stat'ed; repairing it is recover's job.
    if !directory && !target.plfs.is_damaged_file(&target.path).unwrap_or(false) {
        target.require_file()?;
    }
    let report = if directory {
        target.plfs.recover_directory(&target.path, opts.fix)
    } else {
        target.plfs.recover_with(&target.path, opts.fix, opts.verify)
    }
    .map_err(|e| target.error(e))?;
    let file = target.shown().display().to_string();
    let unfixed = report.unfixed();
    if opts.json {
        print_json(&Report { file, findings: &report.findings, unfixed })?;
    } else if report.findings.is_empty() {
        println!("{file}: no problems found");
    } else {
        for finding in &report.findings {
            let state = if finding.fixed { "fixed" } else { "found" };
            println!("{state:<6} {:<20} {}", serde_name(&finding.problem), finding.location);
            println!("       {}", finding.detail);
        }
        let fixed = report.findings.len() - unfixed;
        println!("{file}: {}, {fixed} fixed, {unfixed} remaining", count(report.findings.len(), "problem"));
        if unfixed > 0 && !opts.fix {
            println!("run with --fix to repair");
        }
    }
    Ok(if unfixed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
