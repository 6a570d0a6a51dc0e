//! An mdtest-style metadata benchmark: N processes each create (create,
//! write a few bytes, close), stat, read (open, read the bytes back and
//! check them, close) and remove F files in ONE logical directory, phase
//! by phase, every phase timed between barriers. The
//! paper's federated metadata (§5) spreads that directory's metadata over
//! K backends, each its own metadata server; [`MdTarget`] says what the
//! directory is: plain files in one directory (the baseline), an n-n mount
//! over K backends, containers (n-1) over K backends, or a 1-n
//! (small_file) mount over K backends. Each plfs target runs through every
//! asked [`MdInterface`]: the library in each worker, or plain syscalls on
//! a mount point under the LD_PRELOAD interposer or on a FUSE mount served
//! by `plfs mount --foreground` (a daemon of its own, stopped by its pid).
//!
//! On one node the page cache serves metadata at memory speed, so spreading
//! it hides nothing; with a service time each backend directory gets an
//! emulated metadata server of its own ([`MetadataServer`], one lock file
//! per backend), so K backends are K servers, and `direct` gets one.
//!
//! Protocol ([`crate::protocol`]): the parent starts one worker process
//! per rank (`plfs bench-worker mdtest <json>`); each mounts, prints
//! `PLFS-MDTEST-READY <rank>`, then for each phase reads `GO <unix-ns>
//! <phase>` on stdin, waits for that instant, runs the phase and prints
//! `PLFS-MDTEST-RESULT <json>` (or `PLFS-MDTEST-ERROR <message>`); `EXIT`
//! ends it. Between phases the parent checks the directory (untimed).

use std::ffi::OsString;
use std::fmt::{self, Write as _};
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use plfs::config::{BackendRole, Tuning, Workload as MountWorkload, plfsrc};
use plfs::fs::{Options, Plfs};
use plfs::open::OpenFlags;
use plfs::store::SharedStore;
use plfs::store::posix::PosixStore;
use serde::{Deserialize, Serialize};

use crate::WorkerCommand;
use crate::error::{BenchError, Result};
use crate::metadata_server::{MetadataServer, MetadataServerStore};
use crate::protocol::{self, Channel, Event, Order, Phase, Report};
use crate::runner::WorkDir;
use crate::spread::Spread;
use crate::worker::{now_ns, wait_until};

/// First argument of `plfs bench-worker` that routes to [`worker_main`].
pub const MDTEST_WORKER_ARG: &str = "mdtest";

/// The one logical directory every rank works in.
const DIR_NAME: &str = "mdtest";
const READY_TIMEOUT: Duration = Duration::from_secs(120);
const PHASE_TIMEOUT: Duration = Duration::from_secs(3600);
const GO_DELAY: Duration = Duration::from_millis(100);
/// How long `plfs mount --foreground` may take to mount, and to unmount
/// and exit once sent SIGTERM.
const FUSE_START_TIMEOUT: Duration = Duration::from_secs(20);
const FUSE_STOP_TIMEOUT: Duration = Duration::from_secs(60);
const FUSE_POLL: Duration = Duration::from_millis(20);

/// What the benchmark's directory is. Adding a layout is one arm in
/// [`Namespace::open`] (and its name here).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MdTarget {
    /// Plain files in one directory of one file system (the baseline).
    #[serde(rename = "direct")]
    Direct,
    /// A plfs n-n (file_per_proc) mount over K backends: one plain file
    /// per logical file, on the backend its name hashes to.
    #[serde(rename = "n-n")]
    FilePerProc,
    /// A plfs 1-n (small_file) mount over K backends.
    #[serde(rename = "1-n")]
    SmallFile,
    /// A plfs n-1 (shared_file) mount: one container per file.
    #[serde(rename = "shared-file")]
    SharedFile,
}

impl MdTarget {
    /// Every target, in the order they run.
    pub const ALL: [MdTarget; 4] =
        [MdTarget::Direct, MdTarget::FilePerProc, MdTarget::SmallFile, MdTarget::SharedFile];

    pub fn as_str(self) -> &'static str {
        match self {
            MdTarget::Direct => "direct",
            MdTarget::FilePerProc => "n-n",
            MdTarget::SmallFile => "1-n",
            MdTarget::SharedFile => "shared-file",
        }
    }

    /// Runs over K backends (direct is one directory whatever K is).
    pub(crate) fn federated(self) -> bool {
        self != MdTarget::Direct
    }
}

impl fmt::Display for MdTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for MdTarget {
    type Err = BenchError;

    fn from_str(text: &str) -> Result<MdTarget> {
        MdTarget::ALL.into_iter().find(|t| t.as_str() == text).ok_or_else(|| {
            BenchError::invalid(format!(
                "unknown mdtest workload {text:?} (expected direct, n-n, 1-n, shared-file or all)"
            ))
        })
    }
}

/// How a plfs target's workers reach plfs (`--interface`; the names are
/// those of `plfs bench n1-strided --interface`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MdInterface {
    /// `Plfs` calls in each worker process.
    #[serde(rename = "lib")]
    Library,
    /// Plain syscalls on the mount point under LD_PRELOAD=libplfs_preload.so.
    #[serde(rename = "preload")]
    Preload,
    /// Plain syscalls on a FUSE mount (`plfs mount --foreground`).
    #[serde(rename = "fuse")]
    Fuse,
}

impl MdInterface {
    pub const ALL: [MdInterface; 3] = [MdInterface::Library, MdInterface::Preload, MdInterface::Fuse];

    pub fn as_str(self) -> &'static str {
        match self {
            MdInterface::Library => "lib",
            MdInterface::Preload => "preload",
            MdInterface::Fuse => "fuse",
        }
    }
}

impl fmt::Display for MdInterface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for MdInterface {
    type Err = BenchError;

    fn from_str(text: &str) -> Result<MdInterface> {
        MdInterface::ALL.into_iter().find(|i| i.as_str() == text).ok_or_else(|| {
            BenchError::invalid(format!("unknown mdtest interface {text:?} (expected lib, preload or fuse)"))
        })
    }
}

/// One case: a target through one interface (none for direct) over K
/// backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct MdCase {
    target: MdTarget,
    interface: Option<MdInterface>,
    backends: usize,
}

