use super::*;
use crate::clock::ManualClock;
use crate::layout::ContainerPaths;
use crate::store::memory::MemoryStore;
use crate::store::{Store, StoreExt};
use proptest::prelude::*;

fn options(pid: u32) -> Options {
    Options {
        hostname: "node0".into(),
        pid,
        uid: 1000,
        gid: 100,
        stamper: Stamper::new(Arc::new(ManualClock::new(1_000_000))),
        tuning: Tuning {
            threadpool_size: 2,
            index_flush_bytes: 4096,
            readahead_bytes: 64 << 10,
            ..Tuning::default()
        },
    }
}

/// The pid of a process that has exited, for writers that "crashed".
pub(crate) fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

fn memory_stores(count: usize) -> Vec<SharedStore> {
    (0..count).map(|i| Arc::new(MemoryStore::new(format!("mem://b{i}"))) as SharedStore).collect()
}

fn mount_over(stores: &[SharedStore], options: Options) -> Plfs {
    Plfs::new(stores.iter().map(|s| (s.clone(), BackendRole::Any)).collect(), options).unwrap()
}

pub(crate) fn memory_mount(count: usize) -> Plfs {
    mount_over(&memory_stores(count), options(7))
}

fn read_all(handle: &FileHandle) -> Vec<u8> {
    let size = handle.size().unwrap() as usize;
    let mut buf = vec![0xAA; size + 100];
    let count = handle.read(&mut buf, 0).unwrap();
    buf.truncate(count);
    buf
}

/// Two processes that take turns under a lock, each keeping its file
/// open (a counter, a database): what one wrote and flushed before
/// letting go is what the other reads, sizes and overwrites once it has
/// the lock and refreshed (the interposer's lock calls), on every
/// workload. Before `refresh`, a container handle kept its first merged
/// index and size, and a small file its first directory view, so each
/// process went on from its own last value.
#[test]
fn a_refreshed_handle_sees_what_another_process_flushed() {
    for workload in [Workload::SharedFile, Workload::FilePerProc, Workload::SmallFile] {
        let stores = memory_stores(2);
        let mount = |pid| {
            let backends = stores.iter().map(|s| (s.clone(), BackendRole::Any)).collect();
            Plfs::with_workload(backends, options(pid), workload).unwrap()
        };
        let (first, second) = (mount(3), mount(4));
        let a = first.open("/counter", OpenFlags::RDWR.create(), 0o644, 3).unwrap();
        a.write(b"1", 0).unwrap();
        a.flush().unwrap();
        let b = second.open("/counter", OpenFlags::RDWR, 0, 4).unwrap();
        let mut value = 1u64;
        for turn in 0..6 {
            let taker = if turn % 2 == 0 { &b } else { &a };
            taker.refresh().unwrap();
            let read = read_all(taker);
            assert_eq!(read, value.to_string().into_bytes(), "{workload:?}");
            value = value * 10 + 1;
            taker.write(value.to_string().as_bytes(), 0).unwrap();
            assert_eq!(taker.size().unwrap(), value.to_string().len() as u64, "{workload:?}");
            taker.flush().unwrap();
        }
        a.close().unwrap();
        b.close().unwrap();
        assert_eq!(mount(5).stat("/counter").unwrap().size, 7, "{workload:?}");
    }
}

/// Two processes that both opened a new file with O_CREAT (neither saw
/// the other's file yet) take turns under a lock, as four processes
/// bumping a counter through the interposer do: each reads what the other
/// wrote before, and its own writes, on every workload. Before, on
/// small_file, the second process's create (buffered since its open) was
/// folded into its view after the first's newer writes, so it read its
/// own writes as lost and went on from a stale value: the counter lost
/// increments under CPU load.
#[test]
fn processes_that_both_created_a_file_take_turns_on_it() {
    for workload in [Workload::SharedFile, Workload::FilePerProc, Workload::SmallFile] {
        let (clock, process) = processes(workload);
        let (first, second) = (process(3), process(4));
        let a = first.open("/counter", OpenFlags::RDWR.create(), 0o644, 3).unwrap();
        clock.advance(1000);
        let b = second.open("/counter", OpenFlags::RDWR.create(), 0o644, 4).unwrap();
        let turn = |handle: &FileHandle, expected: &str, next: &str| {
            clock.advance(1000);
            handle.refresh().unwrap();
            assert_eq!(String::from_utf8(read_all(handle)).unwrap(), expected, "{workload:?}");
            handle.write(next.as_bytes(), 0).unwrap();
            handle.flush().unwrap();
        };
        turn(&a, "", "1");
        turn(&a, "1", "2");
        turn(&b, "2", "3");
        turn(&b, "3", "4");
        turn(&a, "4", "5");
        turn(&b, "5", "6");
        a.close().unwrap();
        b.close().unwrap();
        let later = process(5).open("/counter", OpenFlags::RDONLY, 0, 5).unwrap();
        assert_eq!(read_all(&later), b"6", "{workload:?}");
    }
}

/// Two processes open a log with O_CREAT and no O_TRUNC at about the same
/// time, the second before the first's file is published: both write to
/// one file and nothing either wrote is lost, as on a local file system.
/// Before, on small_file, the second open was recorded as a create, which
/// emptied the first process's file when replayed after its write: a
/// reader found zeros where "one" had been.
#[test]
fn a_second_open_with_o_creat_keeps_what_the_first_wrote() {
    for workload in [Workload::SharedFile, Workload::FilePerProc, Workload::SmallFile] {
        let (clock, process) = processes(workload);
        let (first, second) = (process(3), process(4));
        let a = first.open("/log", OpenFlags::WRONLY.create(), 0o644, 3).unwrap();
        a.write(b"one\n", 0).unwrap();
        clock.advance(1000);
        let b = second.open("/log", OpenFlags::WRONLY.create(), 0o644, 4).unwrap();
        clock.advance(1000);
        a.close().unwrap();
        b.write(b"two\n", 4).unwrap();
        b.close().unwrap();
        let later = process(5).open("/log", OpenFlags::RDONLY, 0, 5).unwrap();
        assert_eq!(String::from_utf8(read_all(&later)).unwrap(), "one\ntwo\n", "{workload:?}");
    }
}

/// A process's own buffered change is published after it reloaded what
/// another process wrote later: it then sees the file as every other
/// reader does (its change first, the later write over it). Here it cuts
/// the file to nothing, another process writes "new" and publishes, and a
/// read of a second file in the directory reloads the view before the cut
/// is published. Before, a small_file process applied its cut on top of
/// the newer write and read an empty file while others read "new".
#[test]
fn an_own_change_published_after_a_newer_one_was_loaded_keeps_stamp_order() {
    for workload in [Workload::SharedFile, Workload::FilePerProc, Workload::SmallFile] {
        let (clock, process) = processes(workload);
        let (first, second) = (process(3), process(4));
        for name in ["/f", "/g"] {
            let setup = first.open(name, OpenFlags::WRONLY.create().truncate(), 0o644, 3).unwrap();
            setup.write(b"old", 0).unwrap();
            setup.close().unwrap();
        }
        let a = first.open("/f", OpenFlags::RDWR, 0, 3).unwrap();
        let b = second.open("/f", OpenFlags::RDWR, 0, 4).unwrap();
        let other = second.open("/g", OpenFlags::RDONLY, 0, 4).unwrap();
        clock.advance(1000);
        b.truncate(0).unwrap();
        clock.advance(1000);
        a.write(b"new", 0).unwrap();
        a.flush().unwrap();
        other.refresh().unwrap();
        assert_eq!(read_all(&other), b"old", "{workload:?}");
        b.flush().unwrap();
        b.refresh().unwrap();
        assert_eq!(String::from_utf8(read_all(&b)).unwrap(), "new", "{workload:?}");
        let later = process(5).open("/f", OpenFlags::RDONLY, 0, 5).unwrap();
        assert_eq!(String::from_utf8(read_all(&later)).unwrap(), "new", "{workload:?}");
    }
}

/// A refresh reloads a container's index only when another writer's
/// index log changed: a process taking turns under a lock with no one
/// else reads no index log at all (before, every turn reloaded the whole
/// index, so turns slowed down with the file's history: 40 µs to 1 ms a
/// turn over 4,000 turns through the interposer), and the first turn
/// after another writer flushed reloads once.
#[test]
fn a_refresh_reloads_the_index_only_when_another_writer_changed_it() {
    use crate::store::counting::CountingStore;
    let counting: Vec<Arc<CountingStore>> =
        memory_stores(2).into_iter().map(|store| Arc::new(CountingStore::new(store))).collect();
    let stores: Vec<SharedStore> = counting.iter().map(|store| store.clone() as SharedStore).collect();
    let index_reads = || counting.iter().map(|store| store.counts().index_log_opens).sum::<u64>();
    let (first, second) = (mount_over(&stores, options(3)), mount_over(&stores, options(4)));
    let a = first.open("/counter", OpenFlags::RDWR.create(), 0o644, 3).unwrap();
    let b = second.open("/counter", OpenFlags::RDWR, 0, 4).unwrap();
    b.write(b"b", 0).unwrap();
    b.flush().unwrap();
    let turn = |handle: &FileHandle, byte: u8| {
        handle.refresh().unwrap();
        let mut buf = [0u8; 1];
        assert_eq!(handle.read(&mut buf, 0).unwrap(), 1);
        handle.write(&[byte], 0).unwrap();
        handle.flush().unwrap();
        buf[0]
    };
    let before = index_reads();
    assert_eq!(turn(&a, b'a'), b'b');
    assert!(index_reads() > before, "the first turn loads the index");
    // The first read of its own log loads that log's data checksums.
    assert_eq!(turn(&a, b'a'), b'a');
    let before = index_reads();
    for _ in 0..20 {
        assert_eq!(turn(&a, b'a'), b'a');
    }
    assert_eq!(index_reads(), before, "turns with no one else read no index log");
    assert_eq!(turn(&b, b'b'), b'a');
    let before = index_reads();
    assert_eq!(turn(&a, b'a'), b'b');
    assert!(index_reads() > before, "another writer's flush is loaded");
    a.close().unwrap();
    b.close().unwrap();
}

/// Two mounts of `workload` ("processes" 3 and 4) over the same two
/// memory backends, on one manual clock.
fn two_processes(workload: Workload) -> (Arc<ManualClock>, Plfs, Plfs) {
    let (clock, mount) = processes(workload);
    (clock, mount(3), mount(4))
}

/// A clock and a way to start "process" `pid` (a mount of `workload`
/// over the same two memory backends, on that clock).
fn processes(workload: Workload) -> (Arc<ManualClock>, impl Fn(u32) -> Plfs) {
    let stores = memory_stores(2);
    let clock = Arc::new(ManualClock::new(1_000_000));
    let stamped = clock.clone();
    let mount = move |pid| {
        let backends = stores.iter().map(|s| (s.clone(), BackendRole::Any)).collect();
        let options = Options { stamper: Stamper::new(stamped.clone()), ..options(pid) };
        Plfs::with_workload(backends, options, workload).unwrap()
    };
    (clock, mount)
}

/// A process holding a file open follows what others append and flush
/// within a second on its clock, without a lock, as `tail -f` expects:
/// a size, a stat, and a read at the end as cached look
/// at the store again once `LOOK_AGAIN_AFTER` has passed. Before, the
/// size and end known at the first look were kept until the file was
/// reopened.
#[test]
fn an_open_reader_follows_appends_within_a_second() {
    use crate::clock::{LOOK_AGAIN_AFTER, saturating_ns};
    for workload in [Workload::SharedFile, Workload::FilePerProc, Workload::SmallFile] {
        let (clock, writing, following) = two_processes(workload);
        let writer = writing.open("/log", OpenFlags::WRONLY.create(), 0o644, 3).unwrap();
        writer.write(b"one\n", 0).unwrap();
        writer.flush().unwrap();
        let reader = following.open("/log", OpenFlags::RDONLY, 0, 4).unwrap();
        assert_eq!(read_all(&reader), b"one\n", "{workload:?}");
        // The size first (a poll of fstat), then a read first (a reader
        // looping on read at the end).
        for (at, line, size_first) in [(4u64, &b"two\n"[..], true), (8, b"three\n", false)] {
            writer.write(line, at).unwrap();
            writer.flush().unwrap();
            clock.advance(saturating_ns(LOOK_AGAIN_AFTER));
            let end = at + line.len() as u64;
            if size_first {
                assert_eq!(reader.size().unwrap(), end, "{workload:?}");
            }
            let mut buf = [0u8; 16];
            let count = reader.read(&mut buf, at).unwrap();
            assert_eq!(&buf[..count], line, "{workload:?}");
            assert_eq!(reader.size().unwrap(), end, "{workload:?}");
            // fstat through the C API and the preload: a stat by path.
            assert_eq!(following.stat("/log").unwrap().size, end, "{workload:?}");
        }
        writer.close().unwrap();
        reader.close().unwrap();
    }
}

/// A writer that keeps writing publishes its buffered records at its
/// first write a second (`PUBLISH_AFTER`, mount clock) after they began to
/// pile up, so a reader sees a slow writer's progress without waiting for
/// it to close. Before, a line written now and then stayed invisible until
/// 256 KiB of container index records (1 MiB of small-file records) had
/// piled up.
#[test]
fn a_slow_writer_publishes_within_a_second() {
    use crate::clock::{PUBLISH_AFTER, saturating_ns};
    for workload in [Workload::SharedFile, Workload::FilePerProc, Workload::SmallFile] {
        let (clock, writing, reading) = two_processes(workload);
        let writer = writing.open("/job.log", OpenFlags::WRONLY.create(), 0o644, 3).unwrap();
        writer.write(b"step 1\n", 0).unwrap();
        writer.write(b"step 2\n", 7).unwrap();
        clock.advance(saturating_ns(PUBLISH_AFTER));
        writer.write(b"step 3\n", 14).unwrap();
        let reader = reading.open("/job.log", OpenFlags::RDONLY, 0, 4).unwrap();
        assert_eq!(read_all(&reader), b"step 1\nstep 2\nstep 3\n", "{workload:?}");
        reader.close().unwrap();
        writer.close().unwrap();
    }
}

/// Names on any backend in the mount root that a file unlinked while
/// open would leave (hidden names).
fn hidden_backend_names(stores: &[SharedStore]) -> Vec<String> {
    let root = StorePath::parse("").unwrap();
    let names = stores.iter().flat_map(|store| store.list(&root).unwrap_or_default());
    names.map(|entry| entry.name).filter(|name| crate::layout::is_removed(name)).collect()
}

/// POSIX: a file renamed or unlinked while this process holds it open
/// stays the handle's, readable and writable, until the last close, and
/// fstat follows it. Before, on small_file a rename or unlink left the
/// handle with ENOENT, an unlinked container read back empty, and fstat
/// (the C API's) looked up the old name.
#[test]
fn an_open_file_follows_its_rename_and_outlives_its_unlink() {
    for workload in [Workload::SharedFile, Workload::FilePerProc, Workload::SmallFile] {
        let stores = memory_stores(3);
        let backends = || stores.iter().map(|store| (store.clone(), BackendRole::Any)).collect();
        let plfs = Plfs::with_workload(backends(), options(3), workload).unwrap();
        let handle = plfs.open("/f", OpenFlags::RDWR.create(), 0o644, 3).unwrap();
        handle.write(b"hello", 0).unwrap();
        plfs.rename("/f", "/renamed").unwrap();
        assert_eq!(read_all(&handle), b"hello", "{workload:?}");
        handle.write(b"HE", 0).unwrap();
        assert_eq!(handle.path(), "/renamed", "{workload:?}");
        assert_eq!(plfs.stat(&handle.path()).unwrap().size, 5, "{workload:?}");

        plfs.unlink("/renamed").unwrap();
        assert_eq!(plfs.stat("/renamed").unwrap_err().kind(), ErrorKind::NotFound, "{workload:?}");
        assert!(plfs.readdir("/").unwrap().is_empty(), "{workload:?}: the hidden name is not listed");
        assert!(handle.unlinked(), "{workload:?}");
        assert_eq!(read_all(&handle), b"HEllo", "{workload:?}");
        handle.write(b"xy", 5).unwrap();
        assert_eq!(read_all(&handle), b"HElloxy", "{workload:?}");
        assert_eq!(plfs.stat(&handle.path()).unwrap().size, 7, "{workload:?}");
        // A new file may take the name meanwhile; it is a file of its own.
        let other = plfs.open("/renamed", OpenFlags::RDWR.create(), 0o644, 3).unwrap();
        other.write(b"new", 0).unwrap();
        other.close().unwrap();
        assert_eq!(read_all(&handle), b"HElloxy", "{workload:?}");
        handle.close().unwrap();
        plfs.finish_removals();
        let names: Vec<String> = plfs.readdir("/").unwrap().into_iter().map(|entry| entry.name).collect();
        assert_eq!(names, ["renamed"], "{workload:?}");
        assert!(hidden_backend_names(&stores).is_empty(), "{workload:?}");
        assert!(plfs.recover_directory("/", false).unwrap().findings.is_empty(), "{workload:?}");

        // A process that dies holding it leaves the hidden file for
        // `plfs recover --fix`, which removes it (no process has this pid).
        let dying = Plfs::with_workload(backends(), options(DEAD_PID), workload).unwrap();
        let held = dying.open("/held", OpenFlags::RDWR.create(), 0o644, 4).unwrap();
        held.write(b"bytes", 0).unwrap();
        dying.unlink("/held").unwrap();
        std::mem::forget(held);
        std::mem::forget(dying);
        let survivor = Plfs::with_workload(backends(), options(5), workload).unwrap();
        let found = survivor.recover_directory("/", true).unwrap();
        assert_eq!(found.findings.len(), 1, "{workload:?}: {found:?}");
        assert_eq!(found.unfixed(), 0, "{workload:?}: {found:?}");
        assert!(hidden_backend_names(&stores).is_empty(), "{workload:?}");
        assert!(survivor.recover_directory("/", false).unwrap().findings.is_empty(), "{workload:?}");
    }
}

/// A pid no process can have (Linux pids stay below 2^22).
const DEAD_PID: u32 = 1 << 30;

/// `plfs recover --fix` of a directory leaves a file unlinked while open
/// alone while its holder may still be running (a live process on this
/// host, or any on another host), and removes it once that process is
/// gone. Before, the fix deleted every hidden file, so a recover run while
/// a FUSE daemon or a program held an unlinked temporary file took its
/// data: the holder's next read found nothing.
#[test]
fn recover_leaves_a_file_unlinked_while_open_to_its_living_holder() {
    for workload in [Workload::SharedFile, Workload::FilePerProc, Workload::SmallFile] {
        let stores = memory_stores(3);
        let backends = || stores.iter().map(|store| (store.clone(), BackendRole::Any)).collect();
        let here = options(std::process::id());
        let mut elsewhere = options(DEAD_PID);
        elsewhere.hostname = "node1".into();
        let holders = [("here", here), ("elsewhere", elsewhere)];
        let mut held = Vec::new();
        for (name, holder_options) in holders {
            let holder = Plfs::with_workload(backends(), holder_options, workload).unwrap();
            let path = format!("/{name}");
            let handle = holder.open(&path, OpenFlags::RDWR.create(), 0o644, 4).unwrap();
            handle.write(name.as_bytes(), 0).unwrap();
            holder.unlink(&path).unwrap();
            held.push((holder, handle, name));
        }
        let recovering = Plfs::with_workload(backends(), options(DEAD_PID - 1), workload).unwrap();
        let found = recovering.recover_directory("/", true).unwrap();
        // A container written elsewhere has a shadow on its host's backend too.
        assert!(found.findings.len() >= 2, "{workload:?}: {found:?}");
        assert!(found.findings.iter().any(|f| f.detail.contains("still running")), "{workload:?}: {found:?}");
        assert!(
            found.findings.iter().all(|f| f.problem == crate::tools::Problem::HeldOpen && !f.fixed),
            "{workload:?}: {found:?}"
        );
        assert!(found.findings.iter().any(|f| f.detail.contains("another host")), "{workload:?}: {found:?}");
        for (holder, handle, name) in held {
            assert_eq!(read_all(&handle), name.as_bytes(), "{workload:?}: {name}'s file was taken");
            handle.write(b"!", name.len() as u64).unwrap();
            handle.close().unwrap();
            holder.finish_removals();
        }
        assert!(hidden_backend_names(&stores).is_empty(), "{workload:?}");
        assert!(recovering.recover_directory("/", false).unwrap().findings.is_empty(), "{workload:?}");
    }
}

/// Writes through a descriptor after its file was renamed reach the file
/// at its new name, also when the name lives on another backend. Before,
/// an n-n file's rename to another backend copied it and removed the
/// descriptor's copy, so later writes through it were lost (2 of these 6
/// names, silently).
#[test]
fn writes_after_an_open_files_rename_reach_it_on_its_new_backend() {
    for workload in [Workload::SharedFile, Workload::FilePerProc, Workload::SmallFile] {
        let stores = memory_stores(3);
        let backends = stores.iter().map(|store| (store.clone(), BackendRole::Any)).collect();
        let plfs = Plfs::with_workload(backends, options(3), workload).unwrap();
        for round in 0..6 {
            let (from, to) = (format!("/a{round}"), format!("/zz{round}"));
            let handle = plfs.open(&from, OpenFlags::RDWR.create(), 0o644, 3).unwrap();
            handle.write(b"hello", 0).unwrap();
            plfs.rename(&from, &to).unwrap();
            handle.write(b"HE", 0).unwrap();
            handle.close().unwrap();
            let reader = plfs.open(&to, OpenFlags::RDONLY, 0, 3).unwrap();
            assert_eq!(read_all(&reader), b"HEllo", "{workload:?} {to}");
            reader.close().unwrap();
        }
    }
}

#[test]
fn write_close_reopen_read() {
    let plfs = memory_mount(3);
    let handle = plfs.open("/f", OpenFlags::WRONLY.create(), 0o644, 1).unwrap();
    assert_eq!(handle.write(b"hello ", 0).unwrap(), 6);
    handle.write_as(b"world", 6, 2).unwrap();
    handle.close().unwrap();
    let attr = plfs.stat("/f").unwrap();
    assert_eq!((attr.kind, attr.size, attr.mode, attr.uid), (FileKind::File, 11, 0o644, 1000));
    let handle = plfs.open("/f", OpenFlags::RDONLY, 0, 9).unwrap();
    assert_eq!(read_all(&handle), b"hello world");
    handle.close().unwrap();
    let inventory = plfs.inventory("/f").unwrap();
    assert_eq!(inventory.logs.len(), 2, "one log pair per writer id");
}

