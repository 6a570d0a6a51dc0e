//! The merged index: which data log holds each byte of the logical file.
//!
//! Two layers. The *frozen* layer is built in one pass from the oldest
//! records that do not overlap one another (for a checkpoint, all of them):
//! runs of strided writes are found and grouped by stride, so N writers × K
//! records cost N slots and a lookup is arithmetic. Records after the first
//! overlap or truncate go, in stamp order, into the *overlay*: an ordered map
//! of disjoint extents where newest wins at byte granularity. The overlay
//! shadows the frozen layer; a truncate also cuts the frozen layer at a limit.

mod frozen;
mod overlay;
pub mod pattern;

use crate::format::index_log::Record;
use frozen::Frozen;
pub(crate) use frozen::{Group, Slot};
use overlay::Overlay;
use pattern::detect_runs;

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
    frozen: Frozen,
    /// Frozen bytes at or past this were cut by a truncate.
    frozen_limit: u64,
    overlay: Overlay,
    eof: u64,
    /// Merge logically and physically contiguous extents of one log.
    compress_contiguous: bool,
}

/// An index's layers, as a global index stores them.
pub(crate) struct Layers<'a> {
    pub frozen_extents: Vec<(u64, Extent)>,
    pub groups: &'a [Group],
    pub frozen_limit: u64,
    pub overlay: Vec<(u64, Extent)>,
}

/// How many of the oldest records first go into the frozen layer when the
/// whole set does not fit it; doubled until it fails.
const PREFIX_PROBE_START: usize = 64;

impl MergedIndex {
    pub fn new(compress_contiguous: bool) -> MergedIndex {
        MergedIndex {
            frozen: Frozen::default(),
            frozen_limit: u64::MAX,
            overlay: Overlay::default(),
            eof: 0,
            compress_contiguous,
        }
    }

    /// Builds an index from every log's records, as if all were applied
    /// in (stamp, writer, sequence) order, oldest first.
    pub fn from_logs<'a>(
        logs: impl IntoIterator<Item = (LogRef, &'a [Record])>,
        compress_contiguous: bool,
    ) -> MergedIndex {
        let logs: Vec<(LogRef, &[Record])> = logs.into_iter().collect();
        let has_truncate =
            logs.iter().any(|(_, records)| records.iter().any(|r| matches!(r, Record::Truncate(_))));
        if !has_truncate && let Some(frozen) = build_frozen(&logs, None, compress_contiguous) {
            return MergedIndex::with_frozen(frozen, compress_contiguous);
        }
        // Time order decides from the first overlap on. The oldest records
        // that still do not overlap (usually all but a few late rewrites)
        // stay compact; the rest are applied one by one.
        let mut order: Vec<(u64, u64, u64, u32, u32)> = Vec::new();
        for (position, (_, records)) in logs.iter().enumerate() {
            for (i, record) in records.iter().enumerate() {
                let (stamp, writer, sequence) = record.order_key();
                order.push((stamp, writer, sequence, position as u32, i as u32));
            }
        }
        order.sort_unstable();
        let usable = order
            .iter()
            .position(|&(_, _, _, log, i)| matches!(logs[log as usize].1[i as usize], Record::Truncate(_)))
            .unwrap_or(order.len());
        let (taken, frozen) = largest_frozen_prefix(&logs, &order[..usable], compress_contiguous);
        let mut index = MergedIndex::with_frozen(frozen.unwrap_or_default(), compress_contiguous);
        for &(_, _, _, log, i) in &order[taken..] {
            let (log_ref, records) = logs[log as usize];
            index.apply(log_ref, &records[i as usize]);
        }
        index.compact();
        index
    }

    fn with_frozen(frozen: Frozen, compress_contiguous: bool) -> MergedIndex {
        MergedIndex { eof: frozen.end(), frozen, ..MergedIndex::new(compress_contiguous) }
    }

    /// Rebuilds an index from its encoded layers (a global index).
    pub(crate) fn from_layers(
        frozen_extents: Vec<(u64, Extent)>,
        groups: Vec<Group>,
        frozen_limit: u64,
        overlay: impl IntoIterator<Item = (u64, Extent)>,
        eof: u64,
        compress_contiguous: bool,
    ) -> Option<MergedIndex> {
        let frozen = Frozen::assemble(frozen_extents, groups)?;
        let mut index =
            MergedIndex { frozen_limit, eof, ..MergedIndex::with_frozen(frozen, compress_contiguous) };
        for (start, extent) in overlay {
            index.overlay.write(start, extent, false);
        }
        index.eof = eof;
        Some(index)
    }

