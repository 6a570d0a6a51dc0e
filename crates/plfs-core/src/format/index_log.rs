//! Index log records and their framing.
//!
//! An index log is a [`LogHeader`] followed by frames. A frame holds a batch
//! of records and one CRC32C over its header and payload, so a write torn by
//! a crash is detected. A bad frame with no valid frame after it is a torn
//! tail and is ignored (reported, never read); a bad frame followed by a
//! valid one is corruption and an error naming the offset.

use super::codec::{Reader, put_u16, put_u32, put_u64};
use super::data_log::{INDEX_MAGIC, LogHeader};
use crate::error::{Error, ErrorKind, Result};

pub const FRAME_MAGIC: u32 = u32::from_le_bytes(*b"PFRM");
pub const FRAME_HEADER_BYTES: usize = 16;
/// A frame is never larger than this, so a corrupt length cannot make a
/// reader allocate or skip without bound.
pub const FRAME_PAYLOAD_MAX_BYTES: usize = 16 << 20;

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

/// Accumulates records into one frame; the caller appends the finished
/// frame to the index log. The buffer is reused across frames.
#[derive(Debug, Default)]
pub struct FrameBuilder {
    buffer: Vec<u8>,
    records: u32,
}

impl FrameBuilder {
    pub fn new() -> FrameBuilder {
        FrameBuilder::default()
    }

    pub fn push(&mut self, record: &Record) {
        if self.buffer.is_empty() {
            self.buffer.resize(FRAME_HEADER_BYTES, 0);
        }
        record.encode_into(&mut self.buffer);
        self.records += 1;
    }

    pub fn record_count(&self) -> u32 {
        self.records
    }

    /// Bytes the finished frame will occupy.
    pub fn len(&self) -> usize {
        self.buffer.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Seals the frame and returns its bytes; call [`FrameBuilder::clear`]
    /// once they are appended. None when no record is buffered.
    pub fn finish(&mut self) -> Option<&[u8]> {
        if self.records == 0 {
            return None;
        }
        let payload_length = (self.buffer.len() - FRAME_HEADER_BYTES) as u32;
        self.buffer[0..4].copy_from_slice(&FRAME_MAGIC.to_le_bytes());
        self.buffer[4..8].copy_from_slice(&payload_length.to_le_bytes());
        self.buffer[8..12].copy_from_slice(&self.records.to_le_bytes());
        let crc = frame_crc(&self.buffer);
        self.buffer[12..16].copy_from_slice(&crc.to_le_bytes());
        Some(&self.buffer)
    }

    pub fn clear(&mut self) {
        self.buffer.clear();
        self.records = 0;
    }
}

fn frame_crc(frame: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&frame[..12]);
    crc32c::crc32c_append(crc, &frame[FRAME_HEADER_BYTES..])
}

/// Encodes records as a run of frames with no log header: how index records
/// travel between ranks in a collective open. Frames stay under the payload
/// bound however many records there are.
pub fn encode_frames(records: &[Record]) -> Vec<u8> {
    let mut out = Vec::with_capacity(FRAME_HEADER_BYTES + records.len() * WRITE_RECORD_BYTES);
    let mut frame = FrameBuilder::new();
    for record in records {
        frame.push(record);
        if frame.len() >= FRAME_PAYLOAD_MAX_BYTES / 2 {
            out.extend_from_slice(frame.finish().expect("has records"));
            frame.clear();
        }
    }
    if let Some(bytes) = frame.finish() {
        out.extend_from_slice(bytes);
    }
    out
}

/// Decodes what [`encode_frames`] produced; every frame must check out
/// (there is no torn tail in a message).
pub fn decode_frames(bytes: &[u8]) -> Result<Vec<Record>> {
    let mut records = Vec::new();
    let mut offset = 0;
    while offset < bytes.len() {
        let payload_length = check_frame(&bytes[offset..])
            .map_err(|error| error.context(format!("frame at offset {offset}")))?;
        decode_records(&bytes[offset..], payload_length, &mut records)
            .map_err(|error| error.context(format!("frame at offset {offset}")))?;
        offset += FRAME_HEADER_BYTES + payload_length;
    }
    Ok(records)
}

/// Where a torn tail begins and how many bytes it spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TornTail {
    pub offset: u64,
    pub length: u64,
}