/// A file written from several hosts has shadow containers on other
/// backends; once its unlink's deferred deletion is done, nothing of it is
/// left anywhere, and the other file in the directory is whole.
#[test]
fn unlink_leaves_nothing_on_any_backend_once_reclaimed() {
    let stores = memory_stores(4);
    let plfs = mount_over(&stores, options(7));
    plfs.mkdir("/d", 0o755).unwrap();
    for host in 0..8u32 {
        let mut writer_options = options(100 + host);
        writer_options.hostname = format!("node{host}");
        let mount = mount_over(&stores, writer_options);
        for name in ["/d/gone", "/d/kept"] {
            let handle = mount.open(name, OpenFlags::WRONLY.create(), 0o644, 1).unwrap();
            handle.write(&[host as u8; 10], u64::from(host) * 10).unwrap();
            handle.close().unwrap();
        }
    }
    let holding = |name: &str| {
        stores
            .iter()
            .filter(|store| store.exists(&StorePath::parse(&format!("d/{name}")).unwrap()).unwrap())
            .count()
    };
    assert!(holding("gone") > 1, "the file has shadows on other backends");
    plfs.unlink("/d/gone").unwrap();
    assert_eq!(holding("gone"), 0, "no backend holds the name once unlink returned");
    plfs.finish_removals();
    for store in &stores {
        let names: Vec<String> =
            store.list(&StorePath::parse("d").unwrap()).unwrap().into_iter().map(|e| e.name).collect();
        assert!(names.iter().all(|name| name == "kept"), "{}: {names:?}", store.url());
    }
    let handle = plfs.open("/d/kept", OpenFlags::RDONLY, 0, 1).unwrap();
    let expected: Vec<u8> = (0..8u8).flat_map(|host| [host; 10]).collect();
    assert_eq!(read_all(&handle), expected);
    handle.close().unwrap();
}

#[test]
fn holes_read_as_zeros_and_reads_stop_at_eof() {
    let plfs = memory_mount(2);
    let handle = plfs.open("/sparse", OpenFlags::RDWR.create(), 0o600, 1).unwrap();
    handle.write(b"end", 1 << 20).unwrap();
    let mut buf = vec![0xFF; 16];
    assert_eq!(handle.read(&mut buf, 100).unwrap(), 16);
    assert_eq!(buf, vec![0; 16]);
    assert_eq!(handle.read(&mut buf, (1 << 20) + 1).unwrap(), 2);
    assert_eq!(&buf[..2], b"nd");
    assert_eq!(handle.read(&mut buf, 1 << 30).unwrap(), 0);
    handle.close().unwrap();
}

#[test]
fn rdwr_sees_own_writes_without_rebuilding() {
    let stores = memory_stores(1);
    let counting = Arc::new(crate::store::counting::CountingStore::new(stores[0].clone()));
    let plfs = mount_over(&[counting.clone() as SharedStore], options(7));
    let handle = plfs.open("/rw", OpenFlags::RDWR.create(), 0o644, 1).unwrap();
    handle.write(b"aaaa", 0).unwrap();
    let mut buf = [0u8; 4];
    handle.read(&mut buf, 0).unwrap();
    let lists_after_first_read = counting.counts().lists;
    for round in 0..50u8 {
        handle.write(&[round; 4], 0).unwrap();
        handle.read(&mut buf, 0).unwrap();
        assert_eq!(buf, [round; 4]);
    }
    assert_eq!(counting.counts().lists, lists_after_first_read, "reads must not re-list or re-merge");
    handle.close().unwrap();
}

#[test]
fn other_writers_become_visible_after_sync() {
    let stores = memory_stores(2);
    let writer = mount_over(&stores, options(1));
    let reader = mount_over(&stores, options(2));
    let w = writer.open("/shared", OpenFlags::WRONLY.create(), 0o644, 1).unwrap();
    w.write(b"first", 0).unwrap();
    w.sync().unwrap();
    let r = reader.open("/shared", OpenFlags::RDONLY, 0, 2).unwrap();
    assert_eq!(read_all(&r), b"first");
    w.write(b"FIRST!", 0).unwrap();
    w.sync().unwrap();
    assert_eq!(read_all(&r), b"first", "a reader's index is stable until it syncs");
    r.sync().unwrap();
    let mut buf = vec![0; 6];
    assert_eq!(r.read(&mut buf, 0).unwrap(), 6);
    assert_eq!(buf, b"FIRST!");
    w.close().unwrap();
    r.close().unwrap();
    assert_eq!(reader.stat("/shared").unwrap().size, 6);
}

#[test]
fn stat_of_a_file_open_elsewhere_reads_only_open_logs() {
    let stores = memory_stores(1);
    let counting = Arc::new(crate::store::counting::CountingStore::new(stores[0].clone()));
    let shared: Vec<SharedStore> = vec![counting.clone()];
    let plfs = mount_over(&shared, options(1));
    for writer in 0..5 {
        let handle = plfs.open("/many", OpenFlags::WRONLY.create(), 0o644, writer).unwrap();
        handle.write(&[1; 100], writer * 100).unwrap();
        handle.close().unwrap();
    }
    counting.reset();
    assert_eq!(plfs.stat("/many").unwrap().size, 500);
    let counts = counting.counts();
    assert_eq!(counts.opens, 1, "only the access file is read for a closed file: {counts:?}");
    let other = mount_over(&shared, options(2));
    let open = other.open("/many", OpenFlags::WRONLY, 0, 77).unwrap();
    open.write(&[2; 10], 1000).unwrap();
    open.sync().unwrap();
    counting.reset();
    assert_eq!(plfs.stat("/many").unwrap().size, 1010);
    let opens = counting.counts().opens;
    assert_eq!(opens, 3, "the closed summary looked for, the access file, the one open writer's index");
    assert_eq!(open.size().unwrap(), 1010);
    open.close().unwrap();
}

#[test]
fn truncate_shrink_grow_and_zero() {
    let plfs = memory_mount(2);
    let handle = plfs.open("/t", OpenFlags::RDWR.create(), 0o644, 1).unwrap();
    handle.write(&[7; 100], 0).unwrap();
    handle.truncate(10).unwrap();
    handle.truncate(50).unwrap();
    let mut expected = vec![7u8; 10];
    expected.resize(50, 0);
    assert_eq!(read_all(&handle), expected);
    handle.close().unwrap();
    assert_eq!(plfs.stat("/t").unwrap().size, 50);
    plfs.truncate("/t", 0).unwrap();
    assert_eq!(plfs.stat("/t").unwrap().size, 0);
    let inventory = plfs.inventory("/t").unwrap();
    assert_eq!(inventory.logs.len(), 1, "truncate to zero reclaims closed logs: {inventory:?}");
    let handle = plfs.open("/t", OpenFlags::RDWR.truncate(), 0, 3).unwrap();
    handle.write(b"x", 3).unwrap();
    assert_eq!(read_all(&handle), b"\0\0\0x");
    handle.close().unwrap();
}

#[test]
fn create_flags() {
    let plfs = memory_mount(2);
    plfs.open("/e", OpenFlags::WRONLY.create().exclusive(), 0o644, 1).unwrap().close().unwrap();
    let error = plfs.open("/e", OpenFlags::WRONLY.create().exclusive(), 0o644, 1).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::AlreadyExists);
    assert_eq!(plfs.open("/missing", OpenFlags::RDONLY, 0, 1).unwrap_err().kind(), ErrorKind::NotFound);
    plfs.mkdir("/d", 0o755).unwrap();
    assert_eq!(
        plfs.open("/d", OpenFlags::WRONLY.create(), 0o644, 1).unwrap_err().kind(),
        ErrorKind::IsADirectory
    );
    assert_eq!(
        plfs.open("/nodir/f", OpenFlags::WRONLY.create(), 0o644, 1).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    let read_only = plfs.open("/e", OpenFlags::RDONLY, 0, 1).unwrap();
    assert_eq!(read_only.write(b"x", 0).unwrap_err().kind(), ErrorKind::BadHandle);
    read_only.close().unwrap();
    assert!(OpenFlags::from_posix(libc::O_ACCMODE).is_err());
    assert_eq!(
        OpenFlags::from_posix(libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC).unwrap(),
        OpenFlags::RDWR.create().truncate()
    );
}

#[test]
fn directories_are_mirrored_and_listings_merged() {
    let stores = memory_stores(3);
    let plfs = mount_over(&stores, options(1));
    plfs.mkdir("/dir", 0o750).unwrap();
    assert_eq!(plfs.mkdir("/dir", 0o750).unwrap_err().kind(), ErrorKind::AlreadyExists);
    // The mount root exists too (`mkdir -p` of a path through the mount
    // point takes EEXIST, and only EEXIST, for "there already").
    assert_eq!(plfs.mkdir("/", 0o755).unwrap_err().kind(), ErrorKind::AlreadyExists);
    for store in &stores {
        assert!(store.exists(&StorePath::parse("dir").unwrap()).unwrap(), "{}", store.url());
    }
    for i in 0..20 {
        plfs.open(&format!("/dir/f{i}"), OpenFlags::WRONLY.create(), 0o644, 1)
            .unwrap()
            .write(b"x", 0)
            .unwrap();
    }
    plfs.mkdir("/dir/sub", 0o755).unwrap();
    plfs.symlink("f0", "/dir/link").unwrap();
    let listing = plfs.readdir("/dir").unwrap();
    assert_eq!(listing.len(), 22);
    assert_eq!(listing.iter().filter(|e| e.kind == FileKind::File).count(), 20);
    assert!(listing.contains(&DirEntryInfo { name: "sub".into(), kind: FileKind::Directory }));
    assert!(listing.contains(&DirEntryInfo { name: "link".into(), kind: FileKind::Symlink }));
    assert_eq!(plfs.readlink("/dir/link").unwrap(), "f0");
    assert_eq!(plfs.stat("/dir").unwrap().mode, 0o750);
    assert_eq!(plfs.rmdir("/dir").unwrap_err().kind(), ErrorKind::DirectoryNotEmpty);
    for i in 0..20 {
        plfs.unlink(&format!("/dir/f{i}")).unwrap();
    }
    plfs.unlink("/dir/link").unwrap();
    plfs.rmdir("/dir/sub").unwrap();
    plfs.rmdir("/dir").unwrap();
    for store in &stores {
        assert!(store.list(&StorePath::root()).unwrap().is_empty(), "{} keeps debris", store.url());
    }
}

#[test]
fn rename_moves_the_canonical_container() {
    let stores = memory_stores(4);
    let plfs = mount_over(&stores, options(1));
    let from = "/a";
    let to = (0..100)
        .map(|i| format!("/renamed{i}"))
        .find(|name| {
            plfs.placement().canonical_backend(&name[1..]) != plfs.placement().canonical_backend("a")
        })
        .unwrap();
    let handle = plfs.open(from, OpenFlags::WRONLY.create(), 0o640, 1).unwrap();
    handle.write(b"payload", 0).unwrap();
    handle.close().unwrap();
    plfs.set_xattr(from, "user.k", b"v", crate::xattr::XattrMode::Any).unwrap();
    plfs.rename(from, &to).unwrap();
    assert_eq!(plfs.stat(from).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(plfs.get_xattr(&to, "user.k").unwrap(), b"v", "attributes move with the file");
    let attr = plfs.stat(&to).unwrap();
    assert_eq!((attr.size, attr.mode), (7, 0o640));
    let handle = plfs.open(&to, OpenFlags::RDONLY, 0, 2).unwrap();
    assert_eq!(read_all(&handle), b"payload");
    handle.close().unwrap();
    let names: Vec<String> = plfs.readdir("/").unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, vec![to[1..].to_string()]);
    // Replacing an existing file.
    plfs.open("/other", OpenFlags::WRONLY.create(), 0o644, 1).unwrap().write(b"old", 0).unwrap();
    plfs.rename(&to, "/other").unwrap();
    let handle = plfs.open("/other", OpenFlags::RDONLY, 0, 2).unwrap();
    assert_eq!(read_all(&handle), b"payload");
    handle.close().unwrap();
}

#[test]
fn attributes_and_access() {
    let plfs = memory_mount(2);
    let handle = plfs.open("/f", OpenFlags::WRONLY.create(), 0o600, 1).unwrap();
    handle.write(b"abc", 0).unwrap();
    handle.close().unwrap();
    plfs.chmod("/f", 0o644).unwrap();
    plfs.chown("/f", Some(5), None).unwrap();
    let when = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
    plfs.utime("/f", Some(when), Some(when)).unwrap();
    let attr = plfs.stat("/f").unwrap();
    assert_eq!((attr.mode, attr.uid, attr.gid, attr.mtime, attr.atime), (0o644, 5, 100, when, when));
    let owner = Credentials { uid: 5, gid: 1, groups: vec![] };
    let stranger = Credentials { uid: 6, gid: 1, groups: vec![] };
    plfs.access("/f", R_OK | W_OK, &owner).unwrap();
    plfs.access("/f", R_OK, &stranger).unwrap();
    assert_eq!(plfs.access("/f", W_OK, &stranger).unwrap_err().kind(), ErrorKind::PermissionDenied);
    assert_eq!(
        plfs.access("/f", X_OK, &Credentials { uid: 0, gid: 0, groups: vec![] }).unwrap_err().kind(),
        ErrorKind::PermissionDenied
    );
    // A write after utime moves mtime forward again.
    let handle = plfs.open("/f", OpenFlags::WRONLY, 0, 1).unwrap();
    handle.write(b"d", 3).unwrap();
    handle.close().unwrap();
    assert_ne!(plfs.stat("/f").unwrap().mtime, when, "the write's stamp is newer than the utime");
}

