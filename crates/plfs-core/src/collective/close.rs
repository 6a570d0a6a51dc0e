//! Flatten on close under MPI ("Boosting PLFS read performance" §3.3):
//! while a file is written, each rank keeps the index records it appends
//! (within `index_buffer_mbs`, see [`retain_index`]); at the collective
//! close the ranks' records are gathered to rank 0, which merges them and
//! writes the global index without reading any index log back. When any
//! rank's records did not fit, or all of them together do not fit rank 0's
//! `index_buffer_mbs`, rank 0 flattens from storage as `plfs flatten` does.
//! Either way the index is published atomically and is the same bytes.

use std::collections::HashMap;

use super::Comm;
use super::strategy::{from_outcome, outcome};
use crate::error::{Error, ErrorKind, Result, ResultExt};
use crate::format::codec::{Reader, put_u32, put_u64};
use crate::format::index_log::{self, Record};
use crate::fs::{Plfs, parse_file_path};
use crate::layout::LogId;
use crate::load;

const MIB: u64 = 1 << 20;

/// How a collective flatten on close built the global index (the same on
/// every rank).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CloseFlatten {
    /// The ranks' in-memory records were gathered to rank 0; false: rank
    /// 0 read the index logs from storage.
    pub gathered: bool,
    /// Index logs the global index covers.
    pub logs: u64,
    /// Of them, read from storage by rank 0 (on the gather path, logs no
    /// rank of this close wrote: an earlier session's).
    pub logs_read: u64,
    /// Bytes of records gathered (0 when not gathered).
    pub gathered_bytes: u64,
}

/// Starts keeping the index records this process appends to `path` from
/// now on, for [`flatten_on_close`]; call it before the writes (after the
/// open, before the first write). A no-op on mounts without containers.
pub fn retain_index(plfs: &Plfs, path: &str) -> Result<()> {
    if plfs.files().containers().is_none() {
        return Ok(());
    }
    let logical = parse_file_path(path)?;
    let budget = u64::from(plfs.state().tuning.index_buffer_mbs) * MIB;
    plfs.state().retained.retain(&logical, budget);
    Ok(())
}

/// Writes `path`'s global index once every rank of `comm` has closed its
/// writers (each rank calls it after its own close; `closed` says whether
/// that close succeeded). Every rank returns the same outcome. A failure
/// leaves the file as written: readers then read the index logs.
pub fn flatten_on_close(plfs: &Plfs, path: &str, comm: &dyn Comm, closed: bool) -> Result<CloseFlatten> {
    const ROOT: usize = 0;
    if plfs.files().containers().is_none() {
        // Every rank decides from its own mount, without talking (as
        // open_collective does): nothing to flatten on n-n or 1-n files.
        return Err(plfs.files().no_container(path));
    }
    let logical = parse_file_path(path)?;
    let retained = plfs.state().retained.take(&logical).filter(|_| closed);
    let part = retained.as_ref().map(|logs| encode_part(logs));
    // 1. Every rank learns whether every rank kept all its records, how
    // many bytes they are, and rank 0's budget: all decide alike.
    let budget = u64::from(plfs.state().tuning.index_buffer_mbs) * MIB;
    let mut summary = Vec::with_capacity(17);
    summary.push(u8::from(part.is_some()));
    put_u64(&mut summary, part.as_ref().map_or(0, |part| part.len() as u64));
    put_u64(&mut summary, budget);
    let summaries = comm.allgather(&summary).context(path.to_owned())?;
    let gather = gather_decision(&summaries).context(path.to_owned())?;

    // 2. Gather (or not), and rank 0 writes the index.
    let gathered = if gather.is_some() {
        comm.gather(ROOT, part.as_deref().unwrap_or_default()).context(path.to_owned())?
    } else {
        None
    };
    drop(part);
    let mut result_bytes = Vec::new();
    if comm.rank() == ROOT {
        let written = match gathered {
            Some(parts) => flatten_gathered(plfs, path, &parts),
            None => plfs.flatten(path).map(|report| CloseFlatten {
                gathered: false,
                logs: report.logs as u64,
                logs_read: report.logs as u64,
                gathered_bytes: 0,
            }),
        };
        result_bytes = outcome(written.as_ref().map(encode_report), ROOT);
    }
    // 3. Everyone waits for the index and learns the outcome.
    comm.broadcast(ROOT, &mut result_bytes).context(path.to_owned())?;
    decode_report(from_outcome(&result_bytes, path)?).context(path.to_owned())
}

