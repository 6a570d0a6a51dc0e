//! The one behavioural suite every [`Store`] and store wrapper must pass.
//!
//! A store's tests call [`run_all`] (or single checks). Each check works in
//! a fresh, uniquely named directory under the root that it creates itself
//! and removes when it passes, so the suite can run on a shared backend.
//! Behaviour that legitimately differs between stores is chosen by
//! [`Capabilities`](super::Capabilities), never by the store's type. Checks panic on failure.

use std::fmt::Debug;
use std::process;
use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::path::NAME_MAX_BYTES;
use super::{EntryKind, NewPiece, Protection, Store, StoreExt, StorePath, WriteOpen};
use crate::error::{ErrorKind, Result};

/// Threads in each race: enough to make a non-atomic store lose often.
const RACERS: usize = 16;

/// Runs every check.
pub fn run_all(store: &dyn Store) {
    directories(store);
    create_new_is_atomic_and_exclusive(store);
    create_new_race(store);
    create_new_deferred_then_settle(store);
    fill_private_dir(store);
    replace_overwrites(store);
    append_and_read(store);
    persist_then_publish(store);
    create_append_is_exclusive(store);
    random_writes(store);
    rename_files(store);
    rename_directories(store);
    rename_race(store);
    exchange(store);
    metadata_kinds_and_sizes(store);
    attributes(store);
    symlinks(store);
    remove(store);
    space(store);
    parallel_logs(store);
}

/// mkdir exclusivity, `mkdir -p` idempotence, listing, and directory errors.
pub fn directories(store: &dyn Store) {
    let caps = store.capabilities();
    let d = scratch(store, "directories");
    if caps.directories {
        ok(store.create_dir(&at(&d, "a"), 0o755), "create_dir a");
        fails(store.create_dir(&at(&d, "a"), 0o755), ErrorKind::AlreadyExists, "create_dir a again");
        fails(
            store.create_dir(&at(&d, "missing/x"), 0o755),
            ErrorKind::NotFound,
            "create_dir under a missing parent",
        );
        fails(
            store.create_dir(&StorePath::root(), 0o755),
            ErrorKind::AlreadyExists,
            "create_dir of the root",
        );
    }
    for _ in 0..2 {
        ok(store.create_dir_all(&at(&d, "p/q/r")), "create_dir_all p/q/r");
    }
    ok(store.create_dir_all(&at(&d, "p")), "create_dir_all of an existing directory");
    ok(store.create_dir_all(&StorePath::root()), "create_dir_all of the root");
    assert_eq!(kind(store, &at(&d, "p/q/r")), EntryKind::Directory);
    ok(store.create_new(&at(&d, "f"), b"file"), "create_new f");

    let mut expected = vec![("f", EntryKind::File), ("p", EntryKind::Directory)];
    if caps.directories {
        expected.insert(0, ("a", EntryKind::Directory));
    }
    assert_eq!(names(store, &d), owned(&expected));
    assert_eq!(names(store, &at(&d, "p/q/r")), owned(&[]), "a new directory lists empty");
    assert_eq!(names(store, &at(&d, "p")), owned(&[("q", EntryKind::Directory)]));

    if caps.directories {
        directory_errors(store, &d);
    }
    remove_tree(store, &d);
}

fn directory_errors(store: &dyn Store, d: &StorePath) {
    fails(store.create_dir(&at(d, "f/x"), 0o755), ErrorKind::NotADirectory, "create_dir under a file");
    fails(store.create_dir_all(&at(d, "f/x")), ErrorKind::NotADirectory, "create_dir_all under a file");
    fails(store.create_dir_all(&at(d, "f")), ErrorKind::AlreadyExists, "create_dir_all of a file");
    fails(store.list(&at(d, "missing")), ErrorKind::NotFound, "list of a missing directory");
    fails(store.list(&at(d, "f")), ErrorKind::NotADirectory, "list of a file");
    fails(store.remove_dir(&at(d, "p")), ErrorKind::DirectoryNotEmpty, "remove_dir of p");
    assert_eq!(kind(store, &at(d, "p/q/r")), EntryKind::Directory, "a failed remove_dir kept p");
    ok(store.remove_dir(&at(d, "p/q/r")), "remove_dir p/q/r");
    fails(store.remove_dir(&at(d, "p/q/r")), ErrorKind::NotFound, "remove_dir p/q/r again");
    fails(store.remove_dir(&at(d, "f")), ErrorKind::NotADirectory, "remove_dir of a file");
    fails(store.remove_file(&at(d, "p")), ErrorKind::IsADirectory, "remove_file of a directory");
    if store.capabilities().modes {
        ok(store.create_dir(&at(d, "m"), 0o700), "create_dir m 0o700");
        assert_eq!(ok(store.metadata(&at(d, "m")), "metadata m").mode, Some(0o700));
    }
}

