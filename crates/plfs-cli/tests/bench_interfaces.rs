//! `plfs bench n1-strided --interface …`: every plfs interface (library,
//! LD_PRELOAD interposer, MPI-IO under mpirun, FUSE mount) writes the same
//! strided records in one run beside direct N-1 and N-N, reads them back
//! shifted by one rank and verifies every byte. Each interface's file is
//! then copied out through the library and compared with the direct N-1
//! file, byte for byte: the C MPI-IO program's port of the pattern and
//! the interposer's writes are checked against the Rust writer.
//!
//! With mpiio, the same MPI-IO program also writes and reads a plain file
//! (no plfs): that file too must equal the direct N-1 one, and the report
//! must set mpiio against it and split each rank's clock.
//!
//! The mpiio parts fail (instead of skipping) when PLFS_REQUIRE_MPI=1 and
//! an MPI or the programs built with it are missing. The FUSE run needs
//! root, as every FUSE test in this crate does. No timing is asserted.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const PLFS: &str = env!("CARGO_BIN_EXE_plfs");
const WRITERS: u64 = 3;
const RECORDS: u64 = 20;
const SIZE: u64 = 4099;

mod mpi_support;

use mpi_support::{on_path, required};

/// target/<profile>: the cdylibs and mpi/<flavor>/ are built next to plfs.
fn built(name: &str) -> PathBuf {
    Path::new(PLFS).parent().unwrap().join(name)
}

/// Open MPI and the programs built with it, or why not.
fn open_mpi_missing() -> Option<String> {
    mpi_missing("openmpi")
}

/// An MPI ("openmpi", "mpich") and the programs built with it, or why not.
fn mpi_missing(flavor: &str) -> Option<String> {
    if !on_path(&format!("mpirun.{flavor}")) || !on_path(&format!("mpicc.{flavor}")) {
        return Some(format!("mpirun.{flavor} or mpicc.{flavor} is not on PATH (scripts/install-deps.sh)"));
    }
    for name in [format!("mpi/{flavor}/mpiio_bench"), format!("mpi/{flavor}/libplfs_mpiio.so")] {
        if !built(&name).exists() {
            return Some(format!(
                "{} is missing: run `cargo build --release --workspace` first",
                built(&name).display()
            ));
        }
    }
    None
}

fn bench(dir: &Path, interfaces: &str, extra: &[&str]) -> Output {
    for library in ["libplfs.so", "libplfs_preload.so"] {
        assert!(
            built(library).exists(),
            "{} is missing: run `cargo build --release --workspace` first (`make test` does)",
            built(library).display()
        );
    }
    Command::new(PLFS)
        .args(["bench", "n1-strided", "--interface", interfaces])
        .args(["--writers", &WRITERS.to_string(), "--records", &RECORDS.to_string()])
        .args(["--size", &SIZE.to_string(), "--read", "--json", "--dir"])
        .arg(dir)
        .args(extra)
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap()
}