/// Some(total bytes) when every rank kept its records and all of them fit
/// rank 0's budget; None: rank 0 reads the logs.
fn gather_decision(summaries: &[Vec<u8>]) -> Result<Option<u64>> {
    let mut total = 0u64;
    let mut complete = true;
    let mut root_budget = 0;
    for (rank, summary) in summaries.iter().enumerate() {
        let mut reader = Reader::new(summary, "flatten on close summary");
        let kept = reader.u8()? != 0;
        let bytes = reader.u64()?;
        let budget = reader.u64()?;
        if rank == 0 {
            root_budget = budget;
        }
        complete &= kept;
        total = total.saturating_add(bytes);
    }
    Ok((complete && total <= root_budget).then_some(total))
}

/// Rank 0: the gathered records by log, then the index (logs no rank
/// kept are read).
fn flatten_gathered(plfs: &Plfs, path: &str, parts: &[Vec<u8>]) -> Result<CloseFlatten> {
    let logical = parse_file_path(path)?;
    plfs.check_is_file(&logical).context(path.to_owned())?;
    let mut known = HashMap::new();
    let mut gathered_bytes = 0;
    for (rank, part) in parts.iter().enumerate() {
        gathered_bytes += part.len() as u64;
        for (log, records) in decode_part(part).with_context(|| format!("{path}: rank {rank}'s records"))? {
            known.insert(log, records);
        }
    }
    let (global, _, read) =
        load::flatten_with_records(plfs.state(), &logical, known).context(path.to_owned())?;
    Ok(CloseFlatten {
        gathered: true,
        logs: global.logs.len() as u64,
        logs_read: read as u64,
        gathered_bytes,
    })
}

/// A rank's kept logs: count, then per log its id and frames; CRC32C last.
fn encode_part(logs: &[(LogId, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + logs.iter().map(|(_, frames)| 32 + frames.len()).sum::<usize>() + 4);
    put_u32(&mut out, logs.len() as u32);
    for (log, frames) in logs {
        put_u64(&mut out, log.stamp);
        put_u64(&mut out, log.writer);
        put_u32(&mut out, log.pid);
        put_u32(&mut out, log.host);
        put_u64(&mut out, frames.len() as u64);
        out.extend_from_slice(frames);
    }
    let crc = crc32c::crc32c(&out);
    put_u32(&mut out, crc);
    out
}

fn decode_part(bytes: &[u8]) -> Result<Vec<(LogId, Vec<Record>)>> {
    let Some((body, crc)) = bytes.split_last_chunk::<4>() else {
        return Err(Error::corrupt(format!("{} bytes is too short", bytes.len())));
    };
    if u32::from_le_bytes(*crc) != crc32c::crc32c(body) {
        return Err(Error::corrupt("checksum mismatch"));
    }
    let mut reader = Reader::new(body, "gathered records");
    let count = reader.u32()?;
    let mut logs = Vec::new();
    for _ in 0..count {
        let log =
            LogId { stamp: reader.u64()?, writer: reader.u64()?, pid: reader.u32()?, host: reader.u32()? };
        let length = usize::try_from(reader.u64()?).map_err(|_| Error::corrupt("frames length"))?;
        logs.push((log, index_log::decode_frames(reader.take(length)?)?));
    }
    if reader.remaining() != 0 {
        return Err(Error::corrupt("trailing bytes"));
    }
    Ok(logs)
}

fn encode_report(report: &CloseFlatten) -> Vec<u8> {
    let mut out = vec![u8::from(report.gathered)];
    put_u64(&mut out, report.logs);
    put_u64(&mut out, report.logs_read);
    put_u64(&mut out, report.gathered_bytes);
    out
}

fn decode_report(bytes: &[u8]) -> Result<CloseFlatten> {
    let mut reader = Reader::new(bytes, "flatten on close outcome");
    let report = CloseFlatten {
        gathered: reader.u8()? != 0,
        logs: reader.u64()?,
        logs_read: reader.u64()?,
        gathered_bytes: reader.u64()?,
    };
    if reader.remaining() != 0 {
        return Err(Error::new(ErrorKind::Corrupt, "flatten on close outcome: trailing bytes"));
    }
    Ok(report)
}

#[cfg(test)]
mod tests;