    /// The layers, for encoding.
    pub(crate) fn layers(&self) -> Layers<'_> {
        let (frozen_extents, groups) = self.frozen.parts();
        let overlay = self.overlay.extents.iter().map(|(&start, &extent)| (start, extent)).collect();
        Layers { frozen_extents, groups, frozen_limit: self.frozen_limit, overlay }
    }

    /// Without groups to keep, folds the overlay into the frozen layer,
    /// where an extent costs 32 bytes instead of a B-tree slot.
    fn compact(&mut self) {
        if self.overlay.is_empty() || self.frozen.has_groups() {
            return;
        }
        let mut extents = Vec::with_capacity(self.frozen.entry_count() + self.overlay.extents.len());
        self.each_data(0, self.eof, |start, length, log, physical| {
            extents.push((start, Extent { length, log, physical }));
        });
        self.frozen = Frozen::assemble(extents, Vec::new()).expect("pieces of one index are disjoint");
        self.overlay = Overlay::default();
        self.frozen_limit = u64::MAX;
    }

    pub fn apply(&mut self, log: LogRef, record: &Record) {
        match record {
            Record::Write(write) => self.apply_write(write.logical, write.length, log, write.physical),
            Record::Truncate(truncate) => self.apply_truncate(truncate.size),
            Record::Pattern(pattern) => {
                for (logical, length, physical) in pattern::expand_pattern(pattern) {
                    self.apply_write(logical, length, log, physical);
                }
            }
        }
    }

    /// Records that `[logical, logical + length)` now lives at `physical` in
    /// `log`, replacing whatever was there.
    pub fn apply_write(&mut self, logical: u64, length: u64, log: LogRef, physical: u64) {
        let end = logical.saturating_add(length).min(FILE_SIZE_MAX);
        // An empty write changes nothing, not even the size (POSIX).
        if end <= logical {
            return;
        }
        self.eof = self.eof.max(end);
        self.overlay.write(
            logical,
            Extent { length: end - logical, log, physical },
            self.compress_contiguous,
        );
    }

    /// Cuts the file to `size`: bytes past it are gone even if it grows again.
    pub fn apply_truncate(&mut self, size: u64) {
        let size = size.min(FILE_SIZE_MAX);
        self.overlay.punch(size, u64::MAX);
        self.frozen_limit = self.frozen_limit.min(size);
        self.eof = size;
    }

    /// The logical file size.
    pub fn eof(&self) -> u64 {
        self.eof
    }

    /// Extents a reader could be pointed at, counting each block of a
    /// pattern (what a plain index would hold).
    #[cfg(test)]
    pub fn extent_count(&self) -> usize {
        let mut count = 0;
        self.each_data(0, self.eof, |_, _, _, _| count += 1);
        count
    }

    /// Entries the index stores: extents plus pattern slots.
    pub fn entry_count(&self) -> usize {
        self.frozen.entry_count() + self.overlay.extents.len()
    }

    /// Every piece of data in logical order, patterns expanded.
    pub fn extents(&self) -> Vec<(u64, Extent)> {
        let mut out = Vec::new();
        self.each_data(0, self.eof, |start, length, log, physical| {
            out.push((start, Extent { length, log, physical }));
        });
        out
    }

    /// Bytes covered by data (the rest below EOF are holes).
    pub fn data_bytes(&self) -> u64 {
        // Without walking the groups: frozen total, plus the overlay, less
        // the frozen bytes the overlay shadows.
        let mut frozen = self.frozen.data_bytes();
        if self.frozen_limit < self.frozen.end() {
            frozen = 0;
            self.frozen.each(0, self.frozen_limit, |_, length, _, _| frozen += length);
        }
        let mut overlay = 0;
        let mut shadowed = 0;
        for (&start, extent) in &self.overlay.extents {
            overlay += extent.length;
            let end = (start + extent.length).min(self.frozen_limit);
            self.frozen.each(start, end, |_, length, _, _| shadowed += length);
        }
        frozen + overlay - shadowed
    }

    /// Heap bytes the index holds (frozen layer exact from capacities;
    /// overlay estimated: B-tree nodes hold up to 11 entries, about 2/3 full).
    pub fn memory_bytes(&self) -> usize {
        let overlay_entry = size_of::<u64>() + size_of::<Extent>();
        size_of::<MergedIndex>()
            + self.frozen.memory_bytes()
            + self.overlay.extents.len() * overlay_entry * 3 / 2
    }

    /// Calls `found(logical, length, log, physical)` for every piece of
    /// data in `[from, to)`, in order: the overlay's, and the frozen
    /// layer's where the overlay has none.
    fn each_data(&self, from: u64, to: u64, mut found: impl FnMut(u64, u64, LogRef, u64)) {
        let frozen_to = to.min(self.frozen_limit);
        let mut position = from;
        let frozen_fill = |gap_from: u64, gap_to: u64, found: &mut dyn FnMut(u64, u64, LogRef, u64)| {
            self.frozen.each(gap_from, gap_to.min(frozen_to), |start, length, log, physical| {
                found(start, length, log, physical)
            });
        };
        self.overlay.each(from, to, |start, length, extent, skip| {
            if start > position {
                frozen_fill(position, start, &mut found);
            }
            found(start, length, extent.log, extent.physical + skip);
            position = start + length;
        });
        if position < to {
            frozen_fill(position, to, &mut found);
        }
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
        self.each_data(offset, end, |start, length, log, physical| {
            if start > position {
                pieces.push(Piece { logical: position, length: start - position, source: Source::Hole });
            }
            pieces.push(Piece { logical: start, length, source: Source::Data { log, physical } });
            position = start + length;
        });
        if position < end {
            pieces.push(Piece { logical: position, length: end - position, source: Source::Hole });
        }
    }
}

