//! [`Store`] over HDFS, through `hdfs-native` (native RPC: no JVM in plfs).
//!
//! How each call maps onto HDFS is in docs/ARCHITECTURE.md ("How each call
//! maps onto HDFS and S3"); the reasons are next to the code below. In short:
//!
//! - Logs are append-only HDFS files: `create_append` is `create` without
//!   overwrite; `AppendWriter::sync` is `hsync` then `close`, and the next
//!   append reopens the file with HDFS `append`. Closing at every sync is
//!   what makes synced bytes readable by other processes: `hdfs-native`
//!   reads only up to the end of the last *completed* block, so bytes of a
//!   file still open for writing are invisible to every reader.
//! - `persist` / `publish` split `sync` into the `hsync` and the close, so
//!   plfs closes a writer's data and index logs at once (each close waits
//!   about 500 ms for the NameNode). Bytes hsynced but not yet closed count
//!   in the file's length; a read that reaches them waits until they are
//!   readable instead of reading short.
//! - The small files of a new container are written, hsynced and put in
//!   place by `create_new_deferred`, and closed in the background until
//!   `settle` (or the store's drop).
//! - Reads in this process of a log this process is still writing (plfs
//!   reads its own writes before any sync) find the writer through a
//!   per-store registry of open logs and ask it to *publish* (close) first.
//!   A read never sees bytes that were not appended, and a log's bytes are
//!   never copied a second time to serve such reads.
//! - Small files (`create_new`, `replace`) and exclusive directories
//!   (`create_dir`) are built under a private `.plfs-tmp.` name and put in
//!   place with HDFS `rename2` without overwrite, which fails when anything
//!   is at the target and never moves *into* a directory: the exact
//!   no-replace rename plfs's lock-free container creation needs.
//! - `open_write` is refused (HDFS has no positional writes), and so are
//!   symlinks (`hdfs-native` has no symlink calls; HDFS disables them by
//!   default anyway).
//! - Owner and group names are mapped to ids through the local user and
//!   group databases; see [`IdMap`].
//!
//! The store owns one multi-thread tokio runtime with [`IO_THREADS`]
//! workers; every call blocks the calling thread on it (`block_on`), so many
//! threads read in parallel without a thread per read. Calling the store
//! from inside an async runtime is refused with an `Internal` error instead
//! of tokio's panic: plfs's callers (FUSE, the C API, rayon pools) are plain
//! threads. A process forked after the store was used (the preload runs in
//! programs that fork) opens a runtime and client of its own at its first
//! call: the parent's runtime has no threads in the child, and waiting on it
//! would hang, as the JVM did in the PLFS HDFS paper.

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::fmt;
use std::future::Future;
use std::process;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use hdfs_native::client::FileStatus;
use hdfs_native::file::{FileReader, FileWriter};
use hdfs_native::{Client, ClientBuilder, HdfsError, WriteOptions};
use tokio::runtime::Runtime;

use super::posix::TEMP_PREFIX;
use super::{
    AppendWriter, Capabilities, DirEntry, EntryKind, Metadata, RandomWriter, ReadHandle, SpaceInfo, Store,
    StorePath, WriteOpen, unsupported_exchange, unsupported_random_writes,
};
use crate::error::{Error, ErrorKind, Result};

/// Worker threads of the store's runtime: they drive the sockets of every
/// NameNode and DataNode conversation, while the calling threads poll their
/// own requests, so a few suffice for any number of readers.
pub const IO_THREADS: usize = 4;

/// Longest wait for one NameNode call. A NameNode that accepts the
/// connection but never answers (stopped, overloaded) gives an
/// `Unavailable` error naming it after this, instead of a hang.
const NAMENODE_CALL_DEADLINE: Duration = Duration::from_secs(30);

/// Socket timeout for NameNode and DataNode connections (milliseconds):
/// a DataNode that stops answering mid-read is abandoned for another
/// replica after this.
const SOCKET_TIMEOUT_MS: &str = "20000";

/// Attempts on a NameNode that refuses connections, and the sleeps between
/// them: a dead NameNode is reported within about a second rather than
/// after `hdfs-native`'s default of 15 attempts of up to 15 s each.
const NAMENODE_ATTEMPTS: &str = "2";
const NAMENODE_RETRY_SLEEP_BASE_MS: &str = "100";
const NAMENODE_RETRY_SLEEP_MAX_MS: &str = "1000";

/// Longest wait of a read for bytes a writer has persisted but not yet
/// closed (see `HdfsReadHandle::wait_for_tail`): a close waits for the
/// NameNode up to about 15 s (`hdfs-native` retries 5 times, doubling from
/// 500 ms), so anything longer means the writer is gone.
const TAIL_WAIT_MAX: Duration = Duration::from_secs(30);

/// The first and longest pauses between looks at such a file.
const TAIL_POLL_FIRST: Duration = Duration::from_millis(5);
const TAIL_POLL_MAX: Duration = Duration::from_millis(100);

/// Longest HDFS error text kept in a plfs error message.
const ERROR_TEXT_CHARS_MAX: usize = 400;

/// Mode of the files plfs creates (HDFS applies no umask to it).
const FILE_MODE: u32 = 0o644;

/// Mode of the directories `create_dir_all` makes.
const DIR_MODE: u32 = 0o755;

/// HDFS reports no capacity to `hdfs-native` clients (its `getStats` call
/// is not in the crate's API), so `space` answers from the root's space
/// quota when one is set and otherwise from this nominal capacity, minus
/// what the root's subtree uses.
const NOMINAL_CAPACITY_BYTES: u64 = 1 << 50;

/// Nominal number of names when the root has no namespace quota.
const NOMINAL_FILES: u64 = 1 << 32;

/// Block size `space` reports (statfs figures are in these units).
const SPACE_BLOCK_BYTES: u64 = 4096;

/// The id `metadata` reports for an owner or group name that has no local
/// account and is not a number: the kernel's overflow id (`nobody`,
/// `nogroup`), as NFSv4 id mapping does.
pub const UNKNOWN_ID: u32 = 65534;

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A store rooted at one HDFS directory; [`StorePath::root`] is that directory.
pub struct HdfsStore {
    inner: Arc<Inner>,
}

/// What the store and its open handles share.
struct Inner {
    url: String,
    /// The NameNode's address, `hdfs://host:port`, named in connection errors.
    namenode: String,
    /// Absolute HDFS path of the store's root, without a trailing slash
    /// ("" for the file system's root).
    root: String,
    /// The client and runtime of the process that uses the store; see
    /// [`Inner::connection`] for why it is per process.
    connection: RwLock<Arc<Connection>>,
    /// Logs being written through this store, by HDFS path, so reads of
    /// them in this process can make their unsynced bytes readable.
    open_logs: Mutex<HashMap<String, Weak<OpenLog>>>,
    /// Closes that `create_new_deferred` left running, until `settle`.
    unsettled: Mutex<Vec<Unsettled>>,
    ids: IdMap,
}

/// The close of a small file, running on the store's runtime.
struct Unsettled {
    /// The store path it was created at, for messages.
    name: String,
    close: tokio::task::JoinHandle<hdfs_native::Result<()>>,
    /// The process whose runtime runs `close`.
    pid: u32,
}

