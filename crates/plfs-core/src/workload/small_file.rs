//! `workload: small_file` (1-N): each logical file is a name in its
//! directory's container, kept by one small-file engine per mount (see
//! `smallfile/mount.rs` for visibility and what the engine keeps). No
//! container of its own per file, so none of the container capabilities.

use std::sync::Arc;

use super::{
    AttributeChange, FileDetail, Found, FoundFile, OpenRequest, Opened, SharedFile, Workload, WorkloadFile,
    foreign_file,
};
use crate::attr::{FileAttr, FileKind};
use crate::error::{Error, ErrorKind, Result, ResultExt};
use crate::mount_state::MountState;
use crate::open::WriterId;
use crate::placement::BackendId;
use crate::smallfile::mount::{self as small, SmallLookup};
use crate::smallfile::{FileStat, SmallFileOptions, SmallFileStore, SmallMount};
use crate::store::{EntryKind, StorePath};

/// The small-file workload of one mount: its engine, which every open
/// small file of the mount shares.
#[derive(Debug)]
pub(super) struct SmallFile {
    engine: Arc<SmallMount>,
}

impl SmallFile {
    /// One engine over all of `mount`'s backends; `max_containers` bounds
    /// its open directory containers (0: the engine's default).
    pub(super) fn new(mount: &MountState, max_containers: usize) -> Result<SmallFile> {
        let mut options = SmallFileOptions::new(mount.stamper.clone(), mount.pid, mount.hostname.clone());
        if let Some(max) = std::num::NonZeroUsize::new(max_containers) {
            options.max_containers = max;
        }
        let engine = SmallFileStore::new(mount.stores.clone(), options)?;
        Ok(SmallFile { engine: Arc::new(SmallMount { engine }) })
    }

    fn engine(&self) -> &SmallFileStore {
        &self.engine.engine
    }
}

fn stat_of<'a>(path: &StorePath, file: &'a FoundFile) -> Result<&'a FileStat> {
    match &file.detail {
        FileDetail::Small(stat) => Ok(stat),
        _ => Err(foreign_file(path)),
    }
}

impl Workload for SmallFile {
    fn lookup(&self, mount: &MountState, path: &StorePath) -> Result<Found> {
        Ok(match small::lookup(mount, self.engine(), path)? {
            SmallLookup::File(stat) => Found::File(FoundFile {
                mode: small::SMALL_FILE_MODE,
                uid: mount.uid,
                gid: mount.gid,
                detail: FileDetail::Small(stat),
            }),
            SmallLookup::Directory(metadata) => Found::Directory(metadata),
            SmallLookup::Symlink(metadata) => Found::Symlink(metadata),
        })
    }

    fn file_attr(
        &self,
        mount: &MountState,
        path: &StorePath,
        file: &FoundFile,
        _open: Option<&dyn SharedFile>,
    ) -> Result<FileAttr> {
        Ok(small::file_attr(mount, stat_of(path, file)?))
    }

    fn open(&self, mount: &Arc<MountState>, path: &StorePath, request: &OpenRequest<'_>) -> Result<Opened> {
        let file = small::open(mount, self.engine(), path, request.flags, request.writer)
            .context(request.shown.to_owned())?;
        Ok(Opened::Own(Box::new(SmallHandle { file, engine: self.engine.clone() })))
    }

    fn unlink(&self, mount: &MountState, path: &StorePath, _file: &FoundFile) -> Result<()> {
        small::unlink(mount, self.engine(), path)
    }

    fn rename_file(
        &self,
        mount: &MountState,
        source: &StorePath,
        target: &StorePath,
        _keep_replaced: bool,
    ) -> Result<Option<StorePath>> {
        small::rename_file(mount, self.engine(), source, target, None).map(|()| None)
    }

    /// A file unlinked while open, at its hidden name.
    fn remove_replaced(&self, mount: &MountState, path: &StorePath) -> Result<()> {
        small::unlink(mount, self.engine(), path)
    }

    fn hidden_files(&self, _mount: &MountState, dir: &StorePath) -> Result<Vec<String>> {
        small::hidden(self.engine(), dir)
    }

    fn replaces_atomically(&self) -> bool {
        false
    }

