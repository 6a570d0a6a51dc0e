//! `workload: shared_file` (n-1): each logical file is a container (see
//! `container.rs`), written through per-writer logs and read through a
//! merged index. Handles of one file in one process share one open file
//! (one merged index per process), so this workload keeps the registry of
//! open containers: only containers share an open file between handles.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard};

use super::plfs25_file;
use super::{
    AttributeChange, ContainerOps, FileDetail, Found, FoundFile, OpenRequest, Workload, WorkloadFile,
    foreign_file,
};
use crate::attr::{FileAttr, FileKind};
use crate::clock::{ns_to_system_time, system_time_to_ns};
use crate::container::{self, Inventory, Lookup};
use crate::error::{Error, ErrorKind, Result, ResultExt};
use crate::file::OpenFile;
use crate::format::access::AccessRecord;
use crate::layout::{self, ContainerPaths};
use crate::load::LoadedIndex;
use crate::mount_state::MountState;
use crate::open::WriterId;
use crate::placement::BackendId;
use crate::plfs25;
use crate::protection::{self, Pieces};
use crate::store::{EntryKind, Store, StorePath};
use crate::stripes;

/// The open file every handle of one container shares in this process,
/// behind its gate. A rename or unlink that moves the file's storage holds
/// the gate exclusively until the open file knows its new path; every call
/// through a handle holds it shared. Without it a read between the switch
/// and `set_path` loaded the index of the file that took the name (wrong
/// bytes) or chased logs that had moved (ENOENT on an open descriptor).
#[derive(Debug)]
struct Shared {
    gate: RwLock<()>,
    file: OpenFile,
}

impl Shared {
    fn gated(&self) -> RwLockReadGuard<'_, ()> {
        self.gate.read().unwrap_or_else(PoisonError::into_inner)
    }
}

#[derive(Debug)]
struct OpenEntry {
    shared: Arc<Shared>,
    opens: usize,
    /// A rename replaced this file while it was open here: it lives on at
    /// a hidden name until its last close here removes it.
    doomed: bool,
}

/// Who holds a logical path while its storage may change under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Claim {
    /// Opens looking the file up and registering (shared).
    Opening(usize),
    /// A rename or unlink moving the file (exclusive).
    Moving,
}

#[derive(Debug, Default)]
struct Tables {
    entries: HashMap<StorePath, OpenEntry>,
    claims: HashMap<StorePath, Claim>,
}

/// The containers open in this process, by logical path, and the paths a
/// rename or unlink is moving: an open of such a path waits for the move
/// (it then finds the file the name has after it), and a move waits for
/// the opens of its paths to register, so the entries of its paths hold
/// still while it runs.
#[derive(Debug, Default)]
struct Registry {
    tables: Mutex<Tables>,
    released: Condvar,
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until no move holds `path`, then holds it for an open.
    fn claim_open(&self, path: &StorePath) -> ClaimGuard<'_> {
        let mut tables = self.lock();
        loop {
            match tables.claims.get_mut(path) {
                None => {
                    tables.claims.insert(path.clone(), Claim::Opening(1));
                    break;
                }
                Some(Claim::Opening(count)) => {
                    *count += 1;
                    break;
                }
                Some(Claim::Moving) => {
                    tables = self.released.wait(tables).unwrap_or_else(PoisonError::into_inner);
                }
            }
        }
        ClaimGuard { registry: self, paths: vec![path.clone()] }
    }

    /// Waits until nothing holds any of `paths`, then holds them all for a
    /// move, and returns the shared files open at them now.
    fn claim_move(&self, paths: &[&StorePath]) -> (ClaimGuard<'_>, Vec<Arc<Shared>>) {
        let mut tables = self.lock();
        while paths.iter().any(|path| tables.claims.contains_key(*path)) {
            tables = self.released.wait(tables).unwrap_or_else(PoisonError::into_inner);
        }
        let mut held = Vec::with_capacity(paths.len());
        let mut open = Vec::new();
        for path in paths {
            if tables.claims.insert((*path).clone(), Claim::Moving).is_none() {
                held.push((*path).clone());
            }
            if let Some(entry) = tables.entries.get(*path) {
                open.push(entry.shared.clone());
            }
        }
        (ClaimGuard { registry: self, paths: held }, open)
    }
}