impl MdCase {
    fn name(&self) -> String {
        match self.interface {
            None => format!("mdtest {}", self.target),
            Some(interface) => format!("mdtest {} {interface} K={}", self.target, self.backends),
        }
    }

    fn dir_name(&self) -> String {
        match self.interface {
            None => self.target.as_str().to_owned(),
            Some(interface) => format!("{}-{interface}-k{}", self.target, self.backends),
        }
    }
}

/// One `plfs bench mdtest` run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MdtestSpec {
    pub procs: usize,
    /// Files per process.
    pub files: usize,
    /// The K values each federated target runs with.
    pub backends: Vec<usize>,
    pub targets: Vec<MdTarget>,
    /// The interfaces each plfs target runs through.
    pub interfaces: Vec<MdInterface>,
    /// libplfs_preload.so, for [`MdInterface::Preload`].
    pub preload: Option<PathBuf>,
    /// Where the run's files go (a fresh subdirectory).
    pub dir: PathBuf,
    /// Service time of the emulated metadata servers; zero: none.
    pub mds_service: Duration,
    /// `-o` options of the FUSE cases' mounts (e.g. `attr_timeout=10`),
    /// as `plfs mount -o` takes them; none: the mount's defaults.
    pub fuse_options: Option<String>,
    pub keep: bool,
}

impl MdtestSpec {
    /// Every case in the order they run: each target, each interface, each K.
    fn cases(&self) -> Vec<MdCase> {
        let mut cases = Vec::new();
        for &target in &self.targets {
            if !target.federated() {
                cases.push(MdCase { target, interface: None, backends: 1 });
                continue;
            }
            for &interface in &self.interfaces {
                cases.extend(self.backends.iter().map(|&backends| MdCase {
                    target,
                    interface: Some(interface),
                    backends,
                }));
            }
        }
        cases
    }

    fn validate(&self) -> Result<()> {
        if self.procs == 0 || self.files == 0 {
            return Err(BenchError::invalid("mdtest: --procs and --files must be positive"));
        }
        if self.targets.is_empty() {
            return Err(BenchError::invalid("mdtest: no workload to run"));
        }
        if self.backends.is_empty() || self.backends.contains(&0) {
            return Err(BenchError::invalid("mdtest: --backends must list positive counts"));
        }
        if self.interfaces.is_empty() {
            return Err(BenchError::invalid("mdtest: --interface lists no interface"));
        }
        if self.interfaces.contains(&MdInterface::Preload) && self.preload.is_none() {
            return Err(BenchError::invalid("mdtest: the preload interface needs libplfs_preload.so"));
        }
        // The emulated servers wrap the stores of a library mount; the
        // interposer and the FUSE daemon open their own from the plfsrc.
        if !self.mds_service.is_zero() && self.interfaces.iter().any(|i| *i != MdInterface::Library) {
            return Err(BenchError::invalid(
                "mdtest: --mds-service-us emulates servers inside the library's stores; \
                 run it with --interface lib only",
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MdPhase {
    Create,
    Stat,
    Read,
    Remove,
}

impl MdPhase {
    pub const ALL: [MdPhase; 4] = [MdPhase::Create, MdPhase::Stat, MdPhase::Read, MdPhase::Remove];

    pub fn as_str(self) -> &'static str {
        match self {
            MdPhase::Create => "create",
            MdPhase::Stat => "stat",
            MdPhase::Read => "read",
            MdPhase::Remove => "remove",
        }
    }
}

impl Phase for MdPhase {
    fn as_str(self) -> &'static str {
        MdPhase::as_str(self)
    }

    fn parse(word: &str) -> Option<MdPhase> {
        MdPhase::ALL.into_iter().find(|phase| phase.as_str() == word)
    }
}

/// Everything one worker needs; sent as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MdWorkerSpec {
    pub target: MdTarget,
    /// None: the direct target's plain directory.
    pub interface: Option<MdInterface>,
    pub rank: usize,
    pub procs: usize,
    pub files: usize,
    /// The case's directory: backend dirs b0..b{K-1} and their lock files.
    pub case_dir: PathBuf,
    pub backends: usize,
    pub mds_service_us: u64,
}

/// One rank's phase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MdWorkerResult {
    pub rank: usize,
    pub phase: MdPhase,
    pub began_ns: u64,
    pub end_ns: u64,
    pub ops: u64,
    /// Requests the emulated metadata servers served (0 without them).
    pub server_ops: u64,
    /// Stats or reads that failed or found the wrong size or bytes.
    pub bad: u64,
    pub first_bad: Option<String>,
}

/// The name rank `rank`'s `i`-th file has in the directory.
fn file_name(rank: usize, i: usize) -> String {
    format!("f.{rank}.{i}")
}

/// The few bytes that file holds (so its size tells it apart).
fn contents(rank: usize, i: usize) -> Vec<u8> {
    format!("mdtest {rank} {i}\n").into_bytes()
}

fn backend_dirs(case_dir: &Path, backends: usize) -> Vec<PathBuf> {
    (0..backends).map(|i| case_dir.join(format!("b{i}"))).collect()
}

/// Beside its backend dir, not in it, so it never shows in a listing.
fn lock_path(backend_dir: &Path) -> PathBuf {
    backend_dir.with_extension("mds.lock")
}

/// The mount point of a preload or FUSE case's plfsrc. Only FUSE makes it
/// a directory on disk; under the interposer it exists for plfs alone.
fn mount_point(case_dir: &Path) -> PathBuf {
    case_dir.join("mnt")
}

fn plfsrc_path(case_dir: &Path) -> PathBuf {
    case_dir.join("plfsrc")
}

/// Writes the plfsrc a preload or FUSE case mounts: `target`'s workload
/// over the case's backend dirs, no layout (as the library's mount).
fn write_plfsrc(case_dir: &Path, target: MdTarget, backends: usize) -> Result<PathBuf> {
    let workload = match target {
        MdTarget::FilePerProc => "file_per_proc",
        MdTarget::SmallFile => "small_file",
        MdTarget::SharedFile => "shared_file",
        MdTarget::Direct => return Err(BenchError::invalid("the direct target has no plfs mount")),
    };
    let mut text = format!(
        "- mount_point: {}\n  workload: {workload}\n  default_layout: none\n  backends:\n",
        mount_point(case_dir).display()
    );
    for dir in backend_dirs(case_dir, backends) {
        let _ = writeln!(text, "    - location: posix://{}", dir.display());
    }
    let path = plfsrc_path(case_dir);
    fs::write(&path, text).map_err(BenchError::io("writing", &path))?;
    Ok(path)
}

/// The directory as one process sees it.
enum Namespace {
    /// Plain syscalls on `dir`: the direct target's directory, or one on a
    /// plfs mount point (under the interposer or FUSE); every metadata call
    /// queues at `server`.
    Plain { dir: PathBuf, server: Option<Arc<MetadataServer>> },
    /// `servers`: one per backend when emulated, else none.
    Plfs { plfs: Plfs, servers: Vec<Arc<MetadataServer>> },
}

impl Namespace {
    /// A worker's view of its case. `service`: each backend behind its own
    /// emulated metadata server (the library alone).
    fn open(spec: &MdWorkerSpec, service: Duration) -> Result<Namespace> {
        match spec.interface {
            Some(MdInterface::Preload | MdInterface::Fuse) => {
                Ok(Namespace::Plain { dir: mount_point(&spec.case_dir).join(DIR_NAME), server: None })
            }
            None | Some(MdInterface::Library) => {
                Namespace::open_library(spec.target, &spec.case_dir, spec.backends, service)
            }
        }
    }

