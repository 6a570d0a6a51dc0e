//! The s3:// store against a real MinIO (`scripts/servers s3`): the shared
//! store conformance suite, segment sealing and what other processes see,
//! a dead endpoint, and plfs itself on S3 with real processes (N-1 strided
//! writers, and several processes creating one file at once).
//!
//! Each test starts its own server (about a second), so tests stay
//! independent when run in parallel. Endpoint and credentials reach the
//! store through the URL `start` prints (the endpoint and the path of the
//! credentials file in the server's state directory), never the process
//! environment. Children are this binary re-run with `PLFS_TEST_ROLE`.

#![cfg(feature = "s3")]

#[path = "support/strided.rs"]
mod strided;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use plfs::config::{BackendLocation, BackendRole, Tuning};
use plfs::error::ErrorKind;
use plfs::fs::{Options, Plfs, open_store};
use plfs::open::OpenFlags;
use plfs::store::s3::{S3Store, SEGMENT_BYTES_MAX};
use plfs::store::test_server::TestServer;
use plfs::store::{AppendWriter, SharedStore, Store, StoreExt, StorePath, conformance};
use strided::{
    RECORD_BYTES, check_striped, now_ms, record_bytes, striped_mount, verify_strided, wait_until,
    write_strided,
};

/// The server's URL with `prefix` as the key prefix.
fn location(server: &TestServer, prefix: &str) -> String {
    let BackendLocation::S3 { bucket, access, .. } = BackendLocation::parse(server.url()).unwrap() else {
        panic!("the s3 server printed a non-s3 URL: {}", server.url());
    };
    BackendLocation::S3 { bucket, prefix: prefix.to_owned(), access }.to_string()
}

fn store_at(url: &str) -> SharedStore {
    open_store(&BackendLocation::parse(url).unwrap()).unwrap()
}

/// Two backends (two prefixes of one bucket), so hostdirs land on both.
fn mount(urls: &[String]) -> Plfs {
    let backends = urls.iter().map(|url| (store_at(url), BackendRole::Any)).collect();
    Plfs::new(backends, Options::from_environment(Tuning::default())).unwrap()
}

fn backend_urls(server: &TestServer) -> Vec<String> {
    vec![location(server, "b0"), location(server, "b1")]
}

