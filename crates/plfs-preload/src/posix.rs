//! The interposed POSIX calls on descriptors and paths. Each one asks
//! first whether the call is a plfs call (a plfs descriptor, or a path
//! under a mount point) and otherwise calls the real libc function with
//! the same arguments, so other files behave exactly as without the
//! interposer.
//!
//! Stable Rust cannot define variadic functions: open, openat and fcntl
//! take their optional argument as a fixed one (the C calling convention
//! passes it in the same register) and read it only when the flags or the
//! command say it was passed.

use std::ffi::{c_char, c_int, c_uint, c_ulong, c_void};

use libc::{iovec, mode_t, off_t, off64_t, size_t, ssize_t};

use crate::files::{self, OpenFile, errno, set_errno};
use crate::libplfs::Errno;
use crate::paths::{LibcPath, plfs_path};
use crate::plfs_call;
use crate::real;

const _: () = assert!(size_of::<libc::stat>() == size_of::<libc::stat64>());
const _: () = assert!(size_of::<off_t>() == size_of::<off64_t>());

/// -1 with errno set, or the value.
pub fn int_result(result: Result<c_int, Errno>) -> c_int {
    result.unwrap_or_else(|error| {
        set_errno(error);
        -1
    })
}

pub fn unit_result(result: Result<(), Errno>) -> c_int {
    int_result(result.map(|()| 0))
}

pub fn size_result(result: Result<usize, Errno>) -> ssize_t {
    match result {
        Ok(count) => count as ssize_t,
        Err(error) => {
            set_errno(error);
            -1
        }
    }
}

/// The mode argument when open's flags say one was passed.
fn mode_argument(flags: c_int, mode: mode_t) -> mode_t {
    if flags & libc::O_CREAT != 0 || flags & libc::O_TMPFILE == libc::O_TMPFILE { mode } else { 0 }
}

fn open_plfs(dirfd: c_int, path: *const c_char, flags: c_int, mode: mode_t) -> Option<c_int> {
    let logical = plfs_path(dirfd, path)?;
    Some(int_result(files::open(logical, flags, mode_argument(flags, mode))))
}

/// # Safety
/// The open(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn open(path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    if let Some(result) = open_plfs(libc::AT_FDCWD, path, flags, mode) {
        return result;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe {
        real::open()(
            LibcPath::new(libc::AT_FDCWD, path).as_ptr(),
            flags,
            mode_argument(flags, mode) as c_uint,
        )
    }
}

/// # Safety
/// The open(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn open64(path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    if let Some(result) = open_plfs(libc::AT_FDCWD, path, flags, mode) {
        return result;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe {
        real::open64()(
            LibcPath::new(libc::AT_FDCWD, path).as_ptr(),
            flags,
            mode_argument(flags, mode) as c_uint,
        )
    }
}

/// # Safety
/// The openat(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn openat(dirfd: c_int, path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    if let Some(result) = open_plfs(dirfd, path, flags, mode) {
        return result;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe {
        real::openat()(
            dirfd,
            LibcPath::new(dirfd, path).as_ptr(),
            flags,
            mode_argument(flags, mode) as c_uint,
        )
    }
}

/// # Safety
/// The openat(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn openat64(dirfd: c_int, path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    if let Some(result) = open_plfs(dirfd, path, flags, mode) {
        return result;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe {
        real::openat64()(
            dirfd,
            LibcPath::new(dirfd, path).as_ptr(),
            flags,
            mode_argument(flags, mode) as c_uint,
        )
    }
}

/// # Safety
/// The creat(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn creat(path: *const c_char, mode: mode_t) -> c_int {
    let flags = libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC;
    if let Some(result) = open_plfs(libc::AT_FDCWD, path, flags, mode) {
        return result;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::creat()(LibcPath::new(libc::AT_FDCWD, path).as_ptr(), mode) }
}

/// # Safety
/// The creat(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn creat64(path: *const c_char, mode: mode_t) -> c_int {
    let flags = libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC;
    if let Some(result) = open_plfs(libc::AT_FDCWD, path, flags, mode) {
        return result;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::creat64()(LibcPath::new(libc::AT_FDCWD, path).as_ptr(), mode) }
}

// The _FORTIFY_SOURCE entry points: open without O_CREAT (no mode).

/// # Safety
/// The open(2) contract, without a mode.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __open_2(path: *const c_char, flags: c_int) -> c_int {
    if let Some(result) = open_plfs(libc::AT_FDCWD, path, flags, 0) {
        return result;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::__open_2()(LibcPath::new(libc::AT_FDCWD, path).as_ptr(), flags) }
}

/// # Safety
/// The open(2) contract, without a mode.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __open64_2(path: *const c_char, flags: c_int) -> c_int {
    if let Some(result) = open_plfs(libc::AT_FDCWD, path, flags, 0) {
        return result;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::__open64_2()(LibcPath::new(libc::AT_FDCWD, path).as_ptr(), flags) }
}

