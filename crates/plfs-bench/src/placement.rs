//! Object placement (the Lustre PFL paper's Table 2, Figures 5 and 6): K
//! backends of real, limited capacity (size-limited tmpfs mounts, made by
//! the bench as root and unmounted by it, also on error) are filled to
//! about 90% with the paper's file-size mix, scaled down, once per case:
//!
//! - `ideal`: each size class in its own directory whose template is plain
//!   striping with the class's "ideal" stripe count (the paper's counts for
//!   64 OSTs, scaled to K);
//! - `pfl`: one progressive layout for every file, its components matched
//!   to the classes as the paper's were;
//! - `default`: the mount's default layout ([`DEFAULT_LAYOUT`]), the one a
//!   plfsrc without `default_layout` gets.
//!
//! Every case writes the same files in the same order (a seeded shuffle),
//! the cases in lockstep so the fill ends at the same file for all, and
//! each mount's placement rotor starts from the seed: one seed gives the
//! same figures on every run. `BackendKind::Memory` runs the same code over
//! in-memory backends of the same capacity, without root.
//! The report gives each backend's usage (its file system's used blocks)
//! and objects (inodes in use, and the files' data objects), their mean
//! and standard deviation, and the data objects of every small file. The
//! paper's goals: PFL's usage spread no worse than ideal striping's, and
//! one data object per small file (its prototype allocated 69).

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use plfs::ErrorKind;
use plfs::config::{BackendRole, Tuning};
use plfs::fs::{Options, Plfs};
use plfs::open::OpenFlags;
use plfs::store::SharedStore;
use plfs::store::memory::MemoryStore;
use plfs::striping::{DEFAULT_LAYOUT, Layout, StripingConfig};
use serde::Serialize;

use crate::error::{BenchError, Result};
use crate::plot::{Figure, Plot, Point, Series, XAxis};
use crate::spread::Spread;
use crate::worker::open_store_url;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// Every component's stripe size: the smallest plfs allows, so every
/// class boundary is a stripe boundary whatever the backend size.
const STRIPE_SIZE: u64 = 64 * KIB;

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementSpec {
    /// K: backends, each its own tmpfs mount.
    pub backends: usize,
    /// Capacity of each backend, MiB (a multiple of 16, at least 32).
    pub backend_mib: u64,
    /// Stop filling once this percentage of the total capacity is used.
    pub fill_pct: u32,
    /// Where the mount points go (in a fresh subdirectory).
    pub dir: PathBuf,
    /// Seeds the order of the files and where placement's rotor starts.
    pub seed: u64,
    /// What the backends are.
    pub backend_kind: BackendKind,
}

/// What the bench fills: real, size-limited file systems, or a model of
/// them in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// Size-limited tmpfs mounts (needs root): real capacity and real
    /// used blocks.
    Tmpfs,
    /// In-memory stores that report the same capacity and count their
    /// files' bytes as used (`MemoryStore::with_capacity`): the same
    /// placement code without root, for tests.
    Memory,
}

impl std::str::FromStr for BackendKind {
    type Err = BenchError;

    fn from_str(text: &str) -> Result<BackendKind> {
        match text {
            "tmpfs" => Ok(BackendKind::Tmpfs),
            "memory" => Ok(BackendKind::Memory),
            other => Err(BenchError::invalid(format!("--backend-kind {other}: expected tmpfs or memory"))),
        }
    }
}

impl BackendKind {
    fn describe(self) -> &'static str {
        match self {
            BackendKind::Tmpfs => "size-limited tmpfs",
            BackendKind::Memory => "in-memory model of a size-limited file system",
        }
    }
}

impl PlacementSpec {
    pub fn new(dir: PathBuf) -> PlacementSpec {
        PlacementSpec {
            backends: 8,
            backend_mib: 64,
            fill_pct: 90,
            dir,
            seed: 1,
            backend_kind: BackendKind::Tmpfs,
        }
    }

    fn check(&self) -> Result<()> {
        if self.backends < 2 || self.backends > 64 {
            return Err(BenchError::invalid(format!(
                "--backends {}: expected 2 to 64 (placement needs a choice of backends)",
                self.backends
            )));
        }
        if self.backend_mib < 32 || !self.backend_mib.is_multiple_of(16) {
            return Err(BenchError::invalid(format!(
                "--backend-mib {}: expected a multiple of 16 MiB, at least 32 (the size classes are fractions of it)",
                self.backend_mib
            )));
        }
        if !(10..=98).contains(&self.fill_pct) {
            return Err(BenchError::invalid(format!("--fill-pct {}: expected 10 to 98", self.fill_pct)));
        }
        Ok(())
    }

    /// The size classes on this spec's backends.
    pub fn classes(&self) -> Vec<SizeClass> {
        let capacity = self.backend_mib * MIB;
        PAPER
            .iter()
            .map(|&(name, percent, paper_size, paper_stripe_count, share)| SizeClass {
                name,
                percent,
                bytes: match share {
                    0 => STRIPE_SIZE,
                    share => capacity / share,
                },
                paper_size,
                paper_stripe_count,
                // The paper's counts were for 64 OSTs: the same fraction of K.
                ideal_stripe_count: (paper_stripe_count * self.backends as u32).div_ceil(64).max(1),
            })
            .collect()
    }
}

