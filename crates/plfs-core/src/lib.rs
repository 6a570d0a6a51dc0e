//! plfs: a Parallel Log-Structured File System.
//!
//! Many writers share one logical file; each appends to its own data log and
//! index log inside a *container* spread over one or more backend stores.
//! Readers merge the index logs and see one file.
//!
//! # What is public, and why
//!
//! The public API is what a program that mounts plfs needs, and no more:
//!
//! - [`fs`]: the [`Plfs`](fs::Plfs) façade (open, read, write, stat,
//!   rename, ...) and its [`FileHandle`](fs::FileHandle); every interface
//!   crate (FUSE, C API, preload, MPI, CLI, bench) goes through it.
//! - [`config`], [`open`], [`attr`], [`error`] (also as [`Error`],
//!   [`ErrorKind`], [`Result`]), [`clock`], [`host`]: the values passed to
//!   and returned by the façade.
//! - [`store`]: the `Store` trait and its implementations, so a program can
//!   add or wrap a backend; [`placement`]: which backend holds what.
//! - [`tools`] (map, query, flatten, recover and their report types),
//!   [`xattr`], [`collective`] (the MPI collective open over a `Comm`) and
//!   [`mounts`] (the plfsrc mount table the C API and preload share).
//!
//! Everything else (the container and its names, the open file, index
//! loading, on-disk formats, the merged index, the read caches, rename
//! intents, permission of pieces, checksums, the flat and small-file
//! workloads) is crate-private, so it can change without breaking callers
//! and no interface builds container names or parses records itself.
//! Two features widen this for our own tools only: `testing` (the store
//! conformance suite, the test-server launcher, the fuzz entry points) and
//! `internals` (`format` and `index`, for `plfs bench index`).
//!
//! docs/ARCHITECTURE.md maps every module, private ones included, by layer.
//!
//! Three writers sharing one logical file over two backends:
//!
//! ```
//! use std::sync::Arc;
//! use plfs::config::{BackendRole, Tuning};
//! use plfs::open::OpenFlags;
//! use plfs::fs::{Options, Plfs};
//! use plfs::store::{SharedStore, memory::MemoryStore};
//!
//! let backends: Vec<(SharedStore, BackendRole)> = (0..2)
//!     .map(|i| (Arc::new(MemoryStore::new(format!("mem://b{i}"))) as SharedStore, BackendRole::Any))
//!     .collect();
//! let plfs = Plfs::new(backends, Options::from_environment(Tuning::default()))?;
//!
//! let file = plfs.open("/checkpoint", OpenFlags::WRONLY.create(), 0o644, 0)?;
//! for record in 0..9u64 {
//!     // Record k of writer w lands at offset (3k + w) * 4: N-1 strided.
//!     file.write_as(&[record as u8; 4], record * 4, record % 3)?;
//! }
//! file.close()?;
//!
//! assert_eq!(plfs.stat("/checkpoint")?.size, 36);
//! assert_eq!(plfs.map("/checkpoint")?.totals.logs, 3); // one log pair per writer
//! let reader = plfs.open("/checkpoint", OpenFlags::RDONLY, 0, 9)?;
//! let mut buf = [0u8; 4];
//! reader.read(&mut buf, 20)?;
//! assert_eq!(buf, [5; 4]);
//! reader.close()?;
//! # Ok::<(), plfs::Error>(())
//! ```

pub mod attr;
pub(crate) mod checksums;
pub mod clock;
pub mod collective;
pub mod config;
pub(crate) mod container;
pub mod error;
pub(crate) mod file;
#[cfg(test)]
mod fixtures;
pub(crate) mod flat;
#[cfg(feature = "internals")]
pub mod format;
#[cfg(not(feature = "internals"))]
pub(crate) mod format;
pub mod fs;
/// Test support (the `testing` feature): not in the production library.
#[cfg(any(test, feature = "testing"))]
pub mod fuzz;
pub mod host;
#[cfg(feature = "internals")]
pub mod index;
#[cfg(not(feature = "internals"))]
pub(crate) mod index;
pub(crate) mod layout;
pub(crate) mod load;
pub(crate) mod migrate;
pub(crate) mod mount_state;
pub mod mounts;
pub mod open;
pub mod placement;
pub(crate) mod plfs25;
#[cfg(test)]
mod plfs25_fixtures;
pub(crate) mod protection;
pub(crate) mod read_ahead;
pub(crate) mod reader;
pub(crate) mod reclaim;
pub(crate) mod rename;
pub(crate) mod retained;
pub(crate) mod smallfile;
pub mod store;
pub(crate) mod stripes;
pub mod striping;
pub mod tools;
pub(crate) mod workload;
pub mod xattr;

pub use error::{Error, ErrorKind, Result};
pub use file::PREPARED_DATA_LOGS_MAX;
pub use migrate::{MigrateOptions, MigrateOutcome, MigrateReport};