/// # Safety
/// The openat(2) contract, without a mode.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __openat_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    if let Some(result) = open_plfs(dirfd, path, flags, 0) {
        return result;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::__openat_2()(dirfd, LibcPath::new(dirfd, path).as_ptr(), flags) }
}

/// # Safety
/// The openat(2) contract, without a mode.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __openat64_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    if let Some(result) = open_plfs(dirfd, path, flags, 0) {
        return result;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::__openat64_2()(dirfd, LibcPath::new(dirfd, path).as_ptr(), flags) }
}

/// # Safety
/// The close(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if let Some(result) = files::close(fd) {
        return unit_result(result);
    }
    // A redirection's pump publishes first; its failure to write the file
    // is this close's error (the descriptor is closed all the same).
    let released = crate::pump::release(fd);
    crate::reserve::forget_within(fd, fd);
    // SAFETY: forwarded unchanged.
    let closed = unsafe { real::close()(fd) };
    match released {
        Err(error) if closed == 0 => int_result(Err(error)),
        _ => closed,
    }
}

/// close_range and closefrom on the descriptors the interposer keeps:
/// plfs descriptors in the range are closed as close(2) closes them (their
/// writes published, their table entries gone, so a later open that gets
/// the same number is not taken for them; see `files::close_within` for
/// inherited ones), redirections are released, and the interposer's source
/// descriptor, if in the range, is forgotten. With CLOSE_RANGE_CLOEXEC only
/// the plfs descriptors' flags change. A vfork child (Python's subprocess
/// closes descriptors in one) changes nothing: it shares its parent's
/// memory, and the kernel closes only the child's descriptors.
fn before_closing_range(first: c_int, last: c_int, flags: c_int) -> Result<(), Errno> {
    if files::shares_parent_memory() {
        return Ok(());
    }
    if flags & libc::CLOSE_RANGE_CLOEXEC as c_int != 0 {
        for fd in files::within(first, last) {
            files::set_close_on_exec(fd, true);
        }
        return Ok(());
    }
    let mut result = files::close_within(first, last);
    for fd in crate::pump::held_within(first, last) {
        result = result.and(crate::pump::release(fd));
    }
    crate::reserve::forget_within(first, last);
    result
}

/// # Safety
/// The close_range(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    if first <= last {
        let to_int = |fd: c_uint| c_int::try_from(fd).unwrap_or(c_int::MAX);
        // As close(2): the descriptors go even when a plfs file's last
        // writes fail; the first such failure is the call's error.
        let closed = before_closing_range(to_int(first), to_int(last), flags);
        // SAFETY: forwarded unchanged.
        let result = unsafe { real::close_range()(first, last, flags) };
        if result == 0
            && let Err(error) = closed
        {
            set_errno(error);
            return -1;
        }
        return result;
    }
    // SAFETY: forwarded unchanged (the kernel's EINVAL).
    unsafe { real::close_range()(first, last, flags) }
}

/// # Safety
/// The closefrom(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn closefrom(first: c_int) {
    // closefrom reports nothing; a plfs file's failed last write is lost
    // to the caller as it would be to close's caller ignoring the result.
    let _ = before_closing_range(first.max(0), c_int::MAX, 0);
    // SAFETY: forwarded unchanged.
    unsafe { real::closefrom()(first) }
}

/// _exit(2): the process ends without its atexit handlers, but what it
/// wrote through plfs descriptors is published first, as exit(3) publishes
/// it: the kernel has a file's bytes from the moment write(2) returns, so
/// programs end with _exit without losing them (every Python
/// multiprocessing worker and `os.fork()` child, a shell's subshells).
/// stdio is not flushed, as _exit does not flush it.
///
/// # Safety
/// The _exit(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _exit(status: c_int) -> ! {
    files::publish_before_exit();
    // SAFETY: forwarded unchanged.
    unsafe { real::_exit()(status) }
}

/// _Exit(3), which is _exit(2).
///
/// # Safety
/// The _Exit(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _Exit(status: c_int) -> ! {
    files::publish_before_exit();
    // SAFETY: forwarded unchanged.
    unsafe { real::_exit()(status) }
}

/// `buffer` as a slice, or EFAULT for NULL with a non-zero length.
///
/// # Safety
/// A non-NULL buffer is valid for `count` bytes.
unsafe fn buffer_mut<'a>(buffer: *mut c_void, count: size_t) -> Result<&'a mut [u8], Errno> {
    if count == 0 {
        return Ok(&mut []);
    }
    if buffer.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(buffer.cast(), count) })
}

/// # Safety
/// A non-NULL buffer is valid for `count` bytes.
unsafe fn buffer<'a>(buffer: *const c_void, count: size_t) -> Result<&'a [u8], Errno> {
    if count == 0 {
        return Ok(&[]);
    }
    if buffer.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(buffer.cast(), count) })
}