/// Table 2 of the paper (name, percent of files, file size, stripe count on
/// 64 OSTs) and each class's size here: a small file is one 64 KiB stripe
/// (as the paper's 1 MB is one Lustre stripe), the others a fraction
/// 1/share of one backend (a huge file an eighth), keeping the paper's order
/// of sizes while about 1300 files fill eight backends: pieces a sizable
/// fraction of a backend would measure the granularity, not the placement.
const PAPER: [(&str, u32, &str, u32, u64); 4] = [
    ("small", 70, "1 MB", 1, 0),
    ("medium", 20, "64 MB", 4, 256),
    ("large", 9, "128 GB", 16, 32),
    ("huge", 1, "4 TB", 48, 8),
];

/// One class of the file-size mix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SizeClass {
    pub name: &'static str,
    /// Share of the files.
    pub percent: u32,
    pub bytes: u64,
    /// The paper's size and stripe count for this class.
    pub paper_size: &'static str,
    pub paper_stripe_count: u32,
    /// The stripe count the `ideal` case gives it.
    pub ideal_stripe_count: u32,
}

/// One case's measurements after the fill.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseReport {
    /// `ideal`, `pfl` or `default`.
    pub name: &'static str,
    /// The layout each class's files got.
    pub layouts: Vec<String>,
    pub files: u64,
    pub files_per_class: Vec<u64>,
    pub bytes: u64,
    /// Why filling stopped before the target, if it did (a full backend).
    pub stopped_by: Option<String>,
    /// Per backend, in mount order: used capacity in percent.
    pub usage_pct: Vec<f64>,
    pub usage_mean_pct: f64,
    /// Population standard deviation across backends, in percentage points.
    pub usage_std_dev_pct: f64,
    /// Per backend: inodes in use on its file system (every file and
    /// directory plfs made there: data logs, index logs, containers).
    pub inodes: Vec<u64>,
    pub inodes_mean: f64,
    pub inodes_std_dev: f64,
    /// Per backend: the files' data objects (data logs holding bytes).
    pub data_objects: Vec<u64>,
    /// Data objects of each small file: the fewest, the most, the mean.
    pub small_file_objects_min: u64,
    pub small_file_objects_max: u64,
    pub small_file_objects_mean: f64,
    /// Data objects per file over every file.
    pub objects_per_file_mean: f64,
    /// The smallest and the largest data object placed (a file's data on
    /// one backend), in usage points of one backend: the granularity the
    /// usage spread is made of.
    pub smallest_object_pct: f64,
    pub largest_object_pct: f64,
    /// Every file's size read back as written.
    pub verified: bool,
}

/// The whole run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlacementReport {
    pub backends: usize,
    pub backend_bytes: u64,
    /// How the backends were made (tmpfs, size-limited).
    pub backend_kind: String,
    pub fill_pct: u32,
    pub seed: u64,
    pub classes: Vec<SizeClass>,
    pub cases: Vec<CaseReport>,
    /// PFL's usage std-dev is no worse than the ideal case's.
    pub pfl_std_dev_no_worse: bool,
    /// Every small file is exactly one data object, in every case.
    pub one_object_per_small_file: bool,
    pub verified: bool,
}

impl PlacementReport {
    pub fn case(&self, name: &str) -> Option<&CaseReport> {
        self.cases.iter().find(|case| case.name == name)
    }

    pub fn to_text(&self) -> String {
        let mut text = format!(
            "object placement: {} backends of {} MiB ({}), filled to {}% with the paper's Table 2 mix scaled down (seed {}):\n",
            self.backends,
            self.backend_bytes / MIB,
            self.backend_kind,
            self.fill_pct,
            self.seed
        );
        for class in &self.classes {
            text.push_str(&format!(
                "  {:<7} {:>3}% of files, {:>9} (paper: {}, -c {} of 64 OSTs): ideal -c {}\n",
                class.name,
                class.percent,
                size_text(class.bytes),
                class.paper_size,
                class.paper_stripe_count,
                class.ideal_stripe_count
            ));
        }
        for case in &self.cases {
            text.push_str(&format!("  {:<7} layouts: {}\n", case.name, case.layouts.join(" | ")));
        }
        text.push_str(
            "  every case writes the same files in the same order, each file to every case before the next; \
             the fill ends when the fullest case has no room for a small file below the target; \
             placement's rotor starts from the seed\n",
        );
        text.push_str(&format!(
            "{:<8} {:>6} {:>9} {:>11} {:>9} {:>12} {:>10} {:>16} {:>10}\n",
            "case",
            "files",
            "MiB",
            "usage mean",
            "std-dev",
            "inodes mean",
            "std-dev",
            "objs/small file",
            "objs/file"
        ));
        for case in &self.cases {
            text.push_str(&format!(
                "{:<8} {:>6} {:>9.1} {:>10.2}% {:>8.2}% {:>12.1} {:>10.1} {:>16} {:>10.2}\n",
                case.name,
                case.files,
                case.bytes as f64 / MIB as f64,
                case.usage_mean_pct,
                case.usage_std_dev_pct,
                case.inodes_mean,
                case.inodes_std_dev,
                if case.small_file_objects_min == case.small_file_objects_max {
                    case.small_file_objects_max.to_string()
                } else {
                    format!("{}..{}", case.small_file_objects_min, case.small_file_objects_max)
                },
                case.objects_per_file_mean
            ));
        }
        for case in &self.cases {
            let usage: Vec<String> = case.usage_pct.iter().map(|pct| format!("{pct:.1}")).collect();
            text.push_str(&format!("  {:<7} usage % per backend: {}\n", case.name, usage.join(" ")));
            let objects: Vec<String> = case.data_objects.iter().map(u64::to_string).collect();
            text.push_str(&format!("  {:<7} data objects per backend: {}\n", case.name, objects.join(" ")));
            if let Some(stopped) = &case.stopped_by {
                text.push_str(&format!("  {:<7} stopped early: {stopped}\n", case.name));
            }
        }
        let met = |yes: bool| if yes { "met" } else { "NOT met" };
        if let (Some(ideal), Some(pfl)) = (self.case("ideal"), self.case("pfl")) {
            text.push_str(&format!(
                "goal: PFL usage std-dev {:.2}% no worse than ideal {:.2}%: {}\n",
                pfl.usage_std_dev_pct,
                ideal.usage_std_dev_pct,
                met(self.pfl_std_dev_no_worse)
            ));
        }
        text.push_str(&format!(
            "goal: one data object per small file: {}\nverified: {}\n",
            met(self.one_object_per_small_file),
            if self.verified { "every file's size read back as written" } else { "NO" }
        ));
        text
    }
}

