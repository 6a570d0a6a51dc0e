//! Attributes: `plfs_getattr`, `plfs_mode`, `plfs_access`, `plfs_chmod`,
//! `plfs_chown`, `plfs_utime`, `plfs_utimens` and `plfs_statvfs`. The core's attributes
//! become `struct stat` / `struct statvfs` here, at the edge.

use std::ffi::{CString, c_char, c_int};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::mem::MaybeUninit;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::errors::{PLFS_EINVAL, PlfsError, guard, report};
use crate::files::PlfsFd;
use crate::mounts::{Place, not_found, place_argument, resolve_argument};
use crate::plfs::attr::{Credentials, FileAttr, FileKind};
use crate::plfs::fs::Plfs;

/// Attributes of fd's file (its buffered index records flushed first, so
/// the size counts every write made through it) or, with a NULL fd, of
/// `path` (which may
/// be a directory above a mount point). Every field is filled whatever
/// `size_only` says: the core's stat costs the same.
///
/// # Safety
/// `fd` is NULL or live; `path` is NULL or a C string; `st` is NULL or a
/// writable `struct stat`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_getattr(
    fd: *mut PlfsFd,
    path: *const c_char,
    st: *mut libc::stat,
    _size_only: c_int,
) -> PlfsError {
    guard(|| {
        // SAFETY: NULL or writable.
        let st = unsafe { st.as_mut() }.ok_or(PLFS_EINVAL)?;
        // SAFETY: NULL or live.
        *st = match unsafe { fd.as_ref() } {
            Some(fd) => {
                // Buffered index records go out first, so the stat and any
                // reopen count them. PLFS 2.5 synced here; a stat is no
                // durability point, and the fsyncs of a writer's logs made
                // every fstat of a file being written cost two (about
                // 700 µs a write + fstat through the preload).
                fd.handle.flush().map_err(report)?;
                let path = fd.path();
                let mut st = to_stat(&fd.plfs.stat(&path).map_err(report)?, &path);
                if fd.handle.unlinked() {
                    st.st_nlink = 0;
                }
                st
            }
            // SAFETY: the caller's contract.
            None => match unsafe { place_argument(path) }? {
                Place::Mount(plfs, inner) => to_stat(&stat(&plfs, &inner)?, &inner),
                Place::AboveMount(path) => above_mount_stat(&path)?,
            },
        };
        Ok(())
    })
}

/// The mode of `path`: type and permission bits, as `st_mode`.
///
/// # Safety
/// `path` is NULL or a C string; `mode` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_mode(path: *const c_char, mode: *mut libc::mode_t) -> PlfsError {
    guard(|| {
        // SAFETY: NULL or writable.
        let mode = unsafe { mode.as_mut() }.ok_or(PLFS_EINVAL)?;
        // SAFETY: the caller's contract.
        *mode = match unsafe { place_argument(path) }? {
            Place::Mount(plfs, inner) => mode_of(&stat(&plfs, &inner)?),
            Place::AboveMount(path) => above_mount_stat(&path)?.st_mode,
        };
        Ok(())
    })
}

/// access(2) for this process's real user and groups, also on the
/// directories above a mount point (2.5's regression test walks down to the
/// mount with it).
///
/// # Safety
/// `path` is NULL or a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_access(path: *const c_char, mask: c_int) -> PlfsError {
    guard(|| {
        let mask = u32::try_from(mask).ok().filter(|mask| mask & !0o7 == 0).ok_or(PLFS_EINVAL)?;
        // SAFETY: the caller's contract.
        match unsafe { place_argument(path) }? {
            Place::Mount(plfs, inner) => {
                plfs.access(&inner, mask, &credentials()).map_err(|error| not_found(&plfs, &inner, error))
            }
            Place::AboveMount(path) => above_mount_access(&path, mask),
        }
    })
}

/// # Safety
/// `path` is NULL or a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_chmod(path: *const c_char, mode: libc::mode_t) -> PlfsError {
    guard(|| {
        // SAFETY: the caller's contract.
        let (plfs, inner) = unsafe { resolve_argument(path) }?;
        plfs.chmod(&inner, mode).map_err(|error| not_found(&plfs, &inner, error))
    })
}

