//! The access file: the logical file's mode, owner and explicitly set times.
//! Its presence is what makes a directory on a backend a container.

use super::codec::{Reader, begin_sealed, open_sealed, put_u32, put_u64, seal};
use crate::error::Result;

pub const MAGIC: &[u8; 8] = b"PLFSACCS";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessRecord {
    /// Permission bits (no file-type bits).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub atime_ns: u64,
    /// The modification time set at create or by utime; writes after
    /// `times_stamp` supersede it (see `fs::stat`).
    pub mtime_ns: u64,
    pub ctime_ns: u64,
    /// Ordering stamp of the create/chmod/chown/utime that wrote this record.
    pub times_stamp: u64,
}

impl AccessRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = begin_sealed(MAGIC);
        self.put_fields(&mut out);
        seal(out)
    }

    /// The record's fields in their on-disk order; the closed summary
    /// (`closed.rs`) carries the same fields in the same order.
    pub(crate) fn put_fields(&self, out: &mut Vec<u8>) {
        put_u32(out, self.mode);
        put_u32(out, self.uid);
        put_u32(out, self.gid);
        put_u64(out, self.atime_ns);
        put_u64(out, self.mtime_ns);
        put_u64(out, self.ctime_ns);
        put_u64(out, self.times_stamp);
    }

    /// Reads what [`AccessRecord::put_fields`] wrote.
    pub(crate) fn read_fields(reader: &mut Reader<'_>) -> Result<AccessRecord> {
        Ok(AccessRecord {
            mode: reader.u32()? & 0o7777,
            uid: reader.u32()?,
            gid: reader.u32()?,
            atime_ns: reader.u64()?,
            mtime_ns: reader.u64()?,
            ctime_ns: reader.u64()?,
            times_stamp: reader.u64()?,
        })
    }

    pub fn decode(bytes: &[u8]) -> Result<AccessRecord> {
        let (_version, body) = open_sealed(bytes, MAGIC, "access file")?;
        let mut reader = Reader::new(body, "access file");
        AccessRecord::read_fields(&mut reader)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> AccessRecord {
        AccessRecord {
            mode: 0o640,
            uid: 1000,
            gid: 100,
            atime_ns: 1,
            mtime_ns: 2,
            ctime_ns: 3,
            times_stamp: 4,
        }
    }

    #[test]
    fn round_trips() {
        assert_eq!(AccessRecord::decode(&sample().encode()).unwrap(), sample());
    }

    #[test]
    fn golden_bytes() {
        let bytes = sample().encode();
        assert_eq!(bytes.len(), 8 + 2 + 12 + 32 + 4);
        assert_eq!(&bytes[..10], b"PLFSACCS\x02\x00");
        assert_eq!(&bytes[10..14], &0o640u32.to_le_bytes());
    }

    #[test]
    fn any_flipped_bit_is_detected() {
        let bytes = sample().encode();
        for index in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[index] ^= 0x10;
            assert!(AccessRecord::decode(&damaged).is_err(), "flip at {index} went unnoticed");
        }
    }
}
