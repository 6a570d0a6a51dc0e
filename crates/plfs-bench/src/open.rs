//! The collective-open benchmark ("Boosting PLFS read performance" Fig 4):
//! N writers write one N-1 strided file once; then M reader ranks open it
//! with each strategy, and the open's time, backend opens and memory are
//! measured on every reader.
//!
//! Written against the [`Comm`] trait only: under mpirun the ranks are
//! processes (the plfs binary's MPI shim), in tests they may be threads.
//! Every rank of the world calls [`run_open`]; the first M ranks read.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use plfs::collective::{CollectiveOptions, Comm, Strategy, open_collective_with};
use plfs::config::{BackendRole, Tuning};
use plfs::fs::{Options, Plfs};
use plfs::open::OpenFlags;
use plfs::store::SharedStore;
use plfs::store::counting::{CountingStore, OpCounts};
use plfs::store::posix::PosixStore;
use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};
use crate::metadata_server::{MetadataServer, MetadataServerStore};
use crate::runner::drop_page_cache;
use crate::{fill_record, plfs_backend_dirs, verify_record};

/// The logical file the benchmark writes and opens.
pub const OPEN_BENCH_PATH: &str = "/checkpoint";

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
    /// In the order given; flatten runs after the others whatever the
    /// order, since the global index it needs would change what naive reads.
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
    error: Option<String>,
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
            "{:<10} {:>12} {:>8} {:>10} {:>8} {:>12} {:>12} {:>12}{}\n",
            "strategy",
            "open s (med)",
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
                "{:<10} {:>12.4} {:>8} {:>10} {:>8} {:>12} {:>12} {:>12}{}\n",
                report.strategy,
                report.open_seconds_median,
                report.opens,
                report.index_log_opens,
                report.global_index_opens,
                report.bytes_read,
                report.rss_delta_kib_max,
                report.vm_hwm_kib_max,
                if self.verify { format!(" {:>14}", report.verified_bytes) } else { String::new() }
            ));
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

