//! Turning worker clocks into bandwidths, ratios and a report.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{BenchError, Result};
use crate::spread::Spread;
use crate::worker::{Op, Target, WorkerResult};
use crate::{BenchSpec, Workload};

const MIB: f64 = (1u64 << 20) as f64;

/// One phase: every rank writing (or reading) its records once.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseReport {
    pub name: String,
    pub target: Target,
    pub op: Op,
    /// From the common start instant to the slowest worker's last close.
    pub seconds: f64,
    pub bytes: u64,
    pub mibs: f64,
    /// Records read back whose bytes were wrong (or short); 0 for writes.
    pub bad_records: u64,
    pub first_bad: Option<String>,
    /// How late the latest worker left the barrier, so a skewed start is
    /// visible rather than silently folded into the bandwidth. With more
    /// workers than cores this is mostly waiting for a CPU the started
    /// workers hold, which is real cost and stays in the bandwidth.
    pub max_start_lag_ms: f64,
    /// CPU seconds of all workers together, barrier to last close (0 when
    /// the workers could not tell).
    pub cpu_seconds: f64,
    /// Where each rank's clock went (None when a rank did not tell).
    pub ranks: Option<RankSplit>,
}

/// A phase's clock inside the ranks, in ms, each the median of the ranks
/// with their range: the open (from the barrier), the I/O (every record),
/// and the rest (sync, for writes, and the close). The MPI-IO phases and
/// the direct N-1 one differ in what each of these calls does, so this is
/// where their gap shows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RankSplit {
    pub open_ms: Spread,
    pub io_ms: Spread,
    pub close_ms: Spread,
}

impl RankSplit {
    fn of(results: &[WorkerResult]) -> Option<RankSplit> {
        let told = |r: &&WorkerResult| {
            r.began_ns <= r.opened_ns && r.opened_ns <= r.io_done_ns && r.io_done_ns <= r.end_ns
        };
        if results.is_empty() || !results.iter().all(|r| told(&r)) {
            return None;
        }
        let ms =
            |get: fn(&WorkerResult) -> u64| Spread::of(results.iter().map(|r| Some(get(r) as f64 / 1e6)));
        Some(RankSplit {
            open_ms: ms(|r| r.opened_ns - r.began_ns)?,
            io_ms: ms(|r| r.io_done_ns - r.opened_ns)?,
            close_ms: ms(|r| r.end_ns - r.io_done_ns)?,
        })
    }
}

impl PhaseReport {
    /// Bandwidth as an N-1 checkpoint sees it: all the bytes over the wall
    /// time of the slowest process, from the moment they all started.
    pub(crate) fn from_results(
        name: &str,
        target: Target,
        op: Op,
        expected_bytes: u64,
        start_ns: u64,
        results: &[WorkerResult],
    ) -> Result<PhaseReport> {
        let end_ns = results.iter().map(|r| r.end_ns).max().unwrap_or(start_ns);
        if end_ns <= start_ns {
            let problem = format!("no time passed between start and end ({start_ns}..{end_ns} ns)");
            return Err(BenchError::Data { what: name.to_owned(), problem });
        }
        let bytes: u64 = results.iter().map(|r| r.bytes).sum();
        if op == Op::Write && bytes != expected_bytes {
            let problem = format!("wrote {bytes} bytes, expected {expected_bytes}");
            return Err(BenchError::Data { what: name.to_owned(), problem });
        }
        let seconds = (end_ns - start_ns) as f64 / 1e9;
        let lag = results.iter().map(|r| r.began_ns.saturating_sub(start_ns)).max().unwrap_or(0);
        Ok(PhaseReport {
            name: name.to_owned(),
            target,
            op,
            seconds,
            bytes,
            mibs: bytes as f64 / MIB / seconds,
            bad_records: results.iter().map(|r| r.bad_records).sum(),
            first_bad: results.iter().find_map(|r| r.first_bad.clone()),
            max_start_lag_ms: lag as f64 / 1e6,
            cpu_seconds: results.iter().map(|r| r.cpu_ns).sum::<u64>() as f64 / 1e9,
            ranks: RankSplit::of(results),
        })
    }
}

