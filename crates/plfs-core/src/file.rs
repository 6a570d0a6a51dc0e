//! An open logical file: per-writer logs on the write side, a merged index
//! on the read side, shared by every handle of the file in this process.
//!
//! Lock order, always: `write_gate` → one writer slot → `read_state`.
//! Writes hold the gate shared, so writers run in parallel; building the
//! read state holds it exclusively, so no record can be half-applied.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::checksums::{LogChecksums, PIECE_BYTES};
use crate::clock::{LookAgain, PUBLISH_AFTER, saturating_ns};
use crate::config::VerifyReads;

use crate::container::{self, SizeSummary};
use crate::error::{Error, ErrorKind, Result, ResultExt};
use crate::format::data_log::{DATA_MAGIC, INDEX_MAGIC, LogHeader};
use crate::format::index_log::{self, FrameBuilder, Record, TruncateRecord, WRITE_RECORD_BYTES, WriteRecord};
use crate::index::pattern::{PatternBuilder, RunTracker};
use crate::index::{FILE_SIZE_MAX, LogRef, MergedIndex, Piece, Source};
use crate::layout::{self, ContainerPaths, LogId, LogKind, SizeRecord};
use crate::load::{self, LoadedIndex};
use crate::mount_state::MountState;
use crate::open::WriterId;
use crate::placement::{BackendId, HostdirId};
use crate::protection::{self, Pieces};
use crate::read_ahead::{self, ReadAhead};
use crate::reader::CachedLog;
use crate::retained::Retention;
use crate::store::{AppendWriter, Store, StoreExt, StorePath};
use crate::stripes::{self, Striping};

/// One writer's open log pair.
#[derive(Debug)]
struct WriterLogs {
    id: LogId,
    backend: BackendId,
    /// Where the logs are, for read states that learn of them.
    data_path: StorePath,
    index_path: StorePath,
    data: Box<dyn AppendWriter>,
    index: Box<dyn AppendWriter>,
    frame: FrameBuilder,
    /// The run of writes not yet in the frame.
    patterns: PatternBuilder,
    sequence: u64,
    summary: SizeRecord,
    /// `summary` as of the last frame appended: what the index log holds,
    /// so a pair retired after a failed append gets a size record that
    /// counts no record the failure lost (stat then agrees with reads).
    indexed: SizeRecord,
    /// Data appended since the last sync.
    data_dirty: bool,
    /// Index bytes appended since the last sync.
    index_dirty: bool,
    /// Whether the open record (and the container) is known durable: made
    /// so before the pair's first sync, since recover drops logs no record
    /// names, and creation syncs neither.
    announced: bool,
    /// Every frame appended to the index log, while the file's retention
    /// for a collective flatten on close has room (see `retained`).
    retained: Option<(Arc<Retention>, Vec<u8>)>,
    /// When the pair was made or last appended a frame (mount clock), so a
    /// slow writer publishes its records within about `PUBLISH_AFTER`.
    flushed_ns: u64,
}

#[derive(Debug, Default)]
struct WriterSlot {
    /// This slot's key in the process's run tracker: a writer of a striped
    /// file has one slot, and one pending run, per backend it writes to.
    run_key: u64,
    /// None before the first write, and after a failed append retired the
    /// pair (the next write starts a fresh pair rather than append after a
    /// possibly torn tail).
    logs: Option<WriterLogs>,
    /// Closed logs of this writer, summarised for their size records.
    retired: Vec<SizeRecord>,
    /// Why a retired pair lost records or data this writer's earlier,
    /// already acknowledged writes relied on. The failure may have surfaced
    /// elsewhere (a read through another handle flushes every writer's
    /// index), so the writer's next sync or close reports it: a close must
    /// never succeed over writes it lost.
    lost: Option<(ErrorKind, String)>,
}

/// The read side: a merged index and the data logs it points into.
#[derive(Debug)]
struct ReadState {
    index: MergedIndex,
    sources: Vec<Arc<DataLog>>,
    refs: HashMap<LogId, LogRef>,
}

/// A writer's slot: its id, and for a striped file the backend whose
/// stripes it writes there (None: the writer's one classic log pair).
type SlotKey = (WriterId, Option<BackendId>);

/// The data logs one read touches (usually one or a few: searched linearly).
type ReadSources = Vec<(LogRef, Arc<DataLog>)>;

/// A range to fetch ahead of a streaming read, and the log it lies in.
type AheadTarget = (read_ahead::Target, Arc<DataLog>);

/// Where a data log the index points into lives, and its checksums.
#[derive(Debug)]
struct DataLog {
    id: LogId,
    backend: BackendId,
    path: StorePath,
    index_path: StorePath,
    /// Built with the index, or read from the index log at the first read
    /// that checks data (after loading a global index, which has no CRCs).
    checksums: OnceLock<Arc<LogChecksums>>,
}

impl DataLog {
    fn checksums(&self, mount: &MountState) -> Result<Arc<LogChecksums>> {
        if let Some(found) = self.checksums.get() {
            return Ok(found.clone());
        }
        let store = mount.store(self.backend);
        let label = || format!("{}: index log {}", store.url(), self.index_path);
        let table = match store.read_all(&self.index_path) {
            Ok(bytes) => LogChecksums::from_records(&index_log::decode(&bytes).with_context(label)?.records),
            // Unlinked while open: its records cannot be read any more,
            // but the bytes can, as on POSIX; they go unchecked.
            Err(error) if error.kind() == ErrorKind::NotFound => LogChecksums::default(),
            Err(error) => return Err(error.context(label())),
        };
        Ok(self.checksums.get_or_init(|| Arc::new(table)).clone())
    }
}

impl ReadState {
    fn log_ref(
        &mut self,
        id: LogId,
        backend: BackendId,
        paths: impl FnOnce() -> (StorePath, StorePath),
        checksums: Option<LogChecksums>,
    ) -> LogRef {
        *self.refs.entry(id).or_insert_with(|| {
            let (path, index_path) = paths();
            let table = OnceLock::new();
            if let Some(checksums) = checksums {
                let _ = table.set(Arc::new(checksums));
            }
            self.sources.push(Arc::new(DataLog { id, backend, path, index_path, checksums: table }));
            LogRef((self.sources.len() - 1) as u32)
        })
    }
}

#[derive(Debug)]
pub(crate) struct OpenFile {
    mount: Arc<MountState>,
    path: RwLock<StorePath>,
    write_gate: RwLock<()>,
    writers: Mutex<HashMap<SlotKey, Arc<Mutex<WriterSlot>>>>,
    /// Run-tracker keys handed to new slots.
    next_run_key: AtomicU64,
    /// The file's layout, read at the first write (None: not striped).
    striping: OnceLock<Option<Striping>>,
    read_state: RwLock<Option<ReadState>>,
    /// Writers' pending runs, so one writer's write ends another's run.
    runs: Mutex<RunTracker>,
    /// A collective open just installed the read state: the next local
    /// open of the file is part of that open and keeps it.
    prepared: AtomicBool,
    /// The file size as this process knows it: disk state when first
    /// needed, then moved by local writes and truncates (lazy stat).
    known: Mutex<Option<SizeSummary>>,
    /// A lock was granted since the cached view was built ([`refresh`](Self::refresh)):
    /// before its next use it is checked against the store.
    stale: AtomicBool,
    /// Other writers' index logs, as a check found them before the view
    /// now cached was loaded (None: not taken yet).
    others_seen: Mutex<Option<Vec<LogLength>>>,
    /// Paces the checks a size or a read at the cached end makes on its own.
    look_again: LookAgain,
    /// The container's creation is known durable (`container::sync_creation`
    /// ran in this process since the open).
    creation_synced: AtomicBool,
    /// Which container the read state was last loaded from, so a later
    /// look at the name can tell another file put there.
    loaded_from: Mutex<Option<LoadedFrom>>,
}

