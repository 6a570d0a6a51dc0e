//! Read-ahead across the backends of a striped file, per open.
//!
//! A reader streaming a striped file in stripe-unit-sized requests meets
//! one backend per request: alone it keeps one backend busy while the
//! others idle, however many the file is striped over. Writes overlap
//! through the store's write-behind; reads have nothing like it. So while
//! a read of such a stream is served, the ranges the stream reads next
//! that lie on *other* backends are fetched in the mount's read pool, at
//! most one contiguous range per backend, each no longer than the request
//! (a stripe unit when the reader reads units), and the next reads take
//! their bytes from there.
//!
//! Never stale: a prefetched range is a range of a data log's bytes, keyed
//! by log and physical offset, and logs are only ever appended to. Each
//! read still looks its pieces up in the index as it stands, so bytes a
//! writer wrote since (in this process, or synced and reloaded) point
//! elsewhere and are read from where they are; only pieces the index
//! still maps to a prefetched range are served from it. The background
//! fetch checks CRCs exactly as a read would (`verify_reads`), and a fetch
//! that fails serves nothing: the read then goes to the store itself and
//! reports what it finds there.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use crate::error::Result;
use crate::layout::LogId;
use crate::placement::BackendId;
use crate::reader::{ReadPool, WINDOW_REQUEST_MAX_BYTES};

/// Requests larger than this get no read-ahead: they span several stripe
/// units, whose logs the read already reads in parallel, and their
/// prefetch would hold as much memory per backend.
pub const REQUEST_MAX_BYTES: usize = 16 << 20;

/// Most bytes one open file's read-ahead looks ahead (a mount of many
/// backends would otherwise hold a request's worth on each).
pub const SPAN_MAX_BYTES: u64 = 64 << 20;

/// Buffers one open keeps for its next fetches.
const SPARE_BUFFERS_MAX: usize = 4;

/// Whether a request of `length` bytes streams with read-ahead: requests
/// small enough for a log's read-ahead window are served by that window.
pub(crate) fn applies(length: usize) -> bool {
    (WINDOW_REQUEST_MAX_BYTES..=REQUEST_MAX_BYTES).contains(&length)
}

/// How far past a read of `length` bytes the stream looks, on a mount of
/// `backends` backends: one request's worth on each other backend.
pub(crate) fn span(length: usize, backends: usize) -> u64 {
    (length as u64).saturating_mul(backends.saturating_sub(1) as u64).min(SPAN_MAX_BYTES)
}

/// A range to fetch: `length` bytes of data log `log` on `backend` from
/// `physical`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Target {
    pub backend: BackendId,
    pub log: LogId,
    pub physical: u64,
    pub length: u64,
}

impl Target {
    fn holds(&self, backend: BackendId, log: LogId, physical: u64, length: u64) -> bool {
        self.backend == backend
            && self.log == log
            && self.physical <= physical
            && physical + length <= self.physical + self.length
    }
}

/// One open file's read-ahead state (see the module comment). Dropped with
/// the open: fetches still running then finish into nothing.
#[derive(Debug, Default)]
pub(crate) struct ReadAhead {
    state: Mutex<AheadState>,
}

#[derive(Debug, Default)]
struct AheadState {
    /// Where a read that continues the stream starts; None before the
    /// open's first read (which starts a stream, as the kernel's does).
    next: Option<u64>,
    /// At most one per backend.
    slots: Vec<Slot>,
    /// Buffers of consumed slots, for the next fetches (no allocation per
    /// stripe unit while streaming).
    spare: Vec<Vec<u8>>,
}

#[derive(Debug)]
struct Slot {
    target: Target,
    fetch: Arc<Fetch>,
}

#[derive(Debug)]
struct Fetch {
    state: Mutex<FetchState>,
    done: Condvar,
}

