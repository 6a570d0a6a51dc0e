//! One benchmark process: writes or reads one rank's records of one phase.
//!
//! Protocol (its lines are encoded and parsed by [`crate::protocol`]):
//!
//! 1. The parent starts the worker with a [`WorkerSpec`] as JSON, either as
//!    the single argument after the subcommand or in [`WORKER_SPEC_ENV`].
//! 2. The worker does everything that is not being measured (mounting plfs,
//!    allocating its record buffer) and prints `PLFS-BENCH-READY <rank>`.
//! 3. The parent, once every worker is ready, writes `GO <unix-ns>` on each
//!    worker's stdin: a common start instant a little in the future.
//! 4. The worker sleeps until that instant, runs the phase (open, I/O,
//!    fdatasync, close), and prints `PLFS-BENCH-RESULT <json>` (a
//!    [`WorkerResult`]), or `PLFS-BENCH-ERROR <message>` on failure.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use plfs::config::{BackendLocation, BackendRole, Tuning, VerifyReads};
use plfs::fs::{Options, Plfs};
use plfs::open::OpenFlags;
use plfs::store::posix::PosixStore;
use plfs::store::{SharedStore, StorePath};
use serde::{Deserialize, Serialize};

use crate::Workload;
use crate::error::{BenchError, Result};
use crate::pattern::{fill_record, pattern_byte, verify_record};
use crate::protocol::{self, Channel, NoPhase, Order, Report};

/// Environment variable that carries the worker's JSON spec.
pub const WORKER_SPEC_ENV: &str = "PLFS_BENCH_WORKER_SPEC";

/// What a phase writes to or reads from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// Through the plfs library over posix backend dirs.
    Plfs,
    /// One shared plain file, every rank at its own offsets.
    DirectN1,
    /// One plain file per rank, written sequentially.
    PlainNn,
    /// The plfs file through a FUSE mount: like `DirectN1` (or `PlainNn`
    /// for the nn workload), but under the mount.
    Fuse,
    /// Plain std::fs calls under a plfs mount point that does not exist on
    /// disk, in a worker started with libplfs_preload.so in LD_PRELOAD:
    /// the interposer turns them into libplfs.so calls.
    Preload,
    /// An MPI-IO program under mpirun, with libplfs_mpiio.so and the
    /// interposer preloaded; the runner starts it, not a bench worker.
    Mpiio,
    /// The same MPI-IO program and mpirun on a plain shared file, nothing
    /// preloaded: what MPI-IO itself costs on this machine, the ceiling of
    /// any file reached through it (the `mpiio` target's companion).
    MpiioPlain,
    /// The raw store, no plfs: each rank streams its records into one
    /// object of its own with `Store::create_append` / `append` / `sync` /
    /// `close`, and reads one back with `open_read` / `read_at`. On HDFS
    /// and S3 that is the client library itself (the stores are thin over
    /// it), the N-N streaming baseline plfs is held against.
    RawNn,
}

impl Target {
    pub fn as_str(self) -> &'static str {
        match self {
            Target::Plfs => "plfs",
            Target::DirectN1 => "direct-n1",
            Target::PlainNn => "nn",
            Target::Fuse => "fuse",
            Target::Preload => "preload",
            Target::Mpiio => "mpiio",
            Target::MpiioPlain => "mpiio-plain",
            Target::RawNn => "raw-nn",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    Write,
    Read,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Write => "write",
            Op::Read => "read",
        }
    }
}

/// Everything one worker process needs; sent as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerSpec {
    pub workload: Workload,
    pub target: Target,
    pub op: Op,
    pub rank: usize,
    pub writers: usize,
    pub records: u64,
    pub record_bytes: usize,
    /// The run's work directory (holds plfs/, direct/ and nn/).
    pub dir: PathBuf,
    pub backends: usize,
    /// The run's directory inside a plfs FUSE mount, for the `Fuse` target.
    #[serde(default)]
    pub fuse_dir: Option<PathBuf>,
    /// Store URLs instead of posix dirs under `dir` (which is then unused),
    /// for the `Plfs` and `RawNn` targets of the store benchmark.
    #[serde(default)]
    pub store: Option<StoreRun>,
    /// plfsrc `verify_reads` of the worker's mount.
    #[serde(default)]
    pub verify_reads: VerifyReads,
}

/// Where a store benchmark phase runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreRun {
    /// The plfs mount's backends, in order (`posix:///…`, `hdfs://…`,
    /// `s3://…`); the raw objects are spread over the same stores.
    pub urls: Vec<String>,
    /// The run's directory name at the root of every store: plfs writes
    /// under `/<run>/`, the raw phases under `<run>-raw/`.
    pub run: String,
}

