//! plfs workloads on a real MiniDFSCluster (`scripts/servers hdfs start`):
//! N-1 strided writes from several processes with replication 1 and 3,
//! every byte read back; a mount with a canonical POSIX backend and a shadow
//! HDFS backend; and a DataNode stopped in the middle of a read.
//!
//! Two clusters in all (one per replication factor), each started once and
//! shared by the checks that need its replication. Children are this test
//! binary re-run with `PLFS_TEST_ROLE` set (as in tests/processes.rs).
//! Without Java and Maven the tests skip, saying so, unless
//! `PLFS_REQUIRE_SERVERS=1` (set by `make test`).

#![cfg(feature = "hdfs")]

#[path = "support/strided.rs"]
mod strided;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use plfs::config::{BackendLocation, BackendRole, Tuning};
use plfs::fs::{Options, Plfs, open_store};
use plfs::open::OpenFlags;
use plfs::placement::BackendId;
use plfs::store::posix::PosixStore;
use plfs::store::test_server::TestServer;
use plfs::store::{SharedStore, StorePath};
use plfs::tools::LogKind;
use strided::{
    RECORD_BYTES, check_striped, now_ms, record_bytes, striped_mount, verify_strided, wait_until,
    write_strided,
};

const WRITERS: u64 = 6;
const RECORDS_PER_WRITER: u64 = 24;
const FILE: &str = "/n1/checkpoint";

fn hdfs_store(url: &str) -> SharedStore {
    open_store(&BackendLocation::parse(url).unwrap()).unwrap()
}

fn hdfs_mount(url: &str) -> Plfs {
    Plfs::new(vec![(hdfs_store(url), BackendRole::Any)], Options::from_environment(Tuning::default()))
        .unwrap()
}

/// A store root of its own on the cluster, created; returns its URL.
fn store_root(server: &TestServer, name: &str) -> String {
    hdfs_store(server.url()).create_dir_all(&StorePath::parse(name).unwrap()).unwrap();
    format!("{}/{name}", server.url())
}

/// Child entry point: runs only when spawned with PLFS_TEST_ROLE.
#[test]
fn child() {
    let Ok(role) = std::env::var("PLFS_TEST_ROLE") else { return };
    let url = std::env::var("PLFS_TEST_HDFS_URL").unwrap();
    let args: Vec<u64> =
        std::env::var("PLFS_TEST_ARGS").unwrap().split(',').map(|arg| arg.parse().unwrap()).collect();
    let (rank, start_at_ms) = (args[0], args[1]);
    match role.as_str() {
        "hdfs-strided-writer" => {
            let plfs = hdfs_mount(&url);
            // Every writer opens at about the same moment, racing to create the container.
            wait_until(start_at_ms);
            write_strided(&plfs, FILE, rank, WRITERS, RECORDS_PER_WRITER);
        }
        "hdfs-striped-writer" => {
            // PLFS_TEST_HDFS_URL: the backends' URLs, separated by '|'.
            let stores = url.split('|').map(hdfs_store).collect();
            let plfs = striped_mount(stores, &format!("host{rank}"));
            wait_until(start_at_ms);
            write_strided(&plfs, FILE, rank, WRITERS, RECORDS_PER_WRITER);
        }
        other => panic!("unknown role {other}"),
    }
}

/// WRITERS processes write FILE N-1 strided into the store at `url`.
fn write_n1_with_processes(url: &str) {
    hdfs_mount(url).mkdir("/n1", 0o755).unwrap();
    spawn_writers("hdfs-strided-writer", url);
}

/// WRITERS processes of `role`, started to open at one moment; waits for
/// them all.
fn spawn_writers(role: &str, url: &str) {
    let start_at_ms = now_ms() + 500;
    let children: Vec<Child> = (0..WRITERS)
        .map(|rank| {
            Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "child", "--nocapture", "--test-threads=1"])
                .env("PLFS_TEST_ROLE", role)
                .env("PLFS_TEST_HDFS_URL", url)
                .env("PLFS_TEST_ARGS", format!("{rank},{start_at_ms}"))
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success(), "a writer process failed");
    }
}

