//! Golden containers: `testdata/v1` and `testdata/v2` each hold one small
//! container (`/ckpt`, a few KiB) written by a deterministic scenario, so
//! every on-disk record kind of docs/FORMAT.md is pinned byte for byte:
//! access file, version file, data and index log headers, write, pattern
//! (v2) and truncate records, size records in `meta/`, the closed summary
//! (v2; `meta/closed`) and a global index (v1 layout and v2 layered layout).
//!
//! Two checks, per version:
//! - the checked-in bytes read back through the library as the content the
//!   scenario wrote (through the global index and, with it removed, through
//!   the index logs), with every structure at the expected format version;
//! - running the scenario again writes the same bytes. plfs writes only
//!   version 2, so the v1 container is the scenario without pattern records,
//!   re-sealed at version 1 with the v1 global index layout (FORMAT.md §12).
//!
//! After an intended format change, rewrite them with
//! `PLFS_WRITE_FIXTURES=1 cargo test -p plfs-core --lib fixtures::` and say
//! so in FORMAT.md.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::clock::{ManualClock, Stamper};
use crate::config::{BackendRole, Tuning};
use crate::format::access::AccessRecord;
use crate::format::closed::ClosedSummary;
use crate::format::codec::{put_u32, put_u64};
use crate::format::data_log::{DATA_MAGIC, LogHeader};
use crate::format::global_index::{self, GlobalExtent, GlobalIndex};
use crate::format::index_log::{self, Record};
use crate::format::version::VersionRecord;
use crate::fs::{Options, Plfs};
use crate::index::Source;
use crate::load::{self, LoadedIndex, Prefer};
use crate::open::OpenFlags;
use crate::store::posix::PosixStore;
use crate::store::{SharedStore, StorePath};

const FILE: &str = "/ckpt";
const WRITER_HOST: &str = "fixture-host";
const WRITER_PID: u32 = 4242;
const OWNER_UID: u32 = 1000;
const OWNER_GID: u32 = 100;
const MODE: u32 = 0o640;
/// 2023-11-14T22:13:20Z: a fixed clock, so stamps and times never change.
const CLOCK_START_NS: u64 = 1_700_000_000_000_000_000;

/// One step of the scenario, applied to the file and to the oracle.
enum Step {
    Write { writer: u64, offset: u64, length: usize, seed: u8 },
    Truncate { size: u64 },
}

/// Two writers write an interleaved strided run (N-1 strided: a pattern
/// record each in v2, a stride group in the global index); then writer 1
/// writes a plain record, writer 2 overwrites part of it, writer 1 cuts the
/// file inside the runs and writes past the new end, leaving a hole that
/// reads as zeros.
const SCENARIO: &[Step] = &[
    Step::Write { writer: 1, offset: 160, length: 16, seed: 10 },
    Step::Write { writer: 2, offset: 176, length: 16, seed: 20 },
    Step::Write { writer: 1, offset: 192, length: 16, seed: 11 },
    Step::Write { writer: 2, offset: 208, length: 16, seed: 21 },
    Step::Write { writer: 1, offset: 224, length: 16, seed: 12 },
    Step::Write { writer: 2, offset: 240, length: 16, seed: 22 },
    Step::Write { writer: 1, offset: 256, length: 16, seed: 13 },
    Step::Write { writer: 2, offset: 272, length: 16, seed: 23 },
    Step::Write { writer: 1, offset: 0, length: 100, seed: 1 },
    Step::Write { writer: 2, offset: 40, length: 32, seed: 2 },
    Step::Truncate { size: 280 },
    Step::Write { writer: 1, offset: 330, length: 20, seed: 3 },
];

fn data(length: usize, seed: u8) -> Vec<u8> {
    (0..length).map(|index| seed.wrapping_mul(31).wrapping_add(index as u8)).collect()
}

