//! flock, fcntl record locks and lockf on plfs files, between one user's
//! processes on one node.
//!
//! plfs has no lock manager, and these calls used to succeed and do
//! nothing: two processes that each took an exclusive lock before
//! rewriting a file (sqlite, a lock-protected log or counter) both went
//! ahead. Each plfs description now holds, from its first lock call on,
//! a descriptor of a file on /dev/shm named by the user and the logical
//! path, and every lock call is made on that descriptor, so the
//! kernel's own rules apply: flock and OFD locks belong to the description
//! (shared by dup and fork), record locks to the process (released when it
//! closes the file, not inherited by fork), F_GETLK names the holder's
//! pid, F_SETLKW waits and detects deadlocks. Offsets relative to the
//! current position or the end are turned into absolute ones first.
//!
//! A lock is also where processes expect to see each other's writes, so
//! (`files::coherent`) a release publishes what libplfs buffers of the
//! file and a grant drops this process's cached view of it, as an NFS
//! client flushes at unlock and revalidates at lock. Without that, four
//! processes bumping a counter through descriptors they kept open each
//! went on from its own stale value, and sqlite lost committed
//! transactions.
//!
//! Not covered: processes of other users and on other nodes (as with a
//! local lock manager), and FUSE mounts (the kernel locks those itself).
//! The files (each holds only its path) stay on /dev/shm, one per locked
//! path and user: removing one while another process may be about to lock
//! it would let two processes hold "exclusive" locks on two files of one
//! name.

use std::ffi::{CStr, c_int};

use crate::ends;
use crate::libplfs::Errno;
use crate::real;

/// The lock file behind one plfs description.
#[derive(Debug)]
pub struct LockFile {
    fd: c_int,
    /// What `fd` refers to: the program may close that number or put
    /// another file there, which is then not ours to lock or close.
    identity: (u64, u64),
}

impl LockFile {
    /// Opens the lock file of `path` (the absolute logical path); ENOLCK
    /// where /dev/shm cannot hold one ("no locks available").
    pub fn open(path: &CStr) -> Result<LockFile, Errno> {
        let name = ends::name_of("lock", path.to_bytes());
        let fd = ends::open_high(&name).ok_or(libc::ENOLCK)?;
        match ends::owned_identity(fd) {
            Some(identity) => {
                // The path it is for, written once, for whoever looks at
                // /dev/shm (locks do not depend on it).
                let key = path.to_bytes();
                // SAFETY: ours, and a valid buffer of key.len() bytes.
                unsafe {
                    if ends::file_size(fd) == Some(0) {
                        libc::pwrite(fd, key.as_ptr().cast(), key.len(), 0);
                    }
                }
                Ok(LockFile { fd, identity })
            }
            None => {
                ends::close(fd);
                Err(libc::ENOLCK)
            }
        }
    }

    fn fd(&self) -> Result<c_int, Errno> {
        if crate::reserve::identity(self.fd) == Some(self.identity) { Ok(self.fd) } else { Err(libc::ENOLCK) }
    }

    /// flock(2) on the description.
    pub fn flock(&self, operation: c_int) -> Result<(), Errno> {
        let fd = self.fd()?;
        // SAFETY: our descriptor and the caller's operation.
        if unsafe { real::flock()(fd, operation) } == 0 { Ok(()) } else { Err(crate::files::errno()) }
    }

    /// F_SETLK, F_SETLKW, F_GETLK and their OFD forms with `lock`, whose
    /// start is already absolute (`l_whence` SEEK_SET).
    pub fn fcntl(&self, command: c_int, lock: &mut libc::flock) -> Result<(), Errno> {
        let fd = self.fd()?;
        // SAFETY: our descriptor and a valid struct flock.
        if unsafe { real::fcntl()(fd, command, std::ptr::from_mut(lock)) } == 0 {
            Ok(())
        } else {
            Err(crate::files::errno())
        }
    }
}

impl Drop for LockFile {
    /// Closing it lets go of what the description holds, as closing the
    /// file would.
    fn drop(&mut self) {
        if crate::reserve::identity(self.fd) == Some(self.identity) {
            ends::close(self.fd);
        }
    }
}