    /// The parent's view for its untimed checks: the library, opened as the
    /// workers open it (from the plfsrc for preload and FUSE), no servers.
    fn checker(case: &MdCase, case_dir: &Path) -> Result<Namespace> {
        match case.interface {
            Some(MdInterface::Preload | MdInterface::Fuse) => {
                let path = plfsrc_path(case_dir);
                let name = path.display().to_string();
                let config = plfsrc::parse_file(&path).map_err(BenchError::plfs("reading", name.as_str()))?;
                let mount =
                    config.mounts.first().ok_or_else(|| BenchError::invalid(format!("{name}: no mount")))?;
                let plfs = Plfs::from_config(mount, Options::from_environment(config.tuning.clone()))
                    .map_err(BenchError::plfs("mounting", name))?;
                Ok(Namespace::Plfs { plfs, servers: Vec::new() })
            }
            None | Some(MdInterface::Library) => {
                Namespace::open_library(case.target, case_dir, case.backends, Duration::ZERO)
            }
        }
    }

    /// `servers`: each backend behind its own emulated metadata server.
    fn open_library(
        target: MdTarget,
        case_dir: &Path,
        backends: usize,
        service: Duration,
    ) -> Result<Namespace> {
        let dirs = backend_dirs(case_dir, backends);
        let server = |dir: &Path| -> Result<Option<Arc<MetadataServer>>> {
            if service.is_zero() {
                return Ok(None);
            }
            MetadataServer::new(&lock_path(dir), service)
                .map(Some)
                .map_err(BenchError::plfs("starting the metadata server of", dir.display().to_string()))
        };
        let workload = match target {
            MdTarget::Direct => {
                let dir = dirs.first().ok_or_else(|| BenchError::invalid("direct needs a directory"))?;
                return Ok(Namespace::Plain { dir: dir.join(DIR_NAME), server: server(dir)? });
            }
            MdTarget::FilePerProc => MountWorkload::FilePerProc,
            MdTarget::SharedFile => MountWorkload::SharedFile,
            MdTarget::SmallFile => MountWorkload::SmallFile,
        };
        let mut stores: Vec<(SharedStore, BackendRole)> = Vec::with_capacity(backends);
        let mut servers = Vec::new();
        for dir in &dirs {
            let url = format!("posix://{}", dir.display());
            let mut store: SharedStore = Arc::new(
                PosixStore::new(dir.clone(), url)
                    .map_err(BenchError::plfs("backend", dir.display().to_string()))?,
            );
            if let Some(server) = server(dir)? {
                servers.push(server.clone());
                store = Arc::new(MetadataServerStore::new(store, server));
            }
            stores.push((store, BackendRole::Any));
        }
        Plfs::with_workload(stores, Options::from_environment(Tuning::default()), workload)
            .map(|plfs| Namespace::Plfs { plfs, servers })
            .map_err(BenchError::plfs("mounting", format!("{target} over {backends} backends")))
    }

    /// Requests this process's emulated servers have served so far.
    fn served(&self) -> u64 {
        match self {
            Namespace::Plain { server, .. } => server.as_ref().map_or(0, |s| s.served()),
            Namespace::Plfs { servers, .. } => servers.iter().map(|s| s.served()).sum(),
        }
    }

    fn serve(&self) {
        if let Namespace::Plain { server: Some(server), .. } = self {
            server.serve();
        }
    }

    fn create(&self, name: &str, bytes: &[u8], writer: u64) -> Result<()> {
        match self {
            Namespace::Plain { dir, .. } => {
                let path = dir.join(name);
                self.serve();
                // O_CREAT|O_TRUNC, as mdtest's creat(2) and the library
                // case below: no O_EXCL lookup. (Under the interposer on a
                // small_file mount such a lookup caches the directory's
                // view mid-phase, and a name seen there before its writer
                // closed keeps its old size until a refresh: README,
                // close-to-open on small_file.)
                let mut file = fs::File::create(&path).map_err(BenchError::io("create", &path))?;
                file.write_all(bytes).map_err(BenchError::io("write", &path))
            }
            Namespace::Plfs { plfs, .. } => {
                let path = format!("/{DIR_NAME}/{name}");
                let handle = plfs
                    // O_TRUNC: on small_file mounts a create record with no
                    // lookup (as cp does); the same as O_CREAT for new names.
                    .open(&path, OpenFlags::WRONLY.create().truncate(), 0o644, writer)
                    .map_err(BenchError::plfs("plfs create", path.as_str()))?;
                let count = handle.write(bytes, 0).map_err(BenchError::plfs("plfs write", path.as_str()))?;
                handle.close().map_err(BenchError::plfs("plfs close", path.as_str()))?;
                if count != bytes.len() {
                    let expected = bytes.len();
                    return Err(BenchError::Short { doing: "plfs write", target: path, count, expected });
                }
                Ok(())
            }
        }
    }

    fn size(&self, name: &str) -> Result<u64> {
        match self {
            Namespace::Plain { dir, .. } => {
                let path = dir.join(name);
                self.serve();
                fs::metadata(&path).map(|m| m.len()).map_err(BenchError::io("stat", &path))
            }
            Namespace::Plfs { plfs, .. } => {
                let path = format!("/{DIR_NAME}/{name}");
                plfs.stat(&path).map(|attr| attr.size).map_err(BenchError::plfs("plfs stat", path))
            }
        }
    }