/// One plfs interface's figures beside the baselines (`lib` is the
/// library target, also reported in the `plfs_*` fields).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InterfaceFigures {
    /// lib, preload, mpiio or fuse.
    pub interface: String,
    pub write_mibs: f64,
    pub write_seconds: f64,
    pub read_mibs: Option<f64>,
    pub read_seconds: Option<f64>,
    /// This interface / N-N, and / direct N-1, writing and reading.
    pub ratio_vs_nn: Option<f64>,
    pub ratio_vs_direct: Option<f64>,
    pub read_ratio_vs_nn: Option<f64>,
    pub read_ratio_vs_direct: Option<f64>,
    /// mpiio only: / the same MPI-IO program on a plain file, writing and
    /// reading, i.e. what plfs adds to MPI-IO itself.
    pub ratio_vs_mpiio_plain: Option<f64>,
    pub read_ratio_vs_mpiio_plain: Option<f64>,
}

/// The `--interface` name of a plfs target; None for the baselines.
pub fn interface_name(target: Target) -> Option<&'static str> {
    match target {
        Target::Plfs => Some("lib"),
        Target::Preload => Some("preload"),
        Target::Mpiio => Some("mpiio"),
        Target::Fuse => Some("fuse"),
        Target::DirectN1 | Target::PlainNn | Target::MpiioPlain | Target::RawNn => None,
    }
}

/// The table's rows, in order; the plfs ones are the interfaces.
const ROWS: [(&str, Target); 7] = [
    ("direct N-1 (shared file)", Target::DirectN1),
    ("N-N (file per process)", Target::PlainNn),
    ("MPI-IO, plain N-1 file", Target::MpiioPlain),
    ("plfs", Target::Plfs),
    ("plfs via LD_PRELOAD", Target::Preload),
    ("plfs via MPI-IO", Target::Mpiio),
    ("plfs via FUSE mount", Target::Fuse),
];

/// The outcome of one [`crate::run`]. Figures a workload has no phase for
/// (direct N-1 under `nn`, all reads without `read`) are `None`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchReport {
    pub workload: Workload,
    pub writers: usize,
    pub records: u64,
    pub record_bytes: usize,
    pub total_bytes: u64,
    pub backends: usize,
    /// CPUs this process may use: with fewer cores than workers, phases
    /// are partly CPU-bound and time-sliced.
    pub cores: usize,
    pub plfs_mibs: f64,
    pub direct_n1_mibs: Option<f64>,
    pub nn_mibs: f64,
    /// plfs / N-N write bandwidth.
    pub ratio_vs_nn: f64,
    /// plfs / direct N-1 write bandwidth.
    pub ratio_vs_direct: Option<f64>,
    pub read_plfs_mibs: Option<f64>,
    pub read_nn_mibs: Option<f64>,
    pub read_direct_n1_mibs: Option<f64>,
    pub read_ratio_vs_nn: Option<f64>,
    pub read_ratio_vs_direct: Option<f64>,
    /// The same workload written through a plfs FUSE mount (with `fuse_dir`).
    pub fuse_mibs: Option<f64>,
    pub read_fuse_mibs: Option<f64>,
    /// FUSE mount / library, writing and reading.
    pub fuse_ratio_vs_plfs: Option<f64>,
    pub read_fuse_ratio_vs_plfs: Option<f64>,
    /// With the mpiio interface: the same MPI-IO program on a plain N-1
    /// file (no plfs), and that / direct N-1, writing and reading: how
    /// near the direct file anything reached through MPI-IO can come here.
    pub mpiio_plain_mibs: Option<f64>,
    pub read_mpiio_plain_mibs: Option<f64>,
    pub mpiio_plain_ratio_vs_direct: Option<f64>,
    pub read_mpiio_plain_ratio_vs_direct: Option<f64>,
    /// No byte read back in any phase differed from what was written
    /// (vacuously true without `read`; see `read`).
    pub verified: bool,
    /// Whether read-back phases ran.
    pub read: bool,
    pub write_plfs_seconds: f64,
    pub write_direct_n1_seconds: Option<f64>,
    pub write_nn_seconds: f64,
    pub read_plfs_seconds: Option<f64>,
    pub read_direct_n1_seconds: Option<f64>,
    pub read_nn_seconds: Option<f64>,
    /// CPU seconds of the library's workers (all of them together),
    /// writing and reading: the figure to compare `verify_reads` modes by
    /// on a shared machine, where wall time scatters.
    pub write_plfs_cpu_seconds: Option<f64>,
    pub read_plfs_cpu_seconds: Option<f64>,
    /// The page cache was emptied before each read phase (`drop_caches`
    /// as root): the reads were cold. False: warm, from the page cache.
    pub page_cache_dropped: bool,
    /// Every plfs interface that ran (lib, preload, mpiio, fuse), in table
    /// order, with its ratios to both baselines.
    pub interfaces: Vec<InterfaceFigures>,
    /// What each phase did, in the order they ran.
    pub compared: String,
    pub phases: Vec<PhaseReport>,
    /// The run's work directory (removed afterwards unless `kept`).
    pub dir: PathBuf,
    pub kept: bool,
}

