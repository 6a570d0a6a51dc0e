//! The progressive-file-layout paper's streaming experiments (Figures 2–4,
//! Table 1): file-per-process and shared-file writes and reads under
//! stripe count 1, stripe count -1, three PFL layouts and the watermark
//! ("synthetic dynamic striping") patterns, at several file sizes and
//! writer counts, over K backends that each have a bandwidth of their own.
//!
//! The paper's counts are scaled to K backends: its 52-OST "-1" becomes
//! K, the PFL layouts keep their shape (one stripe, then a few, then all)
//! with extents scaled down with the file sizes, and Table 1's 4, 8 and 16
//! stripes (of a 64-OST testbed) become K/4, K/2 and K with watermarks at
//! a quarter and a half of the largest file.
//!
//! Writers are threads of this process, each with its own writer id (so
//! its own logs, as separate processes would have), all on one mount whose
//! backends are wrapped in [`BandwidthStore`]s: a backend's bandwidth is
//! shared by every writer that reaches it. Every case gets fresh backend
//! directories and fresh limits, so the bytes each backend was charged are
//! that case's alone; they are reported, because they say how well a
//! layout spread the file whatever the clock said.

use std::fmt::{self, Write as _};
use std::fs;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Barrier};
use std::time::Instant;

use plfs::config::{BackendRole, Tuning};
use plfs::fs::{Options, Plfs};
use plfs::open::OpenFlags;
use plfs::store::SharedStore;
use plfs::store::posix::PosixStore;
use plfs::striping::syntax::size_text;
use plfs::striping::{Layout, STRIPE_UNIT, StripingConfig};
use serde::{Deserialize, Serialize};

use crate::bandwidth::{Bandwidth, BandwidthStore, LimitKind};
use crate::error::{BenchError, Result};
use crate::pattern::{fill_record, verify_record};
use crate::plot::{Figure, Plot, Point, Series, XAxis};
use crate::runner::WorkDir;

const MIB: f64 = (1u64 << 20) as f64;

/// The first goal: a large shared file writes this many times faster
/// striped over every backend than on one.
pub const STRIPING_GOAL_SPEEDUP: f64 = 3.0;
/// The second goal: PFL reaches this fraction of the best fixed stripe count.
pub const PFL_GOAL_FRACTION: f64 = 0.9;
/// The PFL layout the second goal is about: the one meant for every size.
pub const PFL_GOAL_LAYOUT: &str = "pfl-large";

/// How the writers share files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StripeMode {
    /// Each writer its own file of the case's size (the paper's Figure 2).
    #[serde(rename = "file-per-process")]
    FilePerProcess,
    /// One file of the case's size, one contiguous segment per writer
    /// (IOR's segmented shared file, Figures 3 and 4).
    #[serde(rename = "shared-file")]
    SharedFile,
}

impl StripeMode {
    pub const ALL: [StripeMode; 2] = [StripeMode::FilePerProcess, StripeMode::SharedFile];

    pub fn as_str(self) -> &'static str {
        match self {
            StripeMode::FilePerProcess => "file-per-process",
            StripeMode::SharedFile => "shared-file",
        }
    }
}

impl fmt::Display for StripeMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for StripeMode {
    type Err = BenchError;

    fn from_str(text: &str) -> Result<StripeMode> {
        match text {
            "file-per-process" | "fpp" | "n-n" => Ok(StripeMode::FilePerProcess),
            "shared-file" | "shared" | "n-1" => Ok(StripeMode::SharedFile),
            other => Err(BenchError::invalid(format!(
                "unknown stripe mode {other:?} (expected file-per-process or shared-file)"
            ))),
        }
    }
}

/// What a layout is, for the goals: fixed stripe counts are what PFL is
/// measured against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LayoutFamily {
    /// One component over the whole file.
    Fixed,
    /// The paper's progressive layouts (§3.2).
    Pfl,
    /// Table 1's watermark patterns with more than one segment.
    Watermark,
}

/// One layout of the run, by the name the paper gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NamedLayout {
    pub name: String,
    pub family: LayoutFamily,
    /// In `lfs setstripe` syntax.
    #[serde(serialize_with = "layout_text")]
    pub layout: Layout,
}

fn layout_text<S: serde::Serializer>(layout: &Layout, serializer: S) -> std::result::Result<S::Ok, S::Error> {
    serializer.collect_str(layout)
}

/// One `plfs bench stripe` run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StripeSpec {
    /// Where the run's files go (a fresh subdirectory).
    pub dir: PathBuf,
    /// K: backends of the mount, each with its own bandwidth.
    pub backends: usize,
    /// Each backend's bandwidth; zero leaves them unlimited (bytes are
    /// still counted).
    pub backend_bytes_per_sec: u64,
    /// Write backlog each backend lets writers leave queued (see
    /// [`Bandwidth`]).
    pub write_behind_bytes: u64,
    /// Bytes of each file, ascending.
    pub sizes: Vec<u64>,
    pub writers: Vec<usize>,
    pub modes: Vec<StripeMode>,
    /// Bytes per write and read call.
    pub record_bytes: usize,
    /// Stripe size of every layout.
    pub stripe_bytes: u64,
    /// Only the layouts with these names (empty: all of them).
    pub layouts: Vec<String>,
    /// Runs of each case; the report gives the median rates.
    pub repeat: usize,
    /// Bytes a case moves at least: a case whose files are smaller runs
    /// several rounds, each a fresh set of files written and read exactly
    /// as one round would be, and is timed over all of them (a 1 MiB case
    /// is too short to time once: set-up and the machine's load dominate).
    pub case_bytes: u64,
    pub keep: bool,
}

impl StripeSpec {
    /// The default run: 4 backends of 32 MiB/s, files of 1, 16 and 64 MiB,
    /// 1 and 4 writers, 1 MiB records and stripes: about two minutes.
    pub fn new(dir: PathBuf) -> StripeSpec {
        StripeSpec {
            dir,
            backends: 4,
            backend_bytes_per_sec: 32 << 20,
            write_behind_bytes: 4 << 20,
            sizes: vec![1 << 20, 16 << 20, 64 << 20],
            writers: vec![1, 4],
            modes: StripeMode::ALL.to_vec(),
            record_bytes: 1 << 20,
            stripe_bytes: 1 << 20,
            layouts: Vec::new(),
            repeat: 1,
            case_bytes: 64 << 20,
            keep: false,
        }
    }

    /// Rounds a case of files of `size` bytes runs to move `case_bytes`.
    pub fn rounds(&self, mode: StripeMode, writers: usize, size: u64) -> u64 {
        let per_round = match mode {
            StripeMode::FilePerProcess => size * writers as u64,
            StripeMode::SharedFile => size,
        };
        self.case_bytes.div_ceil(per_round.max(1)).max(1)
    }

