//! A `workload: small_file` (1-N) mount: [`crate::fs::Plfs`] over one
//! [`SmallFileStore`]. `Plfs` calls here for files only; directories and
//! symlinks are served by the same code as the other layouts.
//!
//! - **Directories** are real directories mirrored on every backend, as in
//!   the n-n and container layouts (mkdir on all, canonical first). Each
//!   holds, on the backends its writers use, the directory container
//!   (`.plfs-smallfile/`, hidden by readdir like every `.plfs-` name).
//! - **Files** live in the directory container of their parent: `/d/f` is
//!   the name `f` of directory `d` in the engine. Symlinks are real
//!   symlinks on their canonical backend, as in the other layouts.
//! - **Visibility is close-to-open.** A handle's writes, its create and its
//!   truncates are records buffered in this process until the handle's
//!   `sync` or `close` (or [`crate::fs::Plfs::flush_writes`] of the
//!   directory) publishes them. A read through a handle that wrote flushes
//!   first, so a handle reads its own writes. Path operations that change
//!   the namespace (`unlink`, `rename`, `utime`) flush at once. This process
//!   reads a directory from a view cached on first use, into which each of
//!   its flushes folds its own records (so an unlink costs one name frame,
//!   not a reload of every log of the directory). Other processes' changes
//!   show close-to-open: an `open`, `stat` or `access` that does not find
//!   its name, and every `readdir` (so `rmdir` too), first checks whether
//!   any writer flushed since the view was cached (one listing of the
//!   container and a `metadata` per log) and reloads the view only if so;
//!   a hit costs nothing. A file found in a stale view (one another
//!   process removed since) shows until a miss or a listing refreshes it,
//!   or [`crate::fs::Plfs::invalidate_read_cache`].
//! - **Modes and owners**: the engine keeps none. A small file reports mode
//!   0644 and the mount's owner; `chmod` and `chown` of a small file are
//!   accepted and ignored (so `cp -p` and `tar` work), `access` checks
//!   against 0644.
//! - **rename** within a directory is one engine record; between
//!   directories it copies the bytes into the target directory's container
//!   under a hidden name, publishes them, renames the copy onto the target
//!   (one record), then unlinks the source (a crash in between leaves a
//!   copy, never a loss).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError, RwLock, RwLockReadGuard};
use std::time::SystemTime;

use crate::attr::{FileAttr, FileKind};
use crate::clock::{LookAgain, ns_to_system_time, system_time_to_ns};
use crate::container;
use crate::error::{Error, ErrorKind, Result, ResultExt};
use crate::layout;
use crate::mount_state::MountState;
use crate::open::{OpenFlags, WriterId};
use crate::store::{EntryKind, Metadata, StorePath};

use super::view::FileId;
use super::{FileStat, SmallFileStore};

/// Mode reported for every small file (the engine keeps no modes).
pub(crate) const SMALL_FILE_MODE: u32 = 0o644;

/// Bytes copied per step when a rename moves a file between directories.
const COPY_CHUNK_BYTES: usize = 1 << 20;

/// What a small-file mount has at a path.
#[derive(Debug, Clone)]
pub(crate) enum SmallLookup {
    Directory(Metadata),
    Symlink(Metadata),
    File(FileStat),
}

/// The directory and the name of a file path (not the root).
fn split(logical: &StorePath) -> Result<(StorePath, &str)> {
    let name = logical.file_name().ok_or_else(|| Error::new(ErrorKind::IsADirectory, "/"))?;
    Ok((logical.parent().unwrap_or_default(), name))
}

fn writer_of(mount: &MountState) -> u64 {
    u64::from(mount.pid)
}

