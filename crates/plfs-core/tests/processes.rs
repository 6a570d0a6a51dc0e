//! Tests with real OS processes on POSIX backends: N-1 strided writers, a
//! creation storm, and writers killed with SIGKILL.
//!
//! Children are this test binary re-run with `PLFS_TEST_ROLE` set; the
//! `child` test dispatches on it and is a no-op in a normal run.

#[path = "support/strided.rs"]
mod strided;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use plfs::config::{BackendRole, Tuning, Workload};
use plfs::fs::{Options, Plfs};
use plfs::open::OpenFlags;
use plfs::store::SharedStore;
use plfs::store::posix::PosixStore;
use plfs::striping::{Component, Layout, StripeCount, StripingConfig};
use plfs::tools::Problem;
use strided::{RECORD_BYTES, now_ms, record_bytes, verify_strided, wait_until, write_strided};

fn posix_backends(backends: &[PathBuf]) -> Vec<(SharedStore, BackendRole)> {
    backends
        .iter()
        .map(|dir| {
            let store: SharedStore =
                Arc::new(PosixStore::new(dir.clone(), format!("posix://{}", dir.display())).unwrap());
            (store, BackendRole::Any)
        })
        .collect()
}

fn mount(backends: &[PathBuf], tuning: Tuning) -> Plfs {
    Plfs::new(posix_backends(backends), Options::from_environment(tuning)).unwrap()
}

/// An n-n (file_per_proc) mount over the same backends.
fn flat_mount(backends: &[PathBuf]) -> Plfs {
    workload_mount(backends, Workload::FilePerProc)
}

fn workload_mount(backends: &[PathBuf], workload: Workload) -> Plfs {
    Plfs::with_workload(posix_backends(backends), Options::from_environment(Tuning::default()), workload)
        .unwrap()
}

/// The bytes of n-n storm file `index` of `rank`: its name, repeated to a
/// length that differs per file, so a swapped or cut file shows.
fn storm_bytes(rank: u64, index: u64) -> Vec<u8> {
    let name = format!("rank{rank}.file{index};");
    name.bytes().cycle().take(16 + (index as usize * 37) % 2000).collect()
}

fn backends_in(root: &Path, count: usize) -> Vec<PathBuf> {
    (0..count)
        .map(|i| {
            let dir = root.join(format!("b{i}"));
            std::fs::create_dir_all(&dir).unwrap();
            dir
        })
        .collect()
}

