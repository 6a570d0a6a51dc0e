//! The plfsrc parser on its own (its inputs are text, unlike the decoders').
//! Run: `cargo +nightly fuzz run plfsrc`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use plfs::fuzz::{Decoder, check};

fuzz_target!(|data: &[u8]| {
    if let Err(message) = check(Decoder::Plfsrc, data) {
        panic!("{message}");
    }
});
