//! `plfs bench restart`: N writer processes write a checkpoint, then M
//! reader processes read it back under each read decomposition ("Read
//! performance of write-optimized middleware", uniform and non-uniform
//! restart). The same processes write and read the same bytes through plfs
//! and, as the peer, as one plain shared file with pwrite/pread (direct
//! N-1), on the same file system in the same run. The pixie3d pattern also
//! runs the ADIOS BP and parallel HDF5 peers ([`crate::peers`]) on the same
//! array, writer grid, reader grid and M, in the same directory tree, with
//! the page cache dropped the same way.
//!
//! A reader's clock runs from the common start instant through its open,
//! every read and the check of every byte, to its close; the page cache is
//! dropped before every read phase (as root; otherwise the figures are
//! marked warm). Each process is started with [`RestartWorker`] as its
//! spec and must call [`worker_main`] (the CLI's `plfs bench-worker
//! restart`).

mod layout;

use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use plfs::collective::{
    CollectiveOptions, Comm, Strategy, flatten_on_close, open_collective_with, retain_index,
};
use plfs::fs::Plfs;
use plfs::open::OpenFlags;
use serde::{Deserialize, Serialize};

pub use layout::{Decomp, Extent, Layout, PIXIE3D_VARIABLES, balanced_grid, pixie3d_value};

use crate::error::{BenchError, Result};
use crate::peers::{Peer, PeerPhase, PeerProgram, PeerRun};
use crate::protocol::{self, Channel, NoPhase, Order, Report};
use crate::runner::drop_page_cache;
use crate::runner::{WorkDir, run_workers};
use crate::spread::Spread;
use crate::worker::{Op, Target, direct_path, mount, now_ns, plfs_backend_dirs, process_cpu_ns, wait_until};
use crate::{VerifyReads, WorkerCommand};

/// The first argument of `plfs bench-worker` that makes it a restart
/// process.
pub const RESTART_WORKER_ARG: &str = "restart";

/// The plfs logical file of the checkpoint.
pub const RESTART_PATH: &str = "/checkpoint";

/// The largest single read or write a process makes: a contiguous run
/// longer than this (a whole piece, a whole z-slab) goes in several calls,
/// so a process's buffers stay small whatever the file size.
const CHUNK: u64 = 4 << 20;

/// Per-process block edge (x, y, z) of the pixie3d pattern, 8 variables of
/// f64 each. The paper's sizes per process are 256 KiB, 16 MiB and 128 MiB;
/// on a 2-core machine with 24 GiB, where the writers and readers share
/// the cores, medium and large are scaled to 4 MiB and 32 MiB so a sweep
/// of several process counts stays in minutes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Block {
    /// 16×16×16 values per variable: 256 KiB per process.
    Small,
    /// 32×32×64: 4 MiB per process.
    Medium,
    /// 64×64×128: 32 MiB per process.
    Large,
}

impl Block {
    pub fn dims(self) -> [u64; 3] {
        match self {
            Block::Small => [16, 16, 16],
            Block::Medium => [32, 32, 64],
            Block::Large => [64, 64, 128],
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Block::Small => "small",
            Block::Medium => "medium",
            Block::Large => "large",
        }
    }
}

/// The write pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// N-1 strided records of `record_bytes`, `total_bytes` in all (whole
    /// records per writer, at least one), so the writer count can be swept
    /// at a fixed size.
    Strided {
        record_bytes: u64,
        total_bytes: u64,
    },
    Pixie3d {
        block: Block,
    },
}

impl Pattern {
    pub fn layout(self, writers: usize) -> Result<Layout> {
        let n = writers as u64;
        if n == 0 {
            return Err(BenchError::invalid("restart: at least one writer is needed"));
        }
        Ok(match self {
            Pattern::Strided { record_bytes, total_bytes } => {
                if record_bytes == 0 {
                    return Err(BenchError::invalid("restart: record size 0"));
                }
                let records = (total_bytes / (n * record_bytes)).max(1);
                Layout::Strided { writers: n, records, record_bytes }
            }
            Pattern::Pixie3d { block } => Layout::Pixie3d { grid: balanced_grid(n), block: block.dims() },
        })
    }
}

/// One `plfs bench restart` run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestartSpec {
    pub pattern: Pattern,
    pub writers: usize,
    /// Reader count for the decompositions that take one (non-integer,
    /// pieces); None: their default.
    pub readers: Option<usize>,
    /// k of the N−k decomposition.
    pub k: usize,
    /// Read back once per decomposition, in this order, after one write.
    pub decomps: Vec<Decomp>,
    /// A fresh subdirectory of it per run.
    pub dir: PathBuf,
    pub backends: usize,
    pub repeat: u32,
    pub keep: bool,
    /// The peers to run beside plfs and the direct file (pixie3d only);
    /// one that is not built is reported and left out.
    pub peers: Vec<Peer>,
    /// Run plfs's writers and readers as the ranks of one `mpirun` per
    /// phase, the readers opening with this collective strategy inside
    /// their clock (flatten: the writers' close flattens on close). None:
    /// independent processes, each opening on its own.
    pub strategy: Option<Strategy>,
}

/// What one process does; sent as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartWorker {
    pub layout: Layout,
    pub target: Target,
    pub op: Op,
    /// With `Op::Read`: the decomposition and its reader count.
    pub decomp: Decomp,
    pub processes: usize,
    pub rank: usize,
    pub dir: PathBuf,
    pub backends: usize,
    /// The collective open strategy's name: this process is a rank under
    /// mpirun ([`mpi_worker_main`]); None: an independent process.
    #[serde(default)]
    pub strategy: Option<String>,
    /// Bytes of memory this process touches and frees right before its
    /// clock starts (a read after the page cache was dropped): see
    /// [`crate::host::back_free_memory`]. 0: none.
    #[serde(default)]
    pub back_memory_bytes: u64,
}

/// What one process measured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartResult {
    pub rank: usize,
    pub began_ns: u64,
    /// The open call alone.
    pub open_ns: u64,
    pub end_ns: u64,
    pub bytes: u64,
    /// Bytes read that were not what was written.
    pub bad_bytes: u64,
    pub first_bad: Option<String>,
    /// Peak resident set of the process (getrusage ru_maxrss), KiB.
    pub max_rss_kib: u64,
    /// CPU time (user + system, every thread) from the clock's start to
    /// the close: what the library costs per byte, which a busy machine
    /// changes less than the wall time.
    #[serde(default)]
    pub cpu_ns: u64,
    /// Wall time inside the read (or write) calls, and, for a reader, in
    /// making the expected bytes and comparing them: with `open_ns`, where
    /// the clock went.
    #[serde(default)]
    pub io_ns: u64,
    #[serde(default)]
    pub check_ns: u64,
    /// Minor page faults (every thread) from the clock's start to the
    /// close: memory the timed part touched for the first time.
    #[serde(default)]
    pub minor_faults: u64,
    /// Context switches (voluntary and involuntary, every thread) from the
    /// clock's start to the close: how often the process's threads handed
    /// a core over, e.g. a reader waiting for its read pool's threads.
    #[serde(default)]
    pub context_switches: u64,
}

/// One process's untimed set-up: the mount, the extents, the buffers.
struct Prepared {
    spec: RestartWorker,
    plfs: Option<Plfs>,
    extents: Vec<Extent>,
    buf: Vec<u8>,
    expected: Vec<u8>,
    scratch: Vec<u8>,
}

