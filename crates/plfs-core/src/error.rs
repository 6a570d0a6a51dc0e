//! One error type for the whole core: a small semantic kind plus the context
//! (path, backend, offset) gathered on the way up, and the underlying cause.
//!
//! Interface crates (FUSE, C API, preload) map errors to errno through
//! [`ErrorKind::errno`] and nothing else, so every edge reports the same code
//! for the same failure.

use std::fmt;
use std::io;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, at the level a caller can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    NotFound,
    AlreadyExists,
    NotADirectory,
    IsADirectory,
    DirectoryNotEmpty,
    PermissionDenied,
    /// A caller-supplied argument (flags, offset, path, config value) is unusable.
    InvalidInput,
    /// A path component longer than a file name can be (NAME_MAX, 255
    /// bytes): ENAMETOOLONG, as a local file system answers, not EINVAL.
    NameTooLong,
    /// The backend ran out of space or quota.
    NoSpace,
    /// The backend failed an operation (EIO and friends); retrying may help.
    Io,
    /// Bytes on a backend do not decode: bad magic, checksum, or framing.
    Corrupt,
    /// The operation or format version is not supported by this build or store.
    Unsupported,
    /// A backend cannot be reached at all.
    Unavailable,
    /// The file handle is not open in a mode that allows the operation.
    BadHandle,
    /// The extended attribute does not exist.
    NoAttribute,
    /// The file an open handle stands for is gone: another process
    /// unlinked it, or renamed it away, before this one read it (ESTALE,
    /// as an NFS client's descriptor answers).
    Stale,
    /// A bug: an invariant of plfs itself does not hold.
    Internal,
}

impl ErrorKind {
    /// The errno reported at the C, FUSE and preload edges.
    pub fn errno(self) -> i32 {
        match self {
            ErrorKind::NotFound => libc::ENOENT,
            ErrorKind::AlreadyExists => libc::EEXIST,
            ErrorKind::NotADirectory => libc::ENOTDIR,
            ErrorKind::IsADirectory => libc::EISDIR,
            ErrorKind::DirectoryNotEmpty => libc::ENOTEMPTY,
            ErrorKind::PermissionDenied => libc::EACCES,
            ErrorKind::InvalidInput => libc::EINVAL,
            ErrorKind::NameTooLong => libc::ENAMETOOLONG,
            ErrorKind::NoSpace => libc::ENOSPC,
            ErrorKind::Io => libc::EIO,
            ErrorKind::Corrupt => libc::EIO,
            ErrorKind::Unsupported => libc::ENOTSUP,
            ErrorKind::Unavailable => libc::EIO,
            ErrorKind::BadHandle => libc::EBADF,
            ErrorKind::NoAttribute => libc::ENODATA,
            ErrorKind::Stale => libc::ESTALE,
            ErrorKind::Internal => libc::EIO,
        }
    }

    fn from_io(error: &io::Error) -> ErrorKind {
        if let Some(code) = error.raw_os_error() {
            return match code {
                libc::ENOENT => ErrorKind::NotFound,
                libc::EEXIST => ErrorKind::AlreadyExists,
                libc::ENOTDIR => ErrorKind::NotADirectory,
                libc::EISDIR => ErrorKind::IsADirectory,
                libc::ENOTEMPTY => ErrorKind::DirectoryNotEmpty,
                libc::EACCES | libc::EPERM | libc::EROFS => ErrorKind::PermissionDenied,
                libc::EINVAL => ErrorKind::InvalidInput,
                libc::ENAMETOOLONG => ErrorKind::NameTooLong,
                libc::ENOSPC | libc::EDQUOT | libc::EFBIG => ErrorKind::NoSpace,
                libc::ENOTSUP | libc::ENOSYS | libc::EXDEV => ErrorKind::Unsupported,
                libc::ENOTCONN | libc::ETIMEDOUT | libc::EHOSTUNREACH | libc::ESTALE => {
                    ErrorKind::Unavailable
                }
                libc::EBADF => ErrorKind::BadHandle,
                libc::ENODATA => ErrorKind::NoAttribute,
                _ => ErrorKind::Io,
            };
        }
        match error.kind() {
            io::ErrorKind::NotFound => ErrorKind::NotFound,
            io::ErrorKind::AlreadyExists => ErrorKind::AlreadyExists,
            io::ErrorKind::PermissionDenied => ErrorKind::PermissionDenied,
            io::ErrorKind::InvalidInput => ErrorKind::InvalidInput,
            io::ErrorKind::UnexpectedEof | io::ErrorKind::InvalidData => ErrorKind::Corrupt,
            io::ErrorKind::Unsupported => ErrorKind::Unsupported,
            _ => ErrorKind::Io,
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            ErrorKind::NotFound => "not found",
            ErrorKind::AlreadyExists => "already exists",
            ErrorKind::NotADirectory => "not a directory",
            ErrorKind::IsADirectory => "is a directory",
            ErrorKind::DirectoryNotEmpty => "directory not empty",
            ErrorKind::PermissionDenied => "permission denied",
            ErrorKind::InvalidInput => "invalid input",
            ErrorKind::NameTooLong => "name too long",
            ErrorKind::NoSpace => "no space left on backend",
            ErrorKind::Io => "I/O error",
            ErrorKind::Corrupt => "corrupt data",
            ErrorKind::Unsupported => "not supported",
            ErrorKind::Unavailable => "backend unavailable",
            ErrorKind::BadHandle => "bad file handle",
            ErrorKind::NoAttribute => "no such attribute",
            ErrorKind::Stale => "stale file handle",
            ErrorKind::Internal => "internal error",
        };
        f.write_str(text)
    }
}