/// An id of -1 leaves that one unchanged, as chown(2).
///
/// # Safety
/// `path` is NULL or a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_chown(path: *const c_char, uid: libc::uid_t, gid: libc::gid_t) -> PlfsError {
    guard(|| {
        // SAFETY: the caller's contract.
        let (plfs, inner) = unsafe { resolve_argument(path) }?;
        let uid = (uid != libc::uid_t::MAX).then_some(uid);
        let gid = (gid != libc::gid_t::MAX).then_some(gid);
        plfs.chown(&inner, uid, gid).map_err(|error| not_found(&plfs, &inner, error))
    })
}

/// A NULL `ut` sets both times to now, as utime(2).
///
/// # Safety
/// `path` is NULL or a C string; `ut` is NULL or a `struct utimbuf`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_utime(path: *const c_char, ut: *const libc::utimbuf) -> PlfsError {
    guard(|| {
        // SAFETY: the caller's contract.
        let (plfs, inner) = unsafe { resolve_argument(path) }?;
        // SAFETY: NULL or a utimbuf.
        let (atime, mtime) = match unsafe { ut.as_ref() } {
            Some(ut) => (time_of(ut.actime)?, time_of(ut.modtime)?),
            None => (SystemTime::now(), SystemTime::now()),
        };
        plfs.utime(&inner, Some(atime), Some(mtime)).map_err(|error| not_found(&plfs, &inner, error))
    })
}

/// Not in PLFS 2.5: utimensat(2)'s times for `path`, so the interposer
/// keeps nanoseconds and can leave one time alone: NULL `times` sets both
/// to now; per entry, `UTIME_NOW` is now and `UTIME_OMIT` leaves it.
///
/// # Safety
/// `path` is NULL or a C string; `times` is NULL or two `struct timespec`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_utimens(path: *const c_char, times: *const libc::timespec) -> PlfsError {
    guard(|| {
        // SAFETY: the caller's contract.
        let (plfs, inner) = unsafe { resolve_argument(path) }?;
        let now = SystemTime::now();
        let (atime, mtime) = if times.is_null() {
            (Some(now), Some(now))
        } else {
            // SAFETY: non-NULL: two timespecs.
            let [access, modify] = unsafe { [*times, *times.add(1)] };
            (timespec_time(&access, now)?, timespec_time(&modify, now)?)
        };
        if atime.is_none() && mtime.is_none() {
            // Both omitted: nothing changes, but the name must still exist.
            return stat(&plfs, &inner).map(drop);
        }
        plfs.utime(&inner, atime, mtime).map_err(|error| not_found(&plfs, &inner, error))
    })
}

/// One utimensat(2) time: None for UTIME_OMIT.
fn timespec_time(time: &libc::timespec, now: SystemTime) -> Result<Option<SystemTime>, PlfsError> {
    match time.tv_nsec {
        libc::UTIME_OMIT => Ok(None),
        libc::UTIME_NOW => Ok(Some(now)),
        nanoseconds => {
            let nanoseconds =
                u32::try_from(nanoseconds).ok().filter(|&ns| ns < 1_000_000_000).ok_or(PLFS_EINVAL)?;
            Ok(Some(time_of(time.tv_sec)? + Duration::from_nanos(u64::from(nanoseconds))))
        }
    }
}

/// The capacity of the mount holding `path`.
///
/// # Safety
/// `path` is NULL or a C string; `stbuf` is NULL or a writable
/// `struct statvfs`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_statvfs(path: *const c_char, stbuf: *mut libc::statvfs) -> PlfsError {
    guard(|| {
        // SAFETY: NULL or writable.
        let stbuf = unsafe { stbuf.as_mut() }.ok_or(PLFS_EINVAL)?;
        // SAFETY: the caller's contract.
        let (plfs, _) = unsafe { resolve_argument(path) }?;
        let space = plfs.statfs().map_err(report)?;
        // SAFETY: statvfs is plain integers; all-zero is a valid value.
        let mut out: libc::statvfs = unsafe { MaybeUninit::zeroed().assume_init() };
        out.f_bsize = space.block_size as _;
        out.f_frsize = space.block_size as _;
        out.f_blocks = space.blocks as _;
        out.f_bfree = space.blocks_free as _;
        out.f_bavail = space.blocks_available as _;
        out.f_files = space.files as _;
        out.f_ffree = space.files_free as _;
        out.f_favail = space.files_free as _;
        out.f_namemax = space.name_max as _;
        *stbuf = out;
        Ok(())
    })
}