fn spawn_child(role: &str, urls: &[String], args: &[u64]) -> Child {
    let args: Vec<String> = args.iter().map(u64::to_string).collect();
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env("PLFS_TEST_ROLE", role)
        .env("PLFS_TEST_S3_URLS", urls.join("|"))
        .env("PLFS_TEST_ARGS", args.join(","))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Waits for every child, bounded: a hung child fails the test.
fn wait_all(children: Vec<Child>, limit: Duration) {
    let deadline = Instant::now() + limit;
    for mut child in children {
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                assert!(status.success(), "a child failed: {status}");
                break;
            }
            if Instant::now() > deadline {
                child.kill().ok();
                panic!("a child did not finish within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Child entry point: runs only when spawned with PLFS_TEST_ROLE.
#[test]
fn child() {
    let Ok(role) = std::env::var("PLFS_TEST_ROLE") else { return };
    let urls: Vec<String> =
        std::env::var("PLFS_TEST_S3_URLS").unwrap().split('|').map(str::to_owned).collect();
    let args: Vec<u64> = std::env::var("PLFS_TEST_ARGS")
        .unwrap()
        .split(',')
        .filter(|a| !a.is_empty())
        .map(|a| a.parse().unwrap())
        .collect();
    match role.as_str() {
        "strided-writer" => {
            // args: rank, writers, records, start_at_ms
            let (rank, writers, records, start_at) = (args[0], args[1], args[2], args[3]);
            let plfs = mount(&urls);
            wait_until(start_at);
            write_strided(&plfs, "/n1/checkpoint", rank, writers, records);
        }
        "striped-writer" => {
            // args: rank, writers, records, start_at_ms; host `host<rank>`.
            let (rank, writers, records, start_at) = (args[0], args[1], args[2], args[3]);
            let plfs = striped_mount(urls.iter().map(|url| store_at(url)).collect(), &format!("host{rank}"));
            wait_until(start_at);
            write_strided(&plfs, "/striped/checkpoint", rank, writers, records);
        }
        other => panic!("unknown role {other}"),
    }
}

#[test]
fn conformance_suite() {
    let Some(server) = TestServer::start("s3", &[]) else { return };
    let store = store_at(&location(&server, "conformance"));
    conformance::run_all(store.as_ref());
}

/// Also with no key prefix: the store's keys start at the bucket root.
#[test]
fn conformance_at_the_bucket_root() {
    let Some(server) = TestServer::start("s3", &[]) else { return };
    let store = store_at(&location(&server, ""));
    conformance::directories(store.as_ref());
    conformance::append_and_read(store.as_ref());
    conformance::rename_files(store.as_ref());
    assert_eq!(store.list(&StorePath::root()).unwrap(), vec![], "the suite left objects behind");
}

/// Two stores on one prefix (a writer's, and another process's with no view
/// of its buffers) and a new log `d/log` opened for appending on the first.
fn fresh_log(
    server: &TestServer,
    prefix: &str,
) -> (SharedStore, SharedStore, StorePath, Box<dyn AppendWriter>) {
    let url = location(server, prefix);
    let (writer_store, other_store) = (store_at(&url), store_at(&url));
    writer_store.create_dir_all(&StorePath::parse("d").unwrap()).unwrap();
    let path = StorePath::parse("d/log").unwrap();
    let log = writer_store.create_append(&path).unwrap();
    (writer_store, other_store, path, log)
}

/// A log seals a segment each time SEGMENT_BYTES_MAX bytes are buffered,
/// and at sync; another process (here: another store, which has no view of
/// this one's buffers) sees exactly the sealed bytes.
#[test]
fn segments_seal_at_the_threshold_and_at_sync() {
    let Some(server) = TestServer::start("s3", &[]) else { return };
    let (writer_store, other_store, path, mut log) = fresh_log(&server, "segments");
    let bytes: Vec<u8> = (0..SEGMENT_BYTES_MAX + 100_000).map(|i| (i % 253) as u8).collect();
    for chunk in bytes.chunks(1 << 20) {
        log.append(chunk).unwrap();
    }
    assert_eq!(log.len(), bytes.len() as u64);
    assert_eq!(
        writer_store.metadata(&path).unwrap().size,
        bytes.len() as u64,
        "the writer's process sees all"
    );
    assert_eq!(
        other_store.metadata(&path).unwrap().size,
        SEGMENT_BYTES_MAX as u64,
        "others see the sealed segment"
    );
    let early = other_store.open_read(&path).unwrap();
    assert_eq!(early.len().unwrap(), SEGMENT_BYTES_MAX as u64);
    log.sync().unwrap();
    assert_eq!(other_store.metadata(&path).unwrap().size, bytes.len() as u64, "sync sealed the rest");
    // A reader opened before the sync finds the new segment when it reads past what it knew.
    let mut tail = vec![0u8; 200_000];
    let start = SEGMENT_BYTES_MAX as u64 - 100_000;
    plfs::store::read_exact_at(early.as_ref(), &mut tail, start).unwrap();
    assert!(tail[..] == bytes[start as usize..start as usize + 200_000], "a read across two segments");
    log.append(b"more").unwrap();
    log.close().unwrap();
    let mut expected = bytes.clone();
    expected.extend_from_slice(b"more");
    assert!(other_store.read_all(&path).unwrap() == expected, "the whole log read back differently");
    let names: Vec<String> =
        other_store.list(&StorePath::parse("d").unwrap()).unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, vec!["log".to_string()], "segments are not listed");
    other_store.remove_file(&path).unwrap();
    assert_eq!(other_store.list(&StorePath::parse("d").unwrap()).unwrap(), vec![], "removal left segments");
}

/// An append that would take the buffer past SEGMENT_BYTES_MAX seals the
/// buffer first, so a record appended whole is sealed whole (one GET to
/// read it back); only an append larger than a segment is split.
#[test]
fn segments_end_at_append_boundaries() {
    let Some(server) = TestServer::start("s3", &[]) else { return };
    let (_writer_store, other_store, path, mut log) = fresh_log(&server, "boundaries");
    let (header, record) = (vec![7u8; 60], (0..1 << 20).map(|i| (i % 251) as u8).collect::<Vec<u8>>());
    log.append(&header).unwrap();
    for _ in 0..8 {
        log.append(&record).unwrap();
    }
    let seven = 60 + 7 * record.len() as u64;
    assert_eq!(other_store.metadata(&path).unwrap().size, seven, "the eighth record would have straddled");
    let big = vec![3u8; SEGMENT_BYTES_MAX + 5];
    log.append(&big).unwrap();
    assert_eq!(
        other_store.metadata(&path).unwrap().size,
        seven + SEGMENT_BYTES_MAX as u64,
        "an append larger than a segment fills the buffer and seals it"
    );
    log.close().unwrap();
    let mut expected = header.clone();
    for _ in 0..8 {
        expected.extend_from_slice(&record);
    }
    expected.extend_from_slice(&big);
    assert!(other_store.read_all(&path).unwrap() == expected, "the log read back differently");
    other_store.remove_file(&path).unwrap();
}

/// A dead endpoint fails quickly with an error naming the store, and the
/// secret never appears in errors or Debug output.
#[test]
fn dead_endpoint_fails_fast_and_secrets_stay_hidden() {
    let directory = tempfile::tempdir().unwrap();
    let credentials = directory.path().join("credentials");
    let secret = "not-a-real-secret-0123456789";
    std::fs::write(&credentials, format!("aws_access_key_id = plfskey\naws_secret_access_key = {secret}\n"))
        .unwrap();
    // A port nothing listens on: bind one, then close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url =
        format!("s3://bucket/p?endpoint=http://127.0.0.1:{port}&credentials_file={}", credentials.display());
    let location = BackendLocation::parse(&url).unwrap();
    let BackendLocation::S3 { bucket, prefix, access } = &location else { unreachable!() };
    let store = S3Store::new(bucket, prefix, access).unwrap();
    let started = Instant::now();
    let error = store.metadata(&StorePath::parse("x").unwrap()).expect_err("nothing listens there");
    let elapsed = started.elapsed();
    // Refused connections are retried RETRIES_MAX times with 0.1–0.8 s backoff.
    assert!(elapsed < Duration::from_secs(10), "a dead endpoint took {elapsed:?}");
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error}");
    let text = error.to_string();
    assert!(text.contains("s3://bucket/p"), "{text}");
    for shown in [text, format!("{store:?}"), format!("{location:?}"), location.to_string()] {
        assert!(!shown.contains(secret), "the secret leaked: {shown}");
    }
}

#[test]
fn n1_strided_processes_then_a_fresh_reader() {
    let Some(server) = TestServer::start("s3", &[]) else { return };
    let urls = backend_urls(&server);
    let plfs = mount(&urls);
    plfs.mkdir("/n1", 0o755).unwrap();
    let (writers, records) = (4u64, 24u64);
    let start = now_ms() + 500;
    let children: Vec<Child> = (0..writers)
        .map(|rank| spawn_child("strided-writer", &urls, &[rank, writers, records, start]))
        .collect();
    wait_all(children, Duration::from_secs(120));
    let reader = mount(&urls);
    verify_strided(&reader, "/n1/checkpoint", writers * records, || {});
    let inventory = reader.inventory("/n1/checkpoint").unwrap();
    assert_eq!(inventory.logs.len(), writers as usize, "one log pair per writer process");
}

/// A file striped over four S3 backends (`-c -1`, 64 KiB units) by four
/// writer processes, each as another host, racing to place its stripes:
/// one placement wins, every writer follows it, and a reader with no
/// layout configured reads every byte back.
#[test]
fn a_striped_file_over_every_backend_from_processes_on_several_hosts() {
    let Some(server) = TestServer::start("s3", &[]) else { return };
    let urls: Vec<String> = (0..4).map(|index| location(&server, &format!("striped{index}"))).collect();
    let plfs = mount(&urls);
    plfs.mkdir("/striped", 0o755).unwrap();
    let (writers, records) = (4u64, 24u64);
    let start = now_ms() + 500;
    let children: Vec<Child> = (0..writers)
        .map(|rank| spawn_child("striped-writer", &urls, &[rank, writers, records, start]))
        .collect();
    wait_all(children, Duration::from_secs(120));
    let reader = mount(&urls);
    verify_strided(&reader, "/striped/checkpoint", writers * records, || {});
    check_striped(&reader, "/striped/checkpoint", urls.len());
}

/// Sixteen processes create the same file at once: one container results,
/// and every process's record is in it.
#[test]
fn processes_racing_to_create_one_file() {
    let Some(server) = TestServer::start("s3", &[]) else { return };
    let urls = backend_urls(&server);
    let plfs = mount(&urls);
    plfs.mkdir("/n1", 0o755).unwrap();
    let racers = 16u64;
    let start = now_ms() + 800;
    let children: Vec<Child> =
        (0..racers).map(|rank| spawn_child("strided-writer", &urls, &[rank, racers, 1, start])).collect();
    wait_all(children, Duration::from_secs(120));
    let names: Vec<String> = plfs.readdir("/n1").unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, vec!["checkpoint".to_string()]);
    verify_strided(&plfs, "/n1/checkpoint", racers, || {});
    let access = StorePath::parse("n1/checkpoint/access").unwrap();
    let holders = urls.iter().filter(|url| store_at(url).exists(&access).unwrap()).count();
    assert_eq!(holders, 1, "exactly one access file, on the canonical backend");
}

/// Renames and unlinks through plfs, with a writer open across a rename of
/// its file (its unsealed and later bytes follow the file), then a rename
/// of the directory; nothing is left behind on either backend.
#[test]
fn rename_and_unlink_through_plfs_with_a_writer_open() {
    let Some(server) = TestServer::start("s3", &[]) else { return };
    let urls = backend_urls(&server);
    let plfs = mount(&urls);
    plfs.mkdir("/d", 0o755).unwrap();
    let handle = plfs.open("/d/a", OpenFlags::WRONLY.create(), 0o644, 1).unwrap();
    handle.write(&record_bytes(0), 0).unwrap();
    handle.sync().unwrap();
    handle.write(&record_bytes(1), RECORD_BYTES as u64).unwrap();
    plfs.rename("/d/a", "/d/b").unwrap();
    handle.write(&record_bytes(2), 2 * RECORD_BYTES as u64).unwrap();
    handle.sync().unwrap();
    handle.write(&record_bytes(3), 3 * RECORD_BYTES as u64).unwrap();
    handle.close().unwrap();
    // (plfs itself does not move open files' paths on a directory rename,
    // on any store, so the directory moves after the close.)
    plfs.rename("/d", "/e").unwrap();
    let names = |plfs: &Plfs, path: &str| -> Vec<String> {
        plfs.readdir(path).unwrap().into_iter().map(|entry| entry.name).collect()
    };
    assert_eq!(names(&plfs, "/e"), vec!["b".to_string()]);
    verify_strided(&mount(&urls), "/e/b", 4, || {});
    plfs.unlink("/e/b").unwrap();
    assert_eq!(names(&plfs, "/e"), Vec::<String>::new());
    plfs.rmdir("/e").unwrap();
    assert!(!names(&plfs, "/").contains(&"e".to_string()));
    for url in &urls {
        assert_eq!(store_at(url).list(&StorePath::root()).unwrap(), vec![], "{url}: debris left");
    }
}

/// On S3 a container is visible before its access file (no atomic
/// directory rename): a creator that finds one half-made joins the race on
/// the access file instead of calling it a directory. Each half-made state
/// is set up by hand, so the test does not depend on timing.
#[test]
fn a_half_made_container_is_joined_not_refused() {
    let Some(server) = TestServer::start("s3", &[]) else { return };
    let url = location(&server, "half-made");
    let plfs = mount(std::slice::from_ref(&url));
    let store = store_at(&url);
    plfs.mkdir("/d", 0o755).unwrap();
    let version = plfs::tools::VersionRecord::current().encode();
    // A creator stopped after making meta/, and one stopped after version.
    store.create_dir_all(&StorePath::parse("d/early/meta").unwrap()).unwrap();
    store.create_dir_all(&StorePath::parse("d/later/meta").unwrap()).unwrap();
    store.create_new(&StorePath::parse("d/later/version").unwrap(), &version).unwrap();
    for (index, name) in ["/d/early", "/d/later"].into_iter().enumerate() {
        let handle = plfs.open(name, OpenFlags::WRONLY.create(), 0o644, 1).unwrap();
        handle.write(&record_bytes(index as u64), 0).unwrap();
        handle.close().unwrap();
        let mut buf = vec![0u8; RECORD_BYTES];
        let reader = plfs.open(name, OpenFlags::RDONLY, 0, 0).unwrap();
        assert_eq!(reader.read(&mut buf, 0).unwrap(), RECORD_BYTES);
        assert!(buf == record_bytes(index as u64), "{name} read back differently");
        reader.close().unwrap();
    }
    // Real directories stay directories: empty, or holding more than meta/.
    plfs.mkdir("/d/empty", 0o755).unwrap();
    plfs.mkdir("/d/full", 0o755).unwrap();
    plfs.mkdir("/d/full/meta", 0o755).unwrap();
    plfs.mkdir("/d/full/other", 0o755).unwrap();
    for name in ["/d/empty", "/d/full"] {
        let error = plfs.open(name, OpenFlags::WRONLY.create(), 0o644, 1).expect_err(name);
        assert_eq!(error.kind(), ErrorKind::IsADirectory, "{name}: {error}");
    }
}

/// Directory renames are not atomic on S3, but racing renames onto one
/// name still end with one winner, and every loser keeps its tree.
#[test]
fn racing_directory_renames_have_one_winner() {
    let Some(server) = TestServer::start("s3", &[]) else { return };
    let store = store_at(&location(&server, "dir-race"));
    let racers = 8;
    let at = |text: &str| StorePath::parse(text).unwrap();
    for i in 0..racers {
        store.create_dir_all(&at(&format!("tmp.{i}/sub"))).unwrap();
        store.create_new(&at(&format!("tmp.{i}/sub/owner")), i.to_string().as_bytes()).unwrap();
    }
    let barrier = std::sync::Barrier::new(racers);
    let results: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..racers)
            .map(|i| {
                let (store, barrier) = (&store, &barrier);
                scope.spawn(move || {
                    barrier.wait();
                    store.rename(&at(&format!("tmp.{i}")), &at("target"))
                })
            })
            .collect();
        handles.into_iter().map(|handle| handle.join().unwrap()).collect()
    });
    let winners: Vec<usize> = (0..racers).filter(|&i| results[i].is_ok()).collect();
    assert_eq!(winners.len(), 1, "winners {winners:?}: {results:?}");
    for error in results.iter().filter_map(|result| result.as_ref().err()) {
        assert_eq!(error.kind(), ErrorKind::AlreadyExists, "{error}");
    }
    let winner = winners[0];
    assert_eq!(store.read_all(&at("target/sub/owner")).unwrap(), winner.to_string().as_bytes());
    for i in (0..racers).filter(|&i| i != winner) {
        assert_eq!(store.read_all(&at(&format!("tmp.{i}/sub/owner"))).unwrap(), i.to_string().as_bytes());
    }
    assert!(!store.exists(&at(&format!("tmp.{winner}"))).unwrap(), "the winner's source is gone");
}
