//! What a path or this library is: `plfs_get_filetype`,
//! `plfs_get_fileinfo`, `plfs_expand_path`, `plfs_gethostname`,
//! `plfs_version`, `plfs_buildtime`, `plfs_wtime`, and the small-file
//! cache calls `plfs_flush_writes` and `plfs_invalidate_read_cache`.

use std::ffi::{CStr, CString, c_char, c_double, c_int, c_void};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::errors::{PLFS_EINVAL, PLFS_ENOMEM, PlfsError, guard, report};
use crate::files::store;
use crate::mounts::{mount_config, path_argument, resolve, resolve_argument};
use crate::plfs::config::{BackendLocation, Workload};
use crate::plfs::store::StorePath;

/// `plfs_filetype` values (a C enum).
pub const CONTAINER: c_int = 0;
pub const FLAT_FILE: c_int = 1;
pub const SMALL_FILE: c_int = 2;
pub const PFT_UNKNOWN: c_int = 3;

/// Index types `plfs_get_fileinfo` reports (`CI_*` in plfs.h).
pub const CI_UNKNOWN: c_int = 0;
pub const CI_BYTERANGE: c_int = 1;

/// The layout of the mount holding `path` (2.5 answered from the mount, not
/// the file, so a path that does not exist yet has its mount's type).
/// PFT_UNKNOWN when no mount covers it.
///
/// # Safety
/// `path` is NULL or a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_get_filetype(path: *const c_char) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { filetype(path) }
}

/// plfs_get_filetype, and in `*ixtypep` (if not NULL) the index type:
/// CI_BYTERANGE for containers, whose index answers byte-range queries
/// (what the MPI-IO layer checks before exchanging indexes), else
/// CI_UNKNOWN.
///
/// # Safety
/// `path` is NULL or a C string; `ixtypep` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_get_fileinfo(path: *const c_char, ixtypep: *mut c_int) -> c_int {
    // SAFETY: forwarded from the caller.
    let kind = unsafe { filetype(path) };
    let index = if kind == CONTAINER { CI_BYTERANGE } else { CI_UNKNOWN };
    // SAFETY: NULL or writable.
    unsafe { store(ixtypep, index) };
    kind
}

/// # Safety
/// `path` is NULL or a C string.
unsafe fn filetype(path: *const c_char) -> c_int {
    let _bypass = crate::interposer::Bypass::enter();
    // SAFETY: forwarded from the caller.
    let Ok(path) = (unsafe { path_argument(path) }) else { return PFT_UNKNOWN };
    match mount_config(path) {
        Ok((mount, _)) => match mount.workload {
            Workload::SharedFile => CONTAINER,
            Workload::FilePerProc => FLAT_FILE,
            Workload::SmallFile => SMALL_FILE,
        },
        Err(_) => PFT_UNKNOWN,
    }
}

/// Where `logical` lives on its canonical backend: `*physical` is a
/// malloc'd string the caller frees with free(). `*pmountp` and `*pbackp`
/// (if not NULL) are opaque tokens for the mount and the backend, stable
/// for the life of the process (equal for equal mounts/backends); 2.5
/// handed out its internal structs, which no public call accepts.
///
/// # Safety
/// `logical` is NULL or a C string; `physical` is NULL or writable;
/// `pmountp` and `pbackp` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_expand_path(
    logical: *const c_char,
    physical: *mut *mut c_char,
    pmountp: *mut *mut c_void,
    pbackp: *mut *mut c_void,
) -> PlfsError {
    guard(|| {
        if physical.is_null() {
            return Err(PLFS_EINVAL);
        }
        // SAFETY: the caller's contract.
        let logical = unsafe { path_argument(logical) }?;
        let (mount, inner) = mount_config(logical)?;
        let (plfs, _) = resolve(logical)?;
        let path = StorePath::parse(&inner).map_err(report)?;
        let backend = &mount.backends[plfs.canonical_backend(&path).0];
        let relative = inner.trim_start_matches('/');
        let text = match &backend.location {
            BackendLocation::Posix(root) if relative.is_empty() => root.display().to_string(),
            BackendLocation::Posix(root) => root.join(relative).display().to_string(),
            other => format!("{other}/{relative}"),
        };
        let text = CString::new(text).map_err(|_| PLFS_EINVAL)?;
        // SAFETY: text is a C string; strdup copies it into malloc'd memory.
        let copied = unsafe { libc::strdup(text.as_ptr()) };
        if copied.is_null() {
            return Err(PLFS_ENOMEM);
        }
        // SAFETY: each is NULL or writable (the caller's contract).
        unsafe {
            *physical = copied;
            store(pmountp, std::ptr::from_ref(mount).cast_mut().cast());
            store(pbackp, std::ptr::from_ref(backend).cast_mut().cast());
        }
        Ok(())
    })
}

