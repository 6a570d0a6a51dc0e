//! `plfs bench stripe`: the progressive-file-layout paper's streaming
//! experiments (Figures 2–4, Table 1) over K backends that each have a
//! bandwidth of their own.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, anyhow};
use clap::Args;
use plfs::striping::syntax::parse_size;
use plfs_bench::stripe::{StripeMode, StripeSpec, run_stripe};

use crate::output::print_json;

#[derive(Debug, Args)]
#[command(after_help = "Writers are threads, each with its own writer id (its own logs). Each backend \
    serves its data bytes one request at a time at --backend-mibs, writes behind by up to --write-behind (an emulated limit in the store \
    layer, shared by every writer of that backend; the output says why no cgroup io.max limit was \
    used). Every case gets fresh backends; every byte read back is checked. Goal 1: a shared file \
    of the largest size and writer count writes >= 3x faster with stripe=-1 than stripe=1. Goal 2: \
    pfl-large within 10% of the best fixed stripe count at every size. Exits 1 if a byte read \
    back was wrong.")]
pub struct Opts {
    /// K: backends of the mount.
    #[arg(long, default_value_t = 4)]
    backends: usize,
    /// Each backend's bandwidth in MiB/s (0: unlimited, bytes still counted).
    #[arg(long, default_value_t = 32)]
    backend_mibs: u64,
    /// Write backlog each backend lets writers leave queued (write-behind,
    /// as a parallel file system client's dirty cache per server).
    #[arg(long, default_value = "4M")]
    write_behind: String,
    /// File sizes, comma-separated (K, M, G suffixes).
    #[arg(long, default_value = "1M,16M,64M")]
    sizes: String,
    /// Writer counts, comma-separated.
    #[arg(long, default_value = "1,4")]
    writers: String,
    /// file-per-process, shared-file, or all.
    #[arg(long, default_value = "all")]
    mode: String,
    /// Bytes per write and read call.
    #[arg(long, default_value = "1M")]
    record: String,
    /// Stripe size of every layout.
    #[arg(long, default_value = "1M")]
    stripe_size: String,
    /// Only these layouts, comma-separated (stripe=1, stripe=-1, pfl-small,
    /// pfl-med, pfl-large, IOR.1 .. IOR.6); default all.
    #[arg(long)]
    layouts: Option<String>,
    /// Where the run's files go (a fresh subdirectory).
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// Bytes each case moves at least: smaller files run in rounds of
    /// fresh files, timed together (0: one round).
    #[arg(long, default_value = "64M")]
    case_bytes: String,
    /// Run every case this many times; the report gives median rates.
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

fn size(option: &str, text: &str) -> Result<u64> {
    parse_size(text.trim())
        .ok_or_else(|| anyhow!("{option}: {text:?} is not a size (expected bytes or e.g. 64K, 1M, 2G)"))
}

fn list(text: &str) -> impl Iterator<Item = &str> {
    text.split(',').map(str::trim).filter(|item| !item.is_empty())
}

pub fn run(opts: &Opts) -> Result<ExitCode> {
    let mut spec = StripeSpec::new(opts.dir.clone());
    spec.backends = opts.backends;
    spec.backend_bytes_per_sec = opts.backend_mibs << 20;
    spec.write_behind_bytes = size("--write-behind", &opts.write_behind)?;
    spec.sizes = list(&opts.sizes).map(|text| size("--sizes", text)).collect::<Result<_>>()?;
    spec.writers = list(&opts.writers)
        .map(|text| text.parse::<usize>().map_err(|_| anyhow!("--writers: {text:?} is not a count")))
        .collect::<Result<_>>()?;
    spec.modes = match opts.mode.as_str() {
        "all" => StripeMode::ALL.to_vec(),
        text => list(text)
            .map(|mode| mode.parse::<StripeMode>().map_err(|e| anyhow!(e)))
            .collect::<Result<_>>()?,
    };
    spec.record_bytes = usize::try_from(size("--record", &opts.record)?)?;
    spec.stripe_bytes = size("--stripe-size", &opts.stripe_size)?;
    spec.layouts =
        opts.layouts.as_deref().map(|text| list(text).map(str::to_owned).collect()).unwrap_or_default();
    spec.repeat = opts.repeat as usize;
    spec.case_bytes = size("--case-bytes", &opts.case_bytes)?;
    spec.keep = opts.keep;
    opts.plot.check()?;
    let report = run_stripe(&spec).map_err(|e| anyhow!(e))?;
    if opts.json {
        print_json(&report)?;
    } else {
        print!("{}", report.to_text());
    }
    opts.plot.emit(&report.to_text(), || plfs_bench::plot::Plot::figures(&report))?;
    Ok(if report.verified { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
