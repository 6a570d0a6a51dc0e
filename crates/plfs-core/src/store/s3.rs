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

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::future::Future;
use std::path::Path as FsPath;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, Weak};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as Key;
use object_store::{
    Attribute, Attributes, BackoffConfig, ClientConfigKey, GetOptions, ObjectStore, ObjectStoreExt, PutMode,
    PutOptions, PutPayload, RetryConfig,
};

use super::{
    AppendWriter, Capabilities, DirEntry, EntryKind, Metadata, RandomWriter, ReadHandle, SpaceInfo, Store,
    StorePath, WriteOpen, unsupported_exchange, unsupported_random_writes,
};
use crate::config::S3Access;
use crate::error::{Error, ErrorKind, Result};

/// Bytes a log buffers before it seals them as a segment. Large enough that
/// a PUT runs at full speed (S3 and MinIO both recommend 8–16 MiB parts)
/// and that one listing page (1000 keys) covers gigabytes of log (segments
/// end at append boundaries, so with appends of at most 4 MiB every full
/// segment is over 4 MiB); small enough
/// that a process with many open logs stays within memory (a writer has
/// two logs open: 16 MiB of buffers at most).
pub const SEGMENT_BYTES_MAX: usize = 8 << 20;

/// Marks a directory made by `create_dir` / `create_dir_all`. Names starting
/// with `.plfs-` are reserved, so no user file can collide with it.
const DIRECTORY_MARKER: &str = ".plfs-dir";

/// The user-metadata key (`x-amz-meta-plfs-log`) that marks a log's head.
const LOG_ATTRIBUTE: &str = "plfs-log";

/// Suffix of the prefix under which a log's segments live: `p.seg/…`.
const SEGMENT_DIRECTORY_SUFFIX: &str = ".seg";

/// Segment numbers are zero-padded so listings return them in order.
const SEGMENT_NUMBER_DIGITS: usize = 10;

/// Worker threads of the store's runtime: requests are I/O-bound, and
/// callers block on them from their own threads.
const RUNTIME_WORKER_THREADS: usize = 2;

/// Requests in flight at once when a rename or removal touches many objects.
const BULK_CONCURRENCY: usize = 8;

/// A dead or unreachable endpoint fails within seconds, not the client's
/// default three minutes of retries.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
const RETRIES_MAX: usize = 3;
const RETRY_TIMEOUT: Duration = Duration::from_secs(20);

/// Figures `space()` reports. S3 has no capacity to ask about; like s3fs,
/// the store reports a fixed, very large capacity so `df` works.
const SPACE_BLOCK_SIZE: u64 = 4096;
const SPACE_BLOCKS: u64 = 1 << 40;
const SPACE_FILES: u64 = 1 << 40;

/// A store over one bucket and key prefix.
pub struct S3Store {
    shared: Arc<Shared>,
}

/// The client, its runtime and the live-log table, shared with the
/// store's open readers and writers.
struct Shared {
    url: String,
    /// Key prefix every path lives under (the location's `/prefix`).
    root: Vec<String>,
    client: AmazonS3,
    runtime: tokio::runtime::Runtime,
    /// Logs this process is writing, by path, so its readers see unsealed
    /// bytes and removals and renames reach the writers.
    live: Mutex<HashMap<StorePath, Weak<LiveLog>>>,
}

/// Key id and secret from a credentials file. `Debug` shows neither.
struct Credentials {
    key_id: String,
    secret: String,
    token: Option<String>,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Credentials(<redacted>)")
    }
}

