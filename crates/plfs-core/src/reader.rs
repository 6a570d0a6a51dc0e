//! Reading data logs: a capped cache of open read handles (so a file written
//! by 10,000 writers cannot exhaust descriptors), a read-ahead window per
//! log (so a strided file read in small pieces streams through each log
//! sequentially instead of issuing one small read per index record), and a
//! persistent bounded pool that reads several logs at once.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, PoisonError};

use lru::LruCache;

use crate::error::{Error, Result, ResultExt};
use crate::layout::LogId;
use crate::placement::BackendId;
use crate::store::{ReadHandle, Store, StorePath};

/// Requests smaller than this are served through the log's read-ahead
/// window; larger ones are read straight into the caller's buffer, where a
/// window would only add a copy (a store still streams them: POSIX kernels
/// read ahead per descriptor, remote stores fetch large ranges anyway).
pub const WINDOW_REQUEST_MAX_BYTES: usize = 32 << 10;

fn window_applies(request_bytes: usize, readahead_bytes: usize) -> bool {
    request_bytes < WINDOW_REQUEST_MAX_BYTES.min(readahead_bytes / 2)
}

/// One data log's cached handle and read-ahead window.
#[derive(Debug)]
pub struct CachedLog {
    path: StorePath,
    handle: Box<dyn ReadHandle>,
    window: Mutex<Window>,
    label: String,
}

#[derive(Debug, Default)]
struct Window {
    start: u64,
    bytes: Vec<u8>,
}

impl Window {
    /// Reads up to `readahead_bytes` of the log from `physical` into the
    /// window (fewer only at the log's end). On an error the window holds
    /// bytes that were never read, and the caller must empty it.
    fn fill(&mut self, handle: &dyn ReadHandle, physical: u64, readahead_bytes: usize) -> Result<()> {
        self.bytes.resize(readahead_bytes, 0);
        let mut filled = 0;
        while filled < readahead_bytes {
            let wanted = readahead_bytes - filled;
            let count = handle.read_at(&mut self.bytes[filled..], physical + filled as u64)?;
            filled += count;
            // Reads are short only at the end of the object.
            if count < wanted {
                break;
            }
        }
        self.bytes.truncate(filled);
        self.start = physical;
        Ok(())
    }
}

impl CachedLog {
    /// Names the log in errors: backend and path.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Fills `buf` with the log's bytes at `physical`. A log that ends first
    /// means the index points past its data: an error, never zeros.
    pub fn read_exact(&self, buf: &mut [u8], physical: u64, readahead_bytes: usize) -> Result<()> {
        if !window_applies(buf.len(), readahead_bytes) {
            return crate::store::read_exact_at(self.handle.as_ref(), buf, physical)
                .with_context(|| format!("{} at offset {physical}", self.label));
        }
        let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
        let end = physical + buf.len() as u64;
        let window_end = window.start + window.bytes.len() as u64;
        if physical < window.start || end > window_end {
            if let Err(error) = window.fill(self.handle.as_ref(), physical, readahead_bytes) {
                // Part of the window was never read: serving it later
                // would return zeros or another offset's bytes.
                *window = Window::default();
                return Err(error.context(format!("{} at offset {physical}", self.label)));
            }
            let filled = window.bytes.len();
            if filled < buf.len() {
                return Err(Error::corrupt(format!(
                    "{}: index points at bytes {physical}..{end} but the log ends at {}",
                    self.label,
                    physical + filled as u64
                )));
            }
        }
        let from = (physical - window.start) as usize;
        buf.copy_from_slice(&window.bytes[from..from + buf.len()]);
        Ok(())
    }
}

/// Capped LRU of data-log read handles, shared by every open file of a mount.
#[derive(Debug)]
pub struct LogCache {
    /// Keyed by log id, which is unique per log; the path is checked on a
    /// hit so a renamed file's log is reopened under its new name.
    entries: Mutex<LruCache<(BackendId, LogId), Arc<CachedLog>>>,
    readahead_bytes: usize,
}

impl LogCache {
    pub fn new(handles_max: usize, readahead_bytes: usize) -> LogCache {
        let capacity = NonZeroUsize::new(handles_max.max(1)).expect("at least one");
        LogCache { entries: Mutex::new(LruCache::new(capacity)), readahead_bytes: readahead_bytes.max(4096) }
    }

    pub fn readahead_bytes(&self) -> usize {
        self.readahead_bytes
    }

    /// The cached handle for a log, opening it (and evicting the least
    /// recently used one) on a miss. The open happens outside the lock.
    pub fn get(
        &self,
        backend: BackendId,
        id: LogId,
        store: &dyn Store,
        path: &StorePath,
    ) -> Result<Arc<CachedLog>> {
        let key = (backend, id);
        if let Some(found) = self.lock().get(&key)
            && found.path == *path
        {
            return Ok(found.clone());
        }
        let handle = store.open_read(path)?;
        let log = Arc::new(CachedLog {
            path: path.clone(),
            handle,
            window: Mutex::new(Window::default()),
            label: format!("data log {}: {path}", store.url()),
        });
        self.lock().put(key, log.clone());
        Ok(log)
    }

    /// How many handles are cached (bounded by `handles_max`).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Drops cached handles of logs under `prefix` (after unlink or rename).
    pub fn forget_under(&self, prefix: &StorePath) {
        let mut entries = self.lock();
        let stale: Vec<_> =
            entries.iter().filter(|(_, log)| log.path.starts_with(prefix)).map(|(key, _)| *key).collect();
        for key in stale {
            entries.pop(&key);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LruCache<(BackendId, LogId), Arc<CachedLog>>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A bounded pool that lives as long as the mount, so a read never pays
/// for creating threads.
/// The threads start at the first read that spans several logs, so a
/// short-lived process that reads one log never pays for them.
#[derive(Debug)]
pub struct ReadPool {
    threads: usize,
    pool: std::sync::OnceLock<Option<rayon::ThreadPool>>,
}

impl ReadPool {
    pub fn new(threads: usize) -> Result<ReadPool> {
        Ok(ReadPool { threads, pool: std::sync::OnceLock::new() })
    }

    fn pool(&self) -> Option<&rayon::ThreadPool> {
        self.pool
            .get_or_init(|| {
                if self.threads <= 1 {
                    return None;
                }
                let built = rayon::ThreadPoolBuilder::new()
                    .num_threads(self.threads)
                    .thread_name(|index| format!("plfs-read-{index}"))
                    .build();
                match built {
                    Ok(pool) => Some(pool),
                    Err(error) => {
                        // Reads still work, one log at a time.
                        tracing::warn!("read pool of {} threads: {error}; reading serially", self.threads);
                        None
                    }
                }
            })
            .as_ref()
    }

    /// Runs every task, in parallel when the pool has threads, and returns
    /// the first error.
    pub fn run_all<T: FnOnce() -> Result<()> + Send>(&self, tasks: Vec<T>) -> Result<()> {
        if tasks.len() <= 1 {
            return tasks.into_iter().try_for_each(|task| task());
        }
        match self.pool() {
            Some(pool) => {
                let results: Vec<Mutex<Option<Result<()>>>> =
                    tasks.iter().map(|_| Mutex::new(None)).collect();
                pool.scope(|scope| {
                    for (task, slot) in tasks.into_iter().zip(&results) {
                        scope.spawn(move |_| {
                            *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(task());
                        });
                    }
                });
                for slot in results {
                    slot.into_inner().unwrap_or_else(PoisonError::into_inner).unwrap_or(Ok(()))?;
                }
                Ok(())
            }
            _ => tasks.into_iter().try_for_each(|task| task()),
        }
    }
}
