//! Open files: `plfs_open`, `plfs_create`, `plfs_read`, `plfs_write`,
//! `plfs_sync`, `plfs_trunc`, `plfs_query`, `plfs_close` and
//! `plfs_flatten_index`, with the PLFS 2.5 signatures.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::errors::{PLFS_EBADF, PLFS_EINVAL, PLFS_ENOTSUP, PlfsError, guard, report};
use crate::mounts::{check_parent, not_found, path_argument, resolve};
use crate::plfs::fs::{FileHandle, Plfs};
use crate::plfs::open::{OpenFlags, WriterId};

/// `Plfs_fd`: an open file and the references plfs_open handed out. Every
/// call but the last plfs_close only borrows it, so threads may share one
/// (the core's handle is thread-safe); plfs_open and plfs_close on the
/// same fd must not race, as in PLFS 2.5.
#[derive(Debug)]
pub struct PlfsFd {
    pub(crate) plfs: Plfs,
    pub(crate) handle: FileHandle,
    /// How the first open opened it (plfs_query reports readers/writers).
    flags: OpenFlags,
    references: AtomicUsize,
    /// Bytes plfs_write accepted through this fd (plfs_query).
    bytes_written: AtomicU64,
}

impl PlfsFd {
    pub fn new(plfs: Plfs, handle: FileHandle, flags: OpenFlags) -> PlfsFd {
        PlfsFd { plfs, handle, flags, references: AtomicUsize::new(1), bytes_written: AtomicU64::new(0) }
    }

    /// The file's path inside the mount now: a rename in this process
    /// moves it, and an unlink while open hides it (see `FileHandle::path`).
    pub(crate) fn path(&self) -> String {
        self.handle.path()
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
    if flags.create {
        check_parent(&plfs, &inner)?;
    }
    let handle = plfs.open(&inner, flags, mode, writer).map_err(|error| match plfs.stat(&inner) {
        // The core follows no symbolic links, so opening one is refused as
        // open(2) with O_NOFOLLOW refuses it (PLFS 2.5 followed it).
        Ok(attr) if attr.kind == crate::plfs::attr::FileKind::Symlink => libc::ELOOP,
        _ => not_found(&plfs, &inner, error),
    })?;
    Ok(PlfsFd::new(plfs, handle, flags))
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
        fd.bytes_written.fetch_add(count as u64, Ordering::Relaxed);
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
        fd.plfs.flatten(&fd.path()).map(drop).map_err(report)
    })
}

/// Creates `path` (truncating an existing file, as creat(2) and PLFS 2.5
/// do) and closes it. Of `flags` only O_EXCL counts: 2.5 forced
/// O_WRONLY|O_CREAT|O_TRUNC and kept the caller's O_EXCL.
///
/// # Safety
/// `path` is NULL or a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_create(
    path: *const c_char,
    mode: libc::mode_t,
    flags: c_int,
    pid: libc::pid_t,
) -> PlfsError {
    guard(|| {
        // SAFETY: the caller's contract.
        let path = unsafe { path_argument(path) }?;
        let forced = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | (flags & libc::O_EXCL);
        let opened = open_one(path, forced, pid, mode)?;
        opened.handle.close().map_err(report)
    })
}

/// Makes what was written through fd durable (data and index).
///
/// # Safety
/// `fd` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_sync(fd: *mut PlfsFd) -> PlfsError {
    guard(|| {
        // SAFETY: NULL or live.
        let fd = unsafe { fd.as_ref() }.ok_or(PLFS_EBADF)?;
        fd.handle.sync().map_err(report)
    })
}

/// Not in PLFS 2.5: publishes what fd's writes left buffered (a
/// container's index records, a small file's directory records), so other
/// processes that read the file after a refresh or an open see it. A
/// container makes nothing durable here (plfs_sync does). The interposer
/// calls it before a lock is released.
///
/// # Safety
/// `fd` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_flush(fd: *mut PlfsFd) -> PlfsError {
    guard(|| {
        // SAFETY: NULL or live.
        let fd = unsafe { fd.as_ref() }.ok_or(PLFS_EBADF)?;
        fd.handle.flush().map_err(report)
    })
}

/// Not in PLFS 2.5: drops this process's cached view of fd's file, so its
/// next read and size see what other processes published since (its own
/// writes stay). The interposer calls it when a lock is granted.
///
/// # Safety
/// `fd` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_refresh(fd: *mut PlfsFd) -> PlfsError {
    guard(|| {
        // SAFETY: NULL or live.
        let fd = unsafe { fd.as_ref() }.ok_or(PLFS_EBADF)?;
        fd.handle.refresh().map_err(report)
    })
}

/// Sets a file's size. With an fd open for writing the fd truncates (its
/// writers see the new size at once); otherwise `path` is truncated, as
/// 2.5 did when the fd was NULL. `open_file` is 2.5's hint that the file
/// is open elsewhere; the core's truncate is a log record and needs none.
///
/// # Safety
/// `fd` is NULL or live; `path` is NULL or a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_trunc(
    fd: *mut PlfsFd,
    path: *const c_char,
    offset: libc::off_t,
    _open_file: c_int,
) -> PlfsError {
    guard(|| {
        let size = offset_of(offset)?;
        // SAFETY: NULL or live.
        if let Some(fd) = unsafe { fd.as_ref() } {
            if fd.flags.write {
                return fd.handle.truncate(size).map_err(report);
            }
            let path = fd.path();
            return fd.plfs.truncate(&path, size).map_err(|error| not_found(&fd.plfs, &path, error));
        }
        // SAFETY: the caller's contract.
        let (plfs, inner) = unsafe { crate::mounts::resolve_argument(path) }?;
        plfs.truncate(&inner, size).map_err(|error| not_found(&plfs, &inner, error))
    })
}

/// How fd is used: its references counted as writers and/or readers by
/// its open mode (2.5 counted each reopen by its own flags; here every
/// reference has the first open's), the bytes written through it, and
/// whether stat answers lazily for files being written. NULL outputs are
/// skipped.
///
/// # Safety
/// `fd` is NULL or live; each output is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_query(
    fd: *mut PlfsFd,
    writers: *mut usize,
    readers: *mut usize,
    bytes_written: *mut usize,
    lazy_stat: *mut c_int,
) -> PlfsError {
    guard(|| {
        // SAFETY: NULL or live.
        let fd = unsafe { fd.as_ref() }.ok_or(PLFS_EBADF)?;
        let references = fd.references.load(Ordering::Acquire);
        let written = usize::try_from(fd.bytes_written.load(Ordering::Relaxed)).unwrap_or(usize::MAX);
        let lazy = crate::mounts::table()?.config().tuning.lazy_stat;
        // SAFETY: each output is NULL or writable (the caller's contract).
        unsafe {
            store(writers, if fd.flags.write { references } else { 0 });
            store(readers, if fd.flags.read { references } else { 0 });
            store(bytes_written, written);
            store(lazy_stat, c_int::from(lazy));
        }
        Ok(())
    })
}

/// Writes `value` through an optional output pointer.
///
/// # Safety
/// `output` is NULL or writable.
pub unsafe fn store<T>(output: *mut T, value: T) {
    // SAFETY: NULL or writable, the caller's contract.
    if let Some(output) = unsafe { output.as_mut() } {
        *output = value;
    }
}
