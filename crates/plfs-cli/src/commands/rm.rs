use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;
use plfs::ErrorKind;
use plfs::attr::FileKind;

use crate::output::error_text;
use crate::paths::{Context, PlfsPath};

#[derive(Debug, Args)]
pub struct Opts {
    /// Remove directories and everything in them.
    #[arg(short = 'r', short_alias = 'R', long)]
    recursive: bool,
    /// Ignore files that do not exist.
    #[arg(short, long)]
    force: bool,
    /// plfs files (or directories, with -r).
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

/// Every path is attempted; the exit code says whether any failed.
pub fn run(context: &Context, opts: &Opts) -> Result<ExitCode> {
    let mut code = ExitCode::SUCCESS;
    for file in &opts.files {
        if let Err(error) = remove_one(context, opts, file) {
            eprintln!("plfs: rm: {}", error_text(&error));
            code = ExitCode::FAILURE;
        }
    }
    Ok(code)
}

fn remove_one(context: &Context, opts: &Opts, file: &std::path::Path) -> Result<()> {
    let target = context.resolve_plfs(file)?;
    let attr = match target.plfs.stat(&target.path) {
        Ok(attr) => attr,
        Err(error) if opts.force && error.kind() == ErrorKind::NotFound => return Ok(()),
        // A damaged file has no attributes, yet removing it is how users
        // clean up (see `Plfs::is_damaged_file`).
        Err(error)
            if error.kind() == ErrorKind::Corrupt
                && target.plfs.is_damaged_file(&target.path).unwrap_or(false) =>
        {
            return target.plfs.unlink(&target.path).map_err(|e| target.error(e));
        }
        Err(error) => return Err(target.error(error)),
    };
    if attr.kind == FileKind::Directory {
        if !opts.recursive {
            bail!("{}: is a directory (use -r)", target.shown().display());
        }
        if target.path == "/" {
            bail!("{}: refusing to remove a mount point", target.shown().display());
        }
        return remove_tree(&target);
    }
    target.plfs.unlink(&target.path).map_err(|e| target.error(e))
}

fn remove_tree(dir: &PlfsPath) -> Result<()> {
    for entry in dir.plfs.readdir(&dir.path).map_err(|e| dir.error(e))? {
        let child = dir.child(&entry.name);
        match entry.kind {
            FileKind::Directory => remove_tree(&child)?,
            FileKind::File | FileKind::Symlink => {
                child.plfs.unlink(&child.path).map_err(|e| child.error(e))?
            }
        }
    }
    dir.plfs.rmdir(&dir.path).map_err(|e| dir.error(e))
}
