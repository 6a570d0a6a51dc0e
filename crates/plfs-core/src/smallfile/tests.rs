//! Engine tests: visibility rules, namespace records, damage on disk, a model
//! check, many writers × many files, and the container bound.

use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroUsize;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::ErrorKind;
use crate::clock::{ManualClock, Stamper};
use crate::layout::smallfile::parse_small_log_name;
use crate::store::StoreExt;
use crate::store::hooked::{Before, HookedStore};
use crate::store::memory::MemoryStore;
use crate::store::posix::PosixStore;

fn memory_stores(count: usize) -> Vec<SharedStore> {
    (0..count).map(|i| Arc::new(MemoryStore::new(format!("mem://b{i}"))) as SharedStore).collect()
}

fn stamper() -> Stamper {
    Stamper::new(Arc::new(ManualClock::new(1_000)))
}

fn options(stamper: &Stamper) -> SmallFileOptions {
    SmallFileOptions::new(stamper.clone(), 4242, "node-1")
}

fn dir(text: &str) -> StorePath {
    StorePath::parse(text).unwrap()
}

fn read_all(engine: &SmallFileStore, directory: &StorePath, name: &str) -> Result<Vec<u8>> {
    let size = engine.stat(directory, name)?.size as usize;
    let mut buf = vec![0xAA; size + 7];
    let count = engine.read(directory, name, None, 0, &mut buf)?;
    assert_eq!(count, size, "{name}: read length disagrees with stat");
    buf.truncate(count);
    Ok(buf)
}

/// Every log file in the directory containers of `directory`, over all backends.
fn backend_files(stores: &[SharedStore], directory: &StorePath) -> usize {
    let container = crate::layout::smallfile::container_dir(directory).unwrap();
    stores
        .iter()
        .map(|store| match store.list(&container) {
            Ok(entries) => {
                assert!(entries.iter().all(|e| parse_small_log_name(&e.name).is_some()), "{entries:?}");
                entries.len()
            }
            Err(error) if error.kind() == ErrorKind::NotFound => 0,
            Err(error) => panic!("{error}"),
        })
        .sum()
}

#[test]
fn writes_are_visible_only_after_flush_and_invalidate() {
    let stores = memory_stores(2);
    let stamper = stamper();
    let writer = SmallFileStore::new(stores.clone(), options(&stamper)).unwrap();
    let reader = SmallFileStore::new(stores.clone(), options(&stamper)).unwrap();
    let d = dir("out");
    assert_eq!(reader.list(&d).unwrap(), Vec::<String>::new());

    writer.create(&d, "a", 0).unwrap();
    writer.write(&d, "a", 0, 0, b"hello").unwrap();
    writer.write(&d, "a", 0, 3, b"p!").unwrap();
    // Unflushed: nobody sees it, not even the writing process's own reads.
    assert_eq!(writer.list(&d).unwrap(), Vec::<String>::new());
    assert_eq!(writer.stat(&d, "a").unwrap_err().kind(), ErrorKind::NotFound);

    writer.flush_writes(&d).unwrap();
    assert_eq!(read_all(&writer, &d, "a").unwrap(), b"help!");
    // The reader's cached (empty) view survives until it is invalidated.
    assert_eq!(reader.list(&d).unwrap(), Vec::<String>::new());
    reader.invalidate_read_cache(&d);
    assert_eq!(reader.list(&d).unwrap(), vec!["a".to_owned()]);
    assert_eq!(read_all(&reader, &d, "a").unwrap(), b"help!");
    let mut tail = [0u8; 10];
    assert_eq!(reader.read(&d, "a", None, 3, &mut tail).unwrap(), 2);
    assert_eq!(reader.read(&d, "a", None, 9, &mut tail).unwrap(), 0);
    writer.close().unwrap();
    reader.close().unwrap();
}

/// A stat by name (close-to-open) sees this process's own changes made
/// since the directory's view was cached: a write, a truncate and a time
/// change each show at the next stat, and the next read reads the new
/// bytes. Before, a stat, then a write, then a stat gave the size of the
/// first (Python's NamedTemporaryFile: size 0 after ten bytes were written
/// and flushed to the descriptor), and a second descriptor read the old
/// bytes.
#[test]
fn a_stat_after_this_processs_own_change_sees_it() {
    let stores = memory_stores(1);
    let stamper = stamper();
    let engine = SmallFileStore::new(stores, options(&stamper)).unwrap();
    let d = dir("d");
    engine.create(&d, "f", 1).unwrap();
    assert_eq!(engine.stat_fresh(&d, "f").unwrap().size, 0);
    engine.write(&d, "f", 1, 0, b"0123456789").unwrap();
    assert_eq!(engine.stat_fresh(&d, "f").unwrap().size, 10);
    engine.truncate(&d, "f", 1, 4).unwrap();
    assert_eq!(engine.stat_fresh(&d, "f").unwrap().size, 4);
    engine.utime(&d, "f", 1, 5_000_000_000, 7_000_000_000).unwrap();
    assert_eq!(engine.stat_fresh(&d, "f").unwrap().mtime_ns, 7_000_000_000);
    // A read (any handle of this process) after a write by another writer
    // id of this process reads the new bytes, not the cached ones.
    let mut buf = [0u8; 16];
    assert_eq!(engine.read_fresh(&d, "f", None, 0, &mut buf).unwrap(), 4);
    engine.write(&d, "f", 2, 0, b"abcdef").unwrap();
    let count = engine.read_fresh(&d, "f", None, 0, &mut buf).unwrap();
    assert_eq!(&buf[..count], b"abcdef");
    engine.close().unwrap();
}

