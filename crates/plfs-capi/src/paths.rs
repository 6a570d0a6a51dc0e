//! Names: `plfs_unlink`, `plfs_rename`, `plfs_link`, `plfs_symlink` and
//! `plfs_readlink`.

use std::ffi::{c_char, c_int};

use crate::errors::{PLFS_EINVAL, PlfsError, guard};
use crate::mounts::{
    check_parent, mount_config, not_found, path_argument, resolve, resolve_argument, text_argument,
};

/// # Safety
/// `path` is NULL or a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_unlink(path: *const c_char) -> PlfsError {
    guard(|| {
        // SAFETY: the caller's contract.
        let (plfs, inner) = unsafe { resolve_argument(path) }?;
        plfs.unlink(&inner).map_err(|error| not_found(&plfs, &inner, error))
    })
}

/// Renames within one mount; across mounts is EXDEV, as rename(2) across
/// file systems.
///
/// # Safety
/// `from` and `to` are NULL or C strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_rename(from: *const c_char, to: *const c_char) -> PlfsError {
    guard(|| {
        // SAFETY: the caller's contract.
        let (from, to) = unsafe { (path_argument(from)?, path_argument(to)?) };
        let (from_mount, _) = mount_config(from)?;
        let (to_mount, to_inner) = mount_config(to)?;
        if from_mount.mount_point != to_mount.mount_point {
            return Err(libc::EXDEV);
        }
        let (plfs, from_inner) = resolve(from)?;
        check_parent(&plfs, &to_inner)?;
        plfs.rename(&from_inner, &to_inner).map_err(|error| not_found(&plfs, &from_inner, error))
    })
}

/// Hard links: a file is a container (a directory on the backends), which
/// cannot be hard-linked, so PLFS 2.5 returned ENOSYS, and so does this.
///
/// # Safety
/// `path` and `to` are NULL or C strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_link(path: *const c_char, to: *const c_char) -> PlfsError {
    guard(|| {
        // SAFETY: the caller's contract.
        unsafe { (path_argument(path)?, path_argument(to)?) };
        Err(libc::ENOSYS)
    })
}

/// Makes `to` (a path under a mount) a symbolic link whose text is `path`
/// (any text; as symlink(2)'s target, it is not resolved).
///
/// # Safety
/// `path` and `to` are NULL or C strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_symlink(path: *const c_char, to: *const c_char) -> PlfsError {
    guard(|| {
        // SAFETY: the caller's contract.
        let target = unsafe { text_argument(path) }?;
        // SAFETY: the caller's contract.
        let (plfs, inner) = unsafe { resolve_argument(to) }?;
        check_parent(&plfs, &inner)?;
        plfs.symlink(target, &inner).map_err(|error| not_found(&plfs, &inner, error))
    })
}

/// Copies the link text into buf, as much as fits, and zeroes the rest of
/// buf (as 2.5 did, so a text shorter than bufsize ends in NUL); `*bytes`
/// is how many bytes of text were copied. Not a link: EINVAL.
///
/// # Safety
/// `path` is NULL or a C string; `buf` is NULL or writable for `bufsize`
/// bytes; `bytes` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_readlink(
    path: *const c_char,
    buf: *mut c_char,
    bufsize: usize,
    bytes: *mut c_int,
) -> PlfsError {
    guard(|| {
        if buf.is_null() || bufsize == 0 || bytes.is_null() {
            return Err(PLFS_EINVAL);
        }
        // SAFETY: the caller's contract.
        let (plfs, inner) = unsafe { resolve_argument(path) }?;
        let text = plfs.readlink(&inner).map_err(|error| not_found(&plfs, &inner, error))?;
        let count = text.len().min(bufsize);
        // SAFETY: buf is writable for bufsize bytes.
        let out = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), bufsize) };
        out[..count].copy_from_slice(&text.as_bytes()[..count]);
        out[count..].fill(0);
        // SAFETY: checked non-NULL.
        unsafe { *bytes = c_int::try_from(count).unwrap_or(c_int::MAX) };
        Ok(())
    })
}
