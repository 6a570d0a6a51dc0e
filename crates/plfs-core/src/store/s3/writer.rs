//! Logs: an empty head object plus immutable segments sealed in order,
//! with the unsealed tail in the writer's memory.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use object_store::path::Path as Key;
use object_store::{Attributes, ObjectStoreExt, PutMode};

use super::client::Shared;
use crate::error::Result;
use crate::store::{AppendWriter, StorePath};

/// Bytes a log buffers before it seals them as a segment. Large enough that
/// a PUT runs at full speed (S3 and MinIO both recommend 8–16 MiB parts)
/// and that one listing page (1000 keys) covers gigabytes of log (segments
/// end at append boundaries, so with appends of at most 4 MiB every full
/// segment is over 4 MiB); small enough
/// that a process with many open logs stays within memory (a writer has
/// two logs open: 16 MiB of buffers at most).
pub const SEGMENT_BYTES_MAX: usize = 8 << 20;

/// One sealed segment of a log: its object and where it starts in the log.
#[derive(Debug, Clone)]
pub(super) struct Segment {
    pub(super) key: Key,
    pub(super) start: u64,
    pub(super) len: u64,
}

/// A log this process is writing, shared by its writer and this
/// process's readers.
#[derive(Debug)]
pub(super) struct LiveLog {
    pub(super) state: Mutex<LogState>,
}

impl LiveLog {
    pub(super) fn lock(&self) -> MutexGuard<'_, LogState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[derive(Debug)]
pub(super) struct LogState {
    /// Where the log is now (a rename in this process moves it).
    pub(super) path: StorePath,
    pub(super) sealed: Vec<Segment>,
    /// Bytes in `sealed` (or dropped after a removal): where `buffer` starts.
    pub(super) sealed_bytes: u64,
    /// Appended bytes not yet in a segment; at most [`SEGMENT_BYTES_MAX`].
    pub(super) buffer: Vec<u8>,
    /// The log was removed: later appends are counted but go nowhere, as
    /// writes to an unlinked file do.
    pub(super) removed: bool,
}

impl LogState {
    /// After the log's objects were copied to `path`: later seals and this
    /// process's reads use the new names.
    pub(super) fn move_to(&mut self, store: &Shared, path: StorePath) {
        for (number, segment) in self.sealed.iter_mut().enumerate() {
            segment.key = store.segment_key(&path, number as u64);
        }
        self.path = path;
    }

    pub(super) fn len(&self) -> u64 {
        self.sealed_bytes + self.buffer.len() as u64
    }

    /// Puts the buffered bytes as the next segment. `If-None-Match: *`
    /// makes a second writer of one log (another process that also thinks
    /// it created it) fail rather than overwrite.
    pub(super) fn seal(&mut self, store: &Shared) -> Result<()> {
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
pub(super) struct S3AppendWriter {
    pub(super) store: Arc<Shared>,
    pub(super) log: Arc<LiveLog>,
}

impl S3AppendWriter {
    /// Takes the log out of the live table, unless another log has taken
    /// its name since.
    pub(super) fn unregister(&self) {
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

impl Shared {
    /// Removes a log: its segments first, so a failure part-way leaves a
    /// shorter log rather than segments without a head.
    pub(super) fn remove_log(&self, path: &StorePath) -> Result<()> {
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
}
