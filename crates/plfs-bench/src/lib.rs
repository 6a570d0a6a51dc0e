//! Benchmarks reproducing the PLFS papers' checkpoint experiments: N
//! processes write one shared logical file through plfs, and the same
//! bytes are written by the same processes as a plain shared file (direct
//! N-1) and as one plain file per process (N-N), all on one file system.
//!
//! Workers are separate OS processes, as MPI ranks would be: [`run`]
//! spawns [`WorkerCommand`] once per rank and phase, and each of those
//! processes must call [`worker_main`]. A CLI routes a hidden subcommand
//! to it:
//!
//! ```no_run
//! # fn cli(args: Vec<String>) -> Result<(), plfs_bench::BenchError> {
//! use plfs_bench::{BenchSpec, WorkerCommand, Workload};
//! if args.get(1).map(String::as_str) == Some("bench-worker") {
//!     return plfs_bench::worker_main(&args[2..]);
//! }
//! let spec = BenchSpec::new(Workload::N1Strided, "/scratch/bench".into());
//! let report = plfs_bench::run(&spec, &WorkerCommand::current_exe("bench-worker")?)?;
//! println!("{}", report.to_text());
//! # Ok(()) }
//! ```

pub mod bandwidth;
pub mod cost;
mod error;
pub mod host;
pub mod index;
pub mod jmx;
pub mod mdtest;
pub mod metadata_server;
mod open;
mod pattern;
pub mod peers;
pub mod placement;
pub mod plot;
pub mod protocol;
mod repeat;
mod report;
pub mod restart;
mod runner;
mod spread;
mod store;
mod streaming;
pub mod stripe;
mod worker;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use plfs::config::VerifyReads;

pub use error::{BenchError, Result};

pub use open::{
    OPEN_BENCH_PATH, OpenReport, OpenSpec, OpenSweepReport, StrategyReport, run_open, run_open_sweep,
};
pub use pattern::{fill_record, pattern_byte, verify_record};
pub use repeat::RepeatedReport;
pub use report::{BenchReport, InterfaceFigures, PhaseReport, RankSplit};
pub use runner::{drop_page_cache, run};
pub use spread::Spread;
pub use store::{
    Crossover, DEFAULT_JMX_SETTLE, PhaseTraffic, SizeSpread, StoreBenchSpec, StoreRepeatedReport,
    StoreReport, StoreSizeReport, TARGET_RATIO, run_store,
};
pub use streaming::{StreamingReport, streaming};
pub use worker::{
    Op, Prepared, SHARED_NAME, StoreRun, Target, WORKER_SPEC_ENV, WorkerResult, WorkerSpec, execute,
    interface_backend_dirs, interface_mount_point, interface_plfsrc, mount, mount_stores, open_store_url,
    plfs_backend_dirs, plfs_logical_path, prepare, worker_main,
};

/// The access pattern measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Workload {
    /// Writer r writes records k*N + r at offset record*size: the LANL
    /// mpi_io_test strided checkpoint.
    #[serde(rename = "n1-strided")]
    N1Strided,
    /// Writer r writes its K records contiguously in [r*K*size, (r+1)*K*size).
    #[serde(rename = "n1-segmented")]
    N1Segmented,
    /// Each writer its own file: N plfs files (one writer each) against N
    /// plain files.
    #[serde(rename = "nn")]
    Nn,
}