    fn validate(&self) -> Result<()> {
        if self.backends == 0 {
            return Err(BenchError::invalid("stripe: --backends must be positive"));
        }
        if self.sizes.is_empty() || self.writers.is_empty() || self.modes.is_empty() {
            return Err(BenchError::invalid("stripe: no size, writer count or mode to run"));
        }
        if self.repeat == 0 {
            return Err(BenchError::invalid("stripe: --repeat must be at least 1"));
        }
        if self.writers.contains(&0) {
            return Err(BenchError::invalid("stripe: writer counts must be positive"));
        }
        if self.record_bytes == 0 || !(self.record_bytes as u64).is_multiple_of(STRIPE_UNIT) {
            return Err(BenchError::invalid(format!(
                "stripe: record size {} is not a positive multiple of 64 KiB",
                self.record_bytes
            )));
        }
        if self.stripe_bytes == 0 || !self.stripe_bytes.is_multiple_of(STRIPE_UNIT) {
            return Err(BenchError::invalid(format!(
                "stripe: stripe size {} is not a positive multiple of 64 KiB",
                self.stripe_bytes
            )));
        }
        // Each writer of a shared file gets an equal segment made of
        // whole 64 KiB pattern pieces.
        for size in &self.sizes {
            for writers in &self.writers {
                if *size == 0 || !size.is_multiple_of(*writers as u64 * STRIPE_UNIT) {
                    return Err(BenchError::invalid(format!(
                        "stripe: file size {size} does not split into {writers} segments of whole 64 KiB \
                         pieces"
                    )));
                }
            }
        }
        Ok(())
    }

    /// The run's layouts, scaled to its backends, stripe size and largest
    /// file (see the module comment).
    pub fn named_layouts(&self) -> Result<Vec<NamedLayout>> {
        let k = self.backends as u64;
        let stripe = self.stripe_bytes;
        let largest = self.sizes.iter().copied().max().unwrap_or(stripe);
        // A boundary at `fraction` of the largest file, on a stripe boundary
        // and at least one stripe in.
        let at =
            |numerator: u64, denominator: u64| (largest * numerator / denominator / stripe).max(1) * stripe;
        let s = size_text(stripe);
        let count = |c: u64| c.max(1).min(k);
        let (quarter, half) = (at(1, 4), at(1, 2));
        // The paper's PFL med and large switch at 16 MiB and 128 MiB of
        // 4 GiB files; the same fractions of the largest file here.
        let (med_end, large_end) = (at(1, 256), at(1, 32));
        let (quarter_text, half_text) = (size_text(quarter), size_text(half));
        let half_k = count(k / 2);
        let all = [
            ("stripe=1", LayoutFamily::Fixed, format!("-c 1 -S {s}")),
            ("stripe=-1", LayoutFamily::Fixed, format!("-c -1 -S {s}")),
            ("pfl-small", LayoutFamily::Pfl, format!("-E -1 -c 1 -S {s}")),
            (
                "pfl-med",
                LayoutFamily::Pfl,
                format!("-E {} -c 1 -S {s} -E -1 -c {half_k}", size_text(med_end)),
            ),
            (
                "pfl-large",
                LayoutFamily::Pfl,
                format!(
                    "-E {} -c 1 -S {s} -E {} -c {half_k} -E -1 -c -1",
                    size_text(med_end),
                    size_text(large_end.max(med_end + stripe))
                ),
            ),
            ("IOR.1", LayoutFamily::Fixed, format!("-c {} -S {s}", count(k / 4))),
            ("IOR.2", LayoutFamily::Fixed, format!("-c {half_k} -S {s}")),
            ("IOR.3", LayoutFamily::Fixed, format!("-c {k} -S {s}")),
            (
                "IOR.4",
                LayoutFamily::Watermark,
                format!("-E {quarter_text} -c {} -S {s} -E -1 -c {half_k}", count(k / 4)),
            ),
            (
                "IOR.5",
                LayoutFamily::Watermark,
                format!("-E {quarter_text} -c {} -S {s} -E -1 -c {k}", count(k / 4)),
            ),
            (
                "IOR.6",
                LayoutFamily::Watermark,
                format!(
                    "-E {quarter_text} -c {} -S {s} -E {half_text} -c {half_k} -E -1 -c {k}",
                    count(k / 4)
                ),
            ),
        ];
        for wanted in &self.layouts {
            if !all.iter().any(|(name, ..)| name == wanted) {
                let names: Vec<&str> = all.iter().map(|(name, ..)| *name).collect();
                return Err(BenchError::invalid(format!(
                    "stripe: unknown layout {wanted:?} (expected one of {})",
                    names.join(", ")
                )));
            }
        }
        all.into_iter()
            .filter(|(name, ..)| self.layouts.is_empty() || self.layouts.iter().any(|w| w == name))
            .map(|(name, family, text)| {
                let layout = text.parse::<Layout>().map_err(|source| BenchError::Plfs {
                    doing: "building the layout",
                    target: format!("{name} ({text})"),
                    source,
                })?;
                Ok(NamedLayout { name: name.to_owned(), family, layout })
            })
            .collect()
    }
}

/// One (mode, writers, layout, size) case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StripeCase {
    pub mode: StripeMode,
    pub writers: usize,
    pub layout: String,
    pub family: LayoutFamily,
    /// Bytes of each file.
    pub size_bytes: u64,
    /// Rounds the case ran (see [`StripeSpec::case_bytes`]): each a
    /// fresh set of files, timed from its writers' (readers') release to
    /// its end; the rates are the bytes of every round over the sum of
    /// their times.
    pub rounds: u64,
    /// Bytes written (and read) by all writers together, over every round.
    pub total_bytes: u64,
    pub write_seconds: f64,
    pub read_seconds: f64,
    pub write_mibs: f64,
    pub read_mibs: f64,
    /// Lowest and highest write and read rates over the `--repeat` runs
    /// (the rates above are their medians).
    pub write_mibs_range: [f64; 2],
    pub read_mibs_range: [f64; 2],
    /// Bytes each backend was charged while writing (data, index and
    /// metadata objects), in backend order, over every round.
    pub backend_written_bytes: Vec<u64>,
    /// Bytes each backend was charged while reading, over every round.
    pub backend_read_bytes: Vec<u64>,
    /// Data objects (logs) of the first round's files, over every backend.
    pub data_objects: u64,
    /// Backends holding any of the first round's data.
    pub backends_used: usize,
    /// Mean over max of the bytes written per backend in the first round:
    /// 1 when every backend got the same share, 1/K when one got
    /// everything. Times the K backends' bandwidth it bounds the write
    /// rate. (Later rounds' files may be placed on other backends.)
    pub write_balance: f64,
    /// Every byte read back was the byte written.
    pub verified: bool,
    pub problem: Option<String>,
    /// The layout is the same as this earlier one's, whose figures these are.
    pub same_as: Option<String>,
}

