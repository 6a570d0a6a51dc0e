use std::sync::Arc;

use super::*;
use crate::clock::{ManualClock, Stamper};
use crate::collective::{CommCounts, CountingComm, LocalComm};
use crate::config::{BackendRole, Tuning};
use crate::fs::Options;
use crate::store::counting::{CountingStore, OpCounts};
use crate::store::memory::MemoryStore;
use crate::store::{SharedStore, StoreExt};

const PATH: &str = "/checkpoint";
const RECORD_BYTES: usize = 37;
const RECORDS_PER_WRITER: u64 = 5;

fn options(pid: u32) -> Options {
    Options {
        hostname: format!("node{pid}"),
        pid,
        uid: 1000,
        gid: 100,
        stamper: Stamper::new(Arc::new(ManualClock::new(1_000_000))),
        tuning: Tuning { threadpool_size: 2, ..Tuning::default() },
    }
}

/// The backends every "process" shares (two, so logs spread).
fn backends() -> Vec<SharedStore> {
    (0..2).map(|i| Arc::new(MemoryStore::new(format!("mem://b{i}"))) as SharedStore).collect()
}

/// One rank's own mount over the shared backends, counting what it costs,
/// as a separate process would have.
fn rank_mount(backends: &[SharedStore], rank: usize) -> (Plfs, Vec<Arc<CountingStore>>) {
    let counting: Vec<Arc<CountingStore>> =
        backends.iter().map(|store| Arc::new(CountingStore::new(store.clone()))).collect();
    let stores = counting.iter().map(|store| (store.clone() as SharedStore, BackendRole::Any)).collect();
    (Plfs::new(stores, options(100 + rank as u32)).unwrap(), counting)
}

fn byte_of(writer: u64, record: u64, position: usize) -> u8 {
    (writer * 31 + record * 7 + position as u64) as u8
}

/// N writers, N-1 strided: record k of writer w at (k·N + w)·size.
fn write_strided(plfs: &Plfs, writers: u64) {
    let file = plfs.open(PATH, OpenFlags::WRONLY.create(), 0o644, 0).unwrap();
    for record in 0..RECORDS_PER_WRITER {
        for writer in 0..writers {
            let buf: Vec<u8> = (0..RECORD_BYTES).map(|i| byte_of(writer, record, i)).collect();
            let offset = (record * writers + writer) * RECORD_BYTES as u64;
            file.write_as(&buf, offset, writer).unwrap();
        }
    }
    file.close().unwrap();
}

fn read_whole(handle: &FileHandle) -> Vec<u8> {
    let size = handle.size().unwrap() as usize;
    let mut buf = vec![0u8; size];
    assert_eq!(handle.read(&mut buf, 0).unwrap(), size);
    buf
}

fn sum(counts: &[Arc<CountingStore>]) -> OpCounts {
    counts.iter().map(|store| store.counts()).fold(OpCounts::default(), |total, c| OpCounts {
        opens: total.opens + c.opens,
        index_log_opens: total.index_log_opens + c.index_log_opens,
        global_index_opens: total.global_index_opens + c.global_index_opens,
        ..total
    })
}

/// Opens on `readers` thread ranks; returns each rank's bytes and what its
/// open (not its reads) cost.
fn open_on_ranks(
    backends: &[SharedStore],
    readers: usize,
    options: CollectiveOptions,
) -> Vec<Result<(Vec<u8>, OpCounts)>> {
    LocalComm::run(readers, |comm| {
        let (plfs, counting) = rank_mount(backends, comm.rank());
        let handle = open_collective_with(&plfs, PATH, comm, &options, 1000 + comm.rank() as u64)?;
        let cost = sum(&counting);
        let bytes = read_whole(&handle);
        handle.close()?;
        Ok((bytes, cost))
    })
}

fn options_for(strategy: Strategy) -> CollectiveOptions {
    CollectiveOptions { strategy, group_ranks: None }
}

