//! The interposed attribute calls: chmod, chown and the utime family in
//! their path, *at and descriptor forms. Without them `chmod 600 f`,
//! `touch f`, `cp -p` or python's os.chmod on a plfs path reached the
//! kernel with the logical path, which does not exist (ENOENT).
//!
//! Every form becomes one of libplfs's path calls (`plfs_chmod`,
//! `plfs_chown`, `plfs_utimens`) on the logical path; a descriptor's is
//! the path it was opened with. The backend files carry the mode and
//! owner, so the permission checks on them hold for every user.

use std::ffi::{CStr, CString, c_char, c_int};

use libc::{gid_t, mode_t, timespec, timeval, uid_t};

use crate::files;
use crate::libplfs::Errno;
use crate::paths::{LibcPath, plfs_path};
use crate::plfs_call;
use crate::posix::unit_result;
use crate::real;

/// What a call names: a plfs path, a plfs descriptor, or neither (libc).
enum Target {
    Path(CString),
    Descriptor(std::sync::Arc<files::OpenFile>),
    /// A standard descriptor redirected onto a plfs file (a pipe to a
    /// pump), and that file's path.
    Redirected(c_int, CString),
}

impl Target {
    fn path(&self) -> &CStr {
        match self {
            Target::Path(path) => path,
            Target::Descriptor(file) => &file.path,
            Target::Redirected(_, path) => path,
        }
    }
}

fn descriptor(fd: c_int) -> Option<Target> {
    if let Some(file) = files::lookup(fd) {
        return Some(Target::Descriptor(file));
    }
    crate::pump::redirected_path(fd).map(|path| Target::Redirected(fd, path))
}

/// `path` relative to `dirfd`, or `dirfd` itself for an empty path with
/// AT_EMPTY_PATH (fchownat, utimensat); None when not a plfs call.
fn at(dirfd: c_int, path: *const c_char, flags: c_int) -> Option<Target> {
    // SAFETY: a non-NULL path is a C string (the libc contract).
    let empty = path.is_null() || unsafe { CStr::from_ptr(path) }.is_empty();
    if empty && flags & libc::AT_EMPTY_PATH != 0 {
        return descriptor(dirfd);
    }
    plfs_path(dirfd, path).map(Target::Path)
}

fn set_mode(target: &Target, mode: mode_t) -> Result<(), Errno> {
    plfs_call!(chmod, "plfs_chmod"(target.path().as_ptr(), mode & 0o7777))
}

/// fchmodat's AT_SYMLINK_NOFOLLOW as glibc does it: a symbolic link's own
/// mode cannot be changed (EOPNOTSUPP), anything else is chmod'ed.
fn set_mode_at(target: &Target, mode: mode_t, flags: c_int) -> Result<(), Errno> {
    if flags & !libc::AT_SYMLINK_NOFOLLOW != 0 {
        return Err(libc::EINVAL);
    }
    if flags & libc::AT_SYMLINK_NOFOLLOW != 0 {
        let path = CString::from(target.path());
        if files::stat_path(&path)?.st_mode & libc::S_IFMT == libc::S_IFLNK {
            return Err(libc::EOPNOTSUPP);
        }
    }
    set_mode(target, mode)
}

/// -1 for an id leaves it unchanged, as chown(2) and plfs_chown say.
fn set_owner(target: &Target, uid: uid_t, gid: gid_t) -> Result<(), Errno> {
    plfs_call!(chown, "plfs_chown"(target.path().as_ptr(), uid, gid))
}

/// `times` is NULL (both now) or two timespecs (UTIME_NOW / UTIME_OMIT
/// allowed), as utimensat(2). A descriptor's own writes (or its pump's)
/// are published first, so the times set here are not overtaken by them
/// (`cp -p` writes, then sets the times, then closes).
fn set_times(target: &Target, times: *const timespec) -> Result<(), Errno> {
    match target {
        Target::Descriptor(file) => files::sync(file)?,
        Target::Redirected(fd, _) => crate::pump::publish(*fd)?,
        Target::Path(_) => {}
    }
    plfs_call!(utimens, "plfs_utimens"(target.path().as_ptr(), times))
}

/// utimes(2)'s microsecond times as utimensat's (NULL stays NULL: now).
///
/// # Safety
/// `times` is NULL or two timevals.
unsafe fn from_timevals(times: *const timeval) -> Result<Option<[timespec; 2]>, Errno> {
    if times.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL: two timevals.
    let pair = unsafe { [*times, *times.add(1)] };
    let mut converted = [timespec { tv_sec: 0, tv_nsec: 0 }; 2];
    for (into, from) in converted.iter_mut().zip(pair) {
        if !(0..1_000_000).contains(&from.tv_usec) {
            return Err(libc::EINVAL);
        }
        *into = timespec { tv_sec: from.tv_sec, tv_nsec: from.tv_usec * 1000 };
    }
    Ok(Some(converted))
}

fn set_timevals(target: &Target, times: *const timeval) -> Result<(), Errno> {
    // SAFETY: the caller's times, NULL or two timevals.
    match unsafe { from_timevals(times) }? {
        Some(converted) => set_times(target, converted.as_ptr()),
        None => set_times(target, std::ptr::null()),
    }
}