/// Tells one container from another that later took its name: the
/// modification time of its version file, written once when the container
/// is made (a rename that moves a file to another backend, or `plfs
/// recover` rewriting a damaged one, makes a new one). None where the
/// store keeps no times.
type Identity = Option<std::time::SystemTime>;

/// The container a read state was loaded from: its [`Identity`] and the
/// logs it had. Another file at the name has another identity and none of
/// those logs; a time that changed while the logs stayed is the same file
/// (HDFS sets a file's time again when it closes it, which may be after
/// its creator returned).
#[derive(Debug)]
struct LoadedFrom {
    identity: Identity,
    logs: Vec<LogId>,
}

/// An index log and its length in bytes.
type LogLength = (LogId, u64);

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn read_lock<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write_lock<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

impl OpenFile {
    pub(crate) fn new(mount: Arc<MountState>, path: StorePath) -> OpenFile {
        OpenFile {
            mount,
            path: RwLock::new(path),
            write_gate: RwLock::new(()),
            writers: Mutex::new(HashMap::new()),
            next_run_key: AtomicU64::new(0),
            striping: OnceLock::new(),
            read_state: RwLock::new(None),
            runs: Mutex::new(RunTracker::default()),
            prepared: AtomicBool::new(false),
            known: Mutex::new(None),
            stale: AtomicBool::new(false),
            others_seen: Mutex::new(None),
            look_again: LookAgain::default(),
            creation_synced: AtomicBool::new(false),
            loaded_from: Mutex::new(None),
        }
    }

    pub(crate) fn path(&self) -> StorePath {
        read_lock(&self.path).clone()
    }

    pub(crate) fn set_path(&self, path: StorePath) {
        *write_lock(&self.path) = path;
        // Learnt again at the next load: a move may have made it anew.
        *lock(&self.loaded_from) = None;
    }

    /// The identity of the container now at this file's name; `Stale` if
    /// there is none.
    fn identity_at_name(&self) -> Result<Identity> {
        let path = self.path();
        let (backend, paths) = container::canonical(&self.mount, &path);
        match self.mount.store(backend).metadata(&paths.version()) {
            Ok(metadata) => Ok(metadata.mtime),
            Err(error) if error.kind() == ErrorKind::NotFound => {
                Err(Error::new(ErrorKind::Stale, format!("/{path}: removed by another process")))
            }
            Err(error) => Err(error.context(format!("/{path}"))),
        }
    }

    /// Whether another file than the one loaded is at the name now (false
    /// when that cannot be told).
    pub(crate) fn replaced_at_name(&self) -> bool {
        read_lock(&self.read_state).is_some()
            && self
                .identity_at_name()
                .and_then(|now| self.name_taken_by_another(now))
                .is_ok_and(|taken| taken)
    }

    /// Whether the container at the name, of identity `now`, is another
    /// file than the one the read state was last loaded from (false when
    /// none was).
    fn name_taken_by_another(&self, now: Identity) -> Result<bool> {
        let mut loaded_from = lock(&self.loaded_from);
        let Some(loaded) = loaded_from.as_mut() else { return Ok(false) };
        if now.is_none() || loaded.identity == now {
            return Ok(false);
        }
        let logs = container::file_logs(&self.mount, &self.path())?;
        let taken = loaded.logs.is_empty() || !logs.iter().any(|log| loaded.logs.contains(&log.id));
        if !taken {
            loaded.identity = now;
        }
        Ok(taken)
    }

    fn slot(&self, key: SlotKey) -> Arc<Mutex<WriterSlot>> {
        lock(&self.writers)
            .entry(key)
            .or_insert_with(|| {
                let run_key = self.next_run_key.fetch_add(1, Ordering::Relaxed);
                Arc::new(Mutex::new(WriterSlot { run_key, ..WriterSlot::default() }))
            })
            .clone()
    }

    /// The file's layout, read once (at the first write of this open file).
    fn striping(&self) -> Result<Option<&Striping>> {
        if let Some(found) = self.striping.get() {
            return Ok(found.as_ref());
        }
        let path = self.path();
        let layout = stripes::read_layout(&self.mount, &path).with_context(|| format!("/{path}"))?;
        Ok(self.striping.get_or_init(|| layout.map(Striping::new)).as_ref())
    }

    fn slots(&self) -> Vec<Arc<Mutex<WriterSlot>>> {
        lock(&self.writers).values().cloned().collect()
    }

