//! A working directory inside a mount: chdir, fchdir and the getcwd family.
//!
//! A plfs directory has no kernel directory of its own, but every logical
//! directory is mirrored, at the same relative path, on each of its mount's
//! backends. `chdir` into a plfs directory therefore moves the kernel's
//! working directory into that directory's mirror on the mount's first
//! local backend, and everything that reads the working directory
//! translates the mirror back: `getcwd` answers with the logical path, and
//! relative paths are resolved against it (see `paths`). Nothing is kept in
//! memory, so the state cannot go stale: the kernel follows the mirror
//! through renames (a rename of a logical directory renames its mirrors),
//! forked children and exec'd programs inherit it, and a child under the
//! interposer translates it the same way. The kernel also checks search
//! permission on the way in, on the mirror, which carries the directory's
//! mode.
//!
//! A program that makes system calls directly (or runs without the
//! interposer) sees the backend directory itself.

use std::ffi::{CStr, CString, c_char, c_int};
use std::sync::atomic::{AtomicU8, Ordering};

use libc::size_t;

use crate::diagnostics::message;
use crate::files::{self, Kind};
use crate::guard::inside;
use crate::libplfs::Errno;
use crate::mounts::{self, Mount};
use crate::paths::{LibcPath, PATH_BYTES_MAX, plfs_path, under};
use crate::posix::unit_result;
use crate::real;

/// Whether the working directory is a backend mirror, as far as this
/// process's own chdir calls know: unknown until first asked (a process
/// may start in one), then kept by chdir and fchdir.
static IN_MIRROR: AtomicU8 = AtomicU8::new(UNKNOWN);
const UNKNOWN: u8 = 0;
const OUTSIDE: u8 = 1;
const MIRROR: u8 = 2;

/// The logical path a backend path stands for, when `physical` is a local
/// backend directory of some mount or below one.
pub fn logical_of(physical: &[u8]) -> Option<Vec<u8>> {
    let (mount, root) = mounts::mounts()
        .iter()
        .flat_map(|mount| mount.roots.iter().map(move |root| (mount, root)))
        .filter(|(_, root)| under(physical, root))
        .max_by_key(|(_, root)| root.len())?;
    let rest = &physical[root.len()..];
    let mut logical = Vec::with_capacity(mount.point.len() + rest.len() + 1);
    if mount.point != b"/" || rest.is_empty() {
        logical.extend_from_slice(&mount.point);
    }
    logical.extend_from_slice(rest);
    Some(logical)
}

/// The kernel's working directory (at most PATH_MAX bytes), as the real
/// getcwd spells it; None when it fails (errno set).
fn kernel_cwd(buffer: &mut [u8; PATH_BYTES_MAX + 1]) -> Option<&[u8]> {
    // SAFETY: the buffer is writable for its length.
    let result = unsafe { real::getcwd()(buffer.as_mut_ptr().cast(), buffer.len()) };
    if result.is_null() {
        return None;
    }
    let length = buffer.iter().position(|&byte| byte == 0)?;
    Some(&buffer[..length])
}

/// The working directory with a backend mirror translated to its logical
/// path: what a relative path is relative to.
pub fn current() -> Option<Vec<u8>> {
    let mut buffer = [0u8; PATH_BYTES_MAX + 1];
    let physical = kernel_cwd(&mut buffer)?;
    let logical = logical_of(physical);
    IN_MIRROR.store(if logical.is_some() { MIRROR } else { OUTSIDE }, Ordering::Relaxed);
    Some(logical.unwrap_or_else(|| physical.to_vec()))
}

/// Whether the working directory may be a backend mirror, so that a
/// relative path libc gets must be made absolute first: cheap once known.
pub fn maybe_in_mirror() -> bool {
    match IN_MIRROR.load(Ordering::Relaxed) {
        OUTSIDE => false,
        MIRROR => true,
        _ => current().is_some_and(|_| IN_MIRROR.load(Ordering::Relaxed) == MIRROR),
    }
}

/// The mount whose point is the longest prefix of `logical`.
fn mount_of(logical: &[u8]) -> Option<&'static Mount> {
    mounts::mounts().iter().filter(|mount| under(logical, &mount.point)).max_by_key(|mount| mount.point.len())
}

