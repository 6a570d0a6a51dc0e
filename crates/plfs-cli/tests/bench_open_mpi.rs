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

/// `plfs bench open ARGS --json` on `ranks` ranks of `flavor`'s mpirun;
/// None when that MPI is missing.
fn bench_open_json(flavor: &str, ranks: u64, args: &[&str]) -> Option<serde_json::Value> {
    let mpirun = format!("mpirun.{flavor}");
    if !available(&mpirun) {
        assert!(!required(), "PLFS_REQUIRE_MPI=1 but {mpirun} is missing (scripts/install-deps.sh)");
        eprintln!("skipping {flavor}: {mpirun} is missing");
        return None;
    }
    let dir = tempfile::Builder::new().prefix("plfs-bench-open-test.").tempdir().unwrap();
    let mut command = Command::new("timeout");
    command.args(["--kill-after=10", &TIMEOUT_SECONDS.to_string(), &mpirun]);
    if flavor == "openmpi" {
        command.args(["--allow-run-as-root", "--oversubscribe"]);
    }
    let output = command
        .args(["-np", &ranks.to_string(), PLFS, "bench", "open"])
        .args(["--records", &RECORDS.to_string(), "--size", &RECORD_BYTES.to_string()])
        .args(["--repeat", "1", "--verify", "--json", "--no-drop-caches"])
        .args(args)
        .arg("--dir")
        .arg(dir.path())
        .env_remove("PLFS_MPI_SHIM")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{mpirun}: {}\nstdout:\n{stdout}\nstderr:\n{stderr}", output.status);
    // Only rank 0 prints the report.
    Some(
        serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("{e}: not one JSON report:\n{stdout}\n{stderr}")),
    )
}

fn bench_open(flavor: &str, ranks: u64, readers: u64) {
    let (writers, readers_arg) = (WRITERS.to_string(), readers.to_string());
    let args = ["--writers", &writers, "--readers", &readers_arg, "--strategy", "all"];
    let Some(report) = bench_open_json(flavor, ranks, &args) else { return };
    let stdout = report.to_string();
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
        // Flatten on close gathered the ranks' in-memory records: no rank
        // opened an index log at the close.
        let gathered = if name == "flatten" { serde_json::json!(true) } else { serde_json::Value::Null };
        assert_eq!(strategy["close_gathered"], gathered, "{flavor} {name}");
        assert_eq!(strategy["close_index_log_opens"], 0, "{flavor} {name}");
    }
}

/// Four ranks, flatten on close: with index_buffer_mbs 0 no rank can keep
/// its records and rank 0 reads the four index logs at close (the
/// fallback); a sweep over 2 and 4 ranks gathers at both.
#[test]
fn flatten_on_close_gathers_or_falls_back_under_open_mpi() {
    let args = ["--writers", "4", "--strategy", "flatten", "--index-buffer-mbs", "0"];
    let Some(report) = bench_open_json("openmpi", 4, &args) else { return };
    assert_eq!(report["ok"], true, "{report}");
    let flatten = &report["strategies"][0];
    assert_eq!(flatten["close_gathered"], false, "{report}");
    assert_eq!(flatten["close_index_log_opens"], 4, "{report}");
    assert_eq!(
        (flatten["index_log_opens"].as_u64(), flatten["global_index_opens"].as_u64()),
        (Some(0), Some(1))
    );

    let args = ["--ranks", "2,4", "--strategy", "naive,flatten"];
    let Some(sweep) = bench_open_json("openmpi", 4, &args) else { return };
    assert_eq!(sweep["ok"], true, "{sweep}");
    let points = sweep["points"].as_array().unwrap();
    assert_eq!(points.len(), 2, "{sweep}");
    for (point, ranks) in points.iter().zip([2u64, 4]) {
        assert_eq!((point["writers"].as_u64(), point["readers"].as_u64()), (Some(ranks), Some(ranks)));
        let naive = &point["strategies"][0];
        assert_eq!(naive["index_log_opens"], ranks * ranks, "{point}");
        let flatten = &point["strategies"][1];
        assert_eq!(flatten["close_gathered"], true, "{point}");
        assert_eq!(flatten["close_index_log_opens"], 0, "{point}");
        assert!(flatten["read_mib_per_s_median"].as_f64().unwrap() > 0.0, "{point}");
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