    /// Appends `buf` at logical `offset` for `writer`.
    pub(crate) fn write(&self, buf: &[u8], offset: u64, writer: WriterId) -> Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let end =
            offset.checked_add(buf.len() as u64).filter(|end| *end <= FILE_SIZE_MAX).ok_or_else(|| {
                Error::invalid(format!(
                    "write of {} bytes at offset {offset} passes the maximum file size",
                    buf.len()
                ))
            })?;
        let _gate = read_lock(&self.write_gate);
        let Some(striping) = self.striping()? else {
            return self.write_piece(buf, offset, end, (writer, None));
        };
        // Each stripe unit's bytes go to the log on its backend.
        let mut done = 0;
        while done < buf.len() {
            let at = offset + done as u64;
            let placed = striping.locate(&self.mount, || self.path(), at);
            let piece = placed.and_then(|(backend, unit_end)| {
                let length = (unit_end - at).min((buf.len() - done) as u64) as usize;
                self.write_piece(&buf[done..done + length], at, at + length as u64, (writer, Some(backend)))
            });
            match piece {
                Ok(length) => done += length,
                // The pieces before are written and indexed: a short
                // write, as POSIX allows; the next write meets the error.
                Err(error) if done > 0 => {
                    tracing::warn!("/{}: short write after {done} bytes: {error}", self.path());
                    break;
                }
                Err(error) => return Err(error),
            }
        }
        Ok(done)
    }

    /// Appends one piece that lies on one backend to the slot's logs; the
    /// caller holds the write gate.
    fn write_piece(&self, buf: &[u8], offset: u64, end: u64, key: SlotKey) -> Result<usize> {
        let writer = key.0;
        let slot = self.slot(key);
        let mut slot = lock(&slot);
        let logs = self.ensure_logs(&mut slot, key)?;
        let physical = logs.data.len();
        if let Err(error) = logs.data.append(buf) {
            let path = self.path();
            let error = error.context(format!("/{path}: writing {} bytes at offset {offset}", buf.len()));
            self.retire(&mut slot, &error);
            return Err(error);
        }
        let logs = slot.logs.as_mut().expect("present after ensure");
        logs.data_dirty = true;
        let write = WriteRecord {
            logical: offset,
            length: buf.len() as u64,
            physical,
            stamp: self.mount.stamper.next(),
            sequence: logs.sequence,
            writer,
            data_crc: crate::checksums::data_crc(buf),
        };
        self.push_write(&mut slot, write)?;
        if let Some(state) = write_lock(&self.read_state).as_mut() {
            // The pair may have been retired by a failed index append above.
            if let Some(logs) = slot.logs.as_ref() {
                let paths = || (logs.data_path.clone(), logs.index_path.clone());
                let log = state.log_ref(logs.id, logs.backend, paths, None);
                state.index.apply_write(offset, buf.len() as u64, log, physical);
            }
        }
        if let Some(known) = lock(&self.known).as_mut() {
            known.eof = known.eof.max(end);
            known.bytes += buf.len() as u64;
            known.last_stamp = known.last_stamp.max(write.stamp);
        }
        Ok(buf.len())
    }

    /// Records a truncate to `size` on behalf of `writer`, durably, and
    /// returns its stamp.
    pub(crate) fn truncate(&self, size: u64, writer: WriterId) -> Result<u64> {
        if size > FILE_SIZE_MAX {
            return Err(Error::invalid(format!("truncate to {size} passes the maximum file size")));
        }
        let _gate = read_lock(&self.write_gate);
        // Runs pending in this process end here: a pattern is ordered at
        // its last stamp, which must not pass this truncate.
        lock(&self.runs).cut_all();
        // A striped file's truncate record goes with the bytes at offset 0.
        let target = match self.striping()? {
            Some(striping) => Some(striping.locate(&self.mount, || self.path(), 0)?.0),
            None => None,
        };
        let slot = self.slot((writer, target));
        let mut slot = lock(&slot);
        self.ensure_logs(&mut slot, (writer, target))?;
        let logs = slot.logs.as_mut().expect("present after ensure");
        let stamp = self.mount.stamper.next();
        let record = Record::Truncate(TruncateRecord { size, stamp, sequence: logs.sequence, writer });
        self.push_record(&mut slot, &record)?;
        self.sync_slot(&mut slot)?;
        if let Some(state) = write_lock(&self.read_state).as_mut() {
            state.index.apply_truncate(size);
        }
        let mut known = lock(&self.known);
        let bytes = known.map_or(0, |known| known.bytes);
        *known = Some(SizeSummary { eof: size, bytes, last_stamp: stamp });
        Ok(stamp)
    }

    /// Buffers a record in the writer's frame, after the run it follows,
    /// appending the frame to the index log when it reaches the threshold.
    fn push_record(&self, slot: &mut WriterSlot, record: &Record) -> Result<()> {
        let logs = slot.logs.as_mut().expect("caller ensured logs");
        end_run(logs);
        logs.frame.push(record);
        logs.sequence += 1;
        container::absorb(&mut logs.summary, record);
        self.flush_if_full(slot)
    }

    /// Like [`push_record`](Self::push_record) for a write, which may
    /// extend the writer's pending run instead of adding a record.
    fn push_write(&self, slot: &mut WriterSlot, write: WriteRecord) -> Result<()> {
        let patterns = self.mount.tuning.index_patterns;
        let logs = slot.logs.as_mut().expect("caller ensured logs");
        logs.sequence += 1;
        container::absorb(&mut logs.summary, &Record::Write(write));
        if patterns {
            // A leaf lock, held for a few comparisons and one record copy.
            let mut runs = lock(&self.runs);
            if runs.before_write(slot.run_key, write.logical, write.logical + write.length) {
                end_run(logs);
            }
            if let Some(ended) = logs.patterns.push(write) {
                logs.frame.push(&ended);
            }
            runs.after_write(slot.run_key, logs.patterns.pending_shape());
        } else {
            logs.frame.push(&Record::Write(write));
        }
        self.flush_if_full(slot)
    }

    /// A pending run counts as the records it replaces, so patterns reach
    /// the index log (and survive a crash) as often as plain records would.
    /// Also appends a frame that has waited `PUBLISH_AFTER`: a writer
    /// logging a line now and then filled its 256 KiB frame after hours,
    /// and until then no reader saw a byte it wrote (`tail -f` on a job's
    /// log). A writer that stops writing keeps its last records until it
    /// flushes, syncs or closes.
    fn flush_if_full(&self, slot: &mut WriterSlot) -> Result<()> {
        let logs = slot.logs.as_ref().expect("caller ensured logs");
        let pending = logs.patterns.pending_writes() as usize * WRITE_RECORD_BYTES;
        if logs.frame.len() + pending >= self.mount.tuning.index_flush_bytes
            || self.mount.stamper.now_ns().saturating_sub(logs.flushed_ns) >= saturating_ns(PUBLISH_AFTER)
        {
            self.flush_frame(slot)?;
        }
        Ok(())
    }

    /// Appends the buffered frame to the index log (no fsync). A failure
    /// retires the log pair: its tail may be torn and must stay the tail.
    fn flush_frame(&self, slot: &mut WriterSlot) -> Result<()> {
        let Some(logs) = slot.logs.as_mut() else { return Ok(()) };
        end_run(logs);
        let Some(frame) = logs.frame.finish() else { return Ok(()) };
        let result = logs.index.append(frame);
        if result.is_ok()
            && let Some((retention, frames)) = logs.retained.as_mut()
        {
            if retention.reserve(frame.len()) {
                frames.extend_from_slice(frame);
            } else {
                logs.retained = None;
            }
        }
        logs.frame.clear();
        match result {
            Ok(()) => {
                logs.flushed_ns = self.mount.stamper.now_ns();
                logs.index_dirty = true;
                logs.indexed = logs.summary;
                Ok(())
            }
            Err(error) => {
                let error = error.context(format!("/{}: appending index records", self.path()));
                self.retire(slot, &error);
                Err(error)
            }
        }
    }

    /// Makes a writer's data durable, then the index records that point at
    /// it: after a crash an index record never names bytes that are gone.
    /// Only then are both made readable, at once (see
    /// [`AppendWriter::persist`]): on HDFS that is one close wait, not two.
    fn sync_slot(&self, slot: &mut WriterSlot) -> Result<()> {
        let Some(logs) = slot.logs.as_mut() else { return Ok(()) };
        if !logs.announced {
            // Nothing is lost yet if this fails: the pair stays in use and
            // the next sync tries again.
            self.sync_creation()?;
            let path = self.path();
            let (backend, paths) = container::canonical(&self.mount, &path);
            container::ignore_missing(self.mount.store(backend).sync_dir(&paths.meta_dir()))
                .with_context(|| format!("/{path}: syncing the open record of log {}", logs.id))?;
            logs.announced = true;
        }
        let data_dirty = logs.data_dirty;
        if data_dirty && let Err(error) = logs.data.persist() {
            let error = error.context(format!("/{}: syncing data log", self.path()));
            self.retire(slot, &error);
            return Err(error);
        }
        self.flush_frame(slot)?;
        let Some(logs) = slot.logs.as_mut() else { return Ok(()) };
        let index_dirty = logs.index_dirty;
        if index_dirty && let Err(error) = logs.index.persist() {
            let error = error.context(format!("/{}: syncing index log", self.path()));
            self.retire(slot, &error);
            return Err(error);
        }
        let (data, index) = publish_pair(logs, data_dirty, index_dirty);
        for (result, what) in [(data, "data"), (index, "index")] {
            if let Err(error) = result {
                let error = error.context(format!("/{}: syncing {what} log", self.path()));
                self.retire(slot, &error);
                return Err(error);
            }
        }
        let logs = slot.logs.as_mut().expect("present");
        logs.data_dirty = false;
        logs.index_dirty = false;
        Ok(())
    }

    /// Makes the container's creation durable, once per open file in this
    /// process: before the first synced byte, and at an fsync of a file
    /// never written (a plain creat(2) is durable at its fsync too).
    fn sync_creation(&self) -> Result<()> {
        if self.creation_synced.load(Ordering::Acquire) {
            return Ok(());
        }
        let path = self.path();
        container::sync_creation(&self.mount, &path)
            .with_context(|| format!("/{path}: syncing its creation"))?;
        self.creation_synced.store(true, Ordering::Release);
        Ok(())
    }

    /// Stops using a writer's log pair after a failure. It still gets a
    /// size record at close, covering what reached the index.
    fn retire(&self, slot: &mut WriterSlot, error: &Error) {
        if let Some(logs) = slot.logs.take() {
            tracing::warn!("/{}: retiring log pair {} after a failed append", self.path(), logs.id);
            if let Some((retention, _)) = &logs.retained {
                retention.abandon();
            }
            if logs.summary != logs.indexed || logs.data_dirty || logs.index_dirty {
                slot.lost.get_or_insert_with(|| {
                    (
                        error.kind(),
                        format!("/{}: writes to log {} may be lost: {error}", self.path(), logs.id),
                    )
                });
            }
            let (id, backend, index_path, indexed) = (logs.id, logs.backend, logs.index_path, logs.indexed);
            drop(logs.data.close());
            drop(logs.index.close());
            slot.retired.push(self.held_by(id, backend, &index_path).unwrap_or(indexed));
        }
    }

    /// What a retired pair's index log holds, read back. A failed append
    /// may have kept its whole frame (a short write as long as the frame,
    /// a store that failed after writing), and readers go by the log: a
    /// size record counting less would make stat disagree with reads (a
    /// truncate record kept though its append failed: plfs-sim seed
    /// 15949). None if the log cannot be read: then what the writer knows
    /// it appended.
    fn held_by(&self, id: LogId, backend: BackendId, index_path: &StorePath) -> Option<SizeRecord> {
        let bytes = self.mount.store(backend).read_all(index_path).ok()?;
        let decoded = index_log::decode(&bytes).ok()?;
        Some(container::summarize(id, &decoded.records))
    }

    /// Creates the writer's logs on first use: hostdir, open record, then
    /// the index and data logs with their headers.
    fn ensure_logs<'a>(&self, slot: &'a mut WriterSlot, key: SlotKey) -> Result<&'a mut WriterLogs> {
        if slot.logs.is_none() {
            slot.logs = Some(self.create_logs(key, &self.path())?);
        }
        Ok(slot.logs.as_mut().expect("just created"))
    }

    /// Makes a log pair for `key`: in the writer's host's hostdir, or for a
    /// stripe on a given backend, in the host's hostdir there.
    fn create_logs(&self, (writer, target): SlotKey, path: &StorePath) -> Result<WriterLogs> {
        let mount = &self.mount;
        let name = container::placement_name(path);
        let (hostdir, backend) = match target {
            None => {
                let hostdir = mount.placement.hostdir(&mount.hostname);
                (hostdir, mount.placement.hostdir_backend(name, hostdir))
            }
            Some(backend) => {
                let hostdir =
                    mount.placement.hostdir_on(name, &mount.hostname, backend).ok_or_else(|| {
                        Error::invalid(format!(
                            "/{path}: backend {} holds no hostdirs for a stripe",
                            backend.0
                        ))
                    })?;
                (hostdir, backend)
            }
        };
        let store = mount.store(backend);
        let paths = ContainerPaths::new(path.clone());
        let (canonical_backend, _) = container::canonical(mount, path);
        let context = || format!("{}: {path}: creating logs for writer {writer}", store.url());
        // The pieces get the file's protection as they are made (its mode
        // as of now: a chmod since the open counts).
        let access = protection::read_access(mount, path).with_context(context)?;
        let pieces = Pieces::of(&access);
        if backend == canonical_backend {
            // The container exists here; never recreate it if it was removed.
            ignore_exists(store.create_dir_protected(&paths.hostdir(hostdir), &pieces.dir))
                .with_context(context)?;
        } else {
            // Made again below if it is removed meanwhile.
            container::ignore_missing(create_shadow(store, &paths, hostdir, &pieces))
                .with_context(context)?;
        }
        let id = LogId::new(mount.stamper.next(), writer, mount.pid, &mount.hostname);
        let canonical_store = mount.store(canonical_backend);
        let summary_context = || format!("{}: {path}: removing the closed summary", canonical_store.url());
        // A stat that reads the closed summary sees no writers: it goes
        // before the open record, and again after, for a closer that
        // sealed one in between (container::publish_closed_summary). A
        // removal that found one is synced, so no crash can bring back a
        // summary that misses a synced write of this log. The open record
        // itself is made durable before this pair's first sync
        // (sync_slot): a new file's create and first write sync nothing.
        let dropped =
            container::drop_closed_summary(canonical_store, &paths).with_context(summary_context)?;
        canonical_store
            .create_new_protected(&paths.meta(&layout::open_record_name(&id))?, &[], &pieces.file)
            .with_context(|| format!("{}: {path}: open record", canonical_store.url()))?;
        if container::drop_closed_summary(canonical_store, &paths).with_context(summary_context)? || dropped {
            canonical_store.sync_dir(&paths.meta_dir()).with_context(summary_context)?;
        }
        let header =
            LogHeader { created_stamp: id.stamp, writer, pid: mount.pid, hostname: mount.hostname.clone() };
        let index_path = paths.log(hostdir, LogKind::Index, &id);
        let mut shadow_attempts = 1;
        let mut index = loop {
            match store.create_append_protected(&index_path, &pieces.file) {
                // Another process's unlink of the file that was at this
                // name before takes the shadows away whole and returns
                // the logs of other files (`rename::gather_removed`): a
                // hostdir it took after it was made here, still empty, is
                // made again.
                Err(error)
                    if error.kind() == ErrorKind::NotFound
                        && backend != canonical_backend
                        && shadow_attempts < SHADOW_ATTEMPTS_MAX =>
                {
                    shadow_attempts += 1;
                    container::ignore_missing(create_shadow(store, &paths, hostdir, &pieces))
                        .with_context(context)?;
                }
                other => break other.with_context(context)?,
            }
        };
        index.append(&header.encode(INDEX_MAGIC)).with_context(context)?;
        let mut data = store
            .create_append_protected(&paths.log(hostdir, LogKind::Data, &id), &pieces.file)
            .with_context(context)?;
        data.append(&header.encode(DATA_MAGIC)).with_context(context)?;
        // A chmod or chown that replaced the access file after the read
        // above may have walked the container before these pieces existed:
        // if the record changed, walk it again. (If it changes after this
        // read, that walk sees the pieces.)
        let now = protection::read_access(mount, path).with_context(context)?;
        if protection::differs(&access, &now) {
            protection::protect_container(mount, path, &now).with_context(context)?;
        }
        Ok(WriterLogs {
            id,
            backend,
            data_path: paths.log(hostdir, LogKind::Data, &id),
            index_path: paths.log(hostdir, LogKind::Index, &id),
            data,
            index,
            frame: FrameBuilder::new(),
            patterns: PatternBuilder::new(),
            sequence: 0,
            summary: SizeRecord { log: id, max_end: 0, bytes: 0, last_stamp: 0, truncate: None },
            indexed: SizeRecord { log: id, max_end: 0, bytes: 0, last_stamp: 0, truncate: None },
            data_dirty: true,
            index_dirty: true,
            announced: false,
            retained: mount.retained.retention(path).map(|retention| (retention, Vec::new())),
            flushed_ns: mount.stamper.now_ns(),
        })
    }

    /// Makes every local writer's data and index durable, and drops the
    /// read state so the next read sees other writers' synced records too.
    pub(crate) fn sync(&self) -> Result<()> {
        let _gate = read_lock(&self.write_gate);
        self.sync_creation()?;
        let mut first_error = None;
        for slot in self.slots() {
            let mut slot = lock(&slot);
            // A loss found by another call (a read's flush) is this sync's
            // news; the slot's current pair is still synced.
            let lost = take_lost(&mut slot);
            if let Err(error) = self.sync_slot(&mut slot).and(lost.map_or(Ok(()), Err)) {
                first_error.get_or_insert(error);
            }
        }
        *write_lock(&self.read_state) = None;
        first_error.map_or(Ok(()), Err)
    }

    /// Reads into `buf` from logical `offset`; returns bytes read (short
    /// only at end of file). Holes read as zeros. With an open's
    /// read-ahead, a read that continues the open's stream first starts
    /// fetching what the stream reads next on other backends (see
    /// read_ahead.rs), and takes its own bytes from what earlier reads
    /// fetched.
    pub(crate) fn read_with(&self, buf: &mut [u8], offset: u64, ahead: Option<&ReadAhead>) -> Result<usize> {
        let count = self.read_from_view(buf, offset, ahead)?;
        // A read that ends at the end of the file as cached: another process
        // may have written past it (`tail -f`, a reader following a log).
        if count < buf.len() && self.look_again.due(self.mount.stamper.now_ns()) {
            self.refresh();
            return self.read_from_view(buf, offset, ahead);
        }
        Ok(count)
    }

    fn read_from_view(&self, buf: &mut [u8], offset: u64, ahead: Option<&ReadAhead>) -> Result<usize> {
        /// Index reloads of one read whose logs vanish under it.
        const READ_ATTEMPTS_MAX: usize = 4;
        /// Reloads of one read that found the file replaced again (the
        /// reload names other logs than the failed read did), on top of
        /// `READ_ATTEMPTS_MAX`: a file republished by rename faster than
        /// one attempt runs took a reader's few attempts in one burst, and
        /// the read failed although every reload found a whole file.
        const REPLACEMENTS_MAX: usize = 64;
        let backends = self.mount.stores.len();
        let span = match ahead {
            Some(ahead) if ahead.follows(offset, buf.len()) && read_ahead::applies(buf.len()) => {
                read_ahead::span(buf.len(), backends)
            }
            _ => 0,
        };
        let mut attempt = 0;
        let mut replacements = 0;
        // The data logs of the last read that found one missing.
        let mut vanished: Option<Vec<LogId>> = None;
        loop {
            let (pieces, sources, targets) = match self.plan_read(offset, buf.len() as u64, span) {
                Ok(plan) => plan,
                Err(error) if error.kind() == ErrorKind::NotFound && attempt < READ_ATTEMPTS_MAX => {
                    attempt += 1;
                    self.reload_the_file_at_the_name();
                    continue;
                }
                Err(error) => return Err(error),
            };
            let total = pieces.iter().map(|piece| piece.length as usize).sum::<usize>();
            if let Some(ahead) = ahead
                && !targets.is_empty()
            {
                self.start_read_ahead(ahead, targets, buf.len());
            }
            match self.read_pieces(&mut buf[..total], offset, &pieces, &sources, ahead) {
                Ok(()) => return Ok(total),
                // A log the index named is gone: another process replaced
                // the file by a rename (or reclaimed logs a truncate made
                // obsolete) after this handle loaded the index. The file
                // as it is now answers (a few times, if renames keep coming).
                Err(error) if error.kind() == ErrorKind::NotFound => {
                    let logs: Vec<LogId> = sources.iter().map(|(_, source)| source.id).collect();
                    let replaced = vanished.as_ref().is_some_and(|before| *before != logs);
                    vanished = Some(logs);
                    if replaced && replacements < REPLACEMENTS_MAX {
                        replacements += 1;
                    } else if attempt < READ_ATTEMPTS_MAX {
                        attempt += 1;
                    } else {
                        return Err(error.context(format!(
                            "/{}: read of {total} bytes at offset {offset} (index reloaded {} times)",
                            self.path(),
                            attempt + replacements
                        )));
                    }
                    self.reload_the_file_at_the_name();
                }
                Err(error) => {
                    return Err(
                        error.context(format!("/{}: read of {total} bytes at offset {offset}", self.path()))
                    );
                }
            }
        }
    }

    /// Looks the range up in the read state, building it when missing. A
    /// concurrent `sync` may drop the state in between; then build again.
    /// With a `span`, also what lies in the `span` bytes after the range on
    /// backends the range does not touch: the read-ahead targets, the first
    /// run of each such backend's bytes that lie end to end in one log, no
    /// longer than the request.
    fn plan_read(
        &self,
        offset: u64,
        length: u64,
        span: u64,
    ) -> Result<(Vec<Piece>, ReadSources, Vec<AheadTarget>)> {
        const ATTEMPTS_MAX: usize = 8;
        for _ in 0..ATTEMPTS_MAX {
            self.ensure_read_state()?;
            if let Some(state) = read_lock(&self.read_state).as_ref() {
                let pieces = state.index.lookup(offset, length);
                let mut sources: ReadSources = Vec::new();
                for piece in &pieces {
                    if let Source::Data { log, .. } = piece.source
                        && !sources.iter().any(|(known, _)| *known == log)
                    {
                        sources.push((log, state.sources[log.0 as usize].clone()));
                    }
                }
                let mut targets: Vec<AheadTarget> = Vec::new();
                if span > 0 {
                    for piece in state.index.lookup(offset.saturating_add(length), span) {
                        let Source::Data { log, physical } = piece.source else { continue };
                        let source = &state.sources[log.0 as usize];
                        if sources.iter().any(|(_, known)| known.backend == source.backend) {
                            continue;
                        }
                        match targets.iter_mut().find(|(target, _)| target.backend == source.backend) {
                            Some((target, _)) => {
                                if target.log == source.id && target.physical + target.length == physical {
                                    target.length = (target.length + piece.length).min(length);
                                }
                            }
                            None => {
                                let target = read_ahead::Target {
                                    backend: source.backend,
                                    log: source.id,
                                    physical,
                                    length: piece.length.min(length),
                                };
                                targets.push((target, source.clone()));
                            }
                        }
                    }
                }
                return Ok((pieces, sources, targets));
            }
        }
        Err(Error::new(ErrorKind::Unavailable, format!("/{}: index kept changing under a read", self.path())))
    }

    /// Starts fetching `targets` for `ahead`'s stream in the read pool,
    /// each read and checked as a read of `request` bytes would be.
    fn start_read_ahead(&self, ahead: &ReadAhead, targets: Vec<AheadTarget>, request: usize) {
        let fetches: Vec<_> = targets
            .into_iter()
            .map(|(target, source)| {
                let mount = self.mount.clone();
                let fetch = move |buf: &mut [u8]| -> Result<()> {
                    let store = mount.store(source.backend);
                    let cached = mount.log_cache.get(source.backend, source.id, store, &source.path)?;
                    read_checked(&mount, &source, &cached, buf, target.physical, request)
                };
                (target, fetch)
            })
            .collect();
        ahead.refill(fetches, &self.mount.read_pool);
    }

    fn read_pieces(
        &self,
        buf: &mut [u8],
        offset: u64,
        pieces: &[Piece],
        sources: &ReadSources,
        ahead: Option<&ReadAhead>,
    ) -> Result<()> {
        let cache = &self.mount.log_cache;
        let readahead = cache.readahead_bytes();
        // Bytes fetched ahead (and checked) already.
        let prefetched = |log: LogRef, physical: u64, out: &mut [u8]| {
            ahead.is_some_and(|ahead| {
                let source = &sources.iter().find(|(known, _)| *known == log).expect("planned").1;
                ahead.serve(source.backend, source.id, physical, out)
            })
        };
        // A read inside one extent (the usual record-sized read) needs no
        // grouping and no task.
        if let [Piece { source: Source::Data { log, physical }, .. }] = pieces {
            if prefetched(*log, *physical, buf) {
                return Ok(());
            }
            let source = &sources[0].1;
            let cached =
                cache.get(source.backend, source.id, self.mount.store(source.backend), &source.path)?;
            return self.read_data(source, &cached, buf, *physical);
        }
        let mut per_log: HashMap<LogRef, Vec<(u64, &mut [u8])>> = HashMap::new();
        let mut rest = buf;
        for piece in pieces {
            debug_assert!(piece.logical >= offset);
            let (head, tail) = rest.split_at_mut(piece.length as usize);
            rest = tail;
            match piece.source {
                Source::Hole => head.fill(0),
                Source::Data { log, physical } => {
                    if !prefetched(log, physical, head) {
                        per_log.entry(log).or_default().push((physical, head));
                    }
                }
            }
        }
        let tasks: Vec<_> = per_log
            .into_iter()
            .map(|(log, parts)| {
                let source = &sources.iter().find(|(known, _)| *known == log).expect("planned").1;
                let store = self.mount.store(source.backend);
                move || -> Result<()> {
                    let mut parts = parts;
                    let cached = cache.get(source.backend, source.id, store, &source.path)?;
                    if self.mount.tuning.verify_reads == VerifyReads::Off {
                        // Contiguous records of this log in one request each.
                        return cached.read_parts(&mut parts, readahead);
                    }
                    // Checked: runs of parts up to a checked piece in one
                    // request each, every part checked right after its run
                    // lands (still in cache); a longer part is read and
                    // checked piece by piece.
                    let mut rest = &mut parts[..];
                    while !rest.is_empty() {
                        let mut run = 0;
                        let mut bytes = 0;
                        while run < rest.len() && bytes + rest[run].1.len() as u64 <= PIECE_BYTES {
                            bytes += rest[run].1.len() as u64;
                            run += 1;
                        }
                        let (head, tail) = rest.split_at_mut(run.max(1));
                        rest = tail;
                        if let [(physical, part)] = head
                            && part.len() as u64 > PIECE_BYTES
                        {
                            self.read_data(source, &cached, part, *physical)?;
                            continue;
                        }
                        cached.read_parts(head, readahead)?;
                        for (physical, part) in head.iter_mut() {
                            self.check_data(source, &cached, part, *physical)?;
                        }
                    }
                    Ok(())
                }
            })
            .collect();
        self.mount.read_pool.run_all(tasks)
    }

    /// Checks bytes already read from a data log (a vectored read of a run of
    /// records) against their records' CRC32Cs, as `verify_reads` says.
    fn check_data(&self, source: &DataLog, cached: &CachedLog, buf: &mut [u8], physical: u64) -> Result<()> {
        let mode = self.mount.tuning.verify_reads;
        if mode == VerifyReads::Off {
            return Ok(());
        }
        let readahead = self.mount.log_cache.readahead_bytes();
        let read_at = |out: &mut [u8], at: u64| cached.read_exact(out, at, readahead);
        source.checksums(&self.mount)?.check(buf, physical, mode, cached.label(), &read_at)
    }

    /// Reads bytes of a data log and checks them against their records'
    /// CRC32Cs, as `verify_reads` says (a long read in pieces, each checked
    /// while its bytes are still in cache).
    fn read_data(&self, source: &DataLog, cached: &CachedLog, buf: &mut [u8], physical: u64) -> Result<()> {
        read_checked(&self.mount, source, cached, buf, physical, buf.len())
    }

    /// Builds the read state and opens the data logs it names (a file of
    /// at most [`PREPARED_DATA_LOGS_MAX`] logs), so an open file keeps its
    /// bytes when another process removes the file (the logs' handles
    /// outlive their names on stores that keep open files). Not while this
    /// process writes the file: building the state would flush its
    /// writers' records, whose failures are their calls' news.
    pub(crate) fn prepare_reads(&self) -> Result<()> {
        if !lock(&self.writers).is_empty() {
            return Ok(());
        }
        self.ensure_read_state()?;
        let sources = match read_lock(&self.read_state).as_ref() {
            Some(state) => state.sources.clone(),
            None => return Ok(()),
        };
        if sources.len() > PREPARED_DATA_LOGS_MAX.min(self.mount.tuning.read_handles_max / 2) {
            return Ok(());
        }
        for source in sources {
            let store = self.mount.store(source.backend);
            self.mount.log_cache.get(source.backend, source.id, store, &source.path)?;
        }
        Ok(())
    }

    fn ensure_read_state(&self) -> Result<()> {
        self.revalidate()?;
        if read_lock(&self.read_state).is_some() {
            return Ok(());
        }
        let _gate = write_lock(&self.write_gate);
        if read_lock(&self.read_state).is_some() {
            return Ok(());
        }
        let path = self.path();
        for slot in self.slots() {
            self.flush_frame(&mut lock(&slot))?;
        }
        // A descriptor reads its own file, as on a local file system: not
        // one another process put at the name since (by unlink and
        // create, or a rename onto it). Before, a reader whose view was
        // dropped read that file's bytes, silently.
        let reading_only = lock(&self.writers).is_empty();
        let identity = if reading_only { self.identity_at_name()? } else { None };
        if reading_only && self.name_taken_by_another(identity)? {
            return Err(Error::new(
                ErrorKind::Stale,
                format!("/{path}: removed by another process, and another file is at its name"),
            ));
        }
        let state = load_read_state(&self.mount, &path)?;
        let logs = state.sources.iter().map(|source| source.id).collect();
        *lock(&self.loaded_from) = Some(LoadedFrom { identity, logs });
        let mut known = lock(&self.known);
        let (bytes, last_stamp) = known.map_or((state.index.data_bytes(), 0), |k| (k.bytes, k.last_stamp));
        *known = Some(SizeSummary { eof: state.index.eof(), bytes, last_stamp });
        drop(known);
        *write_lock(&self.read_state) = Some(state);
        Ok(())
    }

    /// The size as this process sees it, without I/O once known.
    pub(crate) fn size(&self) -> Result<u64> {
        Ok(self.known_summary()?.eof)
    }

    /// Size, data bytes and newest stamp as this process knows them: read
    /// from `meta/` once, then moved by local writes and truncates (the
    /// lazy stat of a file open for writing). Data bytes are exact only
    /// until the first truncate.
    pub(crate) fn known_summary(&self) -> Result<SizeSummary> {
        if self.look_again.due(self.mount.stamper.now_ns()) {
            self.refresh();
        }
        self.revalidate()?;
        if let Some(known) = *lock(&self.known) {
            return Ok(known);
        }
        let _gate = write_lock(&self.write_gate);
        let path = self.path();
        for slot in self.slots() {
            self.flush_frame(&mut lock(&slot))?;
        }
        let summary = container::size_from_meta(&self.mount, &path)?;
        Ok(*lock(&self.known).get_or_insert(summary))
    }

    /// Whether a writer of this open file has written (or truncated).
    pub(crate) fn has_written(&self) -> bool {
        self.slots().iter().any(|slot| {
            let slot = lock(slot);
            slot.logs.is_some() || !slot.retired.is_empty()
        })
    }

    /// Drops the merged index so the next read merges again (and sees what
    /// other processes synced meanwhile); local writes are never lost by it.
    /// Installs an index built by a collective open, unless this process
    /// has writers of its own (their unsynced records are not in it): then
    /// the next read builds the index itself.
    pub(crate) fn seed_read_state(&self, loaded: LoadedIndex) {
        let _gate = write_lock(&self.write_gate);
        if !lock(&self.writers).is_empty() {
            *write_lock(&self.read_state) = None;
            return;
        }
        let state = read_state_from(&self.path(), loaded);
        let mut known = lock(&self.known);
        *known = Some(SizeSummary { eof: state.index.eof(), bytes: state.index.data_bytes(), last_stamp: 0 });
        drop(known);
        *write_lock(&self.read_state) = Some(state);
        self.prepared.store(true, Ordering::Release);
    }

    /// Close-to-open for a repeated open: drop the read state, unless a
    /// collective open built it for this very open (an MPI library opening
    /// the file right after the collective index exchange).
    pub(crate) fn reopened(&self) {
        if !self.prepared.swap(false, Ordering::AcqRel) {
            self.invalidate_read_state();
        }
    }

    pub(crate) fn invalidate_read_state(&self) {
        *write_lock(&self.read_state) = None;
    }

    /// The logs the view named are gone (the file was replaced by a rename
    /// and its logs deleted, where no handle kept them open): its bytes are
    /// no longer anywhere, and the file at the name now answers, whichever
    /// it is, rather than an error.
    fn reload_the_file_at_the_name(&self) {
        *lock(&self.loaded_from) = None;
        self.invalidate_read_state();
    }

    /// Makes the next read and size see what other processes published
    /// since (a lock was granted: what its holder before wrote must be
    /// seen). No I/O here; see [`revalidate`](Self::revalidate).
    pub(crate) fn refresh(&self) {
        self.stale.store(true, Ordering::Release);
    }

    /// After a [`refresh`](Self::refresh): forgets the merged index and the
    /// size this process knows if another writer's index log appeared,
    /// grew or went since they were loaded. Reloading them every time cost
    /// a process taking turns under a lock a whole index load per turn,
    /// growing with the file's history, although only its own writes
    /// (already applied here) had changed it. Local writes are never lost:
    /// both are rebuilt after flushing them.
    fn revalidate(&self) -> Result<()> {
        if !self.stale.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        // Another file at the name now (the one loaded was removed or
        // renamed away): what this process loaded stays its view.
        if read_lock(&self.read_state).is_some() && lock(&self.writers).is_empty() {
            match self.identity_at_name().and_then(|now| self.name_taken_by_another(now)) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(error) if error.kind() == ErrorKind::Stale => return Ok(()),
                Err(error) => {
                    self.stale.store(true, Ordering::Release);
                    return Err(error);
                }
            }
        }
        let (others, own) = match self.other_writers_logs() {
            Ok(found) => found,
            // Another process removed the file (unlinked it or renamed it
            // away): what this process loaded stays its view, as an open
            // file keeps its bytes on a local file system.
            Err(error) if error.kind() == ErrorKind::Stale && read_lock(&self.read_state).is_some() => {
                return Ok(());
            }
            Err(error) => {
                self.stale.store(true, Ordering::Release);
                return Err(error);
            }
        };
        let mut seen = lock(&self.others_seen);
        // A log this process started while the last check listed (another
        // thread's first write) may be among what it saw: not a change.
        let unchanged = seen
            .as_ref()
            .is_some_and(|seen| seen.iter().filter(|(id, _)| !own.contains(id)).eq(others.iter()));
        if !unchanged {
            // Taken before the reload, so what changes after it is caught
            // by the next check (at worst one reload too many).
            *seen = Some(others);
            drop(seen);
            let _gate = write_lock(&self.write_gate);
            self.prepared.store(false, Ordering::Release);
            *write_lock(&self.read_state) = None;
            *lock(&self.known) = None;
        }
        Ok(())
    }

    /// The index logs of writers other than this open file's own, with
    /// their lengths, in a stable order; and the own ones.
    fn other_writers_logs(&self) -> Result<(Vec<LogLength>, Vec<LogId>)> {
        let path = self.path();
        let mut own: Vec<LogId> = Vec::new();
        for slot in self.slots() {
            let slot = lock(&slot);
            own.extend(slot.logs.as_ref().map(|logs| logs.id));
            own.extend(slot.retired.iter().map(|retired| retired.log));
        }
        let mut others = Vec::new();
        for log in container::file_logs(&self.mount, &path)? {
            if !log.has_index || own.contains(&log.id) {
                continue;
            }
            let length = match self.mount.store(log.backend).metadata(&log.path(&path, LogKind::Index)) {
                Ok(metadata) => metadata.size,
                // Gone since the listing: changed.
                Err(error) if error.kind() == ErrorKind::NotFound => u64::MAX,
                Err(error) => return Err(error),
            };
            others.push((log.id, length));
        }
        others.sort_unstable();
        Ok((others, own))
    }

    /// Appends every writer's buffered records to its index log (no
    /// fsync), so other readers of the backend see them.
    pub(crate) fn flush_index(&self) -> Result<()> {
        let _gate = read_lock(&self.write_gate);
        for slot in self.slots() {
            self.flush_frame(&mut lock(&slot))?;
        }
        Ok(())
    }

    /// Finishes every writer: index flushed, size record published, open
    /// record removed. Returns the first error after trying them all.
    pub(crate) fn close(&self) -> Result<()> {
        let _gate = write_lock(&self.write_gate);
        // Where the records go: the container's path, or where another
        // process renamed it while this writer held it (its index log
        // says, on stores that can tell). Before, such a close failed with
        // ENOENT (a log renamed by `mv` or logrotate under its writer) and
        // left the open record for `plfs recover`.
        let mut path = self.path();
        let mut first_error = None;
        let slots: Vec<_> = lock(&self.writers).drain().map(|(_, slot)| slot).collect();
        let wrote = !slots.is_empty();
        for slot in slots {
            let mut slot = lock(&slot);
            if let Err(error) = self.flush_frame(&mut slot) {
                first_error.get_or_insert(error);
            }
            if let Some(error) = take_lost(&mut slot) {
                first_error.get_or_insert(error);
            }
            let mut finished = std::mem::take(&mut slot.retired);
            if let Some(mut logs) = slot.logs.take() {
                if let Some(moved) = moved_container(&path, logs.index.as_ref()) {
                    tracing::info!(
                        "/{path}: renamed to /{moved} by another process while open; closing there"
                    );
                    path = moved;
                }
                finished.push(logs.summary);
                if let Some((retention, frames)) = logs.retained.take() {
                    retention.closed(logs.id, frames);
                }
                // Data first: on stores that publish a log only when it is
                // sealed (S3 segments), an index record must never become
                // visible before the bytes it points at.
                let data = logs.data.close();
                let index = logs.index.close();
                for result in [data, index] {
                    if let Err(error) = result {
                        first_error.get_or_insert(error.context(format!("/{path}: closing logs")));
                    }
                }
            }
            for summary in finished {
                if let Err(error) = publish_size_record(&self.mount, &path, &summary) {
                    first_error.get_or_insert(error);
                }
            }
        }
        *write_lock(&self.read_state) = None;
        // A container this process created is readable by the time its
        // creator's close returns (see Store::create_new_deferred).
        if let Err(error) = self.mount.settle() {
            first_error.get_or_insert(error.context(format!("/{path}: creating the container")));
        }
        if wrote && first_error.is_none() {
            // A failure costs later stats speed, not answers: they list meta/.
            if let Err(error) = container::publish_closed_summary(&self.mount, &path) {
                tracing::debug!("/{path}: no closed summary: {error}");
            }
        }
        if wrote && first_error.is_none() && self.mount.tuning.flatten_on_close {
            self.flatten_if_last(&path);
        }
        first_error.map_or(Ok(()), Err)
    }

    /// The last writer to close (no open record left in `meta/`, wherever
    /// the writers ran) writes the global index. Every closer removes its
    /// open record before looking, so at least the last one sees none; two
    /// that both see none write the same index. A failure costs readers
    /// speed, not data, so it is reported and the close still succeeds.
    fn flatten_if_last(&self, path: &StorePath) {
        let result = container::read_meta(&self.mount, path).and_then(|meta| {
            if meta.open.is_empty() && !meta.damaged {
                load::flatten(&self.mount, path).map(|_| ())
            } else {
                Ok(())
            }
        });
        match result {
            Ok(()) => {}
            // A writer opened after the check: its close flattens.
            Err(error) if error.kind() == ErrorKind::InvalidInput => tracing::debug!("/{path}: {error}"),
            Err(error) => {
                tracing::warn!("/{path}: flatten on close failed (readers merge the index logs): {error}")
            }
        }
    }
}

