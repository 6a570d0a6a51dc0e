//! The interposed calls on names: the stat family (including the
//! `__xstat` entry points glibc 2.36 still exports for old binaries, and
//! statx), unlink, rename, mkdir, rmdir, access and statfs/statvfs.

use std::ffi::{CStr, c_char, c_int, c_uint};

use crate::files;
use crate::libplfs::Errno;
use crate::paths::{LibcPath, plfs_path};
use crate::plfs_call;
use crate::posix::unit_result;
use crate::real;

/// The attributes of `path` relative to `dirfd`, or of `dirfd` itself for
/// an empty path with AT_EMPTY_PATH; None when this is not a plfs call.
fn stat_at(dirfd: c_int, path: *const c_char, flags: c_int) -> Option<Result<libc::stat, Errno>> {
    // SAFETY: a non-NULL path is a C string (the libc contract).
    let empty = path.is_null() || unsafe { CStr::from_ptr(path) }.is_empty();
    if empty && flags & libc::AT_EMPTY_PATH != 0 {
        let file = files::lookup(dirfd)?;
        return Some(files::getattr(&file, false));
    }
    let logical = plfs_path(dirfd, path)?;
    Some(files::stat_path(&logical))
}

fn stat_fd(fd: c_int) -> Option<Result<libc::stat, Errno>> {
    let file = files::lookup(fd)?;
    Some(files::getattr(&file, false))
}

/// Stores a result into the caller's buffer: 0, or -1 with errno.
///
/// # Safety
/// `buffer` is NULL or writable for a struct stat (stat64 has the same
/// layout on the 64-bit targets this builds for, asserted in posix.rs).
unsafe fn deliver<T>(result: Result<libc::stat, Errno>, buffer: *mut T) -> c_int {
    unit_result(result.and_then(|stat| {
        if buffer.is_null() {
            return Err(libc::EFAULT);
        }
        // SAFETY: the caller's buffer, of stat's size.
        unsafe { buffer.cast::<libc::stat>().write(stat) };
        Ok(())
    }))
}

macro_rules! path_stat {
    ($name:ident, $stat:ty) => {
        /// # Safety
        /// The stat(2) contract.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(path: *const c_char, buffer: *mut $stat) -> c_int {
            if let Some(result) = stat_at(libc::AT_FDCWD, path, 0) {
                // SAFETY: the caller's buffer.
                return unsafe { deliver(result, buffer) };
            }
            // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
            unsafe { real::$name()(LibcPath::new(libc::AT_FDCWD, path).as_ptr(), buffer) }
        }
    };
}

path_stat!(stat, libc::stat);
path_stat!(stat64, libc::stat64);
path_stat!(lstat, libc::stat);
path_stat!(lstat64, libc::stat64);

macro_rules! fd_stat {
    ($name:ident, $stat:ty) => {
        /// # Safety
        /// The fstat(2) contract.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(fd: c_int, buffer: *mut $stat) -> c_int {
            if let Some(result) = stat_fd(fd) {
                // SAFETY: the caller's buffer.
                return unsafe { deliver(result, buffer) };
            }
            // SAFETY: forwarded unchanged.
            unsafe { real::$name()(fd, buffer) }
        }
    };
}

fd_stat!(fstat, libc::stat);
fd_stat!(fstat64, libc::stat64);

macro_rules! at_stat {
    ($name:ident, $stat:ty) => {
        /// # Safety
        /// The fstatat(2) contract.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            dirfd: c_int,
            path: *const c_char,
            buffer: *mut $stat,
            flags: c_int,
        ) -> c_int {
            if let Some(result) = stat_at(dirfd, path, flags) {
                // SAFETY: the caller's buffer.
                return unsafe { deliver(result, buffer) };
            }
            // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
            unsafe { real::$name()(dirfd, LibcPath::new(dirfd, path).as_ptr(), buffer, flags) }
        }
    };
}