/// Paths held by an open or a move, given back when it drops.
struct ClaimGuard<'a> {
    registry: &'a Registry,
    paths: Vec<StorePath>,
}

impl Drop for ClaimGuard<'_> {
    fn drop(&mut self) {
        let mut tables = self.registry.lock();
        for path in &self.paths {
            match tables.claims.get_mut(path) {
                Some(Claim::Opening(count)) if *count > 1 => *count -= 1,
                _ => {
                    tables.claims.remove(path);
                }
            }
        }
        drop(tables);
        self.registry.released.notify_all();
    }
}

/// Holds the gates of the files a move claimed, exclusively: every call
/// through their handles finished, none starts until the move is done
/// (closes too, so the entries of the claimed paths hold still).
fn hold_gates(open: &[Arc<Shared>]) -> Vec<std::sync::RwLockWriteGuard<'_, ()>> {
    open.iter().map(|shared| shared.gate.write().unwrap_or_else(PoisonError::into_inner)).collect()
}

/// The container workload of one mount.
#[derive(Debug, Default)]
pub(super) struct SharedFile {
    registry: Arc<Registry>,
}

impl SharedFile {
    pub(super) fn new() -> SharedFile {
        SharedFile::default()
    }

    /// Counts one more open of `logical` in this process. Close-to-open:
    /// the open sees what other hosts synced before it, even when the file
    /// was already open here, so a cached index is replaced (by `index` when
    /// a collective open built one) or dropped — except by the first open
    /// after a collective one, which belongs to it. The caller holds an
    /// open claim on `logical`.
    fn register_open(
        &self,
        mount: &Arc<MountState>,
        logical: &StorePath,
        index: Option<LoadedIndex>,
    ) -> ContainerFile {
        let mut tables = self.registry.lock();
        let entry = tables.entries.entry(logical.clone()).or_insert_with(|| OpenEntry {
            shared: Arc::new(Shared {
                gate: RwLock::new(()),
                file: OpenFile::new(mount.clone(), logical.clone()),
            }),
            opens: 0,
            doomed: false,
        });
        match index {
            Some(index) => entry.shared.file.seed_read_state(index),
            None if entry.opens > 0 => entry.shared.file.reopened(),
            None => {}
        }
        entry.opens += 1;
        ContainerFile { shared: entry.shared.clone(), mount: mount.clone(), registry: self.registry.clone() }
    }

    /// Makes the container vanish in one rename on its canonical backend,
    /// then deletes its pieces everywhere.
    fn remove_container(&self, mount: &MountState, logical: &StorePath) -> Result<()> {
        let (backend, _) = container::canonical(mount, logical);
        let store = mount.store(backend);
        let name = logical.file_name().ok_or_else(|| Error::new(ErrorKind::IsADirectory, "/"))?;
        let parent = logical.parent().unwrap_or_default();
        let doomed = parent.join(&layout::removed_container_name(name, mount.stamper.next(), mount.pid))?;
        store.rename(logical, &doomed)?;
        mount.log_cache.forget_under(logical);
        let mut first_error = container::remove_tree(store, &doomed).err();
        for other in mount.placement.all_backends().filter(|other| *other != backend) {
            let other_store = mount.store(other);
            if let Err(error) = remove_shadow(other_store, logical) {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

fn remove_shadow(store: &dyn Store, logical: &StorePath) -> Result<()> {
    match store.metadata(logical) {
        Ok(metadata) if metadata.kind == EntryKind::Directory => container::remove_tree(store, logical),
        Ok(_) => Ok(()),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error),
    }
}

/// The access record of a file this workload found.
fn access_of<'a>(path: &StorePath, file: &'a FoundFile) -> Result<&'a AccessRecord> {
    file.access_record().ok_or_else(|| foreign_file(path))
}

impl Workload for SharedFile {
    fn lookup(&self, mount: &MountState, path: &StorePath) -> Result<Found> {
        // A PLFS 2.5 container is a directory to plfs's lookup, or nothing
        // where 2.5 hashed its name to another backend.
        let lookup = match container::lookup(mount, path) {
            Ok(Lookup::Directory(metadata)) => match plfs25::find(mount, path)? {
                Some(found) => return Ok(plfs25_file::found(found)),
                None => Lookup::Directory(metadata),
            },
            Err(error) if error.kind() == ErrorKind::NotFound => match plfs25::find_elsewhere(mount, path)? {
                Some(found) => return Ok(plfs25_file::found(found)),
                None => return Err(error),
            },
            other => other?,
        };
        Ok(match lookup {
            Lookup::File(access) => Found::File(FoundFile {
                mode: access.mode,
                uid: access.uid,
                gid: access.gid,
                detail: FileDetail::Access(access),
            }),
            Lookup::Directory(metadata) => Found::Directory(metadata),
            Lookup::Symlink(metadata) => Found::Symlink(metadata),
        })
    }