#[test]
fn namespace_records_rename_unlink_truncate_utime() {
    let stores = memory_stores(1);
    let clock = Arc::new(ManualClock::new(1_000));
    let stamper = Stamper::new(clock.clone());
    let engine = SmallFileStore::new(stores.clone(), options(&stamper)).unwrap();
    let d = dir("d");
    engine.create(&d, "a", 1).unwrap();
    engine.write(&d, "a", 1, 0, b"0123456789").unwrap();
    engine.create(&d, "b", 2).unwrap();
    engine.write(&d, "b", 2, 4, b"bb").unwrap();
    // Another writer of the process writes a file it did not create.
    engine.write(&d, "a", 2, 8, b"XYZ").unwrap();
    engine.rename(&d, "a", "c", 1).unwrap();
    assert_eq!(engine.write(&d, "a", 1, 0, b"x").unwrap_err().kind(), ErrorKind::NotFound);
    engine.truncate(&d, "c", 1, 4).unwrap();
    engine.truncate(&d, "c", 1, 6).unwrap();
    clock.set(50_000);
    engine.utime(&d, "b", 2, 7, 9).unwrap();
    engine.unlink(&d, "b", 1).unwrap();
    assert_eq!(engine.unlink(&d, "b", 1).unwrap_err().kind(), ErrorKind::NotFound);
    engine.create(&d, "e", 1).unwrap();
    engine.write(&d, "e", 1, 0, b"old").unwrap();
    engine.create(&d, "e", 2).unwrap(); // replaces: O_CREAT | O_TRUNC
    engine.write(&d, "e", 2, 1, b"n").unwrap();
    engine.create(&d, "f", 1).unwrap();
    engine.utime(&d, "f", 1, 11, 12).unwrap();
    engine.flush_writes(&d).unwrap();

    assert_eq!(engine.list(&d).unwrap(), vec!["c", "e", "f"]);
    assert_eq!(read_all(&engine, &d, "c").unwrap(), b"0123\0\0");
    assert_eq!(read_all(&engine, &d, "e").unwrap(), b"\0n");
    let f = engine.stat(&d, "f").unwrap();
    assert_eq!((f.size, f.atime_ns, f.mtime_ns), (0, 11, 12));
    assert!(f.ctime_ns > 50_000);
    let c = engine.stat(&d, "c").unwrap();
    assert!(c.mtime_ns >= 1_000 && c.mtime_ns < 50_000);
    // Two writers, three logs each; no log per file.
    assert_eq!(backend_files(&stores, &d), 6);
    engine.close().unwrap();
}

#[test]
fn a_write_to_a_name_another_process_removed_is_an_orphan() {
    let stores = memory_stores(1);
    let stamper = stamper();
    let one = SmallFileStore::new(stores.clone(), options(&stamper)).unwrap();
    let two = SmallFileStore::new(stores.clone(), options(&stamper)).unwrap();
    let d = dir("d");
    one.create(&d, "a", 0).unwrap();
    one.flush_writes(&d).unwrap();
    assert!(two.stat(&d, "a").is_ok());
    one.unlink(&d, "a", 0).unwrap();
    one.flush_writes(&d).unwrap();
    two.write(&d, "a", 0, 0, b"late").unwrap(); // two's view still has "a"
    two.flush_writes(&d).unwrap();
    // Two's flush folds its own write into its view; one's delete shows
    // only after an invalidate, and then the write is an orphan.
    assert_eq!(read_all(&two, &d, "a").unwrap(), b"late");
    two.invalidate_read_cache(&d);
    assert_eq!(two.list(&d).unwrap(), Vec::<String>::new());
    assert_eq!(two.orphan_writes(&d).unwrap(), 1);
}

/// A file this process holds open that another process removes stays
/// readable here, as it was, in the last view that held it, and only
/// while held: the last release lets that view go, so nothing outlives the
/// handles. A file nobody here holds is gone at the reload, as before.
#[test]
fn a_held_file_another_process_removed_reads_as_it_was_until_released() {
    let stores = memory_stores(2);
    let stamper = stamper();
    let one = SmallFileStore::new(stores.clone(), options(&stamper)).unwrap();
    let two = SmallFileStore::new(stores.clone(), options(&stamper)).unwrap();
    let d = dir("d");
    for name in ["held", "other"] {
        one.create(&d, name, 0).unwrap();
        one.write(&d, name, 0, 0, name.as_bytes()).unwrap();
    }
    one.flush_writes(&d).unwrap();
    let held = two.identity(&d, "held").unwrap().expect("two sees it");
    let other = two.identity(&d, "other").unwrap().expect("two sees it");
    two.hold(&d, held).unwrap();
    two.hold(&d, held).unwrap();
    one.unlink(&d, "held", 0).unwrap();
    one.unlink(&d, "other", 0).unwrap();
    one.flush_writes(&d).unwrap();
    two.invalidate_read_cache(&d);
    assert_eq!(two.list(&d).unwrap(), Vec::<String>::new(), "two's process sees both gone");
    let mut buf = [0u8; 16];
    let error = two.read(&d, "held", Some(held), 0, &mut buf).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Stale, "the current view: {error}");
    assert_eq!(two.read_retained(&d, "held", held, 0, &mut buf).unwrap(), Some(4));
    assert_eq!(&buf[..4], b"held");
    assert_eq!(two.stat_retained(&d, "held", held).map(|stat| stat.size), Some(4));
    assert_eq!(two.read_retained(&d, "other", other, 0, &mut buf).unwrap(), None, "not held");
    let retained = |engine: &SmallFileStore| engine.slot(&d).unwrap().lock().retained.len();
    assert_eq!(retained(&two), 1);
    two.release(&d, held);
    assert_eq!(two.read_retained(&d, "held", held, 0, &mut buf).unwrap(), Some(4), "one holder left");
    two.release(&d, held);
    assert_eq!(retained(&two), 0, "the last release lets the old view go");
    assert_eq!(two.read_retained(&d, "held", held, 0, &mut buf).unwrap(), None);
}

/// Letting go of a file in a directory whose container was closed since
/// (the bound on open containers) opens nothing: before, the release
/// opened that container again and so closed the least recently used
/// one, publishing its unflushed records early.
#[test]
fn a_release_after_its_container_closed_opens_none() {
    let stores = memory_stores(1);
    let stamper = stamper();
    let mut bounded = options(&stamper);
    bounded.max_containers = NonZeroUsize::new(1).unwrap();
    let one = SmallFileStore::new(stores.clone(), bounded).unwrap();
    let two = SmallFileStore::new(stores.clone(), options(&stamper)).unwrap();
    let (a, b) = (dir("a"), dir("b"));
    one.create(&a, "f", 0).unwrap();
    one.flush_writes(&a).unwrap();
    let held = one.identity(&a, "f").unwrap().expect("created");
    one.hold(&a, held).unwrap();
    one.create(&b, "unflushed", 0).unwrap(); // closes a's container
    one.release(&a, held);
    assert_eq!(two.list(&b).unwrap(), Vec::<String>::new(), "b's record published by the release");
    one.flush_writes(&b).unwrap();
    two.invalidate_read_cache(&b);
    assert_eq!(two.list(&b).unwrap(), vec!["unflushed".to_owned()]);
}

