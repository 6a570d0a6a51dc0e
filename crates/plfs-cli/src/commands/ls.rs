use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use plfs::attr::{FileAttr, FileKind};
use serde::Serialize;

use crate::output::{format_time, mode_string, print_json, time_ns};
use crate::paths::{Context, PlfsPath};

#[derive(Debug, Args)]
pub struct Opts {
    /// Long listing: mode, links, owner, size and modification time.
    #[arg(short = 'l')]
    long: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// A plfs directory (or file); the current directory if omitted.
    #[arg(default_value = ".")]
    dir: PathBuf,
}

#[derive(Serialize)]
struct Entry {
    name: String,
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    uid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mtime_ns: Option<i128>,
    #[serde(skip)]
    attr: Option<FileAttr>,
}

pub fn kind_name(kind: FileKind) -> &'static str {
    match kind {
        FileKind::File => "file",
        FileKind::Directory => "directory",
        FileKind::Symlink => "symlink",
    }
}

pub fn kind_char(kind: FileKind) -> char {
    match kind {
        FileKind::File => '-',
        FileKind::Directory => 'd',
        FileKind::Symlink => 'l',
    }
}

pub fn run(context: &Context, opts: &Opts) -> Result<ExitCode> {
    let target = context.resolve_plfs(&opts.dir)?;
    let attr = target.plfs.stat(&target.path).map_err(|e| target.error(e))?;
    let listed: Vec<(String, FileKind, PlfsPath)> = if attr.kind == FileKind::Directory {
        let names = target.plfs.readdir(&target.path).map_err(|e| target.error(e))?;
        names.into_iter().map(|entry| (entry.name.clone(), entry.kind, target.child(&entry.name))).collect()
    } else {
        vec![(opts.dir.display().to_string(), attr.kind, target.clone())]
    };
    let mut entries = Vec::with_capacity(listed.len());
    for (name, kind, path) in listed {
        let attr =
            if opts.long { Some(path.plfs.stat(&path.path).map_err(|e| path.error(e))?) } else { None };
        entries.push(Entry {
            name,
            kind: kind_name(kind),
            size: attr.as_ref().map(|a| a.size),
            mode: attr.as_ref().map(|a| a.mode),
            uid: attr.as_ref().map(|a| a.uid),
            gid: attr.as_ref().map(|a| a.gid),
            mtime_ns: attr.as_ref().map(|a| time_ns(a.mtime)),
            attr,
        });
    }
    if opts.json {
        print_json(&entries)?;
        return Ok(ExitCode::SUCCESS);
    }
    for entry in &entries {
        match &entry.attr {
            Some(attr) => println!(
                "{} {:>3} {:>6} {:>6} {:>14} {} {}",
                mode_string(kind_char(attr.kind), attr.mode),
                attr.nlink,
                attr.uid,
                attr.gid,
                attr.size,
                &format_time(attr.mtime)[..16],
                entry.name
            ),
            None => println!("{}", entry.name),
        }
    }
    Ok(ExitCode::SUCCESS)
}
