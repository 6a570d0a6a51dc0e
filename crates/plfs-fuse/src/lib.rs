//! plfs over FUSE: a plfs mount that every tool on the node can use.
//!
//! The daemon translates FUSE requests into calls on one [`plfs::fs::Plfs`]
//! and errors back into errno through the core's one mapping. All local
//! processes that open a file share the core's one open file (one index
//! merge per node); each client process writes its own data log.
//!
//! - [`filesystem`]: the FUSE operations and the cache policy.
//! - [`inode`]: inode numbers ↔ paths, with the kernel's lookup counts.
//! - [`handles`]: open file and directory handles.
//! - [`statfs`]: statfs answered on a helper thread with a timeout.
//! - `capability`: the per-write `security.capability` question, cached.
//! - [`session`]: mounting, unmounting, and shutdown on signals.
//! - [`mounts`]: reading the kernel's mount table.
//!
//! Mounting in-process (root, or a user allowed to mount FUSE):
//!
//! ```no_run
//! # fn main() -> std::io::Result<()> {
//! # let plfs: plfs::fs::Plfs = unimplemented!();
//! let mount = plfs_fuse::Mount::spawn(plfs, "/mnt/plfs".as_ref(), &plfs_fuse::MountSettings::default())?;
//! std::fs::write("/mnt/plfs/hello", b"hi")?;
//! mount.unmount()?;
//! # Ok(())
//! # }
//! ```

mod capability;
pub mod filesystem;
pub mod handles;
pub mod inode;
pub mod mounts;
mod process;
pub mod session;
pub mod statfs;

pub use filesystem::{FsOptions, PlfsFs};
pub use session::{Mount, MountSettings, ParsedOptions, ShutdownSignals, force_unmount, parse_options, run};
