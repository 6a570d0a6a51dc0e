//! Kernel descriptor numbers for plfs descriptors.
//!
//! Every plfs descriptor holds a real kernel descriptor of /dev/null opened
//! `O_PATH | O_CLOEXEC` (see `files`). Opening /dev/null for each plfs open
//! walked its path and made a new file, and closing it freed that file:
//! about 2.5 µs per open and close here, a fifth of an n-n file's open,
//! read and close under the interposer. Instead one such descriptor, the
//! source, is opened once and kept, and a reservation duplicates it
//! (`F_DUPFD_CLOEXEC`: the lowest free number, as open gives, without a
//! path walk; 0.6 µs with the close).
//!
//! The source sits at a high number ([`SOURCE_NUMBER`] when the descriptor
//! limit allows), so the program's own opens get the numbers they would
//! get without plfs. The program never opened it, but may still close it
//! (a close-everything loop, `close_range`, `closefrom`) or `dup2` onto its
//! number. Those calls are interposed and forget the source first, so a
//! later reservation opens a new one and never duplicates a descriptor
//! that is the program's own. A raw `close` system call that bypasses libc
//! bypasses this too, as it bypasses every other plfs call.

use std::ffi::c_int;
use std::sync::atomic::{AtomicI32, Ordering};

use crate::files::errno;
use crate::libplfs::Errno;
use crate::real;

/// Where the source is moved: the last number under the usual soft limit
/// of 1024 descriptors (and under select's FD_SETSIZE), far from the low
/// numbers programs count on.
const SOURCE_NUMBER: c_int = 1023;

/// The source descriptor, or -1 before the first reservation and after the
/// program closed it.
static SOURCE: AtomicI32 = AtomicI32::new(-1);

/// A new kernel descriptor number, the lowest free one at least `minimum`,
/// close-on-exec, that refers to /dev/null opened `O_PATH`: a read, write
/// or fstat that reaches the kernel with it fails or describes /dev/null,
/// never a backend file.
pub fn reserve(minimum: c_int) -> Result<c_int, Errno> {
    let source = SOURCE.load(Ordering::Acquire);
    if source >= 0 {
        // SAFETY: F_DUPFD_CLOEXEC takes an int and only makes a descriptor.
        let fd = unsafe { real::fcntl()(source, libc::F_DUPFD_CLOEXEC, minimum) };
        if fd >= 0 {
            return Ok(fd);
        }
        let error = errno();
        // EBADF: the source went behind libc's back; anything else (EMFILE,
        // EINVAL for a minimum past the limit) is the reservation's error.
        if error != libc::EBADF {
            return Err(error);
        }
        let _ = SOURCE.compare_exchange(source, -1, Ordering::AcqRel, Ordering::Acquire);
    }
    let fresh = open_source()?;
    let source = match SOURCE.compare_exchange(-1, fresh, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => fresh,
        Err(theirs) => {
            // Another thread's source won; ours goes.
            // SAFETY: fresh is ours and used nowhere else.
            unsafe { real::close()(fresh) };
            theirs
        }
    };
    // SAFETY: as above.
    let fd = unsafe { real::fcntl()(source, libc::F_DUPFD_CLOEXEC, minimum) };
    if fd < 0 { Err(errno()) } else { Ok(fd) }
}

/// Opens /dev/null `O_PATH` and moves it to [`SOURCE_NUMBER`] (or the
/// first free number above it); where the limit does not allow that, it
/// stays where open put it.
fn open_source() -> Result<c_int, Errno> {
    // SAFETY: a C string and valid flags; O_PATH opens need no mode.
    let fd = unsafe { real::open()(c"/dev/null".as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(errno());
    }
    Ok(move_up(fd, SOURCE_NUMBER))
}

/// Moves `fd` (ours) to the lowest free number from `minimum`, close-on-
/// exec, out of the way of the numbers programs count on; where the
/// descriptor limit does not allow it, it stays where it is.
pub fn move_up(fd: c_int, minimum: c_int) -> c_int {
    // SAFETY: fd is ours; F_DUPFD_CLOEXEC takes an int.
    let moved = unsafe { real::fcntl()(fd, libc::F_DUPFD_CLOEXEC, minimum) };
    if moved < 0 {
        return fd;
    }
    // SAFETY: fd is ours, replaced by moved.
    unsafe { real::close()(fd) };
    moved
}

/// The device and inode `fd` refers to, None when it is not open: what a
/// descriptor the interposer keeps is checked against before it is used,
/// since the program may have closed that number or put another file there.
pub fn identity(fd: c_int) -> Option<(u64, u64)> {
    // SAFETY: stat is plain data, filled by fstat.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid stat buffer.
    if unsafe { real::fstat()(fd, &mut stat) } != 0 {
        return None;
    }
    Some((stat.st_dev, stat.st_ino))
}

/// The program is about to close `first..=last`, or to make one of them a
/// copy of another descriptor: if the source is among them, it is forgotten
/// (the program's call closes it).
pub fn forget_within(first: c_int, last: c_int) {
    let source = SOURCE.load(Ordering::Acquire);
    if source >= 0 && (first..=last).contains(&source) {
        let _ = SOURCE.compare_exchange(source, -1, Ordering::AcqRel, Ordering::Acquire);
    }
}
