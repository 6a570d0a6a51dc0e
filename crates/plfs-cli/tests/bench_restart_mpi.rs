//! `plfs bench restart --strategy S`: the bench starts plfs's writers and
//! readers as the ranks of one real `mpirun.openmpi` per phase (this
//! binary, MPI through the plfs-mpi shim), the readers opening with S.
//! Every byte of every decomposition must verify; with flatten the
//! writers' close must have left a global index, with the others none. No
//! timing is asserted. Fails (instead of skipping) when PLFS_REQUIRE_MPI=1
//! and Open MPI is missing.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

mod mpi_support;

const PLFS: &str = env!("CARGO_BIN_EXE_plfs");
/// A hung collective ends the run instead of hanging `make test`.
const TIMEOUT_SECONDS: u32 = 300;

/// `plfs bench restart ARGS --strategy STRATEGY --keep --json`; the report
/// and every file the run left. None when Open MPI is missing.
fn restart(strategy: &str, args: &[&str]) -> Option<(Value, Vec<PathBuf>)> {
    if !mpi_support::on_path("mpirun.openmpi") {
        assert!(
            !mpi_support::required(),
            "PLFS_REQUIRE_MPI=1 but mpirun.openmpi is missing (scripts/install-deps.sh)"
        );
        eprintln!("skipping: mpirun.openmpi is missing");
        return None;
    }
    let dir = tempfile::Builder::new().prefix("plfs-bench-restart-mpi.").tempdir().unwrap();
    let output = Command::new("timeout")
        .args(["--kill-after=10", &TIMEOUT_SECONDS.to_string(), PLFS, "bench", "restart"])
        .args(["--strategy", strategy, "--backends", "2", "--keep", "--json", "--dir"])
        .arg(dir.path())
        .args(args)
        .env_remove("PLFS_MPI_SHIM")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{strategy}: {}\nstdout:\n{stdout}\nstderr:\n{stderr}", output.status);
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: not one JSON report:\n{stdout}\n{stderr}"));
    let mut files = Vec::new();
    walk(dir.path(), &mut files);
    Some((report, files))
}

fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, found);
        } else {
            found.push(path);
        }
    }
}

/// Each strategy: a strided restart read back uniform, half and 4 → 5,
/// every byte checked, the plfs read phases run as ranks with that
/// strategy.
#[test]
fn restart_under_open_mpi_with_every_collective_strategy_verifies() {
    for strategy in ["naive", "broadcast", "parallel", "flatten"] {
        let args =
            ["--writers", "4", "--total-mib", "1", "--size", "10007", "--decomp", "uniform,half,non-integer"];
        let Some((report, files)) = restart(strategy, &args) else { return };
        assert_eq!(report["verified"], true, "{strategy}: {report:#}");
        assert_eq!(report["strategy"], strategy, "{report:#}");
        let phases = report["phases"][0].as_array().unwrap();
        let file_bytes = report["file_bytes"].as_u64().unwrap();
        let mut plfs_reads = Vec::new();
        for phase in phases {
            assert_eq!(phase["bytes"].as_u64(), Some(file_bytes), "{strategy}: {phase}");
            assert_eq!(phase["bad_bytes"], 0, "{strategy}: {phase}");
            if phase["target"] == "plfs" && phase["op"] == "read" {
                plfs_reads.push((
                    phase["decomp"].as_str().unwrap().to_owned(),
                    phase["processes"].as_u64().unwrap(),
                ));
            }
        }
        let expected = [("uniform", 4), ("half", 2), ("non-integer", 5)].map(|(d, m)| (d.to_owned(), m));
        assert_eq!(plfs_reads, expected, "{strategy}");
        // Flatten on close wrote the global index readers then use; no
        // other strategy writes one.
        let global = files.iter().filter(|path| path.file_name().unwrap() == "global.index").count();
        assert_eq!(global, usize::from(strategy == "flatten"), "{strategy}: {files:?}");
    }
}

/// The pixie3d pattern, whose non-integer readers cut across the writers'
/// blocks, under the parallel strategy.
#[test]
fn pixie3d_restart_under_open_mpi_verifies() {
    let args = ["--writers", "4", "--pattern", "pixie3d", "--block", "small", "--peers", "none"];
    let args = [&args[..], &["--decomp", "uniform,non-integer,pieces"]].concat();
    let Some((report, _)) = restart("parallel", &args) else { return };
    assert_eq!(report["verified"], true, "{report:#}");
    assert!(report["points"].as_array().unwrap().iter().all(|p| p["mibs"]["median"].as_f64().unwrap() > 0.0));
}

/// Without mpirun the bench says what is missing, naming the launcher.
#[test]
fn an_open_strategy_without_mpirun_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(PLFS)
        .args(["bench", "restart", "--strategy", "broadcast", "--total-mib", "1", "--dir"])
        .arg(dir.path())
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("mpirun.openmpi") && stderr.contains("not on PATH"), "{stderr}");
}