#[test]
fn every_strategy_reads_what_a_plain_open_reads_with_the_papers_open_counts() {
    for (writers, readers) in [(1u64, 1usize), (3, 4), (8, 5), (5, 9)] {
        let backends = backends();
        let (plfs, _) = rank_mount(&backends, 99);
        write_strided(&plfs, writers);
        let plain = plfs.open(PATH, OpenFlags::RDONLY, 0, 500).unwrap();
        let expected = read_whole(&plain);
        plain.close().unwrap();
        assert_eq!(expected.len(), writers as usize * RECORDS_PER_WRITER as usize * RECORD_BYTES);
        plfs.flatten(PATH).unwrap();

        for strategy in Strategy::ALL {
            let results = open_on_ranks(&backends, readers, options_for(strategy));
            let mut index_log_opens = 0;
            let mut global_index_opens = 0;
            for (rank, result) in results.into_iter().enumerate() {
                let (bytes, cost) = result.unwrap_or_else(|e| panic!("{strategy} rank {rank}: {e}"));
                assert!(bytes == expected, "{strategy}: rank {rank} of {readers} read other bytes");
                index_log_opens += cost.index_log_opens;
                global_index_opens += cost.global_index_opens;
            }
            let (logs, readers) = (writers, readers as u64);
            let expected_opens = match strategy {
                // Each naive rank prefers the (valid) global index.
                Strategy::Naive => (0, readers),
                Strategy::Broadcast | Strategy::Parallel => (logs, 0),
                Strategy::Flatten => (0, 1),
                Strategy::UniformRestart | Strategy::Auto => unreachable!("not in Strategy::ALL"),
            };
            assert_eq!(
                (index_log_opens, global_index_opens),
                expected_opens,
                "{strategy}: {logs} writers, {readers} readers (index log opens, global index opens)"
            );
        }
    }
}

#[test]
fn uniform_restart_reads_only_the_logs_of_the_writer_named_by_the_rank() {
    const WRITERS: u64 = 4;
    let backends = backends();
    let (plfs, _) = rank_mount(&backends, 99);
    write_strided(&plfs, WRITERS);
    assert_eq!("uniform_restart".parse::<Strategy>().unwrap(), Strategy::UniformRestart);
    assert!(!Strategy::ALL.contains(&Strategy::UniformRestart));
    let results = open_on_ranks(&backends, WRITERS as usize, options_for(Strategy::UniformRestart));
    for (rank, result) in results.into_iter().enumerate() {
        let (bytes, cost) = result.unwrap_or_else(|e| panic!("rank {rank}: {e}"));
        assert_eq!(cost.index_log_opens, 1, "rank {rank} opens its own index log only");
        assert_eq!(cost.global_index_opens, 0);
        // Its own records, and holes (zeros) where the others wrote.
        let last = (RECORDS_PER_WRITER - 1) * WRITERS + rank as u64;
        assert_eq!(bytes.len() as u64, (last + 1) * RECORD_BYTES as u64, "rank {rank}: size");
        for (position, &byte) in bytes.iter().enumerate() {
            let slot = position as u64 / RECORD_BYTES as u64;
            let (record, writer) = (slot / WRITERS, slot % WRITERS);
            let expected =
                if writer == rank as u64 { byte_of(writer, record, position % RECORD_BYTES) } else { 0 };
            assert_eq!(byte, expected, "rank {rank}: byte {position}");
        }
    }
}

/// Only rank 0 looks to see whether the file is a PLFS 2.5 file, and says
/// so in its first message: a rank that receives the index (broadcast,
/// flatten) touches no backend during the open, and a parallel rank only
/// opens its share of the index logs.
#[test]
fn only_rank_0_checks_for_a_plfs_25_file() {
    const WRITERS: u64 = 3;
    const READERS: usize = 4;
    let backends = backends();
    let (plfs, _) = rank_mount(&backends, 99);
    write_strided(&plfs, WRITERS);
    plfs.flatten(PATH).unwrap();
    for strategy in [Strategy::Broadcast, Strategy::Flatten, Strategy::Parallel] {
        let costs = LocalComm::run(READERS, |comm| {
            let (plfs, counting) = rank_mount(&backends, comm.rank());
            let handle = open_collective_with(&plfs, PATH, comm, &options_for(strategy), 1000).unwrap();
            let cost = counting.iter().map(|store| store.counts()).fold(OpCounts::default(), |a, b| a + b);
            handle.close().unwrap();
            cost
        });
        for (rank, cost) in costs.iter().enumerate().skip(1) {
            let index_logs =
                if strategy == Strategy::Parallel { u64::from(rank < WRITERS as usize) } else { 0 };
            assert_eq!(
                (cost.opens, cost.metadata),
                (index_logs, 0),
                "{strategy}: rank {rank} (opens, stats) during the open"
            );
        }
    }
}