/// The container's path now, when the index log (`<container>/hostdir.N/
/// index.<log>` on some backend) says it differs from `path`.
fn moved_container(path: &StorePath, index: &dyn AppendWriter) -> Option<StorePath> {
    let now = index.current_path()?;
    let hostdir = now.parent()?;
    let container = hostdir.parent()?;
    let is_hostdir = matches!(
        hostdir.file_name().map(layout::classify_container_entry),
        Some(layout::ContainerEntry::Hostdir(_))
    );
    (is_hostdir && container != *path).then_some(container)
}

/// Data logs an open for reading opens at once. A file with more (an N-1
/// checkpoint) is mostly read in parts, each reader touching a few logs:
/// opening all N would cost each of M readers N opens.
pub const PREPARED_DATA_LOGS_MAX: usize = 4;

/// Attempts at making a writer's shadow hostdir and its index log, when
/// unlinks of files at the name keep taking the hostdir away in between.
const SHADOW_ATTEMPTS_MAX: usize = 8;

/// Makes the writer's hostdir on a backend other than the file's canonical
/// one, with the shadow container above it, both protected as the file.
fn create_shadow(
    store: &dyn Store,
    paths: &ContainerPaths,
    hostdir: HostdirId,
    pieces: &Pieces,
) -> Result<()> {
    let capabilities = store.capabilities();
    if !capabilities.modes && !capabilities.owners {
        // Nothing to protect (S3): one call, as before.
        return store.create_dir_all(&paths.hostdir(hostdir));
    }
    match store.create_dir_protected(&paths.dir, &pieces.container) {
        Err(error) if error.kind() == ErrorKind::NotFound => {
            // The logical directory is missing on this backend (one added
            // since it was made).
            store.create_dir_all(&paths.dir.parent().unwrap_or_default())?;
            ignore_exists(store.create_dir_protected(&paths.dir, &pieces.container))?;
        }
        other => ignore_exists(other)?,
    }
    ignore_exists(store.create_dir_protected(&paths.hostdir(hostdir), &pieces.dir))
}

