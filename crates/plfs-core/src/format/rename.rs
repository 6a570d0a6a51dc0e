//! The rename intent (`renaming`): what a rename onto a name is doing, kept
//! in the container that is moving, so that `plfs recover` can finish a
//! rename a crash cut short (docs/ARCHITECTURE.md, "Rename").

use super::codec::{Reader, begin_sealed, open_sealed, put_text16, seal};
use crate::error::{Error, Result};

pub const MAGIC: &[u8; 8] = b"PLFSMOVE";

/// One rename of a container file: from `source` to `target` (logical
/// paths within the mount, without a leading `/`), through the hidden name
/// `staging` in the target's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenameIntent {
    pub source: String,
    pub target: String,
    pub staging: String,
}

impl RenameIntent {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = begin_sealed(MAGIC);
        for text in [&self.source, &self.target, &self.staging] {
            put_text16(&mut out, text);
        }
        seal(out)
    }

    pub fn decode(bytes: &[u8]) -> Result<RenameIntent> {
        let (_version, body) = open_sealed(bytes, MAGIC, "rename intent")?;
        let mut reader = Reader::new(body, "rename intent");
        let mut text = || reader.text16("a path");
        let (source, target, staging) = (text()?, text()?, text()?);
        if reader.remaining() != 0 {
            return Err(Error::corrupt(format!(
                "rename intent: {} bytes after the last path",
                reader.remaining()
            )));
        }
        Ok(RenameIntent { source, target, staging })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RenameIntent {
        RenameIntent { source: "d/tmp".into(), target: "e/f".into(), staging: ".plfs-swap.x".into() }
    }

    #[test]
    fn round_trips() {
        assert_eq!(RenameIntent::decode(&sample().encode()).unwrap(), sample());
    }

    #[test]
    fn golden_bytes() {
        let bytes = sample().encode();
        let mut expected = b"PLFSMOVE\x02\x00".to_vec();
        expected.extend_from_slice(b"\x05\x00d/tmp\x03\x00e/f\x0c\x00.plfs-swap.x");
        expected.extend_from_slice(&crc32c::crc32c(&expected).to_le_bytes());
        assert_eq!(bytes, expected);
    }

    #[test]
    fn any_flipped_bit_is_detected() {
        let bytes = sample().encode();
        for index in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[index] ^= 0x10;
            assert!(RenameIntent::decode(&damaged).is_err(), "flip at {index} went unnoticed");
        }
    }
}
