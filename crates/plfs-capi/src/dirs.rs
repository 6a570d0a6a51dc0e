//! Directories: `plfs_mkdir`, `plfs_rmdir`, `plfs_readdir` and the C
//! listing calls `plfs_opendir_c`, `plfs_readdir_c`, `plfs_closedir_c`.

use std::ffi::{CString, c_char, c_void};
use std::sync::{Mutex, PoisonError};

use crate::errors::{PLFS_EBADF, PLFS_EINVAL, PLFS_ENOTSUP, PlfsError, guard};
use crate::mounts::{check_parent, not_found, resolve_argument};
use crate::plfs::attr::DirEntryInfo;

/// `Plfs_dirp`: a directory's names, read whole at open (the core merges
/// every backend's copy of the directory in one call), and a cursor.
#[derive(Debug)]
pub struct PlfsDirp {
    names: Vec<CString>,
    /// The next name to hand out; locked so threads sharing a dirp each
    /// get a different name.
    next: Mutex<usize>,
}

/// # Safety
/// `path` is NULL or a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_mkdir(path: *const c_char, mode: libc::mode_t) -> PlfsError {
    guard(|| {
        // SAFETY: the caller's contract.
        let (plfs, inner) = unsafe { resolve_argument(path) }?;
        check_parent(&plfs, &inner)?;
        plfs.mkdir(&inner, mode).map_err(|error| not_found(&plfs, &inner, error))
    })
}

/// # Safety
/// `path` is NULL or a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_rmdir(path: *const c_char) -> PlfsError {
    guard(|| {
        // SAFETY: the caller's contract.
        let (plfs, inner) = unsafe { resolve_argument(path) }?;
        plfs.rmdir(&inner).map_err(|error| not_found(&plfs, &inner, error))
    })
}

/// PLFS 2.5 filled a C++ `std::set<std::string>` through the `void *`.
/// C++ callers of plfs.h get an inline plfs_readdir that does exactly
/// that through the C listing calls (a Rust library cannot build a C++
/// set). This exported symbol is what C callers reach: it checks `path`
/// as a listing would (ENOENT, ENOTDIR, ...) and then answers ENOTSUP,
/// since a C caller has no set to fill: C programs list with
/// plfs_opendir_c.
///
/// # Safety
/// `path` is NULL or a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_readdir(path: *const c_char, entries: *mut c_void) -> PlfsError {
    guard(|| {
        // SAFETY: the caller's contract.
        unsafe { list(path) }?;
        if entries.is_null() {
            return Err(PLFS_EINVAL);
        }
        Err(PLFS_ENOTSUP)
    })
}

/// Opens `path` for listing; `*dirp` is set only on success. The names
/// exclude "." and "..", as 2.5's listing of the backends did.
///
/// # Safety
/// `path` is NULL or a C string; `dirp` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_opendir_c(path: *const c_char, dirp: *mut *mut PlfsDirp) -> PlfsError {
    guard(|| {
        if dirp.is_null() {
            return Err(PLFS_EINVAL);
        }
        // SAFETY: the caller's contract.
        let entries = unsafe { list(path) }?;
        // Names come from the stores as Rust strings, which hold no NUL.
        let names = entries.into_iter().filter_map(|entry| CString::new(entry.name).ok()).collect();
        let opened = Box::new(PlfsDirp { names, next: Mutex::new(0) });
        // SAFETY: checked non-NULL.
        unsafe { *dirp = Box::into_raw(opened) };
        Ok(())
    })
}

/// Copies the next name (NUL-terminated) into `dname`; an empty name
/// means the end. A name that does not fit in `bufsz` bytes is ERANGE and
/// stays next, so a caller may retry with a larger buffer.
///
/// # Safety
/// `dirp` is NULL or open; `dname` is NULL or writable for `bufsz` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_readdir_c(dirp: *mut PlfsDirp, dname: *mut c_char, bufsz: usize) -> PlfsError {
    guard(|| {
        // SAFETY: NULL or open.
        let dirp = unsafe { dirp.as_ref() }.ok_or(PLFS_EBADF)?;
        if dname.is_null() || bufsz == 0 {
            return Err(PLFS_EINVAL);
        }
        let mut next = dirp.next.lock().unwrap_or_else(PoisonError::into_inner);
        let name = dirp.names.get(*next).map_or(&[0u8][..], |name| name.as_bytes_with_nul());
        if name.len() > bufsz {
            return Err(libc::ERANGE);
        }
        // SAFETY: dname is writable for bufsz >= name.len() bytes, and a
        // caller's buffer cannot overlap the names this dirp owns.
        unsafe { std::ptr::copy_nonoverlapping(name.as_ptr(), dname.cast::<u8>(), name.len()) };
        *next = (*next + 1).min(dirp.names.len());
        Ok(())
    })
}

/// # Safety
/// `dirp` is NULL or open, and not used after.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_closedir_c(dirp: *mut PlfsDirp) -> PlfsError {
    guard(|| {
        if dirp.is_null() {
            return Err(PLFS_EBADF);
        }
        // SAFETY: an open dirp is the box plfs_opendir_c made.
        drop(unsafe { Box::from_raw(dirp) });
        Ok(())
    })
}

/// The entries of directory `path`.
///
/// # Safety
/// `path` is NULL or a C string.
unsafe fn list(path: *const c_char) -> Result<Vec<DirEntryInfo>, PlfsError> {
    // SAFETY: the caller's contract.
    let (plfs, inner) = unsafe { resolve_argument(path) }?;
    plfs.readdir(&inner).map_err(|error| not_found(&plfs, &inner, error))
}
