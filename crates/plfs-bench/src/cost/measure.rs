//! Measuring the operations the model predicts: ranks are threads (the
//! local communicator), each with its own mount over the same posix
//! backends, as separate processes on separate nodes would have (each rank
//! names its node, so writers on different nodes use different hostdirs).
//! Every store and every communicator a rank uses counts, and an
//! operation's figures are the sums over the ranks of what the counters
//! moved during it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use plfs::clock::{ManualClock, Stamper};
use plfs::collective::{
    CollectiveOptions, Comm, CommCounts, CountingComm, LocalComm, Strategy, open_collective_with,
};
use plfs::config::{BackendRole, Tuning};
use plfs::fs::{FileHandle, Options, Plfs};
use plfs::open::OpenFlags;
use plfs::store::SharedStore;
use plfs::store::counting::{CountingStore, OpCounts};
use plfs::store::posix::PosixStore;

use super::{COST_PATH, CostParams, Figures, Operation, node_name};
use crate::error::{BenchError, Result};
use crate::plfs_backend_dirs;

/// One rank's mount and the counters of its stores.
struct RankMount {
    plfs: Plfs,
    counting: Vec<Arc<CountingStore>>,
}

impl RankMount {
    fn counts(&self) -> OpCounts {
        self.counting.iter().map(|store| store.counts()).sum()
    }
}

/// The mount rank `rank` would have in its own process on its node.
fn rank_mount(work: &Path, params: &CostParams, rank: u64) -> Result<RankMount> {
    let mut stores: Vec<(SharedStore, BackendRole)> = Vec::new();
    let mut counting = Vec::new();
    for dir in plfs_backend_dirs(work, params.backends as usize) {
        let url = format!("posix://{}", dir.display());
        let posix = PosixStore::new(dir.clone(), url)
            .map_err(BenchError::plfs("backend", dir.display().to_string()))?;
        let counted = Arc::new(CountingStore::new(Arc::new(posix)));
        counting.push(counted.clone());
        stores.push((counted, BackendRole::Any));
    }
    let options = Options {
        hostname: node_name(params.node_of(rank)),
        pid: 1000 + rank as u32,
        // SAFETY: geteuid and getegid cannot fail and touch no memory.
        uid: unsafe { libc::geteuid() },
        // SAFETY: as geteuid.
        gid: unsafe { libc::getegid() },
        // Stamps are fixed-width in every name and record: the clock does
        // not change a count, only makes runs repeatable.
        stamper: Stamper::new(Arc::new(ManualClock::new(1_000_000 + rank))),
        // One pool thread per rank: 128 thread ranks need no more, and the
        // pool changes when index logs are read, not how many.
        tuning: Tuning { num_hostdirs: params.num_hostdirs, threadpool_size: 1, ..Tuning::default() },
    };
    let plfs =
        Plfs::new(stores, options).map_err(BenchError::plfs("mounting", work.display().to_string()))?;
    Ok(RankMount { plfs, counting })
}

/// The logical offset and length of rank `rank`'s `k`-th write.
pub(super) fn record_at(params: &CostParams, rank: u64, k: u64) -> (u64, u64) {
    (params.record_offset(rank, k), params.record_bytes)
}

fn plfs_error(doing: &'static str) -> impl FnOnce(plfs::Error) -> BenchError {
    BenchError::plfs(doing, COST_PATH)
}

/// What one rank measured for each operation it took part in.
#[derive(Debug, Default, Clone)]
struct RankFigures {
    per_op: Vec<(Operation, OpCounts, CommCounts, u64)>,
}

/// Runs every operation once with `params` and returns the measured
/// figures, in [`Operation::ALL`] order.
pub fn measure(params: &CostParams, dir: &Path) -> Result<Vec<(Operation, Figures)>> {
    params.check()?;
    let work = work_dir(dir)?;
    let ranks = params.ranks as usize;
    let results =
        made_backends(&work, params).map(|()| LocalComm::run(ranks, |world| run_rank(world, params, &work)));
    // The files are the run's alone; gone whatever happened.
    let _ = std::fs::remove_dir_all(&work);
    let results = results?;
    let mut per_rank = Vec::with_capacity(ranks);
    for result in results {
        per_rank.push(result?);
    }
    let mut out = Vec::new();
    for operation in Operation::ALL {
        let mut figures = Figures::default();
        let mut seen = false;
        for rank in &per_rank {
            for (op, store, comm, entries) in &rank.per_op {
                if *op == operation {
                    seen = true;
                    figures.absorb(store, comm, *entries);
                }
            }
        }
        if seen {
            out.push((operation, figures));
        }
    }
    Ok(out)
}

