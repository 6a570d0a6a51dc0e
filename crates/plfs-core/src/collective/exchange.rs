//! What ranks hand each other during a collective open: the list of index
//! logs, the records of some of them (an [`IndexPart`]), and a merged index
//! ([`SharedIndex`], encoded as a global index). Each has an encoding, so a
//! strategy only moves bytes; every byte it moves is checksummed.

use crate::checksums::LogChecksums;
use crate::container::{self, LogLocation};
use crate::error::{Error, Result, ResultExt};
use crate::format::codec::{Reader, put_u32, put_u64};
use crate::format::global_index::GlobalIndex;
use crate::format::index_log::{self, Record};
use crate::fs::{FileHandle, Plfs, parse_file_path};
use crate::layout::LogId;
use crate::load::{self, GlobalIndexStatus, LoadedIndex};
use crate::open::{OpenFlags, WriterId};
use crate::placement::{BackendId, HostdirId};

const LOCATION_BYTES: usize = 8 + 8 + 4 + 4 + 4 + 4 + 4;

fn put_location(out: &mut Vec<u8>, log: &LogLocation) {
    put_u64(out, log.id.stamp);
    put_u64(out, log.id.writer);
    put_u32(out, log.id.pid);
    put_u32(out, log.id.host);
    put_u32(out, log.backend.0 as u32);
    put_u32(out, log.hostdir.0);
    put_u32(out, u32::from(log.has_data));
}

fn read_location(reader: &mut Reader<'_>) -> Result<LogLocation> {
    let id = LogId { stamp: reader.u64()?, writer: reader.u64()?, pid: reader.u32()?, host: reader.u32()? };
    let backend = BackendId(reader.u32()? as usize);
    let hostdir = HostdirId(reader.u32()?);
    let has_data = reader.u32()? != 0;
    Ok(LogLocation { backend, hostdir, id, has_index: true, has_data })
}

/// The index logs of one file, as rank 0 found them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IndexLogList {
    pub logs: Vec<LogLocation>,
}

impl IndexLogList {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + self.logs.len() * LOCATION_BYTES + 4);
        put_u32(&mut out, self.logs.len() as u32);
        for log in &self.logs {
            put_location(&mut out, log);
        }
        let crc = crc32c::crc32c(&out);
        put_u32(&mut out, crc);
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<IndexLogList> {
        let body = checked(bytes, "index log list")?;
        let mut reader = Reader::new(body, "index log list");
        let count = reader.u32()? as usize;
        if count * LOCATION_BYTES != reader.remaining() {
            return Err(Error::corrupt(format!("index log list: {count} logs do not fit its size")));
        }
        let logs = (0..count).map(|_| read_location(&mut reader)).collect::<Result<_>>()?;
        Ok(IndexLogList { logs })
    }

    /// The logs rank `rank` of `ranks` reads when the reading is split.
    pub fn share(&self, rank: usize, ranks: usize) -> Vec<LogLocation> {
        self.logs.iter().skip(rank).step_by(ranks.max(1)).cloned().collect()
    }
}

/// The decoded records of some index logs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IndexPart {
    pub logs: Vec<(LogLocation, Vec<Record>)>,
}

impl IndexPart {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_u32(&mut out, self.logs.len() as u32);
        for (log, records) in &self.logs {
            put_location(&mut out, log);
            let frames = index_log::encode_frames(records);
            put_u64(&mut out, frames.len() as u64);
            out.extend_from_slice(&frames);
        }
        let crc = crc32c::crc32c(&out);
        put_u32(&mut out, crc);
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<IndexPart> {
        let body = checked(bytes, "index part")?;
        let mut reader = Reader::new(body, "index part");
        let count = reader.u32()? as usize;
        if count * LOCATION_BYTES > reader.remaining() {
            return Err(Error::corrupt(format!("index part: {count} logs do not fit its size")));
        }
        let mut logs = Vec::with_capacity(count);
        for _ in 0..count {
            let log = read_location(&mut reader)?;
            let length = usize::try_from(reader.u64()?).map_err(|_| Error::corrupt("index part: length"))?;
            let records = index_log::decode_frames(reader.take(length)?)?;
            logs.push((log, records));
        }
        if reader.remaining() != 0 {
            return Err(Error::corrupt("index part: trailing bytes"));
        }
        Ok(IndexPart { logs })
    }
}

/// A merged index ready to open the file with, on any rank.
#[derive(Debug)]
pub struct SharedIndex {
    loaded: LoadedIndex,
}