at_stat!(fstatat, libc::stat);
at_stat!(fstatat64, libc::stat64);

macro_rules! versioned_path_stat {
    ($name:ident, $stat:ty) => {
        /// # Safety
        /// glibc's `__xstat` contract (stat with a structure version).
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(version: c_int, path: *const c_char, buffer: *mut $stat) -> c_int {
            if let Some(result) = stat_at(libc::AT_FDCWD, path, 0) {
                // SAFETY: the caller's buffer.
                return unsafe { deliver(result, buffer) };
            }
            // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
            unsafe { real::$name()(version, LibcPath::new(libc::AT_FDCWD, path).as_ptr(), buffer) }
        }
    };
}

versioned_path_stat!(__xstat, libc::stat);
versioned_path_stat!(__xstat64, libc::stat64);
versioned_path_stat!(__lxstat, libc::stat);
versioned_path_stat!(__lxstat64, libc::stat64);

macro_rules! versioned_fd_stat {
    ($name:ident, $stat:ty) => {
        /// # Safety
        /// glibc's `__fxstat` contract.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(version: c_int, fd: c_int, buffer: *mut $stat) -> c_int {
            if let Some(result) = stat_fd(fd) {
                // SAFETY: the caller's buffer.
                return unsafe { deliver(result, buffer) };
            }
            // SAFETY: forwarded unchanged.
            unsafe { real::$name()(version, fd, buffer) }
        }
    };
}

versioned_fd_stat!(__fxstat, libc::stat);
versioned_fd_stat!(__fxstat64, libc::stat64);

macro_rules! versioned_at_stat {
    ($name:ident, $stat:ty) => {
        /// # Safety
        /// glibc's `__fxstatat` contract.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            version: c_int,
            dirfd: c_int,
            path: *const c_char,
            buffer: *mut $stat,
            flags: c_int,
        ) -> c_int {
            if let Some(result) = stat_at(dirfd, path, flags) {
                // SAFETY: the caller's buffer.
                return unsafe { deliver(result, buffer) };
            }
            // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
            unsafe { real::$name()(version, dirfd, LibcPath::new(dirfd, path).as_ptr(), buffer, flags) }
        }
    };
}

versioned_at_stat!(__fxstatat, libc::stat);
versioned_at_stat!(__fxstatat64, libc::stat64);

fn statx_of(stat: &libc::stat) -> libc::statx {
    // SAFETY: statx is plain data; all-zero is valid.
    let mut statx: libc::statx = unsafe { std::mem::zeroed() };
    statx.stx_mask = libc::STATX_BASIC_STATS;
    statx.stx_blksize = stat.st_blksize as u32;
    statx.stx_nlink = stat.st_nlink as u32;
    statx.stx_uid = stat.st_uid;
    statx.stx_gid = stat.st_gid;
    statx.stx_mode = stat.st_mode as u16;
    statx.stx_ino = stat.st_ino;
    statx.stx_size = stat.st_size as u64;
    statx.stx_blocks = stat.st_blocks as u64;
    statx.stx_atime.tv_sec = stat.st_atime;
    statx.stx_atime.tv_nsec = stat.st_atime_nsec as u32;
    statx.stx_mtime.tv_sec = stat.st_mtime;
    statx.stx_mtime.tv_nsec = stat.st_mtime_nsec as u32;
    statx.stx_ctime.tv_sec = stat.st_ctime;
    statx.stx_ctime.tv_nsec = stat.st_ctime_nsec as u32;
    statx.stx_dev_major = libc::major(stat.st_dev);
    statx.stx_dev_minor = libc::minor(stat.st_dev);
    statx.stx_rdev_major = libc::major(stat.st_rdev);
    statx.stx_rdev_minor = libc::minor(stat.st_rdev);
    statx
}