impl S3Store {
    /// Connects to `bucket` under `prefix`; see [`Shared::new`].
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

impl Shared {
    /// Connects to `bucket` under `prefix`. Endpoint, region and credentials
    /// come from `access`, else from the `AWS_*` environment (region
    /// defaults to us-east-1). Nothing is sent until the first call.
    fn new(bucket: &str, prefix: &str, access: &S3Access) -> Result<Shared> {
        let root: Vec<String> =
            prefix.split('/').filter(|part| !part.is_empty()).map(str::to_owned).collect();
        let url = if root.is_empty() {
            format!("s3://{bucket}")
        } else {
            format!("s3://{bucket}/{}", root.join("/"))
        };
        let invalid = |what: String| Error::invalid(format!("{url}: {what}"));
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
        let env_region =
            ["AWS_REGION", "AWS_DEFAULT_REGION"].iter().find_map(|name| std::env::var(name).ok());
        builder =
            builder.with_region(access.region.clone().or(env_region).unwrap_or_else(|| "us-east-1".into()));
        if let Some(endpoint) = &access.endpoint {
            // An explicit http:// endpoint is the admin's choice (MinIO on a
            // private network); the client refuses http unless told.
            builder = builder.with_endpoint(endpoint);
            if endpoint.starts_with("http://") {
                builder = builder.with_allow_http(true);
            }
        }
        // Without static credentials the client would ask the cloud's
        // instance-metadata service (169.254.169.254) for some: a request to
        // a host nobody configured, and a slow, baffling failure off-cloud.
        let env_key = std::env::var_os("AWS_ACCESS_KEY_ID").is_some_and(|key| !key.is_empty());
        if access.credentials_file.is_none() && !env_key {
            return Err(invalid(
                "no credentials: set credentials_file (plfsrc key or ?credentials_file= in the location) \
                 or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
                    .into(),
            ));
        }
        if let Some(file) = &access.credentials_file {
            let credentials = read_credentials(file).map_err(|error| error.context(url.clone()))?;
            builder =
                builder.with_access_key_id(credentials.key_id).with_secret_access_key(credentials.secret);
            if let Some(token) = credentials.token {
                builder = builder.with_token(token);
            }
        }
        let retry = RetryConfig {
            backoff: BackoffConfig::default(),
            max_retries: RETRIES_MAX,
            retry_timeout: RETRY_TIMEOUT,
        };
        // Set key by key: `with_client_options` would replace the options
        // `from_env` and `with_allow_http` already set.
        let timeouts =
            [(ClientConfigKey::ConnectTimeout, CONNECT_TIMEOUT), (ClientConfigKey::Timeout, REQUEST_TIMEOUT)];
        for (key, duration) in timeouts {
            builder =
                builder.with_config(AmazonS3ConfigKey::Client(key), format!("{}ms", duration.as_millis()));
        }
        let client = builder
            .with_retry(retry)
            .build()
            // The builder's errors name settings, never their secret values.
            .map_err(|error| invalid(format!("cannot configure the S3 client ({error})")))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(RUNTIME_WORKER_THREADS)
            .thread_name("plfs-s3")
            .enable_all()
            .build()
            .map_err(|error| Error::io(error, format!("{url}: starting the S3 client runtime")))?;
        Ok(Shared { url, root, client, runtime, live: Mutex::new(HashMap::new()) })
    }

    fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// The object key of `path` (each component percent-encoded by
    /// `object_store`, so any file name round-trips).
    fn key(&self, path: &StorePath) -> Key {
        Key::from_iter(self.root.iter().map(String::as_str).chain(path.components()))
    }

    fn marker_key(&self, path: &StorePath) -> Key {
        self.key(path).join(DIRECTORY_MARKER)
    }

    /// The prefix (as a key) under which the segments of log `path` live.
    fn segment_directory(&self, path: &StorePath) -> Key {
        let name = path.file_name().unwrap_or_default();
        let parent = path.parent().unwrap_or_default();
        self.key(&parent).join(format!("{name}{SEGMENT_DIRECTORY_SUFFIX}"))
    }

    fn segment_key(&self, path: &StorePath, number: u64) -> Key {
        self.segment_directory(path).join(format!("{number:0width$}", width = SEGMENT_NUMBER_DIGITS))
    }

    /// `Some(key)` to list under, or None for the bucket root.
    fn list_prefix(&self, path: &StorePath) -> Option<Key> {
        let key = self.key(path);
        (!key.as_ref().is_empty()).then_some(key)
    }

    fn error(&self, op: &str, path: &StorePath, error: object_store::Error) -> Error {
        let kind = kind_of(&error);
        Error::new(kind, format!("{}: {op} {path}: {}", self.url, describe(&error)))
    }

    fn plain_error(&self, kind: ErrorKind, op: &str, path: &StorePath, why: &str) -> Error {
        Error::new(kind, format!("{}: {op} {path}: {why}", self.url))
    }

    fn unsupported(&self, op: &str, path: &StorePath) -> Error {
        self.plain_error(ErrorKind::Unsupported, op, path, "S3 stores no modes, owners, times or symlinks")
    }