fn total_bytes() -> u64 {
    WRITERS * RECORDS_PER_WRITER * RECORD_BYTES as u64
}

/// Reads FILE through `plfs`, checking every byte; `between` runs after
/// the first chunk.
fn verify_read(plfs: &Plfs, between: impl FnMut()) {
    verify_strided(plfs, FILE, WRITERS * RECORDS_PER_WRITER, between);
}

/// The HDFS paths of FILE's data logs, with the backend holding each.
fn data_logs(plfs: &Plfs) -> Vec<(BackendId, StorePath)> {
    let container = StorePath::parse(FILE).unwrap();
    let inventory = plfs.inventory(FILE).unwrap();
    inventory
        .logs
        .iter()
        .filter(|log| log.has_data)
        .map(|log| (log.backend, log.path(&container, LogKind::Data)))
        .collect()
}

/// The replication HDFS keeps for `path` under the store root `/root`.
fn replication_of(server: &TestServer, root: &str, path: &StorePath) -> u32 {
    let client = hdfs_native::sync::ClientBuilder::new().with_url(server.url()).build().unwrap();
    let status = client.get_file_info(&format!("/{root}/{}", path.as_str())).unwrap();
    status.replication.expect("a file has a replication")
}

/// A little more than the JMX refresh period of the test cluster.
const JMX_REFRESH: Duration = Duration::from_millis(1500);

/// `BytesRead` of each DataNode, from the HTTP servers and MBeans listed in
/// `STATE/datanodes.txt` (`INDEX http://127.0.0.1:PORT BEAN` per line).
fn bytes_read_per_datanode(server: &TestServer) -> Vec<u64> {
    let listing = std::fs::read_to_string(server.state_dir().join("datanodes.txt")).unwrap();
    listing
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let address = fields[1].strip_prefix("http://").unwrap();
            let mut stream = TcpStream::connect(address).unwrap();
            stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            write!(stream, "GET /jmx?qry={} HTTP/1.0\r\nHost: {address}\r\n\r\n", fields[2]).unwrap();
            let mut response = String::new();
            stream.read_to_string(&mut response).unwrap();
            let (_, after) = response.split_once("\"BytesRead\" : ").expect("BytesRead in the JMX answer");
            after.split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
        })
        .collect()
}

#[test]
fn n1_strided_processes_replication_1_and_a_posix_canonical_hdfs_shadow_mount() {
    let Some(server) =
        TestServer::start("hdfs", &[("PLFS_HDFS_DATANODES", "3"), ("PLFS_HDFS_REPLICATION", "1")])
    else {
        return;
    };
    let began = Instant::now();
    let url = store_root(&server, "rep1");
    write_n1_with_processes(&url);
    let reader = hdfs_mount(&url);
    let served_before = bytes_read_per_datanode(&server);
    verify_read(&reader, || {});
    // Each byte has one replica, so the DataNodes together served at least
    // the file (as the benchmark's per-DataNode figures will count it).
    // JMX refreshes its figures every second (tools/minidfs).
    std::thread::sleep(JMX_REFRESH);
    let served_after = bytes_read_per_datanode(&server);
    let served: u64 = served_after.iter().zip(&served_before).map(|(after, before)| after - before).sum();
    assert!(
        served >= total_bytes(),
        "the DataNodes report {served_after:?} bytes read, of {}",
        total_bytes()
    );
    let logs = data_logs(&reader);
    assert_eq!(logs.len(), WRITERS as usize, "one data log per writer process");
    for (_, path) in &logs {
        assert_eq!(replication_of(&server, "rep1", path), 1, "{path}");
    }
    eprintln!("replication 1 N-1: {:?}", began.elapsed());

    let began = Instant::now();
    posix_canonical_hdfs_shadow(&server);
    eprintln!("canonical posix, shadow hdfs: {:?}", began.elapsed());

    let began = Instant::now();
    striped_over_four_hdfs_backends(&server);
    eprintln!("striped over four hdfs backends: {:?}", began.elapsed());
}