    /// Opens `name`, reads it whole and closes it; Some(problem) when its
    /// bytes are not `expected`.
    fn read_back(&self, name: &str, expected: &[u8], buf: &mut [u8], writer: u64) -> Result<Option<String>> {
        // One byte more than expected, so a longer file shows.
        let buf = &mut buf[..expected.len() + 1];
        let count = match self {
            Namespace::Plain { dir, .. } => {
                let path = dir.join(name);
                self.serve();
                let mut file = fs::File::open(&path).map_err(BenchError::io("open", &path))?;
                let mut count = 0;
                while count < buf.len() {
                    match file.read(&mut buf[count..]).map_err(BenchError::io("read", &path))? {
                        0 => break,
                        n => count += n,
                    }
                }
                count
            }
            Namespace::Plfs { plfs, .. } => {
                let path = format!("/{DIR_NAME}/{name}");
                let handle = plfs
                    .open(&path, OpenFlags::RDONLY, 0, writer)
                    .map_err(BenchError::plfs("plfs open", path.as_str()))?;
                let count = handle.read(buf, 0).map_err(BenchError::plfs("plfs read", path.as_str()))?;
                handle.close().map_err(BenchError::plfs("plfs close", path.as_str()))?;
                count
            }
        };
        Ok((&buf[..count] != expected).then(|| {
            format!(
                "{name}: read {:?}, expected {:?}",
                String::from_utf8_lossy(&buf[..count]),
                String::from_utf8_lossy(expected)
            )
        }))
    }

    fn remove(&self, name: &str) -> Result<()> {
        match self {
            Namespace::Plain { dir, .. } => {
                let path = dir.join(name);
                self.serve();
                fs::remove_file(&path).map_err(BenchError::io("unlink", &path))
            }
            Namespace::Plfs { plfs, .. } => {
                let path = format!("/{DIR_NAME}/{name}");
                plfs.unlink(&path).map_err(BenchError::plfs("plfs unlink", path))
            }
        }
    }

    /// The directory's names (untimed checks; not behind the servers when
    /// opened with no service time).
    fn list(&self) -> Result<Vec<String>> {
        match self {
            Namespace::Plain { dir, .. } => fs::read_dir(dir)
                .and_then(|entries| {
                    entries.map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned())).collect()
                })
                .map_err(BenchError::io("listing", dir)),
            Namespace::Plfs { plfs, .. } => {
                let dir = format!("/{DIR_NAME}");
                // Small-file mounts show other processes' changes after an
                // invalidate (a no-op on other workloads).
                plfs.invalidate_read_cache(&dir)
                    .map_err(BenchError::plfs("plfs invalidate", dir.as_str()))?;
                plfs.readdir(&dir)
                    .map(|entries| entries.into_iter().map(|e| e.name).collect())
                    .map_err(BenchError::plfs("plfs readdir", dir))
            }
        }
    }

    fn make_dir(&self) -> Result<()> {
        match self {
            Namespace::Plain { dir, .. } => fs::create_dir_all(dir).map_err(BenchError::io("creating", dir)),
            Namespace::Plfs { plfs, .. } => {
                let dir = format!("/{DIR_NAME}");
                plfs.mkdir(&dir, 0o755).map_err(BenchError::plfs("plfs mkdir", dir))
            }
        }
    }
}

/// One phase of one rank, from the barrier on.
fn run_worker_phase(
    spec: &MdWorkerSpec,
    namespace: &Namespace,
    phase: MdPhase,
    start_ns: u64,
) -> Result<MdWorkerResult> {
    wait_until(start_ns);
    let served_before = namespace.served();
    let began_ns = now_ns();
    let (mut bad, mut first_bad) = (0u64, None);
    // Stats look at the next rank's files, so each checks what another
    // process made.
    let stat_rank = (spec.rank + 1) % spec.procs;
    // Reused by every read: no allocation per file beyond its name.
    let mut buf = [0u8; 64];
    for i in 0..spec.files {
        match phase {
            MdPhase::Create => {
                namespace.create(&file_name(spec.rank, i), &contents(spec.rank, i), spec.rank as u64)?
            }
            MdPhase::Stat => {
                let expected = contents(stat_rank, i).len() as u64;
                let problem = match namespace.size(&file_name(stat_rank, i)) {
                    Ok(size) if size == expected => None,
                    Ok(size) => {
                        Some(format!("{}: size {size}, expected {expected}", file_name(stat_rank, i)))
                    }
                    Err(error) => Some(error.to_string()),
                };
                if let Some(problem) = problem {
                    bad += 1;
                    first_bad.get_or_insert(problem);
                }
            }
            MdPhase::Read => {
                let name = file_name(stat_rank, i);
                let problem =
                    match namespace.read_back(&name, &contents(stat_rank, i), &mut buf, spec.rank as u64) {
                        Ok(problem) => problem,
                        Err(error) => Some(error.to_string()),
                    };
                if let Some(problem) = problem {
                    bad += 1;
                    first_bad.get_or_insert(problem);
                }
            }
            MdPhase::Remove => namespace.remove(&file_name(spec.rank, i))?,
        }
    }
    Ok(MdWorkerResult {
        rank: spec.rank,
        phase,
        began_ns,
        end_ns: now_ns(),
        ops: spec.files as u64,
        server_ops: namespace.served() - served_before,
        bad,
        first_bad,
    })
}

/// Entry point of `plfs bench-worker mdtest <json>` (the arguments after
/// [`MDTEST_WORKER_ARG`]).
pub fn worker_main(args: &[String]) -> Result<()> {
    let result = worker_protocol(args);
    if let Err(error) = &result {
        let _ = protocol::send_report::<MdWorkerResult>(Channel::Mdtest, &Report::Error(error.to_string()));
    }
    result
}