/// `create_new` publishes whole files once and leaves no trace when it fails.
pub fn create_new_is_atomic_and_exclusive(store: &dyn Store) {
    let caps = store.capabilities();
    let d = scratch(store, "create_new");
    let x = at(&d, "x");
    ok(store.create_new(&x, b"hello"), "create_new x");
    assert_eq!(read(store, &x), b"hello");
    let meta = ok(store.metadata(&x), "metadata x");
    assert_eq!((meta.kind, meta.size), (EntryKind::File, 5));
    fails(store.create_new(&x, b"other"), ErrorKind::AlreadyExists, "create_new x again");
    assert_eq!(read(store, &x), b"hello", "a failed create_new changed x");

    ok(store.create_new(&at(&d, "empty"), b""), "create_new empty");
    assert_eq!(read(store, &at(&d, "empty")), b"");
    assert_eq!(ok(store.metadata(&at(&d, "empty")), "metadata empty").size, 0);
    let big = pattern(1 << 20, 3);
    ok(store.create_new(&at(&d, "big"), &big), "create_new big");
    assert!(read(store, &at(&d, "big")) == big, "big file read back differently");
    fails(
        store.create_new(&at(&d, "missing/x"), b"x"),
        ErrorKind::NotFound,
        "create_new under a missing parent",
    );

    let mut expected = vec![("big", EntryKind::File), ("empty", EntryKind::File)];
    if caps.directories {
        ok(store.create_dir(&at(&d, "sub"), 0o755), "create_dir sub");
        fails(
            store.create_new(&at(&d, "sub"), b"x"),
            ErrorKind::AlreadyExists,
            "create_new onto a directory",
        );
        expected.push(("sub", EntryKind::Directory));
    }
    expected.push(("x", EntryKind::File));
    assert_eq!(names(store, &d), owned(&expected), "create_new left something behind");
    remove_tree(store, &d);
}

/// Many threads publish one name at once: exactly one wins, whole.
pub fn create_new_race(store: &dyn Store) {
    let d = scratch(store, "create_new_race");
    let target = at(&d, "target");
    let results = race(|i| store.create_new(&target, &contents_for(i)));
    let winner = single_winner(&results, "create_new race");
    assert!(read(store, &target) == contents_for(winner), "the file is not the winner's");
    // Empty files (plfs's meta records) may take a shorter path in a store.
    let empty = at(&d, "empty");
    let results = race(|_| store.create_new(&empty, b""));
    single_winner(&results, "create_new race on an empty file");
    fails(store.create_new(&empty, b""), ErrorKind::AlreadyExists, "create_new empty again");
    assert_eq!(names(store, &d), owned(&[("empty", EntryKind::File), ("target", EntryKind::File)]));
    remove_tree(store, &d);
}

/// `create_new_deferred` is `create_new` whose file may become readable a
/// moment later: reads get all of it, the race has one winner and leaves
/// no debris, a file removed before `settle` is no failure.
pub fn create_new_deferred_then_settle(store: &dyn Store) {
    let d = scratch(store, "create_new_deferred");
    let (x, gone) = (at(&d, "x"), at(&d, "gone"));
    ok(store.create_new_deferred(&x, b"deferred"), "create_new_deferred x");
    assert_eq!(read(store, &x), b"deferred", "a deferred file read back differently");
    assert_eq!(ok(store.metadata(&x), "metadata x").size, 8);
    fails(store.create_new_deferred(&x, b"other"), ErrorKind::AlreadyExists, "create_new_deferred x again");
    fails(store.create_new(&x, b"other"), ErrorKind::AlreadyExists, "create_new onto a deferred file");
    let target = at(&d, "target");
    let results = race(|i| store.create_new_deferred(&target, &contents_for(i)));
    let winner = single_winner(&results, "create_new_deferred race");
    ok(store.create_new_deferred(&gone, b"removed before settle"), "create_new_deferred gone");
    ok(store.remove_file(&gone), "remove a deferred file");
    ok(store.settle(), "settle");
    assert!(read(store, &target) == contents_for(winner), "the file is not the winner's");
    assert_eq!(names(store, &d), owned(&[("target", EntryKind::File), ("x", EntryKind::File)]));
    ok(store.settle(), "settle with nothing pending");
    remove_tree(store, &d);
}

/// `fill_private_dir` makes every piece with its contents (an empty file
/// too) and protection, readable once settled, and names a piece that
/// cannot be made.
pub fn fill_private_dir(store: &dyn Store) {
    let caps = store.capabilities();
    let d = scratch(store, "fill_private_dir");
    // Made first, as a container create makes its staging directory
    // (a marker where directories are only prefixes).
    let staged = at(&d, "staged");
    ok(store.create_dir(&staged, 0o700), "create_dir staged");
    let (meta, version, access, empty) =
        (at(&staged, "meta"), at(&staged, "version"), at(&staged, "access"), at(&staged, "empty"));
    let (dir_mode, file_mode) = (Protection::mode(0o750), Protection::mode(0o640));
    let big = pattern(70_000, 3);
    let mut pieces = vec![
        NewPiece::File { path: &version, contents: b"version bytes", protection: &file_mode },
        NewPiece::File { path: &access, contents: &big, protection: &file_mode },
        NewPiece::File { path: &empty, contents: b"", protection: &file_mode },
    ];
    if caps.directories {
        pieces.insert(0, NewPiece::Dir { path: &meta, protection: &dir_mode });
    }
    ok(store.fill_private_dir(&staged, &pieces), "fill_private_dir");
    ok(store.settle(), "settle");
    assert_eq!(read(store, &version), b"version bytes");
    assert!(read(store, &access) == big, "a large piece read back differently");
    assert_eq!(read(store, &empty), b"");
    let mut expected =
        vec![("access", EntryKind::File), ("empty", EntryKind::File), ("version", EntryKind::File)];
    if caps.directories {
        expected.insert(2, ("meta", EntryKind::Directory));
        assert_eq!(names(store, &meta), owned(&[]), "a piece directory lists empty");
    }
    assert_eq!(names(store, &staged), owned(&expected));
    if caps.modes {
        assert_eq!(ok(store.metadata(&version), "metadata version").mode, Some(0o640));
        if caps.directories {
            assert_eq!(ok(store.metadata(&meta), "metadata meta").mode, Some(0o750));
        }
    }
    // A piece whose name is taken is an error, never a silent overwrite.
    let again = [NewPiece::File { path: &version, contents: b"other", protection: &file_mode }];
    fails(store.fill_private_dir(&staged, &again), ErrorKind::AlreadyExists, "fill_private_dir onto a piece");
    assert_eq!(read(store, &version), b"version bytes", "a failed fill changed a piece");
    ok(store.fill_private_dir(&staged, &[]), "fill_private_dir with no pieces");
    remove_tree(store, &d);
}

