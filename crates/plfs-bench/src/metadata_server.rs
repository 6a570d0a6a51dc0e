//! An emulated metadata server for benchmarks on one node.
//!
//! On a cluster, every open, listing and stat of a backend file is a
//! request to a parallel file system's metadata server, which serves them
//! one at a time: that queue is what the paper's N·M index-log opens
//! overwhelm. On one node the page cache answers them instead, at memory
//! speed. [`MetadataServerStore`] restores the queue: each metadata
//! operation holds a node-wide lock (flock on one file) for a fixed
//! service time before it runs. Data reads and writes are not delayed.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use plfs::store::{
    AppendWriter, Capabilities, DirEntry, Metadata, NewPiece, Protection, RandomWriter, ReadHandle,
    SpaceInfo, Store, StorePath, WriteOpen,
};
use plfs::{Error, Result};

/// Wraps a store; metadata operations queue at the emulated server.
#[derive(Debug)]
pub struct MetadataServerStore {
    inner: Arc<dyn Store>,
    server: Arc<MetadataServer>,
}

/// The queue: one lock file shared by every process of the run.
#[derive(Debug)]
pub struct MetadataServer {
    /// The Mutex queues this process's threads (flock locks belong to an
    /// open file, which they share); flock queues the processes.
    lock: Mutex<File>,
    service: Duration,
    /// Requests this process has had served.
    served: AtomicU64,
}

impl MetadataServer {
    pub fn new(lock_path: &Path, service: Duration) -> Result<Arc<MetadataServer>> {
        let lock = File::options()
            .create(true)
            .append(true)
            .open(lock_path)
            .map_err(|error| Error::io(error, lock_path.display().to_string()))?;
        Ok(Arc::new(MetadataServer { lock: Mutex::new(lock), service, served: AtomicU64::new(0) }))
    }

    /// Holds the server for one service time (callers that do not go
    /// through a [`MetadataServerStore`], e.g. plain-file baselines, call
    /// it before each metadata call).
    pub fn serve(&self) {
        self.served.fetch_add(1, Ordering::Relaxed);
        let file = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        // SAFETY: flock on a descriptor we own; failure only loses the
        // cross-process queueing, never memory safety.
        unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        std::thread::sleep(self.service);
        // SAFETY: as above.
        unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
    }
}

impl MetadataServer {
    /// How many requests this process has had served (every process of a
    /// run counts its own).
    pub fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }
}

impl MetadataServerStore {
    pub fn new(inner: Arc<dyn Store>, server: Arc<MetadataServer>) -> MetadataServerStore {
        MetadataServerStore { inner, server }
    }
}

// Every method is spelled out: an inherited default would call back into
// this wrapper piece by piece, or skip the inner store (`settle`).
#[deny(clippy::missing_trait_methods)]
impl Store for MetadataServerStore {
    fn url(&self) -> &str {
        self.inner.url()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn create_dir(&self, path: &StorePath, mode: u32) -> Result<()> {
        self.server.serve();
        self.inner.create_dir(path, mode)
    }

    fn create_dir_all(&self, path: &StorePath) -> Result<()> {
        self.server.serve();
        self.inner.create_dir_all(path)
    }

    fn list(&self, path: &StorePath) -> Result<Vec<DirEntry>> {
        self.server.serve();
        self.inner.list(path)
    }

    fn metadata(&self, path: &StorePath) -> Result<Metadata> {
        self.server.serve();
        self.inner.metadata(path)
    }

    fn remove_file(&self, path: &StorePath) -> Result<()> {
        self.server.serve();
        self.inner.remove_file(path)
    }

    fn remove_dir(&self, path: &StorePath) -> Result<()> {
        self.server.serve();
        self.inner.remove_dir(path)
    }

    fn rename(&self, from: &StorePath, to: &StorePath) -> Result<()> {
        self.server.serve();
        self.inner.rename(from, to)
    }

    fn local_path(&self, path: &StorePath) -> Option<std::path::PathBuf> {
        self.inner.local_path(path)
    }

    fn exchange(&self, a: &StorePath, b: &StorePath) -> Result<()> {
        self.server.serve();
        self.inner.exchange(a, b)
    }

    fn create_new(&self, path: &StorePath, contents: &[u8]) -> Result<()> {
        self.server.serve();
        self.inner.create_new(path, contents)
    }

    /// One request, as `create_new`; the inner store may finish the file
    /// in the background (HDFS), which is what the benchmark measures.
    fn create_new_deferred(&self, path: &StorePath, contents: &[u8]) -> Result<()> {
        self.server.serve();
        self.inner.create_new_deferred(path, contents)
    }

    /// Waits for files already requested: no request of its own.
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
        self.server.serve();
        self.inner.replace(path, contents)
    }