/// Makes the plfs directory `logical` the working directory.
fn enter(logical: &CStr) -> Result<(), Errno> {
    let stat = files::stat_path(&logical.to_owned())?;
    if stat.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return Err(libc::ENOTDIR);
    }
    let bytes = logical.to_bytes();
    // libplfs's own mount list was used when the interposer could not read
    // the plfsrc: then nothing is known about the backends.
    let mount = mount_of(bytes).ok_or(libc::ENOTSUP)?;
    if mount.roots.is_empty() {
        message(&format!(
            "libplfs_preload: chdir {}: the mount has no local backend directory to stand in for it \
             (HDFS and S3 backends only); use absolute paths or the FUSE mount",
            String::from_utf8_lossy(bytes)
        ));
        return Err(libc::ENOTSUP);
    }
    let rest = if mount.point == b"/" { bytes } else { &bytes[mount.point.len()..] };
    let mut failure = libc::ENOENT;
    for root in &mount.roots {
        let mut mirror = Vec::with_capacity(root.len() + rest.len() + 1);
        mirror.extend_from_slice(root);
        mirror.extend_from_slice(rest);
        let mirror = CString::new(mirror).map_err(|_| libc::EINVAL)?;
        // SAFETY: a C string.
        if unsafe { real::chdir()(mirror.as_ptr()) } == 0 {
            IN_MIRROR.store(MIRROR, Ordering::Relaxed);
            return Ok(());
        }
        failure = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
        // A mirror missing on one backend (a crash between two backends'
        // mkdirs) is found on the next; a permission error is the answer.
        if failure != libc::ENOENT {
            break;
        }
    }
    Err(failure)
}

/// After a chdir this process made elsewhere: the kernel knows where.
fn left() {
    IN_MIRROR.store(UNKNOWN, Ordering::Relaxed);
}

/// # Safety
/// The chdir(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn chdir(path: *const c_char) -> c_int {
    if let Some(logical) = plfs_path(libc::AT_FDCWD, path) {
        return unit_result(enter(&logical));
    }
    let libc_path = LibcPath::new(libc::AT_FDCWD, path);
    // SAFETY: forwarded (a relative path made absolute, see LibcPath).
    let result = unsafe { real::chdir()(libc_path.as_ptr()) };
    if result == 0 {
        left();
    }
    result
}

/// # Safety
/// The fchdir(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fchdir(fd: c_int) -> c_int {
    if let Some(file) = files::lookup(fd) {
        if file.kind != Kind::Directory {
            return unit_result(Err(libc::ENOTDIR));
        }
        return unit_result(enter(&file.path));
    }
    // SAFETY: forwarded unchanged.
    let result = unsafe { real::fchdir()(fd) };
    if result == 0 {
        left();
    }
    result
}

/// getcwd's answer for `path` in the caller's buffer, with libc's rules:
/// a NULL buffer is allocated (`size` bytes, or as many as needed when 0).
fn deliver(path: &[u8], buffer: *mut c_char, size: size_t) -> *mut c_char {
    let needed = path.len() + 1;
    let target = if buffer.is_null() {
        let length = if size == 0 { needed } else { size };
        if length < needed {
            files::set_errno(libc::ERANGE);
            return std::ptr::null_mut();
        }
        // SAFETY: malloc, freed by the caller with free(3).
        let allocated = unsafe { libc::malloc(length) }.cast::<c_char>();
        if allocated.is_null() {
            files::set_errno(libc::ENOMEM);
            return allocated;
        }
        allocated
    } else if size == 0 {
        files::set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    } else if size < needed {
        files::set_errno(libc::ERANGE);
        return std::ptr::null_mut();
    } else {
        buffer
    };
    // SAFETY: target holds at least `needed` bytes (checked above).
    unsafe {
        std::ptr::copy_nonoverlapping(path.as_ptr(), target.cast::<u8>(), path.len());
        *target.add(path.len()) = 0;
    }
    target
}

/// # Safety
/// The getcwd(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getcwd(buffer: *mut c_char, size: size_t) -> *mut c_char {
    if !inside() {
        let mut own = [0u8; PATH_BYTES_MAX + 1];
        if let Some(physical) = kernel_cwd(&mut own) {
            // One system call either way: elsewhere, libc's own answer.
            return match logical_of(physical) {
                Some(logical) => deliver(&logical, buffer, size),
                None => deliver(physical, buffer, size),
            };
        }
    }
    // An error, or longer than PATH_MAX: libc says which.
    // SAFETY: forwarded unchanged.
    unsafe { real::getcwd()(buffer, size) }
}

/// # Safety
/// The fortified getcwd's contract (`_FORTIFY_SOURCE`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __getcwd_chk(buffer: *mut c_char, size: size_t, length: size_t) -> *mut c_char {
    if size > length {
        // SAFETY: libc's own check, which ends the process.
        return unsafe { real::__getcwd_chk()(buffer, size, length) };
    }
    // SAFETY: the caller's contract, checked above.
    unsafe { getcwd(buffer, size) }
}

/// # Safety
/// The get_current_dir_name(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn get_current_dir_name() -> *mut c_char {
    if !inside() {
        let mut own = [0u8; PATH_BYTES_MAX + 1];
        if let Some(logical) = kernel_cwd(&mut own).and_then(logical_of) {
            return deliver(&logical, std::ptr::null_mut(), 0);
        }
    }
    // SAFETY: no arguments.
    unsafe { real::get_current_dir_name()() }
}
