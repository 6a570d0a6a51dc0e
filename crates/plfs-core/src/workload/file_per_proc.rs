//! `workload: file_per_proc` (n-n): each logical file is one plain file on
//! the backend its name hashes to (see `flat/`). No container, index or
//! logs, so none of the container capabilities.

use std::sync::Arc;

use super::{
    AttributeChange, FileDetail, Found, FoundFile, OpenRequest, Opened, SharedFile, Workload, WorkloadFile,
    foreign_file,
};
use crate::attr::{FileAttr, FileKind};
use crate::error::{Error, ErrorKind, Result, ResultExt};
use crate::flat::{self, FlatFile};
use crate::mount_state::MountState;
use crate::open::WriterId;
use crate::placement::BackendId;
use crate::store::{EntryKind, Metadata, StorePath};

/// The n-n workload of one mount.
#[derive(Debug)]
pub(super) struct FilePerProc;

impl FilePerProc {
    /// Fails, naming the backend, unless every backend can write in place.
    pub(super) fn new(mount: &MountState) -> Result<FilePerProc> {
        flat::check_backends(&mount.stores.iter().map(|store| store.as_ref()).collect::<Vec<_>>())?;
        Ok(FilePerProc)
    }
}

fn metadata_of<'a>(path: &StorePath, file: &'a FoundFile) -> Result<&'a Metadata> {
    match &file.detail {
        FileDetail::Plain(metadata) => Ok(metadata),
        _ => Err(foreign_file(path)),
    }
}

impl Workload for FilePerProc {
    fn lookup(&self, mount: &MountState, path: &StorePath) -> Result<Found> {
        let metadata = flat::lookup(mount, path)?;
        Ok(match metadata.kind {
            EntryKind::File => {
                let attr = flat::file_attr(mount, &metadata);
                Found::File(FoundFile {
                    mode: attr.mode,
                    uid: attr.uid,
                    gid: attr.gid,
                    detail: FileDetail::Plain(metadata),
                })
            }
            EntryKind::Directory => Found::Directory(metadata),
            EntryKind::Symlink => Found::Symlink(metadata),
        })
    }

    fn file_attr(
        &self,
        mount: &MountState,
        path: &StorePath,
        file: &FoundFile,
        _open: Option<&dyn SharedFile>,
    ) -> Result<FileAttr> {
        Ok(flat::file_attr(mount, metadata_of(path, file)?))
    }

    fn open(&self, mount: &Arc<MountState>, path: &StorePath, request: &OpenRequest<'_>) -> Result<Opened> {
        let file = flat::open(mount, path, request.flags, request.mode, request.owner)
            .context(request.shown.to_owned())?;
        Ok(Opened::Own(Box::new(PlainFile { file, mount: mount.clone() })))
    }

    fn unlink(&self, mount: &MountState, path: &StorePath, _file: &FoundFile) -> Result<()> {
        mount.store(flat::backend(mount, path)).remove_file(path)
    }

    fn rename_file(
        &self,
        mount: &MountState,
        source: &StorePath,
        target: &StorePath,
        _keep_replaced: bool,
    ) -> Result<Option<StorePath>> {
        flat::rename_file(mount, source, target).map(|()| None)
    }

    /// A file unlinked while open, at its hidden name (on the backend of
    /// its old name, so the open descriptors are still its).
    fn remove_replaced(&self, mount: &MountState, path: &StorePath) -> Result<()> {
        mount.store(flat::backend(mount, path)).remove_file(path)
    }

    fn replaces_atomically(&self) -> bool {
        false
    }

    /// One rename(2), or a swap of the two entries where the store can.
    fn replace_file(
        &self,
        mount: &MountState,
        source: &StorePath,
        target: &StorePath,
        keep: Option<&StorePath>,
    ) -> Result<bool> {
        flat::replace_file(mount, source, target, keep)
    }

    /// An n-n file keeps its attributes on its one backend file.
    fn set_file_attributes(
        &self,
        mount: &MountState,
        logical: &StorePath,
        path: &str,
        _file: &FoundFile,
        change: &AttributeChange,
    ) -> Result<()> {
        let store = mount.store(flat::backend(mount, logical));
        change.apply_to_store(store, logical).with_context(|| format!("{}: {path}", store.url()))
    }

    fn listed_kind(
        &self,
        _mount: &MountState,
        _dir: &StorePath,
        _name: &str,
        kind: EntryKind,
        _canonical: BackendId,
    ) -> Result<Option<FileKind>> {
        Ok(Some(match kind {
            EntryKind::File => FileKind::File,
            EntryKind::Directory => FileKind::Directory,
            EntryKind::Symlink => FileKind::Symlink,
        }))
    }

    fn plain_file_backend(&self, mount: &MountState, path: &StorePath) -> Option<BackendId> {
        Some(flat::backend(mount, path))
    }

    fn no_container(&self, path: &str) -> Error {
        Error::new(
            ErrorKind::Unsupported,
            format!(
                "{path}: an n-n (file_per_proc) file is one plain file with no container, index or logs \
                 (plfs query shows where it lives)"
            ),
        )
    }
}

/// One open of an n-n file: its own backend descriptor, and the mount
/// where a rename may move it to another backend.
#[derive(Debug)]
struct PlainFile {
    file: FlatFile,
    mount: Arc<MountState>,
}

impl WorkloadFile for PlainFile {
    /// An n-n file has no logs: the writer is not recorded.
    fn write(&self, buf: &[u8], offset: u64, _writer: WriterId) -> Result<usize> {
        self.file.write(buf, offset)
    }

    fn read(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.file.read(buf, offset)
    }

    /// Nothing is buffered.
    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.file.sync()
    }

    fn size(&self) -> Result<u64> {
        self.file.size()
    }

    fn truncate(&self, size: u64, _writer: WriterId) -> Result<()> {
        self.file.truncate(size)
    }

    /// Nothing is cached: the backend file is the file.
    fn refresh(&self) -> Result<()> {
        Ok(())
    }

    /// The descriptor closes when the handle is dropped.
    fn close(&self) -> Result<()> {
        Ok(())
    }

    fn moved(&self, path: &StorePath) {
        self.file.moved(&self.mount, path);
    }
}