/// What is at `path`: a real directory or symlink on its canonical backend,
/// else a small file of its parent's container. This process's own
/// unflushed files are published first, so they are found.
pub(crate) fn lookup(mount: &MountState, engine: &SmallFileStore, path: &StorePath) -> Result<SmallLookup> {
    // Except a file unlinked while open, at its hidden name (the name its
    // handles' fstat and FUSE's node of it look up).
    let last = path.components().count().saturating_sub(1);
    let refused =
        |(at, name): (usize, &str)| layout::is_reserved(name) && !(at == last && layout::is_removed(name));
    if path.components().enumerate().any(refused) {
        return Err(Error::new(ErrorKind::NotFound, format!("/{path}: a reserved plfs name")));
    }
    let (backend, _) = container::canonical(mount, path);
    let store = mount.store(backend);
    let missing = match store.metadata(path) {
        Ok(metadata) => {
            return match metadata.kind {
                EntryKind::Directory => Ok(SmallLookup::Directory(metadata)),
                EntryKind::Symlink => Ok(SmallLookup::Symlink(metadata)),
                EntryKind::File => Err(Error::corrupt(format!(
                    "{}: {path} is a plain file where a small-file mount keeps only directories",
                    store.url()
                ))),
            };
        }
        Err(error) if error.kind() == ErrorKind::NotFound && !path.is_root() => error,
        Err(error) => return Err(error),
    };
    let (dir, name) = split(path)?;
    // Close-to-open: a miss looks again once, in this process's unflushed
    // files and in what other processes flushed since the view was cached.
    match engine.stat_fresh(&dir, name) {
        Ok(stat) => Ok(SmallLookup::File(stat)),
        Err(error) if error.kind() == ErrorKind::NotFound => Err(missing),
        Err(error) => Err(error),
    }
}

/// `stat` of a small file.
pub(crate) fn file_attr(mount: &MountState, stat: &FileStat) -> FileAttr {
    FileAttr {
        kind: FileKind::File,
        size: stat.size,
        blocks: stat.size.div_ceil(512),
        mode: SMALL_FILE_MODE,
        uid: mount.uid,
        gid: mount.gid,
        nlink: 1,
        atime: ns_to_system_time(stat.atime_ns),
        mtime: ns_to_system_time(stat.mtime_ns),
        ctime: ns_to_system_time(stat.ctime_ns.max(stat.mtime_ns)),
    }
}

/// Fails unless `dir` is a real directory.
fn require_directory(mount: &MountState, dir: &StorePath) -> Result<()> {
    let (backend, _) = container::canonical(mount, dir);
    match mount.store(backend).metadata(dir)?.kind {
        EntryKind::Directory => Ok(()),
        _ => Err(Error::new(ErrorKind::NotADirectory, format!("/{dir}"))),
    }
}

