//! The collective-open benchmark ("Boosting PLFS read performance" §3):
//! for each strategy and run, N writers write one N-1 strided file and
//! close it (timed: the close is where flatten pays, with the ranks'
//! in-memory index records gathered to rank 0, Figure 4); then M reader
//! ranks open it with the strategy (timed: Figure 3) and read their share
//! back (timed: Figure 5's bandwidth counts the open and the read, not the
//! write close). Backend opens and memory are measured on every reader.
//! [`run_open_sweep`] repeats that over rank counts (N = M = each count).
//!
//! Written against the [`Comm`] trait only: under mpirun the ranks are
//! processes (the plfs binary's MPI shim), in tests they may be threads.
//! Every rank of the world calls [`run_open`]; the first M ranks read.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use plfs::collective::{
    CollectiveOptions, Comm, Strategy, flatten_on_close, open_collective_with, retain_index,
};
use plfs::config::{BackendRole, Tuning};
use plfs::fs::{FileHandle, Options, Plfs};
use plfs::open::OpenFlags;
use plfs::store::SharedStore;
use plfs::store::counting::{CountingStore, OpCounts};
use plfs::store::posix::PosixStore;
use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};
use crate::metadata_server::{MetadataServer, MetadataServerStore};
use crate::runner::drop_page_cache;
use crate::{fill_record, plfs_backend_dirs, verify_record};

/// The logical file the benchmark writes and opens (one per strategy and
/// run: this name, then `-<strategy>-<run>`).
pub const OPEN_BENCH_PATH: &str = "/checkpoint";

fn bench_path(strategy: Strategy, run: u32) -> String {
    format!("{OPEN_BENCH_PATH}-{strategy}-{run}")
}

/// One run of the benchmark; the same on every rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenSpec {
    /// Writer ids, each with its own index log (N).
    pub writers: usize,
    /// Ranks that open the file (M, the first M of the world); 0: all.
    pub readers: usize,
    /// Records per writer.
    pub records: u64,
    pub record_bytes: usize,
    /// In the order given (each writes its own file, so flatten's global
    /// index changes nothing the others read).
    pub strategies: Vec<Strategy>,
    /// Parallel read group size; None: the strategy's default.
    pub group_ranks: Option<usize>,
    /// A fresh subdirectory of it holds the backends.
    pub dir: PathBuf,
    pub backends: usize,
    /// Every reader reads every byte back and checks it.
    pub verify: bool,
    /// Opens per strategy; times are reported as medians.
    pub repeat: u32,
    /// Drop the page cache (when root) before every open.
    pub drop_caches: bool,
    /// Service time of an emulated metadata server that every reader's
    /// backend metadata operation queues at (zero: none; see
    /// [`crate::metadata_server`]).
    pub metadata_service: Duration,
    /// Memory per rank for the index records kept for flatten on close
    /// (plfsrc `index_buffer_mbs`); past it rank 0 reads the index logs.
    pub index_buffer_mbs: u32,
    pub keep: bool,
}

/// What one reader measured in one open.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct RankSample {
    open_ns: u64,
    opens: u64,
    index_log_opens: u64,
    global_index_opens: u64,
    lists: u64,
    metadata: u64,
    bytes_read: u64,
    rss_delta_kib: i64,
    vm_hwm_kib: u64,
    verified_bytes: u64,
    /// The timed read of this reader's share after the open.
    read_ns: u64,
    read_bytes: u64,
    error: Option<String>,
}

/// What one writer rank measured in one close.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct CloseSample {
    close_ns: u64,
    /// Index logs this rank opened during the close (flatten on close
    /// reading them back: 0 when the records were gathered).
    index_log_opens: u64,
    gathered: Option<bool>,
}

