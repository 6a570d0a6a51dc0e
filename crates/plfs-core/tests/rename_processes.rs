//! Publishing a file by rename, the way checkpoints are published, with
//! real processes: one process writes `tmp` and renames it onto `target`
//! again and again while others open and read `target`. Every read must
//! see one whole version, never a missing name, an error or a short file.
//!
//! Children are this test binary re-run with `PLFS_TEST_ROLE` set; the
//! `child` test dispatches on it and is a no-op in a normal run.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use plfs::ErrorKind;
use plfs::config::{BackendRole, Tuning};
use plfs::fs::{Options, Plfs};
use plfs::open::OpenFlags;
use plfs::store::SharedStore;
use plfs::store::posix::PosixStore;

/// Versions the publisher writes and renames into place.
const PUBLISHES: u64 = 400;
/// Opens and reads a reader makes at most; it stops when it has seen the
/// last version, so readers overlap the whole run of publishes.
const READS_MAX: u64 = 200_000;
const READERS: usize = 3;
/// Bytes of each version: every 8-byte word holds the version number.
const VERSION_BYTES: usize = 24 * 1024;

fn mount(backends: &[PathBuf]) -> Plfs {
    let stores = backends
        .iter()
        .map(|dir| {
            let store: SharedStore =
                Arc::new(PosixStore::new(dir.clone(), format!("posix://{}", dir.display())).unwrap());
            (store, BackendRole::Any)
        })
        .collect();
    Plfs::new(stores, Options::from_environment(Tuning::default())).unwrap()
}

fn version_bytes(version: u64) -> Vec<u8> {
    version.to_le_bytes().iter().copied().cycle().take(VERSION_BYTES).collect()
}

fn publish(plfs: &Plfs, version: u64) {
    let handle = plfs.open("/pub/tmp", OpenFlags::WRONLY.create().truncate(), 0o644, 1).unwrap();
    let bytes = version_bytes(version);
    // Two writes by two writers: two log pairs per version.
    handle.write_as(&bytes[..VERSION_BYTES / 2], 0, 1).unwrap();
    handle.write_as(&bytes[VERSION_BYTES / 2..], (VERSION_BYTES / 2) as u64, 2).unwrap();
    handle.close().unwrap();
    plfs.rename("/pub/tmp", "/pub/target").unwrap();
}

/// What a reader saw, as counts.
#[derive(Debug, Default, PartialEq, Eq)]
struct Seen {
    missing: u64,
    errors: u64,
    short: u64,
    mixed: u64,
    backwards: u64,
}

fn read_target(plfs: &Plfs) -> Seen {
    let mut seen = Seen::default();
    let mut newest = 0;
    for _ in 0..READS_MAX {
        if newest == PUBLISHES {
            break;
        }
        let handle = match plfs.open("/pub/target", OpenFlags::RDONLY, 0, 1) {
            Ok(handle) => handle,
            Err(error) if error.kind() == ErrorKind::NotFound => {
                seen.missing += 1;
                continue;
            }
            Err(error) => {
                eprintln!("open: {error}");
                seen.errors += 1;
                continue;
            }
        };
        let mut buf = vec![0u8; VERSION_BYTES + 1];
        match handle.read(&mut buf, 0) {
            Ok(count) if count != VERSION_BYTES => seen.short += 1,
            Ok(_) => {
                let version = u64::from_le_bytes(buf[..8].try_into().unwrap());
                if buf[..VERSION_BYTES] != version_bytes(version)[..] {
                    seen.mixed += 1;
                } else if version < newest {
                    seen.backwards += 1;
                }
                newest = newest.max(version);
            }
            Err(error) => {
                eprintln!("read: {error}");
                seen.errors += 1;
            }
        }
        if let Err(error) = handle.close() {
            eprintln!("close: {error}");
            seen.errors += 1;
        }
    }
    seen
}