/// # Safety
/// The read(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t {
    if let Some(file) = files::lookup(fd) {
        // SAFETY: the caller's buffer.
        return size_result(unsafe { buffer_mut(buf, count) }.and_then(|slice| files::read(&file, slice)));
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::read()(fd, buf, count) }
}

/// # Safety
/// The write(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, count: size_t) -> ssize_t {
    if let Some(file) = files::lookup(fd) {
        // SAFETY: the caller's buffer.
        return size_result(unsafe { buffer(buf, count) }.and_then(|slice| files::write(&file, slice)));
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::write()(fd, buf, count) }
}

/// # Safety
/// The pread(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pread(fd: c_int, buf: *mut c_void, count: size_t, offset: off_t) -> ssize_t {
    if let Some(file) = files::lookup(fd) {
        // SAFETY: the caller's buffer.
        return size_result(
            unsafe { buffer_mut(buf, count) }.and_then(|slice| files::pread(&file, slice, offset)),
        );
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::pread()(fd, buf, count, offset) }
}

/// # Safety
/// The pread(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pread64(fd: c_int, buf: *mut c_void, count: size_t, offset: off64_t) -> ssize_t {
    if let Some(file) = files::lookup(fd) {
        // SAFETY: the caller's buffer.
        return size_result(
            unsafe { buffer_mut(buf, count) }.and_then(|slice| files::pread(&file, slice, offset)),
        );
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::pread64()(fd, buf, count, offset) }
}

/// # Safety
/// The pwrite(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pwrite(fd: c_int, buf: *const c_void, count: size_t, offset: off_t) -> ssize_t {
    if let Some(file) = files::lookup(fd) {
        // SAFETY: the caller's buffer.
        return size_result(
            unsafe { buffer(buf, count) }.and_then(|slice| files::positioned_write(&file, slice, offset)),
        );
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::pwrite()(fd, buf, count, offset) }
}

/// # Safety
/// The pwrite(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pwrite64(fd: c_int, buf: *const c_void, count: size_t, offset: off64_t) -> ssize_t {
    if let Some(file) = files::lookup(fd) {
        // SAFETY: the caller's buffer.
        return size_result(
            unsafe { buffer(buf, count) }.and_then(|slice| files::positioned_write(&file, slice, offset)),
        );
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::pwrite64()(fd, buf, count, offset) }
}

/// The iovecs of a vector call.
///
/// # Safety
/// `iov` points to `count` iovecs (when count > 0).
unsafe fn vectors<'a>(iov: *const iovec, count: c_int) -> Result<&'a [iovec], Errno> {
    let count = usize::try_from(count)
        .ok()
        .filter(|&count| count <= libc::UIO_MAXIOV as usize)
        .ok_or(libc::EINVAL)?;
    if count == 0 {
        return Ok(&[]);
    }
    if iov.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(iov, count) })
}

/// Reads into one buffer and scatters it, so the read is one plfs read.
/// `offset` None: at the file offset.
///
/// # Safety
/// Each iovec describes writable memory.
unsafe fn read_vectors(file: &OpenFile, iov: &[iovec], offset: Option<i64>) -> Result<usize, Errno> {
    let total: usize = iov.iter().map(|vector| vector.iov_len).sum();
    let mut gathered = vec![0u8; total];
    let count = match offset {
        None => files::read(file, &mut gathered)?,
        Some(offset) => files::pread(file, &mut gathered, offset)?,
    };
    let mut done = 0;
    for vector in iov {
        if done == count {
            break;
        }
        let take = vector.iov_len.min(count - done);
        // SAFETY: the caller's iovec is writable for iov_len >= take bytes.
        unsafe { std::ptr::copy_nonoverlapping(gathered[done..].as_ptr(), vector.iov_base.cast(), take) };
        done += take;
    }
    Ok(count)
}

/// Gathers into one buffer, so the write is one plfs write (one record).
///
/// # Safety
/// Each iovec describes readable memory.
unsafe fn write_vectors(file: &OpenFile, iov: &[iovec], offset: Option<i64>) -> Result<usize, Errno> {
    let mut gathered = Vec::with_capacity(iov.iter().map(|vector| vector.iov_len).sum());
    for vector in iov {
        // SAFETY: the caller's iovec.
        gathered.extend_from_slice(unsafe { buffer(vector.iov_base, vector.iov_len) }?);
    }
    match offset {
        None => files::write(file, &gathered),
        Some(offset) => files::positioned_write(file, &gathered, offset),
    }
}

/// # Safety
/// The readv(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, count: c_int) -> ssize_t {
    if let Some(file) = files::lookup(fd) {
        // SAFETY: the caller's iovecs.
        return size_result(
            unsafe { vectors(iov, count) }.and_then(|iov| unsafe { read_vectors(&file, iov, None) }),
        );
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::readv()(fd, iov, count) }
}

/// # Safety
/// The writev(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, count: c_int) -> ssize_t {
    if let Some(file) = files::lookup(fd) {
        // SAFETY: the caller's iovecs.
        return size_result(
            unsafe { vectors(iov, count) }.and_then(|iov| unsafe { write_vectors(&file, iov, None) }),
        );
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::writev()(fd, iov, count) }
}