fn worker_protocol(args: &[String]) -> Result<()> {
    let [json] = args else {
        return Err(BenchError::invalid(format!(
            "mdtest worker: expected one JSON spec argument, got {}",
            args.len()
        )));
    };
    let spec: MdWorkerSpec = serde_json::from_str(json)
        .map_err(|source| BenchError::Json { what: format!("mdtest worker spec {json:?}"), source })?;
    if spec.rank >= spec.procs {
        return Err(BenchError::invalid(format!("mdtest worker rank {} of {}", spec.rank, spec.procs)));
    }
    let service = Duration::from_micros(spec.mds_service_us);
    let namespace = Namespace::open(&spec, service)?;
    protocol::send_report::<MdWorkerResult>(Channel::Mdtest, &Report::Ready { rank: spec.rank })?;
    let mut stdin = std::io::stdin().lock();
    loop {
        let order =
            protocol::receive_order::<MdPhase>(&mut stdin, true, &format!("mdtest worker {}", spec.rank))?;
        let (start_ns, phase) = match order {
            None | Some(Order::Exit) => return Ok(()),
            Some(Order::Go { start_ns, phase: Some(phase) }) => (start_ns, phase),
            // Order::parse gives every phased GO its phase; kept an error, not a panic.
            Some(Order::Go { phase: None, .. }) => {
                let problem = "GO without a phase".to_owned();
                return Err(BenchError::Protocol { phase: format!("mdtest worker {}", spec.rank), problem });
            }
        };
        let result = run_worker_phase(&spec, &namespace, phase, start_ns)?;
        // Untimed, before the parent checks the backends: a container
        // mount deletes removed files' pieces after unlink returns.
        if let Namespace::Plfs { plfs, .. } = &namespace {
            plfs.finish_removals();
        }
        protocol::send_report(Channel::Mdtest, &Report::Result(result))?;
    }
}

/// One phase's figures: total operations over the time from the common
/// start to the last rank's end.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MdPhaseReport {
    pub phase: MdPhase,
    pub ops: u64,
    pub seconds: f64,
    pub ops_per_sec: f64,
    /// Backend metadata requests per file operation, counted at the
    /// emulated servers (0 without them).
    pub server_ops_per_op: f64,
    /// How late the last rank left the barrier.
    pub max_start_lag_ms: f64,
}

/// One target through one interface over K backends.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MdCaseReport {
    pub target: MdTarget,
    /// None (null) for direct, the plain directory.
    pub interface: Option<MdInterface>,
    pub backends: usize,
    pub creates_per_sec: f64,
    pub stats_per_sec: f64,
    pub reads_per_sec: f64,
    pub removes_per_sec: f64,
    pub phases: Vec<MdPhaseReport>,
    /// Every file was there with its size after create, and none after remove.
    pub verified: bool,
    pub problems: Vec<String>,
}

/// One run of every case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MdtestReport {
    pub procs: usize,
    pub files_per_proc: usize,
    pub mds_service_us: u64,
    pub cases: Vec<MdCaseReport>,
    pub verified: bool,
}

impl MdCaseReport {
    fn rate(&self, phase: MdPhase) -> f64 {
        match phase {
            MdPhase::Create => self.creates_per_sec,
            MdPhase::Stat => self.stats_per_sec,
            MdPhase::Read => self.reads_per_sec,
            MdPhase::Remove => self.removes_per_sec,
        }
    }
}

/// A case's rates over the runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MdCaseSummary {
    pub target: MdTarget,
    pub interface: Option<MdInterface>,
    pub backends: usize,
    pub creates_per_sec: Spread,
    pub stats_per_sec: Spread,
    pub reads_per_sec: Spread,
    pub removes_per_sec: Spread,
    /// This case's rate / the direct target's in the same run, per phase
    /// (create, stat, read, remove); None when direct did not run.
    pub ratio_to_direct: Option<[Spread; 4]>,
    /// Backend metadata requests per create, stat, read and remove,
    /// counted at the emulated servers in the first run (zeros without
    /// them).
    pub server_ops_per_op: [f64; 4],
    pub verified: bool,
}

impl MdCaseSummary {
    pub fn rate(&self, phase: MdPhase) -> Spread {
        match phase {
            MdPhase::Create => self.creates_per_sec,
            MdPhase::Stat => self.stats_per_sec,
            MdPhase::Read => self.reads_per_sec,
            MdPhase::Remove => self.removes_per_sec,
        }
    }

    /// "n-n preload", or "direct".
    pub fn label(&self) -> String {
        match self.interface {
            None => self.target.as_str().to_owned(),
            Some(interface) => format!("{} {interface}", self.target),
        }
    }
}

/// What `plfs bench mdtest` prints: medians (with ranges) over the runs,
/// and every run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MdtestSummary {
    pub procs: usize,
    pub files_per_proc: usize,
    pub mds_service_us: u64,
    pub repeat: usize,
    pub verified: bool,
    pub cases: Vec<MdCaseSummary>,
    pub runs: Vec<MdtestReport>,
}

impl MdtestSummary {
    pub fn new(runs: Vec<MdtestReport>) -> MdtestSummary {
        let first = runs.first();
        let mut cases = Vec::new();
        if let Some(first) = first {
            let zero = Spread { median: 0.0, min: 0.0, max: 0.0 };
            for (index, case) in first.cases.iter().enumerate() {
                let of = |phase: MdPhase| {
                    Spread::of(runs.iter().map(|run| run.cases.get(index).map(|c| c.rate(phase))))
                        .unwrap_or(zero)
                };
                // Against the direct case of the same run, which ran
                // minutes (not runs) away from this one.
                let ratio = |phase: MdPhase| {
                    Spread::of(runs.iter().map(|run| {
                        let direct = run.cases.iter().find(|c| c.target == MdTarget::Direct)?;
                        let rate = run.cases.get(index)?.rate(phase);
                        (direct.rate(phase) > 0.0).then(|| rate / direct.rate(phase))
                    }))
                };
                let ratios = MdPhase::ALL.map(ratio);
                cases.push(MdCaseSummary {
                    target: case.target,
                    interface: case.interface,
                    backends: case.backends,
                    creates_per_sec: of(MdPhase::Create),
                    stats_per_sec: of(MdPhase::Stat),
                    reads_per_sec: of(MdPhase::Read),
                    removes_per_sec: of(MdPhase::Remove),
                    ratio_to_direct: match ratios {
                        [Some(c), Some(s), Some(r), Some(m)] => Some([c, s, r, m]),
                        _ => None,
                    },
                    server_ops_per_op: MdPhase::ALL.map(|phase| {
                        case.phases.iter().find(|p| p.phase == phase).map_or(0.0, |p| p.server_ops_per_op)
                    }),
                    verified: runs.iter().all(|run| run.cases.get(index).is_some_and(|c| c.verified)),
                });
            }
        }
        MdtestSummary {
            procs: first.map_or(0, |r| r.procs),
            files_per_proc: first.map_or(0, |r| r.files_per_proc),
            mds_service_us: first.map_or(0, |r| r.mds_service_us),
            repeat: runs.len(),
            verified: !runs.is_empty() && runs.iter().all(|r| r.verified),
            cases,
            runs,
        }
    }