/// What the file holds after the scenario: POSIX semantics, step by step.
fn expected_content() -> Vec<u8> {
    let mut content = Vec::new();
    for step in SCENARIO {
        match *step {
            Step::Write { offset, length, seed, .. } => {
                let end = offset as usize + length;
                if content.len() < end {
                    content.resize(end, 0);
                }
                content[offset as usize..end].copy_from_slice(&data(length, seed));
            }
            Step::Truncate { size } => content.resize(size as usize, 0),
        }
    }
    content
}

fn fixture_dir(version: u16) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("testdata/v{version}"))
}

fn mount(root: &Path, pid: u32, hostname: &str, index_patterns: bool) -> Plfs {
    let store: SharedStore =
        Arc::new(PosixStore::new(root, format!("file://{}", root.display())).expect("backend root exists"));
    let options = Options {
        hostname: hostname.to_owned(),
        pid,
        uid: OWNER_UID,
        gid: OWNER_GID,
        stamper: Stamper::new(Arc::new(ManualClock::new(CLOCK_START_NS))),
        tuning: Tuning { threadpool_size: 1, num_hostdirs: 4, index_patterns, ..Tuning::default() },
    };
    Plfs::new(vec![(store, BackendRole::Any)], options).expect("mount over one posix backend")
}

/// Runs the scenario into a fresh directory and returns every file under it.
fn generate(version: u16) -> BTreeMap<String, Vec<u8>> {
    let root = tempfile::tempdir().unwrap();
    let plfs = mount(root.path(), WRITER_PID, WRITER_HOST, version >= 2);
    let file = plfs.open(FILE, OpenFlags::WRONLY.create(), MODE, 1).unwrap();
    for step in SCENARIO {
        match *step {
            Step::Write { writer, offset, length, seed } => {
                assert_eq!(file.write_as(&data(length, seed), offset, writer).unwrap(), length);
            }
            Step::Truncate { size } => file.truncate(size).unwrap(),
        }
    }
    file.close().unwrap();
    plfs.flatten(FILE).unwrap();
    let mut files = read_tree(root.path());
    if version == 1 {
        let global_v1 = encode_global_v1(&plfs, &files["ckpt/global.index"]);
        downgrade_to_v1(&mut files, global_v1);
    }
    files
}

/// Every file under `root`, by path relative to it ('/'-separated).
fn read_tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(dir: &Path, prefix: &str, files: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let name = format!("{prefix}{}", entry.file_name().to_str().unwrap());
            if entry.file_type().unwrap().is_dir() {
                walk(&entry.path(), &format!("{name}/"), files);
            } else {
                files.insert(name, std::fs::read(entry.path()).unwrap());
            }
        }
    }
    let mut files = BTreeMap::new();
    walk(root, "", &mut files);
    files
}