/// # Safety
/// The preadv(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preadv(fd: c_int, iov: *const iovec, count: c_int, offset: off_t) -> ssize_t {
    if let Some(file) = files::lookup(fd) {
        // SAFETY: the caller's iovecs.
        return size_result(
            unsafe { vectors(iov, count) }.and_then(|iov| unsafe { read_vectors(&file, iov, Some(offset)) }),
        );
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::preadv()(fd, iov, count, offset) }
}

/// # Safety
/// The preadv(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preadv64(fd: c_int, iov: *const iovec, count: c_int, offset: off64_t) -> ssize_t {
    if let Some(file) = files::lookup(fd) {
        // SAFETY: the caller's iovecs.
        return size_result(
            unsafe { vectors(iov, count) }.and_then(|iov| unsafe { read_vectors(&file, iov, Some(offset)) }),
        );
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::preadv64()(fd, iov, count, offset) }
}

/// # Safety
/// The pwritev(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pwritev(fd: c_int, iov: *const iovec, count: c_int, offset: off_t) -> ssize_t {
    if let Some(file) = files::lookup(fd) {
        // SAFETY: the caller's iovecs.
        return size_result(
            unsafe { vectors(iov, count) }.and_then(|iov| unsafe { write_vectors(&file, iov, Some(offset)) }),
        );
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::pwritev()(fd, iov, count, offset) }
}

/// # Safety
/// The pwritev(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pwritev64(fd: c_int, iov: *const iovec, count: c_int, offset: off64_t) -> ssize_t {
    if let Some(file) = files::lookup(fd) {
        // SAFETY: the caller's iovecs.
        return size_result(
            unsafe { vectors(iov, count) }.and_then(|iov| unsafe { write_vectors(&file, iov, Some(offset)) }),
        );
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::pwritev64()(fd, iov, count, offset) }
}

/// The RWF_* flags of preadv2/pwritev2 a plfs file takes: a priority hint
/// (ignored), per-write syncs and RWF_APPEND (ignored by reads, as the
/// kernel ignores it there). RWF_NOWAIT and flags of later kernels are
/// EOPNOTSUPP, as a file system without them answers.
const VECTOR_FLAGS: c_int = libc::RWF_HIPRI | libc::RWF_DSYNC | libc::RWF_SYNC | libc::RWF_APPEND;

/// preadv2: preadv, or readv at the file offset when `offset` is -1.
///
/// # Safety
/// The preadv2(2) contract.
unsafe fn read_vectors2(
    file: &OpenFile,
    iov: *const iovec,
    count: c_int,
    offset: i64,
    flags: c_int,
) -> ssize_t {
    let result = (|| {
        if flags & !VECTOR_FLAGS != 0 {
            return Err(libc::EOPNOTSUPP);
        }
        let position = match offset {
            -1 => None,
            offset if offset < 0 => return Err(libc::EINVAL),
            offset => Some(offset),
        };
        // SAFETY: the caller's iovecs.
        unsafe { read_vectors(file, vectors(iov, count)?, position) }
    })();
    size_result(result)
}

/// pwritev2: pwritev, or writev at the file offset when `offset` is -1.
/// RWF_APPEND writes at the end of file whatever the offset (and moves the
/// file offset only when `offset` is -1); RWF_DSYNC and RWF_SYNC sync
/// after the write.
///
/// # Safety
/// The pwritev2(2) contract.
unsafe fn write_vectors2(
    file: &OpenFile,
    iov: *const iovec,
    count: c_int,
    offset: i64,
    flags: c_int,
) -> ssize_t {
    let result = (|| {
        if flags & !VECTOR_FLAGS != 0 {
            return Err(libc::EOPNOTSUPP);
        }
        if offset < -1 {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller's iovecs.
        let iov = unsafe { vectors(iov, count)? };
        let written = if flags & libc::RWF_APPEND != 0 {
            let mut gathered = Vec::new();
            for vector in iov {
                // SAFETY: the caller's iovec.
                gathered.extend_from_slice(unsafe { buffer(vector.iov_base, vector.iov_len) }?);
            }
            let (at, count) = files::append(file, &gathered)?;
            if offset == -1 {
                files::lseek(file, at + count as i64, libc::SEEK_SET)?;
            }
            count
        } else if offset == -1 {
            // SAFETY: the caller's iovecs.
            unsafe { write_vectors(file, iov, None) }?
        } else {
            // SAFETY: the caller's iovecs.
            unsafe { write_vectors(file, iov, Some(offset)) }?
        };
        if flags & (libc::RWF_DSYNC | libc::RWF_SYNC) != 0 {
            files::sync(file)?;
        }
        Ok(written)
    })();
    size_result(result)
}

/// # Safety
/// The preadv2(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preadv2(
    fd: c_int,
    iov: *const iovec,
    count: c_int,
    offset: off_t,
    flags: c_int,
) -> ssize_t {
    if let Some(file) = files::lookup(fd) {
        // SAFETY: forwarded contract.
        return unsafe { read_vectors2(&file, iov, count, offset, flags) };
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::preadv2()(fd, iov, count, offset, flags) }
}