impl fmt::Debug for HdfsStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HdfsStore").field("url", &self.inner.url).finish_non_exhaustive()
    }
}

impl fmt::Debug for Inner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inner").field("url", &self.url).field("root", &self.root).finish_non_exhaustive()
    }
}

/// One process's HDFS client and the runtime its I/O runs on.
struct Connection {
    /// Declared before `runtime` so it is dropped first: its background
    /// tasks (lease renewal, connection readers) run on that runtime.
    client: Client,
    runtime: Runtime,
    /// The process these belong to: a forked child has the memory of the
    /// runtime but none of its threads.
    pid: u32,
}

impl Connection {
    fn open(namenode: &str) -> hdfs_native::Result<Connection> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(IO_THREADS)
            .thread_name("plfs-hdfs-io")
            .enable_all()
            .build()?;
        let client = ClientBuilder::new()
            .with_url(namenode)
            .with_io_runtime(runtime.handle().clone())
            .with_config([
                ("dfs.client.socket-timeout", SOCKET_TIMEOUT_MS),
                ("dfs.client.failover.max.attempts", NAMENODE_ATTEMPTS),
                ("dfs.client.failover.sleep.base.millis", NAMENODE_RETRY_SLEEP_BASE_MS),
                ("dfs.client.failover.sleep.max.millis", NAMENODE_RETRY_SLEEP_MAX_MS),
            ])
            .build()?;
        Ok(Connection { client, runtime, pid: process::id() })
    }
}

impl HdfsStore {
    /// Connects to the NameNode at `host:port` and opens the store rooted at
    /// `path`, which must already exist as a directory. `url` is the
    /// location as configured, used in every error.
    pub fn new(host: &str, port: u16, path: &str, url: String) -> Result<HdfsStore> {
        let store = HdfsStore::connect(host, port, path, url)?;
        let meta = store.metadata(&StorePath::root()).map_err(|error| error.context("backend root"))?;
        if meta.kind != EntryKind::Directory {
            return Err(Error::new(
                ErrorKind::NotADirectory,
                format!("{}: backend root is not a directory", store.inner.url),
            ));
        }
        Ok(store)
    }

    /// [`HdfsStore::new`] without looking at the root, which may not exist
    /// yet: for creating it (`plfs check-config --mkdir`,
    /// [`crate::fs::check_store_root`]). Sends no request.
    pub fn connect(host: &str, port: u16, path: &str, url: String) -> Result<HdfsStore> {
        let namenode = format!("hdfs://{host}:{port}");
        let connection = Connection::open(&namenode).map_err(|error| {
            Error::new(map_kind(&error), format!("{url}: connecting to {namenode}: {error}"))
        })?;
        let root = path.trim_end_matches('/').to_owned();
        let inner = Inner {
            url,
            namenode,
            root,
            connection: RwLock::new(Arc::new(connection)),
            open_logs: Mutex::new(HashMap::new()),
            unsettled: Mutex::new(Vec::new()),
            ids: IdMap::default(),
        };
        Ok(HdfsStore { inner: Arc::new(inner) })
    }

    fn full(&self, path: &StorePath) -> String {
        self.inner.full(path)
    }

    fn fail<'a>(&'a self, op: &'a str, path: &'a StorePath) -> impl Fn(HdfsError) -> Error + 'a {
        move |error| self.inner.error(&error, &format!("{op} {path}"))
    }

    /// The refusal for calls that would remove or move the root itself.
    fn refuse_root(&self, op: &str, path: &StorePath) -> Result<()> {
        if path.is_root() {
            return Err(Error::invalid(format!(
                "{}: {op} {path}: the store root cannot be removed or moved",
                self.inner.url
            )));
        }
        Ok(())
    }

    fn status(&self, op: &str, path: &StorePath) -> Result<FileStatus> {
        let full = self.full(path);
        match self.inner.call(async |client| client.get_file_info(&full).await) {
            Ok(status) => Ok(status),
            Err(error) => Err(self.explain_missing(self.inner.error(&error, &format!("{op} {path}")), path)),
        }
    }

    /// HDFS answers "not found" for a path below a file; POSIX (and the
    /// store contract) say "not a directory". Only failures pay for the
    /// extra lookups, one per ancestor up to the first that exists.
    fn explain_missing(&self, error: Error, path: &StorePath) -> Error {
        if error.kind() != ErrorKind::NotFound {
            return error;
        }
        let mut ancestor = path.parent();
        while let Some(current) = ancestor {
            match self.inner.call(async |client| client.get_file_info(&self.full(&current)).await) {
                Ok(status) if status.isdir => return error,
                Ok(_) => {
                    return Error::new(
                        ErrorKind::NotADirectory,
                        format!("{}: {path}: {current} is a file", self.inner.url),
                    );
                }
                Err(HdfsError::FileNotFound(_)) => ancestor = current.parent(),
                Err(_) => return error,
            }
        }
        error
    }

    /// A name beside `path` that no other call, process or host uses.
    fn temp_beside(&self, path: &StorePath) -> Result<StorePath> {
        let parent = path.parent().unwrap_or_else(StorePath::root);
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_nanos());
        let serial = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        parent.join(&format!("{TEMP_PREFIX}{}.{serial}.{nanos}", process::id()))
    }

    /// Creates an empty file at `path`, open for writing; fails if anything
    /// is there.
    fn create_file(&self, path: &StorePath) -> hdfs_native::Result<FileWriter> {
        let full = self.full(path);
        let options = WriteOptions::default().overwrite(false).create_parent(false).permission(FILE_MODE);
        self.inner.call(async |client| client.create(&full, options).await)
    }

    /// Writes `contents` to a new file at `path` and hsyncs it, leaving it
    /// open: durable, counted in its length, not yet readable.
    fn write_unclosed(&self, path: &StorePath, contents: &[u8]) -> Result<FileWriter> {
        let fail = self.fail("create", path);
        let mut writer = self.create_file(path).map_err(&fail)?;
        let written = async {
            writer.write_bytes(Bytes::copy_from_slice(contents)).await?;
            writer.hsync().await
        };
        if let Err(error) = self.inner.transfer(written) {
            let error = fail(error);
            self.inner.close_later(writer, path.to_string());
            self.remove_quietly(path);
            return Err(error);
        }
        Ok(writer)
    }

    /// Writes `contents` to a new file at `path` and closes it.
    fn write_whole(&self, op: &str, path: &StorePath, contents: &[u8]) -> Result<()> {
        let fail = self.fail(op, path);
        let mut writer = self.create_file(path).map_err(&fail)?;
        let written = async {
            if !contents.is_empty() {
                writer.write_bytes(Bytes::copy_from_slice(contents)).await?;
            }
            writer.close().await
        };
        if let Err(error) = self.inner.transfer(written) {
            let error = fail(error);
            self.remove_quietly(path);
            return Err(error);
        }
        Ok(())
    }

    /// Cleanup after a failure; the first error is the one reported.
    fn remove_quietly(&self, path: &StorePath) {
        if let Err(error) = self.inner.call(async |client| client.delete(&self.full(path), false).await) {
            tracing::warn!(store = %self.inner.url, %path, %error, "could not remove a temporary");
        }
    }

    /// `rename2` without overwrite: fails when anything is at `to`, with
    /// `AlreadyExists`. HDFS checks the kinds of source and target before
    /// it checks overwrite, so a file renamed onto a directory (or the
    /// reverse) fails with a generic IOException; a look at the target
    /// names the real reason.
    fn rename_noreplace(&self, from: &StorePath, to: &StorePath, what: &str) -> Result<()> {
        let Err(error) =
            self.inner.call(async |client| client.rename(&self.full(from), &self.full(to), false).await)
        else {
            return Ok(());
        };
        let error = self.inner.error(&error, what);
        if error.kind() == ErrorKind::Io
            && self.inner.call(async |client| client.get_file_info(&self.full(to)).await).is_ok()
        {
            return Err(Error::new(
                ErrorKind::AlreadyExists,
                format!("{}: {what}: target exists", self.inner.url),
            ));
        }
        Err(error)
    }

    fn existing(&self, op: &str, path: &StorePath) -> Result<()> {
        self.status(op, path).map(|_| ())
    }
}

