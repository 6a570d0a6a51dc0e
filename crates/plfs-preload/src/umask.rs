//! The process's umask, which the kernel applies to the modes of files and
//! directories that open(2), creat(2) and mkdir(2) create. Calls the
//! interposer serves never reach the kernel, so it applies the umask itself.
//!
//! The umask is read once and then followed through the interposed
//! `umask(3)`: reading /proc/self/status on every create was three system
//! calls (and the kernel formatting the whole status page) per file.

use std::sync::atomic::{AtomicU32, Ordering};

/// Not yet known (no umask has more than the permission bits).
const UNKNOWN: u32 = u32::MAX;

/// The umask as this process last set it through libc, or UNKNOWN.
static CURRENT: AtomicU32 = AtomicU32::new(UNKNOWN);

/// The umask now: the one the program last set through `umask(3)`, or,
/// before it set any, the one it inherited (read once).
pub fn current() -> libc::mode_t {
    let known = CURRENT.load(Ordering::Acquire);
    if known != UNKNOWN {
        return known;
    }
    let inherited = from_proc().unwrap_or_else(|| {
        // SAFETY: umask cannot fail; the second call restores the first's
        // answer (another thread creating a file in between gets 0o077,
        // never something more open than it asked for).
        unsafe {
            let old = crate::real::umask()(0o077);
            crate::real::umask()(old);
            old
        }
    });
    // A umask(3) that ran meanwhile wins: its value is newer than what
    // /proc said.
    match CURRENT.compare_exchange(UNKNOWN, inherited, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => inherited,
        Err(newer) => newer,
    }
}

/// umask(3): sets the kernel's umask and remembers it. A program that
/// changes its umask with a raw system call instead is not followed.
///
/// # Safety
/// The umask(2) contract (none: it cannot fail).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn umask(mask: libc::mode_t) -> libc::mode_t {
    // SAFETY: forwarded unchanged.
    let old = unsafe { crate::real::umask()(mask) };
    CURRENT.store(mask & 0o777, Ordering::Release);
    old
}

fn from_proc() -> Option<libc::mode_t> {
    let mut buffer = [0u8; 4096];
    // SAFETY: a C string path; the descriptor is closed before returning;
    // read writes at most the buffer's length.
    let length = unsafe {
        let fd = libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            c"/proc/self/status".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return None;
        }
        let length = libc::syscall(libc::SYS_read, fd, buffer.as_mut_ptr(), buffer.len());
        libc::syscall(libc::SYS_close, fd);
        usize::try_from(length).ok()?
    };
    let text = std::str::from_utf8(&buffer[..length]).ok()?;
    let line = text.lines().find_map(|line| line.strip_prefix("Umask:"))?;
    libc::mode_t::from_str_radix(line.trim(), 8).ok()
}