fn size_text(bytes: u64) -> String {
    if bytes.is_multiple_of(MIB) { format!("{} MiB", bytes / MIB) } else { format!("{} KiB", bytes / KIB) }
}

impl Plot for PlacementReport {
    fn figures(&self) -> Vec<Figure> {
        let backends: Vec<String> = (0..self.backends).map(|backend| backend.to_string()).collect();
        let per_backend = |values: fn(&CaseReport) -> Vec<f64>| -> Vec<Series> {
            self.cases
                .iter()
                .map(|case| Series {
                    name: case.name.to_owned(),
                    points: values(case)
                        .into_iter()
                        .enumerate()
                        .map(|(backend, value)| Point::single(backend as f64, value))
                        .collect(),
                })
                .collect()
        };
        vec![
            Figure {
                name: "placement-usage".to_owned(),
                title: format!("Backend usage after filling to {}% (Figure 5)", self.fill_pct),
                x_label: "backend".to_owned(),
                y_label: "used capacity (%)".to_owned(),
                x_axis: XAxis::Categories(backends.clone()),
                series: per_backend(|case| case.usage_pct.clone()),
            },
            Figure {
                name: "placement-inodes".to_owned(),
                title: "Inodes per backend (Figure 6)".to_owned(),
                x_label: "backend".to_owned(),
                y_label: "inodes in use".to_owned(),
                x_axis: XAxis::Categories(backends),
                series: per_backend(|case| case.inodes.iter().map(|&n| n as f64).collect()),
            },
        ]
    }
}

/// Size-limited tmpfs mounts, unmounted and removed when dropped (on
/// success, on error and on a panic alike).
struct TmpfsBackends {
    root: PathBuf,
    mounted: Vec<PathBuf>,
}

impl TmpfsBackends {
    fn mount(root: PathBuf, count: usize, mib: u64) -> Result<TmpfsBackends> {
        std::fs::create_dir(&root).map_err(BenchError::io("creating", &root))?;
        let mut backends = TmpfsBackends { root, mounted: Vec::with_capacity(count) };
        for index in 0..count {
            let point = backends.root.join(format!("backend{index}"));
            std::fs::create_dir(&point).map_err(BenchError::io("creating", &point))?;
            let output = Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={mib}m,mode=0755"), "plfs-bench-placement"])
                .arg(&point)
                .output()
                .map_err(BenchError::io("running mount for", &point))?;
            if !output.status.success() {
                return Err(BenchError::invalid(format!(
                    "mounting a {mib} MiB tmpfs at {}: mount failed ({}): {}",
                    point.display(),
                    output.status,
                    String::from_utf8_lossy(&output.stderr).trim()
                )));
            }
            backends.mounted.push(point);
        }
        Ok(backends)
    }

    fn urls(&self) -> Vec<String> {
        self.mounted.iter().map(|point| format!("posix://{}", point.display())).collect()
    }
}

impl Drop for TmpfsBackends {
    fn drop(&mut self) {
        let mut all_unmounted = true;
        for point in self.mounted.drain(..).rev() {
            match Command::new("umount").arg(&point).output() {
                Ok(output) if output.status.success() => {}
                Ok(output) => {
                    all_unmounted = false;
                    eprintln!(
                        "plfs bench placement: umount {}: {}",
                        point.display(),
                        String::from_utf8_lossy(&output.stderr).trim()
                    );
                }
                Err(error) => {
                    all_unmounted = false;
                    eprintln!("plfs bench placement: umount {}: {error}", point.display());
                }
            }
        }
        // Only once nothing is mounted below: never remove a live mount's files.
        if all_unmounted && let Err(error) = std::fs::remove_dir_all(&self.root) {
            eprintln!("plfs bench placement: removing {}: {error}", self.root.display());
        }
    }
}

/// The files every case writes, in order: class indexes, 100 files at a
/// time in the mix's proportions, shuffled within each hundred.
struct Files {
    order: Vec<usize>,
    next: usize,
    state: u64,
}

