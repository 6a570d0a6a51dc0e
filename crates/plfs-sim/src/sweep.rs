//! The crash-point sweep: one fixed script (container creation, writes by
//! two processes, sync, close, flatten, truncate, rename over an existing
//! file, unlink), run once per store call it makes: for each call kind
//! and each k, the k-th such call fails with each fault kind, then the
//! machine crashes, recovers and is checked as in a random run.

use plfs::config::Tuning;
use plfs::store::faulty::{FaultAction, Op};

use crate::sim::{Config, Failure, Sim, Stats, Unexpected};

/// The call kinds the sweep strikes: every one the script makes.
pub const SWEEP_OPS: [Op; 13] = [
    Op::CreateDir,
    Op::CreateDirAll,
    Op::CreateNew,
    Op::Replace,
    Op::CreateAppend,
    Op::Append,
    Op::Sync,
    Op::Close,
    Op::Rename,
    Op::RemoveFile,
    Op::RemoveDir,
    Op::List,
    Op::Metadata,
];

pub const SWEEP_ACTIONS: [FaultAction; 4] =
    [FaultAction::Eio, FaultAction::Enospc, FaultAction::ShortWrite(7), FaultAction::TornAppend];

/// One sweep case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Case {
    pub backend: usize,
    pub op: Op,
    pub nth: u64,
    pub action: FaultAction,
}

/// What a whole sweep did.
#[derive(Debug, Clone, Default)]
pub struct SweepReport {
    pub cases: u64,
    pub stats: Stats,
    pub failures: Vec<(Case, Failure)>,
}

const BACKENDS: usize = 2;

fn config() -> Config {
    Config { steps: 0, processes: 2, backends: BACKENDS, tear_on_crash: false, ..Config::default() }
}

fn tuning() -> Tuning {
    // Tiny index buffers so the script's writes reach the index log
    // (frames, patterns) before its syncs; the last close flattens.
    Tuning {
        threadpool_size: 1,
        num_hostdirs: 2,
        index_flush_bytes: 64,
        flatten_on_close: true,
        ..Tuning::default()
    }
}

/// Runs the script with `case` armed, then crashes and checks. Returns
/// whether the fault fired (false: k is past the script's last such call).
pub fn run_case(case: Case) -> Result<(bool, Stats), Failure> {
    let config = config();
    let seed = case_seed(&case);
    let mut sim = Sim::new(seed, &config, tuning());
    sim.note(format!("sweep case {case:?}"));
    sim.world.arm_nth(case.backend, case.op, case.nth, case.action);
    let result = script(&mut sim);
    let fired = sim.world.injected() > 0;
    let result = result.and_then(|()| sim.crash_and_check());
    sim.outcome(result).map(|stats| (fired, stats))
}

/// Each case has its own seed for the crash's torn tails, so a failing case
/// replays exactly.
fn case_seed(case: &Case) -> u64 {
    let action = match case.action {
        FaultAction::Eio => 1,
        FaultAction::Enospc => 2,
        FaultAction::ShortWrite(_) => 3,
        FaultAction::TornAppend => 4,
    };
    (case.op as u64) << 40 | (case.backend as u64) << 32 | case.nth << 8 | action
}

/// Each step tolerates an error only when the injected fault has fired.
fn script(sim: &mut Sim<'_>) -> Result<(), String> {
    type Step = fn(&mut Sim<'_>) -> Result<(), Unexpected>;
    let steps: [Step; 16] = [
        |sim| sim.open_with(0, "/a", true, true, false),
        |sim| sim.write_with(0, 0, 100),
        |sim| sim.write_with(0, 100, 100),
        |sim| sim.write_with(0, 200, 100),
        |sim| sim.sync_with(0),
        |sim| sim.write_with(0, 500, 50),
        |sim| sim.open_with(1, "/a", false, true, false),
        |sim| sim.write_with(1, 5, 10),
        |sim| sim.close_handle(1),
        |sim| sim.close_handle(0),
        |sim| sim.flatten_with(0, "/a"),
        |sim| sim.truncate_path(1, "/a", 150),
        |sim| sim.open_with(1, "/d/b", false, true, false).and_then(|()| sim.write_with(0, 0, 300)),
        |sim| sim.close_handle(0),
        |sim| sim.rename_with(0, "/a", "/d/b"),
        |sim| sim.unlink_with(1, "/d/b"),
    ];
    for step in steps {
        sim.step += 1;
        sim.world.tick();
        // A step whose subject is gone (an earlier step failed) does nothing.
        let outcome = step(sim);
        if let Some(message) = sim.broken.take() {
            return Err(message);
        }
        match outcome {
            Ok(()) => {}
            Err(Unexpected(message)) if sim.world.injected() == 0 => return Err(message),
            Err(Unexpected(message)) => sim.note(format!("  (after the injected fault) {message}")),
        }
    }
    Ok(())
}

/// No script makes more calls of one kind than this.
const MAX_NTH: u64 = 400;

/// Every case: each call kind on each backend, k = 1, 2, … until the fault
/// no longer fires, each fault kind. First the script without faults,
/// which must pass for the sweep to mean anything.
pub fn sweep(mut progress: impl FnMut(&Case, &Result<(bool, Stats), Failure>)) -> SweepReport {
    let mut report = SweepReport::default();
    let baseline = Case { backend: 0, op: Op::Space, nth: 1, action: FaultAction::Eio };
    let result = run_case(baseline);
    progress(&baseline, &result);
    report.cases += 1;
    if let Err(failure) = result {
        report.failures.push((baseline, failure));
        return report;
    }
    for backend in 0..BACKENDS {
        for op in SWEEP_OPS {
            for action in SWEEP_ACTIONS {
                for nth in 1..=MAX_NTH {
                    let case = Case { backend, op, nth, action };
                    let result = run_case(case);
                    progress(&case, &result);
                    report.cases += 1;
                    match result {
                        Ok((fired, stats)) => {
                            report.stats += stats;
                            if !fired {
                                break;
                            }
                        }
                        Err(failure) => {
                            report.stats += failure.stats;
                            report.failures.push((case, failure));
                        }
                    }
                }
            }
        }
    }
    report
}
