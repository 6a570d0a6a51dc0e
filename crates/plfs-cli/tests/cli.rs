//! The `plfs` binary, driven as a user would: every test writes its own
//! plfsrc over temporary backend directories and passes it with --config,
//! so neither $HOME nor /etc is ever read.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use plfs::config::plfsrc;
use plfs::fs::{Options, Plfs};
use plfs::open::OpenFlags;
use serde_json::Value;
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_plfs");

/// A mount over three backend directories, and a scratch area outside it.
struct Setup {
    dir: TempDir,
    config: PathBuf,
    mount: PathBuf,
    backends: Vec<PathBuf>,
}

impl Setup {
    fn new() -> Setup {
        Setup::with_backends(true)
    }

    /// With `default_layout: none`: one hostdir backend per host, for the
    /// tests that count logs per writer or edit a log at a known offset.
    fn without_layout() -> Setup {
        let setup = Setup::new();
        let mut text = fs::read_to_string(&setup.config).unwrap();
        text = text.replace("  workload: shared_file\n", "  workload: shared_file\n  default_layout: none\n");
        fs::write(&setup.config, text).unwrap();
        setup
    }

    fn with_backends(create: bool) -> Setup {
        let dir = tempfile::Builder::new().prefix("plfs-cli-test.").tempdir().unwrap();
        let backends: Vec<PathBuf> = (0..3).map(|i| dir.path().join(format!("backend{i}"))).collect();
        if create {
            for backend in &backends {
                fs::create_dir(backend).unwrap();
            }
        }
        fs::create_dir(dir.path().join("scratch")).unwrap();
        let mount = dir.path().join("mnt");
        let config = dir.path().join("plfsrc");
        let mut text = format!("- mount_point: {}\n  workload: shared_file\n  backends:\n", mount.display());
        for backend in &backends {
            text.push_str(&format!("    - location: posix://{}\n", backend.display()));
        }
        fs::write(&config, text).unwrap();
        Setup { dir, config, mount, backends }
    }

    fn plfs(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .env_remove("PLFSRC")
            .env("TMPDIR", self.dir.path())
            .output()
            .unwrap()
    }