/// A PLFS 2.5 file through every strategy: rank 0's word reaches every
/// rank, each reads the 2.5 index itself and gets the file's bytes.
#[test]
fn a_plfs_25_file_opens_on_every_rank_with_every_strategy() {
    let (root, plfs, path, expected) = crate::plfs25_fixtures::copy("strided");
    drop(plfs);
    for strategy in Strategy::ALL.into_iter().chain([Strategy::UniformRestart]) {
        let results = LocalComm::run(3, |comm| {
            let plfs = crate::plfs25_fixtures::mount(root.path());
            let handle = open_collective_with(&plfs, &path, comm, &options_for(strategy), 1000)?;
            let bytes = read_whole(&handle);
            handle.close()?;
            Ok::<_, Error>(bytes)
        });
        for (rank, result) in results.into_iter().enumerate() {
            let bytes = result.unwrap_or_else(|e| panic!("{strategy} rank {rank}: {e}"));
            assert!(bytes == expected, "{strategy}: rank {rank} read other bytes");
        }
    }
}

#[test]
fn naive_opens_every_index_log_on_every_rank_without_a_global_index() {
    let backends = backends();
    let (plfs, _) = rank_mount(&backends, 99);
    write_strided(&plfs, 6);
    let results = open_on_ranks(&backends, 4, options_for(Strategy::Naive));
    let opens: u64 = results.into_iter().map(|result| result.unwrap().1.index_log_opens).sum();
    assert_eq!(opens, 6 * 4);
}

#[test]
fn parallel_read_works_with_any_group_size() {
    let backends = backends();
    let (plfs, _) = rank_mount(&backends, 99);
    write_strided(&plfs, 7);
    let expected = read_whole(&plfs.open(PATH, OpenFlags::RDONLY, 0, 500).unwrap());
    for group_ranks in [1, 2, 3, 6, 50] {
        let options = CollectiveOptions { strategy: Strategy::Parallel, group_ranks: Some(group_ranks) };
        for (rank, result) in open_on_ranks(&backends, 6, options).into_iter().enumerate() {
            let (bytes, cost) = result.unwrap();
            assert!(bytes == expected, "group size {group_ranks}: rank {rank} read other bytes");
            // 7 logs over 6 ranks: rank 0 reads two.
            assert_eq!(cost.index_log_opens, if rank == 0 { 2 } else { 1 });
        }
    }
}

#[test]
fn a_stale_global_index_is_ignored_and_the_logs_are_read() {
    let backends = backends();
    let (plfs, _) = rank_mount(&backends, 99);
    write_strided(&plfs, 3);
    plfs.flatten(PATH).unwrap();
    // A fourth writer appends after the flatten: the global index misses it.
    let file = plfs.open(PATH, OpenFlags::WRONLY, 0, 3).unwrap();
    let tail = vec![0xEE; 100];
    let end = 3 * RECORDS_PER_WRITER * RECORD_BYTES as u64;
    file.write_as(&tail, end, 3).unwrap();
    file.close().unwrap();
    assert!(
        matches!(plfs.read_global_index(PATH).unwrap(), GlobalIndexState::Ignored(reason) if reason.contains("stale"))
    );

    let expected = read_whole(&plfs.open(PATH, OpenFlags::RDONLY, 0, 500).unwrap());
    assert_eq!(&expected[expected.len() - 100..], &tail[..]);
    let results = open_on_ranks(&backends, 3, options_for(Strategy::Flatten));
    let mut index_log_opens = 0;
    for result in results {
        let (bytes, cost) = result.unwrap();
        assert!(bytes == expected, "a stale global index was used");
        index_log_opens += cost.index_log_opens;
    }
    // Rank 0 fell back to reading the four logs once, for everyone.
    assert_eq!(index_log_opens, 4);
}

#[test]
fn an_error_on_rank_0_reaches_every_rank() {
    let backends = backends();
    for strategy in Strategy::ALL {
        for readers in [1, 2, 5] {
            let results = LocalComm::run(readers, |comm| {
                let (plfs, _) = rank_mount(&backends, comm.rank());
                open_collective_with(&plfs, "/missing", comm, &options_for(strategy), 7).map(drop)
            });
            for (rank, result) in results.into_iter().enumerate() {
                let error = result.expect_err("opening a missing file succeeded");
                assert_eq!(error.kind(), ErrorKind::NotFound, "{strategy} rank {rank}: {error}");
                assert!(error.to_string().contains("/missing"), "{strategy} rank {rank}: {error}");
            }
        }
    }
}

