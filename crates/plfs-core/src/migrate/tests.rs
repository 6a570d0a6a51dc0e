//! `plfs migrate` of the checked-in PLFS 2.5 fixtures: in place, to
//! another name, and cut short by a crash at every store call that
//! changes something (a `FaultyStore` that halts, as a killed process
//! would, at the nth such call), then read and rerun.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crate::clock::{ManualClock, Stamper};
use crate::config::{BackendRole, Tuning};
use crate::fs::{Options, Plfs};
use crate::migrate::{MigrateOptions, MigrateOutcome};
use crate::open::OpenFlags;
use crate::plfs25_fixtures::{SCENARIOS, fixture_dir, generate, read_tree, write_tree};
use crate::store::faulty::{Fault, FaultAction, FaultyStore, Op};
use crate::store::posix::PosixStore;
use crate::store::{SharedStore, StoreExt};

fn stores(root: &Path) -> Vec<SharedStore> {
    ["b0", "b1"]
        .iter()
        .map(|backend| {
            let dir = root.join(backend);
            Arc::new(PosixStore::new(&dir, format!("posix://{}", dir.display())).unwrap()) as SharedStore
        })
        .collect()
}

/// The stores of `root`; without `exchange`, answering as S3 and HDFS do
/// (no exchange of two directories; HDFS's renames are atomic like these).
fn stores_as(root: &Path, exchange: bool) -> Vec<SharedStore> {
    stores(root)
        .into_iter()
        .map(|store| match exchange {
            true => store,
            false => Arc::new(FaultyStore::new(store).without_exchange()) as SharedStore,
        })
        .collect()
}

/// Whether the name of `path` holds something on its canonical backend:
/// then a switch without exchange needs the intent.
pub(super) fn occupied_on_canonical(plfs: &Plfs, path: &str) -> bool {
    let logical = crate::store::StorePath::parse(path.trim_start_matches('/')).unwrap();
    let (b, _) = crate::container::canonical(plfs.state(), &logical);
    plfs.state().store(b).exists(&logical).unwrap()
}

/// The fixtures without a metalink whose 2.5 container is on the name's
/// canonical backend: where a switch without exchange needs the intent.
pub(super) fn occupied_scenarios() -> Vec<&'static str> {
    let occupied = |scenario: &&str| {
        let (root, path, _) = site(scenario);
        occupied_on_canonical(&mount_over(stores(root.path())), &path)
    };
    SCENARIOS.iter().copied().filter(|scenario| *scenario != "metalink").filter(occupied).collect()
}

pub(super) fn mount_over(stores: Vec<SharedStore>) -> Plfs {
    let options = Options {
        hostname: "migrating-host".to_owned(),
        pid: 9,
        uid: 0,
        gid: 0,
        stamper: Stamper::new(Arc::new(ManualClock::new(1_700_000_000_000_000_000))),
        tuning: Tuning { threadpool_size: 1, ..Tuning::default() },
    };
    Plfs::new(stores.into_iter().map(|store| (store, BackendRole::Any)).collect(), options).unwrap()
}

fn site(scenario: &str) -> (tempfile::TempDir, String, Vec<u8>) {
    let root = tempfile::tempdir().unwrap();
    write_tree(root.path(), &read_tree(&fixture_dir(scenario)));
    (root, format!("/{scenario}.ckpt"), generate(scenario).1)
}

pub(super) fn read_all(plfs: &Plfs, path: &str) -> Vec<u8> {
    let size = plfs.stat(path).unwrap().size as usize;
    let file = plfs.open(path, OpenFlags::RDONLY, 0, 1).unwrap();
    let mut content = vec![0xEE; size + 10];
    let mut done = 0;
    while done < content.len() {
        let got = file.read(&mut content[done..], done as u64).unwrap();
        if got == 0 {
            break;
        }
        done += got;
    }
    content.truncate(done);
    file.close().unwrap();
    content
}