/// Goal 1, measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StripingGoal {
    pub size_bytes: u64,
    pub writers: usize,
    pub stripe_1_write_mibs: f64,
    pub stripe_all_write_mibs: f64,
    pub speedup: f64,
    pub met: bool,
}

/// Goal 2 at one (mode, writers, size, direction).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PflGoalRow {
    pub mode: StripeMode,
    pub writers: usize,
    pub size_bytes: u64,
    /// "write" or "read".
    pub direction: &'static str,
    pub pfl_mibs: f64,
    pub best_fixed: String,
    pub best_fixed_mibs: f64,
    pub fraction: f64,
    pub met: bool,
}

/// A whole run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StripeReport {
    /// Which per-backend limit was used, and why.
    pub limit: LimitKind,
    pub backends: usize,
    pub backend_mibs: f64,
    pub write_behind_bytes: u64,
    /// Runs per case (rates are medians).
    pub repeat: usize,
    /// Bytes each case moves at least (in rounds of fresh files).
    pub case_bytes: u64,
    pub record_bytes: usize,
    pub stripe_bytes: u64,
    pub layouts: Vec<NamedLayout>,
    pub cases: Vec<StripeCase>,
    /// None when the run has no shared-file case of stripe=1 and stripe=-1.
    pub striping_goal: Option<StripingGoal>,
    /// At the largest writer count, every mode, size and direction.
    pub pfl_goal: Vec<PflGoalRow>,
    pub pfl_goal_met: bool,
    pub verified: bool,
}

fn backend_dirs(case_dir: &Path, backends: usize) -> Vec<PathBuf> {
    (0..backends).map(|i| case_dir.join(format!("b{i}"))).collect()
}

/// The logical file writer `rank` uses in round `round` (and reader
/// `rank` reads, in a file-per-process case).
fn file_path(mode: StripeMode, rank: usize, round: u64) -> String {
    match mode {
        StripeMode::FilePerProcess => format!("/file.{round}.{rank}"),
        StripeMode::SharedFile => format!("/shared.{round}"),
    }
}

/// The byte range of its file writer `rank` owns.
fn segment(mode: StripeMode, size: u64, writers: usize, rank: usize) -> (u64, u64) {
    match mode {
        StripeMode::FilePerProcess => (0, size),
        StripeMode::SharedFile => {
            let length = size / writers as u64;
            (rank as u64 * length, (rank as u64 + 1) * length)
        }
    }
}

/// A number of its own for each file of a case, for the pattern.
fn file_number(mode: StripeMode, rank: usize, round: u64) -> usize {
    let rank = if mode == StripeMode::FilePerProcess { rank } else { 0 };
    ((round as usize) << 16) | rank
}

/// The pattern piece at `offset` of file `file`: each 64 KiB piece of
/// every file is its own record, so no two pieces of a run match.
fn piece(file: usize, offset: u64) -> u64 {
    ((file as u64) << 40) | (offset / STRIPE_UNIT)
}

/// A mount over fresh backend directories, each behind its own limit.
fn mount(case_dir: &Path, spec: &StripeSpec, layout: &Layout) -> Result<(Plfs, Vec<Arc<Bandwidth>>)> {
    let mut stores: Vec<(SharedStore, BackendRole)> = Vec::with_capacity(spec.backends);
    let mut limits = Vec::with_capacity(spec.backends);
    for dir in backend_dirs(case_dir, spec.backends) {
        fs::create_dir_all(&dir).map_err(BenchError::io("creating", &dir))?;
        let url = format!("posix://{}", dir.display());
        let posix = PosixStore::new(dir.clone(), url)
            .map_err(BenchError::plfs("backend", dir.display().to_string()))?;
        let limit = Bandwidth::new(spec.backend_bytes_per_sec, spec.write_behind_bytes);
        limits.push(limit.clone());
        stores.push((Arc::new(BandwidthStore::new(Arc::new(posix), limit)), BackendRole::Any));
    }
    let striping = StripingConfig { default_layout: Some(layout.clone()), ..StripingConfig::default() };
    let plfs = Plfs::with_striping(stores, Options::from_environment(Tuning::default()), striping)
        .map_err(BenchError::plfs("mounting", case_dir.display().to_string()))?;
    Ok((plfs, limits))
}

/// What one writer or reader thread did.
struct Pass {
    /// Pieces that did not read back as written, and the first of them.
    bad: u64,
    first_bad: Option<String>,
}

fn write_segment(
    plfs: &Plfs,
    mode: StripeMode,
    size: u64,
    writers: usize,
    rank: usize,
    record: usize,
    round: u64,
) -> Result<()> {
    let path = file_path(mode, rank, round);
    let flags = match mode {
        StripeMode::FilePerProcess => OpenFlags::WRONLY.create(),
        StripeMode::SharedFile => OpenFlags::WRONLY,
    };
    // Writer ids from 1, so each thread has its own logs as a process would.
    let handle =
        plfs.open(&path, flags, 0o644, rank as u64 + 1).map_err(BenchError::plfs("open", path.as_str()))?;
    let file = file_number(mode, rank, round);
    let (start, end) = segment(mode, size, writers, rank);
    let mut buf = vec![0u8; record];
    let mut offset = start;
    while offset < end {
        let length = (end - offset).min(record as u64) as usize;
        for (index, chunk) in buf[..length].chunks_mut(STRIPE_UNIT as usize).enumerate() {
            fill_record(piece(file, offset + index as u64 * STRIPE_UNIT), chunk);
        }
        let count = handle.write(&buf[..length], offset).map_err(BenchError::plfs("write", path.as_str()))?;
        if count != length {
            return Err(BenchError::Short { doing: "write", target: path, count, expected: length });
        }
        offset += length as u64;
    }
    handle.close().map_err(BenchError::plfs("close", path))
}