fn prepare(spec: RestartWorker) -> Result<Prepared> {
    if spec.rank >= spec.processes {
        return Err(BenchError::invalid(format!("restart process {} of {}", spec.rank, spec.processes)));
    }
    let plfs = match spec.target {
        // The page cache is the measured thing: the library's own data
        // CRC checks are left at their default, as a user would run.
        Target::Plfs => Some(mount(&spec.dir, spec.backends, VerifyReads::default())?),
        Target::DirectN1 => None,
        other => return Err(BenchError::invalid(format!("restart has no {} target", other.as_str()))),
    };
    let extents = match spec.op {
        Op::Write => spec.layout.writer_extents(spec.rank as u64),
        Op::Read => spec.layout.reader_extents(spec.decomp, spec.processes as u64, spec.rank as u64),
    };
    let longest = extents.iter().map(|e| e.len).max().unwrap_or(0).min(CHUNK) as usize;
    // Written here, outside the clock: a buffer's first writes are page
    // faults (a zeroed allocation is untouched memory), which would charge
    // a reader of 4 MiB runs 2,048 faults and the kernel's clearing of
    // 8 MiB that a reader of 32 KiB runs never pays, none of it a read.
    let buf = touched_buffer(longest);
    let expected = if spec.op == Op::Read { touched_buffer(longest) } else { Vec::new() };
    // Last in the set-up, so that little else allocates between it and
    // the clock's start.
    crate::host::back_free_memory(spec.back_memory_bytes)
        .map_err(BenchError::io("backing free memory before the read of", direct_path(&spec.dir)))?;
    Ok(Prepared { spec, plfs, extents, buf, expected, scratch: Vec::new() })
}

/// `len` bytes whose pages are all faulted in: filled with a non-zero byte,
/// which no allocator can hand out as untouched zero pages.
fn touched_buffer(len: usize) -> Vec<u8> {
    std::hint::black_box(vec![0xa5u8; len])
}

/// Either kind of open file, so the I/O loop is written once.
enum Handle<'a> {
    Plfs(plfs::fs::FileHandle, &'a str),
    Direct(File, PathBuf),
}

impl Handle<'_> {
    fn write(&self, buf: &[u8], offset: u64) -> Result<()> {
        match self {
            Handle::Plfs(handle, path) => {
                let count = handle
                    .write(buf, offset)
                    .map_err(BenchError::plfs("plfs write", format!("{path} at {offset}")))?;
                if count != buf.len() {
                    let (target, expected) = (format!("{path} at {offset}"), buf.len());
                    return Err(BenchError::Short { doing: "plfs write", target, count, expected });
                }
                Ok(())
            }
            Handle::Direct(file, path) => file.write_all_at(buf, offset).map_err(|source| BenchError::IoAt {
                doing: "pwrite",
                path: path.clone(),
                offset,
                source,
            }),
        }
    }

    /// Fills as much of `buf` as the file has from `offset`.
    fn read(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        let mut filled = 0;
        while filled < buf.len() {
            let at = offset + filled as u64;
            let count = match self {
                Handle::Plfs(handle, path) => handle
                    .read(&mut buf[filled..], at)
                    .map_err(BenchError::plfs("plfs read", format!("{path} at {at}")))?,
                Handle::Direct(file, path) => match file.read_at(&mut buf[filled..], at) {
                    Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                    other => other.map_err(|source| BenchError::IoAt {
                        doing: "pread",
                        path: path.clone(),
                        offset: at,
                        source,
                    })?,
                },
            };
            if count == 0 {
                break;
            }
            filled += count;
        }
        Ok(filled)
    }

    /// fdatasync (what plfs does to its logs) and close.
    fn close(self, op: Op) -> Result<()> {
        match self {
            Handle::Plfs(handle, path) => {
                if op == Op::Write {
                    handle.sync().map_err(BenchError::plfs("plfs sync", path))?;
                }
                handle.close().map_err(BenchError::plfs("plfs close", path))
            }
            Handle::Direct(file, path) => {
                if op == Op::Write {
                    file.sync_data().map_err(BenchError::io("fdatasync", &path))?;
                }
                Ok(())
            }
        }
    }
}

/// How a process's clock starts and its plfs file opens and closes: on
/// its own at the common start instant, or as a rank of `comm` (the clock
/// starts at a barrier; readers open collectively with `strategy`; with
/// flatten the writers' close flattens on close).
#[derive(Clone, Copy)]
enum Start<'a> {
    At(u64),
    Rank { comm: &'a dyn Comm, strategy: Strategy },
}

/// The timed part: open, every extent, close.
fn execute(prepared: &mut Prepared, start: Start) -> Result<RestartResult> {
    match start {
        Start::At(start_ns) => wait_until(start_ns),
        Start::Rank { comm, .. } => comm
            .barrier()
            .map_err(|source| BenchError::Collective { doing: "restart start barrier", source })?,
    }
    let began_ns = now_ns();
    let cpu_began_ns = process_cpu_ns();
    let faults_began = minor_faults();
    let switches_began = context_switches();
    let timed = open_move_close(prepared, start, began_ns);
    // Flatten on close: every writer rank takes part, also one that
    // failed (it says so), so that none waits in it alone.
    if let (Op::Write, Start::Rank { comm, strategy: Strategy::Flatten }, Some(plfs)) =
        (prepared.spec.op, start, &prepared.plfs)
    {
        let flattened = flatten_on_close(plfs, RESTART_PATH, comm, timed.is_ok());
        if timed.is_ok() {
            flattened.map_err(BenchError::plfs("plfs flatten on close", RESTART_PATH))?;
        }
    }
    let Timed { open_ns, io_ns, check_ns, bytes, bad_bytes, first_bad } = timed?;
    let end_ns = now_ns();
    Ok(RestartResult {
        rank: prepared.spec.rank,
        began_ns,
        open_ns,
        end_ns,
        bytes,
        bad_bytes,
        first_bad,
        max_rss_kib: max_rss_kib(),
        cpu_ns: process_cpu_ns().saturating_sub(cpu_began_ns),
        minor_faults: minor_faults().saturating_sub(faults_began),
        context_switches: context_switches().saturating_sub(switches_began),
        io_ns,
        check_ns,
    })
}

/// What [`open_move_close`] measured.
struct Timed {
    open_ns: u64,
    io_ns: u64,
    check_ns: u64,
    bytes: u64,
    bad_bytes: u64,
    first_bad: Option<String>,
}