#[test]
fn a_failed_share_on_any_rank_fails_every_rank_of_a_parallel_read() {
    let backends = backends();
    let (plfs, _) = rank_mount(&backends, 99);
    write_strided(&plfs, 4);
    // Rank 2's mount has no backends in common with the others: its share
    // of the logs cannot be found.
    let results = LocalComm::run(4, |comm| {
        let stores = if comm.rank() == 2 { self::backends() } else { backends.clone() };
        let (plfs, _) = rank_mount(&stores, comm.rank());
        let options = CollectiveOptions { strategy: Strategy::Parallel, group_ranks: Some(2) };
        open_collective_with(&plfs, PATH, comm, &options, 7).map(drop)
    });
    for (rank, result) in results.into_iter().enumerate() {
        let error = result.expect_err("a rank's failed read went unnoticed");
        assert!(error.to_string().contains("rank 2"), "rank {rank}: {error}");
    }
}

#[test]
fn strategies_parse_and_print_their_names() {
    for strategy in Strategy::ALL {
        assert_eq!(strategy.to_string().parse::<Strategy>().unwrap(), strategy);
    }
    assert_eq!("bogus".parse::<Strategy>().unwrap_err().kind(), ErrorKind::InvalidInput);
    assert_eq!(default_group_ranks(1), 1);
    assert_eq!(default_group_ranks(4), 2);
    assert_eq!(default_group_ranks(5), 3);
    assert_eq!(default_group_ranks(64), 8);
}

#[test]
fn outcomes_and_frames_round_trip() {
    let error = Error::new(ErrorKind::PermissionDenied, "/f");
    let rebuilt = from_outcome(&outcome(Err(&error), 3), "/f").unwrap_err();
    assert_eq!(rebuilt.kind(), ErrorKind::PermissionDenied);
    assert!(rebuilt.to_string().contains("rank 3"));
    assert_eq!(from_outcome(&outcome(Ok(vec![1, 2]), 0), "/f").unwrap(), &[1, 2]);
    assert_eq!(from_outcome(&[], "/f").unwrap_err().kind(), ErrorKind::Corrupt);
    let pieces: [&[u8]; 3] = [b"a", b"", b"xyz"];
    assert_eq!(unframe(&frame(&pieces)).unwrap(), pieces.to_vec());
    assert!(unframe(&[1, 0, 0]).is_err());
    for kind in KINDS {
        assert_eq!(kind_from_code(kind_code(kind)), kind);
    }
}

#[test]
fn the_open_right_after_a_collective_one_keeps_its_index_and_the_next_does_not() {
    let shared = backends();
    let (writer, _) = rank_mount(&shared, 99);
    write_strided(&writer, 3);
    let expected = read_whole(&writer.open(PATH, OpenFlags::RDONLY, 0, 9).unwrap());
    let (reader, counting) = rank_mount(&shared, 0);
    let comm = LocalComm::group(1).pop().unwrap();
    let collective =
        open_collective_with(&reader, PATH, &comm, &options_for(Strategy::Broadcast), 0).unwrap();
    let after_collective = sum(&counting).index_log_opens;
    assert_eq!(after_collective, 3);
    // An MPI library opening the file right after the exchange: no index log read.
    let library = reader.open(PATH, OpenFlags::RDONLY, 0, 0).unwrap();
    assert_eq!(read_whole(&library), expected);
    assert_eq!(sum(&counting).index_log_opens, after_collective);
    // Any later open is close-to-open again: the index is read anew.
    let later = reader.open(PATH, OpenFlags::RDONLY, 0, 0).unwrap();
    assert_eq!(read_whole(&later), expected);
    assert_eq!(sum(&counting).index_log_opens, after_collective + 3);
    for handle in [collective, library, later] {
        handle.close().unwrap();
    }
}

