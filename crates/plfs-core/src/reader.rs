//! Reading data logs: a capped cache of open read handles (so a file written
//! by 10,000 writers cannot exhaust descriptors), read-ahead windows per log
//! (so a strided file read in small pieces streams through each log
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

/// Read-ahead windows one log keeps: one per reader streaming through it
/// at once. A log that several processes wrote (a FUSE daemon's one log
/// per node, interleaving its local writers' records) is read back by as
/// many readers, each at its own place; with one window they would refill
/// it for one another on every piece.
const WINDOWS_PER_LOG: usize = 4;

/// One data log's cached handle and read-ahead windows.
#[derive(Debug)]
pub struct CachedLog {
    path: StorePath,
    handle: Box<dyn ReadHandle>,
    windows: Mutex<Windows>,
    label: String,
}

#[derive(Debug, Default)]
struct Window {
    start: u64,
    bytes: Vec<u8>,
    /// `Windows::clock` at the last read served from it.
    used: u64,
}

/// Up to `WINDOWS_PER_LOG` windows, made as concurrent streams need them.
#[derive(Debug, Default)]
struct Windows {
    windows: Vec<Window>,
    clock: u64,
}

impl Windows {
    /// The window to serve `physical..end` from: one holding it, else the
    /// one a stream reading on past its end goes on with, else a new one,
    /// else the least recently used. The bool says it holds the range.
    fn pick(&mut self, physical: u64, end: u64) -> (usize, bool) {
        let window_end = |window: &Window| window.start + window.bytes.len() as u64;
        if let Some(index) = self.windows.iter().position(|w| w.start <= physical && end <= window_end(w)) {
            return (index, true);
        }
        if let Some(index) =
            self.windows.iter().position(|w| w.start <= physical && physical <= window_end(w))
        {
            return (index, false);
        }
        if self.windows.len() < WINDOWS_PER_LOG {
            self.windows.push(Window::default());
            return (self.windows.len() - 1, false);
        }
        let oldest =
            self.windows.iter().enumerate().min_by_key(|(_, w)| w.used).map_or(0, |(index, _)| index);
        (oldest, false)
    }
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
        self.read_piece(buf, physical, buf.len(), readahead_bytes)
    }

    /// [`CachedLog::read_exact`] of one piece of a request of
    /// `request_bytes` (a checked read split into pieces): read the way the
    /// whole request would be, so a large read's small last piece does not
    /// start a read-ahead window.
    pub fn read_piece(
        &self,
        buf: &mut [u8],
        physical: u64,
        request_bytes: usize,
        readahead_bytes: usize,
    ) -> Result<()> {
        if !window_applies(request_bytes, readahead_bytes) {
            return crate::store::read_exact_at(self.handle.as_ref(), buf, physical)
                .with_context(|| format!("{} at offset {physical}", self.label));
        }
        let mut windows = self.windows.lock().unwrap_or_else(PoisonError::into_inner);
        let end = physical + buf.len() as u64;
        let (index, holds) = windows.pick(physical, end);
        windows.clock += 1;
        let clock = windows.clock;
        let window = &mut windows.windows[index];
        window.used = clock;
        if !holds {
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

/// Most parts one vectored read takes (IOV_MAX on Linux).
const PARTS_PER_READ_MAX: usize = 1024;

impl CachedLog {
    /// Fills each part's buffer with the log's bytes at its physical
    /// offset, parts in the order given. A run of parts that lie end to
    /// end in the log, each too large for a window, is one vectored read
    /// (one preadv on POSIX) instead of one read per record: a read
    /// crossing many records of one writer (a contiguous piece of a
    /// checkpoint written in planes) asks the store once per log.
    pub fn read_parts(&self, parts: &mut [(u64, &mut [u8])], readahead_bytes: usize) -> Result<()> {
        let mut rest = parts;
        while let [(first, first_buf), ..] = rest {
            let start = *first;
            let mut end = start + first_buf.len() as u64;
            let mut run = 1;
            if !window_applies(first_buf.len(), readahead_bytes) {
                while run < rest.len().min(PARTS_PER_READ_MAX)
                    && rest[run].0 == end
                    && !window_applies(rest[run].1.len(), readahead_bytes)
                {
                    end += rest[run].1.len() as u64;
                    run += 1;
                }
            }
            let (head, tail) = rest.split_at_mut(run);
            if let [(physical, buf)] = head {
                self.read_exact(buf, *physical, readahead_bytes)?;
            } else {
                let mut bufs: Vec<&mut [u8]> = head.iter_mut().map(|(_, buf)| &mut **buf).collect();
                crate::store::read_exact_vectored_at(self.handle.as_ref(), &mut bufs, start)
                    .with_context(|| format!("{} at offset {start}", self.label))?;
            }
            rest = tail;
        }
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
            windows: Mutex::new(Windows::default()),
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
    /// Whether [`ReadPool::run_all`] hands a read's tasks to pool threads.
    /// Not when this process's share of the cores is under two (more
    /// ranks of its job on the node than cores, or a rank bound to one
    /// core): the other ranks keep the cores busy, so a pool thread would
    /// only take the caller's core in turns with it, paying two context
    /// switches per task and copying the caller's bytes on a core whose
    /// cache the caller then reads them from.
    parallel_tasks: bool,
    pool: std::sync::OnceLock<Option<rayon::ThreadPool>>,
}

/// Cores a process's share must reach for a read's tasks to run on pool
/// threads: one for the caller, one for a task beside it.
const CORES_FOR_PARALLEL_TASKS: usize = 2;

impl ReadPool {
    /// A pool of `threads` threads for a process whose share of the cores
    /// is `cores` ([`crate::host::cores_per_local_rank`]).
    pub fn new(threads: usize, cores: usize) -> Result<ReadPool> {
        Ok(ReadPool {
            threads,
            parallel_tasks: cores >= CORES_FOR_PARALLEL_TASKS,
            pool: std::sync::OnceLock::new(),
        })
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

    /// Starts `task` on a pool thread and returns at once; false (and the
    /// task dropped unrun) when the pool has no threads.
    pub fn spawn(&self, task: impl FnOnce() + Send + 'static) -> bool {
        match self.pool() {
            Some(pool) => {
                pool.spawn(task);
                true
            }
            None => false,
        }
    }

    /// Runs every task, in parallel when the pool has threads and this
    /// process a share of the cores to run them on (else one after the
    /// other on the calling thread), and returns the first error.
    pub fn run_all<T: FnOnce() -> Result<()> + Send>(&self, tasks: Vec<T>) -> Result<()> {
        if tasks.len() <= 1 || !self.parallel_tasks {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::counting::CountingStore;
    use crate::store::memory::MemoryStore;

    /// Two readers streaming through one log in small pieces, turn about
    /// (a node's one log read back by two processes): each keeps its own
    /// window, so the store reads each byte about once, not a window per
    /// piece.
    #[test]
    fn interleaved_streams_keep_their_own_windows() {
        const LOG_BYTES: usize = 4 << 20;
        const READAHEAD: usize = 256 << 10;
        const PIECE: usize = 16 << 10;
        let store = Arc::new(CountingStore::new(Arc::new(MemoryStore::new("mem://log"))));
        let path = StorePath::parse("data.log").unwrap();
        let bytes: Vec<u8> = (0..LOG_BYTES).map(|i| (i % 251) as u8).collect();
        let mut writer = store.create_append(&path).unwrap();
        writer.append(&bytes).unwrap();
        writer.close().unwrap();
        let cache = LogCache::new(8, READAHEAD);
        let log = cache.get(BackendId(0), LogId::new(1, 1, 1, "host"), store.as_ref(), &path).unwrap();
        store.reset();
        let half = LOG_BYTES / 2;
        let mut piece = vec![0u8; PIECE];
        for k in 0..half / PIECE {
            for start in [k * PIECE, half + k * PIECE] {
                log.read_exact(&mut piece, start as u64, READAHEAD).unwrap();
                assert!(piece == bytes[start..start + PIECE], "bytes at {start}");
            }
        }
        let read = store.counts().bytes_read;
        assert!(read <= (LOG_BYTES + 2 * READAHEAD) as u64, "{read} bytes read for a {LOG_BYTES}-byte log");
    }

    /// A process without two cores of its own (more ranks on the node
    /// than cores, or bound to one) runs a read's tasks on the calling
    /// thread; with two or more it hands them to the pool's threads.
    #[test]
    fn tasks_go_to_the_pool_only_with_a_share_of_two_cores() {
        let caller = std::thread::current().id();
        let ran_on = |pool: &ReadPool| {
            let threads = Mutex::new(Vec::new());
            let tasks: Vec<_> = (0..3)
                .map(|_| {
                    let threads = &threads;
                    move || -> Result<()> {
                        threads.lock().unwrap().push(std::thread::current().id());
                        Ok(())
                    }
                })
                .collect();
            pool.run_all(tasks).unwrap();
            threads.into_inner().unwrap()
        };
        for cores in [0, 1] {
            let threads = ran_on(&ReadPool::new(4, cores).unwrap());
            assert_eq!(threads, vec![caller; 3], "a share of {cores} cores");
        }
        let threads = ran_on(&ReadPool::new(4, 2).unwrap());
        assert!(threads.len() == 3 && !threads.contains(&caller), "a share of 2 cores");
    }

    /// A read crossing many whole records that lie end to end in one log
    /// (a reader's piece of a checkpoint written plane by plane, the
    /// planes landing in separate places of the caller's buffer) asks a
    /// real POSIX log once per run, not once per record; a gap in the log
    /// starts a new request; every byte lands where it belongs.
    #[test]
    fn contiguous_records_of_a_log_are_one_request() {
        const RECORD: usize = 32 << 10;
        const RECORDS: usize = 64;
        let dir = tempfile::tempdir().unwrap();
        let posix = crate::store::posix::PosixStore::new(dir.path(), "file:///log".to_owned()).unwrap();
        let store = CountingStore::new(Arc::new(posix));
        let path = StorePath::parse("data.log").unwrap();
        let bytes: Vec<u8> = (0..RECORD * RECORDS).map(|i| (i % 253) as u8).collect();
        let mut writer = store.create_append(&path).unwrap();
        writer.append(&bytes).unwrap();
        writer.close().unwrap();
        let cache = LogCache::new(8, 1 << 20);
        let log = cache.get(BackendId(0), LogId::new(1, 1, 1, "host"), &store, &path).unwrap();
        store.reset();
        // Records 0..32 then 40..64 (a gap), each into every other slot
        // of the caller's buffer, as two writers' interleaved planes are.
        let physical: Vec<usize> = (0..32).chain(40..64).collect();
        let mut out = vec![0u8; 2 * RECORD * physical.len()];
        let mut parts: Vec<(u64, &mut [u8])> = out
            .chunks_mut(RECORD)
            .step_by(2)
            .zip(&physical)
            .map(|(buf, record)| ((record * RECORD) as u64, buf))
            .collect();
        log.read_parts(&mut parts, cache.readahead_bytes()).unwrap();
        assert_eq!(store.counts().read_ats, 2, "one request per contiguous run");
        for (slot, record) in physical.iter().enumerate() {
            let got = &out[2 * slot * RECORD..(2 * slot + 1) * RECORD];
            assert!(got == &bytes[record * RECORD..(record + 1) * RECORD], "record {record} in slot {slot}");
        }
    }
}