/// Opens (with `flags.create`, creates) a small file for `writer`.
pub(crate) fn open(
    mount: &MountState,
    engine: &SmallFileStore,
    logical: &StorePath,
    flags: OpenFlags,
    writer: WriterId,
) -> Result<SmallFile> {
    let (dir, name) = split(logical)?;
    // A hidden name is the façade's, for a file unlinked while open: an
    // interface opens it again (FUSE, for an open(2) that reached the
    // file before its unlink), but nothing creates one.
    let reopening_hidden = layout::is_removed(name) && !flags.create;
    if layout::is_reserved(name) && !reopening_hidden {
        return Err(Error::invalid(format!(
            "/{logical}: names starting {} are plfs's",
            layout::RESERVED_PREFIX
        )));
    }
    require_directory(mount, &dir)?;
    let (backend, _) = container::canonical(mount, logical);
    match mount.store(backend).metadata(logical) {
        Ok(metadata) if metadata.kind == EntryKind::Directory => {
            return Err(Error::new(ErrorKind::IsADirectory, format!("/{logical}")));
        }
        Ok(_) => {
            return Err(Error::invalid(format!(
                "/{logical}: is a symbolic link (the core does not follow links)"
            )));
        }
        Err(error) if error.kind() == ErrorKind::NotFound => {}
        Err(error) => return Err(error),
    }
    let file = SmallFile::new(dir.clone(), name.to_owned(), !flags.write);
    if flags.create && flags.truncate && flags.write && !flags.exclusive {
        // Exactly the engine's create: no need to know what exists, so a
        // create storm loads no view of the directory.
        file.will_push(engine, &dir)?;
        file.set_file(engine, &dir, engine.create(&dir, name, writer)?);
        file.dirty.store(true, Ordering::Relaxed);
        return Ok(file);
    }
    if flags.write {
        // Close-to-open for a writer: a name another process renamed or
        // removed since this process cached the directory must not be
        // taken for the file (its writes would go to the renamed file, or
        // to none). A hit costs the check, not a reload.
        engine.refresh(&dir)?;
    }
    let mut exists = engine.exists(&dir, name)?;
    if !exists && !flags.write && (!flags.create || flags.exclusive) {
        // Close-to-open: a file another process closed since this process
        // cached the directory is found by a fresh view. (A plain O_CREAT
        // decides on the cached view, so it costs no reload.)
        engine.refresh(&dir)?;
        exists = engine.exists(&dir, name)?;
    }
    if exists {
        if flags.create && flags.exclusive {
            return Err(Error::new(ErrorKind::AlreadyExists, format!("/{logical}")));
        }
        if let Some(id) = engine.identity(&dir, name)? {
            file.set_file(engine, &dir, id);
        }
        if flags.truncate && flags.write {
            file.will_push(engine, &dir)?;
            engine.truncate(&dir, name, writer, 0)?;
            file.dirty.store(true, Ordering::Relaxed);
        } else {
            let stat = match engine.stat(&dir, name) {
                Err(error) if error.kind() == ErrorKind::NotFound => {
                    // Only this process's unflushed records know it yet.
                    engine.flush_writes(&dir)?;
                    engine.stat(&dir, name)?
                }
                other => other?,
            };
            *file.lock_size() = stat.size;
        }
    } else if flags.create {
        // Another process may make the file before this record is
        // published: without O_TRUNC its bytes must stay (`open_or_create`).
        // O_EXCL cannot be promised across processes here; sharing the
        // file at least loses nothing.
        file.will_push(engine, &dir)?;
        let id = if flags.truncate {
            engine.create(&dir, name, writer)?
        } else {
            engine.open_or_create(&dir, name, writer)?
        };
        file.set_file(engine, &dir, id);
        file.dirty.store(true, Ordering::Relaxed);
    } else {
        return Err(Error::new(ErrorKind::NotFound, format!("/{logical}")));
    }
    Ok(file)
}

/// Names of the small files of `dir`, as of this call (close-to-open: an
/// opendir sees every file closed before it, and not one unlinked before
/// it, whichever process did it).
pub(crate) fn list(engine: &SmallFileStore, dir: &StorePath) -> Result<Vec<String>> {
    // Files unlinked while open live on under hidden names.
    names_where(engine, dir, |name| !layout::is_reserved(name))
}

/// The hidden names of files unlinked while open in `dir` (what a crash
/// before their last close leaves for `plfs recover`).
pub(crate) fn hidden(engine: &SmallFileStore, dir: &StorePath) -> Result<Vec<String>> {
    names_where(engine, dir, layout::is_removed)
}

fn names_where(engine: &SmallFileStore, dir: &StorePath, keep: impl Fn(&str) -> bool) -> Result<Vec<String>> {
    engine.refresh(dir)?;
    let mut names = engine.list(dir)?;
    names.retain(|name| keep(name));
    Ok(names)
}

pub(crate) fn unlink(mount: &MountState, engine: &SmallFileStore, logical: &StorePath) -> Result<()> {
    let (dir, name) = split(logical)?;
    engine.unlink(&dir, name, writer_of(mount))?;
    engine.flush_writes(&dir)
}

/// Sets times; `None` keeps the current one.
pub(crate) fn utime(
    mount: &MountState,
    engine: &SmallFileStore,
    logical: &StorePath,
    stat: &FileStat,
    atime: Option<SystemTime>,
    mtime: Option<SystemTime>,
) -> Result<()> {
    let (dir, name) = split(logical)?;
    let atime_ns = atime.map_or(stat.atime_ns, system_time_to_ns);
    let mtime_ns = mtime.map_or(stat.mtime_ns, system_time_to_ns);
    engine.utime(&dir, name, writer_of(mount), atime_ns, mtime_ns)?;
    engine.flush_writes(&dir)
}

