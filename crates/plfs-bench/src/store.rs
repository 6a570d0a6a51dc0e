//! The store benchmark: the N-1 checkpoint through plfs onto any store
//! (`posix:///…`, `hdfs://…`, `s3://…`) against raw N-N streaming writers
//! on the same store in the same run, at several record sizes — the
//! PLFS/HDFS paper's experiment (47001 B, 48 KiB and 1 MiB records,
//! shifted read-back), with the bytes each HDFS DataNode served (its
//! Figure 7) when the DataNodes' JMX addresses are given.
//!
//! Per size, in a fresh directory `plfs-bench.<pid>.<ns>` on the stores:
//! A write, B write, then (with `read`) A read, B read, B read again and A
//! read again, where A is raw or plfs by turns (see
//! [`StoreBenchSpec::plfs_first`]), each a set of worker processes
//! released together; a side's read figure is its bytes over its time in
//! both passes. Raw writer r streams its records, in order, into one object of
//! its own (`Store::create_append`, `append`, `sync`, `close`); raw reader
//! r reads writer (r+1)%N's object back with `open_read` / `read_at`,
//! record by record, as the plfs reader does through the library. Every
//! byte read is checked.

use std::fmt::Write as _;
use std::time::Duration;

use plfs::config::{BackendRole, Tuning};
use plfs::fs::{Options, Plfs};
use plfs::store::SharedStore;
use plfs::{Error, ErrorKind};
use serde::Serialize;

use crate::error::{BenchError, Result};
use crate::jmx::{self, DataNodeBytes, Snapshot};
use crate::report::PhaseReport;
use crate::runner::run_workers;
use crate::spread::Spread;
use crate::worker::{Op, StoreRun, Target, WorkerSpec, now_ns, open_store_url};
use crate::{WorkerCommand, Workload};

const MIB: f64 = (1u64 << 20) as f64;

/// The target: plfs at least 0.90 of the raw store's bandwidth.
pub const TARGET_RATIO: f64 = 0.90;

/// Hadoop's metrics system refreshes the values JMX shows at most once a
/// metrics period (10 s by default; the cache lives period + 1 ms), so a
/// DataNode snapshot taken this long after the last I/O has all of it.
pub const DEFAULT_JMX_SETTLE: Duration = Duration::from_secs(11);

/// One store benchmark run: every size, on the same stores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreBenchSpec {
    pub workload: Workload,
    /// Writer processes (and reader processes, with `read`).
    pub writers: usize,
    /// Records per writer, at every size (unless `bytes_per_writer`).
    pub records: u64,
    /// Instead of a fixed record count, this many bytes per writer at
    /// every size (whole records, at least one), as the paper's 512 MB per
    /// node: sizes then compare on equal volumes.
    pub bytes_per_writer: Option<u64>,
    /// Record sizes, each run in turn (the paper's: 47001, 49152, 1048576).
    pub sizes: Vec<usize>,
    /// Shifted read-back with every byte verified.
    pub read: bool,
    /// Store URLs: the plfs mount's backends, and where the raw objects go.
    pub backends: Vec<String>,
    /// Leave each size's files on the stores.
    pub keep: bool,
    /// DataNode HTTP addresses (`http://host:port`) whose JMX counters are
    /// read around every phase; empty for none.
    pub datanodes: Vec<String>,
    /// Wait before each DataNode snapshot (see [`DEFAULT_JMX_SETTLE`]).
    pub jmx_settle: Duration,
    /// The first size runs plfs before raw (writes, then reads in the
    /// order plfs, raw, raw, plfs), and every following size swaps:
    /// whichever goes first after a cleanup may meet a stall the other does
    /// not (seen on a shared disk), so repeats alternate this, and the
    /// summary cancels the order out (see [`Crossover`]).
    pub plfs_first: bool,
}

impl StoreBenchSpec {
    /// Records each writer writes at `record_bytes`.
    pub fn records_at(&self, record_bytes: usize) -> u64 {
        match self.bytes_per_writer {
            Some(bytes) => (bytes / record_bytes.max(1) as u64).max(1),
            None => self.records,
        }
    }

    /// The paper's three sizes with read-back on `backends`; 4 writers ×
    /// 2000 records, as the posix bench.
    pub fn new(backends: Vec<String>) -> StoreBenchSpec {
        StoreBenchSpec {
            workload: Workload::N1Strided,
            writers: 4,
            records: 2000,
            bytes_per_writer: None,
            sizes: vec![47001, 49152, 1 << 20],
            read: true,
            backends,
            keep: false,
            datanodes: Vec::new(),
            jmx_settle: DEFAULT_JMX_SETTLE,
            plfs_first: false,
        }
    }
}