impl Inner {
    fn full(&self, path: &StorePath) -> String {
        if path.is_root() {
            if self.root.is_empty() { "/".to_owned() } else { self.root.clone() }
        } else {
            format!("{}/{}", self.root, path.as_str())
        }
    }

    /// This process's connection. After a fork the child finds its
    /// parent's: the runtime's worker threads do not exist in the child, so
    /// any call would wait forever (the JVM-after-fork hang of the PLFS
    /// HDFS paper). The child opens a connection of its own instead and
    /// never touches the parent's, not even to drop it, since dropping a
    /// runtime waits for its threads.
    fn connection(&self) -> hdfs_native::Result<Arc<Connection>> {
        if tokio::runtime::Handle::try_current().is_ok() {
            // block_on inside a runtime panics; say why instead.
            return Err(HdfsError::InternalError(
                "the hdfs store was called from inside an async runtime; call it from a plain thread".into(),
            ));
        }
        let pid = process::id();
        let current = self.connection.read().unwrap_or_else(PoisonError::into_inner).clone();
        if current.pid == pid {
            return Ok(current);
        }
        let mut slot = self.connection.write().unwrap_or_else(PoisonError::into_inner);
        if slot.pid != pid {
            let inherited = std::mem::replace(&mut *slot, Arc::new(Connection::open(&self.namenode)?));
            std::mem::forget(inherited);
        }
        Ok(slot.clone())
    }

