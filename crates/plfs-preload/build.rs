//! Keeps the interposer's dynamic symbol table to its own functions.
//!
//! A cdylib exports every `#[no_mangle]` function of every crate it links,
//! not only its own. Through the core's dependency on crc-fast, whose
//! default `ffi` feature object_store turns on for the whole workspace
//! (feature unification; we cannot turn it off from here), that meant 26
//! `crc_fast_*` C functions exported, and kept by the linker with the CRC
//! tables they reach: about 700 KB more of a file that every process under
//! `LD_PRELOAD` maps, and that a cold start reads whole (docs/PERFORMANCE.md,
//! "Start-up: what the interposer's file holds").
//!
//! `--exclude-libs,ALL` tells the linker not to export symbols that come
//! from archives; every dependency (the rlibs, std included) is linked as
//! an archive, while the interposer's own code is linked as object files,
//! so exactly its own `#[no_mangle]` functions stay exported, and
//! `--gc-sections` (which rustc passes) then drops what only the hidden
//! functions used. GNU ld and lld both take the option.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,--exclude-libs,ALL");
    println!("cargo:rustc-cdylib-link-arg=-fuse-ld=bfd");
    println!("cargo:rerun-if-changed=build.rs");
}