/// Moves a small file whose target name is free or a small file (which is
/// replaced). Within a directory: one rename record. Between directories:
/// copy into the target's container and publish it, then unlink the source.
/// With `keep` (a hidden name beside the target) the replaced file moves
/// there in the same name frame instead of ending.
pub(crate) fn rename_file(
    mount: &MountState,
    engine: &SmallFileStore,
    source: &StorePath,
    target: &StorePath,
    keep: Option<&StorePath>,
) -> Result<()> {
    let (from_dir, from) = split(source)?;
    let (to_dir, to) = split(target)?;
    let keep = match keep.map(split).transpose()? {
        Some((keep_dir, keep)) if keep_dir == to_dir => Some(keep),
        Some(_) => return Err(Error::invalid(format!("/{target}: a replaced file is kept beside it"))),
        None => None,
    };
    // A hidden name is the façade's, for a file unlinked while open.
    if layout::is_reserved(to) && !layout::is_removed(to) {
        return Err(Error::invalid(format!(
            "/{target}: names starting {} are plfs's",
            layout::RESERVED_PREFIX
        )));
    }
    let writer = writer_of(mount);
    let rename = |dir: &StorePath, from: &str| match keep {
        Some(keep) => engine.rename_keeping(dir, from, to, keep, writer),
        None => engine.rename(dir, from, to, writer),
    };
    if from_dir == to_dir {
        rename(&from_dir, from)?;
        return engine.flush_writes(&from_dir);
    }
    require_directory(mount, &to_dir)?;
    // The copy is published under a hidden name beside the target first,
    // then one rename record puts it there: readers of the target see the
    // old file or the whole new one, and a failure before the record
    // leaves the target as it was. (Before, a failed copy left the target
    // removed, or half written under its name.) The hidden name is a
    // removed file's of this process: `plfs recover` clears it after a
    // crash, never while this process lives.
    let hidden = layout::removed_container_name(to, mount.stamper.next(), mount.pid, &mount.hostname);
    let moved = copy_within(engine, (&from_dir, from), (&to_dir, &hidden), writer)
        .and_then(|()| engine.flush_writes(&to_dir))
        .and_then(|()| rename(&to_dir, &hidden))
        .and_then(|()| engine.flush_writes(&to_dir));
    if let Err(error) = moved {
        if engine.exists(&to_dir, &hidden).unwrap_or(false) {
            let _ = engine.unlink(&to_dir, &hidden, writer).and_then(|()| engine.flush_writes(&to_dir));
        }
        return Err(error);
    }
    // A failure from here on leaves the file at both names, never at none.
    engine.unlink(&from_dir, from, writer)?;
    engine.flush_writes(&from_dir)
}

/// Copies the small file `from` (bytes, size, times) to a new file `to`.
fn copy_within(
    engine: &SmallFileStore,
    (from_dir, from): (&StorePath, &str),
    (to_dir, to): (&StorePath, &str),
    writer: u64,
) -> Result<()> {
    // The lookup that found the source published it, so the view has it.
    let stat = engine.stat(from_dir, from)?;
    engine.create(to_dir, to, writer)?;
    let mut buffer = vec![0u8; COPY_CHUNK_BYTES.min(usize::try_from(stat.size).unwrap_or(COPY_CHUNK_BYTES))];
    let mut offset = 0;
    while offset < stat.size {
        let count = engine.read(from_dir, from, None, offset, &mut buffer)?;
        if count == 0 {
            break;
        }
        engine.write(to_dir, to, writer, offset, &buffer[..count])?;
        offset += count as u64;
    }
    if offset < stat.size {
        engine.truncate(to_dir, to, writer, stat.size)?;
    }
    engine.utime(to_dir, to, writer, stat.atime_ns, stat.mtime_ns)
}