fn spawn_child(role: &str, backends: &[PathBuf], args: &[String]) -> Child {
    let joined = backends.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(":");
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env("PLFS_TEST_ROLE", role)
        .env("PLFS_TEST_BACKENDS", joined)
        .env("PLFS_TEST_ARGS", args.join(","))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

fn child_args() -> (Vec<PathBuf>, Vec<u64>) {
    let backends = std::env::var("PLFS_TEST_BACKENDS").unwrap().split(':').map(PathBuf::from).collect();
    let args = std::env::var("PLFS_TEST_ARGS")
        .unwrap()
        .split(',')
        .filter(|a| !a.is_empty())
        .map(|a| a.parse().unwrap())
        .collect();
    (backends, args)
}

/// Child entry point: runs only when spawned with PLFS_TEST_ROLE.
#[test]
fn child() {
    let Ok(role) = std::env::var("PLFS_TEST_ROLE") else { return };
    let (backends, args) = child_args();
    match role.as_str() {
        "strided-writer" => {
            // args: rank, writers, records, start_at_ms
            let (rank, writers, records, start_at) = (args[0], args[1], args[2], args[3]);
            let plfs = mount(&backends, Tuning::default());
            wait_until(start_at);
            write_strided(&plfs, "/n1/checkpoint", rank, writers, records);
        }
        "crash-writer" | "striped-crash-writer" => {
            // args: sync_every; writes records until killed, printing the
            // count of records covered by each completed sync.
            let sync_every = args[0];
            let tuning = Tuning { index_flush_bytes: 512, ..Tuning::default() };
            let plfs = if role == "striped-crash-writer" {
                // Every record crosses stripe units: pieces in up to 4 logs.
                let layout = Layout::new(vec![
                    Component {
                        start: 0,
                        end: Some(128 << 10),
                        stripe_count: StripeCount::Count(1),
                        stripe_size: 64 << 10,
                        pool: None,
                    },
                    Component {
                        start: 128 << 10,
                        end: None,
                        stripe_count: StripeCount::All,
                        stripe_size: 64 << 10,
                        pool: None,
                    },
                ])
                .unwrap();
                let striping = StripingConfig { default_layout: Some(layout), ..StripingConfig::default() };
                Plfs::with_striping(posix_backends(&backends), Options::from_environment(tuning), striping)
                    .unwrap()
            } else {
                mount(&backends, tuning)
            };
            let handle = plfs.open("/crash", OpenFlags::WRONLY.create(), 0o644, 1).unwrap();
            println!("PLFS-READY");
            for record in 0.. {
                // Records land in a shuffled-but-deterministic order of slots.
                let slot = (record * 7) % 4096;
                handle.write(&record_bytes(slot), slot * RECORD_BYTES as u64).unwrap();
                if (record + 1) % sync_every == 0 {
                    handle.sync().unwrap();
                    println!("PLFS-SYNCED {}", record + 1);
                }
            }
        }
        "flat-creator" | "small-creator" => {
            // args: rank, files, start_at_ms
            let (rank, files, start_at) = (args[0], args[1], args[2]);
            let small = role == "small-creator";
            let plfs =
                workload_mount(&backends, if small { Workload::SmallFile } else { Workload::FilePerProc });
            // Small files: O_CREAT|O_TRUNC, as cp does (a create record, no lookup).
            let flags = if small {
                OpenFlags::WRONLY.create().truncate()
            } else {
                OpenFlags::WRONLY.create().exclusive()
            };
            wait_until(start_at);
            for index in 0..files {
                let path = format!("/storm/r{rank}.f{index}");
                let handle = plfs.open(&path, flags, 0o644, rank).unwrap();
                handle.write(&storm_bytes(rank, index), 0).unwrap();
                handle.close().unwrap();
            }
        }
        other => panic!("unknown role {other}"),
    }
}

#[test]
fn n1_strided_processes_then_a_fresh_reader() {
    let root = tempfile::tempdir().unwrap();
    let backends = backends_in(root.path(), 3);
    let plfs = mount(&backends, Tuning::default());
    plfs.mkdir("/n1", 0o755).unwrap();
    let (writers, records) = (6u64, 40u64);
    let start = now_ms() + 300;
    let children: Vec<Child> = (0..writers)
        .map(|rank| {
            let args = [rank, writers, records, start].map(|v| v.to_string());
            spawn_child("strided-writer", &backends, &args)
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let reader = mount(&backends, Tuning::default());
    verify_strided(&reader, "/n1/checkpoint", writers * records, || {});
    let inventory = reader.inventory("/n1/checkpoint").unwrap();
    assert_eq!(inventory.logs.len(), writers as usize, "one log pair per writer process");
}

#[test]
fn sixteen_processes_create_one_container() {
    let root = tempfile::tempdir().unwrap();
    let backends = backends_in(root.path(), 3);
    let plfs = mount(&backends, Tuning::default());
    plfs.mkdir("/n1", 0o755).unwrap();
    let start = now_ms() + 400;
    let children: Vec<Child> = (0..16u64)
        .map(|rank| spawn_child("strided-writer", &backends, &[rank, 16, 1, start].map(|v| v.to_string())))
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let names: Vec<String> = plfs.readdir("/n1").unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, vec!["checkpoint".to_string()]);
    // No half-made containers left anywhere.
    for dir in &backends {
        for entry in std::fs::read_dir(dir.join("n1")).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            assert_eq!(name, "checkpoint", "debris in {}", dir.display());
        }
    }
    let handle = plfs.open("/n1/checkpoint", OpenFlags::RDONLY, 0, 0).unwrap();
    let mut buf = vec![0u8; 16 * RECORD_BYTES];
    assert_eq!(handle.read(&mut buf, 0).unwrap(), buf.len());
    for record in 0..16 {
        assert_eq!(
            &buf[record * RECORD_BYTES..(record + 1) * RECORD_BYTES],
            &record_bytes(record as u64)[..]
        );
    }
    handle.close().unwrap();
}

/// N-N create storm: 16 processes × 1000 files each on an n-n mount over
/// 4 POSIX backends; every name and byte is checked afterwards.
#[test]
fn sixteen_processes_create_a_thousand_n_n_files_each() {
    const PROCESSES: u64 = 16;
    const FILES: u64 = 1000;
    let root = tempfile::tempdir().unwrap();
    let backends = backends_in(root.path(), 4);
    let plfs = flat_mount(&backends);
    plfs.mkdir("/storm", 0o755).unwrap();
    let began = Instant::now();
    let start = now_ms() + 400;
    let children: Vec<Child> = (0..PROCESSES)
        .map(|rank| spawn_child("flat-creator", &backends, &[rank, FILES, start].map(|v| v.to_string())))
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    assert!(began.elapsed() < Duration::from_secs(120), "storm took {:?}", began.elapsed());
    assert_storm_names(&plfs, PROCESSES, FILES);
    // Every backend holds a share, and each file is on exactly its backend.
    for (index, dir) in backends.iter().enumerate() {
        let count = std::fs::read_dir(dir.join("storm")).unwrap().count();
        assert!(count > (PROCESSES * FILES) as usize / 8, "backend {index} holds only {count} files");
    }
    assert_storm_bytes(&plfs, PROCESSES, FILES);
}

/// 1-N create storm: 16 processes × 1000 files each in one small_file
/// directory over 4 POSIX backends: every name and byte checked by a fresh
/// mount, and the backends hold three logs per writer, not a file per file.
#[test]
fn sixteen_processes_create_a_thousand_small_files_each() {
    const PROCESSES: u64 = 16;
    const FILES: u64 = 1000;
    let root = tempfile::tempdir().unwrap();
    let backends = backends_in(root.path(), 4);
    workload_mount(&backends, Workload::SmallFile).mkdir("/storm", 0o755).unwrap();
    let began = Instant::now();
    let start = now_ms() + 400;
    let children: Vec<Child> = (0..PROCESSES)
        .map(|rank| spawn_child("small-creator", &backends, &[rank, FILES, start].map(|v| v.to_string())))
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    assert!(began.elapsed() < Duration::from_secs(120), "storm took {:?}", began.elapsed());
    let plfs = workload_mount(&backends, Workload::SmallFile);
    assert_storm_names(&plfs, PROCESSES, FILES);
    let backend_files: usize = backends
        .iter()
        .map(|dir| std::fs::read_dir(dir.join("storm/.plfs-smallfile")).map_or(0, |entries| entries.count()))
        .sum();
    assert_eq!(backend_files as u64, 3 * PROCESSES, "a name, an index and a data log per writer");
    assert_storm_bytes(&plfs, PROCESSES, FILES);
}

/// Every storm file `r{rank}.f{index}` is listed in /storm, and nothing else.
fn assert_storm_names(plfs: &Plfs, processes: u64, files: u64) {
    let mut names: Vec<String> = plfs.readdir("/storm").unwrap().into_iter().map(|e| e.name).collect();
    names.sort();
    let mut expected: Vec<String> =
        (0..processes).flat_map(|r| (0..files).map(move |f| format!("r{r}.f{f}"))).collect();
    expected.sort();
    assert!(names == expected, "{} names listed, {} expected", names.len(), expected.len());
}

/// Every storm file holds exactly its bytes.
fn assert_storm_bytes(plfs: &Plfs, processes: u64, files: u64) {
    for rank in 0..processes {
        for index in 0..files {
            let path = format!("/storm/r{rank}.f{index}");
            let handle = plfs.open(&path, OpenFlags::RDONLY, 0, 0).unwrap();
            let expected = storm_bytes(rank, index);
            assert_eq!(handle.size().unwrap(), expected.len() as u64, "{path}");
            let mut buf = vec![0u8; expected.len()];
            assert_eq!(handle.read(&mut buf, 0).unwrap(), expected.len(), "{path}");
            assert!(buf == expected, "{path} read back differently");
            handle.close().unwrap();
        }
    }
}

/// A deterministic generator for kill delays (no RNG dependency needed).
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[test]
fn sigkilled_writers_lose_nothing_they_synced() {
    crash_trials("crash-writer", 2, 24, 0x5EED);
}

/// The same for a file striped over 4 backends: each record's pieces sit
/// in up to four stripe logs, each synced and torn on its own.
#[test]
fn sigkilled_striped_writers_lose_nothing_they_synced() {
    crash_trials("striped-crash-writer", 4, 12, 0x57121BE);
}

fn crash_trials(role: &str, backend_count: usize, trials: u64, mut seed: u64) {
    for trial in 0..trials {
        let root = tempfile::tempdir().unwrap();
        let backends = backends_in(root.path(), backend_count);
        let sync_every = 1 + splitmix(&mut seed) % 5;
        let mut child = spawn_child(role, &backends, &[sync_every.to_string()]);
        let stdout = child.stdout.take().unwrap();
        let (sender, receiver) = std::sync::mpsc::channel();
        let reader_thread = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // The test harness prints its own lines around the child's.
                let Some(start) = line.find("PLFS-") else { continue };
                if sender.send(line[start..].to_owned()).is_err() {
                    break;
                }
            }
        });
        assert_eq!(receiver.recv_timeout(Duration::from_secs(30)).unwrap(), "PLFS-READY");
        let kill_after = Duration::from_millis(5 + splitmix(&mut seed) % 120);
        let started = Instant::now();
        let mut synced = 0u64;
        while started.elapsed() < kill_after {
            if let Ok(line) = receiver.recv_timeout(Duration::from_millis(1)) {
                synced = line.trim_start_matches("PLFS-SYNCED ").parse().unwrap();
            }
        }
        // SAFETY: kill has no memory effects; the pid is our live child.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        child.wait().unwrap();
        reader_thread.join().unwrap();
        // Syncs acknowledged before the kill may still be in the pipe.
        while let Ok(line) = receiver.try_recv() {
            synced = line.trim_start_matches("PLFS-SYNCED ").parse().unwrap();
        }
        eprintln!("{role} trial {trial}: killed after {kill_after:?}, {synced} records synced");
        // The striped writer's stripe size (64 KiB).
        let unit = (role == "striped-crash-writer").then_some(64 << 10);
        verify_after_crash(&backends, synced, trial, unit);
    }
}