/// A decoded index log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedIndexLog {
    /// None when the log was cut short inside its header (a writer that
    /// crashed while creating it): such a log holds no records.
    pub header: Option<LogHeader>,
    pub records: Vec<Record>,
    /// Bytes up to the end of the last valid frame.
    pub valid_length: u64,
    pub torn_tail: Option<TornTail>,
}

/// Decodes a whole index log. A log shorter than its header (a writer that
/// crashed while creating it) decodes as empty with a torn tail.
pub fn decode(bytes: &[u8]) -> Result<DecodedIndexLog> {
    let (header, header_length) = match LogHeader::decode(bytes, INDEX_MAGIC, "index log header") {
        Ok(found) => found,
        Err(_) if is_truncated_header(bytes) => {
            let torn_tail = (!bytes.is_empty()).then_some(TornTail { offset: 0, length: bytes.len() as u64 });
            return Ok(DecodedIndexLog { header: None, records: Vec::new(), valid_length: 0, torn_tail });
        }
        Err(error) => return Err(error),
    };
    let mut records = Vec::new();
    let mut offset = header_length;
    while offset < bytes.len() {
        let payload_length = match check_frame(&bytes[offset..]) {
            Ok(length) => length,
            Err(error) => {
                if valid_frame_follows(bytes, offset + 1) {
                    return Err(error.context(format!("frame at offset {offset}")));
                }
                let torn = TornTail { offset: offset as u64, length: (bytes.len() - offset) as u64 };
                return Ok(DecodedIndexLog {
                    header: Some(header),
                    records,
                    valid_length: offset as u64,
                    torn_tail: Some(torn),
                });
            }
        };
        // The checksum holds, so a record that does not decode was written
        // that way: refuse it rather than guess.
        decode_records(&bytes[offset..], payload_length, &mut records)
            .map_err(|error| error.context(format!("frame at offset {offset}")))?;
        offset += FRAME_HEADER_BYTES + payload_length;
    }
    Ok(DecodedIndexLog { header: Some(header), records, valid_length: offset as u64, torn_tail: None })
}

/// Whether `bytes` could be the start of a header cut short by a crash.
pub fn is_truncated_header(bytes: &[u8]) -> bool {
    bytes.len() < 64 && INDEX_MAGIC.starts_with(&bytes[..bytes.len().min(8)])
}

/// Decodes the records of a checked frame at the start of `bytes`.
fn decode_records(bytes: &[u8], payload_length: usize, records: &mut Vec<Record>) -> Result<()> {
    let count = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    let mut reader =
        Reader::new(&bytes[FRAME_HEADER_BYTES..FRAME_HEADER_BYTES + payload_length], "index frame");
    for _ in 0..count {
        records.push(Record::decode_from(&mut reader)?);
    }
    if reader.remaining() != 0 {
        return Err(Error::corrupt(format!(
            "frame declares {count} records but {} payload bytes are left over",
            reader.remaining()
        )));
    }
    Ok(())
}

/// Validates magic, bounds and checksum; returns the payload length.
fn check_frame(bytes: &[u8]) -> Result<usize> {
    if bytes.len() < FRAME_HEADER_BYTES {
        return Err(Error::corrupt("frame header is cut short"));
    }
    let magic = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    if magic != FRAME_MAGIC {
        return Err(Error::corrupt(format!("bad frame magic {magic:08x}")));
    }
    let payload_length = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize;
    if payload_length > FRAME_PAYLOAD_MAX_BYTES {
        return Err(Error::corrupt(format!("frame payload of {payload_length} bytes is too large")));
    }
    if bytes.len() < FRAME_HEADER_BYTES + payload_length {
        return Err(Error::corrupt("frame is cut short"));
    }
    let stored = u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]);
    if stored != frame_crc(&bytes[..FRAME_HEADER_BYTES + payload_length]) {
        return Err(Error::corrupt("frame checksum mismatch"));
    }
    Ok(payload_length)
}

/// Looks for any checksum-valid frame at or after `from`: if one exists, the
/// bad frame before it is damage in the middle of the log, not a torn tail.
fn valid_frame_follows(bytes: &[u8], from: usize) -> bool {
    let magic = FRAME_MAGIC.to_le_bytes();
    let mut position = from;
    while position + FRAME_HEADER_BYTES <= bytes.len() {
        match bytes[position..].windows(4).position(|window| window == magic) {
            None => return false,
            Some(found) => {
                let candidate = position + found;
                if check_frame(&bytes[candidate..]).is_ok() {
                    return true;
                }
                position = candidate + 1;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
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
