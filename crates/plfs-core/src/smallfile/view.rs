//! A reader's view of one directory container: every writer session's name
//! and index log, loaded from every backend and replayed in stamp order into
//! a map of names to files.
//!
//! A file has an identity apart from its name, as an inode does: the create
//! record that made it. A session's create and open records bind its file
//! ids to the file the name denotes at that point of the replay, and its
//! index entries land in that file wherever renames have taken it since:
//! what a process writes after another process renamed the file it is
//! writing lands in the file under its new name (a logrotate), not in
//! nothing. A write to a file that is gone (removed, or replaced by a
//! rename) is an orphan, as a write through a descriptor of an unlinked
//! file is lost on a local file system.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use super::format::{
    DATA_LOG_MAGIC, DecodedLog, INDEX_LOG_MAGIC, IndexEntry, NAME_LOG_MAGIC, NameRecord, decode_log,
};
use crate::error::{Error, ErrorKind, Result, ResultExt};
use crate::format::data_log::LogHeader;
use crate::layout::LogId;
use crate::layout::smallfile::{SmallLogKind, container_dir, parse_small_log_name, small_log_path};
use crate::store::{ReadHandle, SharedStore, StoreExt, StorePath, read_exact_at};

/// What `stat` reports about one small file. Times are ns since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    pub size: u64,
    pub atime_ns: u64,
    pub mtime_ns: u64,
    pub ctime_ns: u64,
}

/// A torn tail found (and ignored) while loading a directory container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTailReport {
    pub backend: String,
    pub log: StorePath,
    pub offset: u64,
    pub length: u64,
}

#[derive(Debug, Clone, Copy)]
struct Extent {
    logical: u64,
    length: u64,
    session: u32,
    physical: u64,
}

/// Which file a name denotes: the stamp of the create record that made it
/// and the session that wrote that record ([`origin`]). Stable across loads,
/// so a writer can compare what it bound with a later view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId {
    stamp: u64,
    origin: u64,
}

impl FileId {
    /// The file a create record of stamp `stamp` in the session whose data
    /// log is `data` makes.
    pub fn created(stamp: u64, data: &StorePath) -> FileId {
        FileId { stamp, origin: origin(data) }
    }
}

/// A session's part of a [`FileId`]: a hash of its data log's path (stamps
/// are unique within a process, the path tells processes apart).
fn origin(data: &StorePath) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    data.as_str().hash(&mut hasher);
    hasher.finish()
}

#[derive(Debug, Clone)]
struct FileState {
    stat: FileStat,
    /// In stamp order: a later extent wins where extents overlap.
    extents: Vec<Extent>,
}

impl FileState {
    fn new(stamp: u64) -> FileState {
        FileState {
            stat: FileStat { size: 0, atime_ns: stamp, mtime_ns: stamp, ctime_ns: stamp },
            extents: Vec::new(),
        }
    }

    fn truncate(&mut self, size: u64, stamp: u64) {
        self.extents.retain_mut(|extent| {
            extent.length = extent.length.min(size.saturating_sub(extent.logical));
            extent.length > 0
        });
        self.stat.size = size;
        self.stat.mtime_ns = stamp;
        self.stat.ctime_ns = stamp;
    }
}

/// One writer session whose logs were found (or whose records this process
/// folded in after flushing them).
#[derive(Debug, Clone)]
struct Session {
    backend: usize,
    data: StorePath,
}

/// The merged state of a directory container as of its load, plus the
/// records this process flushed since (see [`DirView::fold_name`]).
///
/// Cloning is for copy-on-write: a reader may still hold the previous
/// version while the owner folds records into a copy.
#[derive(Debug, Clone)]
pub struct DirView {
    stores: Vec<SharedStore>,
    sessions: Vec<Session>,
    /// Position in `sessions` of each session's data log.
    session_of: HashMap<StorePath, u32>,
    /// Each name and the file it denotes.
    files: BTreeMap<String, FileId>,
    states: HashMap<FileId, FileState>,
    torn_tails: Vec<TornTailReport>,
    /// Index entries whose name did not exist at their stamp (written to a
    /// file deleted meanwhile by another process, or whose name record was
    /// lost in a torn tail): never visible.
    orphan_writes: u64,
    newest_stamp: u64,
    /// Data-log handles opened on first read; at most one per session.
    /// Shared by copies: sessions are only ever appended, so an index
    /// means the same data log in every copy.
    handles: Arc<Mutex<HashMap<u32, Box<dyn ReadHandle>>>>,
    /// The name and index logs this view reflects, with the length it read
    /// of each (`None` for a log it skipped: a session without a name log).
    /// A later listing that differs means other writers flushed since; see
    /// [`DirView::is_current`].
    log_lengths: HashMap<StorePath, (usize, Option<u64>)>,
    /// The file a writer made by a create record (as [`FileId::created`])
    /// that found its name taken, and the file it found: the writer's
    /// handles know the file by the first, every view by the second.
    aliases: HashMap<FileId, FileId>,
}

