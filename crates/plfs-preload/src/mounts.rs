//! The plfsrc's mount points, read by the interposer itself with the core's
//! own parser (the same `plfsrc::discover` libplfs runs, so the same file
//! and the same normalised points), so deciding that a path is no plfs path
//! needs no libplfs.so. Loading libplfs.so (a large library: mapping and
//! relocating it was 1 ms warm and 20-50 ms with cold caches) then happens
//! only in a process that touches a path under a mount point.
//!
//! Each mount's local (POSIX) backend directories come with it: a process
//! whose working directory is a plfs directory stands, for the kernel, in
//! that directory's mirror on one of them (see `cwd`).

use std::os::unix::ffi::OsStrExt;
use std::sync::OnceLock;

use plfs::config::BackendLocation;

use crate::guard::Inside;

/// One mount point and the directories of its local backends, every
/// symbolic link in them resolved (as the kernel's getcwd spells them), in
/// the plfsrc's order. Directories are mirrored on every backend, so each
/// holds every logical directory at the same relative path.
pub struct Mount {
    pub point: Vec<u8>,
    pub roots: Vec<Vec<u8>>,
}

struct Mounts {
    points: Vec<Vec<u8>>,
    mounts: Vec<Mount>,
}

static MOUNTS: OnceLock<Option<Mounts>> = OnceLock::new();

fn read() -> Option<&'static Mounts> {
    MOUNTS
        .get_or_init(|| {
            // The parser's own file reads go straight to libc.
            let _inside = Inside::enter();
            let config = plfs::config::plfsrc::discover().ok()?;
            let mounts: Vec<Mount> = config
                .mounts
                .iter()
                .map(|mount| Mount {
                    point: mount.mount_point.as_os_str().as_bytes().to_vec(),
                    roots: mount
                        .backends
                        .iter()
                        .filter_map(|backend| match &backend.location {
                            BackendLocation::Posix(root) => std::fs::canonicalize(root).ok(),
                            _ => None,
                        })
                        .map(|root| root.as_os_str().as_bytes().to_vec())
                        .collect(),
                })
                .collect();
            Some(Mounts { points: mounts.iter().map(|mount| mount.point.clone()).collect(), mounts })
        })
        .as_ref()
}

/// The mount points, read once; None when the interposer could not read
/// the plfsrc (none found, or one libplfs will report as bad): the caller
/// then asks libplfs, which says why as it always did.
pub fn mount_points() -> Option<&'static [Vec<u8>]> {
    read().map(|mounts| mounts.points.as_slice())
}

/// The mounts with their local backend directories (empty when the
/// interposer could not read the plfsrc).
pub fn mounts() -> &'static [Mount] {
    read().map_or(&[], |mounts| mounts.mounts.as_slice())
}