/// Finds runs in the first `prefix[i]` records of each log (all of them
/// when `prefix` is None) and builds the frozen layer from them.
fn build_frozen(
    logs: &[(LogRef, &[Record])],
    prefix: Option<&[usize]>,
    compress_contiguous: bool,
) -> Option<Frozen> {
    let mut runs = Vec::new();
    for (position, &(log, records)) in logs.iter().enumerate() {
        let taken = prefix.map_or(records.len(), |prefix| prefix[position]);
        detect_runs(log, &records[..taken], &mut runs);
    }
    Frozen::build(runs, compress_contiguous)
}

/// The longest prefix of `order` (oldest first, no truncates) whose records
/// fit a frozen layer, found by doubling then bisecting. A prefix counts
/// only if it holds, for each log, a leading run of that log's records.
fn largest_frozen_prefix(
    logs: &[(LogRef, &[Record])],
    order: &[(u64, u64, u64, u32, u32)],
    compress_contiguous: bool,
) -> (usize, Option<Frozen>) {
    let attempt = |taken: usize| -> Option<Frozen> {
        let mut prefix = vec![0usize; logs.len()];
        for &(_, _, _, log, i) in &order[..taken] {
            let slot = &mut prefix[log as usize];
            if *slot != i as usize {
                return None;
            }
            *slot += 1;
        }
        build_frozen(logs, Some(&prefix), compress_contiguous)
    };
    let mut good = (0, None);
    let mut probe = PREFIX_PROBE_START.min(order.len());
    let mut bad = order.len() + 1;
    while probe > good.0 {
        match attempt(probe) {
            Some(frozen) => {
                good = (probe, Some(frozen));
                if probe == order.len() {
                    return good;
                }
                probe = (probe * 2).min(order.len());
            }
            None => {
                bad = probe;
                break;
            }
        }
    }
    let (mut low, mut high) = (good.0, bad);
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        match attempt(middle) {
            Some(frozen) => {
                good = (middle, Some(frozen));
                low = middle;
            }
            None => high = middle,
        }
    }
    good
}

fn follows(previous_start: u64, previous: &Extent, start: u64, extent: &Extent) -> bool {
    previous.log == extent.log
        && previous_start + previous.length == start
        && previous.physical + previous.length == extent.physical
}

#[cfg(test)]
mod tests;
