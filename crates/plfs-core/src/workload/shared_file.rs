//! `workload: shared_file` (n-1): each logical file is a container (see
//! `container.rs`), written through per-writer logs and read through a
//! merged index. Handles of one file in one process share one open file
//! (one merged index per process), so this workload keeps the registry of
//! open containers: only containers share an open file between handles.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

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
use crate::protection::{self, Pieces};
use crate::store::{EntryKind, Store, StorePath};
use crate::stripes;

#[derive(Debug)]
struct OpenEntry {
    file: Arc<OpenFile>,
    opens: usize,
    /// A rename replaced this file while it was open here: it lives on at
    /// a hidden name until its last close here removes it.
    doomed: bool,
}

/// The containers open in this process, by logical path.
#[derive(Debug, Default)]
struct Registry(Mutex<HashMap<StorePath, OpenEntry>>);

impl Registry {
    fn lock(&self) -> MutexGuard<'_, HashMap<StorePath, OpenEntry>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
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
    /// after a collective one, which belongs to it.
    fn register_open(
        &self,
        mount: &Arc<MountState>,
        logical: &StorePath,
        index: Option<LoadedIndex>,
    ) -> ContainerFile {
        let mut registry = self.registry.lock();
        let entry = registry.entry(logical.clone()).or_insert_with(|| OpenEntry {
            file: Arc::new(OpenFile::new(mount.clone(), logical.clone())),
            opens: 0,
            doomed: false,
        });
        match index {
            Some(index) => entry.file.seed_read_state(index),
            None if entry.opens > 0 => entry.file.reopened(),
            None => {}
        }
        entry.opens += 1;
        ContainerFile { file: entry.file.clone(), mount: mount.clone(), registry: self.registry.clone() }
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
        Ok(match container::lookup(mount, path)? {
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
        let access = access_of(logical, file)?;
        let open = self.registry.lock().get(logical).map(|entry| entry.file.clone());
        let summary = match open {
            // Lazy stat (PLFS's default): a file this process is writing
            // answers from memory, without reading any index log; writes
            // other processes made since it was opened show at close.
            Some(file) if mount.tuning.lazy_stat && file.has_written() => file.known_summary()?,
            Some(file) => {
                // Records this process still buffers must reach the index
                // logs first, so the answer is exact.
                file.flush_index()?;
                container::size_from_meta(mount, logical)?
            }
            None => container::size_from_meta(mount, logical)?,
        };
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
        let mut created = false;
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
            match container::lookup(mount, logical).context(path.to_owned())? {
                Lookup::File(_) => {}
                Lookup::Directory(_) => return Err(Error::new(ErrorKind::IsADirectory, path.to_owned())),
                Lookup::Symlink(_) => {
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

    fn unlink(&self, mount: &MountState, path: &StorePath, _file: &FoundFile) -> Result<()> {
        self.remove_container(mount, path)
    }

    fn rename_file(
        &self,
        mount: &MountState,
        source: &StorePath,
        target: &StorePath,
    ) -> Result<Option<String>> {
        let open_here = self.registry.lock().contains_key(target);
        let displaced = crate::rename::move_file(mount, source, target, open_here)?;
        let mut registry = self.registry.lock();
        let mut kept = None;
        // The replaced file's handles here follow it to its hidden name:
        // they must never read or write the new file. (A file opened here
        // only while the rename ran found the name switched: it stays.)
        let mut orphan = None;
        if let (true, Some(displaced)) = (open_here, displaced) {
            match registry.remove(target) {
                Some(mut entry) => {
                    entry.file.set_path(displaced.clone());
                    entry.file.invalidate_read_state();
                    entry.doomed = true;
                    kept = Some(format!("/{displaced}"));
                    registry.insert(displaced, entry);
                }
                // Its last handle closed while the rename ran.
                None => orphan = Some(displaced),
            }
        }
        if let Some(entry) = registry.remove(source) {
            entry.file.set_path(target.clone());
            registry.insert(target.clone(), entry);
        }
        drop(registry);
        if let Some(orphan) = orphan {
            crate::rename::remove_everywhere(mount, &orphan)?;
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
                        if container::lost_access_file(store, &paths)? {
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
    file: Arc<OpenFile>,
    mount: Arc<MountState>,
    registry: Arc<Registry>,
}

impl WorkloadFile for ContainerFile {
    fn path(&self) -> StorePath {
        self.file.path()
    }

    fn write(&self, buf: &[u8], offset: u64, writer: WriterId) -> Result<usize> {
        self.file.write(buf, offset, writer)
    }

    fn read(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.file.read(buf, offset)
    }

    fn flush(&self) -> Result<()> {
        self.file.flush_index()
    }

    fn sync(&self) -> Result<()> {
        self.file.sync()
    }

    fn size(&self) -> Result<u64> {
        self.file.size()
    }

    fn truncate(&self, size: u64, writer: WriterId) -> Result<()> {
        let stamp = self.file.truncate(size, writer)?;
        if size == 0 {
            container::reclaim_before(&self.mount, &self.file.path(), stamp)?;
        }
        Ok(())
    }

    fn close(&self) -> Result<()> {
        let file = &self.file;
        let mut doomed = None;
        let last = {
            let mut registry = self.registry.lock();
            let path = file.path();
            match registry.get_mut(&path) {
                Some(entry) if Arc::ptr_eq(&entry.file, file) => {
                    entry.opens -= 1;
                    let last = entry.opens == 0;
                    if last {
                        doomed = registry.remove(&path).is_some_and(|entry| entry.doomed).then_some(path);
                    }
                    last
                }
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