/// # Safety
/// The preadv2(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preadv64v2(
    fd: c_int,
    iov: *const iovec,
    count: c_int,
    offset: off64_t,
    flags: c_int,
) -> ssize_t {
    if let Some(file) = files::lookup(fd) {
        // SAFETY: forwarded contract.
        return unsafe { read_vectors2(&file, iov, count, offset, flags) };
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::preadv64v2()(fd, iov, count, offset, flags) }
}

/// # Safety
/// The pwritev2(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pwritev2(
    fd: c_int,
    iov: *const iovec,
    count: c_int,
    offset: off_t,
    flags: c_int,
) -> ssize_t {
    if let Some(file) = files::lookup(fd) {
        // SAFETY: forwarded contract.
        return unsafe { write_vectors2(&file, iov, count, offset, flags) };
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::pwritev2()(fd, iov, count, offset, flags) }
}

/// # Safety
/// The pwritev2(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pwritev64v2(
    fd: c_int,
    iov: *const iovec,
    count: c_int,
    offset: off64_t,
    flags: c_int,
) -> ssize_t {
    if let Some(file) = files::lookup(fd) {
        // SAFETY: forwarded contract.
        return unsafe { write_vectors2(&file, iov, count, offset, flags) };
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::pwritev64v2()(fd, iov, count, offset, flags) }
}

fn offset_result(result: Result<i64, Errno>) -> off_t {
    result.unwrap_or_else(|error| {
        set_errno(error);
        -1
    })
}

/// # Safety
/// The lseek(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lseek(fd: c_int, offset: off_t, whence: c_int) -> off_t {
    if let Some(file) = files::lookup(fd) {
        return offset_result(files::lseek(&file, offset, whence));
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::lseek()(fd, offset, whence) }
}

/// # Safety
/// The lseek(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lseek64(fd: c_int, offset: off64_t, whence: c_int) -> off64_t {
    if let Some(file) = files::lookup(fd) {
        return offset_result(files::lseek(&file, offset, whence));
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::lseek64()(fd, offset, whence) }
}

/// # Safety
/// The ftruncate(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ftruncate(fd: c_int, length: off_t) -> c_int {
    if let Some(file) = files::lookup(fd) {
        return unit_result(files::truncate(&file, length));
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::ftruncate()(fd, length) }
}

/// # Safety
/// The ftruncate(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ftruncate64(fd: c_int, length: off64_t) -> c_int {
    if let Some(file) = files::lookup(fd) {
        return unit_result(files::truncate(&file, length));
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::ftruncate64()(fd, length) }
}

/// mmap of a plfs descriptor (see `files::map`); errno and MAP_FAILED on
/// failure.
fn map_plfs(
    file: &OpenFile,
    address: *mut c_void,
    length: size_t,
    protection: c_int,
    flags: c_int,
    offset: i64,
) -> *mut c_void {
    files::map(file, address, length, protection, flags, offset).unwrap_or_else(|error| {
        set_errno(error);
        libc::MAP_FAILED
    })
}

/// # Safety
/// The mmap(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmap(
    address: *mut c_void,
    length: size_t,
    protection: c_int,
    flags: c_int,
    fd: c_int,
    offset: off_t,
) -> *mut c_void {
    // Anonymous memory (every allocator's) skips the table.
    if flags & libc::MAP_ANONYMOUS == 0
        && let Some(file) = files::lookup(fd)
    {
        return map_plfs(&file, address, length, protection, flags, offset);
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::mmap()(address, length, protection, flags, fd, offset) }
}

/// # Safety
/// The mmap(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmap64(
    address: *mut c_void,
    length: size_t,
    protection: c_int,
    flags: c_int,
    fd: c_int,
    offset: off64_t,
) -> *mut c_void {
    if flags & libc::MAP_ANONYMOUS == 0
        && let Some(file) = files::lookup(fd)
    {
        return map_plfs(&file, address, length, protection, flags, offset);
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::mmap64()(address, length, protection, flags, fd, offset) }
}

/// # Safety
/// The fallocate(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fallocate(fd: c_int, mode: c_int, offset: off_t, length: off_t) -> c_int {
    if let Some(file) = files::lookup(fd) {
        return unit_result(files::allocate(&file, mode, offset, length));
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::fallocate()(fd, mode, offset, length) }
}

/// # Safety
/// The fallocate(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fallocate64(fd: c_int, mode: c_int, offset: off64_t, length: off64_t) -> c_int {
    if let Some(file) = files::lookup(fd) {
        return unit_result(files::allocate(&file, mode, offset, length));
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::fallocate64()(fd, mode, offset, length) }
}