/// Names under `root` that only PLFS 2.5 or a migration in progress write.
fn leftovers(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(".plfsaccess")
                || name.starts_with("dropping.")
                || name.starts_with(".plfs-migrat")
                || name.starts_with(".plfs-switch")
                || name.starts_with("version-tag")
            {
                found.push(entry.path().display().to_string());
            }
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            }
        }
    }
    found
}

pub(super) const FORCE: MigrateOptions = MigrateOptions { force_open: true };

#[test]
fn every_fixture_migrates_in_place_keeping_bytes_mode_owner_and_mtime() {
    for scenario in SCENARIOS {
        let (root, path, expected) = site(scenario);
        let plfs = mount_over(stores(root.path()));
        let before = plfs.stat(&path).unwrap();
        if *scenario == "open" {
            let refused = plfs.migrate(&path, &MigrateOptions::default(), &|_| {}).unwrap_err();
            assert!(refused.to_string().contains("still open on"), "{refused}");
            assert!(plfs.is_plfs25(&path).unwrap(), "a refused migration changed the file");
        }
        let report = plfs.migrate(&path, &FORCE, &|_| {}).unwrap();
        assert_eq!(report.outcome, MigrateOutcome::Migrated, "{scenario}");
        assert_eq!(report.size, expected.len() as u64, "{scenario}");
        assert!(report.index_bytes_before > 0 && report.index_bytes_after > 0, "{scenario}: {report:?}");
        assert!(!plfs.is_plfs25(&path).unwrap(), "{scenario}: still 2.5");
        // Another process (a fresh mount) reads the plfs file.
        let again = mount_over(stores(root.path()));
        assert!(read_all(&again, &path) == expected, "{scenario}: bytes differ after migrating");
        let after = again.stat(&path).unwrap();
        assert_eq!(
            (after.size, after.mode, after.uid, after.gid, after.mtime),
            (before.size, before.mode, before.uid, before.gid, before.mtime),
            "{scenario}"
        );
        assert_eq!(leftovers(root.path()), Vec::<String>::new(), "{scenario}: 2.5 pieces left");
        assert!(again.recover(&path, false).unwrap().findings.is_empty(), "{scenario}");
        // A rerun finds a plfs file and leaves it.
        let rerun = again.migrate(&path, &FORCE, &|_| {}).unwrap();
        assert_eq!(rerun.outcome, MigrateOutcome::NotPlfs25);
    }
}

#[test]
fn migrate_to_another_name_verifies_then_removes_the_25_file() {
    for scenario in ["strided", "metalink", "flattened"] {
        let (root, path, expected) = site(scenario);
        let plfs = mount_over(stores(root.path()));
        plfs.mkdir("/new", 0o755).unwrap();
        let report = plfs.migrate_to(&path, &plfs, "/new/file", &FORCE, &|_| {}).unwrap();
        assert_eq!(report.size, expected.len() as u64);
        let again = mount_over(stores(root.path()));
        assert!(read_all(&again, "/new/file") == expected, "{scenario}");
        assert!(again.stat(&path).is_err(), "{scenario}: the 2.5 file is still there");
        assert_eq!(leftovers(root.path()), Vec::<String>::new(), "{scenario}");
    }
}

/// Calls that change a backend: a crash at each is a state on disk.
const CHANGING: &[Op] = &[
    Op::CreateDir,
    Op::CreateDirAll,
    Op::CreateNew,
    Op::Replace,
    Op::CreateAppend,
    Op::Append,
    Op::Rename,
    Op::Exchange,
    Op::RemoveFile,
    Op::RemoveDir,
    Op::SetMode,
    Op::SetOwner,
    Op::SetTimes,
];

#[test]
fn a_crash_at_any_change_leaves_a_readable_file_and_a_rerun_finishes() {
    let crashes = crash_at_every_change(true);
    assert!(crashes > 50, "only {crashes} crash points");
}