impl SharedIndex {
    /// The index encoded as a global index (sealed: versioned and
    /// checksummed) after its u64 length, then each log's data checksums
    /// (a u32 count, 0 when the builder had none: `verify_reads: off`, or
    /// an index from `plfs flatten`), then a CRC32C of it all. The
    /// checksums ride along because a receiver would otherwise read every
    /// index log it reads data from again, for their CRCs alone.
    pub fn encode(&self) -> Vec<u8> {
        let global = self.loaded.to_global().encode();
        let checksums = &self.loaded.checksums;
        let tables: usize = checksums.iter().map(LogChecksums::encoded_len).sum();
        let mut out = Vec::with_capacity(8 + global.len() + 4 + tables + 4);
        put_u64(&mut out, global.len() as u64);
        out.extend_from_slice(&global);
        put_u32(&mut out, checksums.len() as u32);
        for table in checksums {
            table.encode(&mut out);
        }
        let crc = crc32c::crc32c(&out);
        put_u32(&mut out, crc);
        out
    }

    pub fn decode(plfs: &Plfs, bytes: &[u8]) -> Result<SharedIndex> {
        let body = checked(bytes, "received index")?;
        let mut reader = Reader::new(body, "received index");
        let length = usize::try_from(reader.u64()?).map_err(|_| Error::corrupt("received index: length"))?;
        let global = GlobalIndex::decode(reader.take(length)?).context("received index")?;
        let mut loaded = LoadedIndex::from_global(plfs.state(), &global).context("received index")?;
        let tables = reader.u32()? as usize;
        if tables != 0 && tables != loaded.logs.len() {
            return Err(Error::corrupt(format!(
                "received index: data checksums of {tables} logs for an index of {}",
                loaded.logs.len()
            )));
        }
        loaded.checksums = (0..tables)
            .map(|_| LogChecksums::decode(&mut reader))
            .collect::<Result<_>>()
            .context("received index")?;
        if reader.remaining() != 0 {
            return Err(Error::corrupt("received index: trailing bytes"));
        }
        Ok(SharedIndex { loaded })
    }
}

/// Whether the global index can stand in for the index logs.
#[derive(Debug)]
pub enum GlobalIndexState {
    Valid(SharedIndex),
    Missing,
    /// Present but stale or damaged: the reason, naming the object.
    Ignored(String),
}

fn checked<'a>(bytes: &'a [u8], what: &str) -> Result<&'a [u8]> {
    if bytes.len() < 4 {
        return Err(Error::corrupt(format!("{what}: {} bytes is too short", bytes.len())));
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    if stored != crc32c::crc32c(body) {
        return Err(Error::corrupt(format!("{what}: checksum mismatch")));
    }
    Ok(body)
}

/// The steps of a collective open, each run by whichever rank a strategy
/// picks. Together they do what [`Plfs::open`] does for a reader alone.
impl Plfs {
    /// Lists the file's index logs (one listing per backend and hostdir).
    pub(crate) fn index_logs(&self, path: &str) -> Result<IndexLogList> {
        let logical = parse_file_path(path)?;
        self.check_is_file(&logical).context(path.to_owned())?;
        let logs = container::file_logs(self.state(), &logical).context(path.to_owned())?;
        Ok(IndexLogList { logs })
    }

    /// Reads and decodes the given index logs (one open each).
    pub(crate) fn read_index_part(&self, path: &str, logs: &[LogLocation]) -> Result<IndexPart> {
        let logical = parse_file_path(path)?;
        let decoded = load::read_all_index_logs(self.state(), &logical, logs).context(path.to_owned())?;
        Ok(IndexPart { logs: logs.iter().cloned().zip(decoded).collect() })
    }

    /// Merges parts read by any ranks into one index.
    pub(crate) fn merge_index_parts(
        &self,
        path: &str,
        parts: impl IntoIterator<Item = IndexPart>,
    ) -> Result<SharedIndex> {
        let logical = parse_file_path(path)?;
        let (logs, decoded): (Vec<LogLocation>, Vec<Vec<Record>>) =
            parts.into_iter().flat_map(|part| part.logs).unzip();
        let loaded =
            LoadedIndex::from_records(self.state(), &logical, logs, &decoded).context(path.to_owned())?;
        Ok(SharedIndex { loaded })
    }

    /// Reads the global index if there is one, and says whether it is valid.
    pub(crate) fn read_global_index(&self, path: &str) -> Result<GlobalIndexState> {
        let logical = parse_file_path(path)?;
        self.check_is_file(&logical).context(path.to_owned())?;
        Ok(match load::read_global_index(self.state(), &logical).context(path.to_owned())? {
            GlobalIndexStatus::Valid(loaded) => GlobalIndexState::Valid(SharedIndex { loaded }),
            GlobalIndexStatus::Missing => GlobalIndexState::Missing,
            GlobalIndexStatus::Ignored(reason) => GlobalIndexState::Ignored(reason),
        })
    }

    /// Opens a file for reading with an index built elsewhere: no listing,
    /// no index log is read (the caller's strategy did that once for all).
    pub(crate) fn open_with_index(
        &self,
        path: &str,
        writer: WriterId,
        index: SharedIndex,
    ) -> Result<FileHandle> {
        let logical = parse_file_path(path)?;
        self.open_prepared(&logical, OpenFlags::RDONLY, writer, index.loaded)
    }
}
