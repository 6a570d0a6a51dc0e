//! `plfs bench fuse`: the same plfs through a FUSE mount and through the
//! library, in one run on one file system. The mount is served from this
//! process (as `plfs mount` would serve it) over backends in a scratch
//! directory; the library uses the same backends.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, Result, anyhow};
use plfs::config::{BackendRole, Tuning};
use plfs::fs::{Options, Plfs};
use plfs::store::SharedStore;
use plfs::store::posix::PosixStore;
use plfs_bench::plot::Plot as _;
use plfs_bench::{BenchSpec, RepeatedReport, StreamingReport};
use serde::Serialize;

use super::bench::worker_command;
use crate::output::print_json;

/// Streaming block: what `dd bs=1M` and most copy tools use.
const STREAM_BLOCK_BYTES: usize = 1 << 20;

pub struct FuseBench {
    pub stream_bytes: u64,
    /// Runs of each comparison; medians are reported.
    pub repeat: u32,
    /// The N-1 strided comparison; its `fuse_dir` is filled in here.
    pub spec: BenchSpec,
    pub json: bool,
    pub plot: super::bench::PlotArgs,
    /// The mount's `-o` options (`--fuse-options`).
    pub options: Option<String>,
}

#[derive(Serialize)]
struct FuseReport {
    /// Medians over the runs (each run's figures are in `streaming_runs`).
    streaming: StreamingMedians,
    streaming_runs: Vec<StreamingReport>,
    n1_strided: RepeatedReport,
    verified: bool,
}

/// The streaming figures' medians, with the same names as one run's.
#[derive(Serialize)]
struct StreamingMedians {
    runs: usize,
    write_library_mibs: f64,
    write_fuse_mibs: f64,
    read_library_mibs: f64,
    read_fuse_mibs: f64,
    write_ratio: f64,
    read_ratio: f64,
    cold_reads: bool,
}

impl StreamingMedians {
    fn of(runs: &[StreamingReport]) -> StreamingMedians {
        let median = |get: fn(&StreamingReport) -> f64| {
            let mut values: Vec<f64> = runs.iter().map(get).collect();
            values.sort_by(f64::total_cmp);
            let middle = values.len() / 2;
            if values.len() % 2 == 1 { values[middle] } else { (values[middle - 1] + values[middle]) / 2.0 }
        };
        StreamingMedians {
            runs: runs.len(),
            write_library_mibs: median(|r| r.write_library_mibs),
            write_fuse_mibs: median(|r| r.write_fuse_mibs),
            read_library_mibs: median(|r| r.read_library_mibs),
            read_fuse_mibs: median(|r| r.read_fuse_mibs),
            write_ratio: median(|r| r.write_ratio),
            read_ratio: median(|r| r.read_ratio),
            cold_reads: runs.iter().all(|r| r.cold_reads),
        }
    }

    fn to_text(&self) -> String {
        format!(
            "streaming, median of {} run(s): FUSE mount / library: write {:.2}x ({:.0} vs {:.0} MiB/s)  read {:.2}x ({:.0} vs {:.0} MiB/s){}\n",
            self.runs,
            self.write_ratio,
            self.write_fuse_mibs,
            self.write_library_mibs,
            self.read_ratio,
            self.read_fuse_mibs,
            self.read_library_mibs,
            if self.cold_reads { ", cold reads" } else { ", reads from page cache" },
        )
    }
}