impl Files {
    fn new(classes: &[SizeClass], seed: u64) -> Files {
        let order = Vec::with_capacity(100);
        let mut files = Files { order, next: 100, state: seed };
        files.order.extend(
            classes
                .iter()
                .enumerate()
                .flat_map(|(index, class)| std::iter::repeat_n(index, class.percent as usize)),
        );
        files
    }

    /// splitmix64: a fixed, dependency-free sequence per seed.
    fn random(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

impl Iterator for Files {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.next == self.order.len() {
            for i in (1..self.order.len()).rev() {
                let j = (self.random() % (i as u64 + 1)) as usize;
                self.order.swap(i, j);
            }
            self.next = 0;
        }
        self.next += 1;
        Some(self.order[self.next - 1])
    }
}

fn mean_and_std_dev(values: &[f64]) -> (f64, f64) {
    let n = values.len().max(1) as f64;
    let mean = values.iter().sum::<f64>() / n;
    let variance = values.iter().map(|value| (value - mean).powi(2)).sum::<f64>() / n;
    (mean, variance.sqrt())
}

/// Runs the three cases, each on fresh backends of its own, in lockstep:
/// every file is written to every case before the next, so every case
/// writes the same files in the same order and the fill ends by one rule
/// for all (see [`fill`]). Each mount's placement rotor starts from the
/// seed, so a seed gives the same figures on every run.
pub fn run_placement(spec: &PlacementSpec) -> Result<PlacementReport> {
    spec.check()?;
    if spec.backend_kind == BackendKind::Tmpfs {
        // SAFETY: geteuid cannot fail and touches no memory.
        let uid = unsafe { libc::geteuid() };
        if uid != 0 {
            return Err(BenchError::invalid(format!(
                "plfs bench placement needs root: it mounts {} size-limited tmpfs file systems as backends \
                 (running as uid {uid}; --backend-kind memory runs a model without root)",
                spec.backends
            )));
        }
    }
    let classes = spec.classes();
    let pfl = pfl_layout(&classes)?;
    let default: Layout = DEFAULT_LAYOUT.parse().map_err(BenchError::plfs("parsing", DEFAULT_LAYOUT))?;
    let mut cases = Vec::with_capacity(3);
    for (name, mount_default) in [("ideal", None), ("pfl", Some(pfl)), ("default", Some(default))] {
        cases.push(Case::mount(spec, &classes, name, mount_default)?);
    }
    fill(spec, &classes, &mut cases)?;
    let cases = cases.into_iter().map(|case| case.measure(spec, &classes)).collect::<Result<Vec<_>>>()?;
    let ideal_std_dev = cases[0].usage_std_dev_pct;
    // A hundredth of a point: the figures are printed to two decimals.
    let pfl_std_dev_no_worse = cases[1].usage_std_dev_pct <= ideal_std_dev + 0.005;
    let one_object_per_small_file =
        cases.iter().all(|case| case.small_file_objects_min == 1 && case.small_file_objects_max == 1);
    let verified = cases.iter().all(|case| case.verified);
    Ok(PlacementReport {
        backends: spec.backends,
        backend_bytes: spec.backend_mib * MIB,
        backend_kind: spec.backend_kind.describe().to_owned(),
        fill_pct: spec.fill_pct,
        seed: spec.seed,
        classes,
        cases,
        pfl_std_dev_no_worse,
        one_object_per_small_file,
        verified,
    })
}

/// An inclusive range of seeds: `A-B`, or one seed `A`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SeedRange {
    pub first: u64,
    pub last: u64,
}

impl std::str::FromStr for SeedRange {
    type Err = BenchError;

    fn from_str(text: &str) -> Result<SeedRange> {
        let bad =
            || BenchError::invalid(format!("--seeds {text}: expected FIRST-LAST (e.g. 1-20) or one seed"));
        let (first, last) = match text.split_once('-') {
            Some((first, last)) => {
                (first.trim().parse().map_err(|_| bad())?, last.trim().parse().map_err(|_| bad())?)
            }
            None => {
                let seed = text.trim().parse().map_err(|_| bad())?;
                (seed, seed)
            }
        };
        if first > last {
            return Err(bad());
        }
        Ok(SeedRange { first, last })
    }
}

/// One seed's outcome in a run over several seeds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeedOutcome {
    pub seed: u64,
    /// Files every case holds.
    pub files: u64,
    /// Per case, in [`PlacementSeedsReport::case_names`]' order: the usage
    /// std-dev across backends, percentage points.
    pub usage_std_dev_pct: Vec<f64>,
    /// PFL's std-dev minus ideal's, points (negative: PFL's is lower).
    pub pfl_excess_pct: f64,
    pub pfl_std_dev_no_worse: bool,
    pub one_object_per_small_file: bool,
    pub verified: bool,
}

/// One case's usage std-dev over the seeds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseSpread {
    pub name: &'static str,
    pub mean_pct: f64,
    pub median_pct: f64,
    pub min_pct: f64,
    pub max_pct: f64,
    /// The smallest and largest data object this case placed in any seed,
    /// usage points of one backend.
    pub smallest_object_pct: f64,
    pub largest_object_pct: f64,
}

