//! The 1-N (small file) engine: many small files of one logical directory
//! packed into a few logs per writer.
//!
//! Each logical directory has a *directory container*,
//! `<dir>/.plfs-smallfile/`, on every backend that holds one of its writers.
//! A writer session appends the bytes of every file it writes to its own
//! data log, an index entry per write to its index log, and every namespace
//! change (create, delete, rename, utime, truncate) to its name log. Nothing
//! is ever rewritten: an unlink or a rename is a record. Creating a file
//! creates no backend file, so N writers making F files each cost 3N backend
//! files per directory, not F.
//!
//! Readers list the container on every backend and replay all sessions'
//! records in stamp order (docs/FORMAT.md §11, docs/ARCHITECTURE.md
//! "Small files (1-N)").
//!
//! **Visibility is deliberately not POSIX**, as in PLFS:
//! - records reach the store only at [`SmallFileStore::flush_writes`] (or
//!   earlier, when a writer's buffers reach their bound), so other processes
//!   see nothing before it;
//! - [`SmallFileStore::read`], [`stat`](SmallFileStore::stat) and
//!   [`list`](SmallFileStore::list) answer from a view of the store loaded by
//!   the first call that needs it and kept until
//!   [`SmallFileStore::invalidate_read_cache`]. A flush folds the process's
//!   own flushed records into that view (as a reload would apply them), so
//!   a process sees its own changes after its flush without reloading every
//!   name log of the directory, and other processes' flushed changes after
//!   an invalidate.
//! - `write`, `unlink`, `rename`, `utime` and `truncate` need the name to
//!   exist in this process's knowledge: the view plus its own unflushed
//!   changes. A name another process removed meanwhile makes the record an
//!   orphan that readers ignore.
//! - A write lands in the file its name denoted when the writer's session
//!   bound it (see `view`): a file another process renames while this one
//!   writes it keeps the writes under its new name. A session binds a name
//!   again, with a new open record, when this process's knowledge says the
//!   name now denotes another file.

pub(crate) mod format;
pub(crate) mod mount;
mod view;

#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::num::NonZeroUsize;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use lru::LruCache;

use crate::clock::{LookAgain, PUBLISH_AFTER, Stamper, saturating_ns};
use crate::error::{Error, ErrorKind, Result, ResultExt};
use crate::format::data_log::LogHeader;
use crate::layout::LogId;
use crate::layout::smallfile::{SmallLogKind, container_dir, small_log_path};
use crate::placement::name_hash;
use crate::store::path::validate_component;
use crate::store::{AppendWriter, SharedStore, StorePath};

use format::{DATA_LOG_MAGIC, FrameBuilder, INDEX_LOG_MAGIC, IndexEntry, NAME_LOG_MAGIC, NameRecord};
pub use view::FileStat;
use view::{DirView, FileId};

/// Directory containers kept open by default (PLFS `max_smallfile_containers`).
pub const DEFAULT_MAX_CONTAINERS: usize = 64;
/// Data a writer buffers before appending it (still invisible until flushed).
pub const DEFAULT_DATA_BUFFER_BYTES: usize = 1 << 20;
/// Name and index bytes a writer buffers before it flushes on its own.
pub const DEFAULT_RECORD_BUFFER_BYTES: usize = 1 << 20;

#[derive(Debug, Clone)]
pub struct SmallFileOptions {
    /// Open directory containers (each holds its writers' logs and a view);
    /// the least recently used is flushed and closed beyond this.
    pub max_containers: NonZeroUsize,
    pub data_buffer_bytes: usize,
    /// A writer whose pending name and index frames exceed this flushes
    /// them, so memory stays bounded; visibility is then earlier than the
    /// caller's `flush_writes`.
    pub record_buffer_bytes: usize,
    pub stamper: Stamper,
    pub pid: u32,
    pub hostname: String,
}

impl SmallFileOptions {
    /// Defaults with an injected stamper, pid and hostname (for tests and
    /// simulations).
    pub fn new(stamper: Stamper, pid: u32, hostname: impl Into<String>) -> SmallFileOptions {
        SmallFileOptions {
            max_containers: NonZeroUsize::new(DEFAULT_MAX_CONTAINERS).expect("nonzero"),
            data_buffer_bytes: DEFAULT_DATA_BUFFER_BYTES,
            record_buffer_bytes: DEFAULT_RECORD_BUFFER_BYTES,
            stamper,
            pid,
            hostname: hostname.into(),
        }
    }
}

/// The small-file engine over a set of backends. One instance stands for one
/// process: its writers share its namespace knowledge and its views.
#[derive(Debug)]
pub struct SmallFileStore {
    stores: Vec<SharedStore>,
    options: SmallFileOptions,
    /// Open directory containers. This lock is held only to find, insert
    /// or evict one: each container has its own lock, and a flush releases
    /// even that one while it appends and syncs (see
    /// [`SmallFileStore::flush_slot`]), so the writers of one engine (the
    /// processes behind one FUSE daemon) overlap their disk waits.
    containers: Mutex<LruCache<StorePath, Arc<ContainerSlot>>>,
}

/// One open directory container and the condition its flushers wait on.
#[derive(Debug)]
struct ContainerSlot {
    state: Mutex<DirContainer>,
    /// Signalled whenever a flush of this container ends.
    flushed: Condvar,
}

impl ContainerSlot {
    fn lock(&self) -> MutexGuard<'_, DirContainer> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The engine of one small-file mount. Dropping it publishes what is
/// still pending (the engine loses unflushed records at drop otherwise).
#[derive(Debug)]
pub(crate) struct SmallMount {
    pub(crate) engine: SmallFileStore,
}

impl Drop for SmallMount {
    fn drop(&mut self) {
        if let Err(error) = self.engine.close() {
            tracing::warn!("closing the small-file store of a mount failed: {error}");
        }
    }
}

impl SmallFileStore {
    pub fn new(stores: Vec<SharedStore>, options: SmallFileOptions) -> Result<SmallFileStore> {
        if stores.is_empty() {
            return Err(Error::invalid("a small-file store needs at least one backend"));
        }
        let containers = Mutex::new(LruCache::new(options.max_containers));
        Ok(SmallFileStore { stores, options, containers })
    }

    /// Creates an empty file `name` in `dir`, replacing any file of that
    /// name (O_CREAT | O_TRUNC). Writes one name record; no backend file.
    pub fn create(&self, dir: &StorePath, name: &str, writer: u64) -> Result<FileId> {
        self.make(dir, name, writer, true)
    }

    /// Opens the file `name` as another process may have made it since this
    /// process last looked, or else creates it empty (O_CREAT without
    /// O_TRUNC of a name this process does not know). Writes one name
    /// record, whose replay keeps the bytes of a file someone else made at
    /// the name first: a create record would empty it. Before, two
    /// processes opening a new log with O_CREAT | O_APPEND at once lost
    /// what the first wrote before the second's open was published.
    pub fn open_or_create(&self, dir: &StorePath, name: &str, writer: u64) -> Result<FileId> {
        self.make(dir, name, writer, false)
    }

