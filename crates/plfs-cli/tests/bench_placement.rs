//! `plfs bench placement` at a small scale, as root: eight 32 MiB tmpfs
//! backends filled to 90% per case; checks the paper's invariants and that
//! the bench leaves nothing mounted or behind.

use std::process::Command;

use serde_json::Value;

const PLFS: &str = env!("CARGO_BIN_EXE_plfs");

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail and touches no memory.
    unsafe { libc::geteuid() == 0 }
}

/// Mount points listed in /proc/self/mounts under `dir`.
fn mounts_under(dir: &std::path::Path) -> Vec<String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    let prefix = dir.display().to_string();
    mounts
        .lines()
        .filter_map(|line| line.split(' ').nth(1))
        .filter(|point| point.starts_with(&prefix))
        .map(str::to_owned)
        .collect()
}

#[test]
fn placement_fills_tmpfs_backends_with_one_object_per_small_file() {
    if !is_root() {
        eprintln!("SKIPPED: plfs bench placement mounts tmpfs backends and needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = || {
        let output = Command::new(PLFS)
            .args(["bench", "placement", "--backends", "8", "--backend-mib", "32", "--json", "--dir"])
            .arg(dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stderr}");
        serde_json::from_slice::<Value>(&output.stdout).unwrap()
    };
    let report = run();
    // A second process, the same seed: the same figures, to the block.
    assert_eq!(figures(&run()), figures(&report));
    assert_eq!(report["verified"], true, "{report:#}");
    assert_eq!(report["one_object_per_small_file"], true, "{report:#}");
    let cases = report["cases"].as_array().unwrap();
    let names: Vec<&str> = cases.iter().map(|case| case["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["ideal", "pfl", "default"]);
    for case in cases {
        let name = &case["name"];
        assert_eq!(case["stopped_by"], Value::Null, "{name}: {case:#}");
        // Filled to about the target (the fullest case, the one with the
        // most metadata, to within a small file; the others hold the same
        // files), and no backend full: placement spread the data.
        let mean = case["usage_mean_pct"].as_f64().unwrap();
        assert!((87.0..91.0).contains(&mean), "{name}: mean usage {mean}");
        let usage: Vec<f64> =
            case["usage_pct"].as_array().unwrap().iter().map(|u| u.as_f64().unwrap()).collect();
        assert_eq!(usage.len(), 8);
        assert!(usage.iter().all(|&u| u < 99.0), "{name}: {usage:?}");
        // Every small file is one data object; the 70/20/9/1 mix was written.
        assert_eq!(
            (case["small_file_objects_min"].as_u64(), case["small_file_objects_max"].as_u64()),
            (Some(1), Some(1))
        );
        let per_class: Vec<u64> =
            case["files_per_class"].as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).collect();
        assert!(per_class[0] > 2 * per_class[1] && per_class[3] >= 1, "{name}: {per_class:?}");
        let objects: u64 = case["data_objects"].as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).sum();
        assert!(objects >= case["files"].as_u64().unwrap(), "{name}: {objects} data objects");
    }
    // The paper's goal, PFL's usage spread no worse than ideal striping's,
    // is reported, not asserted: which of the two is lower changes with the
    // seed at this scale, as free-space placement (round-robin until a 17%
    // imbalance) sets the spread, not the layout (docs/PERFORMANCE.md has
    // several seeds). Asserted: the flag matches the figures, and no case
    // piles data on a few backends (that would be a spread of tens of points).
    let std_dev = |name: &str| {
        cases.iter().find(|case| case["name"] == name).unwrap()["usage_std_dev_pct"].as_f64().unwrap()
    };
    assert_eq!(report["pfl_std_dev_no_worse"], std_dev("pfl") <= std_dev("ideal") + 0.005);
    for name in ["ideal", "pfl", "default"] {
        assert!(std_dev(name) < 8.0, "{name}: usage std-dev {} points", std_dev(name));
    }
    let fullest = cases.iter().map(|case| case["usage_mean_pct"].as_f64().unwrap()).fold(0.0, f64::max);
    assert!((89.0..91.0).contains(&fullest), "fullest case's mean usage {fullest}");
    // Every case holds the same files.
    for case in cases {
        assert_eq!(case["files_per_class"], cases[0]["files_per_class"], "{}", case["name"]);
    }
    // Unmounted and removed.
    assert_eq!(mounts_under(dir.path()), Vec::<String>::new());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// What must repeat exactly for one seed: per case, the files and every
/// backend's usage, inodes and data objects.
fn figures(report: &Value) -> Vec<Value> {
    report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|case| {
            let pick = |key: &str| case[key].clone();
            serde_json::json!([
                pick("name"),
                pick("files_per_class"),
                pick("bytes"),
                pick("usage_pct"),
                pick("inodes"),
                pick("data_objects"),
                pick("objects_per_file_mean")
            ])
        })
        .collect()
}

/// The plfs binary run as an ordinary user: `nobody` through runuser when
/// the tests run as root.
fn plfs_as_a_user() -> Command {
    if is_root() {
        let mut runuser = Command::new("runuser");
        runuser.args(["-u", "nobody", "--", PLFS]);
        runuser
    } else {
        Command::new(PLFS)
    }
}

/// `plfs bench placement` over 4 in-memory backends of 32 MiB, run as an
/// ordinary user, with `args` after those.
fn memory_placement_as_a_user(args: &[&str]) -> std::process::Output {
    plfs_as_a_user()
        .args(["bench", "placement", "--backend-kind", "memory", "--backends", "4", "--backend-mib", "32"])
        .args(args)
        .output()
        .unwrap()
}

/// The same placement code over in-memory backends of the same capacity
/// needs no root, and one seed gives the same figures in every process:
/// the files, their order and the fill's end are the seed's, and each
/// mount's placement rotor starts from the seed, not from the process id
/// (from which the rotor starts on an ordinary mount, and which moved one
/// seed's std-dev by up to 0.3 points between runs).
#[test]
fn placement_is_reproducible_from_its_seed_without_root() {
    let run = |seed: &str| {
        let output = memory_placement_as_a_user(&["--json", "--seed", seed]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stderr}");
        serde_json::from_slice::<Value>(&output.stdout).unwrap()
    };
    let first = run("3");
    assert_eq!(first["verified"], true, "{first:#}");
    assert_eq!(first["one_object_per_small_file"], true, "{first:#}");
    assert!(first["backend_kind"].as_str().unwrap().contains("in-memory"), "{first:#}");
    for case in first["cases"].as_array().unwrap() {
        assert!(case["files"].as_u64().unwrap() > 100, "{case:#}");
        assert_eq!(case["files_per_class"], first["cases"][0]["files_per_class"]);
    }
    for _ in 0..2 {
        assert_eq!(figures(&run("3")), figures(&first));
    }
    // Another seed, other files: the comparison above is not of constants.
    assert_ne!(figures(&run("4")), figures(&first));
}

/// Not root: a clear refusal naming why, and nothing made.
#[test]
fn placement_refuses_clearly_without_root() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let output = plfs_as_a_user().args(["bench", "placement", "--dir"]).arg(dir.path()).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("plfs bench placement needs root: it mounts 8 size-limited tmpfs"), "{stderr}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// `--seeds A-B` runs every seed of the range and decides the goal over
/// them: each seed's figures are those of its own `--seed` run, the count
/// of seeds with PFL no worse than ideal matches the per-seed flags, the
/// granularity is the objects placed, and the JSON repeats byte for byte.
#[test]
fn placement_over_a_range_of_seeds_sums_up_the_goal_reproducibly() {
    let run = |seeds: &[&str]| {
        let output = memory_placement_as_a_user(&[seeds, &["--json"]].concat());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stderr}");
        output.stdout
    };
    let first = run(&["--seeds", "2-3"]);
    assert_eq!(run(&["--seeds", "2-3"]), first, "the same seeds gave other JSON");
    let report: Value = serde_json::from_slice(&first).unwrap();
    assert_eq!(report["case_names"], serde_json::json!(["ideal", "pfl", "default"]));
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.iter().map(|run| run["seed"].as_u64().unwrap()).collect::<Vec<_>>(), [2, 3]);
    // Seed 3's row is what `--seed 3` reports.
    let single: Value = serde_json::from_slice(&run(&["--seed", "3"])).unwrap();
    let cases = single["cases"].as_array().unwrap();
    let std_devs: Vec<f64> = cases.iter().map(|case| case["usage_std_dev_pct"].as_f64().unwrap()).collect();
    let row: Vec<f64> =
        runs[1]["usage_std_dev_pct"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert_eq!(row, std_devs);
    assert_eq!(runs[1]["files"], cases[0]["files"]);
    assert_eq!(runs[1]["pfl_std_dev_no_worse"], single["pfl_std_dev_no_worse"]);
    let no_worse = runs.iter().filter(|run| run["pfl_std_dev_no_worse"] == true).count() as u64;
    assert_eq!(report["pfl_no_worse_seeds"].as_u64(), Some(no_worse));
    assert_eq!(report["pfl_no_worse_every_seed"], no_worse == 2);
    for run in runs {
        let excess = run["pfl_excess_pct"].as_f64().unwrap();
        assert_eq!(run["pfl_std_dev_no_worse"], excess <= 0.005, "{run:#}");
    }
    // The smallest object is a small file's one stripe (64 KiB and a log
    // header) of a 32 MiB backend; the largest no smaller; one object more
    // on one of 4 backends is a std-dev of smallest × √3 / 4.
    let smallest = report["smallest_object_pct"].as_f64().unwrap();
    assert!((0.195..0.2).contains(&smallest), "{smallest}");
    for case in report["std_dev"].as_array().unwrap() {
        assert!(case["smallest_object_pct"].as_f64().unwrap() >= smallest, "{case:#}");
        assert!(case["largest_object_pct"].as_f64().unwrap() > smallest, "{case:#}");
    }
    let one = report["one_object_std_dev_pct"].as_f64().unwrap();
    assert!((one - smallest * 3f64.sqrt() / 4.0).abs() < 1e-9, "{one}");
    assert_eq!(report["verified"], true);
    assert_eq!(report["one_object_per_small_file"], true);
    // A backwards range is refused, naming the option.
    let output = plfs_as_a_user()
        .args(["bench", "placement", "--backend-kind", "memory", "--seeds", "5-3"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("--seeds 5-3"), "{output:?}");
}
