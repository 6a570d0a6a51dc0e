//! Shared harness for the FUSE integration tests: a real `plfs mount` that is
//! always unmounted, child processes with timeouts, the external tools (fio,
//! fsx, pjdfstest, rsync, tar, ...) run on any directory, and tree
//! comparison. Every workload takes a plain `&Path`, so the same code is
//! checked against an ordinary directory (to prove the harness right) and
//! then run on the mount.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;
use tempfile::TempDir;

pub const BIN: &str = env!("CARGO_BIN_EXE_plfs");

// ---------------------------------------------------------------------------
// Serialisation, root, tools
// ---------------------------------------------------------------------------

static SERIAL: Mutex<()> = Mutex::new(());

/// One FUSE test at a time: they each start a daemon and several I/O-heavy
/// tools, and on 2 cores running them together only makes timings (and the
/// timeouts) unpredictable. A panicking test poisons the lock; the next test
/// still runs.
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Mounting, `runuser` and the root-only pjdfstest cases need root; CI runs
/// `make test` as root.
pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(euid, 0, "the FUSE tests mount file systems and switch users: run `make test` as root");
}

const INSTALL_HINT: &str = "run `make test` (or scripts/install-deps.sh then scripts/install-test-tools.sh, and set \
     PLFS_TEST_TOOLS=<repo>/target/tools/bin)";

/// fsx and pjdfstest, built by scripts/install-test-tools.sh into the
/// directory named by PLFS_TEST_TOOLS (`make test` sets it). Missing is a
/// failure, not a skip: CI always runs `make test`.
pub fn test_tool(name: &str) -> PathBuf {
    let dir = std::env::var_os("PLFS_TEST_TOOLS")
        .unwrap_or_else(|| panic!("PLFS_TEST_TOOLS is not set, so `{name}` cannot be found: {INSTALL_HINT}"));
    let path = Path::new(&dir).join(name);
    assert!(path.is_file(), "{} does not exist: {INSTALL_HINT}", path.display());
    path
}

/// A Debian tool from scripts/install-deps.sh, found on PATH (plus the sbin
/// directories, which a non-login root shell may lack).
pub fn system_tool(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    dirs.extend(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from));
    dirs.iter()
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| panic!("`{name}` is not installed: {INSTALL_HINT}"))
}

// ---------------------------------------------------------------------------
// Child processes with timeouts
// ---------------------------------------------------------------------------

/// Runs a command to completion with stdin closed and both outputs captured,
/// killing its whole process group (pipelines included) after `timeout`.
pub fn run(command: &mut Command, timeout: Duration) -> Output {
    let description = format!("{command:?}");
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    // Its own process group, so a timeout kills `bash -c 'a | b'` and all.
    command.process_group(0);
    let mut child = command.spawn().unwrap_or_else(|e| panic!("cannot start {description}: {e}"));
    let stdout = drain(child.stdout.take().unwrap());
    let stderr = drain(child.stderr.take().unwrap());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > timeout {
            kill_group(child.id(), libc::SIGKILL);
            let _ = child.wait();
            let stdout = stdout.join().unwrap();
            let stderr = stderr.join().unwrap();
            panic!(
                "timed out after {timeout:?}: {description}\nstdout (tail):\n{}\nstderr (tail):\n{}",
                tail(&stdout, 60),
                tail(&stderr, 60)
            );
        }
        thread::sleep(Duration::from_millis(10));
    };
    Output { status, stdout: stdout.join().unwrap(), stderr: stderr.join().unwrap() }
}

/// `run`, requiring exit status 0.
pub fn run_ok(command: &mut Command, timeout: Duration) -> Output {
    let description = format!("{command:?}");
    let output = run(command, timeout);
    assert!(output.status.success(), "{description} failed: {}", describe(&output));
    output
}

/// A bash script under `set -euo pipefail` (so `tar c | tar x` fails when
/// either side does), run in `cwd`.
pub fn bash(script: &str, cwd: &Path, timeout: Duration) -> Output {
    let output = run(
        Command::new(system_tool("bash"))
            .arg("-c")
            .arg(format!("set -euo pipefail\n{script}"))
            .current_dir(cwd),
        timeout,
    );
    assert!(output.status.success(), "bash script failed:\n{script}\n{}", describe(&output));
    output
}

pub fn describe(output: &Output) -> String {
    format!(
        "{}\nstdout (tail):\n{}\nstderr (tail):\n{}",
        status_text(output.status),
        tail(&output.stdout, 60),
        tail(&output.stderr, 60)
    )
}

fn status_text(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => format!("{status:?}"),
    }
}

pub fn tail(bytes: &[u8], lines: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn drain(mut pipe: impl Read + Send + 'static) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        bytes
    })
}

fn kill_group(pid: u32, signal: i32) {
    // SAFETY: kill has no memory-safety preconditions; a stale group id at
    // worst hits nothing (ESRCH).
    unsafe {
        libc::kill(-(pid as i32), signal);
    }
}

