//! One benchmark process: writes or reads one rank's records of one phase.
//!
//! Protocol (all lines on the worker's stdout carry the [`MARKER`] prefix,
//! so a CLI or test harness may print anything else around them):
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
use std::io::{BufRead, Read, Write};
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
use crate::pattern::{fill_record, pattern_byte, verify_record};

/// Environment variable that carries the worker's JSON spec.
pub const WORKER_SPEC_ENV: &str = "PLFS_BENCH_WORKER_SPEC";

/// Prefix of every protocol line a worker prints.
pub const MARKER: &str = "PLFS-BENCH-";

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
    pub fn raw_dir(&self) -> Result<StorePath, String> {
        StorePath::root().join(&format!("{}-raw", self.run)).map_err(|e| format!("raw directory: {e}"))
    }

    /// The object `writer` streams its records into, and which of
    /// [`StoreRun::urls`] holds it: writers take the stores in turn, as
    /// plfs spreads its logs over them.
    pub fn raw_object(&self, writer: usize) -> Result<(usize, StorePath), String> {
        let path =
            self.raw_dir()?.join(&format!("object.{writer}")).map_err(|e| format!("raw object: {e}"))?;
        Ok((writer % self.urls.len().max(1), path))
    }
}

/// Opens a store by URL, every error naming the URL.
pub fn open_store_url(url: &str) -> Result<SharedStore, String> {
    // The parser's and the stores' own messages usually name it already.
    let named = |error: plfs::Error| {
        let message = error.to_string();
        if message.contains(url) { message } else { format!("backend {url}: {message}") }
    };
    let location = BackendLocation::parse(url).map_err(named)?;
    plfs::fs::open_store(&location).map_err(named)
}