impl StoreRun {
    /// The logical plfs path of `writer`'s records.
    pub fn plfs_path(&self, workload: Workload, writer: usize) -> String {
        format!("/{}{}", self.run, plfs_logical_path(workload, writer))
    }

    /// The raw directory, at the root of every store.
    pub fn raw_dir(&self) -> Result<StorePath> {
        let name = format!("{}-raw", self.run);
        StorePath::root().join(&name).map_err(BenchError::plfs("naming the raw directory", name))
    }

    /// The object `writer` streams its records into, and which of
    /// [`StoreRun::urls`] holds it: writers take the stores in turn, as
    /// plfs spreads its logs over them.
    pub fn raw_object(&self, writer: usize) -> Result<(usize, StorePath)> {
        let name = format!("object.{writer}");
        let path = self.raw_dir()?.join(&name).map_err(BenchError::plfs("naming the raw object", name))?;
        Ok((writer % self.urls.len().max(1), path))
    }
}

/// Opens a store by URL, every error naming the URL.
pub fn open_store_url(url: &str) -> Result<SharedStore> {
    let named = |source| BenchError::Store { url: url.to_owned(), source };
    let location = BackendLocation::parse(url).map_err(named)?;
    plfs::fs::open_store(&location).map_err(named)
}

/// A plfs mount over store URLs, as each worker process makes its own.
pub fn mount_stores(urls: &[String]) -> Result<Plfs> {
    let stores = urls
        .iter()
        .map(|url| open_store_url(url).map(|store| (store, BackendRole::Any)))
        .collect::<Result<Vec<_>, _>>()?;
    Plfs::new(stores, Options::from_environment(Tuning::default()))
        .map_err(BenchError::plfs("mounting plfs over", urls.join(",")))
}

/// What a worker reports back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerResult {
    pub rank: usize,
    /// When the worker actually began, after the barrier (unix ns).
    pub began_ns: u64,
    /// When the last close returned (unix ns).
    pub end_ns: u64,
    /// Bytes written, or bytes read back (short reads not counted).
    pub bytes: u64,
    pub records: u64,
    /// Records read back that did not match the pattern.
    pub bad_records: u64,
    /// The first mismatch, described.
    pub first_bad: Option<String>,
    /// CPU time (user + system, all threads) the worker spent from the
    /// barrier to its last close: on a shared, loaded machine this moves
    /// far less than wall time, so small costs (checking CRCs) show.
    /// 0 when the worker cannot tell (the MPI-IO program).
    #[serde(default)]
    pub cpu_ns: u64,
    /// When the open returned (unix ns), and when the last record's I/O
    /// did (before any sync and the close): they split the rank's clock
    /// into open, I/O and sync+close. 0 when the worker did not tell.
    #[serde(default)]
    pub opened_ns: u64,
    #[serde(default)]
    pub io_done_ns: u64,
}

/// Where a rank's `k`-th record goes: its global record index (which
/// decides its bytes) and its offset in the file the target writes.
pub fn placement(spec: &WorkerSpec, writer: usize, k: u64) -> (u64, u64) {
    let (writers, records, size) = (spec.writers as u64, spec.records, spec.record_bytes as u64);
    let writer = writer as u64;
    let record = match spec.workload {
        Workload::N1Strided => k * writers + writer,
        Workload::N1Segmented | Workload::Nn => writer * records + k,
    };
    let own_file = matches!(spec.target, Target::PlainNn | Target::RawNn)
        || (matches!(spec.target, Target::Plfs | Target::Fuse | Target::Preload | Target::Mpiio)
            && spec.workload == Workload::Nn);
    let offset = if own_file { k * size } else { record * size };
    (record, offset)
}

/// Whose records a rank handles: its own when writing; when reading, the
/// next rank's ("shifted", as LANL's checkpoint benchmark reads back), so
/// no reader reads what it has just written itself.
pub fn source_rank(spec: &WorkerSpec) -> usize {
    match spec.op {
        Op::Write => spec.rank,
        Op::Read => (spec.rank + 1) % spec.writers.max(1),
    }
}

pub fn plfs_backend_dirs(work: &Path, backends: usize) -> Vec<PathBuf> {
    (0..backends).map(|i| work.join("plfs").join(format!("b{i}"))).collect()
}