    fn file_attr(&self, mount: &MountState, logical: &StorePath, file: &FoundFile) -> Result<FileAttr> {
        if let Some(found) = plfs25_file::detail(file) {
            return plfs25::attr(mount, logical, found);
        }
        let access = access_of(logical, file)?;
        let open = self.registry.lock().entries.get(logical).map(|entry| entry.shared.clone());
        let gate = open.as_ref().map(|shared| shared.gated());
        let summary = match &open {
            // Lazy stat (PLFS's default): a file this process is writing
            // answers from memory, without reading any index log; writes
            // other processes made since it was opened show at close.
            Some(shared) if mount.tuning.lazy_stat && shared.file.has_written() => {
                shared.file.known_summary()?
            }
            Some(shared) => {
                // Records this process still buffers must reach the index
                // logs first, so the answer is exact.
                shared.file.flush_index()?;
                container::size_from_meta(mount, logical)?
            }
            None => container::size_from_meta(mount, logical)?,
        };
        drop(gate);
        let mtime_ns =
            if summary.last_stamp > access.times_stamp { summary.last_stamp } else { access.mtime_ns };
        Ok(FileAttr {
            kind: FileKind::File,
            size: summary.eof,
            blocks: summary.bytes.div_ceil(512),
            mode: access.mode,
            uid: access.uid,
            gid: access.gid,
            nlink: 1,
            atime: ns_to_system_time(access.atime_ns),
            mtime: ns_to_system_time(mtime_ns),
            ctime: ns_to_system_time(access.ctime_ns.max(mtime_ns)),
        })
    }

    fn open(
        &self,
        mount: &Arc<MountState>,
        logical: &StorePath,
        request: &OpenRequest<'_>,
    ) -> Result<Box<dyn WorkloadFile>> {
        let (path, flags) = (request.shown, request.flags);
        // The file at the name as of one instant: no rename or unlink of
        // the name runs until this open has registered.
        let _claim = self.registry.claim_open(logical);
        let mut created = false;
        // Before creating: a 2.5 file of this name (possibly on another
        // backend than plfs would create it on) must not be shadowed.
        let existing25 = if flags.create { plfs25::find(mount, logical)? } else { None };
        if let Some(found) = existing25 {
            return plfs25_file::open(mount, logical, &found, request);
        }
        if flags.create {
            if !flags.write && !flags.read {
                return Err(Error::invalid(format!("{path}: O_CREAT needs an access mode")));
            }
            let now = mount.stamper.now_ns();
            let access = AccessRecord {
                mode: request.mode & 0o7777,
                uid: request.owner.uid,
                gid: request.owner.gid,
                atime_ns: now,
                mtime_ns: now,
                ctime_ns: now,
                times_stamp: mount.stamper.next(),
            };
            let layout = stripes::layout_for_new_file(mount, logical).context(path.to_owned())?;
            created = container::create(mount, logical, &access, flags.exclusive, layout.as_ref())
                .context(path.to_owned())?;
        } else {
            match self.lookup(mount, logical).context(path.to_owned())? {
                Found::File(file) => {
                    if let Some(found) = plfs25_file::detail(&file) {
                        return plfs25_file::open(mount, logical, found, request);
                    }
                }
                Found::Directory(_) => return Err(Error::new(ErrorKind::IsADirectory, path.to_owned())),
                Found::Symlink(_) => {
                    return Err(Error::invalid(format!(
                        "{path}: is a symbolic link (the core does not follow links)"
                    )));
                }
            }
        }
        if !created && let Some(check_access) = request.check_access {
            // A container's logs are made at the first write and read at the
            // first read, so the backend's permissions would refuse this
            // process only then: open(2) refuses at the open.
            check_access()?;
        }
        let file = self.register_open(mount, logical, None);
        if flags.truncate
            && flags.write
            && !created
            && let Err(error) = file.truncate(0, request.writer)
        {
            // This open fails: it no longer counts as an open of the file.
            if let Err(closing) = file.close() {
                tracing::warn!("{}: closing an unclosed handle failed: {closing}", file.path());
            }
            return Err(error.context(path.to_owned()));
        }
        Ok(Box::new(file))
    }