/// The open, every extent written or read and checked, the close.
fn open_move_close(prepared: &mut Prepared, start: Start, began_ns: u64) -> Result<Timed> {
    let spec = &prepared.spec;
    let handle = match (&prepared.plfs, spec.op, start) {
        (Some(plfs), Op::Read, Start::Rank { comm, strategy }) => Handle::Plfs(
            open_collective_with(
                plfs,
                RESTART_PATH,
                comm,
                &CollectiveOptions { strategy, group_ranks: None },
                (spec.layout.writers() as usize + spec.rank) as u64,
            )
            .map_err(BenchError::plfs("plfs collective open", RESTART_PATH))?,
            RESTART_PATH,
        ),
        (Some(plfs), Op::Write, _) => Handle::Plfs(
            plfs.open(RESTART_PATH, OpenFlags::WRONLY, 0, spec.rank as u64)
                .map_err(BenchError::plfs("plfs open for writing", RESTART_PATH))?,
            RESTART_PATH,
        ),
        // Reader ids follow the writers', as in `plfs bench open`.
        (Some(plfs), Op::Read, Start::At(_)) => Handle::Plfs(
            plfs.open(
                RESTART_PATH,
                OpenFlags::RDONLY,
                0,
                (spec.layout.writers() as usize + spec.rank) as u64,
            )
            .map_err(BenchError::plfs("plfs open", RESTART_PATH))?,
            RESTART_PATH,
        ),
        (None, op, _) => {
            let path = direct_path(&spec.dir);
            // Not truncating: the parent made the file, other ranks write it.
            let file = OpenOptions::new()
                .read(op == Op::Read)
                .write(op == Op::Write)
                .open(&path)
                .map_err(BenchError::io("open", &path))?;
            Handle::Direct(file, path)
        }
    };
    let open_ns = now_ns().saturating_sub(began_ns);
    let (mut bytes, mut bad_bytes, mut first_bad) = (0u64, 0u64, None);
    let (mut io_ns, mut check_ns) = (0u64, 0u64);
    for extent in &prepared.extents {
        let mut done = 0;
        while done < extent.len {
            let len = (extent.len - done).min(CHUNK) as usize;
            let offset = extent.offset + done;
            let buf = &mut prepared.buf[..len];
            match spec.op {
                Op::Write => {
                    spec.layout.fill(offset, buf, &mut prepared.scratch);
                    let at = now_ns();
                    handle.write(buf, offset)?;
                    io_ns += now_ns().saturating_sub(at);
                    bytes += len as u64;
                }
                Op::Read => {
                    let at = now_ns();
                    let filled = handle.read(buf, offset)?;
                    let read_end = now_ns();
                    io_ns += read_end.saturating_sub(at);
                    let expected = &mut prepared.expected[..len];
                    spec.layout.fill(offset, expected, &mut prepared.scratch);
                    bytes += filled as u64;
                    if filled < len {
                        bad_bytes += (len - filled) as u64;
                        first_bad.get_or_insert_with(|| {
                            format!(
                                "{} at {}: short read, {filled} of {len} bytes",
                                spec.target.as_str(),
                                offset
                            )
                        });
                    }
                    if buf[..filled] != expected[..filled] {
                        let wrong = buf[..filled].iter().zip(&expected[..filled]).filter(|(a, b)| a != b);
                        bad_bytes += wrong.count() as u64;
                        first_bad.get_or_insert_with(|| {
                            let at = buf.iter().zip(expected.iter()).position(|(a, b)| a != b).unwrap_or(0);
                            let where_ = offset + at as u64;
                            format!(
                                "{} at offset {where_} ({}): byte {:#04x}, expected {:#04x}",
                                spec.target.as_str(),
                                spec.layout.describe(where_),
                                buf[at],
                                expected[at]
                            )
                        });
                    }
                    check_ns += now_ns().saturating_sub(read_end);
                }
            }
            done += len as u64;
        }
    }
    handle.close(spec.op)?;
    Ok(Timed { open_ns, io_ns, check_ns, bytes, bad_bytes, first_bad })
}

/// getrusage(RUSAGE_SELF), or None if it fails.
fn self_usage() -> Option<libc::rusage> {
    // SAFETY: an all-zero rusage is a valid value for getrusage to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes one rusage, which `usage` is.
    (unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } == 0).then_some(usage)
}

/// getrusage(RUSAGE_SELF).ru_maxrss, KiB on Linux (0 if it fails).
fn max_rss_kib() -> u64 {
    self_usage().map_or(0, |usage| usage.ru_maxrss.max(0) as u64)
}

/// getrusage(RUSAGE_SELF).ru_minflt (0 if it fails).
fn minor_faults() -> u64 {
    self_usage().map_or(0, |usage| usage.ru_minflt.max(0) as u64)
}

/// getrusage(RUSAGE_SELF): voluntary plus involuntary context switches
/// (0 if it fails).
fn context_switches() -> u64 {
    self_usage().map_or(0, |usage| (usage.ru_nvcsw.max(0) + usage.ru_nivcsw.max(0)) as u64)
}

/// Entry point of a restart process (`plfs bench-worker restart <json>`);
/// with no arguments the spec comes from [`crate::WORKER_SPEC_ENV`].
pub fn worker_main(args: &[String]) -> Result<()> {
    let result = worker_protocol(args);
    if let Err(error) = &result {
        let _ = protocol::send_report::<RestartResult>(Channel::Bench, &Report::Error(error.to_string()));
    }
    result
}

fn worker_protocol(args: &[String]) -> Result<()> {
    let spec = parse_worker_spec(args)?;
    let rank = spec.rank;
    let mut prepared = prepare(spec)?;
    protocol::send_report::<RestartResult>(Channel::Bench, &Report::Ready { rank })?;
    let worker = format!("restart worker {rank}");
    let start_ns = match protocol::receive_order::<NoPhase>(&mut std::io::stdin().lock(), false, &worker)? {
        Some(Order::Go { start_ns, .. }) => start_ns,
        Some(Order::Exit) | None => {
            return Err(BenchError::Protocol { phase: worker, problem: "stdin closed before GO".to_owned() });
        }
    };
    let result = execute(&mut prepared, Start::At(start_ns))?;
    protocol::send_report(Channel::Bench, &Report::Result(result))
}

/// A restart process's spec, from its one argument or
/// [`crate::WORKER_SPEC_ENV`]; the caller runs [`mpi_worker_main`] when it
/// names a strategy, else [`worker_main`].
pub fn parse_worker_spec(args: &[String]) -> Result<RestartWorker> {
    let text = match args {
        [] => std::env::var(crate::WORKER_SPEC_ENV).map_err(|_| {
            BenchError::invalid(format!(
                "restart worker: no spec argument and {} is not set",
                crate::WORKER_SPEC_ENV
            ))
        })?,
        [one] => one.clone(),
        more => {
            return Err(BenchError::invalid(format!(
                "restart worker: expected one JSON spec, got {}",
                more.len()
            )));
        }
    };
    serde_json::from_str(&text)
        .map_err(|source| BenchError::Json { what: format!("restart worker spec {text:?}"), source })
}

/// The line rank 0 of an MPI phase prints on stdout before the JSON of
/// every rank's [`MpiOutcome`], in rank order.
pub const MPI_RESULT_PREFIX: &str = "RESTART-MPI ";

/// One rank's outcome in an MPI phase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MpiOutcome {
    pub result: Option<RestartResult>,
    pub error: Option<String>,
}

