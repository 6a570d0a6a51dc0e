//! libplfs: the PLFS 2.5 C API over the plfs core, and the collective open
//! behind include/plfs_mpi.h. Arguments are checked, converted to core
//! calls, and errors converted back to `plfs_error_t` through the core's
//! one errno table; nothing else happens here.
//!
//! - `errors`: `plfs_error_t` and its converters.
//! - `mounts`: which mount a logical path is on (the plfsrc).
//! - `files`: `plfs_open`, `plfs_read`, `plfs_write`, `plfs_close`, ...
//! - `collective`: `plfs_open_collective_ops`.

use plfs_core_crate as plfs;

mod collective;
mod errors;
mod files;
mod mounts;