/// With `verify_reads: whole` (the default) a rank whose merged index came
/// in a message checks data with the CRCs that came with it: no rank reads
/// an index log again at its reads, and a flipped data byte still fails
/// every rank's read, naming the data log and the record's offset.
#[test]
fn ranks_check_data_with_the_crcs_that_came_with_their_index() {
    for strategy in [Strategy::Broadcast, Strategy::Parallel] {
        let shared = backends();
        let (writer, _) = rank_mount(&shared, 99);
        write_strided(&writer, 3);
        let expected = read_whole(&writer.open(PATH, OpenFlags::RDONLY, 0, 9).unwrap());
        let read_on_ranks = || {
            LocalComm::run(4, |comm| {
                let (plfs, counting) = rank_mount(&shared, comm.rank());
                let options = CollectiveOptions { strategy, group_ranks: Some(2) };
                let handle = open_collective_with(&plfs, PATH, comm, &options, 1000 + comm.rank() as u64)?;
                let opened = sum(&counting).index_log_opens;
                let mut bytes = vec![0u8; expected.len()];
                let read = handle.read(&mut bytes, 0);
                handle.close()?;
                read.map(|_| (bytes, sum(&counting).index_log_opens - opened))
            })
        };
        for (rank, result) in read_on_ranks().into_iter().enumerate() {
            let (bytes, index_logs_read) = result.unwrap_or_else(|e| panic!("{strategy} rank {rank}: {e}"));
            assert!(bytes == expected, "{strategy}: rank {rank} read other bytes");
            assert_eq!(index_logs_read, 0, "{strategy}: rank {rank} read index logs for the data CRCs");
        }

        let container = StorePath::parse(&PATH[1..]).unwrap();
        let log = writer.inventory(PATH).unwrap().logs.remove(0);
        let data = log.path(&container, crate::layout::LogKind::Data);
        let store = &shared[log.backend.0];
        let mut bytes = store.read_all(&data).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x10;
        store.replace(&data, &bytes).unwrap();
        for (rank, result) in read_on_ranks().into_iter().enumerate() {
            let error = result.expect_err("a flipped byte must not be returned");
            assert_eq!(error.kind(), ErrorKind::Corrupt, "{strategy}: rank {rank}: {error}");
            let text = error.to_string();
            assert!(text.contains(&format!("data log {}: {data}", store.url())), "{strategy}: {text}");
            assert!(text.contains("fail their checksum"), "{strategy}: {text}");
        }
    }
}

/// n-n and 1-n files have no index to share: every strategy, on every
/// rank, opens them as an ordinary open would and reads the same bytes
/// (no rank waits on a broadcast another one skipped), including bytes
/// written after a rank cached the file's directory.
#[test]
fn n_n_and_1_n_files_open_on_every_rank_with_every_strategy() {
    use crate::config::Workload;
    const READERS: usize = 4;
    for workload in [Workload::FilePerProc, Workload::SmallFile] {
        let backends = backends();
        let mount = |pid: u32| {
            let stores = backends.iter().map(|store| (store.clone(), BackendRole::Any)).collect();
            Plfs::with_workload(stores, options(pid), workload).unwrap()
        };
        let writer = mount(99);
        let readers: Vec<Plfs> = (0..READERS).map(|rank| mount(100 + rank as u32)).collect();
        let write = |version: u64| -> Vec<u8> {
            let bytes: Vec<u8> = (0..3 * RECORD_BYTES).map(|i| byte_of(version, 2, i)).collect();
            let file = writer.open(PATH, OpenFlags::WRONLY.create().truncate(), 0o644, 0).unwrap();
            file.write(&bytes[RECORD_BYTES..], RECORD_BYTES as u64).unwrap();
            file.write(&bytes[..RECORD_BYTES], 0).unwrap();
            file.close().unwrap();
            bytes
        };
        write(1);
        for reader in &readers {
            assert_eq!(reader.stat(PATH).unwrap().size, 3 * RECORD_BYTES as u64);
        }
        for (version, strategy) in (2..).zip(Strategy::ALL.into_iter().chain([Strategy::UniformRestart])) {
            // Every rank knows the file from before this version.
            let expected = write(version);
            let results = LocalComm::run(READERS, |comm| -> Result<Vec<u8>> {
                let plfs = &readers[comm.rank()];
                let handle = open_collective_with(plfs, PATH, comm, &options_for(strategy), 7)?;
                let bytes = read_whole(&handle);
                handle.close()?;
                Ok(bytes)
            });
            for (rank, result) in results.into_iter().enumerate() {
                let bytes = result.unwrap_or_else(|e| panic!("{workload:?} {strategy} rank {rank}: {e}"));
                assert!(bytes == expected, "{workload:?} {strategy}: rank {rank} read other bytes");
            }
        }
    }
}

