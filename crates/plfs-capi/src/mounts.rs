//! Which mount a logical path is on: the core's process-wide mount table
//! (one plfsrc, each mount built once and shared by every fd on it, as PLFS
//! 2.5 did, and by the interposer in the same process).

use std::ffi::{CStr, c_char};
use std::path::Path;

use crate::errors::{PLFS_EINVAL, PlfsError, code_of, report};
use crate::plfs::attr::FileKind;
use crate::plfs::config::MountConfig;
use crate::plfs::fs::Plfs;
use crate::plfs::mounts::MountTable;
use crate::plfs::{Error, ErrorKind};

/// The prefix PLFS 2.5's MPI-IO driver (ad_plfs) put on plfs paths; 2.5
/// accepted it in every call, and so does every call here.
const PREFIX: &str = "plfs:";

/// `path` without the `plfs:` prefix, if it has one: the one place the C
/// API reads it, so every call that takes a path takes it.
pub fn logical_path(path: &str) -> &str {
    path.strip_prefix(PREFIX).unwrap_or(path)
}

/// A C string argument as it is (a symbolic link's text): NULL or not
/// UTF-8 is EINVAL.
///
/// # Safety
/// `text` is NULL or a NUL-terminated string.
pub unsafe fn text_argument<'a>(text: *const c_char) -> Result<&'a str, PlfsError> {
    if text.is_null() {
        return Err(PLFS_EINVAL);
    }
    // SAFETY: the caller passes a C string.
    unsafe { CStr::from_ptr(text) }.to_str().map_err(|_| PLFS_EINVAL)
}

/// A C path argument, without its `plfs:` prefix: NULL or not UTF-8 is
/// EINVAL.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
pub unsafe fn path_argument<'a>(path: *const c_char) -> Result<&'a str, PlfsError> {
    // SAFETY: forwarded from the caller.
    unsafe { text_argument(path) }.map(logical_path)
}

/// The mount holding `path` and the path inside it.
pub fn resolve(path: &str) -> Result<(Plfs, String), PlfsError> {
    table()?.resolve(Path::new(path)).map_err(report)?.ok_or_else(|| {
        report(Error::new(ErrorKind::NotFound, format!("{path}: not under a mount point of the plfsrc")))
    })
}

/// The process's mount table; no plfsrc (or a bad one) is its error's code.
pub fn table() -> Result<&'static MountTable, PlfsError> {
    MountTable::process().map_err(|error| report(Error::new(error.kind(), error.to_string())))
}

/// The configured mount holding `path` (built or not) and the path inside
/// it: what the calls that describe a mount, not a file, need.
pub fn mount_config(path: &str) -> Result<(&'static MountConfig, String), PlfsError> {
    table()?.config().resolve(Path::new(path)).ok_or_else(|| {
        report(Error::new(ErrorKind::NotFound, format!("{path}: not under a mount point of the plfsrc")))
    })
}

/// Where a path is: in a mount, or a directory above mount points (which
/// plfs does not hold, but which lead to its files).
pub enum Place {
    Mount(Plfs, String),
    AboveMount(String),
}

/// A C path argument and where it is: what the calls that describe a
/// path (`plfs_access`, `plfs_getattr`, `plfs_mode`) need, since a program
/// walking down to its files asks about the directories above the mount.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
pub unsafe fn place_argument(path: *const c_char) -> Result<Place, PlfsError> {
    // SAFETY: forwarded from the caller.
    let path = unsafe { path_argument(path) }?;
    if table()?.is_above_mount(Path::new(path)) {
        return Ok(Place::AboveMount(path.to_owned()));
    }
    resolve(path).map(|(plfs, inner)| Place::Mount(plfs, inner))
}

/// A C path argument and the mount it is on.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
pub unsafe fn resolve_argument(path: *const c_char) -> Result<(Plfs, String), PlfsError> {
    // SAFETY: forwarded from the caller.
    resolve(unsafe { path_argument(path) }?)
}

