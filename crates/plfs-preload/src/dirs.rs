//! Directory streams on plfs directories. A plfs stream is this module's
//! own allocation handed out as a `DIR *`; the registry of live streams
//! tells readdir and closedir which pointers are ours (every other pointer
//! is glibc's and goes to the real function).

use std::ffi::{c_char, c_int, c_long, c_void};
use std::sync::Mutex;

use libc::{DIR, dirent, dirent64};

use crate::files;
use crate::libplfs::{Errno, PlfsDirp};
use crate::paths::{LibcPath, plfs_path};
use crate::plfs_call;
use crate::posix::{int_result, unit_result};
use crate::real::{self, DirentFilter, DirentOrder};

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
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::opendir()(LibcPath::new(libc::AT_FDCWD, path).as_ptr()) }
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
/// "." and ".." come first, as from every directory the kernel lists:
/// libplfs leaves them out (as PLFS 2.5's listing did), and programs count
/// on them (`ls -a`; code that skips the first two entries unread).
///
/// # Safety
/// `stream` is live.
unsafe fn next(stream: *mut Stream) -> *mut dirent64 {
    // SAFETY: live and used by one thread at a time (readdir's contract).
    let stream = unsafe { &mut *stream };
    let mut name = [0 as c_char; 256];
    let kind = match stream.position {
        0 | 1 => {
            let dots: &[u8] = if stream.position == 0 { b"." } else { b".." };
            for (slot, &byte) in name.iter_mut().zip(dots) {
                *slot = byte as c_char;
            }
            libc::DT_DIR
        }
        _ => {
            if let Err(error) =
                plfs_call!(readdir, "plfs_readdir_c"(stream.directory, name.as_mut_ptr(), name.len()))
            {
                files::set_errno(error);
                return std::ptr::null_mut();
            }
            if name[0] == 0 {
                return std::ptr::null_mut();
            }
            libc::DT_UNKNOWN
        }
    };
    stream.position += 1;
    let entry = &mut stream.entry;
    entry.d_ino = stream.position;
    entry.d_off = stream.position as i64;
    entry.d_reclen = size_of::<dirent64>() as u16;
    entry.d_type = kind;
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

/// Back to the first entry: the directory is listed again (the 2.5
/// directory API has no rewind), so what changed since shows.
fn rewind(stream: &mut Stream) -> Result<(), Errno> {
    let mut directory: PlfsDirp = std::ptr::null_mut();
    plfs_call!(opendir, "plfs_opendir_c"(stream.path.as_ptr(), &mut directory))?;
    let _ = plfs_call!(closedir, "plfs_closedir_c"(stream.directory));
    stream.directory = directory;
    stream.position = 0;
    Ok(())
}

/// # Safety
/// The rewinddir(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rewinddir(dirp: *mut DIR) {
    if let Some(stream) = ours(dirp) {
        // SAFETY: ours and live.
        let _ = rewind(unsafe { &mut *stream });
        return;
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::rewinddir()(dirp) }
}

/// # Safety
/// The telldir(3) contract. A plfs stream's position is the number of
/// entries read, which seekdir takes back.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn telldir(dirp: *mut DIR) -> c_long {
    if let Some(stream) = ours(dirp) {
        // SAFETY: ours and live.
        return unsafe { &*stream }.position as c_long;
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::telldir()(dirp) }
}

/// # Safety
/// The seekdir(3) contract: `location` came from telldir on this stream.
/// A plfs stream lists the directory again and skips that many entries.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn seekdir(dirp: *mut DIR, location: c_long) {
    if let Some(stream) = ours(dirp) {
        // SAFETY: ours and live.
        if rewind(unsafe { &mut *stream }).is_ok() {
            // SAFETY: as above; a short directory just ends the skipping.
            while unsafe { &*stream }.position < location.max(0) as u64 && !unsafe { next(stream) }.is_null()
            {
            }
        }
        return;
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::seekdir()(dirp, location) }
}

/// readdir_r on a plfs stream: the next entry copied to `entry`, `*result`
/// NULL at the end; an error number instead of errno.
///
/// # Safety
/// `stream` is live, `entry` and `result` writable.
unsafe fn next_into(stream: *mut Stream, entry: *mut dirent64, result: *mut *mut dirent64) -> c_int {
    files::set_errno(0);
    // SAFETY: the caller's contract.
    let next = unsafe { next(stream) };
    if next.is_null() {
        // SAFETY: writable.
        unsafe { *result = std::ptr::null_mut() };
        return files::errno();
    }
    // SAFETY: both are dirent64s; entry is the caller's, next ours.
    unsafe {
        std::ptr::copy_nonoverlapping(next, entry, 1);
        *result = entry;
    }
    0
}

/// # Safety
/// The readdir_r(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readdir_r(dirp: *mut DIR, entry: *mut dirent, result: *mut *mut dirent) -> c_int {
    if let Some(stream) = ours(dirp) {
        // SAFETY: the caller's contract; dirent and dirent64 share a layout.
        return unsafe { next_into(stream, entry.cast(), result.cast()) };
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::readdir_r()(dirp, entry, result) }
}

