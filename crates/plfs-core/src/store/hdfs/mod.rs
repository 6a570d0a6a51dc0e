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
//!   group databases (the crate-private `ids` module).
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
//!
//! The code is laid out by concern: `connection` (the per-process client
//! and runtime, and what the store shares with its handles), `staging`
//! (files and directories built under a private name and renamed into
//! place), `writer` (logs), `reader`, `ids` (owner and group names) and
//! `error` (HDFS failures as plfs errors); this module holds the [`Store`]
//! calls themselves.

mod connection;
mod error;
mod ids;
mod reader;
mod staging;
mod writer;

use std::collections::HashMap;
use std::fmt;
use std::process;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hdfs_native::HdfsError;
use hdfs_native::client::FileStatus;

use crate::error::{Error, ErrorKind, Result};
use crate::store::{
    AppendWriter, Capabilities, DirEntry, EntryKind, Metadata, RandomWriter, ReadHandle, SpaceInfo, Store,
    StorePath, WriteOpen, unsupported_exchange, unsupported_random_writes,
};
use connection::{Connection, Inner};
use error::map_kind;
use ids::IdMap;
use reader::HdfsReadHandle;
use writer::{HdfsAppendWriter, LogState, OpenLog};

pub use connection::IO_THREADS;
pub use ids::UNKNOWN_ID;

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

/// A store rooted at one HDFS directory; [`StorePath::root`] is that directory.
pub struct HdfsStore {
    inner: Arc<Inner>,
}

impl fmt::Debug for HdfsStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HdfsStore").field("url", &self.inner.url).finish_non_exhaustive()
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

    fn existing(&self, op: &str, path: &StorePath) -> Result<()> {
        self.status(op, path).map(|_| ())
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
            // A file under construction that is deleted loses its writer's lease.
            unlinked_appends: false,
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

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