/// `*hname` is this host's name in static storage (never freed), as 2.5.
///
/// # Safety
/// `hname` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_gethostname(hname: *mut *mut c_char) -> PlfsError {
    static HOSTNAME: OnceLock<CString> = OnceLock::new();
    guard(|| {
        if hname.is_null() {
            return Err(PLFS_EINVAL);
        }
        let name = HOSTNAME.get_or_init(|| {
            CString::new(crate::plfs::host::hostname()).unwrap_or_else(|_| c"localhost".to_owned())
        });
        // SAFETY: checked non-NULL. C callers must not write through it
        // (2.5's was a static buffer too); the cast only matches `char **`.
        unsafe { *hname = name.as_ptr().cast_mut() };
        Ok(())
    })
}

/// This library's version (a static string).
#[unsafe(no_mangle)]
pub extern "C" fn plfs_version() -> *const c_char {
    static VERSION: &CStr =
        match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
            Ok(version) => version,
            Err(_) => c"unknown",
        };
    VERSION.as_ptr()
}

/// When this library was built, if the build said (PLFS_BUILD_TIME in
/// the environment of `cargo build`), else "unknown": builds are meant to
/// be reproducible, so no clock is read at build time by default.
#[unsafe(no_mangle)]
pub extern "C" fn plfs_buildtime() -> *const c_char {
    static BUILD_TIME: OnceLock<CString> = OnceLock::new();
    BUILD_TIME
        .get_or_init(|| {
            CString::new(option_env!("PLFS_BUILD_TIME").unwrap_or("unknown"))
                .unwrap_or_else(|_| c"unknown".to_owned())
        })
        .as_ptr()
}

/// Wall-clock seconds since the epoch, as 2.5's timer.
#[unsafe(no_mangle)]
pub extern "C" fn plfs_wtime() -> c_double {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |since| since.as_secs_f64())
}

/// Publishes this process's buffered small-file records of directory
/// `dir` on a small_file (1-n) mount (`Plfs::flush_writes`). Other mounts
/// buffer nothing per directory, so, as in 2.5, this succeeds for them.
///
/// # Safety
/// `dir` is NULL or a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_flush_writes(dir: *const c_char) -> PlfsError {
    guard(|| {
        // SAFETY: the caller's contract.
        let (plfs, inner) = unsafe { resolve_argument(dir) }?;
        plfs.flush_writes(&inner).map_err(report)
    })
}

/// Drops this process's cached view of small-file directory `dir`, so
/// reads see what other processes published since
/// (`Plfs::invalidate_read_cache`); a success on other mounts, which cache
/// none per directory.
///
/// # Safety
/// `dir` is NULL or a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_invalidate_read_cache(dir: *const c_char) -> PlfsError {
    guard(|| {
        // SAFETY: the caller's contract.
        let (plfs, inner) = unsafe { resolve_argument(dir) }?;
        plfs.invalidate_read_cache(&inner).map_err(report)
    })
}