/// What every DataNode did during one phase.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseTraffic {
    pub phase: String,
    pub op: Op,
    pub datanodes: Vec<DataNodeBytes>,
    pub total_read: u64,
    pub total_written: u64,
    /// The phase's own counter (BytesRead for a read, BytesWritten for a
    /// write) summed over the DataNodes ÷ the bytes the phase moved: about
    /// the replication factor for a write (plus plfs's index logs), about
    /// 1 for a read.
    pub amplification: f64,
    /// The busiest DataNode's share of that counter ÷ the mean share: 1.0
    /// is perfectly balanced (the paper's HDFS1 read), more is the
    /// imbalance replication 3 lets the scheduler fall into (its HDFS3).
    pub max_over_mean: Option<f64>,
}

impl PhaseTraffic {
    fn new(phase: &str, op: Op, datanodes: Vec<DataNodeBytes>, phase_bytes: u64) -> PhaseTraffic {
        let own = |d: &DataNodeBytes| match op {
            Op::Read => d.bytes_read,
            Op::Write => d.bytes_written,
        };
        let total: u64 = datanodes.iter().map(own).sum();
        let busiest = datanodes.iter().map(own).max().unwrap_or(0);
        let mean = total as f64 / datanodes.len().max(1) as f64;
        PhaseTraffic {
            phase: phase.to_owned(),
            op,
            total_read: datanodes.iter().map(|d| d.bytes_read).sum(),
            total_written: datanodes.iter().map(|d| d.bytes_written).sum(),
            amplification: total as f64 / phase_bytes.max(1) as f64,
            max_over_mean: (mean > 0.0).then(|| busiest as f64 / mean),
            datanodes,
        }
    }
}

/// One record size: plfs against the raw store, writing and reading.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoreSizeReport {
    pub record_bytes: usize,
    /// Records per writer.
    pub records: u64,
    /// Bytes each phase moved (writers × records × record size).
    pub total_bytes: u64,
    pub plfs_write_mibs: f64,
    pub raw_write_mibs: f64,
    /// plfs ÷ raw write bandwidth.
    pub write_ratio: f64,
    pub plfs_read_mibs: Option<f64>,
    pub raw_read_mibs: Option<f64>,
    /// plfs ÷ raw read bandwidth.
    pub read_ratio: Option<f64>,
    /// Every byte read back in both read phases matched (vacuously true
    /// without read-back).
    pub verified: bool,
    pub phases: Vec<PhaseReport>,
    /// Per phase, with DataNode JMX addresses given.
    pub datanode_traffic: Vec<PhaseTraffic>,
    /// The size's directory on the stores (removed unless kept).
    pub run_dir: String,
}

/// The outcome of one [`run_store`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoreReport {
    pub workload: Workload,
    pub writers: usize,
    /// Set when every size wrote this volume per writer (else the sizes'
    /// record counts are all the spec's).
    pub bytes_per_writer: Option<u64>,
    pub backends: Vec<String>,
    pub cores: usize,
    pub read: bool,
    /// Every size verified every byte it read back.
    pub verified: bool,
    pub target_ratio: f64,
    pub datanode_jmx: Vec<String>,
    pub sizes: Vec<StoreSizeReport>,
    pub kept: bool,
    pub compared: String,
    /// What about the machine skews a phase-against-phase comparison
    /// (see [`crate::host`]); empty when nothing known was found.
    pub host_notes: Vec<String>,
}

/// Runs every size of `spec`, starting workers with `command`.
pub fn run_store(spec: &StoreBenchSpec, command: &WorkerCommand) -> Result<StoreReport> {
    validate(spec)?;
    // Every store is opened (and its root listed) here, before any worker
    // starts, so a bad URL or a dead server fails at once, named.
    let mut stores = Vec::with_capacity(spec.backends.len());
    for url in &spec.backends {
        let store = open_store_url(url)?;
        store
            .list(&plfs::store::StorePath::root())
            .map_err(BenchError::plfs("listing the root of backend", url.as_str()))?;
        stores.push(store);
    }
    let plfs = Plfs::new(
        stores.iter().map(|store| (store.clone(), BackendRole::Any)).collect(),
        Options::from_environment(Tuning::default()),
    )
    .map_err(BenchError::plfs("mounting plfs over", spec.backends.join(",")))?;
    if !spec.datanodes.is_empty() {
        // Also fail before any I/O when a DataNode does not answer.
        jmx::snapshot(&spec.datanodes)?;
    }
    let mut sizes = Vec::with_capacity(spec.sizes.len());
    for (index, &record_bytes) in spec.sizes.iter().enumerate() {
        let plfs_first = spec.plfs_first ^ (index % 2 == 1);
        sizes.push(run_size(spec, command, &stores, &plfs, record_bytes, plfs_first)?);
    }
    Ok(StoreReport {
        workload: spec.workload,
        writers: spec.writers,
        bytes_per_writer: spec.bytes_per_writer,
        backends: spec.backends.clone(),
        cores: std::thread::available_parallelism().map_or(1, usize::from),
        read: spec.read,
        verified: sizes.iter().all(|size| size.verified),
        target_ratio: TARGET_RATIO,
        datanode_jmx: spec.datanodes.clone(),
        sizes,
        kept: spec.keep,
        compared: compared(spec),
        host_notes: crate::host::memory_notes(std::path::Path::new("/sys")),
    })
}

