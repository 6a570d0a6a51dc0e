//! PLFS 2.5 fixtures: `testdata/plfs25/<scenario>/` each hold the two
//! backends (`b0`, `b1`) of a site that PLFS 2.5 wrote one file to, in
//! 2.5's byte format as the inventory and 2.5's sources describe it (see
//! `format::plfs25`). A small generator below writes them the way 2.5 did:
//! the container on the backend 2.5 hashed its name to, `drwx------`
//! directories and an 0600 access file, one data dropping per writer pid
//! and one index dropping per open, a writer's contiguous writes merged
//! into one entry, a size record in `meta/` at close.
//!
//! Two checks per scenario: running the generator again writes the same
//! bytes (files and symlinks), and the checked-in bytes read back through
//! the library as what the writers wrote, in the order 2.5's timestamps
//! give them. `PLFS_WRITE_FIXTURES=1 cargo test -p plfs-core --lib
//! plfs25_fixtures::` rewrites them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::clock::{ManualClock, Stamper};
use crate::config::{BackendRole, Tuning};
use crate::error::ErrorKind;
use crate::format::plfs25::{self as format, ACCESS_FILE, DroppingName, Entry, GlobalIndex};
use crate::fs::{Options, Plfs};
use crate::open::OpenFlags;
use crate::store::SharedStore;
use crate::store::posix::PosixStore;

/// Where the site's backends were mounted when 2.5 wrote: absolute paths
/// inside metalinks and the global index name them, and they do not exist
/// here, so readers must find the pieces on the mount's own backends.
const SITE_BACKENDS: [&str; 2] = ["/plfs25-site/store0", "/plfs25-site/store1"];
const NUM_HOSTDIRS: usize = 32;
/// 2014-05-13: when 2.5 was current.
const EPOCH_SEC: u64 = 1_400_000_000;

pub(crate) const SCENARIOS: &[&str] = &["strided", "overlap", "truncate", "metalink", "flattened", "open"];

/// One 2.5 open for write: a pid's data dropping and index dropping.
struct Writer {
    host: String,
    pid: i32,
    /// `<sec>.<usec>` of the open, in both droppings' names.
    stamp: String,
    data: Vec<u8>,
    entries: Vec<Entry>,
}

impl Writer {
    fn new(host: &str, pid: i32, usec: u64) -> Writer {
        Writer {
            host: host.to_owned(),
            pid,
            stamp: format!("{EPOCH_SEC}.{usec:06}"),
            data: Vec::new(),
            entries: Vec::new(),
        }
    }

    /// A write at `offset` at time `usec` (microseconds past the epoch
    /// second, lasting 1 µs): appended to the data dropping; merged into
    /// the last entry when it continues it logically and physically.
    fn write(&mut self, offset: u64, bytes: &[u8], usec: u64) {
        let physical = self.data.len() as u64;
        self.data.extend_from_slice(bytes);
        let begin = EPOCH_SEC as f64 + usec as f64 * 1e-6;
        let end = begin + 1e-6;
        if let Some(last) = self.entries.last_mut()
            && last.logical + last.length == offset
            && last.physical + last.length == physical
        {
            last.length += bytes.len() as u64;
            last.end = end;
            return;
        }
        self.entries.push(Entry {
            logical: offset,
            physical,
            length: bytes.len() as u64,
            begin,
            end,
            id: self.pid,
            tail: 0,
        });
    }

    fn eof(&self) -> u64 {
        self.entries.iter().map(|entry| entry.logical + entry.length).max().unwrap_or(0)
    }

    fn hostdir(&self) -> String {
        format!("{}{}", format::HOSTDIR_PREFIX, format::backend_slot(&self.host, NUM_HOSTDIRS))
    }

    fn index_name(&self) -> String {
        DroppingName { index: true, stamp: self.stamp.clone(), host: self.host.clone(), pid: self.pid }.name()
    }

    fn data_name(&self) -> String {
        DroppingName { index: false, stamp: self.stamp.clone(), host: self.host.clone(), pid: self.pid }
            .name()
    }

    fn index_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for entry in &self.entries {
            entry.encode(&mut out);
        }
        out
    }

    /// The size record 2.5 wrote at close: `<eof>.<bytes>.<sec>.<usec>.<host>`.
    fn meta_name(&self, close_usec: u64) -> String {
        format!("{}.{}.{EPOCH_SEC}.{close_usec:06}.{}", self.eof(), self.data.len(), self.host)
    }
}