/// Publishes this process's pending small-file records of `dir`.
pub(crate) fn flush_writes(engine: &SmallFileStore, dir: &StorePath) -> Result<()> {
    engine.flush_writes(dir)
}

pub(crate) fn invalidate_read_cache(engine: &SmallFileStore, dir: &StorePath) {
    engine.invalidate_read_cache(dir);
}

/// Before a directory is removed or renamed on the backends: publish and
/// close its containers (and those below it) in this process.
pub(crate) fn close_under(engine: &SmallFileStore, dir: &StorePath) -> Result<()> {
    engine.close_under(dir)
}

/// A small file's directory and name.
#[derive(Debug)]
struct Location {
    dir: StorePath,
    name: String,
}

/// One open of a small file. The size is tracked from the open on (the
/// view's size, or 0 when the open created or truncated it) through this
/// handle's writes and truncates, so `size` costs no I/O.
#[derive(Debug)]
pub(crate) struct SmallFile {
    /// Where the file is; a rename (or an unlink that hides the open file)
    /// moves it ([`moved`](Self::moved)).
    at: RwLock<Location>,
    /// The file this handle writes to, as the engine knows it: a rename by
    /// another process moves it, and the writes follow it there.
    file: Mutex<Option<FileId>>,
    size: Mutex<u64>,
    /// Records of this handle not yet published.
    dirty: AtomicBool,
    /// Moved by this process ([`moved`](Self::moved)): a file's identity
    /// names the directory its creator's logs are in, so after a move of
    /// its directory the file is known by another, found by its new name.
    rebind: AtomicBool,
    /// `size` may miss what other processes published: a lock was
    /// granted since ([`refresh`](Self::refresh)).
    size_stale: AtomicBool,
    /// Paces the refreshes a size or a read at the end makes on its own
    /// (see [`LOOK_AGAIN_AFTER`](crate::clock::LOOK_AGAIN_AFTER)).
    look_again: LookAgain,
    /// The first container record this handle may have pushed since its
    /// last sync (0: none), so the sync reports a failure that lost one.
    unsynced_since: AtomicU64,
    /// Opened for reading only: a file another process removes or
    /// replaces stays readable as it was (a writer's later writes could
    /// land in another file than that snapshot, so a writer gets ESTALE).
    reads_only: bool,
    /// The file this handle told the engine it holds open, and where
    /// ([`SmallFileStore::hold`]); only a handle that `reads_only`.
    held: Mutex<Option<(StorePath, FileId)>>,
}

impl SmallFile {
    fn new(dir: StorePath, name: String, reads_only: bool) -> SmallFile {
        SmallFile {
            at: RwLock::new(Location { dir, name }),
            file: Mutex::new(None),
            size: Mutex::new(0),
            dirty: AtomicBool::new(false),
            rebind: AtomicBool::new(false),
            size_stale: AtomicBool::new(false),
            look_again: LookAgain::default(),
            unsynced_since: AtomicU64::new(0),
            reads_only,
            held: Mutex::new(None),
        }
    }

    /// A call on a file whose records (its create among them) a failed
    /// flush lost fails with that failure, an I/O error, rather than with
    /// what the loss left behind: a name this process no longer knows
    /// (ENOENT from ftruncate(2), which no file system answers).
    fn lost_or(&self, engine: &SmallFileStore, dir: &StorePath, error: Error) -> Error {
        let since = self.unsynced_since.load(Ordering::Acquire);
        if since == 0 || !matches!(error.kind(), ErrorKind::NotFound | ErrorKind::Stale) {
            return error;
        }
        engine.lost_since(dir, since).unwrap_or(error)
    }

    /// Before this handle pushes a record into `dir`'s container: the
    /// first since its last sync starts the range its sync answers for.
    fn will_push(&self, engine: &SmallFileStore, dir: &StorePath) -> Result<()> {
        if self.unsynced_since.load(Ordering::Acquire) == 0 {
            let next = engine.pushed(dir)? + 1;
            let _ = self.unsynced_since.compare_exchange(0, next, Ordering::AcqRel, Ordering::Acquire);
        }
        Ok(())
    }