#[test]
fn creation_race_ends_with_one_container() {
    let stores = memory_stores(3);
    let winners: usize = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..16)
            .map(|i| {
                let stores = stores.clone();
                scope.spawn(move || {
                    let plfs = mount_over(&stores, options(100 + i));
                    let handle = plfs.open("/race", OpenFlags::WRONLY.create(), 0o644, u64::from(i)).unwrap();
                    handle.write(&[i as u8; 10], u64::from(i) * 10).unwrap();
                    handle.close().unwrap();
                    1
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(winners, 16);
    let plfs = mount_over(&stores, options(1));
    let handle = plfs.open("/race", OpenFlags::RDONLY, 0, 1).unwrap();
    let data = read_all(&handle);
    assert_eq!(data.len(), 160);
    for i in 0..16 {
        assert_eq!(&data[i * 10..i * 10 + 10], &[i as u8; 10]);
    }
    handle.close().unwrap();
    let names: Vec<String> = plfs.readdir("/").unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, vec!["race".to_string()]);
}

#[test]
fn many_writers_stay_within_the_handle_cap() {
    let mut tuning_options = options(1);
    tuning_options.tuning.read_handles_max = 4;
    let plfs = mount_over(&memory_stores(2), tuning_options);
    let handle = plfs.open("/wide", OpenFlags::RDWR.create(), 0o644, 0).unwrap();
    for writer in 0..64u64 {
        handle.write_as(&[writer as u8; 8], writer * 8, writer).unwrap();
    }
    handle.sync().unwrap();
    let data = read_all(&handle);
    for writer in 0..64usize {
        assert_eq!(&data[writer * 8..writer * 8 + 8], &[writer as u8; 8]);
    }
    assert!(plfs.state.log_cache.len() <= 4);
    handle.close().unwrap();
}

#[derive(Debug, Clone)]
enum Op {
    Write { writer: u64, offset: u64, length: usize, seed: u8 },
    Truncate { size: u64 },
    Read { offset: u64, length: usize },
    Sync,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (0u64..8, prop_oneof![0u64..5000, 0u64..200_000, Just(1u64 << 40)], 1usize..3000, any::<u8>())
            .prop_map(|(writer, offset, length, seed)| Op::Write { writer, offset, length, seed }),
        1 => prop_oneof![0u64..6000, Just(0u64)].prop_map(|size| Op::Truncate { size }),
        3 => (0u64..8000, 1usize..9000).prop_map(|(offset, length)| Op::Read { offset, length }),
        1 => Just(Op::Sync),
        1 => Just(Op::Reopen),
    ]
}

/// A sparse byte model: only bytes below `MODEL_DENSE_BYTES` are kept
/// densely; the rare huge-offset writes are tracked separately.
#[derive(Default)]
struct Model {
    bytes: Vec<u8>,
    size: u64,
    far: std::collections::BTreeMap<u64, u8>,
}

impl Model {
    fn write(&mut self, offset: u64, data: &[u8]) {
        let end = offset + data.len() as u64;
        if offset >= 1 << 30 {
            for (i, &byte) in data.iter().enumerate() {
                self.far.insert(offset + i as u64, byte);
            }
        } else {
            if self.bytes.len() < end as usize {
                self.bytes.resize(end as usize, 0);
            }
            self.bytes[offset as usize..end as usize].copy_from_slice(data);
        }
        self.size = self.size.max(end);
    }

    fn truncate(&mut self, size: u64) {
        if (self.bytes.len() as u64) > size {
            self.bytes.truncate(size as usize);
        }
        self.far.retain(|&position, _| position < size);
        self.size = size;
    }

    fn read(&self, offset: u64, length: usize) -> Vec<u8> {
        let end = (offset + length as u64).min(self.size);
        if offset >= end {
            return Vec::new();
        }
        let mut out = vec![0u8; (end - offset) as usize];
        for (i, byte) in out.iter_mut().enumerate() {
            let position = offset + i as u64;
            if let Some(&b) = self.bytes.get(position as usize) {
                *byte = b;
            }
        }
        for (&position, &byte) in self.far.range(offset..end) {
            out[(position - offset) as usize] = byte;
        }
        out
    }
}

/// Runs `ops` on `/model` through `plfs` against a byte model, then checks
/// that `fresh` (another process's mount of the same backends) reads the
/// closed file back exactly: the shared body of every workload's model test.
fn check_model(ops: &[Op], plfs: &Plfs, fresh: &Plfs) -> std::result::Result<(), TestCaseError> {
    let mut handle = plfs.open("/model", OpenFlags::RDWR.create(), 0o644, 0).unwrap();
    let mut model = Model::default();
    for op in ops {
        match *op {
            Op::Write { writer, offset, length, seed } => {
                let data: Vec<u8> = (0..length).map(|i| seed.wrapping_add(i as u8)).collect();
                handle.write_as(&data, offset, writer).unwrap();
                model.write(offset, &data);
            }
            Op::Truncate { size } => {
                handle.truncate(size).unwrap();
                model.truncate(size);
            }
            Op::Read { offset, length } => {
                let mut buf = vec![0xEE; length];
                let count = handle.read(&mut buf, offset).unwrap();
                prop_assert_eq!(
                    &buf[..count],
                    &model.read(offset, length)[..],
                    "read {} at {}",
                    length,
                    offset
                );
            }
            Op::Sync => handle.sync().unwrap(),
            Op::Reopen => {
                handle.close().unwrap();
                handle = plfs.open("/model", OpenFlags::RDWR, 0, 0).unwrap();
            }
        }
        prop_assert_eq!(handle.size().unwrap(), model.size);
    }
    handle.close().unwrap();
    prop_assert_eq!(plfs.stat("/model").unwrap().size, model.size);
    prop_assert_eq!(fresh.stat("/model").unwrap().size, model.size);
    let reader = fresh.open("/model", OpenFlags::RDONLY, 0, 0).unwrap();
    let dense = model.size.min(300_000) as usize;
    let mut buf = vec![0u8; dense];
    let count = reader.read(&mut buf, 0).unwrap();
    prop_assert_eq!(&buf[..count], &model.read(0, dense)[..]);
    if let Some((&first, _)) = model.far.iter().next() {
        let length = (model.size - first) as usize;
        let mut buf = vec![0u8; length];
        prop_assert_eq!(reader.read(&mut buf, first).unwrap(), length);
        prop_assert_eq!(&buf[..], &model.read(first, length)[..]);
    }
    reader.close().unwrap();
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random interleavings of writes (overlapping, unaligned, sparse, huge
    /// offsets), truncates, syncs and reopens from up to 8 writers read back
    /// exactly as a byte model says.
    #[test]
    fn file_matches_byte_model(ops in proptest::collection::vec(op(), 1..60), backends in 1usize..4) {
        let stores = memory_stores(backends);
        check_model(&ops, &mount_over(&stores, options(3)), &mount_over(&stores, options(4)))?;
    }
}

/// Layouts over 64 KiB units, so the model's offsets (up to 200 KB, and one
/// huge one) cross stripe units, components and backends.
fn small_layout() -> impl Strategy<Value = crate::striping::Layout> {
    use crate::striping::{Component, Layout, STRIPE_UNIT, StripeCount};
    let count = prop_oneof![Just(StripeCount::Count(1)), Just(StripeCount::Count(2)), Just(StripeCount::All)];
    (count.clone(), 1u64..3, count, 1u64..3, any::<bool>()).prop_map(|(first, units, rest, size, single)| {
        let component = |start, end, stripe_count, stripe_size| Component {
            start,
            end,
            stripe_count,
            stripe_size,
            pool: None,
        };
        if single {
            return Layout::striped(rest, size * STRIPE_UNIT).unwrap();
        }
        let boundary = units * 2 * STRIPE_UNIT;
        Layout::new(vec![
            component(0, Some(boundary), first, STRIPE_UNIT),
            component(boundary, None, rest, size * STRIPE_UNIT),
        ])
        .unwrap()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// The same, for a file striped over up to 4 backends (writes split at
    /// stripe units into one log per writer and backend); the fresh reader
    /// has no layout configured and reads by the index alone.
    #[test]
    fn striped_file_matches_byte_model(
        ops in proptest::collection::vec(op(), 1..60),
        backends in 1usize..5,
        layout in small_layout(),
    ) {
        let stores = memory_stores(backends);
        let striping = crate::striping::StripingConfig { default_layout: Some(layout), ..Default::default() };
        let backends_of = || stores.iter().map(|s| (s.clone(), BackendRole::Any)).collect();
        let striped = Plfs::with_striping(backends_of(), options(3), striping).unwrap();
        check_model(&ops, &striped, &mount_over(&stores, options(4)))?;
    }
}

mod faults {
    use super::*;
    use crate::store::faulty::{Fault, FaultAction, FaultyStore, Op};

    struct Rig {
        inner: Vec<SharedStore>,
        faulty: Vec<Arc<FaultyStore>>,
        plfs: Plfs,
    }

    fn rig() -> Rig {
        let inner = memory_stores(2);
        let faulty: Vec<Arc<FaultyStore>> =
            inner.iter().map(|s| Arc::new(FaultyStore::new(s.clone()))).collect();
        let shared: Vec<SharedStore> = faulty.iter().map(|f| f.clone() as SharedStore).collect();
        let plfs = mount_over(&shared, options(11));
        Rig { inner, faulty, plfs }
    }

    fn inject(rig: &Rig, fault: Fault) {
        for store in &rig.faulty {
            store.add_fault(fault.clone());
        }
    }

    /// The bytes a fresh process reads back through the fault-free stores.
    fn read_back(rig: &Rig, path: &str) -> Vec<u8> {
        for store in &rig.faulty {
            store.clear();
        }
        let plfs = mount_over(&rig.inner, options(12));
        let handle = plfs.open(path, OpenFlags::RDONLY, 0, 1).unwrap();
        let data = read_all(&handle);
        handle.close().unwrap();
        data
    }

    fn synced_prefix(rig: &Rig) -> FileHandle {
        let handle = rig.plfs.open("/f", OpenFlags::RDWR.create(), 0o644, 1).unwrap();
        handle.write(b"synced", 0).unwrap();
        handle.sync().unwrap();
        handle
    }

    /// Names under `dir` on every backend below `rig`'s faults.
    fn backend_names(rig: &Rig, dir: &str) -> Vec<String> {
        let dir = StorePath::parse(dir).unwrap();
        let mut names = Vec::new();
        for store in &rig.inner {
            match store.list(&dir) {
                Ok(entries) => names.extend(entries.into_iter().map(|entry| entry.name)),
                Err(error) => assert_eq!(error.kind(), ErrorKind::NotFound, "{error}"),
            }
        }
        names.sort();
        names
    }

    fn write_file(plfs: &Plfs, path: &str, bytes: &[u8]) {
        let handle = plfs.open(path, OpenFlags::WRONLY.create(), 0o644, 1).unwrap();
        handle.write(bytes, 0).unwrap();
        handle.close().unwrap();
    }

    /// An unlink returns once one rename took the container out of the
    /// namespace; its pieces are deleted after. When that deletion fails
    /// (as when the process dies first), the pieces wait hidden as
    /// `.plfs-reclaim.*`: listings do not show them, a new file at the name
    /// is not mixed with them, and recover of the directory deletes them
    /// (work left, not damage: no --fix needed) and nothing else.
    #[test]
    fn a_removal_cut_short_after_its_rename_is_hidden_and_finished_by_recover() {
        let rig = rig();
        rig.plfs.mkdir("/d", 0o755).unwrap();
        write_file(&rig.plfs, "/d/gone", b"old bytes");
        write_file(&rig.plfs, "/d/kept", b"kept bytes");
        inject(&rig, Fault::new(Op::RemoveFile, FaultAction::Eio));
        rig.plfs.unlink("/d/gone").unwrap();
        rig.plfs.finish_removals();
        for store in &rig.faulty {
            store.clear();
        }
        let pending: Vec<String> =
            backend_names(&rig, "d").into_iter().filter(|name| name.starts_with(".plfs-reclaim.")).collect();
        assert!(!pending.is_empty(), "the failed deletion left its pieces: {:?}", backend_names(&rig, "d"));
        assert_eq!(rig.plfs.stat("/d/gone").unwrap_err().kind(), ErrorKind::NotFound);
        let listed: Vec<String> = rig.plfs.readdir("/d").unwrap().into_iter().map(|e| e.name).collect();
        assert_eq!(listed, ["kept"]);
        write_file(&rig.plfs, "/d/gone", b"new");
        assert_eq!(read_back(&rig, "/d/gone"), b"new");

        let report = rig.plfs.recover_directory("/d", false).unwrap();
        assert_eq!(report.findings.len(), pending.len(), "{:?}", report.findings);
        for finding in &report.findings {
            assert_eq!(finding.problem, crate::tools::Problem::PendingReclaim, "{finding:?}");
            assert!(finding.fixed, "{finding:?}");
        }
        assert_eq!(report.unfixed(), 0);
        let left = backend_names(&rig, "d");
        assert!(left.iter().all(|name| !name.starts_with(".plfs-")), "{left:?}");
        assert_eq!(read_back(&rig, "/d/kept"), b"kept bytes");
        assert_eq!(read_back(&rig, "/d/gone"), b"new");
        let again = rig.plfs.recover_directory("/d", false).unwrap();
        assert!(again.findings.is_empty(), "{:?}", again.findings);
    }

    /// A directory whose only entries are removed files still to delete is
    /// empty: rmdir succeeds and leaves nothing on any backend.
    #[test]
    fn rmdir_of_a_directory_holding_only_pending_reclaims_succeeds() {
        let rig = rig();
        rig.plfs.mkdir("/d", 0o755).unwrap();
        write_file(&rig.plfs, "/d/f", b"bytes");
        inject(&rig, Fault::new(Op::RemoveFile, FaultAction::Eio));
        rig.plfs.unlink("/d/f").unwrap();
        rig.plfs.finish_removals();
        for store in &rig.faulty {
            store.clear();
        }
        assert!(backend_names(&rig, "d").iter().any(|name| name.starts_with(".plfs-reclaim.")));
        assert!(rig.plfs.readdir("/d").unwrap().is_empty());
        rig.plfs.rmdir("/d").unwrap();
        assert!(backend_names(&rig, "").is_empty(), "{:?}", backend_names(&rig, ""));
    }

    #[test]
    fn data_append_errors_surface_with_their_kind() {
        for (action, kind) in [
            (FaultAction::Eio, ErrorKind::Io),
            (FaultAction::Enospc, ErrorKind::NoSpace),
            (FaultAction::ShortWrite(3), ErrorKind::Io),
            (FaultAction::TornAppend, ErrorKind::Io),
        ] {
            let rig = rig();
            let handle = synced_prefix(&rig);
            inject(&rig, Fault::new(Op::Append, action).path_contains("/data.").nth(1));
            let error = handle.write(b"LOST", 6).unwrap_err();
            assert_eq!(error.kind(), kind, "{action:?}: {error}");
            assert!(error.to_string().contains("/f"), "error names the file: {error}");
            // The failed pair is retired; later writes go to a fresh pair.
            handle.write(b"+more", 6).unwrap();
            handle.close().unwrap();
            assert_eq!(read_back(&rig, "/f"), b"synced+more", "{action:?}");
        }
    }

    /// An index append that fails after writing its whole frame (a short
    /// write as long as the frame, a store that fails after writing) kept
    /// the record: the retired pair's size record must count it, or stat
    /// and reads disagree with no crash at all (plfs-sim seed 15949).
    #[test]
    fn a_failed_index_append_that_kept_its_frame_leaves_stat_agreeing_with_reads() {
        let rig = rig();
        let handle = synced_prefix(&rig);
        handle.write(&[7; 100], 6).unwrap();
        handle.sync().unwrap();
        inject(
            &rig,
            Fault::new(Op::Append, FaultAction::ShortWrite(usize::MAX)).path_contains("/index.").nth(1),
        );
        assert!(handle.truncate(3).is_err(), "the injected fault fired");
        // The close may report the failure; the truncate may or may not
        // have happened, but stat and reads must say the same.
        drop(handle.close());
        let data = read_back(&rig, "/f");
        let plfs = mount_over(&rig.inner, options(13));
        assert_eq!(plfs.stat("/f").unwrap().size, data.len() as u64, "stat agrees with reads");
        assert_eq!(data, b"syn", "the truncate record was kept whole");
    }

    /// A read through another handle flushes every writer's buffered
    /// index; when that append fails, the writer's acknowledged write is
    /// lost, and the writer's close must say so (it used to succeed).
    #[test]
    fn an_index_append_failed_by_another_handle_fails_the_writers_close() {
        let rig = rig();
        let writer = synced_prefix(&rig);
        writer.write(b"acknowledged", 100).unwrap();
        inject(&rig, Fault::new(Op::Append, FaultAction::Eio).path_contains("/index.").nth(1));
        let read = rig.plfs.open("/f", OpenFlags::RDONLY, 0, 2).and_then(|reader| {
            let mut buf = [0u8; 16];
            reader.read(&mut buf, 0)?;
            reader.close()
        });
        assert!(read.is_err(), "the injected fault fired in the reader's flush");
        let error = writer.close().unwrap_err();
        assert!(error.to_string().contains("may be lost"), "{error}");
    }

    #[test]
    fn index_append_errors_surface_at_sync_and_keep_synced_data() {
        for action in
            [FaultAction::Eio, FaultAction::ShortWrite(5), FaultAction::TornAppend, FaultAction::Enospc]
        {
            let rig = rig();
            let handle = synced_prefix(&rig);
            handle.write(b"unsynced", 100).unwrap();
            inject(&rig, Fault::new(Op::Append, action).path_contains("/index.").nth(1));
            assert!(handle.sync().is_err(), "{action:?}");
            drop(handle.close());
            assert_eq!(read_back(&rig, "/f"), b"synced", "{action:?}: a torn index tail is ignored");
        }
    }

    #[test]
    fn sync_errors_surface() {
        let rig = rig();
        let handle = synced_prefix(&rig);
        handle.write(b"x", 6).unwrap();
        inject(&rig, Fault::new(Op::Sync, FaultAction::Eio));
        assert_eq!(handle.sync().unwrap_err().kind(), ErrorKind::Io);
        drop(handle.close());
        assert!(read_back(&rig, "/f").starts_with(b"synced"));
    }

    #[test]
    fn metadata_faults_surface_on_create_and_open() {
        let rig = rig();
        inject(&rig, Fault::new(Op::Rename, FaultAction::Eio));
        assert_eq!(
            rig.plfs.open("/new", OpenFlags::WRONLY.create(), 0o644, 1).unwrap_err().kind(),
            ErrorKind::Io
        );
        for store in &rig.faulty {
            store.clear();
        }
        assert_eq!(rig.plfs.stat("/new").unwrap_err().kind(), ErrorKind::NotFound, "no half-made container");
        let handle = synced_prefix(&rig);
        inject(&rig, Fault::new(Op::CreateNew, FaultAction::Enospc));
        assert_eq!(handle.write_as(b"w2", 0, 2).unwrap_err().kind(), ErrorKind::NoSpace);
        inject(&rig, Fault::new(Op::List, FaultAction::Eio));
        let other =
            mount_over(&rig.faulty.iter().map(|f| f.clone() as SharedStore).collect::<Vec<_>>(), options(13));
        assert_eq!(other.stat("/f").unwrap_err().kind(), ErrorKind::Io);
        handle.close().ok();
    }

    #[test]
    fn read_faults_surface_and_never_return_wrong_bytes() {
        let rig = rig();
        let handle = synced_prefix(&rig);
        handle.close().unwrap();
        inject(&rig, Fault::new(Op::ReadAt, FaultAction::Eio).path_contains("/data."));
        let reader = rig.plfs.open("/f", OpenFlags::RDONLY, 0, 1).unwrap();
        let mut buf = [0u8; 6];
        assert_eq!(reader.read(&mut buf, 0).unwrap_err().kind(), ErrorKind::Io);
        reader.close().unwrap();
    }

    /// A read-ahead fill that failed left the log's window claiming bytes
    /// it never read (zeros): the next small read of the log was served
    /// from it and failed its checksum (plfs-sim seeds 2182 and 7357), or,
    /// with `verify_reads` off, returned the zeros.
    #[test]
    fn a_read_after_a_failed_read_ahead_returns_the_logs_bytes() {
        let rig = rig();
        let handle = synced_prefix(&rig);
        handle.close().unwrap();
        let reader = rig.plfs.open("/f", OpenFlags::RDONLY, 0, 1).unwrap();
        inject(&rig, Fault::new(Op::ReadAt, FaultAction::Eio).path_contains("/data.").nth(1));
        let mut buf = [0u8; 6];
        assert_eq!(reader.read(&mut buf, 0).unwrap_err().kind(), ErrorKind::Io, "the fault fired");
        assert_eq!(reader.read(&mut buf, 0).unwrap(), 6);
        assert_eq!(&buf, b"synced");
        reader.close().unwrap();
    }
}

#[test]
fn a_corrupt_index_frame_is_an_error_naming_the_log() {
    let stores = memory_stores(1);
    let plfs = mount_over(&stores, options(1));
    let handle = plfs.open("/c", OpenFlags::WRONLY.create(), 0o644, 1).unwrap();
    handle.write(b"first", 0).unwrap();
    handle.sync().unwrap();
    handle.write(b"second", 5).unwrap();
    handle.close().unwrap();
    let log = plfs.inventory("/c").unwrap().logs.remove(0);
    let index_path = log.path(&StorePath::parse("c").unwrap(), crate::layout::LogKind::Index);
    let mut bytes = stores[0].read_all(&index_path).unwrap();
    let header_length =
        crate::format::data_log::LogHeader::decode(&bytes, crate::format::data_log::INDEX_MAGIC, "t")
            .unwrap()
            .1;
    bytes[header_length + 20] ^= 0xFF; // inside the first frame's first record
    stores[0].replace(&index_path, &bytes).unwrap();
    let reader = mount_over(&stores, options(2));
    let handle = reader.open("/c", OpenFlags::RDONLY, 0, 1).unwrap();
    let error = handle.read(&mut [0u8; 11], 0).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Corrupt);
    let text = error.to_string();
    assert!(text.contains(index_path.as_str()) && text.contains("offset"), "{text}");
    handle.close().unwrap();
}

#[test]
fn strided_reads_stream_each_log_through_its_window() {
    let stores = memory_stores(1);
    let counting = Arc::new(crate::store::counting::CountingStore::new(stores[0].clone()));
    let mut opts = options(1);
    opts.tuning.readahead_bytes = 1 << 20;
    let plfs = mount_over(&[counting.clone() as SharedStore], opts);
    let handle = plfs.open("/strided", OpenFlags::WRONLY.create(), 0o644, 0).unwrap();
    let (writers, records, size) = (4u64, 100u64, 4700usize);
    for k in 0..records {
        for writer in 0..writers {
            let record = k * writers + writer;
            handle.write_as(&vec![record as u8; size], record * size as u64, writer).unwrap();
        }
    }
    handle.close().unwrap();
    let reader = plfs.open("/strided", OpenFlags::RDONLY, 0, 9).unwrap();
    let mut buf = vec![0u8; size];
    reader.read(&mut buf, 0).unwrap();
    counting.reset();
    for record in 1..writers * records {
        reader.read(&mut buf, record * size as u64).unwrap();
        assert_eq!(buf[0], record as u8);
    }
    let reads = counting.counts().read_ats;
    // 399 record-sized reads over 4 logs of ~470 KB each: each log is
    // fetched once into its window, not once per record (the first log's
    // window was filled by the read before the reset).
    assert_eq!(reads, writers - 1, "{reads} backend reads for {} records", writers * records);
    reader.close().unwrap();
}

/// A read longer than a checked piece (`checksums::PIECE_BYTES`) is filled
/// piece by piece, each piece checked as soon as it lands (its bytes still
/// in cache); a flipped byte anywhere in it still fails the whole read,
/// naming the data log and the damaged record's offset.
#[test]
fn a_long_read_is_checked_piece_by_piece_and_a_flipped_byte_still_fails_it() {
    let stores = memory_stores(1);
    let counting = Arc::new(crate::store::counting::CountingStore::new(stores[0].clone()));
    let plfs = mount_over(&[counting.clone() as SharedStore], options(1));
    let handle = plfs.open("/long", OpenFlags::WRONLY.create(), 0o644, 1).unwrap();
    // 60 records of 10,000 bytes, then one of 700,000 (longer than a piece).
    let data: Vec<u8> = (0..1_300_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    for (k, record) in data[..600_000].chunks(10_000).enumerate() {
        handle.write(record, k as u64 * 10_000).unwrap();
    }
    handle.write(&data[600_000..], 600_000).unwrap();
    handle.close().unwrap();
    let reader = plfs.open("/long", OpenFlags::RDONLY, 0, 2).unwrap();
    let mut buf = vec![0u8; data.len()];
    assert_eq!(reader.read(&mut buf[..10], 0).unwrap(), 10, "index loaded");
    counting.reset();
    assert_eq!(reader.read(&mut buf, 0).unwrap(), data.len());
    assert!(buf == data);
    // 600,000 bytes of short records in pieces of whole records (260,000,
    // 260,000, 80,000), the long record a piece at a time (3 pieces).
    assert_eq!(counting.counts().read_ats, 6);
    reader.close().unwrap();

    let log = plfs.inventory("/long").unwrap().logs.remove(0);
    let data_path = log.path(&StorePath::parse("long").unwrap(), crate::layout::LogKind::Data);
    let clean = stores[0].read_all(&data_path).unwrap();
    let header = crate::format::data_log::LogHeader::decode(&clean, crate::format::data_log::DATA_MAGIC, "t")
        .unwrap()
        .1 as u64;
    // A short record between the first two pieces' cut (its record may be
    // one of a pattern, checked whole), then the middle of the long one.
    for (flipped, expected) in [
        (
            255_000,
            [
                format!("10000 bytes at offset {}", header + 250_000),
                format!("600000 bytes at offset {header}"),
            ],
        ),
        (1_000_000, [format!("700000 bytes at offset {}", header + 600_000), "none".to_owned()]),
    ] {
        let mut damaged = clean.clone();
        damaged[(header + flipped) as usize] ^= 0x08;
        stores[0].replace(&data_path, &damaged).unwrap();
        let fresh = mount_over(&stores, options(3));
        let reader = fresh.open("/long", OpenFlags::RDONLY, 0, 4).unwrap();
        let error = reader.read(&mut buf, 0).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Corrupt);
        let text = error.to_string();
        assert!(text.contains(data_path.as_str()), "{text}");
        assert!(expected.iter().any(|what| text.contains(&format!("{what} fail their checksum"))), "{text}");
        reader.close().unwrap();
    }
}

#[test]
fn one_handle_serves_many_threads() {
    let plfs = memory_mount(3);
    let handle = plfs.open("/threads", OpenFlags::RDWR.create(), 0o644, 0).unwrap();
    std::thread::scope(|scope| {
        for thread in 0..8u64 {
            let handle = &handle;
            scope.spawn(move || {
                for record in 0..50u64 {
                    let slot = record * 8 + thread;
                    handle.write_as(&[thread as u8 + 1; 100], slot * 100, thread).unwrap();
                    let mut buf = [0u8; 100];
                    handle.read(&mut buf, slot * 100).unwrap();
                    assert_eq!(buf, [thread as u8 + 1; 100], "a thread sees its own write at once");
                }
            });
        }
    });
    handle.close().unwrap();
    let handle = plfs.open("/threads", OpenFlags::RDONLY, 0, 0).unwrap();
    let data = read_all(&handle);
    assert_eq!(data.len(), 400 * 100);
    for (slot, chunk) in data.chunks(100).enumerate() {
        assert_eq!(chunk, &[(slot % 8) as u8 + 1; 100][..], "slot {slot}");
    }
    handle.close().unwrap();
}

#[test]
fn power_loss_keeps_exactly_what_was_synced() {
    let memory: Vec<Arc<MemoryStore>> =
        (0..2).map(|i| Arc::new(MemoryStore::new(format!("mem://b{i}")))).collect();
    let stores: Vec<SharedStore> = memory.iter().map(|m| m.clone() as SharedStore).collect();
    let plfs = mount_over(&stores, options(dead_pid()));
    let handle = plfs.open("/p", OpenFlags::WRONLY.create(), 0o644, 1).unwrap();
    handle.write(&[1; 1000], 0).unwrap();
    handle.sync().unwrap();
    handle.write(&[2; 1000], 1000).unwrap();
    handle.write(&[3; 10], 0).unwrap();
    // The machine loses power: unsynced appends vanish, the handle with them.
    for store in &memory {
        store.discard_unsynced();
    }
    std::mem::forget(handle);
    let survivor = mount_over(&stores, options(2));
    assert_eq!(survivor.stat("/p").unwrap().size, 1000);
    let reader = survivor.open("/p", OpenFlags::RDONLY, 0, 2).unwrap();
    assert_eq!(read_all(&reader), vec![1u8; 1000]);
    reader.close().unwrap();
    let report = survivor.recover("/p", true).unwrap();
    assert!(report.findings.iter().all(|f| f.fixed), "{report:?}");
    assert_eq!(survivor.stat("/p").unwrap().size, 1000);
}

/// A new file is durable at its first sync, as a plain creat(2) is at its
/// fsync, not at its create: a power loss before that may cut its
/// container's access and version files. A lookup then names the file and
/// the command that rebuilds them, and `recover --fix` gives back the file
/// without its unsynced bytes, never with wrong ones. An fsync of a file
/// never written keeps it whole.
#[test]
fn power_loss_before_a_new_files_first_sync_leaves_a_recoverable_file() {
    let memory: Vec<Arc<MemoryStore>> = vec![Arc::new(MemoryStore::new("mem://new"))];
    let stores: Vec<SharedStore> = memory.iter().map(|m| m.clone() as SharedStore).collect();
    let plfs = mount_over(&stores, options(dead_pid()));
    let handle = plfs.open("/n", OpenFlags::WRONLY.create(), 0o644, 1).unwrap();
    handle.write(&[7; 100], 0).unwrap();
    handle.close().unwrap();
    let synced = plfs.open("/s", OpenFlags::WRONLY.create(), 0o644, 1).unwrap();
    synced.sync().unwrap();
    synced.close().unwrap();
    memory[0].discard_unsynced();
    let survivor = mount_over(&stores, options(2));
    assert_eq!(survivor.stat("/s").unwrap().size, 0);
    assert!(survivor.recover("/s", false).unwrap().findings.is_empty());
    let error = survivor.stat("/n").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Corrupt, "{error}");
    assert!(error.to_string().contains("plfs recover --fix /n"), "{error}");
    let report = survivor.recover("/n", true).unwrap();
    let fixed: Vec<crate::tools::Problem> =
        report.findings.iter().filter(|f| f.fixed).map(|f| f.problem).collect();
    assert!(fixed.contains(&crate::tools::Problem::DamagedAccessFile), "{report:?}");
    assert!(fixed.contains(&crate::tools::Problem::DamagedVersionFile), "{report:?}");
    assert!(report.findings.iter().all(|f| f.fixed), "{report:?}");
    assert_eq!(survivor.stat("/n").unwrap().size, 0);
    let reader = survivor.open("/n", OpenFlags::RDONLY, 0, 2).unwrap();
    assert_eq!(read_all(&reader), Vec::<u8>::new());
    reader.close().unwrap();
    assert!(survivor.recover_with("/n", false, true).unwrap().findings.is_empty());
    assert_eq!(survivor.readdir("/").unwrap().len(), 2);
}

#[test]
fn user_names_that_match_container_entries_are_ordinary_names() {
    let root = tempfile::tempdir().unwrap();
    let stores: Vec<SharedStore> = (0..2)
        .map(|i| {
            let dir = root.path().join(format!("b{i}"));
            std::fs::create_dir(&dir).unwrap();
            Arc::new(crate::store::posix::PosixStore::new(dir, format!("posix://b{i}")).unwrap())
                as SharedStore
        })
        .collect();
    let plfs = mount_over(&stores, options(1));
    plfs.mkdir("/d", 0o755).unwrap();
    for name in ["access", "version", "meta", "hostdir.3", "index.x", "global.index"] {
        let path = format!("/d/{name}");
        let handle = plfs.open(&path, OpenFlags::WRONLY.create(), 0o644, 1).unwrap();
        handle.write(name.as_bytes(), 0).unwrap();
        handle.close().unwrap();
        assert_eq!(plfs.stat(&path).unwrap().size, name.len() as u64, "{name}");
    }
    plfs.symlink("/etc/passwd", "/access").unwrap();
    assert_eq!(plfs.stat("/d").unwrap().kind, FileKind::Directory);
    assert_eq!(plfs.stat("/").unwrap().kind, FileKind::Directory);
    let listing = plfs.readdir("/d").unwrap();
    assert_eq!(listing.len(), 6);
    assert!(listing.iter().all(|entry| entry.kind == FileKind::File), "{listing:?}");
    let root: Vec<_> = plfs.readdir("/").unwrap();
    assert!(root.contains(&DirEntryInfo { name: "access".into(), kind: FileKind::Symlink }), "{root:?}");
    assert!(root.contains(&DirEntryInfo { name: "d".into(), kind: FileKind::Directory }), "{root:?}");
}

#[test]
fn symlinks_take_owner_and_times_but_not_modes() {
    let plfs = memory_mount(2);
    plfs.open("/target", OpenFlags::WRONLY.create(), 0o644, 1).unwrap().close().unwrap();
    plfs.symlink("target", "/link").unwrap();
    let when = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(12345);
    plfs.utime("/link", Some(when), Some(when)).unwrap();
    plfs.chown("/link", Some(7), Some(8)).unwrap();
    let link = plfs.stat("/link").unwrap();
    assert_eq!((link.kind, link.mtime, link.uid, link.gid), (FileKind::Symlink, when, 7, 8));
    let target = plfs.stat("/target").unwrap();
    assert_ne!(target.mtime, when, "the link's target is untouched");
    assert_eq!(target.uid, 1000);
    assert_eq!(plfs.chmod("/link", 0o600).unwrap_err().kind(), ErrorKind::Unsupported);
}

#[test]
fn a_directory_changes_when_any_backend_copy_changes() {
    let stores = memory_stores(4);
    let plfs = mount_over(&stores, options(1));
    plfs.mkdir("/d", 0o755).unwrap();
    let past = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1000);
    plfs.utime("/d", Some(past), Some(past)).unwrap();
    assert_eq!(plfs.stat("/d").unwrap().mtime, past);
    // Whichever backend the new container lands on, the directory's mtime moves.
    for i in 0..8 {
        let name = format!("/d/f{i}");
        plfs.open(&name, OpenFlags::WRONLY.create(), 0o644, 1).unwrap().close().unwrap();
        assert!(plfs.stat("/d").unwrap().mtime > past, "after creating {name}");
        plfs.utime("/d", Some(past), Some(past)).unwrap();
    }
}

/// One backend counted, two more mounts over it ("processes").
fn counted_mounts() -> (Arc<crate::store::counting::CountingStore>, Vec<SharedStore>, [Plfs; 3]) {
    let stores = memory_stores(1);
    let counting = Arc::new(crate::store::counting::CountingStore::new(stores[0].clone()));
    let shared: Vec<SharedStore> = vec![counting.clone()];
    let mounts = [1, 2, 3].map(|pid| mount_over(&shared, options(pid)));
    (counting, stores, mounts)
}

/// A stat of a closed container is a `statx` and one small read (its
/// closed summary), not the access file and a listing of `meta/`, and it
/// answers exactly what the full path answers.
#[test]
fn a_closed_files_stat_reads_its_summary_alone() {
    let (counting, stores, [writer, other, _]) = counted_mounts();
    for id in 0..3u64 {
        let handle = writer.open("/s", OpenFlags::WRONLY.create(), 0o640, id).unwrap();
        handle.write(&[7; 100], id * 1000).unwrap();
        handle.close().unwrap();
    }
    counting.reset();
    let attr = other.stat("/s").unwrap();
    let counts = counting.counts();
    assert_eq!(
        (counts.metadata, counts.opens, counts.lists),
        (1, 1, 0),
        "statx of the container and one read: {counts:?}"
    );
    assert_eq!((attr.size, attr.blocks, attr.mode), (2100, 1, 0o640));
    stores[0].remove_file(&ContainerPaths::new(StorePath::parse("s").unwrap()).closed_summary()).unwrap();
    counting.reset();
    assert_eq!(other.stat("/s").unwrap(), attr, "the summary answers as the listing does");
    assert_eq!(counting.counts().lists, 1);
}

/// A writer elsewhere removes the summary before its first write can be
/// seen, and the next close leaves a new one.
#[test]
fn a_stat_during_a_writer_elsewhere_sees_its_writes() {
    let (counting, _stores, [first, second, watcher]) = counted_mounts();
    write_whole(&first, "/w", &[1; 100]);
    assert_eq!(watcher.stat("/w").unwrap().size, 100);
    let handle = second.open("/w", OpenFlags::WRONLY, 0, 9).unwrap();
    handle.write(&[2; 10], 1000).unwrap();
    handle.sync().unwrap();
    assert_eq!(watcher.stat("/w").unwrap().size, 1010, "a stale summary hid a synced write");
    handle.write(&[3; 10], 2000).unwrap();
    handle.close().unwrap();
    counting.reset();
    assert_eq!(watcher.stat("/w").unwrap().size, 2010);
    assert_eq!(counting.counts().lists, 0, "the last close left a summary");
}

/// chmod, chown and utime change what the summary holds: it goes.
#[test]
fn attribute_changes_elsewhere_show_in_the_next_stat() {
    let (_counting, _stores, [owner, changer, watcher]) = counted_mounts();
    write_whole(&owner, "/a", &[1; 10]);
    assert_eq!(watcher.stat("/a").unwrap().mode, 0o644);
    changer.chmod("/a", 0o600).unwrap();
    assert_eq!(watcher.stat("/a").unwrap().mode, 0o600);
    changer.chown("/a", Some(4321), None).unwrap();
    assert_eq!(watcher.stat("/a").unwrap().uid, 4321);
    let then = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
    // (From the writer's mount: each test mount's clock starts alike, so
    // only one mount's stamps order its utime after its writes.)
    owner.utime("/a", Some(then), Some(then)).unwrap();
    let attr = watcher.stat("/a").unwrap();
    assert_eq!((attr.atime, attr.mtime, attr.size), (then, then, 10));
}

/// A machine crash while a writer is open after a close left a summary:
/// the summary's bytes may well have reached the disk, yet the stat after
/// the crash counts the writer's synced bytes.
#[test]
fn a_summary_never_outlives_a_crash_mid_write() {
    let memory: Vec<Arc<MemoryStore>> = vec![Arc::new(MemoryStore::new("mem://crash"))];
    let stores: Vec<SharedStore> = memory.iter().map(|m| m.clone() as SharedStore).collect();
    write_whole(&mount_over(&stores, options(1)), "/c", &[1; 100]);
    let crashing = mount_over(&stores, options(dead_pid()));
    let handle = crashing.open("/c", OpenFlags::WRONLY, 0, 2).unwrap();
    handle.write(&[2; 50], 100).unwrap();
    handle.sync().unwrap();
    handle.write(&[3; 50], 150).unwrap();
    // Every unsynced byte of every file written back but the unsynced
    // writes' logs: the worst case for a summary.
    memory[0].crash(|path, unsynced| if path.ends_with("/closed") { unsynced } else { 0 });
    std::mem::forget(handle);
    let survivor = mount_over(&stores, options(3));
    assert_eq!(survivor.stat("/c").unwrap().size, 150);
    let report = survivor.recover("/c", true).unwrap();
    assert!(report.findings.iter().all(|f| f.fixed), "{report:?}");
    assert_eq!(survivor.stat("/c").unwrap().size, 150);
}

#[test]
fn lazy_stat_of_a_file_being_written_reads_no_index_log() {
    for lazy in [true, false] {
        let stores = memory_stores(1);
        let counting = Arc::new(crate::store::counting::CountingStore::new(stores[0].clone()));
        let mut opts = options(1);
        opts.tuning.lazy_stat = lazy;
        let plfs = mount_over(&[counting.clone() as SharedStore], opts);
        let handle = plfs.open("/w", OpenFlags::WRONLY.create(), 0o644, 1).unwrap();
        handle.write(&[1; 100], 0).unwrap();
        assert_eq!(plfs.stat("/w").unwrap().size, 100);
        counting.reset();
        handle.write(&[2; 50], 100).unwrap();
        handle.truncate(120).unwrap();
        counting.reset();
        let attr = plfs.stat("/w").unwrap();
        assert_eq!(attr.size, 120, "lazy {lazy}");
        let opens = counting.counts().opens;
        assert_eq!(opens, if lazy { 1 } else { 2 }, "lazy {lazy}: access file only, or also the index log");
        handle.close().unwrap();
        assert_eq!(plfs.stat("/w").unwrap().size, 120);
    }
}

#[test]
fn the_inside_of_a_container_is_not_a_path() {
    let plfs = memory_mount(1);
    plfs.open("/f", OpenFlags::WRONLY.create(), 0o644, 0).unwrap().close().unwrap();
    for inside in ["/f/meta", "/f/access", "/f/version", "/f/xattrs", "/f/hostdir.0", "/f/meta/anything"] {
        assert_eq!(plfs.stat(inside).unwrap_err().kind(), ErrorKind::NotADirectory, "{inside}");
        assert!(plfs.open(inside, OpenFlags::RDONLY, 0, 0).is_err(), "{inside}");
    }
    // A user's own directory may still be called meta.
    plfs.mkdir("/d", 0o755).unwrap();
    plfs.mkdir("/d/meta", 0o755).unwrap();
    assert_eq!(plfs.stat("/d/meta").unwrap().kind, FileKind::Directory);
}

fn posix_mount(root: &std::path::Path, count: usize, workload: Workload) -> (Vec<SharedStore>, Plfs) {
    let stores: Vec<SharedStore> = (0..count)
        .map(|i| {
            let dir = root.join(format!("b{i}"));
            std::fs::create_dir(&dir).unwrap();
            Arc::new(
                crate::store::posix::PosixStore::new(dir.clone(), format!("posix://{}", dir.display()))
                    .unwrap(),
            ) as SharedStore
        })
        .collect();
    let backends = stores.iter().map(|s| (s.clone(), BackendRole::Any)).collect();
    let plfs = Plfs::with_workload(backends, options(1), workload).unwrap();
    (stores, plfs)
}

fn write_whole(plfs: &Plfs, path: &str, data: &[u8]) {
    let handle = plfs.open(path, OpenFlags::WRONLY.create(), 0o644, 1).unwrap();
    handle.write(data, 0).unwrap();
    handle.close().unwrap();
}

/// A stat of a closed container on a POSIX backend reads its summary with
/// no symbolic link followed anywhere below the backend root: a user's
/// link in a directory, named and placed like a container's summary and
/// pointing at a real one, never turns the directory into a file (the
/// old statx-then-read followed it), and a link to a container stays a
/// link, also on a backend whose root is reached through a link.
#[test]
fn a_closed_stat_on_posix_follows_no_link() {
    let root = tempfile::tempdir().unwrap();
    let real = root.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let linked = root.path().join("linked");
    std::os::unix::fs::symlink(&real, &linked).unwrap();
    let store = Arc::new(
        crate::store::posix::PosixStore::new(linked.clone(), format!("posix://{}", linked.display()))
            .unwrap(),
    ) as SharedStore;
    let plfs =
        Plfs::with_workload(vec![(store, BackendRole::Any)], options(1), Workload::SharedFile).unwrap();
    write_whole(&plfs, "/f", &[5; 33]);
    assert!(real.join("f/meta/closed").is_file(), "the close left a summary");
    let attr = plfs.stat("/f").unwrap();
    assert_eq!((attr.kind, attr.size), (FileKind::File, 33));
    plfs.mkdir("/d", 0o755).unwrap();
    plfs.mkdir("/d/meta", 0o755).unwrap();
    plfs.symlink("../../f/meta/closed", "/d/meta/closed").unwrap();
    assert_eq!(plfs.stat("/d").unwrap().kind, FileKind::Directory, "a link named like a summary");
    plfs.symlink("f", "/l").unwrap();
    assert_eq!(plfs.stat("/l").unwrap().kind, FileKind::Symlink);
    assert_eq!(plfs.stat("/f").unwrap(), attr);
}

/// A FIFO (or device) where a container's summary would be cannot stall a
/// stat: anyone who may create names in a directory could otherwise make
/// every stat of it, and the FUSE request thread serving it, wait in
/// `open(2)` for a writer that never comes. Small pieces open without
/// blocking; a FIFO reads as empty, is no summary, and the stat goes on.
#[test]
fn a_fifo_named_like_a_summary_does_not_stall_a_stat() {
    let root = tempfile::tempdir().unwrap();
    let (_stores, plfs) = posix_mount(root.path(), 1, Workload::SharedFile);
    plfs.mkdir("/d", 0o755).unwrap();
    plfs.mkdir("/d/meta", 0o755).unwrap();
    let fifo =
        std::ffi::CString::new(root.path().join("b0/d/meta/closed").as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0, "{}", std::io::Error::last_os_error());
    let plfs = Arc::new(plfs);
    let (done, answer) = std::sync::mpsc::channel();
    let stat = std::thread::spawn({
        let plfs = plfs.clone();
        move || done.send(plfs.stat("/d").map(|attr| attr.kind)).unwrap()
    });
    let kind = answer
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("a stat of /d still waits in open(2) on the FIFO at /d/meta/closed");
    assert_eq!(kind.unwrap(), FileKind::Directory);
    stat.join().unwrap();
}

/// An n-n open for reading opens the backend file refusing a link there
/// and tells a directory apart without a lookup first; what is not a
/// regular file still fails as before.
#[test]
fn an_n_n_read_open_refuses_links_and_directories() {
    let root = tempfile::tempdir().unwrap();
    let (_stores, plfs) = posix_mount(root.path(), 2, Workload::FilePerProc);
    write_whole(&plfs, "/f", b"plain");
    assert_eq!(read_whole(&plfs, "/f"), b"plain");
    plfs.symlink("f", "/l").unwrap();
    plfs.mkdir("/d", 0o755).unwrap();
    let error = plfs.open("/l", OpenFlags::RDONLY, 0, 1).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
    assert!(error.to_string().contains("symbolic link"), "{error}");
    assert_eq!(plfs.open("/d", OpenFlags::RDONLY, 0, 1).unwrap_err().kind(), ErrorKind::IsADirectory);
    assert_eq!(plfs.open("/missing", OpenFlags::RDONLY, 0, 1).unwrap_err().kind(), ErrorKind::NotFound);
}

/// An n-n file renamed to a name on another backend while another process
/// (here a second mount over the same backends) holds it open for
/// writing: the writer's later writes land in the file under its new name.
/// Before, the rename copied the bytes and removed the source, so what the
/// writer wrote after it went to an unlinked inode, silently. Backends on
/// one file system now move the file with one rename(2).
#[test]
fn an_n_n_file_renamed_across_backends_keeps_another_writers_later_writes() {
    let root = tempfile::tempdir().unwrap();
    let (stores, plfs) = posix_mount(root.path(), 2, Workload::FilePerProc);
    let backends = stores.iter().map(|s| (s.clone(), BackendRole::Any)).collect();
    let other = Plfs::with_workload(backends, options(2), Workload::FilePerProc).unwrap();
    let placement = plfs.placement().clone();
    let target = (0..100)
        .map(|i| format!("moved{i}"))
        .find(|n| placement.flat_file_backend(n) != placement.flat_file_backend("log"))
        .unwrap();
    let writer = other.open("/log", OpenFlags::WRONLY.create(), 0o644, 2).unwrap();
    writer.write(b"before ", 0).unwrap();
    plfs.rename("/log", &format!("/{target}")).unwrap();
    writer.write(b"after", 7).unwrap();
    writer.close().unwrap();
    assert_eq!(read_whole(&plfs, &format!("/{target}")), b"before after");
    assert_eq!(plfs.stat("/log").unwrap_err().kind(), ErrorKind::NotFound);
    // The file is on the backend its new name hashes to, and only there.
    let at = |index: usize| root.path().join(format!("b{index}")).join(&target).exists();
    assert!(at(placement.flat_file_backend(&target).0));
    assert!(!at(placement.flat_file_backend("log").0));
}

fn read_whole(plfs: &Plfs, path: &str) -> Vec<u8> {
    let handle = plfs.open(path, OpenFlags::RDONLY, 0, 1).unwrap();
    let data = read_all(&handle);
    handle.close().unwrap();
    data
}

/// Readdir hides names starting `.plfs-` and `recover --fix` deletes some of
/// them as crash debris, so no call may make one: a user's file there was
/// created, hidden, then destroyed (issue 18, item 3).
#[test]
fn reserved_names_are_refused_wherever_a_name_is_made() {
    for workload in [Workload::SharedFile, Workload::FilePerProc, Workload::SmallFile] {
        let root = tempfile::tempdir().unwrap();
        let (_stores, plfs) = posix_mount(root.path(), 2, workload);
        plfs.mkdir("/d", 0o755).unwrap();
        write_whole(&plfs, "/d/f", b"kept");
        let debris_like = layout::new_container_name("f", 1, 1);
        for name in [debris_like.as_str(), ".plfs-gone.0", ".plfs-", ".plfs-smallfile", ".plfs-later"] {
            let path = format!("/d/{name}");
            let refused = |result: Result<()>, what: &str| {
                let error = result.expect_err(&format!("{workload:?}: {what} {path} was accepted"));
                assert_eq!(error.kind(), ErrorKind::InvalidInput, "{workload:?} {what}: {error}");
                assert!(error.to_string().contains(&path), "{workload:?} {what}: {error}");
            };
            refused(plfs.open(&path, OpenFlags::WRONLY.create(), 0o644, 1).map(drop), "create");
            refused(
                plfs.open(&path, OpenFlags::RDWR.create().exclusive(), 0o644, 1).map(drop),
                "O_EXCL create",
            );
            refused(plfs.mkdir(&path, 0o755), "mkdir");
            refused(plfs.symlink("f", &path), "symlink");
            refused(plfs.rename("/d/f", &path), "rename onto");
            refused(plfs.rename_noreplace("/d/f", &path), "rename (noreplace) onto");
            refused(
                plfs.open(&format!("{path}/g"), OpenFlags::WRONLY.create(), 0o644, 1).map(drop),
                "create below",
            );
        }
        let names: Vec<String> = plfs.readdir("/d").unwrap().into_iter().map(|entry| entry.name).collect();
        assert_eq!(names, ["f"], "{workload:?}");
        assert_eq!(read_whole(&plfs, "/d/f"), b"kept", "{workload:?}");
        if workload == Workload::SharedFile {
            let report = plfs.recover("/d/f", true).unwrap();
            assert!(report.findings.is_empty(), "nothing of the user's is debris: {report:?}");
            assert_eq!(read_whole(&plfs, "/d/f"), b"kept");
        }
    }
}

/// What FUSE does with a file unlinked while open: the core picks the
/// reserved name, and the file stays usable under it, opened again too
/// (FUSE opens it for an open(2) that reached the file before its unlink;
/// small_file refused the name, so such opens failed EINVAL), though
/// nothing creates a file there.
#[test]
fn a_hidden_file_stays_usable_under_its_reserved_name() {
    for workload in [Workload::SharedFile, Workload::FilePerProc, Workload::SmallFile] {
        let plfs = Plfs::with_workload(
            memory_stores(2).into_iter().map(|s| (s, BackendRole::Any)).collect(),
            options(7),
            workload,
        )
        .unwrap();
        write_whole(&plfs, "/f", b"open elsewhere");
        let hidden = plfs.hide("/f", 7).unwrap();
        assert!(layout::is_reserved(hidden.trim_start_matches('/')), "{hidden}");
        assert_eq!(plfs.stat("/f").unwrap_err().kind(), ErrorKind::NotFound, "{workload:?}");
        assert!(plfs.readdir("/").unwrap().is_empty(), "{workload:?}");
        assert_eq!(read_whole(&plfs, &hidden), b"open elsewhere", "{workload:?}");
        let error = plfs.open("/.plfs-gone.made", OpenFlags::WRONLY.create(), 0o644, 7);
        assert_eq!(error.unwrap_err().kind(), ErrorKind::InvalidInput, "{workload:?}");
        plfs.unlink(&hidden).unwrap();
    }
}

/// Removes a container's access file on its canonical backend by hand.
fn damage_access(stores: &[SharedStore], plfs: &Plfs, path: &str, replacement: Option<&[u8]>) {
    let logical = StorePath::parse(path).unwrap();
    let backend = plfs.placement().canonical_backend(logical.file_name().unwrap());
    let access = ContainerPaths::new(logical).access();
    match replacement {
        Some(bytes) => stores[backend.0].replace(&access, bytes).unwrap(),
        None => stores[backend.0].remove_file(&access).unwrap(),
    }
}

/// rmdir took a container without its access file for an empty directory
/// and deleted every log (issue 18, item 4).
#[test]
fn a_container_that_lost_its_access_file_is_kept_reported_and_repaired() {
    let root = tempfile::tempdir().unwrap();
    let (stores, plfs) = posix_mount(root.path(), 3, Workload::SharedFile);
    let data: Vec<u8> = (0..524_672u32).map(|i| (i % 251) as u8).collect();
    for name in ["c", "hostdir.0", "meta"] {
        let path = format!("/{name}");
        write_whole(&plfs, &path, &data);
        plfs.chmod(&path, 0o640).unwrap();
        damage_access(&stores, &plfs, &path, None);
        let error = plfs.rmdir(&path).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Corrupt, "{error}");
        assert!(
            error.to_string().contains(&format!("{name} is a file whose container has lost its access file")),
            "{error}"
        );
        assert_eq!(plfs.stat(&path).unwrap_err().kind(), ErrorKind::Corrupt);
        assert_eq!(
            plfs.open(&path, OpenFlags::RDWR.create(), 0o644, 1).unwrap_err().kind(),
            ErrorKind::Corrupt
        );
        assert!(
            plfs.readdir("/").unwrap().contains(&DirEntryInfo { name: name.into(), kind: FileKind::File })
        );
        let report = plfs.recover(&path, false).unwrap();
        assert_eq!(report.findings.len(), 1, "{report:?}");
        assert_eq!(report.findings[0].problem, crate::tools::Problem::DamagedAccessFile);
        assert!(report.findings[0].detail.contains("is missing"), "{report:?}");
        let report = plfs.recover(&path, true).unwrap();
        assert_eq!(report.unfixed(), 0, "{report:?}");
        assert_eq!(read_whole(&plfs, &path), data, "{name}: every byte reads back after the fix");
        assert!(plfs.recover(&path, false).unwrap().findings.is_empty());
    }
    // A user's directory with a file called version is still a directory.
    plfs.mkdir("/d", 0o755).unwrap();
    write_whole(&plfs, "/d/version", b"v");
    assert_eq!(plfs.stat("/d").unwrap().kind, FileKind::Directory);
    plfs.unlink("/d/version").unwrap();
    plfs.rmdir("/d").unwrap();
}