fn signal(pid: u32, signal: i32) {
    // SAFETY: as above, for a single process.
    unsafe {
        libc::kill(pid as i32, signal);
    }
}

fn wait_timeout(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if started.elapsed() < timeout => thread::sleep(Duration::from_millis(20)),
            Ok(None) => return None,
            Err(_) => return None,
        }
    }
}

// ---------------------------------------------------------------------------
// Mounts
// ---------------------------------------------------------------------------

/// Whether `path` is a mount point, from /proc/self/mountinfo: never stats
/// the path, so a hung or dead daemon cannot hang the check.
pub fn is_mounted(path: &Path) -> bool {
    let Ok(text) = fs::read_to_string("/proc/self/mountinfo") else { return false };
    text.lines()
        .filter_map(|line| line.split(' ').nth(4))
        .any(|field| Path::new(&unescape_mountinfo(field)) == path)
}

/// mountinfo writes space, tab, newline and backslash as \ooo octal.
fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 4 <= bytes.len()
            && bytes[i + 1..i + 4].iter().all(|b| (b'0'..=b'7').contains(b))
        {
            let value = bytes[i + 1..i + 4].iter().fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
            out.push(value as u8);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A temporary plfs mount: three backend directories, a plfsrc naming them,
/// a scratch directory outside the mount, and (once `mount`ed) a foreground
/// `plfs mount` daemon. Dropping it always unmounts and reaps the daemon,
/// also while a failed test unwinds.
pub struct PlfsMount {
    dir: Option<TempDir>,
    pub root: PathBuf,
    pub config: PathBuf,
    pub mountpoint: PathBuf,
    pub backends: Vec<PathBuf>,
    pub scratch: PathBuf,
    pub log: PathBuf,
    options: Vec<String>,
    /// `plfs` flags before `mount` (e.g. `-vvv`).
    daemon_flags: Vec<String>,
    daemon: Option<Child>,
}

const MOUNT_TIMEOUT: Duration = Duration::from_secs(30);
const UNMOUNT_TIMEOUT: Duration = Duration::from_secs(20);

impl PlfsMount {
    /// Mounts with `-o` options (e.g. `["allow_other"]`).
    pub fn new(options: &[&str]) -> PlfsMount {
        PlfsMount::with_workload("shared_file", options)
    }

    /// Mounts a mount of the given plfsrc `workload` (shared_file,
    /// file_per_proc, small_file).
    pub fn with_workload(workload: &str, options: &[&str]) -> PlfsMount {
        PlfsMount::over(workload, options, None, &[])
    }

    /// A shared_file mount whose daemon logs at trace level (`plfs -vvv
    /// mount`) into `log`, e.g. every getxattr of a file capability.
    pub fn trace_logged(options: &[&str]) -> PlfsMount {
        PlfsMount::over("shared_file", options, None, &["-vvv"])
    }

    /// A second daemon, with its own mount point and plfsrc, over this
    /// mount's backends: what another node mounting the same backends
    /// sees.
    pub fn second_over_same_backends(&self, options: &[&str]) -> PlfsMount {
        PlfsMount::over("shared_file", options, Some(&self.backends), &[])
    }

    /// A shared_file mount over existing backend directories, in order
    /// (e.g. backends another plfs, or PLFS 2.5, wrote).
    pub fn over_backends(backends: &[PathBuf], options: &[&str]) -> PlfsMount {
        PlfsMount::over("shared_file", options, Some(backends), &[])
    }

    fn over(
        workload: &str,
        options: &[&str],
        shared_backends: Option<&[PathBuf]>,
        daemon_flags: &[&str],
    ) -> PlfsMount {
        require_root();
        let dir = tempfile::Builder::new().prefix("plfs-fuse-test.").tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        // Other users (runuser, pjdfstest's dummy users) must reach the mount.
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
        let backends: Vec<PathBuf> = match shared_backends {
            Some(backends) => backends.to_vec(),
            None => {
                let backends: Vec<PathBuf> = (0..3).map(|i| root.join(format!("backend{i}"))).collect();
                for backend in &backends {
                    fs::create_dir(backend).unwrap();
                }
                backends
            }
        };
        let scratch = root.join("scratch");
        fs::create_dir(&scratch).unwrap();
        let mountpoint = root.join("mnt");
        fs::create_dir(&mountpoint).unwrap();
        let config = root.join("plfsrc");
        let mut text =
            format!("- mount_point: {}\n  workload: {workload}\n  backends:\n", mountpoint.display());
        for backend in &backends {
            text.push_str(&format!("    - location: posix://{}\n", backend.display()));
        }
        fs::write(&config, text).unwrap();
        let mut mount = PlfsMount {
            log: root.join("daemon.log"),
            dir: Some(dir),
            root,
            config,
            mountpoint,
            backends,
            scratch,
            options: options.iter().map(|s| s.to_string()).collect(),
            daemon_flags: daemon_flags.iter().map(|s| s.to_string()).collect(),
            daemon: None,
        };
        mount.mount();
        mount
    }

    /// Starts the daemon and waits until the kernel lists the mount.
    pub fn mount(&mut self) {
        assert!(self.daemon.is_none(), "already mounted");
        let log = fs::OpenOptions::new().create(true).append(true).open(&self.log).unwrap();
        let mut command = Command::new(BIN);
        command
            .args(&self.daemon_flags)
            .arg("--config")
            .arg(&self.config)
            .arg("mount")
            .arg(&self.mountpoint)
            .arg("--foreground")
            .env_remove("PLFSRC")
            .env("TMPDIR", &self.scratch)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        if !self.options.is_empty() {
            command.arg("-o").arg(self.options.join(","));
        }
        // If this test process dies without unwinding (SIGKILL, abort), the
        // daemon gets SIGTERM and unmounts rather than outliving it. (The
        // signal fires when the spawning *thread* exits; a mount is made and
        // dropped on its test's own thread, so by then Drop has run.)
        // SAFETY: prctl is async-signal-safe; nothing else runs in pre_exec.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let child = command.spawn().unwrap_or_else(|e| panic!("cannot start {BIN} mount: {e}"));
        self.daemon = Some(child);
        let started = Instant::now();
        while !is_mounted(&self.mountpoint) {
            if let Some(status) = self.daemon.as_mut().unwrap().try_wait().unwrap() {
                self.daemon = None;
                panic!(
                    "`plfs mount {} --foreground` exited ({}) before the mount appeared; its log:\n{}",
                    self.mountpoint.display(),
                    status_text(status),
                    self.log_tail(80)
                );
            }
            if started.elapsed() > MOUNT_TIMEOUT {
                panic!(
                    "{} was not mounted within {MOUNT_TIMEOUT:?}; daemon log:\n{}",
                    self.mountpoint.display(),
                    self.log_tail(80)
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Unmounts with `plfs umount` and requires the daemon to exit 0: the
    /// clean-shutdown path (files closed, indexes flushed).
    pub fn unmount(&mut self) {
        let mut daemon = self.daemon.take().expect("not mounted");
        let output = run(
            Command::new(BIN).arg("--config").arg(&self.config).arg("umount").arg(&self.mountpoint),
            UNMOUNT_TIMEOUT,
        );
        let status = wait_timeout(&mut daemon, UNMOUNT_TIMEOUT);
        let still_mounted = is_mounted(&self.mountpoint);
        if status.is_none() {
            self.daemon = Some(daemon);
        }
        assert!(
            output.status.success() && status.is_some_and(|s| s.success()) && !still_mounted,
            "clean unmount failed: `plfs umount` {}; daemon {}; still mounted: {still_mounted}\ndaemon log:\n{}",
            describe(&output),
            status.map_or("did not exit".to_owned(), status_text),
            self.log_tail(60)
        );
    }

    /// Stops the daemon with a signal (SIGTERM or SIGINT) instead of
    /// umount, and requires it to unmount and exit 0.
    pub fn stop_with_signal(&mut self, sig: i32) {
        let mut daemon = self.daemon.take().expect("not mounted");
        signal(daemon.id(), sig);
        let status = wait_timeout(&mut daemon, UNMOUNT_TIMEOUT);
        let still_mounted = is_mounted(&self.mountpoint);
        if status.is_none() {
            self.daemon = Some(daemon);
        }
        assert!(
            status.is_some_and(|s| s.success()) && !still_mounted,
            "after signal {sig} the daemon {}; still mounted: {still_mounted}\ndaemon log:\n{}",
            status.map_or("did not exit".to_owned(), status_text),
            self.log_tail(60)
        );
    }

    /// Kills the daemon with SIGKILL, as a crash would, and detaches the
    /// dead mount so the mount point can be mounted again.
    pub fn crash(&mut self) {
        let mut daemon = self.daemon.take().expect("not mounted");
        signal(daemon.id(), libc::SIGKILL);
        let status = wait_timeout(&mut daemon, UNMOUNT_TIMEOUT);
        assert!(status.is_some(), "the daemon survived SIGKILL");
        let detached = Command::new("umount").arg("-l").arg(&self.mountpoint).status();
        assert!(
            detached.is_ok_and(|s| s.success()) || !is_mounted(&self.mountpoint),
            "could not detach the dead mount at {}",
            self.mountpoint.display()
        );
    }

    /// A path inside the mount.
    pub fn path(&self, inside: &str) -> PathBuf {
        self.mountpoint.join(inside)
    }

    /// A path outside the mount, on the host file system.
    pub fn scratch(&self, name: &str) -> PathBuf {
        self.scratch.join(name)
    }

    /// Runs the plfs CLI with this mount's plfsrc.
    pub fn plfs(&self, args: &[&str]) -> Output {
        run(
            Command::new(BIN).arg("--config").arg(&self.config).args(args).env_remove("PLFSRC"),
            Duration::from_secs(120),
        )
    }

    /// `plfs map --totals --json` of a file in the mount (read through the
    /// library, as another node would).
    pub fn map_totals(&self, inside: &str) -> Value {
        let path = self.path(inside);
        let output = self.plfs(&["map", path.to_str().unwrap(), "--totals", "--json"]);
        assert!(output.status.success(), "plfs map {}: {}", path.display(), describe(&output));
        serde_json::from_slice(&output.stdout).unwrap()
    }

    pub fn log_tail(&self, lines: usize) -> String {
        tail(&fs::read(&self.log).unwrap_or_default(), lines)
    }

    /// Best effort, in order: `plfs umount`, `plfs umount --force`,
    /// `umount -l`, `fusermount3 -uz`,
    /// then the daemon gets SIGTERM and finally SIGKILL. Never panics.
    fn teardown(&mut self) {
        let mounted = || is_mounted(&self.mountpoint);
        let quiet = |command: &mut Command| {
            let _ = try_run(command, UNMOUNT_TIMEOUT);
        };
        if mounted() {
            quiet(Command::new(BIN).arg("--config").arg(&self.config).arg("umount").arg(&self.mountpoint));
        }
        if mounted() {
            // Files still open (a failed test's handles): detach anyway.
            quiet(
                Command::new(BIN)
                    .arg("--config")
                    .arg(&self.config)
                    .args(["umount", "--force"])
                    .arg(&self.mountpoint),
            );
        }
        if mounted() {
            quiet(Command::new("umount").arg("-l").arg(&self.mountpoint));
        }
        if mounted() {
            quiet(Command::new("fusermount3").arg("-u").arg("-z").arg(&self.mountpoint));
        }
        if let Some(mut daemon) = self.daemon.take()
            && wait_timeout(&mut daemon, Duration::from_secs(10)).is_none()
        {
            signal(daemon.id(), libc::SIGTERM);
            if wait_timeout(&mut daemon, Duration::from_secs(10)).is_none() {
                signal(daemon.id(), libc::SIGKILL);
                let _ = daemon.wait();
            }
        }
        if mounted() {
            // After SIGKILL the kernel mount is dead (ENOTCONN); detach it.
            quiet(Command::new("umount").arg("-l").arg(&self.mountpoint));
        }
    }
}

/// `run` without panicking (for Drop).
fn try_run(command: &mut Command, timeout: Duration) -> Option<Output> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(command, timeout))).ok()
}

impl Drop for PlfsMount {
    fn drop(&mut self) {
        let failing = thread::panicking();
        if failing && self.daemon.is_some() {
            eprintln!(
                "--- plfs daemon log ({}), last 60 lines ---\n{}",
                self.log.display(),
                self.log_tail(60)
            );
        }
        self.teardown();
        if is_mounted(&self.mountpoint) {
            // Removing the temporary directory would recurse into a live
            // mount; leave it for a human.
            eprintln!(
                "warning: {} is still mounted; leaving {}",
                self.mountpoint.display(),
                self.root.display()
            );
            if let Some(dir) = self.dir.take() {
                let _ = dir.keep();
            }
        } else if failing
            && std::env::var_os("PLFS_TEST_KEEP").is_some()
            && let Some(dir) = self.dir.take()
        {
            eprintln!("PLFS_TEST_KEEP: leaving {}", dir.keep().display());
        }
    }
}

/// A plain temporary directory (no mount), for checking a workload itself.
pub fn plain_dir(prefix: &str) -> TempDir {
    let dir = tempfile::Builder::new().prefix(prefix).tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

// ---------------------------------------------------------------------------
// Data
// ---------------------------------------------------------------------------

/// Deterministic pseudo-random bytes (xorshift64*).
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        out.extend_from_slice(&state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

pub fn write_file(path: &Path, contents: &[u8], mode: u32, mtime_secs: Option<u64>) {
    fs::write(path, contents).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    if let Some(secs) = mtime_secs {
        let file = fs::File::options().write(true).open(path).unwrap();
        file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(secs)).unwrap();
    }
}

/// The tree the copy tests carry in and out of the mount: nested
/// directories, empty / odd-sized / multi-MiB files, several modes,
/// relative, absolute, dangling and directory symlinks, awkward names, a
/// directory of many entries, and fixed old mtimes.
pub fn make_tree(root: &Path) {
    fs::create_dir_all(root).unwrap();
    let d = |p: &str, mode: u32| {
        let path = root.join(p);
        fs::create_dir_all(&path).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
    };
    d("a", 0o755);
    d("a/b", 0o700);
    d("a/b/c", 0o750);
    d("links", 0o755);
    d("many", 0o755);
    d("empty-dir", 0o711);
    let f = |p: &str, contents: &[u8], mode: u32, mtime: Option<u64>| {
        write_file(&root.join(p), contents, mode, mtime)
    };
    f("empty", b"", 0o644, Some(1_000_000_000));
    f("small.txt", b"hello, plfs\n", 0o644, Some(1_000_000_001));
    f("odd.bin", &random_bytes(4095, 1), 0o600, Some(1_234_567_890));
    f("page.bin", &random_bytes(4096, 2), 0o640, None);
    f("big.bin", &random_bytes(3 * 1024 * 1024 + 7, 3), 0o644, Some(1_500_000_000));
    f("exec.sh", b"#!/bin/sh\necho plfs\n", 0o755, Some(1_600_000_000));
    f("readonly.txt", b"do not write\n", 0o444, Some(1_600_000_001));
    f("a/b/c/deep.bin", &random_bytes(1024 * 1024 + 1, 4), 0o644, Some(1_700_000_000));
    f("a/b/secret", b"0600\n", 0o600, None);
    f("name with spaces.txt", b"spaces\n", 0o644, None);
    f("ünïcødé-ファイル.txt", "ünïcødé\n".as_bytes(), 0o644, None);
    f(&"l".repeat(200), b"long name\n", 0o644, None);
    for i in 0..60 {
        f(&format!("many/file{i:03}"), format!("{i}\n").as_bytes(), 0o644, Some(1_100_000_000 + i));
    }
    symlink("../small.txt", root.join("links/relative")).unwrap();
    symlink("/nonexistent/absolute/target", root.join("links/absolute-dangling")).unwrap();
    symlink("does-not-exist", root.join("links/dangling")).unwrap();
    symlink("../a", root.join("links/dir")).unwrap();
    symlink("b/c/deep.bin", root.join("a/to-deep")).unwrap();
}

/// What must survive a round trip. `mtimes`: regular files' mtimes (whole
/// seconds) too, for tools that preserve them (cp -a, tar, rsync -a).
pub fn compare_trees(expected: &Path, actual: &Path, mtimes: bool) {
    let mut problems = String::new();
    compare_dir(expected, actual, Path::new(""), mtimes, &mut problems);
    assert!(problems.is_empty(), "{} differs from {}:\n{problems}", actual.display(), expected.display());
    // And the tool's own opinion: recursive, symlinks compared as links.
    let output = run(
        Command::new(system_tool("diff")).arg("-r").arg("--no-dereference").arg(expected).arg(actual),
        Duration::from_secs(120),
    );
    assert!(
        output.status.success(),
        "diff -r {} {}: {}",
        expected.display(),
        actual.display(),
        describe(&output)
    );
}

fn listing(dir: &Path) -> BTreeMap<std::ffi::OsString, fs::Metadata> {
    fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read_dir {}: {e}", dir.display()))
        .map(|entry| {
            let entry = entry.unwrap();
            (entry.file_name(), fs::symlink_metadata(entry.path()).unwrap())
        })
        .collect()
}

fn compare_dir(expected: &Path, actual: &Path, rel: &Path, mtimes: bool, problems: &mut String) {
    let want = listing(&expected.join(rel));
    let got = listing(&actual.join(rel));
    for name in want.keys().filter(|name| !got.contains_key(*name)) {
        let _ = writeln!(problems, "missing: {}", rel.join(name).display());
    }
    for name in got.keys().filter(|name| !want.contains_key(*name)) {
        let _ = writeln!(problems, "unexpected: {}", rel.join(name).display());
    }
    for (name, w) in &want {
        let Some(g) = got.get(name) else { continue };
        let path = rel.join(name);
        let (wt, gt) = (w.file_type(), g.file_type());
        if (wt.is_dir(), wt.is_file(), wt.is_symlink()) != (gt.is_dir(), gt.is_file(), gt.is_symlink()) {
            let _ = writeln!(problems, "{}: type {wt:?} became {gt:?}", path.display());
            continue;
        }
        if wt.is_symlink() {
            let (wl, gl) =
                (fs::read_link(expected.join(&path)).unwrap(), fs::read_link(actual.join(&path)).unwrap());
            if wl != gl {
                let _ = writeln!(
                    problems,
                    "{}: symlink -> {} became -> {}",
                    path.display(),
                    wl.display(),
                    gl.display()
                );
            }
            continue;
        }
        if w.mode() & 0o7777 != g.mode() & 0o7777 {
            let _ = writeln!(
                problems,
                "{}: mode {:o} became {:o}",
                path.display(),
                w.mode() & 0o7777,
                g.mode() & 0o7777
            );
        }
        if (w.uid(), w.gid()) != (g.uid(), g.gid()) {
            let _ = writeln!(
                problems,
                "{}: owner {}:{} became {}:{}",
                path.display(),
                w.uid(),
                w.gid(),
                g.uid(),
                g.gid()
            );
        }
        if wt.is_dir() {
            compare_dir(expected, actual, &path, mtimes, problems);
            continue;
        }
        if w.len() != g.len() {
            let _ = writeln!(problems, "{}: size {} became {}", path.display(), w.len(), g.len());
        } else if !same_contents(&expected.join(&path), &actual.join(&path)) {
            let _ = writeln!(problems, "{}: contents differ", path.display());
        }
        if mtimes && w.mtime() != g.mtime() {
            let _ = writeln!(problems, "{}: mtime {} became {}", path.display(), w.mtime(), g.mtime());
        }
    }
}

fn same_contents(a: &Path, b: &Path) -> bool {
    let (mut fa, mut fb) = (fs::File::open(a).unwrap(), fs::File::open(b).unwrap());
    let (mut ba, mut bb) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    loop {
        let na = read_full(&mut fa, &mut ba);
        let nb = read_full(&mut fb, &mut bb);
        if na != nb || ba[..na] != bb[..nb] {
            return false;
        }
        if na == 0 {
            return true;
        }
    }
}

fn read_full(file: &mut fs::File, buf: &mut [u8]) -> usize {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]).unwrap() {
            0 => break,
            n => filled += n,
        }
    }
    filled
}