#[derive(Debug)]
enum FetchState {
    /// Waiting for a pool thread, with the buffer it will fill.
    Queued(Vec<u8>),
    Running,
    Done(Vec<u8>),
    /// The fetch failed (or was cancelled before it ran): serves nothing.
    Gone,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ReadAhead {
    /// Records a read of `length` bytes at `offset`; true if it continues
    /// the stream (the open's first read, or one starting where the last
    /// ended). A read elsewhere ends the stream: its prefetched ranges go.
    pub(crate) fn follows(&self, offset: u64, length: usize) -> bool {
        let mut state = lock(&self.state);
        let continues = state.next.is_none_or(|next| next == offset);
        if !continues {
            let AheadState { slots, spare, .. } = &mut *state;
            for slot in slots.drain(..) {
                reclaim(slot, spare);
            }
        }
        state.next = Some(offset.saturating_add(length as u64));
        continues
    }

    /// Makes the slots match `targets` (at most one per backend, none on a
    /// backend the current read touches): a slot whose range holds its
    /// backend's target start stays, any other slot of that backend goes,
    /// and targets without a slot start fetching: each target's
    /// `fetch(buf)` fills `buf` with its bytes, checked, on a thread of
    /// `pool`. Slots of backends without a target stay: the current read
    /// may be served from them.
    pub(crate) fn refill<F>(&self, targets: Vec<(Target, F)>, pool: &ReadPool)
    where
        F: FnOnce(&mut [u8]) -> Result<()> + Send + 'static,
    {
        let mut state = lock(&self.state);
        for (target, run) in targets {
            let known = state.slots.iter().position(|slot| slot.target.backend == target.backend);
            if let Some(index) = known {
                if state.slots[index].target.holds(target.backend, target.log, target.physical, 1) {
                    continue;
                }
                let old = state.slots.swap_remove(index);
                reclaim(old, &mut state.spare);
            }
            let mut buf = state.spare.pop().unwrap_or_default();
            buf.resize(target.length as usize, 0);
            let queued = Arc::new(Fetch { state: Mutex::new(FetchState::Queued(buf)), done: Condvar::new() });
            let (task_fetch, task_target) = (queued.clone(), target);
            let spawned = pool.spawn(move || {
                let mut buf = {
                    let mut state = lock(&task_fetch.state);
                    match std::mem::replace(&mut *state, FetchState::Running) {
                        FetchState::Queued(buf) => buf,
                        // Cancelled by a read that needed it first.
                        other => {
                            *state = other;
                            return;
                        }
                    }
                };
                let outcome = run(&mut buf);
                *lock(&task_fetch.state) = match outcome {
                    Ok(()) => FetchState::Done(buf),
                    Err(error) => {
                        // The read that needs these bytes reads them itself
                        // and reports the error with its own context.
                        tracing::debug!("read-ahead of {task_target:?}: {error}");
                        FetchState::Gone
                    }
                };
                task_fetch.done.notify_all();
            });
            if !spawned {
                // No pool threads (threadpool_size 1): no read-ahead.
                return;
            }
            state.slots.push(Slot { target, fetch: queued });
        }
    }

    /// Copies into `out` the log's bytes at `physical` if a slot holds them
    /// all, waiting for a fetch under way; false if none does (or its fetch
    /// failed, or had not started: then it is cancelled and the caller
    /// reads the bytes itself rather than wait for a pool thread). A slot
    /// read to its end is dropped.
    pub(crate) fn serve(&self, backend: BackendId, log: LogId, physical: u64, out: &mut [u8]) -> bool {
        let length = out.len() as u64;
        let found = {
            let state = lock(&self.state);
            state
                .slots
                .iter()
                .find(|slot| slot.target.holds(backend, log, physical, length))
                .map(|slot| (slot.target, slot.fetch.clone()))
        };
        let Some((target, fetch)) = found else {
            return false;
        };
        let served = {
            let mut fetch_state = lock(&fetch.state);
            loop {
                match &*fetch_state {
                    FetchState::Running => {
                        fetch_state = fetch.done.wait(fetch_state).unwrap_or_else(PoisonError::into_inner);
                    }
                    FetchState::Done(bytes) => {
                        let from = (physical - target.physical) as usize;
                        out.copy_from_slice(&bytes[from..from + out.len()]);
                        break true;
                    }
                    FetchState::Queued(_) => {
                        *fetch_state = FetchState::Gone;
                        break false;
                    }
                    FetchState::Gone => break false,
                }
            }
        };
        if !served || physical + length == target.physical + target.length {
            let mut state = lock(&self.state);
            if let Some(index) = state.slots.iter().position(|slot| Arc::ptr_eq(&slot.fetch, &fetch)) {
                let slot = state.slots.swap_remove(index);
                reclaim(slot, &mut state.spare);
            }
        }
        served
    }
}

/// Keeps a finished slot's buffer for the next fetch; a fetch still queued
/// is cancelled (its buffer comes back too), one running finishes into
/// nothing.
fn reclaim(slot: Slot, spare: &mut Vec<Vec<u8>>) {
    let mut state = lock(&slot.fetch.state);
    let buf = match std::mem::replace(&mut *state, FetchState::Gone) {
        FetchState::Queued(buf) | FetchState::Done(buf) => buf,
        FetchState::Running => {
            *state = FetchState::Running;
            return;
        }
        FetchState::Gone => return,
    };
    // A few are enough to stream with: each is a request's worth.
    if spare.len() < SPARE_BUFFERS_MAX {
        spare.push(buf);
    }
}

#[cfg(test)]
mod tests;