/// One undecodable access file failed its directory's listing, and its
/// file could not be removed (issue 18, item 5).
#[test]
fn a_corrupt_access_file_spoils_only_its_own_file() {
    let root = tempfile::tempdir().unwrap();
    let (stores, plfs) = posix_mount(root.path(), 2, Workload::SharedFile);
    plfs.mkdir("/one", 0o755).unwrap();
    for name in ["a", "zbad", "z"] {
        write_whole(&plfs, &format!("/one/{name}"), name.as_bytes());
    }
    damage_access(&stores, &plfs, "/one/zbad", Some(b"PLFSACCS but not really an access record"));
    let listing = plfs.readdir("/one").unwrap();
    let names: Vec<&str> = listing.iter().map(|entry| entry.name.as_str()).collect();
    assert_eq!(names, ["a", "z", "zbad"]);
    assert!(listing.iter().all(|entry| entry.kind == FileKind::File));
    // The closed summary its last close left still answers a stat with the
    // record as it was (damage from outside plfs does not remove it);
    // without it the stat reads the access file and fails naming it.
    assert_eq!(plfs.stat("/one/zbad").unwrap().size, 4);
    let backend = plfs.placement().canonical_backend("zbad");
    let summary = ContainerPaths::new(StorePath::parse("one/zbad").unwrap()).closed_summary();
    stores[backend.0].remove_file(&summary).unwrap();
    let error = plfs.stat("/one/zbad").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Corrupt);
    assert!(error.to_string().contains("one/zbad/access"), "{error}");
    assert!(plfs.is_damaged_file("/one/zbad").unwrap());
    assert!(!plfs.is_damaged_file("/one/a").unwrap());
    let report = plfs.recover("/one/zbad", false).unwrap();
    assert_eq!(report.findings.len(), 1, "{report:?}");
    assert!(report.findings[0].detail.contains("does not decode"), "{report:?}");
    plfs.unlink("/one/zbad").unwrap();
    assert_eq!(plfs.readdir("/one").unwrap().len(), 2);
    assert_eq!(read_whole(&plfs, "/one/z"), b"z");
    for store in &stores {
        assert!(store.metadata(&StorePath::parse("one/zbad").unwrap()).is_err(), "{}", store.url());
    }
}

