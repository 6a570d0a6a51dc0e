//! A bandwidth limit per backend, so that striping one file over several
//! backends is measurable on a machine with one disk.
//!
//! On a cluster each backend (an OST) has its own disks and its own
//! bandwidth, and a file striped over four of them can stream four times
//! as fast as one on a single backend. On one node all backend directories
//! sit on the same disk and page cache, so striping changes nothing. The
//! real way to restore the difference is a per-device limit (cgroup v2
//! `io.max` on one loop device per backend); [`detect`] says whether this
//! machine could do that and, when it cannot, why.
//!
//! [`BandwidthStore`] emulates it instead: every byte written to or read
//! from a backend (appends, positional writes and reads, whole-object
//! creates) is served by that backend's [`Bandwidth`]: a write queue and a
//! read queue that each serve one request at a time at a fixed rate, with
//! writes behind by a bounded backlog (see [`Bandwidth`]). All writers of a
//! backend share its queues (they are threads of one process holding the
//! same `Arc`), so the limit is per backend, not per writer. Metadata
//! calls (list, stat, mkdir, rename) are not charged.

use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use plfs::Result;
use plfs::store::{
    AppendWriter, Capabilities, DirEntry, Metadata, NewPiece, Protection, RandomWriter, ReadHandle,
    SpaceInfo, Store, StorePath, WriteOpen,
};
use serde::Serialize;

/// Which per-backend limit a run used, as its report says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum LimitKind {
    /// Emulated in the store layer ([`BandwidthStore`]); `reason` says why
    /// no real device limit was used.
    Emulated { reason: String },
}

impl fmt::Display for LimitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimitKind::Emulated { reason } => {
                write!(f, "emulated per-backend bandwidth in the store layer ({reason})")
            }
        }
    }
}

/// Where a unified (v2) cgroup hierarchy may be mounted: alone, or beside
/// v1 controllers in the hybrid layout.
const CGROUP2_ROOTS: [&str; 2] = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"];

/// Says which limit a run can have. A real one needs the cgroup v2 `io`
/// controller (v1 `blkio` throttles only direct I/O, not the buffered
/// writes plfs makes, which reach the device later from the flusher
/// threads). Even where `io` is there, the bench does not yet make loop
/// devices and cgroups of its own, so the limit stays emulated; the reason
/// says which of the two it was.
pub fn detect() -> LimitKind {
    detect_in(&CGROUP2_ROOTS.map(Path::new))
}

fn detect_in(roots: &[&Path]) -> LimitKind {
    for root in roots {
        if let Ok(controllers) = std::fs::read_to_string(root.join("cgroup.controllers")) {
            let reason = if controllers.split_whitespace().any(|c| c == "io") {
                format!(
                    "cgroup v2 io controller at {}, but loop-device io.max limits are not implemented",
                    root.display()
                )
            } else {
                format!(
                    "cgroup v2 at {} has no io controller (controllers: {:?}); cgroup v1 blkio does not \
                     throttle buffered writes",
                    root.display(),
                    controllers.trim()
                )
            };
            return LimitKind::Emulated { reason };
        }
    }
    LimitKind::Emulated { reason: "no cgroup v2 hierarchy, so no io.max".to_owned() }
}

/// One backend's bandwidth: a write queue and a read queue, each serving
/// one request at a time at `bytes_per_sec`, and what they served.
///
/// Writes are write-behind, as a parallel file system client's are (Lustre
/// keeps up to `max_dirty_mb` per OST in flight): a write returns once its
/// bytes are queued, and blocks only while the backend's backlog is more
/// than `write_behind` long; `sync` (and [`drain`](Bandwidth::drain))
/// waits for the backlog. Without it, writers segmented on stripe
/// boundaries start on the same backend and wait for each other stripe by
/// stripe. Reads are synchronous. The two queues are apart so a small
/// metadata read (a layout, an access record) is not queued behind
/// megabytes of another writer's write-behind, which a server's
/// scheduler would not do either.
#[derive(Debug)]
pub struct Bandwidth {
    /// Zero: unlimited (bytes are still counted).
    bytes_per_sec: u64,
    /// How far the write backlog may run ahead of the writers.
    write_behind: Duration,
    /// When each queue is next free: a request starts at the later of this
    /// and its arrival, so idle time is never banked as a burst.
    write_free_at: Mutex<Instant>,
    read_free_at: Mutex<Instant>,
    written: AtomicU64,
    read: AtomicU64,
    requests: AtomicU64,
}

