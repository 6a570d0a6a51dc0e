//! The plfsrc's mount points, read by the interposer itself with the core's
//! own parser (the same `plfsrc::discover` libplfs runs, so the same file
//! and the same normalised points), so deciding that a path is no plfs path
//! needs no libplfs.so. Loading libplfs.so (a large library: mapping and
//! relocating it was 1 ms warm and 20-50 ms with cold caches) then happens
//! only in a process that touches a path under a mount point.

use std::os::unix::ffi::OsStrExt;
use std::sync::OnceLock;

use crate::guard::Inside;

static POINTS: OnceLock<Option<Vec<Vec<u8>>>> = OnceLock::new();

/// The mount points, read once; None when the interposer could not read
/// the plfsrc (none found, or one libplfs will report as bad): the caller
/// then asks libplfs, which says why as it always did.
pub fn mount_points() -> Option<&'static [Vec<u8>]> {
    POINTS
        .get_or_init(|| {
            // The parser's own file reads go straight to libc.
            let _inside = Inside::enter();
            let config = plfs::config::plfsrc::discover().ok()?;
            Some(
                config.mounts.iter().map(|mount| mount.mount_point.as_os_str().as_bytes().to_vec()).collect(),
            )
        })
        .as_deref()
}