/// Entry point of a restart rank under mpirun (`plfs bench-worker restart
/// <json>` whose spec names a strategy): `world` is the job's ranks, one
/// process each; the spec's rank is replaced by the rank in `world`. Rank
/// 0 prints every rank's outcome on stdout; a rank that failed makes it
/// an error on every rank.
pub fn mpi_worker_main(world: &dyn Comm, args: &[String]) -> Result<()> {
    let collective = |doing| move |source| BenchError::Collective { doing, source };
    let mut prepared = (|| {
        let mut spec = parse_worker_spec(args)?;
        spec.rank = world.rank();
        if spec.processes != world.size() {
            return Err(BenchError::invalid(format!(
                "restart rank: the spec is for {} processes, mpirun started {}",
                spec.processes,
                world.size()
            )));
        }
        let name = spec.strategy.clone().unwrap_or_default();
        let strategy: Strategy = name.parse().map_err(BenchError::plfs("restart rank", name))?;
        let prepared = prepare(spec)?;
        if let (Some(plfs), Op::Write, Strategy::Flatten) = (&prepared.plfs, prepared.spec.op, strategy) {
            // Keeps this rank's index records for the gather at close.
            retain_index(plfs, RESTART_PATH)
                .map_err(BenchError::plfs("keeping the index of", RESTART_PATH))?;
        }
        Ok((prepared, strategy))
    })();
    // No rank starts the clock (a barrier) while another could not set up.
    let mine = prepared.as_ref().err().map(|e| format!("rank {}: {e}", world.rank())).unwrap_or_default();
    let all = world.allgather(mine.as_bytes()).map_err(collective("agreeing on the set-up"))?;
    let outcome = match (&mut prepared, all.iter().find(|message| !message.is_empty())) {
        (Ok((prepared, strategy)), None) => {
            match execute(prepared, Start::Rank { comm: world, strategy: *strategy }) {
                Ok(result) => MpiOutcome { result: Some(result), error: None },
                Err(error) => {
                    MpiOutcome { result: None, error: Some(format!("rank {}: {error}", world.rank())) }
                }
            }
        }
        (_, failed) => MpiOutcome {
            result: None,
            error: Some(failed.map(|m| String::from_utf8_lossy(m).into_owned()).unwrap_or(mine)),
        },
    };
    let bytes = serde_json::to_vec(&outcome)
        .map_err(|source| BenchError::Json { what: "a restart rank's outcome".to_owned(), source })?;
    if let Some(all) = world.gather(0, &bytes).map_err(collective("gathering the outcomes"))? {
        let outcomes = all
            .iter()
            .map(|bytes| serde_json::from_slice::<MpiOutcome>(bytes))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|source| BenchError::Json { what: "a restart rank's outcome".to_owned(), source })?;
        let line = serde_json::to_string(&outcomes)
            .map_err(|source| BenchError::Json { what: "the restart outcomes".to_owned(), source })?;
        println!("{MPI_RESULT_PREFIX}{line}");
    }
    match outcome.error {
        Some(error) => Err(BenchError::Rank(error)),
        None => Ok(()),
    }
}

/// One phase's figures in one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseFigures {
    pub target: String,
    pub op: String,
    /// The read decomposition (None for the write).
    pub decomp: Option<String>,
    pub processes: usize,
    pub seconds: f64,
    pub bytes: u64,
    pub mibs: f64,
    /// The slowest process's open (None for a peer, whose open is inside
    /// its clock but not timed apart).
    pub open_seconds_max: Option<f64>,
    /// Peak RSS of the largest process.
    pub max_rss_kib: u64,
    /// CPU seconds of every process together, per MiB moved (None for a
    /// peer, whose processes do not report it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_ms_per_mib: Option<f64>,
    /// Minor page faults of every process together inside the clock, per
    /// MiB moved (None for a peer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub faults_per_mib: Option<f64>,
    /// Context switches of every process together inside the clock, per
    /// MiB moved (None for a peer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub switches_per_mib: Option<f64>,
    /// The slowest process's clock split: seconds in the open, in the
    /// read (write) calls, in checking, and the rest (close, waits); None
    /// for a peer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slowest_split: Option<ClockSplit>,
    pub bad_bytes: u64,
    pub first_bad: Option<String>,
}

/// Where one process's clock went, seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ClockSplit {
    pub open: f64,
    pub io: f64,
    pub check: f64,
    /// The rest: waiting for the start, the close, being descheduled
    /// between calls.
    pub other: f64,
}

/// One point of the report (a target, an op, a decomposition) over the
/// runs: each figure's median, minimum and maximum, ready to plot with
/// error bars.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RestartPoint {
    pub target: String,
    pub op: String,
    pub decomp: Option<String>,
    pub processes: usize,
    pub mibs: Spread,
    pub open_seconds_max: Option<Spread>,
    pub max_rss_kib: Spread,
    /// plfs over direct N-1 at this point (plfs points).
    pub ratio_vs_direct: Option<Spread>,
    /// plfs over the ADIOS BP peer at this point (plfs points, when it ran).
    pub ratio_vs_adios: Option<Spread>,
    /// plfs over the parallel HDF5 peer at this point.
    pub ratio_vs_hdf5: Option<Spread>,
    /// A plfs read over plfs's own uniform read (plfs reads, when the
    /// run had a uniform read).
    pub ratio_vs_uniform: Option<Spread>,
    /// Peak RSS of the largest plfs reader over the largest direct one:
    /// what the merged index (and the library) costs a reader.
    pub rss_over_direct_kib: Option<Spread>,
}

/// The whole `plfs bench restart` report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RestartReport {
    pub pattern: String,
    /// pixie3d: small, medium or large.
    pub block: Option<String>,
    pub writers: usize,
    pub layout: Layout,
    /// pixie3d: the global array (x, y, z) and the writers' grid.
    pub global: Option<[u64; 3]>,
    pub file_bytes: u64,
    /// Index records plfs's readers merge: one per writer extent.
    pub index_entries: u64,
    pub backends: usize,
    pub runs: usize,
    /// The page cache could not be dropped before some read (not root):
    /// the reads may be served from memory.
    pub warm: bool,
    /// Every byte read, in every run, was what was written.
    pub verified: bool,
    /// The peers that ran beside plfs and the direct file.
    pub peers: Vec<String>,
    /// The collective open strategy plfs's readers used as the ranks of
    /// one mpirun per phase (None: independent processes, each opening on
    /// its own, as a naive open).
    pub strategy: Option<String>,
    /// Why a requested peer did not run (not built, or not applicable to
    /// the pattern).
    pub peer_notes: Vec<String>,
    pub points: Vec<RestartPoint>,
    /// Every phase of every run.
    pub phases: Vec<Vec<PhaseFigures>>,
}

const MIB: f64 = 1024.0 * 1024.0;

/// Runs the benchmark `spec.repeat` times, each in a fresh directory.
pub fn run_restart(spec: &RestartSpec, workers: &WorkerCommand) -> Result<RestartReport> {
    let layout = spec.pattern.layout(spec.writers)?;
    if spec.decomps.is_empty() || spec.repeat == 0 || spec.backends == 0 {
        return Err(BenchError::invalid("restart: needs a decomposition, a run and a backend"));
    }
    let plan: Vec<(Decomp, usize)> = spec
        .decomps
        .iter()
        .map(|d| d.readers(spec.writers, spec.k, spec.readers).map(|m| (*d, m)))
        .collect::<Result<_>>()?;
    std::fs::create_dir_all(&spec.dir).map_err(BenchError::io("creating", &spec.dir))?;
    let parent = std::fs::canonicalize(&spec.dir).map_err(BenchError::io("resolving", &spec.dir))?;
    let (programs, peer_notes) = find_peers(spec, &layout);
    for note in &peer_notes {
        eprintln!("plfs bench restart: {note}");
    }
    let (mut runs, mut warm) = (Vec::new(), false);
    for _ in 0..spec.repeat {
        let work = WorkDir::create(&parent, spec.keep)?;
        runs.push(run_once(spec, &layout, &plan, &programs, workers, work.path(), &mut warm)?);
    }
    let mut report = summarize(spec, layout, runs, warm);
    report.peers = programs.iter().map(|p| p.peer.as_str().to_owned()).collect();
    report.peer_notes = peer_notes;
    Ok(report)
}

