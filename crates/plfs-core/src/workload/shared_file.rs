//! `workload: shared_file` (n-1): each logical file is a container (see
//! `container.rs`), written through per-writer logs and read through a
//! merged index. Handles of one file in one process share one open file
//! (one merged index per process): the state its opens share in the
//! façade's registry of open files ([`Opened::Shared`]).

use std::sync::Arc;

use super::plfs25_file;
use super::{
    AttributeChange, ContainerOps, FileDetail, Found, FoundFile, OpenRequest, Opened, SharedFile, Workload,
    WorkloadFile, foreign_file,
};
use crate::attr::{FileAttr, FileKind};
use crate::clock::{ns_to_system_time, system_time_to_ns};
use crate::container::{self, Inventory, Lookup, SizeSummary};
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
use crate::read_ahead::ReadAhead;
use crate::store::{EntryKind, StorePath};
use crate::stripes;

/// The open file every handle of one container shares in this process
/// (one merged index and one set of writers per file per process), kept in
/// the façade's registry while the file is open here.
#[derive(Debug)]
struct ContainerShared {
    file: OpenFile,
    mount: Arc<MountState>,
}

impl ContainerShared {
    /// What the registry calls at a container's first open here.
    fn make(mount: &Arc<MountState>, logical: &StorePath) -> Arc<dyn SharedFile> {
        Arc::new(ContainerShared {
            file: OpenFile::new(mount.clone(), logical.clone()),
            mount: mount.clone(),
        })
    }
}

impl SharedFile for ContainerShared {
    fn handle(self: Arc<Self>) -> Box<dyn WorkloadFile> {
        Box::new(ContainerFile { shared: self, ahead: ReadAhead::default() })
    }

    /// Close-to-open: a cached index is dropped, except by the first open
    /// after a collective one, which belongs to it.
    fn reopened(&self) {
        self.file.reopened();
    }

    fn seed(&self, index: LoadedIndex) {
        self.file.seed_read_state(index);
    }

    fn replaced_at_name(&self) -> bool {
        self.file.replaced_at_name()
    }

    /// Its merged index names logs under the old name.
    fn moved(&self, path: &StorePath) {
        self.file.set_path(path.clone());
        self.file.invalidate_read_state();
    }

    fn size_for_stat(&self, lazy: bool) -> Result<Option<SizeSummary>> {
        // Lazy stat (PLFS's default): a file this process is writing
        // answers from memory, without reading any index log; writes
        // other processes published since show after a refresh (a lock
        // granted) or the check `known_summary` makes once a second.
        if lazy && self.file.has_written() {
            return self.file.known_summary().map(Some);
        }
        // Records this process still buffers must reach the index logs
        // first, so the answer read there is exact.
        self.file.flush_index().map(|()| None)
    }

    fn close(&self) -> Result<()> {
        self.file.close()
    }
}

/// The container workload of one mount.
#[derive(Debug, Default)]
pub(super) struct Containers;

impl Containers {
    pub(super) fn new() -> Containers {
        Containers
    }

    /// Makes the container vanish in one rename on its canonical backend
    /// and returns; its pieces are deleted afterwards (`reclaim.rs`). Its
    /// shadows on other backends take the same hidden name first, and logs
    /// of another file that went along (one another process made at the
    /// name at once) return to the name. A crash before
    /// the deletion leaves hidden `.plfs-reclaim.*` directories, which `plfs
    /// recover` (of the directory or any file in it) finishes.
    fn remove_container(&self, mount: &MountState, logical: &StorePath) -> Result<()> {
        let (backend, _) = container::canonical(mount, logical);
        let store = mount.store(backend);
        let name = logical.file_name().ok_or_else(|| Error::new(ErrorKind::IsADirectory, "/"))?;
        let parent = logical.parent().unwrap_or_default();
        let doomed = parent.join(&layout::reclaim_name(name, mount.stamper.next(), mount.pid))?;
        store.rename(logical, &doomed)?;
        mount.log_cache.forget_under(logical);
        let gathered = crate::rename::gather_removed(mount, logical, &doomed, backend);
        // After an error, logs of another file may be left among the
        // removed one's on some backend: only the canonical container,
        // which holds none, goes now (the rest is left for `plfs recover`).
        let pieces = match &gathered {
            Ok(()) => mount.stores.clone(),
            Err(_) => vec![mount.stores[backend.0].clone()],
        };
        mount.reclaimer.defer(Box::new(move || {
            for store in pieces {
                if let Err(error) = container::remove_tree(store.as_ref(), &doomed) {
                    tracing::warn!(
                        "{}: {doomed}: deleting a removed file's pieces failed (`plfs recover` of its \
                         directory finishes it): {error}",
                        store.url()
                    );
                }
            }
        }));
        gathered
    }
}

/// The access record of a file this workload found.
fn access_of<'a>(path: &StorePath, file: &'a FoundFile) -> Result<&'a AccessRecord> {
    file.access_record().ok_or_else(|| foreign_file(path))
}

impl Workload for Containers {
    fn lookup(&self, mount: &MountState, path: &StorePath) -> Result<Found> {
        // A PLFS 2.5 container is a directory to plfs's lookup, or nothing
        // where 2.5 hashed its name to another backend.
        let lookup = match container::lookup(mount, path) {
            Ok(Lookup::Directory(metadata)) => match plfs25::find(mount, path)? {
                Some(found) => return Ok(plfs25_file::found(found)),
                None => Lookup::Directory(metadata),
            },
            Err(error) if error.kind() == ErrorKind::NotFound => {
                let found = match plfs25::find_elsewhere(mount, path)? {
                    Some(found) => Some(found),
                    // A migration's switch cut short between its renames.
                    None => plfs25::find_switching(mount, path)?,
                };
                return found.map(plfs25_file::found).ok_or(error);
            }
            other => other?,
        };
        Ok(match lookup {
            Lookup::File(access) => Found::File(FoundFile {
                mode: access.mode,
                uid: access.uid,
                gid: access.gid,
                detail: FileDetail::Access(access, None),
            }),
            Lookup::Directory(metadata) => Found::Directory(metadata),
            Lookup::Symlink(metadata) => Found::Symlink(metadata),
        })
    }

