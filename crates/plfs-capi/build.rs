//! Links libplfs.so so that it exports the C API its headers declare and
//! nothing else, as the interposer does (crates/plfs-preload/build.rs has
//! the long form of both reasons):
//!
//! - `--exclude-libs,ALL`: a cdylib exports every `#[no_mangle]` function
//!   of every crate it links. object_store turns on crc-fast's `ffi`
//!   feature for the whole workspace, so libplfs.so exported 26
//!   `crc_fast_*` functions beside the 52 of plfs.h, plfs_error.h and
//!   plfs_mpi.h, and kept the code and tables they reach. Every dependency
//!   comes from an archive (an rlib); this crate's own functions do not, so
//!   exactly they stay exported, and `--gc-sections` drops the rest.
//! - GNU ld instead of lld: lld keeps the exception tables of the functions
//!   its `--gc-sections` discards.
//!
//! Only the shared library is affected: `cdylib-link-arg` is not passed to
//! the staticlib (libplfs.a), whose objects a program's own link selects.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,--exclude-libs,ALL");
    // The last -fuse-ld on the cc command line wins over rustc's own.
    println!("cargo:rustc-cdylib-link-arg=-fuse-ld=bfd");
    println!("cargo:rerun-if-changed=build.rs");
}
