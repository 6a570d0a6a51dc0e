//! Time is injected so a seeded simulation can replay exactly, and ordering
//! stamps are made strictly increasing so that within one process a later
//! write always beats an earlier one, whatever the wall clock does.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of wall-clock time in nanoseconds since the Unix epoch.
pub trait Clock: Send + Sync + fmt::Debug {
    fn now_ns(&self) -> u64;
}

#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ns(&self) -> u64 {
        // A clock before 1970 is a broken host; stamps then start at zero and
        // stay ordered through the Stamper's monotonic bump.
        #[allow(clippy::disallowed_methods)]
        let now = SystemTime::now();
        now.duration_since(UNIX_EPOCH).map_or(0, saturating_ns)
    }
}

/// A clock that moves only when told to: for deterministic tests.
#[derive(Debug, Default)]
pub struct ManualClock {
    now_ns: AtomicU64,
}

impl ManualClock {
    pub fn new(start_ns: u64) -> ManualClock {
        ManualClock { now_ns: AtomicU64::new(start_ns) }
    }

    pub fn advance(&self, nanoseconds: u64) {
        self.now_ns.fetch_add(nanoseconds, Ordering::SeqCst);
    }

    pub fn set(&self, now_ns: u64) {
        self.now_ns.store(now_ns, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ns(&self) -> u64 {
        self.now_ns.load(Ordering::SeqCst)
    }
}

/// Hands out ordering stamps: wall-clock nanoseconds, bumped so that each is
/// strictly greater than every stamp this process handed out before. Across
/// hosts, order is only as good as clock synchronisation (docs/FORMAT.md).
#[derive(Debug, Clone)]
pub struct Stamper {
    clock: Arc<dyn Clock>,
    last: Arc<AtomicU64>,
}

impl Stamper {
    pub fn new(clock: Arc<dyn Clock>) -> Stamper {
        Stamper { clock, last: Arc::new(AtomicU64::new(0)) }
    }

    /// A stamper shared by every user in this process, on the system clock.
    pub fn process_wide() -> Stamper {
        static LAST: std::sync::OnceLock<Arc<AtomicU64>> = std::sync::OnceLock::new();
        Stamper {
            clock: Arc::new(SystemClock),
            last: LAST.get_or_init(|| Arc::new(AtomicU64::new(0))).clone(),
        }
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    pub fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    /// The next stamp: max(now, previous + 1).
    pub fn next(&self) -> u64 {
        let now = self.clock.now_ns();
        let mut previous = self.last.load(Ordering::Relaxed);
        loop {
            let candidate = now.max(previous + 1);
            match self.last.compare_exchange_weak(previous, candidate, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return candidate,
                Err(actual) => previous = actual,
            }
        }
    }

    /// Makes every later stamp exceed `seen`, e.g. a stamp read from disk,
    /// so a reopened file's new writes beat what is already there even if
    /// this host's clock is behind the one that wrote it.
    pub fn observe(&self, seen: u64) {
        self.last.fetch_max(seen, Ordering::AcqRel);
    }
}

pub fn saturating_ns(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

pub fn ns_to_system_time(ns: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(ns)
}

pub fn system_time_to_ns(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, saturating_ns)
}

/// How long a cached view of a file serves sizes and reads at its end
/// before they check it against the store on their own, as an NFS
/// client's attribute cache does (3 s at least there). A process holding a
/// file open while others write it then sees their published writes within
/// about this long, lock or not: `tail -f`, which polls the size every
/// second, followed nothing before. Reads inside the cached end
/// never check.
pub const LOOK_AGAIN_AFTER: Duration = Duration::from_secs(1);

/// How long a writer's index records may wait in its buffer once it
/// writes again: at a write that finds its last append (or its start) this
/// long ago, the buffered frame is appended, so a reader following the file
/// ([`LOOK_AGAIN_AFTER`]) sees a slow writer's progress about this late.
pub const PUBLISH_AFTER: Duration = Duration::from_secs(1);

/// When a cached view was last checked on its own account, on the mount's
/// clock (so a simulation's manual clock decides it too).
#[derive(Debug, Default)]
pub struct LookAgain {
    /// Nanoseconds of the last check; 0 before the first call.
    last: AtomicU64,
}

impl LookAgain {
    /// Starts the clock again at `now_ns`: the view was just loaded, so
    /// the next check is due a full [`LOOK_AGAIN_AFTER`] later.
    pub fn restart(&self, now_ns: u64) {
        self.last.store(now_ns.max(1), Ordering::Release);
    }

    /// Whether a check is due at `now_ns`: [`LOOK_AGAIN_AFTER`] has passed
    /// since the last one (the first call only starts the clock, unless
    /// [`restart`](Self::restart) did). Due, it restarts it, so of callers
    /// racing one gets true.
    pub fn due(&self, now_ns: u64) -> bool {
        let last = self.last.load(Ordering::Acquire);
        if last == 0 {
            let _ = self.last.compare_exchange(0, now_ns.max(1), Ordering::AcqRel, Ordering::Acquire);
            return false;
        }
        if now_ns.saturating_sub(last) < saturating_ns(LOOK_AGAIN_AFTER) {
            return false;
        }
        self.last.compare_exchange(last, now_ns.max(1), Ordering::AcqRel, Ordering::Acquire).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_strictly_increase_even_when_the_clock_stalls_or_steps_back() {
        let clock = Arc::new(ManualClock::new(1_000));
        let stamper = Stamper::new(clock.clone());
        assert_eq!(stamper.next(), 1_000);
        assert_eq!(stamper.next(), 1_001);
        clock.set(500);
        assert_eq!(stamper.next(), 1_002);
        clock.set(5_000);
        assert_eq!(stamper.next(), 5_000);
        stamper.observe(9_000);
        assert_eq!(stamper.next(), 9_001);
    }

    #[test]
    fn a_look_again_is_due_once_a_second_from_the_first_call() {
        let second = saturating_ns(LOOK_AGAIN_AFTER);
        let look = LookAgain::default();
        assert!(!look.due(5_000), "the first call starts the clock");
        assert!(!look.due(5_000 + second - 1));
        assert!(look.due(5_000 + second));
        assert!(!look.due(5_000 + second), "due once, then the clock restarts");
        assert!(look.due(5_000 + 3 * second));
    }

    #[test]
    fn concurrent_stamps_are_unique() {
        let stamper = Stamper::new(Arc::new(ManualClock::new(7)));
        let mut all: Vec<u64> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|_| scope.spawn(|| (0..1000).map(|_| stamper.next()).collect::<Vec<_>>()))
                .collect();
            handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 4000);
    }
}