/// `replace` creates or swaps whole contents.
pub fn replace_overwrites(store: &dyn Store) {
    let d = scratch(store, "replace");
    let r = at(&d, "r");
    for contents in [&b"first"[..], b"second, longer", b"3", b""] {
        ok(store.replace(&r, contents), "replace r");
        assert_eq!(read(store, &r), contents);
        assert_eq!(ok(store.metadata(&r), "metadata r").size, contents.len() as u64);
    }
    fails(store.replace(&at(&d, "missing/r"), b"x"), ErrorKind::NotFound, "replace under a missing parent");
    let mut expected = vec![("r", EntryKind::File)];
    if store.capabilities().directories {
        ok(store.create_dir(&at(&d, "sub"), 0o755), "create_dir sub");
        fails(store.replace(&at(&d, "sub"), b"x"), ErrorKind::IsADirectory, "replace onto a directory");
        assert_eq!(kind(store, &at(&d, "sub")), EntryKind::Directory);
        expected.push(("sub", EntryKind::Directory));
    }
    assert_eq!(names(store, &d), owned(&expected), "replace left something behind");
    remove_tree(store, &d);
}

/// Appends track their length and are readable at once, at any offset.
pub fn append_and_read(store: &dyn Store) {
    let d = scratch(store, "append");
    let path = at(&d, "log");
    let mut log = ok(store.create_append(&path), "create_append");
    assert_eq!((log.len(), log.is_empty()), (0, true));
    ok(log.append(b"abc"), "append abc");
    assert_eq!((log.len(), log.is_empty()), (3, false));
    ok(log.append(b""), "empty append");
    assert_eq!(log.len(), 3);
    let chunk = pattern(1000, 7);
    ok(log.append(&chunk), "append chunk");
    assert_eq!(log.len(), 1003);

    let reader = ok(store.open_read(&path), "open_read");
    assert_eq!(ok(reader.len(), "len"), 1003);
    let mut buf = [0u8; 10];
    assert_eq!(ok(reader.read_at(&mut buf[..3], 0), "read_at 0"), 3);
    assert_eq!(&buf[..3], b"abc");
    assert_eq!(ok(reader.read_at(&mut buf, 500), "read_at 500"), 10);
    assert_eq!(buf[..], chunk[497..507]);
    assert_eq!(ok(reader.read_at(&mut buf, 1000), "read_at near EOF"), 3, "short read at EOF");
    assert_eq!(buf[..3], chunk[997..]);
    assert_eq!(ok(reader.read_at(&mut buf, 1003), "read_at EOF"), 0);
    assert_eq!(ok(reader.read_at(&mut buf, 1 << 40), "read_at far past EOF"), 0);
    assert_eq!(ok(reader.read_at(&mut [], 0), "empty read_at"), 0);

    ok(log.append(b"tail"), "append tail");
    assert_eq!(log.len(), 1007);
    assert_eq!(ok(reader.len(), "len after append"), 1007, "an open reader sees appends");
    assert_eq!(ok(reader.read_at(&mut buf, 1003), "read_at tail"), 4);
    assert_eq!(&buf[..4], b"tail");
    ok(log.sync(), "sync");
    ok(log.close(), "close");

    let mut whole = b"abc".to_vec();
    whole.extend_from_slice(&chunk);
    whole.extend_from_slice(b"tail");
    assert!(read(store, &path) == whole, "log read back differently");
    assert_eq!(ok(store.metadata(&path), "metadata log").size, 1007);
    remove_tree(store, &d);
}

/// `persist` then `publish` is a `sync` split in two: what was persisted
/// reads back whole, even before it is published, and several logs can be
/// published at once.
pub fn persist_then_publish(store: &dyn Store) {
    let d = scratch(store, "persist");
    let (first, second) = (at(&d, "first"), at(&d, "second"));
    let mut logs =
        [ok(store.create_append(&first), "create_append"), ok(store.create_append(&second), "create_append")];
    let chunk = pattern(5000, 3);
    for log in &mut logs {
        ok(log.append(&chunk), "append");
        ok(log.persist(), "persist");
    }
    assert!(read(store, &first) == chunk, "persisted, unpublished log read back differently");
    std::thread::scope(|scope| {
        let [a, b] = &mut logs;
        let a = scope.spawn(|| a.publish());
        ok(b.publish(), "publish");
        ok(a.join().expect("publishing thread"), "publish");
    });
    assert!(read(store, &second) == chunk, "published log read back differently");
    for log in &mut logs {
        ok(log.append(b"more"), "append after publish");
        ok(log.persist(), "persist again");
        ok(log.publish(), "publish again");
        assert!(!log.publish_pending(), "a published log still has publishing to do");
    }
    let mut whole = chunk.clone();
    whole.extend_from_slice(b"more");
    for log in logs {
        ok(log.close(), "close");
    }
    for path in [&first, &second] {
        assert!(read(store, path) == whole, "log read back differently after a second publish");
        assert_eq!(ok(store.metadata(path), "metadata log").size, whole.len() as u64);
    }
    remove_tree(store, &d);
}

