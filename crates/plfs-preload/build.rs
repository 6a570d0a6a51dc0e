//! Links the interposer so that it holds its own code and little else:
//! every process under `LD_PRELOAD` maps it, and with the disk's large
//! read-ahead a cold start reads the whole file (docs/PERFORMANCE.md,
//! "Start-up: what the interposer's file holds").
//!
//! - `--exclude-libs,ALL`: a cdylib exports every `#[no_mangle]` function
//!   of every crate it links, not only its own. The core depends on
//!   crc-fast, whose default `ffi` feature object_store turns on for the
//!   whole workspace (feature unification; we cannot turn it off from
//!   here), so 26 `crc_fast_*` C functions were exported and kept, with the
//!   CRC tables they reach. The option tells the linker to export nothing
//!   that comes from an archive: every dependency (the rlibs, std included)
//!   is linked as one, the interposer's own code as object files, so
//!   exactly its own `#[no_mangle]` functions stay exported and
//!   `--gc-sections` (which rustc passes) drops what only the others used.
//! - GNU ld instead of rustc's default lld: lld keeps the exception tables
//!   (`.gcc_except_table`) of every object file it reads in, even of the
//!   functions its `--gc-sections` discards, because rustc's LLVM does not
//!   tie them to their function; the interposer reads in most of the core
//!   and its dependencies for the plfsrc parser, so that was 0.7 MB of
//!   tables for 0.02 MB of live ones. GNU ld discards a table with its
//!   function. (GNU ld decides `--as-needed` before it collects garbage, so
//!   a discarded `pow` call in tokio makes it list libm.so.6 as needed, one
//!   more library mapped at start that is always in the page cache.) GNU ld
//!   comes with the C compiler rustc links through (build-essential).
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,--exclude-libs,ALL");
    // The last -fuse-ld on the cc command line wins over rustc's own.
    println!("cargo:rustc-cdylib-link-arg=-fuse-ld=bfd");
    println!("cargo:rerun-if-changed=build.rs");
}
