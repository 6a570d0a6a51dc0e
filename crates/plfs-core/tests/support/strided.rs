//! The N-1 strided checkpoint that the multi-process tests write on every
//! store (POSIX, HDFS, S3): writer `rank` of `writers` writes records
//! `k * writers + rank` of the PLFS papers' unaligned 47001 bytes, and a
//! reader checks every byte of the logical file.
//!
//! Included by each test binary with `#[path]`; not every binary uses every
//! item, hence the `allow`.
#![allow(dead_code)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use plfs::fs::Plfs;
use plfs::open::OpenFlags;

/// The unaligned record size of the PLFS papers' checkpoint benchmark.
pub const RECORD_BYTES: usize = 47001;

/// The byte at `position` of record `record`: distinct per record and
/// position, never zero, so holes and misplaced bytes both show.
pub fn pattern(record: u64, position: usize) -> u8 {
    ((record.wrapping_mul(131) + position as u64 * 7) % 251) as u8 + 1
}

pub fn record_bytes(record: u64) -> Vec<u8> {
    (0..RECORD_BYTES).map(|i| pattern(record, i)).collect()
}

pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// Children wait for a common start time so their opens really race.
pub fn wait_until(start_at_ms: u64) {
    std::thread::sleep(Duration::from_millis(start_at_ms.saturating_sub(now_ms())));
}

/// Writes this rank's records of `path`, then syncs and closes.
pub fn write_strided(plfs: &Plfs, path: &str, rank: u64, writers: u64, records: u64) {
    let handle = plfs.open(path, OpenFlags::WRONLY.create(), 0o644, rank).unwrap();
    for k in 0..records {
        let record = k * writers + rank;
        handle.write(&record_bytes(record), record * RECORD_BYTES as u64).unwrap();
    }
    handle.sync().unwrap();
    handle.close().unwrap();
}

/// Reads `path` (`records` records in all) in chunks that do not line up
/// with records, checking its size and every byte; `between` runs after the
/// first chunk (to disturb the store mid-read).
pub fn verify_strided(plfs: &Plfs, path: &str, records: u64, mut between: impl FnMut()) {
    let size = plfs.stat(path).unwrap().size;
    assert_eq!(size, records * RECORD_BYTES as u64, "{path}: size");
    let handle = plfs.open(path, OpenFlags::RDONLY, 0, 0).unwrap();
    let mut buf = vec![0u8; 300_001];
    let mut offset = 0u64;
    let mut first = true;
    while offset < size {
        let count = handle.read(&mut buf, offset).unwrap();
        assert!(count > 0, "{path}: short read at {offset} of {size}");
        for (i, &byte) in buf[..count].iter().enumerate() {
            let position = offset as usize + i;
            let (record, within) = (position / RECORD_BYTES, position % RECORD_BYTES);
            assert_eq!(byte, pattern(record as u64, within), "{path}: byte {position}");
        }
        offset += count as u64;
        if std::mem::take(&mut first) {
            between();
        }
    }
    handle.close().unwrap();
}

/// `-E -1 -c -1 -S 64K`: one component striped over every backend in
/// 64 KiB units, so each 47001-byte record crosses stripe units and
/// backends. Set explicitly, whatever the mount default is.
pub fn striped_over_every_backend() -> plfs::striping::StripingConfig {
    plfs::striping::StripingConfig {
        default_layout: Some("-E -1 -c -1 -S 64K".parse().unwrap()),
        ..plfs::striping::StripingConfig::default()
    }
}

/// A mount of `backends` with [`striped_over_every_backend`], as a writer
/// on host `host` (each writer process names another host, so their
/// placements race as on a cluster).
pub fn striped_mount(backends: Vec<plfs::store::SharedStore>, host: &str) -> Plfs {
    let backends = backends.into_iter().map(|store| (store, plfs::config::BackendRole::Any)).collect();
    let mut options = plfs::fs::Options::from_environment(plfs::config::Tuning::default());
    options.hostname = host.to_owned();
    Plfs::with_striping(backends, options, striped_over_every_backend()).unwrap()
}

/// A striped file over `backends` backends is laid out as its layout says:
/// one stripes record naming every backend, data logs on every backend,
/// every extent of the map on the backend of its stripe, and nothing for
/// `plfs recover` to report.
pub fn check_striped(plfs: &Plfs, path: &str, backends: usize) {
    let pieces = plfs.query(path).unwrap();
    let records: Vec<_> = pieces.iter().filter(|p| p.kind == plfs::tools::PieceKind::Stripes).collect();
    assert_eq!(records.len(), 1, "{path}: one component, one stripes record: {records:?}");
    let mut placed: Vec<usize> = records[0].stripes.iter().map(|stripe| stripe.backend).collect();
    placed.sort_unstable();
    assert_eq!(placed, (0..backends).collect::<Vec<_>>(), "{path}: a stripe on every backend");
    let mut holding: Vec<usize> = plfs
        .inventory(path)
        .unwrap()
        .logs
        .iter()
        .filter(|log| log.has_data)
        .map(|log| log.backend.0)
        .collect();
    holding.sort_unstable();
    holding.dedup();
    assert_eq!(holding, (0..backends).collect::<Vec<_>>(), "{path}: data logs on every backend");
    let map = plfs.map(path).unwrap();
    for entry in &map.entries {
        let stripe = entry.stripe.unwrap_or_else(|| panic!("{path}: an extent without a stripe: {entry:?}"));
        assert_eq!(records[0].stripes[stripe.stripe as usize].backend, stripe.backend, "{path}: {entry:?}");
    }
    let report = plfs.recover(path, false).unwrap();
    assert!(report.findings.is_empty(), "{path}: {report:?}");
}