/// Reads writer `rank`'s segment back and checks every piece.
fn read_segment(
    plfs: &Plfs,
    mode: StripeMode,
    size: u64,
    writers: usize,
    rank: usize,
    record: usize,
    round: u64,
) -> Result<Pass> {
    let path = file_path(mode, rank, round);
    let handle =
        plfs.open(&path, OpenFlags::RDONLY, 0, 0).map_err(BenchError::plfs("open", path.as_str()))?;
    let file = file_number(mode, rank, round);
    let (start, end) = segment(mode, size, writers, rank);
    let mut buf = vec![0u8; record];
    let mut pass = Pass { bad: 0, first_bad: None };
    let mut offset = start;
    while offset < end {
        let length = (end - offset).min(record as u64) as usize;
        let mut filled = 0;
        while filled < length {
            let count = handle
                .read(&mut buf[filled..length], offset + filled as u64)
                .map_err(BenchError::plfs("read", path.as_str()))?;
            if count == 0 {
                break;
            }
            filled += count;
        }
        for (index, chunk) in buf[..length].chunks(STRIPE_UNIT as usize).enumerate() {
            let at = offset + index as u64 * STRIPE_UNIT;
            let problem = if filled < length {
                Some(format!(
                    "{path}: the file ends at {} before {}",
                    offset + filled as u64,
                    offset + length as u64
                ))
            } else {
                verify_record(piece(file, at), chunk)
                    .err()
                    .map(|position| format!("{path}: byte {} is not what was written", at + position as u64))
            };
            if let Some(problem) = problem {
                pass.bad += 1;
                pass.first_bad.get_or_insert(problem);
            }
        }
        offset += length as u64;
    }
    handle.close().map_err(BenchError::plfs("close", path))?;
    Ok(pass)
}

/// Runs `work(rank)` on `writers` threads released together, then
/// `finish`; returns the seconds from their release to the end of
/// `finish`, and their results.
fn timed_threads<T: Send>(
    writers: usize,
    work: impl Fn(usize) -> Result<T> + Sync,
    finish: impl FnOnce(),
) -> Result<(f64, Vec<T>)> {
    let barrier = Barrier::new(writers + 1);
    let (seconds, results) = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..writers)
            .map(|rank| {
                let (barrier, work) = (&barrier, &work);
                scope.spawn(move || {
                    barrier.wait();
                    work(rank)
                })
            })
            .collect();
        barrier.wait();
        let started = Instant::now();
        let results: Vec<_> = threads
            .into_iter()
            .map(|thread| {
                thread.join().unwrap_or_else(|_| Err(BenchError::invalid("a stripe worker thread panicked")))
            })
            .collect();
        finish();
        (started.elapsed().as_secs_f64(), results)
    });
    Ok((seconds, results.into_iter().collect::<Result<Vec<T>>>()?))
}

/// One case under way: its mount and what its rounds have measured so
/// far. The rounds of the layouts of one size run interleaved
/// ([`schedule`]), so each case stays set up between its rounds.
struct CaseRun<'a> {
    spec: &'a StripeSpec,
    mode: StripeMode,
    writers: usize,
    named: &'a NamedLayout,
    size: u64,
    plfs: Plfs,
    limits: Vec<Arc<Bandwidth>>,
    files: usize,
    rounds: u64,
    write_seconds: f64,
    read_seconds: f64,
    first_round_written: Vec<u64>,
    per_backend_objects: Vec<u64>,
    passes: Vec<Pass>,
    backend_read_bytes: Vec<u64>,
}

impl<'a> CaseRun<'a> {
    fn new(
        spec: &'a StripeSpec,
        case_dir: &Path,
        mode: StripeMode,
        writers: usize,
        named: &'a NamedLayout,
        size: u64,
    ) -> Result<CaseRun<'a>> {
        let (plfs, limits) = mount(case_dir, spec, &named.layout)?;
        let files = match mode {
            StripeMode::FilePerProcess => writers,
            StripeMode::SharedFile => 1,
        };
        Ok(CaseRun {
            spec,
            mode,
            writers,
            named,
            size,
            plfs,
            limits,
            files,
            rounds: spec.rounds(mode, writers, size),
            write_seconds: 0.0,
            read_seconds: 0.0,
            first_round_written: Vec::new(),
            per_backend_objects: vec![0; spec.backends],
            passes: Vec::new(),
            backend_read_bytes: vec![0; spec.backends],
        })
    }

    /// Writes, then reads back, round `round`'s fresh files.
    fn round(&mut self, round: u64) -> Result<()> {
        let (plfs, limits, mode, size, writers) =
            (&self.plfs, &self.limits, self.mode, self.size, self.writers);
        let record = self.spec.record_bytes;
        if mode == StripeMode::SharedFile {
            // Made before the clock starts, so writers only open it.
            let path = file_path(mode, 0, round);
            plfs.open(&path, OpenFlags::WRONLY.create(), 0o644, 0)
                .and_then(|handle| handle.close())
                .map_err(BenchError::plfs("creating", path))?;
        }
        // The write ends when the backends have written it, not when the
        // last write-behind returned (IOR's fsync at close does the same).
        let drain = || limits.iter().for_each(|limit| limit.drain());
        let (seconds, _) = timed_threads(
            writers,
            |rank| write_segment(plfs, mode, size, writers, rank, record, round),
            drain,
        )?;
        self.write_seconds += seconds;
        if round == 0 {
            self.first_round_written = limits.iter().map(|limit| limit.written_bytes()).collect();
            for rank in 0..self.files {
                let path = file_path(mode, rank, round);
                let data =
                    plfs.data_per_backend(&path).map_err(BenchError::plfs("listing the data of", path))?;
                for (backend, data) in data {
                    self.per_backend_objects[backend] += data.objects;
                }
            }
        }
        let read_before: Vec<u64> = limits.iter().map(|limit| limit.read_bytes()).collect();
        // Reader r reads what writer r+1 wrote, so no thread reads its own bytes.
        let (seconds, round_passes) = timed_threads(
            writers,
            |rank| read_segment(plfs, mode, size, writers, (rank + 1) % writers, record, round),
            || {},
        )?;
        self.read_seconds += seconds;
        self.passes.extend(round_passes);
        for ((total, limit), before) in self.backend_read_bytes.iter_mut().zip(limits).zip(&read_before) {
            *total += limit.read_bytes() - before;
        }
        Ok(())
    }

    fn finish(self) -> StripeCase {
        let backend_written_bytes: Vec<u64> = self.limits.iter().map(|limit| limit.written_bytes()).collect();
        let bad: u64 = self.passes.iter().map(|pass| pass.bad).sum();
        let problem = self
            .passes
            .into_iter()
            .find_map(|pass| pass.first_bad)
            .map(|first| format!("{bad} pieces of 64 KiB read back wrong, first: {first}"));
        let total_bytes = self.size * self.files as u64 * self.rounds;
        let max_written = self.first_round_written.iter().copied().max().unwrap_or(0).max(1);
        let mean_written = self.first_round_written.iter().sum::<u64>() as f64 / self.spec.backends as f64;
        let (write_seconds, read_seconds) = (self.write_seconds, self.read_seconds);
        StripeCase {
            mode: self.mode,
            writers: self.writers,
            layout: self.named.name.clone(),
            family: self.named.family,
            size_bytes: self.size,
            rounds: self.rounds,
            total_bytes,
            write_seconds,
            read_seconds,
            write_mibs: total_bytes as f64 / MIB / write_seconds.max(1e-9),
            read_mibs: total_bytes as f64 / MIB / read_seconds.max(1e-9),
            write_mibs_range: [total_bytes as f64 / MIB / write_seconds.max(1e-9); 2],
            read_mibs_range: [total_bytes as f64 / MIB / read_seconds.max(1e-9); 2],
            backend_written_bytes,
            backend_read_bytes: self.backend_read_bytes,
            data_objects: self.per_backend_objects.iter().sum(),
            backends_used: self.per_backend_objects.iter().filter(|objects| **objects > 0).count(),
            write_balance: mean_written / max_written as f64,
            verified: problem.is_none(),
            problem,
            same_as: None,
        }
    }
}

