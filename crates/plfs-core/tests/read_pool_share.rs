//! A read spanning several writers' logs hands its per-log tasks to the
//! mount's read pool only when the process has a share of two cores or
//! more: not when an MPI launcher says more ranks of the job run on the
//! node than it has cores, nor when the process is bound to one core.
//! There the other ranks keep the cores busy, and pool threads would take
//! the caller's core in turns with it (context switches, copies landing in
//! another core's cache).
//!
//! Real processes: children are this test binary re-run with
//! `PLFS_TEST_ROLE` set (the `child` test dispatches on it and is a no-op
//! in a normal run), started plainly, with a launcher's environment, and
//! under `taskset`. Each reads the file and reports whether its read pool
//! started (threads named `plfs-read-*`, which start at the first read that
//! hands the pool a task).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use plfs::config::{BackendRole, Tuning};
use plfs::fs::{Options, Plfs};
use plfs::open::OpenFlags;
use plfs::store::SharedStore;
use plfs::store::posix::PosixStore;

/// Bytes of each record; the file is records of two writers taking turns.
const RECORD: usize = 8 << 10;
const RECORDS: usize = 8;
const FILE: &str = "/checkpoint";

fn mount(backend: &Path) -> Plfs {
    let store: SharedStore =
        Arc::new(PosixStore::new(backend.to_owned(), format!("posix://{}", backend.display())).unwrap());
    let tuning = Tuning { threadpool_size: 4, ..Tuning::default() };
    Plfs::new(vec![(store, BackendRole::Any)], Options::from_environment(tuning)).unwrap()
}

fn byte(at: usize) -> u8 {
    (at % 251) as u8
}

/// Child entry point: reads the whole file (every record, both writers'
/// logs), checks it, and prints how many read pool threads it started.
#[test]
fn child() {
    let Ok(backend) = std::env::var("PLFS_TEST_BACKEND") else { return };
    let plfs = mount(Path::new(&backend));
    let handle = plfs.open(FILE, OpenFlags::RDONLY, 0, 100).unwrap();
    let mut buf = vec![0u8; RECORD * RECORDS];
    assert_eq!(handle.read(&mut buf, 0).unwrap(), buf.len());
    assert!(buf.iter().enumerate().all(|(at, b)| *b == byte(at)), "the bytes read back");
    handle.close().unwrap();
    let pool_threads = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.unwrap().path().join("comm")).ok())
        .filter(|name| name.starts_with("plfs-read-"))
        .count();
    println!("\nPOOL_THREADS {pool_threads}");
}

/// Runs the child as `command` (this binary, or a launcher of it) with
/// `env` and returns the read pool threads it started.
fn pool_threads(mut command: Command, backend: &Path, env: &[(&str, String)]) -> usize {
    command
        .args([std::env::current_exe().unwrap().to_str().unwrap(), "--exact", "child", "--nocapture"])
        .env("PLFS_TEST_BACKEND", backend)
        .env_remove("OMPI_COMM_WORLD_LOCAL_SIZE")
        .env_remove("MPI_LOCALNRANKS");
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "child: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    stdout
        .lines()
        .find_map(|line| line.strip_prefix("POOL_THREADS "))
        .unwrap_or_else(|| panic!("{stdout}"))
        .parse()
        .unwrap()
}

/// `env` run as the launcher of the child (it execs the rest).
fn plain() -> Command {
    Command::new("env")
}

#[test]
fn a_read_uses_pool_threads_only_with_two_cores_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let plfs = mount(dir.path());
    let handle = plfs.open(FILE, OpenFlags::WRONLY.create(), 0o644, 1).unwrap();
    let bytes: Vec<u8> = (0..RECORD * RECORDS).map(byte).collect();
    for record in 0..RECORDS {
        let at = record * RECORD;
        handle.write_as(&bytes[at..at + RECORD], at as u64, 1 + (record % 2) as u64).unwrap();
    }
    handle.close().unwrap();

    let usable = std::thread::available_parallelism().map_or(1, usize::from);
    let crowded = (2 * usable).to_string();
    // More ranks of the job on this node than cores, as Open MPI and
    // MPICH's Hydra tell their ranks.
    for name in ["OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"] {
        assert_eq!(pool_threads(plain(), dir.path(), &[(name, crowded.clone())]), 0, "{name}={crowded}");
    }
    if usable >= 2 {
        // A process of its own with two cores or more reads in parallel.
        assert!(pool_threads(plain(), dir.path(), &[]) > 0, "a lone process on {usable} cores");
        // Half as many ranks as cores: each still has two.
        let pairs = (usable / 2).to_string();
        assert!(
            pool_threads(plain(), dir.path(), &[("OMPI_COMM_WORLD_LOCAL_SIZE", pairs.clone())]) > 0,
            "{pairs} ranks on {usable} cores"
        );
        // Bound to one core (as a launcher binds a rank), with no
        // launcher's environment: the binding is the share.
        let mut bound = Command::new("taskset");
        bound.args(["-c", &first_cpu()]);
        assert_eq!(pool_threads(bound, dir.path(), &[]), 0, "bound to one core");
    }
}

/// The first CPU this process may run on (sched_getaffinity).
fn first_cpu() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = status.lines().find_map(|line| line.strip_prefix("Cpus_allowed_list:")).unwrap().trim();
    list.split([',', '-']).next().unwrap().to_owned()
}