fn ratio(numerator: Option<f64>, denominator: Option<f64>) -> Option<f64> {
    match (numerator, denominator) {
        (Some(n), Some(d)) if d > 0.0 => Some(n / d),
        _ => None,
    }
}

impl BenchReport {
    pub(crate) fn from_phases(
        spec: &BenchSpec,
        work: &Path,
        kept: bool,
        phases: Vec<PhaseReport>,
        page_cache_dropped: bool,
    ) -> BenchReport {
        let find = |target: Target, op: Op| phases.iter().find(|p| p.target == target && p.op == op);
        let mibs = |target, op| find(target, op).map(|p| p.mibs);
        let seconds = |target, op| find(target, op).map(|p| p.seconds);
        let cpu = |target, op| find(target, op).map(|p| p.cpu_seconds).filter(|s| *s > 0.0);
        let plfs = mibs(Target::Plfs, Op::Write);
        let nn = mibs(Target::PlainNn, Op::Write);
        let direct = mibs(Target::DirectN1, Op::Write);
        let read_plfs = mibs(Target::Plfs, Op::Read);
        let read_nn = mibs(Target::PlainNn, Op::Read);
        let read_direct = mibs(Target::DirectN1, Op::Read);
        let fuse = mibs(Target::Fuse, Op::Write);
        let read_fuse = mibs(Target::Fuse, Op::Read);
        let mpiio_plain = mibs(Target::MpiioPlain, Op::Write);
        let read_mpiio_plain = mibs(Target::MpiioPlain, Op::Read);
        let order: Vec<&str> = phases.iter().map(|p| p.name.as_str()).collect();
        let interfaces = ROWS
            .iter()
            .filter_map(|(_, target)| {
                let interface = interface_name(*target)?;
                let write = find(*target, Op::Write)?;
                let read = find(*target, Op::Read);
                let read_mibs = read.map(|p| p.mibs);
                let mpiio = *target == Target::Mpiio;
                Some(InterfaceFigures {
                    interface: interface.to_owned(),
                    write_mibs: write.mibs,
                    write_seconds: write.seconds,
                    read_mibs,
                    read_seconds: read.map(|p| p.seconds),
                    ratio_vs_nn: ratio(Some(write.mibs), nn),
                    ratio_vs_direct: ratio(Some(write.mibs), direct),
                    read_ratio_vs_nn: ratio(read_mibs, read_nn),
                    read_ratio_vs_direct: ratio(read_mibs, read_direct),
                    ratio_vs_mpiio_plain: ratio(Some(write.mibs), mpiio_plain).filter(|_| mpiio),
                    read_ratio_vs_mpiio_plain: ratio(read_mibs, read_mpiio_plain).filter(|_| mpiio),
                })
            })
            .collect();
        BenchReport {
            workload: spec.workload,
            writers: spec.writers,
            records: spec.records,
            record_bytes: spec.record_bytes,
            total_bytes: spec.total_bytes(),
            backends: spec.backends,
            cores: std::thread::available_parallelism().map_or(1, usize::from),
            plfs_mibs: plfs.unwrap_or(0.0),
            direct_n1_mibs: direct,
            nn_mibs: nn.unwrap_or(0.0),
            ratio_vs_nn: ratio(plfs, nn).unwrap_or(0.0),
            ratio_vs_direct: ratio(plfs, direct),
            read_plfs_mibs: read_plfs,
            read_nn_mibs: read_nn,
            read_direct_n1_mibs: read_direct,
            read_ratio_vs_nn: ratio(read_plfs, read_nn),
            read_ratio_vs_direct: ratio(read_plfs, read_direct),
            fuse_mibs: fuse,
            read_fuse_mibs: read_fuse,
            fuse_ratio_vs_plfs: ratio(fuse, plfs),
            read_fuse_ratio_vs_plfs: ratio(read_fuse, read_plfs),
            mpiio_plain_mibs: mpiio_plain,
            read_mpiio_plain_mibs: read_mpiio_plain,
            mpiio_plain_ratio_vs_direct: ratio(mpiio_plain, direct),
            read_mpiio_plain_ratio_vs_direct: ratio(read_mpiio_plain, read_direct),
            verified: phases.iter().all(|p| p.bad_records == 0),
            read: spec.read,
            write_plfs_seconds: seconds(Target::Plfs, Op::Write).unwrap_or(0.0),
            write_direct_n1_seconds: seconds(Target::DirectN1, Op::Write),
            write_nn_seconds: seconds(Target::PlainNn, Op::Write).unwrap_or(0.0),
            read_plfs_seconds: seconds(Target::Plfs, Op::Read),
            read_direct_n1_seconds: seconds(Target::DirectN1, Op::Read),
            read_nn_seconds: seconds(Target::PlainNn, Op::Read),
            write_plfs_cpu_seconds: cpu(Target::Plfs, Op::Write),
            read_plfs_cpu_seconds: cpu(Target::Plfs, Op::Read),
            interfaces,
            compared: compared(spec, &order, page_cache_dropped),
            page_cache_dropped,
            dir: work.to_path_buf(),
            kept,
            phases,
        }
    }