/// `cmp` two files (the tool the issue names), with its message on failure.
pub fn cmp(a: &Path, b: &Path, timeout: Duration) {
    let output = run(Command::new(system_tool("cmp")).arg(a).arg(b), timeout);
    assert!(output.status.success(), "cmp {} {}: {}", a.display(), b.display(), describe(&output));
}

pub fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

// ---------------------------------------------------------------------------
// fio: N-1 strided with verified read-back
// ---------------------------------------------------------------------------

/// The N-1 strided workload: `jobs` processes share ONE file; job j writes
/// records j, j+jobs, j+2*jobs, ... of `RECORD` bytes (`offset_increment`
/// puts job j at record j, `rw=write:<hole>` skips the other jobs' records).
/// Each record carries a crc32c verify header.
pub const FIO_RECORD: u64 = 47001;

pub struct FioJob {
    pub jobs: u64,
    pub records_per_job: u64,
}

impl FioJob {
    pub fn file_size(&self) -> u64 {
        self.jobs * self.records_per_job * FIO_RECORD
    }

    /// The job file. `size` is each job's region from its own start offset;
    /// it must end exactly at EOF for the last job, or a later read-only
    /// verify pass "lays out" (truncates and refills) the shared file.
    pub fn job_file(&self, file_name: &str) -> String {
        let stride_hole = (self.jobs - 1) * FIO_RECORD;
        let region = self.file_size() - (self.jobs - 1) * FIO_RECORD;
        format!(
            "; N-1 strided: {jobs} writers x {n} records of {rec} bytes into one file\n\
             [global]\n\
             filename={file_name}\n\
             ioengine=psync\n\
             bs={rec}\n\
             rw=write:{stride_hole}\n\
             offset=0\n\
             offset_increment={rec}\n\
             size={region}\n\
             number_ios={n}\n\
             numjobs={jobs}\n\
             ; FUSE need not implement fallocate; plfs files grow by writing\n\
             fallocate=none\n\
             verify=crc32c\n\
             verify_fatal=1\n\
             end_fsync=1\n\
             [n1-strided]\n",
            jobs = self.jobs,
            n = self.records_per_job,
            rec = FIO_RECORD,
        )
    }