/// One strategy's figures: times over the repeats, counts and memory of
/// the last run (counts are the same every run).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StrategyReport {
    pub strategy: String,
    /// Slowest rank's open, per run.
    pub open_seconds_runs: Vec<f64>,
    pub open_seconds_median: f64,
    /// Backend opens summed over the readers.
    pub opens: u64,
    pub index_log_opens: u64,
    pub global_index_opens: u64,
    pub lists: u64,
    pub metadata: u64,
    /// Bytes the open read from the backends, summed over the readers.
    pub bytes_read: u64,
    /// Growth of resident memory across the open (what the merged index
    /// costs a rank), largest and median over the readers.
    pub rss_delta_kib_max: i64,
    pub rss_delta_kib_median: i64,
    /// Peak resident memory of the largest reader so far.
    pub vm_hwm_kib_max: u64,
    /// Bytes read back and checked, summed over readers (with verify).
    pub verified_bytes: u64,
    /// The writers' close, slowest rank, per run: for flatten it includes
    /// the collective flatten on close (Figure 4 counts it).
    pub close_seconds_runs: Vec<f64>,
    pub close_seconds_median: f64,
    /// Read open + write close, per run and median (Figure 4).
    pub open_close_seconds_runs: Vec<f64>,
    pub open_close_seconds_median: f64,
    /// Flatten on close: whether the ranks' records were gathered (else
    /// rank 0 read the index logs), and the index logs read at close,
    /// summed over the ranks (last run). None / 0 for the other strategies.
    pub close_gathered: Option<bool>,
    pub close_index_log_opens: u64,
    /// The readers' share read after the open, slowest reader, per run.
    pub read_seconds_runs: Vec<f64>,
    /// File bytes over open + read, per run and median (Figure 5: the
    /// write close is not in it).
    pub read_mib_per_s_runs: Vec<f64>,
    pub read_mib_per_s_median: f64,
    pub errors: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpenReport {
    pub writers: usize,
    pub readers: usize,
    pub ranks: usize,
    pub records: u64,
    pub record_bytes: usize,
    pub file_bytes: u64,
    pub backends: usize,
    pub repeat: u32,
    pub caches_dropped: bool,
    /// Emulated metadata server service time, µs (0: none).
    pub metadata_service_us: u64,
    pub index_buffer_mbs: u32,
    pub verify: bool,
    /// Every open succeeded and, with verify, every byte checked out.
    pub ok: bool,
    pub strategies: Vec<StrategyReport>,
}

impl OpenReport {
    pub fn to_text(&self) -> String {
        let mut text = format!(
            "collective open: {} writers x {} records x {} B ({} B), {} readers of {} ranks, {} backends, \
             {} run(s) each{}\n",
            self.writers,
            self.records,
            self.record_bytes,
            self.file_bytes,
            self.readers,
            self.ranks,
            self.backends,
            self.repeat,
            if self.caches_dropped { ", page cache dropped before each" } else { "" }
        );
        if self.metadata_service_us > 0 {
            text.push_str(&format!(
                "emulated metadata server: every backend metadata operation queues for {} us\n",
                self.metadata_service_us
            ));
        }
        text.push_str(&format!(
            "{:<10} {:>12} {:>12} {:>12} {:>10} {:>8} {:>10} {:>8} {:>12} {:>12} {:>12}{}\n",
            "strategy",
            "open s (med)",
            "close s",
            "open+close s",
            "read MiB/s",
            "opens",
            "index log",
            "global",
            "read B",
            "RSS+ KiB max",
            "HWM KiB max",
            if self.verify { "     verified B" } else { "" }
        ));
        for report in &self.strategies {
            text.push_str(&format!(
                "{:<10} {:>12.4} {:>12.4} {:>12.4} {:>10.1} {:>8} {:>10} {:>8} {:>12} {:>12} {:>12}{}\n",
                report.strategy,
                report.open_seconds_median,
                report.close_seconds_median,
                report.open_close_seconds_median,
                report.read_mib_per_s_median,
                report.opens,
                report.index_log_opens,
                report.global_index_opens,
                report.bytes_read,
                report.rss_delta_kib_max,
                report.vm_hwm_kib_max,
                if self.verify { format!(" {:>14}", report.verified_bytes) } else { String::new() }
            ));
            if let Some(gathered) = report.close_gathered {
                text.push_str(&format!(
                    "  flatten on close: {}, {} index log(s) read at close\n",
                    if gathered { "records gathered from the ranks" } else { "rank 0 read the index logs" },
                    report.close_index_log_opens
                ));
            }
            for error in &report.errors {
                text.push_str(&format!("  error: {error}\n"));
            }
        }
        text.push_str(if self.ok { "ok\n" } else { "FAILED\n" });
        text
    }
}

/// Runs the benchmark on every rank of `world`; rank 0 returns the report.
pub fn run_open(world: &dyn Comm, spec: &OpenSpec) -> Result<Option<OpenReport>> {
    let readers = if spec.readers == 0 { world.size() } else { spec.readers };
    if readers > world.size() || spec.writers == 0 || spec.record_bytes == 0 || spec.repeat == 0 {
        return Err(BenchError::invalid(format!(
            "{readers} readers need as many ranks (have {}); writers, record size and repeats must be positive",
            world.size()
        )));
    }
    let work = shared_work_dir(world, spec)?;
    let result = run_in(world, spec, &work, readers);
    // Everyone is done with the files before rank 0 removes them.
    let _ = world.barrier();
    if world.rank() == 0 && !spec.keep {
        let _ = std::fs::remove_dir_all(&work);
    }
    result
}