    fn unlink(&self, mount: &MountState, path: &StorePath, file: &FoundFile) -> Result<()> {
        if let Some(found) = plfs25_file::detail(file) {
            return plfs25_file::unlink(mount, path, found);
        }
        let (_claim, open) = self.registry.claim_move(&[path]);
        let _gates = hold_gates(&open);
        // Handles still open here (an interface that does not hide such a
        // file first) keep their open file, detached: a file created at
        // the name later must get an open file of its own, never theirs.
        self.registry.lock().entries.remove(path);
        self.remove_container(mount, path)
    }

    fn rename_file(
        &self,
        mount: &MountState,
        source: &StorePath,
        target: &StorePath,
    ) -> Result<Option<String>> {
        if plfs25::find(mount, source)?.is_some() {
            return Err(plfs25::read_only(&format!("/{source}")));
        }
        // Both names are held and the handles of both files wait, from
        // before the storage switches until they know their new paths; the
        // entries of both names hold still meanwhile (see `Registry`).
        let (_claim, open) = self.registry.claim_move(&[source, target]);
        let _gates = hold_gates(&open);
        let open_here = self.registry.lock().entries.contains_key(target);
        let displaced = crate::rename::move_file(mount, source, target, open_here)?;
        let mut tables = self.registry.lock();
        let mut kept = None;
        // The replaced file's handles here follow it to its hidden name:
        // they must never read or write the new file.
        if let (true, Some(displaced)) = (open_here, displaced)
            && let Some(mut entry) = tables.entries.remove(target)
        {
            entry.shared.file.set_path(displaced.clone());
            entry.shared.file.invalidate_read_state();
            entry.doomed = true;
            kept = Some(format!("/{displaced}"));
            tables.entries.insert(displaced, entry);
        }
        if let Some(entry) = tables.entries.remove(source) {
            entry.shared.file.set_path(target.clone());
            // Its merged index names logs under the old name.
            entry.shared.file.invalidate_read_state();
            tables.entries.insert(target.clone(), entry);
        }
        Ok(kept)
    }

    fn replaces_atomically(&self) -> bool {
        true
    }

    fn set_file_attributes(
        &self,
        mount: &MountState,
        logical: &StorePath,
        path: &str,
        file: &FoundFile,
        change: &AttributeChange,
    ) -> Result<()> {
        if plfs25_file::detail(file).is_some() {
            return Err(plfs25::read_only(path));
        }
        let before = *access_of(logical, file)?;
        let mut access = before;
        match *change {
            AttributeChange::Mode(mode) => access.mode = mode & 0o7777,
            AttributeChange::Owner { uid, gid } => {
                access.uid = uid.unwrap_or(access.uid);
                access.gid = gid.unwrap_or(access.gid);
            }
            AttributeChange::Times { atime, mtime } => {
                if let Some(atime) = atime {
                    access.atime_ns = system_time_to_ns(atime);
                }
                if let Some(mtime) = mtime {
                    access.mtime_ns = system_time_to_ns(mtime);
                    access.times_stamp = mount.stamper.next();
                }
            }
        }
        access.ctime_ns = mount.stamper.now_ns();
        let (backend, paths) = container::canonical(mount, logical);
        let public = Pieces::of(&access).public;
        mount
            .store(backend)
            .replace_protected(&paths.access(), &access.encode(), &public)
            .context(path.to_owned())?;
        // The record first: a writer making a piece after this
        // sees the new mode; one that made it before, the walk fixes.
        if protection::differs(&before, &access) {
            protection::protect_container(mount, logical, &access).context(path.to_owned())?;
        }
        Ok(())
    }