/// A site's backends as files and symlinks, by '/'-separated path
/// (`b0/...`, `b1/...`).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Tree {
    pub(crate) files: BTreeMap<String, Vec<u8>>,
    pub(crate) links: BTreeMap<String, String>,
}

fn data(length: usize, seed: u8) -> Vec<u8> {
    (0..length).map(|index| seed.wrapping_mul(37).wrapping_add(index as u8 ^ seed)).collect()
}

/// The logical file name of a scenario, and the backend 2.5 put it on.
fn placed(scenario: &str) -> (String, usize) {
    let name = format!("{scenario}.ckpt");
    let backend = format::backend_slot(&name, 2);
    (name, backend)
}

/// Writes one scenario; returns the tree and what the file holds.
pub(crate) fn generate(scenario: &str) -> (Tree, Vec<u8>) {
    let (name, backend) = placed(scenario);
    let container = format!("b{backend}/{name}");
    let mut tree = Tree::default();
    tree.files.insert(format!("{container}/{ACCESS_FILE}"), Vec::new());
    tree.files.insert(format!("{container}/version-tag.2.5.0-dat.1.0-chk.2166136261"), Vec::new());
    let mut writers = Vec::new();
    // (end time, offset, bytes) of every write: the oracle orders by time.
    let mut history: Vec<(u64, u64, Vec<u8>)> = Vec::new();
    let mut write = |writer: &mut Writer, offset: u64, bytes: Vec<u8>, usec: u64| {
        writer.write(offset, &bytes, usec);
        history.push((usec, offset, bytes));
    };
    let hosts = ["n001.lanl.gov", "n002.lanl.gov", "n003.lanl.gov", "n004.lanl.gov"];
    match scenario {
        // 4 writers, 6 records of 48 bytes each, interleaved (N-1 strided);
        // one writer then writes 3 contiguous records: one entry.
        "strided" | "metalink" | "flattened" | "open" => {
            for (rank, host) in hosts.iter().enumerate() {
                writers.push(Writer::new(host, 100 + rank as i32, 10 + rank as u64));
            }
            for record in 0..6u64 {
                for (rank, writer) in writers.iter_mut().enumerate() {
                    let offset = (record * 4 + rank as u64) * 48;
                    write(
                        writer,
                        offset,
                        data(48, (record * 4 + rank as u64) as u8),
                        100 + record * 10 + rank as u64,
                    );
                }
            }
            // In "open" the writer still writing wrote them: only its
            // index dropping knows the file's end.
            let tail = if scenario == "open" { 3 } else { 0 };
            for record in 0..3u64 {
                write(&mut writers[tail], 1152 + record * 40, data(40, 200 + record as u8), 200 + record);
            }
        }
        // Three writers on one host overwrite each other. 101's first
        // call is its newer write (a clock that ran ahead): entries are in
        // call order, not time order. 102's 50..100 is older than 100's
        // write over it and loses; its 280..330 ties 101's 250..350 on both
        // stamps, and the higher pid wins.
        "overlap" => {
            let mut first = Writer::new(hosts[0], 100, 5);
            let mut second = Writer::new(hosts[0], 101, 6);
            let mut third = Writer::new(hosts[0], 102, 7);
            write(&mut third, 50, data(50, 4), 50);
            write(&mut first, 0, data(300, 1), 100);
            write(&mut second, 250, data(100, 3), 300);
            write(&mut second, 40, data(100, 2), 200);
            write(&mut third, 280, data(50, 6), 300);
            write(&mut first, 340, data(30, 5), 150);
            writers.extend([first, second, third]);
        }
        // One writer writes 0..400, then truncates to 250: 2.5 rewrote the
        // index dropping without the cut entries, left the data dropping
        // whole, and renamed the size record with a nanosecond stamp.
        "truncate" => {
            let mut writer = Writer::new(hosts[0], 100, 5);
            write(&mut writer, 0, data(160, 1), 100);
            write(&mut writer, 160, data(240, 2), 110);
            writers.push(writer);
        }
        _ => panic!("unknown scenario {scenario}"),
    }
    let mut expected = Vec::new();
    history.sort_by_key(|(usec, ..)| *usec);
    for (_, offset, bytes) in &history {
        let end = *offset as usize + bytes.len();
        if expected.len() < end {
            expected.resize(end, 0);
        }
        expected[*offset as usize..end].copy_from_slice(bytes);
    }
    if scenario == "truncate" {
        // 2.5's trunc_map: entries past the cut go, one across it shrinks.
        let writer = &mut writers[0];
        writer.entries.retain(|entry| entry.logical < 250);
        for entry in &mut writer.entries {
            entry.length = entry.length.min(250 - entry.logical);
        }
        expected.truncate(250);
    }
    let other = 1 - backend;
    for (number, writer) in writers.iter().enumerate() {
        let hostdir = writer.hostdir();
        // The metalink scenario's writers 2 and 3 (one host each) put
        // their hostdirs on the shadow backend and linked them.
        let shadowed = scenario == "metalink" && number >= 2;
        let dir =
            if shadowed { format!("b{other}/{name}/{hostdir}") } else { format!("{container}/{hostdir}") };
        if shadowed {
            let link = format!("{}{}", SITE_BACKENDS[backend].len(), SITE_BACKENDS[other]);
            tree.links.insert(format!("{container}/{hostdir}"), link);
        }
        tree.files.insert(format!("{dir}/{}", writer.data_name()), writer.data.clone());
        tree.files.insert(format!("{dir}/{}", writer.index_name()), writer.index_bytes());
        let still_open = scenario == "open" && number == 3;
        if still_open {
            tree.files.insert(format!("{container}/meta/open.{}.{}", writer.host, writer.pid), Vec::new());
        } else if scenario == "truncate" {
            // 250.250.<sec>.<nsec>.<host>: truncateMeta's rename.
            let name = format!("250.250.{EPOCH_SEC}.{:09}.{}", 120_000u64 * 1000, writer.host);
            tree.files.insert(format!("{container}/meta/{name}"), Vec::new());
        } else {
            tree.files
                .insert(format!("{container}/meta/{}", writer.meta_name(900 + number as u64)), Vec::new());
        }
    }
    if scenario == "flattened" {
        let mut global = GlobalIndex { entries: Vec::new(), chunks: Vec::new() };
        for (chunk, writer) in writers.iter().enumerate() {
            global.chunks.push(format!(
                "{}/{name}/{}/{}",
                SITE_BACKENDS[backend],
                writer.hostdir(),
                writer.data_name()
            ));
            for entry in &writer.entries {
                global.entries.push(Entry { id: chunk as i32, tail: writer.pid, ..*entry });
            }
        }
        tree.files.insert(format!("{container}/global.index"), global.encode());
    }
    (tree, expected)
}