/// Figure 3's sweep over rank counts: for each count r, [`run_open`] on
/// the world's first r ranks with N = M = r (each writer's record count
/// stays `spec.records`, so the file grows with r, as in the paper).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpenSweepReport {
    pub ranks: Vec<usize>,
    pub points: Vec<OpenReport>,
    pub ok: bool,
}

impl OpenSweepReport {
    pub fn to_text(&self) -> String {
        let mut text = String::new();
        for point in &self.points {
            text.push_str(&point.to_text());
            text.push('\n');
        }
        let strategies: Vec<&str> = self
            .points
            .first()
            .map(|point| point.strategies.iter().map(|s| s.strategy.as_str()).collect())
            .unwrap_or_default();
        type Figure = fn(&StrategyReport) -> f64;
        let figures: [(&str, Figure); 3] = [
            ("read open s (Figure 3)", |s| s.open_seconds_median),
            ("read open + write close s (Figure 4)", |s| s.open_close_seconds_median),
            ("read MiB/s, open + read (Figure 5)", |s| s.read_mib_per_s_median),
        ];
        for (title, figure) in figures {
            let repeat = self.points.first().map_or(0, |point| point.repeat);
            text.push_str(&format!("{title}, median of {repeat}:\n{:<10}", "ranks"));
            for ranks in &self.ranks {
                text.push_str(&format!(" {ranks:>10}"));
            }
            text.push('\n');
            for (index, strategy) in strategies.iter().enumerate() {
                text.push_str(&format!("{strategy:<10}"));
                for point in &self.points {
                    let value = point.strategies.get(index).map_or(f64::NAN, figure);
                    text.push_str(&format!(" {value:>10.4}"));
                }
                text.push('\n');
            }
        }
        text.push_str(if self.ok { "ok\n" } else { "FAILED\n" });
        text
    }
}

/// Runs [`run_open`] for every count in `ranks` (each at most the world's
/// size) on the first that many ranks; rank 0 returns the reports.
pub fn run_open_sweep(world: &dyn Comm, spec: &OpenSpec, ranks: &[usize]) -> Result<Option<OpenSweepReport>> {
    if ranks.is_empty() || ranks.iter().any(|&count| count == 0 || count > world.size()) {
        return Err(BenchError::invalid(format!(
            "rank counts {ranks:?}: each must be from 1 to the {} ranks started",
            world.size()
        )));
    }
    let mut points = Vec::new();
    for &count in ranks {
        let inside = world.rank() < count;
        let group = world.split(u32::from(!inside), world.rank()).map_err(|source| {
            BenchError::Collective { doing: "splitting off a sweep point's ranks", source }
        })?;
        let point_spec = OpenSpec { writers: count, readers: count, ..spec.clone() };
        let result = if inside { run_open(&*group, &point_spec) } else { Ok(None) };
        // Ranks outside the point wait here; a failure stops every rank.
        let (result, failed) = match result {
            Ok(report) => (report, Ok(())),
            Err(error) => (None, Err(error)),
        };
        agree(world, failed, &format!("{count} ranks"))?;
        points.extend(result);
    }
    if world.rank() != 0 {
        return Ok(None);
    }
    let ok = points.iter().all(|point| point.ok);
    Ok(Some(OpenSweepReport { ranks: ranks.to_vec(), points, ok }))
}

