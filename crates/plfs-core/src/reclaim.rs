//! Work a mount leaves for after the call that made it: deleting the
//! pieces of removed containers. An unlink takes the container out of the
//! namespace with one rename (what users see is then final) and hands the
//! deletion of its pieces here, so it costs the caller one rename instead
//! of a walk of the container on every backend.
//!
//! One worker thread per mount, started at the first job, runs jobs in
//! order. It runs at `SCHED_IDLE`: reclaiming space is housekeeping and
//! yields the CPU to the program's own calls. The queue is bounded; when it
//! is full the caller does the job itself (so a program that removes faster
//! than the worker reclaims is slowed to the worker's pace, never grows the
//! queue). What is queued is finished when the mount is dropped and when the
//! process exits normally (an `atexit` hook). A process killed before that
//! leaves the renamed containers, hidden from listings, for `plfs recover`
//! to finish: the promise (the file is gone) was already kept.
//!
//! A mount built with `Tuning::background_reclaim` off runs every job in
//! the caller (the simulation, whose runs must replay exactly).

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Once, PoisonError, Weak};

/// One deferred deletion; it reports its own failures (they leave hidden
/// pieces that `plfs recover` finishes, nothing a user can see).
pub(crate) type Job = Box<dyn FnOnce() + Send>;

/// Jobs a mount may have waiting before callers do their own.
const QUEUE_MAX: usize = 4096;

/// The reclaimer of one mount.
pub(crate) struct Reclaimer {
    inner: Arc<Inner>,
    background: bool,
}

struct Inner {
    /// The process whose worker thread serves this queue (0: none yet).
    /// A child forked after that has the memory but not the thread, and
    /// perhaps a lock another thread held at the fork: it never touches
    /// the queue, and deletes its own removals' pieces itself.
    owner_pid: AtomicU32,
    state: Mutex<State>,
    /// The worker waits here for jobs.
    wake: Condvar,
    /// Whoever finishes the queue waits here for the worker's job at hand.
    idle: Condvar,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    /// The worker is running a job.
    busy: bool,
    /// The worker's thread id, so a caller waiting for it can lift it from
    /// the idle class.
    worker_tid: libc::pid_t,
    /// The mount is going away: the worker leaves once the queue is empty.
    closing: bool,
}

impl fmt::Debug for Reclaimer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let waiting = lock(&self.inner.state).queue.len();
        f.debug_struct("Reclaimer").field("background", &self.background).field("waiting", &waiting).finish()
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A job that panicked must not stop later removals from being reclaimed.
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Reclaimer {
    pub(crate) fn new(background: bool) -> Reclaimer {
        let inner = Arc::new(Inner {
            owner_pid: AtomicU32::new(0),
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            idle: Condvar::new(),
        });
        Reclaimer { inner, background }
    }

    /// Runs `job` soon: on the worker, or here when reclaiming in the
    /// background is off, the queue is full or no thread can be started.
    pub(crate) fn defer(&self, job: Job) {
        let pid = std::process::id();
        let owner = self.inner.owner_pid.load(Ordering::Acquire);
        if !self.background || (owner != 0 && owner != pid) {
            return job();
        }
        let mut state = lock(&self.inner.state);
        if state.queue.len() >= QUEUE_MAX {
            drop(state);
            return job();
        }
        if self.inner.owner_pid.load(Ordering::Acquire) == 0 {
            if !self.start_worker() {
                drop(state);
                return job();
            }
            self.inner.owner_pid.store(pid, Ordering::Release);
        }
        state.queue.push_back(job);
        self.inner.wake.notify_one();
    }

    fn start_worker(&self) -> bool {
        register_exit_hook(&self.inner);
        let inner = self.inner.clone();
        std::thread::Builder::new().name("plfs-reclaim".into()).spawn(move || inner.work()).is_ok()
    }

    /// Runs every waiting job and waits for the one at hand: afterwards
    /// nothing handed to this reclaimer so far is left undone.
    pub(crate) fn finish(&self) {
        self.inner.finish();
    }
}

impl Drop for Reclaimer {
    fn drop(&mut self) {
        self.inner.finish();
        lock(&self.inner.state).closing = true;
        self.inner.wake.notify_all();
    }
}

impl Inner {
    fn work(self: Arc<Self>) {
        let mut state = lock(&self.state);
        // SAFETY: gettid takes no arguments and cannot fail.
        state.worker_tid = unsafe { libc::gettid() };
        let mut idle = false;
        loop {
            if !idle {
                set_idle(0, true);
                idle = true;
            }
            if let Some(job) = state.queue.pop_front() {
                state.busy = true;
                drop(state);
                job();
                state = lock(&self.state);
                state.busy = false;
                self.idle.notify_all();
            } else if state.closing {
                return;
            } else {
                state = self.wake.wait(state).unwrap_or_else(PoisonError::into_inner);
                // A caller may have lifted it to finish; back to idle.
                idle = false;
            }
        }
    }

