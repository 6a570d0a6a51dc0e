//! statfs without hanging: the answer is computed on a helper thread and
//! waited for only briefly. `df` runs over every mount on a node, so a
//! statfs that blocks on a dead backend would hang far more than plfs.
//!
//! At most one computation runs at a time: while one is stuck, later
//! requests wait out their timeout and return the last good answer (or
//! EIO), and no threads pile up behind the dead backend.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use fuser::Errno;
use plfs::store::SpaceInfo;

/// Where the figures come from: the mount's `statfs` backend or the core.
pub type SpaceSource = dyn Fn() -> plfs::Result<SpaceInfo> + Send + Sync;

/// An answer younger than this is returned without asking again, so a
/// burst of `df` calls costs one backend statfs.
pub const FRESH_FOR: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
struct State {
    /// A computation is running (possibly stuck).
    in_flight: bool,
    /// Computations finished so far, so a waiter can tell "mine is done".
    finished: u64,
    last_good: Option<(SpaceInfo, Instant)>,
    /// The errno of the most recent computation, if it failed.
    last_errno: Option<i32>,
}

pub struct SpaceOracle {
    source: Arc<SpaceSource>,
    shared: Arc<(Mutex<State>, Condvar)>,
    timeout: Duration,
}

impl std::fmt::Debug for SpaceOracle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpaceOracle").field("timeout", &self.timeout).finish_non_exhaustive()
    }
}

fn lock(mutex: &Mutex<State>) -> MutexGuard<'_, State> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl SpaceOracle {
    pub fn new(source: Arc<SpaceSource>, timeout: Duration) -> SpaceOracle {
        SpaceOracle { source, shared: Arc::new((Mutex::new(State::default()), Condvar::new())), timeout }
    }

    /// Current figures, a recent answer, or an error; never blocks longer
    /// than the timeout.
    pub fn query(&self) -> Result<SpaceInfo, Errno> {
        let (mutex, condvar) = &*self.shared;
        let mut state = lock(mutex);
        if let Some((info, at)) = state.last_good
            && at.elapsed() < FRESH_FOR
        {
            return Ok(info);
        }
        // Waiting for the computation after the ones already finished: the
        // running one if any (it started before this request), else a new one.
        let target = state.finished + 1;
        if !state.in_flight {
            state.in_flight = true;
            if let Err(error) = self.start() {
                state.in_flight = false;
                tracing::warn!("statfs: cannot start a helper thread: {error}");
                return state.last_good.map(|(info, _)| info).ok_or(Errno::EIO);
            }
        }
        let (state, timed_out) = condvar
            .wait_timeout_while(state, self.timeout, |state| state.finished < target)
            .unwrap_or_else(PoisonError::into_inner);
        if timed_out.timed_out() {
            tracing::warn!("statfs: no answer within {:?}; the backend may be down", self.timeout);
            return state.last_good.map(|(info, _)| info).ok_or(Errno::EIO);
        }
        // A failed computation still answers with the last good figures:
        // `df` prefers slightly old numbers to an error.
        match state.last_good {
            Some((info, _)) => Ok(info),
            None => Err(state.last_errno.map_or(Errno::EIO, Errno::from_i32)),
        }
    }

    fn start(&self) -> std::io::Result<()> {
        let source = self.source.clone();
        let shared = self.shared.clone();
        std::thread::Builder::new().name("plfs-statfs".to_owned()).spawn(move || {
            let result = source();
            let (mutex, condvar) = &*shared;
            let mut state = lock(mutex);
            match result {
                Ok(info) => {
                    state.last_good = Some((info, Instant::now()));
                    state.last_errno = None;
                }
                Err(error) => {
                    tracing::warn!("statfs: {error}");
                    state.last_errno = Some(error.errno());
                }
            }
            state.in_flight = false;
            state.finished += 1;
            condvar.notify_all();
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use plfs::{Error, ErrorKind};

    use super::*;

    fn info(blocks: u64) -> SpaceInfo {
        SpaceInfo { block_size: 4096, blocks, ..SpaceInfo::default() }
    }

    #[test]
    fn answers_and_reuses_a_fresh_answer() {
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let oracle = SpaceOracle::new(
            Arc::new(move || {
                counted.fetch_add(1, Ordering::SeqCst);
                Ok(info(10))
            }),
            Duration::from_secs(5),
        );
        assert_eq!(oracle.query().unwrap(), info(10));
        assert_eq!(oracle.query().unwrap(), info(10));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_failure_reports_its_errno() {
        let oracle = SpaceOracle::new(
            Arc::new(|| Err(Error::new(ErrorKind::PermissionDenied, "no"))),
            Duration::from_secs(5),
        );
        assert_eq!(oracle.query().unwrap_err(), Errno::EACCES);
    }

    #[test]
    fn a_hung_backend_gives_the_last_good_answer_or_eio_and_one_thread() {
        let hang = Arc::new(AtomicBool::new(false));
        let release = Arc::new(AtomicBool::new(false));
        let calls = Arc::new(AtomicUsize::new(0));
        let (h, r, c) = (hang.clone(), release.clone(), calls.clone());
        let oracle = SpaceOracle::new(
            Arc::new(move || {
                c.fetch_add(1, Ordering::SeqCst);
                while h.load(Ordering::SeqCst) && !r.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Ok(info(3))
            }),
            Duration::from_millis(50),
        );
        assert_eq!(oracle.query().unwrap(), info(3));
        hang.store(true, Ordering::SeqCst);
        std::thread::sleep(FRESH_FOR + Duration::from_millis(20));
        let started = Instant::now();
        assert_eq!(oracle.query().unwrap(), info(3), "stale but good");
        assert_eq!(oracle.query().unwrap(), info(3));
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(calls.load(Ordering::SeqCst), 2, "the stuck computation is not started twice");
        release.store(true, Ordering::SeqCst);

        let stuck = SpaceOracle::new(
            Arc::new(|| {
                std::thread::sleep(Duration::from_secs(2));
                Ok(info(1))
            }),
            Duration::from_millis(20),
        );
        assert_eq!(stuck.query().unwrap_err(), Errno::EIO, "no answer ever: EIO");
    }
}