/// The same where the store cannot exchange (S3, HDFS): the switch is two
/// renames with an intent before them, and a crash between them still
/// leaves the name reading the 2.5 file.
#[test]
fn without_exchange_a_crash_at_any_change_leaves_a_readable_file_and_a_rerun_finishes() {
    let crashes = crash_at_every_change(false);
    assert!(crashes > 50, "only {crashes} crash points");
}

fn crash_at_every_change(exchange: bool) -> usize {
    let mut crashes = 0;
    // Without exchange, fixtures whose 2.5 container (or its shadow) is
    // at the name on its canonical backend: those switch by intent.
    let scenarios = if exchange {
        vec!["strided", "metalink", "flattened"]
    } else {
        vec!["metalink", occupied_scenarios()[0], "flattened"]
    };
    for scenario in scenarios {
        for op in CHANGING {
            for nth in 1.. {
                let (root, path, expected) = site(scenario);
                let halted = Arc::new(AtomicBool::new(false));
                let faulty: Vec<Arc<FaultyStore>> = stores(root.path())
                    .into_iter()
                    .map(|store| {
                        let faulty = match exchange {
                            true => FaultyStore::new(store),
                            false => FaultyStore::new(store).without_exchange(),
                        };
                        let faulty = Arc::new(faulty);
                        faulty.halt_after_fault(halted.clone());
                        faulty.add_fault(Fault::new(*op, FaultAction::Eio).nth(nth));
                        faulty
                    })
                    .collect();
                let plfs = mount_over(faulty.iter().map(|store| store.clone() as SharedStore).collect());
                let result = plfs.migrate(&path, &FORCE, &|_| {});
                drop(plfs);
                if faulty.iter().all(|store| store.injected() == 0) {
                    result.unwrap();
                    break;
                }
                crashes += 1;
                let what = format!("{scenario}: crash at {} #{nth} (exchange: {exchange})", op.name());
                // The name reads, the 2.5 file or the plfs one, never neither.
                let after = mount_over(stores_as(root.path(), exchange));
                assert!(read_all(&after, &path) == expected, "{what}: wrong bytes after the crash");
                let rerun = after.migrate(&path, &FORCE, &|_| {});
                assert!(rerun.is_ok(), "{what}: rerun: {rerun:?}");
                let last = mount_over(stores_as(root.path(), exchange));
                assert!(!last.is_plfs25(&path).unwrap(), "{what}");
                assert!(read_all(&last, &path) == expected, "{what}: wrong bytes after the rerun");
                assert_eq!(leftovers(root.path()), Vec::<String>::new(), "{what}: left behind");
            }
        }
    }
    crashes
}

#[test]
fn without_exchange_every_fixture_migrates_in_place() {
    let mut switched_by_intent = 0;
    for scenario in SCENARIOS {
        let (root, path, expected) = site(scenario);
        let plfs = mount_over(stores_as(root.path(), false));
        let before = plfs.stat(&path).unwrap();
        switched_by_intent += usize::from(occupied_on_canonical(&plfs, &path));
        let report = plfs.migrate(&path, &FORCE, &|_| {}).unwrap();
        assert_eq!(report.outcome, MigrateOutcome::Migrated, "{scenario}");
        let again = mount_over(stores_as(root.path(), false));
        assert!(!again.is_plfs25(&path).unwrap(), "{scenario}: still 2.5");
        assert!(read_all(&again, &path) == expected, "{scenario}: bytes differ after migrating");
        let after = again.stat(&path).unwrap();
        assert_eq!(
            (after.size, after.mode, after.mtime),
            (before.size, before.mode, before.mtime),
            "{scenario}"
        );
        assert_eq!(leftovers(root.path()), Vec::<String>::new(), "{scenario}: left behind");
        assert!(again.recover(&path, false).unwrap().findings.is_empty(), "{scenario}");
    }
    // Before the switch intent, these were refused (`--to` only).
    assert!(switched_by_intent >= 3, "only {switched_by_intent} fixtures had 2.5 pieces at the name");
}

