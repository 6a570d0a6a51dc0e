//! Layouts as users set and see them, through the `plfs` binary: plfsrc
//! keys, `setstripe`/`getstripe` on directories and files, inheritance, and
//! `df` over several backends.

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Output};

use plfs::config::plfsrc;
use plfs::fs::{Options, Plfs};
use plfs::open::OpenFlags;
use serde_json::{Value, json};
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_plfs");

/// A mount over four backend directories with two pools and a default layout.
struct Setup {
    dir: TempDir,
    config: PathBuf,
    mount: PathBuf,
}

const DEFAULT: &str = "-E 1M -c 1 -S 1M -E 64M -c 4 -S 1M -E -1 -c -1 -S 1M";

impl Setup {
    fn new(extra: &str) -> Setup {
        let dir = tempfile::Builder::new().prefix("plfs-layout-test.").tempdir().unwrap();
        let mount = dir.path().join("mnt");
        let mut text = format!("- mount_point: {}\n  backends:\n", mount.display());
        for i in 0..4 {
            let backend = dir.path().join(format!("backend{i}"));
            fs::create_dir(&backend).unwrap();
            text.push_str(&format!("    - location: posix://{}\n", backend.display()));
        }
        text.push_str(&format!(
            "  pools:\n    fast: [0, 1]\n    slow: [{}, 3]\n{extra}",
            dir.path().join("backend2").display()
        ));
        let config = dir.path().join("plfsrc");
        fs::write(&config, text).unwrap();
        Setup { dir, config, mount }
    }

