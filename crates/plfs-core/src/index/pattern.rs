//! Finding regular runs in a writer's records, on both sides of the log.
//!
//! A run is `count` writes of one length at a constant logical stride whose
//! data sits back to back in the data log: the N-1 strided checkpoint is one
//! run per writer. Writers store a run as one pattern record; readers also
//! find runs among plain write records (older logs, runs cut by a flush),
//! so the merged index can hold one entry per run instead of one per write.

use super::{FILE_SIZE_MAX, LogRef};
use crate::format::index_log::{PatternRecord, Record, WriteRecord};

/// A run of writes from one data log (`count` 1 for a single write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Run {
    pub logical: u64,
    pub length: u64,
    /// Logical distance between consecutive writes (`length` when count is 1).
    pub stride: u64,
    pub count: u64,
    pub physical: u64,
    pub log: LogRef,
}

impl Run {
    pub(crate) fn end(&self) -> u64 {
        self.logical + (self.count - 1) * self.stride + self.length
    }

    fn single(log: LogRef, logical: u64, length: u64, physical: u64) -> Run {
        Run { logical, length, stride: length, count: 1, physical, log }
    }

    /// Appends `next` (a single write or a run of the same shape) if it
    /// continues this run logically and physically.
    fn extend(&mut self, next: &Run) -> bool {
        if next.length != self.length || next.physical != self.physical + self.count * self.length {
            return false;
        }
        let stride = if self.count == 1 {
            match next.logical.checked_sub(self.logical) {
                Some(stride) if stride >= self.length => stride,
                _ => return false,
            }
        } else {
            if Some(next.logical)
                != self.count.checked_mul(self.stride).and_then(|d| d.checked_add(self.logical))
            {
                return false;
            }
            self.stride
        };
        if next.count > 1 && next.stride != stride {
            return false;
        }
        self.stride = stride;
        self.count += next.count;
        true
    }
}

/// Appends the runs of one log's write and pattern records (truncates are
/// the caller's business) to `out`, in log order.
pub(crate) fn detect_runs(log: LogRef, records: &[Record], out: &mut Vec<Run>) {
    let mut current: Option<Run> = None;
    for record in records {
        let next = match record {
            Record::Write(write) => {
                let end = write.logical.saturating_add(write.length).min(FILE_SIZE_MAX);
                let length = end.saturating_sub(write.logical);
                if length == 0 {
                    continue;
                }
                Run::single(log, write.logical, length, write.physical)
            }
            Record::Pattern(pattern) => Run {
                logical: pattern.logical,
                length: pattern.length,
                stride: pattern.stride,
                count: pattern.count,
                physical: pattern.physical,
                log,
            },
            Record::Truncate(_) => continue,
        };
        if let Some(run) = current.as_mut()
            && run.extend(&next)
        {
            continue;
        }
        if let Some(done) = current.replace(next) {
            out.push(done);
        }
    }
    out.extend(current);
}

/// The writer side: folds consecutive writes into one pattern record while
/// they keep the shape of a run.
#[derive(Debug, Default)]
pub struct PatternBuilder {
    pending: Option<Pending>,
}

#[derive(Debug)]
struct Pending {
    first: WriteRecord,
    stride: u64,
    count: u64,
    stamp_last: u64,
    data_crc: u32,
}

impl PatternBuilder {
    pub fn new() -> PatternBuilder {
        PatternBuilder::default()
    }

    /// Offers the next write of this log. Returns the record of the run it
    /// ended, if it does not continue the pending one.
    pub fn push(&mut self, write: WriteRecord) -> Option<Record> {
        if let Some(pending) = self.pending.as_mut()
            && pending.extend(&write)
        {
            return None;
        }
        let ended = self.take();
        self.pending = Some(Pending {
            first: write,
            stride: 0,
            count: 1,
            stamp_last: write.stamp,
            data_crc: crc32c::crc32c(&write.data_crc.to_le_bytes()),
        });
        ended
    }

    /// Ends the pending run and returns its record.
    pub fn take(&mut self) -> Option<Record> {
        self.pending.take().map(Pending::into_record)
    }

    /// Writes the pending run stands for.
    pub fn pending_writes(&self) -> u64 {
        self.pending.as_ref().map_or(0, |pending| pending.count)
    }