    /// A create record (`truncating`) or an open-or-create one.
    fn make(&self, dir: &StorePath, name: &str, writer: u64, truncating: bool) -> Result<FileId> {
        validate_component(name)?;
        self.with_container(dir, |this, container| {
            // Over a name it knows, the same file emptied (O_TRUNC keeps the
            // inode); the view is not loaded for this, so a create costs no
            // read. A guess that turns out wrong costs an open record later.
            let existing = container.known_identity(name);
            let stamp = this.stamper().next();
            let session = container.session(this, writer)?;
            let id = existing.unwrap_or_else(|| FileId::created(stamp, &session.data_path));
            let fid = session.bind_created(name, id);
            let owned = name.to_owned();
            let record = if truncating {
                NameRecord::Create { stamp, fid, name: owned }
            } else {
                NameRecord::OpenOrCreate { stamp, fid, name: owned }
            };
            container.push_name(writer, record);
            container.know(name, Some(id));
            // A read or stat of it publishes it first: until then the view
            // lacks the record, and over a file another process made
            // meanwhile, the alias that leads `id` to that file.
            container.note_changed(name);
            Ok((container.after_record(this, writer), id))
        })
        .and_then(|(full, id)| self.flush_if(full, dir).map(|()| id))
        .with_context(|| logical(dir, name))
    }

    /// The file `name` denotes in this process's knowledge (the cached view
    /// and its own unflushed changes), for a handle to write to whatever
    /// renames happen to it later; None if there is none.
    pub fn identity(&self, dir: &StorePath, name: &str) -> Result<Option<FileId>> {
        validate_component(name)?;
        self.with_container(dir, |this, container| container.identity(this, name))
            .with_context(|| logical(dir, name))
    }

    /// Writes `bytes` at `offset` of the existing file `name`.
    pub fn write(&self, dir: &StorePath, name: &str, writer: u64, offset: u64, bytes: &[u8]) -> Result<()> {
        self.write_to(dir, name, None, writer, offset, bytes)
    }

    /// Writes `bytes` at `offset` of `file` when given (a handle's file,
    /// which `name` denoted when the handle was opened: it may have been
    /// renamed or removed since, and the bytes go where it is, or nowhere
    /// as to an unlinked file), else of the file `name` denotes now.
    pub fn write_to(
        &self,
        dir: &StorePath,
        name: &str,
        file: Option<FileId>,
        writer: u64,
        offset: u64,
        bytes: &[u8],
    ) -> Result<()> {
        validate_component(name)?;
        if offset.checked_add(bytes.len() as u64).is_none_or(|end| end > i64::MAX as u64) {
            return Err(Error::invalid(format!("write of {} bytes at {offset} is too large", bytes.len())))
                .with_context(|| logical(dir, name));
        }
        self.with_container(dir, |this, container| {
            let id = match file {
                Some(id) => id,
                None => container.identity(this, name)?.ok_or_else(not_found)?,
            };
            if bytes.is_empty() {
                return Ok(false);
            }
            let stamper = this.stamper();
            let session = container.session(this, writer)?;
            let fid = session.bind(name, id, stamper);
            let physical = session.append_data(bytes, this.options.data_buffer_bytes)?;
            let entry = IndexEntry {
                fid,
                logical: offset,
                length: bytes.len() as u64,
                physical,
                stamp: stamper.next(),
                data_crc: crc32c::crc32c(bytes),
            };
            session.index_frame.push(&entry);
            container.push_pending(Pending::Write { writer, file: id, entry });
            container.note_changed(name);
            Ok(container.after_record(this, writer))
        })
        .and_then(|full| self.flush_if(full, dir))
        .with_context(|| logical(dir, name))
    }

    /// Cuts or extends the file to `size`.
    pub fn truncate(&self, dir: &StorePath, name: &str, writer: u64, size: u64) -> Result<()> {
        validate_component(name)?;
        let record = |stamp| NameRecord::Truncate { stamp, size, name: name.to_owned() };
        self.name_op(dir, name, writer, record, Effect::None)
    }

    /// Sets access and modification times (ns since the epoch).
    pub fn utime(
        &self,
        dir: &StorePath,
        name: &str,
        writer: u64,
        atime_ns: u64,
        mtime_ns: u64,
    ) -> Result<()> {
        validate_component(name)?;
        let record = |stamp| NameRecord::Utime { stamp, atime_ns, mtime_ns, name: name.to_owned() };
        self.name_op(dir, name, writer, record, Effect::None)
    }

    pub fn unlink(&self, dir: &StorePath, name: &str, writer: u64) -> Result<()> {
        validate_component(name)?;
        let record = |stamp| NameRecord::Delete { stamp, name: name.to_owned() };
        self.name_op(dir, name, writer, record, Effect::Removes)
    }

    /// Moves `from` to `to`, replacing any file named `to`.
    pub fn rename(&self, dir: &StorePath, from: &str, to: &str, writer: u64) -> Result<()> {
        validate_component(from)?;
        validate_component(to)?;
        let record = |stamp| NameRecord::Rename { stamp, from: from.to_owned(), to: to.to_owned() };
        self.name_op(dir, from, writer, record, Effect::MovesTo(to))
    }

    /// Moves `from` to `to` as [`rename`](Self::rename) does, after moving
    /// the file at `to`, if any, to `keep`: both records go into one name
    /// frame, which readers find whole or not at all, so `to` is never
    /// missing for them while its old file lives on at `keep` (a file
    /// open in this process, whose handles read it by identity).
    pub fn rename_keeping(
        &self,
        dir: &StorePath,
        from: &str,
        to: &str,
        keep: &str,
        writer: u64,
    ) -> Result<()> {
        validate_component(from)?;
        validate_component(to)?;
        validate_component(keep)?;
        self.with_container(dir, |this, container| {
            let id = container.identity(this, from)?.ok_or_else(not_found)?;
            let kept = container.identity(this, to)?;
            container.session(this, writer)?;
            // Both under this lock: no flush can take one without the other.
            if let Some(kept) = kept {
                let stamp = this.stamper().next();
                container.push_name(
                    writer,
                    NameRecord::Rename { stamp, from: to.to_owned(), to: keep.to_owned() },
                );
                container.note_changed(to);
                container.know(to, None);
                container.know(keep, Some(kept));
            }
            let stamp = this.stamper().next();
            container
                .push_name(writer, NameRecord::Rename { stamp, from: from.to_owned(), to: to.to_owned() });
            container.note_changed(from);
            container.know(from, None);
            container.know(to, Some(id));
            Ok(container.after_record(this, writer))
        })
        .and_then(|full| self.flush_if(full, dir))
        .with_context(|| logical(dir, from))
    }