fn validate(spec: &StoreBenchSpec) -> Result<()> {
    if spec.backends.is_empty() {
        return Err(BenchError::invalid("bench: the store benchmark needs at least one --backend URL"));
    }
    if spec.writers == 0 || spec.records == 0 || spec.bytes_per_writer == Some(0) {
        return Err(BenchError::invalid("bench: at least one writer and one record are needed"));
    }
    if spec.sizes.is_empty() || spec.sizes.contains(&0) {
        return Err(BenchError::invalid("bench: record sizes must be positive"));
    }
    for &size in &spec.sizes {
        spec.records_at(size)
            .checked_mul(spec.writers as u64)
            .and_then(|n| n.checked_mul(size as u64))
            .filter(|total| *total < 1 << 60)
            .ok_or_else(|| {
                BenchError::invalid(format!(
                    "bench: {} writers x {} records x {size} B overflows",
                    spec.writers,
                    spec.records_at(size)
                ))
            })?;
    }
    Ok(())
}

fn run_size(
    spec: &StoreBenchSpec,
    command: &WorkerCommand,
    stores: &[SharedStore],
    plfs: &Plfs,
    record_bytes: usize,
    plfs_first: bool,
) -> Result<StoreSizeReport> {
    let run = StoreRun {
        urls: spec.backends.clone(),
        run: format!("plfs-bench.{}.{}", std::process::id(), now_ns()),
    };
    let dirs = RunDirs::create(stores, plfs, &run, spec.writers, spec.keep)?;
    let records = spec.records_at(record_bytes);
    let total_bytes = spec.writers as u64 * records * record_bytes as u64;
    let [first, second] =
        if plfs_first { [Target::Plfs, Target::RawNn] } else { [Target::RawNn, Target::Plfs] };
    let mut plan: Vec<(Target, Op, u32)> = vec![(first, Op::Write, 1), (second, Op::Write, 1)];
    if spec.read {
        // Reads are cheap next to writes, so each side reads twice, in the
        // order first, second, second, first: a drift over the phases (a
        // cache warming, a DataNode settling) then lands on both sides alike
        // instead of on whichever reads second.
        plan.extend([
            (first, Op::Read, 1),
            (second, Op::Read, 1),
            (second, Op::Read, 2),
            (first, Op::Read, 2),
        ]);
    }
    let jmx = !spec.datanodes.is_empty();
    let settled_snapshot = || -> Result<Snapshot> {
        std::thread::sleep(spec.jmx_settle);
        jmx::snapshot(&spec.datanodes)
    };
    let mut before = if jmx { Some(settled_snapshot()?) } else { None };
    let (mut phases, mut traffic) = (Vec::new(), Vec::new());
    for (target, op, pass) in plan {
        let name = match pass {
            1 => format!("{} {}", op.as_str(), target.as_str()),
            _ => format!("{} {} {pass}", op.as_str(), target.as_str()),
        };
        let specs: Vec<WorkerSpec> = (0..spec.writers)
            .map(|rank| WorkerSpec {
                workload: spec.workload,
                target,
                op,
                rank,
                writers: spec.writers,
                records,
                record_bytes,
                dir: Default::default(),
                backends: spec.backends.len(),
                fuse_dir: None,
                store: Some(run.clone()),
                verify_reads: Default::default(),
            })
            .collect();
        // On posix stores, what the last phase left dirty is written back
        // now, not during this phase's clock (as the posix bench does).
        // SAFETY: sync(2) takes no arguments and cannot fail.
        unsafe { libc::sync() };
        let (start_ns, results) = run_workers(&format!("{name} ({record_bytes} B)"), command, &specs, &[])?;
        let phase = PhaseReport::from_results(&name, target, op, total_bytes, start_ns, &results)?;
        if let Some(then) = &before {
            let now = settled_snapshot()?;
            traffic.push(PhaseTraffic::new(&name, op, jmx::delta(then, &now), phase.bytes));
            before = Some(now);
        }
        phases.push(phase);
    }
    // A side's bandwidth over all its passes: their bytes over their time.
    let find = |target: Target, op: Op| {
        let (bytes, seconds) = phases
            .iter()
            .filter(|p| p.target == target && p.op == op)
            .fold((0u64, 0f64), |(bytes, seconds), p| (bytes + p.bytes, seconds + p.seconds));
        (seconds > 0.0).then(|| bytes as f64 / MIB / seconds)
    };
    let ratio = |plfs: Option<f64>, raw: Option<f64>| match (plfs, raw) {
        (Some(plfs), Some(raw)) if raw > 0.0 => Some(plfs / raw),
        _ => None,
    };
    let (plfs_write, raw_write) = (find(Target::Plfs, Op::Write), find(Target::RawNn, Op::Write));
    let (plfs_read, raw_read) = (find(Target::Plfs, Op::Read), find(Target::RawNn, Op::Read));
    let report = StoreSizeReport {
        record_bytes,
        records,
        total_bytes,
        plfs_write_mibs: plfs_write.unwrap_or(0.0),
        raw_write_mibs: raw_write.unwrap_or(0.0),
        write_ratio: ratio(plfs_write, raw_write).unwrap_or(0.0),
        plfs_read_mibs: plfs_read,
        raw_read_mibs: raw_read,
        read_ratio: ratio(plfs_read, raw_read),
        verified: phases.iter().all(|p| p.bad_records == 0),
        phases,
        datanode_traffic: traffic,
        run_dir: run.run.clone(),
    };
    drop(dirs);
    Ok(report)
}

