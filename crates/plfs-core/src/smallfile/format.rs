//! The small-file logs' encodings (docs/FORMAT.md §11).
//!
//! Each writer session has a name log, an index log and a data log. All three
//! start with the file containers' [`LogHeader`](crate::format::data_log::LogHeader) under their own magic. Name
//! and index logs continue with frames laid out exactly like index-log frames
//! (FORMAT.md §5.1): a bad frame with no valid frame after it is a torn tail,
//! ignored and reported; a bad frame followed by a valid one is corruption,
//! an error naming the log and the frame's offset.

use crate::error::{Error, ErrorKind, Result};
use crate::format::codec::{Reader, put_u16, put_u32, put_u64};
pub use crate::format::frame::{DecodedLog, FrameBuilder, FramedRecord, decode_log};
use crate::store::path::NAME_MAX_BYTES;

pub const NAME_LOG_MAGIC: &[u8; 8] = b"PLFSSNAM";
pub const INDEX_LOG_MAGIC: &[u8; 8] = b"PLFSSIDX";
pub const DATA_LOG_MAGIC: &[u8; 8] = b"PLFSSDAT";

pub const KIND_CREATE: u8 = 1;
pub const KIND_OPEN: u8 = 2;
pub const KIND_DELETE: u8 = 3;
pub const KIND_RENAME: u8 = 4;
pub const KIND_UTIME: u8 = 5;
pub const KIND_TRUNCATE: u8 = 6;
pub const KIND_OPEN_OR_CREATE: u8 = 7;
pub const KIND_WRITE: u8 = 1;
const WRITE_BODY_BYTES: u16 = 48;

/// One record of a name log. `fid` numbers a name within one log so index
/// entries can refer to it in 8 bytes; it means nothing across logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameRecord {
    /// `name` is a new empty file (replacing any file of that name), and
    /// `fid` stands for `name` in this log.
    Create {
        stamp: u64,
        fid: u64,
        name: String,
    },
    /// `fid` stands for `name` in this log; the namespace is unchanged.
    Open {
        stamp: u64,
        fid: u64,
        name: String,
    },
    Delete {
        stamp: u64,
        name: String,
    },
    /// Moves the file `from` to `to`, replacing any file named `to`.
    Rename {
        stamp: u64,
        from: String,
        to: String,
    },
    /// Sets the file's access and modification times (ns since the epoch).
    Utime {
        stamp: u64,
        atime_ns: u64,
        mtime_ns: u64,
        name: String,
    },
    Truncate {
        stamp: u64,
        size: u64,
        name: String,
    },
    /// `fid` stands for the file `name` denotes, or, if it denotes none, for
    /// a new empty file of that name: an open with `O_CREAT` and without
    /// `O_TRUNC` of a name this process did not know. Another process may
    /// have made the file meanwhile, and its bytes must stay (a create
    /// would empty it at replay).
    OpenOrCreate {
        stamp: u64,
        fid: u64,
        name: String,
    },
}

impl NameRecord {
    pub fn stamp(&self) -> u64 {
        match self {
            NameRecord::Create { stamp, .. }
            | NameRecord::Open { stamp, .. }
            | NameRecord::Delete { stamp, .. }
            | NameRecord::Rename { stamp, .. }
            | NameRecord::Utime { stamp, .. }
            | NameRecord::Truncate { stamp, .. }
            | NameRecord::OpenOrCreate { stamp, .. } => *stamp,
        }
    }

    fn kind(&self) -> u8 {
        match self {
            NameRecord::Create { .. } => KIND_CREATE,
            NameRecord::Open { .. } => KIND_OPEN,
            NameRecord::Delete { .. } => KIND_DELETE,
            NameRecord::Rename { .. } => KIND_RENAME,
            NameRecord::Utime { .. } => KIND_UTIME,
            NameRecord::Truncate { .. } => KIND_TRUNCATE,
            NameRecord::OpenOrCreate { .. } => KIND_OPEN_OR_CREATE,
        }
    }
}

