//! The version file: which format and which plfs release made the container.

use super::codec::{Reader, begin_sealed, open_sealed, put_u16, seal};
use crate::error::{Error, Result};

pub const MAGIC: &[u8; 8] = b"PLFSVERS";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionRecord {
    pub format_version: u16,
    /// The plfs release that created the container, e.g. "0.1.0".
    pub library_version: String,
}

impl VersionRecord {
    pub fn current() -> VersionRecord {
        VersionRecord {
            format_version: super::FORMAT_VERSION,
            library_version: env!("CARGO_PKG_VERSION").to_owned(),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = begin_sealed(MAGIC);
        let text = self.library_version.as_bytes();
        let length = u16::try_from(text.len()).unwrap_or(u16::MAX);
        put_u16(&mut out, length);
        out.extend_from_slice(&text[..usize::from(length)]);
        seal(out)
    }

    pub fn decode(bytes: &[u8]) -> Result<VersionRecord> {
        let (format_version, body) = open_sealed(bytes, MAGIC, "version file")?;
        let mut reader = Reader::new(body, "version file");
        let length = reader.u16()?;
        let text = reader.take(usize::from(length))?;
        let library_version = String::from_utf8(text.to_vec())
            .map_err(|_| Error::corrupt("version file: library version is not UTF-8"))?;
        Ok(VersionRecord { format_version, library_version })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let record = VersionRecord::current();
        assert_eq!(VersionRecord::decode(&record.encode()).unwrap(), record);
    }

    #[test]
    fn newer_formats_are_refused_by_name() {
        let mut bytes = VersionRecord::current().encode();
        bytes[8] = 9;
        let length = bytes.len();
        let crc = crc32c::crc32c(&bytes[..length - 4]);
        bytes[length - 4..].copy_from_slice(&crc.to_le_bytes());
        let error = VersionRecord::decode(&bytes).unwrap_err();
        assert_eq!(error.kind(), crate::ErrorKind::Unsupported);
        assert!(error.to_string().contains("format version 9"), "{error}");
    }
}
