//! stdio on plfs files: fopen, fopen64 and fdopen return real FILE streams
//! made with `fopencookie`, whose cookie is a plfs descriptor; glibc's own
//! fread, fwrite, fseek, fprintf, fflush and fclose then work unchanged
//! through the descriptor functions of this interposer. (A plain FILE over
//! the reserved descriptor would not: glibc's stdio calls its internal
//! read/write, which no interposer sees.) freopen keeps its FILE, so its
//! descriptor becomes a redirection instead (`pump`).

use std::ffi::{CStr, c_char, c_int, c_void};

use libc::{FILE, off64_t, size_t, ssize_t};

use crate::files;
use crate::libplfs::Errno;
use crate::paths::{LibcPath, plfs_path};
use crate::real;

/// The open(2) flags of an fopen mode ("r", "w+", "a", "rb+", "wx", "re"…).
fn flags_of(mode: &[u8]) -> Result<c_int, Errno> {
    let (&first, rest) = mode.split_first().ok_or(libc::EINVAL)?;
    let update = rest.contains(&b'+');
    let mut flags = match (first, update) {
        (b'r', false) => libc::O_RDONLY,
        (b'r', true) => libc::O_RDWR,
        (b'w', false) => libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
        (b'w', true) => libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC,
        (b'a', false) => libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND,
        (b'a', true) => libc::O_RDWR | libc::O_CREAT | libc::O_APPEND,
        _ => return Err(libc::EINVAL),
    };
    if rest.contains(&b'x') {
        flags |= libc::O_EXCL;
    }
    if rest.contains(&b'e') {
        flags |= libc::O_CLOEXEC;
    }
    Ok(flags)
}

/// glibc's `cookie_io_functions_t` (the libc crate does not bind it).
#[repr(C)]
struct CookieFunctions {
    read: extern "C" fn(*mut c_void, *mut c_char, size_t) -> ssize_t,
    write: extern "C" fn(*mut c_void, *const c_char, size_t) -> ssize_t,
    seek: extern "C" fn(*mut c_void, *mut off64_t, c_int) -> c_int,
    close: extern "C" fn(*mut c_void) -> c_int,
}

unsafe extern "C" {
    fn fopencookie(cookie: *mut c_void, mode: *const c_char, functions: CookieFunctions) -> *mut FILE;
}

fn cookie_fd(cookie: *mut c_void) -> c_int {
    cookie as usize as c_int
}

extern "C" fn cookie_read(cookie: *mut c_void, buffer: *mut c_char, size: size_t) -> ssize_t {
    // SAFETY: glibc passes a buffer of size bytes; the descriptor is ours.
    unsafe { crate::posix::read(cookie_fd(cookie), buffer.cast(), size) }
}

extern "C" fn cookie_write(cookie: *mut c_void, buffer: *const c_char, size: size_t) -> ssize_t {
    // SAFETY: glibc passes size bytes; the descriptor is ours.
    let written = unsafe { crate::posix::write(cookie_fd(cookie), buffer.cast(), size) };
    // fopencookie wants 0, not -1, for a failed write.
    written.max(0)
}

extern "C" fn cookie_seek(cookie: *mut c_void, offset: *mut off64_t, whence: c_int) -> c_int {
    // SAFETY: glibc passes a valid offset pointer.
    let position = unsafe { crate::posix::lseek64(cookie_fd(cookie), *offset, whence) };
    if position < 0 {
        return -1;
    }
    // SAFETY: as above.
    unsafe { *offset = position };
    0
}

extern "C" fn cookie_close(cookie: *mut c_void) -> c_int {
    // SAFETY: the stream owns its descriptor.
    unsafe { crate::posix::close(cookie_fd(cookie)) }
}

/// The start of glibc's `struct _IO_FILE`, up to `_fileno`: part of
/// glibc's ABI (its old `fileno` macro read the field).
#[repr(C)]
struct FileStart {
    flags: c_int,
    /// `_IO_read_ptr` to `_IO_save_end`.
    buffer_pointers: [*mut c_char; 11],
    markers: *mut c_void,
    chain: *mut c_void,
    fileno: c_int,
}

/// A stream over plfs descriptor `fd`; on failure fd stays open.
///
/// fopencookie marks its stream "no descriptor" (`_fileno` -2), so
/// `fileno` failed with EBADF and programs that check what they opened
/// gave up: `sed -i` ("couldn't edit: not a regular file" after `fstat`
/// of `fileno`). The stream's `_fileno` is set to `fd`: glibc itself reads
/// and writes a cookie stream only through the cookie functions and closes
/// it through them, so the field only answers `fileno`, and the program's
/// calls on the descriptor (fstat, fsync, ftruncate, isatty) reach the
/// plfs file through this interposer.
fn stream(fd: c_int, mode: *const c_char) -> *mut FILE {
    let functions =
        CookieFunctions { read: cookie_read, write: cookie_write, seek: cookie_seek, close: cookie_close };
    // SAFETY: mode is the caller's C string; the cookie is a number.
    let file = unsafe { fopencookie(fd as usize as *mut c_void, mode, functions) };
    if !file.is_null() {
        // SAFETY: a FILE glibc just made, whose layout starts as FileStart.
        unsafe { (*file.cast::<FileStart>()).fileno = fd };
    }
    file
}