    /// Runs fio in `dir` (its state files go to `work`, outside the file
    /// system under test); `extra`: e.g. `--verify_only`. Returns fio's exit
    /// output and its JSON report (text, warnings included).
    pub fn run_raw(&self, dir: &Path, work: &Path, extra: &[&str], timeout: Duration) -> (Output, String) {
        let job = work.join("n1-strided.fio");
        fs::write(&job, self.job_file("n1-strided.dat")).unwrap();
        let report = work.join("fio-report.json");
        let _ = fs::remove_file(&report);
        let output = run(
            Command::new(system_tool("fio"))
                .arg(format!("--directory={}", dir.display()))
                .arg("--output-format=json")
                .arg(format!("--output={}", report.display()))
                .args(extra)
                .arg(&job)
                .current_dir(work),
            timeout,
        );
        (output, fs::read_to_string(&report).unwrap_or_default())
    }

    /// `run_raw`, requiring success: exit 0 and every job's error 0.
    /// Returns the parsed JSON report.
    pub fn run(&self, dir: &Path, work: &Path, extra: &[&str], timeout: Duration) -> Value {
        let (output, text) = self.run_raw(dir, work, extra, timeout);
        assert!(
            output.status.success(),
            "fio {extra:?} on {} failed: {}\nreport (tail):\n{}",
            dir.display(),
            describe(&output),
            tail(text.as_bytes(), 40)
        );
        // fio prints warnings (e.g. "multiple writers may overwrite blocks")
        // into the report ahead of the JSON.
        let start = if text.starts_with('{') { Some(0) } else { text.find("\n{").map(|i| i + 1) };
        let json: Value = serde_json::from_str(&text[start.expect("no JSON in the fio report")..]).unwrap();
        let jobs = json["jobs"].as_array().unwrap();
        assert_eq!(jobs.len() as u64, self.jobs, "fio ran {} jobs", jobs.len());
        for job in jobs {
            assert_eq!(job["error"], 0, "fio job failed: {job}");
        }
        json
    }
}