/// `lock` with its start made absolute: from the file's start, the
/// description's `offset`, or the file's `size` (asked only for SEEK_END).
pub fn absolute(
    lock: &libc::flock,
    offset: i64,
    size: impl FnOnce() -> Result<i64, Errno>,
) -> Result<libc::flock, Errno> {
    let base = match c_int::from(lock.l_whence) {
        libc::SEEK_SET => 0,
        libc::SEEK_CUR => offset,
        libc::SEEK_END => size()?,
        _ => return Err(libc::EINVAL),
    };
    let start = base.checked_add(lock.l_start).ok_or(libc::EOVERFLOW)?;
    // A negative length covers the bytes before the start (POSIX).
    if start < 0 || (lock.l_len < 0 && start + lock.l_len < 0) {
        return Err(libc::EINVAL);
    }
    Ok(libc::flock { l_whence: libc::SEEK_SET as i16, l_start: start, ..*lock })
}

/// lockf(3) as the fcntl lock it is: `length` bytes from the current
/// offset (0: to the end of the file and beyond).
pub fn lockf_as_fcntl(command: c_int, length: i64) -> Result<(c_int, libc::flock), Errno> {
    let (fcntl_command, kind) = match command {
        libc::F_ULOCK => (libc::F_SETLK, libc::F_UNLCK),
        libc::F_LOCK => (libc::F_SETLKW, libc::F_WRLCK),
        libc::F_TLOCK => (libc::F_SETLK, libc::F_WRLCK),
        libc::F_TEST => (libc::F_GETLK, libc::F_WRLCK),
        _ => return Err(libc::EINVAL),
    };
    // SAFETY: struct flock is plain data; all-zero is valid.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = kind as i16;
    lock.l_whence = libc::SEEK_CUR as i16;
    lock.l_len = length;
    Ok((fcntl_command, lock))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(whence: c_int, start: i64, length: i64) -> libc::flock {
        // SAFETY: plain data.
        let mut lock: libc::flock = unsafe { std::mem::zeroed() };
        lock.l_whence = whence as i16;
        lock.l_start = start;
        lock.l_len = length;
        lock
    }

    #[test]
    fn starts_are_made_absolute_from_the_offset_or_the_end() {
        let size = || Ok(1000);
        assert_eq!(absolute(&lock(libc::SEEK_SET, 5, 10), 70, size).unwrap().l_start, 5);
        let from_here = absolute(&lock(libc::SEEK_CUR, -20, 10), 70, size).unwrap();
        assert_eq!((from_here.l_start, from_here.l_whence), (50, libc::SEEK_SET as i16));
        assert_eq!(absolute(&lock(libc::SEEK_END, -1, 1), 70, size).unwrap().l_start, 999);
        assert_eq!(absolute(&lock(libc::SEEK_CUR, -71, 1), 70, size).unwrap_err(), libc::EINVAL);
        assert_eq!(absolute(&lock(libc::SEEK_SET, 5, -6), 0, size).unwrap_err(), libc::EINVAL);
        assert_eq!(absolute(&lock(7, 0, 0), 0, size).unwrap_err(), libc::EINVAL);
        let mut asked = false;
        absolute(&lock(libc::SEEK_CUR, 0, 0), 0, || {
            asked = true;
            Ok(0)
        })
        .unwrap();
        assert!(!asked, "the size is asked only for SEEK_END");
    }

    #[test]
    fn two_descriptions_of_one_path_exclude_each_other() {
        let path = std::ffi::CString::new(format!("/plfs-locks-test/{}/f", std::process::id())).unwrap();
        let first = LockFile::open(&path).unwrap();
        let second = LockFile::open(&path).unwrap();
        first.flock(libc::LOCK_EX).unwrap();
        assert_eq!(second.flock(libc::LOCK_EX | libc::LOCK_NB).unwrap_err(), libc::EWOULDBLOCK);
        first.flock(libc::LOCK_UN).unwrap();
        second.flock(libc::LOCK_EX | libc::LOCK_NB).unwrap();
        drop(second);
        first.flock(libc::LOCK_SH | libc::LOCK_NB).unwrap();
        drop(first);
        // SAFETY: a C string.
        unsafe { libc::unlink(ends::name_of("lock", path.to_bytes()).as_ptr()) };
    }
}