/// A size's directories on the stores: `/<run>` through plfs (on every
/// backend) and `<run>-raw` on every store; removed, with everything in
/// them, when this goes (also when a phase fails) unless kept.
struct RunDirs<'a> {
    stores: &'a [SharedStore],
    plfs: &'a Plfs,
    run: &'a StoreRun,
    writers: usize,
    keep: bool,
}

impl<'a> RunDirs<'a> {
    fn create(
        stores: &'a [SharedStore],
        plfs: &'a Plfs,
        run: &'a StoreRun,
        writers: usize,
        keep: bool,
    ) -> Result<RunDirs<'a>> {
        let dirs = RunDirs { stores, plfs, run, writers, keep };
        let raw = run.raw_dir()?;
        for store in stores {
            store
                .create_dir_all(&raw)
                .map_err(BenchError::plfs("creating", format!("{}: {raw}", store.url())))?;
        }
        let dir = format!("/{}", run.run);
        plfs.mkdir(&dir, 0o755).map_err(BenchError::plfs("creating through plfs", dir))?;
        Ok(dirs)
    }

    fn remove(&self) -> Result<()> {
        let gone = |result: Result<(), Error>| match result {
            Err(error) if error.kind() != ErrorKind::NotFound => Err(error),
            _ => Ok(()),
        };
        for writer in 0..self.writers {
            let (index, path) = self.run.raw_object(writer)?;
            let store = &self.stores[index];
            gone(store.remove_file(&path))
                .map_err(BenchError::plfs("removing", format!("{}: {path}", store.url())))?;
        }
        let raw = self.run.raw_dir()?;
        for store in self.stores {
            gone(store.remove_dir(&raw))
                .map_err(BenchError::plfs("removing", format!("{}: {raw}", store.url())))?;
        }
        let dir = format!("/{}", self.run.run);
        let entries =
            self.plfs.readdir(&dir).map_err(BenchError::plfs("listing through plfs", dir.as_str()))?;
        for entry in entries {
            let path = format!("{dir}/{}", entry.name);
            self.plfs.unlink(&path).map_err(BenchError::plfs("removing through plfs", path))?;
        }
        self.plfs.rmdir(&dir).map_err(BenchError::plfs("removing through plfs", dir))
    }
}

impl Drop for RunDirs<'_> {
    fn drop(&mut self) {
        if !self.keep
            && let Err(error) = self.remove()
        {
            eprintln!("plfs bench: cleaning up {}: {error}", self.run.run);
        }
    }
}

