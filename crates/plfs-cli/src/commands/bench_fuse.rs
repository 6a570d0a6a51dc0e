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
use plfs_bench::{BenchReport, BenchSpec, StreamingReport};
use serde::Serialize;

use super::bench::worker_command;
use crate::output::print_json;

/// Streaming block: what `dd bs=1M` and most copy tools use.
const STREAM_BLOCK_BYTES: usize = 1 << 20;

pub struct FuseBench {
    pub stream_bytes: u64,
    /// The N-1 strided comparison; its `fuse_dir` is filled in here.
    pub spec: BenchSpec,
    pub json: bool,
}

#[derive(Serialize)]
struct FuseReport {
    streaming: StreamingReport,
    n1_strided: BenchReport,
    verified: bool,
}

pub fn run(bench: FuseBench) -> Result<ExitCode> {
    let scratch = tempfile::Builder::new()
        .prefix("plfs-bench-fuse.")
        .tempdir_in(&bench.spec.dir)
        .with_context(|| format!("creating a scratch directory in {}", bench.spec.dir.display()))?;
    let mount_point = scratch.path().join("mnt");
    std::fs::create_dir(&mount_point).context("creating the mount point")?;
    let plfs = scratch_plfs(scratch.path(), bench.spec.backends)?;
    let mount = plfs_fuse::Mount::spawn(plfs.clone(), &mount_point, &plfs_fuse::MountSettings::default())
        .with_context(|| format!("mounting {}", mount_point.display()))?;

    let streaming =
        plfs_bench::streaming(&plfs, &mount_point, "stream", bench.stream_bytes, STREAM_BLOCK_BYTES)
            .map_err(|e| anyhow!(e))?;
    if !bench.json {
        println!("{}", streaming.to_text());
    }
    let spec = BenchSpec { fuse_dir: Some(mount_point.clone()), ..bench.spec };
    let n1 = plfs_bench::run(&spec, &worker_command()?).map_err(|e| anyhow!(e))?;
    mount.unmount().context("unmounting")?;

    let verified = streaming.verified && n1.verified;
    if bench.json {
        print_json(&FuseReport { streaming, n1_strided: n1, verified })?;
    } else {
        print!("{}", n1.to_text());
    }
    Ok(if verified { ExitCode::SUCCESS } else { ExitCode::FAILURE })
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
