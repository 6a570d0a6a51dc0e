//! Extended attributes of an open file: `plfs_getxattr`, `plfs_setxattr`,
//! `plfs_setxattr_len`
//! (the core keeps them in the container's `xattrs/`, as 2.5 did); and,
//! not in 2.5, of a file or directory by path with getxattr(2)'s
//! conventions: `plfs_path_getxattr`, `plfs_path_setxattr`,
//! `plfs_path_listxattr`, `plfs_path_removexattr` (what the interposer
//! serves getfattr/setfattr with).

use std::ffi::{CStr, c_char, c_int, c_void};

use crate::errors::{PLFS_EBADF, PLFS_EINVAL, PlfsError, guard, report};
use crate::files::PlfsFd;
use crate::mounts::{not_found, resolve_argument};
use crate::plfs::xattr::XattrMode;

/// Copies up to `len` bytes of attribute `key` into `value` and zeroes the
/// rest of `value` (so a short text value ends in NUL). As in 2.5, a
/// longer value is cut at `len`; unlike 2.5 (which read into a fixed stack
/// buffer unchecked) any `len` is safe. Missing: ENODATA, as getxattr(2).
///
/// # Safety
/// `fd` is NULL or live; `value` is NULL or writable for `len` bytes;
/// `key` is NULL or a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_getxattr(
    fd: *mut PlfsFd,
    value: *mut c_void,
    key: *const c_char,
    len: usize,
) -> PlfsError {
    guard(|| {
        // SAFETY: NULL or live.
        let fd = unsafe { fd.as_ref() }.ok_or(PLFS_EBADF)?;
        // SAFETY: the caller's contract.
        let key = unsafe { key_argument(key) }?;
        if value.is_null() && len > 0 {
            return Err(PLFS_EINVAL);
        }
        let stored = fd.plfs.get_xattr(&fd.path(), key).map_err(report)?;
        if len == 0 {
            return Ok(());
        }
        // SAFETY: value is writable for len bytes.
        let out = unsafe { std::slice::from_raw_parts_mut(value.cast::<u8>(), len) };
        let count = stored.len().min(len);
        out[..count].copy_from_slice(&stored[..count]);
        out[count..].fill(0);
        Ok(())
    })
}

/// PLFS 2.5's three-argument form: sets attribute `key` to the C string
/// `value` (its bytes without the NUL), replacing any.
///
/// # Safety
/// `fd` is NULL or live; `value` and `key` are NULL or C strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_setxattr(
    fd: *mut PlfsFd,
    value: *const c_void,
    key: *const c_char,
) -> PlfsError {
    if value.is_null() {
        return PLFS_EINVAL;
    }
    // SAFETY: a non-NULL value is a C string.
    let len = unsafe { CStr::from_ptr(value.cast::<c_char>()) }.to_bytes().len();
    // SAFETY: value is readable for len bytes; the rest is the caller's contract.
    unsafe { plfs_setxattr_len(fd, value, key, len) }
}

/// Not in 2.5: sets attribute `key` to the `len` bytes at `value` (any
/// bytes), replacing any.
///
/// # Safety
/// `fd` is NULL or live; `value` is NULL or readable for `len` bytes;
/// `key` is NULL or a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_setxattr_len(
    fd: *mut PlfsFd,
    value: *const c_void,
    key: *const c_char,
    len: usize,
) -> PlfsError {
    guard(|| {
        // SAFETY: NULL or live.
        let fd = unsafe { fd.as_ref() }.ok_or(PLFS_EBADF)?;
        // SAFETY: the caller's contract.
        let key = unsafe { key_argument(key) }?;
        let bytes: &[u8] = match (value.is_null(), len) {
            (_, 0) => &[],
            (true, _) => return Err(PLFS_EINVAL),
            // SAFETY: value is readable for len bytes.
            (false, _) => unsafe { std::slice::from_raw_parts(value.cast::<u8>(), len) },
        };
        fd.plfs.set_xattr(&fd.path(), key, bytes, XattrMode::Any).map_err(report)
    })
}

/// # Safety
/// `key` is NULL or a C string.
unsafe fn key_argument<'a>(key: *const c_char) -> Result<&'a str, PlfsError> {
    if key.is_null() {
        return Err(PLFS_EINVAL);
    }
    // SAFETY: a non-NULL key is a C string.
    let key = unsafe { CStr::from_ptr(key) }.to_str().map_err(|_| PLFS_EINVAL)?;
    if key.is_empty() {
        return Err(PLFS_EINVAL);
    }
    Ok(key)
}

