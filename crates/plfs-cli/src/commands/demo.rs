use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result, anyhow};
use clap::Args;
use plfs_bench::{BenchSpec, Workload};

use super::bench::worker_command;
use super::map::print_totals;

/// Half the headline benchmark's records: phases long enough (~0.15 s each
/// in a release build) that the ratios are not noise, and the whole demo
/// a few seconds on two cores, every phase fsynced and read back.
const WRITERS: usize = 4;
const RECORDS: u64 = 1000;
const RECORD_BYTES: usize = 47001;
const BACKENDS: usize = 3;

#[derive(Debug, Args)]
pub struct Opts {
    /// Keep the temporary directory (and print where it is).
    #[arg(long)]
    keep: bool,
    /// Records per writer (for quick runs).
    #[arg(long, default_value_t = RECORDS, hide = true)]
    records: u64,
}

pub fn run(opts: &Opts) -> Result<ExitCode> {
    let temp =
        tempfile::Builder::new().prefix("plfs-demo.").tempdir().context("creating a temporary directory")?;
    println!(
        "plfs demo: a temporary plfs mount over {BACKENDS} backend directories under {}",
        temp.path().display()
    );
    println!("(built in: no plfsrc needed), running the N-1 strided checkpoint benchmark with");
    println!("{WRITERS} writer processes and verified read-back.");
    println!();
    let spec = BenchSpec {
        workload: Workload::N1Strided,
        writers: WRITERS,
        records: opts.records,
        record_bytes: RECORD_BYTES,
        read: true,
        dir: temp.path().to_path_buf(),
        backends: BACKENDS,
        // The container is shown after the run; the temporary directory
        // goes when `temp` drops.
        keep: true,
        fuse_dir: None,
        library: true,
        preload: None,
        mpiio: None,
        verify_reads: Default::default(),
        drop_caches: false,
    };
    let report = plfs_bench::run(&spec, &worker_command()?).map_err(|e| anyhow!(e))?;
    // The directory is about to go; saying it was kept would mislead.
    for line in report.to_text().lines().filter(|line| !line.starts_with("files kept in")) {
        println!("{line}");
    }
    println!();
    let backends = plfs_bench::plfs_backend_dirs(&report.dir, BACKENDS);
    let plfs = plfs_bench::mount(&report.dir, BACKENDS, Default::default()).map_err(anyhow::Error::msg)?;
    let bench_file = plfs_bench::plfs_logical_path(Workload::N1Strided, 0);
    println!("Container layout of {bench_file} (plfs query):");
    for (index, dir) in backends.iter().enumerate() {
        println!("  b{index} = {}", dir.display());
    }
    let pieces = plfs.query(&bench_file)?;
    println!("  {:<18} {:>12}  location", "kind", "bytes");
    for piece in &pieces {
        let backend = backend_label(&backends, &piece.backend);
        println!(
            "  {:<18} {:>12}  {backend}:/{}",
            crate::output::serde_name(&piece.kind),
            piece.bytes,
            piece.path
        );
    }
    println!();
    println!("Index summary of {bench_file} (plfs map --totals):");
    print_totals(&plfs.map(&bench_file)?.totals);
    println!();
    if opts.keep {
        let kept = temp.keep();
        println!("Kept everything in {}", kept.display());
    } else {
        println!("Removing {}", temp.path().display());
        drop(plfs);
        temp.close().context("removing the temporary directory")?;
    }
    Ok(if report.verified { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn backend_label(backends: &[PathBuf], url: &str) -> String {
    backends
        .iter()
        .position(|dir| url == format!("posix://{}", dir.display()))
        .map_or_else(|| url.to_owned(), |index| format!("b{index}"))
}