    pub fn to_text(&self) -> String {
        let mut text = String::new();
        let server = match self.mds_service_us {
            0 => "no emulated metadata server".to_owned(),
            us => format!("one emulated metadata server per backend, {us} us per op"),
        };
        let _ = writeln!(
            text,
            "mdtest: {} processes x {} files in one directory ({}); {}",
            self.procs,
            self.files_per_proc,
            server,
            match self.repeat {
                1 => "1 run".to_owned(),
                n => format!("median of {n} runs [min-max]"),
            }
        );
        let width = if self.repeat == 1 { 8 } else { 20 };
        let _ = writeln!(
            text,
            "{:<20} {:>3} {:>width$} {:>width$} {:>width$} {:>width$}  {:<23}  verified{}",
            "target interface",
            "K",
            "creates/s",
            "stats/s",
            "reads/s",
            "removes/s",
            "x direct c/s/r/rm",
            if self.mds_service_us > 0 { "  server requests per create/stat/read/remove" } else { "" }
        );
        let cell = |s: Spread| {
            if self.repeat == 1 {
                format!("{:.0}", s.median)
            } else {
                format!("{:.0} [{:.0}-{:.0}]", s.median, s.min, s.max)
            }
        };
        for case in &self.cases {
            let ratios = match (&case.ratio_to_direct, case.target) {
                (_, MdTarget::Direct) | (None, _) => "-".to_owned(),
                (Some(ratios), _) => {
                    ratios.iter().map(|r| format!("{:.2}", r.median)).collect::<Vec<_>>().join(" / ")
                }
            };
            let _ = writeln!(
                text,
                "{:<20} {:>3} {:>width$} {:>width$} {:>width$} {:>width$}  {:<23}  {:<8}{}",
                case.label(),
                case.backends,
                cell(case.creates_per_sec),
                cell(case.stats_per_sec),
                cell(case.reads_per_sec),
                cell(case.removes_per_sec),
                ratios,
                if case.verified { "yes" } else { "NO" },
                match self.mds_service_us {
                    0 => String::new(),
                    _ => {
                        let [c, s, r, m] = case.server_ops_per_op;
                        format!("  {c:.1} / {s:.1} / {r:.1} / {m:.1}")
                    }
                }
            );
        }
        for run in &self.runs {
            for case in run.cases.iter().filter(|c| !c.problems.is_empty()) {
                for problem in &case.problems {
                    let interface = case.interface.map_or(String::new(), |i| format!(" {i}"));
                    let _ =
                        writeln!(text, "problem: {}{interface} K={}: {problem}", case.target, case.backends);
                }
            }
        }
        text
    }
}

/// Runs every case of `spec` once.
pub fn run_mdtest(spec: &MdtestSpec, workers: &WorkerCommand) -> Result<MdtestReport> {
    spec.validate()?;
    if spec.cases().is_empty() {
        return Err(BenchError::invalid("mdtest: no workload that can run"));
    }
    fs::create_dir_all(&spec.dir).map_err(BenchError::io("creating", &spec.dir))?;
    let parent = fs::canonicalize(&spec.dir).map_err(BenchError::io("resolving", &spec.dir))?;
    let work = WorkDir::create(&parent, spec.keep)?;
    let mut cases = Vec::new();
    for case in spec.cases() {
        let case_dir = work.path().join(case.dir_name());
        cases.push(run_case(spec, workers, &case, &case_dir)?);
    }
    let verified = cases.iter().all(|c| c.verified);
    Ok(MdtestReport {
        procs: spec.procs,
        files_per_proc: spec.files,
        mds_service_us: spec.mds_service.as_micros() as u64,
        cases,
        verified,
    })
}

/// The case's processes; killed and reaped if the case fails.
struct Ranks {
    children: Vec<Child>,
    stdins: Vec<ChildStdin>,
}

