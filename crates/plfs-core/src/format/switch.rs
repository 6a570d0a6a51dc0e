//! The switch intent (`.plfs-switch.<name>`): what an in-place `plfs
//! migrate` on a backend that cannot exchange two directories (S3, HDFS)
//! is doing between its two renames, kept beside the file so that lookups
//! in between find the PLFS 2.5 container where it went, and a rerun or
//! `plfs recover --fix` finishes the switch (docs/FORMAT.md §16,
//! "Migrating"; `migrate.rs`).

use super::codec::{Reader, begin_sealed, open_sealed, put_text16, seal};
use crate::error::{Error, Result};

pub const MAGIC: &[u8; 8] = b"PLFSSWCH";

/// One switch of `<dir>/<name>` on its canonical backend: the 2.5 part
/// there moves to `aside`, then the verified plfs copy at `verified`
/// takes the name. Both are names in `<dir>`, not paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchIntent {
    pub verified: String,
    pub aside: String,
}

impl SwitchIntent {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = begin_sealed(MAGIC);
        for text in [&self.verified, &self.aside] {
            put_text16(&mut out, text);
        }
        seal(out)
    }

    pub fn decode(bytes: &[u8]) -> Result<SwitchIntent> {
        let (_version, body) = open_sealed(bytes, MAGIC, "switch intent")?;
        let mut reader = Reader::new(body, "switch intent");
        let mut name = || -> Result<String> {
            let text = reader.text16("a name")?;
            // Names beside the file, never paths: a damaged or forged
            // record must not point a rename elsewhere.
            if text.is_empty() || text.contains('/') || text == "." || text == ".." {
                return Err(Error::corrupt(format!("switch intent: {text:?} is not a name")));
            }
            Ok(text)
        };
        let (verified, aside) = (name()?, name()?);
        if reader.remaining() != 0 {
            return Err(Error::corrupt(format!(
                "switch intent: {} bytes after the last name",
                reader.remaining()
            )));
        }
        Ok(SwitchIntent { verified, aside })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn sample() -> SwitchIntent {
        SwitchIntent {
            verified: ".plfs-migrated.000000000000002a.00000009.1234abcd.ckpt".into(),
            aside: ".plfs-migrated.000000000000002b.00000009.1234abcd.ckpt".into(),
        }
    }

    #[test]
    fn round_trips() {
        assert_eq!(SwitchIntent::decode(&sample().encode()).unwrap(), sample());
    }

    /// The checked-in record (`testdata/migrate/switch-intent`) is what
    /// `sample` encodes to, byte for byte, and decodes back to it.
    #[test]
    fn golden_bytes_and_fixture() {
        let bytes = sample().encode();
        let mut expected = b"PLFSSWCH\x02\x00".to_vec();
        expected.extend_from_slice(b"\x36\x00.plfs-migrated.000000000000002a.00000009.1234abcd.ckpt");
        expected.extend_from_slice(b"\x36\x00.plfs-migrated.000000000000002b.00000009.1234abcd.ckpt");
        expected.extend_from_slice(&crc32c::crc32c(&expected).to_le_bytes());
        assert_eq!(bytes, expected);
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/migrate/switch-intent");
        if std::env::var("PLFS_WRITE_FIXTURES").is_ok_and(|value| value == "1") {
            std::fs::write(&fixture, &bytes).unwrap();
        }
        let pinned = std::fs::read(&fixture).unwrap();
        assert_eq!(pinned, bytes, "{} differs from the encoder", fixture.display());
        assert_eq!(SwitchIntent::decode(&pinned).unwrap(), sample());
    }

    #[test]
    fn any_flipped_bit_is_detected() {
        let bytes = sample().encode();
        for index in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[index] ^= 0x10;
            assert!(SwitchIntent::decode(&damaged).is_err(), "flip at {index} went unnoticed");
        }
    }

    #[test]
    fn a_path_is_refused() {
        let forged = SwitchIntent { verified: "../elsewhere".into(), aside: "x".into() }.encode();
        assert!(SwitchIntent::decode(&forged).is_err());
    }
}
