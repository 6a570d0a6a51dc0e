//! `plfs bench restart`: N writer processes write a checkpoint, M reader
//! processes read it back under each decomposition, through plfs and as
//! the direct N-1 shared file (see plfs_bench::restart).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, anyhow, bail};
use clap::{Args, ValueEnum};
use plfs::collective::Strategy;
use plfs_bench::peers::Peer;
use plfs_bench::restart::{Block, Decomp, Pattern, RESTART_WORKER_ARG, RestartSpec};
use plfs_mpi::MpiWorld;

use crate::output::print_json;

#[derive(Debug, Args)]
#[command(after_help = "Each writer and reader is its own OS process. One run writes the checkpoint \
    through plfs and as one plain shared file (pwrite; the direct N-1 peer), then for each --decomp \
    reads both back with M processes (open, pread, check of every byte and close inside the clock), \
    dropping the page cache before every read (root only; otherwise the figures are marked warm); \
    after a drop every reader, of every target, touches and frees its share of 1.5x the file right \
    before its clock, so that a VM that hands freed pages back to its host does not charge the read \
    for faulting them back in. \
    Decompositions: uniform (M = N, reader r reads writer r's data in write order), half (M = N/2), \
    minus-k (M = N - k), non-integer (M readers on a grid of their own: 4x4x4 -> 4x4x5; default \
    M = N + N/4), pieces (the whole file in M contiguous pieces; default M = N). pixie3d blocks per \
    process (8 f64 variables): small 16x16x16 = 256 KiB (the paper's), medium 32x32x64 = 4 MiB and \
    large 64x64x128 = 32 MiB (the paper's 16 MiB and 128 MiB scaled to a 2-core machine). With \
    pixie3d, --peers also writes and reads the same array as ADIOS BP and parallel HDF5 (the \
    programs `make peers` builds, under mpirun.openmpi) with the same writer grid, reader regions \
    and M, in the same run directory, the page cache dropped the same way; a peer that is not built \
    is reported and the rest runs. With --strategy, plfs's writers and readers are instead the ranks \
    of one mpirun.openmpi per phase (this binary, MPI through the plfs-mpi shim): the readers open \
    collectively with that strategy inside their clock, which starts at a barrier after mpirun's \
    start-up, and with flatten the writers' close flattens on close (their index records gathered \
    to rank 0). The direct file's writers and readers are then ranks of an mpirun per phase \
    too, clocked the same way. Exits 1 if a byte read back was \
    wrong.")]
pub struct Opts {
    /// Writer processes (N).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=4096))]
    writers: u64,
    /// Reader processes (M) of the non-integer and pieces decompositions;
    /// the others fix M themselves.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=4096))]
    readers: Option<u64>,
    /// The write pattern.
    #[arg(long, value_enum, default_value_t = PatternArg::Strided)]
    pattern: PatternArg,
    /// strided: bytes per record.
    #[arg(long, default_value_t = 47001, value_parser = clap::value_parser!(u64).range(1..=(1 << 30)))]
    size: u64,
    /// strided: MiB of the whole file, whatever --writers (whole records,
    /// at least one per writer), so the writer count can be swept.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=(1 << 20)))]
    total_mib: u64,
    /// pixie3d: the block each process writes.
    #[arg(long, value_enum, default_value_t = BlockArg::Medium)]
    block: BlockArg,
    /// Read decompositions, comma-separated, each read after the one write.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "uniform")]
    decomp: Vec<DecompArg>,
    /// k of the minus-k decomposition (M = N - k).
    #[arg(long, default_value_t = 1)]
    k: usize,
    /// Where the run's files go (a fresh subdirectory); the current directory by default.
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// Plfs backend directories.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=64))]
    backends: u64,
    /// Run everything this many times; each figure is reported as its
    /// median with its range.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    repeat: u32,
    /// Keep the run's files.
    #[arg(long)]
    keep: bool,
    /// Restart peers beside plfs and the direct file, comma-separated, or
    /// `none` [default: adios,hdf5 with pixie3d, none with strided, which
    /// they cannot store].
    #[arg(long, value_enum, value_delimiter = ',')]
    peers: Option<Vec<PeerArg>>,
    /// Run plfs's phases as MPI ranks (under mpirun.openmpi, which the
    /// bench starts) with this collective open strategy: naive, broadcast,
    /// parallel or flatten (flatten also flattens on the writers' close);
    /// uniform_restart (each rank its own writer's logs) with --decomp
    /// uniform only.
    #[arg(long)]
    strategy: Option<Strategy>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    plot: super::bench::PlotArgs,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum PatternArg {
    /// N-1 strided records: record k*N + w by writer w.
    Strided,
    /// 8 variables of a global 3-D f64 array, one block per writer.
    Pixie3d,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum BlockArg {
    Small,
    Medium,
    Large,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PeerArg {
    /// ADIOS 1.x BP, bounding-box reads.
    Adios,
    /// Parallel HDF5, hyperslab reads.
    Hdf5,
    /// No peer.
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum DecompArg {
    Uniform,
    Half,
    MinusK,
    NonInteger,
    Pieces,
}

impl From<DecompArg> for Decomp {
    fn from(arg: DecompArg) -> Decomp {
        match arg {
            DecompArg::Uniform => Decomp::Uniform,
            DecompArg::Half => Decomp::Half,
            DecompArg::MinusK => Decomp::MinusK,
            DecompArg::NonInteger => Decomp::NonInteger,
            DecompArg::Pieces => Decomp::Pieces,
        }
    }
}

pub fn run(opts: &Opts) -> Result<ExitCode> {
    opts.plot.check()?;
    let pattern = match opts.pattern {
        PatternArg::Strided => {
            Pattern::Strided { record_bytes: opts.size, total_bytes: opts.total_mib << 20 }
        }
        PatternArg::Pixie3d => Pattern::Pixie3d {
            block: match opts.block {
                BlockArg::Small => Block::Small,
                BlockArg::Medium => Block::Medium,
                BlockArg::Large => Block::Large,
            },
        },
    };
    let mut decomps: Vec<Decomp> = Vec::new();
    for decomp in opts.decomp.iter().map(|d| Decomp::from(*d)) {
        if decomps.contains(&decomp) {
            bail!("--decomp {} is given twice", decomp.as_str());
        }
        decomps.push(decomp);
    }
    let asked = match (&opts.peers, opts.pattern) {
        (Some(asked), _) => asked.clone(),
        (None, PatternArg::Pixie3d) => vec![PeerArg::Adios, PeerArg::Hdf5],
        (None, PatternArg::Strided) => Vec::new(),
    };
    if asked.contains(&PeerArg::None) && asked.len() > 1 {
        bail!("--peers none cannot be combined with a peer");
    }
    let mut peers: Vec<Peer> = Vec::new();
    for peer in &asked {
        let peer = match peer {
            PeerArg::Adios => Peer::Adios,
            PeerArg::Hdf5 => Peer::Hdf5,
            PeerArg::None => continue,
        };
        if peers.contains(&peer) {
            bail!("--peers {peer} is given twice");
        }
        peers.push(peer);
    }
    if opts.strategy == Some(Strategy::UniformRestart) && decomps.iter().any(|d| *d != Decomp::Uniform) {
        bail!(
            "--strategy uniform_restart reads only each rank's own writer's data: it needs --decomp uniform"
        );
    }
    let spec = RestartSpec {
        pattern,
        writers: opts.writers as usize,
        readers: opts.readers.map(|m| m as usize),
        k: opts.k,
        decomps,
        dir: opts.dir.clone(),
        backends: opts.backends as usize,
        repeat: opts.repeat,
        keep: opts.keep,
        peers,
        strategy: opts.strategy,
    };
    let mut worker = super::bench::worker_command()?;
    worker.args_prefix.push(RESTART_WORKER_ARG.to_owned());
    let report = plfs_bench::restart::run_restart(&spec, &worker).map_err(|e| anyhow!(e))?;
    let text = report.to_text();
    if opts.json {
        print_json(&report)?;
    } else {
        print!("{text}");
    }
    opts.plot.emit(&text, || plfs_bench::plot::Plot::figures(&report))?;
    Ok(if report.verified { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// `plfs bench-worker restart <json>`: an independent process, or, when
/// the spec names an open strategy, a rank under mpirun.
pub fn worker(args: &[String]) -> Result<ExitCode> {
    let spec = plfs_bench::restart::parse_worker_spec(args).map_err(|e| anyhow!(e))?;
    if spec.strategy.is_none() {
        plfs_bench::restart::worker_main(args).map_err(|e| anyhow!(e))?;
        return Ok(ExitCode::SUCCESS);
    }
    let world = MpiWorld::init()
        .map_err(|e| anyhow!(e))?
        .ok_or_else(|| anyhow!("a restart rank with an open strategy must run under mpirun"))?;
    let result = plfs_bench::restart::mpi_worker_main(world.comm(), args).map_err(|e| anyhow!(e));
    world.finalize().map_err(|e| anyhow!(e))?;
    result?;
    Ok(ExitCode::SUCCESS)
}