/// posix_fallocate returns the error number instead of setting errno.
fn allocated(result: Result<(), libc::c_int>) -> c_int {
    result.err().unwrap_or(0)
}

/// # Safety
/// The posix_fallocate(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_fallocate(fd: c_int, offset: off_t, length: off_t) -> c_int {
    if let Some(file) = files::lookup(fd) {
        return allocated(files::allocate(&file, 0, offset, length));
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::posix_fallocate()(fd, offset, length) }
}

/// # Safety
/// The posix_fallocate(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_fallocate64(fd: c_int, offset: off64_t, length: off64_t) -> c_int {
    if let Some(file) = files::lookup(fd) {
        return allocated(files::allocate(&file, 0, offset, length));
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::posix_fallocate64()(fd, offset, length) }
}

fn truncate_path(path: *const c_char, length: i64) -> Option<c_int> {
    let logical = plfs_path(libc::AT_FDCWD, path)?;
    if length < 0 {
        return Some(unit_result(Err(libc::EINVAL)));
    }
    let truncated = plfs_call!(trunc, "plfs_trunc"(std::ptr::null_mut(), logical.as_ptr(), length, 0));
    if truncated.is_ok() {
        crate::ends::truncated(&logical, length);
    }
    Some(unit_result(truncated))
}

/// # Safety
/// The truncate(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn truncate(path: *const c_char, length: off_t) -> c_int {
    if let Some(result) = truncate_path(path, length) {
        return result;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::truncate()(LibcPath::new(libc::AT_FDCWD, path).as_ptr(), length) }
}

/// # Safety
/// The truncate(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn truncate64(path: *const c_char, length: off64_t) -> c_int {
    if let Some(result) = truncate_path(path, length) {
        return result;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::truncate64()(LibcPath::new(libc::AT_FDCWD, path).as_ptr(), length) }
}

/// # Safety
/// The fsync(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fsync(fd: c_int) -> c_int {
    if let Some(file) = files::lookup(fd) {
        return unit_result(files::sync(&file));
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::fsync()(fd) }
}

/// # Safety
/// The fdatasync(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fdatasync(fd: c_int) -> c_int {
    if let Some(file) = files::lookup(fd) {
        return unit_result(files::sync(&file));
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::fdatasync()(fd) }
}

/// # Safety
/// The dup(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    if let Some(file) = files::lookup(fd) {
        return int_result(duplicate_lowest(file, 0, false));
    }
    // SAFETY: forwarded unchanged.
    let duplicate = unsafe { real::dup()(fd) };
    crate::pump::duplicated(fd, duplicate);
    duplicate
}

/// dup and F_DUPFD of a plfs descriptor: the lowest free number from
/// `minimum`. When that is 0, 1 or 2 the program means a redirection, as
/// dup2 onto it would: GNU tar's child closes 1 (or 0) and `dup`s the
/// archive there before it execs gzip, as do programs older than dup2.
/// Without the pump the exec'd program found the number closed (the
/// reserved descriptor is close-on-exec): "gzip: stdout: Bad file
/// descriptor".
fn duplicate_lowest(
    file: std::sync::Arc<OpenFile>,
    minimum: c_int,
    close_on_exec: bool,
) -> Result<c_int, Errno> {
    if minimum <= 2 && crate::pump::possible(&file) {
        let lowest = crate::reserve::reserve(minimum)?;
        if lowest <= 2 {
            // dup3 in the pump's start puts the pipe over the number held.
            return crate::pump::start(&file, lowest, close_on_exec);
        }
        // SAFETY: our own reservation, only used to learn the number.
        unsafe { real::close()(lowest) };
    }
    files::duplicate(file, Some(minimum), close_on_exec)
}

/// dup2/dup3 of a plfs descriptor onto `target`: onto 0, 1 or 2 a
/// redirection through a pump (see `pump`), else another plfs descriptor.
fn duplicate_plfs(file: std::sync::Arc<OpenFile>, target: c_int, close_on_exec: bool) -> c_int {
    if crate::pump::wanted(&file, target) {
        return int_result(crate::pump::start(&file, target, close_on_exec));
    }
    // Whatever the target held goes, a redirection's pipe after its pump
    // published (dup2 does not fail for the old target's close).
    let _ = crate::pump::release(target);
    int_result(files::duplicate_onto(file, target, close_on_exec))
}

/// dup2/dup3 of a real descriptor: a redirection at `target` is released
/// first, and `target` holds `fd`'s redirection afterwards, if any.
fn duplicate_real(fd: c_int, target: c_int, duplicate: impl FnOnce() -> c_int) -> c_int {
    if fd != target {
        let _ = crate::pump::release(target);
    }
    // A real descriptor over a plfs one: the plfs state goes (closed when
    // no other descriptor shares it); the kernel closes the reserved fd.
    let replaced = files::forget(target);
    crate::reserve::forget_within(target, target);
    let result = duplicate();
    drop(replaced);
    if result >= 0 && fd != target {
        crate::pump::duplicated(fd, target);
    }
    result
}

