//! Index log records. An index log is a
//! [`LogHeader`](super::data_log::LogHeader) followed by frames of these
//! records ([`super::frame`]: checksummed batches, torn tails tolerated).

use super::codec::{Reader, put_u16, put_u32, put_u64};
use super::data_log::INDEX_MAGIC;
pub use super::frame::FrameBuilder;
use super::frame::{self, DecodedLog, FramedRecord, decode_log};
use crate::error::{Error, ErrorKind, Result};

pub const KIND_WRITE: u8 = 1;
pub const KIND_TRUNCATE: u8 = 2;
pub const KIND_PATTERN: u8 = 3;
const RECORD_HEADER_BYTES: usize = 4;
const WRITE_BODY_BYTES: u16 = 56;
const TRUNCATE_BODY_BYTES: u16 = 32;
const PATTERN_BODY_BYTES: u16 = 80;
pub const WRITE_RECORD_BYTES: usize = RECORD_HEADER_BYTES + WRITE_BODY_BYTES as usize;

/// Bytes `[logical, logical + length)` of the file were appended to the
/// writer's data log at `physical`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteRecord {
    pub logical: u64,
    pub length: u64,
    pub physical: u64,
    pub stamp: u64,
    pub sequence: u64,
    pub writer: u64,
    /// CRC32C of the data bytes, checked by `plfs recover --verify`.
    pub data_crc: u32,
}

/// The file was truncated (shrunk or grown) to `size` at `stamp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TruncateRecord {
    pub size: u64,
    pub stamp: u64,
    pub sequence: u64,
    pub writer: u64,
}

/// `count` writes of `length` bytes each, the k-th at logical
/// `logical + k * stride`, appended back to back to the data log from
/// `physical` (so the k-th sits at `physical + k * length`), with sequences
/// `sequence_first + k`. Stands for `count` write records; see FORMAT.md for
/// how its stamps order it against other writers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PatternRecord {
    pub logical: u64,
    pub length: u64,
    pub stride: u64,
    pub count: u64,
    pub physical: u64,
    pub stamp_first: u64,
    pub stamp_last: u64,
    pub sequence_first: u64,
    pub writer: u64,
    /// CRC32C over the writes' data CRC32Cs (each little-endian, in
    /// order): checkable block by block, and one 4-byte step per write to
    /// build rather than a CRC combine.
    pub data_crc: u32,
}

impl PatternRecord {
    /// One past the last logical byte written.
    pub fn end(&self) -> u64 {
        self.logical + (self.count - 1) * self.stride + self.length
    }

    /// Data bytes the pattern stands for.
    pub fn bytes(&self) -> u64 {
        self.count * self.length
    }