/// Runs the bench and checks the report; returns it.
fn run_and_check(interfaces: &[&str], extra: &[&str]) -> (tempfile::TempDir, Value) {
    let dir = tempfile::Builder::new().prefix("plfs-bench-interfaces.").tempdir().unwrap();
    let output = bench(dir.path(), &interfaces.join(","), extra);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "plfs bench {interfaces:?}: {}\n{stdout}\n{stderr}", output.status);
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(report["verified"], true, "{report:#}");
    assert_eq!(report["total_bytes"], WRITERS * RECORDS * SIZE);
    let phases = report["phases"].as_array().unwrap();
    // direct N-1 and N-N (and MPI-IO on a plain file, with mpiio), then
    // each interface; each written and read.
    let mpiio = interfaces.contains(&"mpiio");
    let baselines = 2 + usize::from(mpiio);
    assert_eq!(phases.len(), 2 * (baselines + interfaces.len()), "{report:#}");
    for phase in phases {
        assert_eq!(phase["bad_records"], 0, "{phase:#}");
        assert!(phase["mibs"].as_f64().unwrap() > 0.0, "{phase:#}");
        // Every rank, worker or MPI-IO program, splits its clock.
        for part in ["open_ms", "io_ms", "close_ms"] {
            let median = phase["ranks"][part]["median"].as_f64();
            assert!(median.is_some_and(|ms| ms >= 0.0), "{part} in {phase:#}");
        }
    }
    for (op, count) in [("write", baselines + interfaces.len()), ("read", baselines + interfaces.len())] {
        assert_eq!(phases.iter().filter(|p| p["op"] == op).count(), count, "{report:#}");
    }
    let plain = phases.iter().filter(|p| p["target"] == "mpiio-plain").count();
    assert_eq!(plain, if mpiio { 2 } else { 0 }, "{report:#}");
    for figure in ["mpiio_plain_ratio_vs_direct", "read_mpiio_plain_ratio_vs_direct"] {
        let value = report[figure].as_f64();
        assert_eq!(value.is_some(), mpiio, "{figure} in {report:#}");
        assert!(value.is_none_or(|v| v > 0.0 && v.is_finite()), "{figure} in {report:#}");
    }
    let rows = report["interfaces"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|row| row["interface"].as_str().unwrap()).collect();
    assert_eq!(names, interfaces, "one row per interface, in table order");
    for row in rows {
        for figure in [
            "write_mibs",
            "read_mibs",
            "ratio_vs_nn",
            "ratio_vs_direct",
            "read_ratio_vs_nn",
            "read_ratio_vs_direct",
        ] {
            let value = row[figure].as_f64().unwrap_or_else(|| panic!("{figure} missing in {row:#}"));
            assert!(value > 0.0 && value.is_finite(), "{figure} = {value} in {row:#}");
        }
        // mpiio / MPI-IO on the plain file: for mpiio alone.
        for figure in ["ratio_vs_mpiio_plain", "read_ratio_vs_mpiio_plain"] {
            let value = row[figure].as_f64();
            assert_eq!(value.is_some(), row["interface"] == "mpiio", "{figure} in {row:#}");
            assert!(value.is_none_or(|v| v > 0.0 && v.is_finite()), "{figure} in {row:#}");
        }
    }
    (dir, report)
}

/// The plain file the MPI-IO program wrote without plfs is the direct N-1
/// file byte for byte.
fn assert_plain_mpiio_same_as_direct(report: &Value) {
    let work = PathBuf::from(report["dir"].as_str().unwrap());
    let direct = std::fs::read(work.join("direct/shared")).unwrap();
    let plain = std::fs::read(work.join("mpiio-plain/shared")).unwrap();
    assert!(plain == direct, "MPI-IO's plain file differs from the direct N-1 file");
}

/// The file an interface with its own mount wrote, copied out through the
/// library with that mount's plfsrc, is the direct N-1 file byte for byte.
fn assert_same_as_direct(report: &Value, interface: &str) {
    let work = PathBuf::from(report["dir"].as_str().unwrap());
    let copy = work.join(format!("{interface}.copy"));
    let output = Command::new(PLFS)
        .arg("cp")
        .arg(work.join(format!("{interface}-mnt/shared")))
        .arg(&copy)
        .env("PLFSRC", work.join(format!("{interface}.plfsrc")))
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap();
    assert!(output.status.success(), "plfs cp: {}", String::from_utf8_lossy(&output.stderr));
    let direct = std::fs::read(work.join("direct/shared")).unwrap();
    assert_eq!(direct.len() as u64, WRITERS * RECORDS * SIZE);
    assert!(std::fs::read(&copy).unwrap() == direct, "{interface}'s file differs from the direct N-1 file");
}

#[test]
fn lib_preload_and_mpiio_in_one_run() {
    let mut interfaces = vec!["lib", "preload", "mpiio"];
    if let Some(why) = open_mpi_missing() {
        assert!(!required(), "PLFS_REQUIRE_MPI=1 but {why}");
        eprintln!("running without mpiio: {why}");
        interfaces.pop();
    }
    let (_dir, report) = run_and_check(&interfaces, &["--keep"]);
    for interface in &interfaces[1..] {
        assert_same_as_direct(&report, interface);
    }
    if interfaces.contains(&"mpiio") {
        assert_plain_mpiio_same_as_direct(&report);
    }
}