    fn live(&self) -> MutexGuard<'_, HashMap<StorePath, Weak<LiveLog>>> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn live_log(&self, path: &StorePath) -> Option<Arc<LiveLog>> {
        let mut live = self.live();
        let log = live.get(path).and_then(Weak::upgrade);
        if log.is_none() {
            live.remove(path);
        }
        log
    }

    /// HEAD of one object: None if absent; Some((size, is a log head)).
    async fn head(&self, key: &Key) -> object_store::Result<Option<(u64, Option<SystemTime>, bool)>> {
        let options = GetOptions { head: true, ..GetOptions::default() };
        match self.client.get_opts(key, options).await {
            Ok(result) => {
                let is_log = result.attributes.get(&Attribute::Metadata(LOG_ATTRIBUTE.into())).is_some();
                Ok(Some((result.meta.size, Some(result.meta.last_modified.into()), is_log)))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Whether any object lies under `path/` (one listing page at most).
    async fn has_children(&self, path: &StorePath) -> object_store::Result<bool> {
        let prefix = self.list_prefix(path);
        let mut stream = self.client.list(prefix.as_ref());
        match stream.next().await {
            Some(Ok(_)) => Ok(true),
            Some(Err(error)) => Err(error),
            None => Ok(false),
        }
    }

    /// What is at `path`, without the segment listing of a log.
    ///
    /// The object and the directory marker are asked for at once (one round
    /// trip); a listing, which returns up to 1000 keys, is the last resort
    /// for a directory without a marker (made by another tool).
    async fn probe(&self, path: &StorePath) -> object_store::Result<Probe> {
        if path.is_root() {
            return Ok(Probe::Directory);
        }
        let (key, marker_key) = (self.key(path), self.marker_key(path));
        let (object, marker) = futures::try_join!(self.head(&key), self.head(&marker_key))?;
        if let Some((size, mtime, is_log)) = object {
            return Ok(if is_log { Probe::Log { mtime } } else { Probe::File { size, mtime } });
        }
        if marker.is_some() || self.has_children(path).await? {
            Ok(Probe::Directory)
        } else {
            Ok(Probe::Missing)
        }
    }

    fn probe_blocking(&self, op: &str, path: &StorePath) -> Result<Probe> {
        self.block_on(self.probe(path)).map_err(|error| self.error(op, path, error))
    }

    /// New objects need an existing parent directory, as on POSIX: its
    /// marker (the usual case), else anything under it.
    fn require_parent(&self, op: &str, path: &StorePath) -> Result<()> {
        let Some(parent) = path.parent().filter(|parent| !parent.is_root()) else {
            return Ok(());
        };
        match self.block_on(self.probe(&parent)).map_err(|error| self.error(op, path, error))? {
            Probe::Directory => Ok(()),
            Probe::File { .. } | Probe::Log { .. } => {
                Err(self.plain_error(ErrorKind::NotADirectory, op, path, &format!("{parent} is a file")))
            }
            Probe::Missing => {
                Err(self.plain_error(ErrorKind::NotFound, op, path, &format!("no directory {parent}")))
            }
        }
    }

    async fn put(
        &self,
        key: &Key,
        bytes: Bytes,
        mode: PutMode,
        attributes: Attributes,
    ) -> object_store::Result<()> {
        let options = PutOptions { mode, attributes, ..PutOptions::default() };
        self.client.put_opts(key, PutPayload::from(bytes), options).await.map(|_| ())
    }

    /// The sealed segments of log `path`, in order, with their offsets. A
    /// gap in the numbering ends the log there: a segment past a gap was
    /// not written by the log's one writer in order, so it is not the log's.
    async fn segments(&self, path: &StorePath) -> object_store::Result<Vec<Segment>> {
        let directory = self.segment_directory(path);
        let mut found: Vec<(u64, Key, u64)> = self
            .client
            .list(Some(&directory))
            .try_filter_map(|meta| async move {
                let number = meta.location.filename().and_then(parse_segment_number);
                Ok(number.map(|number| (number, meta.location, meta.size)))
            })
            .try_collect()
            .await?;
        found.sort_by_key(|(number, _, _)| *number);
        let mut segments = Vec::with_capacity(found.len());
        let mut start = 0;
        for (index, (number, key, size)) in found.into_iter().enumerate() {
            if number != index as u64 {
                break;
            }
            segments.push(Segment { key, start, len: size });
            start += size;
        }
        Ok(segments)
    }

    /// Deletes `keys`, a bounded number at a time; already gone is fine.
    async fn delete_all(&self, keys: Vec<Key>) -> object_store::Result<()> {
        futures::stream::iter(keys)
            .map(|key| async move {
                match self.client.delete(&key).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                    Err(error) => Err(error),
                }
            })
            .buffer_unordered(BULK_CONCURRENCY)
            .try_collect::<Vec<()>>()
            .await
            .map(|_| ())
    }

    async fn keys_under(&self, prefix: &Key) -> object_store::Result<Vec<Key>> {
        self.client.list(Some(prefix)).map_ok(|meta| meta.location).try_collect().await
    }

    /// Removes a log: its segments first, so a failure part-way leaves a
    /// shorter log rather than segments without a head.
    fn remove_log(&self, path: &StorePath) -> Result<()> {
        if let Some(log) = self.live_log(path) {
            log.lock().removed = true;
        }
        self.live().remove(path);
        let directory = self.segment_directory(path);
        let head = self.key(path);
        self.block_on(async {
            let segments = self.keys_under(&directory).await?;
            self.delete_all(segments).await?;
            self.client.delete(&head).await
        })
        .map_err(|error| self.error("remove log", path, error))
    }

    /// Rename of one file or log: the target is claimed with a conditional
    /// put (so a rename never replaces, and of racing renames one wins),
    /// then the source goes.
    fn rename_file(&self, from: &StorePath, to: &StorePath, is_log: bool) -> Result<()> {
        let fail = |error| self.error("rename", from, error).context(format!("to {to}"));
        if !is_log {
            return self
                .block_on(async {
                    let bytes = self.client.get(&self.key(from)).await?.bytes().await?;
                    self.put(&self.key(to), bytes, PutMode::Create, Attributes::new()).await?;
                    self.client.delete(&self.key(from)).await
                })
                .map_err(fail);
        }
        // A live log keeps its lock for the whole move, so no segment is
        // sealed under the old name after its segments were copied.
        let live = self.live_log(from);
        let mut state = live.as_ref().map(|log| log.lock());
        self.block_on(async {
            self.put(&self.key(to), Bytes::new(), PutMode::Create, log_attributes()).await?;
            let segments = self.segments(from).await?;
            let copies: Vec<(Key, Key)> = segments
                .iter()
                .enumerate()
                .map(|(number, segment)| (segment.key.clone(), self.segment_key(to, number as u64)))
                .collect();
            self.copy_all(copies).await?;
            self.delete_all(segments.into_iter().map(|segment| segment.key).collect()).await?;
            self.client.delete(&self.key(from)).await
        })
        .map_err(fail)?;
        if let (Some(log), Some(state)) = (&live, state.as_mut()) {
            state.move_to(self, to.clone());
            let mut table = self.live();
            table.remove(from);
            table.insert(to.clone(), Arc::downgrade(log));
        }
        Ok(())
    }

    async fn copy_all(&self, pairs: Vec<(Key, Key)>) -> object_store::Result<()> {
        futures::stream::iter(pairs)
            .map(|(from, to)| async move { self.client.copy(&from, &to).await })
            .buffer_unordered(BULK_CONCURRENCY)
            .try_collect::<Vec<()>>()
            .await
            .map(|_| ())
    }

    /// Rename of a directory: the target's marker is claimed with a
    /// conditional put, then every object under the source is copied on the
    /// server and deleted. Not atomic: a reader in between sees both trees,
    /// and a failure part-way leaves a partial copy. Logs this process
    /// writes under it move with it.
    fn rename_directory(&self, from: &StorePath, to: &StorePath) -> Result<()> {
        let fail = |error| self.error("rename directory", from, error).context(format!("to {to}"));
        let mut moving: Vec<(StorePath, Arc<LiveLog>)> = {
            let table = self.live();
            table
                .iter()
                .filter(|(path, _)| path.starts_with(from))
                .filter_map(|(path, log)| log.upgrade().map(|log| (path.clone(), log)))
                .collect()
        };
        // One global order (by address), so two renames never deadlock.
        moving.sort_by_key(|(_, log)| Arc::as_ptr(log) as usize);
        let mut states: Vec<MutexGuard<'_, LogState>> = moving.iter().map(|(_, log)| log.lock()).collect();
        let source = self.key(from);
        let target = self.key(to);
        self.block_on(async {
            // Claiming the target's marker first makes racing renames onto
            // one name end with one winner, as for files.
            self.put(&self.marker_key(to), Bytes::new(), PutMode::Create, Attributes::new()).await?;
            let keys = self.keys_under(&source).await?;
            let pairs: Vec<(Key, Key)> = keys
                .iter()
                .map(|key| {
                    let rest = key.prefix_match(&source).into_iter().flatten();
                    let moved = rest.fold(target.clone(), |moved, part| moved.join(part));
                    (key.clone(), moved)
                })
                .collect();
            self.copy_all(pairs).await?;
            self.delete_all(keys).await
        })
        .map_err(fail)?;
        let mut table = self.live();
        for ((old, log), state) in moving.iter().zip(states.iter_mut()) {
            let relative: Vec<&str> = old.components().skip(from.components().count()).collect();
            let moved = relative.iter().try_fold(to.clone(), |path, part| path.join(part))?;
            state.move_to(self, moved.clone());
            table.remove(old);
            table.insert(moved, Arc::downgrade(log));
        }
        Ok(())
    }
}

/// What one HEAD (and, for a missing object, one listing) found.
#[derive(Debug, Clone, Copy)]
enum Probe {
    File { size: u64, mtime: Option<SystemTime> },
    Log { mtime: Option<SystemTime> },
    Directory,
    Missing,
}

fn log_attributes() -> Attributes {
    let mut attributes = Attributes::new();
    attributes.insert(Attribute::Metadata(LOG_ATTRIBUTE.into()), "1".into());
    attributes
}

fn parse_segment_number(name: &str) -> Option<u64> {
    (name.len() == SEGMENT_NUMBER_DIGITS && name.bytes().all(|byte| byte.is_ascii_digit()))
        .then(|| name.parse().ok())
        .flatten()
}

/// Undoes `object_store`'s percent-encoding of one key component.
fn decode_component(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let hex = |at: usize| bytes.get(at).and_then(|byte| (*byte as char).to_digit(16));
        match (bytes[index], hex(index + 1), hex(index + 2)) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                index += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The error kind a caller can act on. A connection that cannot be made
/// at all is `Unavailable`, so a dead endpoint reads as such.
fn kind_of(error: &object_store::Error) -> ErrorKind {
    use object_store::Error as E;
    match error {
        E::NotFound { .. } => ErrorKind::NotFound,
        E::AlreadyExists { .. } | E::Precondition { .. } => ErrorKind::AlreadyExists,
        E::NotSupported { .. } | E::NotImplemented { .. } => ErrorKind::Unsupported,
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => ErrorKind::PermissionDenied,
        E::InvalidPath { .. } => ErrorKind::InvalidInput,
        _ if is_unreachable(error) => ErrorKind::Unavailable,
        _ => ErrorKind::Io,
    }
}

fn is_unreachable(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = current {
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind as Io;
            if matches!(
                io.kind(),
                Io::ConnectionRefused
                    | Io::ConnectionReset
                    | Io::TimedOut
                    | Io::NotConnected
                    | Io::HostUnreachable
            ) {
                return true;
            }
        }
        let text = error.to_string();
        if text.contains("error sending request") || text.contains("operation timed out") {
            return true;
        }
        current = error.source();
    }
    false
}

/// One line: the error and its causes. `object_store` errors carry the
/// request URL (endpoint, bucket, key), never credentials.
fn describe(error: &object_store::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Reads `aws_access_key_id`, `aws_secret_access_key` and optionally
/// `aws_session_token` as `key = value` lines (the AWS credentials file
/// format; blank lines, `#` comments and a `[default]` header allowed).
fn read_credentials(file: &FsPath) -> Result<Credentials> {
    let text = std::fs::read_to_string(file)
        .map_err(|error| Error::io(error, format!("credentials_file {}", file.display())))?;
    parse_credentials(&text)
        .map_err(|problem| Error::invalid(format!("credentials_file {}: {problem}", file.display())))
}

fn parse_credentials(text: &str) -> std::result::Result<Credentials, String> {
    let (mut key_id, mut secret, mut token) = (None, None, None);
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line == "[default]" {
            continue;
        }
        let number = index + 1;
        // The value is never echoed: it may be the secret.
        let (name, value) =
            line.split_once('=').ok_or_else(|| format!("line {number}: expected name = value"))?;
        let slot = match name.trim().to_ascii_lowercase().as_str() {
            "aws_access_key_id" => &mut key_id,
            "aws_secret_access_key" => &mut secret,
            "aws_session_token" => &mut token,
            other => return Err(format!("line {number}: unknown name {other:?}")),
        };
        let value = value.trim();
        if value.is_empty() {
            return Err(format!("line {number}: empty value"));
        }
        if slot.replace(value.to_owned()).is_some() {
            return Err(format!("line {number}: {} given twice", name.trim()));
        }
    }
    match (key_id, secret) {
        (Some(key_id), Some(secret)) => Ok(Credentials { key_id, secret, token }),
        _ => Err("needs both aws_access_key_id and aws_secret_access_key".into()),
    }
}

impl fmt::Debug for S3Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Store").field("url", &self.shared.url).finish_non_exhaustive()
    }
}

