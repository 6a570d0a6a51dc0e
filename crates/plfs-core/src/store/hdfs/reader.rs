//! Positional reads of HDFS files, waiting for bytes a writer has made
//! durable but not yet readable.

use std::fmt;
use std::process;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use hdfs_native::HdfsError;
use hdfs_native::file::FileReader;

use super::connection::Inner;
use super::lock;
use crate::error::{Error, Result};
use crate::store::ReadHandle;

/// Longest wait of a read for bytes a writer has persisted but not yet
/// closed (see `HdfsReadHandle::wait_for_tail`): a close waits for the
/// NameNode up to about 15 s (`hdfs-native` retries 5 times, doubling from
/// 500 ms), so anything longer means the writer is gone.
const TAIL_WAIT_MAX: Duration = Duration::from_secs(30);

/// The first and longest pauses between looks at such a file.
const TAIL_POLL_FIRST: Duration = Duration::from_millis(5);
const TAIL_POLL_MAX: Duration = Duration::from_millis(100);

/// Positional reads of one HDFS file. The block locations are fetched at the
/// first read and again whenever a read reaches past the end they describe.
#[derive(Debug)]
pub(super) struct HdfsReadHandle {
    pub(super) inner: Arc<Inner>,
    pub(super) full: String,
    /// The store path, for messages (errors add the store's URL).
    pub(super) name: String,
    pub(super) reader: RwLock<Option<Arc<Reader>>>,
    /// Set when a wait for durable bytes ran out: the writer is gone, and
    /// later reads through this handle do not wait again.
    pub(super) tail_abandoned: AtomicBool,
}

/// `hdfs-native`'s reader with the length it can serve.
pub(super) struct Reader {
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
    pub(super) fn refresh(&self) -> Result<Arc<Reader>> {
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