/// The requested peers' programs, and a note for each that cannot run: the
/// strided pattern is a byte stream, which an array format has no way to
/// hold, and a peer that is not built is left out while the rest runs.
fn find_peers(spec: &RestartSpec, layout: &Layout) -> (Vec<PeerProgram>, Vec<String>) {
    if spec.peers.is_empty() {
        return (Vec::new(), Vec::new());
    }
    if layout.global().is_none() {
        let names: Vec<&str> = spec.peers.iter().map(|p| p.as_str()).collect();
        let note = format!(
            "peers ({}): not applicable to the strided pattern, whose records are no 3-D array for \
             them to store; --pattern pixie3d runs them",
            names.join(", ")
        );
        return (Vec::new(), vec![note]);
    }
    let (mut programs, mut notes) = (Vec::new(), Vec::new());
    for &peer in &spec.peers {
        match PeerProgram::find(peer) {
            Ok(program) => programs.push(program),
            Err(unavailable) => notes.push(unavailable.to_string()),
        }
    }
    (programs, notes)
}

fn run_once(
    spec: &RestartSpec,
    layout: &Layout,
    plan: &[(Decomp, usize)],
    programs: &[PeerProgram],
    workers: &WorkerCommand,
    work: &Path,
    warm: &mut bool,
) -> Result<Vec<PhaseFigures>> {
    for dir in plfs_backend_dirs(work, spec.backends).into_iter().chain([work.join("direct")]) {
        std::fs::create_dir_all(&dir).map_err(BenchError::io("creating", &dir))?;
    }
    let shared = direct_path(work);
    File::create(&shared).map_err(BenchError::io("creating", &shared))?;
    // The container exists before the clock starts, as the plain file does.
    let plfs = mount(work, spec.backends, VerifyReads::default())?;
    plfs.open(RESTART_PATH, OpenFlags::WRONLY.create(), 0o644, u64::from(std::process::id()))
        .and_then(|handle| handle.close())
        .map_err(BenchError::plfs("creating", RESTART_PATH))?;
    drop(plfs);
    let targets = [Target::DirectN1, Target::Plfs];
    let mut phases = Vec::new();
    for target in targets {
        // SAFETY: sync(2) takes no arguments and cannot fail.
        unsafe { libc::sync() };
        phases.push(phase(spec, layout, workers, work, target, Op::Write, Decomp::Uniform, spec.writers, 0)?);
    }
    // Each peer in a directory of its own beside plfs's backends and the
    // direct file: the same file system.
    let peer_run = |program: &PeerProgram, decomp, readers| {
        PeerRun::of_layout(work.join(program.peer.as_str()), layout, decomp, readers)
            .ok_or_else(|| BenchError::invalid("restart: peers need the pixie3d pattern"))
    };
    for program in programs {
        // SAFETY: sync(2) takes no arguments and cannot fail.
        unsafe { libc::sync() };
        let run = peer_run(program, Decomp::Uniform, spec.writers)?;
        phases.push(peer_phase(program, &run, PeerPhase::Write, layout)?);
    }
    for &(decomp, readers) in plan {
        for target in targets {
            drop_cache(warm);
            let back = backing_per_reader(layout, readers, *warm);
            phases.push(phase(spec, layout, workers, work, target, Op::Read, decomp, readers, back)?);
        }
        for program in programs {
            drop_cache(warm);
            let mut run = peer_run(program, decomp, readers)?;
            run.back_memory_bytes = backing_per_reader(layout, readers, *warm);
            phases.push(peer_phase(program, &run, PeerPhase::Read, layout)?);
        }
    }
    Ok(phases)
}

/// Most memory one reader backs before its clock.
const BACKING_MAX_BYTES: u64 = 1 << 30;

/// The memory each of `readers` processes backs right before a read whose
/// page cache was dropped ([`crate::host::back_free_memory`]): together
/// half again the file (the page cache the read fills, read-ahead past a
/// reader's last byte included) plus one 8 MiB read-ahead window each.
/// Every target's readers back the same amount, so no read is favoured.
/// None after a drop that failed (warm reads fill no page cache).
pub fn backing_per_reader(layout: &Layout, readers: usize, warm: bool) -> u64 {
    if warm || readers == 0 {
        return 0;
    }
    (layout.file_bytes() * 3 / 2 / readers as u64 + (8 << 20)).min(BACKING_MAX_BYTES)
}

/// The Open MPI launcher a phase with an open strategy runs under.
const MPIRUN: &str = "mpirun.openmpi";