/// The logical plfs path a writer's records live in.
pub fn plfs_logical_path(workload: Workload, writer: usize) -> String {
    match workload {
        Workload::Nn => format!("/nn.{writer}"),
        Workload::N1Strided | Workload::N1Segmented => "/checkpoint".to_owned(),
    }
}

/// Backend dirs of an interface that gets a plfs mount of its own
/// (`preload`, `mpiio`), so it never shares a container with `lib`.
pub fn interface_backend_dirs(work: &Path, target: Target, backends: usize) -> Vec<PathBuf> {
    (0..backends).map(|i| work.join(target.as_str()).join(format!("b{i}"))).collect()
}

/// The mount point of such an interface's plfsrc. The preload one never
/// exists on disk (the interposer alone makes it a directory); the mpiio
/// one is created empty, because ROMIO and ompio statfs the file's
/// directory to pick their file-system driver.
pub fn interface_mount_point(work: &Path, target: Target) -> PathBuf {
    work.join(format!("{}-mnt", target.as_str()))
}

/// The plfsrc the runner writes for such an interface.
pub fn interface_plfsrc(work: &Path, target: Target) -> PathBuf {
    work.join(format!("{}.plfsrc", target.as_str()))
}

/// The file an N-1 phase shares, inside a directory (a FUSE mount or a
/// virtual mount point): one name for every plain-path target.
pub const SHARED_NAME: &str = "shared";

pub fn direct_path(work: &Path) -> PathBuf {
    work.join("direct").join("shared")
}

pub fn plain_nn_path(work: &Path, writer: usize) -> PathBuf {
    work.join("nn").join(format!("file.{writer}"))
}

/// The plain path a non-library target writes `source`'s records to, and
/// whether it is one file shared by every rank (written at offsets) or the
/// rank's own (written sequentially).
fn plain_target(spec: &WorkerSpec, source: usize) -> Result<(PathBuf, bool)> {
    match spec.target {
        Target::DirectN1 => Ok((direct_path(&spec.dir), true)),
        Target::PlainNn => Ok((plain_nn_path(&spec.dir, source), false)),
        Target::Fuse => {
            let dir = spec
                .fuse_dir
                .as_deref()
                .ok_or_else(|| BenchError::invalid("fuse target without a mount directory"))?;
            Ok(match spec.workload {
                Workload::Nn => (dir.join(format!("file.{source}")), false),
                Workload::N1Strided | Workload::N1Segmented => (dir.join(SHARED_NAME), true),
            })
        }
        Target::Preload => {
            let dir = interface_mount_point(&spec.dir, Target::Preload);
            Ok(match spec.workload {
                Workload::Nn => (dir.join(format!("file.{source}")), false),
                Workload::N1Strided | Workload::N1Segmented => (dir.join(SHARED_NAME), true),
            })
        }
        Target::Plfs | Target::RawNn => {
            Err(BenchError::invalid(format!("the {} target has no plain path", spec.target.as_str())))
        }
        Target::Mpiio | Target::MpiioPlain => Err(BenchError::invalid(format!(
            "the {} target is run by mpirun, not by bench workers",
            spec.target.as_str()
        ))),
    }
}

/// A mount of the run's backend dirs, as each worker process makes its own.
pub fn mount(work: &Path, backends: usize, verify_reads: VerifyReads) -> Result<Plfs> {
    let mut stores: Vec<(SharedStore, BackendRole)> = Vec::with_capacity(backends);
    for dir in plfs_backend_dirs(work, backends) {
        let url = format!("posix://{}", dir.display());
        let store = PosixStore::new(dir.clone(), url)
            .map_err(BenchError::plfs("plfs backend", dir.display().to_string()))?;
        stores.push((Arc::new(store), BackendRole::Any));
    }
    let tuning = Tuning { verify_reads, ..Tuning::default() };
    Plfs::new(stores, Options::from_environment(tuning))
        .map_err(BenchError::plfs("mounting plfs over", work.join("plfs").display().to_string()))
}

pub fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// CPU time this process has used so far, every thread (0 if unknown).
pub fn process_cpu_ns() -> u64 {
    let mut time = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec, which `time` is.
    if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut time) } != 0 {
        return 0;
    }
    time.tv_sec as u64 * 1_000_000_000 + time.tv_nsec as u64
}

/// Sleeps, then spins the last stretch, so every worker leaves the barrier
/// within scheduler latency of the common instant.
pub(crate) fn wait_until(instant_ns: u64) {
    loop {
        let now = now_ns();
        if now >= instant_ns {
            return;
        }
        let left = instant_ns - now;
        if left > 2_000_000 {
            std::thread::sleep(Duration::from_nanos(left - 1_000_000));
        } else {
            std::thread::yield_now();
        }
    }
}

