//! Which writer id this process writes as: its pid, unless an MPI layer
//! named it (PLFS 2.5's MPI-IO driver passed the rank, and the
//! `plfs_uniform_restart` hint reads back by rank). The override belongs to
//! the process that set it: a forked child writes as its own pid again.

use std::ffi::c_long;
use std::sync::atomic::{AtomicI32, AtomicI64, Ordering};

/// The named writer id (-1: none).
static WRITER: AtomicI64 = AtomicI64::new(-1);
/// The pid that named it.
static OWNER: AtomicI32 = AtomicI32::new(0);

/// Not in PLFS 2.5: makes this process write as `writer` (an MPI rank,
/// set by libplfs_mpiio.so); a negative value goes back to the pid.
#[unsafe(no_mangle)]
pub extern "C" fn plfs_preload_set_writer(writer: c_long) {
    // SAFETY: getpid cannot fail.
    OWNER.store(unsafe { libc::getpid() }, Ordering::Release);
    WRITER.store(writer, Ordering::Release);
}

/// The writer id to pass as `pid` to libplfs now.
pub fn current() -> libc::pid_t {
    // SAFETY: getpid cannot fail.
    let pid = unsafe { libc::getpid() };
    let writer = WRITER.load(Ordering::Acquire);
    if writer >= 0 && OWNER.load(Ordering::Acquire) == pid {
        libc::pid_t::try_from(writer).unwrap_or(pid)
    } else {
        pid
    }
}
