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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobalIndex {
    pub eof: u64,
    pub logs: Vec<CoveredLog>,
    pub extents: Vec<GlobalExtent>,
}

impl GlobalIndex {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = begin_sealed(MAGIC);
        out.reserve(self.logs.len() * 32 + self.extents.len() * 32);
        put_u64(&mut out, self.eof);
        put_u32(&mut out, self.logs.len() as u32);
        put_u64(&mut out, self.extents.len() as u64);
        for log in &self.logs {
            put_u64(&mut out, log.id.stamp);
            put_u64(&mut out, log.id.writer);
            put_u32(&mut out, log.id.pid);
            put_u32(&mut out, log.id.host);
            put_u32(&mut out, log.backend);
            put_u32(&mut out, log.hostdir);
        }
        for extent in &self.extents {
            put_u64(&mut out, extent.logical);
            put_u64(&mut out, extent.length);
            put_u64(&mut out, extent.physical);
            put_u32(&mut out, extent.log);
            put_u32(&mut out, 0);
        }
        seal(out)
    }

    pub fn decode(bytes: &[u8]) -> Result<GlobalIndex> {
        let (_version, body) = open_sealed(bytes, MAGIC, "global index")?;
        let mut reader = Reader::new(body, "global index");
        let eof = reader.u64()?;
        let log_count = reader.u32()? as usize;
        let extent_count = reader.u64()?;
        // Counts come from checksummed bytes, but bound them by what the
        // body can hold anyway before allocating.
        if log_count * 32 > reader.remaining() || extent_count > (reader.remaining() / 32) as u64 {
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
        let mut extents = Vec::with_capacity(extent_count as usize);
        for _ in 0..extent_count {
            let (logical, length, physical, log) =
                (reader.u64()?, reader.u64()?, reader.u64()?, reader.u32()?);
            let _reserved = reader.u32()?;
            if log as usize >= logs.len() {
                return Err(Error::corrupt(format!(
                    "global index: extent names log {log} of {}",
                    logs.len()
                )));
            }
            extents.push(GlobalExtent { logical, length, log, physical });
        }
        if reader.remaining() != 0 {
            return Err(Error::corrupt("global index: trailing bytes"));
        }
        Ok(GlobalIndex { eof, logs, extents })
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