/// `open_write` writes at any offset, fills gaps with zeros, sets lengths
/// and creates exclusively; a store without `random_writes` refuses it.
pub fn random_writes(store: &dyn Store) {
    let d = scratch(store, "random");
    let path = at(&d, "plain");
    if !store.capabilities().random_writes {
        fails(
            store.open_write(&path, WriteOpen::CreateNew { mode: 0o644 }),
            ErrorKind::Unsupported,
            "open_write",
        );
        remove_tree(store, &d);
        return;
    }
    fails(store.open_write(&path, WriteOpen::Existing), ErrorKind::NotFound, "open_write of a missing file");
    let file = ok(store.open_write(&path, WriteOpen::CreateNew { mode: 0o600 }), "open_write create");
    fails(
        store.open_write(&path, WriteOpen::CreateNew { mode: 0o600 }),
        ErrorKind::AlreadyExists,
        "open_write create of an existing file",
    );
    assert_eq!(ok(file.len(), "len of a new file"), 0);
    ok(file.write_at(b"world", 6), "write_at 6");
    ok(file.write_at(b"hello", 0), "write_at 0");
    ok(file.write_at(b"", 100), "empty write_at");
    assert_eq!(read(store, &path), b"hello\0world", "the gap reads as zeros");
    let mut buf = [0u8; 5];
    assert_eq!(ok(file.read_at(&mut buf, 6), "read_at through the writer"), 5);
    assert_eq!(&buf, b"world");
    ok(file.write_at(b"W", 6), "overwrite");
    ok(file.set_len(8), "set_len shorter");
    assert_eq!(read(store, &path), b"hello\0Wo");
    ok(file.set_len(10), "set_len longer");
    assert_eq!(read(store, &path), b"hello\0Wo\0\0");
    ok(file.sync(), "sync");
    let again = ok(store.open_write(&path, WriteOpen::Existing), "open_write existing");
    ok(again.write_at(b"!", 9), "write_at through a second handle");
    assert_eq!(ok(file.len(), "len seen by the first handle"), 10);
    assert_eq!(read(store, &path), b"hello\0Wo\0!");
    assert_eq!(ok(store.metadata(&path), "metadata").size, 10);
    drop((file, again));
    remove_tree(store, &d);
}

/// `create_append` never opens an existing object.
pub fn create_append_is_exclusive(store: &dyn Store) {
    let d = scratch(store, "create_append");
    let log = at(&d, "log");
    let mut writer = ok(store.create_append(&log), "create_append log");
    ok(writer.append(b"kept"), "append");
    fails(store.create_append(&log), ErrorKind::AlreadyExists, "create_append of an open log");
    ok(writer.close(), "close");
    fails(store.create_append(&log), ErrorKind::AlreadyExists, "create_append of a closed log");
    assert_eq!(read(store, &log), b"kept");
    ok(store.create_new(&at(&d, "f"), b"file"), "create_new f");
    fails(store.create_append(&at(&d, "f")), ErrorKind::AlreadyExists, "create_append of a file");
    assert_eq!(read(store, &at(&d, "f")), b"file");
    fails(
        store.create_append(&at(&d, "missing/log")),
        ErrorKind::NotFound,
        "create_append under a missing parent",
    );
    fails(store.open_read(&at(&d, "missing")), ErrorKind::NotFound, "open_read of a missing file");
    fails(store.read_small(&at(&d, "missing")), ErrorKind::NotFound, "read_small of a missing file");
    if store.capabilities().directories {
        ok(store.create_dir(&at(&d, "sub"), 0o755), "create_dir sub");
        fails(store.create_append(&at(&d, "sub")), ErrorKind::AlreadyExists, "create_append of a directory");
        fails(store.open_read(&at(&d, "sub")), ErrorKind::IsADirectory, "open_read of a directory");
        fails(store.read_small(&at(&d, "sub")), ErrorKind::IsADirectory, "read_small of a directory");
    }
    remove_tree(store, &d);
}

/// Renaming files moves them and never replaces anything.
pub fn rename_files(store: &dyn Store) {
    let d = scratch(store, "rename_files");
    let (a, b, c) = (at(&d, "a"), at(&d, "b"), at(&d, "c"));
    ok(store.create_new(&a, b"A"), "create_new a");
    ok(store.rename(&a, &b), "rename a -> b");
    fails(store.metadata(&a), ErrorKind::NotFound, "metadata of a renamed file");
    assert_eq!(read(store, &b), b"A");
    ok(store.create_new(&c, b"C"), "create_new c");
    fails(store.rename(&c, &b), ErrorKind::AlreadyExists, "rename onto a file");
    fails(store.rename(&c, &c), ErrorKind::AlreadyExists, "rename onto itself");
    fails(store.rename(&at(&d, "missing"), &at(&d, "z")), ErrorKind::NotFound, "rename of a missing file");
    fails(store.rename(&c, &at(&d, "missing/z")), ErrorKind::NotFound, "rename under a missing parent");
    assert_eq!((read(store, &b), read(store, &c)), (b"A".to_vec(), b"C".to_vec()));
    let mut expected = vec![("b", EntryKind::File), ("c", EntryKind::File)];
    if store.capabilities().directories {
        ok(store.create_dir(&at(&d, "sub"), 0o755), "create_dir sub");
        fails(
            store.rename(&c, &at(&d, "sub")),
            ErrorKind::AlreadyExists,
            "rename of a file onto a directory",
        );
        fails(
            store.rename(&at(&d, "sub"), &c),
            ErrorKind::AlreadyExists,
            "rename of a directory onto a file",
        );
        ok(store.rename(&c, &at(&d, "sub/c")), "rename into a directory");
        assert_eq!(read(store, &at(&d, "sub/c")), b"C");
        expected = vec![("b", EntryKind::File), ("sub", EntryKind::Directory)];
    }
    assert_eq!(names(store, &d), owned(&expected));
    remove_tree(store, &d);
}