/// The same under MPICH (mpirun's `-genv` instead of `-x`), the MPI-IO
/// phases alone beside the baselines.
#[test]
fn mpiio_and_mpiio_on_a_plain_file_under_mpich() {
    if let Some(why) = mpi_missing("mpich") {
        assert!(!required(), "PLFS_REQUIRE_MPI=1 but {why}");
        eprintln!("skipped: {why}");
        return;
    }
    let (_dir, report) = run_and_check(&["mpiio"], &["--mpi", "mpich", "--keep"]);
    assert_same_as_direct(&report, "mpiio");
    assert_plain_mpiio_same_as_direct(&report);
}

/// mpiio_bench checks a word at a time; a wrong byte must still be named
/// exactly, inside a word and in a record's tail. Plain files, no plfs: the
/// program alone under mpirun, 2 ranks, 3 records of 4099 B each (512
/// words and a 3-byte tail); rank 0 reads rank 1's records 1, 3, 5 and
/// rank 1 reads records 0, 2, 4.
#[test]
fn mpiio_bench_names_the_first_wrong_byte() {
    if let Some(why) = open_mpi_missing() {
        assert!(!required(), "PLFS_REQUIRE_MPI=1 but {why}");
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::Builder::new().prefix("plfs-bench-interfaces.").tempdir().unwrap();
    let file = dir.path().join("plain");
    let run = |op: &str| -> Vec<Value> {
        let output = Command::new("mpirun.openmpi")
            .args(["--allow-run-as-root", "--oversubscribe", "-np", "2"])
            .arg(built("mpi/openmpi/mpiio_bench"))
            .arg(op)
            .arg(&file)
            .args(["3", &SIZE.to_string()])
            .env_remove("LD_PRELOAD")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{op}: {stdout}{}", String::from_utf8_lossy(&output.stderr));
        let mut results: Vec<Value> = stdout
            .lines()
            .filter_map(|line| line.strip_prefix("PLFS-BENCH-RESULT "))
            .map(|json| serde_json::from_str(json).unwrap())
            .collect();
        results.sort_by_key(|result| result["rank"].as_u64());
        assert_eq!(results.len(), 2, "{op}: {stdout}");
        results
    };
    run("write");
    let mut bytes = std::fs::read(&file).unwrap();
    assert_eq!(bytes.len() as u64, 6 * SIZE);
    bytes[(3 * SIZE + 4097) as usize] ^= 0x40; // record 3, in the tail
    bytes[(2 * SIZE + 13) as usize] ^= 0x01; // record 2, inside word 1
    std::fs::write(&file, &bytes).unwrap();
    let results = run("read");
    let first_bad = |rank: usize| results[rank]["first_bad"].as_str().unwrap_or("").to_owned();
    assert_eq!(results[0]["bad_records"], 1, "{:?}", results[0]);
    assert!(
        first_bad(0).contains(&format!("record 3 at offset {}: byte 4097 is", 3 * SIZE)),
        "{}",
        first_bad(0)
    );
    assert_eq!(results[1]["bad_records"], 1, "{:?}", results[1]);
    assert!(
        first_bad(1).contains(&format!("record 2 at offset {}: byte 13 is", 2 * SIZE)),
        "{}",
        first_bad(1)
    );
}

/// Without mpirun on PATH, `--interface mpiio` fails and says what is missing.
#[test]
fn mpiio_without_mpirun_names_it() {
    let dir = tempfile::Builder::new().prefix("plfs-bench-interfaces.").tempdir().unwrap();
    let empty = dir.path().join("empty-path");
    std::fs::create_dir(&empty).unwrap();
    let output = Command::new(PLFS)
        .args([
            "bench",
            "n1-strided",
            "--interface",
            "lib,mpiio",
            "--writers",
            "2",
            "--records",
            "2",
            "--dir",
        ])
        .arg(dir.path())
        .env("PATH", &empty)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("mpirun.openmpi is not on PATH"), "{stderr}");
}

#[test]
fn fuse_beside_the_library() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(euid, 0, "the FUSE tests mount file systems: run `make test` as root");
    let (dir, _) = run_and_check(&["lib", "fuse"], &[]);
    // The mount is gone with its scratch directory: nothing is left behind.
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
