//! Log headers. A data log is this header followed by raw appended bytes;
//! an index log is this header followed by checksummed frames of records.
//! The header ties a log to its writer so `plfs query` and `plfs recover`
//! never have to guess from file names.

use super::codec::{Reader, put_u16, put_u32, put_u64};
use crate::error::{Error, ErrorKind, Result};

pub const DATA_MAGIC: &[u8; 8] = b"PLFSDATA";
pub const INDEX_MAGIC: &[u8; 8] = b"PLFSINDX";

/// Longest hostname a header stores (Linux HOST_NAME_MAX is 64).
pub const HOSTNAME_MAX_BYTES: usize = 255;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogHeader {
    /// Stamp taken when the log was created; also part of its name.
    pub created_stamp: u64,
    pub writer: u64,
    pub pid: u32,
    pub hostname: String,
}

const FIXED_BYTES: usize = 8 + 2 + 2 + 4 + 8 + 8 + 4 + 2;

/// The longest a header can be: fixed fields, hostname, CRC.
pub const HEADER_MAX_BYTES: usize = FIXED_BYTES + HOSTNAME_MAX_BYTES + 4;

impl LogHeader {
    /// Encodes with the given magic; the result's length is where records
    /// (or data) begin.
    pub fn encode(&self, magic: &[u8; 8]) -> Vec<u8> {
        let hostname = &self.hostname.as_bytes()[..self.hostname.len().min(HOSTNAME_MAX_BYTES)];
        let length = FIXED_BYTES + hostname.len() + 4;
        let mut out = Vec::with_capacity(length);
        out.extend_from_slice(magic);
        put_u16(&mut out, super::FORMAT_VERSION);
        put_u16(&mut out, length as u16);
        put_u32(&mut out, 0);
        put_u64(&mut out, self.created_stamp);
        put_u64(&mut out, self.writer);
        put_u32(&mut out, self.pid);
        put_u16(&mut out, hostname.len() as u16);
        out.extend_from_slice(hostname);
        let crc = crc32c::crc32c(&out);
        put_u32(&mut out, crc);
        debug_assert_eq!(out.len(), length);
        out
    }

    /// Decodes a header at the start of `bytes`; returns it and its length.
    pub fn decode(bytes: &[u8], magic: &[u8; 8], what: &'static str) -> Result<(LogHeader, usize)> {
        let mut reader = Reader::new(bytes, what);
        let found = reader.take(8)?;
        if found != magic {
            return Err(Error::corrupt(format!("{what}: bad magic {found:02x?}")));
        }
        let version = reader.u16()?;
        if version > super::FORMAT_VERSION {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!("{what}: format version {version} is newer than this plfs reads"),
            ));
        }
        let length = usize::from(reader.u16()?);
        let _flags = reader.u32()?;
        let created_stamp = reader.u64()?;
        let writer = reader.u64()?;
        let pid = reader.u32()?;
        let hostname_length = usize::from(reader.u16()?);
        let hostname = reader.take(hostname_length)?;
        if length != FIXED_BYTES + hostname_length + 4 {
            return Err(Error::corrupt(format!("{what}: header length {length} is inconsistent")));
        }
        let crc_offset = reader.position();
        let stored = reader.u32()?;
        if stored != crc32c::crc32c(&bytes[..crc_offset]) {
            return Err(Error::corrupt(format!("{what}: header checksum mismatch")));
        }
        let hostname = String::from_utf8(hostname.to_vec())
            .map_err(|_| Error::corrupt(format!("{what}: hostname is not UTF-8")))?;
        Ok((LogHeader { created_stamp, writer, pid, hostname }, length))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_reports_length() {
        let header = LogHeader {
            created_stamp: 0x1122334455667788,
            writer: 7,
            pid: 4242,
            hostname: "node-17.cluster.example".into(),
        };
        let mut bytes = header.encode(DATA_MAGIC);
        let encoded_length = bytes.len();
        bytes.extend_from_slice(b"payload");
        let (decoded, length) = LogHeader::decode(&bytes, DATA_MAGIC, "data log").unwrap();
        assert_eq!(decoded, header);
        assert_eq!(length, encoded_length);
        assert!(LogHeader::decode(&bytes, INDEX_MAGIC, "index log").is_err());
    }

    #[test]
    fn damaged_header_is_rejected() {
        let header = LogHeader { created_stamp: 1, writer: 2, pid: 3, hostname: "h".into() };
        let bytes = header.encode(INDEX_MAGIC);
        for index in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[index] ^= 0x01;
            assert!(LogHeader::decode(&damaged, INDEX_MAGIC, "index log").is_err(), "byte {index}");
        }
    }
}