    // A protected create is one request, made as the inner store makes it
    // (POSIX: created with its mode, never more open than asked).
    fn protect(&self, path: &StorePath, protection: &Protection) -> Result<()> {
        self.server.serve();
        self.inner.protect(path, protection)
    }

    fn create_dir_protected(&self, path: &StorePath, protection: &Protection) -> Result<()> {
        self.server.serve();
        self.inner.create_dir_protected(path, protection)
    }

    fn create_append_protected(
        &self,
        path: &StorePath,
        protection: &Protection,
    ) -> Result<Box<dyn AppendWriter>> {
        self.server.serve();
        self.inner.create_append_protected(path, protection)
    }

    fn create_new_protected(&self, path: &StorePath, contents: &[u8], protection: &Protection) -> Result<()> {
        self.server.serve();
        self.inner.create_new_protected(path, contents, protection)
    }

    fn create_new_deferred_protected(
        &self,
        path: &StorePath,
        contents: &[u8],
        protection: &Protection,
    ) -> Result<()> {
        self.server.serve();
        self.inner.create_new_deferred_protected(path, contents, protection)
    }

    fn replace_protected(&self, path: &StorePath, contents: &[u8], protection: &Protection) -> Result<()> {
        self.server.serve();
        self.inner.replace_protected(path, contents, protection)
    }

    // One request per piece, as the default makes them one call each.
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
        self.server.serve();
        self.inner.create_append(path)
    }

    fn open_read(&self, path: &StorePath) -> Result<Box<dyn ReadHandle>> {
        self.server.serve();
        self.inner.open_read(path)
    }

    fn open_write(&self, path: &StorePath, how: WriteOpen) -> Result<Box<dyn RandomWriter>> {
        self.server.serve();
        self.inner.open_write(path, how)
    }

    fn set_mode(&self, path: &StorePath, mode: u32) -> Result<()> {
        self.server.serve();
        self.inner.set_mode(path, mode)
    }

    fn set_owner(&self, path: &StorePath, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        self.server.serve();
        self.inner.set_owner(path, uid, gid)
    }

    fn set_times(
        &self,
        path: &StorePath,
        atime: Option<SystemTime>,
        mtime: Option<SystemTime>,
    ) -> Result<()> {
        self.server.serve();
        self.inner.set_times(path, atime, mtime)
    }

    fn symlink(&self, target: &str, path: &StorePath) -> Result<()> {
        self.server.serve();
        self.inner.symlink(target, path)
    }

    fn read_link(&self, path: &StorePath) -> Result<String> {
        self.server.serve();
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
    use std::os::unix::fs::PermissionsExt;

    use plfs::store::posix::PosixStore;
    use plfs::store::{Protection, conformance};

    use super::*;

    fn wrapped(dir: &Path) -> (MetadataServerStore, Arc<MetadataServer>) {
        let root = dir.join("backend");
        std::fs::create_dir(&root).unwrap();
        let inner = PosixStore::new(&root, format!("posix://{}", root.display())).unwrap();
        let server = MetadataServer::new(&dir.join("server.lock"), Duration::ZERO).unwrap();
        (MetadataServerStore::new(Arc::new(inner), server.clone()), server)
    }

    #[test]
    fn passes_the_store_conformance_suite() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = wrapped(dir.path());
        conformance::run_all(&store);
    }

    /// Inherited defaults made a protected create two requests (create,
    /// then chmod through this wrapper) and left a window where the piece
    /// had the inner store's default mode.
    #[test]
    fn a_protected_create_is_one_request_made_by_the_inner_store() {
        let dir = tempfile::tempdir().unwrap();
        let (store, server) = wrapped(dir.path());
        let protection = Protection::mode(0o600);
        let path = |name: &str| StorePath::parse(name).unwrap();
        let mode = |name: &str| {
            let meta = std::fs::metadata(dir.path().join("backend").join(name)).unwrap();
            meta.permissions().mode() & 0o7777
        };
        let before = server.served();
        store.create_dir_protected(&path("d"), &Protection::mode(0o700)).unwrap();
        store.create_append_protected(&path("log"), &protection).unwrap().close().unwrap();
        store.create_new_protected(&path("new"), b"x", &protection).unwrap();
        store.create_new_deferred_protected(&path("deferred"), b"x", &protection).unwrap();
        store.replace_protected(&path("replaced"), b"x", &protection).unwrap();
        store.settle().unwrap();
        assert_eq!(server.served() - before, 5, "one request per protected create");
        assert_eq!(mode("d"), 0o700);
        for name in ["log", "new", "deferred", "replaced"] {
            assert_eq!(mode(name), 0o600, "{name}");
        }
    }
}
