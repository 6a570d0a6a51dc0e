//! The compact layer: built once from writes that do not overlap, so their
//! order cannot matter. Single writes are extents in a sorted vector;
//! runs that share a stride form a [`Group`] whose lookup is arithmetic:
//! block = (offset - start) / stride, then the slot that owns the remainder.
//! N writers × K strided records become one group of N slots.

use super::pattern::Run;
use super::{Extent, LogRef};

/// Marks a span entry that is a group (its `physical` is the group number).
const GROUP: u32 = u32::MAX;

/// Slots a group takes before runs start a new one: bounds the cost of
/// placing a slot and keeps lookups logarithmic.
const SLOTS_MAX: usize = 1 << 16;

/// How far a new slot's neighbours are checked for a shared offset class.
const CLASS_SCAN_MAX: usize = 64;

/// An extent or a whole group, keyed by its start in `Frozen::starts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    length: u64,
    physical: u64,
    log: u32,
}

/// Runs with one stride, interleaved: slot `s` holds blocks
/// `first_block .. first_block + count`; block `b` of it covers
/// `[start + b * stride + offset, + length)` at `physical + (b - first_block) * length`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Group {
    pub start: u64,
    pub stride: u64,
    pub end: u64,
    /// Sorted by offset. Slots whose offset ranges meet have the same
    /// offset and length and disjoint blocks (a writer resuming a run in a
    /// new log); otherwise offset ranges are disjoint.
    pub slots: Vec<Slot>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    pub offset: u64,
    pub length: u64,
    pub first_block: u64,
    pub count: u64,
    pub physical: u64,
    pub log: LogRef,
}

