//! The `s3://bucket/prefix` store, on `object_store`'s S3 client.
//!
//! How the [`Store`] calls map onto S3 (docs/ARCHITECTURE.md has the table):
//!
//! - **Directories are prefixes.** A directory made by `create_dir` or
//!   `create_dir_all` is marked by an empty object `dir/.plfs-dir`, so an
//!   empty directory exists and stays until `remove_dir`. A prefix with
//!   objects under it is a directory too, marker or not.
//! - **Whole files** (`create_new`, `replace`) are single PUTs; `create_new`
//!   sends `If-None-Match: *`, so of many racing creators exactly one wins.
//!   plfs's container creation on this store rests on that (see
//!   `container::publish_by_access_file`).
//! - **Logs** (`create_append`) are an empty *head* object `p` (user metadata
//!   `plfs-log: 1`), created with `If-None-Match: *` so a log is created
//!   once, plus immutable *segment* objects `p.seg/0000000000`, `…/0000000001`,
//!   sealed in order at `sync`, `close`, and before an append that would
//!   take the buffer past [`SEGMENT_BYTES_MAX`] (only a larger append is
//!   split across segments). Bytes not yet sealed live in the writer's
//!   memory: this process's readers see them (through the store's table of
//!   live logs), other processes see sealed segments only (docs/FORMAT.md
//!   §13).
//! - **Renames** copy and delete (S3 has no rename): files are read and put
//!   back with `If-None-Match: *` (so a rename never replaces); logs and
//!   directories claim the target the same way (head object, directory
//!   marker), then are copied object by object on the server. Directory
//!   renames are therefore not atomic (`atomic_dir_rename: false`).
//! - `space()` reports fixed, very large figures: S3 has no capacity to
//!   ask about.
//! - Modes, owners, times and symlinks are not stored (`Capabilities`): plfs
//!   keeps a file's attributes in its access file on every store.
//!
//! The store owns a small tokio runtime and blocks on it, so the core stays
//! synchronous. Credentials come from the location's `credentials_file` or
//! the standard `AWS_*` environment variables and never appear in errors,
//! `Debug` output or logs.
//!
//! The code is laid out by concern, as `object_store` lays out its own AWS
//! backend: `client` (the client, its runtime and the requests the calls
//! share), `keys` (store paths ↔ object keys), `credential`, `writer`
//! (logs and their segments), `reader`, `rename` (copy and delete) and
//! `error`; this module holds the [`Store`] calls themselves.

mod client;
mod credential;
mod error;
mod keys;
mod reader;
mod rename;
mod writer;

use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as Key;
use object_store::{Attributes, ObjectStore, ObjectStoreExt, PutMode};

use crate::config::S3Access;
use crate::error::{Error, ErrorKind, Result};
use crate::store::{
    AppendWriter, Capabilities, DirEntry, EntryKind, Metadata, RandomWriter, ReadHandle, SpaceInfo, Store,
    StorePath, WriteOpen, unsupported_exchange, unsupported_random_writes,
};
use client::{BULK_CONCURRENCY, Probe, Shared, log_attributes};
use error::{describe, kind_of};
use keys::{DIRECTORY_MARKER, SEGMENT_DIRECTORY_SUFFIX, decode_component};
use reader::{S3ReadHandle, Source};
use writer::{LiveLog, LogState, S3AppendWriter, Segment};

pub use writer::SEGMENT_BYTES_MAX;

/// Figures `space()` reports. S3 has no capacity to ask about; like s3fs,
/// the store reports a fixed, very large capacity so `df` works.
const SPACE_BLOCK_SIZE: u64 = 4096;
const SPACE_BLOCKS: u64 = 1 << 40;
const SPACE_FILES: u64 = 1 << 40;

/// A store over one bucket and key prefix.
pub struct S3Store {
    shared: Arc<Shared>,
}

impl S3Store {
    /// Connects to `bucket` under `prefix`. Endpoint, region and credentials
    /// come from `access`, else from the `AWS_*` environment (region
    /// defaults to us-east-1). Nothing is sent until the first call.
    pub fn new(bucket: &str, prefix: &str, access: &S3Access) -> Result<S3Store> {
        Ok(S3Store { shared: Arc::new(Shared::new(bucket, prefix, access)?) })
    }

