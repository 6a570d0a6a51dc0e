//! Which mount a logical path is on. The plfsrc is found once per process,
//! the usual way ($PLFSRC, ~/.plfsrc, /etc/plfsrc), and each mount is
//! built once and shared by every fd on it, as PLFS 2.5 did.

use std::collections::HashMap;
use std::ffi::{CStr, c_char};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};

use crate::errors::{PLFS_EINVAL, PlfsError, report};
use crate::plfs::config::plfsrc::{self, PlfsConfig};
use crate::plfs::fs::{Options, Plfs};
use crate::plfs::{Error, ErrorKind};

static CONFIG: OnceLock<Result<PlfsConfig, String>> = OnceLock::new();
static MOUNTS: OnceLock<Mutex<HashMap<PathBuf, Plfs>>> = OnceLock::new();

/// A C path argument: NULL or not UTF-8 is EINVAL.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
pub unsafe fn path_argument<'a>(path: *const c_char) -> Result<&'a str, PlfsError> {
    if path.is_null() {
        return Err(PLFS_EINVAL);
    }
    // SAFETY: the caller passes a C string.
    unsafe { CStr::from_ptr(path) }.to_str().map_err(|_| PLFS_EINVAL)
}

/// The mount holding `path` and the path inside it.
pub fn resolve(path: &str) -> Result<(Plfs, String), PlfsError> {
    let config = CONFIG
        .get_or_init(|| plfsrc::discover().map_err(|error| error.to_string()))
        .as_ref()
        .map_err(|text| report(Error::new(ErrorKind::NotFound, text.clone())))?;
    let (mount, inner) = config.resolve(Path::new(path)).ok_or_else(|| {
        report(Error::new(ErrorKind::NotFound, format!("{path}: not under a mount point of the plfsrc")))
    })?;
    let mut mounts = MOUNTS.get_or_init(Mutex::default).lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(plfs) = mounts.get(&mount.mount_point) {
        return Ok((plfs.clone(), inner));
    }
    let plfs = Plfs::from_config(mount, Options::from_environment(config.tuning.clone())).map_err(report)?;
    mounts.insert(mount.mount_point.clone(), plfs.clone());
    Ok((plfs, inner))
}