/// The n-n layout (`workload: file_per_proc`): plain files spread by name.
mod flat {
    use super::*;
    use crate::store::posix::PosixStore;

    fn flat_mount_over(stores: &[SharedStore], options: Options) -> Plfs {
        let backends = stores.iter().map(|s| (s.clone(), BackendRole::Any)).collect();
        Plfs::with_workload(backends, options, Workload::FilePerProc).unwrap()
    }

    fn posix_stores(root: &std::path::Path, count: usize) -> Vec<SharedStore> {
        (0..count)
            .map(|i| {
                let dir = root.join(format!("b{i}"));
                std::fs::create_dir_all(&dir).unwrap();
                Arc::new(PosixStore::new(dir.clone(), format!("posix://{}", dir.display())).unwrap())
                    as SharedStore
            })
            .collect()
    }

    fn write_file(plfs: &Plfs, path: &str, data: &[u8]) {
        let handle = plfs.open(path, OpenFlags::WRONLY.create(), 0o640, 0).unwrap();
        handle.write(data, 0).unwrap();
        handle.close().unwrap();
    }

    fn read_file(plfs: &Plfs, path: &str) -> Vec<u8> {
        let handle = plfs.open(path, OpenFlags::RDONLY, 0, 0).unwrap();
        let data = read_all(&handle);
        handle.close().unwrap();
        data
    }

    /// Which backends hold a plain file at `path`.
    fn holders(stores: &[SharedStore], path: &str) -> Vec<usize> {
        let logical = StorePath::parse(path).unwrap();
        (0..stores.len())
            .filter(|&i| stores[i].metadata(&logical).is_ok_and(|m| m.kind == EntryKind::File))
            .collect()
    }

    #[test]
    fn each_file_is_one_plain_file_on_its_hashed_backend() {
        let stores = memory_stores(4);
        let plfs = flat_mount_over(&stores, options(3));
        for i in 0..64 {
            let path = format!("/rank.{i}");
            write_file(&plfs, &path, format!("data {i}").as_bytes());
            let expected = plfs.placement().flat_file_backend(&format!("rank.{i}")).0;
            assert_eq!(holders(&stores, &path), vec![expected], "{path}");
            let raw = stores[expected].read_all(&StorePath::parse(&path).unwrap()).unwrap();
            assert_eq!(raw, format!("data {i}").as_bytes(), "no container: the bytes are the file");
        }
        let used: std::collections::BTreeSet<usize> =
            (0..64).map(|i| plfs.placement().flat_file_backend(&format!("rank.{i}")).0).collect();
        assert_eq!(used.len(), 4, "files spread over every backend");
        assert_eq!(plfs.readdir("/").unwrap().len(), 64);
        // Index-only tools answer clearly; query names the one file.
        assert_eq!(plfs.map("/rank.0").unwrap_err().kind(), ErrorKind::Unsupported);
        assert_eq!(plfs.flatten("/rank.0").unwrap_err().kind(), ErrorKind::Unsupported);
        assert_eq!(plfs.recover("/rank.0", false).unwrap_err().kind(), ErrorKind::Unsupported);
        assert_eq!(plfs.inventory("/rank.0").unwrap_err().kind(), ErrorKind::Unsupported);
        let pieces = plfs.query("/rank.0").unwrap();
        assert_eq!(pieces.len(), 1);
        assert_eq!((pieces[0].kind, pieces[0].bytes), (crate::tools::PieceKind::FlatFile, 6));
        assert_eq!(pieces[0].backend, stores[plfs.placement().flat_file_backend("rank.0").0].url());
    }

    #[test]
    fn stat_comes_from_the_backend_file() {
        let stores = memory_stores(3);
        let plfs = flat_mount_over(&stores, options(3));
        write_file(&plfs, "/f", b"0123456789");
        let attr = plfs.stat("/f").unwrap();
        assert_eq!((attr.kind, attr.size, attr.mode, attr.nlink), (FileKind::File, 10, 0o640, 1));
        let backend = plfs.placement().flat_file_backend("f").0;
        let raw = stores[backend].metadata(&StorePath::parse("/f").unwrap()).unwrap();
        assert_eq!((Some(attr.mtime), Some(attr.uid)), (raw.mtime, raw.uid));
        plfs.chmod("/f", 0o600).unwrap();
        let when = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        plfs.utime("/f", Some(when), Some(when)).unwrap();
        let attr = plfs.stat("/f").unwrap();
        assert_eq!((attr.mode, attr.mtime, attr.atime), (0o600, when, when));
        plfs.truncate("/f", 4).unwrap();
        assert_eq!(plfs.stat("/f").unwrap().size, 4);
        assert_eq!(read_file(&plfs, "/f"), b"0123");
        let who = Credentials { uid: 5, gid: 5, groups: vec![] };
        assert_eq!(plfs.access("/f", R_OK, &who).unwrap_err().kind(), ErrorKind::PermissionDenied);
        plfs.access("/f", 0, &who).unwrap();
        // Extended attributes of n-n files are refused clearly.
        assert_eq!(
            plfs.set_xattr("/f", "user.a", b"1", crate::xattr::XattrMode::Any).unwrap_err().kind(),
            ErrorKind::Unsupported
        );
        plfs.unlink("/f").unwrap();
        assert_eq!(plfs.stat("/f").unwrap_err().kind(), ErrorKind::NotFound);
        assert!(holders(&stores, "/f").is_empty());
    }

    #[test]
    fn open_flags_behave_as_posix() {
        let plfs = flat_mount_over(&memory_stores(2), options(3));
        assert_eq!(plfs.open("/missing", OpenFlags::RDONLY, 0, 0).unwrap_err().kind(), ErrorKind::NotFound);
        write_file(&plfs, "/f", b"abcdef");
        assert_eq!(
            plfs.open("/f", OpenFlags::WRONLY.create().exclusive(), 0o644, 0).unwrap_err().kind(),
            ErrorKind::AlreadyExists
        );
        let reader = plfs.open("/f", OpenFlags::RDONLY, 0, 0).unwrap();
        assert_eq!(reader.write(b"x", 0).unwrap_err().kind(), ErrorKind::BadHandle);
        let writer = plfs.open("/f", OpenFlags::WRONLY.truncate(), 0, 0).unwrap();
        assert_eq!(reader.size().unwrap(), 0, "a second handle sees the truncate at once");
        writer.write(b"xy", 4).unwrap();
        let mut buf = [9u8; 8];
        assert_eq!(reader.read(&mut buf, 0).unwrap(), 6);
        assert_eq!(&buf[..6], b"\0\0\0\0xy");
        writer.sync().unwrap();
        writer.close().unwrap();
        reader.close().unwrap();
        plfs.mkdir("/d", 0o755).unwrap();
        assert_eq!(plfs.open("/d", OpenFlags::RDONLY, 0, 0).unwrap_err().kind(), ErrorKind::IsADirectory);
        assert_eq!(
            plfs.open("/nodir/f", OpenFlags::WRONLY.create(), 0o644, 0).unwrap_err().kind(),
            ErrorKind::NotFound
        );
    }

    #[test]
    fn directories_are_mirrored_and_listings_merged() {
        let stores = memory_stores(3);
        let plfs = flat_mount_over(&stores, options(3));
        plfs.mkdir("/d", 0o750).unwrap();
        for store in &stores {
            assert_eq!(store.metadata(&StorePath::parse("/d").unwrap()).unwrap().kind, EntryKind::Directory);
        }
        assert_eq!(plfs.mkdir("/d", 0o750).unwrap_err().kind(), ErrorKind::AlreadyExists);
        for i in 0..20 {
            write_file(&plfs, &format!("/d/f{i}"), b"x");
        }
        plfs.mkdir("/d/sub", 0o755).unwrap();
        plfs.symlink("f1", "/d/link").unwrap();
        let entries = plfs.readdir("/d").unwrap();
        assert_eq!(entries.len(), 22, "each name once, however many backends hold the directory");
        let kinds: BTreeMap<String, FileKind> = entries.into_iter().map(|e| (e.name, e.kind)).collect();
        assert_eq!(
            (kinds["f3"], kinds["sub"], kinds["link"]),
            (FileKind::File, FileKind::Directory, FileKind::Symlink)
        );
        assert_eq!(plfs.readlink("/d/link").unwrap(), "f1");
        assert_eq!(plfs.stat("/d").unwrap().kind, FileKind::Directory);
        assert_eq!(plfs.rmdir("/d").unwrap_err().kind(), ErrorKind::DirectoryNotEmpty);
        // A directory rename moves no file between backends.
        plfs.rename("/d", "/e").unwrap();
        assert_eq!(read_file(&plfs, "/e/f7"), b"x");
        for i in 0..20 {
            plfs.unlink(&format!("/e/f{i}")).unwrap();
        }
        plfs.unlink("/e/link").unwrap();
        plfs.rmdir("/e/sub").unwrap();
        plfs.rmdir("/e").unwrap();
        for store in &stores {
            assert!(!store.exists(&StorePath::parse("/e").unwrap()).unwrap(), "{}", store.url());
        }
        assert!(plfs.readdir("/").unwrap().is_empty());
    }

    #[test]
    fn rename_moves_files_between_backends() {
        let stores = memory_stores(4);
        let plfs = flat_mount_over(&stores, options(3));
        let placement = plfs.placement().clone();
        let source = "a";
        let other = (0..100)
            .map(|i| format!("b{i}"))
            .find(|n| placement.flat_file_backend(n) != placement.flat_file_backend(source))
            .unwrap();
        let same = (0..100)
            .map(|i| format!("c{i}"))
            .find(|n| placement.flat_file_backend(n) == placement.flat_file_backend(source))
            .unwrap();
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        write_file(&plfs, "/a", &data);
        plfs.chmod("/a", 0o604).unwrap();
        // Across backends: content and mode kept, source gone, no debris.
        plfs.rename("/a", &format!("/{other}")).unwrap();
        assert_eq!(plfs.stat("/a").unwrap_err().kind(), ErrorKind::NotFound);
        assert_eq!(holders(&stores, "/a"), Vec::<usize>::new());
        assert_eq!(holders(&stores, &format!("/{other}")), vec![placement.flat_file_backend(&other).0]);
        assert!(read_file(&plfs, &format!("/{other}")) == data);
        assert_eq!(plfs.stat(&format!("/{other}")).unwrap().mode, 0o604);
        let names: Vec<String> = plfs.readdir("/").unwrap().into_iter().map(|e| e.name).collect();
        assert_eq!(names, vec![other.clone()]);
        for store in &stores {
            assert_eq!(
                store.list(&StorePath::root()).unwrap().len(),
                usize::from(*store.url() == *stores[placement.flat_file_backend(&other).0].url())
            );
        }
        // On one backend: a store rename. Over an existing file: replaced.
        write_file(&plfs, &format!("/{same}"), b"old");
        plfs.rename(&format!("/{other}"), "/a").unwrap();
        plfs.rename("/a", &format!("/{same}")).unwrap();
        assert!(read_file(&plfs, &format!("/{same}")) == data);
        assert_eq!(plfs.readdir("/").unwrap().len(), 1);
    }

    #[test]
    fn backends_without_random_writes_are_refused_by_name() {
        #[derive(Debug)]
        struct AppendOnly(MemoryStore);
        #[deny(clippy::missing_trait_methods)]
        impl Store for AppendOnly {
            fn url(&self) -> &str {
                self.0.url()
            }
            fn capabilities(&self) -> crate::store::Capabilities {
                crate::store::Capabilities { random_writes: false, ..self.0.capabilities() }
            }
            fn create_dir(&self, p: &StorePath, m: u32) -> Result<()> {
                self.0.create_dir(p, m)
            }
            fn create_dir_all(&self, p: &StorePath) -> Result<()> {
                self.0.create_dir_all(p)
            }
            fn list(&self, p: &StorePath) -> Result<Vec<crate::store::DirEntry>> {
                self.0.list(p)
            }
            fn metadata(&self, p: &StorePath) -> Result<crate::store::Metadata> {
                self.0.metadata(p)
            }
            fn remove_file(&self, p: &StorePath) -> Result<()> {
                self.0.remove_file(p)
            }
            fn remove_dir(&self, p: &StorePath) -> Result<()> {
                self.0.remove_dir(p)
            }
            fn rename(&self, f: &StorePath, t: &StorePath) -> Result<()> {
                self.0.rename(f, t)
            }
            fn local_path(&self, path: &StorePath) -> Option<std::path::PathBuf> {
                self.0.local_path(path)
            }
            fn exchange(&self, a: &StorePath, b: &StorePath) -> Result<()> {
                self.0.exchange(a, b)
            }
            fn create_new(&self, p: &StorePath, c: &[u8]) -> Result<()> {
                self.0.create_new(p, c)
            }
            fn sync_dir(&self, d: &StorePath) -> Result<()> {
                self.0.sync_dir(d)
            }

            fn sync_file(&self, p: &StorePath) -> Result<()> {
                self.0.sync_file(p)
            }
            fn replace(&self, p: &StorePath, c: &[u8]) -> Result<()> {
                self.0.replace(p, c)
            }
            fn create_new_deferred(&self, p: &StorePath, c: &[u8]) -> Result<()> {
                self.0.create_new_deferred(p, c)
            }
            fn settle(&self) -> Result<()> {
                self.0.settle()
            }
            fn protect(&self, p: &StorePath, r: &crate::store::Protection) -> Result<()> {
                self.0.protect(p, r)
            }
            fn create_dir_protected(&self, p: &StorePath, r: &crate::store::Protection) -> Result<()> {
                self.0.create_dir_protected(p, r)
            }
            fn create_append_protected(
                &self,
                p: &StorePath,
                r: &crate::store::Protection,
            ) -> Result<Box<dyn crate::store::AppendWriter>> {
                self.0.create_append_protected(p, r)
            }
            fn create_new_protected(
                &self,
                p: &StorePath,
                c: &[u8],
                r: &crate::store::Protection,
            ) -> Result<()> {
                self.0.create_new_protected(p, c, r)
            }
            fn create_new_deferred_protected(
                &self,
                p: &StorePath,
                c: &[u8],
                r: &crate::store::Protection,
            ) -> Result<()> {
                self.0.create_new_deferred_protected(p, c, r)
            }
            fn replace_protected(&self, p: &StorePath, c: &[u8], r: &crate::store::Protection) -> Result<()> {
                self.0.replace_protected(p, c, r)
            }
            fn fill_private_dir(&self, d: &StorePath, p: &[crate::store::NewPiece<'_>]) -> Result<()> {
                self.0.fill_private_dir(d, p)
            }
            fn read_small(&self, p: &StorePath) -> Result<Vec<u8>> {
                self.0.read_small(p)
            }
            fn read_head_below(&self, d: &StorePath, p: &StorePath, buf: &mut [u8]) -> Result<usize> {
                self.0.read_head_below(d, p, buf)
            }
            fn open_file_read(&self, p: &StorePath) -> Result<Box<dyn crate::store::ReadHandle>> {
                self.0.open_file_read(p)
            }
            fn create_append(&self, p: &StorePath) -> Result<Box<dyn crate::store::AppendWriter>> {
                self.0.create_append(p)
            }
            fn open_read(&self, p: &StorePath) -> Result<Box<dyn crate::store::ReadHandle>> {
                self.0.open_read(p)
            }
            fn open_write(
                &self,
                p: &StorePath,
                _: crate::store::WriteOpen,
            ) -> Result<Box<dyn crate::store::RandomWriter>> {
                Err(crate::store::unsupported_random_writes(self.url(), p))
            }
            fn set_mode(&self, p: &StorePath, m: u32) -> Result<()> {
                self.0.set_mode(p, m)
            }
            fn set_owner(&self, p: &StorePath, u: Option<u32>, g: Option<u32>) -> Result<()> {
                self.0.set_owner(p, u, g)
            }
            fn set_times(&self, p: &StorePath, a: Option<SystemTime>, m: Option<SystemTime>) -> Result<()> {
                self.0.set_times(p, a, m)
            }
            fn symlink(&self, t: &str, p: &StorePath) -> Result<()> {
                self.0.symlink(t, p)
            }
            fn read_link(&self, p: &StorePath) -> Result<String> {
                self.0.read_link(p)
            }
            fn space(&self) -> Result<SpaceInfo> {
                self.0.space()
            }
            fn filesystem_id(&self) -> Option<u64> {
                self.0.filesystem_id()
            }
        }
        let append_only: SharedStore = Arc::new(AppendOnly(MemoryStore::new("hdfs://nn:8020/plfs")));
        crate::store::conformance::random_writes(append_only.as_ref());
        let backends = vec![(memory_stores(1)[0].clone(), BackendRole::Any), (append_only, BackendRole::Any)];
        let error = Plfs::with_workload(backends.clone(), options(3), Workload::FilePerProc).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Unsupported);
        assert!(error.to_string().contains("hdfs://nn:8020/plfs"), "{error}");
        // The same backends serve containers, which only append.
        Plfs::with_workload(backends.clone(), options(3), Workload::SharedFile).unwrap();
        // And small files, which only append too.
        Plfs::with_workload(backends, options(3), Workload::SmallFile).unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// The container layout's byte-model test, on an n-n mount over real
        /// POSIX backends (sparse files hold the huge offsets).
        #[test]
        fn flat_file_matches_byte_model(ops in proptest::collection::vec(op(), 1..60), backends in 1usize..4) {
            let root = tempfile::tempdir().unwrap();
            let stores = posix_stores(root.path(), backends);
            check_model(&ops, &flat_mount_over(&stores, options(3)), &flat_mount_over(&stores, options(4)))?;
        }
    }
}

/// The 1-N layout (`workload: small_file`): files are names in their
/// directory's container (`smallfile::mount`).
mod small {
    use super::*;

    fn small_mount_over(stores: &[SharedStore], options: Options) -> Plfs {
        let backends = stores.iter().map(|s| (s.clone(), BackendRole::Any)).collect();
        Plfs::with_workload(backends, options, Workload::SmallFile).unwrap()
    }

    fn write_file(plfs: &Plfs, path: &str, data: &[u8]) {
        let handle = plfs.open(path, OpenFlags::WRONLY.create().truncate(), 0o644, 1).unwrap();
        handle.write(data, 0).unwrap();
        handle.close().unwrap();
    }

    fn contents(plfs: &Plfs, path: &str) -> Vec<u8> {
        let handle = plfs.open(path, OpenFlags::RDONLY, 0, 1).unwrap();
        let bytes = read_all(&handle);
        handle.close().unwrap();
        bytes
    }

    fn names(plfs: &Plfs, path: &str) -> Vec<(String, FileKind)> {
        plfs.readdir(path).unwrap().into_iter().map(|entry| (entry.name, entry.kind)).collect()
    }

    /// Backend files below every `.plfs-smallfile` directory container.
    fn container_files(stores: &[SharedStore], dir: &str) -> usize {
        let container = StorePath::parse(dir).unwrap().join(crate::layout::smallfile::CONTAINER_DIR).unwrap();
        stores.iter().map(|store| store.list(&container).map_or(0, |entries| entries.len())).sum()
    }

    #[test]
    fn readdir_stat_unlink_rename_through_plfs() {
        let stores = memory_stores(3);
        let plfs = small_mount_over(&stores, options(3));
        plfs.mkdir("/d", 0o755).unwrap();
        plfs.mkdir("/d/sub", 0o755).unwrap();
        plfs.mkdir("/e", 0o755).unwrap();
        write_file(&plfs, "/d/a", b"alpha");
        write_file(&plfs, "/d/b", b"bravo!");
        write_file(&plfs, "/top", b"at the root");
        plfs.symlink("a", "/d/link").unwrap();
        assert_eq!(
            names(&plfs, "/d"),
            vec![
                ("a".to_owned(), FileKind::File),
                ("b".to_owned(), FileKind::File),
                ("link".to_owned(), FileKind::Symlink),
                ("sub".to_owned(), FileKind::Directory),
            ]
        );
        assert!(names(&plfs, "/").contains(&("top".to_owned(), FileKind::File)));
        let attr = plfs.stat("/d/b").unwrap();
        assert_eq!(
            (attr.kind, attr.size, attr.mode, attr.uid, attr.nlink),
            (FileKind::File, 6, 0o644, 1000, 1)
        );
        assert_eq!(plfs.stat("/d/sub").unwrap().kind, FileKind::Directory);
        assert_eq!(plfs.stat("/d/missing").unwrap_err().kind(), ErrorKind::NotFound);
        assert_eq!(plfs.stat("/d/.plfs-smallfile").unwrap_err().kind(), ErrorKind::NotFound);
        // Names collide across files and directories.
        assert_eq!(plfs.mkdir("/d/a", 0o755).unwrap_err().kind(), ErrorKind::AlreadyExists);
        assert_eq!(
            plfs.open("/d/sub", OpenFlags::RDWR.create(), 0o644, 1).unwrap_err().kind(),
            ErrorKind::IsADirectory
        );
        let excl = plfs.open("/d/a", OpenFlags::WRONLY.create().exclusive(), 0o644, 1).unwrap_err();
        assert_eq!(excl.kind(), ErrorKind::AlreadyExists);
        assert_eq!(
            plfs.open("/nodir/f", OpenFlags::WRONLY.create(), 0o644, 1).unwrap_err().kind(),
            ErrorKind::NotFound
        );
        // Modes and owners are not kept: accepted, ignored.
        plfs.chmod("/d/a", 0o600).unwrap();
        plfs.chown("/d/a", Some(1), Some(2)).unwrap();
        assert_eq!(plfs.stat("/d/a").unwrap().mode, 0o644);
        let who = Credentials { uid: 1000, gid: 100, groups: vec![] };
        plfs.access("/d/a", R_OK | W_OK, &who).unwrap();
        assert_eq!(plfs.access("/d/a", X_OK, &who).unwrap_err().kind(), ErrorKind::PermissionDenied);
        let when = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_234_567);
        plfs.utime("/d/a", Some(when), Some(when)).unwrap();
        assert_eq!(plfs.stat("/d/a").unwrap().mtime, when);