/// A crash between the switch's two renames: the name holds nothing on
/// its canonical backend, yet a fresh mount stats and reads the 2.5 file
/// (put aside, found through the intent); `recover` names the cut switch
/// and `--fix` finishes it. An unlink there removes the 2.5 file, and the
/// plfs copy never shows.
#[test]
fn without_exchange_a_crash_between_the_renames_reads_the_25_file_put_aside() {
    for unlink in [false, true] {
        let (root, path, expected) = site(occupied_scenarios()[0]);
        let halted = Arc::new(AtomicBool::new(false));
        let faulty: Vec<Arc<FaultyStore>> = stores(root.path())
            .into_iter()
            .map(|store| {
                let faulty = Arc::new(FaultyStore::new(store).without_exchange());
                faulty.halt_after_fault(halted.clone());
                // #1 makes the verified name, #2 puts 2.5 aside, #3 is the copy's.
                faulty.add_fault(
                    Fault::new(Op::Rename, FaultAction::Eio).nth(3).path_contains(".plfs-migrated."),
                );
                faulty
            })
            .collect();
        let plfs = mount_over(faulty.iter().map(|store| store.clone() as SharedStore).collect());
        assert!(occupied_on_canonical(&plfs, &path));
        assert!(plfs.migrate(&path, &FORCE, &|_| {}).is_err());
        drop(plfs);
        let after = mount_over(stores_as(root.path(), false));
        assert!(!occupied_on_canonical(&after, &path), "the crash was not between the renames");
        assert!(after.is_plfs25(&path).unwrap());
        assert_eq!(after.stat(&path).unwrap().size, expected.len() as u64);
        assert!(read_all(&after, &path) == expected);
        if unlink {
            after.unlink(&path).unwrap();
            assert!(after.stat(&path).is_err());
            let again = mount_over(stores_as(root.path(), false));
            assert!(again.stat(&path).is_err(), "the copy showed after the unlink");
            // It finishes the cut switch, then finds no file to check.
            let recovered = again.recover(&path, true).unwrap_err();
            assert_eq!(recovered.kind(), crate::error::ErrorKind::NotFound, "{recovered}");
            assert!(again.stat(&path).is_err(), "recover brought the file back");
        } else {
            let report = after.recover(&path, false).unwrap();
            assert!(
                report
                    .findings
                    .iter()
                    .any(|f| f.problem == crate::tools::Problem::InterruptedMigration && !f.fixed),
                "{report:?}"
            );
            after.recover(&path, true).unwrap();
            let last = mount_over(stores_as(root.path(), false));
            assert!(!last.is_plfs25(&path).unwrap());
            assert!(read_all(&last, &path) == expected);
        }
        assert_eq!(leftovers(root.path()), Vec::<String>::new(), "unlink: {unlink}");
    }
}

#[test]
fn recover_finishes_a_switch_a_crash_cut_short() {
    let (root, path, expected) = site("metalink");
    let halted = Arc::new(AtomicBool::new(false));
    let faulty: Vec<Arc<FaultyStore>> = stores(root.path())
        .into_iter()
        .map(|store| {
            let faulty = Arc::new(FaultyStore::new(store));
            faulty.halt_after_fault(halted.clone());
            // The first removal is the first step after the switch.
            faulty.add_fault(Fault::new(Op::RemoveFile, FaultAction::Eio).nth(1).path_contains("dropping"));
            faulty
        })
        .collect();
    let plfs = mount_over(faulty.iter().map(|store| store.clone() as SharedStore).collect());
    assert!(plfs.migrate(&path, &FORCE, &|_| {}).is_err());
    drop(plfs);
    let after = mount_over(stores(root.path()));
    assert!(!leftovers(root.path()).is_empty());
    let report = after.recover(&path, true).unwrap();
    assert!(
        report.findings.iter().any(|f| f.problem == crate::tools::Problem::InterruptedMigration && f.fixed),
        "{report:?}"
    );
    assert!(read_all(&after, &path) == expected);
    assert_eq!(leftovers(root.path()), Vec::<String>::new());
}