/// The order in which the `cases` measured layouts of one size run their
/// `rounds` rounds in run `run` of `--repeat`: round r of every layout
/// before round r+1 of any, and each round in a different order (the list
/// rotated by one more place per round, counted over the runs), so every
/// layout takes every place in turn. The machine's load drifts over
/// seconds as well as minutes; with the rounds of one case back to back,
/// a 1 MiB case's 16 or 64 rounds fell in one stretch of that drift and
/// the layouts, which place a 1 MiB file alike, differed by a third.
fn schedule(run: usize, rounds: u64, cases: usize) -> Vec<(u64, usize)> {
    let mut order = Vec::with_capacity(rounds as usize * cases);
    for round in 0..rounds {
        let turn = (run as u64 * rounds + round) as usize;
        order.extend((0..cases).map(|place| (round, (place + turn) % cases.max(1))));
    }
    order
}

/// Runs every case of `spec` `repeat` times: modes, then writer counts,
/// then sizes, then the repeats, then rounds, then layouts, so the layouts
/// of one size run side by side and take turns.
pub fn run_stripe(spec: &StripeSpec) -> Result<StripeReport> {
    spec.validate()?;
    let layouts = spec.named_layouts()?;
    let limit = crate::bandwidth::detect();
    fs::create_dir_all(&spec.dir).map_err(BenchError::io("creating", &spec.dir))?;
    let parent = fs::canonicalize(&spec.dir).map_err(BenchError::io("resolving", &spec.dir))?;
    let work = WorkDir::create(&parent, spec.keep)?;
    let mut sizes = spec.sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    let mut cases = Vec::new();
    for mode in &spec.modes {
        for writers in &spec.writers {
            for size in &sizes {
                // At small K several of the paper's layouts are the same one
                // (IOR.1 and pfl-small are stripe=1 at K=4, IOR.3 is
                // stripe=-1): each is run once and reported under every name
                // it has. Run twice, the best fixed count of the PFL goal
                // would be the luckier of two measurements of one layout.
                let first_of: Vec<usize> = layouts
                    .iter()
                    .map(|named| {
                        layouts
                            .iter()
                            .position(|other| same_placement(&other.layout, &named.layout, spec.backends))
                            .unwrap_or(0)
                    })
                    .collect();
                let mut runs: Vec<Vec<StripeCase>> = vec![Vec::with_capacity(spec.repeat); layouts.len()];
                let measured: Vec<usize> =
                    (0..layouts.len()).filter(|index| first_of[*index] == *index).collect();
                // Run r of every layout before run r+1 of any, and within a
                // run round r of every layout before round r+1 ([`schedule`]):
                // the load of a shared machine drifts, and interleaving puts
                // every layout's rounds under the same drift, so the layouts
                // are compared side by side rather than one period each.
                for run in 0..spec.repeat {
                    let mut under_way = Vec::with_capacity(measured.len());
                    for &index in &measured {
                        let named = &layouts[index];
                        let name =
                            format!("{mode}-w{writers}-{}-{}", size_text(*size), named.name.replace('=', ""));
                        let case_dir = work.path().join(format!("{name}-{run}"));
                        let case = CaseRun::new(spec, &case_dir, *mode, *writers, named, *size)
                            .map_err(|error| error.context(format!("stripe case {name}")))?;
                        under_way.push((index, name, case_dir, case));
                    }
                    for (round, place) in schedule(run, spec.rounds(*mode, *writers, *size), under_way.len())
                    {
                        let (_, name, _, case) = &mut under_way[place];
                        case.round(round).map_err(|error| error.context(format!("stripe case {name}")))?;
                    }
                    for (index, _, case_dir, case) in under_way {
                        runs[index].push(case.finish());
                        if !spec.keep {
                            fs::remove_dir_all(&case_dir).map_err(BenchError::io("removing", &case_dir))?;
                        }
                    }
                }
                let medians: Vec<Option<StripeCase>> =
                    runs.into_iter().map(|runs| (!runs.is_empty()).then(|| median_case(runs))).collect();
                for (index, named) in layouts.iter().enumerate() {
                    let first = first_of[index];
                    let measured = medians[first].clone().expect("the first layout of each kind ran");
                    cases.push(if first == index {
                        measured
                    } else {
                        StripeCase {
                            layout: named.name.clone(),
                            family: named.family,
                            same_as: Some(layouts[first].name.clone()),
                            ..measured
                        }
                    });
                }
            }
        }
    }
    let (striping_goal, pfl_goal) = (striping_goal(&cases), pfl_goal(&cases));
    Ok(StripeReport {
        limit,
        backends: spec.backends,
        backend_mibs: spec.backend_bytes_per_sec as f64 / MIB,
        write_behind_bytes: spec.write_behind_bytes,
        repeat: spec.repeat,
        case_bytes: spec.case_bytes,
        record_bytes: spec.record_bytes,
        stripe_bytes: spec.stripe_bytes,
        layouts,
        verified: cases.iter().all(|case| case.verified),
        pfl_goal_met: !pfl_goal.is_empty() && pfl_goal.iter().all(|row| row.met),
        cases,
        striping_goal,
        pfl_goal,
    })
}

/// True when the two layouts place every byte alike on a mount of
/// `backends` backends: the same components once "every backend" (-1) is
/// resolved to the count it means there.
fn same_placement(a: &Layout, b: &Layout, backends: usize) -> bool {
    let k = backends as u32;
    a.components().len() == b.components().len()
        && a.components().iter().zip(b.components()).all(|(x, y)| {
            (x.start, x.end, x.stripe_size, &x.pool) == (y.start, y.end, y.stripe_size, &y.pool)
                && x.stripe_count.resolve(k) == y.stripe_count.resolve(k)
        })
}

