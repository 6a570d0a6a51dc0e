//! The flattened (global) index: every index log of a closed file merged
//! once, so a reader opens one object instead of listing hostdirs and
//! reading N index logs. It names the logs it covers; readers use it only
//! while `meta/` shows exactly those logs, all closed.

use super::codec::{Reader, begin_sealed, open_sealed, put_u32, put_u64, seal};
use crate::error::{Error, Result};
use crate::layout::LogId;

pub const MAGIC: &[u8; 8] = b"PLFSGIDX";

/// A data log the extents point into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoveredLog {
    pub id: LogId,
    /// Index of the backend in the mount's backend list.
    pub backend: u32,
    pub hostdir: u32,
}

/// One extent: `length` bytes at `logical` live at `physical` in `logs[log]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GlobalExtent {
    pub logical: u64,
    pub length: u64,
    pub log: u32,
    pub physical: u64,
}

/// Runs sharing a stride (see the index's frozen layer): slot blocks
/// `first_block .. first_block + count` cover `start + b * stride + offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobalGroup {
    pub start: u64,
    pub stride: u64,
    pub end: u64,
    pub slots: Vec<GlobalSlot>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GlobalSlot {
    pub offset: u64,
    pub length: u64,
    pub first_block: u64,
    pub count: u64,
    pub physical: u64,
    pub log: u32,
}

/// The merged index, layer by layer (FORMAT.md §7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobalIndex {
    pub eof: u64,
    pub logs: Vec<CoveredLog>,
    /// Frozen layer: disjoint extents and groups.
    pub extents: Vec<GlobalExtent>,
    pub groups: Vec<GlobalGroup>,
    /// Frozen bytes at or past this were cut by a truncate.
    pub frozen_limit: u64,
    /// Newer extents that shadow the frozen layer.
    pub overlay: Vec<GlobalExtent>,
}

const LOG_BYTES: usize = 32;
const EXTENT_BYTES: usize = 32;
const GROUP_BYTES: usize = 32;
const SLOT_BYTES: usize = 48;

fn put_extent(out: &mut Vec<u8>, extent: &GlobalExtent) {
    put_u64(out, extent.logical);
    put_u64(out, extent.length);
    put_u64(out, extent.physical);
    put_u32(out, extent.log);
    put_u32(out, 0);
}

fn read_extents(reader: &mut Reader<'_>, count: u64, logs: usize) -> Result<Vec<GlobalExtent>> {
    let mut extents = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let (logical, length, physical, log) = (reader.u64()?, reader.u64()?, reader.u64()?, reader.u32()?);
        let _reserved = reader.u32()?;
        check_log(log, logs)?;
        if logical.checked_add(length).is_none_or(|end| end > i64::MAX as u64) {
            return Err(Error::corrupt(format!("global index: extent at {logical} of {length} bytes")));
        }
        extents.push(GlobalExtent { logical, length, log, physical });
    }
    Ok(extents)
}

fn check_log(log: u32, logs: usize) -> Result<()> {
    if log as usize >= logs {
        return Err(Error::corrupt(format!("global index: names log {log} of {logs}")));
    }
    Ok(())
}