fn run_in(world: &dyn Comm, spec: &OpenSpec, work: &Path, readers: usize) -> Result<Option<OpenReport>> {
    agree(world, write_phase(world, spec, work), "writing")?;
    let reader_comm = world
        .split(u32::from(world.rank() >= readers), world.rank())
        .map_err(|source| BenchError::Collective { doing: "splitting off the readers", source })?;
    let is_reader = world.rank() < readers;
    let mut strategies = spec.strategies.clone();
    // Stable: flatten moves last, the others keep their order.
    strategies.sort_by_key(|strategy| *strategy == Strategy::Flatten);
    strategies.dedup();
    let mut reports = Vec::new();
    let mut caches_dropped = false;
    for strategy in strategies {
        if strategy == Strategy::Flatten {
            let flattened = if world.rank() == 0 {
                mount(work, spec.backends, None, None).and_then(|plfs| flatten(&plfs))
            } else {
                Ok(())
            };
            agree(world, flattened, "flattening")?;
        }
        let mut samples = Vec::new();
        for _ in 0..spec.repeat {
            world.barrier().map_err(|source| BenchError::Collective { doing: "barrier", source })?;
            if world.rank() == 0 && spec.drop_caches {
                caches_dropped = drop_page_cache().is_ok();
            }
            world.barrier().map_err(|source| BenchError::Collective { doing: "barrier", source })?;
            if is_reader {
                let sample = measure_open(&*reader_comm, spec, work, strategy);
                let bytes = serde_json::to_vec(&sample).map_err(|source| BenchError::Json {
                    what: "encoding a reader's sample".to_owned(),
                    source,
                })?;
                let gathered = reader_comm.gather(0, &bytes).map_err(|source| BenchError::Collective {
                    doing: "gathering the readers' samples",
                    source,
                })?;
                if let Some(all) = gathered {
                    let run: Vec<RankSample> = all
                        .iter()
                        .enumerate()
                        .map(|(rank, bytes)| {
                            serde_json::from_slice(bytes).map_err(|source| BenchError::Json {
                                what: format!("reader {rank}'s sample"),
                                source,
                            })
                        })
                        .collect::<Result<_>>()?;
                    samples.push(run);
                }
            }
        }
        if world.rank() == 0 {
            reports.push(summarize(strategy, &samples));
        }
    }
    if world.rank() != 0 {
        return Ok(None);
    }
    let file_bytes = spec.writers as u64 * spec.records * spec.record_bytes as u64;
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
        verify: spec.verify,
        ok,
        strategies: reports,
    }))
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
    backends: usize,
    server: Option<&Arc<MetadataServer>>,
    counting: Option<&mut Vec<Arc<CountingStore>>>,
) -> Result<Plfs> {
    let mut stores: Vec<(SharedStore, BackendRole)> = Vec::with_capacity(backends);
    let mut counters = Vec::new();
    for dir in plfs_backend_dirs(work, backends) {
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
    Plfs::new(stores, Options::from_environment(Tuning::default()))
        .map_err(BenchError::plfs("mounting plfs over", work.join("plfs").display().to_string()))
}

fn flatten(plfs: &Plfs) -> Result<()> {
    plfs.flatten(OPEN_BENCH_PATH).map(drop).map_err(BenchError::plfs("flattening", OPEN_BENCH_PATH))
}

/// Writer w goes to rank w mod ranks; rank 0 creates the file first.
fn write_phase(world: &dyn Comm, spec: &OpenSpec, work: &Path) -> Result<()> {
    let plfs = mount(work, spec.backends, None, None)?;
    let created = if world.rank() == 0 {
        plfs.open(OPEN_BENCH_PATH, OpenFlags::WRONLY.create(), 0o644, 0)
            .and_then(|file| file.close())
            .map_err(BenchError::plfs("creating", OPEN_BENCH_PATH))
    } else {
        Ok(())
    };
    agree(world, created, "creating")?;
    let mine: Vec<u64> =
        (0..spec.writers as u64).filter(|w| *w as usize % world.size() == world.rank()).collect();
    if mine.is_empty() {
        return Ok(());
    }
    let file = plfs
        .open(OPEN_BENCH_PATH, OpenFlags::WRONLY, 0, mine[0])
        .map_err(BenchError::plfs("opening for writing", OPEN_BENCH_PATH))?;
    let mut buf = vec![0u8; spec.record_bytes];
    let writers = spec.writers as u64;
    for k in 0..spec.records {
        for &writer in &mine {
            let record = k * writers + writer;
            fill_record(record, &mut buf);
            let offset = record * spec.record_bytes as u64;
            file.write_as(&buf, offset, writer)
                .map_err(BenchError::plfs("writing", format!("{OPEN_BENCH_PATH} at {offset}")))?;
        }
    }
    file.close().map_err(BenchError::plfs("closing", OPEN_BENCH_PATH))
}

/// One reader's open, timed between two barriers of the readers.
fn measure_open(readers: &dyn Comm, spec: &OpenSpec, work: &Path, strategy: Strategy) -> RankSample {
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
    let plfs = match mount(work, spec.backends, server.as_ref(), Some(&mut counting)) {
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
        Some(plfs) => {
            open_collective_with(plfs, OPEN_BENCH_PATH, readers, &options, reader_writer(spec, readers))
        }
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
    match opened {
        Ok(handle) => {
            if spec.verify {
                match verify(&handle, spec) {
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

/// Reads every record and checks every byte; the bytes checked.
fn verify(handle: &plfs::fs::FileHandle, spec: &OpenSpec) -> Result<u64> {
    let mut buf = vec![0u8; spec.record_bytes];
    let total = spec.writers as u64 * spec.records;
    for record in 0..total {
        let offset = record * spec.record_bytes as u64;
        let count = handle
            .read(&mut buf, offset)
            .map_err(BenchError::plfs("reading", format!("{OPEN_BENCH_PATH} at {offset}")))?;
        let data = |problem: String| BenchError::Data { what: format!("record {record}"), problem };
        if count != buf.len() {
            return Err(data(format!("read {count} of {} bytes", buf.len())));
        }
        verify_record(record, &buf).map_err(|position| data(format!("wrong byte at {position}")))?;
    }
    Ok(total * spec.record_bytes as u64)
}

fn summarize(strategy: Strategy, runs: &[Vec<RankSample>]) -> StrategyReport {
    let open_seconds_runs: Vec<f64> = runs
        .iter()
        .map(|run| run.iter().map(|sample| sample.open_ns).max().unwrap_or(0) as f64 / 1e9)
        .collect();
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
            keep: false,
        }
    }

    #[test]
    fn thread_ranks_measure_the_papers_open_counts_and_verify() {
        let dir = tempfile::tempdir().unwrap();
        let spec = spec(
            dir.path(),
            vec![Strategy::Flatten, Strategy::Naive, Strategy::Broadcast, Strategy::Parallel],
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
    fn too_few_ranks_is_an_error_on_every_rank() {
        let dir = tempfile::tempdir().unwrap();
        let spec = OpenSpec { readers: 9, ..spec(dir.path(), vec![Strategy::Naive]) };
        for result in LocalComm::run(2, |world| run_open(world, &spec)) {
            assert!(result.is_err());
        }
    }
}