fn compared(spec: &StoreBenchSpec) -> String {
    let n = spec.writers;
    let shape = match spec.workload {
        Workload::N1Strided => "one logical file, strided (record k*N+r)",
        Workload::N1Segmented => "one logical file, one contiguous block each",
        Workload::Nn => "one logical file each",
    };
    let (reads, order) = if spec.read {
        (
            " Read-back: process r reads, record by record, what process (r+1) mod N wrote (plfs through \
             a fresh mount; raw with open_read/read_at on that writer's object), and checks every byte.",
            "Per size the writes run, A then B, then each side reads twice in the order A, B, B, A (a \
             side's read bandwidth is its bytes over its time in both passes)",
        )
    } else {
        ("", "Per size the writes run, A then B")
    };
    let datanodes = if spec.datanodes.is_empty() {
        String::new()
    } else {
        format!(
            " DataNode bytes: the BytesRead / BytesWritten deltas of every DataNodeActivity bean over each \
             phase, read {:.0} s after its I/O (Hadoop refreshes JMX values once a metrics period).",
            spec.jmx_settle.as_secs_f64()
        )
    };
    format!(
        "Compared on the same store(s): plfs = {n} processes write {shape} through the library, which \
         appends per-writer logs to the store; raw N-N = each process streams its records into one object \
         of its own with the store's create_append/append/sync/close (on hdfs:// and s3:// the client \
         library itself). Both sync before their clocks stop.{reads}{datanodes} {order}; which of plfs \
         and raw is A alternates from size to size and from run to run (see phases)."
    )
}

fn show_ratio(ratio: Option<f64>) -> String {
    match ratio {
        Some(r) => format!("{r:.2}x{}", if r >= TARGET_RATIO { "" } else { " <" }),
        None => "-".to_owned(),
    }
}

fn show_mibs(mibs: Option<f64>) -> String {
    mibs.map_or("-".to_owned(), |m| format!("{m:.1}"))
}

impl StoreReport {
    /// Bandwidths and ratios per size, and the DataNode table when measured.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "plfs bench {} on {}: {} processes, {} core(s)",
            self.workload,
            self.backends.join(","),
            self.writers,
            self.cores
        );
        let _ = writeln!(out, "{}\n", self.compared);
        write_host_notes(&mut out, &self.host_notes);
        let _ = writeln!(
            out,
            "{:>9} {:>8} {:>9} {:>11} {:>11} {:>9} {:>11} {:>11} {:>9}",
            "record B",
            "records",
            "MiB",
            "plfs write",
            "raw write",
            "plfs/raw",
            "plfs read",
            "raw read",
            "plfs/raw"
        );
        for size in &self.sizes {
            let _ = writeln!(
                out,
                "{:>9} {:>8} {:>9.1} {:>11.1} {:>11.1} {:>9} {:>11} {:>11} {:>9}",
                size.record_bytes,
                size.records,
                size.total_bytes as f64 / MIB,
                size.plfs_write_mibs,
                size.raw_write_mibs,
                show_ratio(Some(size.write_ratio)),
                show_mibs(size.plfs_read_mibs),
                show_mibs(size.raw_read_mibs),
                show_ratio(size.read_ratio),
            );
        }
        let _ = writeln!(out, "(MiB/s; \"<\" marks a ratio under the {TARGET_RATIO:.2}x target)");
        for size in self.sizes.iter().filter(|size| !size.datanode_traffic.is_empty()) {
            out.push_str(&datanode_table(size));
        }
        if !self.read {
            let _ = writeln!(out, "verified: not checked (no read-back; use --read)");
        } else if self.verified {
            let _ = writeln!(out, "verified: every byte read back in every phase matched");
        } else {
            let _ = writeln!(out, "verified: NO");
            for size in &self.sizes {
                for phase in size.phases.iter().filter(|p| p.bad_records > 0) {
                    let first = phase.first_bad.as_deref().unwrap_or("");
                    let _ = writeln!(
                        out,
                        "  {} B {}: {} bad record(s); first: {first}",
                        size.record_bytes, phase.name, phase.bad_records
                    );
                }
            }
        }
        if self.kept {
            let dirs: Vec<&str> = self.sizes.iter().map(|s| s.run_dir.as_str()).collect();
            let _ = writeln!(out, "files kept in /{} (and <dir>-raw) on the stores", dirs.join(", /"));
        }
        out
    }
}

/// MiB each DataNode moved per phase (BytesWritten for writes, BytesRead
/// for reads): the paper's Figure 7 as a table.
fn datanode_table(size: &StoreSizeReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n{} B records: MiB per DataNode (written in write phases, served in read phases)",
        size.record_bytes
    );
    let _ = write!(out, "{:<22}", "DataNode");
    for phase in &size.datanode_traffic {
        let _ = write!(out, " {:>13}", phase.phase);
    }
    let _ = writeln!(out);
    let mut names: Vec<&str> =
        size.datanode_traffic.iter().flat_map(|t| t.datanodes.iter().map(|d| d.datanode.as_str())).collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        let _ = write!(out, "{name:<22}");
        for phase in &size.datanode_traffic {
            let bytes = phase.datanodes.iter().find(|d| d.datanode == name).map(|d| match phase.op {
                Op::Read => d.bytes_read,
                Op::Write => d.bytes_written,
            });
            let _ =
                write!(out, " {:>13}", bytes.map_or("-".to_owned(), |b| format!("{:.1}", b as f64 / MIB)));
        }
        let _ = writeln!(out);
    }
    let _ = write!(out, "{:<22}", "total / phase bytes");
    for phase in &size.datanode_traffic {
        let _ = write!(out, " {:>13}", format!("{:.2}x", phase.amplification));
    }
    let _ = write!(out, "\n{:<22}", "busiest / mean");
    for phase in &size.datanode_traffic {
        let _ = write!(out, " {:>13}", phase.max_over_mean.map_or("-".to_owned(), |r| format!("{r:.2}")));
    }
    let _ = writeln!(out);
    out
}