    /// The pending run's shape: (first logical, length, stride, count).
    pub fn pending_shape(&self) -> Option<(u64, u64, u64, u64)> {
        self.pending.as_ref().map(|p| (p.first.logical, p.first.length, p.stride, p.count))
    }
}

/// The pending runs of every writer in one process. A pattern is ordered at
/// its last stamp, so a run must end before another writer of the process
/// overwrites any of its bytes; then newest-wins stays exact for them.
#[derive(Debug, Default)]
pub struct RunTracker {
    runs: Vec<TrackedRun>,
}

#[derive(Debug)]
struct TrackedRun {
    writer: u64,
    shape: (u64, u64, u64, u64),
    cut: bool,
}

impl RunTracker {
    /// Before `writer` writes `[start, end)`: marks other writers' runs
    /// that hold any of those bytes as cut, and says whether `writer`'s own
    /// run was cut (then it must end before this write joins it).
    pub fn before_write(&mut self, writer: u64, start: u64, end: u64) -> bool {
        let mut own_cut = false;
        for run in &mut self.runs {
            if run.writer == writer {
                own_cut = run.cut;
            } else if !run.cut && overlaps(run.shape, start, end) {
                run.cut = true;
            }
        }
        own_cut
    }

    /// After the write: records `writer`'s pending run shape (None: no run).
    pub fn after_write(&mut self, writer: u64, shape: Option<(u64, u64, u64, u64)>) {
        let found = self.runs.iter().position(|run| run.writer == writer);
        match (found, shape) {
            (Some(i), Some(shape)) => self.runs[i] = TrackedRun { writer, shape, cut: false },
            (Some(i), None) => {
                self.runs.swap_remove(i);
            }
            (None, Some(shape)) => self.runs.push(TrackedRun { writer, shape, cut: false }),
            (None, None) => {}
        }
    }

    /// Every run is cut (a truncate or a flush point of the process).
    pub fn cut_all(&mut self) {
        for run in &mut self.runs {
            run.cut = true;
        }
    }
}

/// Whether any write of a run of shape (first, length, stride, count)
/// meets `[start, end)`.
fn overlaps((first, length, stride, count): (u64, u64, u64, u64), start: u64, end: u64) -> bool {
    let stride = stride.max(length);
    let last_end = first + (count - 1) * stride + length;
    if end <= first || start >= last_end {
        return false;
    }
    // First write ending after `start`.
    let k = if start < first + length { 0 } else { (start - first - length) / stride + 1 };
    k < count && first + k * stride < end
}

impl Pending {
    fn extend(&mut self, write: &WriteRecord) -> bool {
        let first = &self.first;
        let continues = write.writer == first.writer
            && write.length == first.length
            && write.length > 0
            && write.sequence == first.sequence + self.count
            && Some(write.physical)
                == self.count.checked_mul(first.length).and_then(|d| d.checked_add(first.physical));
        if !continues {
            return false;
        }
        if self.count == 1 {
            match write.logical.checked_sub(first.logical) {
                Some(stride) if stride >= first.length => self.stride = stride,
                _ => return false,
            }
        } else if Some(write.logical)
            != self.count.checked_mul(self.stride).and_then(|d| d.checked_add(first.logical))
        {
            return false;
        }
        self.count += 1;
        self.stamp_last = write.stamp;
        self.data_crc = crc32c::crc32c_append(self.data_crc, &write.data_crc.to_le_bytes());
        true
    }

    fn into_record(self) -> Record {
        if self.count == 1 {
            return Record::Write(self.first);
        }
        Record::Pattern(PatternRecord {
            logical: self.first.logical,
            length: self.first.length,
            stride: self.stride,
            count: self.count,
            physical: self.first.physical,
            stamp_first: self.first.stamp,
            stamp_last: self.stamp_last,
            sequence_first: self.first.sequence,
            writer: self.first.writer,
            data_crc: self.data_crc,
        })
    }
}

/// The write records a pattern stands for (its stamps are not kept: every
/// write gets the pattern's last stamp, which is how the merge orders it).
pub fn expand_pattern(pattern: &PatternRecord) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
    (0..pattern.count).map(move |k| {
        (pattern.logical + k * pattern.stride, pattern.length, pattern.physical + k * pattern.length)
    })
}
