//! The on-disk encodings. Every structure here is little-endian, starts with
//! a magic and a format version, and ends in (or is framed by) a CRC32C, so a
//! reader can tell torn, corrupt and too-new bytes apart. docs/FORMAT.md
//! describes each one field by field; the golden tests pin the bytes.
//! The exception is `plfs25`: PLFS 2.5's raw, unversioned structs, which
//! plfs reads in place and never writes (FORMAT.md §16).

pub mod access;
pub mod closed;
pub mod codec;
pub mod data_log;
pub mod frame;
pub mod global_index;
pub mod index_log;
pub mod plfs25;
pub mod rename;
pub mod striping;
pub mod switch;
pub mod version;
pub mod xattr;

/// The container format this build writes and the newest it reads.
pub const FORMAT_VERSION: u16 = 2;