/// Per-job (write bytes, read bytes) and the summed bandwidths in MiB/s.
pub fn fio_summary(json: &Value) -> (Vec<(u64, u64)>, f64, f64) {
    let jobs = json["jobs"].as_array().unwrap();
    let bytes = jobs
        .iter()
        .map(|j| (j["write"]["io_bytes"].as_u64().unwrap(), j["read"]["io_bytes"].as_u64().unwrap()));
    let bw = |dir: &str| jobs.iter().map(|j| j[dir]["bw"].as_f64().unwrap_or(0.0)).sum::<f64>() / 1024.0;
    (bytes.collect(), bw("write"), bw("read"))
}

// ---------------------------------------------------------------------------
// fsx
// ---------------------------------------------------------------------------

/// fsx's defaults plus everything a plfs mount should do besides fallocate
/// and hole punching: close/reopen (close-to-open), msync invalidate, fsync,
/// fdatasync, sendfile, fadvise and copy_file_range, on a file up to 1 MiB.
pub const FSX_RICH_CONFIG: &str = "\
flen = 1048576
[opsize]
max = 131072
[weights]
close_open = 1
read = 10
write = 10
mapread = 5
mapwrite = 5
invalidate = 1
truncate = 2
fsync = 1
fdatasync = 1
sendfile = 2
posix_fadvise = 1
copy_file_range = 2
";