impl Drop for Ranks {
    fn drop(&mut self) {
        self.stdins.clear();
        for child in &mut self.children {
            if let Ok(None) = child.try_wait() {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
    }
}

fn next_event(
    events: &Receiver<(usize, Event<MdWorkerResult>)>,
    deadline: Instant,
    what: &str,
) -> Result<(usize, Event<MdWorkerResult>)> {
    events.recv_timeout(deadline.saturating_duration_since(Instant::now())).map_err(|error| match error {
        RecvTimeoutError::Timeout => {
            BenchError::Timeout { phase: what.to_owned(), who: "ranks", doing: "busy" }
        }
        RecvTimeoutError::Disconnected => {
            BenchError::Protocol { phase: what.to_owned(), problem: "every rank's output closed".to_owned() }
        }
    })
}

fn run_case(
    spec: &MdtestSpec,
    command: &WorkerCommand,
    case: &MdCase,
    case_dir: &Path,
) -> Result<MdCaseReport> {
    let MdCase { target, interface, backends } = *case;
    let name = case.name();
    for dir in backend_dirs(case_dir, backends) {
        fs::create_dir_all(&dir).map_err(|e| BenchError::io("creating", &dir)(e).context(name.as_str()))?;
    }
    let mut environment: Vec<(&str, OsString)> = Vec::new();
    if let Some(MdInterface::Preload | MdInterface::Fuse) = interface {
        let plfsrc = write_plfsrc(case_dir, target, backends).map_err(|e| e.context(name.as_str()))?;
        if interface == Some(MdInterface::Preload) {
            let preload = spec.preload.clone().ok_or_else(|| BenchError::invalid("no libplfs_preload.so"))?;
            // Only the workers get the interposer, not this process.
            environment.push(("LD_PRELOAD", preload.into_os_string()));
            environment.push(("PLFSRC", plfsrc.into_os_string()));
        }
    }
    // The parent's own view: no servers, so its checks cost no queueing.
    let checker = Namespace::checker(case, case_dir).map_err(|e| e.context(name.as_str()))?;
    checker.make_dir().map_err(|e| e.context(name.as_str()))?;
    // Mounted after the directory is made, so the daemon starts on the
    // case as its workers find it; unmounted when this drops (also when
    // the case fails).
    let daemon = match interface {
        Some(MdInterface::Fuse) => Some(
            FuseDaemon::start(command, case_dir, spec.fuse_options.as_deref())
                .map_err(|e| e.context(name.as_str()))?,
        ),
        _ => None,
    };
    let protocol_error = |problem: String| BenchError::Protocol { phase: name.clone(), problem };

    let (sender, events) = mpsc::channel();
    let mut ranks = Ranks { children: Vec::new(), stdins: Vec::new() };
    for rank in 0..spec.procs {
        let worker = MdWorkerSpec {
            target,
            interface,
            rank,
            procs: spec.procs,
            files: spec.files,
            case_dir: case_dir.to_path_buf(),
            backends,
            mds_service_us: spec.mds_service.as_micros() as u64,
        };
        let json = serde_json::to_string(&worker)
            .map_err(|source| BenchError::Json { what: format!("{name}: encoding spec"), source })?;
        let mut child = Command::new(&command.program)
            .args(&command.args_prefix)
            .arg(MDTEST_WORKER_ARG)
            .arg(&json)
            .envs(environment.iter().map(|(key, value)| (key, value)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|source| BenchError::Spawn {
                phase: name.clone(),
                rank,
                program: command.program.clone(),
                source,
            })?;
        let stdout =
            child.stdout.take().ok_or_else(|| protocol_error(format!("rank {rank} has no stdout")))?;
        ranks
            .stdins
            .push(child.stdin.take().ok_or_else(|| protocol_error(format!("rank {rank} has no stdin")))?);
        ranks.children.push(child);
        let sender = sender.clone();
        std::thread::spawn(move || {
            protocol::forward::<MdWorkerResult>(Channel::Mdtest, rank, stdout, sender)
        });
    }
    drop(sender);

    let deadline = Instant::now() + READY_TIMEOUT;
    let mut ready = vec![false; spec.procs];
    while ready.iter().any(|r| !r) {
        match next_event(&events, deadline, &name)? {
            (rank, Event::Report(Report::Ready { rank: said })) if said == rank => ready[rank] = true,
            (rank, Event::Report(Report::Ready { rank: said })) => {
                return Err(protocol_error(format!("rank {rank} said it was rank {said}")));
            }
            (rank, Event::Report(Report::Error(message))) => {
                return Err(BenchError::Worker { phase: name.clone(), rank, message });
            }
            (rank, Event::Malformed(source)) => {
                return Err(BenchError::Malformed { phase: format!("{name}: rank {rank}"), source });
            }
            (rank, _) => return Err(protocol_error(format!("rank {rank} stopped before it was ready"))),
        }
    }

    let mut phases = Vec::new();
    let mut problems = Vec::new();
    for phase in MdPhase::ALL {
        // SAFETY: sync(2) takes no arguments and cannot fail.
        unsafe { libc::sync() };
        let start_ns = now_ns() + GO_DELAY.as_nanos() as u64;
        let go = Order::Go { start_ns, phase: Some(phase) };
        for (rank, stdin) in ranks.stdins.iter_mut().enumerate() {
            go.send(stdin).map_err(|source| BenchError::Pipe {
                phase: name.clone(),
                doing: format!("starting rank {rank}'s {}", phase.as_str()),
                source,
            })?;
        }
        let deadline = Instant::now() + PHASE_TIMEOUT;
        let mut results: Vec<Option<MdWorkerResult>> = vec![None; spec.procs];
        while results.iter().any(Option::is_none) {
            match next_event(&events, deadline, &name)? {
                (rank, Event::Report(Report::Result(result))) if result.phase == phase => {
                    results[rank] = Some(result)
                }
                (rank, Event::Report(Report::Error(message))) => {
                    return Err(BenchError::Worker {
                        phase: format!("{name}: {}", phase.as_str()),
                        rank,
                        message,
                    });
                }
                (rank, Event::Malformed(source)) => {
                    let phase = format!("{name}: {}: rank {rank}", phase.as_str());
                    return Err(BenchError::Malformed { phase, source });
                }
                (rank, _) => return Err(protocol_error(format!("{}: rank {rank} stopped", phase.as_str()))),
            }
        }
        let results: Vec<MdWorkerResult> = results.into_iter().flatten().collect();
        let end_ns = results.iter().map(|r| r.end_ns).max().unwrap_or(start_ns);
        let seconds = end_ns.saturating_sub(start_ns).max(1) as f64 / 1e9;
        let ops: u64 = results.iter().map(|r| r.ops).sum();
        let lag = results.iter().map(|r| r.began_ns.saturating_sub(start_ns)).max().unwrap_or(0);
        phases.push(MdPhaseReport {
            phase,
            ops,
            seconds,
            ops_per_sec: ops as f64 / seconds,
            server_ops_per_op: results.iter().map(|r| r.server_ops).sum::<u64>() as f64 / ops.max(1) as f64,
            max_start_lag_ms: lag as f64 / 1e6,
        });
        let bad: u64 = results.iter().map(|r| r.bad).sum();
        if bad > 0 {
            let first = results.iter().find_map(|r| r.first_bad.clone()).unwrap_or_default();
            problems.push(format!(
                "{}: {bad} files missing or of the wrong size, first: {first}",
                phase.as_str()
            ));
        }
        // Untimed: after create every name is there, after remove none.
        let mut listed = checker.list().map_err(|e| e.context(name.as_str()))?;
        listed.sort();
        match phase {
            MdPhase::Create | MdPhase::Stat | MdPhase::Read => {
                let mut expected: Vec<String> = (0..spec.procs)
                    .flat_map(|rank| (0..spec.files).map(move |i| file_name(rank, i)))
                    .collect();
                expected.sort();
                if listed != expected {
                    problems.push(format!(
                        "after {}: the directory lists {} names, expected the {} created",
                        phase.as_str(),
                        listed.len(),
                        expected.len()
                    ));
                }
            }
            MdPhase::Remove => {
                if !listed.is_empty() {
                    problems.push(format!(
                        "after remove: {} names remain, first {}",
                        listed.len(),
                        listed[0]
                    ));
                }
            }
        }
    }
    for stdin in &mut ranks.stdins {
        let _ = Order::<MdPhase>::Exit.send(stdin);
    }
    ranks.stdins.clear();
    for (rank, child) in ranks.children.iter_mut().enumerate() {
        let status = child.wait().map_err(|source| BenchError::Pipe {
            phase: name.clone(),
            doing: format!("waiting for rank {rank}"),
            source,
        })?;
        if !status.success() {
            return Err(protocol_error(format!("rank {rank} exited with {status}")));
        }
    }
    if let Some(daemon) = daemon {
        daemon.stop().map_err(|e| e.context(name.as_str()))?;
    }
    // Nothing of any file may be left on any backend either (but a 1-n
    // directory keeps its logs: a remove is a record). Checked once the
    // ranks have exited and the daemon has stopped: a container's unlink
    // returns after one rename and its pieces are deleted in the
    // background, finished at the latest when the process that removed it
    // (a preloaded rank, the FUSE daemon) exits.
    if phases.iter().any(|p| p.phase == MdPhase::Remove) {
        for dir in backend_dirs(case_dir, backends) {
            let left = fs::read_dir(dir.join(DIR_NAME))
                .map(|entries| {
                    entries
                        .filter_map(|entry| entry.ok())
                        .filter(|entry| {
                            target != MdTarget::SmallFile || entry.file_name() != ".plfs-smallfile"
                        })
                        .count()
                })
                .unwrap_or(0);
            if left > 0 {
                problems
                    .push(format!("after remove: {left} entries left in {}", dir.join(DIR_NAME).display()));
            }
        }
    }
    let rate = |phase: MdPhase| phases.iter().find(|p| p.phase == phase).map_or(0.0, |p| p.ops_per_sec);
    Ok(MdCaseReport {
        target,
        interface,
        backends,
        creates_per_sec: rate(MdPhase::Create),
        stats_per_sec: rate(MdPhase::Stat),
        reads_per_sec: rate(MdPhase::Read),
        removes_per_sec: rate(MdPhase::Remove),
        verified: problems.is_empty(),
        phases: phases.clone(),
        problems,
    })
}

/// `plfs mount --foreground` serving a FUSE case's plfsrc, as a user
/// would start it: a process of its own, stopped by its pid (SIGTERM makes
/// it unmount and exit). Dropped unstopped (a failed case), it is stopped
/// all the same and, failing that, killed.
struct FuseDaemon {
    child: Option<Child>,
    mount_point: PathBuf,
    log: PathBuf,
}

impl FuseDaemon {
    fn start(command: &WorkerCommand, case_dir: &Path, options: Option<&str>) -> Result<FuseDaemon> {
        let mount_point = mount_point(case_dir);
        fs::create_dir_all(&mount_point).map_err(BenchError::io("creating", &mount_point))?;
        let unmounted_dev = fs::metadata(&mount_point).map_err(BenchError::io("stat", &mount_point))?.dev();
        let log = case_dir.join("fuse.log");
        let log_file = fs::File::create(&log).map_err(BenchError::io("creating", &log))?;
        let stderr = log_file.try_clone().map_err(BenchError::io("duplicating", &log))?;
        let child = Command::new(&command.program)
            .arg("--config")
            .arg(plfsrc_path(case_dir))
            .args(["mount", "--foreground"])
            .args(options.into_iter().flat_map(|options| ["-o", options]))
            .arg(&mount_point)
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(stderr)
            .spawn()
            .map_err(BenchError::io("starting plfs mount --foreground on", &mount_point))?;
        let mut daemon = FuseDaemon { child: Some(child), mount_point, log };
        let deadline = Instant::now() + FUSE_START_TIMEOUT;
        // Mounted once the mount point is another device than the
        // directory under it.
        while fs::metadata(&daemon.mount_point).map(|m| m.dev()).unwrap_or(unmounted_dev) == unmounted_dev {
            if let Some(status) = daemon.try_wait()? {
                daemon.child = None;
                return Err(daemon.failed(&format!("exited before it mounted ({status})")));
            }
            if Instant::now() >= deadline {
                return Err(
                    daemon.failed(&format!("did not mount within {} s", FUSE_START_TIMEOUT.as_secs()))
                );
            }
            std::thread::sleep(FUSE_POLL);
        }
        Ok(daemon)
    }

    fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        match &mut self.child {
            Some(child) => {
                child.try_wait().map_err(BenchError::io("waiting for the FUSE daemon of", &self.mount_point))
            }
            None => Ok(None),
        }
    }

    fn failed(&self, what: &str) -> BenchError {
        let log = fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().filter(|line| !line.trim().is_empty()).collect();
        let tail = lines[lines.len().saturating_sub(5)..].join(" | ");
        BenchError::invalid(format!(
            "plfs mount --foreground {}: {what} (log {}: {tail})",
            self.mount_point.display(),
            self.log.display()
        ))
    }

    /// SIGTERM to the daemon's pid, then waits (bounded) for it to unmount
    /// and exit; an unclean exit is an error.
    fn stop(mut self) -> Result<()> {
        let status = self.terminate()?;
        match status {
            Some(status) if status.success() => Ok(()),
            Some(status) => Err(self.failed(&format!("exited with {status} when stopped"))),
            None => {
                Err(self.failed(&format!("did not exit within {} s of SIGTERM", FUSE_STOP_TIMEOUT.as_secs())))
            }
        }
    }

    /// None: still running at the deadline (then killed).
    fn terminate(&mut self) -> Result<Option<ExitStatus>> {
        let Some(mut child) = self.child.take() else { return Ok(None) };
        let pid = libc::pid_t::try_from(child.id())
            .map_err(|_| BenchError::invalid(format!("FUSE daemon pid {} out of range", child.id())))?;
        // SAFETY: kill(2) on our own child's pid, not yet reaped, so the
        // pid cannot have been reused.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + FUSE_STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Some(status) = child
                .try_wait()
                .map_err(BenchError::io("waiting for the FUSE daemon of", &self.mount_point))?
            {
                return Ok(Some(status));
            }
            std::thread::sleep(FUSE_POLL);
        }
        let _ = child.kill();
        let _ = child.wait();
        Ok(None)
    }
}

impl Drop for FuseDaemon {
    fn drop(&mut self) {
        if self.child.is_some() {
            let _ = self.terminate();
        }
    }
}
