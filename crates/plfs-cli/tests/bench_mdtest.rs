//! `plfs bench mdtest`: a small run over plain files, an n-n mount and
//! containers, with K = 1 and 2 backends, with and without emulated
//! metadata servers; every case must verify (every name there with its
//! size after create and its bytes read back, none after remove) and
//! report a positive rate per phase. No timing is asserted. `all` adds the
//! 1-n (small_file) target; `--interface all` runs every plfs workload
//! through the library, the preload interposer and a real FUSE mount.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

const PLFS: &str = env!("CARGO_BIN_EXE_plfs");

fn mdtest(dir: &Path, workload: &str, extra: &[&str]) -> Output {
    Command::new(PLFS)
        .args(["bench", "mdtest", "--procs", "3", "--files", "50", "--backends", "1,2"])
        .args(["--workload", workload, "--json", "--dir"])
        .arg(dir)
        .args(extra)
        .output()
        .unwrap()
}

fn check(report: &Value, mds_service_us: u64) {
    assert_eq!(report["verified"], true, "{report:#}");
    assert_eq!(report["procs"], 3);
    assert_eq!(report["files_per_proc"], 50);
    assert_eq!(report["mds_service_us"], mds_service_us);
    let cases: Vec<(String, u64)> = report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["target"].as_str().unwrap().to_owned(), c["backends"].as_u64().unwrap()))
        .collect();
    let expected: Vec<(String, u64)> =
        [("direct", 1), ("n-n", 1), ("n-n", 2), ("shared-file", 1), ("shared-file", 2)]
            .map(|(t, k)| (t.to_owned(), k))
            .to_vec();
    assert_eq!(cases, expected, "{report:#}");
    for case in report["cases"].as_array().unwrap() {
        assert_eq!(case["verified"], true, "{case:#}");
        for figure in ["creates_per_sec", "stats_per_sec", "reads_per_sec", "removes_per_sec"] {
            assert!(case[figure]["median"].as_f64().unwrap() > 0.0, "{figure}: {case:#}");
        }
        // Every create, stat and remove asks the emulated servers at least
        // once when there are servers, and never when there are none.
        for requests in case["server_ops_per_op"].as_array().unwrap() {
            let requests = requests.as_f64().unwrap();
            assert!(if mds_service_us > 0 { requests >= 1.0 } else { requests == 0.0 }, "{case:#}");
        }
    }
    for run in report["runs"].as_array().unwrap() {
        for case in run["cases"].as_array().unwrap() {
            assert_eq!(case["problems"].as_array().unwrap().len(), 0, "{case:#}");
            let phases = case["phases"].as_array().unwrap();
            let names: Vec<&str> = phases.iter().map(|p| p["phase"].as_str().unwrap()).collect();
            assert_eq!(names, ["create", "stat", "read", "remove"]);
            for phase in phases {
                assert_eq!(phase["ops"], 150, "{phase:#}");
                assert!(phase["ops_per_sec"].as_f64().unwrap() > 0.0, "{phase:#}");
            }
        }
    }
}

fn run_and_check(extra: &[&str], mds_service_us: u64) {
    let dir = tempfile::Builder::new().prefix("plfs-bench-mdtest.").tempdir().unwrap();
    let output = mdtest(dir.path(), "direct,n-n,shared-file", &[&["--interface", "lib"], extra].concat());
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{}\n{stdout}\n{stderr}", output.status);
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    check(&report, mds_service_us);
    // The run's work directory is gone.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn mdtest_verifies_every_target_and_backend_count() {
    run_and_check(&[], 0);
}

#[test]
fn mdtest_with_one_metadata_server_per_backend_verifies() {
    run_and_check(&["--mds-service-us", "20", "--repeat", "2"], 20);
}

#[test]
fn mdtest_all_runs_every_workload_including_one_to_n() {
    let dir = tempfile::Builder::new().prefix("plfs-bench-mdtest.").tempdir().unwrap();
    let output = Command::new(PLFS)
        .args(["bench", "mdtest", "--procs", "2", "--files", "5", "--backends", "2"])
        .args(["--workload", "all", "--json", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}: {}", stdout, String::from_utf8_lossy(&output.stderr));
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["verified"], true, "{report:#}");
    let targets: Vec<&str> =
        report["cases"].as_array().unwrap().iter().map(|c| c["target"].as_str().unwrap()).collect();
    assert_eq!(targets, ["direct", "n-n", "1-n", "shared-file"], "{report:#}");
}

/// Every plfs workload through the library, the interposer and a FUSE
/// mount (served by `plfs mount --foreground`, stopped by its pid): each
/// case verifies, and the rows are the workload x interface product with
/// their ratios to direct.
#[test]
fn mdtest_runs_every_workload_through_every_interface() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(euid, 0, "the FUSE interface mounts a file system: run `make test` as root");
    assert!(Path::new("/dev/fuse").exists(), "the FUSE interface needs /dev/fuse");
    let dir = tempfile::Builder::new().prefix("plfs-bench-mdtest.").tempdir().unwrap();
    let output = Command::new(PLFS)
        .args(["bench", "mdtest", "--procs", "3", "--files", "20", "--backends", "2"])
        .args(["--workload", "all", "--interface", "lib,preload,fuse", "--json", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(report["verified"], true, "{report:#}");
    let rows: Vec<String> = report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| format!("{} {}", c["target"].as_str().unwrap(), c["interface"].as_str().unwrap_or("-")))
        .collect();
    let mut expected = vec!["direct -".to_owned()];
    for workload in ["n-n", "1-n", "shared-file"] {
        expected.extend(["lib", "preload", "fuse"].map(|interface| format!("{workload} {interface}")));
    }
    assert_eq!(rows, expected, "{report:#}");
    for case in report["cases"].as_array().unwrap() {
        assert_eq!(case["verified"], true, "{case:#}");
        let ratios = case["ratio_to_direct"].as_array().unwrap_or_else(|| panic!("{case:#}"));
        assert_eq!(ratios.len(), 4, "{case:#}");
        for ratio in ratios {
            assert!(ratio["median"].as_f64().unwrap() > 0.0, "{case:#}");
        }
    }
    for run in report["runs"].as_array().unwrap() {
        for case in run["cases"].as_array().unwrap() {
            assert_eq!(case["problems"].as_array().unwrap().len(), 0, "{case:#}");
            for phase in case["phases"].as_array().unwrap() {
                assert_eq!(phase["ops"], 60, "{phase:#}");
            }
        }
    }
    // Every daemon unmounted and the run's directory is gone.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(dir.path().to_str().unwrap()), "{mounts}");
}

#[test]
fn mdtest_refuses_emulated_servers_behind_the_preload_and_fuse() {
    let dir = tempfile::Builder::new().prefix("plfs-bench-mdtest.").tempdir().unwrap();
    let output = mdtest(dir.path(), "n-n", &["--interface", "lib,preload", "--mds-service-us", "10"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("--mds-service-us") && stderr.contains("--interface lib"), "{stderr}");
}
