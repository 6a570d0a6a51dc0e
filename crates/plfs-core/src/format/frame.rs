//! Frames: how every log of records is written (index logs, small-file
//! name and index logs). A frame holds a batch of records and one CRC32C
//! over its header and payload, so a write torn by a crash is detected. A
//! bad frame with no valid frame after it is a torn tail and is ignored
//! (reported, never read); a bad frame followed by a valid one is
//! corruption and an error naming the offset.

use super::codec::Reader;
use super::data_log::LogHeader;
use crate::error::{Error, Result};

pub const FRAME_MAGIC: u32 = u32::from_le_bytes(*b"PFRM");
pub const FRAME_HEADER_BYTES: usize = 16;
/// A frame is never larger than this, so a corrupt length cannot make a
/// reader allocate or skip without bound.
pub const FRAME_PAYLOAD_MAX_BYTES: usize = 16 << 20;

/// A record that travels in frames.
pub trait FramedRecord: Sized {
    /// Names the log kind in errors, e.g. "name log".
    const WHAT: &'static str;
    fn encode_into(&self, out: &mut Vec<u8>);
    fn decode_from(reader: &mut Reader<'_>) -> Result<Self>;
}

/// Accumulates records into one frame; the buffer is reused across frames.
#[derive(Debug, Default)]
pub struct FrameBuilder {
    buffer: Vec<u8>,
    records: u32,
}

impl FrameBuilder {
    pub fn new() -> FrameBuilder {
        FrameBuilder::default()
    }

    pub fn push<R: FramedRecord>(&mut self, record: &R) {
        if self.buffer.is_empty() {
            self.buffer.resize(FRAME_HEADER_BYTES, 0);
        }
        record.encode_into(&mut self.buffer);
        self.records += 1;
    }

    /// Bytes the finished frame will occupy.
    pub fn len(&self) -> usize {
        self.buffer.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Seals the frame; call [`FrameBuilder::clear`] once it is appended.
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

pub(crate) fn frame_crc(frame: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&frame[..12]);
    crc32c::crc32c_append(crc, &frame[FRAME_HEADER_BYTES..])
}

/// Where a torn tail begins and how many bytes it spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TornTail {
    pub offset: u64,
    pub length: u64,
}

/// A decoded log of framed records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedLog<R> {
    /// None when the log was cut short inside its header.
    pub header: Option<LogHeader>,
    pub records: Vec<R>,
    /// Bytes up to the end of the last valid frame.
    pub valid_length: u64,
    pub torn_tail: Option<TornTail>,
}

/// Decodes a whole log: its header, then frames. A log shorter than its
/// header (a writer that crashed while creating it) decodes as empty with a
/// torn tail. Errors name the frame's offset; the caller adds the log's path.
pub fn decode_log<R: FramedRecord>(bytes: &[u8], magic: &[u8; 8]) -> Result<DecodedLog<R>> {
    let (header, header_length) = match LogHeader::decode(bytes, magic, R::WHAT) {
        Ok(found) => found,
        Err(_) if is_truncated_header(bytes, magic) => {
            let torn_tail = (!bytes.is_empty()).then_some(TornTail { offset: 0, length: bytes.len() as u64 });
            return Ok(DecodedLog { header: None, records: Vec::new(), valid_length: 0, torn_tail });
        }
        Err(error) => return Err(error),
    };
    let mut records = Vec::new();
    let mut offset = header_length;
    while offset < bytes.len() {
        let payload_length = match check_frame(&bytes[offset..]) {
            Ok(length) => length,
            Err(error) if valid_frame_follows(bytes, offset + 1) => {
                return Err(error.context(format!("{} frame at offset {offset}", R::WHAT)));
            }
            Err(_) => {
                let torn = TornTail { offset: offset as u64, length: (bytes.len() - offset) as u64 };
                let valid_length = offset as u64;
                return Ok(DecodedLog { header: Some(header), records, valid_length, torn_tail: Some(torn) });
            }
        };
        // The checksum holds, so a record that does not decode was written
        // that way: refuse it rather than guess.
        decode_records(&bytes[offset..], payload_length, &mut records)
            .map_err(|error| error.context(format!("{} frame at offset {offset}", R::WHAT)))?;
        offset += FRAME_HEADER_BYTES + payload_length;
    }
    Ok(DecodedLog { header: Some(header), records, valid_length: offset as u64, torn_tail: None })
}

/// Whether `bytes` could be a header cut short by a crash.
pub fn is_truncated_header(bytes: &[u8], magic: &[u8; 8]) -> bool {
    bytes.len() < 64 && magic.starts_with(&bytes[..bytes.len().min(8)])
}

fn decode_records<R: FramedRecord>(bytes: &[u8], payload_length: usize, records: &mut Vec<R>) -> Result<()> {
    let count = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    let mut reader = Reader::new(&bytes[FRAME_HEADER_BYTES..FRAME_HEADER_BYTES + payload_length], R::WHAT);
    for _ in 0..count {
        records.push(R::decode_from(&mut reader)?);
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

/// Whether any checksum-valid frame starts at or after `from`: if so, a bad
/// frame before it is damage in the middle of the log, not a torn tail.
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

/// Encodes records as a run of frames with no log header (how index records
/// travel between ranks in a collective open). Frames stay under the
/// payload bound however many records there are.
pub fn encode_frames<R: FramedRecord>(records: &[R]) -> Vec<u8> {
    let mut out = Vec::with_capacity(FRAME_HEADER_BYTES + records.len() * 64);
    let mut frame = FrameBuilder::default();
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
pub fn decode_frames<R: FramedRecord>(bytes: &[u8]) -> Result<Vec<R>> {
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