/// The first run's case with the median write and read rates over all
/// runs (and verified only if every run was).
fn median_case(runs: Vec<StripeCase>) -> StripeCase {
    let median = |rate: fn(&StripeCase) -> f64| {
        let mut rates: Vec<f64> = runs.iter().map(rate).collect();
        rates.sort_by(f64::total_cmp);
        rates[rates.len() / 2]
    };
    let (write_mibs, read_mibs) = (median(|case| case.write_mibs), median(|case| case.read_mibs));
    let range = |rate: fn(&StripeCase) -> f64| {
        let rates = runs.iter().map(rate);
        [rates.clone().fold(f64::INFINITY, f64::min), rates.fold(0.0, f64::max)]
    };
    let (write_mibs_range, read_mibs_range) = (range(|case| case.write_mibs), range(|case| case.read_mibs));
    let verified = runs.iter().all(|case| case.verified);
    let problem = runs.iter().find_map(|case| case.problem.clone());
    let first = runs.into_iter().next().expect("at least one run (validated)");
    StripeCase {
        write_mibs,
        read_mibs,
        write_mibs_range,
        read_mibs_range,
        write_seconds: first.total_bytes as f64 / MIB / write_mibs.max(1e-9),
        read_seconds: first.total_bytes as f64 / MIB / read_mibs.max(1e-9),
        verified,
        problem,
        ..first
    }
}

/// Goal 1 at the largest shared file and writer count.
fn striping_goal(cases: &[StripeCase]) -> Option<StripingGoal> {
    let shared = || cases.iter().filter(|case| case.mode == StripeMode::SharedFile);
    let size = shared().map(|case| case.size_bytes).max()?;
    let writers = shared().map(|case| case.writers).max()?;
    let find = |layout: &str| {
        shared().find(|case| case.size_bytes == size && case.writers == writers && case.layout == layout)
    };
    let (one, all) = (find("stripe=1")?, find("stripe=-1")?);
    let speedup = all.write_mibs / one.write_mibs.max(1e-9);
    Some(StripingGoal {
        size_bytes: size,
        writers,
        stripe_1_write_mibs: one.write_mibs,
        stripe_all_write_mibs: all.write_mibs,
        speedup,
        met: speedup >= STRIPING_GOAL_SPEEDUP,
    })
}