/// Runs `fsx -N ops -S seed` on `dir/name`, artifacts (the operation log
/// and the expected file on failure) in `artifacts`. Panics unless fsx
/// exits 0 and reports "All operations completed A-OK!".
pub fn run_fsx(
    dir: &Path,
    name: &str,
    artifacts: &Path,
    ops: u64,
    seed: u64,
    config: Option<&str>,
    timeout: Duration,
) -> Duration {
    let mut command = Command::new(test_tool("fsx"));
    command.arg("-N").arg(ops.to_string()).arg("-S").arg(seed.to_string()).arg("-P").arg(artifacts);
    if let Some(text) = config {
        let path = artifacts.join(format!("fsx-{seed}.toml"));
        fs::write(&path, text).unwrap();
        command.arg("-f").arg(path);
    }
    command.arg(dir.join(name)).current_dir(artifacts);
    let started = Instant::now();
    let output = run(&mut command, timeout);
    let elapsed = started.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("All operations completed A-OK!"),
        "fsx -N {ops} -S {seed} on {} failed: {}\nartifacts in {}",
        dir.display(),
        describe(&output),
        artifacts.display()
    );
    elapsed
}

// ---------------------------------------------------------------------------
// pjdfstest
// ---------------------------------------------------------------------------

/// Linux has utimensat and UTIME_NOW, so those cases run; features a file
/// system may lack (posix_fallocate, rename_ctime, ...) stay off. The two
/// dummy users exist on every Debian system.
pub const PJDFSTEST_CONFIG: &str = "\
[features]
utimensat = {}
utime_now = {}