impl Bandwidth {
    /// `write_behind_bytes`: the backlog writers may leave queued.
    pub fn new(bytes_per_sec: u64, write_behind_bytes: u64) -> Arc<Bandwidth> {
        let now = Instant::now();
        let limit = Bandwidth {
            bytes_per_sec,
            write_behind: Duration::ZERO,
            write_free_at: Mutex::new(now),
            read_free_at: Mutex::new(now),
            written: AtomicU64::new(0),
            read: AtomicU64::new(0),
            requests: AtomicU64::new(0),
        };
        let write_behind = limit.service_time(write_behind_bytes);
        Arc::new(Bandwidth { write_behind, ..limit })
    }

    /// Bytes written to this backend so far (data, index and metadata objects).
    pub fn written_bytes(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    pub fn read_bytes(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }

    /// Requests charged (each append, positional write or read, or create with contents).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// The time `bytes` take at this backend's rate (zero when unlimited).
    fn service_time(&self, bytes: u64) -> Duration {
        match self.bytes_per_sec {
            0 => Duration::ZERO,
            rate => Duration::from_nanos((u128::from(bytes) * 1_000_000_000 / u128::from(rate)) as u64),
        }
    }

    /// Queues `bytes` behind every earlier request of `queue`; returns when
    /// they will have been served.
    fn reserve(&self, queue: &Mutex<Instant>, bytes: usize) -> Instant {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let mut free_at = queue.lock().unwrap_or_else(PoisonError::into_inner);
        let start = (*free_at).max(Instant::now());
        *free_at = start + self.service_time(bytes as u64);
        *free_at
    }

    fn charge_write(&self, bytes: usize) {
        self.written.fetch_add(bytes as u64, Ordering::Relaxed);
        let done_at = self.reserve(&self.write_free_at, bytes);
        sleep_until(done_at.checked_sub(self.write_behind).unwrap_or(done_at));
    }

    fn charge_read(&self, bytes: usize) {
        self.read.fetch_add(bytes as u64, Ordering::Relaxed);
        sleep_until(self.reserve(&self.read_free_at, bytes));
    }

    /// Returns when every write queued so far has been served.
    pub fn drain(&self) {
        let free_at = *self.write_free_at.lock().unwrap_or_else(PoisonError::into_inner);
        sleep_until(free_at);
    }
}

fn sleep_until(instant: Instant) {
    let wait = instant.saturating_duration_since(Instant::now());
    if !wait.is_zero() {
        std::thread::sleep(wait);
    }
}

/// Wraps a backend's store; its data bytes queue at the backend's [`Bandwidth`].
#[derive(Debug)]
pub struct BandwidthStore {
    inner: Arc<dyn Store>,
    limit: Arc<Bandwidth>,
}

impl BandwidthStore {
    pub fn new(inner: Arc<dyn Store>, limit: Arc<Bandwidth>) -> BandwidthStore {
        BandwidthStore { inner, limit }
    }
}

#[derive(Debug)]
struct LimitedAppend {
    inner: Box<dyn AppendWriter>,
    limit: Arc<Bandwidth>,
}

// Every method is spelled out: a default would skip the inner writer's own.
#[deny(clippy::missing_trait_methods)]
impl AppendWriter for LimitedAppend {
    fn append(&mut self, buf: &[u8]) -> Result<()> {
        self.limit.charge_write(buf.len());
        self.inner.append(buf)
    }

    // Durable means out of the write-behind backlog too.
    fn sync(&mut self) -> Result<()> {
        self.limit.drain();
        self.inner.sync()
    }

