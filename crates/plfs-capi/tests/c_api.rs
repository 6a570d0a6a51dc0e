//! The C library as C and C++ programs use it: each program under tests/c
//! is compiled with -Wall -Wextra -Werror against include/ and libplfs.so,
//! and run against a plfsrc of posix backends in a temporary directory.
//! Each program checks its own results and exits non-zero on a mismatch.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A hung call fails the test instead of hanging `make test`.
const TIMEOUT: Duration = Duration::from_secs(120);

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn program_source(name: &str) -> PathBuf {
    workspace().join("crates/plfs-capi/tests/c").join(name)
}

/// The directory cargo put libplfs.so in: next to this test's deps.
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    for dir in [deps, deps.parent().unwrap()] {
        if dir.join("libplfs.so").exists() && dir.join("libplfs.a").exists() {
            return dir.to_path_buf();
        }
    }
    panic!(
        "libplfs.so is not next to {}: run `cargo build --release -p plfs-capi` first (`make test` does)",
        exe.display()
    );
}

/// A temporary tree: `mnt` and `other` (shared_file mounts), `small` (a
/// small_file mount), `flat` (file_per_proc over `b4`, `b5`), `packed`
/// (small_file over `b6`, `b7`), `outside` (no mount), and the plfsrc
/// naming them.
struct Fixture {
    dir: tempfile::TempDir,
    plfsrc: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::Builder::new().prefix("plfs-capi-c.").tempdir().unwrap();
        let mut config = String::new();
        let mounts: [(&str, &str, &[&str]); 5] = [
            ("mnt", "shared_file", &["b0", "b1"]),
            ("other", "shared_file", &["b2"]),
            ("small", "small_file", &["b3"]),
            ("flat", "file_per_proc", &["b4", "b5"]),
            ("packed", "small_file", &["b6", "b7"]),
        ];
        for (mount, workload, backends) in mounts {
            let point = dir.path().join(mount);
            config.push_str(&format!(
                "- mount_point: {}\n  workload: {workload}\n  backends:\n",
                point.display()
            ));
            for backend in backends {
                let path = dir.path().join(backend);
                std::fs::create_dir(&path).unwrap();
                config.push_str(&format!("    - location: posix://{}\n", path.display()));
            }
        }
        std::fs::create_dir(dir.path().join("outside")).unwrap();
        let plfsrc = dir.path().join("plfsrc");
        std::fs::write(&plfsrc, config).unwrap();
        Fixture { dir, plfsrc }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Compiles `source` (C, or C++ if it ends in .cpp) into the fixture.
    fn compile(&self, source: &Path, extra: &[String]) -> PathBuf {
        let cpp = source.extension().is_some_and(|extension| extension == "cpp");
        self.compile_as(source, if cpp { Language::Cpp } else { Language::C }, extra)
    }

    /// Compiles `source` as `language` (gcc or g++), whatever its name.
    fn compile_as(&self, source: &Path, language: Language, extra: &[String]) -> PathBuf {
        let (compiler, flag, suffix) = match language {
            Language::C => ("gcc", "c", ""),
            Language::Cpp => ("g++", "c++", "-cpp"),
        };
        let program = self.path(&format!("{}{suffix}", source.file_stem().unwrap().to_str().unwrap()));
        let mut command = Command::new(compiler);
        command.args(["-O2", "-Wall", "-Wextra", "-Werror", "-x", flag]);
        command.arg(source).args(["-x", "none"]).args(extra).arg("-o").arg(&program);
        let output = command.output().unwrap_or_else(|error| panic!("{compiler}: {error}"));
        assert!(output.status.success(), "{compiler} {}:\n{}", source.display(), text(&output.stderr));
        program
    }

    /// Compiles against the source tree's include/ and the built library.
    fn compile_in_tree(&self, name: &str, extra: &[&str]) -> PathBuf {
        self.compile(&program_source(name), &in_tree_flags(extra))
    }

    /// Runs `program` with this fixture's plfsrc and returns its stdout;
    /// fails the test unless it exits 0.
    fn output(&self, program: &Path, args: &[PathBuf]) -> String {
        let output = Command::new("timeout")
            .arg("--kill-after=10")
            .arg(TIMEOUT.as_secs().to_string())
            .arg(program)
            .args(args)
            .env("PLFSRC", &self.plfsrc)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}: {}\n{}",
            program.display(),
            output.status,
            text(&output.stderr)
        );
        text(&output.stdout)
    }

    /// Runs `program` under timeout(1) with this fixture's plfsrc; fails
    /// the test unless it exits 0 and prints `expected`.
    fn run(&self, program: &Path, args: &[PathBuf], expected: &str) {
        let output = Command::new("timeout")
            .arg("--kill-after=10")
            .arg(TIMEOUT.as_secs().to_string())
            .arg(program)
            .args(args)
            .env("PLFSRC", &self.plfsrc)
            .output()
            .unwrap();
        let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
        assert!(
            output.status.success() && stdout.contains(expected),
            "{}: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
            program.display(),
            output.status
        );
    }
}