    /// Runs one NameNode operation to completion on this process's
    /// runtime, bounded by [`NAMENODE_CALL_DEADLINE`].
    fn call<T>(&self, op: impl AsyncFnOnce(&Client) -> hdfs_native::Result<T>) -> hdfs_native::Result<T> {
        let connection = self.connection()?;
        let bounded = async {
            match tokio::time::timeout(NAMENODE_CALL_DEADLINE, op(&connection.client)).await {
                Ok(result) => result,
                Err(_) => Err(HdfsError::IOError(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no answer within {} s", NAMENODE_CALL_DEADLINE.as_secs()),
                ))),
            }
        };
        connection.runtime.block_on(bounded)
    }

    /// Runs a data transfer of a reader or writer opened by this process,
    /// bounded by the socket timeout rather than a deadline on the whole
    /// transfer (a large read may take long).
    fn transfer<T>(&self, future: impl Future<Output = hdfs_native::Result<T>>) -> hdfs_native::Result<T> {
        self.connection()?.runtime.block_on(future)
    }

    /// An HDFS failure as a plfs error naming the store and what was done;
    /// connection failures name the NameNode too.
    fn error(&self, error: &HdfsError, what: &str) -> Error {
        let kind = map_kind(error);
        // Java exceptions arrive with their stack trace (its first line is
        // the message), and a failed read lists every DataNode it tried in
        // full; keep messages to a readable size.
        let full_text = error.to_string();
        let first_line = full_text.lines().next().unwrap_or_default();
        let text = match first_line.char_indices().nth(ERROR_TEXT_CHARS_MAX) {
            Some((cut, _)) => format!("{}…", &first_line[..cut]),
            None => first_line.to_owned(),
        };
        if kind == ErrorKind::Unavailable {
            return Error::new(kind, format!("{}: {what}: NameNode {}: {text}", self.url, self.namenode));
        }
        Error::new(kind, format!("{}: {what}: {text}", self.url))
    }

    /// Starts closing `writer` on this process's runtime; [`Inner::settle`]
    /// waits for it.
    fn close_later(&self, mut writer: FileWriter, name: String) {
        let Ok(connection) = self.connection() else {
            // No runtime to run it on: the file stays open, like a writer
            // that died, and HDFS recovers its lease.
            std::mem::forget(writer);
            return;
        };
        let close = connection.runtime.spawn(async move { writer.close().await });
        lock(&self.unsettled).push(Unsettled { name, close, pid: process::id() });
    }

    /// Waits for every close [`Inner::close_later`] started in this process.
    /// A file removed meanwhile (a container that lost its creation race)
    /// has nothing left to close.
    fn settle(&self) -> Result<()> {
        let pending = std::mem::take(&mut *lock(&self.unsettled));
        let pid = process::id();
        let mut first_error = None;
        for unsettled in pending {
            if unsettled.pid != pid {
                // The parent's, inherited through fork: it finishes them.
                std::mem::forget(unsettled.close);
                continue;
            }
            let joined = self.transfer(async {
                unsettled.close.await.unwrap_or_else(|error| Err(HdfsError::InternalError(error.to_string())))
            });
            match joined {
                Ok(()) => {}
                Err(error) if map_kind(&error) == ErrorKind::NotFound => {}
                Err(error) => {
                    first_error.get_or_insert(self.error(&error, &format!("closing {}", unsettled.name)));
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn open_log(&self, full: &str) -> Option<Arc<OpenLog>> {
        lock(&self.open_logs).get(full).and_then(Weak::upgrade)
    }

    fn register_log(&self, log: &Arc<OpenLog>) {
        let mut logs = lock(&self.open_logs);
        // Entries of logs dropped without close would otherwise pile up.
        logs.retain(|_, weak| weak.strong_count() > 0);
        logs.insert(log.full.clone(), Arc::downgrade(log));
    }

    fn forget_log(&self, log: &OpenLog) {
        let mut logs = lock(&self.open_logs);
        if logs.get(&log.full).is_some_and(|weak| std::ptr::eq(weak.as_ptr(), log)) {
            logs.remove(&log.full);
        }
    }
}

impl Store for HdfsStore {
    fn url(&self) -> &str {
        &self.inner.url
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            directories: true,
            modes: true,
            owners: true,
            times: true,
            symlinks: false,
            // rename2 moves a whole directory in one NameNode transaction.
            atomic_dir_rename: true,
            // No call swaps two names; a logical rename onto an existing
            // file falls back to two renames (docs/ARCHITECTURE.md).
            exchange: false,
            random_writes: false,
        }
    }

    fn create_dir(&self, path: &StorePath, mode: u32) -> Result<()> {
        if path.is_root() {
            return Err(Error::new(
                ErrorKind::AlreadyExists,
                format!("{}: mkdir {path}: the store root exists", self.inner.url),
            ));
        }
        // HDFS mkdirs succeeds on an existing directory; making it under a
        // private name and renaming that into place without overwrite makes
        // "exactly one creator wins" hold even between hosts.
        let temp = self.temp_beside(path)?;
        let fail = self.fail("mkdir", path);
        self.inner
            .call(async |client| client.mkdirs(&self.full(&temp), mode & 0o7777, false).await)
            .map_err(|error| self.explain_missing(fail(error), path))?;
        if let Err(error) = self.rename_noreplace(&temp, path, &format!("mkdir {path}")) {
            self.remove_quietly(&temp);
            return Err(error);
        }
        Ok(())
    }

    fn create_dir_all(&self, path: &StorePath) -> Result<()> {
        self.inner
            .call(async |client| client.mkdirs(&self.full(path), DIR_MODE, true).await)
            .map_err(self.fail("mkdir -p", path))
    }

    /// The whole listing in one go (HDFS pages it; `hdfs-native` follows the
    /// pages): this is the "cache the listing when the directory is
    /// opened" of the paper, since plfs's readdir serves from this vector.
    fn list(&self, path: &StorePath) -> Result<Vec<DirEntry>> {
        let full = self.full(path);
        let statuses = self
            .inner
            .call(async |client| client.list_status(&full, false).await)
            .map_err(|error| self.explain_missing(self.inner.error(&error, &format!("list {path}")), path))?;
        let prefix = format!("{}/", full.trim_end_matches('/'));
        let mut entries = Vec::with_capacity(statuses.len());
        for status in statuses {
            // HDFS lists a file as itself; a child's path extends the prefix.
            let Some(name) = status.path.strip_prefix(&prefix) else {
                return Err(Error::new(
                    ErrorKind::NotADirectory,
                    format!("{}: list {path}: not a directory", self.inner.url),
                ));
            };
            let kind = if status.isdir { EntryKind::Directory } else { EntryKind::File };
            entries.push(DirEntry { name: name.to_owned(), kind });
        }
        Ok(entries)
    }

    fn metadata(&self, path: &StorePath) -> Result<Metadata> {
        let status = self.status("stat", path)?;
        let mut meta = self.inner.metadata_of(&status);
        // The NameNode learns a log's length only when a block fills or
        // the log is published; this process knows what it appended.
        if let Some(log) = self.inner.open_log(&self.full(path)) {
            meta.size = meta.size.max(lock(&log.state).len);
        }
        Ok(meta)
    }

    fn remove_file(&self, path: &StorePath) -> Result<()> {
        self.refuse_root("unlink", path)?;
        // HDFS delete removes an empty directory too; unlink must not.
        if self.status("unlink", path)?.isdir {
            return Err(Error::new(
                ErrorKind::IsADirectory,
                format!("{}: unlink {path}: is a directory", self.inner.url),
            ));
        }
        let deleted = self
            .inner
            .call(async |client| client.delete(&self.full(path), false).await)
            .map_err(self.fail("unlink", path))?;
        if !deleted {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("{}: unlink {path}: not found", self.inner.url),
            ));
        }
        Ok(())
    }

    fn remove_dir(&self, path: &StorePath) -> Result<()> {
        self.refuse_root("rmdir", path)?;
        if !self.status("rmdir", path)?.isdir {
            return Err(Error::new(
                ErrorKind::NotADirectory,
                format!("{}: rmdir {path}: not a directory", self.inner.url),
            ));
        }
        // Non-recursive delete of a non-empty directory fails
        // (PathIsNotEmptyDirectoryException → DirectoryNotEmpty).
        let deleted = self
            .inner
            .call(async |client| client.delete(&self.full(path), false).await)
            .map_err(self.fail("rmdir", path))?;
        if !deleted {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("{}: rmdir {path}: not found", self.inner.url),
            ));
        }
        Ok(())
    }

    fn exchange(&self, a: &StorePath, b: &StorePath) -> Result<()> {
        Err(unsupported_exchange(&self.inner.url, a, b))
    }

    fn rename(&self, from: &StorePath, to: &StorePath) -> Result<()> {
        self.refuse_root("rename", from)?;
        let what = format!("rename {from} -> {to}");
        if to.is_root() {
            return Err(Error::new(
                ErrorKind::AlreadyExists,
                format!("{}: {what}: the root exists", self.inner.url),
            ));
        }
        if to.starts_with(from) && to != from {
            return Err(Error::invalid(format!(
                "{}: {what}: a directory cannot move into its own subtree",
                self.inner.url
            )));
        }
        self.rename_noreplace(from, to, &what)
    }

    fn create_new(&self, path: &StorePath, contents: &[u8]) -> Result<()> {
        if path.is_root() {
            return Err(Error::new(
                ErrorKind::AlreadyExists,
                format!("{}: create {path}: the store root exists", self.inner.url),
            ));
        }
        if contents.is_empty() {
            // Nothing can be torn in an empty file: the exclusive create
            // alone publishes it (plfs's per-writer meta records).
            return self.write_whole("create", path, contents);
        }
        // A file being written is visible (empty) in HDFS; build it under a
        // private name so readers see all of it or nothing.
        let temp = self.temp_beside(path)?;
        self.write_whole("create", &temp, contents).map_err(|error| self.explain_missing(error, path))?;
        if let Err(error) = self.rename_noreplace(&temp, path, &format!("create {path}")) {
            self.remove_quietly(&temp);
            return Err(error);
        }
        Ok(())
    }

    /// Like `create_new`, but the file is put in place after its hsync and
    /// closed in the background: readers that get to it before the close
    /// completes wait for it (`HdfsReadHandle::wait_for_tail`).
    fn create_new_deferred(&self, path: &StorePath, contents: &[u8]) -> Result<()> {
        if path.is_root() || contents.is_empty() {
            return self.create_new(path, contents);
        }
        let temp = self.temp_beside(path)?;
        let writer =
            self.write_unclosed(&temp, contents).map_err(|error| self.explain_missing(error, path))?;
        let renamed = self.rename_noreplace(&temp, path, &format!("create {path}"));
        if renamed.is_err() {
            self.remove_quietly(&temp);
        }
        self.inner.close_later(writer, path.to_string());
        renamed
    }

    fn settle(&self) -> Result<()> {
        self.inner.settle()
    }

    fn replace(&self, path: &StorePath, contents: &[u8]) -> Result<()> {
        if path.is_root() {
            return Err(Error::new(
                ErrorKind::IsADirectory,
                format!("{}: replace {path}: the store root is a directory", self.inner.url),
            ));
        }
        let temp = self.temp_beside(path)?;
        self.write_whole("replace", &temp, contents).map_err(|error| self.explain_missing(error, path))?;
        let renamed =
            self.inner.call(async |client| client.rename(&self.full(&temp), &self.full(path), true).await);
        if let Err(error) = renamed {
            self.remove_quietly(&temp);
            // rename2 refuses to overwrite a directory with a file, with a
            // generic IOException; name the real reason.
            if let Ok(status) = self.inner.call(async |client| client.get_file_info(&self.full(path)).await)
                && status.isdir
            {
                return Err(Error::new(
                    ErrorKind::IsADirectory,
                    format!("{}: replace {path}: is a directory", self.inner.url),
                ));
            }
            return Err(self.inner.error(&error, &format!("replace {path}")));
        }
        Ok(())
    }

    fn create_append(&self, path: &StorePath) -> Result<Box<dyn AppendWriter>> {
        if path.is_root() {
            return Err(Error::new(
                ErrorKind::AlreadyExists,
                format!("{}: create log {path}: the store root exists", self.inner.url),
            ));
        }
        let full = self.full(path);
        let writer = self.create_file(path).map_err(|error| {
            self.explain_missing(self.inner.error(&error, &format!("create log {path}")), path)
        })?;
        let log = Arc::new(OpenLog {
            full,
            name: path.to_string(),
            state: Mutex::new(LogState {
                writer: Some(writer),
                writer_pid: process::id(),
                len: 0,
                published: 0,
                failed: None,
            }),
        });
        self.inner.register_log(&log);
        Ok(Box::new(HdfsAppendWriter { inner: self.inner.clone(), log, closed: false }))
    }

    fn open_read(&self, path: &StorePath) -> Result<Box<dyn ReadHandle>> {
        let handle = HdfsReadHandle {
            inner: self.inner.clone(),
            name: path.to_string(),
            reader: RwLock::new(None),
            tail_abandoned: AtomicBool::new(false),
            full: self.full(path),
        };
        // One getBlockLocations opens the file; only a failure pays for
        // finding out why (HDFS says "not found" for a directory too).
        if let Err(error) = handle.refresh() {
            if error.kind() == ErrorKind::NotFound
                && let Ok(status) = self.inner.call(async |client| client.get_file_info(&handle.full).await)
                && status.isdir
            {
                return Err(Error::new(
                    ErrorKind::IsADirectory,
                    format!("{}: open {path}: is a directory", self.inner.url),
                ));
            }
            return Err(self.explain_missing(error, path));
        }
        Ok(Box::new(handle))
    }

    fn open_write(&self, path: &StorePath, _how: WriteOpen) -> Result<Box<dyn RandomWriter>> {
        Err(unsupported_random_writes(&self.inner.url, path))
    }

    fn set_mode(&self, path: &StorePath, mode: u32) -> Result<()> {
        self.inner
            .call(async |client| client.set_permission(&self.full(path), mode & 0o7777).await)
            .map_err(self.fail("chmod", path))
    }

    fn set_owner(&self, path: &StorePath, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        if uid.is_none() && gid.is_none() {
            // Nothing to change, but a missing path is still an error.
            return self.existing("chown", path);
        }
        let user = uid.map(|uid| self.inner.ids.user_name(uid));
        let group = gid.map(|gid| self.inner.ids.group_name(gid));
        self.inner
            .call(async |client| client.set_owner(&self.full(path), user.as_deref(), group.as_deref()).await)
            .map_err(self.fail("chown", path))
    }

    fn set_times(
        &self,
        path: &StorePath,
        atime: Option<SystemTime>,
        mtime: Option<SystemTime>,
    ) -> Result<()> {
        if atime.is_none() && mtime.is_none() {
            return self.existing("utimens", path);
        }
        let millis = |time: Option<SystemTime>| -> Result<u64> {
            match time {
                // -1 (all bits set in the unsigned field) leaves it unchanged.
                None => Ok(u64::MAX),
                Some(time) => {
                    time.duration_since(UNIX_EPOCH).map(|since| since.as_millis() as u64).map_err(|_| {
                        Error::invalid(format!("{}: utimens {path}: time before 1970", self.inner.url))
                    })
                }
            }
        };
        let (atime, mtime) = (millis(atime)?, millis(mtime)?);
        self.inner
            .call(async |client| client.set_times(&self.full(path), mtime, atime).await)
            .map_err(self.fail("utimens", path))
    }

    fn symlink(&self, _target: &str, path: &StorePath) -> Result<()> {
        Err(Error::new(
            ErrorKind::Unsupported,
            format!("{}: symlink {path}: the hdfs store has no symbolic links", self.inner.url),
        ))
    }

    fn read_link(&self, path: &StorePath) -> Result<String> {
        // Nothing in this store is a link: a file answers InvalidInput
        // (EINVAL, as readlink of a regular file does).
        self.existing("readlink", path)?;
        Err(Error::invalid(format!("{}: readlink {path}: not a symbolic link", self.inner.url)))
    }

    fn space(&self) -> Result<SpaceInfo> {
        let root = StorePath::root();
        let summary = self
            .inner
            .call(async |client| client.get_content_summary(&self.full(&root)).await)
            .map_err(self.fail("statfs", &root))?;
        // Quotas are -1 (as u64: huge) when unset.
        let quota_set = |quota: u64| quota != 0 && quota < i64::MAX as u64;
        let capacity =
            if quota_set(summary.space_quota) { summary.space_quota } else { NOMINAL_CAPACITY_BYTES };
        let used = summary.space_consumed.min(capacity);
        let files = if quota_set(summary.quota) { summary.quota } else { NOMINAL_FILES };
        let names = summary.file_count + summary.directory_count;
        let blocks = capacity / SPACE_BLOCK_BYTES;
        let blocks_free = blocks - used.div_ceil(SPACE_BLOCK_BYTES).min(blocks);
        Ok(SpaceInfo {
            block_size: SPACE_BLOCK_BYTES,
            blocks,
            blocks_free,
            blocks_available: blocks_free,
            files,
            files_free: files.saturating_sub(names),
            name_max: super::path::NAME_MAX_BYTES as u64,
        })
    }
}