/// FILE striped over four HDFS backends (`-c -1`, 64 KiB units) by WRITERS
/// processes, each as another host racing to place the stripes; read back
/// byte for byte by a mount with no layout configured.
fn striped_over_four_hdfs_backends(server: &TestServer) {
    let urls: Vec<String> = (0..4).map(|index| store_root(server, &format!("striped{index}"))).collect();
    let mount = || {
        let backends = urls.iter().map(|url| (hdfs_store(url), BackendRole::Any)).collect();
        Plfs::new(backends, Options::from_environment(Tuning::default())).unwrap()
    };
    mount().mkdir("/n1", 0o755).unwrap();
    spawn_writers("hdfs-striped-writer", &urls.join("|"));
    let reader = mount();
    verify_read(&reader, || {});
    check_striped(&reader, FILE, urls.len());
}

/// A mount whose canonical backend is POSIX and whose shadow is HDFS: the
/// container's metadata stays on POSIX, every data log goes to HDFS.
fn posix_canonical_hdfs_shadow(server: &TestServer) {
    let posix_root = tempfile::tempdir().unwrap();
    let url = store_root(server, "shadow");
    let mount = || {
        let posix: SharedStore = Arc::new(
            PosixStore::new(posix_root.path(), format!("posix://{}", posix_root.path().display())).unwrap(),
        );
        let backends = vec![(posix, BackendRole::Canonical), (hdfs_store(&url), BackendRole::Shadow)];
        Plfs::new(backends, Options::from_environment(Tuning::default())).unwrap()
    };
    let plfs = mount();
    plfs.mkdir("/n1", 0o755).unwrap();
    let handle = plfs.open(FILE, OpenFlags::WRONLY.create(), 0o644, 0).unwrap();
    std::thread::scope(|scope| {
        for writer in 0..WRITERS {
            let handle = &handle;
            scope.spawn(move || {
                for k in 0..RECORDS_PER_WRITER {
                    let record = k * WRITERS + writer;
                    handle.write_as(&record_bytes(record), record * RECORD_BYTES as u64, writer).unwrap();
                }
            });
        }
    });
    handle.close().unwrap();

    let fresh = mount();
    verify_read(&fresh, || {});
    let logs = data_logs(&fresh);
    assert_eq!(logs.len(), WRITERS as usize, "one data log per writer");
    let hdfs = hdfs_store(&url);
    for (backend, path) in &logs {
        assert_eq!(*backend, BackendId(1), "data log {path} is not on the HDFS shadow");
        let size = hdfs.metadata(path).unwrap().size;
        assert!(size >= RECORDS_PER_WRITER * RECORD_BYTES as u64, "{path} holds only {size} bytes on HDFS");
    }
    assert!(
        posix_root.path().join("n1/checkpoint").is_dir(),
        "the container is on the canonical POSIX backend"
    );
}

#[test]
fn n1_strided_processes_replication_3_survive_a_datanode_stopped_mid_read() {
    let Some(server) =
        TestServer::start("hdfs", &[("PLFS_HDFS_DATANODES", "3"), ("PLFS_HDFS_REPLICATION", "3")])
    else {
        return;
    };
    let began = Instant::now();
    let url = store_root(&server, "rep3");
    write_n1_with_processes(&url);
    let reader = hdfs_mount(&url);
    verify_read(&reader, || {});
    let logs = data_logs(&reader);
    for (_, path) in &logs {
        assert_eq!(replication_of(&server, "rep3", path), 3, "{path}");
    }
    eprintln!("replication 3 N-1: {:?}", began.elapsed());

    // Stop DataNode 1 between two reads of one open file: every block still
    // has two live replicas, and the reader must move to one of them.
    let began = Instant::now();
    let mut stopped = false;
    verify_read(&hdfs_mount(&url), || {
        server.control(&["stop-datanode", "1"]).unwrap();
        stopped = true;
    });
    assert!(stopped);
    // Fresh opens still get stopped DataNodes among each block's locations
    // (the NameNode takes minutes to declare them dead), in random order.
    // With a second one stopped, two in three blocks list a dead replica
    // first, so this read fails over many times.
    server.control(&["stop-datanode", "0"]).unwrap();
    verify_read(&hdfs_mount(&url), || {});
    eprintln!("reads around a stopped DataNode: {:?}", began.elapsed());
}