/// # Safety
/// The statx(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn statx(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mask: c_uint,
    buffer: *mut libc::statx,
) -> c_int {
    if let Some(result) = stat_at(dirfd, path, flags) {
        return unit_result(result.and_then(|stat| {
            if buffer.is_null() {
                return Err(libc::EFAULT);
            }
            // SAFETY: the caller's statx buffer.
            unsafe { buffer.write(statx_of(&stat)) };
            Ok(())
        }));
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::statx()(dirfd, LibcPath::new(dirfd, path).as_ptr(), flags, mask, buffer) }
}

/// # Safety
/// The unlink(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unlink(path: *const c_char) -> c_int {
    if let Some(logical) = plfs_path(libc::AT_FDCWD, path) {
        return unit_result(remove_file(&logical));
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::unlink()(LibcPath::new(libc::AT_FDCWD, path).as_ptr()) }
}

/// # Safety
/// The unlinkat(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unlinkat(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    if let Some(logical) = plfs_path(dirfd, path) {
        return unit_result(if flags & libc::AT_REMOVEDIR != 0 {
            plfs_call!(rmdir, "plfs_rmdir"(logical.as_ptr()))
        } else {
            remove_file(&logical)
        });
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::unlinkat()(dirfd, LibcPath::new(dirfd, path).as_ptr(), flags) }
}

/// unlink(2) of a plfs file; its appenders' shared end goes with it, so a
/// file made later under the name starts its own.
fn remove_file(logical: &CStr) -> Result<(), Errno> {
    plfs_call!(unlink, "plfs_unlink"(logical.as_ptr()))?;
    crate::ends::forget(logical);
    Ok(())
}

/// A rename with at least one plfs side: both plfs → plfs_rename; one
/// side only → EXDEV, so mv copies and unlinks as across file systems.
fn rename_plfs(from_dirfd: c_int, from: *const c_char, to_dirfd: c_int, to: *const c_char) -> Option<c_int> {
    let from_logical = plfs_path(from_dirfd, from);
    let to_logical = plfs_path(to_dirfd, to);
    match (from_logical, to_logical) {
        (None, None) => None,
        (Some(from), Some(to)) => {
            let renamed = plfs_call!(rename, "plfs_rename"(from.as_ptr(), to.as_ptr()));
            if renamed.is_ok() {
                // Neither name is the file O_APPEND writers here share an
                // end for any more.
                crate::ends::forget(&from);
                crate::ends::forget(&to);
            }
            Some(unit_result(renamed))
        }
        _ => Some(unit_result(Err(libc::EXDEV))),
    }
}

/// # Safety
/// The rename(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rename(from: *const c_char, to: *const c_char) -> c_int {
    if let Some(result) = rename_plfs(libc::AT_FDCWD, from, libc::AT_FDCWD, to) {
        return result;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe {
        real::rename()(
            LibcPath::new(libc::AT_FDCWD, from).as_ptr(),
            LibcPath::new(libc::AT_FDCWD, to).as_ptr(),
        )
    }
}

/// # Safety
/// The renameat(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn renameat(
    from_dirfd: c_int,
    from: *const c_char,
    to_dirfd: c_int,
    to: *const c_char,
) -> c_int {
    if let Some(result) = rename_plfs(from_dirfd, from, to_dirfd, to) {
        return result;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe {
        real::renameat()(
            from_dirfd,
            LibcPath::new(from_dirfd, from).as_ptr(),
            to_dirfd,
            LibcPath::new(to_dirfd, to).as_ptr(),
        )
    }
}

/// # Safety
/// The renameat2(2) contract. On plfs paths only flags 0 (RENAME_NOREPLACE
/// and RENAME_EXCHANGE would need an atomic plfs call, which 2.5 lacks).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn renameat2(
    from_dirfd: c_int,
    from: *const c_char,
    to_dirfd: c_int,
    to: *const c_char,
    flags: c_uint,
) -> c_int {
    if flags != 0 && (plfs_path(from_dirfd, from).is_some() || plfs_path(to_dirfd, to).is_some()) {
        return unit_result(Err(libc::EINVAL));
    }
    if let Some(result) = rename_plfs(from_dirfd, from, to_dirfd, to) {
        return result;
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe {
        real::renameat2()(
            from_dirfd,
            LibcPath::new(from_dirfd, from).as_ptr(),
            to_dirfd,
            LibcPath::new(to_dirfd, to).as_ptr(),
            flags,
        )
    }
}

/// # Safety
/// The mkdir(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkdir(path: *const c_char, mode: libc::mode_t) -> c_int {
    if let Some(logical) = plfs_path(libc::AT_FDCWD, path) {
        return unit_result(plfs_call!(
            mkdir,
            "plfs_mkdir"(logical.as_ptr(), mode & !crate::umask::current())
        ));
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::mkdir()(LibcPath::new(libc::AT_FDCWD, path).as_ptr(), mode) }
}

