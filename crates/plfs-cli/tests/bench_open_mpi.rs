//! `plfs bench open` under real mpirun, Open MPI and MPICH: the same plfs
//! binary (which links no MPI) loads the shim of whichever MPI started
//! it. Asserts the paper's open counts per strategy and that every reader
//! verified every byte. No timing is asserted. Fails (instead of
//! skipping) when PLFS_REQUIRE_MPI=1 and an MPI is missing.

use std::process::Command;

const PLFS: &str = env!("CARGO_BIN_EXE_plfs");
const WRITERS: u64 = 6;
const RECORDS: u64 = 8;
const RECORD_BYTES: u64 = 1000;
/// A hung collective ends the run instead of hanging `make test`.
const TIMEOUT_SECONDS: u32 = 240;

mod mpi_support;

use mpi_support::{on_path as available, required};

fn bench_open(flavor: &str, ranks: u64, readers: u64) {
    let mpirun = format!("mpirun.{flavor}");
    if !available(&mpirun) {
        assert!(!required(), "PLFS_REQUIRE_MPI=1 but {mpirun} is missing (scripts/install-deps.sh)");
        eprintln!("skipping {flavor}: {mpirun} is missing");
        return;
    }
    let dir = tempfile::Builder::new().prefix("plfs-bench-open-test.").tempdir().unwrap();
    let mut command = Command::new("timeout");
    command.args(["--kill-after=10", &TIMEOUT_SECONDS.to_string(), &mpirun]);
    if flavor == "openmpi" {
        command.args(["--allow-run-as-root", "--oversubscribe"]);
    }
    let output = command
        .args(["-np", &ranks.to_string(), PLFS, "bench", "open"])
        .args(["--writers", &WRITERS.to_string(), "--readers", &readers.to_string()])
        .args(["--records", &RECORDS.to_string(), "--size", &RECORD_BYTES.to_string()])
        .args(["--strategy", "all", "--repeat", "1", "--verify", "--json", "--no-drop-caches"])
        .arg("--dir")
        .arg(dir.path())
        .env_remove("PLFS_MPI_SHIM")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{mpirun}: {}\nstdout:\n{stdout}\nstderr:\n{stderr}", output.status);
    // Only rank 0 prints the report.
    let report: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: not one JSON report:\n{stdout}\n{stderr}"));
    let transport = report["transport"].as_str().unwrap_or_default().to_lowercase();
    let expected_transport = if flavor == "openmpi" { "open mpi" } else { "mpich" };
    assert!(transport.contains(expected_transport), "ran over {transport:?}, not {flavor}");
    assert_eq!(report["ranks"], ranks);
    assert_eq!(report["ok"], true, "{stdout}");

    let file_bytes = WRITERS * RECORDS * RECORD_BYTES;
    let strategies = report["strategies"].as_array().unwrap();
    let names: Vec<&str> = strategies.iter().map(|s| s["strategy"].as_str().unwrap()).collect();
    assert_eq!(names, ["naive", "broadcast", "parallel", "flatten"]);
    for strategy in strategies {
        let name = strategy["strategy"].as_str().unwrap();
        // Paper Fig 4: naive N*M, broadcast N, parallel N, flatten 1.
        let (index_log_opens, global_index_opens) = match name {
            // Each naive reader also looks for a global index (none yet).
            "naive" => (WRITERS * readers, readers),
            "broadcast" | "parallel" => (WRITERS, 0),
            _ => (0, 1),
        };
        assert_eq!(strategy["index_log_opens"], index_log_opens, "{flavor} {name}");
        assert_eq!(strategy["global_index_opens"], global_index_opens, "{flavor} {name}");
        assert_eq!(strategy["verified_bytes"], file_bytes * readers, "{flavor} {name}");
        assert_eq!(strategy["errors"].as_array().unwrap().len(), 0, "{flavor} {name}");
    }
}

#[test]
fn bench_open_under_open_mpi() {
    bench_open("openmpi", 5, 4);
}

#[test]
fn bench_open_under_mpich() {
    bench_open("mpich", 4, 4);
}