        // Rename within the directory replaces the target.
        plfs.rename("/d/a", "/d/b").unwrap();
        assert_eq!(contents(&plfs, "/d/b"), b"alpha");
        assert_eq!(plfs.stat("/d/a").unwrap_err().kind(), ErrorKind::NotFound);
        // Across directories: copied, then unlinked; times kept.
        plfs.rename("/d/b", "/e/moved").unwrap();
        assert_eq!(contents(&plfs, "/e/moved"), b"alpha");
        assert_eq!(plfs.stat("/e/moved").unwrap().mtime, when);
        assert_eq!(plfs.stat("/d/b").unwrap_err().kind(), ErrorKind::NotFound);
        // A directory holding small files moves with them.
        plfs.rename("/e", "/f").unwrap();
        assert_eq!(contents(&plfs, "/f/moved"), b"alpha");
        write_file(&plfs, "/f/second", b"2");

        plfs.unlink("/d/link").unwrap();
        assert_eq!(plfs.rmdir("/f").unwrap_err().kind(), ErrorKind::DirectoryNotEmpty);
        plfs.unlink("/f/moved").unwrap();
        plfs.unlink("/f/second").unwrap();
        assert_eq!(plfs.unlink("/f/second").unwrap_err().kind(), ErrorKind::NotFound);
        plfs.rmdir("/f").unwrap();
        assert_eq!(plfs.stat("/f").unwrap_err().kind(), ErrorKind::NotFound);
        assert_eq!(names(&plfs, "/d"), vec![("sub".to_owned(), FileKind::Directory)]);
        plfs.truncate("/top", 2).unwrap();
        assert_eq!(contents(&plfs, "/top"), b"at");

        // Another process sees what is published, and only after its close.
        let other = small_mount_over(&stores, options(4));
        assert_eq!(contents(&other, "/top"), b"at");
        let handle = plfs.open("/d/late", OpenFlags::WRONLY.create().truncate(), 0o644, 1).unwrap();
        handle.write(b"pending", 0).unwrap();
        assert_eq!(other.open("/d/late", OpenFlags::RDONLY, 0, 1).unwrap_err().kind(), ErrorKind::NotFound);
        handle.close().unwrap();
        // Its open reloads the directory it had cached without the name.
        assert_eq!(contents(&other, "/d/late"), b"pending");
        // A change to a file it already knows shows after an invalidate.
        write_file(&plfs, "/d/late", b"newer");
        assert_eq!(contents(&other, "/d/late"), b"pending");
        other.invalidate_read_cache("/d").unwrap();
        assert_eq!(contents(&other, "/d/late"), b"newer");
        // flush_writes publishes without a close.
        let handle = plfs.open("/d/late", OpenFlags::WRONLY, 0, 2).unwrap();
        handle.write(b"N", 0).unwrap();
        plfs.flush_writes("/d").unwrap();
        other.invalidate_read_cache("/d").unwrap();
        assert_eq!(contents(&other, "/d/late"), b"Newer");
        handle.close().unwrap();
        assert_eq!(plfs.inventory("/d/late").unwrap_err().kind(), ErrorKind::Unsupported);
    }

    /// 16 writers create 1000 files each in one directory: every name and
    /// byte reads back, and the directory container holds 3 logs per
    /// writer, not a file per file.
    #[test]
    fn create_storm_in_one_directory() {
        const WRITERS: u64 = 16;
        const FILES: u64 = 1000;
        let stores = memory_stores(3);
        let plfs = small_mount_over(&stores, options(3));
        plfs.mkdir("/storm", 0o755).unwrap();
        let body =
            |writer: u64, file: u64| format!("writer {writer} file {file} ").repeat(1 + (file % 7) as usize);
        std::thread::scope(|scope| {
            for writer in 0..WRITERS {
                let plfs = plfs.clone();
                scope.spawn(move || {
                    for file in 0..FILES {
                        let path = format!("/storm/w{writer}.f{file}");
                        let handle =
                            plfs.open(&path, OpenFlags::WRONLY.create().truncate(), 0o644, writer).unwrap();
                        handle.write(body(writer, file).as_bytes(), 0).unwrap();
                        handle.close().unwrap();
                    }
                });
            }
        });
        assert_eq!(container_files(&stores, "/storm"), 3 * WRITERS as usize);
        let mut expected: Vec<String> =
            (0..WRITERS).flat_map(|w| (0..FILES).map(move |f| format!("w{w}.f{f}"))).collect();
        expected.sort();
        for reader in [plfs.clone(), small_mount_over(&stores, options(4))] {
            let listed: Vec<String> = reader.readdir("/storm").unwrap().into_iter().map(|e| e.name).collect();
            assert_eq!(listed, expected);
            for writer in 0..WRITERS {
                for file in 0..FILES {
                    let path = format!("/storm/w{writer}.f{file}");
                    assert_eq!(contents(&reader, &path), body(writer, file).as_bytes(), "{path}");
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// The container layout's byte-model test on a small-file mount. A
        /// handle reads its own writes (a read after a write publishes
        /// first); another mount ("process") sees the file after close.
        #[test]
        fn small_file_matches_byte_model(ops in proptest::collection::vec(op(), 1..60), backends in 1usize..4) {
            let stores = memory_stores(backends);
            check_model(&ops, &small_mount_over(&stores, options(3)), &small_mount_over(&stores, options(4)))?;
        }
    }
}

/// Threads of one process (as FUSE's request threads, or a program under
/// the preload) hold a file open for reading or rewriting while others
/// publish new files onto its name by rename and hide it as FUSE does an
/// unlinked open file. Every handle keeps the one file it opened: whole,
/// one stamp throughout, never the file that took its name, never an
/// error. (A read between a rename's switch of the storage and the moment
/// the handle learned its new path loaded the new file's index, or chased
/// logs that had moved: ENOENT on an open file.)
#[test]
fn open_handles_keep_their_file_while_other_threads_rename_over_it() {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    const WORDS: usize = 2048;
    const PUBLISHES: u64 = 120;
    let stamped = |stamp: u64| -> Vec<u8> { (0..WORDS).flat_map(|_| stamp.to_le_bytes()).collect() };
    // The stamp of a whole file, or what is wrong with it.
    let check = |bytes: &[u8]| -> std::result::Result<u64, String> {
        if bytes.len() != WORDS * 8 {
            return Err(format!("{} bytes", bytes.len()));
        }
        let first = &bytes[..8];
        match bytes.chunks(8).position(|word| word != first) {
            Some(word) => Err(format!("mixed at word {word}")),
            None => Ok(u64::from_le_bytes(first.try_into().unwrap())),
        }
    };
    let root = tempfile::tempdir().unwrap();
    let (_stores, plfs) = posix_mount(root.path(), 3, Workload::SharedFile);
    plfs.mkdir("/d", 0o755).unwrap();
    write_whole(&plfs, "/d/pub", &stamped(1));
    let done = AtomicBool::new(false);
    let hidden = AtomicU64::new(0);
    let (holds, failures) = (AtomicU64::new(0), Mutex::new(Vec::<String>::new()));
    let fail = |what: String| failures.lock().unwrap().push(what);
    // Reads the file through `handle` in four pieces, yielding between.
    let read_in_pieces = |handle: &FileHandle| -> Result<Vec<u8>> {
        let mut bytes = vec![0; WORDS * 8 + 8];
        let mut got = 0;
        for piece in 0..5 {
            let end = ((piece + 1) * WORDS * 2).min(bytes.len());
            got += handle.read(&mut bytes[got..end], got as u64)?;
            std::thread::yield_now();
        }
        bytes.truncate(got);
        Ok(bytes)
    };
    std::thread::scope(|scope| {
        let publishers: Vec<_> = (1..=2u64)
            .map(|publisher| {
                let (plfs, stamped, hidden, fail) = (&plfs, &stamped, &hidden, &fail);
                scope.spawn(move || {
                    let tmp = format!("/d/tmp.{publisher}");
                    for n in 0..PUBLISHES {
                        write_whole(plfs, &tmp, &stamped(publisher << 32 | n));
                        if let Err(error) = plfs.rename(&tmp, "/d/pub") {
                            fail(format!("rename {tmp}: {error}"));
                        }
                        if n % 4 == 3 {
                            // An unlink of the name while handles are open.
                            match plfs.hide("/d/pub", hidden.fetch_add(1, Ordering::Relaxed) << 8 | publisher)
                            {
                                Ok(_) => {}
                                Err(error) if error.kind() == ErrorKind::NotFound => {}
                                Err(error) => fail(format!("hide: {error}")),
                            }
                        }
                    }
                })
            })
            .collect();
        for reader in 0..3 {
            let (plfs, done, holds, fail, check, read_in_pieces) =
                (&plfs, &done, &holds, &fail, &check, &read_in_pieces);
            scope.spawn(move || {
                while !done.load(Ordering::Acquire) {
                    let handle = match plfs.open("/d/pub", OpenFlags::RDONLY, 0, 100 + reader) {
                        Ok(handle) => handle,
                        Err(error) if error.kind() == ErrorKind::NotFound => continue,
                        Err(error) => return fail(format!("open: {error}")),
                    };
                    holds.fetch_add(1, Ordering::Relaxed);
                    match read_in_pieces(&handle).map(|bytes| check(&bytes)) {
                        Ok(Ok(_)) => {}
                        Ok(Err(wrong)) => fail(format!("reader {reader}: {wrong}")),
                        Err(error) => fail(format!("reader {reader}: {error}")),
                    }
                    if let Err(error) = handle.close() {
                        fail(format!("reader {reader}: close: {error}"));
                    }
                }
            });
        }
        // Writes each open file's own stamp back over it in two halves:
        // the bytes never change, so readers still see one stamp, unless a
        // half lands in another file.
        let (plfs_ref, done_ref, check_ref) = (&plfs, &done, &check);
        let read_in_pieces_ref = &read_in_pieces;
        let fail_ref = &fail;
        scope.spawn(move || {
            while !done_ref.load(Ordering::Acquire) {
                let handle = match plfs_ref.open("/d/pub", OpenFlags::RDWR, 0, 200) {
                    Ok(handle) => handle,
                    Err(error) if error.kind() == ErrorKind::NotFound => continue,
                    Err(error) => return fail_ref(format!("open rw: {error}")),
                };
                let rewritten = read_in_pieces_ref(&handle).and_then(|bytes| {
                    let Ok(stamp) = check_ref(&bytes) else { return Ok(Err(bytes)) };
                    let half = WORDS * 4;
                    handle.write(&bytes[..half], 0)?;
                    std::thread::yield_now();
                    handle.write(&bytes[half..], half as u64)?;
                    let again = read_in_pieces_ref(&handle)?;
                    Ok(match check_ref(&again) {
                        Ok(same) if same == stamp => Ok(()),
                        _ => Err(again),
                    })
                });
                match rewritten {
                    Ok(Ok(())) => {}
                    Ok(Err(bytes)) => fail_ref(format!("rewriter: {:?}", check_ref(&bytes))),
                    Err(error) => fail_ref(format!("rewriter: {error}")),
                }
                if let Err(error) = handle.close() {
                    fail_ref(format!("rewriter: close: {error}"));
                }
            }
        });
        for publisher in publishers {
            publisher.join().unwrap();
        }
        done.store(true, Ordering::Release);
    });
    let failures = failures.into_inner().unwrap();
    eprintln!("{} holds, {} failures", holds.load(Ordering::Relaxed), failures.len());
    assert_eq!(failures, Vec::<String>::new());
    assert!(holds.load(Ordering::Relaxed) > 0, "no reader ever opened the file");
    // What is at the name last is one whole published file.
    if plfs.stat("/d/pub").is_ok() {
        check(&read_whole(&plfs, "/d/pub")).unwrap();
    }
}

/// A directory renamed while files below it are open here: their handles
/// follow the files to the new path, so reads, writes, stat and the last
/// close (its size records) reach the renamed files. (The handles of open
/// containers kept the old path: a read after the rename found nothing; a
/// small-file handle, which names its directory itself, failed with
/// NotFound until it learnt of moves at its next call.)
#[test]
fn open_handles_follow_their_file_when_its_directory_is_renamed() {
    for workload in [Workload::SharedFile, Workload::FilePerProc, Workload::SmallFile] {
        let root = tempfile::tempdir().unwrap();
        let (_stores, plfs) = posix_mount(root.path(), 3, workload);
        plfs.mkdir("/d", 0o755).unwrap();
        plfs.mkdir("/d/sub", 0o755).unwrap();
        let handle = plfs.open("/d/sub/f", OpenFlags::RDWR.create(), 0o644, 1).unwrap();
        handle.write(b"before ", 0).unwrap();
        handle.flush().unwrap();
        plfs.rename("/d", "/e").unwrap();
        handle
            .write(b"after", 7)
            .unwrap_or_else(|error| panic!("{workload:?}: write after the rename: {error}"));
        let mut buf = [0u8; 32];
        let count = handle
            .read(&mut buf, 0)
            .unwrap_or_else(|error| panic!("{workload:?}: read after the rename: {error}"));
        assert_eq!(&buf[..count], b"before after", "{workload:?}");
        assert_eq!(plfs.stat("/e/sub/f").unwrap().size, 12, "{workload:?}");
        handle.close().unwrap_or_else(|error| panic!("{workload:?}: close after the rename: {error}"));
        assert_eq!(read_whole(&plfs, "/e/sub/f"), b"before after", "{workload:?}");
        assert_eq!(plfs.stat("/d").unwrap_err().kind(), ErrorKind::NotFound, "{workload:?}");
    }
}

/// A reader whose load read a writer's index log just before that writer
/// closed (its frame appended and its size record published after the
/// read) takes the file as it was then, not as damaged. Before, meta/ was
/// read after the index logs, so the new size record counted bytes the
/// index log read a moment earlier did not hold: "index records were
/// lost", EIO for a reader racing a writer's close (four preloaded
/// processes updating one counter met it within 50 rounds each). The
/// writer closes after each of the reader's index reads in turn.
#[test]
fn a_writer_closing_during_a_readers_load_is_not_taken_for_damage() {
    use crate::store::hooked::{HookedStore, Hooks};
    use std::sync::Mutex;

    /// Closes `writer` right after the `after`-th watched read.
    struct CloseAfterIndexRead {
        writer: Mutex<Option<FileHandle>>,
        after: Mutex<usize>,
    }
    impl Hooks for CloseAfterIndexRead {
        fn watches_reads(&self, path: &StorePath) -> bool {
            path.to_string().contains("/index.")
        }
        fn read(&self, read: &mut dyn FnMut() -> Result<usize>) -> Result<usize> {
            let count = read()?;
            let due = {
                let mut after = self.after.lock().unwrap();
                *after = after.saturating_sub(1);
                *after == 0
            };
            let writer = if due { self.writer.lock().unwrap().take() } else { None };
            if let Some(writer) = writer {
                writer.close().unwrap();
            }
            Ok(count)
        }
    }
    let inner: SharedStore = Arc::new(MemoryStore::new("mem://b0"));
    let hooks = Arc::new(CloseAfterIndexRead { writer: Mutex::new(None), after: Mutex::new(0) });
    let stores: Vec<SharedStore> = vec![Arc::new(HookedStore { inner, hooks: hooks.clone() })];
    let writing = mount_over(&stores, options(1));
    for after in 1..=4 {
        let reading = mount_over(&stores, options(10 + after as u32));
        let path = format!("/f{after}");
        let writer = writing.open(&path, OpenFlags::WRONLY.create(), 0o644, 1).unwrap();
        writer.write(&[7u8; 16], 0).unwrap();
        *hooks.writer.lock().unwrap() = Some(writer);
        *hooks.after.lock().unwrap() = after;

        let handle = reading.open(&path, OpenFlags::RDONLY, 0, 2).unwrap();
        let bytes = read_all(&handle);
        assert!(bytes.is_empty() || bytes == [7u8; 16], "closed after read {after}: {} bytes", bytes.len());
        handle.close().unwrap();
        if let Some(writer) = hooks.writer.lock().unwrap().take() {
            writer.close().unwrap();
        }
        let again = reading.open(&path, OpenFlags::RDONLY, 0, 2).unwrap();
        assert_eq!(read_all(&again), [7u8; 16], "the next open sees the closed writer's bytes");
    }
}

/// Store hooks that let another process act once between two steps of this
/// one: right after a metadata call on `path`, a removal, a rename or the
/// making of it (the first such call that `skip` earlier ones do not
/// reach).
struct ActOnce {
    path: &'static str,
    armed: std::sync::Mutex<Option<Armed>>,
}

/// The store call on the watched path that the action follows.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    Metadata,
    Rename,
    CreateDir,
}

struct Armed {
    step: Step,
    skip: usize,
    action: Box<dyn FnOnce() + Send>,
}

impl ActOnce {
    fn on(path: &'static str) -> Arc<ActOnce> {
        Arc::new(ActOnce { path, armed: std::sync::Mutex::new(None) })
    }

    /// `inner`, each behind these hooks.
    fn wrap(self: &Arc<Self>, inner: &[SharedStore]) -> Vec<SharedStore> {
        use crate::store::hooked::HookedStore;
        inner
            .iter()
            .map(|inner| Arc::new(HookedStore { inner: inner.clone(), hooks: self.clone() }) as SharedStore)
            .collect()
    }

    fn arm(&self, step: Step, skip: usize, action: Box<dyn FnOnce() + Send>) {
        *self.armed.lock().unwrap() = Some(Armed { step, skip, action });
    }

    /// Whether the armed action ran; disarms it.
    fn ran(&self) -> bool {
        self.armed.lock().unwrap().take().is_none()
    }

    fn fire(&self, path: &StorePath, step: Step) {
        if path.to_string() != self.path {
            return;
        }
        let action = {
            let mut armed = self.armed.lock().unwrap();
            match armed.as_mut() {
                Some(due) if due.step == step && due.skip > 0 => {
                    due.skip -= 1;
                    None
                }
                Some(due) if due.step == step => armed.take().map(|due| due.action),
                _ => None,
            }
        };
        if let Some(action) = action {
            action();
        }
    }
}

impl crate::store::hooked::Hooks for ActOnce {
    fn after_metadata(&self, path: &StorePath) {
        self.fire(path, Step::Metadata);
    }
    fn after_rename(&self, from: &StorePath) {
        self.fire(from, Step::Rename);
    }
    fn after_create_dir(&self, path: &StorePath) {
        self.fire(path, Step::CreateDir);
    }
}

/// A lookup reads a container's directory entry, then its access file. A
/// file unlinked or renamed away by another process between the two
/// looked like a logical directory that had no access file: the churn test
/// met it through FUSE, whose kernel then failed an open(2) of a published
/// name with EIO. Another process now acts right after each metadata call
/// on the name; a lookup answers with the state before or after, never a
/// directory.
#[test]
fn a_file_removed_or_replaced_during_a_lookup_is_never_a_directory() {
    let inner = memory_stores(3);
    let hooks = ActOnce::on("f");
    let stores = hooks.wrap(&inner);
    let looking = mount_over(&stores, options(1));
    let other = Arc::new(mount_over(&inner, options(2)));
    // A closed file's stat reads its closed summary and no more; one still
    // open for writing (no summary) is looked up.
    let writing = Mutex::new(Vec::new());
    let write = |path: &str, byte: u8, keep_open: bool| {
        let handle = other.open(path, OpenFlags::WRONLY.create().truncate(), 0o644, 2).unwrap();
        handle.write(&[byte; 64], 0).unwrap();
        if keep_open {
            writing.lock().unwrap().push(handle);
        } else {
            handle.close().unwrap();
        }
    };
    let arm = |skip: usize, action: Box<dyn FnOnce() + Send>| hooks.arm(Step::Metadata, skip, action);
    let ran = || hooks.ran();
    type Look = fn(&Plfs) -> Result<FileKind>;
    let looks: [(&str, Look); 2] = [
        ("stat", |plfs| plfs.stat("/f").map(|attr| attr.kind)),
        ("open", |plfs| {
            plfs.open("/f", OpenFlags::RDONLY, 0, 1).map(|handle| {
                handle.close().unwrap();
                FileKind::File
            })
        }),
    ];
    let mut acted = 0;
    for ((what, look), keep_open) in looks.into_iter().flat_map(|look| [(look, false), (look, true)]) {
        for skip in 0..4 {
            let what = format!("{what} (after metadata call {}, kept open: {keep_open})", skip + 1);
            let write = |path: &str, byte: u8| write(path, byte, keep_open);
            for handle in writing.lock().unwrap().drain(..) {
                handle.close().unwrap();
            }
            write("/f", 1);
            let remover = other.clone();
            arm(skip, Box::new(move || remover.unlink("/f").unwrap()));
            let result = look(&looking);
            if !ran() {
                assert_eq!(result.unwrap(), FileKind::File, "{what}");
                other.unlink("/f").unwrap();
                continue;
            }
            acted += 1;
            let error = result.expect_err(&format!("{what} of a file unlinked during it"));
            assert_eq!(error.kind(), ErrorKind::NotFound, "{what}: {error}");

            write("/f", 1);
            write("/g", 2);
            let renamer = other.clone();
            arm(skip, Box::new(move || renamer.rename("/g", "/f").unwrap()));
            assert_eq!(look(&looking).unwrap(), FileKind::File, "{what} of a file replaced during it");
            assert!(ran(), "{what}");

            let renamer = other.clone();
            arm(skip, Box::new(move || renamer.rename("/f", "/h").unwrap()));
            let error = look(&looking).expect_err(&format!("{what} of a file renamed away during it"));
            assert_eq!(error.kind(), ErrorKind::NotFound, "{what}: {error}");
            assert!(ran(), "{what}");
            other.unlink("/h").unwrap();
        }
    }
    for handle in writing.lock().unwrap().drain(..) {
        handle.close().unwrap();
    }
    assert!(acted >= 4, "the other process acted during {acted} lookups");
}

/// A reader in one process opens a file, another process unlinks it (or
/// renames it away), the reader reads: as on a local file system, the
/// reader's descriptor keeps the bytes. n-n and small_file always did. A
/// shared_file reader loaded its index at its first read, after the unlink's
/// background worker had deleted the logs: first it read 0 bytes of a 4 KiB
/// file, silently (three processes opening a name two others publish and
/// unlink, through the preload: one read in twenty), then, once that was
/// found, it failed with ESTALE. An open for reading now loads the index
/// and opens the data logs, and a reader that looks again (a read at the end
/// of the file, a refresh) keeps what it loaded when the file is gone.
#[test]
fn a_read_after_another_process_removed_the_file_keeps_its_bytes() {
    for workload in [Workload::SharedFile, Workload::FilePerProc, Workload::SmallFile] {
        for renamed in [false, true] {
            let what = format!("{workload:?}, renamed away: {renamed}");
            let root = tempfile::tempdir().unwrap();
            let (removing, reading) = two_processes_on_disk(root.path(), workload);
            write_whole(&removing, "/f", &[b'x'; 4096]);
            let handle = reading.open("/f", OpenFlags::RDONLY, 0, 2).unwrap();
            if renamed {
                removing.rename("/f", "/g").unwrap();
                removing.unlink("/g").unwrap();
            } else {
                removing.unlink("/f").unwrap();
            }
            removing.finish_removals();
            let mut buf = vec![0u8; 8192];
            assert_eq!(handle.read(&mut buf, 0).unwrap(), 4096, "{what}");
            assert!(buf[..4096].iter().all(|byte| *byte == b'x'), "{what}");
            assert_eq!(handle.size().unwrap(), 4096, "{what}");
            // (A small-file handle that drops its directory's view no
            // longer has the removed file's bytes: ESTALE, not yet as a
            // local file system.)
            if workload != Workload::SmallFile {
                handle.refresh().unwrap();
                assert_eq!(handle.read(&mut buf, 0).unwrap(), 4096, "{what}: after a refresh");
                assert_eq!(handle.size().unwrap(), 4096, "{what}: after a refresh");
            }
            handle.close().unwrap();
        }
    }
}

/// Two mounts of `workload` ("processes" 1 and 2) over two POSIX backends
/// in `root`.
fn two_processes_on_disk(root: &std::path::Path, workload: Workload) -> (Plfs, Plfs) {
    let (stores, first) = posix_mount(root, 2, workload);
    let backends = stores.iter().map(|s| (s.clone(), BackendRole::Any)).collect();
    (first, Plfs::with_workload(backends, options(2), workload).unwrap())
}

/// A process holds a file open while another renames it away and puts a
/// new file at its name, or removes it and puts a new one there. After a
/// refresh (a lock) the holder reads its own file, as on a local file
/// system: shared_file keeps what it loaded, small_file reads the file
/// where it went, or as it was when removed; never the new file's bytes.
/// Before, shared_file and small_file handles read whatever file was at
/// the name once they looked again: the new file, silently; then a
/// small_file handle read ESTALE once its file was removed.
#[test]
fn a_descriptor_keeps_its_file_when_another_process_reuses_the_name() {
    for workload in [Workload::SharedFile, Workload::FilePerProc, Workload::SmallFile] {
        for removed in [false, true] {
            let what = format!("{workload:?}, removed: {removed}");
            let root = tempfile::tempdir().unwrap();
            let (other, holding) = two_processes_on_disk(root.path(), workload);
            write_whole(&other, "/f", &[b'x'; 4096]);
            let handle = holding.open("/f", OpenFlags::RDONLY, 0, 2).unwrap();
            if removed {
                other.unlink("/f").unwrap();
                other.finish_removals();
            } else {
                other.rename("/f", "/g").unwrap();
            }
            write_whole(&other, "/f", &[b'y'; 2048]);
            handle.refresh().unwrap();
            let mut buf = vec![0u8; 8192];
            let count = handle.read(&mut buf, 0).unwrap_or_else(|error| panic!("{what}: {error}"));
            assert_eq!(count, 4096, "{what}");
            assert!(buf[..count].iter().all(|byte| *byte == b'x'), "{what}");
            assert_eq!(handle.size().unwrap(), 4096, "{what}");
            handle.close().unwrap();
        }
    }
}

/// A small_file handle open for writing whose file another process
/// removed reads ESTALE, not the file as it was: its later writes may land
/// in another file than that snapshot (an O_TRUNC create over a name its
/// process's view still held), so the snapshot could silently lack them.
#[test]
fn a_small_file_writer_whose_file_another_process_removed_reads_estale() {
    let root = tempfile::tempdir().unwrap();
    let (other, holding) = two_processes_on_disk(root.path(), Workload::SmallFile);
    write_whole(&other, "/f", &[b'x'; 4096]);
    let handle = holding.open("/f", OpenFlags::RDWR, 0, 2).unwrap();
    other.unlink("/f").unwrap();
    handle.refresh().unwrap();
    let mut buf = vec![0u8; 8192];
    let error = handle.read(&mut buf, 0).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Stale, "{error}");
    handle.close().unwrap();
}