/// A worker with its untimed set-up done.
pub struct Prepared {
    spec: WorkerSpec,
    buf: Vec<u8>,
    mount: Option<Plfs>,
    /// The store holding the raw object this rank writes or reads.
    raw_store: Option<SharedStore>,
}

/// Everything before the barrier: validation, the plfs mount (with its
/// thread pool) and the one record buffer the hot loop reuses.
pub fn prepare(spec: WorkerSpec) -> Result<Prepared> {
    if spec.writers == 0 || spec.rank >= spec.writers {
        return Err(BenchError::invalid(format!("worker rank {} of {} writers", spec.rank, spec.writers)));
    }
    if spec.record_bytes == 0 {
        return Err(BenchError::invalid("record size 0"));
    }
    let (mut plfs_mount, mut raw_store) = (None, None);
    match (spec.target, &spec.store) {
        (Target::Plfs, Some(store)) => plfs_mount = Some(mount_stores(&store.urls)?),
        (Target::Plfs, None) => plfs_mount = Some(mount(&spec.dir, spec.backends, spec.verify_reads)?),
        (Target::RawNn, Some(store)) => {
            let (index, _) = store.raw_object(source_rank(&spec))?;
            let url = store
                .urls
                .get(index)
                .ok_or_else(|| BenchError::invalid("raw-nn target without a store URL"))?;
            raw_store = Some(open_store_url(url)?);
        }
        (Target::RawNn, None) => return Err(BenchError::invalid("the raw-nn target needs store URLs")),
        (Target::DirectN1 | Target::PlainNn | Target::Fuse | Target::Preload, _) => {}
        (Target::Mpiio | Target::MpiioPlain, _) => {
            return Err(BenchError::invalid(format!(
                "the {} target is run by mpirun, not by bench workers",
                spec.target.as_str()
            )));
        }
    }
    let buf = vec![0u8; spec.record_bytes];
    Ok(Prepared { spec, buf, mount: plfs_mount, raw_store })
}

/// Tallies read-back mismatches.
#[derive(Default)]
struct Checker {
    bad_records: u64,
    first_bad: Option<String>,
    bytes: u64,
}

impl Checker {
    fn check(&mut self, record: u64, offset: u64, buf: &[u8], filled: usize, what: &str) {
        if filled < buf.len() {
            self.bad(format!(
                "{what}: record {record} at offset {offset}: short read, {filled} of {} bytes",
                buf.len()
            ));
            return;
        }
        self.bytes += buf.len() as u64;
        if let Err(position) = verify_record(record, buf) {
            self.bad(format!(
                "{what}: record {record} at offset {offset}: byte {position} is {:#04x}, expected {:#04x}",
                buf[position],
                pattern_byte(record, position)
            ));
        }
    }

    fn bad(&mut self, message: String) {
        self.bad_records += 1;
        self.first_bad.get_or_insert(message);
    }
}