pub(crate) fn fixture_dir(scenario: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/plfs25").join(scenario)
}

pub(crate) fn read_tree(root: &Path) -> Tree {
    fn walk(dir: &Path, prefix: &str, tree: &mut Tree) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let name = format!("{prefix}{}", entry.file_name().to_str().unwrap());
            let kind = entry.file_type().unwrap();
            if kind.is_symlink() {
                tree.links
                    .insert(name, std::fs::read_link(entry.path()).unwrap().to_str().unwrap().to_owned());
            } else if kind.is_dir() {
                walk(&entry.path(), &format!("{name}/"), tree);
            } else {
                tree.files.insert(name, std::fs::read(entry.path()).unwrap());
            }
        }
    }
    let mut tree = Tree::default();
    walk(root, "", &mut tree);
    tree
}

/// Writes `tree` under `root` as 2.5 left it: directories 0700, the
/// access file 0600 (git keeps neither mode).
pub(crate) fn write_tree(root: &Path, tree: &Tree) {
    use std::os::unix::fs::PermissionsExt;
    for (name, bytes) in &tree.files {
        let path = root.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, bytes).unwrap();
        if name.ends_with(ACCESS_FILE) {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
    }
    for (name, target) in &tree.links {
        let path = root.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, path).unwrap();
    }
    for backend in ["b0", "b1"] {
        std::fs::create_dir_all(root.join(backend)).unwrap();
    }
}

/// A mount over the two backends at `root`, as another host.
pub(crate) fn mount(root: &Path) -> Plfs {
    let backends: Vec<(SharedStore, BackendRole)> = ["b0", "b1"]
        .iter()
        .map(|backend| {
            let dir = root.join(backend);
            let store = PosixStore::new(&dir, format!("posix://{}", dir.display())).unwrap();
            (Arc::new(store) as SharedStore, BackendRole::Any)
        })
        .collect();
    let options = Options {
        hostname: "reader-host".to_owned(),
        pid: 7,
        uid: 0,
        gid: 0,
        stamper: Stamper::new(Arc::new(ManualClock::new(1_700_000_000_000_000_000))),
        tuning: Tuning { threadpool_size: 1, ..Tuning::default() },
    };
    Plfs::new(backends, options).unwrap()
}

