//! An open n-n file: one store handle, positional reads and writes straight
//! through to the backend file (pread/pwrite), no buffering and no index.

use std::sync::{PoisonError, RwLock, RwLockReadGuard};

use crate::error::{Error, ErrorKind, Result, ResultExt};
use crate::mount_state::MountState;
use crate::placement::BackendId;
use crate::store::{RandomWriter, ReadHandle, StorePath, WriteOpen};

#[derive(Debug)]
enum Handle {
    Read(Box<dyn ReadHandle>),
    Write(Box<dyn RandomWriter>),
    /// A rename moved the file to another backend and reopening it there
    /// failed: every later call says so, none reaches the old copy.
    Lost(String),
}

/// Where the file is and its open backend file.
#[derive(Debug)]
struct At {
    /// The logical path now, for error messages and moves.
    path: StorePath,
    backend: BackendId,
    handle: Handle,
}

/// One open of a plain backend file. Each open has its own descriptor, so
/// handles of one file share nothing but the backend file itself, whose
/// bytes every handle sees at once.
#[derive(Debug)]
pub(crate) struct FlatFile {
    at: RwLock<At>,
}

impl FlatFile {
    pub(crate) fn writable(path: StorePath, backend: BackendId, file: Box<dyn RandomWriter>) -> FlatFile {
        FlatFile { at: RwLock::new(At { path, backend, handle: Handle::Write(file) }) }
    }

    pub(crate) fn readable(path: StorePath, backend: BackendId, file: Box<dyn ReadHandle>) -> FlatFile {
        FlatFile { at: RwLock::new(At { path, backend, handle: Handle::Read(file) }) }
    }

    fn at(&self) -> RwLockReadGuard<'_, At> {
        self.at.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn write(&self, buf: &[u8], offset: u64) -> Result<usize> {
        let at = self.at();
        at.writer()?.write_at(buf, offset).with_context(|| format!("/{}", at.path))?;
        Ok(buf.len())
    }

    /// Fills `buf` from `offset`; short only at the end of the file. A
    /// store's read is short only at the end of the object, so one short
    /// read ends it: no second call to learn that nothing follows (a plain
    /// file's read(2) of a small file is one pread too).
    pub(crate) fn read(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        let at = self.at();
        at.reader()?.read_at(buf, offset).with_context(|| format!("/{}", at.path))
    }

    pub(crate) fn size(&self) -> Result<u64> {
        let at = self.at();
        at.reader()?.len().with_context(|| format!("/{}", at.path))
    }

    pub(crate) fn truncate(&self, size: u64) -> Result<()> {
        let at = self.at();
        at.writer()?.set_len(size).with_context(|| format!("/{}", at.path))
    }

    /// fsync of the backend file; nothing to do for a read-only open.
    pub(crate) fn sync(&self) -> Result<()> {
        let at = self.at();
        match &at.handle {
            Handle::Write(file) => file.sync().with_context(|| format!("/{}", at.path)),
            Handle::Read(_) => Ok(()),
            Handle::Lost(why) => Err(Error::new(ErrorKind::Io, why.clone())),
        }
    }

    /// The file now lives at `path`. A rename to a name on another backend
    /// copied it there and removed this copy, so the backend file is opened
    /// again where it is now; writes to the old descriptor would be lost.
    /// The move held every call of this handle back while it copied.
    pub(crate) fn moved(&self, mount: &MountState, path: &StorePath) {
        let mut at = self.at.write().unwrap_or_else(PoisonError::into_inner);
        let backend = super::backend(mount, path);
        if backend == at.backend {
            at.path = path.clone();
            return;
        }
        let store = mount.store(backend);
        let reopened = match at.handle {
            Handle::Write(_) => store.open_write(path, WriteOpen::Existing).map(Handle::Write),
            Handle::Read(_) | Handle::Lost(_) => store.open_read(path).map(Handle::Read),
        };
        at.handle = reopened.unwrap_or_else(|error| {
            Handle::Lost(format!(
                "/{path}: moved to {} by a rename, and reopening it there failed: {error}",
                store.url()
            ))
        });
        at.path = path.clone();
        at.backend = backend;
    }
}

impl At {
    fn writer(&self) -> Result<&dyn RandomWriter> {
        match &self.handle {
            Handle::Write(file) => Ok(file.as_ref()),
            Handle::Read(_) => {
                Err(Error::new(ErrorKind::BadHandle, format!("/{}: not open for writing", self.path)))
            }
            Handle::Lost(why) => Err(Error::new(ErrorKind::Io, why.clone())),
        }
    }

    fn reader(&self) -> Result<&dyn ReadHandle> {
        match &self.handle {
            Handle::Write(file) => Ok(file.as_ref()),
            Handle::Read(file) => Ok(file.as_ref()),
            Handle::Lost(why) => Err(Error::new(ErrorKind::Io, why.clone())),
        }
    }
}
