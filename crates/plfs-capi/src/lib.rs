//! libplfs: the PLFS 2.5 C API over the plfs core, and the collective open
//! behind include/plfs_mpi.h. Arguments are checked, converted to core
//! calls, and errors converted back to `plfs_error_t` through the core's
//! one errno table; nothing else happens here.
//!
//! - `errors`: `plfs_error_t` and its converters.
//! - `mounts`: which mount a logical path is on (the plfsrc).
//! - `files`: open files: `plfs_open`, `plfs_read`, `plfs_write`,
//!   `plfs_close`, `plfs_create`, `plfs_sync`, `plfs_trunc`, `plfs_query`.
//! - `attrs`: `plfs_getattr`, `plfs_mode`, `plfs_access`, `plfs_chmod`,
//!   `plfs_chown`, `plfs_utime`, `plfs_utimens`, `plfs_statvfs`.
//! - `paths`: `plfs_unlink`, `plfs_rename`, `plfs_link`, `plfs_symlink`,
//!   `plfs_readlink`.
//! - `dirs`: `plfs_mkdir`, `plfs_rmdir`, `plfs_readdir`, `plfs_*dir_c`.
//! - `xattrs`: `plfs_getxattr`, `plfs_setxattr`; by path, `plfs_path_getxattr` & co.
//! - `info`: file types, `plfs_expand_path`, host name, version.
//! - `collective`: `plfs_open_collective_ops`, `plfs_index_retain`, `plfs_flatten_close_ops`.
//! - `interposer`: keeps the LD_PRELOAD interposer out of this library's
//!   own libc calls.

use plfs_core_crate as plfs;

mod attrs;
mod collective;
mod dirs;
mod errors;
mod files;
mod info;
mod interposer;
mod mounts;
mod paths;
mod xattrs;
