//! Checking data on reads against the CRC32C its index record carries.
//!
//! The merged index forgets record boundaries (it merges and splits
//! extents), so each data log keeps a table of its checksummed units by
//! physical offset, built from the same records as the index. A unit is a
//! run of write records of one length stored back to back (each record
//! checkable alone, 4 bytes of CRC each) or one pattern record, whose one
//! CRC covers the CRCs of all its blocks: a pattern can only be checked
//! whole. Checking costs a binary search and a CRC32C of the bytes read,
//! already in the caller's buffer ([`data_crc`]); nothing is allocated per
//! record (the `always` mode allocates one buffer
//! per record it has to read in full, and keeps the block CRCs of each
//! pattern it has checked whole, so a pattern block is read once more, not
//! the whole pattern).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::config::VerifyReads;
use crate::error::{Error, Result};
use crate::format::codec::{Reader, put_u32, put_u64};
use crate::format::index_log::Record;

/// One checksummed unit of a data log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Unit {
    physical: u64,
    /// Bytes of each record (pattern block).
    length: u64,
    count: u64,
    /// A pattern's CRC over its blocks' CRCs; for a run of records, the
    /// index of the first record's CRC in `LogChecksums::crcs`.
    crc: u32,
    pattern: bool,
}

impl Unit {
    fn end(&self) -> u64 {
        self.physical + self.count * self.length
    }
}

/// The checksummed units of one data log, sorted by physical offset.
#[derive(Debug, Default)]
pub struct LogChecksums {
    units: Vec<Unit>,
    crcs: Vec<u32>,
    /// Pattern blocks read whole and in order: (unit, next block, CRC of
    /// the block CRCs so far). One per log, so a sequential reader checks
    /// each pattern when it reads the last block.
    progress: Mutex<Option<(usize, u64, u32)>>,
    /// Block CRCs of the patterns `always` has checked whole, by unit.
    block_crcs: Mutex<HashMap<usize, Arc<[u32]>>>,
}

/// Reads the bytes of `[physical, physical + buf.len())` of a data log.
pub type ReadAt<'a> = dyn Fn(&mut [u8], u64) -> Result<()> + 'a;

/// A split read's pattern in progress: (unit, next block, CRC of the
/// block CRCs so far). On the stack of one read, never shared.
type Carry = Option<(usize, u64, u32)>;

/// The CRC of the one record (or pattern block) a piece is, when that
/// record is longer than a piece and was summed as it was filled:
/// (physical, length, CRC).
type Known = Option<(u64, u64, u32)>;

/// Longest piece a checked read fills before checking it: well inside
/// this CPU's 2 MiB L2 with the page-cache bytes the copy came from, and
/// long enough that the extra `pread` per piece (about 0.3 µs) is under
/// 1 % of copying it.
pub const PIECE_BYTES: u64 = 256 << 10;

impl LogChecksums {
    /// The table of one log's write and pattern records.
    pub fn from_records(records: &[Record]) -> LogChecksums {
        let mut table = LogChecksums::default();
        for record in records {
            match record {
                Record::Write(write) if write.length > 0 => {
                    if let Some(last) = table.units.last_mut()
                        && !last.pattern
                        && last.length == write.length
                        && last.end() == write.physical
                    {
                        last.count += 1;
                    } else {
                        table.units.push(Unit {
                            physical: write.physical,
                            length: write.length,
                            count: 1,
                            crc: table.crcs.len() as u32,
                            pattern: false,
                        });
                    }
                    table.crcs.push(write.data_crc);
                }
                Record::Pattern(pattern) => table.units.push(Unit {
                    physical: pattern.physical,
                    length: pattern.length,
                    count: pattern.count,
                    crc: pattern.data_crc,
                    pattern: true,
                }),
                _ => {}
            }
        }
        // A writer appends in record order, so this is sorted already.
        if !table.units.is_sorted_by_key(|unit| unit.physical) {
            table.units.sort_by_key(|unit| unit.physical);
        }
        table
    }

