use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result, anyhow, bail};
use clap::{Args, Subcommand, ValueEnum};
use plfs_bench::{BenchSpec, WorkerCommand, Workload};

use crate::output::print_json;

/// The hidden subcommand each benchmark process runs.
pub const WORKER_SUBCOMMAND: &str = "bench-worker";

#[derive(Debug, Args)]
#[command(
    after_help = "Each writer is its own OS process. In one run, on the same file system, the \
    same records are written through plfs, directly into one shared file (N-1; not for nn) and \
    into one file per process (N-N); every phase fsyncs before its clock stops. With --backend \
    URL (hdfs://, s3://, posix://), plfs writes onto those stores instead and is compared with raw \
    N-N streaming writers on the same stores, at every --size; see docs/PERFORMANCE.md. Exits 1 \
    if read-back found a wrong byte.",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct Opts {
    #[command(subcommand)]
    command: Option<BenchCommand>,
    /// The access pattern.
    #[arg(required = true)]
    workload: Option<WorkloadArg>,
    /// Writer processes [default: 4; index: 1024].
    #[arg(long)]
    writers: Option<usize>,
    /// Records per writer [default: 2000; index: 10000].
    #[arg(long)]
    records: Option<u64>,
    /// Bytes per record; with --backend a comma-separated list, each size
    /// run in turn (the paper's: 47001,49152,1048576).
    #[arg(long, value_delimiter = ',', default_value = "47001")]
    size: Vec<usize>,
    /// Plfs backend directories.
    #[arg(long, default_value_t = 3)]
    backends: usize,
    /// Store benchmark: the plfs mount's backends as store URLs
    /// (posix:///dir, hdfs://host:port/path, s3://bucket/prefix), repeated
    /// or comma-separated. plfs is compared with raw N-N streaming writers
    /// on the same stores instead of with plain files.
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["backends", "dir", "interface"])]
    backend: Vec<String>,
    /// Store benchmark: DataNode HTTP addresses (http://host:port), comma-separated,
    /// whose JMX BytesRead/BytesWritten are reported per phase.
    #[arg(long, value_delimiter = ',', requires = "backend")]
    datanode_jmx: Vec<String>,
    /// Store benchmark: a file of DataNode addresses, one `index http://host:port`
    /// a line (what `scripts/servers hdfs start` writes as datanodes.txt).
    #[arg(long, requires = "backend", conflicts_with = "datanode_jmx")]
    datanode_jmx_file: Option<PathBuf>,
    /// Store benchmark: seconds to wait before each DataNode snapshot, so
    /// Hadoop's JMX values (refreshed once a metrics period, 10 s by
    /// default) include the phase just run.
    #[arg(long, default_value_t = 11.0, requires = "backend")]
    jmx_settle: f64,
    /// Store benchmark: MiB each process writes at every size (whole
    /// records), instead of a fixed --records count, so the sizes compare
    /// on equal volumes as in the paper (512 MB per node).
    #[arg(long, requires = "backend", conflicts_with = "records", value_parser = clap::value_parser!(u64).range(1..))]
    mib_per_process: Option<u64>,
    /// Read everything back, each reader another writer's records, and verify every byte.
    #[arg(long)]
    read: bool,
    /// Where the run's files go (a fresh subdirectory); the current directory by default.
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// Keep the run's files.
    #[arg(long)]
    keep: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Run the whole comparison this many times and report the median of
    /// each figure (with its range): single sub-second runs scatter widely.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    repeat: u32,
    /// fuse: MiB streamed through the library and through the mount.
    #[arg(long, default_value_t = 1024)]
    stream_mib: u64,
    /// index: random lookups timed per case.
    #[arg(long, default_value_t = 10_000_000)]
    lookups: u64,
    /// index: random small writes in the second case.
    #[arg(long, default_value_t = 1_000_000)]
    random_writes: u64,
    /// Ways into plfs to compare with direct N-1 and N-N in the same run,
    /// comma-separated: lib (the library), preload (LD_PRELOAD interposer),
    /// mpiio (an MPI-IO program under mpirun; n1-strided only; the same
    /// program on a plain file runs beside it, as "mpiio-plain", to show
    /// what MPI-IO itself costs), fuse (a FUSE mount served by this
    /// process; needs root).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "lib")]
    interface: Vec<InterfaceArg>,
    /// The MPI whose mpirun runs the mpiio interface.
    #[arg(long, value_enum, default_value_t = MpiArg::Openmpi)]
    mpi: MpiArg,
    /// fuse: `-o` options of the benchmark's mount, comma-separated (e.g.
    /// writeback_cache, direct_io), as `plfs mount -o` takes them.
    #[arg(long, value_name = "OPTIONS")]
    fuse_options: Option<String>,
    /// Which library reads check data CRCs (plfsrc `verify_reads`), to
    /// measure what checking costs.
    #[arg(long, value_enum, default_value_t = VerifyReadsArg::Whole)]
    verify_reads: VerifyReadsArg,
    /// With --read: empty the page cache before each read phase (sync,
    /// then 3 into /proc/sys/vm/drop_caches), so reads come from the disk
    /// as a restart's do. Needs root; otherwise a warning, and the report
    /// says the reads were warm.
    #[arg(long)]
    drop_caches: bool,
    #[command(flatten)]
    plot: PlotArgs,
}

