//! `plfs mount`: serve a configured mount point over FUSE, in the
//! foreground or as a detached daemon.

use std::fs::{self, File, OpenOptions};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use clap::Args;
use plfs::config::MountConfig;
use plfs_fuse::session::READAHEAD_DEFAULT_BYTES;
use plfs_fuse::{FsOptions, MountSettings, ShutdownSignals, mounts};

use crate::paths::{self, Context};

#[derive(Debug, Args)]
pub struct Opts {
    /// The mount point, as named in the plfsrc (an existing directory).
    mount_point: PathBuf,
    /// Serve in this process until unmounted or sent SIGTERM/SIGINT,
    /// instead of starting a background daemon.
    #[arg(short, long)]
    foreground: bool,
    /// Mount options, comma-separated and repeatable: allow_other,
    /// allow_root, ro, noatime, nosuid, fsname=NAME, attr_timeout=S,
    /// entry_timeout=S (1 s each), direct_io, writeback_cache, …
    /// (default_permissions is always on).
    #[arg(short = 'o', value_name = "OPTIONS")]
    options: Vec<String>,
    /// FUSE request threads (default: two per CPU, 4 to 8; 8 with -o
    /// writeback_cache).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=256))]
    threads: Option<u16>,
    /// Where a background daemon writes its log (default: a file in the
    /// state directory named after the mount point).
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
}

/// How long a background mount may take to appear.
const START_TIMEOUT: Duration = Duration::from_secs(10);
const START_POLL: Duration = Duration::from_millis(50);

pub fn run(context: &Context, opts: &Opts, verbose: u8) -> Result<ExitCode> {
    // Before anything starts a thread (opening the mount starts the core's
    // read pool): every thread must inherit the blocked shutdown signals.
    let signals =
        if opts.foreground { Some(ShutdownSignals::block().context("blocking signals")?) } else { None };
    let mount_point = paths::absolute(&opts.mount_point)?;
    let mount = configured(context, &mount_point)?;
    check_mount_point(&mount_point)?;
    match signals {
        Some(signals) => serve(context, opts, mount, signals),
        None => start_daemon(context, opts, &mount_point, verbose),
    }
}

/// The plfsrc's mount at exactly this point.
fn configured(context: &Context, mount_point: &Path) -> Result<MountConfig> {
    let config = context.require_config()?;
    if let Some(mount) = config.mounts.iter().find(|mount| mount.mount_point == mount_point) {
        return Ok(mount.clone());
    }
    let points: Vec<String> =
        config.mounts.iter().map(|mount| mount.mount_point.display().to_string()).collect();
    bail!("{}: not a mount point in the plfsrc (configured: {})", mount_point.display(), points.join(", "))
}

fn check_mount_point(mount_point: &Path) -> Result<()> {
    if let Some(entry) = mounts::find(mount_point)?
        && entry.is_fuse()
    {
        bail!("{}: already mounted ({} {})", mount_point.display(), entry.fstype, entry.source);
    }
    let metadata =
        fs::metadata(mount_point).with_context(|| format!("mount point {}", mount_point.display()))?;
    if !metadata.is_dir() {
        bail!("{}: the mount point is not a directory", mount_point.display());
    }
    Ok(())
}

fn serve(context: &Context, opts: &Opts, mount: MountConfig, signals: ShutdownSignals) -> Result<ExitCode> {
    let plfs = context.mount(&mount)?;
    let settings = MountSettings {
        options: opts.options.clone(),
        threads: opts.threads.map(usize::from),
        readahead_bytes: READAHEAD_DEFAULT_BYTES,
        fs: FsOptions { statfs: mount.statfs.clone(), ..FsOptions::default() },
    };
    let pid_file = pid_file(&mount.mount_point);
    if let Err(error) = fs::write(&pid_file, format!("{}\n", std::process::id())) {
        tracing::warn!("{}: {error} (plfs umount will not wait for this daemon)", pid_file.display());
    }
    let served = plfs_fuse::run(plfs, &mount.mount_point, &settings, signals);
    // Only ours: a daemon started since may have replaced it.
    if fs::read_to_string(&pid_file).is_ok_and(|text| text.trim() == std::process::id().to_string()) {
        let _ = fs::remove_file(&pid_file);
    }
    served.with_context(|| format!("serving {}", mount.mount_point.display()))?;
    Ok(ExitCode::SUCCESS)
}

/// Starts `plfs mount --foreground` detached (its own session, no
/// terminal, output to a log file), waits until the kernel shows the
/// mount, and prints the daemon's pid.
fn start_daemon(context: &Context, opts: &Opts, mount_point: &Path, verbose: u8) -> Result<ExitCode> {
    let log_path = opts.log.clone().unwrap_or_else(|| state_file(mount_point, "log"));
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("daemon log {}", log_path.display()))?;
    let mut command = Command::new(std::env::current_exe().context("finding the plfs binary")?);
    // The daemon must read the same plfsrc, whatever its environment.
    if let Some(file) = context.require_config()?.files.first() {
        command.arg("--config").arg(file);
    }
    for _ in 0..verbose {
        command.arg("-v");
    }
    command.arg("mount").arg("--foreground").arg(mount_point);
    if let Some(threads) = opts.threads {
        command.arg("--threads").arg(threads.to_string());
    }
    for option in &opts.options {
        command.arg("-o").arg(option);
    }
    command.stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
    // SAFETY: setsid is async-signal-safe and touches no memory of ours.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().context("starting the mount daemon")?;
    let started = Instant::now();
    while started.elapsed() < START_TIMEOUT {
        if mounts::find(mount_point)?.is_some_and(|entry| entry.is_fuse()) {
            println!("{}", child.id());
            return Ok(ExitCode::SUCCESS);
        }
        if let Some(status) = child.try_wait()? {
            bail!("the mount daemon exited ({status}): {}", log_tail(&log_path));
        }
        std::thread::sleep(START_POLL);
    }
    // Ours, by pid: a daemon that never mounted should not linger.
    let _ = child.kill();
    let _ = child.wait();
    bail!(
        "{} did not appear within {} s: {}",
        mount_point.display(),
        START_TIMEOUT.as_secs(),
        log_tail(&log_path)
    )
}

/// The last lines of the daemon's log, for an error message.
fn log_tail(path: &Path) -> String {
    let text = File::open(path).ok().and_then(|file| std::io::read_to_string(file).ok()).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|line| !line.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(5)..].join(" | ");
    if tail.is_empty() {
        format!("no output (log {})", path.display())
    } else {
        format!("{tail} (log {})", path.display())
    }
}

/// Where a mount's daemon keeps its pid, so `plfs umount` can wait for
/// it to finish closing files.
pub fn pid_file(mount_point: &Path) -> PathBuf {
    state_file(mount_point, "pid")
}

/// A per-mount-point file in /run/plfs (as root) or the temp directory.
fn state_file(mount_point: &Path, extension: &str) -> PathBuf {
    let run = Path::new("/run/plfs");
    let dir = if fs::create_dir_all(run).is_ok() { run.to_path_buf() } else { std::env::temp_dir() };
    let name: String = mount_point
        .to_string_lossy()
        .trim_matches('/')
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '_' })
        .collect();
    dir.join(format!("plfs-mount-{name}.{extension}"))
}
