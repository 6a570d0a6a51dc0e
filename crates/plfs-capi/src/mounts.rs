//! Which mount a logical path is on: the core's process-wide mount table
//! (one plfsrc, each mount built once and shared by every fd on it, as PLFS
//! 2.5 did, and by the interposer in the same process).

use std::ffi::{CStr, c_char};
use std::path::Path;

use crate::errors::{PLFS_EINVAL, PlfsError, report};
use crate::plfs::fs::Plfs;
use crate::plfs::mounts::MountTable;
use crate::plfs::{Error, ErrorKind};

/// A C path argument: NULL or not UTF-8 is EINVAL.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
pub unsafe fn path_argument<'a>(path: *const c_char) -> Result<&'a str, PlfsError> {
    if path.is_null() {
        return Err(PLFS_EINVAL);
    }
    // SAFETY: the caller passes a C string.
    unsafe { CStr::from_ptr(path) }.to_str().map_err(|_| PLFS_EINVAL)
}

/// The mount holding `path` and the path inside it.
pub fn resolve(path: &str) -> Result<(Plfs, String), PlfsError> {
    let table = MountTable::process().map_err(|error| report(Error::new(error.kind(), error.to_string())))?;
    table.resolve(Path::new(path)).map_err(report)?.ok_or_else(|| {
        report(Error::new(ErrorKind::NotFound, format!("{path}: not under a mount point of the plfsrc")))
    })
}

/// `int is_plfs_path(const char *path)`: 1 when a mount point of the
/// plfsrc covers `path` (relative paths are taken from the current
/// directory), 0 otherwise, including for NULL and when there is no plfsrc.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn is_plfs_path(path: *const c_char) -> std::ffi::c_int {
    // SAFETY: forwarded from the caller.
    let Ok(path) = (unsafe { path_argument(path) }) else { return 0 };
    let Ok(table) = MountTable::process() else { return 0 };
    let Ok(absolute) = std::path::absolute(path) else { return 0 };
    std::ffi::c_int::from(table.config().resolve(&absolute).is_some())
}