    /// Runs and requires exit code 0; returns stdout.
    fn ok(&self, args: &[&str]) -> String {
        let output = self.plfs(args);
        assert!(
            output.status.success(),
            "plfs {args:?} failed ({:?}):\nstdout: {}\nstderr: {}",
            output.status.code(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut with_json = args.to_vec();
        with_json.push("--json");
        serde_json::from_str(&self.ok(&with_json)).unwrap()
    }

    /// A path inside the mount, as the user types it.
    fn logical(&self, inside: &str) -> String {
        format!("{}/{inside}", self.mount.display())
    }

    fn scratch(&self, name: &str) -> PathBuf {
        self.dir.path().join("scratch").join(name)
    }

    /// The same mount the binary opens, for writing known patterns.
    fn library(&self) -> Plfs {
        let config = plfsrc::parse_file(&self.config).unwrap();
        Plfs::from_config(&config.mounts[0], Options::from_environment(config.tuning.clone())).unwrap()
    }
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn code(output: &Output) -> Option<i32> {
    output.status.code()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Deterministic pseudo-random bytes (xorshift64*), written in pieces so a
/// 100 MB file never sits in memory twice.
fn write_random(path: &Path, size: u64, seed: u64) {
    let mut file = fs::File::create(path).unwrap();
    let mut state = seed | 1;
    let mut buf = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        for chunk in buf[..n].chunks_mut(8) {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            let word = state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
        file.write_all(&buf[..n]).unwrap();
        left -= n as u64;
    }
}

/// Compares two files in pieces, naming the first differing offset.
fn assert_same_file(a: &Path, b: &Path) {
    let (fa, fb) = (fs::File::open(a).unwrap(), fs::File::open(b).unwrap());
    let size = fa.metadata().unwrap().len();
    assert_eq!(size, fb.metadata().unwrap().len(), "sizes of {} and {}", a.display(), b.display());
    let (mut ba, mut bb) = (vec![0u8; 4 << 20], vec![0u8; 4 << 20]);
    let mut offset = 0;
    while offset < size {
        let n = (size - offset).min(ba.len() as u64) as usize;
        fa.read_exact_at(&mut ba[..n], offset).unwrap();
        fb.read_exact_at(&mut bb[..n], offset).unwrap();
        if ba[..n] != bb[..n] {
            let at = ba[..n].iter().zip(&bb[..n]).position(|(x, y)| x != y).unwrap();
            panic!("{} and {} differ at byte {}", a.display(), b.display(), offset + at as u64);
        }
        offset += n as u64;
    }
}

/// Copies `source` into plfs and back out, checking size and bytes.
fn round_trip(setup: &Setup, source: &Path, name: &str, threads: &str) {
    let logical = setup.logical(name);
    setup.ok(&["cp", "--threads", threads, s(source), &logical]);
    let stat = setup.json(&["stat", &logical]);
    assert_eq!(stat["size"], fs::metadata(source).unwrap().len(), "{stat}");
    let back = setup.scratch(&format!("{name}.back"));
    setup.ok(&["cp", &logical, s(&back)]);
    assert_same_file(source, &back);
}

#[test]
fn cp_round_trips_empty_and_one_byte_files() {
    let setup = Setup::new();
    let empty = setup.scratch("empty");
    fs::write(&empty, b"").unwrap();
    round_trip(&setup, &empty, "empty", "4");
    let one = setup.scratch("one");
    fs::write(&one, b"\x7f").unwrap();
    round_trip(&setup, &one, "one", "4");
    // One byte is one writer's record, whatever the thread count.
    assert_eq!(setup.json(&["map", "--totals", &setup.logical("one")])["writers"], 1);
}

#[test]
fn cp_keeps_sparse_files_sparse_both_ways() {
    let setup = Setup::new();
    let sparse = setup.scratch("sparse");
    let offset = 64 << 20;
    fs::File::create(&sparse).unwrap().write_all_at(b"!", offset).unwrap();
    round_trip(&setup, &sparse, "sparse", "4");
    let totals = setup.json(&["map", "--totals", &setup.logical("sparse")]);
    assert_eq!(totals["data_bytes"], 1, "{totals}");
    assert_eq!(totals["holes"], 1, "{totals}");
    assert_eq!(totals["hole_bytes"], offset, "{totals}");
    assert_eq!(totals["eof"], offset + 1, "{totals}");
    let back = fs::metadata(setup.scratch("sparse.back")).unwrap();
    assert!(back.blocks() * 512 < 1 << 20, "copy out allocated {} blocks", back.blocks());
}

#[test]
fn cp_round_trips_100_mb_and_copies_plfs_to_plfs() {
    let setup = Setup::without_layout();
    let big = setup.scratch("big");
    write_random(&big, 100_000_000, 42);
    round_trip(&setup, &big, "big", "4");
    // Four stripes, four writers, each its own log.
    let totals = setup.json(&["map", "--totals", &setup.logical("big")]);
    assert_eq!(totals["writers"], 4, "{totals}");
    assert_eq!(totals["logs"], 4, "{totals}");
    assert_eq!(totals["data_bytes"], 100_000_000u64, "{totals}");

    setup.ok(&["mkdir", &setup.logical("copies")]);
    setup.ok(&["cp", "--threads", "3", &setup.logical("big"), &setup.logical("copies")]);
    let again = setup.scratch("big.again");
    setup.ok(&["cp", &setup.logical("copies/big"), s(&again)]);
    assert_same_file(&big, &again);
}

#[test]
fn cp_into_a_directory_preserves_the_mode() {
    let setup = Setup::new();
    let source = setup.scratch("moded");
    write_random(&source, 5000, 7);
    fs::set_permissions(&source, fs::Permissions::from_mode(0o640)).unwrap();
    setup.ok(&["mkdir", &setup.logical("dir")]);
    setup.ok(&["cp", s(&source), &setup.logical("dir")]);
    let stat = setup.json(&["stat", &setup.logical("dir/moded")]);
    assert_eq!(stat["mode"], 0o640, "{stat}");
    let out_dir = setup.scratch("out");
    fs::create_dir(&out_dir).unwrap();
    setup.ok(&["cp", &setup.logical("dir/moded"), s(&out_dir)]);
    let copied = out_dir.join("moded");
    assert_same_file(&source, &copied);
    assert_eq!(fs::metadata(&copied).unwrap().permissions().mode() & 0o7777, 0o640);
}

#[test]
fn map_shows_a_known_strided_pattern_exactly() {
    let setup = Setup::new();
    let plfs = setup.library();
    let handle = plfs.open("/strided", OpenFlags::WRONLY.create(), 0o644, 0).unwrap();
    // Record k of 1000 bytes at offset 1000k, by writer k mod 3, then one
    // record past a hole.
    for k in 0..12u64 {
        let record = vec![k as u8 + 1; 1000];
        handle.write_as(&record, k * 1000, k % 3).unwrap();
    }
    handle.write_as(&[0xEE; 100], 20_000, 0).unwrap();
    handle.close().unwrap();

    let map = setup.json(&["map", &setup.logical("strided")]);
    let totals = &map["totals"];
    assert_eq!(totals["writers"], 3, "{totals}");
    assert_eq!(totals["logs"], 3, "{totals}");
    // Each writer's strided records are one pattern record; writer 0's
    // last, shorter write is a record of its own.
    assert_eq!(totals["records"], 4, "{totals}");
    assert_eq!(totals["extents"], 13, "{totals}");
    assert_eq!(totals["index_entries"], 4, "{totals}");
    assert_eq!(totals["data_bytes"], 12_100, "{totals}");
    assert_eq!(totals["holes"], 1, "{totals}");
    assert_eq!(totals["hole_bytes"], 8000, "{totals}");
    assert_eq!(totals["eof"], 20_100, "{totals}");

    let entries = map["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 13);
    let first_physical: Vec<u64> =
        (0..3).map(|writer| entries[writer]["physical"].as_u64().unwrap()).collect();
    for (k, entry) in entries.iter().take(12).enumerate() {
        let k = k as u64;
        assert_eq!(entry["logical"], k * 1000, "{entry}");
        assert_eq!(entry["length"], 1000, "{entry}");
        assert_eq!(entry["writer"], k % 3, "{entry}");
        // Each writer appends to its own data log, record after record.
        assert_eq!(entry["physical"], first_physical[(k % 3) as usize] + (k / 3) * 1000, "{entry}");
        assert_eq!(entry["log"], entries[(k % 3) as usize]["log"], "{entry}");
    }
    assert_eq!(entries[12]["logical"], 20_000);
    assert_eq!(entries[12]["length"], 100);
    assert_eq!(entries[12]["writer"], 0);
    assert_eq!(entries[12]["physical"], first_physical[0] + 4000);
    // The log is named by its backend URL and path, and is really there.
    let log = entries[0]["log"].as_str().unwrap();
    let log_file = PathBuf::from(log.strip_prefix("posix://").unwrap());
    assert!(log_file.is_file(), "{log}");

    let text = setup.ok(&["map", "--totals", &setup.logical("strided")]);
    assert!(text.contains("writers     3"), "{text}");
    assert!(text.contains("holes       1 (8000 bytes)"), "{text}");
}

#[test]
fn recover_finds_a_torn_index_tail_and_fixes_it() {
    let setup = Setup::new();
    let source = setup.scratch("data");
    write_random(&source, 3_000_000, 3);
    let logical = setup.logical("torn");
    setup.ok(&["cp", "--threads", "2", s(&source), &logical]);

    let query = setup.json(&["query", &logical]);
    let index = query["pieces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|piece| piece["kind"] == "index-log")
        .unwrap_or_else(|| panic!("no index log in {query}"));
    let root = index["backend"].as_str().unwrap().strip_prefix("posix://").unwrap();
    let index_file = Path::new(root).join(index["path"].as_str().unwrap());
    fs::OpenOptions::new().append(true).open(&index_file).unwrap().write_all(b"torn frame tail!").unwrap();

    let found = setup.plfs(&["recover", "--json", &logical]);
    assert_eq!(code(&found), Some(1), "{}", stderr(&found));
    let report: Value = serde_json::from_slice(&found.stdout).unwrap();
    let findings = report["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{report}");
    assert_eq!(findings[0]["problem"], "torn-index-tail");
    assert_eq!(findings[0]["fixed"], false);
    assert!(findings[0]["location"].as_str().unwrap().ends_with(index["path"].as_str().unwrap()));

    let fixed = setup.json(&["recover", "--fix", &logical]);
    assert_eq!(fixed["findings"][0]["fixed"], true, "{fixed}");
    assert_eq!(fixed["unfixed"], 0);
    let clean = setup.json(&["recover", &logical]);
    assert_eq!(clean["findings"].as_array().unwrap().len(), 0, "{clean}");
    assert!(setup.ok(&["recover", &logical]).contains("no problems found"));

    let back = setup.scratch("data.back");
    setup.ok(&["cp", &logical, s(&back)]);
    assert_same_file(&source, &back);
}

#[test]
fn check_config_reports_and_creates_missing_backends() {
    let setup = Setup::with_backends(false);
    let missing = setup.plfs(&["check-config"]);
    assert_eq!(code(&missing), Some(1));
    let text = String::from_utf8_lossy(&missing.stdout);
    assert!(text.contains("MISSING"), "{text}");
    assert!(text.contains(&setup.mount.display().to_string()), "{text}");

    let created = setup.json(&["check-config", "--mkdir"]);
    assert!(setup.backends.iter().all(|backend| backend.is_dir()));
    let backends = created["mounts"][0]["backends"].as_array().unwrap();
    assert_eq!(backends.len(), 3);
    assert!(backends.iter().all(|backend| backend["status"] == "created"), "{created}");
    assert_eq!(backends[0]["role"], "untyped");
    assert_eq!(backends[0]["location"], format!("posix://{}", setup.backends[0].display()));
    assert_eq!(created["mounts"][0]["mount_point_exists"], false);
    assert_eq!(created["files"][0], s(&setup.config));

    let again = setup.json(&["check-config"]);
    assert_eq!(again["problems"].as_array().unwrap().len(), 0, "{again}");
}

#[test]
fn check_config_shows_backend_roles() {
    let setup = Setup::new();
    let typed = setup.dir.path().join("typed.plfsrc");
    let text = format!(
        "- global_params:\n  num_hostdirs: 5\n- mount_point: /typed/mnt\n  backends:\n    \
         - location: {}\n      type: canonical\n    - location: {}\n      type: shadow\n",
        setup.backends[0].display(),
        setup.backends[1].display()
    );
    fs::write(&typed, text).unwrap();
    let output = Command::new(BIN).args(["--config", s(&typed), "check-config", "--json"]).output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["global_params"]["num_hostdirs"], 5);
    let backends = &report["mounts"][0]["backends"];
    assert_eq!(backends[0]["role"], "CANONICAL");
    assert_eq!(backends[1]["role"], "SHADOW");
}

#[test]
fn errors_have_the_documented_exit_codes() {
    let setup = Setup::new();
    let missing = setup.logical("no/such/file");
    let output = setup.plfs(&["stat", &missing]);
    assert_eq!(code(&output), Some(1));
    assert!(stderr(&output).contains(&format!("plfs: stat: {missing}")), "{}", stderr(&output));
    let output = setup.plfs(&["cp", &missing, s(&setup.scratch("x"))]);
    assert_eq!(code(&output), Some(1));
    assert!(stderr(&output).contains(&missing), "{}", stderr(&output));

    let bad = setup.dir.path().join("bad.plfsrc");
    fs::write(&bad, "- global_params:\n  num_hostdirs: 7\n  no_such_key: 1\n").unwrap();
    let output = Command::new(BIN).args(["--config", s(&bad), "ls", "/anywhere"]).output().unwrap();
    assert_eq!(code(&output), Some(1));
    assert!(stderr(&output).contains(&format!("{}:3", bad.display())), "{}", stderr(&output));
    assert!(stderr(&output).contains("no_such_key"), "{}", stderr(&output));

    let output = setup.plfs(&["no-such-command"]);
    assert_eq!(code(&output), Some(2));
    let output = setup.plfs(&["cp", "only-one-argument"]);
    assert_eq!(code(&output), Some(2));

    // An ordinary path where only plfs files make sense.
    let output = setup.plfs(&["map", s(&setup.scratch("plain"))]);
    assert_eq!(code(&output), Some(1));
    assert!(stderr(&output).contains("not under a plfs mount point"), "{}", stderr(&output));
}

#[test]
fn ls_stat_mkdir_mv_rm_work_without_fuse() {
    let setup = Setup::new();
    setup.ok(&["mkdir", "-p", &setup.logical("a/b/c")]);
    setup.ok(&["mkdir", "-p", &setup.logical("a/b")]);
    let second = setup.plfs(&["mkdir", &setup.logical("a")]);
    assert_eq!(code(&second), Some(1), "mkdir of an existing directory without -p");
    let source = setup.scratch("f");
    write_random(&source, 12_345, 5);
    setup.ok(&["cp", s(&source), &setup.logical("a/f")]);

    let listing = setup.json(&["ls", &setup.logical("a")]);
    let names: Vec<(&str, &str)> = listing
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| (entry["name"].as_str().unwrap(), entry["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(names, vec![("b", "directory"), ("f", "file")]);
    let long = setup.ok(&["ls", "-l", &setup.logical("a")]);
    assert!(
        long.lines().any(|line| line.starts_with("-rw") && line.contains("12345") && line.ends_with(" f")),
        "{long}"
    );
    assert!(long.lines().any(|line| line.starts_with('d') && line.ends_with(" b")), "{long}");

    let stat = setup.json(&["stat", &setup.logical("a/f")]);
    assert_eq!(stat["kind"], "file");
    assert_eq!(stat["size"], 12_345);
    assert_eq!(setup.json(&["stat", &setup.logical("a/b")])["kind"], "directory");
    assert!(setup.ok(&["stat", &setup.logical("a/f")]).contains("Size: 12345"));

    setup.ok(&["mv", &setup.logical("a/f"), &setup.logical("a/g")]);
    setup.ok(&["mv", &setup.logical("a/g"), &setup.logical("a/b")]);
    let back = setup.scratch("g.back");
    setup.ok(&["cp", &setup.logical("a/b/g"), s(&back)]);
    assert_same_file(&source, &back);

    let refused = setup.plfs(&["rm", &setup.logical("a")]);
    assert_eq!(code(&refused), Some(1));
    assert!(stderr(&refused).contains("is a directory"), "{}", stderr(&refused));
    setup.ok(&["rm", &setup.logical("a/b/g")]);
    assert_eq!(code(&setup.plfs(&["stat", &setup.logical("a/b/g")])), Some(1));
    setup.ok(&["cp", s(&source), &setup.logical("a/b/c/deep")]);
    setup.ok(&["rm", "-r", &setup.logical("a")]);
    assert_eq!(setup.json(&["ls", &setup.logical("")]), serde_json::json!([]));
    setup.ok(&["rm", "-f", &setup.logical("a")]);
}

#[test]
fn version_names_the_library_and_the_file_format() {
    let setup = Setup::new();
    let text = setup.ok(&["version"]);
    assert!(text.contains(&format!("plfs library {}", env!("CARGO_PKG_VERSION"))), "{text}");
    let source = setup.scratch("v");
    fs::write(&source, b"versioned").unwrap();
    setup.ok(&["cp", s(&source), &setup.logical("v")]);
    let report = setup.json(&["version", &setup.logical("v")]);
    assert_eq!(report["file"]["format_version"], report["format_version"]);
    assert_eq!(report["file"]["library_version"], env!("CARGO_PKG_VERSION"));
}

#[test]
fn flatten_writes_a_global_index_that_reads_back_the_same() {
    let setup = Setup::without_layout();
    let source = setup.scratch("flat");
    write_random(&source, 9_000_000, 11);
    let logical = setup.logical("flat");
    setup.ok(&["cp", "--threads", "3", s(&source), &logical]);
    let report = setup.json(&["flatten", &logical]);
    assert_eq!(report["logs"], 3, "{report}");
    assert_eq!(report["eof"], 9_000_000, "{report}");
    assert_eq!(report["bytes"], 9_000_000, "{report}");
    let query = setup.json(&["query", &logical]);
    assert!(
        query["pieces"].as_array().unwrap().iter().any(|piece| piece["kind"] == "global-index"),
        "{query}"
    );
    let back = setup.scratch("flat.back");
    setup.ok(&["cp", &logical, s(&back)]);
    assert_same_file(&source, &back);
}

#[test]
fn query_maps_physical_pieces_back_to_the_logical_file() {
    let setup = Setup::new();
    let source = setup.scratch("q");
    write_random(&source, 100_000, 13);
    setup.ok(&["mkdir", &setup.logical("dir")]);
    let logical = setup.logical("dir/q");
    setup.ok(&["cp", s(&source), &logical]);
    let query = setup.json(&["query", &logical]);
    let pieces = query["pieces"].as_array().unwrap();
    for kind in ["container", "access", "version", "data-log", "index-log"] {
        assert!(pieces.iter().any(|piece| piece["kind"] == kind), "no {kind} in {query}");
    }
    let data = pieces.iter().find(|piece| piece["kind"] == "data-log").unwrap();
    assert!(data["bytes"].as_u64().unwrap() >= 100_000, "{data}");
    let root = data["backend"].as_str().unwrap().strip_prefix("posix://").unwrap();
    let physical = Path::new(root).join(data["path"].as_str().unwrap());
    let owner = setup.json(&["query", s(&physical)]);
    assert_eq!(owner["logical"], logical.as_str());
    assert_eq!(owner["mount_point"], s(&setup.mount));
}

#[test]
fn demo_runs_without_a_config_and_cleans_up() {
    let scratch = tempfile::Builder::new().prefix("plfs-cli-demo.").tempdir().unwrap();
    let output = Command::new(BIN)
        .args(["demo", "--records", "20"])
        .env_remove("PLFSRC")
        .env("HOME", scratch.path())
        .env("TMPDIR", scratch.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}\n{}", stderr(&output));
    assert!(text.contains("verified: every byte"), "{text}");
    assert!(text.contains("index-log"), "{text}");
    assert!(text.contains("writers     4"), "{text}");
    assert_eq!(fs::read_dir(scratch.path()).unwrap().count(), 0, "demo left files behind");
}

#[test]
fn bench_routes_workers_through_the_hidden_subcommand() {
    let scratch = tempfile::Builder::new().prefix("plfs-cli-bench.").tempdir().unwrap();
    let output = Command::new(BIN)
        .args([
            "bench",
            "n1-segmented",
            "--writers",
            "2",
            "--records",
            "8",
            "--size",
            "1000",
            "--read",
            "--json",
        ])
        .arg("--dir")
        .arg(scratch.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["verified"], true, "{report}");
    assert_eq!(report["total_bytes"], 16_000);
    assert!(report["read_plfs_mibs"].as_f64().unwrap() > 0.0, "{report}");
    assert_eq!(fs::read_dir(scratch.path()).unwrap().count(), 0, "bench left files behind");
}

#[test]
fn bench_index_compresses_strided_writers_and_verifies_lookups() {
    let setup = Setup::new();
    let report = setup.json(&[
        "bench",
        "index",
        "--writers",
        "64",
        "--records",
        "500",
        "--size",
        "47001",
        "--lookups",
        "20000",
        "--random-writes",
        "5000",
    ]);
    let cases = report["cases"].as_array().unwrap();
    let strided = &cases[0];
    assert_eq!(strided["name"], "strided");
    assert_eq!(strided["writes"], 64 * 500);
    // One pattern record per writer, one group slot each.
    assert_eq!(strided["records_stored"], 64);
    assert_eq!(strided["entries"], 64);
    assert_eq!(strided["verified"], true);
    let random = &cases[1];
    assert_eq!(random["records_stored"], 5000);
    assert_eq!(random["verified"], true);
    assert!(random["memory_bytes_per_write"].as_f64().unwrap() <= 40.0, "{random}");
}

#[test]
fn check_config_asks_remote_stores() {
    let Some(server) = plfs::store::test_server::TestServer::start("s3", &[]) else { return };
    let setup = Setup::new();
    let live = server.url().replacen("/?", "/checked?", 1);
    let dead = "s3://nobucket/p?endpoint=http://127.0.0.1:1";
    let config = setup.dir.path().join("remote.plfsrc");
    fs::write(&config, format!("- mount_point: /remote/mnt\n  backends:\n    - location: \"{live}\"\n    - location: \"{dead}\"\n"))
        .unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["--config", s(&config), "check-config"];
        args.extend_from_slice(extra);
        Command::new(BIN).args(&args).env_remove("AWS_ACCESS_KEY_ID").output().unwrap()
    };
    let output = run(&["--mkdir"]);
    assert_eq!(code(&output), Some(1), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    let dead_line = text
        .lines()
        .find(|line| line.starts_with("problem:") && line.contains("UNREACHABLE"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(dead_line.contains("s3://nobucket/p") && dead_line.contains("127.0.0.1:1"), "{text}");
    // No credentials is said as such, before any request (none goes to a
    // cloud metadata service).
    assert!(dead_line.contains("no credentials"), "{text}");
    assert!(!text.contains("aws_secret_access_key") && !text.contains("secret"), "{text}");

    let report: Value = serde_json::from_slice(&run(&["--json"]).stdout).unwrap();
    let backends = &report["mounts"][0]["backends"];
    assert_eq!(backends[0]["status"], "ok", "{report}");
    assert_eq!(backends[1]["status"], "unreachable", "{report}");
}

/// A port nothing listens on (it was free a moment ago).
fn refused_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `check-config [--mkdir]` over `remote.plfsrc`, one mount over
/// `backends`: (exit code, stdout).
fn check_remote(setup: &Setup, backends: &[String], mkdir: bool) -> (Option<i32>, String) {
    let config = setup.dir.path().join("remote.plfsrc");
    let mut text = format!("- mount_point: {}\n  backends:\n", s(&setup.mount));
    for backend in backends {
        text.push_str(&format!("    - location: \"{backend}\"\n"));
    }
    fs::write(&config, text).unwrap();
    let mut args = vec!["--config", s(&config), "check-config"];
    if mkdir {
        args.push("--mkdir");
    }
    let output = Command::new(BIN).args(&args).env_remove("AWS_ACCESS_KEY_ID").output().unwrap();
    (code(&output), String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The problem line of `backend` in check-config's text output.
fn problem_of<'a>(text: &'a str, backend: &str) -> &'a str {
    text.lines()
        .find(|line| line.starts_with("problem:") && line.contains(&format!("backend {backend}: ")))
        .unwrap_or_else(|| panic!("no problem line for {backend}:\n{text}"))
}

/// A new HDFS user's first step: the backend directory does not exist yet.
/// check-config calls it MISSING (not UNREACHABLE), --mkdir makes it, and
/// plfs then writes there; a NameNode port nobody listens on is
/// UNREACHABLE, in the client's words.
#[test]
fn check_config_creates_a_missing_hdfs_root() {
    let Some(server) = plfs::store::test_server::TestServer::start("hdfs", &[]) else { return };
    let setup = Setup::new();
    let root = format!("{}/new/plfs", server.url().trim_end_matches('/'));
    let dead = format!("hdfs://127.0.0.1:{}/plfs", refused_port());
    let backends = [root.clone(), dead.clone()];

    let (status, text) = check_remote(&setup, &backends, false);
    assert_eq!(status, Some(1), "{text}");
    let missing = problem_of(&text, &root);
    assert!(missing.contains(": MISSING (") && missing.contains("not found"), "{text}");
    let unreachable = problem_of(&text, &dead);
    assert!(unreachable.contains(": UNREACHABLE (") && unreachable.contains("Connection refused"), "{text}");
    assert!(text.contains("run with --mkdir"), "{text}");

    let (status, text) = check_remote(&setup, &backends, true);
    assert_eq!(status, Some(1), "the dead NameNode is still a problem:\n{text}");
    assert!(text.contains(&format!("{root} [created]")), "{text}");
    assert!(!text.contains(&format!("backend {root}: ")), "{text}");

    let (status, text) = check_remote(&setup, &backends[..1], false);
    assert_eq!(status, Some(0), "{text}");
    assert!(text.contains(&format!("{root} [ok]")), "{text}");
    // The created root is a usable backend.
    let source = setup.scratch("source");
    fs::write(&source, b"first steps on hdfs").unwrap();
    let config = setup.dir.path().join("remote.plfsrc");
    let logical = setup.mount.join("f");
    let copy =
        Command::new(BIN).args(["--config", s(&config), "cp", s(&source), s(&logical)]).output().unwrap();
    assert!(copy.status.success(), "plfs cp onto the created root: {}", stderr(&copy));
    let back = setup.scratch("back");
    let copy =
        Command::new(BIN).args(["--config", s(&config), "cp", s(&logical), s(&back)]).output().unwrap();
    assert!(copy.status.success(), "plfs cp back: {}", stderr(&copy));
    assert_eq!(fs::read(&back).unwrap(), b"first steps on hdfs");
}

/// The same on S3: a prefix with nothing under it is MISSING until --mkdir
/// marks it; a bucket that does not exist is MISSING in the server's words
/// (plfs creates no buckets); bad credentials and a refused connection are
/// UNREACHABLE, in the server's and the client's words.
#[test]
fn check_config_creates_a_missing_s3_root() {
    let Some(server) = plfs::store::test_server::TestServer::start("s3", &[]) else { return };
    let setup = Setup::new();
    let fresh = server.url().replacen("/?", "/fresh/root?", 1);
    let no_bucket = server.url().replacen("plfs-test/?", "no-such-bucket/p?", 1);
    let bad_credentials = setup.scratch("bad-credentials");
    fs::write(&bad_credentials, "aws_access_key_id = nobody\naws_secret_access_key = not-the-secret-4711\n")
        .unwrap();
    let (_, query) = server.url().split_once("credentials_file=").unwrap();
    let forged = server.url().replacen("/?", "/q?", 1).replacen(query, s(&bad_credentials), 1);
    let endpoint = server.url().split("endpoint=").nth(1).unwrap().split('&').next().unwrap().to_owned();
    let dead = server.url().replacen("/?", "/r?", 1).replacen(
        &endpoint,
        &format!("http://127.0.0.1:{}", refused_port()),
        1,
    );
    let backends = [fresh.clone(), no_bucket.clone(), forged.clone(), dead.clone()];

    let (status, text) = check_remote(&setup, &backends, false);
    assert_eq!(status, Some(1), "{text}");
    assert!(problem_of(&text, &fresh).contains(": MISSING ("), "{text}");
    let bucket = problem_of(&text, &no_bucket);
    assert!(bucket.contains(": MISSING (") && bucket.contains("NoSuchBucket"), "{text}");
    let refused = problem_of(&text, &forged);
    assert!(refused.contains(": UNREACHABLE (") && refused.contains("InvalidAccessKeyId"), "{text}");
    assert!(!text.contains("not-the-secret-4711"), "a secret was printed:\n{text}");
    let unreachable = problem_of(&text, &dead);
    assert!(unreachable.contains(": UNREACHABLE (") && unreachable.contains("Connection refused"), "{text}");

    let (status, text) = check_remote(&setup, &backends, true);
    assert_eq!(status, Some(1), "{text}");
    assert!(text.contains(&format!("{fresh} [created]")), "{text}");
    assert!(problem_of(&text, &no_bucket).contains("create the bucket"), "{text}");

    let (status, text) = check_remote(&setup, &backends[..1], false);
    assert_eq!(status, Some(0), "{text}");
    assert!(text.contains(&format!("{fresh} [ok]")), "{text}");
}

/// The backend file of the first piece of `kind` that `plfs query` lists.
fn piece_file(setup: &Setup, logical: &str, kind: &str) -> (PathBuf, String) {
    let query = setup.json(&["query", logical]);
    let piece = query["pieces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|piece| piece["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {query}"))
        .clone();
    let root = piece["backend"].as_str().unwrap().strip_prefix("posix://").unwrap();
    let path = piece["path"].as_str().unwrap().to_owned();
    (Path::new(root).join(&path), path)
}

fn flip_byte(file: &Path, offset: u64) {
    let handle = fs::OpenOptions::new().read(true).write(true).open(file).unwrap();
    let mut byte = [0u8];
    handle.read_exact_at(&mut byte, offset).unwrap();
    handle.write_all_at(&[byte[0] ^ 0x40], offset).unwrap();
}

fn findings(report: &Value) -> Vec<(String, bool)> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["problem"].as_str().unwrap().to_owned(), f["fixed"].as_bool().unwrap()))
        .collect()
}

#[test]
fn cp_out_of_a_file_with_a_flipped_data_byte_fails_naming_the_log_and_offset() {
    let setup = Setup::without_layout();
    let source = setup.scratch("data");
    // Two whole 4 MiB chunks (one pattern record) and a shorter last write.
    write_random(&source, 10_000_000, 5);
    let logical = setup.logical("flipped");
    setup.ok(&["cp", "--threads", "1", s(&source), &logical]);
    let (data_file, data_path) = piece_file(&setup, &logical, "data-log");
    let header = fs::metadata(&data_file).unwrap().len() - 10_000_000;
    for damaged in [header + 5_000_000, header + 9_000_000] {
        flip_byte(&data_file, damaged);
        let back = setup.scratch("back");
        let copied = setup.plfs(&["cp", "--threads", "1", &logical, s(&back)]);
        assert_ne!(code(&copied), Some(0), "cp returned the flipped byte");
        let error = stderr(&copied);
        assert!(error.contains(&format!("{data_path}: ")), "{error}");
        assert!(
            error.contains(&format!("at offset {header} fail their checksum"))
                || error.contains(&format!("at offset {} fail their checksum", header + 2 * (4 << 20))),
            "{error}"
        );
        let verify = setup.plfs(&["recover", "--verify", "--json", &logical]);
        assert_eq!(code(&verify), Some(1));
        let report: Value = serde_json::from_slice(&verify.stdout).unwrap();
        assert_eq!(findings(&report), vec![("data-checksum-mismatch".to_owned(), false)], "{report}");
        flip_byte(&data_file, damaged);
        setup.ok(&["cp", "--threads", "1", &logical, s(&back)]);
        assert_same_file(&source, &back);
    }
}

#[test]
fn an_index_log_cut_short_is_reported_refused_and_fixed_so_stat_agrees_with_cp() {
    let setup = Setup::new();
    let source = setup.scratch("data");
    write_random(&source, 10_000_000, 6);
    let logical = setup.logical("cut");
    // Two writers, so the other's bytes keep the file's size.
    setup.ok(&["cp", "--threads", "2", s(&source), &logical]);
    let (index_file, _) = piece_file(&setup, &logical, "index-log");
    let header = fs::read(&index_file).unwrap();
    let header_length = u16::from_le_bytes([header[10], header[11]]) as u64;
    for cut in [header_length, 10] {
        let fresh = setup.logical(&format!("cut{cut}"));
        setup.ok(&["cp", "--threads", "2", s(&source), &fresh]);
        let (index_file, index_path) = piece_file(&setup, &fresh, "index-log");
        fs::OpenOptions::new().write(true).open(&index_file).unwrap().set_len(cut).unwrap();
        for verify in [&[][..], &["--verify"][..]] {
            let mut args = vec!["recover", "--json"];
            args.extend_from_slice(verify);
            args.push(&fresh);
            let found = setup.plfs(&args);
            assert_eq!(code(&found), Some(1), "{}", stderr(&found));
            let report: Value = serde_json::from_slice(&found.stdout).unwrap();
            assert!(findings(&report).contains(&("lost-index-records".to_owned(), false)), "{report}");
        }
        let back = setup.scratch("back");
        let copied = setup.plfs(&["cp", &fresh, s(&back)]);
        assert_ne!(code(&copied), Some(0), "cp read lost records as zeros");
        assert!(stderr(&copied).contains(&format!("index log {index_path}")), "{}", stderr(&copied));

        let fixed = setup.plfs(&["recover", "--fix", &fresh]);
        let text = String::from_utf8_lossy(&fixed.stdout).into_owned();
        assert_eq!(code(&fixed), Some(0), "{text}");
        assert!(text.contains("lost bytes stay unreadable"), "{text}");
        assert!(setup.ok(&["recover", &fresh]).contains("no problems found"));
        setup.ok(&["cp", &fresh, s(&back)]);
        let stat = setup.json(&["stat", &fresh]);
        assert_eq!(stat["size"], fs::metadata(&back).unwrap().len(), "{stat}");
    }
}

#[test]
fn recover_reports_a_damaged_data_log_header_and_version_file() {
    let setup = Setup::new();
    let source = setup.scratch("data");
    write_random(&source, 1_000_000, 7);
    let logical = setup.logical("headers");
    setup.ok(&["cp", s(&source), &logical]);
    assert!(setup.ok(&["recover", "--verify", &logical]).contains("no problems found"));
    let (data_file, _) = piece_file(&setup, &logical, "data-log");
    flip_byte(&data_file, 3);
    let (version_file, _) = piece_file(&setup, &logical, "version");
    flip_byte(&version_file, 12);
    for verify in [&[][..], &["--verify"][..]] {
        let mut args = vec!["recover", "--fix", "--json"];
        args.extend_from_slice(verify);
        args.push(&logical);
        let found = setup.plfs(&args);
        assert_eq!(code(&found), Some(1), "{}", stderr(&found));
        let report: Value = serde_json::from_slice(&found.stdout).unwrap();
        let mut problems = findings(&report);
        problems.sort();
        assert_eq!(
            problems,
            vec![("damaged-data-log-header".to_owned(), false), ("damaged-version-file".to_owned(), false)],
            "{report}"
        );
    }
    // The data still reads.
    let back = setup.scratch("back");
    setup.ok(&["cp", &logical, s(&back)]);
    assert_same_file(&source, &back);
}

/// `plfs map FILE | head`: when the reader of stdout goes away, the
/// listing commands stop quietly, as `ls` and `cat` do, instead of
/// panicking with a backtrace on the broken pipe. The pipe's read end is
/// closed before the command starts, so its first write meets EPIPE.
#[test]
fn listing_commands_stop_quietly_when_stdout_is_closed() {
    use std::os::unix::process::ExitStatusExt;
    let setup = Setup::new();
    let plfs = setup.library();
    let handle = plfs.open("/listed", OpenFlags::WRONLY.create(), 0o644, 0).unwrap();
    for k in 0..50u64 {
        handle.write_as(&[7; 100], k * 200, 0).unwrap();
    }
    handle.close().unwrap();
    let file = setup.logical("listed");
    for args in [
        &["map", file.as_str()][..],
        &["map", "--totals", &file],
        &["stat", &file],
        &["ls", &setup.logical("")],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let output = Command::new(BIN)
            .arg("--config")
            .arg(&setup.config)
            .args(args)
            .env_remove("PLFSRC")
            .stdout(writer)
            .output()
            .unwrap();
        let stderr = stderr(&output);
        assert!(stderr.is_empty(), "plfs {args:?} into a closed pipe printed: {stderr}");
        assert_eq!(output.status.signal(), Some(libc::SIGPIPE), "plfs {args:?}: {:?}", output.status);
    }
}

/// Entries under `inside` on every backend whose names plfs reserves.
fn reserved_on_backends(setup: &Setup, inside: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for backend in &setup.backends {
        let Ok(entries) = fs::read_dir(backend.join(inside)) else { continue };
        for entry in entries {
            let entry = entry.unwrap();
            if entry.file_name().to_string_lossy().starts_with(".plfs-") {
                found.push(entry.path());
            }
        }
    }
    found
}

/// `plfs rm` returns once the container is renamed away and deletes its
/// pieces after; the process's exit finishes that, so nothing is left. A
/// process killed in between leaves the renamed containers (made here by
/// hand, as the kill would leave them): hidden from `ls`, and finished by
/// `plfs recover` of the directory, without --fix and without touching
/// the file beside them.
#[test]
fn rm_leaves_nothing_and_recover_of_the_directory_finishes_a_removal_cut_short() {
    let setup = Setup::new();
    let source = setup.scratch("data");
    write_random(&source, 300_000, 5);
    setup.ok(&["mkdir", &setup.logical("d")]);
    for name in ["d/removed", "d/cut-short", "d/kept"] {
        setup.ok(&["cp", "--threads", "3", s(&source), &setup.logical(name)]);
    }
    setup.ok(&["rm", &setup.logical("d/removed")]);
    assert_eq!(reserved_on_backends(&setup, "d"), Vec::<PathBuf>::new());
    for backend in &setup.backends {
        assert!(!backend.join("d/removed").exists(), "{}", backend.display());
    }

    // What a process killed between an unlink's rename and the deletion
    // leaves: the container and its shadows under one reserved name.
    let pending = ".plfs-reclaim.0badcafe.0000000000000001.00000001";
    let mut moved = 0;
    for backend in &setup.backends {
        if backend.join("d/cut-short").exists() {
            fs::rename(backend.join("d/cut-short"), backend.join("d").join(pending)).unwrap();
            moved += 1;
        }
    }
    assert!(moved > 0);
    let listed = setup.ok(&["ls", &setup.logical("d")]);
    assert_eq!(listed.split_whitespace().collect::<Vec<_>>(), ["kept"], "{listed}");

    let report = setup.json(&["recover", &setup.logical("d")]);
    let findings = report["findings"].as_array().unwrap();
    assert_eq!(findings.len(), moved, "{report}");
    for finding in findings {
        assert_eq!(finding["problem"], "pending-reclaim", "{report}");
        assert_eq!(finding["fixed"], true, "{report}");
    }
    assert_eq!(report["unfixed"], 0);
    assert_eq!(reserved_on_backends(&setup, "d"), Vec::<PathBuf>::new());
    assert!(setup.ok(&["recover", &setup.logical("d")]).contains("no problems found"));
    let back = setup.scratch("kept.back");
    setup.ok(&["cp", &setup.logical("d/kept"), s(&back)]);
    assert_same_file(&source, &back);
}