    fn plfs(&self, args: &[&str]) -> Output {
        Command::new(BIN).arg("--config").arg(&self.config).args(args).env_remove("PLFSRC").output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let output = self.plfs(args);
        assert!(
            output.status.success(),
            "plfs {args:?} failed ({:?}):\n{}{}",
            output.status.code(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    /// Requires exit code 1 and returns stderr.
    fn fails(&self, args: &[&str]) -> String {
        let output = self.plfs(args);
        assert_eq!(output.status.code(), Some(1), "plfs {args:?}: {output:?}");
        String::from_utf8(output.stderr).unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut with_json = args.to_vec();
        with_json.push("--json");
        serde_json::from_str(&self.ok(&with_json)).unwrap()
    }

    fn logical(&self, inside: &str) -> String {
        format!("{}/{inside}", self.mount.display())
    }

    fn library(&self) -> Plfs {
        let config = plfsrc::parse_file(&self.config).unwrap();
        Plfs::from_config(&config.mounts[0], Options::from_environment(config.tuning.clone())).unwrap()
    }
}

#[test]
fn setstripe_and_getstripe_on_directories_and_new_files() {
    let setup = Setup::new(&format!("  default_layout: {DEFAULT}\n"));
    let root = setup.json(&["getstripe", &setup.logical("")]);
    assert_eq!(root["layout"], DEFAULT);
    assert_eq!(root["source"], "mount-default");
    assert_eq!(root["components"][2]["stripes"], 4);

    setup.ok(&["mkdir", &setup.logical("d")]);
    setup.ok(&[
        "setstripe",
        "-E",
        "1M",
        "-c",
        "1",
        "-E",
        "-1",
        "-c",
        "-1",
        "-p",
        "fast",
        &setup.logical("d"),
    ]);
    let template = setup.json(&["getstripe", &setup.logical("d")]);
    assert_eq!(template["source"], "directory");
    assert_eq!(template["layout"], "-E 1M -c 1 -S 1M -E -1 -c -1 -S 1M -p fast");
    assert_eq!(
        template["components"][1],
        json!({"start": 1 << 20, "end": null, "stripe_count": -1, "stripes": 2, "stripe_size": 1 << 20,
               "pool": "fast", "pool_backends": [0, 1], "placed": []})
    );
    let text = setup.ok(&["getstripe", &setup.logical("d")]);
    assert!(
        text.contains("component 1: [1M, EOF)  stripe_count -1 (2 stripes)  stripe_size 1M  pool fast"),
        "{text}"
    );

    // A subdirectory copies the template; a file created there will get it.
    setup.ok(&["mkdir", &setup.logical("d/sub")]);
    assert_eq!(setup.json(&["getstripe", &setup.logical("d/sub")])["layout"], template["layout"]);
    assert_eq!(
        setup.library().layout_for_new_file_in("/d/sub").unwrap().map(|layout| layout.to_string()),
        Some("-E 1M -c 1 -S 1M -E -1 -c -1 -S 1M -p fast".to_owned())
    );

    // A file without data takes a layout; one with data refuses, naming it.
    let plfs = setup.library();
    plfs.open("/d/empty", OpenFlags::WRONLY.create(), 0o644, 1).unwrap().close().unwrap();
    setup.ok(&["setstripe", "-c", "2", "-S", "4M", &setup.logical("d/empty")]);
    let file = setup.json(&["getstripe", &setup.logical("d/empty")]);
    assert_eq!((file["source"].as_str(), file["layout"].as_str()), (Some("file"), Some("-E -1 -c 2 -S 4M")));
    assert_eq!(file["backends"], json!([]));
    let handle = plfs.open("/d/full", OpenFlags::WRONLY.create(), 0o644, 1).unwrap();
    handle.write(&[7; 100_000], 0).unwrap();
    handle.close().unwrap();
    let error = setup.fails(&["setstripe", "-c", "2", &setup.logical("d/full")]);
    assert!(error.contains("d/full: has data; a layout can only be set before the first write"), "{error}");
    let full = setup.json(&["getstripe", &setup.logical("d/full")]);
    let bytes: u64 = full["backends"].as_array().unwrap().iter().map(|b| b["bytes"].as_u64().unwrap()).sum();
    // The data log's size: the 100000 bytes and its header.
    assert!(bytes > 100_000 && bytes < 100_000 + 512, "{full}");
    assert!(
        setup.ok(&["getstripe", &setup.logical("d/full")]).contains(&format!("1 objects, {bytes} bytes"))
    );
    // Each placed stripe names its backend: the first component got one
    // stripe, on the backend that holds the data; the second none yet.
    let backend = full["backends"][0]["backend"].as_u64().unwrap();
    assert_eq!(full["components"][0]["placed"], json!([{"stripe": 0, "backend": backend}]), "{full}");
    assert_eq!(full["components"][1]["placed"], json!([]), "{full}");
    let text = setup.ok(&["getstripe", &setup.logical("d/full")]);
    assert!(text.contains(&format!("    stripes: s0@b{backend}\n")), "{text}");
    assert!(text.contains("    stripes: not placed yet\n"), "{text}");
    assert_eq!(file["components"][0]["placed"], json!([]), "{file}");

    // Bad layouts name the token and change nothing.
    for (args, expect) in [
        (vec!["-E", "1M", "-c", "0"], "-c 0: expected a stripe count of 1 or more"),
        (vec!["-c", "2", "-p", "nosuch"], "pool nosuch: no such pool on this mount (pools: fast, slow)"),
        (vec!["-S", "100K"], "stripe size 102400 is not a positive multiple of 64 KiB"),
        (vec!["-E", "1M", "-q", "3"], "-q: unknown option"),
    ] {
        let mut full_args = vec!["setstripe"];
        full_args.extend(args);
        let path = setup.logical("d");
        full_args.push(&path);
        let error = setup.fails(&full_args);
        assert!(error.contains(expect), "{full_args:?}: {error}");
    }
    assert_eq!(setup.json(&["getstripe", &setup.logical("d")])["layout"], template["layout"]);

    // -d removes the template: the mount default applies again.
    setup.ok(&["setstripe", "-d", &setup.logical("d")]);
    assert_eq!(setup.json(&["getstripe", &setup.logical("d")])["source"], "mount-default");
}

#[test]
fn check_config_shows_the_striping_keys_and_refuses_bad_ones() {
    let setup =
        Setup::new("  default_layout: -c -1 -p slow\n  stripe_imbalance_pct: 30\n  stripe_reserve: 1G\n");
    let text = setup.ok(&["check-config"]);
    for line in [
        "  default_layout: -E -1 -c -1 -S 1M -p slow",
        "  pool fast: backends 0, 1",
        "  pool slow: backends 2, 3",
        "  stripe_imbalance_pct: 30",
        "  stripe_reserve: 1G",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
    }
    let report = setup.json(&["check-config"]);
    assert_eq!(report["mounts"][0]["striping"]["pools"]["slow"], json!([2, 3]));

    let bad = Setup::new("  default_layout: -E 1M -c 1 -E 1M\n");
    let error = bad.fails(&["check-config"]);
    assert!(
        error.contains(&format!(
            "{}:10: default_layout: layout: -E 1M: component 2 must end past its start 1M",
            bad.config.display()
        )),
        "{error}"
    );
}

#[test]
fn df_lists_every_backend_and_counts_one_file_system_once() {
    let setup = Setup::new("");
    let report = setup.json(&["df", &setup.logical("")]);
    let mount = &report[0];
    assert_eq!(mount["mount_point"], setup.mount.display().to_string());
    let backends = mount["backends"].as_array().unwrap();
    assert_eq!(backends.len(), 4);
    // All four directories are on the file system holding the temporary
    // directory: the total is that file system once.
    let same: Vec<&Value> = backends.iter().map(|backend| &backend["same_filesystem_as"]).collect();
    assert_eq!(same, [&Value::Null, &json!(0), &json!(0), &json!(0)]);
    assert_eq!(mount["total"]["size_bytes"], backends[0]["size_bytes"]);
    assert_eq!(mount["total"]["inodes"], backends[0]["inodes"]);
    assert_eq!(mount["total"]["location"], "total (1 file systems)");
    let statvfs = Command::new("stat").args(["-f", "-c", "%S %b"]).arg(setup.dir.path()).output().unwrap();
    let fields: Vec<u64> =
        String::from_utf8(statvfs.stdout).unwrap().split_whitespace().map(|f| f.parse().unwrap()).collect();
    assert_eq!(mount["total"]["size_bytes"].as_u64(), Some(fields[0] * fields[1]));
    // Without a path: every mount of the plfsrc.
    let text = setup.ok(&["df"]);
    assert!(text.contains(&format!("Mount {}", setup.mount.display())), "{text}");
    assert!(text.contains("(same file system as 0)"), "{text}");
}

/// The backends `getstripe --json` reports data on, with their object counts.
fn objects_per_backend(report: &Value) -> Vec<(u64, u64)> {
    report["backends"]
        .as_array()
        .unwrap()
        .iter()
        .map(|backend| (backend["backend"].as_u64().unwrap(), backend["objects"].as_u64().unwrap()))
        .collect()
}

/// A plfsrc that names no layout stripes new files by the progressive
/// default: a small file is one data object on one backend, an 8 MiB file
/// spreads over all four; `default_layout: none` keeps one backend per host,
/// and a mount with one backend has no layout at all.
#[test]
fn without_a_layout_key_new_files_get_the_progressive_default() {
    let setup = Setup::new("");
    let root = setup.json(&["getstripe", &setup.logical("")]);
    assert_eq!((root["source"].as_str(), root["layout"].as_str()), (Some("mount-default"), Some(DEFAULT)));
    let small = setup.dir.path().join("small");
    let large = setup.dir.path().join("large");
    fs::write(&small, vec![3u8; 300_000]).unwrap();
    fs::write(&large, (0..8u32 << 20).map(|i| (i % 251) as u8).collect::<Vec<u8>>()).unwrap();
    for name in ["small", "large"] {
        setup.ok(&["cp", &setup.dir.path().join(name).display().to_string(), &setup.logical(name)]);
    }
    let small_report = setup.json(&["getstripe", &setup.logical("small")]);
    assert_eq!(small_report["layout"], DEFAULT, "{small_report}");
    assert_eq!(objects_per_backend(&small_report).len(), 1, "{small_report}");
    assert_eq!(objects_per_backend(&small_report)[0].1, 1, "{small_report}");
    let large_report = setup.json(&["getstripe", &setup.logical("large")]);
    let backends: Vec<u64> = objects_per_backend(&large_report).iter().map(|(backend, _)| *backend).collect();
    assert_eq!(backends, [0, 1, 2, 3], "{large_report}");
    let copy = setup.dir.path().join("large.back");
    setup.ok(&["cp", &setup.logical("large"), &copy.display().to_string()]);
    assert!(fs::read(&copy).unwrap() == fs::read(&large).unwrap(), "the 8 MiB file read back differs");

    // `default_layout: none`: the whole file on its host's one backend.
    let none = Setup::new("  default_layout: none\n");
    assert_eq!(none.json(&["getstripe", &none.logical("")])["source"], "none");
    none.ok(&["cp", &large.display().to_string(), &none.logical("large")]);
    let report = none.json(&["getstripe", &none.logical("large")]);
    assert_eq!(report["layout"], Value::Null, "{report}");
    assert_eq!(objects_per_backend(&report).len(), 1, "{report}");

    // One backend: nothing to spread over, so no layout and no layout records.
    let dir = tempfile::Builder::new().prefix("plfs-layout-test.").tempdir().unwrap();
    let backend = dir.path().join("backend");
    fs::create_dir(&backend).unwrap();
    let mount = dir.path().join("mnt");
    let config = dir.path().join("plfsrc");
    fs::write(&config, format!("- mount_point: {}\n  backends: [{}]\n", mount.display(), backend.display()))
        .unwrap();
    let plfs = |args: &[&str]| {
        let output = Command::new(BIN).arg("--config").arg(&config).args(args).env_remove("PLFSRC").output();
        let output = output.unwrap();
        assert!(output.status.success(), "plfs {args:?}: {output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    let logical = format!("{}/large", mount.display());
    plfs(&["cp", &large.display().to_string(), &logical]);
    let report: Value = serde_json::from_str(&plfs(&["getstripe", &logical, "--json"])).unwrap();
    assert_eq!(report["layout"], Value::Null, "{report}");
    let root: Value =
        serde_json::from_str(&plfs(&["getstripe", &mount.display().to_string(), "--json"])).unwrap();
    assert_eq!(root["source"], "none", "{root}");
}

/// Bytes `getstripe --json` reports on each of the four backends (data and
/// index logs), backend 0 first.
fn bytes_per_backend(report: &Value) -> Vec<u64> {
    let mut bytes = vec![0; 4];
    for backend in report["backends"].as_array().unwrap() {
        bytes[backend["backend"].as_u64().unwrap() as usize] = backend["bytes"].as_u64().unwrap();
    }
    bytes
}

/// A 16 MiB file under `-E 1M -c 1 -E 2M -c 2 -E -1 -c -1` (1 MiB stripes,
/// four backends) can hold exactly 4 MiB on every backend: its first two
/// components put 1 MiB on each of two backends, and the striped
/// component's 14 stripes go 4, 4, 3, 3, the 3s to those two. Placed by the
/// rotor alone, one backend got 5 MiB and another 3, and a shared file's
/// writers waited on the 5. Written by one `plfs cp`, and by four writers
/// (separate mounts, as separate processes) in an order where a writer
/// reaches the striped component before the file has a first byte: each
/// way, every backend carries the same bytes, to within the index logs'
/// records.
#[test]
fn a_progressive_file_spreads_its_bytes_evenly_over_the_backends() {
    const MIB: usize = 1 << 20;
    let setup = Setup::new("  default_layout: -E 1M -c 1 -E 2M -c 2 -E -1 -c -1\n");
    let data: Vec<u8> = (0..16 * MIB).map(|i| (i % 253) as u8).collect();
    let source = setup.dir.path().join("source");
    fs::write(&source, &data).unwrap();
    let even = |name: &str| {
        let report = setup.json(&["getstripe", &setup.logical(name)]);
        let bytes = bytes_per_backend(&report);
        let (least, most) = (*bytes.iter().min().unwrap(), *bytes.iter().max().unwrap());
        assert!(
            least >= 4 * MIB as u64 && most - least < 64 << 10,
            "{name}: bytes per backend {bytes:?}\n{report}"
        );
    };
    for round in 0..3 {
        let name = format!("copied.{round}");
        setup.ok(&["cp", &source.display().to_string(), &setup.logical(&name)]);
        even(&name);
    }
    // Writers of 4 MiB segments; the writer of [4M, 8M) goes first, so it
    // reaches the striped component before the file has a first byte.
    let config = plfsrc::parse_file(&setup.config).unwrap();
    for (round, order) in [[1usize, 0, 2, 3], [3, 2, 1, 0], [0, 1, 2, 3]].iter().enumerate() {
        let name = format!("shared.{round}");
        for (turn, &segment) in order.iter().enumerate() {
            let options =
                Options { pid: 1000 + turn as u32, ..Options::from_environment(config.tuning.clone()) };
            let plfs = Plfs::from_config(&config.mounts[0], options).unwrap();
            let flags = if turn == 0 { OpenFlags::WRONLY.create() } else { OpenFlags::WRONLY };
            let handle = plfs.open(&format!("/{name}"), flags, 0o644, segment as u64).unwrap();
            let offset = segment * 4 * MIB;
            for piece in (offset..offset + 4 * MIB).step_by(MIB) {
                handle.write(&data[piece..piece + MIB], piece as u64).unwrap();
            }
            handle.close().unwrap();
        }
        even(&name);
        let copy = setup.dir.path().join(format!("{name}.back"));
        setup.ok(&["cp", &setup.logical(&name), &copy.display().to_string()]);
        assert!(fs::read(&copy).unwrap() == data, "{name} read back differs");
    }
    // The four writers at once, released together (as `plfs bench stripe`'s
    // shared file is written): whichever reaches which component first.
    for round in 0..3 {
        let name = format!("concurrent.{round}");
        let options = |pid| Options { pid, ..Options::from_environment(config.tuning.clone()) };
        let first = Plfs::from_config(&config.mounts[0], options(2000)).unwrap();
        first.open(&format!("/{name}"), OpenFlags::WRONLY.create(), 0o644, 0).unwrap().close().unwrap();
        let barrier = std::sync::Barrier::new(4);
        std::thread::scope(|scope| {
            for segment in 0..4usize {
                let (barrier, data, config, name) = (&barrier, &data, &config, &name);
                scope.spawn(move || {
                    let plfs = Plfs::from_config(&config.mounts[0], options(2001 + segment as u32)).unwrap();
                    let handle =
                        plfs.open(&format!("/{name}"), OpenFlags::WRONLY, 0, segment as u64).unwrap();
                    barrier.wait();
                    let offset = segment * 4 * MIB;
                    for piece in (offset..offset + 4 * MIB).step_by(MIB) {
                        handle.write(&data[piece..piece + MIB], piece as u64).unwrap();
                    }
                    handle.close().unwrap();
                });
            }
        });
        even(&name);
    }
}