/// Runs the phase from the barrier on; the clock stops when the last
/// close returns (after fdatasync, for writes).
pub fn execute(prepared: &mut Prepared, start_ns: u64) -> Result<WorkerResult> {
    wait_until(start_ns);
    let began_ns = now_ns();
    let began_cpu_ns = process_cpu_ns();
    let spec = &prepared.spec;
    let source = source_rank(spec);
    let buf = prepared.buf.as_mut_slice();
    let mut checker = Checker::default();
    let mut written = 0u64;
    // Set in every arm: after its open, and after its last record's I/O.
    let (opened_ns, io_done_ns): (u64, u64);
    match (spec.op, spec.target) {
        (Op::Write, Target::Plfs) => {
            let plfs =
                prepared.mount.as_ref().ok_or_else(|| BenchError::invalid("plfs target without a mount"))?;
            let path = plfs_path(spec, source);
            let handle = plfs
                .open(&path, OpenFlags::WRONLY.create(), 0o644, spec.rank as u64)
                .map_err(BenchError::plfs("plfs open for writing", path.as_str()))?;
            opened_ns = now_ns();
            for k in 0..spec.records {
                let (record, offset) = placement(spec, source, k);
                fill_record(record, buf);
                let at = || format!("{path} at {offset}");
                let count = handle.write(buf, offset).map_err(BenchError::plfs("plfs write", at()))?;
                if count != buf.len() {
                    let expected = buf.len();
                    return Err(BenchError::Short { doing: "plfs write", target: at(), count, expected });
                }
                written += count as u64;
            }
            io_done_ns = now_ns();
            handle.sync().map_err(BenchError::plfs("plfs sync", path.as_str()))?;
            handle.close().map_err(BenchError::plfs("plfs close", path.as_str()))?;
        }
        (Op::Write, Target::RawNn) => {
            let (store, path) = raw_target(prepared.raw_store.as_ref(), spec, source)?;
            let what = format!("{}: {path}", store.url());
            let mut log =
                store.create_append(&path).map_err(BenchError::plfs("create_append", what.as_str()))?;
            opened_ns = now_ns();
            for k in 0..spec.records {
                let (record, _) = placement(spec, source, k);
                fill_record(record, buf);
                log.append(buf).map_err(BenchError::plfs("append", what.as_str()))?;
                written += buf.len() as u64;
            }
            io_done_ns = now_ns();
            // As plfs does with its logs: sync, then close.
            log.sync().map_err(BenchError::plfs("sync", what.as_str()))?;
            log.close().map_err(BenchError::plfs("close", what.as_str()))?;
        }
        (Op::Read, Target::RawNn) => {
            let (store, path) = raw_target(prepared.raw_store.as_ref(), spec, source)?;
            let what = format!("{}: {path}", store.url());
            let handle = store.open_read(&path).map_err(BenchError::plfs("open_read", what.as_str()))?;
            opened_ns = now_ns();
            for k in 0..spec.records {
                let (record, offset) = placement(spec, source, k);
                let filled = read_full_at(|into, at| handle.read_at(into, at), buf, offset)
                    .map_err(BenchError::plfs("read_at", format!("{what} at {offset}")))?;
                checker.check(record, offset, buf, filled, &what);
            }
            io_done_ns = now_ns();
        }
        (Op::Write, _) => {
            let (path, shared) = plain_target(spec, source)?;
            if shared {
                // Not truncating: the parent made the file and other ranks
                // are writing into it already.
                let file = OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(&path)
                    .map_err(BenchError::io("open", &path))?;
                opened_ns = now_ns();
                for k in 0..spec.records {
                    let (record, offset) = placement(spec, source, k);
                    fill_record(record, buf);
                    file.write_all_at(buf, offset).map_err(|source| BenchError::IoAt {
                        doing: "pwrite",
                        path: path.clone(),
                        offset,
                        source,
                    })?;
                    written += buf.len() as u64;
                }
                io_done_ns = now_ns();
                sync_and_close(file, &path)?;
            } else {
                let mut file = File::create(&path).map_err(BenchError::io("create", &path))?;
                opened_ns = now_ns();
                for k in 0..spec.records {
                    let (record, _) = placement(spec, source, k);
                    fill_record(record, buf);
                    file.write_all(buf).map_err(BenchError::io("write", &path))?;
                    written += buf.len() as u64;
                }
                io_done_ns = now_ns();
                sync_and_close(file, &path)?;
            }
        }
        (Op::Read, Target::Plfs) => {
            let plfs =
                prepared.mount.as_ref().ok_or_else(|| BenchError::invalid("plfs target without a mount"))?;
            let path = plfs_path(spec, source);
            let handle = plfs
                .open(&path, OpenFlags::RDONLY, 0, spec.rank as u64)
                .map_err(BenchError::plfs("plfs open", path.as_str()))?;
            opened_ns = now_ns();
            for k in 0..spec.records {
                let (record, offset) = placement(spec, source, k);
                let filled = read_full_at(|into, at| handle.read(into, at), buf, offset)
                    .map_err(BenchError::plfs("plfs read", path.as_str()))?;
                checker.check(record, offset, buf, filled, &path);
            }
            io_done_ns = now_ns();
            handle.close().map_err(BenchError::plfs("plfs close", path.as_str()))?;
        }
        (Op::Read, _) => {
            let (path, shared) = plain_target(spec, source)?;
            let mut file = File::open(&path).map_err(BenchError::io("open", &path))?;
            opened_ns = now_ns();
            let what = path.display().to_string();
            for k in 0..spec.records {
                let (record, offset) = placement(spec, source, k);
                let filled = if shared {
                    pread_full(&file, buf, offset).map_err(|source| BenchError::IoAt {
                        doing: "pread",
                        path: path.clone(),
                        offset,
                        source,
                    })?
                } else {
                    read_full(&mut file, buf).map_err(BenchError::io("read", &path))?
                };
                checker.check(record, offset, buf, filled, &what);
            }
            io_done_ns = now_ns();
            drop(file);
        }
    }
    let end_ns = now_ns();
    let cpu_ns = process_cpu_ns().saturating_sub(began_cpu_ns);
    let bytes = match spec.op {
        Op::Write => written,
        Op::Read => checker.bytes,
    };
    Ok(WorkerResult {
        rank: spec.rank,
        began_ns,
        end_ns,
        bytes,
        records: spec.records,
        bad_records: checker.bad_records,
        first_bad: checker.first_bad,
        cpu_ns,
        opened_ns,
        io_done_ns,
    })
}

