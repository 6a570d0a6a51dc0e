use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;
use plfs::attr::FileKind;

use crate::paths::{self, Context};

#[derive(Debug, Args)]
pub struct Opts {
    /// A plfs file or directory.
    src: PathBuf,
    /// The new name in the same mount; an existing directory receives SRC.
    dst: PathBuf,
}

pub fn run(context: &Context, opts: &Opts) -> Result<ExitCode> {
    let source = context.resolve_plfs(&opts.src)?;
    let mut target = context.resolve_plfs(&opts.dst)?;
    if !source.same_mount(&target) {
        bail!(
            "{} and {} are in different mounts (use plfs cp, then plfs rm)",
            source.shown().display(),
            target.shown().display()
        );
    }
    if let Ok(attr) = target.plfs.stat(&target.path)
        && attr.kind == FileKind::Directory
    {
        target = target.child(&paths::file_name(&opts.src)?);
    }
    source.plfs.rename(&source.path, &target.path).map_err(|e| source.error(e))?;
    Ok(ExitCode::SUCCESS)
}
