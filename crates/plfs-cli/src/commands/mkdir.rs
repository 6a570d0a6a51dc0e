use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;
use plfs::ErrorKind;
use plfs::attr::FileKind;

use crate::output::error_text;
use crate::paths::{Context, PlfsPath};

#[derive(Debug, Args)]
pub struct Opts {
    /// Create missing parents; an existing directory is not an error.
    #[arg(short, long)]
    parents: bool,
    /// Permission bits in octal (default 0777 less the umask).
    #[arg(short, long, value_parser = parse_mode)]
    mode: Option<u32>,
    /// plfs directories to create.
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
}

fn parse_mode(text: &str) -> Result<u32, String> {
    u32::from_str_radix(text, 8)
        .ok()
        .filter(|mode| *mode <= 0o7777)
        .ok_or_else(|| format!("{text:?} is not an octal mode"))
}

/// Every directory is attempted; the exit code says whether any failed.
pub fn run(context: &Context, opts: &Opts) -> Result<ExitCode> {
    let mode = opts.mode.unwrap_or(0o777 & !umask());
    let mut code = ExitCode::SUCCESS;
    for dir in &opts.dirs {
        if let Err(error) = make_one(context, dir, mode, opts.parents) {
            eprintln!("plfs: mkdir: {}", error_text(&error));
            code = ExitCode::FAILURE;
        }
    }
    Ok(code)
}

fn make_one(context: &Context, dir: &Path, mode: u32, parents: bool) -> Result<()> {
    let target = context.resolve_plfs(dir)?;
    if !parents {
        return target.plfs.mkdir(&target.path, mode).map_err(|e| target.error(e));
    }
    let mut path = String::new();
    for component in target.path.split('/').filter(|c| !c.is_empty()) {
        path.push('/');
        path.push_str(component);
        let step: PlfsPath = target.sibling(path.clone());
        match step.plfs.mkdir(&step.path, mode) {
            Ok(()) => {}
            Err(error) if error.kind() == ErrorKind::AlreadyExists => {
                let attr = step.plfs.stat(&step.path).map_err(|e| step.error(e))?;
                if attr.kind != FileKind::Directory {
                    bail!("{}: exists and is not a directory", step.shown().display());
                }
            }
            Err(error) => return Err(step.error(error)),
        }
    }
    Ok(())
}

/// The process umask (read by setting and restoring it: there is no
/// read-only call; the CLI is single-threaded here).
fn umask() -> u32 {
    // SAFETY: umask only swaps the process's mask and cannot fail.
    let mask = unsafe { libc::umask(0o022) };
    // SAFETY: as above; restores the original mask.
    unsafe { libc::umask(mask) };
    mask
}