fn verify_after_crash(backends: &[PathBuf], synced: u64, trial: u64, unit: Option<u64>) {
    let plfs = mount(backends, Tuning::default());
    let handle = plfs.open("/crash", OpenFlags::RDONLY, 0, 0).unwrap();
    let size = plfs.stat("/crash").unwrap().size;
    let mut buf = vec![0u8; RECORD_BYTES];
    let slots_synced: std::collections::HashSet<u64> = (0..synced).map(|r| (r * 7) % 4096).collect();
    for slot in 0..size.div_ceil(RECORD_BYTES as u64) {
        let count = handle.read(&mut buf, slot * RECORD_BYTES as u64).unwrap();
        let expected = record_bytes(slot);
        let whole = count == RECORD_BYTES && buf == expected;
        if slots_synced.contains(&slot) {
            assert!(whole, "trial {trial}: synced record {slot} did not survive");
        } else {
            // An unsynced write is whole or absent; one cut at stripe units
            // (`unit`) is so piece by piece: each piece has its own log, and
            // a crash keeps each log's unsynced tail or not on its own, as
            // a local file system may keep some blocks of a torn write.
            let start = slot * RECORD_BYTES as u64;
            let mut piece = start;
            while piece < start + count as u64 {
                let end = unit.map_or(start + count as u64, |unit| {
                    ((piece / unit + 1) * unit).min(start + count as u64)
                });
                let range = (piece - start) as usize..(end - start) as usize;
                let zeros = buf[range.clone()].iter().all(|&b| b == 0);
                assert!(
                    zeros || buf[range.clone()] == expected[range],
                    "trial {trial}: record {slot} bytes {piece}..{end} are neither its data nor a hole"
                );
                piece = end;
            }
        }
    }
    for slot in &slots_synced {
        assert!(
            (slot + 1) * RECORD_BYTES as u64 <= size,
            "trial {trial}: size {size} lost synced record {slot}"
        );
    }
    handle.close().unwrap();
    // A crash never leaves stripes where the layout does not put them.
    let report = plfs.recover("/crash", false).unwrap();
    let layout_problems =
        [Problem::StripeOnWrongBackend, Problem::MissingStripesRecord, Problem::DamagedLayout];
    assert!(
        !report.findings.iter().any(|finding| layout_problems.contains(&finding.problem)),
        "trial {trial}: {:?}",
        report.findings
    );
}