    /// A closed container's stat reads its summary alone (FORMAT.md §6.1).
    fn lookup_for_stat(&self, mount: &MountState, path: &StorePath) -> Result<Found> {
        match container::closed_summary(mount, path)? {
            Some(closed) => Ok(Found::File(FoundFile {
                mode: closed.access.mode,
                uid: closed.access.uid,
                gid: closed.access.gid,
                detail: FileDetail::Access(
                    closed.access,
                    Some(SizeSummary { eof: closed.eof, bytes: closed.bytes, last_stamp: closed.last_stamp }),
                ),
            })),
            None => self.lookup(mount, path),
        }
    }

    fn file_attr(
        &self,
        mount: &MountState,
        logical: &StorePath,
        file: &FoundFile,
        open: Option<&dyn SharedFile>,
    ) -> Result<FileAttr> {
        if let Some(found) = plfs25_file::detail(file) {
            return plfs25::attr(mount, logical, found);
        }
        let access = access_of(logical, file)?;
        let known = match open {
            Some(shared) => shared.size_for_stat(mount.tuning.lazy_stat)?,
            None => None,
        };
        // A closed summary found by the lookup holds while no writer has
        // written since; a writer in this process would have removed it.
        let summary = match (known, file.closed_size()) {
            (Some(summary), _) | (None, Some(summary)) => summary,
            (None, None) => container::size_from_meta(mount, logical)?,
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
    ) -> Result<Opened> {
        let (path, flags) = (request.shown, request.flags);
        let mut created = false;
        // Before creating: a 2.5 file of this name (possibly on another
        // backend than plfs would create it on) must not be shadowed.
        let existing25 = if flags.create { plfs25::find(mount, logical)? } else { None };
        if let Some(found) = existing25 {
            return plfs25_file::open(mount, logical, &found, request).map(Opened::Own);
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
                        return plfs25_file::open(mount, logical, found, request).map(Opened::Own);
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
        Ok(Opened::Shared {
            state: ContainerShared::make,
            truncate: flags.truncate && flags.write && !created,
        })
    }

    fn unlink(&self, mount: &MountState, path: &StorePath, file: &FoundFile) -> Result<()> {
        if let Some(found) = plfs25_file::detail(file) {
            return plfs25_file::unlink(mount, path, found);
        }
        self.remove_container(mount, path)
    }

    fn rename_file(
        &self,
        mount: &MountState,
        source: &StorePath,
        target: &StorePath,
        keep_replaced: bool,
    ) -> Result<Option<StorePath>> {
        if plfs25::find(mount, source)?.is_some() {
            return Err(plfs25::read_only(&format!("/{source}")));
        }
        crate::rename::move_file(mount, source, target, keep_replaced)
    }

    /// The last handle here of a file a rename replaced: it goes now.
    fn remove_replaced(&self, mount: &MountState, path: &StorePath) -> Result<()> {
        crate::rename::remove_everywhere(mount, path)
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
        let store = mount.store(backend);
        store.replace_protected(&paths.access(), &access.encode(), &public).context(path.to_owned())?;
        // After the record: a closer that read the old one and seals its
        // summary later finds the record changed and does not.
        container::drop_closed_summary(store, &paths).context(path.to_owned())?;
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

impl ContainerOps for Containers {
    fn is_damaged(&self, mount: &MountState, path: &StorePath) -> Result<bool> {
        container::is_damaged(mount, path)
    }

    fn remove_damaged(&self, mount: &MountState, path: &StorePath) -> Result<()> {
        self.remove_container(mount, path)
    }

    fn open_prepared(&self) -> Opened {
        Opened::Shared { state: ContainerShared::make, truncate: false }
    }

    fn inventory(&self, mount: &MountState, path: &StorePath) -> Result<Inventory> {
        container::inventory(mount, path)
    }
}

/// One open of a container: this process's shared open file. The façade
/// holds the registry entry's gate around every call.
#[derive(Debug)]
struct ContainerFile {
    shared: Arc<ContainerShared>,
    /// This open's read-ahead across a striped file's backends.
    ahead: ReadAhead,
}

impl WorkloadFile for ContainerFile {
    fn write(&self, buf: &[u8], offset: u64, writer: WriterId) -> Result<usize> {
        self.shared.file.write(buf, offset, writer)
    }

    fn read(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.shared.file.read_with(buf, offset, Some(&self.ahead))
    }

    fn prepare_reads(&self) -> Result<()> {
        self.shared.file.prepare_reads()
    }

    fn flush(&self) -> Result<()> {
        self.shared.file.flush_index()
    }

    fn sync(&self) -> Result<()> {
        self.shared.file.sync()
    }

    fn size(&self) -> Result<u64> {
        self.shared.file.size()
    }

    fn truncate(&self, size: u64, writer: WriterId) -> Result<()> {
        let file = &self.shared.file;
        let stamp = file.truncate(size, writer)?;
        if size == 0 {
            container::reclaim_before(&self.shared.mount, &file.path(), stamp)?;
        }
        Ok(())
    }

    fn refresh(&self) -> Result<()> {
        self.shared.file.refresh();
        Ok(())
    }

    /// The shared open file finishes at the last close (`SharedFile::close`).
    fn close(&self) -> Result<()> {
        Ok(())
    }
}
