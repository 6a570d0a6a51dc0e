//! Open files: `plfs_open`, `plfs_read`, `plfs_write`, `plfs_close` and
//! `plfs_flatten_index`, with the PLFS 2.5 signatures.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::errors::{PLFS_EBADF, PLFS_EINVAL, PLFS_ENOTSUP, PlfsError, guard, report};
use crate::mounts::{path_argument, resolve};
use crate::plfs::file::{OpenFlags, WriterId};
use crate::plfs::fs::{FileHandle, Plfs};

/// `Plfs_fd`: an open file and the references plfs_open handed out.
#[derive(Debug)]
pub struct PlfsFd {
    plfs: Plfs,
    /// The path inside the mount.
    path: String,
    handle: FileHandle,
    references: AtomicUsize,
}

impl PlfsFd {
    pub fn new(plfs: Plfs, path: String, handle: FileHandle) -> PlfsFd {
        PlfsFd { plfs, path, handle, references: AtomicUsize::new(1) }
    }
}

/// `Plfs_open_opt`, field for field.
#[repr(C)]
#[derive(Debug)]
pub struct PlfsOpenOpt {
    pub index_stream: *mut c_char,
    pub buffer_index: c_int,
    pub pinter: c_int,
    pub reopen: c_int,
    pub uniform_restart_enable: c_int,
    pub uniform_restart_rank: libc::pid_t,
}

/// The writer a pid names (pids are never negative).
pub fn writer_of(pid: libc::pid_t) -> Result<WriterId, PlfsError> {
    WriterId::try_from(pid).map_err(|_| PLFS_EINVAL)
}

fn offset_of(offset: libc::off_t) -> Result<u64, PlfsError> {
    u64::try_from(offset).map_err(|_| PLFS_EINVAL)
}

/// Adds a reference to an fd the caller opened before.
///
/// # Safety
/// `fd` came from plfs_open (or plfs_open_collective) and is not closed.
pub unsafe fn add_reference(fd: *mut PlfsFd) {
    // SAFETY: the caller's fd is live.
    unsafe { &*fd }.references.fetch_add(1, Ordering::AcqRel);
}

/// # Safety
/// `fd` is NULL or points to a pointer; `*fd` is NULL or a live fd;
/// `path` is NULL or a C string; `opt` is NULL or a `Plfs_open_opt`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_open(
    fd: *mut *mut PlfsFd,
    path: *const c_char,
    flags: c_int,
    pid: libc::pid_t,
    mode: libc::mode_t,
    opt: *const PlfsOpenOpt,
) -> PlfsError {
    guard(|| {
        if fd.is_null() {
            return Err(PLFS_EINVAL);
        }
        // SAFETY: the caller's contract.
        let path = unsafe { path_argument(path) }?;
        // SAFETY: NULL or a Plfs_open_opt.
        if let Some(opt) = unsafe { opt.as_ref() }
            && opt.uniform_restart_enable != 0
        {
            return Err(PLFS_ENOTSUP);
        }
        // SAFETY: fd points to a pointer.
        let existing = unsafe { *fd };
        if !existing.is_null() {
            // SAFETY: a non-NULL *fd is a live fd (PLFS 2.5's reopen).
            unsafe { add_reference(existing) };
            return Ok(());
        }
        let opened = open_one(path, flags, pid, mode)?;
        // SAFETY: fd points to a pointer.
        unsafe { *fd = Box::into_raw(Box::new(opened)) };
        Ok(())
    })
}

/// An independent open of `path` by this process alone.
pub fn open_one(path: &str, flags: c_int, pid: libc::pid_t, mode: libc::mode_t) -> Result<PlfsFd, PlfsError> {
    let writer = writer_of(pid)?;
    let flags = OpenFlags::from_posix(flags).map_err(report)?;
    let (plfs, inner) = resolve(path)?;
    let handle = plfs.open(&inner, flags, mode, writer).map_err(report)?;
    Ok(PlfsFd::new(plfs, inner, handle))
}