/// Not in 2.5: getxattr(2) on `path` (a file or a directory, no open
/// descriptor needed, as the interposer's getxattr/lgetxattr need).
/// `*length` (if not NULL) is the value's whole length; `size` 0 only asks
/// for it; a `value` buffer shorter than the value is PLFS_ERANGE, never a
/// cut value. Missing: PLFS_ENODATA.
///
/// # Safety
/// `path` and `key` are NULL or C strings; `value` is NULL or writable
/// for `size` bytes; `length` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_path_getxattr(
    path: *const c_char,
    key: *const c_char,
    value: *mut c_void,
    size: usize,
    length: *mut usize,
) -> PlfsError {
    guard(|| {
        // SAFETY: the caller's contract.
        let (plfs, inner) = unsafe { resolve_argument(path) }?;
        // SAFETY: the caller's contract.
        let key = unsafe { key_argument(key) }?;
        let stored = plfs.get_xattr(&inner, key).map_err(|error| not_found(&plfs, &inner, error))?;
        // SAFETY: NULL or writable.
        unsafe { deliver_sized(&stored, value, size, length) }
    })
}

/// Not in 2.5: listxattr(2) on `path`: the attribute names, each ended by
/// a NUL, sorted. `*length` and `size` as for `plfs_path_getxattr`.
///
/// # Safety
/// `path` is NULL or a C string; `list` is NULL or writable for `size`
/// bytes; `length` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_path_listxattr(
    path: *const c_char,
    list: *mut c_char,
    size: usize,
    length: *mut usize,
) -> PlfsError {
    guard(|| {
        // SAFETY: the caller's contract.
        let (plfs, inner) = unsafe { resolve_argument(path) }?;
        let names = plfs.list_xattrs(&inner).map_err(|error| not_found(&plfs, &inner, error))?;
        let mut bytes = Vec::with_capacity(names.iter().map(|name| name.len() + 1).sum());
        for name in names {
            bytes.extend_from_slice(name.as_bytes());
            bytes.push(0);
        }
        // SAFETY: NULL or writable.
        unsafe { deliver_sized(&bytes, list.cast(), size, length) }
    })
}

/// Not in 2.5: setxattr(2) on `path`: `size` bytes at `value` (any bytes);
/// `flags` 0 (create or replace), XATTR_CREATE (PLFS_EEXIST if present)
/// or XATTR_REPLACE (PLFS_ENODATA if absent). A value longer than the
/// largest plfs keeps is PLFS_E2BIG.
///
/// # Safety
/// `path` and `key` are NULL or C strings; `value` is NULL or readable
/// for `size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_path_setxattr(
    path: *const c_char,
    key: *const c_char,
    value: *const c_void,
    size: usize,
    flags: c_int,
) -> PlfsError {
    guard(|| {
        // SAFETY: the caller's contract.
        let (plfs, inner) = unsafe { resolve_argument(path) }?;
        // SAFETY: the caller's contract.
        let key = unsafe { key_argument(key) }?;
        let mode = match flags {
            0 => XattrMode::Any,
            libc::XATTR_CREATE => XattrMode::Create,
            libc::XATTR_REPLACE => XattrMode::Replace,
            _ => return Err(PLFS_EINVAL),
        };
        if size > crate::plfs::xattr::VALUE_MAX_BYTES {
            return Err(libc::E2BIG);
        }
        let bytes: &[u8] = match (value.is_null(), size) {
            (_, 0) => &[],
            (true, _) => return Err(PLFS_EINVAL),
            // SAFETY: value is readable for size bytes.
            (false, _) => unsafe { std::slice::from_raw_parts(value.cast::<u8>(), size) },
        };
        plfs.set_xattr(&inner, key, bytes, mode).map_err(|error| not_found(&plfs, &inner, error))
    })
}

/// Not in 2.5: removexattr(2) on `path`. Missing: PLFS_ENODATA.
///
/// # Safety
/// `path` and `key` are NULL or C strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_path_removexattr(path: *const c_char, key: *const c_char) -> PlfsError {
    guard(|| {
        // SAFETY: the caller's contract.
        let (plfs, inner) = unsafe { resolve_argument(path) }?;
        // SAFETY: the caller's contract.
        let key = unsafe { key_argument(key) }?;
        plfs.remove_xattr(&inner, key).map_err(|error| not_found(&plfs, &inner, error))
    })
}

/// The size-probe protocol of getxattr(2)/listxattr(2): `*length` is the
/// whole length; `size` 0 copies nothing; a shorter buffer is ERANGE.
///
/// # Safety
/// `out` is NULL or writable for `size` bytes; `length` is NULL or writable.
unsafe fn deliver_sized(
    bytes: &[u8],
    out: *mut c_void,
    size: usize,
    length: *mut usize,
) -> Result<(), PlfsError> {
    // SAFETY: NULL or writable.
    if let Some(length) = unsafe { length.as_mut() } {
        *length = bytes.len();
    }
    if size == 0 {
        return Ok(());
    }
    if bytes.len() > size {
        return Err(libc::ERANGE);
    }
    if out.is_null() {
        return Err(PLFS_EINVAL);
    }
    // SAFETY: out is writable for size >= bytes.len() bytes.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.cast::<u8>(), bytes.len()) };
    Ok(())
}