/// `plfs bench placement --seeds A-B`: the run of every seed, one after
/// another, and what decides the goal over all of them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlacementSeedsReport {
    pub backends: usize,
    pub backend_bytes: u64,
    pub backend_kind: String,
    pub fill_pct: u32,
    pub seeds: SeedRange,
    pub case_names: Vec<&'static str>,
    pub runs: Vec<SeedOutcome>,
    pub std_dev: Vec<CaseSpread>,
    /// Seeds in which PFL's std-dev is no worse than ideal's.
    pub pfl_no_worse_seeds: u64,
    pub pfl_no_worse_every_seed: bool,
    /// The largest excess of PFL's std-dev over ideal's, points (negative
    /// when PFL is lower in every seed).
    pub pfl_worst_excess_pct: f64,
    /// The smallest data object placed in any case and seed, usage points
    /// of one backend (a small file's one stripe).
    pub smallest_object_pct: f64,
    /// The std-dev that one smallest object more on one backend than on
    /// the others makes (smallest × √(K−1)/K): a difference between two
    /// cases below it is a difference of less than one object.
    pub one_object_std_dev_pct: f64,
    pub one_object_per_small_file: bool,
    pub verified: bool,
}

/// Runs the bench once per seed of `seeds` (everything else from `spec`)
/// and sums up the goal over them.
pub fn run_placement_seeds(spec: &PlacementSpec, seeds: SeedRange) -> Result<PlacementSeedsReport> {
    spec.check()?;
    let mut runs = Vec::new();
    let mut case_names = Vec::new();
    // Per case: the smallest and largest object over the seeds.
    let mut objects: Vec<(f64, f64)> = Vec::new();
    for seed in seeds.first..=seeds.last {
        let report = run_placement(&PlacementSpec { seed, ..spec.clone() })?;
        case_names = report.cases.iter().map(|case| case.name).collect();
        objects.resize(report.cases.len(), (f64::MAX, 0.0));
        for (case, (smallest, largest)) in report.cases.iter().zip(objects.iter_mut()) {
            *smallest = smallest.min(case.smallest_object_pct);
            *largest = largest.max(case.largest_object_pct);
        }
        let std_dev = |name| report.case(name).map_or(0.0, |case| case.usage_std_dev_pct);
        runs.push(SeedOutcome {
            seed,
            files: report.cases.first().map_or(0, |case| case.files),
            usage_std_dev_pct: report.cases.iter().map(|case| case.usage_std_dev_pct).collect(),
            pfl_excess_pct: std_dev("pfl") - std_dev("ideal"),
            pfl_std_dev_no_worse: report.pfl_std_dev_no_worse,
            one_object_per_small_file: report.one_object_per_small_file,
            verified: report.verified,
        });
    }
    let std_dev = case_names
        .iter()
        .enumerate()
        .map(|(index, &name)| {
            let values = || runs.iter().map(|run| Some(run.usage_std_dev_pct[index]));
            let spread = Spread::of(values()).unwrap_or(Spread { median: 0.0, min: 0.0, max: 0.0 });
            CaseSpread {
                name,
                mean_pct: values().flatten().sum::<f64>() / runs.len().max(1) as f64,
                median_pct: spread.median,
                min_pct: spread.min,
                max_pct: spread.max,
                smallest_object_pct: objects[index].0,
                largest_object_pct: objects[index].1,
            }
        })
        .collect();
    let pfl_no_worse_seeds = runs.iter().filter(|run| run.pfl_std_dev_no_worse).count() as u64;
    let smallest = objects.iter().map(|&(smallest, _)| smallest).fold(f64::MAX, f64::min);
    let smallest = if smallest == f64::MAX { 0.0 } else { smallest };
    let k = spec.backends as f64;
    Ok(PlacementSeedsReport {
        backends: spec.backends,
        backend_bytes: spec.backend_mib * MIB,
        backend_kind: spec.backend_kind.describe().to_owned(),
        fill_pct: spec.fill_pct,
        seeds,
        case_names,
        pfl_no_worse_every_seed: pfl_no_worse_seeds == runs.len() as u64,
        pfl_no_worse_seeds,
        pfl_worst_excess_pct: runs.iter().map(|run| run.pfl_excess_pct).fold(f64::MIN, f64::max),
        smallest_object_pct: smallest,
        one_object_std_dev_pct: smallest * (k - 1.0).sqrt() / k,
        one_object_per_small_file: runs.iter().all(|run| run.one_object_per_small_file),
        verified: runs.iter().all(|run| run.verified),
        std_dev,
        runs,
    })
}