    /// A human-readable table of bandwidths and ratios.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let total_mib = self.total_bytes as f64 / MIB;
        let _ = writeln!(
            out,
            "plfs bench {}: {} processes x {} records x {} B = {:.1} MiB per phase, {} plfs backend dir(s), {} core(s)",
            self.workload,
            self.writers,
            self.records,
            self.record_bytes,
            total_mib,
            self.backends,
            self.cores
        );
        let _ = writeln!(out, "{}", self.compared);
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{:<24} {:>12} {:>10} {:>12} {:>10}",
            "", "write MiB/s", "seconds", "read MiB/s", "seconds"
        );
        for (label, target) in ROWS {
            let phase = |op: Op| self.phases.iter().find(|p| p.target == target && p.op == op);
            let Some(write) = phase(Op::Write) else { continue };
            let (read_mibs, read_seconds) = match phase(Op::Read) {
                Some(read) => (format!("{:.1}", read.mibs), format!("{:.3}", read.seconds)),
                None => ("-".to_owned(), "-".to_owned()),
            };
            let _ = writeln!(
                out,
                "{label:<24} {:>12.1} {:>10.3} {read_mibs:>12} {read_seconds:>10}",
                write.mibs, write.seconds
            );
        }
        if let Some(write) = self.write_plfs_cpu_seconds {
            let read = self.read_plfs_cpu_seconds.map_or(String::new(), |s| format!(", read {s:.3}"));
            let _ = writeln!(
                out,
                "plfs CPU seconds (all workers, barrier to last close): write {write:.3}{read}"
            );
        }
        // Where the MPI-IO phases' time goes against the direct file's.
        if self.phases.iter().any(|p| p.target == Target::MpiioPlain) {
            let rows: Vec<(String, RankSplit)> =
                self.phases.iter().filter_map(|p| Some((p.name.clone(), p.ranks?))).collect();
            out.push_str(&rank_split_table("median of the ranks (min..max)", &rows));
        }
        let _ = writeln!(out);
        let show = |value: Option<f64>| value.map_or("-".to_owned(), |v| format!("{v:.2}x"));
        let lib = self.interfaces.iter().any(|i| i.interface == "lib");
        if lib {
            let _ = writeln!(
                out,
                "write: plfs/nn {}  plfs/direct {}",
                show(Some(self.ratio_vs_nn)),
                show(self.ratio_vs_direct)
            );
        }
        // Beyond the library alone, every interface gets its ratios to
        // both baselines on a line of its own.
        if self.interfaces.iter().any(|i| i.interface != "lib") {
            for figures in &self.interfaces {
                let _ = write!(
                    out,
                    "{:<8} write /nn {}  /direct {}",
                    figures.interface,
                    show(figures.ratio_vs_nn),
                    show(figures.ratio_vs_direct)
                );
                if figures.ratio_vs_mpiio_plain.is_some() {
                    let _ = write!(out, "  /mpiio-plain {}", show(figures.ratio_vs_mpiio_plain));
                }
                if self.read {
                    let _ = write!(
                        out,
                        "   read /nn {}  /direct {}",
                        show(figures.read_ratio_vs_nn),
                        show(figures.read_ratio_vs_direct)
                    );
                    if figures.read_ratio_vs_mpiio_plain.is_some() {
                        let _ = write!(out, "  /mpiio-plain {}", show(figures.read_ratio_vs_mpiio_plain));
                    }
                }
                let _ = writeln!(out);
            }
        }
        if self.mpiio_plain_mibs.is_some() {
            let _ = write!(
                out,
                "MPI-IO itself (plain file / direct N-1): write {}",
                show(self.mpiio_plain_ratio_vs_direct)
            );
            if self.read {
                let _ = write!(out, "  read {}", show(self.read_mpiio_plain_ratio_vs_direct));
            }
            let _ = writeln!(out);
        }
        if self.fuse_mibs.is_some() && self.plfs_mibs > 0.0 {
            let _ = writeln!(
                out,
                "FUSE mount / library: write {}  read {}",
                show(self.fuse_ratio_vs_plfs),
                show(self.read_fuse_ratio_vs_plfs)
            );
        }
        if self.read {
            if lib {
                let _ = writeln!(
                    out,
                    "read:  plfs/nn {}  plfs/direct {}",
                    show(self.read_ratio_vs_nn),
                    show(self.read_ratio_vs_direct)
                );
            }
            if self.verified {
                let _ = writeln!(out, "verified: every byte read back in every phase matched");
            } else {
                let _ = writeln!(out, "verified: NO");
                for phase in self.phases.iter().filter(|p| p.bad_records > 0) {
                    let first = phase.first_bad.as_deref().unwrap_or("");
                    let _ = writeln!(
                        out,
                        "  {}: {} bad record(s); first: {first}",
                        phase.name, phase.bad_records
                    );
                }
            }
        } else {
            let _ = writeln!(out, "verified: not checked (no read-back; use --read)");
        }
        let lag = self.phases.iter().map(|p| p.max_start_lag_ms).fold(0.0, f64::max);
        let _ = writeln!(
            out,
            "latest worker start after the barrier: {lag:.1} ms (includes waiting for a free core)"
        );
        if self.kept {
            let _ = writeln!(out, "files kept in {}", self.dir.display());
        }
        out
    }
}