/// A direction's name and its rate in a case.
type Direction = (&'static str, fn(&StripeCase) -> f64);

const DIRECTIONS: [Direction; 2] = [("write", |case| case.write_mibs), ("read", |case| case.read_mibs)];

/// Goal 2: the PFL layout against the best fixed stripe count, per mode,
/// size and direction at the largest writer count.
fn pfl_goal(cases: &[StripeCase]) -> Vec<PflGoalRow> {
    let Some(writers) = cases.iter().map(|case| case.writers).max() else { return Vec::new() };
    let mut rows = Vec::new();
    for pfl in cases.iter().filter(|case| case.layout == PFL_GOAL_LAYOUT && case.writers == writers) {
        let fixed = cases.iter().filter(|case| {
            case.family == LayoutFamily::Fixed
                && case.mode == pfl.mode
                && case.writers == writers
                && case.size_bytes == pfl.size_bytes
        });
        for (direction, rate) in DIRECTIONS {
            let Some(best) = fixed.clone().max_by(|a, b| rate(a).total_cmp(&rate(b))) else { continue };
            let fraction = rate(pfl) / rate(best).max(1e-9);
            rows.push(PflGoalRow {
                mode: pfl.mode,
                writers,
                size_bytes: pfl.size_bytes,
                direction,
                pfl_mibs: rate(pfl),
                best_fixed: best.layout.clone(),
                best_fixed_mibs: rate(best),
                fraction,
                met: fraction >= PFL_GOAL_FRACTION,
            });
        }
    }
    rows
}

impl StripeReport {
    pub fn to_text(&self) -> String {
        let mut text = String::new();
        let _ = writeln!(
            text,
            "stripe: {} backends of {:.0} MiB/s each ({} write-behind), {} records, {} stripes, {}\nlimit: {}",
            self.backends,
            self.backend_mibs,
            size_text(self.write_behind_bytes),
            size_text(self.record_bytes as u64),
            size_text(self.stripe_bytes),
            match self.repeat {
                1 => "1 run".to_owned(),
                n => format!("median of {n} runs"),
            },
            self.limit
        );
        let _ = writeln!(
            text,
            "rounds: each case moves at least {}: smaller files run in rounds of fresh files, each written \
             and read as one round would be; rates are all rounds' bytes over the sum of their times\n\
             order: the layouts of one size run round by round (round r of each before round r+1 of any), \
             each round in another order, so the machine's drift falls on every layout alike",
            size_text(self.case_bytes)
        );
        for named in &self.layouts {
            let _ = writeln!(text, "  {:<10} {}", named.name, named.layout);
        }
        let _ = writeln!(
            text,
            "{:<17} {:>2} {:>5} {:>6} {:<10} {:>10} {:>10} {:>7} {:>4} {:>8}  verified",
            "mode",
            "N",
            "size",
            "rounds",
            "layout",
            "write MiB/s",
            "read MiB/s",
            "objects",
            "used",
            "balance"
        );
        for case in &self.cases {
            let _ = writeln!(
                text,
                "{:<17} {:>2} {:>5} {:>6} {:<10} {:>11.1} {:>10.1} {:>7} {:>4} {:>8.2}  {}{}",
                case.mode.as_str(),
                case.writers,
                size_text(case.size_bytes),
                case.rounds,
                case.layout,
                case.write_mibs,
                case.read_mibs,
                case.data_objects,
                case.backends_used,
                case.write_balance,
                if case.verified { "yes" } else { "NO" },
                case.same_as.as_ref().map(|same| format!("  (same layout as {same})")).unwrap_or_default()
            );
            if self.repeat > 1 && case.same_as.is_none() {
                let _ = writeln!(
                    text,
                    "{:<17} {:>2} {:>5} {:>6} {:<10} {:>11} {:>10}  (lowest-highest of {} runs)",
                    "",
                    "",
                    "",
                    "",
                    "",
                    format!("{:.1}-{:.1}", case.write_mibs_range[0], case.write_mibs_range[1]),
                    format!("{:.1}-{:.1}", case.read_mibs_range[0], case.read_mibs_range[1]),
                    self.repeat
                );
            }
        }
        match &self.striping_goal {
            Some(goal) => {
                let _ = writeln!(
                    text,
                    "goal 1: shared {} file, {} writers: stripe=-1 {:.1} MiB/s vs stripe=1 {:.1} MiB/s = {:.2}x \
                     (goal >= {STRIPING_GOAL_SPEEDUP}x): {}",
                    size_text(goal.size_bytes),
                    goal.writers,
                    goal.stripe_all_write_mibs,
                    goal.stripe_1_write_mibs,
                    goal.speedup,
                    if goal.met { "met" } else { "NOT met" }
                );
            }
            None => {
                let _ = writeln!(text, "goal 1: not measured (needs shared-file stripe=1 and stripe=-1)");
            }
        }
        let _ = writeln!(
            text,
            "goal 2: {PFL_GOAL_LAYOUT} within {:.0}% of the best fixed stripe count at every size: {}",
            (1.0 - PFL_GOAL_FRACTION) * 100.0,
            if self.pfl_goal_met { "met" } else { "NOT met" }
        );
        for row in &self.pfl_goal {
            let _ = writeln!(
                text,
                "  {:<17} {:>2} {:>5} {:<5} {PFL_GOAL_LAYOUT} {:>7.1} vs {:<9} {:>7.1} MiB/s = {:>5.1}% {}",
                row.mode.as_str(),
                row.writers,
                size_text(row.size_bytes),
                row.direction,
                row.pfl_mibs,
                row.best_fixed,
                row.best_fixed_mibs,
                row.fraction * 100.0,
                if row.met { "" } else { "<- below" }
            );
        }
        for case in self.cases.iter().filter(|case| case.problem.is_some()) {
            let _ = writeln!(
                text,
                "problem: {} N={} {} {}: {}",
                case.mode,
                case.writers,
                size_text(case.size_bytes),
                case.layout,
                case.problem.as_deref().unwrap_or_default()
            );
        }
        let _ =
            writeln!(text, "verified: {}", if self.verified { "every byte read back matched" } else { "NO" });
        text
    }
}

impl Plot for StripeReport {
    /// Bandwidth against file size, one line per layout: per mode and
    /// direction at the largest writer count (the paper's Figures 2 and 3).
    fn figures(&self) -> Vec<Figure> {
        let Some(writers) = self.cases.iter().map(|case| case.writers).max() else { return Vec::new() };
        let mut figures = Vec::new();
        for mode in StripeMode::ALL {
            for (direction, rate) in DIRECTIONS {
                let series: Vec<Series> = self
                    .layouts
                    .iter()
                    .map(|named| Series {
                        name: named.name.clone(),
                        points: self
                            .cases
                            .iter()
                            .filter(|c| c.mode == mode && c.writers == writers && c.layout == named.name)
                            .map(|c| {
                                // The --repeat range as whiskers, as every figure has.
                                let [min, max] =
                                    if direction == "write" { c.write_mibs_range } else { c.read_mibs_range };
                                Point { x: (c.size_bytes as f64) / MIB, median: rate(c), min, max }
                            })
                            .collect(),
                    })
                    .filter(|series| !series.points.is_empty())
                    .collect();
                if series.is_empty() {
                    continue;
                }
                figures.push(Figure {
                    name: format!("stripe-{}-{direction}", mode.as_str()),
                    title: format!(
                        "{mode} {direction}, {writers} writers, {} backends of {:.0} MiB/s",
                        self.backends, self.backend_mibs
                    ),
                    x_label: "file size (MiB)".to_owned(),
                    y_label: format!("{direction} bandwidth (MiB/s)"),
                    x_axis: XAxis::Log2,
                    series,
                });
            }
        }
        figures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: u64 = 1 << 10;

    /// Tiny sizes, 64 KiB stripes and records, a limit fast enough not to
    /// slow the test but still in the path of every byte.
    fn tiny(dir: &Path) -> StripeSpec {
        StripeSpec {
            dir: dir.to_path_buf(),
            backends: 4,
            backend_bytes_per_sec: 1 << 30,
            write_behind_bytes: 256 << 10,
            sizes: vec![256 * KIB, 1024 * KIB],
            writers: vec![1, 2],
            modes: StripeMode::ALL.to_vec(),
            record_bytes: 64 << 10,
            stripe_bytes: 64 << 10,
            layouts: Vec::new(),
            repeat: 1,
            case_bytes: 0,
            keep: false,
        }
    }

    fn case<'a>(
        report: &'a StripeReport,
        mode: StripeMode,
        writers: usize,
        size: u64,
        layout: &str,
    ) -> &'a StripeCase {
        report
            .cases
            .iter()
            .find(|c| c.mode == mode && c.writers == writers && c.size_bytes == size && c.layout == layout)
            .unwrap_or_else(|| panic!("no case {mode} {writers} {size} {layout}"))
    }

    /// The whole workload end to end: every layout, mode, size and writer
    /// count reads back what it wrote, and each backend was charged the
    /// bytes its layout sends it (counted at the limit, not timed).
    #[test]
    fn every_case_reads_back_and_each_backend_is_charged_its_stripes() {
        let dir = tempfile::tempdir().unwrap();
        let spec = tiny(dir.path());
        let report = run_stripe(&spec).unwrap();
        assert!(report.verified, "{}", report.to_text());
        assert_eq!(report.cases.len(), 2 * 2 * 2 * 11);
        for case in &report.cases {
            let written: u64 = case.backend_written_bytes.iter().sum();
            let read: u64 = case.backend_read_bytes.iter().sum();
            assert!(written >= case.total_bytes, "{case:?}: every data byte passed the limit on its way in");
            assert!(read >= case.total_bytes, "{case:?}: every data byte passed the limit on its way out");
        }
        let size = 1024 * KIB;
        // One stripe: the data lands on one backend; the others hold at
        // most the container's small metadata.
        let one = case(&report, StripeMode::SharedFile, 2, size, "stripe=1");
        assert_eq!(one.backends_used, 1, "{one:?}");
        assert_eq!(one.data_objects, 2, "one data log per writer: {one:?}");
        let mut charged = one.backend_written_bytes.clone();
        charged.sort_unstable();
        assert!(charged[3] >= size && charged[..3].iter().all(|b| *b < size / 8), "{one:?}");
        assert!(one.write_balance < 0.3, "{one:?}");
        // Every backend: each holds a quarter of the data, and each writer
        // writes its half of the file to all four.
        let all = case(&report, StripeMode::SharedFile, 2, size, "stripe=-1");
        assert_eq!(all.backends_used, 4, "{all:?}");
        assert_eq!(all.data_objects, 8, "{all:?}");
        assert!(all.backend_written_bytes.iter().all(|b| *b >= size / 4), "{all:?}");
        assert!(all.backend_read_bytes.iter().all(|b| *b >= size / 4), "{all:?}");
        assert!(all.write_balance > 0.9, "{all:?}");
        // PFL small is one object per file, like stripe=1.
        let small = case(&report, StripeMode::FilePerProcess, 2, size, "pfl-small");
        assert_eq!(small.data_objects, 2, "{small:?}");
        // PFL large reaches every backend of a 1 MiB file (here its last
        // component starts at 128 KiB).
        let large = case(&report, StripeMode::SharedFile, 1, size, "pfl-large");
        assert_eq!(large.backends_used, 4, "{large:?}");
        // The goals are computed from the cases.
        let goal = report.striping_goal.as_ref().unwrap();
        assert_eq!((goal.size_bytes, goal.writers), (size, 2));
        assert_eq!(report.pfl_goal.len(), 2 * 2 * 2, "mode × size × direction at 2 writers");
    }

    /// Repeats alternate the layouts; each case reports the median and
    /// the range of its runs, and a layout run under another name shares
    /// that run's figures.
    #[test]
    fn repeats_give_a_median_inside_the_range_of_the_runs() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = tiny(dir.path());
        spec.sizes = vec![256 * KIB];
        spec.writers = vec![2];
        spec.layouts = ["stripe=1", "stripe=-1", "IOR.1", "IOR.3"].into_iter().map(str::to_owned).collect();
        spec.repeat = 3;
        let report = run_stripe(&spec).unwrap();
        assert!(report.verified, "{}", report.to_text());
        assert_eq!(report.cases.len(), 2 * 4);
        for case in &report.cases {
            let [low, high] = case.write_mibs_range;
            assert!(low <= case.write_mibs && case.write_mibs <= high, "{case:?}");
            let [low, high] = case.read_mibs_range;
            assert!(low <= case.read_mibs && case.read_mibs <= high, "{case:?}");
        }
        for mode in StripeMode::ALL {
            let (one, ior1) =
                (case(&report, mode, 2, 256 * KIB, "stripe=1"), case(&report, mode, 2, 256 * KIB, "IOR.1"));
            assert_eq!(ior1.same_as.as_deref(), Some("stripe=1"));
            assert_eq!((ior1.write_mibs, ior1.write_mibs_range), (one.write_mibs, one.write_mibs_range));
            // -c 4 on four backends is -c -1: measured once.
            let ior3 = case(&report, mode, 2, 256 * KIB, "IOR.3");
            assert_eq!(ior3.same_as.as_deref(), Some("stripe=-1"));
        }
        assert!(report.to_text().contains("(lowest-highest of 3 runs)"), "{}", report.to_text());
    }

    /// The layouts of one size run round by round, each round in another
    /// order: round r of every layout before round r+1 of any, and over a
    /// run's rounds (and over the runs) every layout takes every place.
    #[test]
    fn rounds_of_the_layouts_interleave_and_take_turns() {
        for (rounds, cases) in [(16, 4), (1, 4), (4, 3), (3, 1)] {
            let mut places = vec![vec![0usize; cases]; cases];
            for run in 0..cases {
                let order = schedule(run, rounds, cases);
                assert_eq!(order.len(), rounds as usize * cases);
                for (step, chunk) in order.chunks(cases).enumerate() {
                    let mut seen: Vec<usize> = chunk
                        .iter()
                        .map(|(round, case)| {
                            assert_eq!(*round, step as u64, "round {step} of every case before the next");
                            *case
                        })
                        .collect();
                    for (place, case) in seen.iter().enumerate() {
                        places[*case][place] += 1;
                    }
                    seen.sort_unstable();
                    assert_eq!(seen, (0..cases).collect::<Vec<_>>(), "each case once per round");
                }
            }
            // Over `cases` runs every case took every place equally often.
            for counts in &places {
                assert!(counts.iter().all(|count| *count == counts[0]), "{rounds} rounds: {places:?}");
            }
        }
    }

    /// A case of small files runs rounds of fresh files until it has moved
    /// `case_bytes`: every round's bytes read back, the rates count them
    /// all, and the placement figures are one round's.
    #[test]
    fn small_files_run_in_rounds() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = tiny(dir.path());
        spec.sizes = vec![256 * KIB];
        spec.writers = vec![2];
        spec.layouts = vec!["stripe=1".to_owned()];
        spec.case_bytes = 1 << 20;
        assert_eq!(spec.rounds(StripeMode::SharedFile, 2, 256 * KIB), 4);
        assert_eq!(spec.rounds(StripeMode::FilePerProcess, 2, 256 * KIB), 2);
        assert_eq!(spec.rounds(StripeMode::FilePerProcess, 2, 1 << 20), 1);
        let report = run_stripe(&spec).unwrap();
        assert!(report.verified, "{}", report.to_text());
        // A round's files: one shared file, or one per writer.
        for (mode, rounds, files) in [(StripeMode::SharedFile, 4, 1), (StripeMode::FilePerProcess, 2, 2)] {
            let one = case(&report, mode, 2, 256 * KIB, "stripe=1");
            assert_eq!((one.rounds, one.total_bytes), (rounds, 1 << 20), "{one:?}");
            let read: u64 = one.backend_read_bytes.iter().sum();
            assert!(read >= 1 << 20, "every round's bytes were read back: {one:?}");
            assert_eq!(one.data_objects, 2, "one round's files: a log per writer: {one:?}");
            assert_eq!(one.backends_used, files, "one round's files, each on one backend: {one:?}");
        }
        assert!(report.to_text().contains("each case moves at least 1M"), "{}", report.to_text());
        assert!(report.to_text().contains("run round by round"), "{}", report.to_text());
    }

    #[test]
    fn layouts_scale_to_the_backends_and_the_largest_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = StripeSpec::new(dir.path().to_path_buf());
        spec.sizes = vec![1 << 20, 64 << 20];
        let text: Vec<(String, String)> =
            spec.named_layouts().unwrap().into_iter().map(|n| (n.name, n.layout.to_string())).collect();
        let find = |name: &str| text.iter().find(|(n, _)| n == name).unwrap().1.clone();
        assert_eq!(find("stripe=-1"), "-E -1 -c -1 -S 1M");
        assert_eq!(find("pfl-large"), "-E 1M -c 1 -S 1M -E 2M -c 2 -S 1M -E -1 -c -1 -S 1M");
        assert_eq!(find("IOR.6"), "-E 16M -c 1 -S 1M -E 32M -c 2 -S 1M -E -1 -c 4 -S 1M");
        spec.layouts = vec!["stripe=2".to_owned()];
        let error = spec.named_layouts().unwrap_err().to_string();
        assert!(error.contains("unknown layout \"stripe=2\""), "{error}");
    }

    #[test]
    fn refuses_sizes_that_do_not_split_into_segments() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = tiny(dir.path());
        spec.sizes = vec![192 * KIB];
        spec.writers = vec![2];
        let error = run_stripe(&spec).unwrap_err().to_string();
        assert!(error.contains("file size 196608 does not split into 2 segments"), "{error}");
    }
}
