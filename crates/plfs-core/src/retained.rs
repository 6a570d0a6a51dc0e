//! Index records a writing process keeps in memory after appending them to
//! its index logs, so that a collective close can hand them to the rank
//! that writes the global index instead of that rank reading every index
//! log back from storage (flatten on close, "Boosting PLFS read
//! performance" §3.3).
//!
//! Only files a caller asked for are retained ([`RetainedIndexes::retain`],
//! before the writes), within a budget per file and process
//! (`index_buffer_mbs`): past it the whole file's retention is dropped and
//! the collective close reads the logs as `plfs flatten` does. What is kept
//! is the frames exactly as appended to each log (one copy per frame, not
//! per record), so decoding them gives the records a read of the log would.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::layout::LogId;
use crate::store::StorePath;

/// The retained files of one mount in this process.
#[derive(Debug, Default)]
pub(crate) struct RetainedIndexes {
    files: Mutex<HashMap<StorePath, Arc<Retention>>>,
}

/// One file's retained frames, shared by its writers in this process.
#[derive(Debug)]
pub(crate) struct Retention {
    budget: u64,
    state: Mutex<RetentionState>,
}

#[derive(Debug, Default)]
struct RetentionState {
    /// Bytes reserved by writers (kept frames, open and closed logs).
    used: u64,
    /// The budget ran out (or a log pair was retired): what is kept is not
    /// every record, and nothing is used.
    incomplete: bool,
    /// Logs closed so far, with their frames.
    closed: Vec<(LogId, Vec<u8>)>,
}

/// What a collective close takes: every closed log's frames, or None when
/// the file's retention was incomplete (or never asked for).
pub(crate) type RetainedFrames = Option<Vec<(LogId, Vec<u8>)>>;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl RetainedIndexes {
    /// Starts retaining `path`'s records, up to `budget` bytes, for writers
    /// that create their logs from now on. A second call keeps the first's
    /// retention (two opens of one file share it).
    pub(crate) fn retain(&self, path: &StorePath, budget: u64) {
        lock(&self.files)
            .entry(path.clone())
            .or_insert_with(|| Arc::new(Retention { budget, state: Mutex::default() }));
    }

    /// The retention a new log pair of `path` joins, if any.
    pub(crate) fn retention(&self, path: &StorePath) -> Option<Arc<Retention>> {
        lock(&self.files).get(path).cloned()
    }

    /// Ends `path`'s retention and returns what it kept.
    pub(crate) fn take(&self, path: &StorePath) -> RetainedFrames {
        let retention = lock(&self.files).remove(path)?;
        let mut state = lock(&retention.state);
        if state.incomplete {
            return None;
        }
        Some(std::mem::take(&mut state.closed))
    }
}

impl Retention {
    /// Reserves room for `bytes` more; false (and the file's retention is
    /// incomplete from now on) when the budget would be passed.
    pub(crate) fn reserve(&self, bytes: usize) -> bool {
        let mut state = lock(&self.state);
        if state.incomplete || state.used + bytes as u64 > self.budget {
            state.incomplete = true;
            state.closed = Vec::new();
            return false;
        }
        state.used += bytes as u64;
        true
    }

    /// A log pair stopped retaining before its close (a failed append
    /// retired it): the file's retention no longer has every record.
    pub(crate) fn abandon(&self) {
        let mut state = lock(&self.state);
        state.incomplete = true;
        state.closed = Vec::new();
    }

    /// A log closed with every frame appended to it in `frames`.
    pub(crate) fn closed(&self, log: LogId, frames: Vec<u8>) {
        let mut state = lock(&self.state);
        if !state.incomplete {
            state.closed.push((log, frames));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(stamp: u64) -> LogId {
        LogId { stamp, writer: 1, pid: 2, host: 3 }
    }

    #[test]
    fn frames_within_the_budget_are_taken_once() {
        let indexes = RetainedIndexes::default();
        let path = StorePath::parse("a/f").unwrap();
        assert!(indexes.retention(&path).is_none());
        indexes.retain(&path, 10);
        let retention = indexes.retention(&path).unwrap();
        assert!(retention.reserve(6));
        retention.closed(log(1), vec![1; 6]);
        assert_eq!(indexes.take(&path), Some(vec![(log(1), vec![1; 6])]));
        assert_eq!(indexes.take(&path), None);
        assert!(indexes.retention(&path).is_none());
    }

    #[test]
    fn passing_the_budget_or_a_retired_pair_leaves_nothing() {
        let indexes = RetainedIndexes::default();
        let path = StorePath::parse("f").unwrap();
        indexes.retain(&path, 10);
        let retention = indexes.retention(&path).unwrap();
        assert!(retention.reserve(6));
        retention.closed(log(1), vec![1; 6]);
        assert!(!retention.reserve(5));
        // Small frames after the overflow are not kept either.
        assert!(!retention.reserve(1));
        retention.closed(log(2), Vec::new());
        assert_eq!(indexes.take(&path), None);

        indexes.retain(&path, 10);
        let retention = indexes.retention(&path).unwrap();
        retention.abandon();
        retention.closed(log(3), Vec::new());
        assert_eq!(indexes.take(&path), None);
    }
}
