//! The shared store conformance suite against a real MiniDFSCluster
//! (`scripts/servers hdfs start`), and what the hdfs store does when the
//! NameNode is gone.
//!
//! Without Java and Maven the cluster cannot start: the tests then skip,
//! saying so, unless `PLFS_REQUIRE_SERVERS=1` (set by `make test`).

#![cfg(feature = "hdfs")]

use std::net::TcpListener;
use std::time::{Duration, Instant};

use plfs::error::ErrorKind;
use plfs::store::hdfs::HdfsStore;
use plfs::store::test_server::TestServer;
use plfs::store::{Store, StoreExt, StorePath, conformance};

/// A dead NameNode must be reported well within this.
const DEAD_NAMENODE_ANSWER_MAX: Duration = Duration::from_secs(15);

/// `hdfs://host:port` → (host, port).
fn host_port(url: &str) -> (String, u16) {
    let authority = url.strip_prefix("hdfs://").expect("an hdfs:// URL").trim_end_matches('/');
    let (host, port) = authority.rsplit_once(':').expect("host:port");
    (host.to_owned(), port.parse().expect("a port"))
}

/// Opens a store rooted at `/root` of the cluster, creating the root.
fn store_at(server: &TestServer, root: &str) -> HdfsStore {
    let (host, port) = host_port(server.url());
    let top = HdfsStore::new(&host, port, "/", server.url().to_owned()).expect("open the file system root");
    top.create_dir_all(&StorePath::parse(root).unwrap()).expect("create the store root");
    HdfsStore::new(&host, port, root, format!("{}{root}", server.url())).expect("open the store")
}

#[test]
fn conformance_then_a_dead_namenode() {
    let Some(server) = TestServer::start("hdfs", &[]) else { return };
    let store = store_at(&server, "/conformance");
    let began = Instant::now();
    conformance::run_all(&store);
    eprintln!("hdfs conformance: {:?}", began.elapsed());

    // A store whose root is missing or a file is refused at open.
    let (host, port) = host_port(server.url());
    let error = HdfsStore::new(&host, port, "/no-such-root", "hdfs://test/no-such-root".into()).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotFound, "{error}");
    store.create_new(&StorePath::parse("plain").unwrap(), b"x").unwrap();
    let error = HdfsStore::new(&host, port, "/conformance/plain", "hdfs://test/plain".into()).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotADirectory, "{error}");

    // Stop the cluster under an open store: calls fail soon, naming the NameNode.
    let namenode = format!("hdfs://{host}:{port}");
    drop(server);
    let began = Instant::now();
    let error = store.metadata(&StorePath::parse("plain").unwrap()).unwrap_err();
    assert!(began.elapsed() < DEAD_NAMENODE_ANSWER_MAX, "took {:?}: {error}", began.elapsed());
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error}");
    assert!(error.to_string().contains(&namenode), "{error} does not name {namenode}");
}

#[test]
fn no_namenode_listening_is_a_quick_clear_error() {
    // A port that was free a moment ago: nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let began = Instant::now();
    let error =
        HdfsStore::new("127.0.0.1", port, "/plfs", format!("hdfs://127.0.0.1:{port}/plfs")).unwrap_err();
    assert!(began.elapsed() < DEAD_NAMENODE_ANSWER_MAX, "took {:?}: {error}", began.elapsed());
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error}");
    assert!(error.to_string().contains(&format!("hdfs://127.0.0.1:{port}")), "{error}");
}

/// Reading a log that this process is still writing sees every appended
/// byte, and other readers see it once the writer synced.
#[test]
fn readers_see_appends_after_sync() {
    let Some(server) = TestServer::start("hdfs", &[]) else { return };
    let store = store_at(&server, "/visibility");
    let (host, port) = host_port(server.url());
    // A second client is what another process would be: no shared registry.
    let other = HdfsStore::new(&host, port, "/visibility", format!("{}/visibility", server.url())).unwrap();
    let log = StorePath::parse("log").unwrap();
    let mut writer = store.create_append(&log).unwrap();
    writer.append(b"unsynced").unwrap();
    assert_eq!(store.read_all(&log).unwrap(), b"unsynced", "this process reads its own appends");
    writer.append(b" then synced").unwrap();
    writer.sync().unwrap();
    assert_eq!(other.read_all(&log).unwrap(), b"unsynced then synced", "another client after sync");
    let reader = other.open_read(&log).unwrap();
    writer.append(b", more").unwrap();
    writer.sync().unwrap();
    assert_eq!(reader.len().unwrap(), 26, "an open reader sees a later sync");
    let mut buf = [0u8; 6];
    assert_eq!(reader.read_at(&mut buf, 20).unwrap(), 6);
    assert_eq!(&buf, b", more");
    writer.close().unwrap();
    assert_eq!(other.metadata(&log).unwrap().size, 26);

    forked_child_uses_the_store(&store, &log);
}