[settings]
naptime = 0.02

[dummy_auth]
entries = [[\"nobody\", \"nogroup\"], [\"daemon\", \"daemon\"]]
";

#[derive(Debug, Default)]
pub struct PjdResults {
    pub passed: Vec<String>,
    pub skipped: Vec<(String, String)>,
    /// (case, the failure message pjdfstest printed)
    pub failed: Vec<(String, String)>,
    pub summary: String,
    pub elapsed: Duration,
}

/// Runs the whole pjdfstest suite in `dir` (`secondary`: a directory on
/// another file system, for the EXDEV cases) and parses every case's result.
pub fn run_pjdfstest(dir: &Path, secondary: Option<&Path>, work: &Path, timeout: Duration) -> PjdResults {
    let config = work.join("pjdfstest.toml");
    fs::write(&config, PJDFSTEST_CONFIG).unwrap();
    let mut command = Command::new(test_tool("pjdfstest"));
    command.arg("-c").arg(&config).arg("-p").arg(dir);
    if let Some(secondary) = secondary {
        command.arg("-s").arg(secondary);
    }
    command.current_dir(work).env("NO_COLOR", "1").env("RUST_BACKTRACE", "0");
    let started = Instant::now();
    let output = run(&mut command, timeout);
    let elapsed = started.elapsed();
    fs::write(work.join("pjdfstest.out"), &output.stdout).unwrap();
    let mut results = parse_pjdfstest(&String::from_utf8_lossy(&output.stdout));
    results.elapsed = elapsed;
    assert!(!results.summary.is_empty(), "pjdfstest printed no summary: {}", describe(&output));
    // Exit status 0 exactly when nothing failed; cross-check the parse.
    assert_eq!(output.status.success(), results.failed.is_empty(), "pjdfstest: {}", describe(&output));
    let expected_summary = format!(
        "Summary: {} failed, {} skipped, {} passed",
        results.failed.len(),
        results.skipped.len(),
        results.passed.len()
    );
    assert!(
        results.summary.starts_with(&expected_summary),
        "parsed {expected_summary:?} but pjdfstest says {:?}",
        results.summary
    );
    results
}

fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Lines are `<case> <padding> ok|skipped|FAILED|...`, followed by
/// tab-indented reasons; the last line is the Summary.
pub fn parse_pjdfstest(stdout: &str) -> PjdResults {
    enum Last {
        None,
        Skip,
        Fail,
    }
    let mut results = PjdResults::default();
    let mut last = Last::None;
    for raw in stdout.lines() {
        let line = strip_ansi(raw);
        if let Some(detail) = line.strip_prefix('\t') {
            let target = match last {
                Last::Skip => results.skipped.last_mut().map(|(_, r)| r),
                Last::Fail => results.failed.last_mut().map(|(_, r)| r),
                Last::None => None,
            };
            if let Some(reason) = target {
                if !reason.is_empty() {
                    reason.push_str("; ");
                }
                reason.push_str(detail.trim());
            }
            continue;
        }
        let trimmed = line.trim_end();
        if trimmed.starts_with("Summary:") {
            results.summary = trimmed.to_owned();
            last = Last::None;
            continue;
        }
        let Some(name) = trimmed.split_whitespace().next() else { continue };
        if !name.contains("::") {
            last = Last::None;
            continue;
        }
        let name = name.to_owned();
        if trimmed.ends_with(" ok") {
            results.passed.push(name);
            last = Last::None;
        } else if trimmed.ends_with(" skipped") {
            results.skipped.push((name, String::new()));
            last = Last::Skip;
        } else if trimmed.ends_with(" FAILED") || trimmed.ends_with(" PASSED UNEXPECTEDLY") {
            results.failed.push((name, String::new()));
            last = Last::Fail;
        } else if trimmed.ends_with(" failed as expected") {
            // The config lists no expected failures; docs/POSIX.md does that job.
            results.failed.push((name, "marked expected in the config".into()));
            last = Last::Fail;
        } else {
            last = Last::None;
        }
    }
    results
}

/// The pjdfstest cases docs/POSIX.md excuses: the first column of every
/// table row in a `##` section whose heading mentions pjdfstest (with its
/// subsections), a case name or
/// pattern (see `pattern_matches`) in backticks, with a non-empty reason.
pub fn posix_exceptions() -> Vec<(String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/POSIX.md");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut in_section = false;
    let mut out = Vec::new();
    for line in text.lines() {
        // A level-1 or level-2 heading opens or closes the section; its
        // subsections (### ...) stay inside.
        if line.starts_with("# ") || line.starts_with("## ") {
            in_section = line.to_lowercase().contains("pjdfstest");
            continue;
        }
        if !in_section || !line.starts_with('|') {
            continue;
        }
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').map(str::trim).collect();
        let Some(first) = cells.first() else { continue };
        if !(first.starts_with('`') && first.ends_with('`') && first.len() > 2) {
            continue; // header and separator rows
        }
        let reason = cells.last().copied().unwrap_or_default();
        assert!(cells.len() >= 2 && !reason.is_empty(), "{}: row without a reason: {line}", path.display());
        out.push((first.trim_matches('`').to_owned(), reason.to_owned()));
    }
    out
}

/// A docs/POSIX.md pattern: a case name in which `*` matches any run of
/// characters (`*::fifo`, `link::*`), anything else literally.
pub fn pattern_matches(pattern: &str, case: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = case.strip_prefix(first) else { return false };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else { return rest.is_empty() };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

pub fn excused<'a>(case: &str, exceptions: &'a [(String, String)]) -> Option<&'a str> {
    exceptions.iter().find(|(pattern, _)| pattern_matches(pattern, case)).map(|(_, reason)| reason.as_str())
}

/// A directory on a different file system from `dir`, for EXDEV cases.
pub fn other_fs_dir(dir: &Path, candidates: &[&Path]) -> Option<PathBuf> {
    let dev = fs::metadata(dir).ok()?.dev();
    candidates
        .iter()
        .find(|c| fs::metadata(c).is_ok_and(|m| m.is_dir() && m.dev() != dev))
        .map(|c| c.to_path_buf())
}