/// # Safety
/// The dup2(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup2(fd: c_int, target: c_int) -> c_int {
    if let Some(file) = files::lookup(fd) {
        if fd == target {
            return target;
        }
        return duplicate_plfs(file, target, false);
    }
    // SAFETY: forwarded unchanged.
    duplicate_real(fd, target, || unsafe { real::dup2()(fd, target) })
}

/// # Safety
/// The dup3(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup3(fd: c_int, target: c_int, flags: c_int) -> c_int {
    if let Some(file) = files::lookup(fd) {
        if fd == target || flags & !libc::O_CLOEXEC != 0 {
            return int_result(Err(libc::EINVAL));
        }
        return duplicate_plfs(file, target, flags & libc::O_CLOEXEC != 0);
    }
    // SAFETY: forwarded unchanged.
    duplicate_real(fd, target, || unsafe { real::dup3()(fd, target, flags) })
}

/// fcntl on a plfs descriptor. Record locks are taken between the
/// node's processes of one user (see `locks`).
fn fcntl_plfs(fd: c_int, file: std::sync::Arc<OpenFile>, command: c_int, argument: c_ulong) -> c_int {
    match command {
        libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => {
            let minimum = c_int::try_from(argument).unwrap_or(c_int::MAX);
            int_result(duplicate_lowest(file, minimum, command == libc::F_DUPFD_CLOEXEC))
        }
        libc::F_GETFL => file.status_flags(),
        libc::F_SETFL => {
            file.set_status_flags(argument as c_int);
            0
        }
        libc::F_GETFD => c_int::from(files::close_on_exec(fd)) * libc::FD_CLOEXEC,
        libc::F_SETFD => {
            files::set_close_on_exec(fd, argument as c_int & libc::FD_CLOEXEC != 0);
            0
        }
        libc::F_SETLK
        | libc::F_SETLKW
        | libc::F_OFD_SETLK
        | libc::F_OFD_SETLKW
        | libc::F_GETLK
        | libc::F_OFD_GETLK => unit_result(files::record_lock(&file, command, argument as *mut libc::flock)),
        _ => int_result(Err(libc::EINVAL)),
    }
}

/// # Safety
/// The fcntl(2) contract; `argument` is the optional third argument.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fcntl(fd: c_int, command: c_int, argument: c_ulong) -> c_int {
    if let Some(file) = files::lookup(fd) {
        return fcntl_plfs(fd, file, command, argument);
    }
    // SAFETY: forwarded unchanged (an unused argument is harmless).
    let result = unsafe { real::fcntl()(fd, command, argument) };
    if matches!(command, libc::F_DUPFD | libc::F_DUPFD_CLOEXEC) {
        crate::pump::duplicated(fd, result);
    }
    result
}

/// # Safety
/// The fcntl(2) contract; `argument` is the optional third argument.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fcntl64(fd: c_int, command: c_int, argument: c_ulong) -> c_int {
    if let Some(file) = files::lookup(fd) {
        return fcntl_plfs(fd, file, command, argument);
    }
    // SAFETY: forwarded unchanged (an unused argument is harmless).
    let result = unsafe { real::fcntl64()(fd, command, argument) };
    if matches!(command, libc::F_DUPFD | libc::F_DUPFD_CLOEXEC) {
        crate::pump::duplicated(fd, result);
    }
    result
}

/// # Safety
/// The isatty(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn isatty(fd: c_int) -> c_int {
    if files::lookup(fd).is_some() {
        set_errno(libc::ENOTTY);
        return 0;
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::isatty()(fd) }
}

/// # Safety
/// The flock(2) contract (see `locks` for plfs files).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn flock(fd: c_int, operation: c_int) -> c_int {
    if let Some(file) = files::lookup(fd) {
        return unit_result(files::flock(&file, operation));
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::flock()(fd, operation) }
}

/// lockf on a plfs descriptor: glibc's calls its internal fcntl, which no
/// interposer sees (it failed with EBADF on the reserved descriptor).
fn lockf_plfs(file: &OpenFile, command: c_int, length: off64_t) -> c_int {
    let result = crate::locks::lockf_as_fcntl(command, length).and_then(|(fcntl_command, mut lock)| {
        files::record_lock(file, fcntl_command, &mut lock)?;
        // F_TEST: locked by another process is EACCES.
        if fcntl_command == libc::F_GETLK && c_int::from(lock.l_type) != libc::F_UNLCK {
            return Err(libc::EACCES);
        }
        Ok(())
    });
    unit_result(result)
}

/// # Safety
/// The lockf(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lockf(fd: c_int, command: c_int, length: off_t) -> c_int {
    if let Some(file) = files::lookup(fd) {
        return lockf_plfs(&file, command, length);
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::lockf()(fd, command, length) }
}