impl Workload {
    pub fn as_str(self) -> &'static str {
        match self {
            Workload::N1Strided => "n1-strided",
            Workload::N1Segmented => "n1-segmented",
            Workload::Nn => "nn",
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Workload {
    type Err = BenchError;

    fn from_str(text: &str) -> Result<Workload> {
        match text {
            "n1-strided" => Ok(Workload::N1Strided),
            "n1-segmented" => Ok(Workload::N1Segmented),
            "nn" => Ok(Workload::Nn),
            other => Err(BenchError::invalid(format!(
                "unknown workload {other:?} (expected n1-strided, n1-segmented or nn)"
            ))),
        }
    }
}

/// One benchmark run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchSpec {
    pub workload: Workload,
    /// Writer processes (and reader processes, with `read`).
    pub writers: usize,
    /// Records per writer.
    pub records: u64,
    pub record_bytes: usize,
    /// Read everything back, shifted by one rank, and verify every byte.
    pub read: bool,
    /// Every phase runs in a fresh subdirectory of this one, so on the
    /// same file system.
    pub dir: PathBuf,
    /// Posix backend dirs of the plfs mount.
    pub backends: usize,
    /// Leave the run's files in place.
    pub keep: bool,
    /// A directory on a plfs FUSE mount: adds phases that write (and read)
    /// the same file through the mount, to compare with the library.
    pub fuse_dir: Option<PathBuf>,
    /// Run the library (`lib`) phases; off when only other interfaces
    /// are compared with the baselines.
    pub library: bool,
    /// libplfs_preload.so: adds phases whose workers write plain files
    /// under a virtual plfs mount point with the interposer preloaded.
    pub preload: Option<PathBuf>,
    /// Adds phases run by an MPI-IO program under mpirun (n1-strided only).
    pub mpiio: Option<MpiioSetup>,
    /// Which reads of the library phases check data CRCs (plfsrc
    /// `verify_reads`), to measure what checking costs.
    pub verify_reads: VerifyReads,
    /// Empty the page cache before each read phase (root only; see
    /// [`drop_page_cache`]), so reads come from the disk as a restart's do.
    pub drop_caches: bool,
}

/// Everything an `mpiio` phase starts: `mpirun -np N program`, with the
/// PMPI wrapper and the interposer preloaded into the ranks only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpiioSetup {
    /// "openmpi" or "mpich": decides how mpirun is told about the
    /// environment (`-x` or `-genv`).
    pub flavor: String,
    pub mpirun: PathBuf,
    /// The MPI-IO benchmark program (crates/plfs-mpi/c/mpiio_bench.c),
    /// built with the same MPI.
    pub program: PathBuf,
    /// libplfs_mpiio.so for that MPI.
    pub wrapper: PathBuf,
    /// libplfs_preload.so.
    pub preload: PathBuf,
}

impl BenchSpec {
    /// The issue's target size: 4 writers × 2000 records × 47001 B, three
    /// backends, no read-back.
    pub fn new(workload: Workload, dir: PathBuf) -> BenchSpec {
        BenchSpec {
            workload,
            writers: 4,
            records: 2000,
            record_bytes: 47001,
            read: false,
            dir,
            backends: 3,
            keep: false,
            fuse_dir: None,
            library: true,
            preload: None,
            mpiio: None,
            verify_reads: VerifyReads::default(),
            drop_caches: false,
        }
    }

    pub fn total_bytes(&self) -> u64 {
        self.writers as u64 * self.records * self.record_bytes as u64
    }
}

/// How to start a worker process: `program args_prefix… [spec]`, with the
/// spec also in [`WORKER_SPEC_ENV`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args_prefix: Vec<String>,
    /// Append the JSON spec as the last argument (a CLI subcommand wants
    /// it; a test binary would take it for a test-name filter).
    pub spec_as_arg: bool,
}

impl WorkerCommand {
    /// This executable with a hidden subcommand, e.g. `plfs bench-worker`.
    pub fn current_exe(subcommand: &str) -> Result<WorkerCommand> {
        let program = std::env::current_exe()
            .map_err(BenchError::io("finding the current executable", "/proc/self/exe"))?;
        Ok(WorkerCommand { program, args_prefix: vec![subcommand.to_owned()], spec_as_arg: true })
    }

    /// This test binary, running only the test `test_name`, which must call
    /// [`worker_main`] with no arguments when [`WORKER_SPEC_ENV`] is set.
    pub fn test_binary(test_name: &str) -> Result<WorkerCommand> {
        let program = std::env::current_exe()
            .map_err(BenchError::io("finding the test executable", "/proc/self/exe"))?;
        let args_prefix =
            ["--exact", test_name, "--nocapture", "--test-threads=1"].map(str::to_owned).to_vec();
        Ok(WorkerCommand { program, args_prefix, spec_as_arg: false })
    }
}

#[cfg(test)]
mod tests;