fn run_in(world: &dyn Comm, spec: &OpenSpec, work: &Path, readers: usize) -> Result<Option<OpenReport>> {
    let reader_comm = world
        .split(u32::from(world.rank() >= readers), world.rank())
        .map_err(|source| BenchError::Collective { doing: "splitting off the readers", source })?;
    let is_reader = world.rank() < readers;
    let mut strategies = spec.strategies.clone();
    strategies.dedup();
    let mut reports = Vec::new();
    let mut caches_dropped = false;
    let barrier = || world.barrier().map_err(|source| BenchError::Collective { doing: "barrier", source });
    for strategy in strategies {
        let mut samples = Vec::new();
        let mut closes = Vec::new();
        for run in 0..spec.repeat {
            // A fresh file each time: the close is timed with its writes
            // (flatten pays there), and flatten's global index is never
            // seen by another strategy's open.
            let path = bench_path(strategy, run);
            let mut close = CloseSample::default();
            agree(world, write_phase(world, spec, work, &path, strategy, &mut close), "writing")?;
            if let Some(all) = gather_json(world, &close, "gathering the writers' close times")? {
                closes.push(all);
            }
            barrier()?;
            if world.rank() == 0 && spec.drop_caches {
                caches_dropped = drop_page_cache().is_ok();
            }
            barrier()?;
            if is_reader {
                let sample = measure_open(&*reader_comm, spec, work, &path, strategy);
                if let Some(all) = gather_json(&*reader_comm, &sample, "gathering the readers' samples")? {
                    samples.push(all);
                }
            }
            barrier()?;
            if world.rank() == 0 && !spec.keep {
                // Runs after this one need the space, not the file.
                let _ = mount(work, spec, None, None)
                    .and_then(|plfs| plfs.unlink(&path).map_err(BenchError::plfs("removing", path.clone())));
            }
        }
        if world.rank() == 0 {
            reports.push(summarize(strategy, &samples, &closes, file_bytes(spec)));
        }
    }
    if world.rank() != 0 {
        return Ok(None);
    }
    let file_bytes = file_bytes(spec);
    let ok = reports.iter().all(|report| {
        report.errors.is_empty() && (!spec.verify || report.verified_bytes == file_bytes * readers as u64)
    });
    Ok(Some(OpenReport {
        writers: spec.writers,
        readers,
        ranks: world.size(),
        records: spec.records,
        record_bytes: spec.record_bytes,
        file_bytes,
        backends: spec.backends,
        repeat: spec.repeat,
        caches_dropped,
        metadata_service_us: spec.metadata_service.as_micros() as u64,
        index_buffer_mbs: spec.index_buffer_mbs,
        verify: spec.verify,
        ok,
        strategies: reports,
    }))
}

fn file_bytes(spec: &OpenSpec) -> u64 {
    spec.writers as u64 * spec.records * spec.record_bytes as u64
}

/// Every rank's `value` as JSON at rank 0 of `comm` (None elsewhere).
fn gather_json<T: Serialize + for<'de> Deserialize<'de>>(
    comm: &dyn Comm,
    value: &T,
    doing: &'static str,
) -> Result<Option<Vec<T>>> {
    let bytes = serde_json::to_vec(value)
        .map_err(|source| BenchError::Json { what: format!("encoding a sample ({doing})"), source })?;
    let Some(all) = comm.gather(0, &bytes).map_err(|source| BenchError::Collective { doing, source })? else {
        return Ok(None);
    };
    all.iter()
        .enumerate()
        .map(|(rank, bytes)| {
            serde_json::from_slice(bytes).map_err(|source| BenchError::Json {
                what: format!("rank {rank}'s sample ({doing})"),
                source,
            })
        })
        .collect::<Result<_>>()
        .map(Some)
}

/// Rank 0 makes a fresh directory and tells everyone its name (an empty
/// name: it failed, and every rank stops).
fn shared_work_dir(world: &dyn Comm, spec: &OpenSpec) -> Result<PathBuf> {
    let mut name = Vec::new();
    let mut failure = None;
    if world.rank() == 0 {
        let made = tempfile_dir(&spec.dir).and_then(|dir| {
            for backend in plfs_backend_dirs(&dir, spec.backends) {
                std::fs::create_dir_all(&backend).map_err(BenchError::io("creating", &backend))?;
            }
            Ok(dir)
        });
        match made {
            Ok(dir) => name = dir.to_string_lossy().into_owned().into_bytes(),
            Err(error) => failure = Some(error),
        }
    }
    world
        .broadcast(0, &mut name)
        .map_err(|source| BenchError::Collective { doing: "sharing the work directory", source })?;
    if name.is_empty() {
        return Err(failure
            .unwrap_or_else(|| BenchError::Rank("rank 0 could not make the work directory".to_owned())));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&name).into_owned()))
}

