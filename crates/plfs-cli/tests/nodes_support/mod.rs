//! Simulated nodes for the multi-node tests (nodes.rs): scripts/plfs-nodes
//! makes K nodes on this machine, each its own network, UTS and mount
//! namespace (hostname plfsnodeK, its own address on a bridge the script
//! makes in a namespace of its own), and is Open MPI's launch agent into
//! them. [`Nodes`] brings them up, starts mpirun on node 0 with a hostfile
//! of the node addresses, starts one FUSE daemon per node, kills a node,
//! and always takes everything down again (Drop, also while a failed test
//! unwinds); a crashed run's leftovers go at the next start.
//!
//! A file using this module also declares `mod fuse_support;` and
//! `mod mpi_support;` (their process and launch helpers are reused here).

#![allow(dead_code)]

use std::fs::{self, File};
use std::os::unix::io::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::fuse_support::{describe, run, system_tool};
use crate::mpi_support;

pub const PLFS: &str = env!("CARGO_BIN_EXE_plfs");
/// Where scripts/plfs-nodes keeps the node list and anchor pids.
const RUN_DIR: &str = "/run/plfs-nodes";
/// Held (flock) while nodes are up: one set of nodes on the machine at a
/// time, whichever test binary or `plfs bench --nodes` made them.
const LOCK_FILE: &str = "/run/plfs-nodes.lock";
/// mpirun runs under `timeout`, so a hung collective ends the job.
pub const MPI_TIMEOUT_SECONDS: u64 = 90;
const MOUNT_TIMEOUT: Duration = Duration::from_secs(30);

/// scripts/plfs-nodes of this repository.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/plfs-nodes").canonicalize().unwrap()
}

/// Whether this machine can run the simulated nodes: root, iproute2,
/// util-linux and Open MPI. When it cannot, the test is skipped with the
/// reason printed, unless PLFS_REQUIRE_MPI=1 (`make test`), where it
/// fails.
pub fn available() -> bool {
    let mut missing = Vec::new();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        missing.push("root".to_owned());
    }
    for tool in ["ip", "unshare", "nsenter", "mpirun.openmpi", "mpicc.openmpi"] {
        if !installed(tool) {
            missing.push(tool.to_owned());
        }
    }
    if missing.is_empty() {
        return true;
    }
    assert!(
        !mpi_support::required(),
        "PLFS_REQUIRE_MPI=1 but the simulated nodes need {} (run as root; scripts/install-deps.sh installs iproute2, util-linux and Open MPI)",
        missing.join(", ")
    );
    eprintln!("skipping: the simulated nodes need {}", missing.join(", "));
    false
}

/// Whether `tool` is on PATH or in an sbin directory (which a non-login
/// root shell may lack), as [`system_tool`] finds it, without panicking.
fn installed(tool: &str) -> bool {
    mpi_support::on_path(tool) || ["/usr/sbin", "/sbin"].iter().any(|dir| Path::new(dir).join(tool).is_file())
}

/// K nodes, up until dropped, and a scratch directory every node sees.
pub struct Nodes {
    pub count: usize,
    /// Scratch directory (on the shared disk: every node sees it).
    pub dir: TempDir,
    addresses: Vec<String>,
    daemons: Vec<(usize, PathBuf, Child)>,
    _lock: File,
}

