//! `plfs migrate` run as a program over a site of PLFS 2.5 fixtures
//! (crates/plfs-core/testdata/plfs25) copied into a tree on two backends:
//! every file reads the same bytes before and after (`plfs cp`, the
//! library's read, by a separate process), nothing 2.5 wrote is left, a
//! file still open is refused until `--force-open`, `--to` moves a file,
//! and a run killed by SIGKILL at any moment is finished by a rerun. Each
//! crash point is covered in plfs-core (`migrate::tests`).

mod plfs25_support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use plfs25_support::copy_tree;

const BIN: &str = env!("CARGO_BIN_EXE_plfs");

/// Copies a fixture's backends into `backends`, the container moved into
/// `subdir` (2.5 hashed only the file name, so its backend stays right).
fn place(scenario: &str, backends: &Path, subdir: &str) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plfs-core/testdata/plfs25").join(scenario);
    for backend in ["b0", "b1"] {
        let from = fixture.join(backend);
        if !from.exists() {
            continue;
        }
        for entry in fs::read_dir(&from).unwrap() {
            let entry = entry.unwrap();
            let to = backends.join(backend).join(subdir).join(entry.file_name());
            copy_tree(&entry.path(), &to);
        }
    }
}

struct Site {
    _dir: tempfile::TempDir,
    root: PathBuf,
    config: PathBuf,
    mount: PathBuf,
}

impl Site {
    fn new() -> Site {
        let dir = tempfile::Builder::new().prefix("plfs25-migrate.").tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let mount = root.join("mnt");
        let mut text = format!("- mount_point: {}\n  workload: shared_file\n  backends:\n", mount.display());
        for backend in ["b0", "b1"] {
            fs::create_dir_all(root.join("backends").join(backend)).unwrap();
            text.push_str(&format!(
                "    - location: posix://{}\n",
                root.join("backends").join(backend).display()
            ));
        }
        let config = root.join("plfsrc");
        fs::write(&config, text).unwrap();
        Site { _dir: dir, root, config, mount }
    }

    fn plfs(&self, args: &[&str]) -> Output {
        Command::new(BIN).arg("--config").arg(&self.config).args(args).output().unwrap()
    }

    fn path(&self, inside: &str) -> String {
        format!("{}/{inside}", self.mount.display())
    }

    /// The file's bytes as another process reads them through the library.
    fn read(&self, inside: &str) -> Vec<u8> {
        let out = self.root.join("read.out");
        let _ = fs::remove_file(&out);
        let output = self.plfs(&["cp", &self.path(inside), out.to_str().unwrap()]);
        assert!(output.status.success(), "plfs cp {inside}: {}", describe(&output));
        fs::read(&out).unwrap()
    }