#[derive(Clone, Copy, Debug)]
enum Language {
    C,
    Cpp,
}

/// The flags that build against the source tree's include/ and library.
fn in_tree_flags(extra: &[&str]) -> Vec<String> {
    let libdir = library_dir();
    let mut flags: Vec<String> = extra.iter().map(|flag| (*flag).to_owned()).collect();
    flags.extend([
        format!("-I{}", workspace().join("include").display()),
        format!("-L{}", libdir.display()),
        "-lplfs".to_owned(),
        format!("-Wl,-rpath,{}", libdir.display()),
    ]);
    flags
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn every_function_from_c() {
    let fixture = Fixture::new();
    let program = fixture.compile_in_tree("api_all.c", &[]);
    let args = ["mnt", "other", "small", "outside"].map(|name| fixture.path(name));
    fixture.run(&program, &args, "api_all: OK");
}

/// Every regular file below `root`, as paths relative to it.
fn plain_files(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file() {
                found.push(entry.path().strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    found.sort();
    found
}

/// The main calls on an n-n and a 1-n mount (tests/c/workloads.c): one
/// process writes, a second one reads the bytes back and removes it all.
/// Between the two, the backends hold what each layout promises.
#[test]
fn main_calls_on_n_n_and_1_n_mounts() {
    let fixture = Fixture::new();
    let program = fixture.compile_in_tree("workloads.c", &[]);
    for (mount, kind, backends) in [("flat", "n-n", ["b4", "b5"]), ("packed", "1-n", ["b6", "b7"])] {
        let point = fixture.path(mount);
        let args = |phase: &str| [point.clone(), PathBuf::from(kind), PathBuf::from(phase)];
        fixture.run(&program, &args("write"), &format!("workloads {kind} write: OK"));
        let files: Vec<(&str, Vec<PathBuf>)> =
            backends.iter().map(|backend| (*backend, plain_files(&fixture.path(backend)))).collect();
        let kept = Path::new("d/kept");
        let holders: Vec<&str> =
            files.iter().filter(|(_, found)| found.iter().any(|f| f == kept)).map(|(b, _)| *b).collect();
        if kind == "n-n" {
            // One plain file per logical file, on one backend, bytes as written.
            assert_eq!(holders.len(), 1, "{files:?}");
            let bytes = std::fs::read(fixture.path(holders[0]).join(kept)).unwrap();
            assert_eq!(bytes, b"0123456789abcdefghijklmnopqrstuvwxyz".repeat(3));
            let all: usize = files.iter().map(|(_, found)| found.len()).sum();
            assert_eq!(all, 2, "d/f and d/kept only: {files:?}");
        } else {
            // No backend file per logical file: only the writer's logs.
            assert!(holders.is_empty(), "{files:?}");
            assert!(
                files.iter().flat_map(|(_, found)| found).all(|f| f.starts_with("d/.plfs-smallfile")),
                "{files:?}"
            );
        }
        fixture.run(&program, &args("verify"), &format!("workloads {kind} verify: OK"));
    }
}

#[test]
fn readdir_fills_a_std_set_from_cpp() {
    let fixture = Fixture::new();
    let program = fixture.compile_in_tree("readdir.cpp", &[]);
    fixture.run(&program, &[fixture.path("mnt")], "readdir: OK: 3 names");
}

#[test]
fn a_plfs_25_program_builds_unchanged() {
    let fixture = Fixture::new();
    let program = fixture.compile_in_tree("plfs25_program.c", &[]);
    fixture.run(&program, &[fixture.path("mnt/checkpoint")], "plfs25_program: OK: 30 bytes");
}

#[test]
fn threads_share_one_fd() {
    let fixture = Fixture::new();
    let program = fixture.compile_in_tree("threads.c", &["-pthread"]);
    fixture.run(&program, &[fixture.path("mnt/shared")], "threads: OK: 256000 bytes");
}

/// `make install-lib PREFIX=...` (what `make install` runs for the
/// library), then a program built only from `pkg-config --cflags --libs
/// plfs`, shared and static.
#[test]
fn pkg_config_finds_an_installed_library() {
    let fixture = Fixture::new();
    let prefix = fixture.path("prefix");
    let installed = Command::new("make")
        .arg("--no-print-directory")
        .arg("-C")
        .arg(workspace())
        .arg("install-lib")
        .arg(format!("PREFIX={}", prefix.display()))
        .arg(format!("LIBPLFS_DIR={}", library_dir().display()))
        .output()
        .unwrap();
    assert!(installed.status.success(), "make install-lib:\n{}", text(&installed.stderr));
    for file in
        ["lib/libplfs.so", "lib/libplfs.a", "include/plfs.h", "include/plfs_error.h", "include/plfs_mpi.h"]
    {
        assert!(prefix.join(file).exists(), "make install-lib did not install {file}");
    }
    // Installed stripped, the debug info kept apart in lib/.debug/ and
    // named by the library's .gnu_debuglink (where gdb looks).
    let sections = |file: &Path| -> String {
        let output = Command::new("readelf").arg("-S").arg("-W").arg(file).output().unwrap();
        assert!(output.status.success(), "readelf -S {}:\n{}", file.display(), text(&output.stderr));
        text(&output.stdout)
    };
    let library = sections(&prefix.join("lib/libplfs.so"));
    assert!(!library.contains(".debug_info"), "lib/libplfs.so was installed with its debug info");
    assert!(library.contains(".gnu_debuglink"), "lib/libplfs.so names no debug file");
    assert!(
        sections(&prefix.join("lib/.debug/libplfs.so.debug")).contains(".debug_info"),
        "lib/.debug/libplfs.so.debug holds no debug info"
    );
    // It exports the functions its installed headers declare and no
    // others: not the C API of a dependency (crc-fast's 26 `crc_fast_*`
    // functions were exported until build.rs hid them), which a program
    // linking -lplfs could otherwise bind to by accident.
    let headers: String = ["plfs.h", "plfs_error.h", "plfs_mpi.h"]
        .iter()
        .map(|header| std::fs::read_to_string(prefix.join("include").join(header)).unwrap())
        .collect();
    let declared = |symbol: &str| {
        headers.match_indices(symbol).any(|(at, _)| {
            let before = headers[..at].chars().next_back().is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
            let after = headers[at + symbol.len()..].trim_start().starts_with('(');
            before && after
        })
    };
    let nm = Command::new("nm")
        .arg("-D")
        .arg("--defined-only")
        .arg(prefix.join("lib/libplfs.so"))
        .output()
        .unwrap();
    assert!(nm.status.success(), "nm -D lib/libplfs.so:\n{}", text(&nm.stderr));
    let exported: Vec<String> = text(&nm.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().nth(2))
        .map(str::to_owned)
        .collect();
    assert!(
        exported.iter().any(|symbol| symbol == "plfs_open"),
        "lib/libplfs.so exports no plfs_open: {exported:?}"
    );
    let undeclared: Vec<&String> = exported.iter().filter(|symbol| !declared(symbol)).collect();
    assert!(
        undeclared.is_empty(),
        "lib/libplfs.so exports functions no installed header declares: {undeclared:?}"
    );

    let pkg_config = |args: &[&str]| -> Vec<String> {
        let output = Command::new("pkg-config")
            .args(args)
            .arg("plfs")
            .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
            .output()
            .unwrap();
        assert!(output.status.success(), "pkg-config {args:?} plfs:\n{}", text(&output.stderr));
        text(&output.stdout).split_whitespace().map(str::to_owned).collect()
    };
    let libdir = pkg_config(&["--variable=libdir"]).concat();
    assert_eq!(Path::new(&libdir), prefix.join("lib"));
    let source = program_source("plfs25_program.c");

    let mut shared = pkg_config(&["--cflags", "--libs"]);
    shared.push(format!("-Wl,-rpath,{libdir}"));
    let program = fixture.compile(&source, &shared);
    fixture.run(&program, &[fixture.path("mnt/shared")], "plfs25_program: OK");

    // Static: libplfs.a by its path (the .so would win a -lplfs), then
    // what pkg-config --static says it needs.
    let mut linked = pkg_config(&["--cflags"]);
    linked.push(format!("{libdir}/libplfs.a"));
    linked.extend(pkg_config(&["--static", "--libs-only-l"]).into_iter().filter(|flag| flag != "-lplfs"));
    let static_program = fixture.path("plfs25_static");
    let built = fixture.compile(&source, &linked);
    std::fs::rename(&built, &static_program).unwrap();
    fixture.run(&static_program, &[fixture.path("mnt/static")], "plfs25_program: OK");
}

/// PLFS 2.5's unit suite (plfsunit.cpp) and the regression suite's API
/// programs (offset.c, access.c), ported to programs written as 2.5's were
/// (stdio and string from plfs.h, 2.5's signatures), built with -Wall
/// -Wextra -Werror by gcc as C and by g++ as C++, each run with plain
/// paths and with 2.5's `plfs:` prefix.
#[test]
fn plfs_25_unit_and_regression_programs_as_c_and_cpp() {
    let fixture = Fixture::new();
    let flags = in_tree_flags(&[]);
    let mount = fixture.path("mnt");
    let prefixed = |path: &Path| PathBuf::from(format!("plfs:{}", path.display()));
    for language in [Language::C, Language::Cpp] {
        let unit = fixture.compile_as(&program_source("plfs25_unit.c"), language, &flags);
        fixture.run(&unit, std::slice::from_ref(&mount), "plfs25_unit: OK: 11 cases");
        fixture.run(&unit, &[prefixed(&mount)], "plfs25_unit: OK: 11 cases");

        let offset = fixture.compile_as(&program_source("plfs25_offset.c"), language, &flags);
        fixture.run(&offset, &[mount.join(format!("offset-{language:?}"))], "plfs25_offset: OK");
        fixture.run(
            &offset,
            &[prefixed(&mount.join(format!("offset-plfs-{language:?}")))],
            "plfs25_offset: OK",
        );

        // As 2.5's driver: each directory above the mount point, the mount
        // and a directory in it answer 0; a missing directory ENOENT (2).
        let access = fixture.compile_as(&program_source("plfs25_access.c"), language, &flags);
        let mut expected: Vec<(PathBuf, i32)> =
            mount.ancestors().skip(1).map(|dir| (dir.to_path_buf(), 0)).collect();
        expected.push((mount.clone(), 0));
        expected.push((prefixed(&mount), 0));
        expected.push((mount.join("nonexistent_dir"), libc::ENOENT));
        expected.push((prefixed(&mount.join("nonexistent_dir")), libc::ENOENT));
        let args: Vec<PathBuf> = expected.iter().map(|(path, _)| path.clone()).collect();
        let printed = fixture.output(&access, &args);
        let lines: Vec<&str> = printed.lines().collect();
        assert_eq!(lines.len(), expected.len(), "{printed}");
        for ((path, code), line) in expected.iter().zip(lines) {
            assert_eq!(line, format!("plfs access {}: {code}", path.display()), "{printed}");
        }
    }
}

/// Directories above a mount point (2.5's regression test walks down to
/// the mount with plfs_access): one that exists locally and one that does
/// not (mount point `absent/deeper/mnt`, created nowhere).
#[test]
fn access_and_getattr_above_a_mount_point() {
    let fixture = Fixture::new();
    let plfsrc = fixture.path("plfsrc-above");
    std::fs::create_dir(fixture.path("b-above")).unwrap();
    std::fs::write(
        &plfsrc,
        format!(
            "- mount_point: {}\n  workload: shared_file\n  backends:\n    - location: posix://{}\n",
            fixture.path("absent/deeper/mnt").display(),
            fixture.path("b-above").display()
        ),
    )
    .unwrap();
    let program = fixture.compile_in_tree("above_mount.c", &[]);
    let output = Command::new("timeout")
        .arg(TIMEOUT.as_secs().to_string())
        .arg(&program)
        .arg(fixture.dir.path())
        .arg(fixture.path("absent/deeper"))
        .env("PLFSRC", &plfsrc)
        .output()
        .unwrap();
    assert!(
        output.status.success() && text(&output.stdout).contains("above_mount: OK"),
        "{}\n{}",
        text(&output.stdout),
        text(&output.stderr)
    );
}

/// Close-to-open on a 1-n mount between processes (tests/c/other_process.c):
/// a process holding a cached view of a directory sees, in `plfs_getattr`,
/// `plfs_access`, `plfs_open` and the listing calls, files another process
/// closed since, and `plfs_rmdir` succeeds once another process removed
/// the last one.
#[test]
fn small_files_closed_by_another_process_are_seen() {
    let fixture = Fixture::new();
    let program = fixture.compile_in_tree("other_process.c", &[]);
    for mount in ["small", "packed"] {
        fixture.run(
            &program,
            &[fixture.path(mount).join("d"), PathBuf::from("hold")],
            "other_process hold: OK",
        );
    }
}

/// A size-limited tmpfs mounted for one test, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(path: PathBuf, size: &str) -> Tmpfs {
        std::fs::create_dir_all(&path).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&path)
            .status()
            .unwrap();
        assert!(status.success(), "mount -t tmpfs at {} (the test needs root)", path.display());
        Tmpfs(path)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// plfs_statvfs sums the mount's backends, each file system once: backends
/// on a 16 MiB and a 48 MiB tmpfs, the second holding two backend
/// directories, report 64 MiB (not 16, as when only one backend answered,
/// nor 112, counting the shared one twice).
#[test]
fn statvfs_sums_distinct_backend_file_systems() {
    let fixture = Fixture::new();
    let small = Tmpfs::mount(fixture.path("fs-small"), "16m");
    let large = Tmpfs::mount(fixture.path("fs-large"), "48m");
    let backends = [small.0.join("b0"), large.0.join("b1"), large.0.join("b2")];
    let mut config = format!("- mount_point: {}\n  backends:\n", fixture.path("striped").display());
    for backend in &backends {
        std::fs::create_dir(backend).unwrap();
        config.push_str(&format!("    - location: posix://{}\n", backend.display()));
    }
    let plfsrc = fixture.path("plfsrc-striped");
    std::fs::write(&plfsrc, config).unwrap();
    let program = fixture.compile_in_tree("statvfs_sum.c", &[]);
    let output = Command::new("timeout")
        .arg(TIMEOUT.as_secs().to_string())
        .arg(&program)
        .arg(fixture.path("striped"))
        .env("PLFSRC", &plfsrc)
        .output()
        .unwrap();
    let stdout = text(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("statvfs_sum: OK"),
        "{stdout}\n{}",
        text(&output.stderr)
    );
    let files = |path: &Path| {
        let stat = Command::new("stat").args(["-f", "-c", "%c"]).arg(path).output().unwrap();
        text(&stat.stdout).trim().parse::<u64>().unwrap()
    };
    let expected = format!("size {} files {}\n", 64u64 << 20, files(&small.0) + files(&large.0));
    assert!(stdout.starts_with(&expected), "{stdout} should start with {expected}");
}

/// The PLFS 2.5 fixtures (crates/plfs-core/testdata/plfs25), all six
/// copied onto the `mnt` mount's two backends (2.5 put each container on
/// the backend its name hashed to, and the names differ), read by
/// tests/c/container_25.c through plfs_open/plfs_read and refused every
/// change with PLFS_EACCES. The expected bytes are the library's own read
/// (which plfs-core's `plfs25_fixtures` checks against what the 2.5
/// writers wrote), made in this process before the C program runs.
#[test]
fn plfs_25_containers_read_through_the_c_api() {
    use plfs_core_crate::config::plfsrc;
    use plfs_core_crate::fs::{Options, Plfs};
    use plfs_core_crate::open::OpenFlags;

    let fixture = Fixture::new();
    let fixtures = workspace().join("crates/plfs-core/testdata/plfs25");
    let scenarios = ["strided", "overlap", "truncate", "metalink", "flattened", "open"];
    for scenario in scenarios {
        for backend in ["b0", "b1"] {
            let from = fixtures.join(scenario).join(backend);
            if from.exists() {
                let copied =
                    Command::new("cp").arg("-a").arg(from.join(".")).arg(fixture.path(backend)).status();
                assert!(copied.unwrap().success(), "cp {}", from.display());
            }
        }
    }
    // 2.5 made the access file (whose mode is the file's) 0600; git keeps 0644.
    let chmod = Command::new("find")
        .args([fixture.path("b0"), fixture.path("b1")])
        .args(["-name", ".plfsaccess113918400", "-exec", "chmod", "600", "{}", "+"])
        .status();
    assert!(chmod.unwrap().success());
    let config = plfsrc::parse_file(&fixture.plfsrc).unwrap();
    let program = fixture.compile_in_tree("container_25.c", &[]);
    for scenario in scenarios {
        let file = fixture.path(&format!("mnt/{scenario}.ckpt"));
        let (mount, inside) = config.resolve(&file).unwrap();
        let plfs = Plfs::from_config(mount, Options::from_environment(config.tuning.clone())).unwrap();
        let size = plfs.stat(&inside).unwrap().size as usize;
        let opened = plfs.open(&inside, OpenFlags::RDONLY, 0, 1).unwrap();
        let mut bytes = vec![0; size];
        assert_eq!(opened.read(&mut bytes, 0).unwrap(), size, "{scenario}");
        opened.close().unwrap();
        assert!(size > 0, "{scenario}");
        let expected = fixture.path(&format!("{scenario}.expected"));
        std::fs::write(&expected, &bytes).unwrap();
        let before = plain_files(fixture.dir.path());
        fixture.run(&program, &[file, expected], &format!("container_25: OK: {size} bytes"));
        assert_eq!(
            plain_files(fixture.dir.path()),
            before,
            "{scenario}: the refused changes wrote something"
        );
    }
}
