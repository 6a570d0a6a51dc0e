//! `plfs df`: used and free bytes and inodes of each backend of a mount,
//! and the mount's total (what statfs reports).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use plfs::fs::{BackendUsage, Plfs};
use plfs::store::SpaceInfo;
use serde::Serialize;

use crate::output::{human_bytes, print_json};
use crate::paths::Context;

#[derive(Debug, Args)]
pub struct Opts {
    /// A path in the mount to report; every mount of the plfsrc when left out.
    path: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct MountReport {
    mount_point: String,
    backends: Vec<Row>,
    /// Over distinct file systems: what statfs on the mount reports.
    total: Row,
}

#[derive(Serialize)]
struct Row {
    /// Backend index; `None` for the total.
    backend: Option<usize>,
    location: String,
    size_bytes: u64,
    used_bytes: u64,
    free_bytes: u64,
    /// Free to unprivileged users.
    available_bytes: u64,
    inodes: u64,
    inodes_used: u64,
    inodes_free: u64,
    /// Another backend on the same file system (counted once in the total).
    same_filesystem_as: Option<usize>,
}

fn row(backend: Option<usize>, location: String, space: &SpaceInfo, same: Option<usize>) -> Row {
    let bytes = |blocks: u64| blocks.saturating_mul(space.block_size);
    Row {
        backend,
        location,
        size_bytes: bytes(space.blocks),
        used_bytes: bytes(space.blocks.saturating_sub(space.blocks_free)),
        free_bytes: bytes(space.blocks_free),
        available_bytes: bytes(space.blocks_available),
        inodes: space.files,
        inodes_used: space.files.saturating_sub(space.files_free),
        inodes_free: space.files_free,
        same_filesystem_as: same,
    }
}

pub fn run(context: &Context, opts: &Opts) -> Result<ExitCode> {
    let mounts: Vec<(String, Plfs)> = match &opts.path {
        Some(path) => {
            let target = context.resolve_plfs(path)?;
            vec![(target.mount_point.display().to_string(), target.plfs)]
        }
        None => context
            .require_config()?
            .mounts
            .iter()
            .map(|mount| Ok((mount.mount_point.display().to_string(), context.mount(mount)?)))
            .collect::<Result<_>>()?,
    };
    let mut reports = Vec::with_capacity(mounts.len());
    for (mount_point, plfs) in mounts {
        let usage: Vec<BackendUsage> =
            plfs.space_per_backend().map_err(|error| anyhow::anyhow!("{mount_point}: {error}"))?;
        let total = plfs.statfs().map_err(|error| anyhow::anyhow!("{mount_point}: {error}"))?;
        let distinct = usage.iter().filter(|usage| usage.same_filesystem_as.is_none()).count();
        reports.push(MountReport {
            backends: usage
                .iter()
                .map(|usage| {
                    row(Some(usage.backend), usage.url.clone(), &usage.space, usage.same_filesystem_as)
                })
                .collect(),
            total: row(None, format!("total ({distinct} file systems)"), &total, None),
            mount_point,
        });
    }
    if opts.json {
        print_json(&reports)?;
        return Ok(ExitCode::SUCCESS);
    }
    for report in &reports {
        println!("Mount {}", report.mount_point);
        println!(
            "  {:<4} {:>10} {:>10} {:>10} {:>5} {:>12} {:>12}  location",
            "", "size", "used", "avail", "use%", "inodes", "iused"
        );
        for row in report.backends.iter().chain([&report.total]) {
            let name = row.backend.map_or("all".to_owned(), |backend| backend.to_string());
            let percent = (row.used_bytes as f64 * 100.0 / row.size_bytes.max(1) as f64).round();
            let same = row.same_filesystem_as.map(|other| format!(" (same file system as {other})"));
            println!(
                "  {name:<4} {:>10} {:>10} {:>10} {:>4}% {:>12} {:>12}  {}{}",
                human_bytes(row.size_bytes),
                human_bytes(row.used_bytes),
                human_bytes(row.available_bytes),
                percent,
                row.inodes,
                row.inodes_used,
                row.location,
                same.unwrap_or_default()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