/// logrotate without copytruncate, across processes: one process renames
/// the log another is writing and makes a new one. The writer's handle
/// keeps writing to its file, now under the new name (its writes went to
/// no file at all before: orphans, silently), also after the writer's
/// view has seen the rotation; a reopen writes to the new file.
#[test]
fn writes_follow_a_file_another_process_renamed() {
    let stores = memory_stores(2);
    let stamper = stamper();
    let writer = SmallFileStore::new(stores.clone(), options(&stamper)).unwrap();
    let rotator = SmallFileStore::new(stores.clone(), options(&stamper)).unwrap();
    let d = dir("logs");
    let handle = Some(writer.create(&d, "app.log", 0).unwrap());
    writer.write_to(&d, "app.log", handle, 0, 0, b"one\n").unwrap();
    writer.flush_writes(&d).unwrap();
    rotator.rename(&d, "app.log", "app.log.1", 1).unwrap();
    rotator.create(&d, "app.log", 1).unwrap();
    rotator.flush_writes(&d).unwrap();
    // The handle writes where its file is, before and after its process
    // has seen the rotation.
    writer.write_to(&d, "app.log", handle, 0, 4, b"two\n").unwrap();
    writer.flush_writes(&d).unwrap();
    writer.invalidate_read_cache(&d);
    writer.write_to(&d, "app.log", handle, 0, 8, b"2b\n").unwrap();
    writer.flush_writes(&d).unwrap();
    assert_eq!(read_all(&writer, &d, "app.log.1").unwrap(), b"one\ntwo\n2b\n");
    // Its reopen after the rotation: now the name is the new file.
    let reopened = writer.identity(&d, "app.log").unwrap();
    assert_ne!(reopened, handle);
    writer.write_to(&d, "app.log", reopened, 0, 0, b"three\n").unwrap();
    writer.close().unwrap();
    rotator.close().unwrap();
    let reader = SmallFileStore::new(stores, options(&stamper)).unwrap();
    assert_eq!(reader.list(&d).unwrap(), ["app.log", "app.log.1"]);
    assert_eq!(read_all(&reader, &d, "app.log.1").unwrap(), b"one\ntwo\n2b\n");
    assert_eq!(read_all(&reader, &d, "app.log").unwrap(), b"three\n");
    assert_eq!(reader.orphan_writes(&d).unwrap(), 0);
}

/// `O_TRUNC` by another process empties the file a writer holds and the
/// writer goes on writing to it, as on a local file system (a create over
/// an existing name keeps the file).
#[test]
fn a_create_over_a_name_keeps_its_writers() {
    let stores = memory_stores(1);
    let stamper = stamper();
    let writer = SmallFileStore::new(stores.clone(), options(&stamper)).unwrap();
    let truncator = SmallFileStore::new(stores.clone(), options(&stamper)).unwrap();
    let d = dir("d");
    writer.create(&d, "f", 0).unwrap();
    writer.write(&d, "f", 0, 0, b"old bytes").unwrap();
    writer.flush_writes(&d).unwrap();
    truncator.create(&d, "f", 1).unwrap();
    truncator.flush_writes(&d).unwrap();
    writer.write(&d, "f", 0, 0, b"new").unwrap();
    writer.close().unwrap();
    truncator.close().unwrap();
    let reader = SmallFileStore::new(stores, options(&stamper)).unwrap();
    assert_eq!(read_all(&reader, &d, "f").unwrap(), b"new");
    assert_eq!(reader.orphan_writes(&d).unwrap(), 0);
}

type Hook = Arc<dyn Fn() + Send + Sync>;

/// A store that runs `append` before every append to a log and `sync`
/// before every sync, so a test can act between two steps of one flush.
fn hooked_store(inner: SharedStore, append: Hook, sync: Hook) -> SharedStore {
    Arc::new(HookedStore { inner, hooks: Arc::new(Before { append, sync }) })
}

/// Another process (a second engine) loads its view of the directory
/// between two appends of a flush that creates and writes two files, one
/// per writer, at every such point in turn; after the flush, a lookup must
/// find each file with the bytes that flush wrote. A lookup that finds its
/// name answers from the cached view, so a view holding a flush's creates
/// without its writes kept stat'ing the files at size 0 after their writer
/// had closed them (mdtest's O_EXCL creates under the preload hit this when
/// a create loaded the view during another rank's close).
#[test]
fn a_view_loaded_during_another_process_flush_never_keeps_its_files_half_written() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let d = dir("d");
    let mut pause_at = 1;
    loop {
        let stores = memory_stores(2);
        let stamper = stamper();
        let reader = Arc::new(SmallFileStore::new(stores.clone(), options(&stamper)).unwrap());
        let appends = Arc::new(AtomicUsize::new(0));
        // Counting starts at the flush (the sessions' headers come before).
        let armed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let hook: Arc<dyn Fn() + Send + Sync> = {
            let (reader, appends, armed, d) = (reader.clone(), appends.clone(), armed.clone(), d.clone());
            Arc::new(move || {
                if armed.load(Ordering::SeqCst) && appends.fetch_add(1, Ordering::SeqCst) + 1 == pause_at {
                    reader.invalidate_read_cache(&d);
                    reader.list(&d).unwrap();
                }
            })
        };
        let hooked: Vec<SharedStore> =
            stores.iter().map(|inner| hooked_store(inner.clone(), hook.clone(), Before::nothing())).collect();
        let writer = SmallFileStore::new(hooked, options(&stamper)).unwrap();
        for (number, name) in [(1, "f"), (2, "g")] {
            writer.create(&d, name, number).unwrap();
            writer.write(&d, name, number, 0, name.repeat(5).as_bytes()).unwrap();
        }
        armed.store(true, Ordering::SeqCst);
        writer.flush_writes(&d).unwrap();
        if appends.load(Ordering::SeqCst) < pause_at {
            break;
        }
        for name in ["f", "g"] {
            let stat = reader.stat_fresh(&d, name).unwrap();
            assert_eq!(stat.size, 5, "{name}, view loaded before append {pause_at} of the flush");
            assert_eq!(read_all(&reader, &d, name).unwrap(), name.repeat(5).as_bytes());
        }
        writer.close().unwrap();
        pause_at += 1;
    }
    // Two sessions: a data, an index and a name append each.
    assert_eq!(pause_at, 7);
}

