//! `plfs bench mdtest`: N processes create, stat, read and remove F files
//! each in one logical directory, phase by phase, on plain files and on
//! plfs mounts over K backends (the paper's federated metadata, §5),
//! through the library, the LD_PRELOAD interposer and a FUSE mount.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use clap::Args;
use plfs_bench::mdtest::{MdInterface, MdTarget, MdtestSpec, MdtestSummary, run_mdtest};

use crate::output::print_json;

#[derive(Debug, Args)]
#[command(after_help = "Each rank is its own OS process; create (create, write a few bytes, close), stat \
    (another rank's files, checking their size), read (open, read those bytes back and check them, \
    close) and remove each start at a common instant and stop when the last rank is done. Each plfs \
    workload runs through every --interface; the report gives each rate and its ratio to direct's \
    in the same run. After create every name must be listed, after remove none (nor anything on a \
    backend). Exits 1 if that check failed.")]
pub struct Opts {
    /// Processes (ranks).
    #[arg(long, default_value_t = 8)]
    procs: usize,
    /// Files each process creates, stats and removes.
    #[arg(long, default_value_t = 1000)]
    files: usize,
    /// Backend counts K for the plfs targets, comma-separated (e.g. 1,2,4,8), or all (1,2,4,8).
    #[arg(long, default_value = "1,2,4,8")]
    backends: String,
    /// Targets, comma-separated: direct (plain files in one directory), n-n
    /// (plfs file_per_proc), 1-n (plfs small_file), shared-file (plfs
    /// containers), or all.
    #[arg(long, default_value = "all")]
    workload: String,
    /// Ways into plfs for each plfs workload, comma-separated: lib (the
    /// library in each worker), preload (plain syscalls under the LD_PRELOAD
    /// interposer), fuse (plain syscalls on a FUSE mount served by `plfs
    /// mount --foreground`; needs root), or all.
    #[arg(long, default_value = "lib")]
    interface: String,
    /// Emulate metadata servers: every backend metadata call queues for this
    /// many microseconds at its backend's own server (direct: one server); 0: off.
    #[arg(long, default_value_t = 0)]
    mds_service_us: u64,
    /// fuse: `-o` options of the cases' mounts, comma-separated (e.g.
    /// attr_timeout=10,entry_timeout=10), as `plfs mount -o` takes them.
    #[arg(long, value_name = "OPTIONS")]
    fuse_options: Option<String>,
    /// Where the run's files go (a fresh subdirectory).
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// Run every case this many times; the report gives medians and ranges.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    repeat: u32,
    /// Keep the run's files.
    #[arg(long)]
    keep: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    plot: super::bench::PlotArgs,
}

fn backends(text: &str) -> Result<Vec<usize>> {
    if text == "all" {
        return Ok(vec![1, 2, 4, 8]);
    }
    text.split(',')
        .map(|k| match k.trim().parse::<usize>() {
            Ok(k) if k > 0 => Ok(k),
            _ => Err(anyhow!("--backends: {k:?} is not a positive count (expected e.g. 1,2,4,8 or all)")),
        })
        .collect()
}

fn targets(text: &str) -> Result<Vec<MdTarget>> {
    if text == "all" {
        return Ok(MdTarget::ALL.to_vec());
    }
    text.split(',').map(|name| name.trim().parse::<MdTarget>().map_err(|e| anyhow!(e))).collect()
}

fn interfaces(text: &str) -> Result<Vec<MdInterface>> {
    if text == "all" {
        return Ok(MdInterface::ALL.to_vec());
    }
    text.split(',').map(|name| name.trim().parse::<MdInterface>().map_err(|e| anyhow!(e))).collect()
}

pub fn run(opts: &Opts) -> Result<ExitCode> {
    let interfaces = interfaces(&opts.interface)?;
    let preload = match interfaces.contains(&MdInterface::Preload) {
        true => Some(super::bench::preload_library()?),
        false => None,
    };
    let spec = MdtestSpec {
        procs: opts.procs,
        files: opts.files,
        backends: backends(&opts.backends)?,
        targets: targets(&opts.workload)?,
        interfaces,
        preload,
        dir: opts.dir.clone(),
        mds_service: Duration::from_micros(opts.mds_service_us),
        fuse_options: opts.fuse_options.clone(),
        keep: opts.keep,
    };
    if spec.procs == 0 || spec.files == 0 {
        bail!("--procs and --files must be positive");
    }
    opts.plot.check()?;
    let worker = super::bench::worker_command()?;
    let mut runs = Vec::with_capacity(opts.repeat as usize);
    for run in 1..=opts.repeat {
        let report = run_mdtest(&spec, &worker).map_err(|e| match opts.repeat {
            1 => anyhow!(e),
            _ => anyhow!("run {run}: {e}"),
        })?;
        runs.push(report);
    }
    let summary = MdtestSummary::new(runs);
    if opts.json {
        print_json(&summary)?;
    } else {
        print!("{}", summary.to_text());
    }
    opts.plot.emit(&summary.to_text(), || plfs_bench::plot::Plot::figures(&summary))?;
    Ok(if summary.verified { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