    /// Entries under the backends that only 2.5 or a migration write.
    fn leftovers(&self) -> Vec<String> {
        let output = Command::new("find")
            .arg(self.root.join("backends"))
            .args([
                "(",
                "-name",
                ".plfsaccess*",
                "-o",
                "-name",
                "dropping.*",
                "-o",
                "-name",
                ".plfs-migrat*",
                ")",
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).lines().map(str::to_owned).collect()
    }
}

fn describe(output: &Output) -> String {
    format!(
        "status {:?}, stdout {:?}, stderr {:?}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn a_tree_of_25_files_migrates_in_place_and_reads_the_same() {
    let site = Site::new();
    let backends = site.root.join("backends");
    let files = [
        ("strided", "tree"),
        ("overlap", "tree/a"),
        ("truncate", "tree/a"),
        ("metalink", "tree/a/b"),
        ("flattened", "tree/a/b"),
        ("open", "tree"),
    ];
    for (scenario, subdir) in files {
        place(scenario, &backends, subdir);
    }
    let before: Vec<Vec<u8>> =
        files.iter().map(|(scenario, subdir)| site.read(&format!("{subdir}/{scenario}.ckpt"))).collect();
    // The open file is refused, named; the others migrate.
    let first = site.plfs(&["migrate", &site.path("tree"), "--json"]);
    assert!(!first.status.success(), "an open 2.5 file migrated: {}", describe(&first));
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(stderr.contains("open.ckpt") && stderr.contains("--force-open"), "{stderr}");
    let summary: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(summary["files"], 5, "{summary}");
    assert!(summary["index_bytes_before"].as_u64().unwrap() > 0, "{summary}");
    let second = site.plfs(&["migrate", &site.path("tree"), "--force-open"]);
    assert!(second.status.success(), "{}", describe(&second));
    let text = String::from_utf8_lossy(&second.stdout);
    assert!(text.contains("migrated 1 files") && text.contains("5 already plfs"), "{text}");
    for ((scenario, subdir), bytes) in files.iter().zip(&before) {
        let inside = format!("{subdir}/{scenario}.ckpt");
        assert!(site.read(&inside) == *bytes, "{inside}: bytes changed");
        let version = site.plfs(&["version", &site.path(&inside)]);
        assert!(
            !String::from_utf8_lossy(&version.stdout).contains("2.5"),
            "{inside}: {}",
            describe(&version)
        );
    }
    assert_eq!(site.leftovers(), Vec::<String>::new());
}

#[test]
fn migrate_to_moves_a_file_and_a_rerun_is_harmless() {
    let site = Site::new();
    place("metalink", &site.root.join("backends"), "");
    let bytes = site.read("metalink.ckpt");
    let output = site.plfs(&["mkdir", &site.path("new")]);
    assert!(output.status.success(), "{}", describe(&output));
    let moved = site.plfs(&["migrate", &site.path("metalink.ckpt"), "--to", &site.path("new")]);
    assert!(moved.status.success(), "{}", describe(&moved));
    assert!(site.read("new/metalink.ckpt") == bytes);
    let gone = site.plfs(&["stat", &site.path("metalink.ckpt")]);
    assert!(!gone.status.success(), "the 2.5 file is still there");
    assert_eq!(site.leftovers(), Vec::<String>::new());
    let again = site.plfs(&["migrate", &site.path("new")]);
    assert!(again.status.success(), "{}", describe(&again));
    assert!(String::from_utf8_lossy(&again.stdout).contains("migrated 0 files"));
    assert!(site.read("new/metalink.ckpt") == bytes);
}

/// `plfs migrate` killed by SIGKILL at moments spread over a whole run
/// (measured first, on the same tree), ten times: after each kill every
/// file still reads its bytes (as 2.5 or as plfs, never neither), a rerun
/// completes, and nothing 2.5 or a migration wrote is left.
#[test]
fn migrate_killed_at_any_moment_is_finished_by_a_rerun() {
    let files =
        [("strided", "t"), ("overlap", "t/a"), ("metalink", "t/a"), ("flattened", "t/b"), ("open", "t")];
    let setup = || {
        let site = Site::new();
        for (scenario, subdir) in files {
            place(scenario, &site.root.join("backends"), subdir);
            // 2.5 made every directory on every backend.
            for backend in ["b0", "b1"] {
                fs::create_dir_all(site.root.join("backends").join(backend).join(subdir)).unwrap();
            }
        }
        let bytes: Vec<Vec<u8>> =
            files.iter().map(|(scenario, subdir)| site.read(&format!("{subdir}/{scenario}.ckpt"))).collect();
        (site, bytes)
    };
    let migrate = |site: &Site| {
        let mut command = Command::new(BIN);
        command.arg("--config").arg(&site.config).args(["migrate", &site.path("t"), "--force-open"]);
        command.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
        command
    };
    // How long a whole run takes here: the kills are spread over it.
    let (site, _) = setup();
    let started = std::time::Instant::now();
    assert!(migrate(&site).status().unwrap().success());
    let whole = started.elapsed();
    let trials = 10u32;
    let mut killed = 0;
    for trial in 0..trials {
        let (site, bytes) = setup();
        let mut child = migrate(&site).spawn().unwrap();
        std::thread::sleep(whole * trial / trials);
        // Fails only when the run already ended (then wait() says so).
        let _ = child.kill();
        let status = child.wait().unwrap();
        if !status.success() {
            killed += 1;
        }
        let mut still_25 = 0;
        for ((scenario, subdir), bytes) in files.iter().zip(&bytes) {
            let inside = format!("{subdir}/{scenario}.ckpt");
            assert!(site.read(&inside) == *bytes, "trial {trial}: {inside} reads other bytes after the kill");
            let version = site.plfs(&["version", &site.path(&inside)]);
            still_25 += usize::from(String::from_utf8_lossy(&version.stdout).contains("PLFS 2.5"));
        }
        // What the kill interrupted, for the log: files left as 2.5 and
        // the migration's own names left behind.
        let pending = site.leftovers().iter().filter(|name| name.contains(".plfs-migrat")).count();
        eprintln!(
            "trial {trial}: {status}; {still_25} of {} files still 2.5, {pending} migration names",
            files.len()
        );
        let rerun = site.plfs(&["migrate", &site.path("t"), "--force-open"]);
        assert!(rerun.status.success(), "trial {trial}: {}", describe(&rerun));
        for ((scenario, subdir), bytes) in files.iter().zip(&bytes) {
            let inside = format!("{subdir}/{scenario}.ckpt");
            assert!(site.read(&inside) == *bytes, "trial {trial}: {inside}: bytes changed");
            let version = site.plfs(&["version", &site.path(&inside)]);
            assert!(
                !String::from_utf8_lossy(&version.stdout).contains("2.5"),
                "trial {trial}: {inside}: {}",
                describe(&version)
            );
        }
        assert_eq!(site.leftovers(), Vec::<String>::new(), "trial {trial}");
    }
    eprintln!("{killed} of {trials} runs killed before they finished (a whole run: {whole:?})");
}
