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
                self.check_pattern(position, unit, buf, physical, mode, label, read_at)?;
            } else {
                self.check_run(unit, buf, physical, mode, label, read_at)?;
            }
        }
        Ok(())
    }

    fn check_run(
        &self,
        unit: &Unit,
        buf: &mut [u8],
        physical: u64,
        mode: VerifyReads,
        label: &str,
        read_at: &ReadAt<'_>,
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
                check_crc(data_crc(bytes), expected, start, unit.length, label)?;
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
    ) -> Result<()> {
        let end = physical + buf.len() as u64;
        let bytes = unit.count * unit.length;
        if unit.physical >= physical && unit.end() <= end {
            let from = (unit.physical - physical) as usize;
            let crc = crc_of_blocks(&buf[from..from + bytes as usize], unit.length);
            return check_crc(crc, unit.crc, unit.physical, bytes, label);
        }
        if mode == VerifyReads::Always {
            return self.check_pattern_blocks(position, unit, buf, physical, label, read_at);
        }
        // Blocks held whole, in order, continue the sequential check.
        let first = physical.saturating_sub(unit.physical).div_ceil(unit.length);
        let last = ((end.min(unit.end()) - unit.physical) / unit.length).min(unit.count);
        if first >= last {
            return Ok(());
        }
        let mut progress = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
        let mut running = match *progress {
            _ if first == 0 => 0,
            Some((known, next, running)) if known == position && next == first => running,
            // Out of order: this pass cannot check the pattern.
            _ => {
                *progress = None;
                return Ok(());
            }
        };
        for block in first..last {
            let start = (unit.physical + block * unit.length - physical) as usize;
            let crc = data_crc(&buf[start..start + unit.length as usize]);
            running = crc32c::crc32c_append(running, &crc.to_le_bytes());
        }
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
    fn check_pattern_blocks(
        &self,
        position: usize,
        unit: &Unit,
        buf: &mut [u8],
        physical: u64,
        label: &str,
        read_at: &ReadAt<'_>,
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
                check_crc(data_crc(bytes), blocks[block as usize], start, unit.length, label)?;
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