/// An error with its kind, the context it passed through (outermost first),
/// and the original cause.
#[derive(Debug, thiserror::Error)]
pub struct Error {
    kind: ErrorKind,
    /// Context frames, innermost first: "posix:///b0: hostdir.3/data.…", "offset 4096".
    context: Vec<String>,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error { kind, context: vec![message.into()], source: None }
    }

    pub fn io(error: io::Error, what: impl Into<String>) -> Error {
        Error { kind: ErrorKind::from_io(&error), context: vec![what.into()], source: Some(Box::new(error)) }
    }

    pub fn corrupt(what: impl Into<String>) -> Error {
        Error::new(ErrorKind::Corrupt, what)
    }

    pub fn invalid(what: impl Into<String>) -> Error {
        Error::new(ErrorKind::InvalidInput, what)
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    pub fn errno(&self) -> i32 {
        if let Some(source) = &self.source
            && let Some(io_error) = source.downcast_ref::<io::Error>()
            && let Some(code) = io_error.raw_os_error()
        {
            return code;
        }
        self.kind.errno()
    }

    /// The context frames, outermost first, without the kind: for
    /// re-wrapping the text in another error (a plfsrc key's).
    pub fn message(&self) -> String {
        self.context.iter().rev().map(String::as_str).collect::<Vec<_>>().join(": ")
    }

    /// Adds an outer frame of context (a logical path, a backend, an offset).
    pub fn context(mut self, frame: impl Into<String>) -> Error {
        self.context.push(frame.into());
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for frame in self.context.iter().rev() {
            write!(f, "{frame}: ")?;
        }
        write!(f, "{}", self.kind)?;
        if let Some(source) = &self.source {
            write!(f, " ({source})")?;
        }
        Ok(())
    }
}

/// Attaches context to any fallible core result.
pub trait ResultExt<T> {
    fn context(self, frame: impl Into<String>) -> Result<T>;
    fn with_context<F: FnOnce() -> String>(self, frame: F) -> Result<T>;
}

impl<T> ResultExt<T> for Result<T> {
    fn context(self, frame: impl Into<String>) -> Result<T> {
        self.map_err(|error| error.context(frame))
    }

    fn with_context<F: FnOnce() -> String>(self, frame: F) -> Result<T> {
        self.map_err(|error| error.context(frame()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_puts_outer_context_first() {
        let error = Error::new(ErrorKind::Corrupt, "frame at offset 64")
            .context("index log hostdir.3/index.x")
            .context("/file");
        assert_eq!(error.to_string(), "/file: index log hostdir.3/index.x: frame at offset 64: corrupt data");
    }

    #[test]
    fn io_errors_keep_their_errno() {
        let error = Error::io(io::Error::from_raw_os_error(libc::ENOSPC), "append");
        assert_eq!(error.kind(), ErrorKind::NoSpace);
        assert_eq!(error.errno(), libc::ENOSPC);
        let error = Error::io(io::Error::from_raw_os_error(libc::EROFS), "append");
        assert_eq!(error.kind(), ErrorKind::PermissionDenied);
        assert_eq!(error.errno(), libc::EROFS);
    }
}