    fn persist(&mut self) -> Result<()> {
        self.limit.drain();
        self.inner.persist()
    }

    fn publish(&mut self) -> Result<()> {
        self.inner.publish()
    }

    fn publish_pending(&self) -> bool {
        self.inner.publish_pending()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    fn current_path(&self) -> Option<StorePath> {
        self.inner.current_path()
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.inner.close()
    }
}

#[derive(Debug)]
struct LimitedRead {
    inner: Box<dyn ReadHandle>,
    limit: Arc<Bandwidth>,
}

#[deny(clippy::missing_trait_methods)]
impl ReadHandle for LimitedRead {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        let count = self.inner.read_at(buf, offset)?;
        self.limit.charge_read(count);
        Ok(count)
    }

    fn read_vectored_at(&self, bufs: &mut [std::io::IoSliceMut<'_>], offset: u64) -> Result<usize> {
        let count = self.inner.read_vectored_at(bufs, offset)?;
        self.limit.charge_read(count);
        Ok(count)
    }

    fn len(&self) -> Result<u64> {
        self.inner.len()
    }

    fn is_empty(&self) -> Result<bool> {
        self.inner.is_empty()
    }
}

#[derive(Debug)]
struct LimitedRandom {
    inner: Box<dyn RandomWriter>,
    limit: Arc<Bandwidth>,
}

#[deny(clippy::missing_trait_methods)]
impl ReadHandle for LimitedRandom {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        let count = self.inner.read_at(buf, offset)?;
        self.limit.charge_read(count);
        Ok(count)
    }

    fn read_vectored_at(&self, bufs: &mut [std::io::IoSliceMut<'_>], offset: u64) -> Result<usize> {
        let count = self.inner.read_vectored_at(bufs, offset)?;
        self.limit.charge_read(count);
        Ok(count)
    }

    fn len(&self) -> Result<u64> {
        self.inner.len()
    }

    fn is_empty(&self) -> Result<bool> {
        self.inner.is_empty()
    }
}

#[deny(clippy::missing_trait_methods)]
impl RandomWriter for LimitedRandom {
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.limit.charge_write(buf.len());
        self.inner.write_at(buf, offset)
    }

    fn set_len(&self, size: u64) -> Result<()> {
        self.inner.set_len(size)
    }