/// A reader that read a file to its end while another process published a
/// new version at its name by rename (write a temporary file, rename it
/// onto the name) reads the end of its own file a second later, and its
/// bytes after its process saw the new version. Before, its look at the
/// store for appends found the new file, and a shared_file reader read the
/// new version's bytes past its own end; a small_file one failed, at the
/// end and then inside the file (ESTALE).
#[test]
fn a_reader_at_the_end_of_a_file_republished_by_rename_stays_at_its_end() {
    use crate::clock::{LOOK_AGAIN_AFTER, saturating_ns};
    for workload in [Workload::SharedFile, Workload::FilePerProc, Workload::SmallFile] {
        let (clock, process) = processes(workload);
        let (publisher, reader) = (process(3), process(4));
        write_whole(&publisher, "/latest", &[b'x'; 4096]);
        let handle = reader.open("/latest", OpenFlags::RDONLY, 0, 4).unwrap();
        let mut buf = vec![0u8; 8192];
        assert_eq!(handle.read(&mut buf, 0).unwrap(), 4096, "{workload:?}");
        write_whole(&publisher, "/next", &[b'y'; 8192]);
        publisher.rename("/next", "/latest").unwrap();
        clock.advance(saturating_ns(LOOK_AGAIN_AFTER));
        assert_eq!(handle.read(&mut buf, 4096).unwrap(), 0, "{workload:?}");
        assert_eq!(handle.size().unwrap(), 4096, "{workload:?}");
        // Inside its file too, after its process looked at the directory
        // again: the old version's bytes (small_file read ESTALE before).
        clock.advance(saturating_ns(LOOK_AGAIN_AFTER));
        assert_eq!(
            reader.stat("/latest").unwrap().size,
            8192,
            "{workload:?}: the reader's process sees the new one"
        );
        assert_eq!(handle.read(&mut buf, 1000).unwrap(), 3096, "{workload:?}");
        assert!(buf[..3096].iter().all(|&byte| byte == b'x'), "{workload:?}: the old version's bytes");
        let again = reader.open("/latest", OpenFlags::RDONLY, 0, 4).unwrap();
        assert_eq!(read_all(&again), vec![b'y'; 8192], "{workload:?}: a new open reads the new file");
    }
}

/// Two processes publishing one name by rename (write a temporary file,
/// rename it onto the name), where files are not containers (n-n,
/// small_file), failed with ENOENT when the other removed the target
/// between the rename's look at it and its move, and with EEXIST when the
/// other's rename landed there first. Another process acts right after the
/// rename's first look at the target; the rename replaces whatever is
/// there, as rename(2) does. (n-n and small_file renames within a
/// directory no longer remove the target first, so nothing can act
/// between a removal and the move.)
#[test]
fn a_rename_onto_a_name_another_process_publishes_replaces_it() {
    for workload in [Workload::FilePerProc, Workload::SmallFile, Workload::SharedFile] {
        let root = tempfile::tempdir().unwrap();
        let (inner, _) = posix_mount(root.path(), 2, workload);
        // Real clocks: small_file orders the two renames by their stamps.
        let real_clock =
            |pid| Options { stamper: Stamper::new(Arc::new(crate::clock::SystemClock)), ..options(pid) };
        let plain = inner.iter().map(|store| (store.clone(), BackendRole::Any)).collect();
        let other = Arc::new(Plfs::with_workload(plain, real_clock(1), workload).unwrap());
        let hooks = ActOnce::on("d/pub");
        let backends = hooks.wrap(&inner).into_iter().map(|store| (store, BackendRole::Any)).collect();
        let renaming = Plfs::with_workload(backends, real_clock(2), workload).unwrap();
        renaming.mkdir("/d", 0o755).unwrap();
        // The other process removes the target, or publishes its own file
        // there (its rename lands before ours), after our first look at
        // the target or after our removal of it.
        let publish: fn(&Plfs) = |plfs| {
            write_whole(plfs, "/d/theirs", b"theirs");
            plfs.rename("/d/theirs", "/d/pub").unwrap();
        };
        type Act = fn(&Plfs);
        let actions: [(&str, Step, Act); 2] = [
            ("removed", Step::Metadata, |plfs| plfs.unlink("/d/pub").unwrap()),
            ("replaced", Step::Metadata, publish),
        ];
        for (what, step, action) in actions {
            write_whole(&other, "/d/pub", b"old");
            write_whole(&renaming, "/d/mine", b"mine");
            let acting = other.clone();
            hooks.arm(step, 0, Box::new(move || action(&acting)));
            renaming
                .rename("/d/mine", "/d/pub")
                .unwrap_or_else(|error| panic!("{workload:?}, {what}: {error}"));
            assert!(hooks.ran(), "{workload:?}, {what}: the other process acted");
            // A third process reads it (a small-file view caches).
            let plain = inner.iter().map(|store| (store.clone(), BackendRole::Any)).collect();
            let reading = Plfs::with_workload(plain, real_clock(3), workload).unwrap();
            assert_eq!(read_whole(&reading, "/d/pub"), b"mine", "{workload:?}, {what}");
        }
    }
}

/// A shared_file unlink takes the container out of the namespace with one
/// rename on its canonical backend and then takes its shadow containers on
/// the other backends away whole. A file another process put at the name in
/// between (published by rename, or made by open) had its logs in those
/// shadows already: the unlink deleted them with the removed file's, and
/// the new file read as 0 bytes, silently (found through the preload: two
/// processes publishing and unlinking one name over two backends). Such
/// logs now return to the name. Another process acts right after the
/// unlink's first rename; its file keeps every byte, and an unlink leaves
/// nothing at the name on any backend.
#[test]
fn a_file_put_at_a_name_while_another_process_unlinks_it_keeps_its_bytes() {
    let inner = memory_stores(3);
    let (host, temporary) = logs_off_canonical(&inner);
    let no_reclaim_worker = |pid| on_host_without_reclaim_worker(&host, pid);
    let path = "/f".to_owned();
    let hooks = ActOnce::on("f");
    let unlinking = mount_over(&hooks.wrap(&inner), no_reclaim_worker(2));
    let other = Arc::new(mount_over(&inner, no_reclaim_worker(3)));
    type Act = fn(&Plfs, &str, &str);
    let actions: [(&str, Act); 2] = [
        ("published by rename", |plfs, path, temporary| {
            write_whole(plfs, temporary, &[2; 4096]);
            plfs.rename(temporary, path).unwrap();
        }),
        ("made by open", |plfs, path, _| write_whole(plfs, path, &[2; 4096])),
    ];
    for (what, action) in actions {
        write_whole(&other, &path, &[1; 4096]);
        let (acting, target) = (other.clone(), path.clone());
        hooks.arm(Step::Rename, 0, Box::new(move || action(&acting, &target, temporary)));
        unlinking.unlink(&path).unwrap();
        assert!(hooks.ran(), "{what}: the other process acted");
        let reading = mount_over(&inner, no_reclaim_worker(4));
        assert_eq!(read_whole(&reading, &path), vec![2; 4096], "{what}");
        unlinking.unlink(&path).unwrap();
        for store in &inner {
            let left = store.list(&StorePath::default()).unwrap();
            assert!(left.is_empty(), "{what}: {}: left {:?}", store.url(), left);
        }
    }
}

/// An unlink killed between taking a shadow container along and moving
/// back what was not the removed file's leaves the logs of the file another
/// process had just put at the name among the removed file's pieces. `plfs
/// recover` of the directory deleted those pieces, and that file read as 0
/// bytes; it now returns the logs first. The kill is a panic right after
/// the unlink renamed the shadow.
#[test]
fn recover_after_an_unlink_killed_midway_keeps_the_file_put_at_its_name() {
    let inner = memory_stores(3);
    let (host, _) = logs_off_canonical(&inner);
    let no_reclaim_worker = |pid| on_host_without_reclaim_worker(&host, pid);
    let hooks = ActOnce::on("f");
    let unlinking = mount_over(&hooks.wrap(&inner), no_reclaim_worker(2));
    let other = Arc::new(mount_over(&inner, no_reclaim_worker(3)));
    write_whole(&other, "/f", &[1; 4096]);
    let (acting, again) = (other.clone(), hooks.clone());
    hooks.arm(
        Step::Rename,
        0,
        Box::new(move || {
            write_whole(&acting, "/f", &[2; 4096]);
            again.arm(Step::Rename, 0, Box::new(|| panic!("killed right after taking a shadow along")));
        }),
    );
    let killed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unlinking.unlink("/f")));
    assert!(killed.is_err() && hooks.ran(), "the unlink was killed after its shadow rename");
    let reading = mount_over(&inner, no_reclaim_worker(4));
    let report = reading.recover("/f", false).unwrap();
    assert!(
        report.findings.iter().any(|finding| finding.detail.contains("returned to it")),
        "{:?}",
        report.findings
    );
    assert_eq!(read_whole(&reading, "/f"), vec![2; 4096]);
    for store in &inner {
        let left = store.list(&StorePath::default()).unwrap();
        assert!(left.iter().all(|entry| entry.name == "f"), "{}: left {:?}", store.url(), left);
    }
}

/// `plfs recover` may run while an unlink is under way, and delete the
/// removed file's canonical container before the unlink reads which logs
/// are the removed file's. The unlink then took every log in the shadows
/// for another file's and moved them all back to the name: the removed
/// file's logs stayed in the container of the file another process had put
/// there meanwhile (its readers skip them, recover reports them as foreign,
/// they are never deleted). With the removed file's records gone, only
/// the logs the file at the name names go back now.
#[test]
fn an_unlink_whose_removed_records_recover_deleted_returns_only_the_new_files_logs() {
    let inner = memory_stores(3);
    let (host, _) = logs_off_canonical(&inner);
    let no_reclaim_worker = |pid| on_host_without_reclaim_worker(&host, pid);
    let hooks = ActOnce::on("f");
    let unlinking = mount_over(&hooks.wrap(&inner), no_reclaim_worker(2));
    let other = Arc::new(mount_over(&inner, no_reclaim_worker(3)));
    write_whole(&other, "/f", &[1; 8192]);
    let acting = other.clone();
    hooks.arm(
        Step::Rename,
        0,
        Box::new(move || {
            write_whole(&acting, "/f", &[2; 4096]);
            acting.recover("/f", false).unwrap();
        }),
    );
    unlinking.unlink("/f").unwrap();
    assert!(hooks.ran());
    let reading = mount_over(&inner, no_reclaim_worker(4));
    assert_eq!(read_whole(&reading, "/f"), vec![2; 4096]);
    let findings = reading.recover("/f", false).unwrap().findings;
    assert!(findings.is_empty(), "{findings:?}");
}

/// Over `inner`: a host whose logs of `/f` lie off the canonical backend of
/// `f` (in a shadow container), and a name whose logs of that host do too.
fn logs_off_canonical(inner: &[SharedStore]) -> (String, &'static str) {
    let probe = mount_over(inner, options(1));
    let placement = probe.placement();
    let off = |name: &str, host: &str| {
        placement.hostdir_backend(name, placement.hostdir(host)) != placement.canonical_backend("f")
    };
    let host = (0..64).map(|i| format!("node{i}")).find(|host| off("f", host)).unwrap();
    let temporary = (0..).map(|i| format!("/t{i}")).find(|name| off(&name[1..], &host)).unwrap();
    (host, Box::leak(temporary.into_boxed_str()))
}

/// A process on `host` whose removals delete their pieces before they
/// return (no background worker), so a test sees what they deleted.
fn on_host_without_reclaim_worker(host: &str, pid: u32) -> Options {
    let options = options(pid);
    Options {
        hostname: host.to_owned(),
        tuning: Tuning { background_reclaim: false, ..options.tuning },
        ..options
    }
}

/// The shadow hostdir at `/f` that writers on `host` use, as a store path.
fn shadow_hostdir_of_f(plfs: &Plfs, host: &str) -> &'static str {
    let hostdir = ContainerPaths::new(StorePath::parse("f").unwrap()).hostdir(plfs.placement().hostdir(host));
    Box::leak(hostdir.to_string().into_boxed_str())
}

/// A rename moves the new file's logs into the target's shadow hostdirs,
/// making each hostdir first. Another process's unlink of the file at the
/// target can take that hostdir away right after it was made (an unlink
/// takes the shadows at the name along): the log's move failed with "not
/// found", which passed for a log moved already, and the renamed file lost
/// it. The move now makes the hostdir again.
#[test]
fn a_rename_onto_a_name_another_process_unlinks_keeps_every_log() {
    let inner = memory_stores(3);
    let (host, temporary) = logs_off_canonical(&inner);
    let other = Arc::new(mount_over(&inner, on_host_without_reclaim_worker(&host, 1)));
    let hooks = ActOnce::on(shadow_hostdir_of_f(&other, &host));
    let renaming = mount_over(&hooks.wrap(&inner), on_host_without_reclaim_worker(&host, 2));
    write_whole(&other, "/f", &[1; 4096]);
    write_whole(&renaming, temporary, &[2; 4096]);
    let acting = other.clone();
    hooks.arm(Step::CreateDir, 0, Box::new(move || acting.unlink("/f").unwrap()));
    renaming.rename(temporary, "/f").unwrap();
    assert!(hooks.ran(), "the other process unlinked the target");
    let reading = mount_over(&inner, on_host_without_reclaim_worker(&host, 3));
    assert_eq!(read_whole(&reading, "/f"), vec![2; 4096]);
}

/// A writer makes its shadow hostdir, then its logs in it. An unlink by
/// another process of the file that was at the name before takes the
/// shadows at the name along, and may take the writer's hostdir made but
/// still empty: the writer's first write then failed with "not found". It
/// makes the hostdir again.
#[test]
fn a_file_made_at_a_name_while_another_process_unlinks_the_old_one_can_be_written() {
    use std::sync::mpsc;
    let inner = memory_stores(3);
    let (host, _) = logs_off_canonical(&inner);
    let unlink_hooks = ActOnce::on("f");
    let unlinking = mount_over(&unlink_hooks.wrap(&inner), on_host_without_reclaim_worker(&host, 1));
    let write_hooks = ActOnce::on(shadow_hostdir_of_f(&unlinking, &host));
    let writing = Arc::new(mount_over(&write_hooks.wrap(&inner), on_host_without_reclaim_worker(&host, 2)));
    write_whole(&unlinking, "/f", &[1; 4096]);
    // Right after the unlink's first rename, the writer makes a new `/f`
    // and writes; it stops right after making its hostdir until the unlink
    // has returned.
    let (made, hostdir_made) = mpsc::channel::<()>();
    let (go_on, unlinked) = mpsc::channel::<()>();
    write_hooks.arm(
        Step::CreateDir,
        0,
        Box::new(move || {
            made.send(()).unwrap();
            unlinked.recv().unwrap();
        }),
    );
    type Writer = std::thread::JoinHandle<Result<()>>;
    let writer: Arc<Mutex<Option<Writer>>> = Arc::default();
    let (slot, writing) = (writer.clone(), writing.clone());
    unlink_hooks.arm(
        Step::Rename,
        0,
        Box::new(move || {
            *slot.lock().unwrap() = Some(std::thread::spawn(move || {
                let handle = writing.open("/f", OpenFlags::WRONLY.create(), 0o644, 1)?;
                handle.write(&[2; 4096], 0)?;
                handle.close()
            }));
            hostdir_made.recv().unwrap();
        }),
    );
    unlinking.unlink("/f").unwrap();
    assert!(unlink_hooks.ran(), "the writer started during the unlink");
    go_on.send(()).unwrap();
    let thread = writer.lock().unwrap().take().unwrap();
    thread.join().unwrap().expect("the new file's write");
    assert!(write_hooks.ran(), "the writer made its hostdir during the unlink");
    let reading = mount_over(&inner, on_host_without_reclaim_worker(&host, 3));
    assert_eq!(read_whole(&reading, "/f"), vec![2; 4096]);
}

/// A `workload` mount over two memory stores behind fault injection: the
/// stores below the faults, the fault wrappers, and the mount.
fn faulty_mount(
    pid: u32,
    workload: Workload,
) -> (Vec<SharedStore>, Vec<Arc<crate::store::faulty::FaultyStore>>, Plfs) {
    faulty_mount_with(pid, workload, true)
}

/// [`faulty_mount`] whose stores can swap two entries (`exchange`) or not.
fn faulty_mount_with(
    pid: u32,
    workload: Workload,
    exchange: bool,
) -> (Vec<SharedStore>, Vec<Arc<crate::store::faulty::FaultyStore>>, Plfs) {
    use crate::store::faulty::FaultyStore;
    let inner = memory_stores(2);
    let faulty: Vec<Arc<FaultyStore>> = inner
        .iter()
        .map(|s| {
            let store = FaultyStore::new(s.clone());
            Arc::new(if exchange { store } else { store.without_exchange() })
        })
        .collect();
    let backends = faulty.iter().map(|f| (f.clone() as SharedStore, BackendRole::Any)).collect();
    let plfs = Plfs::with_workload(backends, options(pid), workload).unwrap();
    (inner, faulty, plfs)
}

/// An n-n rename onto an existing file is all or nothing, wherever a
/// store call fails: the target keeps its old bytes and the source stays,
/// or the target has the source's bytes and the source is gone. Both
/// names on one backend (one swap of the entries) and on two (a copy
/// swapped in) are covered. Before, the rename removed the target first,
/// so a failure after that lost it (found by `plfs-sim --workload
/// file_per_proc`), and readers found the name missing meanwhile.
#[test]
fn an_n_n_rename_onto_a_file_that_fails_midway_changes_nothing() {
    n_n_rename_with_faults(false, true);
}

/// The same with the target open in the renaming process (as every target
/// a FUSE daemon's readers hold is): its handle reads the old bytes
/// whatever happens, and its close leaves nothing behind. Before, such a
/// rename hid the target first, so the name was missing until the move.
#[test]
fn an_n_n_rename_onto_a_file_open_here_that_fails_midway_changes_nothing() {
    n_n_rename_with_faults(true, true);
}