/// # Safety
/// `fd` is NULL or live; `buf` is NULL or valid for `size` bytes;
/// `bytes_read` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_read(
    fd: *mut PlfsFd,
    buf: *mut c_char,
    size: usize,
    offset: libc::off_t,
    bytes_read: *mut libc::ssize_t,
) -> PlfsError {
    guard(|| {
        // SAFETY: NULL or live.
        let fd = unsafe { fd.as_ref() }.ok_or(PLFS_EBADF)?;
        if bytes_read.is_null() || (buf.is_null() && size > 0) {
            return Err(PLFS_EINVAL);
        }
        let offset = offset_of(offset)?;
        let buffer: &mut [u8] = if size == 0 {
            &mut []
        } else {
            // SAFETY: valid for size bytes, the caller's contract.
            unsafe { std::slice::from_raw_parts_mut(buf.cast(), size) }
        };
        let count = fd.handle.read(buffer, offset).map_err(report)?;
        // SAFETY: checked non-NULL.
        unsafe { *bytes_read = count as libc::ssize_t };
        Ok(())
    })
}

/// # Safety
/// `fd` is NULL or live; `buf` is NULL or valid for `size` bytes;
/// `bytes_written` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_write(
    fd: *mut PlfsFd,
    buf: *const c_char,
    size: usize,
    offset: libc::off_t,
    pid: libc::pid_t,
    bytes_written: *mut libc::ssize_t,
) -> PlfsError {
    guard(|| {
        // SAFETY: NULL or live.
        let fd = unsafe { fd.as_ref() }.ok_or(PLFS_EBADF)?;
        if bytes_written.is_null() || (buf.is_null() && size > 0) {
            return Err(PLFS_EINVAL);
        }
        let offset = offset_of(offset)?;
        let writer = writer_of(pid)?;
        // PLFS 2.5: a write of nothing does nothing.
        let count = if size == 0 {
            0
        } else {
            // SAFETY: valid for size bytes, the caller's contract.
            let buffer = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), size) };
            fd.handle.write_as(buffer, offset, writer).map_err(report)?
        };
        // SAFETY: checked non-NULL.
        unsafe { *bytes_written = count as libc::ssize_t };
        Ok(())
    })
}

/// # Safety
/// `fd` is NULL or live (and not used again after its last close);
/// `num_ref` is NULL or writable; `opt` (a `Plfs_close_opt`) is ignored:
/// sizes come from the logs.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_close(
    fd: *mut PlfsFd,
    _pid: libc::pid_t,
    _uid: libc::uid_t,
    _open_flags: c_int,
    _opt: *mut c_void,
    num_ref: *mut c_int,
) -> PlfsError {
    guard(|| {
        // SAFETY: NULL or live.
        let live = unsafe { fd.as_ref() }.ok_or(PLFS_EBADF)?;
        let left = live.references.fetch_sub(1, Ordering::AcqRel) - 1;
        if !num_ref.is_null() {
            // SAFETY: checked non-NULL.
            unsafe { *num_ref = c_int::try_from(left).unwrap_or(c_int::MAX) };
        }
        if left > 0 {
            return Ok(());
        }
        // SAFETY: the last reference: the box plfs_open made is ours again.
        let owned = unsafe { Box::from_raw(fd) };
        owned.handle.close().map_err(report)
    })
}

/// Writes the global index of fd's file, so later readers (and the
/// flatten strategy) open one object instead of every index log. Every
/// writer must have closed. `path` must be given, as in PLFS 2.5.
///
/// # Safety
/// `fd` is NULL or live; `path` is NULL or a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_flatten_index(fd: *mut PlfsFd, path: *const c_char) -> PlfsError {
    guard(|| {
        // SAFETY: NULL or live.
        let fd = unsafe { fd.as_ref() }.ok_or(PLFS_EBADF)?;
        // SAFETY: the caller's contract.
        unsafe { path_argument(path) }?;
        fd.plfs.flatten(&fd.path).map(drop).map_err(report)
    })
}