fn ignore_exists(result: Result<()>) -> Result<()> {
    match result {
        Err(error) if error.kind() == ErrorKind::AlreadyExists => Ok(()),
        other => other,
    }
}

/// Publishes a closed log's size record, then removes its open record, so
/// at every instant `meta/` describes the log one way or the other.
pub(crate) fn publish_size_record(mount: &MountState, path: &StorePath, summary: &SizeRecord) -> Result<()> {
    let (backend, paths) = container::canonical(mount, path);
    let store = mount.store(backend);
    let context = || format!("{}: {path}: meta record for log {}", store.url(), summary.log);
    let open = paths.meta(&layout::open_record_name(&summary.log))?;
    let size = paths.meta(&summary.name())?;
    // One rename turns the open record into the size record: meta/ names
    // the log exactly one way at every instant and after a crash at any
    // point, with no fsync between making one and removing the other (a
    // rename lost in a crash leaves the open record, and readers then read
    // the index log). The open record already has the file's protection.
    match store.rename(&open, &size) {
        Ok(()) => return Ok(()),
        // No open record (`plfs recover` publishing for a log whose record
        // it dropped): make the size record.
        Err(error) if error.kind() == ErrorKind::NotFound => {}
        Err(error) if error.kind() == ErrorKind::AlreadyExists => {
            return container::ignore_missing(store.remove_file(&open)).with_context(context);
        }
        Err(error) => return Err(error.context(context())),
    }
    // Owned like the file's other pieces (its owner may remove it in a
    // truncate); without a readable access file (a file unlinked while
    // open) the store's default will do for an empty file.
    let created = match protection::read_access(mount, path) {
        Ok(access) => store.create_new_protected(&size, &[], &Pieces::of(&access).file),
        Err(_) => store.create_new(&size, &[]),
    };
    match created {
        Ok(()) => {}
        Err(error) if error.kind() == ErrorKind::AlreadyExists => {}
        Err(error) => return Err(error.context(context())),
    }
    container::ignore_missing(store.remove_file(&open)).with_context(context)
}