fn tempfile_dir(parent: &Path) -> Result<PathBuf> {
    for attempt in 0..100u32 {
        let dir = parent.join(format!("plfs-bench-open.{}.{attempt}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(BenchError::io("creating", &dir)(error)),
        }
    }
    Err(BenchError::invalid(format!("{}: no free work directory name", parent.display())))
}

/// Every rank learns whether every rank succeeded (the first error wins),
/// so no rank goes on into a collective the others have abandoned.
fn agree(world: &dyn Comm, result: Result<()>, what: &str) -> Result<()> {
    let mine = match &result {
        Ok(()) => Vec::new(),
        Err(error) => format!("rank {}: {what}: {error}", world.rank()).into_bytes(),
    };
    let all = world
        .allgather(&mine)
        .map_err(|source| BenchError::Collective { doing: "agreeing on success", source })?;
    match all.into_iter().find(|message| !message.is_empty()) {
        Some(message) => Err(BenchError::Rank(String::from_utf8_lossy(&message).into_owned())),
        None => Ok(()),
    }
}

/// A mount over the work directory's backends, counting into `counting`,
/// behind `server` if there is one.
fn mount(
    work: &Path,
    spec: &OpenSpec,
    server: Option<&Arc<MetadataServer>>,
    counting: Option<&mut Vec<Arc<CountingStore>>>,
) -> Result<Plfs> {
    let mut stores: Vec<(SharedStore, BackendRole)> = Vec::with_capacity(spec.backends);
    let mut counters = Vec::new();
    for dir in plfs_backend_dirs(work, spec.backends) {
        let url = format!("posix://{}", dir.display());
        let mut store: SharedStore = Arc::new(
            PosixStore::new(dir.clone(), url)
                .map_err(BenchError::plfs("backend", dir.display().to_string()))?,
        );
        if let Some(server) = server {
            store = Arc::new(MetadataServerStore::new(store, server.clone()));
        }
        let counted = Arc::new(CountingStore::new(store));
        counters.push(counted.clone());
        stores.push((counted, BackendRole::Any));
    }
    if let Some(counting) = counting {
        *counting = counters;
    }
    let tuning = Tuning { index_buffer_mbs: spec.index_buffer_mbs, ..Tuning::default() };
    Plfs::new(stores, Options::from_environment(tuning))
        .map_err(BenchError::plfs("mounting plfs over", work.join("plfs").display().to_string()))
}

/// Writer w goes to rank w mod ranks; rank 0 creates the file first.
/// The close is timed between two barriers of every rank; for flatten it
/// includes the collective flatten on close (each rank kept its index
/// records from the open on).
fn write_phase(
    world: &dyn Comm,
    spec: &OpenSpec,
    work: &Path,
    path: &str,
    strategy: Strategy,
    close: &mut CloseSample,
) -> Result<()> {
    let mut counting = Vec::new();
    let plfs = mount(work, spec, None, Some(&mut counting))?;
    let created = if world.rank() == 0 {
        plfs.open(path, OpenFlags::WRONLY.create(), 0o644, 0)
            .and_then(|file| file.close())
            .map_err(BenchError::plfs("creating", path))
    } else {
        Ok(())
    };
    agree(world, created, "creating")?;
    let flatten = strategy == Strategy::Flatten;
    let mine: Vec<u64> =
        (0..spec.writers as u64).filter(|w| *w as usize % world.size() == world.rank()).collect();
    let written = (|| -> Result<Option<FileHandle>> {
        if flatten {
            retain_index(&plfs, path).map_err(BenchError::plfs("keeping the index records of", path))?;
        }
        let Some(&first) = mine.first() else { return Ok(None) };
        let file = plfs
            .open(path, OpenFlags::WRONLY, 0, first)
            .map_err(BenchError::plfs("opening for writing", path))?;
        let mut buf = vec![0u8; spec.record_bytes];
        let writers = spec.writers as u64;
        for k in 0..spec.records {
            for &writer in &mine {
                let record = k * writers + writer;
                fill_record(record, &mut buf);
                let offset = record * spec.record_bytes as u64;
                file.write_as(&buf, offset, writer)
                    .map_err(BenchError::plfs("writing", format!("{path} at {offset}")))?;
            }
        }
        Ok(Some(file))
    })();
    // No rank goes into the close's collectives while another has failed.
    let file = match written {
        Ok(file) => {
            agree(world, Ok(()), "writing")?;
            file
        }
        Err(error) => return agree(world, Err(error), "writing"),
    };
    let index_log_opens = || counting.iter().map(|store| store.counts().index_log_opens).sum::<u64>();
    world.barrier().map_err(|source| BenchError::Collective { doing: "barrier", source })?;
    let before = index_log_opens();
    let started = Instant::now();
    let closed = file.map_or(Ok(()), |file| file.close().map_err(BenchError::plfs("closing", path)));
    if flatten {
        let flattened = flatten_on_close(&plfs, path, world, closed.is_ok())
            .map_err(BenchError::plfs("flattening on close", path))?;
        close.gathered = Some(flattened.gathered);
    }
    world.barrier().map_err(|source| BenchError::Collective { doing: "barrier", source })?;
    close.close_ns = started.elapsed().as_nanos() as u64;
    close.index_log_opens = index_log_opens() - before;
    closed
}

/// One reader's open, timed between two barriers of the readers.
/// Then, timed the same way, its share of the file (the records of the
/// writers w with w mod M = its rank, in write order).
fn measure_open(
    readers: &dyn Comm,
    spec: &OpenSpec,
    work: &Path,
    path: &str,
    strategy: Strategy,
) -> RankSample {
    let mut sample = RankSample::default();
    let mut counting = Vec::new();
    let server = if spec.metadata_service.is_zero() {
        None
    } else {
        match MetadataServer::new(&work.join("metadata-server.lock"), spec.metadata_service) {
            Ok(server) => Some(server),
            Err(error) => {
                sample.error = Some(error.to_string());
                None
            }
        }
    };
    let plfs = match mount(work, spec, server.as_ref(), Some(&mut counting)) {
        Ok(plfs) => Some(plfs),
        Err(error) => {
            sample.error = Some(error.to_string());
            None
        }
    };
    let options = CollectiveOptions { strategy, group_ranks: spec.group_ranks };
    let rss_before = proc_status_kib("VmRSS:");
    let _ = readers.barrier();
    let started = Instant::now();
    // A rank without a mount still takes part, with a path that fails the
    // same way on it, so the others are not left waiting.
    let opened = match &plfs {
        Some(plfs) => open_collective_with(plfs, path, readers, &options, reader_writer(spec, readers)),
        None => Err(plfs::Error::invalid("no mount")),
    };
    sample.open_ns = started.elapsed().as_nanos() as u64;
    let counts = counting.iter().map(|store| store.counts()).fold(OpCounts::default(), add_counts);
    let _ = readers.barrier();
    sample.rss_delta_kib = proc_status_kib("VmRSS:") as i64 - rss_before as i64;
    sample.opens = counts.opens;
    sample.index_log_opens = counts.index_log_opens;
    sample.global_index_opens = counts.global_index_opens;
    sample.lists = counts.lists;
    sample.metadata = counts.metadata;
    sample.bytes_read = counts.bytes_read;
    // Every reader reads, also one whose open failed, so none waits alone.
    let _ = readers.barrier();
    let started = Instant::now();
    let read = opened
        .as_ref()
        .map_err(|_| None)
        .and_then(|handle| read_share(handle, spec, path, readers).map_err(Some));
    sample.read_ns = started.elapsed().as_nanos() as u64;
    let _ = readers.barrier();
    match read {
        Ok(bytes) => sample.read_bytes = bytes,
        Err(Some(error)) => sample.error = Some(error.to_string()),
        Err(None) => {}
    }
    match opened {
        Ok(handle) => {
            if spec.verify {
                match verify(&handle, spec, path) {
                    Ok(bytes) => sample.verified_bytes = bytes,
                    Err(error) => sample.error = Some(error.to_string()),
                }
            }
            if let Err(error) = handle.close() {
                sample.error.get_or_insert(error.to_string());
            }
        }
        Err(error) => {
            sample.error.get_or_insert(format!("rank {}: {error}", readers.rank()));
        }
    }
    sample.vm_hwm_kib = proc_status_kib("VmHWM:");
    sample
}

/// Readers get writer ids past the writers' (a read-only open writes
/// nothing, but ids stay distinct).
fn reader_writer(spec: &OpenSpec, readers: &dyn Comm) -> u64 {
    (spec.writers + readers.rank()) as u64
}

fn add_counts(total: OpCounts, counts: OpCounts) -> OpCounts {
    OpCounts {
        opens: total.opens + counts.opens,
        index_log_opens: total.index_log_opens + counts.index_log_opens,
        global_index_opens: total.global_index_opens + counts.global_index_opens,
        lists: total.lists + counts.lists,
        metadata: total.metadata + counts.metadata,
        bytes_read: total.bytes_read + counts.bytes_read,
        ..total
    }
}

/// Reads reader `rank`'s share (writer w's records for w mod M = rank),
/// checking only that every read is whole; the bytes read.
fn read_share(handle: &FileHandle, spec: &OpenSpec, path: &str, readers: &dyn Comm) -> Result<u64> {
    let mut buf = vec![0u8; spec.record_bytes];
    let writers = spec.writers as u64;
    let mine: Vec<u64> = (0..writers).filter(|w| *w as usize % readers.size() == readers.rank()).collect();
    let mut bytes = 0;
    for k in 0..spec.records {
        for &writer in &mine {
            let offset = (k * writers + writer) * spec.record_bytes as u64;
            let count = handle
                .read(&mut buf, offset)
                .map_err(BenchError::plfs("reading", format!("{path} at {offset}")))?;
            if count != buf.len() {
                return Err(BenchError::Data {
                    what: format!("{path} at {offset}"),
                    problem: format!("read {count} of {} bytes", buf.len()),
                });
            }
            bytes += count as u64;
        }
    }
    Ok(bytes)
}

/// Reads every record and checks every byte; the bytes checked.
fn verify(handle: &FileHandle, spec: &OpenSpec, path: &str) -> Result<u64> {
    let mut buf = vec![0u8; spec.record_bytes];
    let total = spec.writers as u64 * spec.records;
    for record in 0..total {
        let offset = record * spec.record_bytes as u64;
        let count = handle
            .read(&mut buf, offset)
            .map_err(BenchError::plfs("reading", format!("{path} at {offset}")))?;
        let data = |problem: String| BenchError::Data { what: format!("record {record}"), problem };
        if count != buf.len() {
            return Err(data(format!("read {count} of {} bytes", buf.len())));
        }
        verify_record(record, &buf).map_err(|position| data(format!("wrong byte at {position}")))?;
    }
    Ok(total * spec.record_bytes as u64)
}

fn summarize(
    strategy: Strategy,
    runs: &[Vec<RankSample>],
    closes: &[Vec<CloseSample>],
    file_bytes: u64,
) -> StrategyReport {
    let slowest = |ns: u64| ns as f64 / 1e9;
    let open_seconds_runs: Vec<f64> =
        runs.iter().map(|run| slowest(run.iter().map(|sample| sample.open_ns).max().unwrap_or(0))).collect();
    let read_seconds_runs: Vec<f64> =
        runs.iter().map(|run| slowest(run.iter().map(|sample| sample.read_ns).max().unwrap_or(0))).collect();
    let close_seconds_runs: Vec<f64> =
        closes.iter().map(|run| slowest(run.iter().map(|close| close.close_ns).max().unwrap_or(0))).collect();
    let open_close_seconds_runs: Vec<f64> =
        open_seconds_runs.iter().zip(&close_seconds_runs).map(|(open, close)| open + close).collect();
    let read_mib_per_s_runs: Vec<f64> = open_seconds_runs
        .iter()
        .zip(&read_seconds_runs)
        .map(|(open, read)| file_bytes as f64 / (1 << 20) as f64 / (open + read).max(1e-9))
        .collect();
    let last_close = closes.last().map(Vec::as_slice).unwrap_or(&[]);
    let last = runs.last().map(Vec::as_slice).unwrap_or(&[]);
    let sum = |field: fn(&RankSample) -> u64| last.iter().map(field).sum::<u64>();
    let mut rss: Vec<i64> = last.iter().map(|sample| sample.rss_delta_kib).collect();
    rss.sort_unstable();
    let errors = runs.iter().flatten().filter_map(|sample| sample.error.clone()).collect::<Vec<_>>();
    StrategyReport {
        strategy: strategy.to_string(),
        open_seconds_median: median(&open_seconds_runs),
        open_seconds_runs,
        opens: sum(|s| s.opens),
        index_log_opens: sum(|s| s.index_log_opens),
        global_index_opens: sum(|s| s.global_index_opens),
        lists: sum(|s| s.lists),
        metadata: sum(|s| s.metadata),
        bytes_read: sum(|s| s.bytes_read),
        rss_delta_kib_max: rss.last().copied().unwrap_or(0),
        rss_delta_kib_median: rss.get(rss.len() / 2).copied().unwrap_or(0),
        vm_hwm_kib_max: last.iter().map(|sample| sample.vm_hwm_kib).max().unwrap_or(0),
        verified_bytes: sum(|s| s.verified_bytes),
        close_seconds_median: median(&close_seconds_runs),
        close_seconds_runs,
        open_close_seconds_median: median(&open_close_seconds_runs),
        open_close_seconds_runs,
        close_gathered: last_close.iter().find_map(|close| close.gathered),
        close_index_log_opens: last_close.iter().map(|close| close.index_log_opens).sum(),
        read_seconds_runs,
        read_mib_per_s_median: median(&read_mib_per_s_runs),
        read_mib_per_s_runs,
        errors,
    }
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// A `/proc/self/status` figure in KiB (0 where there is none).
fn proc_status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|number| number.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use plfs::collective::LocalComm;

    fn spec(dir: &Path, strategies: Vec<Strategy>) -> OpenSpec {
        OpenSpec {
            writers: 5,
            readers: 3,
            records: 4,
            record_bytes: 1000,
            strategies,
            group_ranks: None,
            dir: dir.to_path_buf(),
            backends: 2,
            verify: true,
            repeat: 2,
            drop_caches: false,
            metadata_service: Duration::ZERO,
            index_buffer_mbs: 64,
            keep: false,
        }
    }

    #[test]
    fn thread_ranks_measure_the_papers_open_counts_and_verify() {
        let dir = tempfile::tempdir().unwrap();
        let spec = spec(
            dir.path(),
            vec![Strategy::Naive, Strategy::Broadcast, Strategy::Parallel, Strategy::Flatten],
        );
        let mut results = LocalComm::run(4, |world| run_open(world, &spec).unwrap());
        let report = results.remove(0).expect("rank 0 reports");
        assert!(results.iter().all(Option::is_none));
        assert!(report.ok, "{}", report.to_text());
        let names: Vec<&str> = report.strategies.iter().map(|s| s.strategy.as_str()).collect();
        assert_eq!(names, ["naive", "broadcast", "parallel", "flatten"]);
        let opens: Vec<(u64, u64)> =
            report.strategies.iter().map(|s| (s.index_log_opens, s.global_index_opens)).collect();
        // naive: 5 logs x 3 readers (each also tries the missing global index).
        assert_eq!(opens, [(15, 3), (5, 0), (5, 0), (0, 1)]);
        for strategy in &report.strategies {
            assert_eq!(strategy.verified_bytes, 3 * 5 * 4 * 1000);
            assert_eq!(strategy.open_seconds_runs.len(), 2);
            assert_eq!(strategy.close_seconds_runs.len(), 2);
            assert_eq!(strategy.read_mib_per_s_runs.len(), 2);
            assert!(strategy.read_mib_per_s_median > 0.0);
            // Flatten on close gathered the ranks' records: no index log
            // was read at close.
            let flatten = strategy.strategy == "flatten";
            assert_eq!(strategy.close_gathered, flatten.then_some(true), "{}", strategy.strategy);
            assert_eq!(strategy.close_index_log_opens, 0, "{}", strategy.strategy);
        }
        // The work directory is gone.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn an_emulated_metadata_server_changes_times_not_counts() {
        let dir = tempfile::tempdir().unwrap();
        let spec = OpenSpec {
            metadata_service: Duration::from_micros(50),
            repeat: 1,
            ..spec(dir.path(), vec![Strategy::Naive, Strategy::Broadcast])
        };
        let report = LocalComm::run(3, |world| run_open(world, &spec).unwrap()).remove(0).unwrap();
        assert!(report.ok, "{}", report.to_text());
        assert_eq!(report.metadata_service_us, 50);
        let opens: Vec<u64> = report.strategies.iter().map(|s| s.index_log_opens).collect();
        assert_eq!(opens, [15, 5]);
    }

    #[test]
    fn without_room_for_the_records_rank_0_reads_the_logs_at_close() {
        let dir = tempfile::tempdir().unwrap();
        let spec = OpenSpec { index_buffer_mbs: 0, repeat: 1, ..spec(dir.path(), vec![Strategy::Flatten]) };
        let report = LocalComm::run(3, |world| run_open(world, &spec).unwrap()).remove(0).unwrap();
        assert!(report.ok, "{}", report.to_text());
        let flatten = &report.strategies[0];
        assert_eq!(flatten.close_gathered, Some(false));
        // The five writers' index logs, read once, by rank 0.
        assert_eq!(flatten.close_index_log_opens, 5);
        // The readers still find the global index.
        assert_eq!((flatten.index_log_opens, flatten.global_index_opens), (0, 1));
    }

    #[test]
    fn a_sweep_runs_each_rank_count_with_as_many_writers_and_readers() {
        let dir = tempfile::tempdir().unwrap();
        let spec = OpenSpec { repeat: 1, ..spec(dir.path(), vec![Strategy::Broadcast, Strategy::Flatten]) };
        let mut results = LocalComm::run(4, |world| run_open_sweep(world, &spec, &[1, 2, 4]).unwrap());
        let sweep = results.remove(0).unwrap();
        assert!(results.iter().all(Option::is_none));
        assert!(sweep.ok, "{}", sweep.to_text());
        let shapes: Vec<(usize, usize)> = sweep.points.iter().map(|p| (p.writers, p.readers)).collect();
        assert_eq!(shapes, [(1, 1), (2, 2), (4, 4)]);
        for point in &sweep.points {
            assert_eq!(point.strategies[0].index_log_opens, point.writers as u64);
            assert_eq!(point.strategies[1].close_gathered, Some(true));
        }
        assert!(sweep.to_text().contains("read open + write close s (Figure 4)"));
        let refused = LocalComm::run(2, |world| run_open_sweep(world, &spec, &[1, 3]).is_err());
        assert_eq!(refused, [true, true]);
    }

    #[test]
    fn too_few_ranks_is_an_error_on_every_rank() {
        let dir = tempfile::tempdir().unwrap();
        let spec = OpenSpec { readers: 9, ..spec(dir.path(), vec![Strategy::Naive]) };
        for result in LocalComm::run(2, |world| run_open(world, &spec)) {
            assert!(result.is_err());
        }
    }
}