/// Swaps made by a thread while others read.
const EXCHANGES: usize = 2000;

/// `exchange` swaps two directory trees or two files in one step: a reader
/// racing with it finds one of the two at each name, never nothing. A
/// store without the capability says `Unsupported` and changes nothing.
pub fn exchange(store: &dyn Store) {
    let d = scratch(store, "exchange");
    let (a, b) = (at(&d, "a"), at(&d, "b"));
    ok(store.create_dir_all(&at(&d, "a/sub")), "create_dir_all a/sub");
    ok(store.create_new(&at(&d, "a/sub/f"), b"A"), "create_new a/sub/f");
    ok(store.create_dir_all(&b), "create_dir_all b");
    ok(store.create_new(&at(&d, "b/g"), b"B"), "create_new b/g");
    if !store.capabilities().exchange {
        fails(store.exchange(&a, &b), ErrorKind::Unsupported, "exchange without the capability");
        assert_eq!(read(store, &at(&d, "a/sub/f")), b"A", "a refused exchange changed a");
        remove_tree(store, &d);
        return;
    }
    ok(store.exchange(&a, &b), "exchange a <-> b");
    assert_eq!(read(store, &at(&d, "a/g")), b"B");
    assert_eq!(read(store, &at(&d, "b/sub/f")), b"A");
    fails(store.metadata(&at(&d, "a/sub")), ErrorKind::NotFound, "a/sub after the exchange");
    let (x, y) = (at(&d, "x"), at(&d, "y"));
    ok(store.create_new(&x, b"X"), "create_new x");
    ok(store.create_new(&y, b"Y"), "create_new y");
    ok(store.exchange(&x, &y), "exchange of two files");
    assert_eq!((read(store, &x), read(store, &y)), (b"Y".to_vec(), b"X".to_vec()));
    ok(store.exchange(&x, &a), "exchange of a file and a directory");
    assert_eq!(read(store, &at(&d, "x/g")), b"B");
    assert_eq!(read(store, &a), b"Y");
    fails(store.exchange(&at(&d, "missing"), &y), ErrorKind::NotFound, "exchange with a missing entry");
    fails(store.exchange(&y, &at(&d, "missing")), ErrorKind::NotFound, "exchange onto a missing entry");
    assert_eq!(read(store, &y), b"X", "a failed exchange moved y");

    // Readers of one name while another thread swaps it back and forth.
    let done = std::sync::atomic::AtomicBool::new(false);
    let missing = AtomicU64::new(0);
    thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                while !done.load(Ordering::Acquire) {
                    if let Err(error) = store.metadata(&y) {
                        assert_eq!(error.kind(), ErrorKind::NotFound, "metadata during exchanges: {error}");
                        missing.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
        for _ in 0..EXCHANGES {
            ok(store.exchange(&x, &y), "exchange x <-> y");
        }
        done.store(true, Ordering::Release);
    });
    assert_eq!(missing.load(Ordering::Relaxed), 0, "readers found nothing at y during {EXCHANGES} exchanges");
    remove_tree(store, &d);
}

/// Renaming a directory moves its whole subtree and never replaces.
pub fn rename_directories(store: &dyn Store) {
    if !store.capabilities().directories {
        return;
    }
    let d = scratch(store, "rename_directories");
    let (src, moved) = (at(&d, "src"), at(&d, "moved"));
    ok(store.create_dir_all(&at(&d, "src/sub/deeper")), "create_dir_all src/sub/deeper");
    ok(store.create_new(&at(&d, "src/sub/f"), b"F"), "create_new src/sub/f");
    ok(store.create_new(&at(&d, "src/top"), b"T"), "create_new src/top");
    ok(store.create_dir(&at(&d, "empty"), 0o755), "create_dir empty");
    ok(store.create_new(&at(&d, "file"), b"x"), "create_new file");

    fails(store.rename(&src, &at(&d, "empty")), ErrorKind::AlreadyExists, "rename onto an empty directory");
    fails(store.rename(&src, &at(&d, "file")), ErrorKind::AlreadyExists, "rename of a directory onto a file");
    assert_eq!(names(store, &at(&d, "empty")), owned(&[]), "rename moved into the target");
    assert_eq!(names(store, &src), owned(&[("sub", EntryKind::Directory), ("top", EntryKind::File)]));

    ok(store.rename(&src, &moved), "rename src -> moved");
    fails(store.metadata(&src), ErrorKind::NotFound, "metadata of a renamed directory");
    assert_eq!(read(store, &at(&d, "moved/sub/f")), b"F");
    assert_eq!(read(store, &at(&d, "moved/top")), b"T");
    let sub = owned(&[("deeper", EntryKind::Directory), ("f", EntryKind::File)]);
    assert_eq!(names(store, &at(&d, "moved/sub")), sub);
    fails(
        store.rename(&moved, &at(&d, "moved/sub/inner")),
        ErrorKind::InvalidInput,
        "rename into its own subtree",
    );
    assert_eq!(names(store, &at(&d, "moved/sub")), sub);
    ok(store.rename(&at(&d, "moved/sub"), &at(&d, "sub")), "rename a subdirectory out");
    assert_eq!(read(store, &at(&d, "sub/f")), b"F");
    assert_eq!(names(store, &moved), owned(&[("top", EntryKind::File)]));
    remove_tree(store, &d);
}

