//! `plfs bench open`: the collective-open benchmark, run under mpirun
//! (each rank a process, MPI through the plfs-mpi shim) or, without one,
//! with the ranks as threads of this process.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, anyhow, bail};
use clap::Args;
use plfs::collective::{Comm, LocalComm, Strategy};
use plfs_bench::OpenSpec;
use plfs_bench::plot::Plot;
use plfs_mpi::MpiWorld;

use crate::output::print_json;

#[derive(Debug, Args)]
#[command(
    after_help = "Run it under mpirun, e.g.\n  mpirun.openmpi --allow-run-as-root --oversubscribe -np 64 \
    plfs bench open --writers 64 --readers 64\nThe first M ranks read; all ranks share the writing. Without \
    mpirun the ranks are threads of this process (memory figures are then per process). With --ranks, \
    e.g. `mpirun -np 8 plfs bench open --ranks 1,2,4,8`, each count r runs on the first r ranks with \
    r writers and r readers (the paper's Figures 3-5 against processes). Exits 1 if an open \
    failed or a byte did not verify."
)]
pub struct Opts {
    /// Writers of the file (N): one index log each.
    #[arg(long, default_value_t = 64)]
    writers: usize,
    /// Ranks that open the file (M); 0: every rank.
    #[arg(long, default_value_t = 0)]
    readers: usize,
    /// Records per writer.
    #[arg(long, default_value_t = 100)]
    records: u64,
    /// Bytes per record.
    #[arg(long, default_value_t = 4096)]
    size: usize,
    /// naive, broadcast, parallel, flatten, or all.
    #[arg(long, default_value = "all")]
    strategy: String,
    /// Ranks per group of the parallel read, consecutive ranks forming one (default: the ranks of one node).
    #[arg(long)]
    group: Option<usize>,
    /// Where the run's files go (a fresh subdirectory).
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// Plfs backend directories.
    #[arg(long, default_value_t = 2)]
    backends: usize,
    /// Every reader reads every byte back and checks it.
    #[arg(long)]
    verify: bool,
    /// Opens per strategy; the report gives the median time.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    repeat: u32,
    /// Keep the page cache (by default it is dropped before every open when running as root).
    #[arg(long)]
    no_drop_caches: bool,
    /// Emulate a parallel file system's metadata server: every backend
    /// open, listing and stat of the readers queues node-wide for this many
    /// microseconds (0: off). On one node the page cache otherwise hides
    /// the metadata load the strategies exist to remove.
    #[arg(long, default_value_t = 0)]
    mds_service_us: u64,
    /// Sweep over these rank counts (comma-separated, each at most the
    /// ranks started), with as many writers and readers as ranks at each;
    /// --writers and --readers are then ignored.
    #[arg(long, value_delimiter = ',')]
    ranks: Vec<usize>,
    /// Memory per rank for the index records kept for flatten on close
    /// (plfsrc index_buffer_mbs); past it rank 0 reads the index logs.
    #[arg(long, default_value_t = 64)]
    index_buffer_mbs: u32,
    /// Ranks as threads when not under mpirun.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Keep the run's files.
    #[arg(long)]
    keep: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    plot: super::bench::PlotArgs,
}

fn strategies(text: &str) -> Result<Vec<Strategy>> {
    if text == "all" {
        return Ok(Strategy::ALL.to_vec());
    }
    text.split(',').map(|name| name.trim().parse::<Strategy>().map_err(|e| anyhow!(e))).collect()
}

pub fn run(opts: &Opts) -> Result<ExitCode> {
    opts.plot.check()?;
    let spec = OpenSpec {
        writers: opts.writers,
        readers: opts.readers,
        records: opts.records,
        record_bytes: opts.size,
        strategies: strategies(&opts.strategy)?,
        group_ranks: opts.group,
        dir: opts.dir.clone(),
        backends: opts.backends,
        verify: opts.verify,
        repeat: opts.repeat,
        drop_caches: !opts.no_drop_caches,
        metadata_service: std::time::Duration::from_micros(opts.mds_service_us),
        index_buffer_mbs: opts.index_buffer_mbs,
        keep: opts.keep,
    };
    if !opts.ranks.is_empty() {
        return run_sweep(opts, &spec);
    }
    let world = MpiWorld::init().map_err(|e| anyhow!(e))?;
    let (report, mpi) = match &world {
        Some(world) => (plfs_bench::run_open(world.comm(), &spec), Some(world.library().to_owned())),
        None => {
            if opts.threads == 0 {
                bail!("--threads must be positive");
            }
            let mut results = LocalComm::run(opts.threads, |comm: &LocalComm| {
                let comm: &dyn Comm = comm;
                plfs_bench::run_open(comm, &spec)
            });
            (results.swap_remove(0), None)
        }
    };
    let report = report.map_err(|e| anyhow!(e));
    if let Some(world) = world {
        world.finalize().map_err(|e| anyhow!(e))?;
    }
    match report? {
        Some(report) => {
            print_report(&report, report.to_text(), mpi.as_deref(), opts.json)?;
            opts.plot.emit(&report.to_text(), || report.figures())?;
            Ok(if report.ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        None => Ok(ExitCode::SUCCESS),
    }
}

/// `--ranks`: the sweep, under mpirun or on threads.
fn run_sweep(opts: &Opts, spec: &OpenSpec) -> Result<ExitCode> {
    let world = MpiWorld::init().map_err(|e| anyhow!(e))?;
    let (report, mpi) = match &world {
        Some(world) => {
            (plfs_bench::run_open_sweep(world.comm(), spec, &opts.ranks), Some(world.library().to_owned()))
        }
        None => {
            let threads = opts.ranks.iter().copied().max().unwrap_or(1).max(opts.threads);
            let mut results = LocalComm::run(threads, |comm: &LocalComm| {
                let comm: &dyn Comm = comm;
                plfs_bench::run_open_sweep(comm, spec, &opts.ranks)
            });
            (results.swap_remove(0), None)
        }
    };
    let report = report.map_err(|e| anyhow!(e));
    if let Some(world) = world {
        world.finalize().map_err(|e| anyhow!(e))?;
    }
    let Some(report) = report? else { return Ok(ExitCode::SUCCESS) };
    print_report(&report, report.to_text(), mpi.as_deref(), opts.json)?;
    opts.plot.emit(&report.to_text(), || report.figures())?;
    Ok(if report.ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// One report (a single point or a sweep) as JSON or text, naming how the
/// ranks were launched.
fn print_report(report: &impl serde::Serialize, text: String, mpi: Option<&str>, json: bool) -> Result<()> {
    let transport = mpi.unwrap_or("threads (no mpirun)");
    if json {
        let mut value = serde_json::to_value(report)?;
        value["transport"] = serde_json::Value::String(transport.to_owned());
        print_json(&value)
    } else {
        println!("transport: {transport}");
        print!("{text}");
        Ok(())
    }
}