/// Several threads of one engine (the processes behind one FUSE daemon, all
/// one writer) create and write files in one directory. While one thread's
/// flush waits in its first sync, the others still create and write (the
/// engine's locks are not held across a sync), and the two flushes that
/// arrive meanwhile are carried by one round of syncs (group commit), not
/// one round each. Everything acknowledged survives a crash.
///
/// The sync is held by a gate the test opens itself, so the outcome does not
/// depend on timing; the gate's timeout only bounds how long an engine that
/// holds its lock across the sync (and so blocks the other creates) makes
/// the test wait before it fails.
#[test]
fn flushes_of_one_engine_overlap_their_syncs_and_share_them() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;
    const WAIT: Duration = Duration::from_secs(10);

    let memory = Arc::new(MemoryStore::new("mem://b0"));
    let d = dir("d");
    let armed = Arc::new(AtomicBool::new(false));
    let syncs = Arc::new(AtomicUsize::new(0));
    let (entered_tx, entered_rx) = mpsc::channel::<()>();
    let (gate_tx, gate_rx) = mpsc::channel::<()>();
    let entered_tx = Mutex::new(entered_tx);
    let gate_rx = Mutex::new(gate_rx);
    let before_sync: Hook = {
        let (armed, syncs) = (armed.clone(), syncs.clone());
        Arc::new(move || {
            if armed.load(Ordering::SeqCst) && syncs.fetch_add(1, Ordering::SeqCst) == 0 {
                entered_tx.lock().unwrap().send(()).unwrap();
                // Longer than the test waits for the creates, so they are
                // counted only if they get past a sync still in progress.
                let _ = gate_rx.lock().unwrap().recv_timeout(3 * WAIT);
            }
        })
    };
    let hooked = hooked_store(memory.clone(), Before::nothing(), before_sync);
    let engine = Arc::new(SmallFileStore::new(vec![hooked], options(&stamper())).unwrap());
    let create_and_flush = |name: &'static str, created: Option<mpsc::Sender<()>>| {
        let (engine, d) = (engine.clone(), d.clone());
        std::thread::spawn(move || {
            engine.create(&d, name, 0).unwrap();
            engine.write(&d, name, 0, 0, name.repeat(3).as_bytes()).unwrap();
            if let Some(created) = created {
                created.send(()).unwrap();
            }
            engine.flush_writes(&d).unwrap();
        })
    };
    // The session's logs exist before counting starts.
    engine.create(&d, "warm", 0).unwrap();
    engine.flush_writes(&d).unwrap();
    armed.store(true, Ordering::SeqCst);

    let first = create_and_flush("a", None);
    entered_rx.recv_timeout(WAIT).expect("the first flush syncs");
    let (created_tx, created_rx) = mpsc::channel();
    let others = [create_and_flush("b", Some(created_tx.clone())), create_and_flush("c", Some(created_tx))];
    let created_during_sync = (0..2).filter(|_| created_rx.recv_timeout(WAIT).is_ok()).count();
    gate_tx.send(()).unwrap();
    first.join().unwrap();
    for other in others {
        other.join().unwrap();
    }
    assert_eq!(created_during_sync, 2, "creates waited for another thread's sync");
    // A flush that writes syncs the data log, the index log and the name
    // log: one round for "a", one round for "b" and "c" together.
    assert_eq!(syncs.load(Ordering::SeqCst), 6, "syncs of three flushes, two of them arriving together");

    memory.discard_unsynced();
    let reloaded = SmallFileStore::new(vec![memory as SharedStore], options(&stamper())).unwrap();
    assert_eq!(reloaded.list(&d).unwrap(), ["a", "b", "c", "warm"]);
    for name in ["a", "b", "c"] {
        assert_eq!(read_all(&reloaded, &d, name).unwrap(), name.repeat(3).as_bytes());
    }
    drop(engine);
}