impl GlobalIndex {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = begin_sealed(MAGIC);
        let slots: usize = self.groups.iter().map(|group| group.slots.len()).sum();
        out.reserve(
            40 + self.logs.len() * LOG_BYTES
                + (self.extents.len() + self.overlay.len()) * EXTENT_BYTES
                + self.groups.len() * GROUP_BYTES
                + slots * SLOT_BYTES,
        );
        put_u64(&mut out, self.eof);
        put_u32(&mut out, self.logs.len() as u32);
        put_u64(&mut out, self.extents.len() as u64);
        put_u32(&mut out, self.groups.len() as u32);
        put_u64(&mut out, self.overlay.len() as u64);
        put_u64(&mut out, self.frozen_limit);
        for log in &self.logs {
            put_u64(&mut out, log.id.stamp);
            put_u64(&mut out, log.id.writer);
            put_u32(&mut out, log.id.pid);
            put_u32(&mut out, log.id.host);
            put_u32(&mut out, log.backend);
            put_u32(&mut out, log.hostdir);
        }
        for extent in &self.extents {
            put_extent(&mut out, extent);
        }
        for group in &self.groups {
            put_u64(&mut out, group.start);
            put_u64(&mut out, group.stride);
            put_u64(&mut out, group.end);
            put_u32(&mut out, group.slots.len() as u32);
            put_u32(&mut out, 0);
            for slot in &group.slots {
                put_u64(&mut out, slot.offset);
                put_u64(&mut out, slot.length);
                put_u64(&mut out, slot.first_block);
                put_u64(&mut out, slot.count);
                put_u64(&mut out, slot.physical);
                put_u32(&mut out, slot.log);
                put_u32(&mut out, 0);
            }
        }
        for extent in &self.overlay {
            put_extent(&mut out, extent);
        }
        seal(out)
    }

    pub fn decode(bytes: &[u8]) -> Result<GlobalIndex> {
        let (version, body) = open_sealed(bytes, MAGIC, "global index")?;
        let mut reader = Reader::new(body, "global index");
        let eof = reader.u64()?;
        let log_count = reader.u32()? as usize;
        let extent_count = reader.u64()?;
        let (group_count, overlay_count, frozen_limit) = if version >= 2 {
            (reader.u32()? as usize, reader.u64()?, reader.u64()?)
        } else {
            (0, 0, u64::MAX)
        };
        // Counts come from checksummed bytes, but bound them by what the
        // body can hold anyway before allocating.
        let fits = (log_count * LOG_BYTES) as u64
            + extent_count.saturating_add(overlay_count).saturating_mul(EXTENT_BYTES as u64)
            + (group_count * GROUP_BYTES) as u64;
        if fits > reader.remaining() as u64 {
            return Err(Error::corrupt("global index: counts exceed its size"));
        }
        let mut logs = Vec::with_capacity(log_count);
        for _ in 0..log_count {
            let id = LogId {
                stamp: reader.u64()?,
                writer: reader.u64()?,
                pid: reader.u32()?,
                host: reader.u32()?,
            };
            logs.push(CoveredLog { id, backend: reader.u32()?, hostdir: reader.u32()? });
        }
        let extents = read_extents(&mut reader, extent_count, logs.len())?;
        let mut groups = Vec::with_capacity(group_count);
        for _ in 0..group_count {
            let (start, stride, end, slot_count) =
                (reader.u64()?, reader.u64()?, reader.u64()?, reader.u32()?);
            let _reserved = reader.u32()?;
            if slot_count as usize * SLOT_BYTES > reader.remaining() || stride == 0 || end < start {
                return Err(Error::corrupt(format!("global index: group at {start} is malformed")));
            }
            let mut slots = Vec::with_capacity(slot_count as usize);
            for _ in 0..slot_count {
                let slot = GlobalSlot {
                    offset: reader.u64()?,
                    length: reader.u64()?,
                    first_block: reader.u64()?,
                    count: reader.u64()?,
                    physical: reader.u64()?,
                    log: reader.u32()?,
                };
                let _reserved = reader.u32()?;
                check_log(slot.log, logs.len())?;
                let last_end = slot
                    .first_block
                    .checked_add(slot.count)
                    .and_then(|blocks| blocks.checked_mul(stride))
                    .and_then(|span| span.checked_add(start));
                if slot.length == 0
                    || slot.count == 0
                    || slot.offset + slot.length > stride
                    || last_end.is_none()
                {
                    return Err(Error::corrupt(format!(
                        "global index: a slot of the group at {start} is malformed"
                    )));
                }
                slots.push(slot);
            }
            groups.push(GlobalGroup { start, stride, end, slots });
        }
        let overlay = read_extents(&mut reader, overlay_count, logs.len())?;
        if reader.remaining() != 0 {
            return Err(Error::corrupt("global index: trailing bytes"));
        }
        Ok(GlobalIndex { eof, logs, extents, groups, frozen_limit, overlay })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> GlobalIndex {
        GlobalIndex {
            eof: 1000,
            logs: vec![
                CoveredLog { id: LogId { stamp: 1, writer: 2, pid: 3, host: 4 }, backend: 0, hostdir: 7 },
                CoveredLog { id: LogId { stamp: 5, writer: 6, pid: 7, host: 8 }, backend: 2, hostdir: 1 },
            ],
            extents: vec![
                GlobalExtent { logical: 0, length: 500, log: 0, physical: 64 },
                GlobalExtent { logical: 600, length: 400, log: 1, physical: 64 },
            ],
            groups: vec![GlobalGroup {
                start: 1000,
                stride: 100,
                end: 2000,
                slots: vec![
                    GlobalSlot { offset: 0, length: 50, first_block: 0, count: 10, physical: 64, log: 0 },
                    GlobalSlot { offset: 50, length: 50, first_block: 0, count: 10, physical: 564, log: 1 },
                ],
            }],
            frozen_limit: 1900,
            overlay: vec![GlobalExtent { logical: 10, length: 5, log: 1, physical: 2000 }],
        }
    }

    #[test]
    fn round_trips() {
        assert_eq!(GlobalIndex::decode(&sample().encode()).unwrap(), sample());
    }

    #[test]
    fn damage_is_detected() {
        let bytes = sample().encode();
        for index in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[index] ^= 0x40;
            assert!(GlobalIndex::decode(&damaged).is_err(), "flip at {index}");
        }
        assert!(GlobalIndex::decode(&bytes[..bytes.len() - 1]).is_err());
    }
}