impl Nodes {
    /// Brings up `count` nodes with `slots` MPI slots each (after taking
    /// down a crashed run's leftovers).
    pub fn up(count: usize, slots: usize) -> Nodes {
        let lock = fs::OpenOptions::new().create(true).truncate(false).write(true).open(LOCK_FILE).unwrap();
        // SAFETY: flock on a descriptor this function owns.
        let locked = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(locked, 0, "flock {LOCK_FILE}: {}", std::io::Error::last_os_error());
        let output = run(
            Command::new(script()).args(["up", &count.to_string(), &slots.to_string()]),
            Duration::from_secs(60),
        );
        if !output.status.success() {
            // Whatever `up` made before failing goes.
            let _ = Command::new(script()).arg("down").status();
            panic!("plfs-nodes up {count}: {}", describe(&output));
        }
        let addresses: Vec<String> = fs::read_to_string(Path::new(RUN_DIR).join("addresses"))
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        assert_eq!(addresses.len(), count, "{addresses:?}");
        let dir = tempfile::Builder::new().prefix("plfs-nodes-test.").tempdir().unwrap();
        Nodes { count, dir, addresses, daemons: Vec::new(), _lock: lock }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn address(&self, node: usize) -> &str {
        &self.addresses[node]
    }

    /// `command args...` inside node `node`.
    pub fn exec(&self, node: usize, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new(script());
        command.args(["exec", &node.to_string()]).arg(program);
        command
    }

    /// mpirun.openmpi on node 0 (`plfs-nodes mpirun`: the nodes' hostfile,
    /// the launch agent, TCP on the nodes' subnet only), starting `ranks`
    /// copies of `program` that fill each node's slots in turn, with
    /// `environment` set in every rank. The caller adds the program's
    /// arguments.
    pub fn mpirun(&self, ranks: usize, environment: &[(&str, &str)], program: &Path) -> Command {
        let mut command = Command::new("timeout");
        command.args(["--kill-after=10", &MPI_TIMEOUT_SECONDS.to_string()]).arg(script()).arg("mpirun");
        mpi_support::launch(&mut command, "openmpi", None, environment, ranks as u64, program);
        command
    }

    /// Starts `plfs mount MOUNTPOINT --foreground` with `plfsrc` inside
    /// node `node` (its own mount namespace: every node mounts at the same
    /// path) and waits until the node lists the mount.
    pub fn mount(&mut self, node: usize, plfsrc: &Path, mountpoint: &Path) {
        let log_path = self.path(&format!("daemon{node}.log"));
        let log = fs::OpenOptions::new().create(true).append(true).open(&log_path).unwrap();
        let mut command = self.exec(node, PLFS);
        command
            .arg("--config")
            .arg(plfsrc)
            .arg("mount")
            .arg(mountpoint)
            .arg("--foreground")
            .env_remove("PLFSRC")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        // SAFETY: prctl is async-signal-safe; nothing else runs in pre_exec.
        // The daemon (nsenter execs it in place) ends with this process.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let mut daemon = command.spawn().unwrap();
        // The daemon's own view of the mounts: the host does not see them.
        let mountinfo = format!("/proc/{}/mountinfo", daemon.id());
        let wanted = format!(" {} ", mountpoint.display());
        let started = Instant::now();
        loop {
            if fs::read_to_string(&mountinfo)
                .is_ok_and(|text| text.lines().any(|line| line.contains(&wanted)))
            {
                break;
            }
            if let Some(status) = daemon.try_wait().unwrap() {
                panic!(
                    "plfs mount on node {node} exited ({status}) before mounting; its log:\n{}",
                    fs::read_to_string(&log_path).unwrap_or_default()
                );
            }
            assert!(
                started.elapsed() < MOUNT_TIMEOUT,
                "node {node} did not mount {} within {MOUNT_TIMEOUT:?}",
                mountpoint.display()
            );
            thread::sleep(Duration::from_millis(20));
        }
        self.daemons.push((node, mountpoint.to_owned(), daemon));
    }

    /// Unmounts every node's FUSE daemon with `plfs umount` and requires
    /// each to exit 0 (files closed, indexes written).
    pub fn unmount_all(&mut self) {
        for (node, mountpoint, mut daemon) in std::mem::take(&mut self.daemons) {
            let output = run(self.exec(node, PLFS).arg("umount").arg(&mountpoint), Duration::from_secs(30));
            assert!(output.status.success(), "plfs umount on node {node}: {}", describe(&output));
            let status = daemon.wait().unwrap();
            assert!(status.success(), "the FUSE daemon of node {node} exited {status}");
        }
    }

    /// SIGKILL to every process of node `node` (its ranks, its orted, its
    /// FUSE daemon): the node crashes. Its namespaces stay for recovery.
    pub fn kill_node(&mut self, node: usize) -> usize {
        let anchor = fs::read_to_string(Path::new(RUN_DIR).join(format!("anchor{node}"))).unwrap();
        let output = Command::new(system_tool("ip"))
            .args(["netns", "pids", &format!("plfsnode{node}")])
            .output()
            .unwrap();
        assert!(output.status.success(), "ip netns pids: {}", String::from_utf8_lossy(&output.stderr));
        let mut killed = 0;
        for pid in String::from_utf8_lossy(&output.stdout).split_whitespace() {
            if pid != anchor.trim() {
                // SAFETY: kill has no memory-safety preconditions.
                unsafe { libc::kill(pid.parse().unwrap(), libc::SIGKILL) };
                killed += 1;
            }
        }
        for (dead, _, daemon) in &mut self.daemons {
            if *dead == node {
                let _ = daemon.wait();
            }
        }
        self.daemons.retain(|(dead, _, _)| *dead != node);
        killed
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        // Daemons first, so they close their files; `down` then kills
        // whatever is left in the nodes and removes them.
        for (_, _, daemon) in &mut self.daemons {
            // SAFETY: as in kill_node.
            unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
        }
        for (_, _, daemon) in &mut self.daemons {
            let started = Instant::now();
            while daemon.try_wait().ok().flatten().is_none() && started.elapsed() < Duration::from_secs(10) {
                thread::sleep(Duration::from_millis(20));
            }
        }
        let down = Command::new(script()).arg("down").output();
        if !down.as_ref().is_ok_and(|output| output.status.success()) {
            eprintln!("plfs-nodes down failed: {down:?}");
        }
        for (_, _, daemon) in &mut self.daemons {
            let _ = daemon.kill();
            let _ = daemon.wait();
        }
    }
}

/// `source` (a C file) built with mpicc.openmpi into `dir`.
pub fn compile(source: &Path, dir: &Path) -> PathBuf {
    let program = dir.join(source.file_stem().unwrap());
    let output = Command::new("mpicc.openmpi")
        .args(["-O2", "-Wall", "-Wextra", "-Werror"])
        .arg(source)
        .arg("-o")
        .arg(&program)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "mpicc.openmpi {}: {}",
        source.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    program
}