/// A core error on `inner`, as POSIX would report it: a missing entry
/// below something that is a file is ENOTDIR, not ENOENT (the core looks
/// only at the entry itself; its containers are directories on the
/// backends, so it cannot tell). Costs stats only on the error path.
pub fn not_found(plfs: &Plfs, inner: &str, error: Error) -> PlfsError {
    let code = report(error);
    if code != libc::ENOENT {
        return code;
    }
    let mut ancestor = String::new();
    let components: Vec<&str> = inner.split('/').filter(|part| !part.is_empty()).collect();
    for part in components.iter().take(components.len().saturating_sub(1)) {
        ancestor.push('/');
        ancestor.push_str(part);
        match plfs.stat(&ancestor) {
            Ok(attr) if attr.kind == FileKind::File => return libc::ENOTDIR,
            // The core follows no symlinks, so one on the way is not found.
            Ok(_) => continue,
            Err(error) => return code_of(&error),
        }
    }
    code
}

/// Before creating `inner`: its parent must be a directory. The core does
/// not check (a file's container is a directory on its backend, so a
/// create below a file would succeed inside the container); POSIX says
/// ENOTDIR, or ENOENT for a missing parent.
pub fn check_parent(plfs: &Plfs, inner: &str) -> Result<(), PlfsError> {
    let Some((parent, _)) = inner.trim_end_matches('/').rsplit_once('/') else { return Ok(()) };
    if parent.is_empty() {
        return Ok(()); // the mount root
    }
    match plfs.stat(parent) {
        Ok(attr) if attr.kind == FileKind::Directory => Ok(()),
        // The core follows no symlinks: a symlink is not a directory here.
        Ok(_) => Err(libc::ENOTDIR),
        Err(error) => Err(not_found(plfs, parent, error)),
    }
}

/// `int is_plfs_path(const char *path)`: 1 when a mount point of the
/// plfsrc covers `path` (with or without its `plfs:` prefix; relative
/// paths are taken from the current directory), 0 otherwise, including for
/// NULL and when there is no plfsrc. Decided on the bytes: a name that is
/// not UTF-8 under a mount point is still a plfs path (whose calls then fail
/// with EINVAL), never passed through to the directory the mount point covers.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn is_plfs_path(path: *const c_char) -> std::ffi::c_int {
    use std::os::unix::ffi::OsStrExt;
    let _bypass = crate::interposer::Bypass::enter();
    if path.is_null() {
        return 0;
    }
    // SAFETY: the caller passes a C string.
    let bytes = unsafe { CStr::from_ptr(path) }.to_bytes();
    let bytes = bytes.strip_prefix(PREFIX.as_bytes()).unwrap_or(bytes);
    let path = Path::new(std::ffi::OsStr::from_bytes(bytes));
    let Ok(table) = MountTable::process() else { return 0 };
    let Ok(absolute) = std::path::absolute(path) else { return 0 };
    std::ffi::c_int::from(table.config().resolve(&absolute).is_some())
}

/// Not in PLFS 2.5: the plfsrc's mount points, each NUL-terminated, then
/// one more NUL, into `buf` when `size` holds them all. Returns the bytes
/// the list needs (so a caller can size its buffer and call again), 1 (just
/// the final NUL) when there is no plfsrc, or -1 for a NULL `buf` with a
/// non-zero `size`. The interposer uses it to pass other paths through
/// without asking `is_plfs_path`.
///
/// # Safety
/// `buf` is NULL or writable for `size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_mount_points(buf: *mut c_char, size: libc::size_t) -> libc::ssize_t {
    if buf.is_null() && size != 0 {
        return -1;
    }
    let _bypass = crate::interposer::Bypass::enter();
    let mut list: Vec<u8> = Vec::new();
    if let Ok(table) = MountTable::process() {
        for point in table.mount_points() {
            let text = point.as_os_str().as_encoded_bytes();
            let trimmed = match text.iter().rposition(|&byte| byte != b'/') {
                Some(last) => &text[..=last],
                None => b"/",
            };
            list.extend_from_slice(trimmed);
            list.push(0);
        }
    }
    list.push(0);
    if list.len() <= size {
        // SAFETY: buf is writable for size >= list.len() bytes.
        unsafe { std::ptr::copy_nonoverlapping(list.as_ptr(), buf.cast::<u8>(), list.len()) };
    }
    list.len() as libc::ssize_t
}
