//! The S3 client, the runtime it runs on, the table of logs this process
//! is writing, and the requests the store's calls share (HEAD, probe,
//! conditional put, listings, bulk deletes).

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as Key;
use object_store::{
    Attribute, Attributes, BackoffConfig, ClientConfigKey, GetOptions, ObjectStore, ObjectStoreExt, PutMode,
    PutOptions, PutPayload, RetryConfig,
};

use super::credential::read_credentials;
use super::keys::parse_segment_number;
use super::writer::{LiveLog, Segment};
use crate::config::S3Access;
use crate::error::{Error, ErrorKind, Result};
use crate::store::StorePath;

/// The user-metadata key (`x-amz-meta-plfs-log`) that marks a log's head.
const LOG_ATTRIBUTE: &str = "plfs-log";

/// Worker threads of the store's runtime: requests are I/O-bound, and
/// callers block on them from their own threads.
const RUNTIME_WORKER_THREADS: usize = 2;

/// Requests in flight at once when a rename or removal touches many objects.
pub(super) const BULK_CONCURRENCY: usize = 8;

/// A dead or unreachable endpoint fails within seconds, not the client's
/// default three minutes of retries.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
const RETRIES_MAX: usize = 3;
const RETRY_TIMEOUT: Duration = Duration::from_secs(20);

/// The client, its runtime and the live-log table, shared with the
/// store's open readers and writers.
pub(super) struct Shared {
    pub(super) url: String,
    /// Key prefix every path lives under (the location's `/prefix`).
    pub(super) root: Vec<String>,
    pub(super) client: AmazonS3,
    pub(super) runtime: tokio::runtime::Runtime,
    /// Logs this process is writing, by path, so its readers see unsealed
    /// bytes and removals and renames reach the writers.
    pub(super) live: Mutex<HashMap<StorePath, Weak<LiveLog>>>,
}

/// Only the URL: the client's own `Debug` would show its configuration.
impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared").field("url", &self.url).finish_non_exhaustive()
    }
}

impl Shared {
    /// Connects to `bucket` under `prefix`. Endpoint, region and credentials
    /// come from `access`, else from the `AWS_*` environment (region
    /// defaults to us-east-1). Nothing is sent until the first call.
    pub(super) fn new(bucket: &str, prefix: &str, access: &S3Access) -> Result<Shared> {
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

    pub(super) fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    pub(super) fn live(&self) -> MutexGuard<'_, HashMap<StorePath, Weak<LiveLog>>> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn live_log(&self, path: &StorePath) -> Option<Arc<LiveLog>> {
        let mut live = self.live();
        let log = live.get(path).and_then(Weak::upgrade);
        if log.is_none() {
            live.remove(path);
        }
        log
    }

    /// HEAD of one object: None if absent; Some((size, is a log head)).
    pub(super) async fn head(
        &self,
        key: &Key,
    ) -> object_store::Result<Option<(u64, Option<SystemTime>, bool)>> {
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
    pub(super) async fn has_children(&self, path: &StorePath) -> object_store::Result<bool> {
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
    pub(super) async fn probe(&self, path: &StorePath) -> object_store::Result<Probe> {
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

    pub(super) fn probe_blocking(&self, op: &str, path: &StorePath) -> Result<Probe> {
        self.block_on(self.probe(path)).map_err(|error| self.error(op, path, error))
    }

    /// New objects need an existing parent directory, as on POSIX: its
    /// marker (the usual case), else anything under it.
    pub(super) fn require_parent(&self, op: &str, path: &StorePath) -> Result<()> {
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

    pub(super) async fn put(
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
    pub(super) async fn segments(&self, path: &StorePath) -> object_store::Result<Vec<Segment>> {
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
    pub(super) async fn delete_all(&self, keys: Vec<Key>) -> object_store::Result<()> {
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

    pub(super) async fn keys_under(&self, prefix: &Key) -> object_store::Result<Vec<Key>> {
        self.client.list(Some(prefix)).map_ok(|meta| meta.location).try_collect().await
    }
}

/// What one HEAD (and, for a missing object, one listing) found.
#[derive(Debug, Clone, Copy)]
pub(super) enum Probe {
    File { size: u64, mtime: Option<SystemTime> },
    Log { mtime: Option<SystemTime> },
    Directory,
    Missing,
}

pub(super) fn log_attributes() -> Attributes {
    let mut attributes = Attributes::new();
    attributes.insert(Attribute::Metadata(LOG_ATTRIBUTE.into()), "1".into());
    attributes
}
