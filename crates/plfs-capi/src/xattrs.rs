//! Extended attributes of an open file: `plfs_getxattr`, `plfs_setxattr`,
//! `plfs_setxattr_len`
//! (the core keeps them in the container's `xattrs/`, as 2.5 did).

use std::ffi::{CStr, c_char, c_void};

use crate::errors::{PLFS_EBADF, PLFS_EINVAL, PlfsError, guard, report};
use crate::files::PlfsFd;
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
        let stored = fd.plfs.get_xattr(&fd.path, key).map_err(report)?;
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
        fd.plfs.set_xattr(&fd.path, key, bytes, XattrMode::Any).map_err(report)
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