/// Many threads of one engine create, write and flush files in one
/// directory at once; after a crash every acknowledged file reads back, and
/// the engine's own view agrees.
#[test]
fn concurrent_creators_of_one_engine_lose_nothing_acknowledged() {
    let memory = Arc::new(MemoryStore::new("mem://b0"));
    let engine =
        Arc::new(SmallFileStore::new(vec![memory.clone() as SharedStore], options(&stamper())).unwrap());
    let d = dir("d");
    let threads: Vec<_> = (0..4u64)
        .map(|thread| {
            let (engine, d) = (engine.clone(), d.clone());
            std::thread::spawn(move || {
                for file in 0..40 {
                    let name = format!("t{thread}-{file}");
                    // As FUSE does: one writer for every caller.
                    engine.create(&d, &name, 0).unwrap();
                    engine.write(&d, &name, 0, 0, &contents(thread, file)).unwrap();
                    engine.flush_writes(&d).unwrap();
                    assert_eq!(
                        engine.stat_fresh(&d, &name).unwrap().size,
                        contents(thread, file).len() as u64
                    );
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    memory.discard_unsynced();
    let reloaded = SmallFileStore::new(vec![memory as SharedStore], options(&stamper())).unwrap();
    for engine in [&*engine, &reloaded] {
        assert_eq!(engine.list(&d).unwrap().len(), 160);
        for thread in 0..4 {
            for file in 0..40 {
                let name = format!("t{thread}-{file}");
                assert_eq!(read_all(engine, &d, &name).unwrap(), contents(thread, file), "{name}");
            }
        }
    }
    engine.close().unwrap();
}

/// Everything `stat`, `list` and `read` can tell about a directory.
fn snapshot(engine: &SmallFileStore, directory: &StorePath) -> Vec<(String, FileStat, Vec<u8>)> {
    let names = engine.list(directory).unwrap();
    names
        .into_iter()
        .map(|name| {
            let stat = engine.stat(directory, &name).unwrap();
            let bytes = read_all(engine, directory, &name).unwrap();
            (name, stat, bytes)
        })
        .collect()
}

#[test]
fn a_flush_folds_own_records_into_the_view_exactly_as_a_reload_replays_them() {
    let stores = memory_stores(3);
    let clock = Arc::new(ManualClock::new(1_000));
    let stamper = Stamper::new(clock.clone());
    let mut small_records = options(&stamper);
    // Writer 2's records pass the bound mid-way: the early flush must fold
    // writer 1's records too, in stamp order.
    small_records.record_buffer_bytes = 600;
    small_records.data_buffer_bytes = 8;
    let engine = SmallFileStore::new(stores.clone(), small_records).unwrap();
    let d = dir("d");
    engine.create(&d, "old", 1).unwrap();
    engine.write(&d, "old", 1, 0, b"from before the view").unwrap();
    engine.flush_writes(&d).unwrap();
    assert_eq!(engine.list(&d).unwrap(), vec!["old"]); // the view is loaded here
    for round in 0..4u64 {
        clock.set(10_000 * (round + 1));
        let name = format!("f{round}");
        engine.create(&d, &name, 1).unwrap();
        engine.write(&d, &name, 2, round, format!("round {round} of writer 2").as_bytes()).unwrap();
        engine.write(&d, &name, 1, 0, b"W1").unwrap();
        engine.write(&d, "old", 2, 5 + round, b"*").unwrap();
        for filler in 0..6 {
            engine.utime(&d, &name, 2, filler, round).unwrap();
        }
    }
    engine.rename(&d, "f0", "renamed", 1).unwrap();
    engine.rename(&d, "f1", "f2", 2).unwrap(); // replaces f2
    engine.unlink(&d, "f3", 1).unwrap();
    engine.truncate(&d, "renamed", 2, 3).unwrap();
    engine.create(&d, "f3", 2).unwrap(); // a new file under a removed name
    engine.write(&d, "f3", 2, 2, b"new").unwrap();
    engine.flush_writes(&d).unwrap();

    let folded = snapshot(&engine, &d);
    let fresh = SmallFileStore::new(stores.clone(), options(&stamper)).unwrap();
    assert_eq!(folded, snapshot(&fresh, &d));
    let names: Vec<&str> = folded.iter().map(|(name, _, _)| name.as_str()).collect();
    assert_eq!(names, ["f2", "f3", "old", "renamed"]);
    assert_eq!(folded[1].2, b"\0\0new");
    // The view was kept, not reloaded: its load saw only "old".
    engine.invalidate_read_cache(&d);
    assert_eq!(snapshot(&engine, &d), folded);
    engine.close().unwrap();
}

/// A reader still holding the view while a flush folds records keeps the
/// version it took: the fold copies the view instead of changing it.
#[test]
fn a_view_held_by_a_reader_is_not_changed_by_a_fold() {
    let stores = memory_stores(1);
    let stamper = stamper();
    let engine = SmallFileStore::new(stores, options(&stamper)).unwrap();
    let d = dir("d");
    engine.create(&d, "a", 0).unwrap();
    engine.write(&d, "a", 0, 0, b"first").unwrap();
    engine.flush_writes(&d).unwrap();
    let held = engine.view(&d).unwrap();
    engine.write(&d, "a", 0, 0, b"FI").unwrap();
    engine.create(&d, "b", 0).unwrap();
    engine.flush_writes(&d).unwrap();
    assert_eq!(held.names(), vec!["a"]);
    let mut buf = [0u8; 5];
    assert_eq!(held.read("a", None, 0, &mut buf).unwrap(), Some(5));
    assert_eq!(&buf, b"first");
    assert_eq!(engine.list(&d).unwrap(), vec!["a", "b"]);
    assert_eq!(read_all(&engine, &d, "a").unwrap(), b"FIrst");
    drop(held);
    // Unshared, the view is folded in place.
    let before = Arc::as_ptr(&engine.view(&d).unwrap());
    engine.unlink(&d, "b", 0).unwrap();
    engine.flush_writes(&d).unwrap();
    assert_eq!(Arc::as_ptr(&engine.view(&d).unwrap()), before);
    assert_eq!(engine.list(&d).unwrap(), vec!["a"]);
    engine.close().unwrap();
}

/// Each remove is one name frame appended: no listing, no log read,
/// however many files the directory holds (the view is folded, not
/// reloaded). Reloading cost a list per backend and a read of every name
/// and index log per remove, quadratic over a directory's removes.
#[test]
fn removes_and_renames_read_no_log() {
    const FILES: usize = 200;
    let counting: Vec<Arc<crate::store::counting::CountingStore>> = memory_stores(2)
        .into_iter()
        .map(|store| Arc::new(crate::store::counting::CountingStore::new(store)))
        .collect();
    let stores: Vec<SharedStore> = counting.iter().map(|store| store.clone() as SharedStore).collect();
    let stamper = stamper();
    let creator = SmallFileStore::new(stores.clone(), options(&stamper)).unwrap();
    let d = dir("many");
    for file in 0..FILES {
        let name = format!("f{file}");
        creator.create(&d, &name, 7).unwrap();
        creator.write(&d, &name, 7, 0, name.as_bytes()).unwrap();
    }
    creator.close().unwrap();
    // A second process, as in mdtest: it stats, renames and removes files
    // it did not create, flushing after each as `Plfs` does.
    let engine = SmallFileStore::new(stores, options(&stamper)).unwrap();
    assert_eq!(engine.list(&d).unwrap().len(), FILES);
    counting.iter().for_each(|store| store.reset());
    for file in 0..FILES {
        let name = format!("f{file}");
        assert_eq!(engine.stat(&d, &name).unwrap().size, name.len() as u64);
        if file % 2 == 0 {
            engine.unlink(&d, &name, 1).unwrap();
        } else {
            engine.rename(&d, &name, &format!("r{file}"), 1).unwrap();
        }
        engine.flush_writes(&d).unwrap();
    }
    let counts: Vec<_> = counting.iter().map(|store| store.counts()).collect();
    let total = |field: fn(&crate::store::counting::OpCounts) -> u64| counts.iter().map(field).sum::<u64>();
    assert_eq!(total(|c| c.lists), 0, "{counts:?}");
    assert_eq!(total(|c| c.opens), 0, "{counts:?}");
    // The session's three logs, then one name frame (append + sync) each.
    assert_eq!(total(|c| c.creates), 3 + 1, "{counts:?}");
    assert_eq!(total(|c| c.appends), 3 + FILES as u64, "{counts:?}");
    assert_eq!(total(|c| c.syncs), FILES as u64, "{counts:?}");
    let renamed: Vec<String> = (1..FILES).step_by(2).map(|file| format!("r{file}")).collect();
    let mut listed = engine.list(&d).unwrap();
    listed.sort_by_key(|name| name[1..].parse::<usize>().unwrap());
    assert_eq!(listed, renamed);
    engine.close().unwrap();
}

/// Appends or flips bytes of one log directly on the store.
fn damage(store: &SharedStore, path: &StorePath, edit: impl FnOnce(&mut Vec<u8>)) {
    let mut bytes = store.read_all(path).unwrap();
    edit(&mut bytes);
    store.replace(path, &bytes).unwrap();
}

fn only_log(store: &SharedStore, directory: &StorePath, kind: SmallLogKind) -> StorePath {
    let container = container_dir(directory).unwrap();
    let mut entries: Vec<StorePath> = store
        .list(&container)
        .unwrap()
        .into_iter()
        .filter(|e| parse_small_log_name(&e.name).is_some_and(|(k, _)| k == kind))
        .map(|e| container.join(&e.name).unwrap())
        .collect();
    assert_eq!(entries.len(), 1);
    entries.pop().unwrap()
}

#[test]
fn torn_tails_are_ignored_and_reported_and_damage_names_log_and_offset() {
    let stores = memory_stores(1);
    let stamper = stamper();
    let engine = SmallFileStore::new(stores.clone(), options(&stamper)).unwrap();
    let d = dir("d");
    engine.create(&d, "a", 0).unwrap();
    engine.write(&d, "a", 0, 0, b"first").unwrap();
    engine.flush_writes(&d).unwrap();
    engine.write(&d, "a", 0, 5, b"second").unwrap();
    engine.flush_writes(&d).unwrap();
    engine.close().unwrap();

    // A torn tail: half a frame appended to the name log.
    let names = only_log(&stores[0], &d, SmallLogKind::Name);
    damage(&stores[0], &names, |bytes| bytes.extend_from_slice(&b"PFRM\x40\0\0\0\x01\0\0\0"[..]));
    let reader = SmallFileStore::new(stores.clone(), options(&stamper)).unwrap();
    assert_eq!(read_all(&reader, &d, "a").unwrap(), b"firstsecond");
    let torn = reader.torn_tails(&d).unwrap();
    assert_eq!(torn.len(), 1);
    assert_eq!((torn[0].log.clone(), torn[0].length), (names.clone(), 12));

    // A flipped byte in the first index frame, with a valid frame after it.
    let index = only_log(&stores[0], &d, SmallLogKind::Index);
    let header_length = 38 + "node-1".len() + 4;
    damage(&stores[0], &index, |bytes| bytes[header_length + 20] ^= 0x10);
    reader.invalidate_read_cache(&d);
    let error = reader.list(&d).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Corrupt);
    let text = error.to_string();
    assert!(text.contains(index.as_str()), "{text}");
    assert!(text.contains(&format!("frame at offset {header_length}")), "{text}");
    assert!(text.contains("mem://b0"), "{text}");
}

#[test]
fn many_writers_many_files_on_memory_stores() {
    many_writers_many_files(memory_stores(3), 16, 1000);
}

#[test]
fn many_writers_many_files_on_posix_stores() {
    let roots: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let stores = roots
        .iter()
        .enumerate()
        .map(|(i, root)| {
            Arc::new(PosixStore::new(root.path(), format!("posix://b{i}")).unwrap()) as SharedStore
        })
        .collect();
    many_writers_many_files(stores, 16, 1000);
}

fn contents(writer: u64, file: u64) -> Vec<u8> {
    let length = 1 + ((writer * 7919 + file * 104_729) % 300) as usize;
    (0..length).map(|i| (writer as usize * 31 + file as usize * 7 + i) as u8).collect()
}

/// Four processes of four writers each create `files` files per writer, in
/// two writes each; a fifth process then checks every name and byte.
fn many_writers_many_files(stores: Vec<SharedStore>, writers: u64, files: u64) {
    let stamper = stamper();
    let d = dir("job/out");
    let processes: Vec<SmallFileStore> =
        (0..4).map(|_| SmallFileStore::new(stores.clone(), options(&stamper)).unwrap()).collect();
    for file in 0..files {
        for writer in 0..writers {
            let process = &processes[(writer % 4) as usize];
            let name = format!("w{writer:02}.f{file:04}");
            let bytes = contents(writer, file);
            let half = bytes.len() / 2;
            process.create(&d, &name, writer).unwrap();
            process.write(&d, &name, writer, half as u64, &bytes[half..]).unwrap();
            process.write(&d, &name, writer, 0, &bytes[..half]).unwrap();
        }
    }
    for process in &processes {
        process.flush_writes(&d).unwrap();
        process.close().unwrap();
    }
    assert_eq!(backend_files(&stores, &d), 3 * writers as usize, "three logs per writer, none per file");

    let reader = SmallFileStore::new(stores.clone(), options(&stamper)).unwrap();
    let names = reader.list(&d).unwrap();
    assert_eq!(names.len() as u64, writers * files);
    for writer in 0..writers {
        for file in 0..files {
            let name = format!("w{writer:02}.f{file:04}");
            assert_eq!(read_all(&reader, &d, &name).unwrap(), contents(writer, file), "{name}");
        }
    }
    assert!(reader.torn_tails(&d).unwrap().is_empty());
}

#[test]
fn open_containers_stay_within_the_bound_and_evicted_ones_are_flushed() {
    let stores = memory_stores(2);
    let stamper = stamper();
    let mut bounded = options(&stamper);
    bounded.max_containers = NonZeroUsize::new(3).unwrap();
    let engine = SmallFileStore::new(stores.clone(), bounded).unwrap();
    for round in 0..3u8 {
        for index in 0..10u8 {
            let d = dir(&format!("dir{index}"));
            let name = format!("r{round}");
            engine.create(&d, &name, 5).unwrap();
            engine.write(&d, &name, 5, 0, &[index, round]).unwrap();
            assert!(engine.open_containers() <= 3, "{} open", engine.open_containers());
        }
    }
    assert_eq!(engine.open_containers(), 3);
    engine.close().unwrap();
    assert_eq!(engine.open_containers(), 0);
    let reader = SmallFileStore::new(stores.clone(), options(&stamper)).unwrap();
    for index in 0..10u8 {
        let d = dir(&format!("dir{index}"));
        assert_eq!(reader.list(&d).unwrap(), vec!["r0", "r1", "r2"]);
        for round in 0..3u8 {
            assert_eq!(read_all(&reader, &d, &format!("r{round}")).unwrap(), [index, round]);
        }
        // Each eviction closed the session; each reopen began a new one.
        assert_eq!(backend_files(&stores, &d) % 3, 0);
    }
}

// ---- Model check -------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Op {
    Create { process: usize, writer: u64, name: usize },
    OpenOrCreate { process: usize, writer: u64, name: usize },
    Write { process: usize, writer: u64, name: usize, offset: u64, length: usize, seed: u8 },
    Truncate { process: usize, writer: u64, name: usize, size: u64 },
    Utime { process: usize, writer: u64, name: usize },
    Unlink { process: usize, writer: u64, name: usize },
    Rename { process: usize, writer: u64, from: usize, to: usize },
    Flush { process: usize },
    Invalidate { process: usize },
    Read { process: usize, name: usize },
    List { process: usize },
}

const NAMES: [&str; 4] = ["a", "b", "c", "d"];
const PROCESSES: usize = 2;

fn op_strategy() -> impl Strategy<Value = Op> {
    let process = 0..PROCESSES;
    let writer = 0u64..2;
    let name = 0..NAMES.len();
    prop_oneof![
        3 => (process.clone(), writer.clone(), name.clone())
            .prop_map(|(process, writer, name)| Op::Create { process, writer, name }),
        2 => (process.clone(), writer.clone(), name.clone())
            .prop_map(|(process, writer, name)| Op::OpenOrCreate { process, writer, name }),
        5 => (process.clone(), writer.clone(), name.clone(), 0u64..40, 1usize..24, any::<u8>()).prop_map(
            |(process, writer, name, offset, length, seed)| Op::Write { process, writer, name, offset, length, seed }),
        1 => (process.clone(), writer.clone(), name.clone(), 0u64..50)
            .prop_map(|(process, writer, name, size)| Op::Truncate { process, writer, name, size }),
        1 => (process.clone(), writer.clone(), name.clone())
            .prop_map(|(process, writer, name)| Op::Utime { process, writer, name }),
        1 => (process.clone(), writer.clone(), name.clone())
            .prop_map(|(process, writer, name)| Op::Unlink { process, writer, name }),
        1 => (process.clone(), writer.clone(), name.clone(), name.clone())
            .prop_map(|(process, writer, from, to)| Op::Rename { process, writer, from, to }),
        2 => process.clone().prop_map(|process| Op::Flush { process }),
        1 => process.clone().prop_map(|process| Op::Invalidate { process }),
        3 => (process.clone(), name).prop_map(|(process, name)| Op::Read { process, name }),
        1 => process.prop_map(|process| Op::List { process }),
    ]
}

/// A namespace change as the model records it; the position in `flushed`
/// order stands for its stamp because one stamper serves both processes.
/// A file has an identity apart from its name (the time of the create that
/// made it), and a session's writes go through keys bound, as the engine's
/// file ids are, by create and open records: `(process, writer, fid)`.
#[derive(Debug, Clone)]
enum Change {
    /// Makes `name` a new file `made` (or empties the file it names) and
    /// binds `key` to it.
    Create {
        name: String,
        made: u64,
        key: Key,
    },
    /// Binds `key` to the file `name` names, or to a new file `made` of
    /// that name if there is none.
    OpenOrCreate {
        name: String,
        made: u64,
        key: Key,
    },
    /// Binds `key` to the file `name` names, if any.
    Open {
        name: String,
        key: Key,
    },
    /// A write through `key`, to the file `file` as the writing process
    /// knew it (what a process folding its own flushed write goes by).
    Write {
        key: Key,
        file: u64,
        offset: u64,
        bytes: Vec<u8>,
    },
    Truncate(String, u64),
    /// Sets times, which the model does not follow (it takes a stamp).
    Utime,
    Delete(String),
    Rename(String, String),
}

type Key = (usize, u64, u64);

/// Names, the file each denotes, and the files' bytes.
#[derive(Debug, Clone, Default)]
struct Files {
    names: BTreeMap<String, u64>,
    data: HashMap<u64, Vec<u8>>,
    /// What each key is bound to (a replay of the store's records).
    bound: HashMap<Key, u64>,
    /// A file a create made (`made`) that found its name taken, and the
    /// file it found (where a process folds its writes to `made`).
    aliases: HashMap<u64, u64>,
    /// The time of the newest change this holds.
    newest: u64,
}

impl Files {
    fn get(&self, name: &str) -> Option<&Vec<u8>> {
        self.data.get(self.names.get(name)?)
    }

    fn listing(&self) -> Vec<String> {
        self.names.keys().cloned().collect()
    }
}

#[derive(Debug, Default)]
struct Session {
    /// Each file's fid, and the name each fid was bound by.
    fids: HashMap<u64, u64>,
    names: Vec<String>,
}

impl Session {
    fn new_fid(&mut self, name: &str, file: u64) -> u64 {
        let fid = self.names.len() as u64;
        self.fids.insert(file, fid);
        self.names.push(name.to_owned());
        fid
    }
}

#[derive(Debug, Default)]
struct ModelProcess {
    pending: Vec<(u64, Change)>,
    /// What this process's unflushed changes made names denote.
    known: HashMap<String, Option<u64>>,
    view: Option<Files>,
    sessions: HashMap<u64, Session>,
}

#[derive(Debug, Default)]
struct Model {
    time: u64,
    flushed: Vec<(u64, Change)>,
    processes: Vec<ModelProcess>,
}

/// Applies changes in order: as a replay of the store does (`fold` false:
/// writes go to the file their key is bound to), or as a process folds
/// its own flushed records into its view (writes go to the file it knew).
fn apply_changes(files: &mut Files, changes: impl IntoIterator<Item = Change>, fold: bool) {
    for change in changes {
        match change {
            Change::Create { name, made, key } => {
                let id = *files.names.entry(name).or_insert(made);
                files.data.insert(id, Vec::new());
                files.bound.insert(key, id);
                if id != made {
                    files.aliases.insert(made, id);
                }
            }
            Change::OpenOrCreate { name, made, key } => {
                let id = *files.names.entry(name).or_insert(made);
                files.data.entry(id).or_default();
                files.bound.insert(key, id);
                if id != made {
                    files.aliases.insert(made, id);
                }
            }
            Change::Open { name, key } => match files.names.get(&name) {
                Some(&id) => {
                    files.bound.insert(key, id);
                }
                None => {
                    files.bound.remove(&key);
                }
            },
            Change::Write { key, file, offset, bytes } => {
                let id = if fold {
                    Some(files.aliases.get(&file).copied().unwrap_or(file))
                } else {
                    files.bound.get(&key).copied()
                };
                if let Some(data) = id.and_then(|id| files.data.get_mut(&id)) {
                    let end = offset as usize + bytes.len();
                    if data.len() < end {
                        data.resize(end, 0);
                    }
                    data[offset as usize..end].copy_from_slice(&bytes);
                }
            }
            Change::Utime => {}
            Change::Truncate(name, size) => {
                if let Some(data) = files.names.get(&name).and_then(|id| files.data.get_mut(id)) {
                    data.resize(size as usize, 0);
                }
            }
            Change::Delete(name) => {
                if let Some(id) = files.names.remove(&name) {
                    files.data.remove(&id);
                }
            }
            Change::Rename(from, to) => {
                if let Some(id) = files.names.remove(&from)
                    && let Some(replaced) = files.names.insert(to, id)
                    && replaced != id
                {
                    files.data.remove(&replaced);
                }
            }
        }
    }
}

impl Model {
    fn store_state(&self) -> Files {
        let mut flushed = self.flushed.clone();
        flushed.sort_by_key(|(time, _)| *time);
        let mut files = Files { newest: flushed.last().map_or(0, |(time, _)| *time), ..Files::default() };
        apply_changes(&mut files, flushed.into_iter().map(|(_, change)| change), false);
        files
    }

    fn view(&mut self, process: usize) -> &Files {
        if self.processes[process].view.is_none() {
            let state = self.store_state();
            self.processes[process].view = Some(state);
        }
        self.processes[process].view.as_ref().expect("loaded above")
    }

    /// The file `name` denotes to `process` (loading its view if need be).
    fn identity(&mut self, process: usize, name: &str) -> Option<u64> {
        match self.processes[process].known.get(name) {
            Some(&known) => known,
            None => self.view(process).names.get(name).copied(),
        }
    }

    fn record(&mut self, process: usize, change: Change) {
        self.time += 1;
        let time = self.time;
        self.processes[process].pending.push((time, change));
    }

    fn know(&mut self, process: usize, name: &str, file: Option<u64>) {
        self.processes[process].known.insert(name.to_owned(), file);
    }

    /// A create (or, not `truncating`, an open-or-create) as the engine
    /// makes it: over a name the process knows without loading a view,
    /// that file; else a new one.
    fn create(&mut self, process: usize, writer: u64, name: &str, truncating: bool) {
        let state = &mut self.processes[process];
        let existing = match state.known.get(name) {
            Some(&known) => known,
            None => state.view.as_ref().and_then(|view| view.names.get(name).copied()),
        };
        let made = self.time + 1;
        let id = existing.unwrap_or(made);
        let session = state.sessions.entry(writer).or_default();
        let fid = match session.fids.get(&id) {
            Some(&fid) if session.names[fid as usize] == name => fid,
            _ => session.new_fid(name, id),
        };
        let (name, key) = (name.to_owned(), (process, writer, fid));
        let change = if truncating {
            Change::Create { name: name.clone(), made, key }
        } else {
            Change::OpenOrCreate { name: name.clone(), made, key }
        };
        self.record(process, change);
        self.know(process, &name, Some(id));
    }

    /// A write as the engine makes it: through the session's key for the
    /// file the name denotes now, bound by an open record the first time.
    fn write(&mut self, process: usize, writer: u64, name: &str, id: u64, offset: u64, bytes: Vec<u8>) {
        let session = self.processes[process].sessions.entry(writer).or_default();
        let fid = match session.fids.get(&id) {
            Some(&fid) => fid,
            None => {
                let fid = session.new_fid(name, id);
                self.record(process, Change::Open { name: name.to_owned(), key: (process, writer, fid) });
                fid
            }
        };
        let key = (process, writer, fid);
        self.record(process, Change::Write { key, file: id, offset, bytes });
    }
}

fn run_model(ops: Vec<Op>) -> std::result::Result<(), TestCaseError> {
    let stores = memory_stores(2);
    let stamper = stamper();
    let engines: Vec<SmallFileStore> = (0..PROCESSES)
        .map(|_| {
            let mut small_buffers = options(&stamper);
            small_buffers.data_buffer_bytes = 16;
            SmallFileStore::new(stores.clone(), small_buffers).unwrap()
        })
        .collect();
    let mut model =
        Model { processes: (0..PROCESSES).map(|_| ModelProcess::default()).collect(), ..Model::default() };
    let d = dir("m");
    for op in ops {
        match op {
            Op::Create { process, writer, name } => {
                engines[process].create(&d, NAMES[name], writer).unwrap();
                model.create(process, writer, NAMES[name], true);
            }
            Op::OpenOrCreate { process, writer, name } => {
                engines[process].open_or_create(&d, NAMES[name], writer).unwrap();
                model.create(process, writer, NAMES[name], false);
            }
            Op::Write { process, writer, name, offset, length, seed } => {
                let bytes: Vec<u8> = (0..length).map(|i| seed.wrapping_add(i as u8)).collect();
                let result = engines[process].write(&d, NAMES[name], writer, offset, &bytes);
                match model.identity(process, NAMES[name]) {
                    Some(id) => {
                        result.unwrap();
                        model.write(process, writer, NAMES[name], id, offset, bytes);
                    }
                    None => prop_assert_eq!(result.unwrap_err().kind(), ErrorKind::NotFound),
                }
            }
            Op::Truncate { process, writer, name, size } => {
                let result = engines[process].truncate(&d, NAMES[name], writer, size);
                if model.identity(process, NAMES[name]).is_some() {
                    result.unwrap();
                    model.record(process, Change::Truncate(NAMES[name].into(), size));
                } else {
                    prop_assert_eq!(result.unwrap_err().kind(), ErrorKind::NotFound);
                }
            }
            Op::Utime { process, writer, name } => {
                let result = engines[process].utime(&d, NAMES[name], writer, 1, 2);
                if model.identity(process, NAMES[name]).is_some() {
                    result.unwrap();
                    // Times are checked elsewhere; here it only takes a stamp.
                    model.record(process, Change::Utime);
                } else {
                    prop_assert_eq!(result.unwrap_err().kind(), ErrorKind::NotFound);
                }
            }
            Op::Unlink { process, writer, name } => {
                let result = engines[process].unlink(&d, NAMES[name], writer);
                if model.identity(process, NAMES[name]).is_some() {
                    result.unwrap();
                    model.record(process, Change::Delete(NAMES[name].into()));
                    model.know(process, NAMES[name], None);
                } else {
                    prop_assert_eq!(result.unwrap_err().kind(), ErrorKind::NotFound);
                }
            }
            Op::Rename { process, writer, from, to } => {
                let result = engines[process].rename(&d, NAMES[from], NAMES[to], writer);
                match model.identity(process, NAMES[from]) {
                    Some(id) => {
                        result.unwrap();
                        model.record(process, Change::Rename(NAMES[from].into(), NAMES[to].into()));
                        model.know(process, NAMES[from], None);
                        model.know(process, NAMES[to], Some(id));
                    }
                    None => prop_assert_eq!(result.unwrap_err().kind(), ErrorKind::NotFound),
                }
            }
            Op::Flush { process } => {
                engines[process].flush_writes(&d).unwrap();
                let state = &mut model.processes[process];
                let pending = std::mem::take(&mut state.pending);
                state.known.clear();
                // The process's own records are folded into its view (if it
                // has one) in their order; others' stay unseen. Unless the
                // view holds a change newer than one of them: folding them
                // after it would not be what a replay does, so the view is
                // loaded again.
                let oldest = pending.first().map_or(u64::MAX, |(time, _)| *time);
                if state.view.as_ref().is_some_and(|view| view.newest > oldest) {
                    state.view = None;
                }
                if let Some(view) = &mut state.view {
                    apply_changes(view, pending.iter().map(|(_, change)| change.clone()), true);
                    view.newest = view.newest.max(pending.last().map_or(0, |(time, _)| *time));
                }
                model.flushed.extend(pending);
            }
            Op::Invalidate { process } => {
                engines[process].invalidate_read_cache(&d);
                model.processes[process].view = None;
            }
            Op::Read { process, name } => {
                let expected = model.view(process).get(NAMES[name]).cloned();
                match expected {
                    Some(bytes) => {
                        prop_assert_eq!(read_all(&engines[process], &d, NAMES[name]).unwrap(), bytes)
                    }
                    None => {
                        let error = engines[process].stat(&d, NAMES[name]).unwrap_err();
                        prop_assert_eq!(error.kind(), ErrorKind::NotFound);
                    }
                }
            }
            Op::List { process } => {
                let expected = model.view(process).listing();
                prop_assert_eq!(engines[process].list(&d).unwrap(), expected);
            }
        }
    }
    // Finally everything is flushed and a fresh process sees the store state.
    for engine in &engines {
        engine.close().unwrap();
    }
    for state in &mut model.processes {
        let pending = std::mem::take(&mut state.pending);
        model.flushed.extend(pending);
    }
    let fresh = SmallFileStore::new(stores, options(&stamper)).unwrap();
    let expected = model.store_state();
    prop_assert_eq!(fresh.list(&d).unwrap(), expected.listing());
    for name in expected.listing() {
        prop_assert_eq!(&read_all(&fresh, &d, &name).unwrap(), expected.get(&name).unwrap());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn engine_matches_a_model_of_a_directory(ops in proptest::collection::vec(op_strategy(), 1..80)) {
        run_model(ops)?;
    }
}