    /// A rename record replaces the target for every reader at once:
    /// within a directory the record moves the file, between directories
    /// it moves the copy published beside the target. A target open here
    /// moves to `keep` in the same name frame, since its handles read it
    /// by an identity a replacing record would end.
    fn replace_file(
        &self,
        mount: &MountState,
        source: &StorePath,
        target: &StorePath,
        keep: Option<&StorePath>,
    ) -> Result<bool> {
        small::rename_file(mount, self.engine(), source, target, keep).map(|()| true)
    }

    /// The engine keeps no modes or owners: chmod and chown are accepted
    /// and ignored; times are a record.
    fn set_file_attributes(
        &self,
        mount: &MountState,
        logical: &StorePath,
        path: &str,
        file: &FoundFile,
        change: &AttributeChange,
    ) -> Result<()> {
        match *change {
            AttributeChange::Times { atime, mtime } => {
                small::utime(mount, self.engine(), logical, stat_of(logical, file)?, atime, mtime)
                    .context(path.to_owned())
            }
            AttributeChange::Mode(_) | AttributeChange::Owner { .. } => Ok(()),
        }
    }

    /// Backend entries are directories (and symlinks); a plain file there
    /// is not a small file.
    fn listed_kind(
        &self,
        _mount: &MountState,
        _dir: &StorePath,
        _name: &str,
        kind: EntryKind,
        _canonical: BackendId,
    ) -> Result<Option<FileKind>> {
        Ok(match kind {
            EntryKind::File => None,
            EntryKind::Directory => Some(FileKind::Directory),
            EntryKind::Symlink => Some(FileKind::Symlink),
        })
    }

    /// The directory's small files, from this process's view of its
    /// container.
    fn unlisted_files(&self, _mount: &MountState, dir: &StorePath) -> Result<Vec<String>> {
        small::list(self.engine(), dir)
    }

    /// A small file of a name has no backend entry for a mkdir to collide with.
    fn files_are_backend_entries(&self) -> bool {
        false
    }

    /// The directory's container holds no live file once it is empty; it
    /// is published and closed here before it moves or goes.
    fn release_directory(&self, _mount: &MountState, dir: &StorePath) -> Result<()> {
        small::close_under(self.engine(), dir)
    }

    fn flush_writes(&self, _mount: &MountState, dir: &StorePath) -> Result<()> {
        small::flush_writes(self.engine(), dir)
    }

    fn invalidate_read_cache(&self, _mount: &MountState, dir: &StorePath) {
        small::invalidate_read_cache(self.engine(), dir);
    }

    fn no_container(&self, path: &str) -> Error {
        Error::new(
            ErrorKind::Unsupported,
            format!(
                "{path}: a small_file (1-n) file is a name in its directory's container, not a container"
            ),
        )
    }
}

/// One open of a small file, with the engine it lives in.
#[derive(Debug)]
struct SmallHandle {
    file: small::SmallFile,
    engine: Arc<SmallMount>,
}

impl WorkloadFile for SmallHandle {
    fn write(&self, buf: &[u8], offset: u64, writer: WriterId) -> Result<usize> {
        self.file.write(&self.engine.engine, buf, offset, writer)
    }

    fn read(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.file.read(&self.engine.engine, buf, offset)
    }

    /// Publishes the file's directory.
    fn flush(&self) -> Result<()> {
        self.file.sync(&self.engine.engine)
    }

    /// Publishes the file's directory (`flush_writes`).
    fn sync(&self) -> Result<()> {
        self.file.sync(&self.engine.engine)
    }

    fn size(&self) -> Result<u64> {
        self.file.size(&self.engine.engine)
    }

    fn refresh(&self) -> Result<()> {
        self.file.refresh(&self.engine.engine);
        Ok(())
    }

    fn truncate(&self, size: u64, writer: WriterId) -> Result<()> {
        self.file.truncate(&self.engine.engine, size, writer)
    }

    /// Close-to-open: what this handle changed is published.
    fn close(&self) -> Result<()> {
        self.file.close(&self.engine.engine)
    }

    fn moved(&self, path: &StorePath) {
        self.file.moved(path);
    }
}