/// A writer persists two logs and publishes them at once (plfs's sync of
/// a data and an index log): a reader in another client that reaches the
/// persisted bytes before the close finishes waits for them instead of
/// reading short, which is what makes publishing both at once safe.
#[test]
fn persisted_bytes_are_never_read_short() {
    let Some(server) = TestServer::start("hdfs", &[]) else { return };
    let store = store_at(&server, "/persist");
    let (host, port) = host_port(server.url());
    let other = HdfsStore::new(&host, port, "/persist", format!("{}/persist", server.url())).unwrap();
    let log = StorePath::parse("log").unwrap();
    let mut writer = store.create_append(&log).unwrap();
    let bytes: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    writer.append(&bytes).unwrap();
    writer.persist().unwrap();
    // Until the close, the block is under construction: readable length 0.
    let reader = other.open_read(&log).unwrap();
    std::thread::scope(|scope| {
        let read = scope.spawn(|| {
            let mut buf = vec![0u8; bytes.len()];
            let count = reader.read_at(&mut buf, 0).unwrap();
            (count, buf)
        });
        std::thread::sleep(Duration::from_millis(300));
        writer.publish().unwrap();
        let (count, buf) = read.join().unwrap();
        assert_eq!(count, bytes.len(), "a read of persisted bytes came back short");
        assert!(buf == bytes, "persisted bytes read back differently");
    });
    assert_eq!(other.metadata(&log).unwrap().size, bytes.len() as u64);
    writer.close().unwrap();
}

/// A small file created deferred is in place and durable at once; another
/// client that reads it before its close completes gets all of it, and
/// `settle` finds the close done.
#[test]
fn deferred_small_files_read_whole_before_they_settle() {
    let Some(server) = TestServer::start("hdfs", &[]) else { return };
    let store = store_at(&server, "/deferred");
    let (host, port) = host_port(server.url());
    let other = HdfsStore::new(&host, port, "/deferred", format!("{}/deferred", server.url())).unwrap();
    for i in 0..4 {
        let path = StorePath::parse(&format!("small.{i}")).unwrap();
        let contents = format!("record {i} of a container's creation").into_bytes();
        store.create_new_deferred(&path, &contents).unwrap();
        assert_eq!(other.metadata(&path).unwrap().size, contents.len() as u64, "in place at once");
        assert_eq!(other.read_all(&path).unwrap(), contents, "another client read it differently");
    }
    store.settle().unwrap();
    // Dropping a store settles what is left.
    let path = StorePath::parse("dropped").unwrap();
    store.create_new_deferred(&path, b"closed by drop").unwrap();
    drop(store);
    let reader = other.open_read(&path).unwrap();
    assert_eq!(reader.len().unwrap(), 14);
}

/// The longest a forked child may take for a few calls.
const CHILD_DEADLINE: Duration = Duration::from_secs(60);

/// A child forked from a process whose store has been used (runtime
/// threads running, connections open) uses the store too, instead of
/// hanging on its parent's threads, which it does not have.
fn forked_child_uses_the_store(store: &HdfsStore, log: &StorePath) {
    let from_child = StorePath::parse("from-child").unwrap();
    // SAFETY: the child calls only the store (no locks the harness may
    // hold, no printing, no unwinding) and leaves with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let works = store.read_all(log).is_ok_and(|bytes| bytes == b"unsynced then synced, more")
            && store.create_new(&from_child, b"child").is_ok()
            && store.create_append(&StorePath::parse("child-log").unwrap()).is_ok_and(|mut writer| {
                writer.append(b"appended by the child").is_ok() && writer.close().is_ok()
            });
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(if works { 0 } else { 1 }) };
    }
    let began = Instant::now();
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child, by pid.
        let waited = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if waited == pid {
            break;
        }
        if began.elapsed() > CHILD_DEADLINE {
            // SAFETY: our own child, by pid.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("the forked child hung on the store for {CHILD_DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the forked child failed: {status:#x}"
    );
    assert_eq!(store.read_all(&from_child).unwrap(), b"child");
    assert_eq!(store.read_all(&StorePath::parse("child-log").unwrap()).unwrap(), b"appended by the child");
}
