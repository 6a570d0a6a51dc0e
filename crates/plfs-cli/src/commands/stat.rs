use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde::Serialize;

use super::ls::{kind_char, kind_name};
use crate::output::{format_time, mode_string, print_json, time_ns};
use crate::paths::Context;

#[derive(Debug, Args)]
pub struct Opts {
    /// A plfs file, directory or symlink.
    file: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Report {
    path: String,
    kind: &'static str,
    size: u64,
    blocks: u64,
    mode: u32,
    uid: u32,
    gid: u32,
    nlink: u32,
    atime_ns: i128,
    mtime_ns: i128,
    ctime_ns: i128,
}

pub fn run(context: &Context, opts: &Opts) -> Result<ExitCode> {
    let target = context.resolve_plfs(&opts.file)?;
    let attr = target.plfs.stat(&target.path).map_err(|e| target.error(e))?;
    let path = target.shown().display().to_string();
    if opts.json {
        print_json(&Report {
            path,
            kind: kind_name(attr.kind),
            size: attr.size,
            blocks: attr.blocks,
            mode: attr.mode,
            uid: attr.uid,
            gid: attr.gid,
            nlink: attr.nlink,
            atime_ns: time_ns(attr.atime),
            mtime_ns: time_ns(attr.mtime),
            ctime_ns: time_ns(attr.ctime),
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    println!("  File: {path}");
    println!("  Kind: {}", kind_name(attr.kind));
    println!("  Size: {:<14} Blocks: {}", attr.size, attr.blocks);
    println!(
        "  Mode: {:04o} ({})  Links: {}",
        attr.mode,
        mode_string(kind_char(attr.kind), attr.mode),
        attr.nlink
    );
    println!("   Uid: {:<14} Gid: {}", attr.uid, attr.gid);
    println!("Access: {}", format_time(attr.atime));
    println!("Modify: {}", format_time(attr.mtime));
    println!("Change: {}", format_time(attr.ctime));
    Ok(ExitCode::SUCCESS)
}
