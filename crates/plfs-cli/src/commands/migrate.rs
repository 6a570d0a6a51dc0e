use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use plfs::attr::FileKind;
use plfs::{MigrateOptions, MigrateOutcome, MigrateReport};
use serde::Serialize;

use crate::output::{human_bytes, print_json};
use crate::paths::{Context, PlfsPath};

#[derive(Debug, Args)]
pub struct Opts {
    /// A PLFS 2.5 file, or a directory whose 2.5 files (at any depth) to migrate.
    path: PathBuf,
    /// Make the plfs files here (a file, or the top of a copied tree) and
    /// remove the 2.5 ones once verified, instead of converting in place.
    #[arg(long)]
    to: Option<PathBuf>,
    /// Migrate files whose 2.5 meta/ still names a host with them open
    /// (only once those writers are known to be gone).
    #[arg(long)]
    force_open: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Default, Serialize)]
struct Summary {
    files: usize,
    skipped: usize,
    bytes: u64,
    index_bytes_before: u64,
    index_bytes_after: u64,
    reports: Vec<MigrateReport>,
}

pub fn run(context: &Context, opts: &Opts) -> Result<ExitCode> {
    let source = context.resolve_plfs(&opts.path)?;
    let target = opts.to.as_ref().map(|to| context.resolve_plfs(to)).transpose()?;
    let top = source.plfs.stat(&source.path).map_err(|e| source.error(e))?;
    // (source file, destination file) pairs, found before anything changes.
    let mut work = Vec::new();
    let mut total = 0;
    match top.kind {
        FileKind::File => {
            let to = target.map(|target| match target.plfs.stat(&target.path) {
                Ok(attr) if attr.kind == FileKind::Directory => {
                    let name = source.path.rsplit('/').next().unwrap_or_default().to_owned();
                    target.child(&name)
                }
                _ => target,
            });
            total += planned_bytes(&source);
            work.push((source, to));
        }
        FileKind::Directory => walk(&source, target.as_ref(), &mut work, &mut total)?,
        FileKind::Symlink => bail!("{}: is a symbolic link", source.shown().display()),
    }
    let options = MigrateOptions { force_open: opts.force_open };
    let progress = progress_bar(total * 2);
    let mut summary = Summary::default();
    let mut failures = 0;
    for (from, to) in work {
        let tick = |bytes: u64| progress.inc(bytes);
        let result = match &to {
            None => from.plfs.migrate(&from.path, &options, &tick),
            Some(to) => from.plfs.migrate_to(&from.path, &to.plfs, &to.path, &options, &tick),
        };
        match result {
            Ok(report) => {
                for note in &report.recovered {
                    progress.suspend(|| {
                        eprintln!("plfs migrate: {}: finished an earlier run: {note}", from.shown().display())
                    });
                }
                if report.outcome == MigrateOutcome::Migrated {
                    summary.files += 1;
                    summary.bytes += report.size;
                    summary.index_bytes_before += report.index_bytes_before;
                    summary.index_bytes_after += report.index_bytes_after;
                    summary.reports.push(report);
                } else {
                    summary.skipped += 1;
                }
            }
            Err(error) => {
                failures += 1;
                progress.suspend(|| eprintln!("plfs migrate: {:#}", from.error(error)));
            }
        }
    }
    progress.finish_and_clear();
    if opts.json {
        print_json(&summary)?;
    } else {
        for report in &summary.reports {
            let shown = |path: &str| path.to_owned();
            println!(
                "{} -> {}: {} ({} bytes); index {} in {} PLFS 2.5 entries -> {}",
                shown(&report.path),
                shown(&report.to),
                human_bytes(report.size),
                report.size,
                human_bytes(report.index_bytes_before),
                report.index_entries_before,
                human_bytes(report.index_bytes_after),
            );
        }
        println!(
            "migrated {} files, {} ({} bytes); index {} ({} bytes) before, {} ({} bytes) after; {} already plfs; {} failed",
            summary.files,
            human_bytes(summary.bytes),
            summary.bytes,
            human_bytes(summary.index_bytes_before),
            summary.index_bytes_before,
            human_bytes(summary.index_bytes_after),
            summary.index_bytes_after,
            summary.skipped,
            failures
        );
    }
    Ok(if failures == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Bytes a file's migration copies (0 for a plfs file).
fn planned_bytes(file: &PlfsPath) -> u64 {
    match file.plfs.is_plfs25(&file.path) {
        Ok(true) => file.plfs.stat(&file.path).map_or(0, |attr| attr.size),
        _ => 0,
    }
}

/// Every file under `dir`; with a target, its directories made there.
fn walk(
    dir: &PlfsPath,
    target: Option<&PlfsPath>,
    work: &mut Vec<(PlfsPath, Option<PlfsPath>)>,
    total: &mut u64,
) -> Result<()> {
    if let Some(target) = target
        && target.plfs.stat(&target.path).is_err()
    {
        let mode = dir.plfs.stat(&dir.path).map_or(0o755, |attr| attr.mode);
        target.plfs.mkdir(&target.path, mode).map_err(|e| target.error(e))?;
    }
    let mut entries = dir.plfs.readdir(&dir.path).map_err(|e| dir.error(e))?;
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    for entry in entries {
        let child = dir.child(&entry.name);
        let to = target.map(|target| target.child(&entry.name));
        match entry.kind {
            FileKind::File => {
                *total += planned_bytes(&child);
                work.push((child, to));
            }
            FileKind::Directory => walk(&child, to.as_ref(), work, total)?,
            FileKind::Symlink => {}
        }
    }
    Ok(())
}

fn progress_bar(size: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(size);
    if let Ok(style) = ProgressStyle::with_template(
        "migrating (copy, then verify) {bytes:>10}/{total_bytes:<10} [{wide_bar}] {binary_bytes_per_sec:>12}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}
