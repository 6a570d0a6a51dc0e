//! How a file is opened and for which writer. Plain values shared by the
//! façade and every workload's open file; nothing here knows a layout.

use crate::error::{Error, Result};

/// Identifies a writer (a process, an MPI rank, a FUSE client): each gets
/// its own data and index log.
pub type WriterId = u64;

/// How a file is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpenFlags {
    pub read: bool,
    pub write: bool,
    pub create: bool,
    pub exclusive: bool,
    pub truncate: bool,
}

impl OpenFlags {
    pub const RDONLY: OpenFlags =
        OpenFlags { read: true, write: false, create: false, exclusive: false, truncate: false };
    pub const WRONLY: OpenFlags =
        OpenFlags { read: false, write: true, create: false, exclusive: false, truncate: false };
    pub const RDWR: OpenFlags =
        OpenFlags { read: true, write: true, create: false, exclusive: false, truncate: false };

    pub fn create(mut self) -> OpenFlags {
        self.create = true;
        self
    }

    pub fn exclusive(mut self) -> OpenFlags {
        self.exclusive = true;
        self
    }

    pub fn truncate(mut self) -> OpenFlags {
        self.truncate = true;
        self
    }

    /// From POSIX `open(2)` flags; flags plfs has no use for are ignored,
    /// an access mode that is not one of the three is refused.
    pub fn from_posix(flags: i32) -> Result<OpenFlags> {
        let mut result = match flags & libc::O_ACCMODE {
            libc::O_RDONLY => OpenFlags::RDONLY,
            libc::O_WRONLY => OpenFlags::WRONLY,
            libc::O_RDWR => OpenFlags::RDWR,
            other => return Err(Error::invalid(format!("open access mode {other:#o} is not valid"))),
        };
        result.create = flags & libc::O_CREAT != 0;
        result.exclusive = flags & libc::O_EXCL != 0;
        result.truncate = flags & libc::O_TRUNC != 0;
        if result.exclusive && !result.create {
            result.exclusive = false;
        }
        Ok(result)
    }
}