fn work_dir(parent: &Path) -> Result<PathBuf> {
    for attempt in 0..100u32 {
        let dir = parent.join(format!("plfs-bench-cost.{}.{attempt}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(BenchError::io("creating", &dir)(error)),
        }
    }
    Err(BenchError::invalid(format!("{}: no free work directory name", parent.display())))
}

fn made_backends(work: &Path, params: &CostParams) -> Result<()> {
    for backend in plfs_backend_dirs(work, params.backends as usize) {
        std::fs::create_dir_all(&backend).map_err(BenchError::io("creating", &backend))?;
    }
    Ok(())
}

/// Every rank's part, in the same order on every rank.
fn run_rank(world: &LocalComm, params: &CostParams, work: &Path) -> Result<RankFigures> {
    let rank = world.rank() as u64;
    let mut figures = RankFigures::default();
    let barrier =
        |doing: &'static str| world.barrier().map_err(|source| BenchError::Collective { doing, source });

    // Create: rank 0 makes the file, as a checkpoint library's rank 0 does.
    if rank == 0 {
        let mount = rank_mount(work, params, rank)?;
        let file = mount
            .plfs
            .open(COST_PATH, OpenFlags::WRONLY.create(), 0o644, rank)
            .map_err(plfs_error("creating"))?;
        file.close().map_err(plfs_error("closing the new file"))?;
        figures.per_op.push((Operation::Create, mount.counts(), CommCounts::default(), 0));
    }
    barrier("after create")?;

    // Write and close: every rank opens the file, writes its records, and
    // closes; each part counted on its own. Ranks close one after another,
    // in rank order, once all have written: the last writer to close
    // leaves the closed summary, and which rank that is must not depend on
    // timing (the barriers' messages are not counted).
    {
        let mount = rank_mount(work, params, rank)?;
        let file = mount.plfs.open(COST_PATH, OpenFlags::WRONLY, 0, rank).map_err(plfs_error("opening"))?;
        let mut buf = vec![0u8; params.record_bytes as usize];
        for k in params.write_order() {
            let (offset, length) = record_at(params, rank, k);
            crate::fill_record(offset / params.record_bytes.max(1), &mut buf[..length as usize]);
            file.write_as(&buf[..length as usize], offset, rank).map_err(plfs_error("writing"))?;
        }
        let written = mount.counts();
        barrier("after write")?;
        let mut file = Some(file);
        for turn in 0..world.size() as u64 {
            if let Some(file) = file.take_if(|_| turn == rank) {
                file.close().map_err(plfs_error("closing"))?;
            }
            barrier("closing in turn")?;
        }
        let closed = mount.counts();
        figures.per_op.push((Operation::Write, written, CommCounts::default(), 0));
        figures.per_op.push((Operation::Close, closed - written, CommCounts::default(), 0));
    }
    barrier("after close")?;

    // Stat on one rank, from a fresh mount (no cached state).
    if rank == 0 {
        let mount = rank_mount(work, params, rank)?;
        mount.plfs.stat(COST_PATH).map_err(plfs_error("stat"))?;
        figures.per_op.push((Operation::Stat, mount.counts(), CommCounts::default(), 0));
    }
    barrier("after stat")?;

    // Opens before any flatten, then a restart read after the parallel one.
    for (strategy, operation) in [
        (Strategy::Naive, Operation::OpenNaive),
        (Strategy::Broadcast, Operation::OpenBroadcast),
        (Strategy::Parallel, Operation::OpenParallel),
        (Strategy::UniformRestart, Operation::OpenUniformRestart),
    ] {
        open_on_readers(world, params, work, strategy, operation, &mut figures)?;
    }

    // Flatten on one rank, then the opens that use the global index.
    if rank == 0 {
        let mount = rank_mount(work, params, rank)?;
        mount.plfs.flatten(COST_PATH).map_err(plfs_error("flattening"))?;
        let flattened = mount.counts();
        figures.per_op.push((
            Operation::Flatten,
            flattened,
            CommCounts::default(),
            index_entries(&mount.plfs)?,
        ));
    }
    barrier("after flatten")?;
    open_on_readers(world, params, work, Strategy::Flatten, Operation::OpenFlatten, &mut figures)?;
    // A naive open prefers a valid global index: every reader reads it.
    open_on_readers(world, params, work, Strategy::Naive, Operation::OpenNaiveFlattened, &mut figures)?;
    Ok(figures)
}

/// The first M ranks open the file with `strategy`, each from a fresh
/// mount, as a restarted job's processes would.
fn open_on_readers(
    world: &LocalComm,
    params: &CostParams,
    work: &Path,
    strategy: Strategy,
    operation: Operation,
    figures: &mut RankFigures,
) -> Result<()> {
    let rank = world.rank() as u64;
    let reading = rank < params.readers;
    let split = world
        .split(u32::from(!reading), world.rank())
        .map_err(|source| BenchError::Collective { doing: "splitting off the readers", source })?;
    if reading {
        let mount = rank_mount(work, params, rank)?;
        let comm = CountingComm::new(split);
        let options = CollectiveOptions { strategy, group_ranks: params.group_ranks.map(|g| g as usize) };
        let handle = open_collective_with(&mount.plfs, COST_PATH, &comm, &options, params.ranks + rank)
            .map_err(plfs_error("opening collectively"))?;
        let opened = mount.counts();
        figures.per_op.push((operation, opened, comm.counts(), 0));
        if strategy == Strategy::Parallel {
            restart_read(params, &handle, rank)?;
            figures.per_op.push((Operation::RestartRead, mount.counts() - opened, CommCounts::default(), 0));
        }
        handle.close().map_err(plfs_error("closing a reader"))?;
    }
    world.barrier().map_err(|source| BenchError::Collective { doing: "after an open", source })
}

/// Entries of the merged index of the whole file (what every strategy but
/// uniform restart gives each rank), from `plfs map`'s totals; its own
/// backend calls are not the flatten's (taken before).
fn index_entries(plfs: &Plfs) -> Result<u64> {
    Ok(plfs.map(COST_PATH).map_err(plfs_error("mapping"))?.totals.index_entries as u64)
}

/// A restarted rank reads back what it wrote (N-1 strided: its records).
fn restart_read(params: &CostParams, handle: &FileHandle, rank: u64) -> Result<()> {
    let mut buf = vec![0u8; params.record_bytes as usize];
    for k in 0..params.records {
        let (offset, length) = record_at(params, rank, k);
        let buf = &mut buf[..length as usize];
        let count = handle.read(buf, offset).map_err(plfs_error("reading back"))?;
        if count != buf.len() || crate::verify_record(offset / params.record_bytes.max(1), buf).is_err() {
            return Err(BenchError::Data {
                what: format!("rank {rank}'s record {k} at {offset}"),
                problem: format!("read {count} of {length} bytes, or other bytes than written"),
            });
        }
    }
    Ok(())
}
