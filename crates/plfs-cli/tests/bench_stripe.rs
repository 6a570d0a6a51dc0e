//! `plfs bench stripe` as a user runs it: a tiny run of two layouts over 4
//! backends must verify every byte, say which limit it used, charge the
//! data to the backends its layout names (counted, not timed) and report
//! both goals; a bad size is refused naming it. No timing is asserted.
//! The tiny run is one round (`--case-bytes 0`): with rounds of fresh
//! files, the charges add up over files the placement spreads.

use std::process::Command;

use serde_json::Value;

const PLFS: &str = env!("CARGO_BIN_EXE_plfs");

#[test]
fn a_tiny_run_verifies_and_charges_each_backend_its_stripes() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(PLFS)
        .args(["bench", "stripe", "--sizes", "512K", "--writers", "2", "--record", "64K"])
        .args(["--stripe-size", "64K", "--write-behind", "128K", "--backend-mibs", "256"])
        .args(["--mode", "shared-file", "--layouts", "stripe=1,stripe=-1", "--case-bytes", "0"])
        .args(["--json", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["verified"], true, "{report:#}");
    assert_eq!(report["limit"]["kind"], "emulated", "{report:#}");
    assert!(!report["limit"]["reason"].as_str().unwrap().is_empty());
    let size = 512 << 10;
    for case in report["cases"].as_array().unwrap() {
        let charged: Vec<u64> =
            case["backend_written_bytes"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap()).collect();
        let with_data = charged.iter().filter(|bytes| **bytes >= size / 4).count();
        match case["layout"].as_str().unwrap() {
            "stripe=1" => assert_eq!((with_data, case["backends_used"].as_u64()), (1, Some(1)), "{case:#}"),
            "stripe=-1" => assert_eq!((with_data, case["backends_used"].as_u64()), (4, Some(4)), "{case:#}"),
            other => panic!("unexpected layout {other}"),
        }
    }
    assert!(report["striping_goal"]["speedup"].as_f64().unwrap() > 0.0, "{report:#}");
    assert_eq!(report["pfl_goal"].as_array().unwrap().len(), 0, "pfl-large did not run");
    // Nothing left behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn a_size_that_does_not_split_is_refused_by_name() {
    let output = Command::new(PLFS)
        .args(["bench", "stripe", "--sizes", "96K", "--writers", "2", "--dir", "/nonexistent-never-used"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("file size 98304 does not split into 2 segments"), "{stderr}");
}