/// Only the URL: the client's own `Debug` would show its configuration.
impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared").field("url", &self.url).finish_non_exhaustive()
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

/// One sealed segment of a log: its object and where it starts in the log.
#[derive(Debug, Clone)]
struct Segment {
    key: Key,
    start: u64,
    len: u64,
}

/// A log this process is writing, shared by its writer and this
/// process's readers.
#[derive(Debug)]
struct LiveLog {
    state: Mutex<LogState>,
}

impl LiveLog {
    fn lock(&self) -> MutexGuard<'_, LogState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[derive(Debug)]
struct LogState {
    /// Where the log is now (a rename in this process moves it).
    path: StorePath,
    sealed: Vec<Segment>,
    /// Bytes in `sealed` (or dropped after a removal): where `buffer` starts.
    sealed_bytes: u64,
    /// Appended bytes not yet in a segment; at most [`SEGMENT_BYTES_MAX`].
    buffer: Vec<u8>,
    /// The log was removed: later appends are counted but go nowhere, as
    /// writes to an unlinked file do.
    removed: bool,
}

impl LogState {
    /// After the log's objects were copied to `path`: later seals and this
    /// process's reads use the new names.
    fn move_to(&mut self, store: &Shared, path: StorePath) {
        for (number, segment) in self.sealed.iter_mut().enumerate() {
            segment.key = store.segment_key(&path, number as u64);
        }
        self.path = path;
    }