/// A plfs mount over store URLs, as each worker process makes its own.
pub fn mount_stores(urls: &[String]) -> Result<Plfs, String> {
    let stores = urls
        .iter()
        .map(|url| open_store_url(url).map(|store| (store, BackendRole::Any)))
        .collect::<Result<Vec<_>, _>>()?;
    Plfs::new(stores, Options::from_environment(Tuning::default()))
        .map_err(|e| format!("mounting plfs over {}: {e}", urls.join(",")))
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
fn plain_target(spec: &WorkerSpec, source: usize) -> Result<(PathBuf, bool), String> {
    match spec.target {
        Target::DirectN1 => Ok((direct_path(&spec.dir), true)),
        Target::PlainNn => Ok((plain_nn_path(&spec.dir, source), false)),
        Target::Fuse => {
            let dir = spec.fuse_dir.as_deref().ok_or("fuse target without a mount directory")?;
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
        Target::Plfs | Target::RawNn => Err(format!("the {} target has no plain path", spec.target.as_str())),
        Target::Mpiio => Err("the mpiio target is run by mpirun, not by bench workers".to_owned()),
    }
}

/// A mount of the run's backend dirs, as each worker process makes its own.
pub fn mount(work: &Path, backends: usize, verify_reads: VerifyReads) -> Result<Plfs, String> {
    let mut stores: Vec<(SharedStore, BackendRole)> = Vec::with_capacity(backends);
    for dir in plfs_backend_dirs(work, backends) {
        let url = format!("posix://{}", dir.display());
        let store =
            PosixStore::new(dir.clone(), url).map_err(|e| format!("plfs backend {}: {e}", dir.display()))?;
        stores.push((Arc::new(store), BackendRole::Any));
    }
    let tuning = Tuning { verify_reads, ..Tuning::default() };
    Plfs::new(stores, Options::from_environment(tuning)).map_err(|e| format!("mounting plfs: {e}"))
}

pub fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
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
pub fn prepare(spec: WorkerSpec) -> Result<Prepared, String> {
    if spec.writers == 0 || spec.rank >= spec.writers {
        return Err(format!("worker rank {} of {} writers", spec.rank, spec.writers));
    }
    if spec.record_bytes == 0 {
        return Err("record size 0".to_owned());
    }
    let (mut plfs_mount, mut raw_store) = (None, None);
    match (spec.target, &spec.store) {
        (Target::Plfs, Some(store)) => plfs_mount = Some(mount_stores(&store.urls)?),
        (Target::Plfs, None) => plfs_mount = Some(mount(&spec.dir, spec.backends, spec.verify_reads)?),
        (Target::RawNn, Some(store)) => {
            let (index, _) = store.raw_object(source_rank(&spec))?;
            let url = store.urls.get(index).ok_or("raw-nn target without a store URL")?;
            raw_store = Some(open_store_url(url)?);
        }
        (Target::RawNn, None) => return Err("the raw-nn target needs store URLs".to_owned()),
        (Target::DirectN1 | Target::PlainNn | Target::Fuse | Target::Preload, _) => {}
        (Target::Mpiio, _) => {
            return Err("the mpiio target is run by mpirun, not by bench workers".to_owned());
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
pub fn execute(prepared: &mut Prepared, start_ns: u64) -> Result<WorkerResult, String> {
    wait_until(start_ns);
    let began_ns = now_ns();
    let spec = &prepared.spec;
    let source = source_rank(spec);
    let buf = prepared.buf.as_mut_slice();
    let mut checker = Checker::default();
    let mut written = 0u64;
    match (spec.op, spec.target) {
        (Op::Write, Target::Plfs) => {
            let plfs = prepared.mount.as_ref().ok_or("plfs target without a mount")?;
            let path = plfs_path(spec, source);
            let handle = plfs
                .open(&path, OpenFlags::WRONLY.create(), 0o644, spec.rank as u64)
                .map_err(|e| format!("plfs open {path} for writing: {e}"))?;
            for k in 0..spec.records {
                let (record, offset) = placement(spec, source, k);
                fill_record(record, buf);
                let count =
                    handle.write(buf, offset).map_err(|e| format!("plfs write {path} at {offset}: {e}"))?;
                if count != buf.len() {
                    return Err(format!("plfs write {path} at {offset}: {count} of {} bytes", buf.len()));
                }
                written += count as u64;
            }
            handle.sync().map_err(|e| format!("plfs sync {path}: {e}"))?;
            handle.close().map_err(|e| format!("plfs close {path}: {e}"))?;
        }
        (Op::Write, Target::RawNn) => {
            let (store, path) = raw_target(prepared.raw_store.as_ref(), spec, source)?;
            let what = format!("{}: {path}", store.url());
            let mut log = store.create_append(&path).map_err(|e| format!("create_append {what}: {e}"))?;
            for k in 0..spec.records {
                let (record, _) = placement(spec, source, k);
                fill_record(record, buf);
                log.append(buf).map_err(|e| format!("append {what}: {e}"))?;
                written += buf.len() as u64;
            }
            // As plfs does with its logs: sync, then close.
            log.sync().map_err(|e| format!("sync {what}: {e}"))?;
            log.close().map_err(|e| format!("close {what}: {e}"))?;
        }
        (Op::Read, Target::RawNn) => {
            let (store, path) = raw_target(prepared.raw_store.as_ref(), spec, source)?;
            let what = format!("{}: {path}", store.url());
            let handle = store.open_read(&path).map_err(|e| format!("open_read {what}: {e}"))?;
            for k in 0..spec.records {
                let (record, offset) = placement(spec, source, k);
                let filled = read_full_at(|into, at| handle.read_at(into, at), buf, offset)
                    .map_err(|e| format!("read_at {what} at {offset}: {e}"))?;
                checker.check(record, offset, buf, filled, &what);
            }
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
                    .map_err(|e| format!("open {}: {e}", path.display()))?;
                for k in 0..spec.records {
                    let (record, offset) = placement(spec, source, k);
                    fill_record(record, buf);
                    file.write_all_at(buf, offset)
                        .map_err(|e| format!("pwrite {} at {offset}: {e}", path.display()))?;
                    written += buf.len() as u64;
                }
                sync_and_close(file, &path)?;
            } else {
                let mut file = File::create(&path).map_err(|e| format!("create {}: {e}", path.display()))?;
                for k in 0..spec.records {
                    let (record, _) = placement(spec, source, k);
                    fill_record(record, buf);
                    file.write_all(buf).map_err(|e| format!("write {}: {e}", path.display()))?;
                    written += buf.len() as u64;
                }
                sync_and_close(file, &path)?;
            }
        }
        (Op::Read, Target::Plfs) => {
            let plfs = prepared.mount.as_ref().ok_or("plfs target without a mount")?;
            let path = plfs_path(spec, source);
            let handle = plfs
                .open(&path, OpenFlags::RDONLY, 0, spec.rank as u64)
                .map_err(|e| format!("plfs open {path}: {e}"))?;
            for k in 0..spec.records {
                let (record, offset) = placement(spec, source, k);
                let filled = read_full_at(|into, at| handle.read(into, at), buf, offset)
                    .map_err(|e| format!("plfs read {path}: {e}"))?;
                checker.check(record, offset, buf, filled, &path);
            }
            handle.close().map_err(|e| format!("plfs close {path}: {e}"))?;
        }
        (Op::Read, _) => {
            let (path, shared) = plain_target(spec, source)?;
            let mut file = File::open(&path).map_err(|e| format!("open {}: {e}", path.display()))?;
            let what = path.display().to_string();
            for k in 0..spec.records {
                let (record, offset) = placement(spec, source, k);
                let filled = if shared {
                    pread_full(&file, buf, offset).map_err(|e| format!("pread {what} at {offset}: {e}"))?
                } else {
                    read_full(&mut file, buf).map_err(|e| format!("read {what}: {e}"))?
                };
                checker.check(record, offset, buf, filled, &what);
            }
        }
    }
    let end_ns = now_ns();
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
) -> Result<(&'a SharedStore, StorePath), String> {
    let run = spec.store.as_ref().ok_or("raw-nn target without store URLs")?;
    let store = store.ok_or("raw-nn target without an open store")?;
    Ok((store, run.raw_object(source)?.1))
}

/// fdatasync, the call plfs makes on its data logs, so all three phases
/// pay for durability the same way.
fn sync_and_close(file: File, path: &Path) -> Result<(), String> {
    file.sync_data().map_err(|e| format!("fdatasync {}: {e}", path.display()))?;
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
pub fn worker_main(args: &[String]) -> Result<(), String> {
    let result = worker_protocol(args);
    if let Err(error) = &result {
        // The parent reads stdout only; a single line keeps the message whole.
        let line = error.replace('\n', " | ");
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{MARKER}ERROR {line}");
        let _ = out.flush();
    }
    result
}

fn worker_protocol(args: &[String]) -> Result<(), String> {
    let text = match args {
        [] => std::env::var(WORKER_SPEC_ENV)
            .map_err(|_| format!("bench worker: no spec argument and {WORKER_SPEC_ENV} is not set"))?,
        [one] => one.clone(),
        more => return Err(format!("bench worker: expected one JSON spec argument, got {}", more.len())),
    };
    let spec: WorkerSpec =
        serde_json::from_str(&text).map_err(|e| format!("bench worker spec {text:?}: {e}"))?;
    let rank = spec.rank;
    let mut prepared = prepare(spec)?;
    emit(&format!("{MARKER}READY {rank}"))?;
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| format!("bench worker {rank}: reading GO: {e}"))?;
    let start_ns =
        line.trim().strip_prefix("GO ").and_then(|n| n.parse::<u64>().ok()).ok_or_else(|| {
            format!("bench worker {rank}: expected \"GO <unix-ns>\" on stdin, got {line:?}")
        })?;
    let result = execute(&mut prepared, start_ns)?;
    let json =
        serde_json::to_string(&result).map_err(|e| format!("bench worker {rank}: encoding result: {e}"))?;
    emit(&format!("{MARKER}RESULT {json}"))
}

fn emit(line: &str) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush()).map_err(|e| format!("bench worker stdout: {e}"))
}