fn write_tree(root: &Path, files: &BTreeMap<String, Vec<u8>>) {
    for (name, bytes) in files {
        let path = root.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
}

fn last_component(name: &str) -> &str {
    name.rsplit('/').next().unwrap()
}

/// Sets the version field (bytes 8..10) of a record sealed by a CRC32C of
/// everything before its last 4 bytes: access, version, global index.
fn reseal(bytes: &mut [u8], version: u16) {
    bytes[8..10].copy_from_slice(&version.to_le_bytes());
    let body = bytes.len() - 4;
    let crc = crc32c::crc32c(&bytes[..body]);
    bytes[body..].copy_from_slice(&crc.to_le_bytes());
}

/// Sets the version of a log header (FORMAT.md §4), whose CRC32C ends it.
fn reseal_log_header(bytes: &mut [u8], version: u16) {
    bytes[8..10].copy_from_slice(&version.to_le_bytes());
    let length = usize::from(u16::from_le_bytes([bytes[10], bytes[11]]));
    let crc = crc32c::crc32c(&bytes[..length - 4]);
    bytes[length - 4..length].copy_from_slice(&crc.to_le_bytes());
}

/// Version 1 of a global index (FORMAT.md §7): no group, overlay or limit
/// fields, one layer of extents. The v2 index's layers, resolved by the
/// library's merged index, are that one layer.
fn encode_global_v1(plfs: &Plfs, bytes: &[u8]) -> Vec<u8> {
    let index = GlobalIndex::decode(bytes).unwrap();
    let loaded = LoadedIndex::from_global(plfs.state(), &index).unwrap();
    let extents: Vec<GlobalExtent> = loaded
        .index
        .lookup(0, index.eof)
        .into_iter()
        .filter_map(|piece| match piece.source {
            Source::Data { log, physical } => {
                Some(GlobalExtent { logical: piece.logical, length: piece.length, log: log.0, physical })
            }
            Source::Hole => None,
        })
        .collect();
    let mut out = global_index::MAGIC.to_vec();
    out.extend_from_slice(&1u16.to_le_bytes());
    put_u64(&mut out, index.eof);
    put_u32(&mut out, index.logs.len() as u32);
    put_u64(&mut out, extents.len() as u64);
    for log in &index.logs {
        put_u64(&mut out, log.id.stamp);
        put_u64(&mut out, log.id.writer);
        put_u32(&mut out, log.id.pid);
        put_u32(&mut out, log.id.host);
        put_u32(&mut out, log.backend);
        put_u32(&mut out, log.hostdir);
    }
    for extent in &extents {
        put_u64(&mut out, extent.logical);
        put_u64(&mut out, extent.length);
        put_u64(&mut out, extent.physical);
        put_u32(&mut out, extent.log);
        put_u32(&mut out, 0);
    }
    let crc = crc32c::crc32c(&out);
    put_u32(&mut out, crc);
    out
}

fn downgrade_to_v1(files: &mut BTreeMap<String, Vec<u8>>, global_v1: Vec<u8>) {
    // Containers before the closed summary have none: the v1 fixture is
    // also what a container made before it looks like.
    files.remove("ckpt/meta/closed").expect("the scenario leaves a closed summary");
    for (name, bytes) in files.iter_mut() {
        match last_component(name) {
            "access" | "version" => reseal(bytes, 1),
            "global.index" => *bytes = global_v1.clone(),
            leaf if leaf.starts_with("data.") || leaf.starts_with("index.") => reseal_log_header(bytes, 1),
            _ => assert!(name.contains("/meta/"), "{name}: no v1 form known"),
        }
    }
}

fn check_or_write_fixture(version: u16) {
    let generated = generate(version);
    let dir = fixture_dir(version);
    if std::env::var_os("PLFS_WRITE_FIXTURES").is_some() {
        let _ = std::fs::remove_dir_all(&dir);
        write_tree(&dir, &generated);
        return;
    }
    let fixture = read_tree(&dir);
    let names = |files: &BTreeMap<String, Vec<u8>>| files.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(&generated), names(&fixture), "{}: files differ", dir.display());
    for (name, expected) in &fixture {
        let mut written = generated[name].clone();
        if last_component(name) == "version" {
            // The release that wrote the container is no part of the format.
            let mut record = VersionRecord::decode(&written).unwrap();
            record.library_version = VersionRecord::decode(expected).unwrap().library_version;
            written = record.encode();
            reseal(&mut written, version);
        }
        assert!(written == *expected, "{}/{name}: the scenario now writes other bytes", dir.display());
    }
}

#[test]
fn scenario_writes_the_v2_fixture_bytes() {
    check_or_write_fixture(2);
}

#[test]
fn scenario_writes_the_v1_fixture_bytes() {
    check_or_write_fixture(1);
}