/// One phase as the ranks of one `mpirun`: every rank runs `spec` (its own
/// rank filled in) through [`mpi_worker_main`]. The start is the earliest
/// rank's clock start (a barrier), so mpirun's start-up is outside it.
fn run_mpi_phase(
    name: &str,
    workers: &WorkerCommand,
    spec: &RestartWorker,
) -> Result<(u64, Vec<RestartResult>)> {
    let mpirun = crate::peers::on_path(MPIRUN).ok_or_else(|| {
        BenchError::invalid(format!(
            "{name}: an open strategy runs plfs's ranks under {MPIRUN}, which is not on PATH \
             (scripts/install-deps.sh installs Open MPI)"
        ))
    })?;
    let json = serde_json::to_string(spec)
        .map_err(|source| BenchError::Json { what: format!("{name}: the rank spec"), source })?;
    let session = crate::peers::OmpiSession::new()?;
    let mut command = std::process::Command::new(&mpirun);
    session
        .apply(&mut command)
        .args(["-np", &spec.processes.to_string()])
        .arg(&workers.program)
        .args(&workers.args_prefix)
        .env_remove("LD_PRELOAD")
        .stdin(std::process::Stdio::null());
    if workers.spec_as_arg {
        command.arg(&json);
    } else {
        command.args(["-x", crate::WORKER_SPEC_ENV]).env(crate::WORKER_SPEC_ENV, &json);
    }
    let output =
        command.output().map_err(|e| BenchError::io("starting", &mpirun)(e).context(name.to_owned()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let failed = |problem: String| BenchError::Protocol { phase: name.to_owned(), problem };
    let Some(line) = stdout.lines().find_map(|line| line.strip_prefix(MPI_RESULT_PREFIX)) else {
        return Err(failed(format!(
            "{MPIRUN} exited {} with no result line; stderr:\n{stderr}",
            output.status
        )));
    };
    let outcomes: Vec<MpiOutcome> = serde_json::from_str(line)
        .map_err(|source| BenchError::Json { what: format!("{name}: the ranks' outcomes"), source })?;
    if let Some(error) = outcomes.iter().find_map(|outcome| outcome.error.clone()) {
        return Err(BenchError::Rank(format!("{name}: {error}")));
    }
    let results: Vec<RestartResult> = outcomes.into_iter().filter_map(|outcome| outcome.result).collect();
    if results.len() != spec.processes || !output.status.success() {
        return Err(failed(format!(
            "{MPIRUN} exited {} with {} of {} results; stderr:\n{stderr}",
            output.status,
            results.len(),
            spec.processes
        )));
    }
    let start_ns = results.iter().map(|r| r.began_ns).min().unwrap_or(0);
    Ok((start_ns, results))
}

/// Drops the page cache before a read; the first time it cannot, warns and
/// marks the run warm.
fn drop_cache(warm: &mut bool) {
    if drop_page_cache().is_err() && !*warm {
        *warm = true;
        eprintln!(
            "plfs bench restart: cannot drop the page cache (not root?): the reads are warm, and marked so"
        );
    }
}

/// One peer phase under mpirun, as the figures of the other targets. A
/// wrong value read is an error naming it, as is a phase that did not move
/// the whole file.
fn peer_phase(program: &PeerProgram, run: &PeerRun, op: PeerPhase, layout: &Layout) -> Result<PhaseFigures> {
    let result = program.run_phase(run, op)?;
    if result.bytes != layout.file_bytes() {
        return Err(BenchError::Data {
            what: format!("restart {} {} {}", program.peer, op.as_str(), run.decomp.as_str()),
            problem: format!("moved {} bytes, expected {}", result.bytes, layout.file_bytes()),
        });
    }
    Ok(PhaseFigures {
        target: program.peer.as_str().to_owned(),
        op: op.as_str().to_owned(),
        decomp: (op == PeerPhase::Read).then(|| run.decomp.as_str().to_owned()),
        processes: result.ranks,
        seconds: result.seconds,
        bytes: result.bytes,
        mibs: result.mibs(),
        open_seconds_max: None,
        max_rss_kib: result.max_rss_kib,
        cpu_ms_per_mib: None,
        faults_per_mib: None,
        switches_per_mib: None,
        slowest_split: None,
        bad_bytes: result.errors * 8,
        first_bad: None,
    })
}

#[allow(clippy::too_many_arguments)]
fn phase(
    spec: &RestartSpec,
    layout: &Layout,
    workers: &WorkerCommand,
    work: &Path,
    target: Target,
    op: Op,
    decomp: Decomp,
    processes: usize,
    back_memory_bytes: u64,
) -> Result<PhaseFigures> {
    let decomp_name = (op == Op::Read).then(|| decomp.as_str().to_owned());
    let name = match &decomp_name {
        Some(d) => format!("restart read {} {d} x{processes}", target.as_str()),
        None => format!("restart write {} x{processes}", target.as_str()),
    };
    let specs: Vec<RestartWorker> = (0..processes)
        .map(|rank| RestartWorker {
            layout: *layout,
            target,
            op,
            decomp,
            processes,
            rank,
            dir: work.to_path_buf(),
            backends: spec.backends,
            strategy: None,
            back_memory_bytes,
        })
        .collect();
    // Under a strategy the direct file's processes are ranks of an mpirun
    // too, started, clocked (from a barrier) and gathered as plfs's are,
    // so the two differ only in the library, not in how they are run.
    let (start_ns, results): (u64, Vec<RestartResult>) = match spec.strategy {
        Some(strategy) => {
            let rank0 = RestartWorker { strategy: Some(strategy.as_str().to_owned()), ..specs[0].clone() };
            run_mpi_phase(&name, workers, &rank0)?
        }
        _ => run_workers(&name, workers, &specs, &[])?,
    };
    let end_ns = results.iter().map(|r| r.end_ns).max().unwrap_or(start_ns).max(start_ns + 1);
    let bytes: u64 = results.iter().map(|r| r.bytes).sum();
    let bad_bytes: u64 = results.iter().map(|r| r.bad_bytes).sum();
    let expected = layout.file_bytes();
    if op == Op::Write && bytes != expected {
        return Err(BenchError::Data {
            what: name,
            problem: format!("wrote {bytes} bytes, expected {expected}"),
        });
    }
    let seconds = (end_ns - start_ns) as f64 / 1e9;
    Ok(PhaseFigures {
        target: target.as_str().to_owned(),
        op: op.as_str().to_owned(),
        decomp: decomp_name,
        processes,
        seconds,
        bytes,
        mibs: bytes as f64 / MIB / seconds,
        open_seconds_max: Some(results.iter().map(|r| r.open_ns).max().unwrap_or(0) as f64 / 1e9),
        max_rss_kib: results.iter().map(|r| r.max_rss_kib).max().unwrap_or(0),
        cpu_ms_per_mib: Some(
            results.iter().map(|r| r.cpu_ns).sum::<u64>() as f64 / 1e6 / (bytes.max(1) as f64 / MIB),
        ),
        faults_per_mib: Some(
            results.iter().map(|r| r.minor_faults).sum::<u64>() as f64 / (bytes.max(1) as f64 / MIB),
        ),
        switches_per_mib: Some(
            results.iter().map(|r| r.context_switches).sum::<u64>() as f64 / (bytes.max(1) as f64 / MIB),
        ),
        slowest_split: results.iter().max_by_key(|r| r.end_ns).map(|r| {
            let seconds = |ns: u64| ns as f64 / 1e9;
            let total = r.end_ns.saturating_sub(start_ns);
            ClockSplit {
                open: seconds(r.open_ns),
                io: seconds(r.io_ns),
                check: seconds(r.check_ns),
                other: seconds(total.saturating_sub(r.open_ns + r.io_ns + r.check_ns)),
            }
        }),
        // A read that came back short counts as wrong too.
        bad_bytes: bad_bytes + if op == Op::Read { expected.saturating_sub(bytes) } else { 0 },
        first_bad: results.iter().find_map(|r| r.first_bad.clone()),
    })
}

fn summarize(spec: &RestartSpec, layout: Layout, runs: Vec<Vec<PhaseFigures>>, warm: bool) -> RestartReport {
    let first = runs.first().cloned().unwrap_or_default();
    let find = |run: &[PhaseFigures], target: &str, op: &str, decomp: &Option<String>| {
        run.iter().find(|p| p.target == target && p.op == op && &p.decomp == decomp).cloned()
    };
    let uniform = Some(Decomp::Uniform.as_str().to_owned());
    let points = first
        .iter()
        .map(|point| {
            let same = |run: &Vec<PhaseFigures>| find(run, &point.target, &point.op, &point.decomp);
            let figure = |get: fn(&PhaseFigures) -> f64| {
                Spread::of(runs.iter().map(|run| same(run).map(|p| get(&p)))).unwrap_or(Spread {
                    median: 0.0,
                    min: 0.0,
                    max: 0.0,
                })
            };
            let is_plfs = point.target == Target::Plfs.as_str();
            let direct =
                |run: &Vec<PhaseFigures>| find(run, Target::DirectN1.as_str(), &point.op, &point.decomp);
            let ratio_vs = |other: &str| {
                is_plfs
                    .then(|| {
                        Spread::of(runs.iter().map(|run| {
                            Some(same(run)?.mibs / find(run, other, &point.op, &point.decomp)?.mibs)
                        }))
                    })
                    .flatten()
            };
            let ratio_vs_direct = ratio_vs(Target::DirectN1.as_str());
            let rss_over_direct_kib = (is_plfs && point.op == "read")
                .then(|| {
                    Spread::of(
                        runs.iter()
                            .map(|run| Some(same(run)?.max_rss_kib as f64 - direct(run)?.max_rss_kib as f64)),
                    )
                })
                .flatten();
            let ratio_vs_uniform =
                (is_plfs && point.op == "read")
                    .then(|| {
                        Spread::of(runs.iter().map(|run| {
                            Some(same(run)?.mibs / find(run, &point.target, "read", &uniform)?.mibs)
                        }))
                    })
                    .flatten();
            RestartPoint {
                target: point.target.clone(),
                op: point.op.clone(),
                decomp: point.decomp.clone(),
                processes: point.processes,
                mibs: figure(|p| p.mibs),
                open_seconds_max: Spread::of(
                    runs.iter().map(|run| same(run).and_then(|p| p.open_seconds_max)),
                ),
                max_rss_kib: figure(|p| p.max_rss_kib as f64),
                ratio_vs_direct,
                ratio_vs_adios: ratio_vs(Peer::Adios.as_str()),
                ratio_vs_hdf5: ratio_vs(Peer::Hdf5.as_str()),
                ratio_vs_uniform,
                rss_over_direct_kib,
            }
        })
        .collect();
    let (pattern, block) = match spec.pattern {
        Pattern::Strided { .. } => ("strided", None),
        Pattern::Pixie3d { block } => ("pixie3d", Some(block.as_str().to_owned())),
    };
    RestartReport {
        pattern: pattern.to_owned(),
        block,
        writers: spec.writers,
        layout,
        global: layout.global(),
        file_bytes: layout.file_bytes(),
        index_entries: (0..layout.writers()).map(|w| layout.writer_extents(w).len() as u64).sum(),
        backends: spec.backends,
        runs: runs.len(),
        warm,
        verified: runs.iter().flatten().all(|p| p.bad_bytes == 0),
        peers: Vec::new(),
        strategy: spec.strategy.map(|s| s.as_str().to_owned()),
        peer_notes: Vec::new(),
        points,
        phases: runs,
    }
}

impl RestartReport {
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let shape = match (self.layout, self.global) {
            (Layout::Strided { records, record_bytes, .. }, _) => {
                format!("{records} records x {record_bytes} B per writer, strided")
            }
            (Layout::Pixie3d { grid, block }, Some(global)) => format!(
                "pixie3d {}: {PIXIE3D_VARIABLES} variables of a {}x{}x{} f64 array, writer grid {}x{}x{}, \
                 block {}x{}x{}",
                self.block.as_deref().unwrap_or(""),
                global[0],
                global[1],
                global[2],
                grid[0],
                grid[1],
                grid[2],
                block[0],
                block[1],
                block[2]
            ),
            (Layout::Pixie3d { .. }, None) => "pixie3d".to_owned(),
        };
        let _ = writeln!(
            out,
            "restart: {} writers, {shape}; {} B ({:.1} MiB), {} plfs backends, {} run(s){}",
            self.writers,
            self.file_bytes,
            self.file_bytes as f64 / MIB,
            self.backends,
            self.runs,
            if self.warm {
                ", WARM page cache (not dropped)"
            } else {
                ", page cache dropped before each read and free memory backed (every reader of \
                 every target touches and frees its share, 1.5x the file in all, before its clock)"
            }
        );
        let spread = |s: &Spread, digits: usize| {
            if self.runs > 1 {
                format!("{:.*} ({:.*}..{:.*})", digits, s.median, digits, s.min, digits, s.max)
            } else {
                format!("{:.*}", digits, s.median)
            }
        };
        let optional =
            |s: &Option<Spread>, digits: usize| s.as_ref().map_or("-".to_owned(), |s| spread(s, digits));
        if let Some(strategy) = &self.strategy {
            let _ = writeln!(
                out,
                "plfs and direct: writers and readers are the ranks of one {MPIRUN} per phase; plfs's readers \
                 open with the {strategy} strategy inside their clock{}",
                if strategy == "flatten" { ", after the writers' flatten on close" } else { "" }
            );
        }
        for note in &self.peer_notes {
            let _ = writeln!(out, "{note}");
        }
        // The peers' ratio columns only when a peer ran.
        let peer_columns = |adios: String, hdf5: String| {
            if self.peers.is_empty() { String::new() } else { format!(" {adios:>14} {hdf5:>14}") }
        };
        let _ = writeln!(
            out,
            "{:<6} {:<10} {:<12} {:>5} {:>24} {:>14} {:>12} {:>14}{} {:>14}",
            "op",
            "target",
            "decomp",
            "procs",
            "MiB/s",
            "open s max",
            "peak RSS KiB",
            "plfs/direct",
            peer_columns("plfs/adios".to_owned(), "plfs/hdf5".to_owned()),
            "vs uniform"
        );
        for point in &self.points {
            let _ = writeln!(
                out,
                "{:<6} {:<10} {:<12} {:>5} {:>24} {:>14} {:>12} {:>14}{} {:>14}",
                point.op,
                point.target,
                point.decomp.as_deref().unwrap_or("-"),
                point.processes,
                spread(&point.mibs, 1),
                optional(&point.open_seconds_max, 4),
                spread(&point.max_rss_kib, 0),
                optional(&point.ratio_vs_direct, 2),
                peer_columns(optional(&point.ratio_vs_adios, 2), optional(&point.ratio_vs_hdf5, 2)),
                optional(&point.ratio_vs_uniform, 2)
            );
        }
        // CPU per MiB read, plfs against direct, median over the runs:
        // the library's own cost, apart from the disk and the load.
        let median = |target: &str, decomp: &Option<String>, figure: fn(&PhaseFigures) -> Option<f64>| {
            let mut values: Vec<f64> = self
                .phases
                .iter()
                .flatten()
                .filter(|p| p.target == target && p.op == "read" && &p.decomp == decomp)
                .filter_map(figure)
                .collect();
            values.sort_by(f64::total_cmp);
            values.get(values.len() / 2).copied()
        };
        let cpu = |target: &str, decomp: &Option<String>| median(target, decomp, |p| p.cpu_ms_per_mib);
        let faults = |target: &str, decomp: &Option<String>| median(target, decomp, |p| p.faults_per_mib);
        for point in self.points.iter().filter(|p| p.op == "read" && p.target == "plfs") {
            if let (Some(plfs), Some(direct)) = (cpu("plfs", &point.decomp), cpu("direct-n1", &point.decomp))
            {
                let _ = writeln!(
                    out,
                    "cpu {}: plfs readers {plfs:.2} ms per MiB, direct {direct:.2} ms per MiB",
                    point.decomp.as_deref().unwrap_or("")
                );
            }
            if let (Some(plfs), Some(direct)) =
                (faults("plfs", &point.decomp), faults("direct-n1", &point.decomp))
            {
                let _ = writeln!(
                    out,
                    "page faults {}: plfs readers {plfs:.1} per MiB, direct {direct:.1} per MiB",
                    point.decomp.as_deref().unwrap_or("")
                );
            }
        }
        // Where the slowest reader's clock went, median over the runs.
        let split = |target: &str, decomp: &Option<String>| {
            let mut splits: Vec<ClockSplit> = self
                .phases
                .iter()
                .flatten()
                .filter(|p| p.target == target && p.op == "read" && &p.decomp == decomp)
                .filter_map(|p| p.slowest_split)
                .collect();
            let mut median = |get: fn(&ClockSplit) -> f64| {
                splits.sort_by(|a, b| get(a).total_cmp(&get(b)));
                splits.get(splits.len() / 2).map_or(0.0, |s| get(s) * 1e3)
            };
            let shown = format!(
                "open {:.0}, read {:.0}, check {:.0}, other {:.0}",
                median(|s| s.open),
                median(|s| s.io),
                median(|s| s.check),
                median(|s| s.other)
            );
            (!splits.is_empty()).then_some(shown)
        };
        for point in self.points.iter().filter(|p| p.op == "read" && p.target == "plfs") {
            if let (Some(plfs), Some(direct)) =
                (split("plfs", &point.decomp), split("direct-n1", &point.decomp))
            {
                let _ = writeln!(
                    out,
                    "clock {} (slowest reader, ms): plfs {plfs}; direct {direct}",
                    point.decomp.as_deref().unwrap_or("")
                );
            }
        }
        let plfs_read = |decomp: &str| {
            self.points
                .iter()
                .find(|p| p.op == "read" && p.target == "plfs" && p.decomp.as_deref() == Some(decomp))
        };
        if let Some(ratio) = plfs_read("uniform").and_then(|p| p.ratio_vs_direct) {
            let _ = writeln!(out, "goal: plfs uniform restart >= 0.9x direct N-1: {:.2}x", ratio.median);
        }
        for decomp in ["half", "non-integer"] {
            if let Some(ratio) = plfs_read(decomp).and_then(|p| p.ratio_vs_uniform) {
                let _ = writeln!(out, "goal: plfs {decomp} >= 0.8x plfs uniform: {:.2}x", ratio.median);
            }
        }
        if self.peers.iter().any(|p| p == Peer::Adios.as_str()) {
            let ratios: Vec<(String, f64)> = self
                .points
                .iter()
                .filter_map(|p| {
                    let name =
                        format!("{} {}", p.op, p.decomp.as_deref().unwrap_or("")).trim_end().to_owned();
                    Some((name, p.ratio_vs_adios?.median))
                })
                .collect();
            let missed: Vec<String> =
                ratios.iter().filter(|(_, r)| *r < 1.0).map(|(name, r)| format!("{name} {r:.2}x")).collect();
            let lowest = ratios.iter().map(|(_, r)| *r).fold(f64::INFINITY, f64::min);
            let _ = writeln!(
                out,
                "goal: plfs >= ADIOS BP at every point: {} (lowest {lowest:.2}x{}{})",
                if missed.is_empty() { "met" } else { "NOT met" },
                if missed.is_empty() { "" } else { "; below at " },
                missed.join(", ")
            );
        }
        if let Some(over) =
            self.points.iter().filter_map(|p| p.rss_over_direct_kib.map(|s| s.max)).max_by(f64::total_cmp)
        {
            let peak = self
                .points
                .iter()
                .filter(|p| p.target == "plfs" && p.op == "read")
                .map(|p| p.max_rss_kib.max)
                .fold(0.0, f64::max);
            let _ = writeln!(
                out,
                "merged index: a plfs reader peaked at {peak:.0} KiB, at most {over:.0} KiB over a direct reader: \
                 {:.0} B per index entry ({} entries, each reader merges them all)",
                over.max(0.0) * 1024.0 / self.index_entries.max(1) as f64,
                self.index_entries
            );
        }
        for phase in self.phases.iter().flatten().filter(|p| p.bad_bytes > 0) {
            let _ = writeln!(
                out,
                "MISMATCH {} {} {}: {} bad bytes, first: {}",
                phase.op,
                phase.target,
                phase.decomp.as_deref().unwrap_or(""),
                phase.bad_bytes,
                phase.first_bad.as_deref().unwrap_or("?")
            );
        }
        let _ = writeln!(
            out,
            "verified: {}",
            if self.verified { "every byte read was what was written" } else { "MISMATCH" }
        );
        out
    }
}

#[cfg(test)]
pub(crate) fn execute_in_process(spec: RestartWorker) -> Result<RestartResult> {
    let mut prepared = prepare(spec)?;
    execute(&mut prepared, Start::At(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes the checkpoint both ways with in-process writers, flips one
    /// byte on disk (in the plain file, and in plfs's data log), and reads
    /// it back: the check must name the bad byte, the clean file must pass.
    fn corrupted_byte_is_found(layout: Layout, decomp: Decomp, readers: usize) {
        let root = tempfile::tempdir().unwrap();
        let work = root.path();
        for dir in plfs_backend_dirs(work, 1).into_iter().chain([work.join("direct")]) {
            std::fs::create_dir_all(dir).unwrap();
        }
        File::create(direct_path(work)).unwrap();
        let plfs = mount(work, 1, VerifyReads::default()).unwrap();
        plfs.open(RESTART_PATH, OpenFlags::WRONLY.create(), 0o644, 99).unwrap().close().unwrap();
        let worker = |target, op, decomp, processes, rank| RestartWorker {
            layout,
            target,
            op,
            decomp,
            processes,
            rank,
            dir: work.to_path_buf(),
            backends: 1,
            strategy: None,
            // A reader that backs memory first reads and checks the same.
            back_memory_bytes: if op == Op::Read { 1 << 20 } else { 0 },
        };
        let writers = layout.writers() as usize;
        for target in [Target::DirectN1, Target::Plfs] {
            for rank in 0..writers {
                execute_in_process(worker(target, Op::Write, Decomp::Uniform, writers, rank)).unwrap();
            }
        }
        let read_all = |target| {
            (0..readers)
                .map(|rank| execute_in_process(worker(target, Op::Read, decomp, readers, rank)).unwrap())
                .fold((0, 0, None), |(bytes, bad, first), r| {
                    (bytes + r.bytes, bad + r.bad_bytes, first.or(r.first_bad))
                })
        };
        for target in [Target::DirectN1, Target::Plfs] {
            assert_eq!(read_all(target), (layout.file_bytes(), 0, None), "{target:?} before corruption");
        }
        // The plain file: the byte 5 after the middle.
        let at = layout.file_bytes() / 2 + 5;
        flip(&direct_path(work), at);
        let (bytes, bad, first) = read_all(Target::DirectN1);
        assert_eq!((bytes, bad), (layout.file_bytes(), 1));
        let first = first.unwrap();
        assert!(first.contains(&format!("direct-n1 at offset {at} ")), "{first}");
        // plfs's only data log (one backend): a byte in its middle. With
        // CRC checks on whole reads plfs may refuse the read instead, which
        // is an error the bench reports, not a silent pass.
        let mut logs = Vec::new();
        find_data_logs(work, &mut logs);
        assert!(!logs.is_empty());
        let log = &logs[0];
        flip(log, std::fs::metadata(log).unwrap().len() / 2);
        let failed = (0..readers).any(|rank| {
            match execute_in_process(worker(Target::Plfs, Op::Read, decomp, readers, rank)) {
                Ok(result) => result.bad_bytes > 0,
                Err(_) => true,
            }
        });
        assert!(failed, "a flipped byte in {} went unnoticed", log.display());
    }

    fn flip(path: &Path, at: u64) {
        let file = OpenOptions::new().read(true).write(true).open(path).unwrap();
        let mut byte = [0u8; 1];
        file.read_exact_at(&mut byte, at).unwrap();
        file.write_all_at(&[byte[0] ^ 0x5a], at).unwrap();
    }

    fn find_data_logs(dir: &Path, found: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                find_data_logs(&path, found);
            } else if path.file_name().unwrap().to_string_lossy().starts_with("data.") {
                found.push(path);
            }
        }
    }

    #[test]
    fn a_corrupted_strided_byte_is_detected() {
        corrupted_byte_is_found(
            Layout::Strided { writers: 3, records: 4, record_bytes: 1001 },
            Decomp::Pieces,
            2,
        );
    }

    #[test]
    fn a_corrupted_pixie3d_value_is_detected() {
        corrupted_byte_is_found(Layout::Pixie3d { grid: [1, 1, 2], block: [4, 4, 4] }, Decomp::NonInteger, 3);
    }
}
