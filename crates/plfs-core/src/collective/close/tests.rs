use std::sync::Arc;

use super::*;
use crate::clock::{ManualClock, Stamper};
use crate::collective::LocalComm;
use crate::config::{BackendRole, Tuning};
use crate::container;
use crate::fs::Options;
use crate::open::OpenFlags;
use crate::store::counting::CountingStore;
use crate::store::memory::MemoryStore;
use crate::store::{SharedStore, StoreExt, StorePath};

const PATH: &str = "/checkpoint";
const RECORD_BYTES: usize = 100;
const RECORDS: u64 = 50;

fn backends() -> Vec<SharedStore> {
    (0..2).map(|i| Arc::new(MemoryStore::new(format!("mem://b{i}"))) as SharedStore).collect()
}

/// One rank's own mount over the shared backends, as a separate process
/// would have, counting what it does.
fn rank_mount(
    backends: &[SharedStore],
    rank: usize,
    index_buffer_mbs: u32,
) -> (Plfs, Vec<Arc<CountingStore>>) {
    let counting: Vec<Arc<CountingStore>> =
        backends.iter().map(|store| Arc::new(CountingStore::new(store.clone()))).collect();
    let stores = counting.iter().map(|store| (store.clone() as SharedStore, BackendRole::Any)).collect();
    let pid = 100 + rank as u32;
    let options = Options {
        hostname: format!("node{pid}"),
        pid,
        uid: 1000,
        gid: 100,
        stamper: Stamper::new(Arc::new(ManualClock::new(1_000_000))),
        // Small index frames: many per log, as a long run would append.
        tuning: Tuning { threadpool_size: 2, index_buffer_mbs, index_flush_bytes: 256, ..Tuning::default() },
    };
    (Plfs::new(stores, options).unwrap(), counting)
}

fn index_log_opens(counting: &[Arc<CountingStore>]) -> u64 {
    counting.iter().map(|store| store.counts().index_log_opens).sum()
}

/// Writer `rank` of `ranks` writes its N-1 strided records (with a
/// truncate and an overwrite, so not every record is a plain write) and
/// closes; then the collective flatten on close. Returns its outcome and
/// the index logs this rank opened during the flatten.
fn write_and_close(
    plfs: &Plfs,
    counting: &[Arc<CountingStore>],
    comm: &dyn Comm,
    retain: bool,
) -> (Result<CloseFlatten>, u64) {
    let (rank, ranks) = (comm.rank() as u64, comm.size() as u64);
    if rank == 0 {
        plfs.open(PATH, OpenFlags::WRONLY.create(), 0o644, 0).unwrap().close().unwrap();
    }
    comm.barrier().unwrap();
    let file = plfs.open(PATH, OpenFlags::WRONLY, 0, rank).unwrap();
    if retain {
        retain_index(plfs, PATH).unwrap();
    }
    for k in 0..RECORDS {
        let record = k * ranks + rank;
        let buf = vec![(record % 251) as u8; RECORD_BYTES];
        file.write(&buf, record * RECORD_BYTES as u64).unwrap();
        if k % 7 == 3 {
            // Every few records an out-of-pattern write ends the run.
            file.write(&buf[..10], record * RECORD_BYTES as u64 + 5).unwrap();
        }
    }
    file.close().unwrap();
    let before = index_log_opens(counting);
    let flattened = flatten_on_close(plfs, PATH, comm, true);
    (flattened, index_log_opens(counting) - before)
}

fn global_index_bytes(plfs: &Plfs) -> Vec<u8> {
    let logical = StorePath::parse(PATH).unwrap();
    let (backend, paths) = container::canonical(plfs.state(), &logical);
    plfs.state().store(backend).read_all(&paths.global_index()).unwrap()
}

fn run(
    ranks: usize,
    index_buffer_mbs: u32,
    retain: impl Fn(usize) -> bool + Sync,
) -> (Vec<u8>, Vec<u8>, Vec<(CloseFlatten, u64)>) {
    let backends = backends();
    let outcomes = LocalComm::run(ranks, |comm| {
        let (plfs, counting) = rank_mount(&backends, comm.rank(), index_buffer_mbs);
        let (flattened, opens) = write_and_close(&plfs, &counting, comm, retain(comm.rank()));
        (flattened.unwrap(), opens)
    });
    let (plfs, _) = rank_mount(&backends, 99, index_buffer_mbs);
    let at_close = global_index_bytes(&plfs);
    // What `plfs flatten` writes from the index logs, for comparison.
    plfs.flatten(PATH).unwrap();
    (at_close, global_index_bytes(&plfs), outcomes)
}

