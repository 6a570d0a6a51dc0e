//! `plfs umount`: unmount a plfs FUSE mount and wait for its daemon to
//! finish closing files.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use clap::Args;
use plfs_fuse::mounts;

use crate::commands::mount::pid_file;
use crate::paths;

#[derive(Debug, Args)]
pub struct Opts {
    /// Where the file system is mounted.
    mount_point: PathBuf,
    /// Unmount even if files are open there: it is detached and its FUSE
    /// connection aborted (those files get ENOTCONN); the daemon still
    /// closes and flushes everything it has open.
    #[arg(long)]
    force: bool,
}

/// How long to wait for the daemon to close its files and exit.
const EXIT_TIMEOUT: Duration = Duration::from_secs(60);
const EXIT_POLL: Duration = Duration::from_millis(50);

pub fn run(opts: &Opts) -> Result<ExitCode> {
    let mount_point = paths::absolute(&opts.mount_point)?;
    let Some(entry) = mounts::find(&mount_point)?.filter(|entry| entry.is_fuse()) else {
        bail!("{}: not mounted (no FUSE mount there)", mount_point.display());
    };
    let daemon = daemon_pid(&mount_point);
    if opts.force {
        plfs_fuse::force_unmount(&mount_point, Some(&entry))
            .with_context(|| format!("force-unmounting {}", mount_point.display()))?;
    } else {
        unmount(&mount_point)?;
    }
    if let Some(pid) = daemon {
        wait_for_exit(pid, &mount_point);
    }
    Ok(ExitCode::SUCCESS)
}

fn unmount(mount_point: &Path) -> Result<()> {
    let path = CString::new(mount_point.as_os_str().as_bytes())?;
    // SAFETY: `path` is a valid NUL-terminated string.
    if unsafe { libc::umount2(path.as_ptr(), 0) } == 0 {
        return Ok(());
    }
    let error = std::io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::EBUSY) => bail!(
            "{}: busy (files are open there); close them, or use --force, or send the daemon SIGTERM",
            mount_point.display()
        ),
        // Not root: the setuid helper may unmount a mount this user made.
        Some(libc::EPERM) => fusermount(mount_point),
        _ => Err(error).with_context(|| format!("unmounting {}", mount_point.display())),
    }
}

fn fusermount(mount_point: &Path) -> Result<()> {
    let mut last = String::from("neither fusermount3 nor fusermount found");
    for helper in ["fusermount3", "fusermount"] {
        match Command::new(helper).arg("-u").arg(mount_point).output() {
            Ok(output) if output.status.success() => return Ok(()),
            Ok(output) => last = format!("{helper}: {}", String::from_utf8_lossy(&output.stderr).trim()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(error) => last = format!("{helper}: {error}"),
        }
    }
    bail!("unmounting {}: permission denied, and {last}", mount_point.display())
}

/// The pid `plfs mount` recorded for this mount point, if that process
/// is still a plfs mount daemon.
fn daemon_pid(mount_point: &Path) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(pid_file(mount_point)).ok()?.trim().parse().ok()?;
    let command_line = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let is_daemon = command_line.split(|&byte| byte == 0).any(|arg| arg == b"mount");
    is_daemon.then_some(pid)
}

/// Waits for the daemon to exit: it closes every handle (flushing indexes)
/// after the kernel ends the session, and only then is the unmount done.
fn wait_for_exit(pid: i32, mount_point: &Path) {
    let started = Instant::now();
    while started.elapsed() < EXIT_TIMEOUT {
        if !alive(pid) {
            return;
        }
        std::thread::sleep(EXIT_POLL);
    }
    tracing::warn!(
        "{}: unmounted, but daemon {pid} is still running after {} s",
        mount_point.display(),
        EXIT_TIMEOUT.as_secs()
    );
}

/// Whether `pid` is still running: a zombie (exited, not yet reaped by a
/// parent that started it in the foreground) has finished its work.
fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    if unsafe { libc::kill(pid, 0) } != 0 {
        return false;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next());
    state != Some("Z")
}
