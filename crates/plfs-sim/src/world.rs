//! The simulated machine: memory backends behind fault-injecting wrappers,
//! one clock, and the processes (mounts) that run on it.

use std::sync::Arc;

use plfs::clock::{ManualClock, Stamper};
use plfs::config::{BackendRole, Tuning, Workload};
use plfs::fs::Options;
use plfs::fs::Plfs;
use plfs::store::faulty::{Fault, FaultAction, FaultyStore, Op};
use plfs::store::memory::MemoryStore;
use plfs::store::{SharedStore, Store};

use crate::rng::SimRng;

/// Every store call a fault can strike.
pub const ALL_OPS: [Op; 25] = [
    Op::CreateDir,
    Op::CreateDirAll,
    Op::List,
    Op::Metadata,
    Op::RemoveFile,
    Op::RemoveDir,
    Op::Rename,
    Op::CreateNew,
    Op::Replace,
    Op::CreateAppend,
    Op::OpenRead,
    Op::OpenWrite,
    Op::SetMode,
    Op::SetOwner,
    Op::SetTimes,
    Op::Symlink,
    Op::ReadLink,
    Op::Space,
    Op::Append,
    Op::Sync,
    Op::Close,
    Op::ReadAt,
    Op::Len,
    Op::WriteAt,
    Op::SetLen,
];

/// Simulated pids start above Linux's largest `pid_max` (2^22), so
/// `kill(pid, 0)` finds none of them: every simulated process is gone to
/// liveness checks. That is the truth where it matters, in `recover`, which
/// the simulation runs only after a crash; a live reader consults liveness
/// only to choose how loudly to log a torn tail.
pub const PID_BASE: u32 = 1 << 30;

/// Nanoseconds the clock moves per step: more than the stamps one step
/// takes, so stamps follow steps across processes.
pub const STEP_NS: u64 = 1_000_000;

/// A small_file step: longer than `LOOK_AGAIN_AFTER`, so a process looks
/// at what others published since its last step at its next one, as a
/// process a second later does (README: small files), rather than keeping
/// a directory view for a thousand steps.
pub const SMALL_FILE_STEP_NS: u64 = 1_001_000_000;

pub struct World {
    pub memories: Vec<Arc<MemoryStore>>,
    pub faulty: Vec<Arc<FaultyStore>>,
    pub clock: Arc<ManualClock>,
    pub tuning: Tuning,
    /// How every process lays files out (the plfsrc's `workload:`).
    pub workload: Workload,
    next_pid: u32,
    /// Calls refused while frozen: not injected faults.
    frozen_calls: u64,
    freeze_mark: Option<u64>,
}

impl World {
    pub fn new(backends: usize, mut tuning: Tuning, workload: Workload) -> World {
        // An unlink's deferred deletion runs in the unlinking call here:
        // a worker thread's store calls would make the faults each seed
        // picks depend on thread timing, and runs could not be replayed.
        tuning.background_reclaim = false;
        let memories: Vec<Arc<MemoryStore>> =
            (0..backends).map(|i| Arc::new(MemoryStore::new(format!("mem://sim{i}")))).collect();
        let faulty = memories
            .iter()
            .map(|memory| Arc::new(FaultyStore::new(memory.clone() as Arc<dyn Store>)))
            .collect();
        World {
            memories,
            faulty,
            clock: Arc::new(ManualClock::new(1_700_000_000_000_000_000)),
            tuning,
            workload,
            next_pid: 0,
            frozen_calls: 0,
            freeze_mark: None,
        }
    }

    /// A new process with its own pid and stamper, on the shared clock.
    pub fn mount(&mut self) -> Plfs {
        self.next_pid += 1;
        let options = Options {
            hostname: "sim-node".into(),
            pid: PID_BASE + self.next_pid,
            uid: 0,
            gid: 0,
            stamper: Stamper::new(self.clock.clone()),
            tuning: self.tuning.clone(),
        };
        let backends: Vec<(SharedStore, BackendRole)> =
            self.faulty.iter().map(|store| (store.clone() as SharedStore, BackendRole::Any)).collect();
        Plfs::with_workload(backends, options, self.workload).expect("a mount over memory stores")
    }

    pub fn tick(&self) {
        let step = if self.workload == Workload::SmallFile { SMALL_FILE_STEP_NS } else { STEP_NS };
        self.clock.advance(step);
    }

    /// Arms `action` on the next `op` call on backend `backend`.
    pub fn arm(&self, backend: usize, op: Op, action: FaultAction) {
        self.faulty[backend].add_fault(Fault::new(op, action).nth(1));
    }

    /// Arms `action` on the `nth` call of `op` on every backend, counted
    /// from now across all of them (each backend counts its own).
    pub fn arm_nth(&self, backend: usize, op: Op, nth: u64, action: FaultAction) {
        self.faulty[backend].add_fault(Fault::new(op, action).nth(nth));
    }

    /// Faults fired since the world began (freezes excluded).
    pub fn injected(&self) -> u64 {
        self.fired() - self.frozen_calls
    }

    fn fired(&self) -> u64 {
        self.faulty.iter().map(|store| store.injected()).sum()
    }

    pub fn disarm(&mut self) {
        for store in &self.faulty {
            store.clear();
        }
    }

    /// The power goes out: every store call fails from now on, so dropping
    /// the processes' handles (which would close them) changes nothing.
    pub fn freeze(&mut self) {
        self.disarm();
        self.freeze_mark = Some(self.fired());
        for store in &self.faulty {
            for op in ALL_OPS {
                store.add_fault(Fault::new(op, FaultAction::Eio));
            }
        }
    }

    /// After [`freeze`](Self::freeze) and dropping every process: each
    /// file keeps its synced bytes and, by the roll of `rng`, none, some or
    /// all of its unsynced tail. Then the machine comes back up.
    /// With `tear` false, every unsynced byte is lost (the sweep's crash).
    pub fn crash(&mut self, rng: &mut SimRng, tear: bool) -> u64 {
        let mut torn = 0;
        for memory in &self.memories {
            memory.crash(|_, unsynced| {
                if unsynced == 0 || !tear {
                    return 0;
                }
                match rng.below(3) {
                    0 => 0,
                    1 => {
                        torn += 1;
                        rng.below(unsynced as u64 + 1) as usize
                    }
                    _ => unsynced,
                }
            });
        }
        if let Some(mark) = self.freeze_mark.take() {
            self.frozen_calls += self.fired() - mark;
        }
        self.disarm();
        torn
    }
}