/// Every structure of the fixture decodes at `version`, and the index logs
/// hold exactly the record kinds expected of it.
fn check_structures(version: u16, files: &BTreeMap<String, Vec<u8>>) {
    let mut kinds = (0, 0, 0); // write, truncate, pattern records
    let mut logs = 0;
    for (name, bytes) in files {
        let at_version =
            u16::from_le_bytes([bytes.get(8).copied().unwrap_or(0), bytes.get(9).copied().unwrap_or(0)]);
        match last_component(name) {
            "access" => {
                let access = AccessRecord::decode(bytes).unwrap();
                assert_eq!(
                    (access.mode, access.uid, access.gid, at_version),
                    (MODE, OWNER_UID, OWNER_GID, version)
                );
            }
            "version" => assert_eq!(VersionRecord::decode(bytes).unwrap().format_version, version),
            "global.index" => {
                let global = GlobalIndex::decode(bytes).unwrap();
                assert_eq!(
                    (global.eof, global.logs.len(), at_version),
                    (expected_content().len() as u64, 2, version)
                );
                // v2 pins every layer: a stride group and an extent frozen,
                // the later writes in the overlay, the truncate as a limit.
                let layered =
                    (!global.groups.is_empty(), !global.overlay.is_empty(), global.frozen_limit != u64::MAX);
                let expected = if version >= 2 { (true, true, true) } else { (false, false, false) };
                assert_eq!(
                    layered, expected,
                    "(groups, overlay, frozen limit) in the v{version} global index"
                );
            }
            leaf if leaf.starts_with("data.") => {
                let (header, length) = LogHeader::decode(bytes, DATA_MAGIC, "data log").unwrap();
                assert_eq!(
                    (header.pid, header.hostname.as_str(), at_version),
                    (WRITER_PID, WRITER_HOST, version)
                );
                assert!(bytes.len() > length, "{name}: holds data");
            }
            leaf if leaf.starts_with("index.") => {
                logs += 1;
                let decoded = index_log::decode(bytes).unwrap();
                let header = decoded.header.as_ref().expect("a whole header");
                assert_eq!(
                    (header.pid, header.hostname.as_str(), at_version),
                    (WRITER_PID, WRITER_HOST, version)
                );
                assert!(decoded.torn_tail.is_none(), "{name}");
                for record in &decoded.records {
                    match record {
                        Record::Write(_) => kinds.0 += 1,
                        Record::Truncate(_) => kinds.1 += 1,
                        Record::Pattern(_) => kinds.2 += 1,
                    }
                }
            }
            "closed" => {
                let closed = ClosedSummary::decode(bytes).unwrap();
                assert_eq!(
                    (closed.access, closed.eof, at_version),
                    (
                        AccessRecord::decode(&files["ckpt/access"]).unwrap(),
                        expected_content().len() as u64,
                        version
                    )
                );
            }
            _ => assert!(name.starts_with("ckpt/meta/size."), "{name}: unexpected file"),
        }
    }
    assert_eq!(logs, 2, "one log pair per writer");
    // v2: each writer's strided run as one pattern, writer 1's plain write
    // and its write after the truncate, writer 2's plain write. v1: the
    // runs as the eight writes they stand for.
    let expected = if version >= 2 { (3, 1, 2) } else { (11, 1, 0) };
    assert_eq!(kinds, expected, "(write, truncate, pattern) records in v{version}");
}

/// Reads the checked-in container through the library, as another process
/// on another host: through its global index, then through its index logs.
fn check_reads(version: u16) {
    let fixture = read_tree(&fixture_dir(version));
    check_structures(version, &fixture);
    let expected = expected_content();
    let copy = tempfile::tempdir().unwrap();
    write_tree(copy.path(), &fixture);
    for from_global_index in [true, false] {
        if !from_global_index {
            std::fs::remove_file(copy.path().join("ckpt/global.index")).unwrap();
        }
        let plfs = mount(copy.path(), 77, "reader-host", true);
        let attr = plfs.stat(FILE).unwrap();
        assert_eq!(
            (attr.size, attr.mode, attr.uid, attr.gid),
            (expected.len() as u64, MODE, OWNER_UID, OWNER_GID)
        );
        assert_eq!(plfs.file_version(FILE).unwrap().format_version, version);
        let loaded =
            load::load_index(plfs.state(), &StorePath::parse("ckpt").unwrap(), Prefer::GlobalIndex).unwrap();
        assert_eq!(loaded.from_global_index, from_global_index);
        let file = plfs.open(FILE, OpenFlags::RDONLY, 0, 5).unwrap();
        let mut content = vec![0xEE; expected.len() + 10];
        assert_eq!(file.read(&mut content, 0).unwrap(), expected.len());
        content.truncate(expected.len());
        file.close().unwrap();
        assert!(content == expected, "v{version}, global index {from_global_index}: content differs");
    }
}