    /// Whether the store's root is there: the bucket, for a store at the
    /// bucket's top; else the prefix's directory marker or any object under
    /// the prefix, as for any other directory of this store. The store
    /// itself works under a bare prefix (its root is always a directory);
    /// this is for `plfs check-config`, and, unlike every other call, proves
    /// the endpoint, bucket and credentials with a request: a listing, whose
    /// refusals carry the server's words (a HEAD's carry none). An error is
    /// the server's answer; a missing bucket is NotFound.
    pub fn root_exists(&self) -> Result<bool> {
        let shared = &self.shared;
        let root = StorePath::root();
        let prefix = shared.list_prefix(&root);
        let mut stream = shared.client.list(prefix.as_ref());
        match shared.block_on(stream.next()) {
            Some(Ok(_)) => Ok(true),
            None => Ok(prefix.is_none()),
            Some(Err(error)) => {
                let words = describe(&error);
                // object_store has no kind for it: a generic 404 error.
                let kind = if words.contains("NoSuchBucket") { ErrorKind::NotFound } else { kind_of(&error) };
                Err(Error::new(kind, format!("{}: list: {words}", shared.url)))
            }
        }
    }

    /// Marks the root prefix as a directory (see [`S3Store::root_exists`]);
    /// a bucket is not created.
    pub fn create_root(&self) -> Result<()> {
        let shared = &self.shared;
        let root = StorePath::root();
        if shared.root.is_empty() {
            return Ok(());
        }
        shared
            .block_on(shared.put(
                &shared.marker_key(&root),
                Bytes::new(),
                PutMode::Overwrite,
                Attributes::new(),
            ))
            .map_err(|error| shared.error("mkdir", &root, error))
    }

    fn handle(&self) -> Arc<Shared> {
        Arc::clone(&self.shared)
    }
}

impl fmt::Debug for S3Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Store").field("url", &self.shared.url).finish_non_exhaustive()
    }
}