    fn listed_kind(
        &self,
        mount: &MountState,
        dir: &StorePath,
        name: &str,
        kind: EntryKind,
        canonical: BackendId,
    ) -> Result<Option<FileKind>> {
        Ok(match kind {
            EntryKind::Symlink => Some(FileKind::Symlink),
            EntryKind::File => None,
            EntryKind::Directory => {
                // A damaged container (access file undecodable or lost)
                // is listed as the file it is; its stat fails naming it.
                let paths = ContainerPaths::new(dir.join(name)?);
                let store = mount.store(canonical);
                match store.metadata(&paths.access()) {
                    Ok(metadata) if metadata.kind == EntryKind::File => Some(FileKind::File),
                    Ok(_) => Some(FileKind::Directory),
                    Err(error) if error.kind() == ErrorKind::NotFound => {
                        if container::lost_access_file(store, &paths)?
                            || plfs25::find(mount, &dir.join(name)?)?.is_some()
                        {
                            Some(FileKind::File)
                        } else {
                            Some(FileKind::Directory)
                        }
                    }
                    Err(error) => return Err(error),
                }
            }
        })
    }

    fn listed_elsewhere(&self, mount: &MountState, dir: &StorePath, name: &str) -> Result<Option<FileKind>> {
        Ok(plfs25::find_elsewhere(mount, &dir.join(name)?)?.map(|_| FileKind::File))
    }

    fn containers(&self) -> Option<&dyn ContainerOps> {
        Some(self)
    }
}

impl ContainerOps for SharedFile {
    fn is_damaged(&self, mount: &MountState, path: &StorePath) -> Result<bool> {
        container::is_damaged(mount, path)
    }

    fn remove_damaged(&self, mount: &MountState, path: &StorePath) -> Result<()> {
        self.remove_container(mount, path)
    }

    fn open_prepared(
        &self,
        mount: &Arc<MountState>,
        path: &StorePath,
        index: LoadedIndex,
    ) -> Result<Box<dyn WorkloadFile>> {
        let _claim = self.registry.claim_open(path);
        Ok(Box::new(self.register_open(mount, path, Some(index))))
    }

    fn inventory(&self, mount: &MountState, path: &StorePath) -> Result<Inventory> {
        container::inventory(mount, path)
    }
}

/// One open of a container: this process's shared open file, counted in
/// the registry until this open's close.
#[derive(Debug)]
struct ContainerFile {
    shared: Arc<Shared>,
    mount: Arc<MountState>,
    registry: Arc<Registry>,
}

impl WorkloadFile for ContainerFile {
    fn path(&self) -> StorePath {
        self.shared.file.path()
    }

    fn write(&self, buf: &[u8], offset: u64, writer: WriterId) -> Result<usize> {
        let _gate = self.shared.gated();
        self.shared.file.write(buf, offset, writer)
    }

    fn read(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        let _gate = self.shared.gated();
        self.shared.file.read(buf, offset)
    }

    fn flush(&self) -> Result<()> {
        let _gate = self.shared.gated();
        self.shared.file.flush_index()
    }

    fn sync(&self) -> Result<()> {
        let _gate = self.shared.gated();
        self.shared.file.sync()
    }

    fn size(&self) -> Result<u64> {
        let _gate = self.shared.gated();
        self.shared.file.size()
    }

    fn truncate(&self, size: u64, writer: WriterId) -> Result<()> {
        let _gate = self.shared.gated();
        let file = &self.shared.file;
        let stamp = file.truncate(size, writer)?;
        if size == 0 {
            container::reclaim_before(&self.mount, &file.path(), stamp)?;
        }
        Ok(())
    }

    fn close(&self) -> Result<()> {
        // Through to the last close's size records: they go into the
        // container at the file's path, which no move may change meanwhile.
        let _gate = self.shared.gated();
        let file = &self.shared.file;
        let mut doomed = None;
        let last = {
            let mut tables = self.registry.lock();
            let path = file.path();
            match tables.entries.get_mut(&path) {
                Some(entry) if Arc::ptr_eq(&entry.shared, &self.shared) => {
                    entry.opens -= 1;
                    let last = entry.opens == 0;
                    if last {
                        doomed =
                            tables.entries.remove(&path).is_some_and(|entry| entry.doomed).then_some(path);
                    }
                    last
                }
                // Detached by an unlink: every close finishes what it can.
                _ => true,
            }
        };
        if !last {
            return Ok(());
        }
        let closed = file.close();
        // The last handle of a file a rename replaced: it goes now.
        let removed = doomed.map_or(Ok(()), |path| crate::rename::remove_everywhere(&self.mount, &path));
        closed.and(removed)
    }
}