/// # Safety
/// The chmod(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn chmod(path: *const c_char, mode: mode_t) -> c_int {
    if let Some(target) = at(libc::AT_FDCWD, path, 0) {
        return unit_result(set_mode(&target, mode));
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::chmod()(LibcPath::new(libc::AT_FDCWD, path).as_ptr(), mode) }
}

/// # Safety
/// The fchmod(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fchmod(fd: c_int, mode: mode_t) -> c_int {
    if let Some(target) = descriptor(fd) {
        return unit_result(set_mode(&target, mode));
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::fchmod()(fd, mode) }
}

/// # Safety
/// The fchmodat(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fchmodat(dirfd: c_int, path: *const c_char, mode: mode_t, flags: c_int) -> c_int {
    if let Some(target) = at(dirfd, path, 0) {
        return unit_result(set_mode_at(&target, mode, flags));
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::fchmodat()(dirfd, LibcPath::new(dirfd, path).as_ptr(), mode, flags) }
}

macro_rules! path_chown {
    ($name:ident) => {
        /// # Safety
        /// The chown(2) contract (lchown: plfs symbolic links are changed
        /// by the same call; the core decides what a link keeps).
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(path: *const c_char, uid: uid_t, gid: gid_t) -> c_int {
            if let Some(target) = at(libc::AT_FDCWD, path, 0) {
                return unit_result(set_owner(&target, uid, gid));
            }
            // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
            unsafe { real::$name()(LibcPath::new(libc::AT_FDCWD, path).as_ptr(), uid, gid) }
        }
    };
}

path_chown!(chown);
path_chown!(lchown);

/// # Safety
/// The fchown(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fchown(fd: c_int, uid: uid_t, gid: gid_t) -> c_int {
    if let Some(target) = descriptor(fd) {
        return unit_result(set_owner(&target, uid, gid));
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::fchown()(fd, uid, gid) }
}

/// # Safety
/// The fchownat(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fchownat(
    dirfd: c_int,
    path: *const c_char,
    uid: uid_t,
    gid: gid_t,
    flags: c_int,
) -> c_int {
    if let Some(target) = at(dirfd, path, flags) {
        if flags & !(libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH) != 0 {
            return unit_result(Err(libc::EINVAL));
        }
        return unit_result(set_owner(&target, uid, gid));
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::fchownat()(dirfd, LibcPath::new(dirfd, path).as_ptr(), uid, gid, flags) }
}

/// # Safety
/// The utime(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn utime(path: *const c_char, times: *const libc::utimbuf) -> c_int {
    if let Some(target) = at(libc::AT_FDCWD, path, 0) {
        // SAFETY: NULL or a utimbuf (the libc contract).
        let result = match unsafe { times.as_ref() } {
            None => set_times(&target, std::ptr::null()),
            Some(times) => {
                let pair = [times.actime, times.modtime].map(|tv_sec| timespec { tv_sec, tv_nsec: 0 });
                set_times(&target, pair.as_ptr())
            }
        };
        return unit_result(result);
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::utime()(LibcPath::new(libc::AT_FDCWD, path).as_ptr(), times) }
}

macro_rules! path_utimes {
    ($name:ident) => {
        /// # Safety
        /// The utimes(2) contract.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(path: *const c_char, times: *const timeval) -> c_int {
            if let Some(target) = at(libc::AT_FDCWD, path, 0) {
                return unit_result(set_timevals(&target, times));
            }
            // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
            unsafe { real::$name()(LibcPath::new(libc::AT_FDCWD, path).as_ptr(), times) }
        }
    };
}

path_utimes!(utimes);
path_utimes!(lutimes);

/// # Safety
/// The futimes(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn futimes(fd: c_int, times: *const timeval) -> c_int {
    if let Some(target) = descriptor(fd) {
        return unit_result(set_timevals(&target, times));
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::futimes()(fd, times) }
}

/// # Safety
/// The futimesat(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn futimesat(dirfd: c_int, path: *const c_char, times: *const timeval) -> c_int {
    if let Some(target) = at(dirfd, path, 0) {
        return unit_result(set_timevals(&target, times));
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::futimesat()(dirfd, LibcPath::new(dirfd, path).as_ptr(), times) }
}

/// # Safety
/// The utimensat(2) contract. A NULL path names `dirfd` itself, as the
/// system call (and glibc's futimens) allows.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn utimensat(
    dirfd: c_int,
    path: *const c_char,
    times: *const timespec,
    flags: c_int,
) -> c_int {
    let target = if path.is_null() { descriptor(dirfd) } else { at(dirfd, path, flags) };
    if let Some(target) = target {
        if flags & !(libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH) != 0 {
            return unit_result(Err(libc::EINVAL));
        }
        return unit_result(set_times(&target, times));
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::utimensat()(dirfd, LibcPath::new(dirfd, path).as_ptr(), times, flags) }
}

/// # Safety
/// The futimens(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn futimens(fd: c_int, times: *const timespec) -> c_int {
    if let Some(target) = descriptor(fd) {
        return unit_result(set_times(&target, times));
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::futimens()(fd, times) }
}