/// # Safety
/// The mkdirat(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkdirat(dirfd: c_int, path: *const c_char, mode: libc::mode_t) -> c_int {
    if let Some(logical) = plfs_path(dirfd, path) {
        return unit_result(plfs_call!(
            mkdir,
            "plfs_mkdir"(logical.as_ptr(), mode & !crate::umask::current())
        ));
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::mkdirat()(dirfd, LibcPath::new(dirfd, path).as_ptr(), mode) }
}

/// # Safety
/// The rmdir(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmdir(path: *const c_char) -> c_int {
    if let Some(logical) = plfs_path(libc::AT_FDCWD, path) {
        return unit_result(plfs_call!(rmdir, "plfs_rmdir"(logical.as_ptr())));
    }
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    unsafe { real::rmdir()(LibcPath::new(libc::AT_FDCWD, path).as_ptr()) }
}

/// access(2) of a plfs path (the ids do not matter: AT_EACCESS,
/// euidaccess and access ask plfs the same), None for any other path.
fn plfs_access(dirfd: c_int, path: *const c_char, mode: c_int) -> Option<c_int> {
    let logical = plfs_path(dirfd, path)?;
    Some(unit_result(plfs_call!(access, "plfs_access"(logical.as_ptr(), mode))))
}

/// # Safety
/// The access(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn access(path: *const c_char, mode: c_int) -> c_int {
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    plfs_access(libc::AT_FDCWD, path, mode)
        .unwrap_or_else(|| unsafe { real::access()(LibcPath::new(libc::AT_FDCWD, path).as_ptr(), mode) })
}

/// # Safety
/// The faccessat(2) contract (AT_EACCESS and AT_SYMLINK_NOFOLLOW change
/// nothing on plfs paths: one owner, no links).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn faccessat(dirfd: c_int, path: *const c_char, mode: c_int, flags: c_int) -> c_int {
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    plfs_access(dirfd, path, mode).unwrap_or_else(|| unsafe {
        real::faccessat()(dirfd, LibcPath::new(dirfd, path).as_ptr(), mode, flags)
    })
}

/// # Safety
/// The euidaccess(3) contract: access(2) by the effective ids (coreutils'
/// `sort` checks its inputs and its `-o` file so; unseen, it answered for
/// a path outside the mount).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn euidaccess(path: *const c_char, mode: c_int) -> c_int {
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    plfs_access(libc::AT_FDCWD, path, mode)
        .unwrap_or_else(|| unsafe { real::euidaccess()(LibcPath::new(libc::AT_FDCWD, path).as_ptr(), mode) })
}

/// # Safety
/// The eaccess(3) contract (another name of euidaccess).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn eaccess(path: *const c_char, mode: c_int) -> c_int {
    // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
    plfs_access(libc::AT_FDCWD, path, mode)
        .unwrap_or_else(|| unsafe { real::eaccess()(LibcPath::new(libc::AT_FDCWD, path).as_ptr(), mode) })
}

