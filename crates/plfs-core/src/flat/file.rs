//! An open n-n file: one store handle, positional reads and writes straight
//! through to the backend file (pread/pwrite), no buffering and no index.

use crate::error::{Error, ErrorKind, Result, ResultExt};
use crate::store::{RandomWriter, ReadHandle, StorePath};

#[derive(Debug)]
enum Handle {
    Read(Box<dyn ReadHandle>),
    Write(Box<dyn RandomWriter>),
}

/// One open of a plain backend file. Each open has its own descriptor, so
/// handles of one file share nothing but the backend file itself, whose
/// bytes every handle sees at once.
#[derive(Debug)]
pub(crate) struct FlatFile {
    /// The logical path at open, for error messages.
    path: StorePath,
    handle: Handle,
}

impl FlatFile {
    pub(crate) fn writable(path: StorePath, file: Box<dyn RandomWriter>) -> FlatFile {
        FlatFile { path, handle: Handle::Write(file) }
    }

    pub(crate) fn readable(path: StorePath, file: Box<dyn ReadHandle>) -> FlatFile {
        FlatFile { path, handle: Handle::Read(file) }
    }

    fn writer(&self) -> Result<&dyn RandomWriter> {
        match &self.handle {
            Handle::Write(file) => Ok(file.as_ref()),
            Handle::Read(_) => {
                Err(Error::new(ErrorKind::BadHandle, format!("/{}: not open for writing", self.path)))
            }
        }
    }

    fn reader(&self) -> &dyn ReadHandle {
        match &self.handle {
            Handle::Write(file) => file.as_ref(),
            Handle::Read(file) => file.as_ref(),
        }
    }

    pub(crate) fn write(&self, buf: &[u8], offset: u64) -> Result<usize> {
        self.writer()?.write_at(buf, offset).with_context(|| format!("/{}", self.path))?;
        Ok(buf.len())
    }

    /// Fills `buf` from `offset`; short only at the end of the file. A
    /// store's read is short only at the end of the object, so one short
    /// read ends it: no second call to learn that nothing follows (a plain
    /// file's read(2) of a small file is one pread too).
    pub(crate) fn read(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.reader().read_at(buf, offset).with_context(|| format!("/{}", self.path))
    }

    pub(crate) fn size(&self) -> Result<u64> {
        self.reader().len().with_context(|| format!("/{}", self.path))
    }

    pub(crate) fn truncate(&self, size: u64) -> Result<()> {
        self.writer()?.set_len(size).with_context(|| format!("/{}", self.path))
    }

    /// fsync of the backend file; nothing to do for a read-only open.
    pub(crate) fn sync(&self) -> Result<()> {
        match &self.handle {
            Handle::Write(file) => file.sync().with_context(|| format!("/{}", self.path)),
            Handle::Read(_) => Ok(()),
        }
    }
}
