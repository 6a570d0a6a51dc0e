//! Every on-disk decoder: the first byte picks one, the rest is its input.
//! Run: `cargo +nightly fuzz run decoders -- -malloc_limit_mb=64`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use plfs::fuzz::{Decoder, check};

fuzz_target!(|data: &[u8]| {
    let Some((&which, bytes)) = data.split_first() else { return };
    if let Err(message) = check(Decoder::from_byte(which), bytes) {
        panic!("{message}");
    }
});