    /// Checks what a pattern must satisfy for its arithmetic to hold.
    fn validate(&self) -> Result<()> {
        let fits = self.count >= 2
            && self.length > 0
            && self.stride >= self.length
            && (self.count - 1)
                .checked_mul(self.stride)
                .and_then(|span| span.checked_add(self.length))
                .and_then(|span| span.checked_add(self.logical))
                .is_some_and(|end| end <= i64::MAX as u64)
            && self.count.checked_mul(self.length).and_then(|n| n.checked_add(self.physical)).is_some()
            && self.stamp_first <= self.stamp_last;
        if fits {
            Ok(())
        } else {
            Err(Error::corrupt(format!(
                "pattern record (logical {}, length {}, stride {}, count {}) is not a valid pattern",
                self.logical, self.length, self.stride, self.count
            )))
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    Write(WriteRecord),
    Truncate(TruncateRecord),
    Pattern(PatternRecord),
}

impl Record {
    /// The record's stamp; a pattern's is its last write's.
    pub fn stamp(&self) -> u64 {
        match self {
            Record::Write(record) => record.stamp,
            Record::Truncate(record) => record.stamp,
            Record::Pattern(record) => record.stamp_last,
        }
    }

    /// Total order used by the merge: stamp, then writer, then sequence. A
    /// pattern takes its place as a whole at its last stamp.
    pub fn order_key(&self) -> (u64, u64, u64) {
        match self {
            Record::Write(r) => (r.stamp, r.writer, r.sequence),
            Record::Truncate(r) => (r.stamp, r.writer, r.sequence),
            Record::Pattern(r) => (r.stamp_last, r.writer, r.sequence_first),
        }
    }

    /// Whether the record puts data in the file.
    pub fn writes_data(&self) -> bool {
        matches!(self, Record::Write(_) | Record::Pattern(_))
    }

    fn encode_into(&self, out: &mut Vec<u8>) {
        match self {
            Record::Write(r) => {
                out.push(KIND_WRITE);
                out.push(0);
                put_u16(out, WRITE_BODY_BYTES);
                put_u64(out, r.logical);
                put_u64(out, r.length);
                put_u64(out, r.physical);
                put_u64(out, r.stamp);
                put_u64(out, r.sequence);
                put_u64(out, r.writer);
                put_u32(out, r.data_crc);
                put_u32(out, 0);
            }
            Record::Truncate(r) => {
                out.push(KIND_TRUNCATE);
                out.push(0);
                put_u16(out, TRUNCATE_BODY_BYTES);
                put_u64(out, r.size);
                put_u64(out, r.stamp);
                put_u64(out, r.sequence);
                put_u64(out, r.writer);
            }
            Record::Pattern(r) => {
                out.push(KIND_PATTERN);
                out.push(0);
                put_u16(out, PATTERN_BODY_BYTES);
                put_u64(out, r.logical);
                put_u64(out, r.length);
                put_u64(out, r.stride);
                put_u64(out, r.count);
                put_u64(out, r.physical);
                put_u64(out, r.stamp_first);
                put_u64(out, r.stamp_last);
                put_u64(out, r.sequence_first);
                put_u64(out, r.writer);
                put_u32(out, r.data_crc);
                put_u32(out, 0);
            }
        }
    }

    fn decode_from(reader: &mut Reader<'_>) -> Result<Record> {
        let kind = reader.u8()?;
        let _flags = reader.u8()?;
        let body_length = reader.u16()?;
        let body = reader.take(usize::from(body_length))?;
        let mut body = Reader::new(body, "index record");
        match (kind, body_length) {
            (KIND_WRITE, WRITE_BODY_BYTES) => Ok(Record::Write(WriteRecord {
                logical: body.u64()?,
                length: body.u64()?,
                physical: body.u64()?,
                stamp: body.u64()?,
                sequence: body.u64()?,
                writer: body.u64()?,
                data_crc: body.u32()?,
            })),
            (KIND_TRUNCATE, TRUNCATE_BODY_BYTES) => Ok(Record::Truncate(TruncateRecord {
                size: body.u64()?,
                stamp: body.u64()?,
                sequence: body.u64()?,
                writer: body.u64()?,
            })),
            (KIND_PATTERN, PATTERN_BODY_BYTES) => {
                let pattern = PatternRecord {
                    logical: body.u64()?,
                    length: body.u64()?,
                    stride: body.u64()?,
                    count: body.u64()?,
                    physical: body.u64()?,
                    stamp_first: body.u64()?,
                    stamp_last: body.u64()?,
                    sequence_first: body.u64()?,
                    writer: body.u64()?,
                    data_crc: body.u32()?,
                };
                pattern.validate()?;
                Ok(Record::Pattern(pattern))
            }
            (KIND_WRITE | KIND_TRUNCATE | KIND_PATTERN, _) => {
                Err(Error::corrupt(format!("record kind {kind} has body length {body_length}")))
            }
            _ => Err(Error::new(
                ErrorKind::Unsupported,
                format!("record kind {kind} is unknown to this plfs (written by a newer one?)"),
            )),
        }
    }
}

impl FramedRecord for Record {
    const WHAT: &'static str = "index log";

    fn encode_into(&self, out: &mut Vec<u8>) {
        Record::encode_into(self, out);
    }

    fn decode_from(reader: &mut Reader<'_>) -> Result<Record> {
        Record::decode_from(reader)
    }
}

/// A decoded index log.
pub type DecodedIndexLog = DecodedLog<Record>;

/// Decodes a whole index log (frames after its header). A log shorter
/// than its header (a writer that crashed while creating it) decodes as
/// empty with a torn tail.
pub fn decode(bytes: &[u8]) -> Result<DecodedIndexLog> {
    decode_log(bytes, INDEX_MAGIC)
}

/// Index records as frames without a log header (a collective open's message).
pub fn encode_frames(records: &[Record]) -> Vec<u8> {
    frame::encode_frames(records)
}

/// Decodes [`encode_frames`]' output; every frame must check out.
pub fn decode_frames(bytes: &[u8]) -> Result<Vec<Record>> {
    frame::decode_frames(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::data_log::LogHeader;
    use crate::format::frame::{FRAME_HEADER_BYTES, frame_crc};
    use proptest::prelude::*;

    fn header() -> LogHeader {
        LogHeader { created_stamp: 10, writer: 3, pid: 99, hostname: "n1".into() }
    }

    fn write(logical: u64, stamp: u64) -> Record {
        Record::Write(WriteRecord {
            logical,
            length: 47001,
            physical: logical / 4,
            stamp,
            sequence: stamp,
            writer: 3,
            data_crc: 0xdead_beef,
        })
    }

    fn log_with_frames(frames: &[Vec<Record>]) -> (Vec<u8>, Vec<usize>) {
        let mut bytes = header().encode(INDEX_MAGIC);
        let mut ends = Vec::new();
        let mut builder = FrameBuilder::new();
        for frame in frames {
            for record in frame {
                builder.push(record);
            }
            bytes.extend_from_slice(builder.finish().unwrap());
            builder.clear();
            ends.push(bytes.len());
        }
        (bytes, ends)
    }

    #[test]
    fn golden_write_record_layout() {
        let mut builder = FrameBuilder::new();
        builder.push(&write(0x0102, 5));
        let frame = builder.finish().unwrap().to_vec();
        assert_eq!(frame.len(), FRAME_HEADER_BYTES + WRITE_RECORD_BYTES);
        assert_eq!(&frame[0..4], b"PFRM");
        assert_eq!(&frame[4..8], &(WRITE_RECORD_BYTES as u32).to_le_bytes());
        assert_eq!(&frame[8..12], &1u32.to_le_bytes());
        let record = &frame[FRAME_HEADER_BYTES..];
        assert_eq!(&record[0..4], &[KIND_WRITE, 0, 56, 0]);
        assert_eq!(&record[4..12], &0x0102u64.to_le_bytes());
        assert_eq!(&record[12..20], &47001u64.to_le_bytes());
        assert_eq!(&record[52..56], &0xdead_beefu32.to_le_bytes());
    }

    #[test]
    fn torn_tail_is_ignored_and_reported() {
        let (bytes, ends) = log_with_frames(&[vec![write(0, 1)], vec![write(1, 2), write(2, 3)]]);
        for cut in ends[0]..ends[1] {
            let decoded = decode(&bytes[..cut]).unwrap();
            assert_eq!(decoded.records, vec![write(0, 1)], "cut at {cut}");
            assert_eq!(decoded.valid_length, ends[0] as u64);
            assert_eq!(decoded.torn_tail.is_some(), cut > ends[0]);
        }
        assert_eq!(decode(&bytes).unwrap().records.len(), 3);
    }

    #[test]
    fn log_cut_inside_its_header_is_empty() {
        let bytes = header().encode(INDEX_MAGIC);
        for cut in 0..bytes.len() {
            let decoded = decode(&bytes[..cut]).unwrap();
            assert!(decoded.header.is_none() && decoded.records.is_empty(), "cut {cut}");
        }
    }

    #[test]
    fn damage_before_a_valid_frame_is_an_error_naming_the_offset() {
        let (mut bytes, ends) = log_with_frames(&[vec![write(0, 1)], vec![write(1, 2)]]);
        let first_frame_start = ends[0] - FRAME_HEADER_BYTES - WRITE_RECORD_BYTES;
        bytes[first_frame_start + FRAME_HEADER_BYTES + 5] ^= 0xff;
        let error = decode(&bytes).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Corrupt);
        assert!(error.to_string().contains(&format!("offset {first_frame_start}")), "{error}");
    }

    #[test]
    fn unknown_record_kinds_are_refused() {
        let (mut bytes, ends) = log_with_frames(&[vec![write(0, 1)]]);
        let record_start = ends[0] - WRITE_RECORD_BYTES;
        bytes[record_start] = 42;
        let frame_start = record_start - FRAME_HEADER_BYTES;
        let crc = frame_crc(&bytes[frame_start..]);
        bytes[frame_start + 12..frame_start + 16].copy_from_slice(&crc.to_le_bytes());
        let error = decode(&bytes).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Unsupported);
        assert!(error.to_string().contains("record kind 42"), "{error}");
    }

    proptest! {
        #[test]
        fn frames_round_trip(
            frames in proptest::collection::vec(
                proptest::collection::vec((any::<u64>(), any::<u64>(), any::<bool>()), 1..20), 0..8)
        ) {
            let frames: Vec<Vec<Record>> = frames.into_iter().map(|frame| frame.into_iter().map(
                |(a, b, truncate)| if truncate {
                    Record::Truncate(TruncateRecord { size: a, stamp: b, sequence: 1, writer: 2 })
                } else {
                    Record::Write(WriteRecord { logical: a, length: b, physical: a ^ b,
                        stamp: b, sequence: a, writer: 9, data_crc: 1 })
                }).collect()).collect();
            let (bytes, _) = log_with_frames(&frames);
            let decoded = decode(&bytes).unwrap();
            let expected: Vec<Record> = frames.concat();
            prop_assert_eq!(decoded.records, expected);
            prop_assert_eq!(decoded.torn_tail, None);
            prop_assert_eq!(decoded.header, Some(header()));
        }
    }
}
