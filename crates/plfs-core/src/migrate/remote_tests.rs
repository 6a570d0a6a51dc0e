//! `plfs migrate` in place on real servers (`scripts/servers`): S3 (MinIO)
//! and HDFS (MiniDFSCluster), neither of which can exchange two
//! directories, so where PLFS 2.5 has its container at the name the switch
//! goes through the switch intent. Every fixture without a metalink
//! (neither store keeps symlinks) migrates and reads the same bytes
//! through a fresh mount, and a crash at each store call of the switch
//! leaves the name reading (2.5 or plfs bytes) through a fresh mount, and
//! a rerun finishes. Without the servers the tests skip, saying so, unless
//! `PLFS_REQUIRE_SERVERS=1` (set by `make test`).
#![cfg(all(feature = "s3", feature = "hdfs"))]

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::tests::{FORCE, mount_over, occupied_on_canonical, occupied_scenarios, read_all};
use crate::config::BackendLocation;
use crate::fs::{Plfs, open_store};
use crate::migrate::MigrateOutcome;
use crate::plfs25_fixtures::{SCENARIOS, fixture_dir, generate, read_tree};
use crate::store::faulty::{Fault, FaultAction, FaultyStore, Op};
use crate::store::test_server::TestServer;
use crate::store::{EntryKind, SharedStore, StorePath};

fn store_at(url: &str) -> SharedStore {
    open_store(&BackendLocation::parse(url).unwrap()).unwrap()
}

/// Two backends under `root` on the server (two key prefixes of the
/// bucket, or two HDFS directories), as URLs.
fn backend_urls(server: &TestServer, root: &str) -> Vec<String> {
    match BackendLocation::parse(server.url()).unwrap() {
        BackendLocation::S3 { bucket, access, .. } => ["b0", "b1"]
            .iter()
            .map(|backend| {
                let prefix = format!("{root}/{backend}");
                BackendLocation::S3 { bucket: bucket.clone(), prefix, access: access.clone() }.to_string()
            })
            .collect(),
        BackendLocation::Hdfs { .. } => {
            let top = store_at(server.url());
            ["b0", "b1"]
                .iter()
                .map(|backend| {
                    top.create_dir_all(&StorePath::parse(&format!("{root}/{backend}")).unwrap()).unwrap();
                    format!("{}/{root}/{backend}", server.url().trim_end_matches('/'))
                })
                .collect()
        }
        BackendLocation::Posix(_) => panic!("{}: not a server", server.url()),
    }
}

fn stores(urls: &[String]) -> Vec<SharedStore> {
    urls.iter().map(|url| store_at(url)).collect()
}

/// Writes the fixture `scenario` (as 2.5 left it on two backends) onto
/// `stores`; returns the file's path and bytes.
fn upload(stores: &[SharedStore], scenario: &str) -> (String, Vec<u8>) {
    let tree = read_tree(&fixture_dir(scenario));
    assert!(tree.links.is_empty(), "{scenario}: symlinks cannot be stored on S3 or HDFS");
    for (name, bytes) in &tree.files {
        let (backend, rest) = name.split_once('/').unwrap();
        let store = &stores[backend.trim_start_matches('b').parse::<usize>().unwrap()];
        let path = StorePath::parse(rest).unwrap();
        store.create_dir_all(&path.parent().unwrap()).unwrap();
        store.create_new(&path, bytes).unwrap();
    }
    (format!("/{scenario}.ckpt"), generate(scenario).1)
}

/// Names on the stores that only PLFS 2.5 or a migration in progress write.
fn leftovers(stores: &[SharedStore]) -> Vec<String> {
    let mut found = Vec::new();
    for store in stores {
        let mut stack = vec![StorePath::root()];
        while let Some(dir) = stack.pop() {
            for entry in store.list(&dir).unwrap() {
                let path = dir.join(&entry.name).unwrap();
                let name = entry.name.as_str();
                if name.starts_with(".plfsaccess")
                    || name.starts_with("dropping.")
                    || name.starts_with(".plfs-migrat")
                    || name.starts_with(".plfs-switch")
                    || name.starts_with("version-tag")
                {
                    found.push(format!("{}/{path}", store.url()));
                }
                if entry.kind == EntryKind::Directory {
                    stack.push(path);
                }
            }
        }
    }
    found
}