impl Inner {
    fn metadata_of(&self, status: &FileStatus) -> Metadata {
        let time = |millis: u64| Some(UNIX_EPOCH + Duration::from_millis(millis));
        Metadata {
            kind: if status.isdir { EntryKind::Directory } else { EntryKind::File },
            size: status.length as u64,
            mode: Some(u32::from(status.permission) & 0o7777),
            uid: Some(self.ids.user_id(&status.owner)),
            gid: Some(self.ids.group_id(&status.group)),
            atime: time(status.access_time),
            mtime: time(status.modification_time),
            // HDFS keeps no change time; the modification time is the
            // latest change it records.
            ctime: time(status.modification_time),
        }
    }
}

/// One log being written, shared between its writer and this process's
/// readers of it.
#[derive(Debug)]
struct OpenLog {
    full: String,
    /// The store path, for messages (errors add the store's URL).
    name: String,
    state: Mutex<LogState>,
}

struct LogState {
    /// The HDFS file open for writing, or None once published (closed);
    /// the next append reopens it with HDFS `append`.
    writer: Option<FileWriter>,
    /// The process that opened `writer`: its I/O runs on that process's
    /// runtime, which a forked child cannot use.
    writer_pid: u32,
    /// Bytes appended so far.
    len: u64,
    /// Bytes every reader can read: the length at the last close.
    published: u64,
    /// Why the log stopped taking appends: after a failed write or close
    /// HDFS may hold fewer bytes than `len`, and plfs's index records
    /// physical offsets from `len`, so the log must end there.
    failed: Option<String>,
}