/// # Safety
/// The readdir64_r(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readdir64_r(
    dirp: *mut DIR,
    entry: *mut dirent64,
    result: *mut *mut dirent64,
) -> c_int {
    if let Some(stream) = ours(dirp) {
        // SAFETY: the caller's contract.
        return unsafe { next_into(stream, entry, result) };
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::readdir64_r()(dirp, entry, result) }
}

/// scandir of a plfs directory: glibc's own scandir lists with its
/// internal opendir, which no interposer sees (it failed with ENOENT).
/// The array and each entry are malloc'd, as the caller frees them.
///
/// # Safety
/// The scandir(3) contract.
unsafe fn scan(
    path: std::ffi::CString,
    names: *mut *mut *mut dirent,
    filter: DirentFilter,
    order: DirentOrder,
) -> c_int {
    let dirp = match open_stream(path, -1) {
        Ok(dirp) => dirp,
        Err(error) => return int_result(Err(error)),
    };
    let mut kept: Vec<*mut dirent> = Vec::new();
    // 0 at the end of the listing, else the error number.
    let failure = loop {
        files::set_errno(0);
        // SAFETY: ours, live until closedir below.
        let entry = unsafe { next(dirp.cast()) }.cast::<dirent>();
        if entry.is_null() {
            break files::errno();
        }
        // SAFETY: the program's filter gets a valid entry.
        if filter.is_some_and(|keep| unsafe { keep(entry) } == 0) {
            continue;
        }
        // SAFETY: malloc of a dirent's size; copied whole.
        let copy = unsafe { libc::malloc(size_of::<dirent>()) }.cast::<dirent>();
        if copy.is_null() {
            break libc::ENOMEM;
        }
        // SAFETY: both valid for one dirent.
        unsafe { std::ptr::copy_nonoverlapping(entry, copy, 1) };
        kept.push(copy);
    };
    // SAFETY: ours.
    unsafe { closedir(dirp) };
    // SAFETY: an array of the kept pointers, malloc'd for the caller.
    let array = unsafe { libc::malloc(size_of::<*mut dirent>() * kept.len().max(1)) }.cast::<*mut dirent>();
    if failure != 0 || array.is_null() {
        for entry in kept {
            // SAFETY: malloc'd above.
            unsafe { libc::free(entry.cast()) };
        }
        // SAFETY: malloc'd above (free of NULL does nothing).
        unsafe { libc::free(array.cast()) };
        return int_result(Err(if failure != 0 { failure } else { libc::ENOMEM }));
    }
    // SAFETY: array holds kept.len() pointers.
    unsafe { std::ptr::copy_nonoverlapping(kept.as_ptr(), array, kept.len()) };
    if let Some(order) = order {
        // SAFETY: qsort over the array with the program's comparator of
        // `const struct dirent **`, as glibc's scandir calls it.
        unsafe {
            let compare = std::mem::transmute::<
                unsafe extern "C" fn(*mut *const dirent, *mut *const dirent) -> c_int,
                unsafe extern "C" fn(*const c_void, *const c_void) -> c_int,
            >(order);
            libc::qsort(array.cast(), kept.len(), size_of::<*mut dirent>(), Some(compare));
        }
    }
    // SAFETY: the caller's pointer.
    unsafe { *names = array };
    kept.len() as c_int
}

/// # Safety
/// The scandir(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scandir(
    path: *const c_char,
    names: *mut *mut *mut dirent,
    filter: DirentFilter,
    order: DirentOrder,
) -> c_int {
    // SAFETY: the same contract.
    unsafe { scandirat(libc::AT_FDCWD, path, names, filter, order) }
}

/// # Safety
/// The scandir64(3) contract (dirent64 is dirent here).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scandir64(
    path: *const c_char,
    names: *mut *mut *mut dirent,
    filter: DirentFilter,
    order: DirentOrder,
) -> c_int {
    // SAFETY: the same contract.
    unsafe { scandirat(libc::AT_FDCWD, path, names, filter, order) }
}

/// # Safety
/// The scandirat(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scandirat(
    dirfd: c_int,
    path: *const c_char,
    names: *mut *mut *mut dirent,
    filter: DirentFilter,
    order: DirentOrder,
) -> c_int {
    if let Some(logical) = plfs_path(dirfd, path) {
        // SAFETY: the caller's contract.
        return unsafe { scan(logical, names, filter, order) };
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::scandirat()(dirfd, LibcPath::new(dirfd, path).as_ptr(), names, filter, order) }
}

/// # Safety
/// The scandirat64(3) contract (dirent64 is dirent here).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn scandirat64(
    dirfd: c_int,
    path: *const c_char,
    names: *mut *mut *mut dirent,
    filter: DirentFilter,
    order: DirentOrder,
) -> c_int {
    // SAFETY: the same contract.
    unsafe { scandirat(dirfd, path, names, filter, order) }
}