    fn len(&self) -> u64 {
        self.sealed_bytes + self.buffer.len() as u64
    }

    /// Puts the buffered bytes as the next segment. `If-None-Match: *`
    /// makes a second writer of one log (another process that also thinks
    /// it created it) fail rather than overwrite.
    fn seal(&mut self, store: &Shared) -> Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let length = self.buffer.len() as u64;
        if self.removed {
            self.buffer.clear();
            self.sealed_bytes += length;
            return Ok(());
        }
        let number = self.sealed.len() as u64;
        let key = store.segment_key(&self.path, number);
        let bytes = Bytes::from(std::mem::take(&mut self.buffer));
        let outcome = store.block_on(async {
            match store.put(&key, bytes.clone(), PutMode::Create, Attributes::new()).await {
                // The client retries a PUT whose answer was lost; if the first
                // attempt landed, the retry finds this very segment there.
                Err(
                    error @ (object_store::Error::AlreadyExists { .. }
                    | object_store::Error::Precondition { .. }),
                ) => match store.head(&key).await {
                    Ok(Some((size, _, _))) if size == length => Ok(()),
                    _ => Err(error),
                },
                other => other,
            }
        });
        match outcome {
            Ok(()) => {
                self.sealed.push(Segment { key, start: self.sealed_bytes, len: length });
                self.sealed_bytes += length;
                assert_eq!(self.buffer.len(), 0, "sealing emptied the buffer");
                Ok(())
            }
            Err(error) => {
                // Kept, so a later sync can try again.
                self.buffer = bytes.to_vec();
                let what = format!("seal segment {number} of log");
                Err(store.error(&what, &self.path, error))
            }
        }
    }
}