impl fmt::Debug for LogState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogState")
            .field("open", &self.writer.is_some())
            .field("len", &self.len)
            .field("published", &self.published)
            .field("failed", &self.failed)
            .finish()
    }
}

impl OpenLog {
    /// A writer this process inherited through fork belongs to the parent,
    /// which still writes and closes it; the child gives up its copy
    /// without touching it (dropping it would use the parent's runtime).
    /// plfs's preload syncs every file before fork, so a child normally
    /// finds the log published and reopens it for itself.
    fn refuse_inherited(&self, inner: &Inner, state: &mut LogState) -> Result<()> {
        if state.writer.is_none() || state.writer_pid == process::id() {
            return Ok(());
        }
        std::mem::forget(state.writer.take());
        Err(Error::new(
            ErrorKind::BadHandle,
            format!(
                "{}: {}: the log was open for writing in process {} before a fork; unsynced bytes stay with it",
                inner.url, self.name, state.writer_pid
            ),
        ))
    }

    /// Closes the HDFS file so every appended byte is readable, by any
    /// reader; `durable` adds an `hsync` first (the bytes reach the
    /// DataNodes' disks, not only their memory).
    fn publish(&self, inner: &Inner, durable: bool) -> Result<()> {
        let mut state = lock(&self.state);
        self.refuse_failed(inner, &state)?;
        self.refuse_inherited(inner, &mut state)?;
        let Some(mut writer) = state.writer.take() else {
            return Ok(());
        };
        let finished = inner.transfer(async {
            if durable {
                writer.hsync().await?;
            }
            writer.close().await
        });
        match finished {
            Ok(()) => {
                state.published = state.len;
                Ok(())
            }
            // Removed while open (POSIX allows it): nothing is left to
            // finish. The failure may come from the DataNode (its block is
            // gone) rather than the NameNode, so look rather than parse.
            Err(error)
                if map_kind(&error) == ErrorKind::NotFound
                    || matches!(
                        inner.call(async |client| client.get_file_info(&self.full).await),
                        Err(HdfsError::FileNotFound(_))
                    ) =>
            {
                state.published = state.len;
                Ok(())
            }
            Err(error) => {
                let error = inner.error(&error, &format!("{}: closing the log", self.name));
                state.failed = Some(error.to_string());
                Err(error)
            }
        }
    }

    /// `hsync` without closing: the bytes are durable and counted in the
    /// file's length, and readers that reach them wait for the close
    /// ([`HdfsReadHandle::reader_for`]).
    fn persist(&self, inner: &Inner) -> Result<()> {
        let mut state = lock(&self.state);
        self.refuse_failed(inner, &state)?;
        self.refuse_inherited(inner, &mut state)?;
        let Some(writer) = state.writer.as_mut() else {
            return Ok(());
        };
        if let Err(error) = inner.transfer(writer.hsync()) {
            let error = inner.error(&error, &format!("{}: hsync of the log", self.name));
            state.failed = Some(error.to_string());
            return Err(error);
        }
        Ok(())
    }

    fn refuse_failed(&self, inner: &Inner, state: &LogState) -> Result<()> {
        match &state.failed {
            None => Ok(()),
            Some(reason) => Err(Error::new(
                ErrorKind::Io,
                format!(
                    "{}: {}: the log failed earlier and takes no more bytes ({reason})",
                    inner.url, self.name
                ),
            )),
        }
    }
}

/// An HDFS log open for appending; see the module documentation for how
/// its bytes become readable.
#[derive(Debug)]
struct HdfsAppendWriter {
    inner: Arc<Inner>,
    log: Arc<OpenLog>,
    closed: bool,
}

impl AppendWriter for HdfsAppendWriter {
    fn append(&mut self, buf: &[u8]) -> Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let inner = &self.inner;
        let mut state = lock(&self.log.state);
        self.log.refuse_failed(inner, &state)?;
        self.log.refuse_inherited(inner, &mut state)?;
        if state.writer.is_none() {
            let reopened =
                inner.call(async |client| client.append(&self.log.full).await).map_err(|error| {
                    inner.error(&error, &format!("{}: reopening the log for appending", self.log.name))
                })?;
            state.writer = Some(reopened);
            state.writer_pid = process::id();
        }
        let writer = state.writer.as_mut().expect("opened above");
        // write_bytes takes owned bytes: its packets outlive this call.
        if let Err(error) = inner.transfer(writer.write_bytes(Bytes::copy_from_slice(buf))) {
            let error = inner.error(&error, &format!("{}: append of {} bytes", self.log.name, buf.len()));
            state.failed = Some(error.to_string());
            return Err(error);
        }
        state.len += buf.len() as u64;
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.log.publish(&self.inner, true)
    }

    fn persist(&mut self) -> Result<()> {
        self.log.persist(&self.inner)
    }

    fn publish(&mut self) -> Result<()> {
        self.log.publish(&self.inner, false)
    }

    fn publish_pending(&self) -> bool {
        lock(&self.log.state).writer.is_some()
    }

    fn len(&self) -> u64 {
        lock(&self.log.state).len
    }

    fn close(mut self: Box<Self>) -> Result<()> {
        self.closed = true;
        let result = self.log.publish(&self.inner, false);
        self.inner.forget_log(&self.log);
        result
    }
}

impl Drop for HdfsAppendWriter {
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        // An HDFS file left open keeps its lease and stays unreadable past
        // its last full block until the lease expires (an hour): finish it.
        tracing::warn!(store = %self.inner.url, log = %self.log.name, "hdfs log dropped without close; closing it");
        if let Err(error) = self.log.publish(&self.inner, false) {
            tracing::warn!(log = %self.log.name, %error, "closing a dropped log failed");
        }
        self.inner.forget_log(&self.log);
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Err(error) = self.settle() {
            tracing::warn!(store = %self.url, %error, "a file created in the background failed to close");
        }
    }
}

/// Positional reads of one HDFS file. The block locations are fetched at the
/// first read and again whenever a read reaches past the end they describe.
#[derive(Debug)]
struct HdfsReadHandle {
    inner: Arc<Inner>,
    full: String,
    /// The store path, for messages (errors add the store's URL).
    name: String,
    reader: RwLock<Option<Arc<Reader>>>,
    /// Set when a wait for durable bytes ran out: the writer is gone, and
    /// later reads through this handle do not wait again.
    tail_abandoned: AtomicBool,
}

/// `hdfs-native`'s reader with the length it can serve.
struct Reader {
    file: FileReader,
    length: u64,
    /// The process whose runtime `file` reads on (see `Inner::connection`).
    pid: u32,
}

impl fmt::Debug for Reader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reader").field("length", &self.length).finish_non_exhaustive()
    }
}