/// The same on stores that cannot swap entries, where the façade hides the
/// open target before the move: a move that fails puts it back, and a hide
/// that fails fails the rename. Before, the target stayed hidden (lost to
/// every other process), or was removed under its open handles.
#[test]
fn an_n_n_rename_onto_a_file_open_here_without_exchange_that_fails_keeps_the_target() {
    n_n_rename_with_faults(true, false);
}

fn n_n_rename_with_faults(target_open_here: bool, exchange: bool) {
    use crate::store::faulty::{Fault, FaultAction, Op};
    let (inner, faulty, plfs) = faulty_mount_with(21, Workload::FilePerProc, exchange);
    let contents = |name: &str| -> Option<Vec<u8>> {
        let handle = match plfs.open(name, OpenFlags::RDONLY, 0, 1) {
            Ok(handle) => handle,
            Err(error) if error.kind() == ErrorKind::NotFound => return None,
            Err(error) => panic!("open {name}: {error}"),
        };
        let data = read_all(&handle);
        handle.close().unwrap();
        Some(data)
    };
    let put = |name: &str, data: &[u8]| {
        let handle = plfs.open(name, OpenFlags::WRONLY.create().truncate(), 0o644, 1).unwrap();
        handle.write(data, 0).unwrap();
        handle.close().unwrap();
    };
    let placement = &plfs.state.placement;
    let (mut same, mut across, mut failed) = (0, 0, 0);
    let ops = [Op::Metadata, Op::OpenRead, Op::ReadAt, Op::OpenWrite, Op::WriteAt, Op::Sync, Op::SetMode];
    let ops = ops.into_iter().chain([Op::SetTimes, Op::Rename, Op::Exchange, Op::RemoveFile]);
    // Without exchange a move's undo is itself a call that may fail, so
    // one store at a time fails there (two failing stores can leave the
    // file at both names); with exchange every store fails at once.
    let failing: Vec<Vec<usize>> = if exchange { vec![vec![0, 1]] } else { vec![vec![0], vec![1]] };
    for op in ops {
        for nth in 1..=3 {
            for (target, failing) in
                ["/t0", "/t1", "/t2", "/t3"].into_iter().flat_map(|t| failing.iter().map(move |f| (t, f)))
            {
                let source = "/new";
                put(target, b"old version");
                put(source, b"new version!");
                let held = target_open_here.then(|| plfs.open(target, OpenFlags::RDONLY, 0, 1).unwrap());
                for &index in failing {
                    faulty[index].add_fault(Fault::new(op, FaultAction::Eio).nth(nth));
                }
                let result = plfs.rename(source, target);
                for store in &faulty {
                    store.clear();
                }
                if let Some(held) = held {
                    assert_eq!(read_all(&held), b"old version", "{op:?} #{nth} {target}: the open handle");
                    // Replaced, the old file lives on at a hidden name until
                    // the close (a store's handles may not outlive a removal).
                    let hidden = inner
                        .iter()
                        .any(|store| hidden_names(store).iter().any(|name| layout::is_removed(name)));
                    assert_eq!(
                        hidden,
                        result.is_ok(),
                        "{op:?} #{nth} {target}: a hidden old file ({result:?})"
                    );
                    held.close().unwrap();
                }
                let (at_source, at_target) = (contents(source), contents(target));
                match &result {
                    Ok(()) => {
                        assert_eq!(at_source, None, "{op:?} #{nth} {target}: source left");
                        assert_eq!(
                            at_target.as_deref(),
                            Some(&b"new version!"[..]),
                            "{op:?} #{nth} {target}"
                        );
                    }
                    Err(error) => {
                        failed += 1;
                        let context = format!("{op:?} #{nth} {target} ({error})");
                        assert_eq!(at_source.as_deref(), Some(&b"new version!"[..]), "{context}: source");
                        assert_eq!(at_target.as_deref(), Some(&b"old version"[..]), "{context}: target");
                    }
                }
                if placement.flat_file_backend("new") == placement.flat_file_backend(&target[1..]) {
                    same += 1;
                } else {
                    across += 1;
                }
                let _ = plfs.unlink(source);
                plfs.unlink(target).unwrap();
            }
        }
    }
    assert!(same > 0 && across > 0, "names on one backend ({same}) and on two ({across})");
    assert!(failed > 20, "only {failed} renames failed");
    // A failed removal of the swapped-out file leaves it hidden, as debris
    // that recover clears.
    plfs.recover_directory("/", true).unwrap();
    for store in &inner {
        assert_eq!(hidden_names(store), Vec::<String>::new(), "hidden names left on {}", store.url());
    }
}

/// plfs's reserved names at the root of a backend.
fn hidden_names(store: &SharedStore) -> Vec<String> {
    let entries = store.list(&StorePath::root()).unwrap();
    entries.into_iter().map(|entry| entry.name).filter(|name| name.starts_with(".plfs-")).collect()
}

/// An n-n rename onto a file open in the renaming process never leaves the
/// name missing for another process, which looks after every rename,
/// removal and metadata call of the move (names on one backend and on two,
/// memory stores: the swap path). Before, the target was hidden first.
#[test]
fn an_n_n_rename_onto_a_file_open_here_never_leaves_the_name_missing() {
    use crate::store::hooked::{HookedStore, Hooks};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    struct Look(Arc<dyn Fn() + Send + Sync>);
    impl Hooks for Look {
        fn after_metadata(&self, _path: &StorePath) {
            (self.0)();
        }
        fn after_remove_file(&self, _path: &StorePath) {
            (self.0)();
        }
        fn after_rename(&self, _from: &StorePath) {
            (self.0)();
        }
    }
    let inner = memory_stores(2);
    let watched: Arc<Mutex<Option<String>>> = Arc::default();
    let (looks, missing) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let looking = Arc::new(AtomicBool::new(false));
    let look = {
        let (inner, watched, looks, missing, looking) =
            (inner.clone(), watched.clone(), looks.clone(), missing.clone(), looking.clone());
        Arc::new(move || {
            let Some(name) = watched.lock().unwrap().clone() else { return };
            // The observer's own calls go to the stores below the hooks,
            // but one look at a time.
            if looking.swap(true, Ordering::SeqCst) {
                return;
            }
            let backends = inner.iter().map(|s| (s.clone(), BackendRole::Any)).collect();
            let observer = Plfs::with_workload(backends, options(42), Workload::FilePerProc).unwrap();
            looks.fetch_add(1, Ordering::SeqCst);
            match observer.stat(&name) {
                Ok(_) => {}
                Err(error) if error.kind() == ErrorKind::NotFound => {
                    missing.fetch_add(1, Ordering::SeqCst);
                }
                Err(error) => panic!("stat {name}: {error}"),
            }
            looking.store(false, Ordering::SeqCst);
        }) as Arc<dyn Fn() + Send + Sync>
    };
    let hooked = inner
        .iter()
        .map(|store| {
            let hooks = Arc::new(Look(look.clone()));
            (Arc::new(HookedStore { inner: store.clone(), hooks }) as SharedStore, BackendRole::Any)
        })
        .collect();
    let renamer = Plfs::with_workload(hooked, options(41), Workload::FilePerProc).unwrap();
    let placement = &renamer.state.placement;
    let (mut same, mut across) = (0, 0);
    for target in ["/t0", "/t1", "/t2", "/t3"] {
        for (name, data) in [(target, &b"old"[..]), ("/new", &b"new"[..])] {
            let handle = renamer.open(name, OpenFlags::WRONLY.create().truncate(), 0o644, 1).unwrap();
            handle.write(data, 0).unwrap();
            handle.close().unwrap();
        }
        let held = renamer.open(target, OpenFlags::RDONLY, 0, 1).unwrap();
        *watched.lock().unwrap() = Some(target.to_owned());
        renamer.rename("/new", target).unwrap();
        *watched.lock().unwrap() = None;
        assert_eq!(read_all(&held), b"old", "{target}: the open handle reads the replaced file");
        held.close().unwrap();
        let handle = renamer.open(target, OpenFlags::RDONLY, 0, 1).unwrap();
        assert_eq!(read_all(&handle), b"new", "{target}");
        handle.close().unwrap();
        if placement.flat_file_backend("new") == placement.flat_file_backend(&target[1..]) {
            same += 1;
        } else {
            across += 1;
        }
    }
    assert!(same > 0 && across > 0, "names on one backend ({same}) and on two ({across})");
    assert!(looks.load(Ordering::SeqCst) > 0, "no look during the renames");
    assert_eq!(missing.load(Ordering::SeqCst), 0, "looks that found no target");
    for store in &inner {
        assert_eq!(hidden_names(store), Vec::<String>::new(), "left on {} after the last close", store.url());
    }
}

/// The hidden name of a file open here is never a name this process draws
/// later for the same file (a small_file rename's copy beside its target
/// takes the next stamp). Before, a hidden name whose first stamp fell on
/// the wrong backend took the stamp plus one, which was the next stamp
/// where the clock had not moved: a rename onto a file open here then
/// published its copy over the hidden file, and the open handle's file
/// was gone (`plfs-sim --workload small_file`, seed 33).
#[test]
fn a_hidden_name_is_never_one_a_later_stamp_gives() {
    let (_clock, process) = processes(Workload::SmallFile);
    let plfs = process(7);
    let target = StorePath::parse("d/target").unwrap();
    let mut seen = std::collections::HashSet::new();
    let mut retried = 0;
    for _ in 0..64 {
        let first = plfs.state.stamper.next();
        let hidden = plfs.hidden_path(&target, first).unwrap();
        let hidden = hidden.file_name().unwrap().to_owned();
        if hidden != layout::removed_container_name("target", first, 7, &plfs.state.hostname) {
            retried += 1;
        }
        let later = plfs.state.stamper.next();
        let drawn = layout::removed_container_name("target", later, 7, &plfs.state.hostname);
        assert_ne!(hidden, drawn, "the hidden name is the one the next stamp gives");
        assert!(seen.insert(hidden.clone()) && seen.insert(drawn), "a name drawn twice: {hidden}");
    }
    assert!(retried > 0, "no hidden name needed a second stamp");
}

/// A small_file rename onto an existing file in its directory is one name
/// record: another process that looks at any moment of it (before each of
/// the renamer's appends and syncs) finds the target, old or new. Before,
/// the façade published an unlink record first, and a look between the two
/// publishes found no target.
#[test]
fn a_small_file_rename_onto_a_file_never_leaves_the_name_missing() {
    small_file_rename_watched("/d/tmp", false);
}

/// The same with the target open in the renaming process, within a
/// directory and between two: the open file moves to a hidden name in the
/// rename's own name frame. Before, the façade hid it in a flush of its
/// own first, and a look between the two flushes found no target.
#[test]
fn a_small_file_rename_onto_a_file_open_here_never_leaves_the_name_missing() {
    small_file_rename_watched("/d/tmp", true);
    small_file_rename_watched("/e/tmp", true);
}

fn small_file_rename_watched(source: &str, target_open_here: bool) {
    use crate::store::hooked::{Before, HookedStore};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let inner = memory_stores(2);
    let watching = Arc::new(AtomicBool::new(false));
    let (looks, missing) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let observe = {
        let (inner, watching, looks, missing) =
            (inner.clone(), watching.clone(), looks.clone(), missing.clone());
        Arc::new(move || {
            if !watching.load(Ordering::SeqCst) {
                return;
            }
            let backends = inner.iter().map(|s| (s.clone(), BackendRole::Any)).collect();
            let observer = Plfs::with_workload(backends, options(32), Workload::SmallFile).unwrap();
            looks.fetch_add(1, Ordering::SeqCst);
            match observer.stat("/d/target") {
                Ok(_) => {}
                Err(error) if error.kind() == ErrorKind::NotFound => {
                    missing.fetch_add(1, Ordering::SeqCst);
                }
                Err(error) => panic!("stat /d/target: {error}"),
            }
        }) as Arc<dyn Fn() + Send + Sync>
    };
    let hooked = inner
        .iter()
        .map(|store| {
            let hooks = Arc::new(Before { append: observe.clone(), sync: observe.clone() });
            (Arc::new(HookedStore { inner: store.clone(), hooks }) as SharedStore, BackendRole::Any)
        })
        .collect();
    let renamer = Plfs::with_workload(hooked, options(31), Workload::SmallFile).unwrap();
    renamer.mkdir("/d", 0o755).unwrap();
    renamer.mkdir("/e", 0o755).unwrap();
    for (name, data) in [("/d/target", &b"old"[..]), (source, &b"new"[..])] {
        let handle = renamer.open(name, OpenFlags::WRONLY.create().truncate(), 0o644, 1).unwrap();
        handle.write(data, 0).unwrap();
        handle.close().unwrap();
    }
    let held = target_open_here.then(|| renamer.open("/d/target", OpenFlags::RDONLY, 0, 1).unwrap());
    watching.store(true, Ordering::SeqCst);
    renamer.rename(source, "/d/target").unwrap();
    watching.store(false, Ordering::SeqCst);
    let context = format!("{source}, target open here: {target_open_here}");
    assert!(looks.load(Ordering::SeqCst) > 0, "{context}: the rename made no append or sync");
    assert_eq!(missing.load(Ordering::SeqCst), 0, "{context}: looks that found no target");
    if let Some(held) = held {
        assert_eq!(read_all(&held), b"old", "{context}: the open handle");
        held.close().unwrap();
    }
    let fresh = memory_mount_over(&inner);
    let handle = fresh.open("/d/target", OpenFlags::RDONLY, 0, 1).unwrap();
    assert_eq!(read_all(&handle), b"new", "{context}");
    for dir in ["/d", "/e"] {
        // Hidden files (listings leave them out) are what recover finds.
        let findings = fresh.recover_directory(dir, false).unwrap().findings;
        assert!(findings.is_empty(), "{context}: left in {dir}: {findings:?}");
    }
    let names = |dir| fresh.readdir(dir).unwrap().into_iter().map(|entry| entry.name).collect::<Vec<_>>();
    assert_eq!((names("/d"), names("/e")), (vec!["target".to_owned()], vec![]), "{context}");
}

fn memory_mount_over(stores: &[SharedStore]) -> Plfs {
    let backends = stores.iter().map(|s| (s.clone(), BackendRole::Any)).collect();
    Plfs::with_workload(backends, options(33), Workload::SmallFile).unwrap()
}

/// A small_file process looks at its directory again a second after it
/// loaded its view, whatever it did in between: a name another process
/// removed two seconds ago is gone. Before, the look-again clock started
/// at the first lookup after the load, so that lookup answered from a view
/// of any age (found by `plfs-sim --workload small_file`: an open found a
/// file renamed away three steps before).
#[test]
fn a_small_file_lookup_a_second_after_the_view_was_loaded_sees_a_removal() {
    let (clock, process) = processes(Workload::SmallFile);
    let (looker, remover) = (process(3), process(4));
    for name in ["/gone", "/moved"] {
        let handle = remover.open(name, OpenFlags::WRONLY.create().truncate(), 0o644, 4).unwrap();
        handle.write(b"x", 0).unwrap();
        handle.close().unwrap();
    }
    clock.advance(1000);
    assert_eq!(looker.stat("/gone").unwrap().size, 1, "the view is loaded");
    remover.unlink("/gone").unwrap();
    remover.rename("/moved", "/elsewhere").unwrap();
    clock.advance(2_000_000_000);
    assert_eq!(looker.stat("/gone").unwrap_err().kind(), ErrorKind::NotFound);
    let opened = looker.open("/moved", OpenFlags::RDONLY, 0, 3);
    assert_eq!(opened.map(drop).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(looker.stat("/elsewhere").unwrap().size, 1);
}

/// A small_file write lost by a failed flush that another call of the
/// process led (here a stat, which publishes the process's changes first)
/// is reported by the writing handle's next sync, as fsync(2) reports a
/// write-back error to each descriptor open when it struck. Before, the
/// stat reported it, and the writer's sync succeeded with its bytes gone
/// (found by `plfs-sim --workload small_file`, seed 46). Reported once:
/// later reads and syncs of the handle work (before, every read of it
/// reported the failure again, seed 120).
#[test]
fn a_small_file_sync_reports_a_write_an_earlier_failed_flush_lost() {
    use crate::store::faulty::{Fault, FaultAction, Op};
    let (_, faulty, plfs) = faulty_mount(41, Workload::SmallFile);
    let handle = plfs.open("/f", OpenFlags::RDWR.create(), 0o644, 1).unwrap();
    handle.write(b"first", 0).unwrap();
    handle.sync().unwrap();
    handle.write(b"second", 5).unwrap();
    for store in &faulty {
        store.add_fault(Fault::new(Op::Sync, FaultAction::Eio));
    }
    assert!(plfs.stat("/f").is_err(), "the stat led the flush that failed");
    for store in &faulty {
        store.clear();
    }
    handle.write(b"third", 11).unwrap();
    assert!(handle.sync().is_err(), "the sync must report the lost write");
    handle.sync().unwrap();
    let mut buf = [0u8; 32];
    let count = handle.read(&mut buf, 0).unwrap();
    assert_eq!(&buf[..count.min(5)], b"first");
    handle.close().unwrap();
}

/// Two processes open one new small file with O_CREAT before either has
/// published; the second then reads it through a new handle. The handle's
/// file is the second process's own unpublished create, which the store's
/// view does not hold yet: the read publishes it first and reads the one
/// file both share. Before, it read ESTALE ("removed by another process")
/// (found by `plfs-sim --workload small_file`, seed 21).
#[test]
fn a_read_of_an_unpublished_open_or_create_sees_the_shared_file() {
    let (clock, process) = processes(Workload::SmallFile);
    let (first, second) = (process(3), process(4));
    let a = first.open("/log", OpenFlags::RDWR.create(), 0o644, 3).unwrap();
    clock.advance(1000);
    let b = second.open("/log", OpenFlags::RDWR.create(), 0o644, 4).unwrap();
    clock.advance(1000);
    a.write(b"first\n", 0).unwrap();
    a.close().unwrap();
    // A second later: the second process looks at the store again.
    clock.advance(2_000_000_000);
    let reader = second.open("/log", OpenFlags::RDONLY, 0, 5).unwrap();
    assert_eq!(read_all(&reader), b"first\n");
    let mut buf = [0u8; 16];
    assert_eq!(b.read(&mut buf, 0).unwrap(), 6);
    reader.close().unwrap();
    b.close().unwrap();
}

/// An n-n rename whose source another process removed after the rename
/// looked at it fails with ENOENT and leaves the target alone. Before, the
/// failed swap sent the rename to the remove-then-move path, which removed
/// the target and then found no source: both files gone.
#[test]
fn an_n_n_rename_whose_source_vanished_keeps_the_target() {
    // Memory stores swap entries (no rename(2) path); the hook removes the
    // source once the rename has looked at it.
    let inner = memory_stores(1);
    let other = Plfs::with_workload(
        inner.iter().map(|s| (s.clone(), BackendRole::Any)).collect(),
        options(51),
        Workload::FilePerProc,
    )
    .unwrap();
    let hooks = ActOnce::on("new");
    let backends = hooks.wrap(&inner).into_iter().map(|store| (store, BackendRole::Any)).collect();
    let renaming = Plfs::with_workload(backends, options(52), Workload::FilePerProc).unwrap();
    write_whole(&renaming, "/old", b"old");
    write_whole(&renaming, "/new", b"new");
    let other = Arc::new(other);
    let acting = other.clone();
    hooks.arm(Step::Metadata, 0, Box::new(move || acting.unlink("/new").unwrap()));
    let error = renaming.rename("/new", "/old").unwrap_err();
    assert!(hooks.ran(), "the other process removed the source");
    assert_eq!(error.kind(), ErrorKind::NotFound, "{error}");
    let handle = other.open("/old", OpenFlags::RDONLY, 0, 1).unwrap();
    assert_eq!(read_all(&handle), b"old");
}

/// A small_file rename onto a file in another directory never leaves the
/// target missing, wherever a store call fails: the target keeps its old
/// bytes, or has the new ones (then, if the failure came after the switch,
/// the source may remain too: a copy, never a loss). Before, the façade
/// removed the target first and a failed copy lost it (plfs-sim
/// `--workload small_file`: 15 of 2,000 seeds).
#[test]
fn a_small_file_rename_between_directories_that_fails_keeps_the_target() {
    small_file_rename_with_faults("/a/source", false);
}

/// The same, within a directory and between two, with the target open in
/// the renaming process: its handle reads the old file whatever fails, and
/// the target is never missing for others. Before, the façade hid it first
/// and a rename that then failed left it hidden (lost to every other
/// process), or a hide that failed removed it from under the handle.
#[test]
fn a_small_file_rename_onto_a_file_open_here_that_fails_keeps_the_target() {
    small_file_rename_with_faults("/a/source", true);
    small_file_rename_with_faults("/b/source", true);
}

fn small_file_rename_with_faults(source_name: &str, target_open_here: bool) {
    use crate::store::faulty::{Fault, FaultAction, Op};
    let mut failed = 0;
    for op in [Op::Append, Op::Sync, Op::CreateAppend] {
        for nth in 1..=6 {
            let (inner, faulty, plfs) = faulty_mount(61, Workload::SmallFile);
            plfs.mkdir("/a", 0o755).unwrap();
            plfs.mkdir("/b", 0o755).unwrap();
            write_whole(&plfs, "/b/target", b"old version");
            write_whole(&plfs, source_name, b"new version!");
            let held = target_open_here.then(|| plfs.open("/b/target", OpenFlags::RDONLY, 0, 1).unwrap());
            for store in &faulty {
                store.add_fault(Fault::new(op, FaultAction::Eio).nth(nth));
            }
            let result = plfs.rename(source_name, "/b/target");
            for store in &faulty {
                store.clear();
            }
            let fresh = memory_mount_over(&inner);
            let read = |name: &str| -> Option<Vec<u8>> {
                let handle = fresh.open(name, OpenFlags::RDONLY, 0, 1).ok()?;
                Some(read_all(&handle))
            };
            let (source, target) = (read(source_name), read("/b/target"));
            let context = format!("{source_name} {op:?} #{nth}: {result:?}");
            if let Some(held) = held {
                let mut buf = vec![0; 100];
                let count = held
                    .read(&mut buf, 0)
                    .unwrap_or_else(|error| panic!("{context}: the open handle: {error}"));
                assert_eq!(&buf[..count], b"old version", "{context}: the open handle");
                held.close().unwrap();
            }
            match result {
                Ok(()) => {
                    assert_eq!(target.as_deref(), Some(&b"new version!"[..]), "{context}");
                    assert_eq!(source, None, "{context}");
                }
                Err(_) => {
                    failed += 1;
                    match target.as_deref() {
                        Some(b"old version") => {
                            assert_eq!(source.as_deref(), Some(&b"new version!"[..]), "{context}")
                        }
                        Some(b"new version!") => {}
                        other => panic!("{context}: the target reads {other:?}"),
                    }
                }
            }
        }
    }
    assert!(failed > 5, "only {failed} renames failed");
}