/// The writer of one log.
#[derive(Debug)]
struct S3AppendWriter {
    store: Arc<Shared>,
    log: Arc<LiveLog>,
}

impl S3AppendWriter {
    /// Takes the log out of the live table, unless another log has taken
    /// its name since.
    fn unregister(&self) {
        let path = self.log.lock().path.clone();
        let mut table = self.store.live();
        if table.get(&path).is_some_and(|entry| std::ptr::eq(entry.as_ptr(), Arc::as_ptr(&self.log))) {
            table.remove(&path);
        }
    }
}

impl AppendWriter for S3AppendWriter {
    fn append(&mut self, buf: &[u8]) -> Result<()> {
        let mut state = self.log.lock();
        // An append that fits in a segment is kept whole in one: reading
        // back what was written (a restart reads its records) is then one
        // GET per record, not two wherever a record would straddle.
        let fits = buf.len() <= SEGMENT_BYTES_MAX;
        if fits && !state.buffer.is_empty() && state.buffer.len() + buf.len() > SEGMENT_BYTES_MAX {
            state.seal(&self.store)?;
        }
        let mut rest = buf;
        while !rest.is_empty() {
            let room = SEGMENT_BYTES_MAX - state.buffer.len();
            let (now, later) = rest.split_at(room.min(rest.len()));
            state.buffer.extend_from_slice(now);
            rest = later;
            if state.buffer.len() >= SEGMENT_BYTES_MAX {
                state.seal(&self.store)?;
            }
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.log.lock().seal(&self.store)
    }

    fn len(&self) -> u64 {
        self.log.lock().len()
    }

    fn close(self: Box<Self>) -> Result<()> {
        let sealed = self.log.lock().seal(&self.store);
        self.unregister();
        sealed
    }
}

impl Drop for S3AppendWriter {
    /// A writer dropped without `close` loses its unsealed bytes, as a
    /// crashed process would; new readers see the sealed segments only.
    fn drop(&mut self) {
        self.unregister();
    }
}

/// Where a reader's bytes come from.
#[derive(Debug)]
enum Source {
    /// A whole file: one object of fixed size.
    Object(Segment),
    /// A log another process wrote (or is writing): its sealed segments,
    /// listed at the first read and again when a read runs past them.
    Sealed { path: StorePath, segments: RwLock<Option<Arc<Vec<Segment>>>> },
    /// A log this process is writing: sealed segments plus its buffer.
    Live(Arc<LiveLog>),
}

#[derive(Debug)]
struct S3ReadHandle {
    store: Arc<Shared>,
    path: StorePath,
    source: Source,
}

impl S3ReadHandle {
    fn fail(&self, error: object_store::Error) -> Error {
        self.store.error("read", &self.path, error)
    }