impl HdfsReadHandle {
    fn current(&self) -> Option<Arc<Reader>> {
        self.reader.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Fetches the block locations again (the file may have grown).
    fn refresh(&self) -> Result<Arc<Reader>> {
        let file = self
            .inner
            .call(async |client| client.read(&self.full).await)
            .map_err(|error| self.inner.error(&error, &format!("open {}", self.name)))?;
        let length = file.file_length() as u64;
        let reader = Arc::new(Reader { file, length, pid: process::id() });
        *self.reader.write().unwrap_or_else(PoisonError::into_inner) = Some(reader.clone());
        Ok(reader)
    }

    /// A reader that can serve `[offset, end)` if the file has that much:
    /// unpublished bytes of a log this process writes are published first.
    fn reader_for(&self, end: u64) -> Result<Arc<Reader>> {
        if let Some(reader) = self.current()
            && reader.length >= end
            && reader.pid == process::id()
        {
            return Ok(reader);
        }
        if let Some(log) = self.inner.open_log(&self.full) {
            let needs_publish = {
                let state = lock(&log.state);
                state.published < end.min(state.len)
            };
            if needs_publish {
                // Durably: a later `sync` finds the file closed and has
                // nothing left to hsync, so the bytes must be on disk now.
                log.publish(&self.inner, true)?;
            }
        }
        let reader = self.refresh()?;
        if reader.length >= end || self.tail_abandoned.load(Ordering::Relaxed) {
            return Ok(reader);
        }
        self.wait_for_tail(reader, end)
    }

    /// Bytes another writer has persisted (hsync) count in the file's
    /// length before anyone can read them: `hdfs-native` reads only up to
    /// the last completed block, and a last block completes when its writer
    /// closes the file, which writers do right after persisting (see
    /// [`AppendWriter::persist`]) but which takes the NameNode about 500 ms.
    /// A read that reaches such bytes waits for them, so it is never short
    /// for bytes that are durable. A writer that died between its hsync and
    /// its close leaves them unreadable until HDFS recovers its lease; after
    /// [`TAIL_WAIT_MAX`] the read returns what is readable, with a warning,
    /// and this handle stops waiting.
    fn wait_for_tail(&self, mut reader: Arc<Reader>, end: u64) -> Result<Arc<Reader>> {
        let deadline = Instant::now() + TAIL_WAIT_MAX;
        let mut pause = TAIL_POLL_FIRST;
        loop {
            let durable = match self.inner.call(async |client| client.get_file_info(&self.full).await) {
                Ok(status) => status.length as u64,
                // Removed since it was opened: what was readable is all.
                Err(HdfsError::FileNotFound(_)) => return Ok(reader),
                Err(error) => return Err(self.inner.error(&error, &format!("stat {}", self.name))),
            };
            let wanted = end.min(durable);
            if reader.length >= wanted {
                return Ok(reader);
            }
            if Instant::now() >= deadline {
                tracing::warn!(
                    store = %self.inner.url,
                    file = %self.name,
                    readable = reader.length,
                    durable,
                    "bytes synced by a writer are still unreadable after {} s: its writer has not \
                     closed the file (if it died, HDFS releases it when the lease expires)",
                    TAIL_WAIT_MAX.as_secs()
                );
                self.tail_abandoned.store(true, Ordering::Relaxed);
                return Ok(reader);
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(TAIL_POLL_MAX);
            reader = self.refresh()?;
        }
    }
}

impl ReadHandle for HdfsReadHandle {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let end = offset.saturating_add(buf.len() as u64);
        let reader = self.reader_for(end)?;
        if offset >= reader.length {
            return Ok(0);
        }
        // hdfs-native panics on a range past the end it knows: clamp first.
        let count = (reader.length - offset).min(buf.len() as u64) as usize;
        let start = usize::try_from(offset).map_err(|_| {
            Error::invalid(format!(
                "{}: {}: offset {offset} does not fit in memory",
                self.inner.url, self.name
            ))
        })?;
        self.inner.transfer(reader.file.read_range_buf(&mut buf[..count], start)).map_err(|error| {
            self.inner.error(&error, &format!("{}: read of {count} bytes at offset {offset}", self.name))
        })?;
        Ok(count)
    }

    fn len(&self) -> Result<u64> {
        if let Some(log) = self.inner.open_log(&self.full) {
            return Ok(lock(&log.state).len);
        }
        Ok(self.reader_for(u64::MAX)?.length)
    }
}

/// Owner and group names ↔ local ids, through the user and group databases
/// (getpwnam_r and friends, so NSS sources such as LDAP count). A name with
/// no local entry maps to its number if it is one (HDFS accepts any string
/// as an owner, so ids without names round-trip as decimal text) and to
/// [`UNKNOWN_ID`] otherwise: HDFS's default group `supergroup` usually has
/// no local entry.
#[derive(Debug, Default)]
struct IdMap {
    users: Mutex<HashMap<String, u32>>,
    groups: Mutex<HashMap<String, u32>>,
}

impl IdMap {
    fn user_id(&self, name: &str) -> u32 {
        cached(&self.users, name, |name| lookup_id(name, Database::Users))
    }

    fn group_id(&self, name: &str) -> u32 {
        cached(&self.groups, name, |name| lookup_id(name, Database::Groups))
    }

    fn user_name(&self, uid: u32) -> String {
        lookup_name(uid, Database::Users).unwrap_or_else(|| uid.to_string())
    }