/// Many threads rename distinct objects onto one name: exactly one wins and
/// every loser keeps its own object.
pub fn rename_race(store: &dyn Store) {
    let d = scratch(store, "rename_race");
    let target = at(&d, "target");
    let sources: Vec<StorePath> = (0..RACERS).map(|i| at(&d, &format!("tmp.{i}"))).collect();
    for (i, source) in sources.iter().enumerate() {
        ok(store.create_new(source, &contents_for(i)), "create_new a racer");
    }
    let results = race(|i| store.rename(&sources[i], &target));
    let winner = single_winner(&results, "file rename race");
    assert!(read(store, &target) == contents_for(winner), "the target is not the winner's");
    for (i, source) in sources.iter().enumerate().filter(|(i, _)| *i != winner) {
        assert!(read(store, source) == contents_for(i), "a loser lost its file");
    }
    let caps = store.capabilities();
    if caps.directories && caps.atomic_dir_rename {
        directory_rename_race(store, &d);
    }
    remove_tree(store, &d);
}

fn directory_rename_race(store: &dyn Store, d: &StorePath) {
    let target = at(d, "target.dir");
    let sources: Vec<StorePath> = (0..RACERS).map(|i| at(d, &format!("tmp.dir.{i}"))).collect();
    for (i, source) in sources.iter().enumerate() {
        ok(store.create_dir(source, 0o755), "create_dir a racer");
        ok(store.create_new(&at(source, "owner"), i.to_string().as_bytes()), "create owner");
    }
    let results = race(|i| store.rename(&sources[i], &target));
    let winner = single_winner(&results, "directory rename race");
    assert_eq!(read(store, &at(&target, "owner")), winner.to_string().as_bytes());
    assert_eq!(names(store, &target), owned(&[("owner", EntryKind::File)]));
    for (i, source) in sources.iter().enumerate().filter(|(i, _)| *i != winner) {
        assert_eq!(read(store, &at(source, "owner")), i.to_string().as_bytes());
    }
}

/// `metadata` reports kinds and sizes, and errors name the store and path.
pub fn metadata_kinds_and_sizes(store: &dyn Store) {
    let d = scratch(store, "metadata");
    let f = at(&d, "f");
    ok(store.create_new(&f, &pattern(12345, 1)), "create_new f");
    let meta = ok(store.metadata(&f), "metadata f");
    assert_eq!((meta.kind, meta.size), (EntryKind::File, 12345));
    let mut log = ok(store.create_append(&at(&d, "log")), "create_append");
    ok(log.append(&pattern(777, 2)), "append");
    assert_eq!(ok(store.metadata(&at(&d, "log")), "metadata log").size, 777);
    ok(log.close(), "close");
    if store.capabilities().directories {
        assert_eq!(kind(store, &d), EntryKind::Directory);
        fails(store.metadata(&at(&d, "f/x")), ErrorKind::NotADirectory, "metadata under a file");
    }
    let missing = at(&d, "no-such-entry");
    let error = store.metadata(&missing).expect_err("metadata of a missing entry");
    assert_eq!(error.kind(), ErrorKind::NotFound);
    let text = error.to_string();
    assert!(text.contains(store.url()), "error {text:?} does not name the store");
    assert!(text.contains(missing.as_str()), "error {text:?} does not name the path");
    remove_tree(store, &d);
}

/// Modes, owners and times, each only where the capabilities promise them.
pub fn attributes(store: &dyn Store) {
    let caps = store.capabilities();
    let d = scratch(store, "attributes");
    let f = at(&d, "f");
    ok(store.create_new(&f, b"x"), "create_new f");
    if caps.modes {
        modes(store, &d);
    } else {
        fails(store.set_mode(&f, 0o600), ErrorKind::Unsupported, "set_mode without the capability");
    }
    if caps.owners {
        owners(store, &f);
        fails(
            store.set_owner(&at(&d, "missing"), None, None),
            ErrorKind::NotFound,
            "set_owner of a missing file",
        );
    }
    if caps.times {
        times(store, &f);
        fails(
            store.set_times(&at(&d, "missing"), None, None),
            ErrorKind::NotFound,
            "set_times of a missing file",
        );
    }
    remove_tree(store, &d);
}

fn modes(store: &dyn Store, d: &StorePath) {
    let f = at(d, "f");
    for mode in [0o640, 0o600, 0o755] {
        ok(store.set_mode(&f, mode), "set_mode f");
        assert_eq!(ok(store.metadata(&f), "metadata f").mode, Some(mode));
    }
    if store.capabilities().directories {
        ok(store.create_dir(&at(d, "sub"), 0o755), "create_dir sub");
        ok(store.set_mode(&at(d, "sub"), 0o750), "set_mode sub");
        assert_eq!(ok(store.metadata(&at(d, "sub")), "metadata sub").mode, Some(0o750));
    }
    fails(store.set_mode(&at(d, "missing"), 0o600), ErrorKind::NotFound, "set_mode of a missing file");
}

/// Only the caller's own ids: changing to others needs privilege.
fn owners(store: &dyn Store, f: &StorePath) {
    let meta = ok(store.metadata(f), "metadata f");
    let (uid, gid) = (meta.uid.expect("uid with owners"), meta.gid.expect("gid with owners"));
    ok(store.set_owner(f, Some(uid), Some(gid)), "set_owner to the same ids");
    ok(store.set_owner(f, None, None), "set_owner with nothing to change");
    ok(store.set_owner(f, None, Some(gid)), "set_owner of the group only");
    let meta = ok(store.metadata(f), "metadata f");
    assert_eq!((meta.uid, meta.gid), (Some(uid), Some(gid)));
}