    /// Lists the segments again and keeps the answer.
    fn reload(
        &self,
        path: &StorePath,
        cache: &RwLock<Option<Arc<Vec<Segment>>>>,
    ) -> Result<Arc<Vec<Segment>>> {
        let segments =
            Arc::new(self.store.block_on(self.store.segments(path)).map_err(|error| self.fail(error))?);
        *cache.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&segments));
        Ok(segments)
    }

    /// Fills `buf` from `segments` at `offset`, fetching the pieces at once.
    fn read_segments(&self, segments: &[Segment], buf: &mut [u8], offset: u64) -> Result<usize> {
        let end = segments.last().map_or(0, |last| last.start + last.len);
        if offset >= end || buf.is_empty() {
            return Ok(0);
        }
        let wanted = (end - offset).min(buf.len() as u64);
        let pieces: Vec<(usize, &Key, std::ops::Range<u64>)> = segments
            .iter()
            .filter(|segment| segment.start < offset + wanted && segment.start + segment.len > offset)
            .map(|segment| {
                let from = offset.max(segment.start);
                let to = (offset + wanted).min(segment.start + segment.len);
                ((from - offset) as usize, &segment.key, from - segment.start..to - segment.start)
            })
            .collect();
        let store = &self.store;
        let fetched = store
            .block_on(futures::future::try_join_all(
                pieces.iter().map(|(_, key, range)| store.client.get_range(key, range.clone())),
            ))
            .map_err(|error| self.fail(error))?;
        for ((at, _, range), bytes) in pieces.iter().zip(fetched) {
            let length = (range.end - range.start) as usize;
            if bytes.len() != length {
                return Err(Error::corrupt(format!(
                    "{}: read {}: a segment returned {} bytes where {length} were asked for",
                    store.url,
                    self.path,
                    bytes.len()
                )));
            }
            buf[*at..*at + length].copy_from_slice(&bytes);
        }
        Ok(wanted as usize)
    }
}