/// # Safety
/// The lockf64(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lockf64(fd: c_int, command: c_int, length: off64_t) -> c_int {
    if let Some(file) = files::lookup(fd) {
        return lockf_plfs(&file, command, length);
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::lockf64()(fd, command, length) }
}

/// # Safety
/// The posix_fadvise(2) contract. Advice is ignored on plfs files.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_fadvise(fd: c_int, offset: off_t, length: off_t, advice: c_int) -> c_int {
    if files::lookup(fd).is_some() {
        return 0;
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::posix_fadvise()(fd, offset, length, advice) }
}

/// # Safety
/// The posix_fadvise(2) contract. Advice is ignored on plfs files.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_fadvise64(
    fd: c_int,
    offset: off64_t,
    length: off64_t,
    advice: c_int,
) -> c_int {
    if files::lookup(fd).is_some() {
        return 0;
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::posix_fadvise64()(fd, offset, length, advice) }
}

/// The bytes of one copy step, bounded so a copy never holds more.
const COPY_CHUNK_BYTES: usize = 1 << 20;

/// copy_file_range and sendfile when a side is plfs: a read/write loop
/// through this interposer (either side may be plfs or a real file).
/// `in_offset`/`out_offset`: Some to use and advance a caller's offset
/// instead of the descriptor's.
///
/// # Safety
/// The offsets point to writable values when Some.
unsafe fn copy_loop(
    in_fd: c_int,
    in_offset: Option<*mut i64>,
    out_fd: c_int,
    out_offset: Option<*mut i64>,
    length: usize,
) -> Result<usize, Errno> {
    let mut chunk = vec![0u8; length.min(COPY_CHUNK_BYTES)];
    let mut copied = 0;
    while copied < length {
        let want = (length - copied).min(chunk.len());
        // SAFETY: chunk is writable for want bytes; the offsets are the caller's.
        let got = unsafe {
            match in_offset {
                Some(offset) => pread(in_fd, chunk.as_mut_ptr().cast(), want, *offset),
                None => read(in_fd, chunk.as_mut_ptr().cast(), want),
            }
        };
        if got < 0 {
            return if copied > 0 { Ok(copied) } else { Err(errno()) };
        }
        if got == 0 {
            break;
        }
        let got = got as usize;
        let mut written = 0;
        while written < got {
            // SAFETY: chunk holds got bytes; the offsets are the caller's.
            let put = unsafe {
                match out_offset {
                    Some(offset) => pwrite(out_fd, chunk[written..].as_ptr().cast(), got - written, *offset),
                    None => write(out_fd, chunk[written..].as_ptr().cast(), got - written),
                }
            };
            if put <= 0 {
                return if copied + written > 0 { Ok(copied + written) } else { Err(errno()) };
            }
            written += put as usize;
            if let Some(offset) = out_offset {
                // SAFETY: the caller's offset.
                unsafe { *offset += put as i64 };
            }
        }
        if let Some(offset) = in_offset {
            // SAFETY: the caller's offset.
            unsafe { *offset += got as i64 };
        }
        copied += got;
    }
    Ok(copied)
}

fn either_plfs(first: c_int, second: c_int) -> bool {
    files::lookup(first).is_some() || files::lookup(second).is_some()
}

/// # Safety
/// The copy_file_range(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn copy_file_range(
    in_fd: c_int,
    in_offset: *mut off64_t,
    out_fd: c_int,
    out_offset: *mut off64_t,
    length: size_t,
    flags: c_uint,
) -> ssize_t {
    if either_plfs(in_fd, out_fd) {
        if flags != 0 {
            return size_result(Err(libc::EINVAL));
        }
        let in_offset = (!in_offset.is_null()).then_some(in_offset);
        let out_offset = (!out_offset.is_null()).then_some(out_offset);
        // SAFETY: the caller's offsets.
        return size_result(unsafe { copy_loop(in_fd, in_offset, out_fd, out_offset, length) });
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::copy_file_range()(in_fd, in_offset, out_fd, out_offset, length, flags) }
}

/// # Safety
/// The sendfile(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sendfile(out_fd: c_int, in_fd: c_int, offset: *mut off_t, count: size_t) -> ssize_t {
    if either_plfs(in_fd, out_fd) {
        let in_offset = (!offset.is_null()).then_some(offset);
        // SAFETY: the caller's offset.
        return size_result(unsafe { copy_loop(in_fd, in_offset, out_fd, None, count) });
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::sendfile()(out_fd, in_fd, offset, count) }
}

/// # Safety
/// The sendfile(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sendfile64(
    out_fd: c_int,
    in_fd: c_int,
    offset: *mut off64_t,
    count: size_t,
) -> ssize_t {
    if either_plfs(in_fd, out_fd) {
        let in_offset = (!offset.is_null()).then_some(offset);
        // SAFETY: the caller's offset.
        return size_result(unsafe { copy_loop(in_fd, in_offset, out_fd, None, count) });
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::sendfile64()(out_fd, in_fd, offset, count) }
}