/// Bytes `[logical, logical + length)` of the file `fid` names in this
/// session's name log were appended to its data log at `physical`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    pub fid: u64,
    pub logical: u64,
    pub length: u64,
    pub physical: u64,
    pub stamp: u64,
    /// CRC32C of the data bytes.
    pub data_crc: u32,
}

fn put_name(out: &mut Vec<u8>, name: &str) {
    assert!(name.len() <= NAME_MAX_BYTES, "small-file names are validated path components");
    put_u16(out, name.len() as u16);
    out.extend_from_slice(name.as_bytes());
}

fn take_name(reader: &mut Reader<'_>) -> Result<String> {
    let length = usize::from(reader.u16()?);
    if length == 0 || length > NAME_MAX_BYTES {
        return Err(Error::corrupt(format!("name of {length} bytes is out of range")));
    }
    String::from_utf8(reader.take(length)?.to_vec()).map_err(|_| Error::corrupt("name is not UTF-8"))
}

impl FramedRecord for NameRecord {
    const WHAT: &'static str = "name log";

    fn encode_into(&self, out: &mut Vec<u8>) {
        out.push(self.kind());
        out.push(0);
        let length_at = out.len();
        put_u16(out, 0);
        put_u64(out, self.stamp());
        match self {
            NameRecord::Create { fid, name, .. }
            | NameRecord::Open { fid, name, .. }
            | NameRecord::OpenOrCreate { fid, name, .. } => {
                put_u64(out, *fid);
                put_name(out, name);
            }
            NameRecord::Delete { name, .. } => put_name(out, name),
            NameRecord::Rename { from, to, .. } => {
                put_name(out, from);
                put_name(out, to);
            }
            NameRecord::Utime { atime_ns, mtime_ns, name, .. } => {
                put_u64(out, *atime_ns);
                put_u64(out, *mtime_ns);
                put_name(out, name);
            }
            NameRecord::Truncate { size, name, .. } => {
                put_u64(out, *size);
                put_name(out, name);
            }
        }
        let body_length = out.len() - length_at - 2;
        out[length_at..length_at + 2].copy_from_slice(&(body_length as u16).to_le_bytes());
    }

    fn decode_from(reader: &mut Reader<'_>) -> Result<NameRecord> {
        let kind = reader.u8()?;
        let _flags = reader.u8()?;
        let body_length = reader.u16()?;
        let mut body = Reader::new(reader.take(usize::from(body_length))?, "name record");
        let stamp = body.u64()?;
        let record = match kind {
            KIND_CREATE => NameRecord::Create { stamp, fid: body.u64()?, name: take_name(&mut body)? },
            KIND_OPEN => NameRecord::Open { stamp, fid: body.u64()?, name: take_name(&mut body)? },
            KIND_DELETE => NameRecord::Delete { stamp, name: take_name(&mut body)? },
            KIND_RENAME => {
                NameRecord::Rename { stamp, from: take_name(&mut body)?, to: take_name(&mut body)? }
            }
            KIND_UTIME => NameRecord::Utime {
                stamp,
                atime_ns: body.u64()?,
                mtime_ns: body.u64()?,
                name: take_name(&mut body)?,
            },
            KIND_TRUNCATE => NameRecord::Truncate { stamp, size: body.u64()?, name: take_name(&mut body)? },
            KIND_OPEN_OR_CREATE => {
                NameRecord::OpenOrCreate { stamp, fid: body.u64()?, name: take_name(&mut body)? }
            }
            _ => {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    format!("name record kind {kind} is unknown to this plfs (written by a newer one?)"),
                ));
            }
        };
        if body.remaining() != 0 {
            return Err(Error::corrupt(format!("name record kind {kind} has body length {body_length}")));
        }
        Ok(record)
    }
}

impl FramedRecord for IndexEntry {
    const WHAT: &'static str = "small-file index log";