impl Slot {
    fn holds_block(&self, block: u64) -> bool {
        block >= self.first_block && block - self.first_block < self.count
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Frozen {
    starts: Vec<u64>,
    spans: Vec<Span>,
    groups: Vec<Group>,
    end: u64,
    data_bytes: u64,
}

impl Group {
    fn new(run: &Run) -> Group {
        let slot = Slot {
            offset: 0,
            length: run.length,
            first_block: 0,
            count: run.count,
            physical: run.physical,
            log: run.log,
        };
        Group { start: run.logical, stride: run.stride, end: run.end(), slots: vec![slot] }
    }

    /// Places `count` blocks of `run` (a run of this stride, or a single
    /// write) in the group if they fit beside every slot already there.
    fn place(&mut self, run: &Run) -> bool {
        if run.logical < self.start
            || self.slots.len() >= SLOTS_MAX
            || (run.count > 1 && run.stride != self.stride)
        {
            return false;
        }
        let relative = run.logical - self.start;
        let (first_block, offset) = (relative / self.stride, relative % self.stride);
        if offset + run.length > self.stride {
            return false;
        }
        let slot = Slot {
            offset,
            length: run.length,
            first_block,
            count: run.count,
            physical: run.physical,
            log: run.log,
        };
        let at = self.slots.partition_point(|s| (s.offset, s.first_block) < (offset, first_block));
        let same_class = |s: &Slot| s.offset == offset && s.length == run.length;
        let blocks_meet =
            |s: &Slot| first_block < s.first_block + s.count && s.first_block < first_block + run.count;
        // Outward from `at` on each side: the slots of this offset class
        // (blocks must not meet), then the first foreign slot (must not
        // overlap); classes are short, and a long one is not worth scanning.
        let clear = |neighbours: &mut dyn Iterator<Item = &Slot>,
                     foreign_overlaps: &dyn Fn(&Slot) -> bool| {
            for (scanned, s) in neighbours.enumerate() {
                if !same_class(s) {
                    return !foreign_overlaps(s);
                }
                if blocks_meet(s) || scanned >= CLASS_SCAN_MAX {
                    return false;
                }
            }
            true
        };
        if !clear(&mut self.slots[..at].iter().rev(), &|s| s.offset + s.length > offset)
            || !clear(&mut self.slots[at..].iter(), &|s| offset + run.length > s.offset)
        {
            return false;
        }
        self.slots.insert(at, slot);
        self.end = self.end.max(run.end());
        true
    }

    /// Calls `found` for every data piece in `[from, to)`, in order.
    fn each(&self, from: u64, to: u64, found: &mut impl FnMut(u64, u64, LogRef, u64)) {
        let relative = from - self.start;
        let mut block = relative / self.stride;
        let within = relative % self.stride;
        // Offset classes are disjoint and sorted, so slot ends are sorted.
        let mut first = self.slots.partition_point(|s| s.offset + s.length <= within);
        loop {
            let block_start = self.start + block * self.stride;
            if block_start >= to {
                return;
            }
            for slot in &self.slots[first..] {
                let piece_start = block_start + slot.offset;
                if piece_start >= to {
                    return;
                }
                if !slot.holds_block(block) {
                    continue;
                }
                let piece_end = (piece_start + slot.length).min(to);
                let clipped = piece_start.max(from);
                if clipped < piece_end {
                    let physical =
                        slot.physical + (block - slot.first_block) * slot.length + (clipped - piece_start);
                    found(clipped, piece_end - clipped, slot.log, physical);
                }
            }
            block += 1;
            first = 0;
        }
    }

    fn data_bytes(&self) -> u64 {
        self.slots.iter().map(|slot| slot.count * slot.length).sum()
    }
}

/// The `k`-th write of a run, as a single.
fn block(run: &Run, k: u64) -> Run {
    Run {
        logical: run.logical + k * run.stride,
        physical: run.physical + k * run.length,
        stride: run.length,
        count: 1,
        ..*run
    }
}

/// Appends a run as single writes: a contiguous run is one write when
/// contiguous extents are merged.
fn split_into(run: &Run, compress_contiguous: bool, out: &mut Vec<Run>) {
    if run.count == 1 || (run.stride == run.length && compress_contiguous) {
        let length = run.count * run.length;
        out.push(Run { length, stride: length, count: 1, ..*run });
    } else {
        out.extend((0..run.count).map(|k| block(run, k)));
    }
}

impl Frozen {
    /// Builds the layer from runs whose bytes must not overlap; None if
    /// they do (or fall in a shape groups cannot hold), and the caller
    /// merges them in time order instead.
    pub(crate) fn build(runs: Vec<Run>, compress_contiguous: bool) -> Option<Frozen> {
        Frozen::build_grouped(&runs, compress_contiguous).or_else(|| {
            // Groups of different strides can interleave in ways a group
            // cannot hold; disjoint writes always fit as plain extents.
            let mut singles = Vec::with_capacity(runs.len());
            for run in &runs {
                split_into(run, compress_contiguous, &mut singles);
            }
            Frozen::place_singles(singles, Vec::new())
        })
    }

    fn build_grouped(runs: &[Run], compress_contiguous: bool) -> Option<Frozen> {
        let mut singles: Vec<Run> = Vec::new();
        let mut strided: Vec<Run> = Vec::new();
        for run in runs {
            if run.count > 1 && run.stride > run.length {
                strided.push(*run);
            } else {
                split_into(run, compress_contiguous, &mut singles);
            }
        }
        strided.sort_unstable_by_key(|run| (run.stride, run.logical));
        let mut groups: Vec<Group> = Vec::new();
        let mut members: Vec<Vec<Run>> = Vec::new();
        for run in &strided {
            let joined = match groups.last_mut() {
                Some(group) if group.stride == run.stride && run.logical < group.end => group.place(run),
                _ => false,
            };
            if joined {
                members.last_mut().expect("a member list per group").push(*run);
            } else {
                groups.push(Group::new(run));
                members.push(vec![*run]);
            }
        }
        // Where two groups' spans meet, the smaller one goes back to being
        // single writes (which may then fill the larger one's gaps).
        let mut order: Vec<usize> = (0..groups.len()).collect();
        order.sort_unstable_by_key(|&i| groups[i].start);
        let mut keep = vec![true; groups.len()];
        let mut last: Option<usize> = None;
        for i in order {
            if let Some(previous) = last
                && groups[i].start < groups[previous].end
            {
                let (smaller, larger) = if groups[i].data_bytes() < groups[previous].data_bytes() {
                    (i, previous)
                } else {
                    (previous, i)
                };
                keep[smaller] = false;
                last = Some(larger);
                continue;
            }
            last = Some(i);
        }
        let mut kept = Vec::with_capacity(groups.len());
        for ((group, runs), keep) in groups.into_iter().zip(members).zip(keep) {
            if keep {
                kept.push(group);
            } else {
                singles.extend(runs.iter().flat_map(|run| (0..run.count).map(move |k| block(run, k))));
            }
        }
        kept.sort_unstable_by_key(|group| group.start);
        Frozen::place_singles(singles, kept)
    }

    /// Puts single writes that fall in a group's gaps (a short last record,
    /// a header) into the group as one-block slots; the rest are extents.
    fn place_singles(mut singles: Vec<Run>, mut groups: Vec<Group>) -> Option<Frozen> {
        singles.sort_unstable_by_key(|run| run.logical);
        let mut extents: Vec<(u64, Extent)> = Vec::with_capacity(singles.len());
        for single in &singles {
            let owner = groups.partition_point(|group| group.start <= single.logical);
            let placed = owner > 0 && {
                let group = &mut groups[owner - 1];
                single.logical < group.end && group.place(single)
            };
            if !placed {
                extents.push((
                    single.logical,
                    Extent { length: single.length, log: single.log, physical: single.physical },
                ));
            }
        }
        drop(singles);
        Frozen::assemble(extents, groups)
    }

    /// Checks the pieces are disjoint and lays them out for lookup.
    pub(crate) fn assemble(mut extents: Vec<(u64, Extent)>, groups: Vec<Group>) -> Option<Frozen> {
        let mut merged: Vec<(u64, Span)> = Vec::with_capacity(extents.len() + groups.len());
        merged.extend(extents.drain(..).filter(|(_, extent)| extent.length > 0).map(|(start, extent)| {
            (start, Span { length: extent.length, physical: extent.physical, log: extent.log.0 })
        }));
        drop(extents);
        merged.extend(groups.iter().enumerate().map(|(i, group)| {
            (group.start, Span { length: group.end - group.start, physical: i as u64, log: GROUP })
        }));
        merged.sort_unstable_by_key(|(start, _)| *start);
        let mut end = 0u64;
        for &(start, span) in &merged {
            if start < end {
                return None;
            }
            end = start + span.length;
        }
        let data_bytes =
            merged.iter().filter(|(_, span)| span.log != GROUP).map(|(_, span)| span.length).sum::<u64>()
                + groups.iter().map(Group::data_bytes).sum::<u64>();
        let (mut starts, mut spans): (Vec<u64>, Vec<Span>) = merged.into_iter().unzip();
        // The layer lives as long as the open file: no slack.
        starts.shrink_to_fit();
        spans.shrink_to_fit();
        let mut groups = groups;
        for group in &mut groups {
            group.slots.shrink_to_fit();
        }
        Some(Frozen { starts, spans, groups, end, data_bytes })
    }

    pub(crate) fn has_groups(&self) -> bool {
        !self.groups.is_empty()
    }

    /// One past the last byte of data.
    pub(crate) fn end(&self) -> u64 {
        self.end
    }

    pub(crate) fn data_bytes(&self) -> u64 {
        self.data_bytes
    }

    /// Calls `found(logical, length, log, physical)` for every data piece
    /// in `[from, to)`, in logical order.
    pub(crate) fn each(&self, from: u64, to: u64, mut found: impl FnMut(u64, u64, LogRef, u64)) {
        if from >= to {
            return;
        }
        let first = self.starts.partition_point(|&start| start <= from).saturating_sub(1);
        for (&start, span) in self.starts[first..].iter().zip(&self.spans[first..]) {
            if start >= to {
                return;
            }
            let end = start + span.length;
            if end <= from {
                continue;
            }
            let (clipped_start, clipped_end) = (start.max(from), end.min(to));
            if span.log == GROUP {
                self.groups[span.physical as usize].each(clipped_start, clipped_end, &mut found);
            } else {
                found(
                    clipped_start,
                    clipped_end - clipped_start,
                    LogRef(span.log),
                    span.physical + (clipped_start - start),
                );
            }
        }
    }

    /// The layer's plain extents and its groups, for encoding.
    pub(crate) fn parts(&self) -> (Vec<(u64, Extent)>, &[Group]) {
        let extents = self
            .starts
            .iter()
            .zip(&self.spans)
            .filter(|(_, span)| span.log != GROUP)
            .map(|(&start, span)| {
                (start, Extent { length: span.length, log: LogRef(span.log), physical: span.physical })
            })
            .collect();
        (extents, &self.groups)
    }

    /// Stored entries: extents plus group slots.
    pub(crate) fn entry_count(&self) -> usize {
        self.spans.iter().filter(|span| span.log != GROUP).count()
            + self.groups.iter().map(|g| g.slots.len()).sum::<usize>()
    }

    /// Heap bytes held, from capacities.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.starts.capacity() * size_of::<u64>()
            + self.spans.capacity() * size_of::<Span>()
            + self.groups.capacity() * size_of::<Group>()
            + self.groups.iter().map(|group| group.slots.capacity() * size_of::<Slot>()).sum::<usize>()
    }
}