/// `--plot` and `--report`, the same for every workload.
#[derive(Debug, Clone, Default, Args)]
pub struct PlotArgs {
    /// Draw the run's figures (medians, --repeat range as error bars) into
    /// this PNG file, several side by side.
    #[arg(long, value_name = "FILE.png")]
    plot: Option<PathBuf>,
    /// Write one PNG per figure and report.md (the text report, the
    /// figures and their numbers as tables) into this directory.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
}

impl PlotArgs {
    /// Refuses a --plot name the encoder cannot write before the run, not
    /// after it.
    pub fn check(&self) -> Result<()> {
        if let Some(path) = &self.plot
            && !path.extension().is_some_and(|e| e.eq_ignore_ascii_case("png"))
        {
            bail!("--plot {}: the file name must end in .png", path.display());
        }
        Ok(())
    }

    /// Draws what was asked; `text` is the run's text report for report.md.
    pub fn emit(&self, text: &str, figures: impl FnOnce() -> Vec<plfs_bench::plot::Figure>) -> Result<()> {
        if self.plot.is_none() && self.report.is_none() {
            return Ok(());
        }
        let figures = figures();
        if let Some(path) = &self.plot {
            plfs_bench::plot::write_png(path, &figures).map_err(|e| anyhow!(e))?;
            eprintln!("figure: {}", path.display());
        }
        if let Some(dir) = &self.report {
            let heading = std::env::args().collect::<Vec<_>>().join(" ");
            plfs_bench::plot::write_report(dir, &heading, text, &figures).map_err(|e| anyhow!(e))?;
            eprintln!("report: {}", dir.join("report.md").display());
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum VerifyReadsArg {
    Whole,
    Always,
    Off,
}

impl From<VerifyReadsArg> for plfs::config::VerifyReads {
    fn from(arg: VerifyReadsArg) -> plfs::config::VerifyReads {
        match arg {
            VerifyReadsArg::Whole => plfs::config::VerifyReads::Whole,
            VerifyReadsArg::Always => plfs::config::VerifyReads::Always,
            VerifyReadsArg::Off => plfs::config::VerifyReads::Off,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum InterfaceArg {
    Lib,
    Preload,
    Mpiio,
    Fuse,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum MpiArg {
    Openmpi,
    Mpich,
}

impl MpiArg {
    fn as_str(self) -> &'static str {
        match self {
            MpiArg::Openmpi => "openmpi",
            MpiArg::Mpich => "mpich",
        }
    }
}

impl Opts {
    pub fn writers(&self) -> usize {
        self.writers.unwrap_or(if matches!(self.workload, Some(WorkloadArg::Index)) { 1024 } else { 4 })
    }

    pub fn records(&self) -> u64 {
        self.records.unwrap_or(if matches!(self.workload, Some(WorkloadArg::Index)) { 10_000 } else { 2000 })
    }
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Collective open of an N-writer file by M ranks, per strategy (run under mpirun).
    Open(super::bench_open::Opts),
    /// Create, stat and remove F files per process in one directory, on
    /// plain files and plfs mounts over K backends (federated metadata).
    Mdtest(super::bench_mdtest::Opts),
    /// N writer processes write a checkpoint, M readers read it back per
    /// decomposition (uniform and non-uniform restart), plfs against the
    /// direct N-1 file.
    Restart(super::bench_restart::Opts),
    /// The cost model (docs/COST_MODEL.md) against exact counts of every
    /// operation at 1 to 128 thread ranks, or extrapolated to 64K ranks.
    Cost(super::bench_cost::Opts),
    /// The PFL paper's object placement (Table 2, Figures 5-6): K tmpfs
    /// backends filled to 90% with ideal per-size striping vs one PFL layout.
    Placement(super::bench_placement::Opts),
    /// Streaming writes and reads per stripe layout (stripe count 1, -1,
    /// PFL, Table 1's watermark patterns) over K bandwidth-limited backends.
    Stripe(super::bench_stripe::Opts),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum WorkloadArg {
    /// N processes, one file, record k*N+r.
    N1Strided,
    /// N processes, one file, one contiguous block each.
    N1Segmented,
    /// One file per process.
    Nn,
    /// Through a FUSE mount vs the library: 1 MiB streaming by one
    /// process, then the N-1 strided workload (with --read, read back).
    Fuse,
    /// The merged index alone: N writers × K strided records and random
    /// small writes; memory, build time, random lookups per second.
    Index,
}

impl From<WorkloadArg> for Workload {
    fn from(arg: WorkloadArg) -> Workload {
        match arg {
            WorkloadArg::N1Strided => Workload::N1Strided,
            WorkloadArg::N1Segmented => Workload::N1Segmented,
            WorkloadArg::Nn => Workload::Nn,
            WorkloadArg::Fuse | WorkloadArg::Index => Workload::N1Strided,
        }
    }
}

pub fn run(opts: &Opts) -> Result<ExitCode> {
    match &opts.command {
        Some(BenchCommand::Open(open)) => return super::bench_open::run(open),
        Some(BenchCommand::Mdtest(mdtest)) => return super::bench_mdtest::run(mdtest),
        Some(BenchCommand::Restart(restart)) => return super::bench_restart::run(restart),
        Some(BenchCommand::Cost(cost)) => return super::bench_cost::run(cost),
        Some(BenchCommand::Placement(placement)) => return super::bench_placement::run(placement),
        Some(BenchCommand::Stripe(stripe)) => return super::bench_stripe::run(stripe),
        None => {}
    }
    if !opts.backend.is_empty() {
        return run_store(opts);
    }
    if opts.size.len() != 1 {
        bail!("several --size values are for the store benchmark (--backend URL); give one size here");
    }
    if matches!(opts.workload, Some(WorkloadArg::Fuse)) {
        return super::bench_fuse::run(opts.into());
    }
    if matches!(opts.workload, Some(WorkloadArg::Index)) {
        return run_index(opts);
    }
    let mut spec = spec_of(opts);
    let wants = |interface| opts.interface.contains(&interface);
    spec.library = wants(InterfaceArg::Lib);
    if wants(InterfaceArg::Preload) {
        spec.preload = Some(preload_library()?);
    }
    if wants(InterfaceArg::Mpiio) {
        spec.mpiio = Some(mpiio_setup(opts.mpi)?);
    }
    // Mounted for the whole run (every repeat); unmounted when this goes,
    // also when a phase fails.
    let _fuse = match wants(InterfaceArg::Fuse) {
        true => {
            let mount =
                super::bench_fuse::FuseMount::new(&spec.dir, spec.backends, opts.fuse_options.as_deref())?;
            spec.fuse_dir = Some(mount.mount_point().to_path_buf());
            Some(mount)
        }
        false => None,
    };
    let worker = worker_command()?;
    run_repeated(
        opts.repeat,
        opts.json,
        &opts.plot,
        |_| plfs_bench::run(&spec, &worker),
        plfs_bench::RepeatedReport::new,
    )
}

fn spec_of(opts: &Opts) -> BenchSpec {
    BenchSpec {
        workload: opts.workload.map_or(Workload::N1Strided, Workload::from),
        writers: opts.writers(),
        records: opts.records(),
        record_bytes: opts.size[0],
        read: opts.read,
        dir: opts.dir.clone(),
        backends: opts.backends,
        keep: opts.keep,
        fuse_dir: None,
        library: true,
        preload: None,
        mpiio: None,
        verify_reads: opts.verify_reads.into(),
        drop_caches: opts.drop_caches,
    }
}

impl From<&Opts> for super::bench_fuse::FuseBench {
    fn from(opts: &Opts) -> super::bench_fuse::FuseBench {
        super::bench_fuse::FuseBench {
            stream_bytes: opts.stream_mib << 20,
            repeat: opts.repeat,
            // `fuse` maps to the N-1 strided workload; its files go once the
            // mount is gone, so none are kept.
            spec: BenchSpec { keep: false, ..spec_of(opts) },
            json: opts.json,
            plot: opts.plot.clone(),
            options: opts.fuse_options.clone(),
        }
    }
}

/// Where the plfs binary is: libplfs.so, libplfs_preload.so and
/// mpi/<flavor>/ are built next to it (and installed that way).
fn binary_dir() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("finding the plfs executable")?;
    exe.parent().map(Path::to_path_buf).ok_or_else(|| anyhow!("{} has no directory", exe.display()))
}

pub(super) fn preload_library() -> Result<PathBuf> {
    let dir = binary_dir()?;
    let preload = dir.join("libplfs_preload.so");
    for library in [&preload, &dir.join("libplfs.so")] {
        if !library.exists() {
            bail!(
                "--interface preload/mpiio: {} is missing (build it with `cargo build --release --workspace`)",
                library.display()
            );
        }
    }
    Ok(preload)
}

/// mpirun.<flavor> on PATH, and the benchmark program and PMPI wrapper
/// crates/plfs-mpi/build.rs built with mpicc.<flavor>.
fn mpiio_setup(mpi: MpiArg) -> Result<plfs_bench::MpiioSetup> {
    let flavor = mpi.as_str();
    let mpirun_name = format!("mpirun.{flavor}");
    let mpirun = std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths).map(|dir| dir.join(&mpirun_name)).find(|p| p.is_file())
        })
        .ok_or_else(|| {
            anyhow!(
                "--interface mpiio: {mpirun_name} is not on PATH (install {flavor}: scripts/install-deps.sh)"
            )
        })?;
    let dir = binary_dir()?.join("mpi").join(flavor);
    let (program, wrapper) = (dir.join("mpiio_bench"), dir.join("libplfs_mpiio.so"));
    for built in [&program, &wrapper] {
        if !built.exists() {
            bail!(
                "--interface mpiio: {} is missing: it is built with mpicc.{flavor}, which was not found when \
                 plfs was built (install {flavor}, then `cargo build --release --workspace`)",
                built.display()
            );
        }
    }
    Ok(plfs_bench::MpiioSetup {
        flavor: flavor.to_owned(),
        mpirun,
        program,
        wrapper,
        preload: preload_library()?,
    })
}

/// `--backend`: plfs over store URLs against the raw stores, per size.
fn run_store(opts: &Opts) -> Result<ExitCode> {
    let workload = match opts.workload {
        Some(WorkloadArg::Fuse | WorkloadArg::Index) | None => {
            bail!("--backend runs n1-strided, n1-segmented or nn, not this workload")
        }
        Some(workload) => Workload::from(workload),
    };
    let datanodes = match &opts.datanode_jmx_file {
        Some(path) => plfs_bench::jmx::read_datanode_file(path).map_err(|e| anyhow!(e))?,
        None => opts.datanode_jmx.clone(),
    };
    for url in &datanodes {
        plfs_bench::jmx::split_url(url).map_err(|e| anyhow!(e))?;
    }
    if !(opts.jmx_settle.is_finite() && (0.0..=3600.0).contains(&opts.jmx_settle)) {
        bail!("--jmx-settle {}: expected seconds between 0 and 3600", opts.jmx_settle);
    }
    let spec = plfs_bench::StoreBenchSpec {
        workload,
        writers: opts.writers(),
        records: opts.records(),
        bytes_per_writer: opts.mib_per_process.map(|mib| mib << 20),
        sizes: opts.size.clone(),
        read: opts.read,
        backends: opts.backend.clone(),
        keep: opts.keep,
        datanodes,
        jmx_settle: std::time::Duration::from_secs_f64(opts.jmx_settle),
        plfs_first: false,
    };
    let worker = worker_command()?;
    run_repeated(
        opts.repeat,
        opts.json,
        &opts.plot,
        // Every other run swaps which of plfs and raw goes first at each size.
        |run| {
            plfs_bench::run_store(
                &plfs_bench::StoreBenchSpec { plfs_first: run % 2 == 0, ..spec.clone() },
                &worker,
            )
        },
        plfs_bench::StoreRepeatedReport::new,
    )
}

/// What [`run_repeated`] needs of a report: its text and whether every byte
/// read back matched.
trait Outcome: serde::Serialize + plfs_bench::plot::Plot {
    fn text(&self) -> String;
    fn verified(&self) -> bool;
}

macro_rules! outcome {
    ($($report:ty),*) => {$(
        impl Outcome for $report {
            fn text(&self) -> String {
                self.to_text()
            }
            fn verified(&self) -> bool {
                self.verified
            }
        }
    )*};
}
outcome!(
    plfs_bench::BenchReport,
    plfs_bench::RepeatedReport,
    plfs_bench::StoreReport,
    plfs_bench::StoreRepeatedReport
);

/// Runs a benchmark `repeat` times (`once(run)`, runs counted from 1) and
/// prints each report as text, then the `summarize`d medians; one run is
/// printed alone. Exit status 1 if any byte read back was wrong.
fn run_repeated<R: Outcome, S: Outcome>(
    repeat: u32,
    json: bool,
    plot: &PlotArgs,
    mut once: impl FnMut(u32) -> std::result::Result<R, plfs_bench::BenchError>,
    summarize: impl FnOnce(Vec<R>) -> S,
) -> Result<ExitCode> {
    let status = |verified: bool| if verified { ExitCode::SUCCESS } else { ExitCode::FAILURE };
    plot.check()?;
    if repeat == 1 {
        let report = once(1).map_err(|e| anyhow!(e))?;
        if json {
            print_json(&report)?
        } else {
            print!("{}", report.text())
        }
        plot.emit(&report.text(), || report.figures())?;
        return Ok(status(report.verified()));
    }
    let mut reports = Vec::with_capacity(repeat as usize);
    for run in 1..=repeat {
        let report = once(run).map_err(|e| anyhow!("run {run}: {e}"))?;
        if !json {
            print!("run {run} of {repeat}:\n{}\n", report.text());
        }
        reports.push(report);
    }
    let summary = summarize(reports);
    if json {
        print_json(&summary)?
    } else {
        print!("{}", summary.text())
    }
    plot.emit(&summary.text(), || summary.figures())?;
    Ok(status(summary.verified()))
}

pub fn worker_command() -> Result<WorkerCommand> {
    WorkerCommand::current_exe(WORKER_SUBCOMMAND).map_err(|e| anyhow!(e))
}

pub fn worker(args: &[String]) -> Result<ExitCode> {
    if let Some((first, rest)) = args.split_first()
        && first == plfs_bench::mdtest::MDTEST_WORKER_ARG
    {
        plfs_bench::mdtest::worker_main(rest).map_err(|e| anyhow!(e))?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some((first, rest)) = args.split_first()
        && first == plfs_bench::restart::RESTART_WORKER_ARG
    {
        return super::bench_restart::worker(rest);
    }
    plfs_bench::worker_main(args).map_err(|e| anyhow!(e))?;
    Ok(ExitCode::SUCCESS)
}

fn run_index(opts: &Opts) -> Result<ExitCode> {
    let spec = plfs_bench::index::IndexSpec {
        writers: opts.writers() as u64,
        records: opts.records(),
        record_bytes: opts.size[0] as u64,
        random_writes: opts.random_writes,
        lookups: opts.lookups,
        seed: 42,
    };
    opts.plot.check()?;
    let report = plfs_bench::index::run(&spec);
    if opts.json {
        print_json(&report)?;
    } else {
        print!("{}", report.to_text());
    }
    opts.plot.emit(&report.to_text(), || plfs_bench::plot::Plot::figures(&report))?;
    Ok(if report.verified() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