/// One size's figures over several runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeSpread {
    pub record_bytes: usize,
    pub plfs_write_mibs: Option<Spread>,
    pub raw_write_mibs: Option<Spread>,
    pub write_ratio: Option<Spread>,
    pub plfs_read_mibs: Option<Spread>,
    pub raw_read_mibs: Option<Spread>,
    pub read_ratio: Option<Spread>,
    /// The ratios with the order cancelled (see [`Crossover`]); present
    /// once both orders ran at this size.
    pub write_crossover: Option<Crossover>,
    pub read_crossover: Option<Crossover>,
}

/// A ratio from runs in both orders, as in a crossover trial. Whichever
/// side runs second at a size can be 10-40% faster or slower for reasons
/// of the machine (seen here: a guest that frees page cache and hands the
/// pages to its host, so what a phase's writes cost depends on what ran
/// before it; see [`crate::host`]). If position
/// multiplies a ratio by p, runs with plfs first measure r·p and runs with
/// raw first r/p, so the geometric mean of the two medians is r whatever
/// p is, whereas the median of all runs leans toward whichever order ran
/// more often.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Crossover {
    /// √(plfs_first × raw_first).
    pub ratio: f64,
    /// Median over the runs where plfs went first.
    pub plfs_first: f64,
    /// Median over the runs where raw went first.
    pub raw_first: f64,
}

impl Crossover {
    fn of(sizes: &[&StoreSizeReport], get: fn(&StoreSizeReport) -> Option<f64>) -> Option<Crossover> {
        let in_order = |plfs_first: bool| {
            Spread::of(
                sizes
                    .iter()
                    .filter(|size| {
                        size.phases.first().map(|phase| phase.target == Target::Plfs) == Some(plfs_first)
                    })
                    .map(|size| get(size)),
            )
        };
        let (plfs_first, raw_first) = (in_order(true)?.median, in_order(false)?.median);
        Some(Crossover { ratio: (plfs_first * raw_first).sqrt(), plfs_first, raw_first })
    }
}

/// Several [`run_store`]s summarised per size by medians (and ranges).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoreRepeatedReport {
    pub runs: usize,
    pub target_ratio: f64,
    pub verified: bool,
    pub sizes: Vec<SizeSpread>,
    /// Every run's notes, each once.
    pub host_notes: Vec<String>,
    pub reports: Vec<StoreReport>,
}

impl StoreRepeatedReport {
    pub fn new(reports: Vec<StoreReport>) -> StoreRepeatedReport {
        let record_sizes: Vec<usize> =
            reports.first().map(|r| r.sizes.iter().map(|s| s.record_bytes).collect()).unwrap_or_default();
        let sizes = record_sizes
            .iter()
            .enumerate()
            .map(|(index, &record_bytes)| {
                let of = |get: fn(&StoreSizeReport) -> Option<f64>| {
                    Spread::of(reports.iter().map(|r| r.sizes.get(index).and_then(get)))
                };
                let at_size: Vec<&StoreSizeReport> =
                    reports.iter().filter_map(|r| r.sizes.get(index)).collect();
                SizeSpread {
                    record_bytes,
                    plfs_write_mibs: of(|s| Some(s.plfs_write_mibs)),
                    raw_write_mibs: of(|s| Some(s.raw_write_mibs)),
                    write_ratio: of(|s| Some(s.write_ratio)),
                    plfs_read_mibs: of(|s| s.plfs_read_mibs),
                    raw_read_mibs: of(|s| s.raw_read_mibs),
                    read_ratio: of(|s| s.read_ratio),
                    write_crossover: Crossover::of(&at_size, |s| Some(s.write_ratio)),
                    read_crossover: Crossover::of(&at_size, |s| s.read_ratio),
                }
            })
            .collect();
        let mut host_notes: Vec<String> = Vec::new();
        for note in reports.iter().flat_map(|r| &r.host_notes) {
            if !host_notes.contains(note) {
                host_notes.push(note.clone());
            }
        }
        StoreRepeatedReport {
            runs: reports.len(),
            target_ratio: TARGET_RATIO,
            verified: reports.iter().all(|r| r.verified),
            sizes,
            host_notes,
            reports,
        }
    }