/// Whole seconds, so file systems with coarse timestamps still compare exactly.
fn times(store: &dyn Store, f: &StorePath) {
    let at_secs = |secs| UNIX_EPOCH + Duration::from_secs(secs);
    let (a1, m1, m2, a2) =
        (at_secs(1_000_000_000), at_secs(1_100_000_000), at_secs(1_200_000_000), at_secs(1_300_000_000));
    let both = || {
        let meta = ok(store.metadata(f), "metadata f");
        (meta.atime, meta.mtime)
    };
    ok(store.set_times(f, Some(a1), Some(m1)), "set_times both");
    assert_eq!(both(), (Some(a1), Some(m1)));
    ok(store.set_times(f, None, Some(m2)), "set_times mtime only");
    assert_eq!(both(), (Some(a1), Some(m2)));
    ok(store.set_times(f, Some(a2), None), "set_times atime only");
    assert_eq!(both(), (Some(a2), Some(m2)));
}

/// Symlinks are stored as themselves and followed only through paths.
pub fn symlinks(store: &dyn Store) {
    let d = scratch(store, "symlinks");
    let l = at(&d, "l");
    if !store.capabilities().symlinks {
        // A store without links says so (EOPNOTSUPP at the edges) and
        // leaves nothing at the name.
        fails(store.symlink("some/target", &l), ErrorKind::Unsupported, "symlink without the capability");
        assert!(!ok(store.exists(&l), "exists l"), "a refused symlink left an entry behind");
        remove_tree(store, &d);
        return;
    }
    ok(store.symlink("some/target", &l), "symlink l");
    assert_eq!(ok(store.read_link(&l), "read_link l"), "some/target");
    let meta = ok(store.metadata(&l), "metadata l");
    assert_eq!((meta.kind, meta.size), (EntryKind::Symlink, 11));
    fails(store.symlink("other", &l), ErrorKind::AlreadyExists, "symlink onto a symlink");
    fails(store.create_new(&l, b"x"), ErrorKind::AlreadyExists, "create_new onto a dangling symlink");
    fails(store.create_append(&l), ErrorKind::AlreadyExists, "create_append onto a dangling symlink");
    assert_eq!(ok(store.read_link(&l), "read_link l"), "some/target");

    ok(store.create_new(&at(&d, "f"), b"through"), "create_new f");
    fails(store.read_link(&at(&d, "f")), ErrorKind::InvalidInput, "read_link of a file");
    fails(store.read_link(&at(&d, "missing")), ErrorKind::NotFound, "read_link of a missing entry");
    ok(store.symlink("f", &at(&d, "to-f")), "symlink to-f");
    assert_eq!(read(store, &at(&d, "to-f")), b"through", "open_read follows a symlink");
    assert_eq!(kind(store, &at(&d, "to-f")), EntryKind::Symlink, "metadata does not follow");

    if store.capabilities().directories {
        symlinked_directories(store, &d);
    }
    ok(store.rename(&l, &at(&d, "l2")), "rename a symlink");
    assert_eq!(ok(store.read_link(&at(&d, "l2")), "read_link l2"), "some/target");
    ok(store.remove_file(&at(&d, "l2")), "remove_file of a symlink");
    fails(store.read_link(&at(&d, "l2")), ErrorKind::NotFound, "read_link of a removed symlink");
    assert_eq!(read(store, &at(&d, "f")), b"through", "removing a link kept its target");
    ok(store.symlink("loop", &at(&d, "loop")), "symlink loop");
    let error = store.open_read(&at(&d, "loop")).expect_err("open_read of a symlink loop");
    assert_eq!(error.errno(), libc::ELOOP, "{error}");
    remove_tree(store, &d);
}

fn symlinked_directories(store: &dyn Store, d: &StorePath) {
    ok(store.create_dir(&at(d, "real"), 0o755), "create_dir real");
    ok(store.symlink("real", &at(d, "via")), "symlink via");
    ok(store.create_new(&at(d, "via/inner"), b"I"), "create_new through a symlinked directory");
    assert_eq!(read(store, &at(d, "real/inner")), b"I");
    assert_eq!(names(store, &at(d, "via")), owned(&[("inner", EntryKind::File)]));
    fails(store.remove_dir(&at(d, "via")), ErrorKind::NotADirectory, "remove_dir of a symlink");
    ok(store.remove_file(&at(d, "via")), "remove_file of a symlink to a directory");
    assert_eq!(read(store, &at(d, "real/inner")), b"I");
}

/// Removal of files and directories, and its errors.
pub fn remove(store: &dyn Store) {
    let d = scratch(store, "remove");
    let f = at(&d, "f");
    fails(store.remove_file(&f), ErrorKind::NotFound, "remove_file of a missing file");
    ok(store.create_new(&f, b"x"), "create_new f");
    ok(store.remove_file(&f), "remove_file f");
    fails(store.remove_file(&f), ErrorKind::NotFound, "remove_file f again");
    fails(store.metadata(&f), ErrorKind::NotFound, "metadata of a removed file");
    let mut log = ok(store.create_append(&at(&d, "log")), "create_append");
    ok(log.append(b"x"), "append");
    ok(store.remove_file(&at(&d, "log")), "remove_file of an open log");
    ok(log.close(), "close of a removed log");
    if store.capabilities().directories {
        ok(store.create_dir(&at(&d, "sub"), 0o755), "create_dir sub");
        ok(store.remove_dir(&at(&d, "sub")), "remove_dir sub");
        fails(store.remove_dir(&at(&d, "sub")), ErrorKind::NotFound, "remove_dir sub again");
    }
    assert_eq!(names(store, &d), owned(&[]));
    remove_tree(store, &d);
}