    /// Appends the table to a collective open's merged index
    /// (collective/exchange.rs), so the ranks that receive the index check
    /// data without reading the index logs again for their CRCs. Per
    /// unit: physical, length, count (u64 each), CRC (u32), pattern (u8);
    /// then the run CRCs (u32 each). A message, never stored.
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_u32(out, self.units.len() as u32);
        for unit in &self.units {
            put_u64(out, unit.physical);
            put_u64(out, unit.length);
            put_u64(out, unit.count);
            put_u32(out, unit.crc);
            out.push(u8::from(unit.pattern));
        }
        put_u32(out, self.crcs.len() as u32);
        for crc in &self.crcs {
            put_u32(out, *crc);
        }
    }

    /// Bytes [`LogChecksums::encode`] appends.
    pub fn encoded_len(&self) -> usize {
        4 + self.units.len() * UNIT_BYTES + 4 + self.crcs.len() * 4
    }

    /// Reads what [`LogChecksums::encode`] wrote. Refuses (rather than
    /// panicking on later reads) a table whose units are empty, overflow,
    /// are out of order or name CRCs it does not hold.
    pub fn decode(reader: &mut Reader<'_>) -> Result<LogChecksums> {
        let bad = |why: String| Error::corrupt(format!("data checksums: {why}"));
        let units = reader.u32()? as usize;
        if units.saturating_mul(UNIT_BYTES) > reader.remaining() {
            return Err(bad(format!("{units} units do not fit the message")));
        }
        let mut table = LogChecksums { units: Vec::with_capacity(units), ..LogChecksums::default() };
        for _ in 0..units {
            let unit = Unit {
                physical: reader.u64()?,
                length: reader.u64()?,
                count: reader.u64()?,
                crc: reader.u32()?,
                pattern: match reader.u8()? {
                    0 => false,
                    1 => true,
                    other => return Err(bad(format!("pattern flag {other}"))),
                },
            };
            let fits = unit.count.checked_mul(unit.length).and_then(|bytes| unit.physical.checked_add(bytes));
            if unit.length == 0 || unit.count == 0 || fits.is_none() {
                return Err(bad(format!(
                    "unit of {} x {} bytes at offset {}",
                    unit.count, unit.length, unit.physical
                )));
            }
            if table.units.last().is_some_and(|last| last.physical > unit.physical) {
                return Err(bad(format!("unit at offset {} out of order", unit.physical)));
            }
            table.units.push(unit);
        }
        let crcs = reader.u32()? as usize;
        if crcs.saturating_mul(4) > reader.remaining() {
            return Err(bad(format!("{crcs} CRCs do not fit the message")));
        }
        table.crcs = (0..crcs).map(|_| reader.u32()).collect::<Result<_>>()?;
        if let Some(unit) = table.units.iter().find(|unit| {
            !unit.pattern && (unit.crc as u64).saturating_add(unit.count) > table.crcs.len() as u64
        }) {
            return Err(bad(format!("unit at offset {} names CRCs past the {crcs} held", unit.physical)));
        }
        Ok(table)
    }

    /// Records in the table (a pattern counts once).
    #[cfg(test)]
    pub fn unit_count(&self) -> usize {
        self.units.len()
    }

    /// Checks `buf`, just read from `physical` of the log `label` names:
    /// every record (and whole pattern) it holds entirely. With
    /// [`VerifyReads::Always`], records it holds in part are read whole
    /// with `read_at`, checked, and the verified bytes copied into `buf`.
    pub fn check(
        &self,
        buf: &mut [u8],
        physical: u64,
        mode: VerifyReads,
        label: &str,
        read_at: &ReadAt<'_>,
    ) -> Result<()> {
        let read = (physical, physical + buf.len() as u64);
        self.check_piece(buf, physical, read, mode, label, read_at, &mut None, None)
    }

    /// Fills `buf` with the log's bytes from `physical` using `fill`, and
    /// checks them as [`LogChecksums::check`] does. A read longer than
    /// [`PIECE_BYTES`] is filled in pieces cut at record (or pattern block)
    /// boundaries, each checked as soon as it lands: the CRC then reads
    /// bytes still in the core's cache (85 GB/s here) instead of bytes a
    /// long copy already pushed out to memory (22 GB/s). Every record the
    /// read holds whole is checked exactly as one piece would check it.
    pub fn read_checked(
        &self,
        buf: &mut [u8],
        physical: u64,
        mode: VerifyReads,
        label: &str,
        fill: &ReadAt<'_>,
        read_at: &ReadAt<'_>,
    ) -> Result<()> {
        self.read_checked_in(PIECE_BYTES, buf, physical, mode, label, fill, read_at)
    }

    #[allow(clippy::too_many_arguments)]
    fn read_checked_in(
        &self,
        bound: u64,
        buf: &mut [u8],
        physical: u64,
        mode: VerifyReads,
        label: &str,
        fill: &ReadAt<'_>,
        read_at: &ReadAt<'_>,
    ) -> Result<()> {
        let end = physical + buf.len() as u64;
        if mode == VerifyReads::Off || buf.len() as u64 <= bound {
            fill(buf, physical)?;
            return self.check(buf, physical, mode, label, read_at);
        }
        let mut carry = None;
        let mut at = physical;
        while at < end {
            let (next, long_record) = self.piece_end(at, end, bound);
            let piece = &mut buf[(at - physical) as usize..(next - physical) as usize];
            let known = if long_record {
                // One record longer than a piece: fill it a piece at a
                // time, summing each part while it is in cache.
                let mut digest = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
                let mut part_at = at;
                for part in piece.chunks_mut(bound as usize) {
                    fill(part, part_at)?;
                    digest.update(part);
                    part_at += part.len() as u64;
                }
                Some((at, next - at, digest.finalize() as u32))
            } else {
                fill(piece, at)?;
                None
            };
            self.check_piece(piece, at, (physical, end), mode, label, read_at, &mut carry, known)?;
            at = next;
        }
        Ok(())
    }

    /// Where a piece of a split read starting at `at` ends: the last record
    /// (or pattern block) boundary at most `bound` bytes on, else the end
    /// of the one record that is longer than `bound`, never past `end`.
    /// Between units no record is cut, so the piece may end anywhere. The
    /// bool says the piece is that one long record, whole.
    fn piece_end(&self, at: u64, end: u64, bound: u64) -> (u64, bool) {
        let limit = at.saturating_add(bound);
        if limit >= end {
            return (end, false);
        }
        let after = self.units.partition_point(|unit| unit.physical <= limit);
        let Some(unit) = after.checked_sub(1).map(|index| &self.units[index]) else {
            return (limit, false);
        };
        if unit.end() <= limit {
            return (limit, false);
        }
        let boundary = unit.physical + (limit - unit.physical) / unit.length * unit.length;
        if boundary > at {
            return (boundary, false);
        }
        let record_end = boundary + unit.length;
        (record_end.min(end), boundary == at && record_end <= end)
    }

    /// Checks one piece of a read of `read` (start, end): every record it
    /// holds entirely (a read cuts pieces at record boundaries only). A
    /// pattern the read holds whole but the piece in part is folded into
    /// `carry` block by block and checked at its last block.
    #[allow(clippy::too_many_arguments)]
    fn check_piece(
        &self,
        buf: &mut [u8],
        physical: u64,
        read: (u64, u64),
        mode: VerifyReads,
        label: &str,
        read_at: &ReadAt<'_>,
        carry: &mut Carry,
        known: Known,
    ) -> Result<()> {
        if mode == VerifyReads::Off || buf.is_empty() {
            return Ok(());
        }
        let end = physical + buf.len() as u64;
        // The first unit that ends past `physical`, stepping back over one
        // that starts before it.
        let mut at = self.units.partition_point(|unit| unit.physical <= physical);
        if at > 0 && self.units[at - 1].end() > physical {
            at -= 1;
        }
        for (position, unit) in self.units.iter().enumerate().skip(at) {
            if unit.physical >= end {
                break;
            }
            if unit.pattern {
                let held_by_read = unit.physical >= read.0 && unit.end() <= read.1;
                let held_by_piece = unit.physical >= physical && unit.end() <= end;
                if held_by_read && !held_by_piece {
                    self.carry_pattern(position, unit, buf, physical, label, carry, known)?;
                } else {
                    self.check_pattern(position, unit, buf, physical, mode, label, read_at, known)?;
                }
            } else {
                self.check_run(unit, buf, physical, mode, label, read_at, known)?;
            }
        }
        Ok(())
    }

    /// Folds the blocks of a pattern that `buf` (one piece of a read
    /// holding the whole pattern) holds into `carry`; checks the pattern
    /// when its last block is in. Pieces come in order and never cut a
    /// block, so the first piece holds block 0.
    #[allow(clippy::too_many_arguments)]
    fn carry_pattern(
        &self,
        position: usize,
        unit: &Unit,
        buf: &[u8],
        physical: u64,
        label: &str,
        carry: &mut Carry,
        known: Known,
    ) -> Result<()> {
        let end = physical + buf.len() as u64;
        let first = physical.saturating_sub(unit.physical) / unit.length;
        let last = ((end.min(unit.end()) - unit.physical) / unit.length).min(unit.count);
        let running = match *carry {
            Some((known, next, running)) if known == position && next == first => running,
            _ if first == 0 => 0,
            // Pieces come in order and are cut at this pattern's block
            // boundaries unless another record overlaps it, which an
            // append-only log never holds.
            _ => {
                return Err(Error::corrupt(format!(
                    "{label}: the pattern of {} x {} bytes at offset {} overlaps another record",
                    unit.count, unit.length, unit.physical
                )));
            }
        };
        let running = fold_blocks(unit, buf, physical, first..last, running, known);
        if last == unit.count {
            *carry = None;
            return check_crc(running, unit.crc, unit.physical, unit.count * unit.length, label);
        }
        *carry = Some((position, last, running));
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn check_run(
        &self,
        unit: &Unit,
        buf: &mut [u8],
        physical: u64,
        mode: VerifyReads,
        label: &str,
        read_at: &ReadAt<'_>,
        known: Known,
    ) -> Result<()> {
        let end = physical + buf.len() as u64;
        let first = physical.saturating_sub(unit.physical) / unit.length;
        let last = ((end.min(unit.end()) - unit.physical).div_ceil(unit.length)).min(unit.count);
        for record in first..last {
            let start = unit.physical + record * unit.length;
            let expected = self.crcs[unit.crc as usize + record as usize];
            let record_end = start + unit.length;
            if start >= physical && record_end <= end {
                let bytes = &buf[(start - physical) as usize..(record_end - physical) as usize];
                check_crc(held_crc(known, start, bytes), expected, start, unit.length, label)?;
            } else if mode == VerifyReads::Always {
                let mut whole = vec![0; unit.length as usize];
                read_at(&mut whole, start)?;
                check_crc(data_crc(&whole), expected, start, unit.length, label)?;
                copy_overlap(&whole, start, buf, physical);
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn check_pattern(
        &self,
        position: usize,
        unit: &Unit,
        buf: &mut [u8],
        physical: u64,
        mode: VerifyReads,
        label: &str,
        read_at: &ReadAt<'_>,
        known: Known,
    ) -> Result<()> {
        let end = physical + buf.len() as u64;
        let bytes = unit.count * unit.length;
        if unit.physical >= physical && unit.end() <= end {
            let from = (unit.physical - physical) as usize;
            let crc = crc_of_blocks(&buf[from..from + bytes as usize], unit.length);
            return check_crc(crc, unit.crc, unit.physical, bytes, label);
        }
        if mode == VerifyReads::Always {
            return self.check_pattern_blocks(position, unit, buf, physical, label, read_at, known);
        }
        // Blocks held whole, in order, continue the sequential check.
        let first = physical.saturating_sub(unit.physical).div_ceil(unit.length);
        let last = ((end.min(unit.end()) - unit.physical) / unit.length).min(unit.count);
        if first >= last {
            return Ok(());
        }
        let mut progress = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
        let running = match *progress {
            _ if first == 0 => 0,
            Some((known, next, running)) if known == position && next == first => running,
            // Out of order: this pass cannot check the pattern.
            _ => {
                *progress = None;
                return Ok(());
            }
        };
        let running = fold_blocks(unit, buf, physical, first..last, running, known);
        if last == unit.count {
            *progress = None;
            return check_crc(running, unit.crc, unit.physical, bytes, label);
        }
        *progress = Some((position, last, running));
        Ok(())
    }
}

impl LogChecksums {
    /// `always` for a pattern held in part: the whole pattern is checked
    /// once and its block CRCs kept, then each block the read touches is
    /// checked against its own (read whole when held in part).
    #[allow(clippy::too_many_arguments)]
    fn check_pattern_blocks(
        &self,
        position: usize,
        unit: &Unit,
        buf: &mut [u8],
        physical: u64,
        label: &str,
        read_at: &ReadAt<'_>,
        known: Known,
    ) -> Result<()> {
        let blocks = self.block_crcs(position, unit, label, read_at)?;
        let end = physical + buf.len() as u64;
        let first = physical.saturating_sub(unit.physical) / unit.length;
        let last = (end.min(unit.end()) - unit.physical).div_ceil(unit.length).min(unit.count);
        let mut whole = Vec::new();
        for block in first..last {
            let start = unit.physical + block * unit.length;
            let block_end = start + unit.length;
            if start >= physical && block_end <= end {
                let bytes = &buf[(start - physical) as usize..(block_end - physical) as usize];
                check_crc(held_crc(known, start, bytes), blocks[block as usize], start, unit.length, label)?;
            } else {
                whole.resize(unit.length as usize, 0);
                read_at(&mut whole, start)?;
                check_crc(data_crc(&whole), blocks[block as usize], start, unit.length, label)?;
                copy_overlap(&whole, start, buf, physical);
            }
        }
        Ok(())
    }

    /// The CRCs of a pattern's blocks, read and checked against the
    /// pattern's CRC the first time (in chunks of whole blocks).
    fn block_crcs(
        &self,
        position: usize,
        unit: &Unit,
        label: &str,
        read_at: &ReadAt<'_>,
    ) -> Result<Arc<[u32]>> {
        if let Some(found) = self.lock_blocks().get(&position) {
            return Ok(found.clone());
        }
        let per_chunk = (PATTERN_CHUNK_BYTES / unit.length).max(1);
        let mut buffer = Vec::new();
        let mut crcs = Vec::with_capacity(unit.count as usize);
        let mut block = 0;
        while block < unit.count {
            let blocks = per_chunk.min(unit.count - block);
            buffer.resize((blocks * unit.length) as usize, 0);
            read_at(&mut buffer, unit.physical + block * unit.length)?;
            crcs.extend(buffer.chunks(unit.length as usize).map(data_crc));
            block += blocks;
        }
        let combined = crcs.iter().fold(0, |running, crc| crc32c::crc32c_append(running, &crc.to_le_bytes()));
        check_crc(combined, unit.crc, unit.physical, unit.count * unit.length, label)?;
        let crcs: Arc<[u32]> = crcs.into();
        self.lock_blocks().insert(position, crcs.clone());
        Ok(crcs)
    }

    fn lock_blocks(&self) -> std::sync::MutexGuard<'_, HashMap<usize, Arc<[u32]>>> {
        self.block_crcs.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The CRC32C of record data, as write and pattern records carry it
/// (FORMAT.md §5). Every checked read computes it over every byte it
/// returns, so its speed is the cost of `verify_reads`: crc-fast folds 64
/// bytes at a time with VPCLMULQDQ (PCLMULQDQ or the ARM equivalent on
/// other CPUs, chosen at run time), about 4 times the bytes per cycle of the
/// SSE4.2 `crc32` instruction the crc32c crate is built on (0.7 µs against
/// 2.4 µs for a 47,001-byte record in cache). Same polynomial (CRC-32/ISCSI),
/// same values; the CRC of 4-byte CRCs stays with crc32c, whose
/// `crc32c_append` continues a running CRC.
#[inline]
pub fn data_crc(bytes: &[u8]) -> u32 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, bytes) as u32
}

/// The CRC of `bytes`, a record (or block) at `physical` held whole by a
/// piece: the one summed as it was filled when it is that piece.
fn held_crc(known: Known, physical: u64, bytes: &[u8]) -> u32 {
    match known {
        Some((at, length, crc)) if at == physical && length == bytes.len() as u64 => crc,
        _ => data_crc(bytes),
    }
}

/// Continues a pattern's `running` CRC of block CRCs with `blocks`, each
/// held whole by `buf` (log bytes at `physical`).
fn fold_blocks(
    unit: &Unit,
    buf: &[u8],
    physical: u64,
    blocks: std::ops::Range<u64>,
    mut running: u32,
    known: Known,
) -> u32 {
    for block in blocks {
        let start = unit.physical + block * unit.length;
        let from = (start - physical) as usize;
        let crc = held_crc(known, start, &buf[from..from + unit.length as usize]);
        running = crc32c::crc32c_append(running, &crc.to_le_bytes());
    }
    running
}

/// One unit as [`LogChecksums::encode`] writes it.
const UNIT_BYTES: usize = 8 + 8 + 8 + 4 + 1;

/// Bytes read at a time when a pattern is checked whole for `always`.
const PATTERN_CHUNK_BYTES: u64 = 8 << 20;

/// A pattern's checksum: CRC32C over its blocks' CRC32Cs, each as 4
/// little-endian bytes (FORMAT.md §5.2).
pub fn crc_of_blocks(bytes: &[u8], block_length: u64) -> u32 {
    bytes
        .chunks(block_length as usize)
        .fold(0, |running, block| crc32c::crc32c_append(running, &data_crc(block).to_le_bytes()))
}

fn check_crc(actual: u32, expected: u32, physical: u64, length: u64, label: &str) -> Result<()> {
    if actual == expected {
        return Ok(());
    }
    Err(Error::corrupt(format!(
        "{label}: {length} bytes at offset {physical} fail their checksum (crc32c {actual:08x}, \
         the index log says {expected:08x}); `plfs recover --verify` lists every damaged record"
    )))
}

/// Copies the part of `from` (log bytes at `from_physical`) that overlaps
/// `to` (log bytes at `to_physical`).
fn copy_overlap(from: &[u8], from_physical: u64, to: &mut [u8], to_physical: u64) {
    let start = from_physical.max(to_physical);
    let end = (from_physical + from.len() as u64).min(to_physical + to.len() as u64);
    if start < end {
        let length = (end - start) as usize;
        let source = (start - from_physical) as usize;
        let target = (start - to_physical) as usize;
        to[target..target + length].copy_from_slice(&from[source..source + length]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::index_log::{PatternRecord, WriteRecord};

    fn data(length: usize) -> Vec<u8> {
        (0..length).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    fn write(physical: u64, bytes: &[u8]) -> Record {
        Record::Write(WriteRecord {
            logical: physical,
            length: bytes.len() as u64,
            physical,
            stamp: 1,
            sequence: 1,
            writer: 1,
            data_crc: crc32c::crc32c(bytes),
        })
    }

    fn log_and_table(record_bytes: usize, records: usize) -> (Vec<u8>, LogChecksums) {
        let log = data(record_bytes * records);
        let list: Vec<Record> = log
            .chunks(record_bytes)
            .enumerate()
            .map(|(i, bytes)| write((i * record_bytes) as u64, bytes))
            .collect();
        (log, LogChecksums::from_records(&list))
    }

    fn check(table: &LogChecksums, log: &[u8], from: usize, to: usize, mode: VerifyReads) -> Result<Vec<u8>> {
        let mut buf = log[from..to].to_vec();
        let read_at = |out: &mut [u8], at: u64| -> Result<()> {
            out.copy_from_slice(&log[at as usize..at as usize + out.len()]);
            Ok(())
        };
        table.check(&mut buf, from as u64, mode, "data log L", &read_at)?;
        Ok(buf)
    }

    fn encoded(table: &LogChecksums) -> Vec<u8> {
        let mut out = Vec::new();
        table.encode(&mut out);
        assert_eq!(out.len(), table.encoded_len());
        out
    }

    #[test]
    fn a_table_sent_with_an_index_checks_as_the_one_built_from_the_records() {
        let (log, built) = log_and_table(100, 6);
        let pattern = Record::Pattern(PatternRecord {
            logical: 0,
            length: 50,
            count: 4,
            stride: 200,
            physical: 600,
            stamp_first: 1,
            stamp_last: 4,
            sequence_first: 1,
            writer: 1,
            data_crc: crc_of_blocks(&data(200), 50),
        });
        let mut records: Vec<Record> =
            log.chunks(100).enumerate().map(|(i, bytes)| write((i * 100) as u64, bytes)).collect();
        records.push(pattern);
        let table = LogChecksums::from_records(&records);
        let bytes = encoded(&table);
        let received = LogChecksums::decode(&mut Reader::new(&bytes, "test")).unwrap();
        assert_eq!(encoded(&received), bytes);
        assert_eq!(received.unit_count(), 2);
        let mut damaged = log.clone();
        damaged[250] ^= 1;
        for table in [&built, &received] {
            assert_eq!(check(table, &log, 100, 300, VerifyReads::Whole).unwrap(), log[100..300]);
            let error = check(table, &damaged, 100, 300, VerifyReads::Whole).unwrap_err();
            assert!(error.to_string().contains("100 bytes at offset 200 fail their checksum"), "{error}");
        }
    }

    #[test]
    fn a_damaged_table_in_a_message_is_refused_not_trusted() {
        let (_, table) = log_and_table(100, 3);
        let good = encoded(&table);
        let decode = |bytes: &[u8]| LogChecksums::decode(&mut Reader::new(bytes, "test")).map(|_| ());
        // Units: count at 0, first unit at 4 (physical, length, count, crc
        // index, pattern flag), then the CRC count at 33.
        let mut cases: Vec<(Vec<u8>, &str)> = Vec::new();
        let mut edit = |at: usize, value: &[u8], why: &'static str| {
            let mut bytes = good.clone();
            bytes[at..at + value.len()].copy_from_slice(value);
            cases.push((bytes, why));
        };
        edit(0, &u32::MAX.to_le_bytes(), "do not fit");
        edit(4 + 8, &0u64.to_le_bytes(), "unit of");
        edit(4 + 16, &u64::MAX.to_le_bytes(), "unit of");
        edit(4 + 24, &1u32.to_le_bytes(), "names CRCs past");
        edit(4 + 28, &[2], "pattern flag 2");
        edit(33, &u32::MAX.to_le_bytes(), "do not fit");
        for (bytes, why) in cases {
            let error = decode(&bytes).unwrap_err();
            assert_eq!(error.kind(), crate::error::ErrorKind::Corrupt);
            assert!(error.to_string().contains(why), "{why}: {error}");
        }
        for cut in 0..good.len() {
            assert!(decode(&good[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn data_crc_is_crc32c_at_every_length_and_alignment() {
        // The standard check value of CRC-32C (CRC-32/ISCSI).
        assert_eq!(data_crc(b"123456789"), 0xe306_9283);
        // Lengths across every SIMD fold width and tail, at every offset
        // within a 64-byte line: the records writers CRC'd with crc32c.
        let bytes = data(1 << 20);
        for length in (0..=1100).chain([4095, 4096, 4097, 47001, 65536, (1 << 20) - 64]) {
            for offset in 0..64 {
                let slice = &bytes[offset..offset + length];
                assert_eq!(data_crc(slice), crc32c::crc32c(slice), "{length} bytes at {offset}");
            }
        }
    }

    #[test]
    fn runs_of_records_share_one_unit() {
        let (_, table) = log_and_table(100, 50);
        assert_eq!(table.unit_count(), 1);
        assert_eq!(table.crcs.len(), 50);
    }

    #[test]
    fn a_flipped_byte_fails_reads_that_hold_its_record_whole() {
        let (mut log, table) = log_and_table(100, 10);
        log[345] ^= 0x20;
        // Record 3 is [300, 400): a read holding it fails and names its offset.
        let error = check(&table, &log, 250, 450, VerifyReads::Whole).unwrap_err();
        assert_eq!(error.kind(), crate::error::ErrorKind::Corrupt);
        assert!(error.to_string().contains("data log L: 100 bytes at offset 300"), "{error}");
        // A read holding only part of it is not checked, unless always.
        assert!(check(&table, &log, 320, 360, VerifyReads::Whole).is_ok());
        assert!(check(&table, &log, 320, 360, VerifyReads::Always).is_err());
        assert!(check(&table, &log, 0, 1000, VerifyReads::Off).is_ok());
        // Records elsewhere still read.
        assert!(check(&table, &log, 400, 1000, VerifyReads::Always).is_ok());
    }

    #[test]
    fn always_returns_the_verified_bytes_of_a_partial_read() {
        let (log, table) = log_and_table(100, 10);
        assert_eq!(check(&table, &log, 150, 170, VerifyReads::Always).unwrap(), log[150..170]);
    }

    fn pattern_log(blocks: usize, length: usize) -> (Vec<u8>, LogChecksums) {
        let log = data(blocks * length);
        let record = Record::Pattern(PatternRecord {
            logical: 0,
            length: length as u64,
            stride: (length * 4) as u64,
            count: blocks as u64,
            physical: 0,
            stamp_first: 1,
            stamp_last: 2,
            sequence_first: 0,
            writer: 1,
            data_crc: crc_of_blocks(&log, length as u64),
        });
        (log, LogChecksums::from_records(&[record]))
    }

    #[test]
    fn a_pattern_is_checked_whole_or_block_by_block_in_order() {
        let (mut log, table) = pattern_log(8, 64);
        assert!(check(&table, &log, 0, 512, VerifyReads::Whole).is_ok());
        for block in 0..8 {
            assert!(check(&table, &log, block * 64, block * 64 + 64, VerifyReads::Whole).is_ok());
        }
        log[200] ^= 1;
        assert!(check(&table, &log, 0, 512, VerifyReads::Whole).is_err());
        // In order, the read of the last block fails.
        for block in 0..7 {
            assert!(check(&table, &log, block * 64, block * 64 + 64, VerifyReads::Whole).is_ok());
        }
        let error = check(&table, &log, 448, 512, VerifyReads::Whole).unwrap_err();
        assert!(error.to_string().contains("512 bytes at offset 0"), "{error}");
        // Out of order, `whole` cannot tell; `always` can, at once.
        assert!(check(&table, &log, 448, 512, VerifyReads::Whole).is_ok());
        assert!(check(&table, &log, 0, 64, VerifyReads::Always).is_err());
    }

    /// Reads `[from, to)` of `log` through [`LogChecksums::read_checked_in`]
    /// with pieces of at most `bound` bytes; returns the bytes (or the
    /// error) and the (offset, length) of every fill, in order.
    fn read_split(
        table: &LogChecksums,
        log: &[u8],
        from: usize,
        to: usize,
        mode: VerifyReads,
        bound: u64,
    ) -> (Result<Vec<u8>>, Vec<(u64, usize)>) {
        let fills = std::cell::RefCell::new(Vec::new());
        let fill = |out: &mut [u8], at: u64| -> Result<()> {
            fills.borrow_mut().push((at, out.len()));
            out.copy_from_slice(&log[at as usize..at as usize + out.len()]);
            Ok(())
        };
        let read_at = |out: &mut [u8], at: u64| -> Result<()> {
            out.copy_from_slice(&log[at as usize..at as usize + out.len()]);
            Ok(())
        };
        let mut buf = vec![0xEE; to - from];
        let result = table.read_checked_in(bound, &mut buf, from as u64, mode, "data log L", &fill, &read_at);
        (result.map(|()| buf), fills.into_inner())
    }

    #[test]
    fn a_split_read_checks_each_piece_as_it_lands() {
        let (mut log, table) = log_and_table(100, 60);
        let (read, fills) = read_split(&table, &log, 250, 5750, VerifyReads::Whole, 1000);
        assert_eq!(read.unwrap(), log[250..5750]);
        // Cut at record boundaries, at most 1000 bytes, in order, covering the read.
        assert_eq!(fills[0], (250, 950));
        assert_eq!(fills[1], (1200, 1000));
        assert_eq!(fills.last(), Some(&(5200, 550)));
        assert!(fills.windows(2).all(|pair| pair[0].0 + pair[0].1 as u64 == pair[1].0));
        // A flipped byte on either side of the first cut fails the read as
        // soon as its piece lands, naming its record.
        for (flipped, record, fills_made) in [(1199, 1100, 1), (1250, 1200, 2), (4321, 4300, 5)] {
            log[flipped] ^= 0x20;
            let (read, fills) = read_split(&table, &log, 250, 5750, VerifyReads::Whole, 1000);
            let error = read.unwrap_err();
            assert_eq!(error.kind(), crate::error::ErrorKind::Corrupt);
            assert!(
                error.to_string().contains(&format!("data log L: 100 bytes at offset {record} fail")),
                "{error}"
            );
            assert_eq!(fills.len(), fills_made, "byte {flipped}: {fills:?}");
            log[flipped] ^= 0x20;
        }
    }

    #[test]
    fn a_record_longer_than_a_piece_is_summed_as_its_parts_land() {
        let (mut log, table) = log_and_table(1000, 6);
        let (read, fills) = read_split(&table, &log, 1500, 4500, VerifyReads::Whole, 256);
        assert_eq!(read.unwrap(), log[1500..4500]);
        // The head and tail, records held in part, are one fill each; the
        // records held whole are filled 256 bytes at a time.
        let expected: Vec<(u64, usize)> = [(1500, 500)]
            .into_iter()
            .chain(
                (2000..4000)
                    .step_by(1000)
                    .flat_map(|r| [(r, 256), (r + 256, 256), (r + 512, 256), (r + 768, 232)]),
            )
            .chain([(4000, 500)])
            .collect();
        assert_eq!(fills, expected);
        log[3500] ^= 1;
        let (read, fills) = read_split(&table, &log, 0, 6000, VerifyReads::Whole, 256);
        let error = read.unwrap_err();
        assert!(error.to_string().contains("1000 bytes at offset 3000 fail"), "{error}");
        assert_eq!(fills.len(), 4 * 4, "records 0 to 3, four parts each");
        // `always` reads the damaged record whole even when a read holds a part.
        assert!(read_split(&table, &log, 3400, 3600, VerifyReads::Always, 256).0.is_err());
        assert!(read_split(&table, &log, 3400, 3600, VerifyReads::Whole, 256).0.is_ok());
    }

    #[test]
    fn a_pattern_a_split_read_holds_whole_is_checked_across_its_pieces() {
        for (blocks, length, bound) in [(8, 64, 100), (4, 300, 100)] {
            let (mut log, table) = pattern_log(blocks, length);
            let (read, fills) = read_split(&table, &log, 0, blocks * length, VerifyReads::Whole, bound);
            assert_eq!(read.unwrap(), log);
            assert!(fills.len() >= blocks, "{fills:?}");
            log[length + 7] ^= 1;
            let error =
                read_split(&table, &log, 0, blocks * length, VerifyReads::Whole, bound).0.unwrap_err();
            let whole = blocks * length;
            assert!(error.to_string().contains(&format!("{whole} bytes at offset 0 fail")), "{error}");
            // The read kept its own running CRC: the log's sequential
            // progress (other reads' business) was not touched.
            assert!(table.progress.lock().unwrap().is_none());
        }
    }

    /// Layouts of one log: (log bytes, records).
    fn layouts() -> Vec<(Vec<u8>, Vec<Record>)> {
        let pattern = |at: usize, blocks: usize, length: usize, log: &[u8]| {
            Record::Pattern(PatternRecord {
                logical: 0,
                length: length as u64,
                stride: (length * 4) as u64,
                count: blocks as u64,
                physical: at as u64,
                stamp_first: 1,
                stamp_last: 2,
                sequence_first: 0,
                writer: 1,
                data_crc: crc_of_blocks(&log[at..at + blocks * length], length as u64),
            })
        };
        let runs = |log: &[u8], at: usize, length: usize, count: usize| -> Vec<Record> {
            (0..count)
                .map(|i| write((at + i * length) as u64, &log[at + i * length..at + (i + 1) * length]))
                .collect()
        };
        let log = data(3000);
        // Short records, long records, a gap, two patterns (short and long blocks).
        let mut mixed = runs(&log, 0, 70, 10);
        mixed.extend(runs(&log, 700, 400, 2));
        mixed.push(pattern(1600, 6, 50, &log));
        mixed.push(pattern(1900, 3, 300, &log));
        vec![(log.clone(), runs(&log, 0, 100, 30)), (log.clone(), mixed)]
    }

    /// Whatever the pieces, a split read returns what one read checked
    /// whole returns: the same bytes, or the same first error.
    #[test]
    fn a_split_read_checks_exactly_what_one_whole_read_checks() {
        for (clean, records) in layouts() {
            for flipped in (0..clean.len()).step_by(41).map(Some).chain([None]) {
                let mut log = clean.clone();
                if let Some(at) = flipped {
                    log[at] ^= 0x10;
                }
                for (from, to) in [(0, 3000), (35, 2990), (650, 2500), (1610, 2800), (1000, 1300)] {
                    for mode in [VerifyReads::Whole, VerifyReads::Always] {
                        let one = check(&LogChecksums::from_records(&records), &log, from, to, mode);
                        for bound in [64, 100, 256, 1000] {
                            let table = LogChecksums::from_records(&records);
                            let (split, _) = read_split(&table, &log, from, to, mode, bound);
                            let what = format!("{flipped:?} {from}..{to} {mode:?} bound {bound}");
                            match (&one, &split) {
                                (Ok(a), Ok(b)) => assert_eq!(a, b, "{what}"),
                                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{what}"),
                                _ => panic!("{what}: one read {one:?}, split {split:?}"),
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn always_checks_a_pattern_once_then_block_by_block() {
        let (mut log, table) = pattern_log(8, 64);
        assert_eq!(check(&table, &log, 70, 90, VerifyReads::Always).unwrap(), log[70..90]);
        assert_eq!(table.lock_blocks().len(), 1);
        // Damage after the pattern was checked is still caught, in its block.
        log[300] ^= 1;
        let error = check(&table, &log, 290, 310, VerifyReads::Always).unwrap_err();
        assert!(error.to_string().contains("64 bytes at offset 256"), "{error}");
        assert!(check(&table, &log, 0, 256, VerifyReads::Always).is_ok());
    }
}
