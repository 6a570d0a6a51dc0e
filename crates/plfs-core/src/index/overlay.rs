//! The mutable layer: disjoint extents in an ordered map, updated one
//! write or truncate at a time. "Newest wins" at byte granularity falls out
//! of a plain overwrite: a write splits whatever it overlaps at its
//! boundaries and replaces the middle.

use std::collections::BTreeMap;
use std::ops::Bound;

use super::{Extent, follows};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Overlay {
    /// Disjoint extents keyed by logical start.
    pub(crate) extents: BTreeMap<u64, Extent>,
}

impl Overlay {
    pub(crate) fn is_empty(&self) -> bool {
        self.extents.is_empty()
    }

    /// Puts `extent` at `[start, start + length)`, replacing what was there.
    pub(crate) fn write(&mut self, start: u64, extent: Extent, compress_contiguous: bool) {
        let end = start + extent.length;
        self.punch(start, end);
        self.extents.insert(start, extent);
        if compress_contiguous {
            self.coalesce_around(start);
        }
        debug_assert!(self.check_disjoint());
    }

    /// Removes `[start, end)`, trimming extents that straddle it.
    pub(crate) fn punch(&mut self, start: u64, end: u64) {
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

    /// Calls `found(start, length, extent, skip)` for each extent meeting
    /// `[from, to)`, clipped to it, in order; `skip` is how far into the
    /// extent the clipped piece begins.
    pub(crate) fn each(&self, from: u64, to: u64, mut found: impl FnMut(u64, u64, &Extent, u64)) {
        if from >= to || self.extents.is_empty() {
            return;
        }
        let first = self.extents.range(..=from).next_back().map(|(&k, _)| k).unwrap_or(from);
        for (&start, extent) in self.extents.range((Bound::Included(first), Bound::Excluded(to))) {
            let end = start + extent.length;
            if end <= from {
                continue;
            }
            let clipped_start = start.max(from);
            found(clipped_start, end.min(to) - clipped_start, extent, clipped_start - start);
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