fn statvfs_logical(logical: &CStr) -> Result<libc::statvfs, Errno> {
    // SAFETY: statvfs is plain data; all-zero is valid.
    let mut result: libc::statvfs = unsafe { std::mem::zeroed() };
    plfs_call!(statvfs, "plfs_statvfs"(logical.as_ptr(), &mut result))?;
    Ok(result)
}

fn statvfs_at(fd: Option<c_int>, path: *const c_char) -> Option<Result<libc::statvfs, Errno>> {
    match fd {
        Some(fd) => files::lookup(fd).map(|file| statvfs_logical(&file.path)),
        None => plfs_path(libc::AT_FDCWD, path).map(|logical| statvfs_logical(&logical)),
    }
}

/// statfs from statvfs: the fields MPI-IO libraries look at (block sizes
/// and counts); f_type is 0, which no library takes for Lustre or GPFS.
fn statfs_of(vfs: &libc::statvfs) -> libc::statfs {
    // SAFETY: statfs is plain data; all-zero is valid.
    let mut result: libc::statfs = unsafe { std::mem::zeroed() };
    result.f_bsize = vfs.f_bsize as _;
    result.f_frsize = vfs.f_frsize as _;
    result.f_blocks = vfs.f_blocks;
    result.f_bfree = vfs.f_bfree;
    result.f_bavail = vfs.f_bavail;
    result.f_files = vfs.f_files;
    result.f_ffree = vfs.f_ffree;
    result.f_namelen = vfs.f_namemax as _;
    result
}

macro_rules! statvfs_family {
    ($name:ident, $argument:ty, $buffer:ty, $fd:expr, $path:expr, $convert:expr, $converted:ty) => {
        /// # Safety
        /// The statfs(2)/statvfs(3) contract.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(argument: $argument, buffer: *mut $buffer) -> c_int {
            #[allow(clippy::redundant_closure_call)]
            if let Some(result) = statvfs_at($fd(argument), $path(argument)) {
                return unit_result(result.and_then(|vfs| {
                    if buffer.is_null() {
                        return Err(libc::EFAULT);
                    }
                    // SAFETY: the caller's buffer; the 64 variants have the
                    // same layout on 64-bit targets.
                    unsafe { buffer.cast::<$converted>().write($convert(&vfs)) };
                    Ok(())
                }));
            }
            // SAFETY: forwarded unchanged.
            unsafe { real::$name()(argument, buffer) }
        }
    };
}

fn no_fd<T>(_: T) -> Option<c_int> {
    None
}
fn some_fd(fd: c_int) -> Option<c_int> {
    Some(fd)
}
fn no_path<T>(_: T) -> *const c_char {
    std::ptr::null()
}
fn the_path(path: *const c_char) -> *const c_char {
    path
}
fn copy_statvfs(vfs: &libc::statvfs) -> libc::statvfs {
    *vfs
}

const _: () = assert!(size_of::<libc::statvfs>() == size_of::<libc::statvfs64>());
const _: () = assert!(size_of::<libc::statfs>() == size_of::<libc::statfs64>());

statvfs_family!(statvfs, *const c_char, libc::statvfs, no_fd, the_path, copy_statvfs, libc::statvfs);
statvfs_family!(statvfs64, *const c_char, libc::statvfs64, no_fd, the_path, copy_statvfs, libc::statvfs);
statvfs_family!(fstatvfs, c_int, libc::statvfs, some_fd, no_path, copy_statvfs, libc::statvfs);
statvfs_family!(fstatvfs64, c_int, libc::statvfs64, some_fd, no_path, copy_statvfs, libc::statvfs);
statvfs_family!(statfs, *const c_char, libc::statfs, no_fd, the_path, statfs_of, libc::statfs);
statvfs_family!(statfs64, *const c_char, libc::statfs64, no_fd, the_path, statfs_of, libc::statfs);
statvfs_family!(fstatfs, c_int, libc::statfs, some_fd, no_path, statfs_of, libc::statfs);
statvfs_family!(fstatfs64, c_int, libc::statfs64, some_fd, no_path, statfs_of, libc::statfs);