/// Publishes a writer's persisted logs, the data log on a thread of its
/// own when both have work to do (HDFS closes), so their waits overlap.
fn publish_pair(logs: &mut WriterLogs, data_dirty: bool, index_dirty: bool) -> (Result<()>, Result<()>) {
    let (data, index) = (&mut logs.data, &mut logs.index);
    let data_dirty = data_dirty && data.publish_pending();
    let index_dirty = index_dirty && index.publish_pending();
    match (data_dirty, index_dirty) {
        (true, true) => std::thread::scope(|scope| {
            let data = scope.spawn(|| data.publish());
            let index = index.publish();
            (data.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)), index)
        }),
        (true, false) => (data.publish(), Ok(())),
        (false, true) => (Ok(()), index.publish()),
        (false, false) => (Ok(()), Ok(())),
    }
}

/// The loss a retired pair left for this writer's next sync or close to
/// report (once: a report is the writer's news, as with fsync).
fn take_lost(slot: &mut WriterSlot) -> Option<Error> {
    slot.lost.take().map(|(kind, message)| Error::new(kind, message))
}

/// Moves the writer's pending run, if any, into its frame. (Its entry in
/// the run tracker may linger; a stale entry can only cut a run early.)
fn end_run(logs: &mut WriterLogs) {
    if let Some(record) = logs.patterns.take() {
        logs.frame.push(&record);
    }
}

