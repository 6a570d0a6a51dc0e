//! One process's HDFS client and runtime, and what the store shares with
//! its open handles (the registry of logs being written, the closes left
//! running by `create_new_deferred`).

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::process;
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::time::Duration;

use hdfs_native::file::FileWriter;
use hdfs_native::{Client, ClientBuilder, HdfsError};
use tokio::runtime::Runtime;

use super::error::map_kind;
use super::ids::IdMap;
use super::lock;
use super::writer::OpenLog;
use crate::error::{ErrorKind, Result};
use crate::store::StorePath;

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

/// What the store and its open handles share.
pub(super) struct Inner {
    pub(super) url: String,
    /// The NameNode's address, `hdfs://host:port`, named in connection errors.
    pub(super) namenode: String,
    /// Absolute HDFS path of the store's root, without a trailing slash
    /// ("" for the file system's root).
    pub(super) root: String,
    /// The client and runtime of the process that uses the store; see
    /// [`Inner::connection`] for why it is per process.
    pub(super) connection: RwLock<Arc<Connection>>,
    /// Logs being written through this store, by HDFS path, so reads of
    /// them in this process can make their unsynced bytes readable.
    pub(super) open_logs: Mutex<HashMap<String, Weak<OpenLog>>>,
    /// Closes that `create_new_deferred` left running, until `settle`.
    pub(super) unsettled: Mutex<Vec<Unsettled>>,
    pub(super) ids: IdMap,
}

/// The close of a small file, running on the store's runtime.
pub(super) struct Unsettled {
    /// The store path it was created at, for messages.
    name: String,
    close: tokio::task::JoinHandle<hdfs_native::Result<()>>,
    /// The process whose runtime runs `close`.
    pid: u32,
}

impl fmt::Debug for Inner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inner").field("url", &self.url).field("root", &self.root).finish_non_exhaustive()
    }
}

/// One process's HDFS client and the runtime its I/O runs on.
pub(super) struct Connection {
    /// Declared before `runtime` so it is dropped first: its background
    /// tasks (lease renewal, connection readers) run on that runtime.
    client: Client,
    runtime: Runtime,
    /// The process these belong to: a forked child has the memory of the
    /// runtime but none of its threads.
    pid: u32,
}

impl Connection {
    pub(super) fn open(namenode: &str) -> hdfs_native::Result<Connection> {
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

impl Inner {
    pub(super) fn full(&self, path: &StorePath) -> String {
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
    pub(super) fn connection(&self) -> hdfs_native::Result<Arc<Connection>> {
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
    pub(super) fn call<T>(
        &self,
        op: impl AsyncFnOnce(&Client) -> hdfs_native::Result<T>,
    ) -> hdfs_native::Result<T> {
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
    pub(super) fn transfer<T>(
        &self,
        future: impl Future<Output = hdfs_native::Result<T>>,
    ) -> hdfs_native::Result<T> {
        self.connection()?.runtime.block_on(future)
    }

    /// Starts closing `writer` on this process's runtime; [`Inner::settle`]
    /// waits for it.
    pub(super) fn close_later(&self, mut writer: FileWriter, name: String) {
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
    pub(super) fn settle(&self) -> Result<()> {
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

    pub(super) fn open_log(&self, full: &str) -> Option<Arc<OpenLog>> {
        lock(&self.open_logs).get(full).and_then(Weak::upgrade)
    }

    pub(super) fn register_log(&self, log: &Arc<OpenLog>) {
        let mut logs = lock(&self.open_logs);
        // Entries of logs dropped without close would otherwise pile up.
        logs.retain(|_, weak| weak.strong_count() > 0);
        logs.insert(log.full.clone(), Arc::downgrade(log));
    }

    pub(super) fn forget_log(&self, log: &OpenLog) {
        let mut logs = lock(&self.open_logs);
        if logs.get(&log.full).is_some_and(|weak| std::ptr::eq(weak.as_ptr(), log)) {
            logs.remove(&log.full);
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Err(error) = self.settle() {
            tracing::warn!(store = %self.url, %error, "a file created in the background failed to close");
        }
    }
}