impl PlacementSeedsReport {
    pub fn to_text(&self) -> String {
        let mut text = format!(
            "object placement over seeds {}-{}: {} backends of {} MiB ({}), filled to {}% with the paper's Table 2 mix scaled down\n",
            self.seeds.first,
            self.seeds.last,
            self.backends,
            self.backend_bytes / MIB,
            self.backend_kind,
            self.fill_pct
        );
        text.push_str(&format!("{:>6} {:>6}", "seed", "files"));
        for name in &self.case_names {
            text.push_str(&format!(" {:>9}", format!("{name} sd")));
        }
        text.push_str(&format!(" {:>10} {:>13}\n", "pfl-ideal", "pfl no worse"));
        for run in &self.runs {
            text.push_str(&format!("{:>6} {:>6}", run.seed, run.files));
            for std_dev in &run.usage_std_dev_pct {
                text.push_str(&format!(" {std_dev:>8.3}%"));
            }
            text.push_str(&format!(
                " {:>+10.3} {:>13}\n",
                run.pfl_excess_pct,
                if run.pfl_std_dev_no_worse { "yes" } else { "NO" }
            ));
        }
        for case in &self.std_dev {
            text.push_str(&format!(
                "  {:<7} usage std-dev: mean {:.3}, median {:.3} [{:.3}-{:.3}] points; data objects of {:.3} to {:.3} points\n",
                case.name,
                case.mean_pct,
                case.median_pct,
                case.min_pct,
                case.max_pct,
                case.smallest_object_pct,
                case.largest_object_pct
            ));
        }
        text.push_str(&format!(
            "  granularity: one smallest object ({:.3} points) more on one backend than on the others is a std-dev of {:.3} points\n",
            self.smallest_object_pct, self.one_object_std_dev_pct
        ));
        let met = |yes: bool| if yes { "met" } else { "NOT met" };
        text.push_str(&format!(
            "goal: PFL usage std-dev no worse than ideal in {} of {} seeds (worst excess {:+.3} points): {}\n",
            self.pfl_no_worse_seeds,
            self.runs.len(),
            self.pfl_worst_excess_pct,
            met(self.pfl_no_worse_every_seed)
        ));
        text.push_str(&format!(
            "goal: one data object per small file in every seed: {}\nverified: {}\n",
            met(self.one_object_per_small_file),
            if self.verified { "every file's size read back as written, in every seed" } else { "NO" }
        ));
        text
    }
}

impl Plot for PlacementSeedsReport {
    fn figures(&self) -> Vec<Figure> {
        vec![Figure {
            name: "placement-std-dev-per-seed".to_owned(),
            title: format!("Usage std-dev across backends after filling to {}%", self.fill_pct),
            x_label: "seed".to_owned(),
            y_label: "usage std-dev (points)".to_owned(),
            x_axis: XAxis::Linear,
            series: self
                .case_names
                .iter()
                .enumerate()
                .map(|(index, name)| Series {
                    name: (*name).to_owned(),
                    points: self
                        .runs
                        .iter()
                        .map(|run| Point::single(run.seed as f64, run.usage_std_dev_pct[index]))
                        .collect(),
                })
                .collect(),
        }]
    }
}

/// One layout for every class, its components ending at each class's size
/// with that class's ideal stripe count (the paper's "first component a
/// single stripe for the first 1 MB, the second 4 stripes for 1-64 MB, …").
fn pfl_layout(classes: &[SizeClass]) -> Result<Layout> {
    let mut text = String::new();
    for (index, class) in classes.iter().enumerate() {
        let end = if index + 1 == classes.len() { "-1".to_owned() } else { class.bytes.to_string() };
        text.push_str(&format!("-E {end} -c {} -S {STRIPE_SIZE} ", class.ideal_stripe_count));
    }
    text.trim_end().parse().map_err(BenchError::plfs("building the PFL layout", text.clone()))
}

fn ideal_layout(class: &SizeClass) -> Result<Layout> {
    let text = format!("-c {} -S {STRIPE_SIZE}", class.ideal_stripe_count);
    text.parse().map_err(BenchError::plfs("building the ideal layout", text))
}

/// One case while it fills: its mount over its own backends.
struct Case {
    name: &'static str,
    layouts: Vec<String>,
    plfs: Plfs,
    /// The tmpfs mounts, unmounted when the case is dropped (after `plfs`).
    tmpfs: Option<TmpfsBackends>,
    written: Vec<(String, usize)>,
    files_per_class: Vec<u64>,
    bytes: u64,
    stopped_by: Option<String>,
}

impl Case {
    fn mount(
        spec: &PlacementSpec,
        classes: &[SizeClass],
        name: &'static str,
        mount_default: Option<Layout>,
    ) -> Result<Case> {
        let (stores, tmpfs, described) = match spec.backend_kind {
            BackendKind::Tmpfs => {
                let root = spec.dir.join(format!("plfs-placement.{}.{name}", std::process::id()));
                let backends = TmpfsBackends::mount(root, spec.backends, spec.backend_mib)?;
                let stores = backends
                    .urls()
                    .iter()
                    .map(|url| open_store_url(url).map(|store| (store, BackendRole::Any)))
                    .collect::<Result<Vec<_>>>()?;
                let described = backends.urls().join(",");
                (stores, Some(backends), described)
            }
            BackendKind::Memory => {
                let stores = (0..spec.backends)
                    .map(|index| {
                        let url = format!("memory://placement-{name}-{index}");
                        let store: SharedStore =
                            Arc::new(MemoryStore::with_capacity(url, spec.backend_mib * MIB));
                        (store, BackendRole::Any)
                    })
                    .collect();
                (stores, None, format!("{} memory stores", spec.backends))
            }
        };
        // The same start for every case and run: the rotor decides which
        // of several equally empty backends a component takes, and from the
        // process id (a mount's usual start) a seed's figures would move
        // from run to run.
        let striping = StripingConfig {
            default_layout: mount_default.clone(),
            rotor_start: Some(spec.seed),
            ..StripingConfig::default()
        };
        let plfs = Plfs::with_striping(stores, Options::from_environment(Tuning::default()), striping)
            .map_err(BenchError::plfs("mounting plfs over", described))?;
        let mut layouts = Vec::with_capacity(classes.len());
        for class in classes {
            let dir = format!("/{}", class.name);
            plfs.mkdir(&dir, 0o755).map_err(BenchError::plfs("mkdir", dir.clone()))?;
            if mount_default.is_none() {
                let layout = ideal_layout(class)?;
                plfs.set_layout(&dir, &layout)
                    .map_err(BenchError::plfs("setting the template of", dir.clone()))?;
            }
            let layout =
                plfs.layout_for_new_file_in(&dir).map_err(BenchError::plfs("layout of", dir.clone()))?;
            layouts.push(format!(
                "{}: {}",
                class.name,
                layout.map_or_else(|| "none".to_owned(), |l| l.to_string())
            ));
        }
        if mount_default.is_some() {
            // One layout for every class: print it once.
            let shared = layouts[0].split_once(": ").map(|(_, layout)| layout.to_owned()).unwrap_or_default();
            layouts = vec![format!("every file: {shared}")];
        }
        Ok(Case {
            name,
            layouts,
            plfs,
            tmpfs,
            written: Vec::new(),
            files_per_class: vec![0; classes.len()],
            bytes: 0,
            stopped_by: None,
        })
    }