#[test]
fn v2_fixture_reads_back_byte_for_byte() {
    check_reads(2);
}

#[test]
fn v1_fixture_reads_back_byte_for_byte() {
    check_reads(1);
}

/// A stat answers alike from the closed summary (`statx` and one read)
/// and, where a container has none (made before it, or with it removed),
/// from the access file and `meta/`.
#[test]
fn a_container_without_its_closed_summary_stats_the_same() {
    let copy = tempfile::tempdir().unwrap();
    write_tree(copy.path(), &read_tree(&fixture_dir(2)));
    let with = mount(copy.path(), 77, "reader-host", true).stat(FILE).unwrap();
    std::fs::remove_file(copy.path().join("ckpt/meta/closed")).unwrap();
    let without = mount(copy.path(), 78, "reader-host", true).stat(FILE).unwrap();
    assert_eq!(with, without);
    assert_eq!(with.size, expected_content().len() as u64);
}

/// The striped container (`testdata/striped`, FORMAT.md §15): three
/// backends `b0`..`b2`, the file `/ckpt` under `-E 128K -c 1 -E -1 -c -1`
/// with 64 KiB stripes. Two writers write a few sparse pieces, one across
/// the component boundary (split in two logs), so the layout file, a
/// stripes record per component and stripe logs on every backend are
/// pinned, small because the file is sparse.
mod striped {
    use super::*;
    use crate::striping::{Component, Layout, StripeCount, StripingConfig};

    const BACKENDS: usize = 3;
    const UNIT: u64 = 64 * 1024;
    /// (writer, offset, length, seed)
    const WRITES: &[(u64, u64, usize, u8)] = &[
        (1, 0, 100, 1),
        (2, 2 * UNIT - 16, 32, 2),
        (1, 3 * UNIT + 100, 40, 3),
        (2, 4 * UNIT + 7, 20, 4),
        (1, 10, 5, 5),
    ];

    fn layout() -> Layout {
        Layout::new(vec![
            Component {
                start: 0,
                end: Some(2 * UNIT),
                stripe_count: StripeCount::Count(1),
                stripe_size: UNIT,
                pool: None,
            },
            Component {
                start: 2 * UNIT,
                end: None,
                stripe_count: StripeCount::All,
                stripe_size: UNIT,
                pool: None,
            },
        ])
        .unwrap()
    }

    fn expected_content() -> Vec<u8> {
        let mut content = Vec::new();
        for &(_, offset, length, seed) in WRITES {
            let end = offset as usize + length;
            content.resize(content.len().max(end), 0);
            content[offset as usize..end].copy_from_slice(&data(length, seed));
        }
        content
    }

    fn striped_mount(root: &Path, pid: u32, hostname: &str, layout: Option<Layout>) -> Plfs {
        let backends = (0..BACKENDS)
            .map(|index| {
                let dir = root.join(format!("b{index}"));
                std::fs::create_dir_all(&dir).unwrap();
                // A label that does not name the temporary directory: the
                // stripes records keep each backend's location (§15), and
                // the fixture's bytes must not depend on where it was made.
                let store: SharedStore =
                    Arc::new(PosixStore::new(&dir, format!("posix:///striped-fixture/b{index}")).unwrap());
                (store, BackendRole::Any)
            })
            .collect();
        let options = Options {
            hostname: hostname.to_owned(),
            pid,
            uid: OWNER_UID,
            gid: OWNER_GID,
            stamper: Stamper::new(Arc::new(ManualClock::new(CLOCK_START_NS))),
            tuning: Tuning { threadpool_size: 1, num_hostdirs: 4, ..Tuning::default() },
        };
        let striping = StripingConfig { default_layout: layout, ..StripingConfig::default() };
        Plfs::with_striping(backends, options, striping).unwrap()
    }