#[test]
fn gathered_records_write_the_same_global_index_without_reading_a_log() {
    let (at_close, from_storage, outcomes) = run(4, 64, |_| true);
    assert_eq!(at_close, from_storage);
    for (rank, (report, opens)) in outcomes.iter().enumerate() {
        assert!(report.gathered, "rank {rank}: {report:?}");
        assert_eq!((report.logs, report.logs_read), (4, 0), "rank {rank}");
        assert!(report.gathered_bytes > 0);
        assert_eq!(*opens, 0, "rank {rank} opened index logs at close");
    }
}

#[test]
fn past_index_buffer_mbs_rank_0_reads_the_logs() {
    let (at_close, from_storage, outcomes) = run(4, 0, |_| true);
    assert_eq!(at_close, from_storage);
    for (report, _) in &outcomes {
        assert!(!report.gathered, "{report:?}");
        assert_eq!((report.logs, report.logs_read, report.gathered_bytes), (4, 4, 0));
    }
    // Rank 0 read all four logs; the others none.
    assert_eq!(outcomes[0].1, 4);
    assert!(outcomes[1..].iter().all(|(_, opens)| *opens == 0));
}

#[test]
fn a_rank_that_kept_nothing_means_the_logs_are_read() {
    let (at_close, from_storage, outcomes) = run(3, 64, |rank| rank != 2);
    assert_eq!(at_close, from_storage);
    assert!(outcomes.iter().all(|(report, _)| !report.gathered && report.logs_read == 3));
}

#[test]
fn logs_of_an_earlier_session_are_read_and_merged_in() {
    let backends = backends();
    // Session 1 writes without retention, session 2 overwrites part of it.
    for retain in [false, true] {
        let outcomes = LocalComm::run(2, |comm| {
            // Another process id per session (each has its own clock).
            let (plfs, counting) = rank_mount(&backends, comm.rank() + 10 * usize::from(retain), 64);
            write_and_close(&plfs, &counting, comm, retain).0.unwrap()
        });
        if retain {
            assert!(
                outcomes.iter().all(|report| report.gathered && (report.logs, report.logs_read) == (4, 2))
            );
        }
    }
    let (plfs, _) = rank_mount(&backends, 99, 64);
    let at_close = global_index_bytes(&plfs);
    plfs.flatten(PATH).unwrap();
    assert_eq!(at_close, global_index_bytes(&plfs));
}

#[test]
fn a_failed_close_on_any_rank_falls_back_and_all_ranks_agree() {
    let backends = backends();
    let outcomes = LocalComm::run(2, |comm| {
        let (plfs, _) = rank_mount(&backends, comm.rank(), 64);
        if comm.rank() == 0 {
            plfs.open(PATH, OpenFlags::WRONLY.create(), 0o644, 0).unwrap().close().unwrap();
        }
        comm.barrier().unwrap();
        retain_index(&plfs, PATH).unwrap();
        let file = plfs.open(PATH, OpenFlags::WRONLY, 0, comm.rank() as u64).unwrap();
        file.write(b"x", comm.rank() as u64).unwrap();
        file.close().unwrap();
        flatten_on_close(&plfs, PATH, comm, comm.rank() != 1).unwrap()
    });
    assert!(outcomes.iter().all(|report| !report.gathered && report.logs == 2));
}

#[test]
fn a_file_that_is_not_there_is_an_error_on_every_rank() {
    let backends = backends();
    let outcomes = LocalComm::run(2, |comm| {
        let (plfs, _) = rank_mount(&backends, comm.rank(), 64);
        retain_index(&plfs, "/missing").unwrap();
        flatten_on_close(&plfs, "/missing", comm, true)
    });
    for outcome in outcomes {
        let error = outcome.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::NotFound, "{error}");
        assert!(error.to_string().contains("/missing"), "{error}");
    }
}