impl ReadHandle for S3ReadHandle {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        match &self.source {
            Source::Object(whole) => self.read_segments(std::slice::from_ref(whole), buf, offset),
            Source::Sealed { path, segments } => {
                let known = segments.read().unwrap_or_else(PoisonError::into_inner).clone();
                let known = match known {
                    Some(known) => known,
                    None => self.reload(path, segments)?,
                };
                let end = known.last().map_or(0, |last| last.start + last.len);
                // The writer may have sealed more since the listing.
                let current =
                    if offset + buf.len() as u64 > end { self.reload(path, segments)? } else { known };
                self.read_segments(&current, buf, offset)
            }
            Source::Live(log) => {
                let (sealed, buffered, buffer_start) = {
                    let state = log.lock();
                    let end = offset.saturating_add(buf.len() as u64);
                    let sealed: Vec<Segment> = state
                        .sealed
                        .iter()
                        .filter(|segment| segment.start < end && segment.start + segment.len > offset)
                        .cloned()
                        .collect();
                    let from = offset.max(state.sealed_bytes);
                    let to = end.min(state.len());
                    let buffered = if from < to {
                        let start = (from - state.sealed_bytes) as usize;
                        state.buffer[start..start + (to - from) as usize].to_vec()
                    } else {
                        Vec::new()
                    };
                    (sealed, buffered, from)
                };
                let mut done = self.read_segments(&sealed, buf, offset)?;
                if !buffered.is_empty() {
                    let at = (buffer_start - offset) as usize;
                    buf[at..at + buffered.len()].copy_from_slice(&buffered);
                    done = at + buffered.len();
                }
                Ok(done)
            }
        }
    }

    fn len(&self) -> Result<u64> {
        match &self.source {
            Source::Object(whole) => Ok(whole.len),
            Source::Sealed { path, segments } => {
                let current = self.reload(path, segments)?;
                Ok(current.last().map_or(0, |last| last.start + last.len))
            }
            Source::Live(log) => Ok(log.lock().len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_files_parse_and_never_show_the_secret() {
        let text = "# plfs test server\n[default]\naws_access_key_id = plfsuser\n\
                    AWS_SECRET_ACCESS_KEY=s3cr3t/with+symbols\n\n";
        let credentials = parse_credentials(text).unwrap();
        assert_eq!(
            (credentials.key_id.as_str(), credentials.secret.as_str()),
            ("plfsuser", "s3cr3t/with+symbols")
        );
        assert_eq!(credentials.token, None);
        assert!(!format!("{credentials:?}").contains("s3cr3t"));
        let problem = |text: &str| parse_credentials(text).expect_err(text);
        assert_eq!(
            problem("aws_access_key_id = a\n"),
            "needs both aws_access_key_id and aws_secret_access_key"
        );
        assert_eq!(problem("aws_secret_access_key s3cr3t\n"), "line 1: expected name = value");
        assert_eq!(problem("a = 1\n"), "line 1: unknown name \"a\"");
        assert_eq!(problem("aws_session_token =\n"), "line 1: empty value");
        let twice = problem("aws_access_key_id = a\naws_access_key_id = b\n");
        assert_eq!(twice, "line 2: aws_access_key_id given twice");
        for text in
            ["aws_secret_access_key s3cr3t", "aws_secret_access_key = s3cr3t\naws_secret_access_key = s3cr3t"]
        {
            assert!(!problem(text).contains("s3cr3t"), "an error shows the secret");
        }
    }

    #[test]
    fn key_components_round_trip_through_percent_encoding() {
        for name in ["plain", "with space", "100%", "a#b?c*d", "caf\u{e9}", ".", "..", "x%2Fy"] {
            let key = Key::from_iter([name]);
            assert_eq!(decode_component(key.filename().unwrap()), name, "{name:?} became {key}");
        }
    }

    #[test]
    fn only_fixed_width_decimal_names_are_segments() {
        assert_eq!(parse_segment_number("0000000000"), Some(0));
        assert_eq!(parse_segment_number("0000000042"), Some(42));
        for name in ["42", "000000000x", "00000000000", ".plfs-dir", ""] {
            assert_eq!(parse_segment_number(name), None, "{name:?}");
        }
    }
}