/// A directory above mount points is not plfs's: it is the local
/// directory the mount points hang off, when there is one. Mounts used
/// through this library need no mount point on disk, though, so when the
/// local directory is missing the answer is a directory that only leads to
/// the mounts: readable and searchable by everyone, root's, and writable by
/// no one (nothing can be made in it through plfs).
fn above_mount_stat(path: &str) -> Result<libc::stat, PlfsError> {
    let local = CString::new(path).map_err(|_| PLFS_EINVAL)?;
    // SAFETY: stat is plain integers; all-zero is a valid value.
    let mut st: libc::stat = unsafe { MaybeUninit::zeroed().assume_init() };
    // SAFETY: local is a C string and st a writable stat.
    if unsafe { libc::stat(local.as_ptr(), &mut st) } == 0 {
        return Ok(st);
    }
    match last_errno() {
        libc::ENOENT => {
            st.st_ino = inode_of(path);
            st.st_mode = libc::S_IFDIR | 0o555;
            st.st_nlink = 2;
            st.st_blksize = 4096;
            Ok(st)
        }
        errno => Err(errno),
    }
}

/// access(2) on a directory above mount points: see `above_mount_stat`.
fn above_mount_access(path: &str, mask: u32) -> Result<(), PlfsError> {
    let local = CString::new(path).map_err(|_| PLFS_EINVAL)?;
    // SAFETY: local is a C string.
    if unsafe { libc::access(local.as_ptr(), mask as c_int) } == 0 {
        return Ok(());
    }
    match last_errno() {
        libc::ENOENT if mask & libc::W_OK as u32 != 0 => Err(libc::EROFS),
        libc::ENOENT => Ok(()),
        errno => Err(errno),
    }
}

fn last_errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// plfs has no inode numbers; a hash of the path is stable for the file's
/// life and distinct enough for tools that compare them.
fn inode_of(path: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    path.hash(&mut hasher);
    hasher.finish().max(1)
}

fn stat(plfs: &Plfs, inner: &str) -> Result<FileAttr, PlfsError> {
    plfs.stat(inner).map_err(|error| not_found(plfs, inner, error))
}

pub fn mode_of(attr: &FileAttr) -> libc::mode_t {
    let kind = match attr.kind {
        FileKind::File => libc::S_IFREG,
        FileKind::Directory => libc::S_IFDIR,
        FileKind::Symlink => libc::S_IFLNK,
    };
    kind | (attr.mode & 0o7777)
}

fn to_stat(attr: &FileAttr, inner: &str) -> libc::stat {
    // SAFETY: stat is plain integers; all-zero is a valid value.
    let mut st: libc::stat = unsafe { MaybeUninit::zeroed().assume_init() };
    st.st_ino = inode_of(inner) as _;
    st.st_mode = mode_of(attr);
    st.st_nlink = attr.nlink as _;
    st.st_uid = attr.uid;
    st.st_gid = attr.gid;
    st.st_size = i64::try_from(attr.size).unwrap_or(i64::MAX) as _;
    st.st_blocks = i64::try_from(attr.blocks).unwrap_or(i64::MAX) as _;
    st.st_blksize = 4096;
    (st.st_atime, st.st_atime_nsec) = timespec_of(attr.atime);
    (st.st_mtime, st.st_mtime_nsec) = timespec_of(attr.mtime);
    (st.st_ctime, st.st_ctime_nsec) = timespec_of(attr.ctime);
    st
}

/// Seconds and nanoseconds since the epoch (earlier times as the epoch).
fn timespec_of(time: SystemTime) -> (libc::time_t, i64) {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    (libc::time_t::try_from(since.as_secs()).unwrap_or(libc::time_t::MAX), i64::from(since.subsec_nanos()))
}

fn time_of(seconds: libc::time_t) -> Result<SystemTime, PlfsError> {
    let seconds = u64::try_from(seconds).map_err(|_| PLFS_EINVAL)?;
    Ok(UNIX_EPOCH + Duration::from_secs(seconds))
}

/// Who this process is, as access(2) checks: the real ids.
fn credentials() -> Credentials {
    // SAFETY: getuid and getgid cannot fail and touch no memory.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let mut groups = vec![0 as libc::gid_t; 256];
    // SAFETY: the buffer holds groups.len() ids; getgroups writes at most that.
    let count = unsafe { libc::getgroups(groups.len() as c_int, groups.as_mut_ptr()) };
    groups.truncate(usize::try_from(count).unwrap_or(0));
    Credentials { uid, gid, groups }
}