#[test]
fn generator_writes_the_checked_in_bytes() {
    for scenario in SCENARIOS {
        let (generated, _) = generate(scenario);
        let dir = fixture_dir(scenario);
        if std::env::var_os("PLFS_WRITE_FIXTURES").is_some() {
            let _ = std::fs::remove_dir_all(&dir);
            write_tree(&dir, &generated);
            continue;
        }
        let fixture = read_tree(&dir);
        assert_eq!(
            generated.files.keys().collect::<Vec<_>>(),
            fixture.files.keys().collect::<Vec<_>>(),
            "{scenario}: files differ"
        );
        assert_eq!(generated.links, fixture.links, "{scenario}: metalinks differ");
        for (name, bytes) in &fixture.files {
            assert!(
                generated.files[name] == *bytes,
                "{scenario}: {name}: the generator now writes other bytes"
            );
        }
    }
}

/// The fixture of `scenario` copied to a fresh directory, mounted.
pub(crate) fn copy(scenario: &str) -> (tempfile::TempDir, Plfs, String, Vec<u8>) {
    let root = tempfile::tempdir().unwrap();
    write_tree(root.path(), &read_tree(&fixture_dir(scenario)));
    let plfs = mount(root.path());
    let (name, _) = placed(scenario);
    (root, plfs, format!("/{name}"), generate(scenario).1)
}

fn read_all(plfs: &Plfs, path: &str) -> Vec<u8> {
    let file = plfs.open(path, OpenFlags::RDONLY, 0, 1).unwrap();
    let mut content = vec![0xEE; 8192];
    let length = file.read(&mut content, 0).unwrap();
    content.truncate(length);
    // A read in the middle, across extents.
    let mut middle = [0u8; 100];
    let got = file.read(&mut middle, 130).unwrap();
    assert_eq!(&middle[..got], &content[130.min(length)..(130 + got).min(length)]);
    file.close().unwrap();
    content
}

#[test]
fn every_fixture_reads_back_byte_for_byte() {
    for scenario in SCENARIOS {
        let (_root, plfs, path, expected) = copy(scenario);
        let attr = plfs.stat(&path).unwrap();
        assert_eq!(
            (attr.size, attr.mode, attr.kind),
            (expected.len() as u64, 0o600, crate::attr::FileKind::File),
            "{scenario}"
        );
        let listed = plfs.readdir("/").unwrap();
        assert_eq!(
            listed.iter().map(|entry| (entry.name.as_str(), entry.kind)).collect::<Vec<_>>(),
            vec![(&path[1..], crate::attr::FileKind::File)],
            "{scenario}: readdir"
        );
        assert!(read_all(&plfs, &path) == expected, "{scenario}: content differs");
    }
}

#[test]
fn the_flattened_index_is_used_and_the_truncated_bytes_stay_hidden() {
    // With its index droppings gone, the flattened file still reads: from
    // global.index, whose absolute paths (moved) resolve by hostdir.
    let (root, plfs, path, expected) = copy("flattened");
    for name in read_tree(root.path()).files.keys().filter(|name| name.contains("dropping.index.")) {
        std::fs::remove_file(root.path().join(name)).unwrap();
    }
    assert!(read_all(&plfs, &path) == expected);
    // The truncated file's data dropping still holds 400 bytes.
    let (root, plfs, path, expected) = copy("truncate");
    let tree = read_tree(root.path());
    let data = tree.files.iter().find(|(name, _)| name.contains("dropping.data.")).unwrap().1;
    assert_eq!((data.len(), expected.len()), (400, 250));
    let file = plfs.open(&path, OpenFlags::RDONLY, 0, 1).unwrap();
    assert_eq!(file.read(&mut [0u8; 10], 250).unwrap(), 0, "nothing past the truncate");
    file.close().unwrap();
}

