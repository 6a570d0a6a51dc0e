//! The merged index: which data log holds each byte of the logical file.
//!
//! Records from every index log are applied in stamp order into a map of
//! disjoint extents, so "newest wins" at byte granularity falls out of a
//! plain overwrite: a later write splits whatever it overlaps at its
//! boundaries and replaces the middle. Lookups search the ordered map
//! (logarithmic), never scan it.

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::format::index_log::Record;

/// Largest offset + length a file may reach (POSIX off_t is signed).
pub const FILE_SIZE_MAX: u64 = i64::MAX as u64;

/// A data log, as numbered by whoever builds the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LogRef(pub u32);

/// `length` bytes stored at `physical` in data log `log`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub length: u64,
    pub log: LogRef,
    pub physical: u64,
}

/// Where one piece of a requested range comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Never written (or cut by a truncate and grown again): reads as zeros.
    Hole,
    Data {
        log: LogRef,
        physical: u64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub logical: u64,
    pub length: u64,
    pub source: Source,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergedIndex {
    /// Disjoint extents keyed by logical start.
    extents: BTreeMap<u64, Extent>,
    eof: u64,
    /// Merge logically and physically contiguous extents of one log.
    compress_contiguous: bool,
}

impl MergedIndex {
    pub fn new(compress_contiguous: bool) -> MergedIndex {
        MergedIndex { extents: BTreeMap::new(), eof: 0, compress_contiguous }
    }

    /// Builds an index from every log's records: all records are ordered by
    /// (stamp, writer, sequence) and applied oldest first.
    pub fn from_logs<'a>(
        logs: impl IntoIterator<Item = (LogRef, &'a [Record])>,
        compress_contiguous: bool,
    ) -> MergedIndex {
        let logs: Vec<(LogRef, &[Record])> = logs.into_iter().collect();
        if let Some(index) = MergedIndex::without_overlaps(&logs, compress_contiguous) {
            return index;
        }
        let mut ordered: Vec<(LogRef, &Record)> =
            logs.iter().flat_map(|&(log, records)| records.iter().map(move |record| (log, record))).collect();
        ordered.sort_unstable_by_key(|(_, record)| record.order_key());
        let mut index = MergedIndex::new(compress_contiguous);
        for (log, record) in ordered {
            index.apply(log, record);
        }
        index
    }

    /// The common checkpoint case, built in one pass: only writes, none
    /// overlapping, so time order cannot matter. None if the case does not hold.
    fn without_overlaps(logs: &[(LogRef, &[Record])], compress_contiguous: bool) -> Option<MergedIndex> {
        let total = logs.iter().map(|(_, records)| records.len()).sum();
        let mut writes: Vec<(u64, Extent)> = Vec::with_capacity(total);
        for &(log, records) in logs {
            for record in records {
                let Record::Write(write) = record else { return None };
                let end = write.logical.saturating_add(write.length).min(FILE_SIZE_MAX);
                let length = end.saturating_sub(write.logical);
                writes.push((write.logical, Extent { length, log, physical: write.physical }));
            }
        }
        writes.sort_unstable_by_key(|(start, _)| *start);
        let mut eof = 0u64;
        let mut kept = 0;
        for index in 0..writes.len() {
            let (start, extent) = writes[index];
            if start < eof && extent.length > 0 {
                return None;
            }
            eof = eof.max(start + extent.length).max(start);
            if extent.length == 0 {
                continue;
            }
            if kept > 0 {
                let (previous_start, previous) = &mut writes[kept - 1];
                if compress_contiguous && follows(*previous_start, previous, start, &extent) {
                    previous.length += extent.length;
                    continue;
                }
            }
            writes[kept] = (start, extent);
            kept += 1;
        }
        writes.truncate(kept);
        let index = MergedIndex { extents: writes.into_iter().collect(), eof, compress_contiguous };
        debug_assert!(index.check_disjoint());
        Some(index)
    }

    pub fn apply(&mut self, log: LogRef, record: &Record) {
        match record {
            Record::Write(write) => self.apply_write(write.logical, write.length, log, write.physical),
            Record::Truncate(truncate) => self.apply_truncate(truncate.size),
        }
    }

    /// Records that `[logical, logical + length)` now lives at `physical` in
    /// `log`, replacing whatever was there.
    pub fn apply_write(&mut self, logical: u64, length: u64, log: LogRef, physical: u64) {
        let end = logical.saturating_add(length).min(FILE_SIZE_MAX);
        self.eof = self.eof.max(end);
        if end <= logical {
            return;
        }
        self.punch(logical, end);
        self.extents.insert(logical, Extent { length: end - logical, log, physical });
        if self.compress_contiguous {
            self.coalesce_around(logical);
        }
        debug_assert!(self.check_disjoint());
    }

    /// Cuts the file to `size`: bytes past it are gone even if it grows again.
    pub fn apply_truncate(&mut self, size: u64) {
        let size = size.min(FILE_SIZE_MAX);
        self.punch(size, u64::MAX);
        self.eof = size;
    }

    /// Removes `[start, end)` from the map, trimming extents that straddle it.
    fn punch(&mut self, start: u64, end: u64) {
        if let Some((&before_start, &before)) = self.extents.range(..start).next_back() {
            let before_end = before_start + before.length;
            if before_end > start {
                self.extents.get_mut(&before_start).expect("present").length = start - before_start;
                if before_end > end {
                    let cut = end - before_start;
                    self.extents.insert(
                        end,
                        Extent { length: before_end - end, log: before.log, physical: before.physical + cut },
                    );
                    return;
                }
            }
        }
        let inside: Vec<u64> = self.extents.range(start..end).map(|(&key, _)| key).collect();
        for key in inside {
            let extent = self.extents.remove(&key).expect("present");
            let extent_end = key + extent.length;
            if extent_end > end {
                let cut = end - key;
                self.extents.insert(
                    end,
                    Extent { length: extent_end - end, log: extent.log, physical: extent.physical + cut },
                );
            }
        }
    }

    fn coalesce_around(&mut self, key: u64) {
        let mut key = key;
        if let Some((&previous_key, &previous)) = self.extents.range(..key).next_back() {
            let current = self.extents[&key];
            if follows(previous_key, &previous, key, &current) {
                self.extents.remove(&key);
                self.extents.get_mut(&previous_key).expect("present").length += current.length;
                key = previous_key;
            }
        }
        let current = self.extents[&key];
        let next_key = key + current.length;
        if let Some(&next) = self.extents.get(&next_key)
            && follows(key, &current, next_key, &next)
        {
            self.extents.remove(&next_key);
            self.extents.get_mut(&key).expect("present").length += next.length;
        }
    }

    /// The logical file size.
    pub fn eof(&self) -> u64 {
        self.eof
    }

    pub fn extent_count(&self) -> usize {
        self.extents.len()
    }

    /// Every stored extent in logical order.
    pub fn extents(&self) -> impl Iterator<Item = (u64, &Extent)> {
        self.extents.iter().map(|(&start, extent)| (start, extent))
    }

    /// Bytes the index occupies in memory (an estimate: B-tree nodes
    /// hold up to 11 entries).
    pub fn memory_bytes(&self) -> usize {
        let entry = std::mem::size_of::<u64>() + std::mem::size_of::<Extent>();
        std::mem::size_of::<MergedIndex>() + self.extents.len() * entry * 3 / 2
    }

    /// Bytes covered by data (the rest below EOF are holes).
    pub fn data_bytes(&self) -> u64 {
        self.extents.values().map(|extent| extent.length).sum()
    }

    /// The pieces covering `[offset, offset + length)` clipped at EOF, holes
    /// included, in order.
    pub fn lookup(&self, offset: u64, length: u64) -> Vec<Piece> {
        let mut pieces = Vec::new();
        self.lookup_into(offset, length, &mut pieces);
        pieces
    }

    /// Like [`lookup`](Self::lookup), reusing the caller's buffer.
    pub fn lookup_into(&self, offset: u64, length: u64, pieces: &mut Vec<Piece>) {
        pieces.clear();
        let end = offset.saturating_add(length).min(self.eof);
        if offset >= end {
            return;
        }
        let mut position = offset;
        let first = self.extents.range(..=offset).next_back().map(|(&k, _)| k).unwrap_or(offset);
        for (&start, extent) in self.extents.range((Bound::Included(first), Bound::Excluded(end))) {
            let extent_end = start + extent.length;
            if extent_end <= position {
                continue;
            }
            if start > position {
                pieces.push(Piece { logical: position, length: start - position, source: Source::Hole });
                position = start;
            }
            let piece_end = extent_end.min(end);
            pieces.push(Piece {
                logical: position,
                length: piece_end - position,
                source: Source::Data { log: extent.log, physical: extent.physical + (position - start) },
            });
            position = piece_end;
        }
        if position < end {
            pieces.push(Piece { logical: position, length: end - position, source: Source::Hole });
        }
    }

    fn check_disjoint(&self) -> bool {
        let mut previous_end = 0;
        for (&start, extent) in &self.extents {
            if start < previous_end || extent.length == 0 {
                return false;
            }
            previous_end = start + extent.length;
        }
        true
    }
}

fn follows(previous_start: u64, previous: &Extent, start: u64, extent: &Extent) -> bool {
    previous.log == extent.log
        && previous_start + previous.length == start
        && previous.physical + previous.length == extent.physical
}

#[cfg(test)]
mod tests;