    fn sync(&self) -> Result<()> {
        self.limit.drain();
        self.inner.sync()
    }
}

// Every method is spelled out: an inherited default would call back into
// this wrapper piece by piece (charging twice), or skip the inner store.
#[deny(clippy::missing_trait_methods)]
impl Store for BandwidthStore {
    fn url(&self) -> &str {
        self.inner.url()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn create_dir(&self, path: &StorePath, mode: u32) -> Result<()> {
        self.inner.create_dir(path, mode)
    }

    fn create_dir_all(&self, path: &StorePath) -> Result<()> {
        self.inner.create_dir_all(path)
    }

    fn list(&self, path: &StorePath) -> Result<Vec<DirEntry>> {
        self.inner.list(path)
    }

    fn metadata(&self, path: &StorePath) -> Result<Metadata> {
        self.inner.metadata(path)
    }

    fn remove_file(&self, path: &StorePath) -> Result<()> {
        self.inner.remove_file(path)
    }

    fn remove_dir(&self, path: &StorePath) -> Result<()> {
        self.inner.remove_dir(path)
    }

    fn rename(&self, from: &StorePath, to: &StorePath) -> Result<()> {
        self.inner.rename(from, to)
    }

    fn local_path(&self, path: &StorePath) -> Option<std::path::PathBuf> {
        self.inner.local_path(path)
    }

    fn exchange(&self, a: &StorePath, b: &StorePath) -> Result<()> {
        self.inner.exchange(a, b)
    }

    fn create_new(&self, path: &StorePath, contents: &[u8]) -> Result<()> {
        self.limit.charge_write(contents.len());
        self.inner.create_new(path, contents)
    }

    fn create_new_deferred(&self, path: &StorePath, contents: &[u8]) -> Result<()> {
        self.limit.charge_write(contents.len());
        self.inner.create_new_deferred(path, contents)
    }

    fn settle(&self) -> Result<()> {
        self.inner.settle()
    }

    fn sync_dir(&self, dir: &StorePath) -> Result<()> {
        self.inner.sync_dir(dir)
    }

    fn sync_file(&self, path: &StorePath) -> Result<()> {
        self.inner.sync_file(path)
    }

    fn replace(&self, path: &StorePath, contents: &[u8]) -> Result<()> {
        self.limit.charge_write(contents.len());
        self.inner.replace(path, contents)
    }

    fn protect(&self, path: &StorePath, protection: &Protection) -> Result<()> {
        self.inner.protect(path, protection)
    }

    fn create_dir_protected(&self, path: &StorePath, protection: &Protection) -> Result<()> {
        self.inner.create_dir_protected(path, protection)
    }

    fn create_append_protected(
        &self,
        path: &StorePath,
        protection: &Protection,
    ) -> Result<Box<dyn AppendWriter>> {
        let inner = self.inner.create_append_protected(path, protection)?;
        Ok(Box::new(LimitedAppend { inner, limit: self.limit.clone() }))
    }

    fn create_new_protected(&self, path: &StorePath, contents: &[u8], protection: &Protection) -> Result<()> {
        self.limit.charge_write(contents.len());
        self.inner.create_new_protected(path, contents, protection)
    }

    fn create_new_deferred_protected(
        &self,
        path: &StorePath,
        contents: &[u8],
        protection: &Protection,
    ) -> Result<()> {
        self.limit.charge_write(contents.len());
        self.inner.create_new_deferred_protected(path, contents, protection)
    }

    fn replace_protected(&self, path: &StorePath, contents: &[u8], protection: &Protection) -> Result<()> {
        self.limit.charge_write(contents.len());
        self.inner.replace_protected(path, contents, protection)
    }

    // Each piece is charged as the call the default makes for it.
    fn fill_private_dir(&self, dir: &StorePath, pieces: &[NewPiece<'_>]) -> Result<()> {
        plfs::store::by_parts::fill_private_dir(self, dir, pieces)
    }

    // An open and reads, through this wrapper's own calls.
    fn read_small(&self, path: &StorePath) -> Result<Vec<u8>> {
        plfs::store::by_parts::read_small(self, path)
    }

    // The container's metadata, then the read, through this wrapper's own calls.
    fn read_head_below(&self, dir: &StorePath, path: &StorePath, buf: &mut [u8]) -> Result<usize> {
        plfs::store::by_parts::read_head_below(self, dir, path, buf)
    }

    // A lookup, then the open, through this wrapper's own calls.
    fn open_file_read(&self, path: &StorePath) -> Result<Box<dyn ReadHandle>> {
        plfs::store::by_parts::open_file_read(self, path)
    }

    fn create_append(&self, path: &StorePath) -> Result<Box<dyn AppendWriter>> {
        let inner = self.inner.create_append(path)?;
        Ok(Box::new(LimitedAppend { inner, limit: self.limit.clone() }))
    }

    fn open_read(&self, path: &StorePath) -> Result<Box<dyn ReadHandle>> {
        let inner = self.inner.open_read(path)?;
        Ok(Box::new(LimitedRead { inner, limit: self.limit.clone() }))
    }

    fn open_write(&self, path: &StorePath, how: WriteOpen) -> Result<Box<dyn RandomWriter>> {
        let inner = self.inner.open_write(path, how)?;
        Ok(Box::new(LimitedRandom { inner, limit: self.limit.clone() }))
    }

    fn set_mode(&self, path: &StorePath, mode: u32) -> Result<()> {
        self.inner.set_mode(path, mode)
    }

    fn set_owner(&self, path: &StorePath, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        self.inner.set_owner(path, uid, gid)
    }

    fn set_times(
        &self,
        path: &StorePath,
        atime: Option<SystemTime>,
        mtime: Option<SystemTime>,
    ) -> Result<()> {
        self.inner.set_times(path, atime, mtime)
    }

    fn symlink(&self, target: &str, path: &StorePath) -> Result<()> {
        self.inner.symlink(target, path)
    }

    fn read_link(&self, path: &StorePath) -> Result<String> {
        self.inner.read_link(path)
    }

    fn space(&self) -> Result<SpaceInfo> {
        self.inner.space()
    }

    fn filesystem_id(&self) -> Option<u64> {
        self.inner.filesystem_id()
    }
}

#[cfg(test)]
mod tests {
    use plfs::store::conformance;
    use plfs::store::posix::PosixStore;

    use super::*;

    fn wrapped(dir: &Path, bytes_per_sec: u64) -> (BandwidthStore, Arc<Bandwidth>) {
        let root = dir.join("backend");
        std::fs::create_dir(&root).unwrap();
        let inner = PosixStore::new(&root, format!("posix://{}", root.display())).unwrap();
        let limit = Bandwidth::new(bytes_per_sec, 0);
        (BandwidthStore::new(Arc::new(inner), limit.clone()), limit)
    }

    #[test]
    fn passes_the_store_conformance_suite() {
        let dir = tempfile::tempdir().unwrap();
        let (store, limit) = wrapped(dir.path(), 0);
        conformance::run_all(&store);
        assert!(
            limit.written_bytes() > 0 && limit.read_bytes() > 0,
            "the suite's data went through the limit"
        );
    }

    /// Each byte is charged once, by the call that moves it: a whole-object
    /// read is its handle's reads, not a second charge.
    #[test]
    fn charges_every_data_byte_once() {
        let dir = tempfile::tempdir().unwrap();
        let (store, limit) = wrapped(dir.path(), 0);
        let path = |name: &str| StorePath::parse(name).unwrap();
        let mut log = store.create_append(&path("log")).unwrap();
        log.append(&[1; 1000]).unwrap();
        log.append(&[2; 24]).unwrap();
        log.close().unwrap();
        store.create_new(&path("small"), &[3; 100]).unwrap();
        assert_eq!(limit.written_bytes(), 1124);
        use plfs::store::StoreExt;
        assert_eq!(store.read_all(&path("log")).unwrap().len(), 1024);
        assert_eq!(limit.read_bytes(), 1024);
        assert_eq!(limit.requests(), 4);
    }

    /// Two threads writing one backend share its queue: the second
    /// request starts where the first ends, so the queue is busy until at
    /// least both service times after the first began (arithmetic on the
    /// queue's own instants, not a wall-clock measurement).
    #[test]
    fn threads_of_one_backend_share_its_queue() {
        let limit = Bandwidth::new(1 << 20, 0);
        let began = Instant::now();
        std::thread::scope(|scope| {
            for _ in 0..2 {
                scope.spawn(|| limit.charge_write(64 << 10));
            }
        });
        let free_at = *limit.write_free_at.lock().unwrap();
        assert!(free_at >= began + limit.service_time(128 << 10));
        assert_eq!(limit.written_bytes(), 128 << 10);
        assert_eq!(limit.requests(), 2);
    }

    #[test]
    fn names_why_the_limit_is_emulated() {
        let dir = tempfile::tempdir().unwrap();
        let LimitKind::Emulated { reason } = detect_in(&[dir.path()]);
        assert!(reason.contains("no cgroup v2"), "{reason}");
        std::fs::write(dir.path().join("cgroup.controllers"), "cpu memory\n").unwrap();
        let LimitKind::Emulated { reason } = detect_in(&[dir.path()]);
        assert!(reason.contains("has no io controller"), "{reason}");
        std::fs::write(dir.path().join("cgroup.controllers"), "cpu io memory\n").unwrap();
        let LimitKind::Emulated { reason } = detect_in(&[dir.path()]);
        assert!(reason.contains("io controller at"), "{reason}");
    }
}