/// `space` answers with self-consistent figures.
pub fn space(store: &dyn Store) {
    let info = ok(store.space(), "space");
    assert!(info.block_size > 0, "{info:?}");
    assert!(info.blocks > 0, "{info:?}");
    assert!(info.blocks_free <= info.blocks, "{info:?}");
    assert!(info.blocks_available <= info.blocks_free, "{info:?}");
    assert!(info.files_free <= info.files, "{info:?}");
    assert!(info.name_max >= NAME_MAX_BYTES as u64, "{info:?}");
}

/// Many writers append to their own logs at once without interfering.
pub fn parallel_logs(store: &dyn Store) {
    let d = scratch(store, "parallel_logs");
    let record = |writer: usize, n: usize| format!("{writer}:{n};");
    thread::scope(|scope| {
        for writer in 0..8 {
            let path = at(&d, &format!("log.{writer}"));
            scope.spawn(move || {
                let mut log = ok(store.create_append(&path), "create_append");
                for n in 0..64 {
                    ok(log.append(record(writer, n).as_bytes()), "append");
                }
                ok(log.sync(), "sync");
                ok(log.close(), "close");
            });
        }
    });
    for writer in 0..8 {
        let expected: String = (0..64).map(|n| record(writer, n)).collect();
        assert_eq!(read(store, &at(&d, &format!("log.{writer}"))), expected.as_bytes());
    }
    assert_eq!(names(store, &d).len(), 8);
    remove_tree(store, &d);
}

static SCRATCH_SERIAL: AtomicU64 = AtomicU64::new(0);

/// A directory no other run or check uses.
fn scratch(store: &dyn Store, check: &str) -> StorePath {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_nanos());
    let serial = SCRATCH_SERIAL.fetch_add(1, Ordering::Relaxed);
    let name = format!("conformance.{check}.{}.{serial}.{nanos}", process::id());
    let dir = StorePath::root().join(&name).expect("valid scratch name");
    ok(store.create_dir(&dir, 0o755), "create the scratch directory");
    dir
}

/// Removes what a passing check left; a failing check leaves its evidence.
fn remove_tree(store: &dyn Store, dir: &StorePath) {
    for entry in ok(store.list(dir), "list for cleanup") {
        let path = at(dir, &entry.name);
        if entry.kind == EntryKind::Directory {
            remove_tree(store, &path);
        } else {
            ok(store.remove_file(&path), "remove_file for cleanup");
        }
    }
    ok(store.remove_dir(dir), "remove_dir for cleanup");
}

/// Runs `call(i)` on RACERS threads released together; results by index.
fn race<F>(call: F) -> Vec<Result<()>>
where
    F: Fn(usize) -> Result<()> + Sync,
{
    let barrier = Barrier::new(RACERS);
    thread::scope(|scope| {
        let handles: Vec<_> = (0..RACERS)
            .map(|i| {
                let (barrier, call) = (&barrier, &call);
                scope.spawn(move || {
                    barrier.wait();
                    call(i)
                })
            })
            .collect();
        handles.into_iter().map(|handle| handle.join().expect("racer panicked")).collect()
    })
}

/// The one index that succeeded; every other must have found the name taken.
#[track_caller]
fn single_winner(results: &[Result<()>], what: &str) -> usize {
    let winners: Vec<usize> = (0..results.len()).filter(|&i| results[i].is_ok()).collect();
    assert_eq!(winners.len(), 1, "{what}: winners {winners:?}");
    for error in results.iter().filter_map(|result| result.as_ref().err()) {
        assert_eq!(error.kind(), ErrorKind::AlreadyExists, "{what}: a loser failed with {error}");
    }
    winners[0]
}

/// Distinct contents of distinct lengths, so a mix of two would show.
fn contents_for(i: usize) -> Vec<u8> {
    format!("racer {i};").repeat(1000 + 37 * i).into_bytes()
}

fn pattern(len: usize, seed: usize) -> Vec<u8> {
    (0..len).map(|i| ((i * 31 + seed) % 251) as u8).collect()
}

fn at(dir: &StorePath, relative: &str) -> StorePath {
    relative.split('/').fold(dir.clone(), |path, component| path.join(component).expect("valid test path"))
}

#[track_caller]
fn ok<T>(result: Result<T>, what: &str) -> T {
    match result {
        Ok(value) => value,
        Err(error) => panic!("{what}: unexpected error: {error}"),
    }
}

#[track_caller]
fn fails<T: Debug>(result: Result<T>, kind: ErrorKind, what: &str) {
    match result {
        Ok(value) => panic!("{what}: expected {kind:?}, got Ok({value:?})"),
        Err(error) => assert_eq!(error.kind(), kind, "{what}: wrong error: {error}"),
    }
}

#[track_caller]
fn read(store: &dyn Store, path: &StorePath) -> Vec<u8> {
    ok(store.read_all(path), &format!("read {path}"))
}

#[track_caller]
fn kind(store: &dyn Store, path: &StorePath) -> EntryKind {
    ok(store.metadata(path), &format!("metadata {path}")).kind
}

#[track_caller]
fn names(store: &dyn Store, dir: &StorePath) -> Vec<(String, EntryKind)> {
    let mut entries: Vec<(String, EntryKind)> = ok(store.list(dir), &format!("list {dir}"))
        .into_iter()
        .map(|entry| (entry.name, entry.kind))
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    entries
}

fn owned(entries: &[(&str, EntryKind)]) -> Vec<(String, EntryKind)> {
    entries.iter().map(|(name, kind)| (name.to_string(), *kind)).collect()
}