/// One record of the merge, ordered by `(stamp, session, log, position)`.
enum Event<'a> {
    Name(&'a NameRecord),
    Write(&'a IndexEntry),
}

impl DirView {
    /// Lists the container of `dir` on every backend and replays its logs.
    /// `hostname` is the reader's, to tell which writers may still run.
    pub fn load(stores: &[SharedStore], dir: &StorePath, hostname: &str) -> Result<DirView> {
        let mut found: BTreeMap<LogId, (usize, [bool; 3])> = BTreeMap::new();
        let container = container_dir(dir)?;
        for (backend, store) in stores.iter().enumerate() {
            let entries = match store.list(&container) {
                Ok(entries) => entries,
                Err(error) if error.kind() == ErrorKind::NotFound => continue,
                Err(error) => return Err(error),
            };
            for entry in entries {
                let Some((kind, id)) = parse_small_log_name(&entry.name) else {
                    tracing::warn!("{}: {container}: ignoring unknown entry {}", store.url(), entry.name);
                    continue;
                };
                let slot = found.entry(id).or_insert((backend, [false; 3]));
                if slot.0 != backend {
                    return Err(Error::corrupt(format!(
                        "{container}: logs of session {id} are on backends {} and {}",
                        stores[slot.0].url(),
                        store.url()
                    )));
                }
                slot.1[kind as usize] = true;
            }
        }
        let mut view = DirView {
            stores: stores.to_vec(),
            sessions: Vec::new(),
            session_of: HashMap::new(),
            files: BTreeMap::new(),
            states: HashMap::new(),
            torn_tails: Vec::new(),
            orphan_writes: 0,
            newest_stamp: 0,
            handles: Arc::new(Mutex::new(HashMap::new())),
            log_lengths: HashMap::new(),
            aliases: HashMap::new(),
        };
        // Every name log first, then every index log: a writer publishes
        // all its index entries before any of its names (see
        // `DirContainer::flush`), so a flush whose names this load sees has
        // all its writes seen too. A later flush's entries read without
        // their names stay orphans or, for files already named, show as if
        // that flush were half done; either is replaced at the next reload.
        let mut logs = Vec::new();
        let mut sessions = Vec::new();
        for (id, (backend, present)) in found {
            // A session without its name log cannot name anything: it died
            // while its logs were being created (or is being created now).
            if !present[SmallLogKind::Name as usize] {
                if present[SmallLogKind::Index as usize] {
                    view.log_lengths.insert(small_log_path(dir, SmallLogKind::Index, &id)?, (backend, None));
                }
                continue;
            }
            let names: DecodedLog<NameRecord> =
                view.load_log(backend, dir, SmallLogKind::Name, &id, NAME_LOG_MAGIC, hostname)?;
            view.add_session(backend, small_log_path(dir, SmallLogKind::Data, &id)?);
            logs.push((names.records, Vec::new()));
            sessions.push((id, backend, present[SmallLogKind::Index as usize]));
        }
        for ((id, backend, has_index), (_, entries)) in sessions.into_iter().zip(logs.iter_mut()) {
            if has_index {
                let index: DecodedLog<IndexEntry> =
                    view.load_log(backend, dir, SmallLogKind::Index, &id, INDEX_LOG_MAGIC, hostname)?;
                *entries = index.records;
            }
        }
        view.replay(&logs)?;
        Ok(view)
    }

    fn load_log<R: super::format::FramedRecord>(
        &mut self,
        backend: usize,
        dir: &StorePath,
        kind: SmallLogKind,
        id: &LogId,
        magic: &[u8; 8],
        hostname: &str,
    ) -> Result<DecodedLog<R>> {
        let store = &self.stores[backend];
        let path = small_log_path(dir, kind, id)?;
        let what = || format!("{}: {} {path}", store.url(), R::WHAT);
        let bytes = store.read_all(&path).with_context(what)?;
        self.log_lengths.insert(path.clone(), (backend, Some(bytes.len() as u64)));
        let decoded: DecodedLog<R> = decode_log(&bytes, magic).with_context(what)?;
        check_header(decoded.header.as_ref(), id).with_context(what)?;
        if let Some(torn) = decoded.torn_tail {
            // A session has no open or close record: while its process may
            // still run, a torn tail is most likely a frame it is appending
            // right now (a normal race with a live writer, not worth a
            // warning); once it is gone, the frame will never complete.
            if id.writer_may_be_alive(hostname) {
                tracing::debug!(
                    "{}: ignoring {} bytes at offset {}: its writer may be mid-append",
                    what(),
                    torn.length,
                    torn.offset
                );
            } else {
                tracing::warn!(
                    "{}: ignoring a torn tail of {} bytes at offset {} (its writer is gone)",
                    what(),
                    torn.length,
                    torn.offset
                );
            }
            self.torn_tails.push(TornTailReport {
                backend: store.url().to_owned(),
                log: path,
                offset: torn.offset,
                length: torn.length,
            });
        }
        Ok(decoded)
    }

    /// Applies every session's records in `(stamp, session, log, position)`
    /// order. Stamps are unique within a process; the rest only breaks ties
    /// between hosts, deterministically.
    fn replay(&mut self, logs: &[(Vec<NameRecord>, Vec<IndexEntry>)]) -> Result<()> {
        let mut events: Vec<((u64, usize, u8, usize), Event<'_>)> = Vec::new();
        for (session, (names, index)) in logs.iter().enumerate() {
            // A fid names one file in its session (checked here; replay
            // binds it as the records come).
            let mut table = HashMap::new();
            for (position, record) in names.iter().enumerate() {
                if let NameRecord::Create { fid, name, .. }
                | NameRecord::Open { fid, name, .. }
                | NameRecord::OpenOrCreate { fid, name, .. } = record
                    && table.insert(*fid, name.as_str()).is_some_and(|old| old != name)
                {
                    let log = &self.sessions[session].data;
                    return Err(Error::corrupt(format!("session of {log}: file id {fid} names two files")));
                }
                events.push(((record.stamp(), session, 0, position), Event::Name(record)));
            }
            for (position, entry) in index.iter().enumerate() {
                events.push(((entry.stamp, session, 1, position), Event::Write(entry)));
            }
        }
        events.sort_unstable_by_key(|(key, _)| *key);
        let origins: Vec<u64> = self.sessions.iter().map(|session| origin(&session.data)).collect();
        // What each session's file ids stand for at this point of the replay.
        let mut bound: HashMap<(usize, u64), FileId> = HashMap::new();
        for ((_, session, _, _), event) in events {
            match event {
                Event::Name(record) => {
                    let origin = origins[session];
                    match record {
                        NameRecord::Create { fid, .. } | NameRecord::OpenOrCreate { fid, .. } => {
                            bound.insert((session, *fid), self.apply_create(record, origin));
                        }
                        NameRecord::Open { fid, name, stamp } => {
                            self.newest_stamp = self.newest_stamp.max(*stamp);
                            match self.files.get(name) {
                                Some(&id) => bound.insert((session, *fid), id),
                                None => bound.remove(&(session, *fid)),
                            };
                        }
                        _ => self.apply_name(record, origin),
                    }
                }
                Event::Write(entry) => {
                    // Unbound (never named, or named after it) or a file
                    // gone since: an orphan.
                    let id = bound.get(&(session, entry.fid)).copied();
                    self.apply_write(session as u32, id, entry);
                }
            }
        }
        Ok(())
    }

    /// The position of a session's data log, added if the view lacks it.
    fn add_session(&mut self, backend: usize, data: StorePath) -> u32 {
        if let Some(&index) = self.session_of.get(&data) {
            return index;
        }
        let index = u32::try_from(self.sessions.len()).expect("fewer than 2^32 sessions in one directory");
        self.session_of.insert(data.clone(), index);
        self.sessions.push(Session { backend, data });
        index
    }

    /// Whether the store still holds exactly the name and index logs this
    /// view read, at the lengths it read: if so, no writer has flushed a
    /// record since and a reload would give the same view. Costs one
    /// listing per backend and one `metadata` per log, where a reload
    /// reads every log in full.
    pub fn is_current(&self, dir: &StorePath) -> Result<bool> {
        let container = container_dir(dir)?;
        let mut seen = 0;
        for (backend, store) in self.stores.iter().enumerate() {
            let entries = match store.list(&container) {
                Ok(entries) => entries,
                Err(error) if error.kind() == ErrorKind::NotFound => continue,
                Err(error) => return Err(error),
            };
            for entry in entries {
                match parse_small_log_name(&entry.name) {
                    Some((SmallLogKind::Name | SmallLogKind::Index, _)) => {}
                    _ => continue,
                }
                let path = container.join(&entry.name)?;
                let Some(&(known_backend, length)) = self.log_lengths.get(&path) else {
                    return Ok(false);
                };
                if known_backend != backend {
                    return Ok(false);
                }
                if let Some(length) = length
                    && store.metadata(&path)?.size != length
                {
                    return Ok(false);
                }
                seen += 1;
            }
        }
        Ok(seen == self.log_lengths.len())
    }

    /// Records that this process's own log at `path` now ends at `length`,
    /// after a flush whose records were folded into this view, so
    /// [`is_current`](Self::is_current) does not mistake them for another
    /// writer's.
    pub fn note_own_log(&mut self, backend: usize, path: &StorePath, length: u64) {
        self.log_lengths.insert(path.clone(), (backend, Some(length)));
    }

    /// Applies one of this process's own name records after its flush, as a
    /// reload would (the caller folds them in stamp order); `data` is the
    /// data log of the session that wrote it. Other processes' records
    /// flushed since the load stay invisible until the view is reloaded:
    /// this is what keeps an unlink O(1) instead of a reload of every name
    /// log.
    pub fn fold_name(&mut self, data: &StorePath, record: &NameRecord) {
        self.apply_name(record, origin(data));
    }

    /// Applies one of this process's own index entries after its flush.
    /// `data` is the session's data log on `backend`; `file` is the file
    /// the entry's fid is bound to.
    pub fn fold_write(&mut self, backend: usize, data: &StorePath, file: FileId, entry: &IndexEntry) {
        let session = self.add_session(backend, data.clone());
        // A handle opened before these bytes were appended may not see them
        // on every store (some snapshot the object's length at open).
        self.handles.lock().unwrap_or_else(PoisonError::into_inner).remove(&session);
        let file = self.aliases.get(&file).copied().unwrap_or(file);
        self.apply_write(session, Some(file), entry);
    }

    /// Adds a write to the file `id`; an orphan if it is gone (or the fid
    /// named nothing).
    fn apply_write(&mut self, session: u32, id: Option<FileId>, entry: &IndexEntry) {
        self.newest_stamp = self.newest_stamp.max(entry.stamp);
        let Some(file) = id.and_then(|id| self.states.get_mut(&id)) else {
            self.orphan_writes += 1;
            return;
        };
        let extent =
            Extent { logical: entry.logical, length: entry.length, session, physical: entry.physical };
        file.extents.push(extent);
        file.stat.size = file.stat.size.max(entry.logical + entry.length);
        file.stat.mtime_ns = entry.stamp;
        file.stat.ctime_ns = entry.stamp;
    }

    /// A create: a new empty file, or, over an existing name, that file
    /// emptied (O_CREAT | O_TRUNC keeps the inode, so its other writers
    /// keep writing to it). An open-or-create over an existing name leaves
    /// the file as it is. Returns the file.
    fn apply_create(&mut self, record: &NameRecord, origin: u64) -> FileId {
        let (NameRecord::Create { stamp, name, .. } | NameRecord::OpenOrCreate { stamp, name, .. }) = record
        else {
            unreachable!("a create or open-or-create record")
        };
        self.newest_stamp = self.newest_stamp.max(*stamp);
        let made = FileId { stamp: *stamp, origin };
        match self.files.get(name) {
            Some(&id) => {
                // The writer took `made` for its file: its writes, folded
                // in as `made`, go to the file it found.
                if id != made {
                    self.aliases.insert(made, id);
                }
                if matches!(record, NameRecord::Create { .. }) {
                    self.states.insert(id, FileState::new(*stamp));
                }
                id
            }
            None => {
                self.files.insert(name.clone(), made);
                self.states.insert(made, FileState::new(*stamp));
                made
            }
        }
    }

    fn apply_name(&mut self, record: &NameRecord, origin: u64) {
        self.newest_stamp = self.newest_stamp.max(record.stamp());
        match record {
            NameRecord::Create { .. } | NameRecord::OpenOrCreate { .. } => {
                self.apply_create(record, origin);
            }
            NameRecord::Open { .. } => {}
            NameRecord::Delete { name, .. } => {
                if let Some(id) = self.files.remove(name) {
                    self.states.remove(&id);
                }
            }
            NameRecord::Rename { stamp, from, to } => {
                if let Some(id) = self.files.remove(from) {
                    if let Some(replaced) = self.files.insert(to.clone(), id)
                        && replaced != id
                    {
                        self.states.remove(&replaced);
                    }
                    if let Some(file) = self.states.get_mut(&id) {
                        file.stat.ctime_ns = *stamp;
                    }
                }
            }
            NameRecord::Utime { stamp, atime_ns, mtime_ns, name } => {
                if let Some(file) = self.state_mut(name) {
                    file.stat.atime_ns = *atime_ns;
                    file.stat.mtime_ns = *mtime_ns;
                    file.stat.ctime_ns = *stamp;
                }
            }
            NameRecord::Truncate { stamp, size, name } => {
                if let Some(file) = self.state_mut(name) {
                    file.truncate(*size, *stamp);
                }
            }
        }
    }

    fn state_mut(&mut self, name: &str) -> Option<&mut FileState> {
        let id = self.files.get(name)?;
        self.states.get_mut(id)
    }

    fn state(&self, name: &str) -> Option<&FileState> {
        self.states.get(self.files.get(name)?)
    }

    /// The file a handle opened as `file` (when it knows it), wherever it
    /// is now, else the file `name` denotes.
    fn state_as(&self, name: &str, file: Option<FileId>) -> Option<&FileState> {
        match file {
            Some(id) => self.states.get(self.aliases.get(&id).unwrap_or(&id)),
            None => self.state(name),
        }
    }

    /// Whether this view holds the file `file` (under any name).
    pub fn holds(&self, file: FileId) -> bool {
        self.state_as("", Some(file)).is_some()
    }

    /// The file `name` denotes in this view.
    pub fn identity(&self, name: &str) -> Option<FileId> {
        self.files.get(name).copied()
    }

    /// Names in byte order.
    pub fn names(&self) -> Vec<String> {
        self.files.keys().cloned().collect()
    }

    pub fn stat(&self, name: &str) -> Option<FileStat> {
        self.state(name).map(|file| file.stat)
    }

    /// As [`stat`](Self::stat), of `file` when given ([`Self::read_as`]).
    pub fn stat_as(&self, name: &str, file: Option<FileId>) -> Option<FileStat> {
        self.state_as(name, file).map(|file| file.stat)
    }

    #[cfg(test)]
    pub fn torn_tails(&self) -> &[TornTailReport] {
        &self.torn_tails
    }

    #[cfg(test)]
    pub fn orphan_writes(&self) -> u64 {
        self.orphan_writes
    }

    pub fn newest_stamp(&self) -> u64 {
        self.newest_stamp
    }

    /// Reads up to `buf.len()` bytes at `offset`; short only at end of file.
    /// Bytes no write covers read as zeros.
    /// Reads `file` when given (a handle's file, under whatever name
    /// renames gave it), else the file `name` denotes; None if there is
    /// none.
    pub fn read(
        &self,
        name: &str,
        file: Option<FileId>,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<Option<usize>> {
        let Some(file) = self.state_as(name, file) else { return Ok(None) };
        if offset >= file.stat.size {
            return Ok(Some(0));
        }
        let count = (file.stat.size - offset).min(buf.len() as u64) as usize;
        let buf = &mut buf[..count];
        buf.fill(0);
        let end = offset + count as u64;
        for extent in &file.extents {
            let start = extent.logical.max(offset);
            let stop = (extent.logical + extent.length).min(end);
            if start >= stop {
                continue;
            }
            let target = &mut buf[(start - offset) as usize..(stop - offset) as usize];
            self.read_data(extent.session, target, extent.physical + (start - extent.logical))?;
        }
        Ok(Some(count))
    }

    fn read_data(&self, session: u32, buf: &mut [u8], physical: u64) -> Result<()> {
        let mut handles = self.handles.lock().unwrap_or_else(PoisonError::into_inner);
        let record = &self.sessions[session as usize];
        let store = &self.stores[record.backend];
        let what = || format!("{}: data log {}", store.url(), record.data);
        let handle = match handles.entry(session) {
            std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::hash_map::Entry::Vacant(entry) => {
                let handle = store.open_read(&record.data).with_context(what)?;
                check_data_header(handle.as_ref()).with_context(what)?;
                entry.insert(handle)
            }
        };
        read_exact_at(handle.as_ref(), buf, physical).with_context(what)
    }
}

fn check_header(header: Option<&LogHeader>, id: &LogId) -> Result<()> {
    match header {
        Some(header) if header.writer != id.writer || header.created_stamp != id.stamp => {
            Err(Error::corrupt(format!(
                "header names writer {} stamp {} but the log is {id}",
                header.writer, header.created_stamp
            )))
        }
        _ => Ok(()),
    }
}

/// Checks the data log's magic before trusting offsets into it.
fn check_data_header(handle: &dyn ReadHandle) -> Result<()> {
    let mut magic = [0u8; 8];
    read_exact_at(handle, &mut magic, 0)?;
    if &magic != DATA_LOG_MAGIC {
        return Err(Error::corrupt(format!("bad magic {magic:02x?}")));
    }
    Ok(())
}