    /// Used and total bytes over the case's backends.
    fn used_and_size(&self) -> Result<(u64, u64)> {
        let usage = self.plfs.space_per_backend().map_err(BenchError::plfs("statfs of", "the backends"))?;
        Ok(usage.iter().fold((0, 0), |(used, size), backend| {
            let space = &backend.space;
            (
                used + (space.blocks - space.blocks_free) * space.block_size,
                size + space.blocks * space.block_size,
            )
        }))
    }

    /// The figures after the fill; unmounts the case's backends.
    fn measure(self, spec: &PlacementSpec, classes: &[SizeClass]) -> Result<CaseReport> {
        let plfs = &self.plfs;
        let usage = plfs.space_per_backend().map_err(BenchError::plfs("statfs of", "the backends"))?;
        if spec.backend_kind == BackendKind::Memory
            && let Some(over) = usage.iter().find(|backend| backend.space.blocks_free == 0)
        {
            // The memory model does not refuse writes past its size (tmpfs
            // does, and the fill stops there): a full backend is reported.
            return Err(BenchError::invalid(format!(
                "{}: backend {} is full after the fill: placement piled data on it",
                self.name, over.url
            )));
        }
        let usage_pct: Vec<f64> = usage
            .iter()
            .map(|backend| {
                let space = &backend.space;
                100.0 * (space.blocks - space.blocks_free) as f64 / space.blocks.max(1) as f64
            })
            .collect();
        let inodes: Vec<u64> =
            usage.iter().map(|backend| backend.space.files - backend.space.files_free).collect();
        let mut data_objects = vec![0u64; spec.backends];
        let mut small = Vec::new();
        let mut total_objects = 0u64;
        let (mut smallest_object, mut largest_object) = (u64::MAX, 0u64);
        let mut verified = true;
        for (path, class_index) in &self.written {
            let per_backend =
                plfs.data_per_backend(path).map_err(BenchError::plfs("listing the data of", path))?;
            let objects: u64 = per_backend.values().map(|data| data.objects).sum();
            for (backend, data) in &per_backend {
                data_objects[*backend] += data.objects;
                // One writer: one data object per backend the file uses.
                if let Some(object) = data.bytes.checked_div(data.objects) {
                    smallest_object = smallest_object.min(object);
                    largest_object = largest_object.max(object);
                }
            }
            total_objects += objects;
            if *class_index == 0 {
                small.push(objects);
            }
            let size = plfs.stat(path).map_err(BenchError::plfs("stat", path))?.size;
            verified &= size == classes[*class_index].bytes;
        }
        let (usage_mean_pct, usage_std_dev_pct) = mean_and_std_dev(&usage_pct);
        let (inodes_mean, inodes_std_dev) =
            mean_and_std_dev(&inodes.iter().map(|&n| n as f64).collect::<Vec<_>>());
        let files = self.written.len() as u64;
        drop(self.plfs);
        drop(self.tmpfs);
        Ok(CaseReport {
            name: self.name,
            layouts: self.layouts,
            files,
            files_per_class: self.files_per_class,
            bytes: self.bytes,
            stopped_by: self.stopped_by,
            usage_pct,
            usage_mean_pct,
            usage_std_dev_pct,
            inodes,
            inodes_mean,
            inodes_std_dev,
            data_objects,
            small_file_objects_min: small.iter().copied().min().unwrap_or(0),
            small_file_objects_max: small.iter().copied().max().unwrap_or(0),
            small_file_objects_mean: small.iter().sum::<u64>() as f64 / small.len().max(1) as f64,
            objects_per_file_mean: total_objects as f64 / files.max(1) as f64,
            smallest_object_pct: 100.0 * smallest_object.min(largest_object) as f64
                / (spec.backend_mib * MIB) as f64,
            largest_object_pct: 100.0 * largest_object as f64 / (spec.backend_mib * MIB) as f64,
            verified,
        })
    }
}