    fn finish(&self) {
        let owner = self.owner_pid.load(Ordering::Acquire);
        if owner != 0 && owner != std::process::id() {
            // A forked child: the queue is its parent's (see owner_pid).
            return;
        }
        let mut state = lock(&self.state);
        loop {
            let waiting: Vec<Job> = state.queue.drain(..).collect();
            if waiting.is_empty() {
                break;
            }
            drop(state);
            for job in waiting {
                job();
            }
            state = lock(&self.state);
        }
        // The worker's job at hand, lifted to the normal priority: a busy
        // machine could starve it in the idle class.
        if state.busy {
            set_idle(state.worker_tid, false);
        }
        while state.busy {
            state = self.idle.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Reclaimers with a worker, finished at a normal exit: the worker thread
/// dies with the process, and the jobs would be left for `plfs recover`.
static LIVE: Mutex<Vec<Weak<Inner>>> = Mutex::new(Vec::new());

fn register_exit_hook(inner: &Arc<Inner>) {
    static HOOK: Once = Once::new();
    let mut live = LIVE.lock().unwrap_or_else(PoisonError::into_inner);
    live.retain(|weak| weak.strong_count() > 0);
    if !live.iter().any(|weak| std::ptr::eq(weak.as_ptr(), Arc::as_ptr(inner))) {
        live.push(Arc::downgrade(inner));
    }
    drop(live);
    HOOK.call_once(|| {
        // SAFETY: a function without arguments that lives as long as the
        // process (no plfs library is unloaded while a mount exists).
        unsafe { libc::atexit(finish_at_exit) };
    });
}

extern "C" fn finish_at_exit() {
    let live: Vec<Arc<Inner>> =
        LIVE.lock().unwrap_or_else(PoisonError::into_inner).iter().filter_map(Weak::upgrade).collect();
    for inner in live {
        inner.finish();
    }
}

/// Puts thread `tid` (0: the calling one) in the idle scheduling class,
/// where it yields to every other thread of the machine, or back in the
/// normal one.
fn set_idle(tid: libc::pid_t, idle: bool) {
    let param = libc::sched_param { sched_priority: 0 };
    let policy = if idle { libc::SCHED_IDLE } else { libc::SCHED_OTHER };
    // SAFETY: param is a valid sched_param; a tid that has exited fails
    // with ESRCH. A refusal (a seccomp sandbox) keeps the class: harmless.
    unsafe { libc::sched_setscheduler(tid, policy, &param) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn every_job_is_done_by_the_time_finish_or_drop_returns() {
        for background in [true, false] {
            let done = Arc::new(AtomicUsize::new(0));
            let reclaimer = Reclaimer::new(background);
            for _ in 0..100 {
                let done = done.clone();
                reclaimer.defer(Box::new(move || {
                    done.fetch_add(1, Ordering::SeqCst);
                }));
            }
            reclaimer.finish();
            assert_eq!(done.load(Ordering::SeqCst), 100);
            for _ in 0..10 {
                let done = done.clone();
                reclaimer.defer(Box::new(move || {
                    done.fetch_add(1, Ordering::SeqCst);
                }));
            }
            drop(reclaimer);
            assert_eq!(done.load(Ordering::SeqCst), 110);
        }
    }

    #[test]
    fn a_full_queue_makes_the_caller_do_the_job() {
        let reclaimer = Reclaimer::new(true);
        // Hold the worker on its first job so the queue fills.
        let gate = Arc::new(Mutex::new(()));
        let held = gate.lock().unwrap();
        let (started, running) = std::sync::mpsc::channel();
        let blocker = gate.clone();
        reclaimer.defer(Box::new(move || {
            started.send(()).unwrap();
            drop(blocker.lock());
        }));
        running.recv().unwrap();
        let done = Arc::new(AtomicUsize::new(0));
        for _ in 0..QUEUE_MAX {
            reclaimer.defer(Box::new(|| {}));
        }
        let here = std::thread::current().id();
        let ran_on = Arc::new(Mutex::new(None));
        let (mark, seen) = (done.clone(), ran_on.clone());
        reclaimer.defer(Box::new(move || {
            mark.fetch_add(1, Ordering::SeqCst);
            *seen.lock().unwrap() = Some(std::thread::current().id());
        }));
        assert_eq!(done.load(Ordering::SeqCst), 1, "the job past the bound ran in the caller");
        assert_eq!(*ran_on.lock().unwrap(), Some(here));
        drop(held);
        reclaimer.finish();
    }
}