    fn set_file(&self, engine: &SmallFileStore, dir: &StorePath, id: FileId) {
        *self.file.lock().unwrap_or_else(PoisonError::into_inner) = Some(id);
        self.hold(engine, dir, Some(id));
    }

    /// Tells the engine which file this handle has open (letting go of the
    /// one it held before), so the file stays readable here if another
    /// process removes or replaces it. Best effort: where the engine cannot
    /// note it, such a read is ESTALE, as before.
    fn hold(&self, engine: &SmallFileStore, dir: &StorePath, file: Option<FileId>) {
        if !self.reads_only {
            return;
        }
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let wanted = file.map(|id| (dir.clone(), id));
        if *held == wanted {
            return;
        }
        if let Some((dir, id)) = held.take() {
            engine.release(&dir, id);
        }
        if let Some((dir, id)) = wanted
            && engine.hold(&dir, id).is_ok()
        {
            *held = Some((dir, id));
        }
    }

    fn lock_size(&self) -> std::sync::MutexGuard<'_, u64> {
        self.size.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn at(&self) -> RwLockReadGuard<'_, Location> {
        self.at.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn path(&self) -> StorePath {
        let at = self.at();
        at.dir.join(&at.name).unwrap_or_else(|_| at.dir.clone())
    }

    /// The file now lives at `path`: the façade calls this before the
    /// handle's next call after a move.
    pub(crate) fn moved(&self, path: &StorePath) {
        if let Ok((dir, name)) = split(path) {
            let name = name.to_owned();
            *self.at.write().unwrap_or_else(PoisonError::into_inner) = Location { dir, name };
            self.rebind.store(true, Ordering::Release);
            // Record numbers are per directory container: the move's own
            // flush published (or reported) what this handle pushed.
            self.unsynced_since.store(0, Ordering::Release);
        }
    }

