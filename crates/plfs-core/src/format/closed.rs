//! The closed summary (`meta/closed`, FORMAT.md §6.1): what `stat` shows
//! of a container no writer has open — the access record's fields and the
//! size the meta records add up to — in one small file, so a stat reads
//! it instead of the access file and a listing of `meta/`.
//!
//! The record is appended in two parts (everything but the CRC32C, then
//! the CRC32C once its writer has checked that no writer opened meantime),
//! so a reader that finds it short, torn or damaged falls back to the
//! listing; only a whole, sealed record is ever believed.

use super::access::AccessRecord;
use super::codec::{Reader, begin_sealed, open_sealed, put_u64, seal};
use crate::error::Result;

pub const MAGIC: &[u8; 8] = b"PLFSSUMM";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClosedSummary {
    /// The access record as it was when the summary was checked.
    pub access: AccessRecord,
    /// End of file, as the size records give it (FORMAT.md §6).
    pub eof: u64,
    /// Data bytes in all logs (for `st_blocks`).
    pub bytes: u64,
    /// Newest record stamp of every log (for mtime).
    pub last_stamp: u64,
}

impl ClosedSummary {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = begin_sealed(MAGIC);
        self.access.put_fields(&mut out);
        put_u64(&mut out, self.eof);
        put_u64(&mut out, self.bytes);
        put_u64(&mut out, self.last_stamp);
        seal(out)
    }

    pub fn decode(bytes: &[u8]) -> Result<ClosedSummary> {
        let (_version, body) = open_sealed(bytes, MAGIC, "closed summary")?;
        let mut reader = Reader::new(body, "closed summary");
        let access = AccessRecord::read_fields(&mut reader)?;
        Ok(ClosedSummary { access, eof: reader.u64()?, bytes: reader.u64()?, last_stamp: reader.u64()? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ClosedSummary {
        ClosedSummary {
            access: AccessRecord {
                mode: 0o640,
                uid: 1000,
                gid: 100,
                atime_ns: 1,
                mtime_ns: 2,
                ctime_ns: 3,
                times_stamp: 4,
            },
            eof: 0x0102_0304_0506_0708,
            bytes: 11,
            last_stamp: 12,
        }
    }

    #[test]
    fn round_trips() {
        assert_eq!(ClosedSummary::decode(&sample().encode()).unwrap(), sample());
    }

    #[test]
    fn golden_bytes() {
        let bytes = sample().encode();
        // Magic, version, 44 bytes of access fields, 24 of sizes, CRC32C.
        assert_eq!(bytes.len(), 8 + 2 + 44 + 24 + 4);
        assert_eq!(&bytes[..10], b"PLFSSUMM\x02\x00");
        assert_eq!(&bytes[10..14], &0o640u32.to_le_bytes());
        // The access fields sit where they sit in the access file.
        let access = sample().access.encode();
        assert_eq!(&bytes[10..54], &access[10..54]);
        assert_eq!(&bytes[54..62], &0x0102_0304_0506_0708u64.to_le_bytes());
        assert_eq!(&bytes[62..70], &11u64.to_le_bytes());
        assert_eq!(&bytes[70..78], &12u64.to_le_bytes());
        assert_eq!(&bytes[78..], &crc32c::crc32c(&bytes[..78]).to_le_bytes());
    }

    /// A record without its CRC32C (its writer found a writer open before
    /// sealing it), or cut anywhere, is refused, never half believed.
    #[test]
    fn an_unsealed_or_torn_summary_is_refused() {
        let bytes = sample().encode();
        for cut in 0..bytes.len() {
            assert!(ClosedSummary::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut flipped = bytes.clone();
        flipped[60] ^= 1;
        assert!(ClosedSummary::decode(&flipped).is_err());
    }
}