#[test]
fn node_groups_follow_hosts_and_fall_back_to_square_root_groups() {
    let groups = |hosts: &[&str]| node_groups(hosts);
    // Cyclic mapping: each host's lowest rank leads it.
    assert_eq!(groups(&["a", "b", "a", "b", "c", "c"]), [0, 1, 0, 1, 4, 4]);
    // Uneven nodes.
    assert_eq!(groups(&["a", "a", "a", "b"]), [0, 0, 0, 3]);
    // One host: ⌈√8⌉ = 3 consecutive ranks, not one group of 8.
    assert_eq!(groups(&["a"; 8]), [0, 0, 0, 3, 3, 3, 6, 6]);
    // One rank per host: ⌈√4⌉ = 2, not 4 leaders.
    assert_eq!(groups(&["a", "b", "c", "d"]), [0, 0, 2, 2]);
    assert_eq!(groups(&["a"]), [0]);
    assert_eq!(consecutive_groups(5, 2), [0, 0, 2, 2, 4]);
    assert_eq!(consecutive_groups(3, 0), [0, 1, 2]);
}

/// What a collective costs as point-to-point messages in its flat form
/// (a broadcast: root to each other rank; a gather: each to root; an
/// allgather or a split, which MPI makes an allgather: each to each),
/// counted by the sender, per operation, with those between hosts apart.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Messages {
    sent: u64,
    between_hosts: u64,
    bytes_between_hosts: u64,
}

type Traffic = std::sync::Mutex<std::collections::BTreeMap<&'static str, Messages>>;

/// A communicator that counts [`Messages`] by the hosts its ranks sit on.
struct HostCountingComm {
    inner: Box<dyn Comm>,
    /// The top-level rank of each rank of this group.
    world: Vec<usize>,
    hosts: Arc<[String]>,
    traffic: Arc<Traffic>,
}

impl HostCountingComm {
    fn comm(&self) -> &dyn Comm {
        self.inner.as_ref()
    }

    fn send(&self, operation: &'static str, to: impl Iterator<Item = usize>, bytes: usize) {
        let from = &self.hosts[self.world[self.rank()]];
        let mut traffic = self.traffic.lock().unwrap();
        let counted = traffic.entry(operation).or_default();
        for rank in to.filter(|&rank| rank != self.rank()) {
            counted.sent += 1;
            if self.hosts[self.world[rank]] != *from {
                counted.between_hosts += 1;
                counted.bytes_between_hosts += bytes as u64;
            }
        }
    }
}

impl Comm for HostCountingComm {
    fn rank(&self) -> usize {
        self.comm().rank()
    }

    fn size(&self) -> usize {
        self.comm().size()
    }

    fn barrier(&self) -> Result<()> {
        self.comm().barrier()
    }

    fn broadcast(&self, root: usize, bytes: &mut Vec<u8>) -> Result<()> {
        if self.rank() == root {
            self.send("broadcast", 0..self.size(), bytes.len());
        }
        self.comm().broadcast(root, bytes)
    }

    fn gather(&self, root: usize, mine: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
        self.send("gather", std::iter::once(root), mine.len());
        self.comm().gather(root, mine)
    }

    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.send("allgather", 0..self.size(), mine.len());
        self.comm().allgather(mine)
    }

    fn split(&self, color: u32, key: usize) -> Result<Box<dyn Comm>> {
        self.send("split", 0..self.size(), 12);
        let group = self.comm().split(color, key)?;
        // Not counted: only the test needs to know who is in the group.
        let me = (self.world[self.rank()] as u64).to_le_bytes();
        let world = group
            .allgather(&me)?
            .iter()
            .map(|bytes| u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize)
            .collect();
        Ok(Box::new(HostCountingComm {
            inner: group,
            world,
            hosts: self.hosts.clone(),
            traffic: self.traffic.clone(),
        }))
    }
}

