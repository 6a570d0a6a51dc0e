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
//! - [`fs`]: the file-system API a mount exposes.
//! - [`config`]: configuration types.

pub mod clock;
pub mod config;
pub mod container;
pub mod error;
pub mod file;
pub mod format;
pub mod fs;
pub mod index;
pub mod layout;
pub mod load;
pub mod placement;
pub mod reader;
pub mod store;
pub mod tools;

pub use error::{Error, ErrorKind, Result};
