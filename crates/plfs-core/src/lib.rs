//! plfs: a Parallel Log-Structured File System.
//!
//! Many writers share one logical file; each appends to its own data log and
//! index log inside a *container* spread over one or more backend stores.
//! Readers merge the index logs and see one file. Module map:
//!
//! - [`store`]: the I/O-store seam and its implementations.
//! - [`placement`]: every choice of backend and hostdir.
//! - [`layout`]: the container's names, mapped to typed ids and back.
//! - [`format`]: the versioned, checksummed on-disk encodings.
//! - [`index`]: merging index records into one extent map.
//! - [`container`]: creating, finding and inspecting containers.
//! - [`file`]: an open logical file (writers, readers, truncate, sync).
//! - [`flat`]: the n-n layout, one plain backend file per logical file.
//! - `workload`: the seam between the façade and the three ways files are
//!   kept (containers, flat files, small files), chosen once per mount.
//! - [`fs`]: the file-system API a mount exposes.
//! - [`config`]: configuration types and the plfsrc parser.
//! - [`tools`]: map, query, flatten and recover.
//! - [`smallfile`]: the 1-N engine: many small files of a directory in a few logs per writer.
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
pub mod checksums;
pub mod clock;
pub mod collective;
pub mod config;
pub mod container;
pub mod error;
pub mod file;
#[cfg(test)]
mod fixtures;
pub mod flat;
pub mod format;
pub mod fs;
/// Test support (the `testing` feature): not in the production library.
#[cfg(any(test, feature = "testing"))]
pub mod fuzz;
pub mod host;
pub mod index;
pub mod layout;
pub mod load;
pub(crate) mod mount_state;
pub mod mounts;
pub mod open;
pub mod placement;
pub(crate) mod protection;
pub mod reader;
pub(crate) mod rename;
pub mod smallfile;
pub mod store;
pub mod tools;
pub(crate) mod workload;
pub mod xattr;

pub use error::{Error, ErrorKind, Result};
