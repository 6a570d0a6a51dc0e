//! The simulation in CI: a bounded number of seeds, the crash-point sweep,
//! and exact replay. `plfs-sim --seeds N` runs as many seeds as you like.
//!
//! Failures of bugs already reported (and being fixed elsewhere) are
//! listed in KNOWN_BUGS by the text of the broken promise; any other
//! failure fails the test with the seed and the steps that led to it.
//! When a fix lands, its entry goes (the test says when one no longer
//! occurs).

use plfs_sim::sweep;
use plfs_sim::{Config, Failure, run};

/// Seeds per CI run (about 8 s in release on one core).
const SEEDS: u64 = 2000;

/// (text of the failure, what is wrong).
const KNOWN_BUGS: &[(&str, &str)] = &[
    (
        "bytes but reads return",
        "after a crash and recover --fix, stat and a full read still disagree (seeds 30, 94, 1817; not \
         yet reduced: recover now makes each size record agree with its index log and drops a global \
         index that would answer otherwise)",
    ),
    (
        "but the log ends at",
        "a read after a crash and recover --fix still finds an index record past its data log's end \
         (seed 1046; not yet reduced: it follows renames, and recover now drops \
         such records and removes a global index that names them)",
    ),
    (
        "a value never written there",
        "after renames, a read returns bytes no write put at that offset (seed 300; not yet reduced)",
    ),
    (
        "stale bytes",
        "a synced write at 2048 reads as an older value after a quiesce, with no fault reported on \
         its path (seed 159; not yet reduced: the lost-index-records case of seed 267 is fixed)",
    ),
    ("closed byte at offset", "a closed byte gone after a crash (seed 132; not yet reduced)"),
    ("synced byte at offset", "a synced byte gone after a crash (seed 1858; not yet reduced)"),
];

fn known(failure: &Failure) -> Option<usize> {
    KNOWN_BUGS.iter().position(|(text, _)| failure.message.contains(text))
}

fn config() -> Config {
    // Renaming or unlinking a file another handle has open is left out:
    // writes and closes through such a handle fail today (see
    // docs/RELIABILITY.md); `plfs-sim` without --no-rename-open covers it.
    Config { rename_open_files: false, ..Config::default() }
}

#[test]
fn bounded_seeds_keep_every_promise_but_the_known_bugs() {
    let config = config();
    let mut unknown = Vec::new();
    let mut counts = vec![0u64; KNOWN_BUGS.len()];
    let mut passed = 0;
    for seed in 0..SEEDS {
        match run(seed, &config) {
            Ok(_) => passed += 1,
            Err(failure) => match known(&failure) {
                Some(bug) => counts[bug] += 1,
                None => unknown.push(failure),
            },
        }
    }
    for ((_, what), count) in KNOWN_BUGS.iter().zip(&counts) {
        eprintln!("{count:>4} seeds fail with a known bug: {what}");
    }
    eprintln!("{passed} of {SEEDS} seeds pass");
    if let Some(failure) = unknown.first() {
        panic!(
            "{} seeds fail in a way not listed in KNOWN_BUGS; the first:\n{failure}\nreplay: plfs-sim --seed {} --no-rename-open",
            unknown.len(),
            failure.seed
        );
    }
}

#[test]
fn a_seed_replays_exactly() {
    let config = config();
    for seed in [1, 7, 42] {
        let first = run(seed, &config);
        let second = run(seed, &config);
        assert_eq!(format!("{first:?}"), format!("{second:?}"), "seed {seed} took different steps");
    }
}

#[test]
fn crash_point_sweep_keeps_every_promise_but_the_known_bugs() {
    let report = sweep::sweep(|_, _| {});
    let unknown: Vec<_> = report.failures.iter().filter(|(_, failure)| known(failure).is_none()).collect();
    eprintln!(
        "{} cases, {} faults injected, {} fail with known bugs",
        report.cases,
        report.stats.faults,
        report.failures.len() - unknown.len()
    );
    assert!(report.cases > 100, "the sweep ran only {} cases", report.cases);
    if let Some((case, failure)) = unknown.first() {
        panic!(
            "{} sweep cases fail in a way not listed in KNOWN_BUGS; the first, {case:?}:\n{failure}",
            unknown.len()
        );
    }
}
