//! Builds tests/c/collective_read.c with each MPI's own mpicc against
//! libplfs and include/, and runs it under that MPI's mpirun: one libplfs
//! serves both. Fails (instead of skipping) when PLFS_REQUIRE_MPI=1 and an
//! MPI is missing. The program runs on a shared_file, a file_per_proc and
//! a small_file mount.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const RANKS: usize = 4;
const RECORDS: usize = 25;
const RECORD_BYTES: usize = 4099;
/// A hung collective fails the test instead of hanging `make test`.
const TIMEOUT: Duration = Duration::from_secs(180);

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// The directory cargo put libplfs.so in: next to this test's deps.
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    for dir in [deps, deps.parent().unwrap()] {
        if dir.join("libplfs.so").exists() {
            return dir.to_path_buf();
        }
    }
    panic!(
        "libplfs.so is not next to {}: run `cargo build --release -p plfs-capi` first (`make test` does)",
        exe.display()
    );
}

fn available(program: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {program}"))
        .output()
        .is_ok_and(|out| out.status.success())
}

fn required() -> bool {
    std::env::var("PLFS_REQUIRE_MPI").is_ok_and(|value| value == "1")
}

fn run_with_timeout(command: &mut Command) -> std::process::Output {
    // timeout(1) ends the whole mpirun if a collective hangs.
    let mut wrapped = Command::new("timeout");
    wrapped.arg("--kill-after=10").arg(TIMEOUT.as_secs().to_string()).arg(command.get_program());
    wrapped.args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => wrapped.env(key, value),
            None => wrapped.env_remove(key),
        };
    }
    wrapped.output().unwrap()
}

fn collective_read(flavor: &str) {
    let (mpicc, mpirun) = (format!("mpicc.{flavor}"), format!("mpirun.{flavor}"));
    if !available(&mpicc) || !available(&mpirun) {
        assert!(
            !required(),
            "PLFS_REQUIRE_MPI=1 but {mpicc} or {mpirun} is missing (scripts/install-deps.sh)"
        );
        eprintln!("skipping {flavor}: {mpicc} or {mpirun} is missing");
        return;
    }
    let root = workspace();
    let libdir = library_dir();
    let dir = tempfile::Builder::new().prefix("plfs-capi-test.").tempdir().unwrap();
    let program = dir.path().join(format!("collective_read_{flavor}"));
    let compiled = Command::new(&mpicc)
        .args(["-O2", "-Wall", "-Wextra", "-Werror"])
        .arg("-I")
        .arg(root.join("include"))
        .arg(root.join("crates/plfs-capi/tests/c/collective_read.c"))
        .arg(format!("-L{}", libdir.display()))
        .arg("-lplfs")
        .arg(format!("-Wl,-rpath,{}", libdir.display()))
        .arg("-o")
        .arg(&program)
        .output()
        .unwrap();
    assert!(compiled.status.success(), "{mpicc}: {}", String::from_utf8_lossy(&compiled.stderr));

    // One mount per workload, two backends each: the same program must
    // write and read back every byte on each (n-n and 1-n files have no
    // index, so there every strategy is an ordinary open).
    let workloads = ["shared_file", "file_per_proc", "small_file"];
    let mut config = String::new();
    for workload in workloads {
        config.push_str(&format!(
            "- mount_point: {}\n  workload: {workload}\n  backends:\n",
            dir.path().join(workload).display()
        ));
        for backend in 0..2 {
            let path = dir.path().join(format!("{workload}.b{backend}"));
            std::fs::create_dir(&path).unwrap();
            config.push_str(&format!("    - location: posix://{}\n", path.display()));
        }
    }
    let plfsrc = dir.path().join("plfsrc");
    std::fs::write(&plfsrc, config).unwrap();

    for workload in workloads {
        let mut command = Command::new(&mpirun);
        if flavor == "openmpi" {
            command.args(["--allow-run-as-root", "--oversubscribe"]);
        }
        command
            .args(["-np", &RANKS.to_string()])
            .arg(&program)
            .arg(dir.path().join(workload).join("checkpoint"))
            .args([RECORDS.to_string(), RECORD_BYTES.to_string()])
            .env("PLFSRC", &plfsrc)
            .env("PLFS_OPEN_STRATEGY", "broadcast");
        let output = run_with_timeout(&mut command);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "{mpirun} on {workload}: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
            output.status
        );
        // Five opens (four strategies and the default) on every rank.
        let bytes = 5 * RANKS * RANKS * RECORDS * RECORD_BYTES;
        let expected = format!("collective_read: OK: {RANKS} ranks, {bytes} bytes verified, 0 failures");
        assert!(
            stdout.contains(&expected),
            "{mpirun} on {workload}: expected {expected:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
    }
}

#[test]
fn collective_read_under_open_mpi() {
    collective_read("openmpi");
}

#[test]
fn collective_read_under_mpich() {
    collective_read("mpich");
}