    /// The file this handle reads: its own, wherever other processes'
    /// renames took it (None: the one its name denotes).
    fn own_file(&self, engine: &SmallFileStore, at: &Location) -> Result<Option<FileId>> {
        if self.rebind.swap(false, Ordering::AcqRel) {
            // This process moved it: the name denotes it now.
            let id = engine.identity(&at.dir, &at.name)?;
            *self.file.lock().unwrap_or_else(PoisonError::into_inner) = id;
            self.hold(engine, &at.dir, id);
        }
        Ok(*self.file.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn context(&self) -> String {
        format!("/{}", self.path())
    }

    pub(crate) fn write(
        &self,
        engine: &SmallFileStore,
        buf: &[u8],
        offset: u64,
        writer: WriterId,
    ) -> Result<usize> {
        let at = self.at();
        let file = *self.file.lock().unwrap_or_else(PoisonError::into_inner);
        self.will_push(engine, &at.dir)?;
        engine
            .write_to(&at.dir, &at.name, file, writer, offset, buf)
            .map_err(|error| self.lost_or(engine, &at.dir, error))?;
        self.dirty.store(true, Ordering::Relaxed);
        if !buf.is_empty() {
            let mut size = self.lock_size();
            *size = (*size).max(offset + buf.len() as u64);
        }
        Ok(buf.len())
    }

    /// Reads what is published; a handle that wrote publishes first, so it
    /// reads its own writes.
    pub(crate) fn read(&self, engine: &SmallFileStore, buf: &mut [u8], offset: u64) -> Result<usize> {
        if self.dirty.load(Ordering::Relaxed) {
            self.sync(engine)?;
        }
        let at = self.at();
        // This handle's file, not whatever is at its name now.
        let file = self.own_file(engine, &at)?;
        let count = match engine.read_fresh(&at.dir, &at.name, file, offset, buf) {
            Err(error) if error.kind() == ErrorKind::Stale => {
                match self.read_retained(engine, &at, file, offset, buf)? {
                    Some(count) => return Ok(count),
                    // Removed by another process, and the view that had it is
                    // gone: at or past its end it still ends there.
                    None if offset >= *self.lock_size() => return Ok(0),
                    None => return Err(error),
                }
            }
            other => other?,
        };
        // At the end as cached: another process may have written past it.
        if count < buf.len() && self.look_again.due(engine.now_ns()) {
            engine.revalidate(&at.dir);
            self.size_stale.store(true, Ordering::Release);
            return match engine.read(&at.dir, &at.name, file, offset, buf) {
                // Removed by another process since: what it had.
                Err(error) if error.kind() == ErrorKind::Stale => Ok(count),
                other => other,
            };
        }
        Ok(count)
    }

    /// A read-only handle's file as it was when another process removed
    /// or replaced it (see [`SmallFileStore::hold`]); None where nothing
    /// is kept.
    fn read_retained(
        &self,
        engine: &SmallFileStore,
        at: &Location,
        file: Option<FileId>,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<Option<usize>> {
        match file {
            Some(file) if self.reads_only => engine.read_retained(&at.dir, &at.name, file, offset, buf),
            _ => Ok(None),
        }
    }

    /// The size tracked since the open, or after a [`refresh`](Self::refresh)
    /// the published one (this handle's own changes published first).
    pub(crate) fn size(&self, engine: &SmallFileStore) -> Result<u64> {
        if self.look_again.due(engine.now_ns()) {
            self.refresh(engine);
        }
        if self.size_stale.load(Ordering::Acquire) {
            if self.dirty.load(Ordering::Relaxed) {
                self.sync(engine)?;
            }
            let stat = {
                let at = self.at();
                self.own_file(engine, &at).and_then(|file| {
                    engine.stat_as(&at.dir, &at.name, file).or_else(|error| {
                        let kept = file.filter(|_| self.reads_only);
                        kept.and_then(|file| engine.stat_retained(&at.dir, &at.name, file)).ok_or(error)
                    })
                })
            };
            match stat {
                Ok(stat) => *self.lock_size() = stat.size,
                // Removed by another process: the size this handle knew.
                Err(error) if matches!(error.kind(), ErrorKind::NotFound | ErrorKind::Stale) => {}
                Err(error) => return Err(error.context(self.context())),
            }
            self.size_stale.store(false, Ordering::Release);
        }
        Ok(*self.lock_size())
    }

    pub(crate) fn truncate(&self, engine: &SmallFileStore, size: u64, writer: WriterId) -> Result<()> {
        let at = self.at();
        self.will_push(engine, &at.dir)?;
        engine
            .truncate(&at.dir, &at.name, writer, size)
            .map_err(|error| self.lost_or(engine, &at.dir, error))?;
        self.dirty.store(true, Ordering::Relaxed);
        self.size_stale.store(false, Ordering::Release);
        *self.lock_size() = size;
        Ok(())
    }

    /// What other processes published since becomes visible to the next
    /// read and size (a lock was granted). No I/O here: the directory's
    /// view is checked at its next use.
    pub(crate) fn refresh(&self, engine: &SmallFileStore) {
        engine.revalidate(&self.at().dir);
        self.size_stale.store(true, Ordering::Release);
    }

    /// Publishes (appends and fsyncs) this process's pending records of the
    /// file's directory.
    pub(crate) fn sync(&self, engine: &SmallFileStore) -> Result<()> {
        // Reported once, as fsync(2) reports a lost write-back: a failed
        // flush lost the records for good, and trying again would only
        // report it again, to every later read and sync of the handle.
        self.dirty.store(false, Ordering::Relaxed);
        let dir = self.at().dir.clone();
        let since = self.unsynced_since.swap(0, Ordering::AcqRel);
        engine.flush_writes_since(&dir, since).with_context(|| self.context())
    }

    /// At close a handle that changed anything publishes it (close-to-open).
    pub(crate) fn close(&self, engine: &SmallFileStore) -> Result<()> {
        let synced = if self.dirty.load(Ordering::Relaxed) { self.sync(engine) } else { Ok(()) };
        let dir = self.at().dir.clone();
        self.hold(engine, &dir, None);
        synced
    }
}