/// Loads the merged index and turns it into a read state.
/// Reads bytes of a data log and checks them against their records'
/// CRC32Cs, as `verify_reads` says (a long read in pieces, each checked
/// while its bytes are still in cache), read the way a request of
/// `request` bytes is.
fn read_checked(
    mount: &MountState,
    source: &DataLog,
    cached: &CachedLog,
    buf: &mut [u8],
    physical: u64,
    request: usize,
) -> Result<()> {
    let readahead = mount.log_cache.readahead_bytes();
    let mode = mount.tuning.verify_reads;
    if mode == VerifyReads::Off {
        return cached.read_piece(buf, physical, request, readahead);
    }
    let fill = |out: &mut [u8], at: u64| cached.read_piece(out, at, request, readahead);
    let read_at = |out: &mut [u8], at: u64| cached.read_exact(out, at, readahead);
    source.checksums(mount)?.read_checked(buf, physical, mode, cached.label(), &fill, &read_at)
}

fn load_read_state(mount: &MountState, path: &StorePath) -> Result<ReadState> {
    Ok(read_state_from(path, load::load_index(mount, path, load::Prefer::GlobalIndex)?))
}

fn read_state_from(path: &StorePath, loaded: LoadedIndex) -> ReadState {
    let mut state = ReadState { index: loaded.index, sources: Vec::new(), refs: HashMap::new() };
    let mut checksums = loaded.checksums.into_iter();
    for log in &loaded.logs {
        let paths = || (log.path(path, LogKind::Data), log.path(path, LogKind::Index));
        state.log_ref(log.id, log.backend, paths, checksums.next());
    }
    state
}