/// A parallel open on ranks placed on `hosts` (one per rank), each rank's
/// mount naming its host; returns each rank's bytes and the messages sent.
fn parallel_open_on_hosts(
    backends: &[SharedStore],
    hosts: &[String],
    group_ranks: Option<usize>,
) -> (Vec<Vec<u8>>, std::collections::BTreeMap<&'static str, Messages>) {
    let traffic = Arc::new(Traffic::default());
    let hosts: Arc<[String]> = hosts.into();
    let open = CollectiveOptions { strategy: Strategy::Parallel, group_ranks };
    let results = std::thread::scope(|scope| {
        let ranks: Vec<_> = LocalComm::group(hosts.len())
            .into_iter()
            .map(|comm| {
                let (hosts, traffic) = (hosts.clone(), traffic.clone());
                scope.spawn(move || {
                    let world = (0..comm.size()).collect();
                    let counting = HostCountingComm { inner: Box::new(comm), world, hosts, traffic };
                    let rank = counting.rank();
                    let stores = backends.iter().map(|store| (store.clone(), BackendRole::Any)).collect();
                    let mount =
                        Options { hostname: counting.hosts[rank].clone(), ..options(100 + rank as u32) };
                    let plfs = Plfs::new(stores, mount).unwrap();
                    let handle =
                        open_collective_with(&plfs, PATH, &counting, &open, 1000 + rank as u64).unwrap();
                    let bytes = read_whole(&handle);
                    handle.close().unwrap();
                    bytes
                })
            })
            .collect();
        ranks.into_iter().map(|rank| rank.join().unwrap()).collect()
    });
    let traffic = traffic.lock().unwrap().clone();
    (results, traffic)
}

/// 4 nodes × 2 ranks under a cyclic mapping (rank r on node r mod 4), the
/// shape where consecutive-rank groups span nodes: grouped by node, the
/// index parts are gathered and the merged index handed back inside each
/// node, and only the four leaders' exchange crosses nodes.
#[test]
fn the_parallel_read_groups_ranks_by_node() {
    const NODES: usize = 4;
    const RANKS: usize = 8;
    let backends = backends();
    let (plfs, _) = rank_mount(&backends, 99);
    write_strided(&plfs, RANKS as u64);
    let expected = read_whole(&plfs.open(PATH, OpenFlags::RDONLY, 0, 500).unwrap());
    let hosts: Vec<String> = (0..RANKS).map(|rank| format!("node{}", rank % NODES)).collect();

    let (by_node, traffic) = parallel_open_on_hosts(&backends, &hosts, None);
    let (by_rank, before) = parallel_open_on_hosts(&backends, &hosts, Some(default_group_ranks(RANKS)));
    for (rank, bytes) in by_node.iter().chain(&by_rank).enumerate() {
        assert!(*bytes == expected, "run {} rank {}: other bytes", rank / RANKS, rank % RANKS);
    }
    eprintln!("by node: {traffic:#?}\n√M consecutive ranks: {before:#?}");
    // Gather: one part per non-leader, none across nodes.
    assert_eq!(
        traffic["gather"],
        Messages { sent: (RANKS - NODES) as u64, between_hosts: 0, bytes_between_hosts: 0 }
    );
    // Host names (the one extra allgather), then the 4 leaders' exchange.
    let host_names = (RANKS * (RANKS - 1)) as u64;
    assert_eq!(traffic["allgather"].sent, host_names + (NODES * (NODES - 1)) as u64);
    // √M = 3 consecutive ranks: groups {0,1,2} {3,4,5} {6,7} span nodes.
    assert_eq!(before["gather"].between_hosts, 5);
    let index_bytes = |messages: &std::collections::BTreeMap<&str, Messages>| -> u64 {
        messages.values().map(|counted| counted.bytes_between_hosts).sum()
    };
    assert!(index_bytes(&traffic) < index_bytes(&before), "{traffic:?} vs {before:?}");
}