    /// Reads `file` (else the file `name` denotes) from the cached view;
    /// `NotFound` if the view has no such file (see
    /// [`read_fresh`](Self::read_fresh) for what handles read).
    pub fn read(
        &self,
        dir: &StorePath,
        name: &str,
        file: Option<FileId>,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<usize> {
        let view = self.view(dir)?;
        read_in(&view, dir, name, file, offset, buf)
    }

    /// Reads as a handle does: a file this process changed since its last
    /// flush (through any of its handles: writes, truncates) is published
    /// first, so every handle here reads what was written here, as on a
    /// local file system. Before, a handle read the bytes from before
    /// another handle's write, and so did every later open.
    ///
    /// Reads `file` when given: the file a handle opened, wherever renames
    /// took it. A handle read by name, so after its view was loaded again
    /// (a lock, a look at the end) it read whatever file another process
    /// had put at the name since, silently. A file another process removed
    /// is `Stale` once the view no longer holds it.
    pub fn read_fresh(
        &self,
        dir: &StorePath,
        name: &str,
        file: Option<FileId>,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<usize> {
        // One lock for the common case (nothing of this file unflushed).
        let cached = self
            .with_container(dir, |this, container| {
                if container.changed.contains_key(name) { Ok(None) } else { container.view(this).map(Some) }
            })
            .context(dir.to_string())?;
        let view = match cached {
            Some(view) => view,
            None => {
                self.flush_writes(dir)?;
                self.view(dir)?
            }
        };
        read_in(&view, dir, name, file, offset, buf)
    }

    /// Reads `file` as it was when another process removed or replaced
    /// it, in the last view that held it, if a handle holds it ([`hold`]);
    /// None if none is kept.
    ///
    /// [`hold`]: Self::hold
    pub(crate) fn read_retained(
        &self,
        dir: &StorePath,
        name: &str,
        file: FileId,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<Option<usize>> {
        match self.retained(dir, file) {
            Some(kept) => read_in(&kept, dir, name, Some(file), offset, buf).map(Some),
            None => Ok(None),
        }
    }

    /// The size and times of `file` as [`read_retained`](Self::read_retained) reads it.
    pub(crate) fn stat_retained(&self, dir: &StorePath, name: &str, file: FileId) -> Option<FileStat> {
        self.retained(dir, file)?.stat_as(name, Some(file))
    }

    /// A handle of this process that only reads has `file` open in `dir`:
    /// if another process removes or replaces it, the handle can still
    /// read it as it was last seen ([`read_retained`](Self::read_retained)),
    /// until it lets go ([`release`](Self::release)). Before, such a handle
    /// read ESTALE once its process loaded the directory again, even
    /// mid-file (a reader of a file published by rename).
    pub(crate) fn hold(&self, dir: &StorePath, file: FileId) -> Result<()> {
        self.with_container(dir, |_, container| {
            *container.open_files.entry(file).or_insert(0) += 1;
            Ok(())
        })
        .context(dir.to_string())
    }

    /// One handle of `file` in `dir` lets go of it (see [`hold`](Self::hold)).
    /// A container closed since holds nothing any more: none is opened
    /// (and another evicted) just to forget it.
    pub(crate) fn release(&self, dir: &StorePath, file: FileId) {
        let Some(slot) = self.lock().peek(dir).cloned() else { return };
        let mut container = slot.lock();
        if let Some(count) = container.open_files.get_mut(&file) {
            *count -= 1;
            if *count == 0 {
                container.open_files.remove(&file);
                container.retained.remove(&file);
            }
        }
        if container.open_files.is_empty() {
            container.dropped = None;
        }
    }

    /// The view a held file another process removed lives on in.
    fn retained(&self, dir: &StorePath, file: FileId) -> Option<Arc<DirView>> {
        self.with_container(dir, |_, container| Ok(container.retained.get(&file).cloned())).ok().flatten()
    }

    /// Stat from the cached view alone (see [`stat_fresh`](Self::stat_fresh)
    /// for the close-to-open one).
    pub fn stat(&self, dir: &StorePath, name: &str) -> Result<FileStat> {
        self.view(dir)?.stat(name).ok_or_else(not_found).with_context(|| logical(dir, name))
    }

    /// As [`stat`](Self::stat), of `file` when given (`Stale` when the view
    /// no longer holds it; see [`read_fresh`](Self::read_fresh)).
    pub fn stat_as(&self, dir: &StorePath, name: &str, file: Option<FileId>) -> Result<FileStat> {
        let view = self.view(dir)?;
        view.stat_as(name, file).ok_or_else(|| gone(file)).with_context(|| logical(dir, name))
    }

    /// Stat under close-to-open: a name the cached view lacks is looked
    /// for once more, among this process's unflushed files (published
    /// first) or, if another writer flushed since the view was cached, in
    /// a fresh view. A name this process changed since its last flush
    /// (written, truncated, its times set) is published first too: the
    /// cached view still shows it as before, and a stat after a write must
    /// see it (before, a stat, a write and a stat gave the first size).
    /// A hit costs nothing more than [`stat`](Self::stat).
    pub fn stat_fresh(&self, dir: &StorePath, name: &str) -> Result<FileStat> {
        let found = self.with_container(dir, |this, container| {
            let cached = container.view.is_some();
            if container.changed.contains_key(name) {
                return Ok(None);
            }
            if let Some(stat) = container.view(this)?.stat(name) {
                return Ok(Some(stat));
            }
            match container.known.get(name) {
                // Only this process's unflushed records know it yet: they
                // are published below, outside this container's lock.
                Some(&(Some(_), _)) => return Ok(None),
                // This process removed it: its own record is the newest word.
                Some(&(None, _)) => return Err(not_found()),
                // A view loaded by this very call is as fresh as it gets.
                None if !cached => return Err(not_found()),
                None => container.refresh()?,
            }
            container.view(this)?.stat(name).map(Some).ok_or_else(not_found)
        });
        match found {
            Ok(Some(stat)) => Ok(stat),
            Ok(None) => self.flush_writes(dir).and_then(|()| self.stat(dir, name)),
            Err(error) => Err(error),
        }
        .with_context(|| logical(dir, name))
    }

    /// Brings the cached view of `dir` up to date with what every writer
    /// has flushed (close-to-open), reloading it only if a log changed
    /// since it was loaded. Without a cached view, nothing to do: the next
    /// read loads one.
    pub fn refresh(&self, dir: &StorePath) -> Result<()> {
        self.with_container(dir, |_, container| container.refresh()).context(dir.to_string())
    }

    /// Names of the files in the cached view, in byte order (call
    /// [`refresh`](Self::refresh) first for a close-to-open listing).
    pub fn list(&self, dir: &StorePath) -> Result<Vec<String>> {
        Ok(self.view(dir)?.names())
    }

    /// Torn tails the cached view ignored while loading.
    #[cfg(test)]
    pub fn torn_tails(&self, dir: &StorePath) -> Result<Vec<view::TornTailReport>> {
        Ok(self.view(dir)?.torn_tails().to_vec())
    }

    /// Writes the cached view ignored because their name did not exist at
    /// their stamp (see the module notes on visibility).
    #[cfg(test)]
    pub fn orphan_writes(&self, dir: &StorePath) -> Result<u64> {
        Ok(self.view(dir)?.orphan_writes())
    }

    /// Publishes (appends and syncs) every pending record of this process's
    /// writers in `dir`, and folds them into the cached view so the next
    /// read sees them (other processes' records still wait for
    /// [`invalidate_read_cache`](Self::invalidate_read_cache)).
    pub fn flush_writes(&self, dir: &StorePath) -> Result<()> {
        let slot = self.slot(dir).context(dir.to_string())?;
        let container = slot.lock();
        // Everything pushed so far, whichever thread pushed it, is what a
        // caller may rely on once this returns.
        let ticket = container.pushed_seq;
        let (_container, result) = self.flush_slot(&slot, container, ticket);
        result.context(dir.to_string())
    }

    /// The number of the last record pushed into `dir`'s container: a
    /// handle about to push its first record since its last sync keeps
    /// this, so its sync can tell whether a failure lost any of its own
    /// ([`flush_writes_since`](Self::flush_writes_since)).
    pub(crate) fn pushed(&self, dir: &StorePath) -> Result<u64> {
        let slot = self.slot(dir).context(dir.to_string())?;
        Ok(slot.lock().pushed_seq)
    }

    /// [`flush_writes`](Self::flush_writes) for a handle whose records
    /// since its last sync were pushed from record `since` on (0: it
    /// pushed none): fails if a failed flush lost any of them, now or
    /// earlier, though an earlier failure was reported to another call (a
    /// read, a stat, another handle's sync), as fsync(2) reports a
    /// write-back error to each descriptor. Before, such a sync succeeded
    /// and the writer never learned its bytes were gone; and a handle
    /// with no records of its own was told of others' failures at every
    /// sync, forever after one.
    pub fn flush_writes_since(&self, dir: &StorePath, since: u64) -> Result<()> {
        let slot = self.slot(dir).context(dir.to_string())?;
        let container = slot.lock();
        let ticket = container.pushed_seq;
        let (container, result) = self.flush_slot(&slot, container, ticket);
        if since == 0 {
            // The records it published were others': theirs to report.
            return Ok(());
        }
        result
            .and_then(|()| container.failure_within(since, ticket).map_or(Ok(()), Err))
            .context(dir.to_string())
    }

    /// The failure that lost (or may have lost) a record pushed into
    /// `dir`'s container after record `since`, if one did.
    pub(crate) fn lost_since(&self, dir: &StorePath, since: u64) -> Option<Error> {
        let slot = self.slot(dir).ok()?;
        let container = slot.lock();
        container.failure_within(since, container.pushed_seq)
    }

    fn flush_if(&self, full: bool, dir: &StorePath) -> Result<()> {
        if full { self.flush_writes(dir) } else { Ok(()) }
    }

    /// Drops the cached view of `dir`: the next read loads what writers have
    /// flushed since. Unflushed changes of this process are kept.
    pub fn invalidate_read_cache(&self, dir: &StorePath) {
        let slot = self.lock().peek(dir).cloned();
        if let Some(slot) = slot {
            slot.lock().drop_view();
        }
    }

    /// Marks the cached view of `dir` for a check against the store before
    /// its next use, which drops it if another process published since (as
    /// [`refresh`](Self::refresh), but no I/O now): a lock was granted, and
    /// whatever its holder before published must be seen. Unflushed changes
    /// of this process are kept.
    pub fn revalidate(&self, dir: &StorePath) {
        let slot = self.lock().peek(dir).cloned();
        if let Some(slot) = slot {
            slot.lock().stale = true;
        }
    }

    /// Whether `name` exists in this process's knowledge of `dir`: the
    /// cached view plus this process's unflushed changes (what `write`,
    /// `unlink` and friends require).
    pub fn exists(&self, dir: &StorePath, name: &str) -> Result<bool> {
        validate_component(name)?;
        self.with_container(dir, |this, container| Ok(container.identity(this, name)?.is_some()))
            .with_context(|| logical(dir, name))
    }

    /// Flushes and closes the containers of `dir` and of every directory
    /// below it (before the directory is removed or renamed on the
    /// backends, so no cached log handle or view outlives it).
    pub fn close_under(&self, dir: &StorePath) -> Result<()> {
        let doomed: Vec<(StorePath, Arc<ContainerSlot>)> = {
            let mut containers = self.lock();
            let paths: Vec<StorePath> = containers
                .iter()
                .map(|(path, _)| path.clone())
                .filter(|path| path.starts_with(dir))
                .collect();
            paths.into_iter().filter_map(|path| containers.pop(&path).map(|slot| (path, slot))).collect()
        };
        let mut first_error = None;
        for (path, slot) in doomed {
            if let Err(error) = self.close_slot(&slot) {
                first_error.get_or_insert(error.context(path.to_string()));
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Directory containers currently open (at most `max_containers`).
    #[cfg(test)]
    pub fn open_containers(&self) -> usize {
        self.lock().len()
    }

    /// Flushes and closes every container. Call before dropping the store:
    /// records still pending at drop are lost (and a warning is logged).
    pub fn close(&self) -> Result<()> {
        let mut first_error = None;
        loop {
            let Some((dir, slot)) = self.lock().pop_lru() else { break };
            if let Err(error) = self.close_slot(&slot) {
                first_error.get_or_insert(error.context(dir.to_string()));
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Publishes what a container (already out of the map) holds and closes
    /// its logs. A thread that still holds the slot finds it closed and
    /// opens the container afresh.
    fn close_slot(&self, slot: &ContainerSlot) -> Result<()> {
        let container = slot.lock();
        let ticket = container.pushed_seq;
        let (mut container, result) = self.flush_slot(slot, container, ticket);
        container.closed = true;
        let mut first_error = result.err();
        for (_, session) in container.sessions.drain() {
            if let Err(error) = session.close() {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Makes every record up to `ticket` durable (or reports that it could
    /// not be), by group commit: one thread at a time leads a flush of all
    /// the container's pending records, and does its appends and syncs
    /// without the container's lock, so other threads keep adding records
    /// meanwhile. A thread whose records a running flush already carries
    /// waits for it instead of syncing again; one whose records came later
    /// waits for it to end and then leads the next, which carries every
    /// record pushed by then. So N concurrent creators pay about one round
    /// of syncs per flush, not one each in turn.
    fn flush_slot<'a>(
        &self,
        slot: &'a ContainerSlot,
        mut container: MutexGuard<'a, DirContainer>,
        ticket: u64,
    ) -> (MutexGuard<'a, DirContainer>, Result<()>) {
        loop {
            if let Some(error) = container.failure_for(ticket) {
                return (container, Err(error));
            }
            if container.durable_seq >= ticket {
                return (container, Ok(()));
            }
            if container.flushing {
                container = slot.flushed.wait(container).unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            let batch = container.start_batch();
            drop(container);
            let outcome = batch.publish();
            container = slot.lock();
            container.finish_batch(batch, outcome);
            slot.flushed.notify_all();
        }
    }

    fn stamper(&self) -> &Stamper {
        &self.options.stamper
    }

    /// Now on the mount's clock.
    pub(crate) fn now_ns(&self) -> u64 {
        self.options.stamper.now_ns()
    }

    fn lock(&self) -> MutexGuard<'_, LruCache<StorePath, Arc<ContainerSlot>>> {
        self.containers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A namespace change that needs `name` to exist; `effects` are what it
    /// does to this process's knowledge of which names exist.
    fn name_op(
        &self,
        dir: &StorePath,
        name: &str,
        writer: u64,
        record: impl FnOnce(u64) -> NameRecord,
        effect: Effect<'_>,
    ) -> Result<()> {
        self.with_container(dir, |this, container| {
            let id = container.identity(this, name)?.ok_or_else(not_found)?;
            let record = record(this.stamper().next());
            container.session(this, writer)?;
            container.push_name(writer, record);
            container.note_changed(name);
            match effect {
                Effect::None => {}
                Effect::Removes => container.know(name, None),
                Effect::MovesTo(to) => {
                    container.know(name, None);
                    container.know(to, Some(id));
                }
            }
            Ok(container.after_record(this, writer))
        })
        .and_then(|full| self.flush_if(full, dir))
        .with_context(|| logical(dir, name))
    }

    fn view(&self, dir: &StorePath) -> Result<Arc<DirView>> {
        self.with_container(dir, |this, container| container.view(this)).context(dir.to_string())
    }

    /// Runs `op` on the container of `dir` under that container's lock.
    fn with_container<T>(
        &self,
        dir: &StorePath,
        op: impl FnOnce(&SmallFileStore, &mut DirContainer) -> Result<T>,
    ) -> Result<T> {
        let mut op = Some(op);
        loop {
            let slot = self.slot(dir)?;
            let mut container = slot.lock();
            if container.closed {
                // Evicted or closed between the lookup and the lock.
                continue;
            }
            let op = op.take().expect("taken once: the loop returns");
            return op(self, &mut container);
        }
    }

    /// The container of `dir`, opened (and the least recently used one
    /// closed, outside the map's lock, when the bound is reached) if needed.
    fn slot(&self, dir: &StorePath) -> Result<Arc<ContainerSlot>> {
        let (slot, evicted) = {
            let mut containers = self.lock();
            if let Some(slot) = containers.get(dir) {
                return Ok(slot.clone());
            }
            let evicted =
                if containers.len() == containers.cap().get() { containers.pop_lru() } else { None };
            let slot = Arc::new(ContainerSlot {
                state: Mutex::new(DirContainer::new(dir.clone())),
                flushed: Condvar::new(),
            });
            containers.put(dir.clone(), slot.clone());
            (slot, evicted)
        };
        if let Some((evicted_dir, evicted)) = evicted {
            self.close_slot(&evicted)
                .with_context(|| format!("closing least recently used {evicted_dir}"))?;
        }
        Ok(slot)
    }
}

/// Reads `file` (or `name`'s) from `view`.
fn read_in(
    view: &DirView,
    dir: &StorePath,
    name: &str,
    file: Option<FileId>,
    offset: u64,
    buf: &mut [u8],
) -> Result<usize> {
    view.read(name, file, offset, buf)
        .and_then(|count| count.ok_or_else(|| gone(file)))
        .with_context(|| logical(dir, name))
}

/// The error for a file the view lacks: a handle's file (`file`) was
/// removed by another process; a name denotes nothing.
fn gone(file: Option<FileId>) -> Error {
    match file {
        Some(_) => Error::new(ErrorKind::Stale, "removed by another process"),
        None => not_found(),
    }
}

impl Drop for SmallFileStore {
    fn drop(&mut self) {
        let containers = self.containers.get_mut().unwrap_or_else(PoisonError::into_inner);
        for (dir, slot) in containers.iter() {
            if slot.lock().sessions.values().any(WriterSession::has_pending) {
                tracing::warn!("small-file store dropped with unflushed records in {dir}; call close()");
            }
        }
    }
}

/// One open directory container of this process.
#[derive(Debug)]
struct DirContainer {
    dir: StorePath,
    sessions: HashMap<u64, WriterSession>,
    /// Backends on which the container directory is known to exist.
    prepared: HashSet<usize>,
    view: Option<Arc<DirView>>,
    /// A lock was granted since `view` was loaded ([`SmallFileStore::revalidate`]):
    /// it is checked against the store before its next use.
    stale: bool,
    /// When the oldest record no flush has taken yet was pushed (mount
    /// clock; 0: none since the last flush started).
    buffered_since_ns: u64,
    /// Paces the checks the view gets on its own: one a use once
    /// [`LOOK_AGAIN_AFTER`](crate::clock::LOOK_AGAIN_AFTER) has passed, as an
    /// NFS client's attribute cache, so a stat by path or a read of a file
    /// another process rewrote is at most about that stale.
    look_again: LookAgain,
    /// Views loaded so far: a flush folds its records into the view only
    /// if none was loaded while it ran (such a view may hold them already).
    view_loads: u64,
    /// Effect of this process's unflushed changes on the namespace: the
    /// file a name it created or renamed to denotes, `None` for one it
    /// removed, with the sequence number of the record that did it.
    known: HashMap<String, (Option<FileId>, u64)>,
    /// Names whose size or times this process's unflushed records change
    /// (writes, truncates, times), with the sequence number of the last
    /// such record: a cached view is stale for them until they are flushed.
    changed: HashMap<String, u64>,
    /// This process's unflushed records of every writer, in stamp order
    /// (stamps are taken under the container's lock), kept so a flush can
    /// fold them into `view` instead of dropping it.
    pending: Vec<Pending>,
    /// An emptied vector a flush swaps with `pending`, so steady flushing
    /// allocates nothing.
    spare_pending: Vec<Pending>,
    /// Records pushed so far (each takes the next number).
    pushed_seq: u64,
    /// Every record numbered up to this is durable (or in `failures`).
    durable_seq: u64,
    /// A flush is appending and syncing without the lock.
    flushing: bool,
    /// Ranges of record numbers a failed flush lost (or may have), with
    /// the failure, so every thread whose records were among them hears
    /// of it. Only failures add to it.
    failures: Vec<(u64, u64, ErrorKind, String)>,
    /// Closed (evicted or closed with the store): open the container anew.
    closed: bool,
    /// Files this process's handles have open here, by identity, with how
    /// many handles: [`SmallFileStore::hold`].
    open_files: HashMap<FileId, usize>,
    /// For an open file another process removed or replaced since: the
    /// last view that held it. Its handles read it there (logs are never
    /// rewritten), as a local file system's descriptors keep an unlinked
    /// file, until the last of them lets go.
    retained: HashMap<FileId, Arc<DirView>>,
    /// The view dropped last, kept while files are open here until the
    /// next load tells which of them it alone still holds.
    dropped: Option<Arc<DirView>>,
}

/// What a name record does to this process's knowledge of names.
enum Effect<'a> {
    None,
    Removes,
    /// A rename: the file goes to the new name.
    MovesTo(&'a str),
}

/// One unflushed record, as [`DirContainer::fold_pending`] needs it.
#[derive(Debug)]
enum Pending {
    /// A name record of `writer`'s session (a create's file is known by
    /// that session's data log).
    Name { writer: u64, record: NameRecord },
    /// An index entry of `writer`'s session, to `file`.
    Write { writer: u64, file: FileId, entry: IndexEntry },
}

impl Pending {
    fn stamp(&self) -> u64 {
        match self {
            Pending::Name { record, .. } => record.stamp(),
            Pending::Write { entry, .. } => entry.stamp,
        }
    }
}

/// What one flush carries, taken under the container's lock and published
/// without it.
struct Batch {
    /// Record numbers `first..=last` are in it.
    first: u64,
    last: u64,
    view_loads: u64,
    pending: Vec<Pending>,
    sessions: Vec<(u64, Arc<Mutex<SessionLogs>>)>,
    /// Sessions whose data append already failed while the batch was taken.
    failed: Vec<(u64, Error)>,
}

/// A session's logs after publishing: the name and index log lengths, or
/// the error that retires the session.
type Published = Vec<(u64, Result<(u64, u64)>)>;

impl Batch {
    /// First every session's data made durable and its index entries
    /// appended and synced, then every session's names. A name frame is
    /// what makes a flush's files exist for a reader, and a reader reads
    /// every name log before any index log (`DirView::load`), so a view
    /// that holds any name record of this flush holds all its writes too: a
    /// file another process loads mid-flush is either absent (its lookup
    /// misses and refreshes) or complete, never created at size 0 and then
    /// served from the view after this flush has ended.
    fn publish(&self) -> Published {
        let mut published: Published = Vec::with_capacity(self.sessions.len());
        for (writer, logs) in &self.sessions {
            let mut logs = logs.lock().unwrap_or_else(PoisonError::into_inner);
            published.push((*writer, logs.publish_writes().map(|()| (0, 0))));
        }
        for ((_, logs), (_, outcome)) in self.sessions.iter().zip(published.iter_mut()) {
            if outcome.is_ok() {
                let mut logs = logs.lock().unwrap_or_else(PoisonError::into_inner);
                *outcome = logs.publish_names().map(|()| (logs.name_log.len(), logs.index_log.len()));
            }
        }
        published
    }
}

impl DirContainer {
    fn new(dir: StorePath) -> DirContainer {
        DirContainer {
            dir,
            sessions: HashMap::new(),
            prepared: HashSet::new(),
            view: None,
            stale: false,
            buffered_since_ns: 0,
            look_again: LookAgain::default(),
            view_loads: 0,
            known: HashMap::new(),
            changed: HashMap::new(),
            pending: Vec::new(),
            spare_pending: Vec::new(),
            pushed_seq: 0,
            durable_seq: 0,
            flushing: false,
            failures: Vec::new(),
            closed: false,
            open_files: HashMap::new(),
            retained: HashMap::new(),
            dropped: None,
        }
    }

    /// Buffers a name record in `writer`'s session (opened by the caller).
    fn push_name(&mut self, writer: u64, record: NameRecord) {
        self.sessions.get_mut(&writer).expect("callers open the session first").push_name(record.clone());
        self.push_pending(Pending::Name { writer, record });
    }

    fn push_pending(&mut self, record: Pending) {
        self.pushed_seq += 1;
        self.pending.push(record);
    }

    /// Notes that the record just pushed changes `name`'s attributes.
    fn note_changed(&mut self, name: &str) {
        let seq = self.pushed_seq;
        // No allocation for a name already noted (a stream of writes).
        match self.changed.get_mut(name) {
            Some(noted) => *noted = seq,
            None => {
                self.changed.insert(name.to_owned(), seq);
            }
        }
    }

    /// Notes that the record just pushed makes `name` denote `file` (or
    /// nothing).
    fn know(&mut self, name: &str, file: Option<FileId>) {
        let seq = self.pushed_seq;
        match self.known.get_mut(name) {
            Some(known) => *known = (file, seq),
            None => {
                self.known.insert(name.to_owned(), (file, seq));
            }
        }
    }

    /// The file `name` denotes in this process's knowledge, without loading
    /// a view: its own unflushed changes, else the view if one is loaded.
    fn known_identity(&self, name: &str) -> Option<FileId> {
        match self.known.get(name) {
            Some(&(file, _)) => file,
            None => self.view.as_ref().and_then(|view| view.identity(name)),
        }
    }

    fn view(&mut self, store: &SmallFileStore) -> Result<Arc<DirView>> {
        if self.view.is_some() && (self.stale || self.look_again.due(store.now_ns())) {
            self.refresh()?;
            self.stale = false;
        }
        if let Some(view) = &self.view {
            return Ok(view.clone());
        }
        let view = Arc::new(DirView::load(&store.stores, &self.dir, &store.options.hostname)?);
        self.view_loads += 1;
        // A second from now, not from the first lookup that finds it: that
        // lookup would otherwise answer from a view of any age.
        self.look_again.restart(store.now_ns());
        // New records must order after everything already on disk, even if
        // another host's clock is ahead of ours.
        store.stamper().observe(view.newest_stamp());
        self.retain_gone(&view);
        self.view = Some(view.clone());
        Ok(view)
    }

    /// Drops the view if the store holds records it lacks (see
    /// [`DirView::is_current`]).
    fn refresh(&mut self) -> Result<()> {
        if let Some(view) = &self.view
            && !view.is_current(&self.dir)?
        {
            self.drop_view();
        }
        Ok(())
    }

    /// Forgets the view (the next use loads one); while files are open
    /// here it is kept until then, for [`retain_gone`](Self::retain_gone).
    fn drop_view(&mut self) {
        let view = self.view.take();
        if view.is_some() && !self.open_files.is_empty() {
            self.dropped = view;
        }
    }

    /// A view was just loaded: an open file that the view dropped last
    /// held and this one does not, another process removed or replaced,
    /// and its handles keep reading it in that older view.
    fn retain_gone(&mut self, loaded: &DirView) {
        let Some(dropped) = self.dropped.take() else { return };
        for &file in self.open_files.keys() {
            if dropped.holds(file) && !loaded.holds(file) {
                self.retained.insert(file, dropped.clone());
            }
        }
    }

    /// The file `name` denotes in this process's knowledge (the view, loaded
    /// if need be, and its own unflushed changes); None if none.
    fn identity(&mut self, store: &SmallFileStore, name: &str) -> Result<Option<FileId>> {
        Ok(match self.known.get(name) {
            Some(&(file, _)) => file,
            None => self.view(store)?.identity(name),
        })
    }

    /// The writer's session in this directory, created with its three logs
    /// on first use.
    fn session(&mut self, store: &SmallFileStore, writer: u64) -> Result<&mut WriterSession> {
        if !self.sessions.contains_key(&writer) {
            let backend =
                ((u64::from(name_hash(self.dir.as_str())) + writer) % store.stores.len() as u64) as usize;
            if !self.prepared.contains(&backend) {
                store.stores[backend].create_dir_all(&container_dir(&self.dir)?)?;
                self.prepared.insert(backend);
            }
            let session = WriterSession::create(store, &self.dir, backend, writer)?;
            self.sessions.insert(writer, session);
        }
        Ok(self.sessions.get_mut(&writer).expect("inserted above"))
    }

    /// Whether a writer's pending records reached their bound, so the
    /// caller must flush. All writers of the directory flush, not just this
    /// one: folding into the view is exact only when every record before
    /// the last folded one is folded too (a write of one writer may name a
    /// file another one's unflushed create made).
    /// Also true once `PUBLISH_AFTER` has passed since the last flush (or
    /// the first record after it): a process writing a little now and then
    /// published nothing until its buffer filled or it closed, so no other
    /// process could follow the file (`tail -f` on a job's log).
    fn after_record(&mut self, store: &SmallFileStore, writer: u64) -> bool {
        let session = self.sessions.get(&writer).expect("a record was just pushed");
        let full = session.name_frame.len() + session.index_frame.len() >= store.options.record_buffer_bytes;
        let now = store.now_ns();
        if self.buffered_since_ns == 0 {
            self.buffered_since_ns = now.max(1);
        }
        full || now.saturating_sub(self.buffered_since_ns) >= saturating_ns(PUBLISH_AFTER)
    }

    /// A failure that lost (or may have lost) any record from `since` to
    /// `ticket`, if any.
    fn failure_within(&self, since: u64, ticket: u64) -> Option<Error> {
        self.failures
            .iter()
            .find(|(first, last, _, _)| *first <= ticket && *last >= since)
            .map(|(_, _, kind, message)| Error::new(*kind, message.clone()))
    }

    /// The failure that lost (or may have lost) record `ticket`, if any.
    fn failure_for(&self, ticket: u64) -> Option<Error> {
        self.failure_within(ticket, ticket)
    }

    /// Takes every pending record into a batch and marks a flush running.
    /// Data buffers are appended here, under the lock, because writes that
    /// overflow their buffer append data too and their offsets must stay
    /// in order; the syncs, and the index and name appends that wait on
    /// them, are the batch's, without the lock.
    fn start_batch(&mut self) -> Batch {
        self.flushing = true;
        self.buffered_since_ns = 0;
        let mut sessions = Vec::new();
        let mut failed = Vec::new();
        for (&writer, session) in &mut self.sessions {
            if !session.has_pending() {
                continue;
            }
            let mut logs = session.logs.lock().unwrap_or_else(PoisonError::into_inner);
            if !session.data_buffer.is_empty() {
                if let Err(error) = logs.data_log.append(&session.data_buffer) {
                    failed.push((writer, error));
                    continue;
                }
                session.data_buffer.clear();
            }
            // The logs' frames were cleared by the previous flush.
            std::mem::swap(&mut session.name_frame, &mut logs.name_out);
            std::mem::swap(&mut session.index_frame, &mut logs.index_out);
            drop(logs);
            sessions.push((writer, session.logs.clone()));
        }
        let mut pending = std::mem::take(&mut self.spare_pending);
        std::mem::swap(&mut pending, &mut self.pending);
        Batch {
            first: self.durable_seq + 1,
            last: self.pushed_seq,
            view_loads: self.view_loads,
            pending,
            sessions,
            failed,
        }
    }

    /// Ends a flush: folds its records into the view (exactly as a reload
    /// would replay them after what it had loaded), or, after a failure,
    /// retires the failed sessions and records which records were lost.
    fn finish_batch(&mut self, mut batch: Batch, published: Published) {
        self.flushing = false;
        let mut first_error = None;
        let mut lengths = Vec::with_capacity(published.len());
        for (writer, error) in batch.failed.drain(..) {
            first_error.get_or_insert(self.retire(writer, error));
        }
        for (writer, outcome) in published {
            match outcome {
                Ok(length) => lengths.push((writer, length)),
                Err(error) => {
                    first_error.get_or_insert(self.retire(writer, error));
                }
            }
        }
        if let Some(error) = first_error {
            // Some records may be on disk and some lost: only a reload can
            // tell. A retired session's records pushed while the flush ran
            // are lost too, so the failure covers everything pushed so far.
            self.failures.push((batch.first, self.pushed_seq, error.kind(), error.to_string()));
            self.durable_seq = self.pushed_seq;
            self.drop_view();
            self.pending.clear();
            self.known.clear();
            self.changed.clear();
            return;
        }
        self.durable_seq = batch.last;
        if batch.view_loads != self.view_loads || !self.fold_pending(&batch.pending) {
            self.drop_view();
        } else if let Some(view) = self.view.as_mut() {
            // The view now holds everything this process's logs hold.
            let view = Arc::make_mut(view);
            for (writer, (name_len, index_len)) in lengths {
                if let Some(session) = self.sessions.get(&writer) {
                    view.note_own_log(session.backend, &session.name_path, name_len);
                    view.note_own_log(session.backend, &session.index_path, index_len);
                }
            }
        }
        let last = batch.last;
        self.known.retain(|_, (_, seq)| *seq > last);
        self.changed.retain(|_, seq| *seq > last);
        batch.pending.clear();
        self.spare_pending = batch.pending;
    }

    /// Drops a session whose flush failed: a failed append may have left a
    /// torn frame, and frames after it would read as corruption.
    fn retire(&mut self, writer: u64, error: Error) -> Error {
        tracing::warn!("{}: retiring writer {writer}'s small-file logs after a failed flush", self.dir);
        self.sessions.remove(&writer);
        error.context(format!(
            "{}: flushing writer {writer} failed; its unflushed records are lost and its logs retired",
            self.dir
        ))
    }

    /// Folds just-flushed records into the view, if there is one; `false`
    /// if the view cannot take them and must be reloaded instead.
    fn fold_pending(&mut self, pending: &[Pending]) -> bool {
        let Some(view) = self.view.as_mut() else { return true };
        if pending.is_empty() {
            return true;
        }
        // A fold applies these records after everything the view holds; a
        // reload replays them in stamp order. The two agree only if no
        // record the view holds is newer than the oldest of these: one
        // another process published while this process held its records
        // (a create buffered since an open, then a lock's reload of the
        // holder's writes) came before some of them. Before, the fold
        // emptied that file again, and this process read its own writes
        // as lost while every other reader saw them.
        let oldest = pending.iter().map(Pending::stamp).min().unwrap_or(u64::MAX);
        if oldest < view.newest_stamp() {
            return false;
        }
        // Copy on write only if a reader still holds this version.
        let view = Arc::make_mut(view);
        for record in pending {
            match record {
                Pending::Name { writer, record } => {
                    let Some(session) = self.sessions.get(writer) else { return false };
                    view.fold_name(&session.data_path, record);
                }
                Pending::Write { writer, file, entry } => {
                    let Some(session) = self.sessions.get(writer) else { return false };
                    view.fold_write(session.backend, &session.data_path, *file, entry);
                }
            }
        }
        true
    }
}

/// One writer's logs in one directory, and what it has not yet appended.
#[derive(Debug)]
struct WriterSession {
    /// Locked by the flush that publishes them (without the container's
    /// lock) and, under the container's lock, by data appends.
    logs: Arc<Mutex<SessionLogs>>,
    name_frame: FrameBuilder,
    index_frame: FrameBuilder,
    data_buffer: Vec<u8>,
    /// Length of the data log once `data_buffer` is appended: the offset
    /// of the next write's bytes.
    data_end: u64,
    /// The file id this session's records use for each file it wrote or
    /// created. A file keeps its fid through renames (readers resolve an
    /// index entry through the record that bound the fid, not by name), so
    /// a fid is never bound to another file while a handle may still write
    /// through it: a new file gets a new fid.
    fids: HashMap<FileId, u64>,
    /// The name each fid was bound by (fids are 0, 1, 2, …).
    names: Vec<String>,
    /// Where the logs are: the data log for folding this session's writes
    /// into a view, the others so the view knows it holds their records.
    backend: usize,
    data_path: StorePath,
    name_path: StorePath,
    index_path: StorePath,
}

/// A session's three logs and the frames its running flush publishes.
#[derive(Debug)]
struct SessionLogs {
    name_log: Box<dyn AppendWriter>,
    index_log: Box<dyn AppendWriter>,
    data_log: Box<dyn AppendWriter>,
    name_out: FrameBuilder,
    index_out: FrameBuilder,
}

impl SessionLogs {
    /// First half of a flush: data durable first, then the index entries,
    /// so an entry is never on disk before its bytes. An entry whose name
    /// record is not on disk yet (or never, after a crash) is an orphan to
    /// readers, never visible.
    fn publish_writes(&mut self) -> Result<()> {
        if let Some(frame) = self.index_out.finish() {
            self.data_log.sync()?;
            self.index_log.append(frame)?;
            self.index_log.sync()?;
        }
        self.index_out.clear();
        Ok(())
    }

    /// Second half of a flush, after every session's `publish_writes`: the
    /// names (creates, opens binding file ids, and the other namespace
    /// records) that make the flushed writes visible.
    fn publish_names(&mut self) -> Result<()> {
        if let Some(frame) = self.name_out.finish() {
            self.name_log.append(frame)?;
            self.name_log.sync()?;
        }
        self.name_out.clear();
        Ok(())
    }
}

impl WriterSession {
    fn create(store: &SmallFileStore, dir: &StorePath, backend: usize, writer: u64) -> Result<WriterSession> {
        let options = &store.options;
        let stamp = options.stamper.next();
        let id = LogId::new(stamp, writer, options.pid, &options.hostname);
        let header =
            LogHeader { created_stamp: stamp, writer, pid: options.pid, hostname: options.hostname.clone() };
        let target = &store.stores[backend];
        // The name log goes last: a session without one is ignored, so a
        // crash in between leaves nothing a reader would misread.
        let open = |kind, magic| -> Result<Box<dyn AppendWriter>> {
            let path = small_log_path(dir, kind, &id)?;
            let mut log = target.create_append(&path)?;
            log.append(&header.encode(magic)).with_context(|| format!("{}: {path}", target.url()))?;
            Ok(log)
        };
        let data_log = open(SmallLogKind::Data, DATA_LOG_MAGIC)?;
        let index_log = open(SmallLogKind::Index, INDEX_LOG_MAGIC)?;
        let name_log = open(SmallLogKind::Name, NAME_LOG_MAGIC)?;
        let data_end = data_log.len();
        Ok(WriterSession {
            logs: Arc::new(Mutex::new(SessionLogs {
                name_log,
                index_log,
                data_log,
                name_out: FrameBuilder::default(),
                index_out: FrameBuilder::default(),
            })),
            name_frame: FrameBuilder::default(),
            index_frame: FrameBuilder::default(),
            data_buffer: Vec::new(),
            data_end,
            fids: HashMap::new(),
            names: Vec::new(),
            backend,
            data_path: small_log_path(dir, SmallLogKind::Data, &id)?,
            name_path: small_log_path(dir, SmallLogKind::Name, &id)?,
            index_path: small_log_path(dir, SmallLogKind::Index, &id)?,
        })
    }

    /// The file id a create record of `name` making (or emptying) `file`
    /// carries: the file's own if it was bound by this name (the create
    /// binds it again, to the same file), else a new one.
    fn bind_created(&mut self, name: &str, file: FileId) -> u64 {
        match self.fids.get(&file) {
            Some(&fid) if self.names[fid as usize] == name => fid,
            _ => self.new_fid(name, file),
        }
    }

    /// The file id of `file`, which `name` denotes (as far as this process
    /// knows); the first time, an open record binds it by that name.
    fn bind(&mut self, name: &str, file: FileId, stamper: &Stamper) -> u64 {
        if let Some(&fid) = self.fids.get(&file) {
            return fid;
        }
        let fid = self.new_fid(name, file);
        self.push_name(NameRecord::Open { stamp: stamper.next(), fid, name: name.to_owned() });
        fid
    }

    fn new_fid(&mut self, name: &str, file: FileId) -> u64 {
        let fid = self.names.len() as u64;
        self.fids.insert(file, fid);
        self.names.push(name.to_owned());
        fid
    }

    fn push_name(&mut self, record: NameRecord) {
        self.name_frame.push(&record);
    }

    /// Buffers (or appends) data; returns its physical offset in the log.
    /// Called under the container's lock, so data appends keep their order
    /// even while a flush syncs this session's logs (it then waits).
    fn append_data(&mut self, bytes: &[u8], buffer_bytes: usize) -> Result<u64> {
        let physical = self.data_end;
        if self.data_buffer.len() + bytes.len() > buffer_bytes || bytes.len() >= buffer_bytes {
            let mut logs = self.logs.lock().unwrap_or_else(PoisonError::into_inner);
            if !self.data_buffer.is_empty() {
                logs.data_log.append(&self.data_buffer)?;
                self.data_buffer.clear();
            }
            if bytes.len() >= buffer_bytes {
                logs.data_log.append(bytes)?;
                self.data_end += bytes.len() as u64;
                return Ok(physical);
            }
        }
        self.data_buffer.extend_from_slice(bytes);
        self.data_end += bytes.len() as u64;
        Ok(physical)
    }

    fn has_pending(&self) -> bool {
        !self.name_frame.is_empty() || !self.index_frame.is_empty() || !self.data_buffer.is_empty()
    }

    fn close(self) -> Result<()> {
        assert!(!self.has_pending(), "sessions are flushed before they close");
        let logs = Arc::try_unwrap(self.logs)
            .map_err(|_| Error::invalid("a small-file session closed while a flush still holds its logs"))?;
        let logs = logs.into_inner().unwrap_or_else(PoisonError::into_inner);
        logs.name_log.close()?;
        logs.index_log.close()?;
        logs.data_log.close()
    }
}

fn not_found() -> Error {
    Error::new(crate::ErrorKind::NotFound, "no such small file")
}

fn logical(dir: &StorePath, name: &str) -> String {
    format!("{dir}/{name}")
}