fn every_fixture_migrates_in_place_on(kind: &'static str) {
    let Some(server) = TestServer::start(kind, &[]) else { return };
    let mut switched_by_intent = 0;
    for scenario in SCENARIOS.iter().filter(|scenario| **scenario != "metalink") {
        let urls = backend_urls(&server, &format!("all-{scenario}"));
        let (path, expected) = upload(&stores(&urls), scenario);
        let plfs = mount_over(stores(&urls));
        let before = plfs.stat(&path).unwrap();
        assert!(read_all(&plfs, &path) == expected, "{kind} {scenario}: the 2.5 file reads wrong");
        switched_by_intent += usize::from(occupied_on_canonical(&plfs, &path));
        let report = plfs.migrate(&path, &FORCE, &|_| {}).unwrap();
        assert_eq!(report.outcome, MigrateOutcome::Migrated, "{kind} {scenario}");
        drop(plfs);
        let again = mount_over(stores(&urls));
        assert!(!again.is_plfs25(&path).unwrap(), "{kind} {scenario}: still 2.5");
        assert!(read_all(&again, &path) == expected, "{kind} {scenario}: bytes differ after migrating");
        assert_eq!(again.stat(&path).unwrap().size, before.size, "{kind} {scenario}");
        assert_eq!(leftovers(&stores(&urls)), Vec::<String>::new(), "{kind} {scenario}: left behind");
        assert!(again.recover(&path, false).unwrap().findings.is_empty(), "{kind} {scenario}");
    }
    // Before the switch intent, these were refused in place.
    assert!(switched_by_intent >= 2, "{kind}: only {switched_by_intent} fixtures had 2.5 at the name");
}

/// The store calls of a switch by intent (and the step either side), each
/// as (call, a text in its path, which such call).
const SWITCH_CALLS: &[(Op, &str, u64)] = &[
    (Op::Rename, ".plfs-migrated.", 1),     // the copy is verified
    (Op::CreateNew, ".plfs-switch.", 1),    // the intent
    (Op::Rename, ".plfs-migrated.", 2),     // the 2.5 container put aside
    (Op::Rename, ".plfs-migrated.", 3),     // the copy takes the name
    (Op::RemoveFile, ".plfs-switch.", 1),   // the intent goes
    (Op::RemoveFile, ".plfs-migrated.", 1), // clean-up of the aside
];

fn a_crash_at_each_call_of_the_switch_on(kind: &'static str) {
    let Some(server) = TestServer::start(kind, &[]) else { return };
    for (number, (op, text, nth)) in SWITCH_CALLS.iter().enumerate() {
        let what = format!("{kind}: crash at {} #{nth} of {text}", op.name());
        let urls = backend_urls(&server, &format!("crash-{number}"));
        let (path, expected) = upload(&stores(&urls), occupied_scenarios()[0]);
        let halted = Arc::new(AtomicBool::new(false));
        let faulty: Vec<Arc<FaultyStore>> = stores(&urls)
            .into_iter()
            .map(|store| {
                let faulty = Arc::new(FaultyStore::new(store));
                faulty.halt_after_fault(halted.clone());
                faulty.add_fault(Fault::new(*op, FaultAction::Eio).nth(*nth).path_contains(*text));
                faulty
            })
            .collect();
        let plfs = mount_over(faulty.iter().map(|store| store.clone() as SharedStore).collect());
        assert!(occupied_on_canonical(&plfs, &path), "{what}: the switch needs no intent");
        assert!(plfs.migrate(&path, &FORCE, &|_| {}).is_err(), "{what}: no crash");
        assert_eq!(faulty.iter().map(|store| store.injected()).sum::<u64>(), 1, "{what}");
        drop(plfs);
        // A fresh mount reads the name: the 2.5 file or the plfs one.
        let after: Plfs = mount_over(stores(&urls));
        assert_eq!(after.stat(&path).unwrap().size, expected.len() as u64, "{what}");
        assert!(read_all(&after, &path) == expected, "{what}: wrong bytes after the crash");
        let rerun = after.migrate(&path, &FORCE, &|_| {});
        assert!(rerun.is_ok(), "{what}: rerun: {rerun:?}");
        drop(after);
        let last = mount_over(stores(&urls));
        assert!(!last.is_plfs25(&path).unwrap(), "{what}");
        assert!(read_all(&last, &path) == expected, "{what}: wrong bytes after the rerun");
        assert_eq!(leftovers(&stores(&urls)), Vec::<String>::new(), "{what}: left behind");
    }
}

#[test]
fn s3_every_fixture_migrates_in_place() {
    every_fixture_migrates_in_place_on("s3");
}

#[test]
fn hdfs_every_fixture_migrates_in_place() {
    every_fixture_migrates_in_place_on("hdfs");
}

#[test]
fn s3_a_crash_at_each_call_of_the_switch_leaves_a_readable_file() {
    a_crash_at_each_call_of_the_switch_on("s3");
}

#[test]
fn hdfs_a_crash_at_each_call_of_the_switch_leaves_a_readable_file() {
    a_crash_at_each_call_of_the_switch_on("hdfs");
}