/// Writes the seeded files to every case, each file to all cases before
/// the next. A file that would take any case past the target is left out
/// of every case; the fill ends when, in the fullest case, not even a small
/// file fits (the paper's "until about 90%"), or when a write finds no
/// space. So every case holds the same files, and the cases differ only in
/// where their layouts and placement put them: which case ends with the
/// lower spread no longer depends on where each case's own fill happened
/// to stop.
fn fill(spec: &PlacementSpec, classes: &[SizeClass], cases: &mut [Case]) -> Result<()> {
    let chunk: Vec<u8> = (0..MIB).map(|i| (i % 251) as u8).collect();
    let smallest = classes.iter().map(|class| class.bytes).min().unwrap_or(STRIPE_SIZE);
    let mut index = 0usize;
    for class_index in Files::new(classes, spec.seed) {
        let class = &classes[class_index];
        let mut room = u64::MAX;
        for case in cases.iter() {
            let (used, size) = case.used_and_size()?;
            let target = size / 100 * u64::from(spec.fill_pct);
            room = room.min(target.saturating_sub(used));
        }
        if smallest > room {
            return Ok(());
        }
        if class.bytes > room {
            continue;
        }
        let path = format!("/{}/f{index:05}", class.name);
        index += 1;
        let mut full = false;
        for case in cases.iter_mut() {
            match write_file(&case.plfs, &path, class.bytes, &chunk) {
                Ok(()) => {
                    case.written.push((path.clone(), class_index));
                    case.files_per_class[class_index] += 1;
                    case.bytes += class.bytes;
                }
                Err(error) if error.kind() == ErrorKind::NoSpace => {
                    case.stopped_by = Some(format!("{path}: {error}"));
                    full = true;
                }
                Err(error) => return Err(BenchError::Plfs { doing: "writing", target: path, source: error }),
            }
        }
        if full {
            return Ok(());
        }
    }
    Ok(())
}

/// Creates `path` and writes `size` bytes of `chunk` to it, a chunk at a time.
fn write_file(plfs: &Plfs, path: &str, size: u64, chunk: &[u8]) -> plfs::Result<()> {
    let handle = plfs.open(path, OpenFlags::WRONLY.create(), 0o644, 1)?;
    let mut offset = 0u64;
    while offset < size {
        let length = (size - offset).min(chunk.len() as u64) as usize;
        let wrote = handle.write(&chunk[..length], offset)?;
        offset += wrote as u64;
    }
    handle.close()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_scale_the_papers_table() {
        let spec = PlacementSpec::new(PathBuf::from("/unused"));
        let classes = spec.classes();
        let sizes: Vec<u64> = classes.iter().map(|class| class.bytes).collect();
        assert_eq!(sizes, [64 * KIB, 256 * KIB, 2 * MIB, 8 * MIB]);
        let counts: Vec<u32> = classes.iter().map(|class| class.ideal_stripe_count).collect();
        assert_eq!(counts, [1, 1, 2, 6]);
        assert_eq!(classes.iter().map(|class| class.percent).sum::<u32>(), 100);
        assert_eq!(
            pfl_layout(&classes).unwrap().to_string(),
            "-E 64K -c 1 -S 64K -E 256K -c 1 -S 64K -E 2M -c 2 -S 64K -E -1 -c 6 -S 64K"
        );
    }

    #[test]
    fn every_hundred_files_follow_the_mix_and_the_order_is_fixed_by_the_seed() {
        let classes = PlacementSpec::new(PathBuf::from("/unused")).classes();
        let first: Vec<usize> = Files::new(&classes, 7).take(300).collect();
        for hundred in first.chunks(100) {
            let count = |class| hundred.iter().filter(|&&c| c == class).count();
            assert_eq!([count(0), count(1), count(2), count(3)], [70, 20, 9, 1]);
        }
        assert_eq!(first, Files::new(&classes, 7).take(300).collect::<Vec<_>>());
        assert_ne!(first, Files::new(&classes, 8).take(300).collect::<Vec<_>>());
    }

    #[test]
    fn seed_ranges_parse_and_backwards_ones_are_refused() {
        assert_eq!("1-20".parse::<SeedRange>().unwrap(), SeedRange { first: 1, last: 20 });
        assert_eq!("7".parse::<SeedRange>().unwrap(), SeedRange { first: 7, last: 7 });
        for bad in ["5-3", "a-2", "1-", ""] {
            let error = bad.parse::<SeedRange>().unwrap_err().to_string();
            assert!(error.contains(&format!("--seeds {bad}:")), "{error}");
        }
    }

    #[test]
    fn bad_specs_are_refused_naming_the_option() {
        let base = PlacementSpec::new(PathBuf::from("/unused"));
        for (spec, expect) in [
            (PlacementSpec { backends: 1, ..base.clone() }, "--backends 1"),
            (PlacementSpec { backend_mib: 24, ..base.clone() }, "--backend-mib 24"),
            (PlacementSpec { backend_mib: 16, ..base.clone() }, "--backend-mib 16"),
            (PlacementSpec { fill_pct: 99, ..base.clone() }, "--fill-pct 99"),
        ] {
            let error = run_placement(&spec).unwrap_err().to_string();
            assert!(error.contains(expect), "{error}");
        }
    }
}