    fn encode_into(&self, out: &mut Vec<u8>) {
        out.push(KIND_WRITE);
        out.push(0);
        put_u16(out, WRITE_BODY_BYTES);
        put_u64(out, self.fid);
        put_u64(out, self.logical);
        put_u64(out, self.length);
        put_u64(out, self.physical);
        put_u64(out, self.stamp);
        put_u32(out, self.data_crc);
        put_u32(out, 0);
    }

    fn decode_from(reader: &mut Reader<'_>) -> Result<IndexEntry> {
        let kind = reader.u8()?;
        let _flags = reader.u8()?;
        let body_length = reader.u16()?;
        if kind != KIND_WRITE {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!("small-file index record kind {kind} is unknown to this plfs"),
            ));
        }
        if body_length != WRITE_BODY_BYTES {
            return Err(Error::corrupt(format!("write record has body length {body_length}")));
        }
        let mut body = Reader::new(reader.take(usize::from(body_length))?, "index entry");
        let entry = IndexEntry {
            fid: body.u64()?,
            logical: body.u64()?,
            length: body.u64()?,
            physical: body.u64()?,
            stamp: body.u64()?,
            data_crc: body.u32()?,
        };
        if entry.logical.checked_add(entry.length).is_none_or(|end| end > i64::MAX as u64)
            || entry.physical.checked_add(entry.length).is_none()
        {
            return Err(Error::corrupt(format!(
                "index entry (logical {}, length {}) is out of range",
                entry.logical, entry.length
            )));
        }
        Ok(entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::data_log::LogHeader;
    use crate::format::frame::{FRAME_HEADER_BYTES, TornTail, frame_crc};
    use proptest::prelude::*;

    const WRITE_RECORD_BYTES: usize = 4 + WRITE_BODY_BYTES as usize;

    fn header() -> LogHeader {
        LogHeader { created_stamp: 10, writer: 3, pid: 99, hostname: "n1".into() }
    }

    fn frame_of<R: FramedRecord>(records: &[R]) -> Vec<u8> {
        let mut builder = FrameBuilder::default();
        for record in records {
            builder.push(record);
        }
        builder.finish().unwrap().to_vec()
    }

    /// The record bytes of a one-record frame, after checking the frame.
    fn record_bytes<R: FramedRecord>(record: R) -> Vec<u8> {
        let frame = frame_of(&[record]);
        assert_eq!(&frame[0..4], b"PFRM");
        assert_eq!(&frame[4..8], &((frame.len() - FRAME_HEADER_BYTES) as u32).to_le_bytes());
        assert_eq!(&frame[8..12], &1u32.to_le_bytes());
        assert_eq!(&frame[12..16], &frame_crc(&frame).to_le_bytes());
        frame[FRAME_HEADER_BYTES..].to_vec()
    }

    fn create(stamp: u64, fid: u64, name: &str) -> NameRecord {
        NameRecord::Create { stamp, fid, name: name.into() }
    }

    #[test]
    fn golden_name_records() {
        let stamp = [0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11];
        let cases: Vec<(NameRecord, Vec<u8>)> = vec![
            (
                create(0x1122334455667788, 5, "ab"),
                [&[1, 0, 20, 0][..], &stamp, &[5, 0, 0, 0, 0, 0, 0, 0], &[2, 0], b"ab"].concat(),
            ),
            (
                NameRecord::Open { stamp: 0x1122334455667788, fid: 0x0102, name: "x".into() },
                [&[2, 0, 19, 0][..], &stamp, &[2, 1, 0, 0, 0, 0, 0, 0], &[1, 0], b"x"].concat(),
            ),
            (
                NameRecord::Delete { stamp: 0x1122334455667788, name: "abc".into() },
                [&[3, 0, 13, 0][..], &stamp, &[3, 0], b"abc"].concat(),
            ),
            (
                NameRecord::Rename { stamp: 0x1122334455667788, from: "a".into(), to: "bc".into() },
                [&[4, 0, 15, 0][..], &stamp, &[1, 0], b"a", &[2, 0], b"bc"].concat(),
            ),
            (
                NameRecord::Utime { stamp: 0x1122334455667788, atime_ns: 1, mtime_ns: 2, name: "f".into() },
                [
                    &[5, 0, 27, 0][..],
                    &stamp,
                    &[1, 0, 0, 0, 0, 0, 0, 0],
                    &[2, 0, 0, 0, 0, 0, 0, 0],
                    &[1, 0],
                    b"f",
                ]
                .concat(),
            ),
            (
                NameRecord::Truncate { stamp: 0x1122334455667788, size: 0x0100, name: "f".into() },
                [&[6, 0, 19, 0][..], &stamp, &[0, 1, 0, 0, 0, 0, 0, 0], &[1, 0], b"f"].concat(),
            ),
            (
                NameRecord::OpenOrCreate { stamp: 0x1122334455667788, fid: 3, name: "log".into() },
                [&[7, 0, 21, 0][..], &stamp, &[3, 0, 0, 0, 0, 0, 0, 0], &[3, 0], b"log"].concat(),
            ),
        ];
        for (record, golden) in cases {
            assert_eq!(record_bytes(record.clone()), golden, "{record:?}");
            let mut reader = Reader::new(&golden, "test");
            assert_eq!(NameRecord::decode_from(&mut reader).unwrap(), record);
            assert_eq!(reader.remaining(), 0);
        }
    }

    #[test]
    fn golden_index_entry() {
        let entry = IndexEntry {
            fid: 1,
            logical: 2,
            length: 3,
            physical: 0x40,
            stamp: 0x0a0b,
            data_crc: 0xdead_beef,
        };
        let golden = [
            &[1, 0, 48, 0][..],
            &1u64.to_le_bytes(),
            &2u64.to_le_bytes(),
            &3u64.to_le_bytes(),
            &0x40u64.to_le_bytes(),
            &0x0a0bu64.to_le_bytes(),
            &[0xef, 0xbe, 0xad, 0xde],
            &[0, 0, 0, 0],
        ]
        .concat();
        assert_eq!(golden.len(), WRITE_RECORD_BYTES);
        assert_eq!(record_bytes(entry), golden);
    }

    #[test]
    fn golden_log_headers() {
        for magic in [NAME_LOG_MAGIC, INDEX_LOG_MAGIC, DATA_LOG_MAGIC] {
            let bytes = header().encode(magic);
            assert_eq!(&bytes[..8], magic);
            assert_eq!(&bytes[8..10], &crate::format::FORMAT_VERSION.to_le_bytes());
            assert_eq!(bytes.len(), 38 + 2 + 4);
        }
    }

    fn log_with_frames(frames: &[Vec<NameRecord>]) -> (Vec<u8>, Vec<usize>) {
        let mut bytes = header().encode(NAME_LOG_MAGIC);
        let mut ends = Vec::new();
        for frame in frames {
            bytes.extend_from_slice(&frame_of(frame));
            ends.push(bytes.len());
        }
        (bytes, ends)
    }

    #[test]
    fn torn_tail_is_ignored_and_reported() {
        let (bytes, ends) =
            log_with_frames(&[vec![create(1, 0, "a")], vec![create(2, 1, "b"), create(3, 2, "c")]]);
        for cut in ends[0]..ends[1] {
            let decoded: DecodedLog<NameRecord> = decode_log(&bytes[..cut], NAME_LOG_MAGIC).unwrap();
            assert_eq!(decoded.records, vec![create(1, 0, "a")], "cut at {cut}");
            assert_eq!(decoded.valid_length, ends[0] as u64);
            let expected = (cut > ends[0])
                .then_some(TornTail { offset: ends[0] as u64, length: (cut - ends[0]) as u64 });
            assert_eq!(decoded.torn_tail, expected);
        }
        for cut in 0..ends[0] - 16 - 17 {
            let decoded: DecodedLog<NameRecord> = decode_log(&bytes[..cut], NAME_LOG_MAGIC).unwrap();
            assert!(decoded.records.is_empty(), "cut at {cut}");
        }
    }

    #[test]
    fn a_flipped_byte_before_a_valid_frame_is_an_error_naming_the_offset() {
        let (bytes, ends) = log_with_frames(&[vec![create(1, 0, "a")], vec![create(2, 1, "b")]]);
        let first = header().encode(NAME_LOG_MAGIC).len();
        for index in first..ends[0] {
            let mut damaged = bytes.clone();
            damaged[index] ^= 0x01;
            let error = decode_log::<NameRecord>(&damaged, NAME_LOG_MAGIC).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Corrupt, "byte {index}");
            assert!(error.to_string().contains(&format!("name log frame at offset {first}")), "{error}");
        }
    }

    #[test]
    fn unknown_kinds_are_refused_by_name() {
        let mut frame = frame_of(&[create(1, 0, "a")]);
        frame[FRAME_HEADER_BYTES] = 42;
        let crc = frame_crc(&frame);
        frame[12..16].copy_from_slice(&crc.to_le_bytes());
        let mut bytes = header().encode(NAME_LOG_MAGIC);
        bytes.extend_from_slice(&frame);
        let error = decode_log::<NameRecord>(&bytes, NAME_LOG_MAGIC).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Unsupported);
        assert!(error.to_string().contains("kind 42"), "{error}");
    }

    fn name_strategy() -> impl Strategy<Value = String> {
        "[a-z0-9._-]{1,40}"
    }

    fn record_strategy() -> impl Strategy<Value = NameRecord> {
        (0u8..7, any::<u64>(), any::<u64>(), any::<u64>(), name_strategy(), name_strategy()).prop_map(
            |(kind, stamp, a, b, name, other)| match kind {
                0 => NameRecord::Create { stamp, fid: a, name },
                1 => NameRecord::Open { stamp, fid: a, name },
                2 => NameRecord::Delete { stamp, name },
                3 => NameRecord::Rename { stamp, from: name, to: other },
                4 => NameRecord::Utime { stamp, atime_ns: a, mtime_ns: b, name },
                5 => NameRecord::Truncate { stamp, size: a, name },
                _ => NameRecord::OpenOrCreate { stamp, fid: a, name },
            },
        )
    }

    proptest! {
        #[test]
        fn name_logs_round_trip(frames in proptest::collection::vec(
            proptest::collection::vec(record_strategy(), 1..10), 0..6)) {
            let (bytes, _) = log_with_frames(&frames);
            let decoded: DecodedLog<NameRecord> = decode_log(&bytes, NAME_LOG_MAGIC).unwrap();
            prop_assert_eq!(decoded.records, frames.concat());
            prop_assert_eq!(decoded.torn_tail, None);
            prop_assert_eq!(decoded.header, Some(header()));
        }

        #[test]
        fn index_logs_round_trip(entries in proptest::collection::vec(
            (any::<u64>(), 0u64..1 << 40, 0u64..1 << 40, 0u64..1 << 40, any::<u64>(), any::<u32>()), 0..40)) {
            let entries: Vec<IndexEntry> = entries.into_iter().map(|(fid, logical, length, physical, stamp, data_crc)|
                IndexEntry { fid, logical, length, physical, stamp, data_crc }).collect();
            let mut bytes = header().encode(INDEX_LOG_MAGIC);
            if !entries.is_empty() {
                bytes.extend_from_slice(&frame_of(&entries));
            }
            let decoded: DecodedLog<IndexEntry> = decode_log(&bytes, INDEX_LOG_MAGIC).unwrap();
            prop_assert_eq!(decoded.records, entries);
        }
    }
}