fn fopen_plfs(path: *const c_char, mode: *const c_char) -> Option<*mut FILE> {
    let logical = plfs_path(libc::AT_FDCWD, path)?;
    if mode.is_null() {
        files::set_errno(libc::EINVAL);
        return Some(std::ptr::null_mut());
    }
    // SAFETY: a non-NULL mode is a C string.
    let opened = flags_of(unsafe { CStr::from_ptr(mode) }.to_bytes())
        .and_then(|flags| files::open(logical, flags, 0o666));
    let fd = match opened {
        Ok(fd) => fd,
        Err(error) => {
            files::set_errno(error);
            return Some(std::ptr::null_mut());
        }
    };
    let file = stream(fd, mode);
    if file.is_null() {
        let error = files::errno();
        let _ = files::close(fd);
        files::set_errno(error);
    }
    Some(file)
}

/// # Safety
/// The fopen(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fopen(path: *const c_char, mode: *const c_char) -> *mut FILE {
    if let Some(file) = fopen_plfs(path, mode) {
        return file;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::fopen()(LibcPath::new(libc::AT_FDCWD, path).as_ptr(), mode) }
}

/// # Safety
/// The fopen(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fopen64(path: *const c_char, mode: *const c_char) -> *mut FILE {
    if let Some(file) = fopen_plfs(path, mode) {
        return file;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::fopen64()(LibcPath::new(libc::AT_FDCWD, path).as_ptr(), mode) }
}

/// # Safety
/// The fdopen(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fdopen(fd: c_int, mode: *const c_char) -> *mut FILE {
    if files::lookup(fd).is_some() {
        return stream(fd, mode);
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::fdopen()(fd, mode) }
}

/// freopen onto a plfs path: the stream must stay the same FILE, whose
/// descriptor glibc reads and writes with raw system calls, so that
/// descriptor becomes a redirection into (or out of) the file (see
/// `pump`). Update modes ("r+", "w+", "a+") cannot be carried by a pipe,
/// nor can a stream without a descriptor (a plfs stream itself): those
/// close the stream, as freopen does on failure, and fail with ENOTSUP.
fn freopen_plfs(path: *const c_char, mode: *const c_char, stream: *mut FILE) -> Option<*mut FILE> {
    let logical = plfs_path(libc::AT_FDCWD, path)?;
    Some(reopen(logical, mode, stream).unwrap_or_else(|error| {
        if !stream.is_null() {
            // SAFETY: the caller's live stream.
            unsafe { libc::fclose(stream) };
        }
        files::set_errno(error);
        std::ptr::null_mut()
    }))
}

fn reopen(logical: std::ffi::CString, mode: *const c_char, stream: *mut FILE) -> Result<*mut FILE, Errno> {
    if stream.is_null() || mode.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: a non-NULL mode is a C string.
    let flags = flags_of(unsafe { CStr::from_ptr(mode) }.to_bytes())?;
    if flags & libc::O_ACCMODE == libc::O_RDWR {
        return Err(libc::ENOTSUP);
    }
    // SAFETY: the caller's live stream.
    let target = unsafe { libc::fileno(stream) };
    // A plfs stream's descriptor is not one glibc reads and writes.
    if target < 0 || files::lookup(target).is_some() {
        return Err(libc::ENOTSUP);
    }
    // What the stream buffered belongs to its old file.
    // SAFETY: as above.
    unsafe { real::fflush()(stream) };
    let fd = files::open(logical, flags, 0o666)?;
    let file = files::lookup(fd).ok_or(libc::EBADF)?;
    let redirected = crate::pump::start(&file, target, flags & libc::O_CLOEXEC != 0);
    drop(file);
    if let Some(Err(error)) = files::close(fd) {
        return Err(error);
    }
    redirected?;
    // SAFETY: as above; a fresh file has no error or end-of-file mark.
    unsafe { libc::clearerr(stream) };
    Ok(stream)
}

/// # Safety
/// The freopen(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn freopen(path: *const c_char, mode: *const c_char, stream: *mut FILE) -> *mut FILE {
    if let Some(file) = freopen_plfs(path, mode, stream) {
        return file;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::freopen()(LibcPath::new(libc::AT_FDCWD, path).as_ptr(), mode, stream) }
}

/// # Safety
/// The freopen(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn freopen64(path: *const c_char, mode: *const c_char, stream: *mut FILE) -> *mut FILE {
    if let Some(file) = freopen_plfs(path, mode, stream) {
        return file;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::freopen64()(LibcPath::new(libc::AT_FDCWD, path).as_ptr(), mode, stream) }
}