fn spawn_child(role: &str, backends: &[PathBuf], env: &[(&str, String)]) -> Child {
    let joined = backends.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(":");
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env("PLFS_TEST_ROLE", role)
        .env("PLFS_TEST_BACKENDS", joined)
        .envs(env.iter().map(|(name, value)| (name, value)))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Child entry point: runs only when spawned with PLFS_TEST_ROLE.
#[test]
fn child() {
    let Ok(role) = std::env::var("PLFS_TEST_ROLE") else { return };
    let backends: Vec<PathBuf> =
        std::env::var("PLFS_TEST_BACKENDS").unwrap().split(':').map(PathBuf::from).collect();
    let plfs = mount(&backends);
    match role.as_str() {
        "publisher" => (2..=PUBLISHES).for_each(|version| publish(&plfs, version)),
        "reader" => {
            let seen = read_target(&plfs);
            println!(
                "\nSEEN missing={} errors={} short={} mixed={} backwards={}",
                seen.missing, seen.errors, seen.short, seen.mixed, seen.backwards
            );
        }
        other => panic!("unknown role {other}"),
    }
}

fn parse_seen(stdout: &[u8]) -> Seen {
    let text = String::from_utf8_lossy(stdout);
    let line = text
        .lines()
        .find_map(|line| line.split_once("SEEN ").map(|(_, rest)| rest))
        .unwrap_or_else(|| panic!("{text}"));
    let field = |name: &str| -> u64 {
        line.split(' ')
            .find_map(|pair| pair.strip_prefix(&format!("{name}=")))
            .and_then(|value| value.parse().ok())
            .unwrap_or_else(|| panic!("{name} in {line}"))
    };
    Seen {
        missing: field("missing"),
        errors: field("errors"),
        short: field("short"),
        mixed: field("mixed"),
        backwards: field("backwards"),
    }
}

/// `reader_env`: more for the readers' environment.
fn publish_while_reading(backends: &[PathBuf], reader_env: &[(&str, String)]) {
    let plfs = mount(backends);
    plfs.mkdir("/pub", 0o755).unwrap();
    publish(&plfs, 1);
    let readers: Vec<Child> = (0..READERS).map(|_| spawn_child("reader", backends, reader_env)).collect();
    let mut publisher = spawn_child("publisher", backends, &[]);
    assert!(publisher.wait().unwrap().success(), "the publisher failed");
    let mut total = Seen::default();
    for reader in readers {
        let output = reader.wait_with_output().unwrap();
        assert!(output.status.success(), "a reader failed");
        let seen = parse_seen(&output.stdout);
        total.missing += seen.missing;
        total.errors += seen.errors;
        total.short += seen.short;
        total.mixed += seen.mixed;
        total.backwards += seen.backwards;
    }
    assert_eq!(
        total,
        Seen::default(),
        "readers of a file published by rename over {} backends",
        backends.len()
    );
    let mut buf = vec![0u8; VERSION_BYTES];
    let handle = plfs.open("/pub/target", OpenFlags::RDONLY, 0, 1).unwrap();
    assert_eq!(handle.read(&mut buf, 0).unwrap(), VERSION_BYTES);
    assert!(buf == version_bytes(PUBLISHES), "the last version is the one left");
    handle.close().unwrap();
    // Nothing hidden left behind by the renames, on any backend.
    for backend in backends {
        let leftovers: Vec<String> = std::fs::read_dir(backend.join("pub"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .filter(|name| name != "target")
            .collect();
        assert_eq!(leftovers, Vec::<String>::new(), "in {}", backend.display());
    }
    assert!(plfs.recover("/pub/target", false).unwrap().findings.is_empty());
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

#[test]
fn readers_of_a_file_published_by_rename_always_see_one_whole_version() {
    let root = tempfile::tempdir().unwrap();
    publish_while_reading(&backends_in(root.path(), 1), &[]);
}

#[test]
fn readers_of_a_file_published_by_rename_over_three_backends_see_one_whole_version() {
    let root = tempfile::tempdir().unwrap();
    publish_while_reading(&backends_in(root.path(), 3), &[]);
}

/// The readers as MPI ranks crowding their node (more local ranks than
/// cores): each read runs its per-log tasks on the calling thread, one
/// after the other, so an attempt takes longer and a burst of renames could
/// take all of a read's few index reloads; a reload that finds the file
/// replaced again does not count as one of them.
#[test]
fn crowded_readers_of_a_file_published_by_rename_over_three_backends_see_one_whole_version() {
    let root = tempfile::tempdir().unwrap();
    let crowded = 2 * std::thread::available_parallelism().map_or(1, usize::from);
    publish_while_reading(
        &backends_in(root.path(), 3),
        &[("OMPI_COMM_WORLD_LOCAL_SIZE", crowded.to_string())],
    );
}
