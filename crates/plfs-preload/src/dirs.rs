//! Directory streams on plfs directories. A plfs stream is this module's
//! own allocation handed out as a `DIR *`; the registry of live streams
//! tells readdir and closedir which pointers are ours (every other pointer
//! is glibc's and goes to the real function).

use std::ffi::{c_char, c_int};
use std::sync::Mutex;

use libc::{DIR, dirent, dirent64};

use crate::files;
use crate::libplfs::{Errno, PlfsDirp};
use crate::paths::plfs_path;
use crate::plfs_call;
use crate::posix::{int_result, unit_result};
use crate::real;

const _: () = assert!(size_of::<dirent>() == size_of::<dirent64>());

struct Stream {
    directory: PlfsDirp,
    /// The plfs directory descriptor behind the stream (fdopendir, or one
    /// opened for dirfd), closed with the stream; -1 before dirfd asks.
    fd: c_int,
    path: std::ffi::CString,
    /// The entry readdir returns, valid until the next readdir.
    entry: dirent64,
    /// Entries returned so far (d_off, and d_ino, which must not be 0:
    /// some programs skip entries with inode 0).
    position: u64,
}

static STREAMS: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn streams() -> std::sync::MutexGuard<'static, Vec<usize>> {
    STREAMS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn ours(dirp: *mut DIR) -> Option<*mut Stream> {
    if dirp.is_null() {
        return None;
    }
    let streams = streams();
    if streams.is_empty() {
        return None;
    }
    streams.contains(&(dirp as usize)).then_some(dirp.cast())
}

fn open_stream(path: std::ffi::CString, fd: c_int) -> Result<*mut DIR, Errno> {
    let mut directory: PlfsDirp = std::ptr::null_mut();
    plfs_call!(opendir, "plfs_opendir_c"(path.as_ptr(), &mut directory))?;
    let stream = Box::new(Stream {
        directory,
        fd,
        path,
        // SAFETY: dirent64 is plain data; all-zero is valid.
        entry: unsafe { std::mem::zeroed() },
        position: 0,
    });
    let pointer = Box::into_raw(stream);
    streams().push(pointer as usize);
    Ok(pointer.cast())
}

fn pointer_result(result: Result<*mut DIR, Errno>) -> *mut DIR {
    result.unwrap_or_else(|error| {
        files::set_errno(error);
        std::ptr::null_mut()
    })
}

/// # Safety
/// The opendir(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn opendir(path: *const c_char) -> *mut DIR {
    if let Some(logical) = plfs_path(libc::AT_FDCWD, path) {
        return pointer_result(open_stream(logical, -1));
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::opendir()(path) }
}

/// # Safety
/// The fdopendir(3) contract: the stream owns fd from now on.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fdopendir(fd: c_int) -> *mut DIR {
    if let Some(file) = files::lookup(fd) {
        if file.kind != files::Kind::Directory {
            return pointer_result(Err(libc::ENOTDIR));
        }
        return pointer_result(open_stream(file.path.clone(), fd));
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::fdopendir()(fd) }
}

/// The next entry of a plfs stream, or NULL at the end (errno unchanged).
///
/// # Safety
/// `stream` is live.
unsafe fn next(stream: *mut Stream) -> *mut dirent64 {
    // SAFETY: live and used by one thread at a time (readdir's contract).
    let stream = unsafe { &mut *stream };
    let mut name = [0 as c_char; 256];
    if let Err(error) = plfs_call!(readdir, "plfs_readdir_c"(stream.directory, name.as_mut_ptr(), name.len()))
    {
        files::set_errno(error);
        return std::ptr::null_mut();
    }
    if name[0] == 0 {
        return std::ptr::null_mut();
    }
    stream.position += 1;
    let entry = &mut stream.entry;
    entry.d_ino = stream.position;
    entry.d_off = stream.position as i64;
    entry.d_reclen = size_of::<dirent64>() as u16;
    entry.d_type = libc::DT_UNKNOWN;
    // name is NUL-terminated within its 256 bytes, as d_name is.
    entry.d_name.copy_from_slice(&name);
    entry.d_name[255] = 0;
    entry
}

/// # Safety
/// The readdir(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readdir(dirp: *mut DIR) -> *mut dirent {
    if let Some(stream) = ours(dirp) {
        // SAFETY: ours and live; dirent and dirent64 share a layout here.
        return unsafe { next(stream) }.cast();
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::readdir()(dirp) }
}

/// # Safety
/// The readdir(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readdir64(dirp: *mut DIR) -> *mut dirent64 {
    if let Some(stream) = ours(dirp) {
        // SAFETY: ours and live.
        return unsafe { next(stream) };
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::readdir64()(dirp) }
}

/// # Safety
/// The closedir(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn closedir(dirp: *mut DIR) -> c_int {
    if let Some(stream) = ours(dirp) {
        streams().retain(|&live| live != stream as usize);
        // SAFETY: ours, made by Box::into_raw, and no longer registered.
        let stream = unsafe { Box::from_raw(stream) };
        let closed = plfs_call!(closedir, "plfs_closedir_c"(stream.directory));
        if stream.fd >= 0 {
            let _ = files::close(stream.fd);
        }
        return unit_result(closed);
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::closedir()(dirp) }
}

/// # Safety
/// The dirfd(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dirfd(dirp: *mut DIR) -> c_int {
    if let Some(stream) = ours(dirp) {
        // SAFETY: ours and live.
        let stream = unsafe { &mut *stream };
        if stream.fd < 0 {
            // A stream from opendir gets its descriptor when asked for one.
            match files::open(stream.path.clone(), libc::O_RDONLY | libc::O_DIRECTORY, 0) {
                Ok(fd) => stream.fd = fd,
                Err(error) => return int_result(Err(error)),
            }
        }
        return stream.fd;
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::dirfd()(dirp) }
}

/// # Safety
/// The rewinddir(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rewinddir(dirp: *mut DIR) {
    if let Some(stream) = ours(dirp) {
        // SAFETY: ours and live.
        let stream = unsafe { &mut *stream };
        // Reopen: the 2.5 directory API has no rewind.
        let mut directory: PlfsDirp = std::ptr::null_mut();
        if plfs_call!(opendir, "plfs_opendir_c"(stream.path.as_ptr(), &mut directory)).is_ok() {
            let _ = plfs_call!(closedir, "plfs_closedir_c"(stream.directory));
            stream.directory = directory;
            stream.position = 0;
        }
        return;
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::rewinddir()(dirp) }
}
