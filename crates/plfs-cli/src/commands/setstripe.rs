//! `plfs setstripe`: a directory's layout template, or the layout of a file
//! that has no data yet, in `lfs setstripe` syntax.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;
use plfs::striping::Layout;

use crate::paths::Context;

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    plfs setstripe -E 1M -c 1 -E 64M -c 4 -E -1 -c -1 /mnt/plfs/dir\n  \
    plfs setstripe -c -1 -S 4M /mnt/plfs/dir/new-empty-file\n  \
    plfs setstripe -d /mnt/plfs/dir        (remove the template)\n\n\
    -E END starts a component ending at END (-1 or eof: end of file); -c COUNT stripes \
    (-1: every backend of the pool); -S SIZE stripe size (a multiple of 64K; default 1M); \
    -p POOL a pool from the plfsrc. Sizes take K, M, G or T. A component that leaves out -c or \
    -S takes the previous one's. Files and directories created in a directory inherit its template.")]
pub struct Opts {
    /// Layout options (-E END -c COUNT -S SIZE -p POOL, repeated), or -d; then the path.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required = true,
        value_name = "OPTIONS... PATH"
    )]
    args: Vec<String>,
}

pub fn run(context: &Context, opts: &Opts) -> Result<ExitCode> {
    let Some((path, options)) = opts.args.split_last() else { bail!("no path given") };
    if path.starts_with('-') {
        bail!("the last argument must be the path, not {path}");
    }
    let target = context.resolve_plfs(&PathBuf::from(path))?;
    if options == ["-d"] || options == ["--delete"] {
        target.plfs.clear_layout(&target.path).map_err(|error| target.error(error))?;
        return Ok(ExitCode::SUCCESS);
    }
    if options.is_empty() {
        bail!("no layout options given (e.g. -E 1M -c 1 -E -1 -c -1, or -d to remove a template)");
    }
    let layout = Layout::parse_args(options).map_err(|error| anyhow::anyhow!("{}", error.message()))?;
    target.plfs.set_layout(&target.path, &layout).map_err(|error| target.error(error))?;
    Ok(ExitCode::SUCCESS)
}
