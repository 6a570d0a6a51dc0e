//! `plfs bench placement`: the Lustre PFL paper's object-placement
//! experiment (Table 2, Figures 5 and 6) on K size-limited tmpfs backends.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, anyhow};
use clap::Args;
use plfs_bench::placement::{PlacementSpec, SeedRange, run_placement, run_placement_seeds};

use crate::output::print_json;

#[derive(Debug, Args)]
#[command(after_help = "Needs root: it mounts K size-limited tmpfs file systems under --dir as the \
    backends and unmounts them when done (also on error). Each case (ideal per-size striping, one \
    PFL layout for every file, the mount default layout) fills fresh backends with the same files, \
    each file written to every case before the next, until the fullest case has --fill-pct of its \
    capacity used. Exits 1 if a file's size did not read back or a small \
    file has more than one data object.")]
pub struct Opts {
    /// Backends K (each its own tmpfs mount).
    #[arg(long, default_value_t = 8)]
    backends: usize,
    /// Capacity of each backend in MiB (a multiple of 16, at least 32).
    #[arg(long, default_value_t = 64)]
    backend_mib: u64,
    /// Fill until this percentage of the total capacity is used.
    #[arg(long, default_value_t = 90)]
    fill_pct: u32,
    /// Seeds the order in which the files are written and where placement's
    /// rotor starts: one seed gives the same figures on every run.
    #[arg(long, default_value_t = 1, conflicts_with = "seeds")]
    seed: u64,
    /// Run every seed of FIRST-LAST (e.g. 1-20), one after another, and
    /// report each seed's usage std-dev per case, how many seeds have PFL
    /// no worse than ideal, the spread per case over the seeds and the size
    /// of the objects placed (whether a difference is below one object).
    #[arg(long, value_name = "FIRST-LAST")]
    seeds: Option<String>,
    /// What the backends are: tmpfs (size-limited tmpfs mounts, needs root)
    /// or memory (an in-memory model of them, no root; for tests).
    #[arg(long, default_value = "tmpfs")]
    backend_kind: String,
    /// Where the mount points go (a fresh subdirectory, removed after).
    #[arg(long, default_value = "/tmp")]
    dir: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    plot: super::bench::PlotArgs,
}

pub fn run(opts: &Opts) -> Result<ExitCode> {
    let spec = PlacementSpec {
        backends: opts.backends,
        backend_mib: opts.backend_mib,
        fill_pct: opts.fill_pct,
        dir: opts.dir.clone(),
        seed: opts.seed,
        backend_kind: opts.backend_kind.parse().map_err(|e| anyhow!("{e}"))?,
    };
    opts.plot.check()?;
    if let Some(seeds) = &opts.seeds {
        let seeds: SeedRange = seeds.parse().map_err(|e| anyhow!("{e}"))?;
        let report = run_placement_seeds(&spec, seeds).map_err(|e| anyhow!(e))?;
        if opts.json {
            print_json(&report)?;
        } else {
            print!("{}", report.to_text());
        }
        opts.plot.emit(&report.to_text(), || plfs_bench::plot::Plot::figures(&report))?;
        return Ok(if report.verified && report.one_object_per_small_file {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    let report = run_placement(&spec).map_err(|e| anyhow!(e))?;
    if opts.json {
        print_json(&report)?;
    } else {
        print!("{}", report.to_text());
    }
    opts.plot.emit(&report.to_text(), || plfs_bench::plot::Plot::figures(&report))?;
    Ok(if report.verified && report.one_object_per_small_file {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