/// The logical path a plfs phase uses: in the run's directory on stores,
/// at the mount's root over the run's posix dirs.
fn plfs_path(spec: &WorkerSpec, source: usize) -> String {
    match &spec.store {
        Some(store) => store.plfs_path(spec.workload, source),
        None => plfs_logical_path(spec.workload, source),
    }
}

fn raw_target<'a>(
    store: Option<&'a SharedStore>,
    spec: &WorkerSpec,
    source: usize,
) -> Result<(&'a SharedStore, StorePath)> {
    let run = spec.store.as_ref().ok_or_else(|| BenchError::invalid("raw-nn target without store URLs"))?;
    let store = store.ok_or_else(|| BenchError::invalid("raw-nn target without an open store"))?;
    Ok((store, run.raw_object(source)?.1))
}

/// fdatasync, the call plfs makes on its data logs, so all three phases
/// pay for durability the same way.
fn sync_and_close(file: File, path: &Path) -> Result<()> {
    file.sync_data().map_err(BenchError::io("fdatasync", path))?;
    drop(file);
    Ok(())
}

/// Fills as much of `buf` from `offset` as the file or object has, with a
/// positional `read` (a plfs handle's or a store's `read_at`). Both read
/// short only at the end, so the loop is needed only to tell "short" from
/// "done".
fn read_full_at(
    mut read: impl FnMut(&mut [u8], u64) -> Result<usize, plfs::Error>,
    buf: &mut [u8],
    offset: u64,
) -> Result<usize, plfs::Error> {
    let mut filled = 0;
    while filled < buf.len() {
        let count = read(&mut buf[filled..], offset + filled as u64)?;
        if count == 0 {
            break;
        }
        filled += count;
    }
    Ok(filled)
}

fn pread_full(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read_at(&mut buf[filled..], offset + filled as u64) {
            Ok(0) => break,
            Ok(count) => filled += count,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(filled)
}

pub(crate) fn read_full(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(count) => filled += count,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(filled)
}

/// Entry point of a worker process (`plfs bench-worker <json>`). With no
/// arguments the spec is taken from [`WORKER_SPEC_ENV`], which is how a
/// test binary re-executed as a worker gets it.
pub fn worker_main(args: &[String]) -> Result<()> {
    let result = worker_protocol(args);
    if let Err(error) = &result {
        let _ = protocol::send_report::<WorkerResult>(Channel::Bench, &Report::Error(error.to_string()));
    }
    result
}

fn worker_protocol(args: &[String]) -> Result<()> {
    let text = match args {
        [] => std::env::var(WORKER_SPEC_ENV).map_err(|_| {
            BenchError::invalid(format!("bench worker: no spec argument and {WORKER_SPEC_ENV} is not set"))
        })?,
        [one] => one.clone(),
        more => {
            return Err(BenchError::invalid(format!(
                "bench worker: expected one JSON spec argument, got {}",
                more.len()
            )));
        }
    };
    let spec: WorkerSpec = serde_json::from_str(&text)
        .map_err(|source| BenchError::Json { what: format!("bench worker spec {text:?}"), source })?;
    let rank = spec.rank;
    let mut prepared = prepare(spec)?;
    protocol::send_report::<WorkerResult>(Channel::Bench, &Report::Ready { rank })?;
    let worker = format!("bench worker {rank}");
    let start_ns = match protocol::receive_order::<NoPhase>(&mut std::io::stdin().lock(), false, &worker)? {
        Some(Order::Go { start_ns, .. }) => start_ns,
        // Order::parse never gives EXIT to the bench's unphased protocol.
        Some(Order::Exit) | None => {
            let problem = "stdin closed before GO".to_owned();
            return Err(BenchError::Protocol { phase: worker, problem });
        }
    };
    let result = execute(&mut prepared, start_ns)?;
    protocol::send_report(Channel::Bench, &Report::Result(result))
}