/// Phases' clocks split inside their ranks, a row per phase (by name).
pub(crate) fn rank_split_table(what: &str, rows: &[(String, RankSplit)]) -> String {
    let cell = |s: Spread| format!("{:.1} ({:.1}..{:.1})", s.median, s.min, s.max);
    let mut out = String::new();
    let _ = writeln!(out, "\ninside the ranks, ms, {what}:");
    let _ = writeln!(out, "{:<20} {:>22} {:>22} {:>22}", "", "open", "I/O", "sync+close");
    for (name, split) in rows {
        let _ = writeln!(
            out,
            "{name:<20} {:>22} {:>22} {:>22}",
            cell(split.open_ms),
            cell(split.io_ms),
            cell(split.close_ms)
        );
    }
    out
}

fn compared(spec: &BenchSpec, order: &[&str], page_cache_dropped: bool) -> String {
    let n = spec.writers;
    let shape = match spec.workload {
        Workload::N1Strided => "strided (record k*N+r)",
        Workload::N1Segmented => "segmented (one contiguous block per process)",
        Workload::Nn => "",
    };
    let what = match spec.workload {
        Workload::N1Strided | Workload::N1Segmented => format!(
            "Compared: plfs = {n} processes write one logical file, {shape}, through the library into \
             per-writer logs; direct N-1 = the same offsets pwrite() into one shared plain file; \
             N-N = each process writes its records sequentially into its own plain file."
        ),
        Workload::Nn => format!(
            "Compared: plfs = {n} logical files, one writer process each, through the library on a \
             shared_file mount, so each is a full container (the n-n workload's plain files are \
             measured by `plfs bench mdtest`); N-N = {n} plain files. \
             There is no direct N-1 phase."
        ),
    };
    let reads = if spec.read {
        " Read-back: process r reads, in record-sized reads, what process (r+1) mod N wrote, through \
         a fresh plfs mount for plfs, and checks every byte."
    } else {
        ""
    };
    let mut others = String::new();
    if spec.preload.is_some() {
        others.push_str(
            " preload = the same records written with plain pwrite() calls under a plfs mount point \
             that does not exist, in processes with libplfs_preload.so preloaded (a mount of its own).",
        );
    }
    if let Some(mpiio) = &spec.mpiio {
        others.push_str(&format!(
            " mpiio = an MPI-IO program under {} mpirun writes them with MPI_File_write_at through \
             libplfs_mpiio.so and the interposer (a mount of its own; timed between MPI_Barriers); \
             mpiio-plain = the same program and mpirun on a plain shared file, nothing preloaded \
             (MPI-IO itself, no plfs).",
            mpiio.flavor
        ));
    }
    if spec.fuse_dir.is_some() {
        others.push_str(
            " fuse = the same pwrite() calls into a file on a plfs FUSE mount served by this process.",
        );
    }
    let cache = if page_cache_dropped {
        "the page cache was emptied before each read phase (reads come from the disk, cold)"
    } else {
        "the page cache is not dropped between them (reads come from cache)"
    };
    format!(
        "{what}{others}{reads} Every write phase fdatasyncs before its clock stops. All phases share one file \
         system and {cache}; they ran in this order: {}.",
        order.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(rank: usize, open: u64, io: u64, close: u64) -> WorkerResult {
        let began_ns = 1_000_000_000;
        WorkerResult {
            rank,
            began_ns,
            end_ns: began_ns + open + io + close,
            bytes: 100,
            records: 1,
            bad_records: 0,
            first_bad: None,
            cpu_ns: 0,
            opened_ns: began_ns + open,
            io_done_ns: began_ns + open + io,
        }
    }

    /// Three ranks' results with the given I/O times (ms), 1 ms opens and
    /// closes.
    fn phase(target: Target, op: Op, io_ms: [u64; 3]) -> PhaseReport {
        let results: Vec<WorkerResult> = io_ms
            .iter()
            .enumerate()
            .map(|(rank, io)| result(rank, 1_000_000, io * 1_000_000, 1_000_000))
            .collect();
        let name = format!("{} {}", op.as_str(), target.as_str());
        PhaseReport::from_results(&name, target, op, 300, 1_000_000_000, &results).unwrap()
    }

    #[test]
    fn the_split_is_the_ranks_median_and_range_or_none_when_a_rank_did_not_tell() {
        let split = RankSplit::of(&[
            result(0, 2_000_000, 10_000_000, 1_000_000),
            result(1, 4_000_000, 30_000_000, 3_000_000),
            result(2, 3_000_000, 20_000_000, 5_000_000),
        ])
        .unwrap();
        assert_eq!(split.open_ms, Spread { median: 3.0, min: 2.0, max: 4.0 });
        assert_eq!(split.io_ms, Spread { median: 20.0, min: 10.0, max: 30.0 });
        assert_eq!(split.close_ms, Spread { median: 3.0, min: 1.0, max: 5.0 });
        // An MPI-IO program of before the split sends no instants (0).
        let untold = WorkerResult { opened_ns: 0, io_done_ns: 0, ..result(1, 1, 1, 1) };
        assert_eq!(RankSplit::of(&[result(0, 1, 1, 1), untold]), None);
    }

    #[test]
    fn mpiio_is_set_against_mpiio_on_the_plain_file() {
        let mut spec = BenchSpec::new(Workload::N1Strided, PathBuf::from("/nowhere"));
        spec.read = true;
        spec.library = false;
        let phases = vec![
            // I/O 10 ms, 20 ms, 40 ms (with 1 ms open and close): the phase
            // clock is the slowest rank's 42 ms.
            phase(Target::DirectN1, Op::Write, [10, 10, 10]),
            phase(Target::PlainNn, Op::Write, [10, 10, 10]),
            phase(Target::MpiioPlain, Op::Write, [20, 20, 20]),
            phase(Target::Mpiio, Op::Write, [10, 20, 40]),
            phase(Target::DirectN1, Op::Read, [10, 10, 10]),
            phase(Target::PlainNn, Op::Read, [10, 10, 10]),
            phase(Target::MpiioPlain, Op::Read, [40, 40, 40]),
            phase(Target::Mpiio, Op::Read, [40, 40, 40]),
        ];
        let report = BenchReport::from_phases(&spec, Path::new("/nowhere"), false, phases, false);
        let close = |value: Option<f64>, expected: f64| {
            let value = value.unwrap();
            assert!((value - expected).abs() < 1e-9, "{value} != {expected}");
        };
        close(report.mpiio_plain_ratio_vs_direct, 12.0 / 22.0);
        close(report.read_mpiio_plain_ratio_vs_direct, 12.0 / 42.0);
        let mpiio = &report.interfaces[0];
        assert_eq!(mpiio.interface, "mpiio");
        close(mpiio.ratio_vs_mpiio_plain, 22.0 / 42.0);
        close(mpiio.read_ratio_vs_mpiio_plain, 1.0);
        close(mpiio.ratio_vs_direct, 12.0 / 42.0);

        let text = report.to_text();
        assert!(text.contains("MPI-IO, plain N-1 file"), "{text}");
        assert!(text.contains("/direct 0.29x  /mpiio-plain 0.52x"), "{text}");
        assert!(text.contains("/direct 0.29x  /mpiio-plain 1.00x"), "{text}");
        assert!(text.contains("MPI-IO itself (plain file / direct N-1): write 0.55x  read 0.29x"), "{text}");
        assert!(text.contains("inside the ranks, ms"), "{text}");
        let row = text.lines().find(|l| l.starts_with("write mpiio ")).unwrap_or_else(|| panic!("{text}"));
        let cells: Vec<&str> =
            row["write mpiio".len()..].split("  ").map(str::trim).filter(|c| !c.is_empty()).collect();
        assert_eq!(cells, ["1.0 (1.0..1.0)", "20.0 (10.0..40.0)", "1.0 (1.0..1.0)"], "{text}");

        let json = serde_json::to_value(&report).unwrap();
        assert!(json["read_mpiio_plain_ratio_vs_direct"].as_f64().is_some(), "{json:#}");
        assert!(json["interfaces"][0]["read_ratio_vs_mpiio_plain"].as_f64().is_some(), "{json:#}");
        assert_eq!(json["phases"][3]["ranks"]["io_ms"]["max"], 40.0, "{json:#}");

        let repeated = crate::RepeatedReport::new(vec![report.clone(), report]);
        let text = repeated.to_text();
        assert!(
            text.contains("mpiio / mpiio-plain: write 0.52 (0.52..0.52)  read 1.00 (1.00..1.00)"),
            "{text}"
        );
        assert!(text.contains("mpiio-plain "), "{text}");
        assert_eq!(repeated.ranks.len(), 8, "{text}");
        assert_eq!(repeated.ranks[3].1.io_ms, Spread { median: 20.0, min: 20.0, max: 20.0 });
    }
}