pub fn run(bench: FuseBench) -> Result<ExitCode> {
    bench.plot.check()?;
    let scratch = tempfile::Builder::new()
        .prefix("plfs-bench-fuse.")
        .tempdir_in(&bench.spec.dir)
        .with_context(|| format!("creating a scratch directory in {}", bench.spec.dir.display()))?;
    let mount_point = scratch.path().join("mnt");
    std::fs::create_dir(&mount_point).context("creating the mount point")?;
    let plfs = scratch_plfs(scratch.path(), bench.spec.backends)?;
    let mount = plfs_fuse::Mount::spawn(plfs.clone(), &mount_point, &settings(bench.options.as_deref()))
        .with_context(|| format!("mounting {}", mount_point.display()))?;

    let mut streaming_runs = Vec::with_capacity(bench.repeat as usize);
    for index in 0..bench.repeat {
        let fuse_first = index % 2 == 1;
        let run = plfs_bench::streaming(
            &plfs,
            &mount_point,
            "stream",
            bench.stream_bytes,
            STREAM_BLOCK_BYTES,
            fuse_first,
        )
        .map_err(|e| anyhow!(e))?;
        if !bench.json {
            println!("{}", run.to_text());
        }
        streaming_runs.push(run);
    }
    let spec = BenchSpec { fuse_dir: Some(mount_point.clone()), ..bench.spec };
    let worker = worker_command()?;
    let mut n1_runs = Vec::with_capacity(bench.repeat as usize);
    for _ in 0..bench.repeat {
        let run = plfs_bench::run(&spec, &worker).map_err(|e| anyhow!(e))?;
        if !bench.json {
            print!("{}", run.to_text());
        }
        n1_runs.push(run);
    }
    mount.unmount().context("unmounting")?;

    let streaming = StreamingMedians::of(&streaming_runs);
    let n1_strided = RepeatedReport::new(n1_runs);
    let verified = streaming_runs.iter().all(|r| r.verified) && n1_strided.verified;
    let text = format!("{}n1-strided, {}", streaming.to_text(), n1_strided.to_text());
    bench.plot.emit(&text, || {
        let mut figures = streaming_runs.as_slice().figures();
        figures.extend(n1_strided.figures());
        figures
    })?;
    if bench.json {
        print_json(&FuseReport { streaming, streaming_runs, n1_strided, verified })?;
    } else {
        print!("\n{}", streaming.to_text());
        if bench.repeat > 1 {
            print!("n1-strided, {}", n1_strided.to_text());
        }
    }
    Ok(if verified { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// A plfs FUSE mount over scratch backends in `dir`, served by this
/// process, for `plfs bench … --interface fuse`: unmounted, then its
/// scratch directory removed, when it drops.
pub struct FuseMount {
    // Declared first: fields drop in order, and the mount must go before
    // the directory under it.
    _mount: plfs_fuse::Mount,
    mount_point: std::path::PathBuf,
    _scratch: tempfile::TempDir,
}

impl FuseMount {
    pub fn new(dir: &Path, backends: usize, options: Option<&str>) -> Result<FuseMount> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let scratch = tempfile::Builder::new()
            .prefix("plfs-bench-fuse.")
            .tempdir_in(dir)
            .with_context(|| format!("creating a scratch directory in {}", dir.display()))?;
        let mount_point = scratch.path().join("mnt");
        std::fs::create_dir(&mount_point).context("creating the mount point")?;
        let plfs = scratch_plfs(scratch.path(), backends)?;
        let mount = plfs_fuse::Mount::spawn(plfs, &mount_point, &settings(options))
            .with_context(|| format!("mounting {} (FUSE needs root)", mount_point.display()))?;
        Ok(FuseMount { _mount: mount, mount_point, _scratch: scratch })
    }

    pub fn mount_point(&self) -> &Path {
        &self.mount_point
    }
}

/// The mount's settings: the defaults plus `--fuse-options`.
fn settings(options: Option<&str>) -> plfs_fuse::MountSettings {
    plfs_fuse::MountSettings {
        options: options.map(str::to_owned).into_iter().collect(),
        ..plfs_fuse::MountSettings::default()
    }
}

fn scratch_plfs(scratch: &Path, backends: usize) -> Result<Plfs> {
    let mut stores: Vec<(SharedStore, BackendRole)> = Vec::with_capacity(backends);
    for index in 0..backends {
        let dir = scratch.join(format!("b{index}"));
        std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let store = PosixStore::new(dir.clone(), format!("posix://{}", dir.display()))?;
        stores.push((Arc::new(store), BackendRole::Any));
    }
    Ok(Plfs::new(stores, Options::from_environment(Tuning::default()))?)
}