#[test]
fn a_metalink_is_followed_to_its_absolute_path_and_to_the_mount_when_moved() {
    // Moved (the fixture's /plfs25-site paths do not exist): the same
    // path on the mount's other backend. Shown by the default read above;
    // here the shadow hostdirs leave the mount and the link names them.
    let (root, _, path, expected) = copy("metalink");
    let (_, backend) = placed("metalink");
    let other = 1 - backend;
    let elsewhere = root.path().join("elsewhere");
    std::fs::rename(root.path().join(format!("b{other}")), &elsewhere).unwrap();
    std::fs::create_dir(root.path().join(format!("b{other}"))).unwrap();
    let canonical_root = root.path().join(format!("b{backend}"));
    for entry in std::fs::read_dir(canonical_root.join(&path[1..])).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_symlink() {
            let text = format!("{}{}", canonical_root.to_str().unwrap().len(), elsewhere.display());
            std::fs::remove_file(entry.path()).unwrap();
            std::os::unix::fs::symlink(text, entry.path()).unwrap();
        }
    }
    let plfs = mount(root.path());
    assert!(read_all(&plfs, &path) == expected);
    // Neither there nor on the mount: the error names the link's target.
    std::fs::remove_dir_all(&elsewhere).unwrap();
    let error = plfs.open(&path, OpenFlags::RDONLY, 0, 1).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotFound, "{error}");
    assert!(error.to_string().contains("metalink to"), "{error}");
}

#[test]
fn changes_fail_naming_plfs_migrate_and_nothing_is_written() {
    let (root, plfs, path, expected) = copy("strided");
    let before = read_tree(root.path());
    let attempts = [
        plfs.open(&path, OpenFlags::WRONLY, 0, 1).map(|_| ()),
        plfs.open(&path, OpenFlags::RDWR.create(), 0o644, 1).map(|_| ()),
        plfs.truncate(&path, 10),
        plfs.chmod(&path, 0o644),
        plfs.rename(&path, "/elsewhere"),
    ];
    for attempt in attempts {
        let error = attempt.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::PermissionDenied, "{error}");
        assert!(error.to_string().contains("plfs migrate"), "{error}");
    }
    assert_eq!(
        plfs.open(&path, OpenFlags::WRONLY.create().exclusive(), 0o644, 1).unwrap_err().kind(),
        ErrorKind::AlreadyExists
    );
    assert!(read_tree(root.path()) == before, "a refused change wrote something");
    assert!(read_all(&plfs, &path) == expected);
    // Unlink is allowed: the name and every piece go.
    plfs.unlink(&path).unwrap();
    assert_eq!(plfs.stat(&path).unwrap_err().kind(), ErrorKind::NotFound);
    assert!(read_tree(root.path()).files.is_empty());
}

#[test]
fn map_query_and_version_say_plfs_25_and_show_the_droppings() {
    use crate::tools::PieceKind;
    let (_root, plfs, path, expected) = copy("metalink");
    let map = plfs.map(&path).unwrap();
    assert!(map.format.as_deref().unwrap().starts_with("PLFS 2.5 container"), "{:?}", map.format);
    // 4 writers; 6 strided records each, writer 100's 3 contiguous ones
    // merged into one entry: 25 entries of 48 bytes.
    assert_eq!((map.totals.eof, map.totals.writers, map.totals.logs), (expected.len() as u64, 4, 4));
    assert!(map.format.as_deref().unwrap().contains("25 entries, 1200 bytes on disk (index droppings)"));
    let pieces = plfs.query(&path).unwrap();
    let count = |kind: PieceKind| pieces.iter().filter(|piece| piece.kind == kind).count();
    assert_eq!(
        [
            PieceKind::Plfs25Container,
            PieceKind::Metalink,
            PieceKind::IndexLog,
            PieceKind::DataLog,
            PieceKind::SizeRecord
        ]
        .map(count),
        [1, 2, 4, 4, 4],
        "{pieces:#?}"
    );
    let version = plfs.file_version(&path).unwrap();
    assert_eq!(
        (version.format_version, version.library_version.as_str()),
        (0, "PLFS 2.5.0 (data format 1.0)")
    );
    for refused in [plfs.flatten(&path).map(|_| ()), plfs.recover(&path, true).map(|_| ())] {
        let error = refused.unwrap_err();
        assert!(
            error.kind() == ErrorKind::PermissionDenied && error.to_string().contains("plfs migrate"),
            "{error}"
        );
    }
    // The open file: stat sizes it from the open writer's index dropping.
    let (_root, plfs, path, expected) = copy("open");
    assert_eq!(plfs.stat(&path).unwrap().size, expected.len() as u64);
}