    fn dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/striped")
    }

    fn generate() -> BTreeMap<String, Vec<u8>> {
        let root = tempfile::tempdir().unwrap();
        let plfs = striped_mount(root.path(), WRITER_PID, WRITER_HOST, Some(layout()));
        let file = plfs.open(FILE, OpenFlags::WRONLY.create(), MODE, 1).unwrap();
        for &(writer, offset, length, seed) in WRITES {
            assert_eq!(file.write_as(&data(length, seed), offset, writer).unwrap(), length);
        }
        file.close().unwrap();
        plfs.flatten(FILE).unwrap();
        read_tree(root.path())
    }

    #[test]
    fn scenario_writes_the_striped_fixture_bytes() {
        let generated = generate();
        if std::env::var_os("PLFS_WRITE_FIXTURES").is_some() {
            let _ = std::fs::remove_dir_all(dir());
            write_tree(&dir(), &generated);
            return;
        }
        let fixture = read_tree(&dir());
        let names = |files: &BTreeMap<String, Vec<u8>>| files.keys().cloned().collect::<Vec<_>>();
        assert_eq!(names(&generated), names(&fixture), "{}: files differ", dir().display());
        for (name, expected) in &fixture {
            let mut written = generated[name].clone();
            if last_component(name) == "version" {
                let mut record = VersionRecord::decode(&written).unwrap();
                record.library_version = VersionRecord::decode(expected).unwrap().library_version;
                written = record.encode();
            }
            assert!(written == *expected, "{}/{name}: the scenario now writes other bytes", dir().display());
        }
    }

    /// The checked-in container reads back byte for byte in a process with
    /// no layout configured, through its global index and its index logs,
    /// and its records decode to the scenario's layout and placements.
    #[test]
    fn striped_fixture_reads_back_byte_for_byte() {
        let fixture = read_tree(&dir());
        let layouts: Vec<&String> = fixture.keys().filter(|name| name.ends_with("/ckpt/layout")).collect();
        assert_eq!(layouts.len(), 1, "one layout file, on the canonical backend");
        assert_eq!(crate::format::striping::decode_layout(&fixture[layouts[0]]).unwrap(), layout());
        let stripes: Vec<crate::format::striping::StripesRecord> = (0..2)
            .map(|component| {
                let name = layouts[0].replace("/layout", &format!("/stripes.{component}"));
                crate::format::striping::StripesRecord::decode(&fixture[&name]).unwrap()
            })
            .collect();
        assert_eq!((stripes[0].backends.len(), stripes[1].backends.len()), (1, BACKENDS));
        let data_logs: BTreeSet<&str> = fixture
            .keys()
            .filter(|name| last_component(name).starts_with("data."))
            .map(|name| &name[..2])
            .collect();
        assert_eq!(data_logs.len(), BACKENDS, "stripe logs on every backend");
        let expected = expected_content();
        let copy = tempfile::tempdir().unwrap();
        write_tree(copy.path(), &fixture);
        for from_global_index in [true, false] {
            if !from_global_index {
                let global = fixture.keys().find(|name| name.ends_with("/global.index")).unwrap();
                std::fs::remove_file(copy.path().join(global)).unwrap();
            }
            let plfs = striped_mount(copy.path(), 77, "reader-host", None);
            assert_eq!(plfs.stat(FILE).unwrap().size, expected.len() as u64);
            let file = plfs.open(FILE, OpenFlags::RDONLY, 0, 5).unwrap();
            let mut content = vec![0xEE; expected.len() + 10];
            assert_eq!(file.read(&mut content, 0).unwrap(), expected.len());
            content.truncate(expected.len());
            file.close().unwrap();
            assert!(content == expected, "global index {from_global_index}: content differs");
            assert!(plfs.recover(FILE, false).unwrap().findings.is_empty());
        }
    }

    use std::collections::BTreeSet;
}