    pub fn to_text(&self) -> String {
        let cell = |spread: Option<Spread>, digits: usize| match spread {
            Some(s) => format!("{:.*} ({:.*}..{:.*})", digits, s.median, digits, s.min, digits, s.max),
            None => "-".to_owned(),
        };
        let mut out = String::new();
        let _ = writeln!(out, "medians (min..max) over {} runs, MiB/s:", self.runs);
        let _ = writeln!(
            out,
            "{:>9} {:>20} {:>20} {:>18} {:>20} {:>20} {:>18}",
            "record B", "plfs write", "raw write", "plfs/raw", "plfs read", "raw read", "plfs/raw"
        );
        for size in &self.sizes {
            let _ = writeln!(
                out,
                "{:>9} {:>20} {:>20} {:>18} {:>20} {:>20} {:>18}",
                size.record_bytes,
                cell(size.plfs_write_mibs, 1),
                cell(size.raw_write_mibs, 1),
                cell(size.write_ratio, 2),
                cell(size.plfs_read_mibs, 1),
                cell(size.raw_read_mibs, 1),
                cell(size.read_ratio, 2),
            );
        }
        let crossover = |c: Option<Crossover>| match c {
            Some(c) => format!("{:.2} ({:.2} / {:.2})", c.ratio, c.plfs_first, c.raw_first),
            None => "- (one order only)".to_owned(),
        };
        let _ = writeln!(
            out,
            "\nplfs/raw with the order cancelled: sqrt(median with plfs first x median with raw first)"
        );
        let _ = writeln!(out, "{:>9} {:>26} {:>26}", "record B", "write (plfs 1st / raw 1st)", "read");
        for size in &self.sizes {
            let _ = writeln!(
                out,
                "{:>9} {:>26} {:>26}",
                size.record_bytes,
                crossover(size.write_crossover),
                crossover(size.read_crossover)
            );
        }
        let _ = writeln!(out, "target: plfs/raw >= {TARGET_RATIO:.2}");
        write_host_notes(&mut out, &self.host_notes);
        let verdict =
            if self.verified { "every run verified every byte it read" } else { "MISMATCH in some run" };
        let _ = writeln!(out, "verified: {verdict}");
        out
    }
}

