//! `plfs bench restart` through the real binary: its worker processes are
//! `plfs bench-worker restart`, so this is the path a user runs. Tiny
//! sizes; every byte must verify, no timing is asserted.

use std::process::Command;

use serde_json::Value;

const PLFS: &str = env!("CARGO_BIN_EXE_plfs");

fn restart(extra: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(PLFS)
        .args(["bench", "restart", "--writers", "3", "--backends", "2", "--json", "--dir"])
        .arg(dir.path())
        .args(extra)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    // The run's directory is gone.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    serde_json::from_slice(&output.stdout).unwrap()
}

fn readers(report: &Value) -> Vec<(String, String, u64)> {
    report["points"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["op"] == "read")
        .map(|p| {
            let (target, decomp) = (p["target"].as_str().unwrap(), p["decomp"].as_str().unwrap());
            (target.to_owned(), decomp.to_owned(), p["processes"].as_u64().unwrap())
        })
        .collect()
}

#[test]
fn strided_restart_with_every_decomposition_verifies() {
    let report = restart(&[
        "--total-mib",
        "1",
        "--size",
        "10007",
        "--decomp",
        "uniform,half,minus-k,non-integer,pieces",
        "--readers",
        "4",
        "--repeat",
        "2",
    ]);
    assert_eq!(report["verified"], true, "{report:#}");
    assert_eq!(report["runs"], 2);
    let mut expected = Vec::new();
    for (decomp, m) in [("uniform", 3), ("half", 1), ("minus-k", 2), ("non-integer", 4), ("pieces", 4)] {
        for target in ["direct-n1", "plfs"] {
            expected.push((target.to_owned(), decomp.to_owned(), m));
        }
    }
    assert_eq!(readers(&report), expected);
    let point = &report["points"][3];
    assert!(point["mibs"]["min"].as_f64().unwrap() <= point["mibs"]["max"].as_f64().unwrap());
}

#[test]
fn pixie3d_restart_verifies() {
    let report =
        restart(&["--pattern", "pixie3d", "--block", "small", "--decomp", "non-integer", "--peers", "none"]);
    assert_eq!(report["verified"], true, "{report:#}");
    // 3 writers: a 1x1x3 grid of 16^3 blocks; 3 + 3/4 -> 4 readers.
    assert_eq!(report["global"], serde_json::json!([16, 16, 48]));
    assert_eq!(
        readers(&report),
        [("direct-n1".into(), "non-integer".into(), 4), ("plfs".into(), "non-integer".into(), 4)]
    );
}

/// The pixie3d checkpoint in all four formats in one run: plfs, the direct
/// file, ADIOS BP and parallel HDF5, each written by the same 3 writers
/// and read back by every decomposition with the same M, every value
/// checked. Without the peers built (`make peers`) this skips, unless
/// PLFS_REQUIRE_MPI=1 (`make test`), where it fails.
#[test]
fn pixie3d_restart_runs_every_decomposition_in_all_four_formats() {
    let report = restart(&[
        "--pattern",
        "pixie3d",
        "--block",
        "small",
        "--decomp",
        "uniform,half,minus-k,non-integer,pieces",
        "--peers",
        "adios,hdf5",
    ]);
    if report["peers"] != serde_json::json!(["adios", "hdf5"]) {
        let notes = &report["peer_notes"];
        let required = std::env::var("PLFS_REQUIRE_MPI").is_ok_and(|value| value == "1");
        assert!(!required, "PLFS_REQUIRE_MPI=1 but the peers did not run: {notes}");
        eprintln!("skipping: the restart peers did not run: {notes}");
        return;
    }
    assert_eq!(report["verified"], true, "{report:#}");
    assert_eq!(report["peer_notes"], serde_json::json!([]));
    let formats = ["direct-n1", "plfs", "adios", "hdf5"];
    let mut expected = Vec::new();
    for (decomp, m) in [("uniform", 3), ("half", 1), ("minus-k", 2), ("non-integer", 4), ("pieces", 3)] {
        for target in formats {
            expected.push((target.to_owned(), decomp.to_owned(), m));
        }
    }
    assert_eq!(readers(&report), expected);
    let points = report["points"].as_array().unwrap();
    let file_bytes = report["file_bytes"].as_u64().unwrap();
    for target in formats {
        assert!(points.iter().any(|p| p["op"] == "write" && p["target"] == target), "no {target} write");
    }
    // Every phase of every format moved the whole file, none read a wrong byte.
    for phase in report["phases"][0].as_array().unwrap() {
        assert_eq!(phase["bytes"].as_u64(), Some(file_bytes), "{phase}");
        assert_eq!(phase["bad_bytes"], 0, "{phase}");
    }
    for point in points.iter().filter(|p| p["target"] == "plfs") {
        for ratio in ["ratio_vs_direct", "ratio_vs_adios", "ratio_vs_hdf5"] {
            assert!(point[ratio]["median"].as_f64().is_some_and(|r| r > 0.0), "{ratio} of {point}");
        }
    }
}

/// A peer that is not built is named and the rest runs: only ADIOS in the
/// peers directory, so HDF5 is reported unavailable and plfs, the direct
/// file and ADIOS still run and verify.
#[test]
fn a_missing_peer_is_named_and_the_rest_runs() {
    let built = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/peers/adios_restart");
    if !built.is_file() {
        let required = std::env::var("PLFS_REQUIRE_MPI").is_ok_and(|value| value == "1");
        assert!(!required, "PLFS_REQUIRE_MPI=1 but {} is not built", built.display());
        eprintln!("skipping: {} is not built (make peers)", built.display());
        return;
    }
    let peers = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&built, peers.path().join("adios_restart")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(PLFS)
        .args(["bench", "restart", "--writers", "2", "--pattern", "pixie3d", "--block", "small", "--json"])
        .args(["--decomp", "half", "--dir"])
        .arg(dir.path())
        .env("PLFS_PEERS_DIR", peers.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("peer hdf5 unavailable: hdf5_restart is not built"), "{stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["verified"], true, "{report:#}");
    assert_eq!(report["peers"], serde_json::json!(["adios"]));
    assert!(report["peer_notes"][0].as_str().unwrap().starts_with("peer hdf5 unavailable"), "{report:#}");
    assert_eq!(
        readers(&report),
        [
            ("direct-n1".into(), "half".into(), 1),
            ("plfs".into(), "half".into(), 1),
            ("adios".into(), "half".into(), 1)
        ]
    );
}

#[test]
fn a_decomposition_without_readers_is_refused_by_name() {
    let output = Command::new(PLFS)
        .args(["bench", "restart", "--writers", "1", "--decomp", "half", "--dir", "/nonexistent-never-used"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("half decomposition of 1 writers"), "{stderr}");
}

/// Another user cannot drop the page cache: the run still verifies, warns
/// on stderr and marks its figures warm (as root, none of that).
#[test]
fn a_user_who_cannot_drop_the_cache_gets_warm_figures_marked() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let output = Command::new("runuser")
        .args(["-u", "nobody", "--", PLFS, "bench", "restart", "--writers", "2", "--total-mib", "1"])
        .args(["--size", "1000", "--json", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["verified"], true, "{report:#}");
    assert_eq!(report["warm"], true, "{report:#}");
    assert!(stderr.contains("cannot drop the page cache"), "{stderr}");
    assert_eq!(restart(&["--total-mib", "1", "--size", "1000"])["warm"], false);
}