#[test]
fn auto_broadcasts_while_rank_0s_extra_opens_are_no_more_than_the_parallel_reads_extra_rounds() {
    // The parallel read's extra rounds: host names, two splits, gather,
    // leaders' allgather, group broadcast; no host names with a group size.
    assert_eq!((parallel_extra_rounds(false), parallel_extra_rounds(true)), (6, 5));
    // (logs, ranks, group size given) -> broadcast?
    let cases = [
        ((0, 1, false), true),
        ((1000, 1, false), true), // one rank reads every log either way
        ((4, 4, false), true),    // the bench: 4 writers, 4 readers, one node
        ((7, 64, false), true),   // 7 - 1 = 6 extra opens, 6 extra rounds
        ((8, 64, false), false),  // 8 - 1 = 7 > 6
        ((7, 64, true), false),   // a given group size saves the host-name round
        ((8, 4, false), true),    // 8 - 2 = 6
        ((9, 4, false), true),    // 9 - 3 = 6
        ((10, 4, false), false),  // 10 - 3 = 7
        ((16, 16, false), false),
        ((65536, 65536, false), false),
    ];
    for ((logs, ranks, given), broadcast) in cases {
        assert_eq!(
            auto_broadcasts(logs, ranks, given),
            broadcast,
            "{logs} logs, {ranks} ranks, group given {given}"
        );
    }
}

/// Each rank's open counts and collective counts under `options`.
fn counted_open(
    backends: &[SharedStore],
    readers: usize,
    options: CollectiveOptions,
) -> Vec<(Vec<u8>, OpCounts, CommCounts)> {
    LocalComm::run(readers, |comm| {
        let comm = CountingComm::new(comm);
        let (plfs, counting) = rank_mount(backends, comm.rank());
        let handle = open_collective_with(&plfs, PATH, &comm, &options, 1000 + comm.rank() as u64).unwrap();
        let (cost, talk) = (sum(&counting), comm.counts());
        let bytes = read_whole(&handle);
        handle.close().unwrap();
        (bytes, cost, talk)
    })
}

#[test]
fn auto_costs_what_broadcast_costs_for_few_logs_and_what_parallel_costs_for_many() {
    for (writers, readers, like) in [
        (1u64, 1usize, Strategy::Broadcast),
        (4, 4, Strategy::Broadcast),
        (12, 3, Strategy::Parallel),
        (12, 12, Strategy::Parallel),
    ] {
        let backends = backends();
        let (plfs, _) = rank_mount(&backends, 99);
        write_strided(&plfs, writers);
        let expected = read_whole(&plfs.open(PATH, OpenFlags::RDONLY, 0, 500).unwrap());
        let auto = counted_open(&backends, readers, options_for(Strategy::Auto));
        let other = counted_open(&backends, readers, options_for(like));
        assert_eq!(like == Strategy::Broadcast, auto_broadcasts(writers as usize, readers, false));
        for (rank, ((bytes, cost, talk), (_, like_cost, like_talk))) in auto.iter().zip(&other).enumerate() {
            assert!(
                *bytes == expected,
                "auto, {writers} logs, {readers} ranks: rank {rank} read other bytes"
            );
            assert_eq!(
                (cost, talk),
                (like_cost, like_talk),
                "auto, {writers} logs, {readers} ranks, rank {rank}: expected what {like} costs"
            );
        }
    }
}

#[test]
fn an_error_on_rank_0_reaches_every_rank_when_auto_broadcasts() {
    let backends = backends();
    let (plfs, _) = rank_mount(&backends, 99);
    write_strided(&plfs, 3);
    // Damage one index log: rank 0, reading every log for a broadcast,
    // fails, and every rank must hear of it instead of waiting.
    fn index_logs_in(store: &dyn crate::store::Store, dir: &StorePath, found: &mut Vec<StorePath>) {
        for entry in store.list(dir).unwrap() {
            let path = dir.join(&entry.name).unwrap();
            if entry.kind == crate::store::EntryKind::Directory {
                index_logs_in(store, &path, found);
            } else if entry.name.starts_with("index.") {
                found.push(path);
            }
        }
    }
    let mut found = Vec::new();
    for store in &backends {
        index_logs_in(store.as_ref(), &StorePath::root(), &mut found);
        if let Some(log) = found.first() {
            store.replace(log, b"not an index log").unwrap();
            break;
        }
    }
    assert!(!found.is_empty(), "no index log found to damage");
    assert!(auto_broadcasts(3, 3, false));
    let results = open_on_ranks(&backends, 3, options_for(Strategy::Auto));
    for (rank, result) in results.into_iter().enumerate() {
        let error = result.expect_err("rank 0's failed read went unnoticed");
        assert!(error.to_string().contains(PATH), "rank {rank}: {error}");
        if rank != 0 {
            assert!(error.to_string().contains("rank 0"), "rank {rank}: {error}");
        }
    }
}