impl Store for S3Store {
    fn url(&self) -> &str {
        &self.shared.url
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            directories: false,
            modes: false,
            owners: false,
            times: false,
            symlinks: false,
            atomic_dir_rename: false,
            // No call swaps two names; a logical rename onto an existing
            // file falls back to two renames (docs/ARCHITECTURE.md).
            exchange: false,
            random_writes: false,
            // A log's later segment would put the object back.
            unlinked_appends: false,
        }
    }

    fn create_dir(&self, path: &StorePath, _mode: u32) -> Result<()> {
        if !matches!(self.shared.probe_blocking("mkdir", path)?, Probe::Missing) {
            return Err(self.shared.plain_error(ErrorKind::AlreadyExists, "mkdir", path, "already exists"));
        }
        self.shared.require_parent("mkdir", path)?;
        self.shared
            .block_on(self.shared.put(
                &self.shared.marker_key(path),
                Bytes::new(),
                PutMode::Create,
                Attributes::new(),
            ))
            .map_err(|error| self.shared.error("mkdir", path, error))
    }

    /// Marks `path` and every ancestor, so each stays a directory when the
    /// ones below it are removed (as `mkdir -p` would leave them). The
    /// deepest marker goes first: an ancestor never shows up empty on its
    /// way to holding `path` (container creation tells a container being
    /// made from an empty directory by its `meta/`).
    fn create_dir_all(&self, path: &StorePath) -> Result<()> {
        let mut levels = Vec::new();
        let mut current = Some(path.clone());
        while let Some(level) = current.filter(|level| !level.is_root()) {
            current = level.parent();
            levels.push(self.shared.marker_key(&level));
        }
        let Some((deepest, ancestors)) = levels.split_first() else { return Ok(()) };
        let put = |key: Key| async move {
            self.shared.put(&key, Bytes::new(), PutMode::Overwrite, Attributes::new()).await
        };
        self.shared
            .block_on(async {
                put(deepest.clone()).await?;
                futures::stream::iter(ancestors.iter().cloned())
                    .map(put)
                    .buffer_unordered(BULK_CONCURRENCY)
                    .try_collect::<Vec<()>>()
                    .await
            })
            .map(|_| ())
            .map_err(|error| self.shared.error("mkdir -p", path, error))
    }

    fn list(&self, path: &StorePath) -> Result<Vec<DirEntry>> {
        let prefix = self.shared.list_prefix(path);
        let listing = self
            .shared
            .block_on(self.shared.client.list_with_delimiter(prefix.as_ref()))
            .map_err(|error| self.shared.error("list", path, error))?;
        let mut marked = false;
        let mut files = BTreeSet::new();
        for object in &listing.objects {
            match object.location.filename() {
                Some(DIRECTORY_MARKER) => marked = true,
                Some(name) => {
                    files.insert(decode_component(name));
                }
                None => {}
            }
        }
        let mut entries: Vec<DirEntry> =
            files.iter().map(|name| DirEntry { name: name.clone(), kind: EntryKind::File }).collect();
        for directory in &listing.common_prefixes {
            let Some(name) = directory.filename().map(decode_component) else { continue };
            // `p.seg/` beside an object `p` holds the segments of log p.
            let is_segments =
                name.strip_suffix(SEGMENT_DIRECTORY_SUFFIX).is_some_and(|log| files.contains(log));
            if !is_segments {
                entries.push(DirEntry { name, kind: EntryKind::Directory });
            }
        }
        if entries.is_empty() && !marked && !path.is_root() {
            return match self.shared.probe_blocking("list", path)? {
                Probe::File { .. } | Probe::Log { .. } => {
                    Err(self.shared.plain_error(ErrorKind::NotADirectory, "list", path, "is a file"))
                }
                _ => Err(self.shared.plain_error(ErrorKind::NotFound, "list", path, "no such directory")),
            };
        }
        Ok(entries)
    }

    fn metadata(&self, path: &StorePath) -> Result<Metadata> {
        let file = |size, mtime| Metadata {
            kind: EntryKind::File,
            size,
            mode: None,
            uid: None,
            gid: None,
            atime: None,
            mtime,
            ctime: None,
        };
        if let Some(log) = self.shared.live_log(path) {
            return Ok(file(log.lock().len(), None));
        }
        match self.shared.probe_blocking("stat", path)? {
            Probe::File { size, mtime } => Ok(file(size, mtime)),
            Probe::Log { mtime } => {
                let segments = self
                    .shared
                    .block_on(self.shared.segments(path))
                    .map_err(|error| self.shared.error("stat", path, error))?;
                Ok(file(segments.iter().map(|segment| segment.len).sum(), mtime))
            }
            Probe::Directory => Ok(Metadata { kind: EntryKind::Directory, ..file(0, None) }),
            Probe::Missing => {
                Err(self.shared.plain_error(ErrorKind::NotFound, "stat", path, "no such file or directory"))
            }
        }
    }

    fn remove_file(&self, path: &StorePath) -> Result<()> {
        match self.shared.probe_blocking("unlink", path)? {
            Probe::Log { .. } => self.shared.remove_log(path),
            Probe::File { .. } => self
                .shared
                .block_on(self.shared.client.delete(&self.shared.key(path)))
                .map_err(|error| self.shared.error("unlink", path, error)),
            Probe::Directory => {
                Err(self.shared.plain_error(ErrorKind::IsADirectory, "unlink", path, "is a directory"))
            }
            Probe::Missing => {
                Err(self.shared.plain_error(ErrorKind::NotFound, "unlink", path, "no such file"))
            }
        }
    }

    fn remove_dir(&self, path: &StorePath) -> Result<()> {
        if path.is_root() {
            return Err(self.shared.plain_error(
                ErrorKind::InvalidInput,
                "rmdir",
                path,
                "the store root cannot be removed",
            ));
        }
        let entries = self.list(path)?;
        if !entries.is_empty() {
            return Err(self.shared.plain_error(
                ErrorKind::DirectoryNotEmpty,
                "rmdir",
                path,
                "directory not empty",
            ));
        }
        // A racing create beneath it keeps the prefix, and so the directory.
        self.shared
            .block_on(self.shared.client.delete(&self.shared.marker_key(path)))
            .map_err(|error| self.shared.error("rmdir", path, error))
    }

    fn exchange(&self, a: &StorePath, b: &StorePath) -> Result<()> {
        Err(unsupported_exchange(&self.shared.url, a, b))
    }

    fn rename(&self, from: &StorePath, to: &StorePath) -> Result<()> {
        if from.is_root() {
            return Err(self.shared.plain_error(
                ErrorKind::InvalidInput,
                "rename",
                from,
                "the store root cannot be moved",
            ));
        }
        let source = self.shared.probe_blocking("rename", from)?;
        if matches!(source, Probe::Missing) {
            return Err(self.shared.plain_error(
                ErrorKind::NotFound,
                "rename",
                from,
                "no such file or directory",
            ));
        }
        if to.starts_with(from) && to != from {
            return Err(self.shared.plain_error(
                ErrorKind::InvalidInput,
                "rename",
                from,
                &format!("{to} is inside it"),
            ));
        }
        if !matches!(self.shared.probe_blocking("rename", to)?, Probe::Missing) {
            return Err(self.shared.plain_error(
                ErrorKind::AlreadyExists,
                "rename",
                from,
                &format!("{to} exists"),
            ));
        }
        self.shared.require_parent("rename", to)?;
        match source {
            Probe::File { .. } => self.shared.rename_file(from, to, false),
            Probe::Log { .. } => self.shared.rename_file(from, to, true),
            Probe::Directory => self.shared.rename_directory(from, to),
            Probe::Missing => unreachable!("checked above"),
        }
    }

    fn create_new(&self, path: &StorePath, contents: &[u8]) -> Result<()> {
        self.shared.require_parent("create", path)?;
        self.shared
            .block_on(self.shared.put(
                &self.shared.key(path),
                Bytes::copy_from_slice(contents),
                PutMode::Create,
                Attributes::new(),
            ))
            .map_err(|error| self.shared.error("create", path, error))
    }

    fn replace(&self, path: &StorePath, contents: &[u8]) -> Result<()> {
        self.shared.require_parent("replace", path)?;
        self.shared
            .block_on(self.shared.put(
                &self.shared.key(path),
                Bytes::copy_from_slice(contents),
                PutMode::Overwrite,
                Attributes::new(),
            ))
            .map_err(|error| self.shared.error("replace", path, error))
    }

    fn create_append(&self, path: &StorePath) -> Result<Box<dyn AppendWriter>> {
        self.shared.require_parent("create log", path)?;
        self.shared
            .block_on(self.shared.put(
                &self.shared.key(path),
                Bytes::new(),
                PutMode::Create,
                log_attributes(),
            ))
            .map_err(|error| self.shared.error("create log", path, error))?;
        let log = Arc::new(LiveLog {
            state: Mutex::new(LogState {
                path: path.clone(),
                sealed: Vec::new(),
                sealed_bytes: 0,
                buffer: Vec::new(),
                removed: false,
            }),
        });
        self.shared.live().insert(path.clone(), Arc::downgrade(&log));
        Ok(Box::new(S3AppendWriter { store: self.handle(), log }))
    }

    fn open_read(&self, path: &StorePath) -> Result<Box<dyn ReadHandle>> {
        let source = if let Some(log) = self.shared.live_log(path) {
            Source::Live(log)
        } else {
            match self.shared.probe_blocking("open", path)? {
                Probe::File { size, .. } => {
                    Source::Object(Segment { key: self.shared.key(path), start: 0, len: size })
                }
                Probe::Log { .. } => Source::Sealed { path: path.clone(), segments: RwLock::new(None) },
                Probe::Directory => {
                    return Err(self.shared.plain_error(
                        ErrorKind::IsADirectory,
                        "open",
                        path,
                        "is a directory",
                    ));
                }
                Probe::Missing => {
                    return Err(self.shared.plain_error(ErrorKind::NotFound, "open", path, "no such file"));
                }
            }
        };
        Ok(Box::new(S3ReadHandle { store: self.handle(), path: path.clone(), source }))
    }

    fn open_write(&self, path: &StorePath, _how: WriteOpen) -> Result<Box<dyn RandomWriter>> {
        Err(unsupported_random_writes(&self.shared.url, path))
    }

    fn set_mode(&self, path: &StorePath, _mode: u32) -> Result<()> {
        Err(self.shared.unsupported("chmod", path))
    }

    fn set_owner(&self, path: &StorePath, _uid: Option<u32>, _gid: Option<u32>) -> Result<()> {
        Err(self.shared.unsupported("chown", path))
    }

    fn set_times(
        &self,
        path: &StorePath,
        _atime: Option<SystemTime>,
        _mtime: Option<SystemTime>,
    ) -> Result<()> {
        Err(self.shared.unsupported("utimens", path))
    }

    fn symlink(&self, _target: &str, path: &StorePath) -> Result<()> {
        Err(self.shared.unsupported("symlink", path))
    }

    fn read_link(&self, path: &StorePath) -> Result<String> {
        Err(self.shared.unsupported("readlink", path))
    }

    fn space(&self) -> Result<SpaceInfo> {
        Ok(SpaceInfo {
            block_size: SPACE_BLOCK_SIZE,
            blocks: SPACE_BLOCKS,
            blocks_free: SPACE_BLOCKS,
            blocks_available: SPACE_BLOCKS,
            files: SPACE_FILES,
            files_free: SPACE_FILES,
            name_max: super::path::NAME_MAX_BYTES as u64,
        })
    }
}