/// The machine's conditions, as a warning above or under the figures.
fn write_host_notes(out: &mut String, notes: &[String]) {
    for note in notes {
        let _ = writeln!(
            out,
            "warning: {note}; phases then differ by what ran before them (docs/PERFORMANCE.md)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(datanode: &str, read: u64, written: u64) -> DataNodeBytes {
        DataNodeBytes { datanode: datanode.to_owned(), bytes_read: read, bytes_written: written }
    }

    #[test]
    fn traffic_measures_replication_and_balance() {
        // Replication 3 over three DataNodes: every one stores everything.
        let write = PhaseTraffic::new(
            "write plfs",
            Op::Write,
            vec![bytes("a:1", 0, 1000), bytes("b:2", 0, 1000), bytes("c:3", 5, 1000)],
            1000,
        );
        assert_eq!((write.total_written, write.total_read), (3000, 5));
        assert_eq!(write.amplification, 3.0);
        assert_eq!(write.max_over_mean, Some(1.0));
        // One DataNode serves half the read.
        let read = PhaseTraffic::new(
            "read plfs",
            Op::Read,
            vec![bytes("a:1", 600, 0), bytes("b:2", 300, 0), bytes("c:3", 300, 0)],
            1200,
        );
        assert_eq!(read.amplification, 1.0);
        assert_eq!(read.max_over_mean, Some(1.5));
        let idle = PhaseTraffic::new("read raw-nn", Op::Read, vec![bytes("a:1", 0, 0)], 10);
        assert_eq!(idle.max_over_mean, None);
    }

    /// One size of one run: `first` wrote first; the ratios as given.
    fn size_run(first: Target, write_ratio: f64, read_ratio: Option<f64>) -> StoreSizeReport {
        let phase = |target: Target| PhaseReport {
            name: format!("write {}", target.as_str()),
            target,
            op: Op::Write,
            seconds: 1.0,
            bytes: 1,
            mibs: 1.0,
            bad_records: 0,
            first_bad: None,
            max_start_lag_ms: 0.0,
            cpu_seconds: 0.0,
            ranks: None,
        };
        let second = if first == Target::Plfs { Target::RawNn } else { Target::Plfs };
        StoreSizeReport {
            record_bytes: 4096,
            records: 1,
            total_bytes: 1,
            plfs_write_mibs: write_ratio,
            raw_write_mibs: 1.0,
            write_ratio,
            plfs_read_mibs: read_ratio,
            raw_read_mibs: read_ratio.map(|_| 1.0),
            read_ratio,
            verified: true,
            phases: vec![phase(first), phase(second)],
            datanode_traffic: Vec::new(),
            run_dir: String::new(),
        }
    }

    fn summary(sizes: Vec<StoreSizeReport>) -> SizeSpread {
        let run = |size| run_report(size, Vec::new());
        StoreRepeatedReport::new(sizes.into_iter().map(run).collect()).sizes.remove(0)
    }

    fn run_report(size: StoreSizeReport, host_notes: Vec<String>) -> StoreReport {
        StoreReport {
            workload: Workload::N1Strided,
            writers: 1,
            bytes_per_writer: None,
            backends: Vec::new(),
            cores: 1,
            read: true,
            verified: true,
            target_ratio: TARGET_RATIO,
            datanode_jmx: Vec::new(),
            sizes: vec![size],
            kept: false,
            compared: String::new(),
            host_notes,
        }
    }

    #[test]
    fn host_notes_are_warnings_and_a_summary_lists_each_once() {
        let notes = |names: &[&str]| names.iter().map(|name| (*name).to_owned()).collect::<Vec<_>>();
        let reports = vec![
            run_report(size_run(Target::Plfs, 1.0, None), notes(&["reporting"])),
            run_report(size_run(Target::RawNn, 1.0, None), notes(&["reporting", "reclaim"])),
        ];
        let one = reports[1].to_text();
        assert!(one.contains("warning: reporting;") && one.contains("warning: reclaim;"), "{one}");
        let summary = StoreRepeatedReport::new(reports);
        assert_eq!(summary.host_notes, notes(&["reporting", "reclaim"]));
        assert_eq!(summary.to_text().matches("warning: reporting;").count(), 1);
        assert!(!run_report(size_run(Target::Plfs, 1.0, None), Vec::new()).to_text().contains("warning"));
    }

    #[test]
    fn the_crossover_ratio_cancels_a_penalty_on_whichever_side_goes_second() {
        // True ratio 0.95; going second costs 20%. Three runs with raw
        // first and two with plfs first: the plain median sides with raw.
        let (truth, penalty) = (0.95, 0.8);
        let sizes = vec![
            size_run(Target::RawNn, truth * penalty, Some(truth / penalty)),
            size_run(Target::Plfs, truth / penalty, Some(truth * penalty)),
            size_run(Target::RawNn, truth * penalty, Some(truth / penalty)),
            size_run(Target::Plfs, truth / penalty, Some(truth * penalty)),
            size_run(Target::RawNn, truth * penalty, Some(truth / penalty)),
        ];
        let size = summary(sizes);
        assert!((size.write_ratio.unwrap().median - truth * penalty).abs() < 1e-12);
        let write = size.write_crossover.unwrap();
        assert!((write.ratio - truth).abs() < 1e-12, "{write:?}");
        assert!(
            (write.plfs_first - truth / penalty).abs() < 1e-12
                && (write.raw_first - truth * penalty).abs() < 1e-12
        );
        assert!((size.read_crossover.unwrap().ratio - truth).abs() < 1e-12);
        // One order only: nothing to cancel with, so no figure.
        let one_order = summary(vec![size_run(Target::Plfs, 1.0, None), size_run(Target::Plfs, 0.9, None)]);
        assert_eq!((one_order.write_crossover, one_order.read_crossover), (None, None));
        let text =
            StoreRepeatedReport { sizes: vec![size], ..StoreRepeatedReport::new(Vec::new()) }.to_text();
        assert!(text.contains("0.95 (1.19 / 0.76)"), "{text}");
    }

    #[test]
    fn bad_specs_are_refused_before_any_store_is_touched() {
        let mut spec = StoreBenchSpec::new(Vec::new());
        assert!(validate(&spec).unwrap_err().to_string().contains("--backend"));
        spec.bytes_per_writer = Some(1 << 20);
        assert_eq!([spec.records_at(47001), spec.records_at(1 << 20), spec.records_at(3 << 20)], [22, 1, 1]);
        spec.bytes_per_writer = None;
        assert_eq!(spec.records_at(47001), 2000);
        spec.backends = vec!["posix:///tmp".to_owned()];
        spec.sizes = vec![4096, 0];
        assert!(validate(&spec).unwrap_err().to_string().contains("positive"));
        spec.sizes = vec![usize::MAX];
        assert!(validate(&spec).unwrap_err().to_string().contains("overflows"));
    }
}