    fn group_name(&self, gid: u32) -> String {
        lookup_name(gid, Database::Groups).unwrap_or_else(|| gid.to_string())
    }
}

/// Names seen so far stay mapped as first seen: the databases rarely change
/// while a mount runs, and a lookup per stat would be an NSS round trip.
fn cached(map: &Mutex<HashMap<String, u32>>, name: &str, lookup: impl Fn(&str) -> u32) -> u32 {
    if let Some(id) = lock(map).get(name) {
        return *id;
    }
    let id = lookup(name);
    lock(map).insert(name.to_owned(), id);
    id
}

#[derive(Clone, Copy)]
enum Database {
    Users,
    Groups,
}

/// Buffer for one passwd or group entry; a group with many members can
/// need more, so lookups retry with larger buffers up to the maximum.
const ENTRY_BUFFER_BYTES: usize = 1 << 12;
const ENTRY_BUFFER_BYTES_MAX: usize = 1 << 20;

fn lookup_id(name: &str, database: Database) -> u32 {
    let found = CString::new(name).ok().and_then(|c_name| {
        with_entry_buffer(|buffer| unsafe {
            // SAFETY: every pointer is to a live local or to `buffer`,
            // whose length is passed; the result is read before return.
            match database {
                Database::Users => {
                    let mut entry: libc::passwd = std::mem::zeroed();
                    let mut result = std::ptr::null_mut();
                    let code = libc::getpwnam_r(
                        c_name.as_ptr(),
                        &mut entry,
                        buffer.as_mut_ptr(),
                        buffer.len(),
                        &mut result,
                    );
                    (code, (!result.is_null()).then_some(entry.pw_uid))
                }
                Database::Groups => {
                    let mut entry: libc::group = std::mem::zeroed();
                    let mut result = std::ptr::null_mut();
                    let code = libc::getgrnam_r(
                        c_name.as_ptr(),
                        &mut entry,
                        buffer.as_mut_ptr(),
                        buffer.len(),
                        &mut result,
                    );
                    (code, (!result.is_null()).then_some(entry.gr_gid))
                }
            }
        })
    });
    found.or_else(|| name.parse::<u32>().ok()).unwrap_or(UNKNOWN_ID)
}

fn lookup_name(id: u32, database: Database) -> Option<String> {
    with_entry_buffer(|buffer| unsafe {
        // SAFETY: as in lookup_id; the name is copied out before return.
        match database {
            Database::Users => {
                let mut entry: libc::passwd = std::mem::zeroed();
                let mut result = std::ptr::null_mut();
                let code = libc::getpwuid_r(id, &mut entry, buffer.as_mut_ptr(), buffer.len(), &mut result);
                let name =
                    (!result.is_null()).then(|| CStr::from_ptr(entry.pw_name).to_string_lossy().into_owned());
                (code, name)
            }
            Database::Groups => {
                let mut entry: libc::group = std::mem::zeroed();
                let mut result = std::ptr::null_mut();
                let code = libc::getgrgid_r(id, &mut entry, buffer.as_mut_ptr(), buffer.len(), &mut result);
                let name =
                    (!result.is_null()).then(|| CStr::from_ptr(entry.gr_name).to_string_lossy().into_owned());
                (code, name)
            }
        }
    })
}

/// Calls `lookup` with growing buffers while it answers ERANGE.
fn with_entry_buffer<T>(mut lookup: impl FnMut(&mut [libc::c_char]) -> (i32, Option<T>)) -> Option<T> {
    let mut size = ENTRY_BUFFER_BYTES;
    loop {
        let mut buffer = vec![0 as libc::c_char; size];
        let (code, found) = lookup(&mut buffer);
        if code == libc::ERANGE && size < ENTRY_BUFFER_BYTES_MAX {
            size *= 2;
            continue;
        }
        return found;
    }
}

/// The plfs kind of an HDFS failure. Java exceptions arrive as class names
/// (`RPCError(class, message)`); the ones plfs acts on are mapped, the
/// rest are `Io`.
fn map_kind(error: &HdfsError) -> ErrorKind {
    match error {
        HdfsError::FileNotFound(_) => ErrorKind::NotFound,
        HdfsError::AlreadyExists(_) => ErrorKind::AlreadyExists,
        HdfsError::IsADirectoryError(_) => ErrorKind::IsADirectory,
        HdfsError::InvalidPath(_) | HdfsError::InvalidArgument(_) | HdfsError::UrlParseError(_) => {
            ErrorKind::InvalidInput
        }
        HdfsError::ChecksumError => ErrorKind::Corrupt,
        HdfsError::UnsupportedFeature(_) | HdfsError::UnsupportedErasureCodingPolicy(_) => {
            ErrorKind::Unsupported
        }
        HdfsError::BlocksNotFound(_) => ErrorKind::Unavailable,
        HdfsError::InternalError(_) => ErrorKind::Internal,
        HdfsError::IOError(io) => match io.kind() {
            std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::NotConnected
            | std::io::ErrorKind::TimedOut
            | std::io::ErrorKind::HostUnreachable
            | std::io::ErrorKind::NetworkUnreachable
            | std::io::ErrorKind::BrokenPipe => ErrorKind::Unavailable,
            _ => ErrorKind::Io,
        },
        HdfsError::RPCError(class, message) | HdfsError::FatalRPCError(class, message) => {
            map_exception(class, message)
        }
        HdfsError::SASLError(_) | HdfsError::GSSAPIError(..) | HdfsError::NoSASLMechanism => {
            ErrorKind::PermissionDenied
        }
        _ => ErrorKind::Io,
    }
}

fn map_exception(class: &str, message: &str) -> ErrorKind {
    let simple = class.rsplit('.').next().unwrap_or(class);
    match simple {
        "FileNotFoundException" => ErrorKind::NotFound,
        "FileAlreadyExistsException" | "AlreadyBeingCreatedException" => ErrorKind::AlreadyExists,
        "ParentNotDirectoryException" | "PathIsNotDirectoryException" => ErrorKind::NotADirectory,
        "PathIsNotEmptyDirectoryException" => ErrorKind::DirectoryNotEmpty,
        "AccessControlException" | "AuthorizationException" => ErrorKind::PermissionDenied,
        "QuotaExceededException" | "DSQuotaExceededException" | "NSQuotaExceededException" => {
            ErrorKind::NoSpace
        }
        "SafeModeException"
        | "StandbyException"
        | "RetriableException"
        | "ObserverRetryOnActiveException" => ErrorKind::Unavailable,
        "InvalidPathException" | "HadoopIllegalArgumentException" | "PathComponentTooLongException" => {
            ErrorKind::InvalidInput
        }
        "UnresolvedLinkException" => ErrorKind::Unsupported,
        // A log removed while open: "No lease on /x: File does not exist."
        "LeaseExpiredException" if message.contains("does not exist") => ErrorKind::NotFound,
        _ => ErrorKind::Io,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_exceptions_map_to_kinds() {
        let rpc = |class: &str, message: &str| HdfsError::RPCError(class.into(), message.into());
        let cases = [
            (rpc("java.io.FileNotFoundException", "x"), ErrorKind::NotFound),
            (rpc("org.apache.hadoop.fs.ParentNotDirectoryException", "x"), ErrorKind::NotADirectory),
            (rpc("org.apache.hadoop.fs.PathIsNotEmptyDirectoryException", "x"), ErrorKind::DirectoryNotEmpty),
            (rpc("org.apache.hadoop.security.AccessControlException", "x"), ErrorKind::PermissionDenied),
            (rpc("org.apache.hadoop.hdfs.protocol.DSQuotaExceededException", "x"), ErrorKind::NoSpace),
            (rpc("org.apache.hadoop.hdfs.server.namenode.SafeModeException", "x"), ErrorKind::Unavailable),
            (
                rpc("org.apache.hadoop.hdfs.server.namenode.LeaseExpiredException", "File does not exist."),
                ErrorKind::NotFound,
            ),
            (
                rpc("org.apache.hadoop.hdfs.server.namenode.LeaseExpiredException", "lease gone"),
                ErrorKind::Io,
            ),
            (rpc("java.io.IOException", "anything"), ErrorKind::Io),
            (HdfsError::AlreadyExists("x".into()), ErrorKind::AlreadyExists),
            (
                HdfsError::IOError(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)),
                ErrorKind::Unavailable,
            ),
        ];
        for (error, kind) in cases {
            assert_eq!(map_kind(&error), kind, "{error}");
        }
    }

    #[test]
    fn ids_round_trip_through_names() {
        let ids = IdMap::default();
        assert_eq!(ids.user_id("root"), 0);
        assert_eq!(ids.user_name(0), "root");
        assert_eq!(ids.group_id(&ids.group_name(0)), 0);
        // An id without a local name travels as its decimal text.
        assert_eq!(ids.user_name(4_000_000_000), "4000000000");
        assert_eq!(ids.user_id("4000000000"), 4_000_000_000);
        assert_eq!(ids.group_id("supergroup-that-does-not-exist"), UNKNOWN_ID);
    }
}
