//! One extended attribute's value, in its own small file.

use super::codec::{Reader, begin_sealed, open_sealed, put_u32, seal};
use crate::error::{Error, Result};

pub const MAGIC: &[u8; 8] = b"PLFSXATR";

/// Largest value accepted (Linux XATTR_SIZE_MAX).
pub const VALUE_MAX_BYTES: usize = 64 << 10;

pub fn encode(value: &[u8]) -> Vec<u8> {
    let mut out = begin_sealed(MAGIC);
    put_u32(&mut out, value.len() as u32);
    out.extend_from_slice(value);
    seal(out)
}

pub fn decode(bytes: &[u8]) -> Result<Vec<u8>> {
    let (_version, body) = open_sealed(bytes, MAGIC, "extended attribute")?;
    let mut reader = Reader::new(body, "extended attribute");
    let length = reader.u32()? as usize;
    let value = reader.take(length)?.to_vec();
    if reader.remaining() != 0 {
        return Err(Error::corrupt("extended attribute: trailing bytes"));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_detects_damage() {
        let bytes = encode(b"value\0with nul");
        assert_eq!(decode(&bytes).unwrap(), b"value\0with nul");
        for index in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[index] ^= 1;
            assert!(decode(&damaged).is_err(), "flip at {index}");
        }
    }
}
