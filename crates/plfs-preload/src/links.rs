//! Links and path resolution on plfs paths. plfs keeps no symbolic or hard
//! links, so every plfs path is its own real path: readlink says "not a
//! link" (EINVAL) for one that exists, which is how gnulib's canonicalize
//! (`readlink -f`, `realpath(1)`) walks a path; link and symlink are
//! refused with EPERM, as file systems without links refuse them (they
//! went to libc, which said ENOENT about the mount point it cannot see).
//! glibc's realpath reads links with its internal readlink, which no
//! interposer sees, so it is interposed too.

use std::ffi::{c_char, c_int};

use libc::{size_t, ssize_t};

use crate::files;
use crate::libplfs::Errno;
use crate::paths::{LibcPath, plfs_path};
use crate::posix::{size_result, unit_result};
use crate::real;

/// Whether the plfs path `logical` exists: Ok, or stat's error.
fn exists(logical: &std::ffi::CString) -> Result<(), Errno> {
    files::stat_path(logical).map(|_| ())
}

fn readlink_plfs(dirfd: c_int, path: *const c_char) -> Option<ssize_t> {
    let logical = plfs_path(dirfd, path)?;
    Some(size_result(exists(&logical).and(Err(libc::EINVAL))))
}

/// # Safety
/// The readlink(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readlink(path: *const c_char, buffer: *mut c_char, size: size_t) -> ssize_t {
    if let Some(result) = readlink_plfs(libc::AT_FDCWD, path) {
        return result;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::readlink()(LibcPath::new(libc::AT_FDCWD, path).as_ptr(), buffer, size) }
}

/// # Safety
/// The readlinkat(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readlinkat(
    dirfd: c_int,
    path: *const c_char,
    buffer: *mut c_char,
    size: size_t,
) -> ssize_t {
    if let Some(result) = readlink_plfs(dirfd, path) {
        return result;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::readlinkat()(dirfd, LibcPath::new(dirfd, path).as_ptr(), buffer, size) }
}

/// A link made at `new` (or, for a hard link, from `old`): EPERM when both
/// are plfs paths, EXDEV when only one is (as across file systems).
fn link_plfs(old: Option<(c_int, *const c_char)>, new: (c_int, *const c_char)) -> Option<c_int> {
    let new_plfs = plfs_path(new.0, new.1).is_some();
    let old_plfs = old.is_some_and(|(dirfd, path)| plfs_path(dirfd, path).is_some());
    match (old.is_some(), old_plfs, new_plfs) {
        (_, false, false) => None,
        (true, true, true) | (false, _, true) => Some(unit_result(Err(libc::EPERM))),
        _ => Some(unit_result(Err(libc::EXDEV))),
    }
}

/// # Safety
/// The symlink(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn symlink(target: *const c_char, path: *const c_char) -> c_int {
    if let Some(result) = link_plfs(None, (libc::AT_FDCWD, path)) {
        return result;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::symlink()(target, LibcPath::new(libc::AT_FDCWD, path).as_ptr()) }
}

/// # Safety
/// The symlinkat(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn symlinkat(target: *const c_char, dirfd: c_int, path: *const c_char) -> c_int {
    if let Some(result) = link_plfs(None, (dirfd, path)) {
        return result;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::symlinkat()(target, dirfd, LibcPath::new(dirfd, path).as_ptr()) }
}

/// # Safety
/// The link(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn link(old: *const c_char, new: *const c_char) -> c_int {
    if let Some(result) = link_plfs(Some((libc::AT_FDCWD, old)), (libc::AT_FDCWD, new)) {
        return result;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe {
        real::link()(LibcPath::new(libc::AT_FDCWD, old).as_ptr(), LibcPath::new(libc::AT_FDCWD, new).as_ptr())
    }
}

/// # Safety
/// The linkat(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn linkat(
    old_dirfd: c_int,
    old: *const c_char,
    new_dirfd: c_int,
    new: *const c_char,
    flags: c_int,
) -> c_int {
    if let Some(result) = link_plfs(Some((old_dirfd, old)), (new_dirfd, new)) {
        return result;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe {
        real::linkat()(
            old_dirfd,
            LibcPath::new(old_dirfd, old).as_ptr(),
            new_dirfd,
            LibcPath::new(new_dirfd, new).as_ptr(),
            flags,
        )
    }
}

/// realpath of a plfs path: the path made absolute and normal, once it is
/// known to exist; written to `resolved` (PATH_MAX bytes) or to a malloc'd
/// copy when that is NULL. None for every other path.
fn realpath_plfs(path: *const c_char, resolved: *mut c_char) -> Option<*mut c_char> {
    let logical = plfs_path(libc::AT_FDCWD, path)?;
    if let Err(error) = exists(&logical) {
        files::set_errno(error);
        return Some(std::ptr::null_mut());
    }
    let bytes = logical.as_bytes_with_nul();
    let target = if resolved.is_null() {
        // SAFETY: a plain allocation the caller frees.
        let copy = unsafe { libc::malloc(bytes.len()) }.cast::<c_char>();
        if copy.is_null() {
            files::set_errno(libc::ENOMEM);
            return Some(std::ptr::null_mut());
        }
        copy
    } else if bytes.len() > libc::PATH_MAX as usize {
        files::set_errno(libc::ENAMETOOLONG);
        return Some(std::ptr::null_mut());
    } else {
        resolved
    };
    // SAFETY: target holds at least bytes.len() bytes.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), target, bytes.len()) };
    Some(target)
}

/// # Safety
/// The realpath(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn realpath(path: *const c_char, resolved: *mut c_char) -> *mut c_char {
    if let Some(result) = realpath_plfs(path, resolved) {
        return result;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::realpath()(LibcPath::new(libc::AT_FDCWD, path).as_ptr(), resolved) }
}

/// # Safety
/// The canonicalize_file_name(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn canonicalize_file_name(path: *const c_char) -> *mut c_char {
    if let Some(result) = realpath_plfs(path, std::ptr::null_mut()) {
        return result;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::canonicalize_file_name()(LibcPath::new(libc::AT_FDCWD, path).as_ptr()) }
}

/// # Safety
/// The contract of glibc's fortified realpath (`_FORTIFY_SOURCE`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __realpath_chk(
    path: *const c_char,
    resolved: *mut c_char,
    length: size_t,
) -> *mut c_char {
    if let Some(result) = realpath_plfs(path, resolved) {
        return result;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::__realpath_chk()(LibcPath::new(libc::AT_FDCWD, path).as_ptr(), resolved, length) }
}
