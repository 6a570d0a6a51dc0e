//! libplfs_preload.so under real programs (cp, cat, tar, dd, python3 and a
//! C stdio program): what they write into a mount point that does not exist
//! on disk is checked through the library, with the `plfs` binary (`plfs
//! cp` out of the mount, `plfs map` for the writers). The test lives in
//! plfs-cli for `CARGO_BIN_EXE_plfs`; the interposer and libplfs.so are
//! cdylibs that `cargo test` does not build, so `make test` builds the
//! workspace first and the tests find them next to the plfs binary.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use tempfile::TempDir;

mod rename_support;

const BIN: &str = env!("CARGO_BIN_EXE_plfs");
/// Every program gets this long; a hang fails the test instead of CI.
const TIMEOUT_SECONDS: u32 = 120;

struct Setup {
    dir: TempDir,
    config: PathBuf,
    mount: PathBuf,
}

/// libplfs_preload.so, built next to the plfs binary (libplfs.so too).
fn interposer() -> PathBuf {
    let directory = Path::new(BIN).parent().unwrap();
    let library = directory.join("libplfs_preload.so");
    assert!(
        library.exists() && directory.join("libplfs.so").exists(),
        "{} or libplfs.so is missing: run `cargo build --release --workspace` first (`make test` does)",
        library.display()
    );
    library
}

impl Setup {
    fn new() -> Setup {
        Setup::with_workload("shared_file")
    }

    fn with_workload(workload: &str) -> Setup {
        Setup::with_backends_in(workload, "")
    }

    /// Backends in `below` (a relative directory, made here) of the test
    /// directory, the mount point in the test directory itself.
    fn with_backends_in(workload: &str, below: &str) -> Setup {
        let dir = tempfile::Builder::new().prefix("plfs-preload-test.").tempdir().unwrap();
        let mut text = String::new();
        let mount = dir.path().join("mnt");
        text.push_str(&format!("- mount_point: {}\n  workload: {workload}\n  backends:\n", mount.display()));
        for index in 0..2 {
            let backend = dir.path().join(below).join(format!("backend{index}"));
            fs::create_dir_all(&backend).unwrap();
            text.push_str(&format!("    - location: posix://{}\n", backend.display()));
        }
        fs::create_dir(dir.path().join("scratch")).unwrap();
        let config = dir.path().join("plfsrc");
        fs::write(&config, text).unwrap();
        Setup { dir, config, mount }
    }

    fn logical(&self, inside: &str) -> String {
        format!("{}/{inside}", self.mount.display())
    }

    fn scratch(&self, name: &str) -> PathBuf {
        self.dir.path().join("scratch").join(name)
    }

    /// `program args…` under the interposer, bounded by timeout(1).
    fn preloaded(&self, program: &str, args: &[&str]) -> Command {
        let mut command = Command::new("timeout");
        command
            .arg(TIMEOUT_SECONDS.to_string())
            .arg(program)
            .args(args)
            .env("LD_PRELOAD", interposer())
            .env("PLFSRC", &self.config)
            .env("TMPDIR", self.dir.path())
            .current_dir(self.dir.path());
        command
    }

    /// Runs `script` in an unmodified python under the interposer (only
    /// python preloaded, not strace) with strace(1) writing its opens and
    /// stats to `log`; returns the trace.
    fn traced_lookups(&self, log: &Path, script: &str) -> String {
        self.traced(log, "openat,openat2,statx,newfstatat", script)
    }

    /// Runs `script` as [`Setup::traced_lookups`] does, tracing `calls`.
    fn traced(&self, log: &Path, calls: &str, script: &str) -> String {
        let output = Command::new("timeout")
            .arg(TIMEOUT_SECONDS.to_string())
            .args(["strace", "-f", "-qq", "-e", &format!("trace={calls}"), "-o"])
            .arg(log)
            .arg("-E")
            .arg(format!("LD_PRELOAD={}", interposer().display()))
            .args(["python3", "-c", script])
            .env("PLFSRC", &self.config)
            .env_remove("LD_PRELOAD")
            .output()
            .unwrap_or_else(|error| panic!("strace: {error} (scripts/install-deps.sh installs it)"));
        assert!(output.status.success(), "{script}: {}", String::from_utf8_lossy(&output.stderr));
        fs::read_to_string(log).unwrap()
    }

    fn run(&self, program: &str, args: &[&str]) -> Output {
        let output = self.preloaded(program, args).stdin(Stdio::null()).output().unwrap();
        assert!(
            output.status.success(),
            "{program} {args:?} failed ({:?}):\nstdout: {}\nstderr: {}",
            output.status.code(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }

    /// The plfs binary, without the interposer: the library's own view.
    fn plfs(&self, args: &[&str]) -> String {
        let output = Command::new("timeout")
            .arg(TIMEOUT_SECONDS.to_string())
            .arg(BIN)
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .env_remove("PLFSRC")
            .env_remove("LD_PRELOAD")
            .output()
            .unwrap();
        assert!(output.status.success(), "plfs {args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    }

    fn totals(&self, inside: &str) -> Value {
        serde_json::from_str(&self.plfs(&["map", "--totals", &self.logical(inside), "--json"])).unwrap()
    }

    /// The bytes of a logical file, copied out by the library.
    fn contents(&self, inside: &str) -> Vec<u8> {
        let out = self.scratch(&format!("{}.via-plfs", inside.replace('/', "_")));
        let _ = fs::remove_file(&out);
        self.plfs(&["cp", &self.logical(inside), out.to_str().unwrap()]);
        fs::read(out).unwrap()
    }
}

/// Deterministic pseudo-random bytes (xorshift64*).
fn random_bytes(size: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    let mut bytes = Vec::with_capacity(size + 8);
    while bytes.len() < size {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        bytes.extend_from_slice(&state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    bytes.truncate(size);
    bytes
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn cp_and_cat_in_and_out() {
    let setup = Setup::new();
    let big = setup.scratch("big");
    let data = random_bytes(5 * 1024 * 1024 + 4321, 7);
    fs::write(&big, &data).unwrap();
    let empty = setup.scratch("empty");
    fs::write(&empty, b"").unwrap();

    setup.run("cp", &[s(&big), &setup.logical("big")]);
    setup.run("cp", &[s(&empty), &setup.logical("empty")]);
    assert!(setup.contents("big") == data, "the library reads back other bytes than cp wrote");
    assert!(setup.contents("empty").is_empty());
    // One process wrote: one writer, one data log.
    assert_eq!(setup.totals("big")["writers"], 1, "{}", setup.totals("big"));

    let big_out = setup.scratch("big.out");
    setup.run("cp", &[&setup.logical("big"), s(&big_out)]);
    assert!(fs::read(&big_out).unwrap() == data);
    let empty_out = setup.scratch("empty.out");
    setup.run("cp", &[&setup.logical("empty"), s(&empty_out)]);
    assert!(fs::read(&empty_out).unwrap().is_empty());

    let cat = setup.run("cat", &[&setup.logical("big")]);
    assert!(cat.stdout == data, "cat printed {} bytes", cat.stdout.len());
    // A relative path resolves against the current directory.
    let relative = setup.run("cat", &["mnt/big"]);
    assert!(relative.stdout == data);
}

/// An n-n mount: cp in and out, ls, and each file is one plain file on
/// exactly one of the two backends.
#[test]
fn n_n_mount_cp_in_and_out_and_ls() {
    let setup = Setup::with_workload("n-n");
    let data = random_bytes(3 * 1024 * 1024 + 17, 11);
    let source = setup.scratch("source");
    fs::write(&source, &data).unwrap();
    setup.run("mkdir", &[&setup.logical("dir")]);
    let names: Vec<String> = (0..8).map(|i| format!("rank.{i}")).collect();
    for name in &names {
        setup.run("cp", &[s(&source), &setup.logical(&format!("dir/{name}"))]);
    }
    let listed = String::from_utf8(setup.run("ls", &[&setup.logical("dir")]).stdout).unwrap();
    assert_eq!(listed.lines().collect::<Vec<_>>(), names, "ls of the n-n directory");
    for name in &names {
        let out = setup.scratch(&format!("{name}.out"));
        setup.run("cp", &[&setup.logical(&format!("dir/{name}")), s(&out)]);
        assert!(fs::read(&out).unwrap() == data, "{name} read back differently");
        let holders: Vec<usize> =
            (0..2).filter(|i| setup.dir.path().join(format!("backend{i}/dir/{name}")).is_file()).collect();
        assert_eq!(holders.len(), 1, "{name} is one plain file on one backend: {holders:?}");
        let plain = setup.dir.path().join(format!("backend{}/dir/{name}", holders[0]));
        assert!(fs::read(plain).unwrap() == data, "the backend file is the data itself");
    }
    let long = String::from_utf8(setup.run("ls", &["-l", &setup.logical("dir/rank.0")]).stdout).unwrap();
    assert!(long.contains(&data.len().to_string()), "ls -l shows the size: {long}");
}

/// A small_file (1-n) mount: cp in and out, ls and ls -l, rm, mv; the files
/// are names in their directory's container, so the backends hold a few
/// logs per writing process, not a file per file.
#[test]
fn small_file_mount_cp_in_and_out_and_ls() {
    let setup = Setup::with_workload("small_file");
    let data = random_bytes(200 * 1024 + 17, 12);
    let source = setup.scratch("source");
    fs::write(&source, &data).unwrap();
    setup.run("mkdir", &[&setup.logical("dir")]);
    let names: Vec<String> = (0..8).map(|i| format!("small.{i}")).collect();
    for name in &names {
        setup.run("cp", &[s(&source), &setup.logical(&format!("dir/{name}"))]);
    }
    setup.run("mkdir", &[&setup.logical("dir/sub")]);
    let listed = String::from_utf8(setup.run("ls", &[&setup.logical("dir")]).stdout).unwrap();
    let mut expected: Vec<&str> = names.iter().map(String::as_str).collect();
    expected.push("sub");
    assert_eq!(listed.lines().collect::<Vec<_>>(), expected, "ls of the small-file directory");
    for name in &names {
        let out = setup.scratch(&format!("{name}.out"));
        setup.run("cp", &[&setup.logical(&format!("dir/{name}")), s(&out)]);
        assert!(fs::read(&out).unwrap() == data, "{name} read back differently");
        for backend in 0..2 {
            let plain = setup.dir.path().join(format!("backend{backend}/dir/{name}"));
            assert!(!plain.exists(), "{name} is no backend file: {}", plain.display());
        }
    }
    // One cp process wrote each file: three logs per process, wherever
    // its session landed.
    let logs: usize = (0..2)
        .map(|backend| {
            fs::read_dir(setup.dir.path().join(format!("backend{backend}/dir/.plfs-smallfile")))
                .map_or(0, |entries| entries.count())
        })
        .sum();
    assert_eq!(logs, 3 * names.len(), "logs in the directory containers");
    let long = String::from_utf8(setup.run("ls", &["-l", &setup.logical("dir/small.0")]).stdout).unwrap();
    assert!(long.contains(&data.len().to_string()), "ls -l shows the size: {long}");
    setup.run("mv", &[&setup.logical("dir/small.0"), &setup.logical("dir/renamed")]);
    setup.run("mv", &[&setup.logical("dir/small.1"), &setup.logical("dir/sub/moved")]);
    setup.run("rm", &[&setup.logical("dir/small.2")]);
    let cat = setup.run("cat", &[&setup.logical("dir/sub/moved")]);
    assert!(cat.stdout == data, "the file moved between directories reads back");
    let listed = String::from_utf8(setup.run("ls", &[&setup.logical("dir")]).stdout).unwrap();
    assert_eq!(
        listed.lines().collect::<Vec<_>>(),
        ["renamed", "small.3", "small.4", "small.5", "small.6", "small.7", "sub"],
        "ls after mv and rm"
    );
}

#[test]
fn tar_archives_into_the_mount_and_extracts_out() {
    let setup = Setup::new();
    let tree = setup.scratch("tree");
    fs::create_dir_all(tree.join("a/b")).unwrap();
    fs::write(tree.join("top.txt"), b"top\n").unwrap();
    fs::write(tree.join("a/random"), random_bytes(300_001, 3)).unwrap();
    fs::write(tree.join("a/b/empty"), b"").unwrap();
    let archive = setup.logical("tree.tar");
    setup.run("tar", &["-cf", &archive, "-C", s(tree.parent().unwrap()), "tree"]);
    // The archive as the library reads it is a valid tar of the tree.
    let through_library = setup.scratch("tree-via-plfs.tar");
    fs::write(&through_library, setup.contents("tree.tar")).unwrap();
    let listing = Command::new("tar").arg("-tf").arg(&through_library).output().unwrap();
    assert!(String::from_utf8_lossy(&listing.stdout).contains("tree/a/random"));

    let out = setup.scratch("extracted");
    fs::create_dir(&out).unwrap();
    setup.run("tar", &["-xf", &archive, "-C", s(&out)]);
    let diff = Command::new("diff").arg("-r").arg(&tree).arg(out.join("tree")).output().unwrap();
    assert!(diff.status.success(), "diff -r: {}", String::from_utf8_lossy(&diff.stdout));
}

/// Compressed archives: GNU tar's child closes 1 (or 0), `dup`s the
/// archive onto it and execs the compressor, so a plfs archive must reach
/// gzip and xz as a redirection does. Before, every `tar -czf`, `-tzf` and
/// `-xzf` of a plfs archive failed: "gzip: stdout: Bad file descriptor".
#[test]
fn compressed_tar_archives_round_trip_through_the_mount() {
    for workload in ["shared_file", "file_per_proc", "small_file"] {
        let setup = Setup::with_workload(workload);
        let tree = setup.scratch("tree");
        fs::create_dir_all(tree.join("a")).unwrap();
        fs::write(tree.join("a/random"), random_bytes(200_003, 5)).unwrap();
        fs::write(tree.join("top.txt"), b"top\n").unwrap();
        for (flag, name) in [("z", "tree.tgz"), ("J", "tree.txz")] {
            let archive = setup.logical(name);
            setup.run("tar", &[&format!("-c{flag}f"), &archive, "-C", s(tree.parent().unwrap()), "tree"]);
            let listing = setup.run("tar", &[&format!("-t{flag}f"), &archive]);
            let mut names: Vec<_> =
                String::from_utf8_lossy(&listing.stdout).lines().map(str::to_owned).collect();
            names.sort();
            assert_eq!(names, ["tree/", "tree/a/", "tree/a/random", "tree/top.txt"], "{workload} {name}");
            let out = setup.logical(&format!("out-{flag}"));
            setup.run("mkdir", &[&out]);
            setup.run("tar", &[&format!("-x{flag}f"), &archive, "-C", &out]);
            assert_eq!(
                setup.contents(&format!("out-{flag}/tree/a/random")),
                random_bytes(200_003, 5),
                "{workload}"
            );
        }
    }
}

#[test]
fn dd_with_odd_block_sizes_notrunc_and_seek() {
    let setup = Setup::new();
    let source = setup.scratch("source");
    let data = random_bytes(1_000_003, 11);
    fs::write(&source, &data).unwrap();
    let target = setup.logical("dd");
    setup.run("dd", &[&format!("if={}", s(&source)), &format!("of={target}"), "bs=65536", "status=none"]);
    let patch = random_bytes(10_000, 12);
    fs::write(setup.scratch("patch"), &patch).unwrap();
    setup.run(
        "dd",
        &[
            &format!("if={}", s(&setup.scratch("patch"))),
            &format!("of={target}"),
            "bs=3000",
            "seek=7",
            "conv=notrunc",
            "status=none",
        ],
    );
    let mut expected = data.clone();
    expected[21_000..31_000].copy_from_slice(&patch);
    assert!(setup.contents("dd") == expected, "dd's writes read back differently");
    // And dd reads it back out with a block size that does not divide it.
    let back = setup.scratch("dd.back");
    setup.run("dd", &[&format!("if={target}"), &format!("of={}", s(&back)), "bs=4097", "status=none"]);
    assert!(fs::read(back).unwrap() == expected);
}

/// A file this process renames and then unlinks while it holds it open
/// reads, writes and fstats as on a plain directory, on every workload,
/// and nothing is left once it closes. Before: on small_file every call
/// through the descriptor failed with ENOENT after the rename; on
/// shared_file reads after the unlink returned nothing (silently empty)
/// and writes ENOENT; fstat after the rename failed with ENOENT on
/// shared_file and file_per_proc. (Another process unlinking it is not
/// seen: each process's libplfs knows only its own descriptors.)
#[test]
fn a_file_renamed_and_unlinked_while_open_stays_usable() {
    let script = include_str!("programs/open_across_unlink.py");
    let plain = tempfile::tempdir().unwrap();
    let control =
        Command::new("python3").arg("-c").arg(script).arg(plain.path()).arg("one").output().unwrap();
    assert!(control.status.success(), "{}", String::from_utf8_lossy(&control.stderr));
    for workload in ["shared_file", "file_per_proc", "small_file"] {
        let setup = Setup::with_workload(workload);
        let dir = setup.logical("d");
        setup.run("mkdir", &[&dir]);
        let output = setup.run("python3", &["-c", script, &dir, "one"]);
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&control.stdout),
            "{workload}"
        );
        let found = setup.plfs(&["recover", &dir]);
        assert!(found.contains("no problems found"), "{workload}: {found}");
    }
}

/// `plfs recover --fix` of a directory while a program holds a file there
/// that it unlinked (a temporary file): the file is its holder's, so
/// recover reports it and leaves it, and the holder reads and writes on.
/// Before, the fix deleted it as crash debris: the holder's next read got
/// 0 bytes on shared_file (silently) and ENOENT on small_file, and writes
/// failed with ENOENT on every workload.
#[test]
fn recover_leaves_a_running_programs_unlinked_file_alone() {
    use std::io::{BufRead, BufReader};
    let script = r#"
import os, sys
path = sys.argv[1] + "/scratch-file"
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
os.write(fd, b"x" * 100000)
os.unlink(path)
print("held", flush=True)
sys.stdin.readline()
print("read", len(os.pread(fd, 200000, 0)))
os.pwrite(fd, b"y", 100000)
print("size", os.fstat(fd).st_size)
os.close(fd)
"#;
    for workload in ["shared_file", "file_per_proc", "small_file"] {
        let setup = Setup::with_workload(workload);
        let dir = setup.logical("d");
        setup.run("mkdir", &[&dir]);
        let mut holder = setup
            .preloaded("python3", &["-c", script, &dir])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(holder.stdout.take().unwrap()).lines();
        assert_eq!(lines.next().and_then(Result::ok).as_deref(), Some("held"), "{workload}");
        let recover = Command::new(BIN)
            .args(["--config", setup.config.to_str().unwrap(), "recover", "--fix", &dir])
            .env_remove("LD_PRELOAD")
            .output()
            .unwrap();
        let report = String::from_utf8_lossy(&recover.stdout);
        assert_eq!(
            recover.status.code(),
            Some(1),
            "{workload}: a held file is reported as remaining: {report}"
        );
        assert!(report.contains("held-open") && report.contains("still running"), "{workload}: {report}");
        holder.stdin.take().unwrap().write_all(b"go\n").unwrap();
        let rest: Vec<String> = lines.map(Result::unwrap).collect();
        let status = holder.wait().unwrap();
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut holder.stderr.take().unwrap(), &mut stderr).unwrap();
        assert!(status.success(), "{workload}: {rest:?} {stderr}");
        assert_eq!(rest, ["read 100000", "size 100001"], "{workload}");
        let found = setup.plfs(&["recover", &dir]);
        assert!(found.contains("no problems found"), "{workload}: {found}");
    }
}

#[test]
fn python_file_io_listdir_stat_rename_remove() {
    let setup = Setup::new();
    let script = format!(
        r#"
import os
mount = {mount:?}
os.mkdir(mount + "/dir")
with open(mount + "/dir/f", "wb") as f:
    f.write(b"hello ")
    f.write(b"world")
    f.seek(0)
    f.write(b"J")
with open(mount + "/dir/f", "r+b") as f:
    f.seek(6)
    assert f.read(5) == b"world", "read after seek"
    f.seek(0, 2)
    f.write(b"!")
assert os.stat(mount + "/dir/f").st_size == 12, os.stat(mount + "/dir/f")
with open(mount + "/dir/f", "a") as f:
    f.write("+")
os.rename(mount + "/dir/f", mount + "/dir/g")
assert sorted(os.listdir(mount + "/dir")) == ["g"], os.listdir(mount + "/dir")
with open(mount + "/dir/g", "rb") as f:
    assert f.read() == b"Jello world!+"
with open(mount + "/dir/gone", "w") as f:
    f.write("x")
os.remove(mount + "/dir/gone")
assert not os.path.exists(mount + "/dir/gone")
print("ok")
"#,
        mount = setup.mount.to_str().unwrap()
    );
    let output = setup.run("python3", &["-c", &script]);
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "ok");
    assert_eq!(setup.contents("dir/g"), b"Jello world!+");
}

/// Builds a C program from `source` in the scratch directory.
fn compile(setup: &Setup, name: &str, source: &str) -> PathBuf {
    let file = setup.scratch(&format!("{name}.c"));
    fs::write(&file, source).unwrap();
    let program = setup.scratch(name);
    let output = Command::new("cc").arg("-O1").arg("-o").arg(&program).arg(&file).output().unwrap();
    assert!(output.status.success(), "cc: {}", String::from_utf8_lossy(&output.stderr));
    program
}

const STDIO_PROGRAM: &str = r#"
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "w+");
    if (!f) { perror("fopen"); return 1; }
    fprintf(f, "line %d\n", 1);
    char block[5000];
    memset(block, 'b', sizeof block);
    if (fwrite(block, 1, sizeof block, f) != sizeof block) { perror("fwrite"); return 2; }
    if (fseek(f, 0, SEEK_SET) != 0) { perror("fseek"); return 3; }
    char head[8] = {0};
    if (fread(head, 1, 7, f) != 7 || strcmp(head, "line 1\n") != 0) { fprintf(stderr, "read %s\n", head); return 4; }
    if (fseek(f, 0, SEEK_END) != 0 || ftell(f) != 5007) { fprintf(stderr, "ftell %ld\n", ftell(f)); return 5; }
    fputs("end\n", f);
    if (fclose(f) != 0) { perror("fclose"); return 6; }
    f = fopen(argv[1], "r");
    if (!f) { perror("fopen r"); return 7; }
    char all[6000];
    size_t n = fread(all, 1, sizeof all, f);
    fclose(f);
    if (n != 5011 || memcmp(all + 5007, "end\n", 4) != 0) { fprintf(stderr, "size %zu\n", n); return 8; }
    puts("ok");
    return 0;
}
"#;

#[test]
fn c_stdio_program() {
    let setup = Setup::new();
    let program = compile(&setup, "stdio", STDIO_PROGRAM);
    let output = setup.run(s(&program), &[&setup.logical("stdio.txt")]);
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "ok");
    let mut expected = b"line 1\n".to_vec();
    expected.extend(std::iter::repeat_n(b'b', 5000));
    expected.extend_from_slice(b"end\n");
    assert!(setup.contents("stdio.txt") == expected);
}

const FORK_PROGRAM: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int fd = open(argv[1], O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0) { perror("open"); return 1; }
    char parent[4096], child[4096];
    memset(parent, 'p', sizeof parent);
    memset(child, 'c', sizeof child);
    if (pwrite(fd, parent, sizeof parent, 0) != sizeof parent) { perror("pwrite"); return 2; }
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 3; }
    if (pid == 0) {
        if (pwrite(fd, child, sizeof child, 4096) != sizeof child) _exit(4);
        _exit(close(fd) == 0 ? 0 : 5);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "child failed: %d\n", status);
        return 6;
    }
    if (pwrite(fd, parent, sizeof parent, 8192) != sizeof parent) { perror("pwrite 2"); return 7; }
    return close(fd) == 0 ? 0 : 8;
}
"#;

#[test]
fn fork_gives_the_child_its_own_writer() {
    let setup = Setup::new();
    let program = compile(&setup, "fork", FORK_PROGRAM);
    setup.run(s(&program), &[&setup.logical("forked")]);
    let mut expected = vec![b'p'; 4096];
    expected.extend(vec![b'c'; 4096]);
    expected.extend(vec![b'p'; 4096]);
    assert!(setup.contents("forked") == expected, "parent's and child's writes read back differently");
    let totals = setup.totals("forked");
    assert_eq!(totals["writers"], 2, "{totals}");
}

#[test]
fn paths_outside_the_mount_pass_through_unchanged() {
    let setup = Setup::new();
    let source = setup.scratch("plain");
    let data = random_bytes(200_000, 5);
    fs::write(&source, &data).unwrap();
    let copy = setup.scratch("plain.copy");
    setup.run("cp", &[s(&source), s(&copy)]);
    assert!(fs::read(&copy).unwrap() == data);
    let mut appended = fs::OpenOptions::new().append(true).open(&copy).unwrap();
    appended.write_all(b"tail").unwrap();
    let with = setup.run("ls", &["-la", s(&setup.scratch(""))]);
    let without = Command::new("ls").arg("-la").arg(setup.scratch("")).output().unwrap();
    assert_eq!(with.stdout, without.stdout);
    let missing = setup.preloaded("cat", &[s(&setup.scratch("missing"))]).output().unwrap();
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("No such file or directory"));
    // Nothing was created under the backends for these calls.
    let backend_entries = fs::read_dir(setup.dir.path().join("backend0")).unwrap().count();
    assert_eq!(backend_entries, 0);
}

/// A process that touches no plfs path does no plfs work: `cat` of plain
/// files under the interposer has not loaded libplfs.so (its own
/// /proc/self/maps says so) and runs one thread. The same look at the maps
/// after a plfs file was read does find libplfs.so, so the check can fail.
#[test]
fn a_process_that_touches_no_plfs_path_loads_no_libplfs() {
    let setup = Setup::new();
    let plain = setup.scratch("plain");
    fs::write(&plain, b"plain\n").unwrap();
    let loaded = |maps: &str| maps.lines().any(|line| line.ends_with("/libplfs.so"));

    let output = setup.run("cat", &[s(&plain), "/proc/self/status", "/proc/self/maps"]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("libplfs_preload.so"), "the interposer is not mapped:\n{text}");
    assert!(!loaded(&text), "cat of plain files loaded libplfs.so:\n{text}");
    assert!(text.lines().any(|line| line == "Threads:\t1"), "cat of plain files runs threads:\n{text}");

    setup.run("cp", &[s(&plain), &setup.logical("f")]);
    let output = setup.run("cat", &[&setup.logical("f"), "/proc/self/maps"]);
    assert!(loaded(&String::from_utf8_lossy(&output.stdout)), "a plfs read did not load libplfs.so");
}

/// Start-up does nothing eagerly: `true` under the interposer reads no
/// plfsrc, loads no libplfs.so and starts no thread, and `cat`
/// of a plain file reads the plfsrc (to know the file is not in a mount)
/// but still loads no libplfs.so and starts no thread. strace(1) watches
/// the unmodified programs.
#[test]
fn start_up_reads_no_plfsrc_and_starts_no_thread() {
    let setup = Setup::new();
    let plain = setup.scratch("plain");
    fs::write(&plain, b"plain\n").unwrap();
    let config = s(&setup.config).to_owned();
    let traced = |name: &str, program: &[&str]| -> Vec<String> {
        let log = setup.scratch(&format!("{name}.strace"));
        let output = Command::new("timeout")
            .arg(TIMEOUT_SECONDS.to_string())
            .args(["strace", "-f", "-qq", "-e", "trace=open,openat,openat2,clone,clone3,fork,vfork", "-o"])
            .arg(&log)
            .arg("-E")
            .arg(format!("LD_PRELOAD={}", interposer().display()))
            .args(program)
            .env("PLFSRC", &setup.config)
            .env_remove("LD_PRELOAD")
            .output()
            .unwrap_or_else(|error| panic!("strace: {error} (scripts/install-deps.sh installs it)"));
        assert!(output.status.success(), "strace {program:?}: {}", String::from_utf8_lossy(&output.stderr));
        fs::read_to_string(&log).unwrap().lines().map(str::to_owned).collect()
    };
    let threads =
        |calls: &[String]| calls.iter().filter(|call| call.contains("clone")).cloned().collect::<Vec<_>>();

    let calls = traced("true", &["true"]);
    assert!(
        calls.iter().any(|call| call.contains("libplfs_preload.so")),
        "no interposer:\n{}",
        calls.join("\n")
    );
    assert!(!calls.iter().any(|call| call.contains(&config)), "true read the plfsrc:\n{}", calls.join("\n"));
    assert!(
        !calls.iter().any(|call| call.contains("/libplfs.so")),
        "true loaded libplfs.so:\n{}",
        calls.join("\n")
    );
    assert_eq!(threads(&calls), Vec::<String>::new());

    let calls = traced("cat", &["cat", s(&plain)]);
    assert!(
        calls.iter().any(|call| call.contains(&config)),
        "cat did not read the plfsrc:\n{}",
        calls.join("\n")
    );
    assert!(
        !calls.iter().any(|call| call.contains("/libplfs.so")),
        "cat loaded libplfs.so:\n{}",
        calls.join("\n")
    );
    assert_eq!(threads(&calls), Vec::<String>::new());
}

/// The interposer as `make install` installs it, which every process under
/// LD_PRELOAD maps and a cold start reads whole (docs/PERFORMANCE.md,
/// "Start-up: what the interposer's file holds"): stripped, its debug info
/// in lib/.debug/ named by .gnu_debuglink; exporting only functions that
/// interpose libc's (by name, from the libc it links) and its own
/// `plfs_preload_*`, not the C API of a dependency (crc-fast's 26
/// `crc_fast_*` functions and the CRC tables they kept, 0.7 MB); and under
/// 1.5 MiB. It measured 1.13 MB (0.9 MB loaded, 0.22 MB symbol table):
/// the bound leaves a third for growth, and either the crc-fast exports or
/// the 0.7 MB of unwind tables of discarded functions that lld keeps
/// (build.rs links with GNU ld for that) would take it over.
#[test]
fn the_installed_interposer_exports_only_interposers_and_is_small() {
    let library_dir = Path::new(BIN).parent().unwrap();
    interposer();
    let prefix = tempfile::Builder::new().prefix("plfs-preload-install.").tempdir().unwrap();
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let output = Command::new("make")
        .arg("--no-print-directory")
        .arg("-C")
        .arg(&workspace)
        .arg("install-lib")
        .arg(format!("PREFIX={}", prefix.path().display()))
        .arg(format!("LIBPLFS_DIR={}", library_dir.display()))
        .output()
        .unwrap();
    assert!(output.status.success(), "make install-lib:\n{}", String::from_utf8_lossy(&output.stderr));
    let installed = prefix.path().join("lib/libplfs_preload.so");
    let tool = |program: &str, args: &[&str], file: &Path| -> String {
        let output = Command::new(program).args(args).arg(file).output().unwrap();
        assert!(
            output.status.success(),
            "{program} {args:?} {}: {}",
            file.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    };

    let sections = tool("readelf", &["-S", "-W"], &installed);
    assert!(!sections.contains(".debug_info"), "{} was installed with its debug info", installed.display());
    assert!(sections.contains(".gnu_debuglink"), "{} names no debug file", installed.display());
    let debug = prefix.path().join("lib/.debug/libplfs_preload.so.debug");
    assert!(
        tool("readelf", &["-S", "-W"], &debug).contains(".debug_info"),
        "{} holds no debug info",
        debug.display()
    );

    // `nm -D` names versioned symbols `name@@VERSION` (or `name@VERSION`).
    let defined = |file: &Path| -> Vec<String> {
        tool("nm", &["-D", "--defined-only"], file)
            .lines()
            .filter_map(|line| line.split_whitespace().nth(2))
            .map(|symbol| symbol.split('@').next().unwrap().to_owned())
            .collect()
    };
    let libc = tool("ldd", &[], &installed)
        .lines()
        .find_map(|line| {
            line.trim().strip_prefix("libc.so.6 => ")?.split_whitespace().next().map(PathBuf::from)
        })
        .expect("ldd names no libc.so.6");
    let libc_symbols: std::collections::HashSet<String> = defined(&libc).into_iter().collect();
    let exported = defined(&installed);
    assert!(
        exported.iter().any(|symbol| symbol == "open"),
        "{} exports no open: {exported:?}",
        installed.display()
    );
    let foreign: Vec<&String> = exported
        .iter()
        .filter(|symbol| !symbol.starts_with("plfs_preload_") && !libc_symbols.contains(symbol.as_str()))
        .collect();
    assert!(
        foreign.is_empty(),
        "{} exports functions that interpose nothing in {}: {foreign:?}",
        installed.display(),
        libc.display()
    );

    let size = fs::metadata(&installed).unwrap().len();
    assert!(size < 3 << 19, "{} is {size} bytes installed, over 1.5 MiB:\n{sections}", installed.display());
}

/// PLFS 2.5's `plfs:` prefix from unmodified programs: `cp` and `cat` pass
/// `plfs:/…/mnt/f` to open(2) as it is, and the interposer must take it
/// as the plfs file (as libplfs and the MPI-IO wrapper do), while a path
/// that is not plfs's after the prefix still reaches libc as written.
#[test]
fn plfs_prefixed_paths_from_unmodified_programs() {
    let setup = Setup::new();
    let source = setup.scratch("source");
    fs::write(&source, b"written through plfs:\n").unwrap();
    let prefixed = format!("plfs:{}", setup.logical("f"));
    setup.run("cp", &[s(&source), &prefixed]);
    assert_eq!(setup.contents("f"), b"written through plfs:\n");
    let cat = setup.run("cat", &[&prefixed]);
    assert_eq!(cat.stdout, b"written through plfs:\n");
    let listed = setup.run("ls", &[&format!("plfs:{}", setup.mount.display())]);
    assert_eq!(String::from_utf8_lossy(&listed.stdout).trim(), "f");

    // Not a plfs path after the prefix: a relative name in "plfs:/", which
    // libc answers (here: it does not exist).
    let elsewhere = setup.preloaded("cat", &["plfs:/nonexistent-plfs-prefix-test"]).output().unwrap();
    assert!(!elsewhere.status.success());
    assert!(String::from_utf8_lossy(&elsewhere.stderr).contains("No such file"), "{elsewhere:?}");
}

/// A program linked against libplfs, run under the interposer: its first
/// libplfs call reads the plfsrc, which the interposer used to intercept
/// and answer by asking libplfs for its mount list, waiting on that same
/// first call forever.
#[test]
fn a_libplfs_program_under_the_interposer_does_not_deadlock() {
    let setup = Setup::new();
    let file = setup.scratch("api.c");
    fs::write(
        &file,
        r#"
#include <fcntl.h>
#include <unistd.h>
#include "plfs.h"
int main(int argc, char **argv) {
    Plfs_fd *fd = NULL;
    ssize_t bytes = 0;
    int refs = -1;
    if (argc != 2) return 2;
    plfs_error_t ret = plfs_open(&fd, argv[1], O_CREAT | O_RDWR, getpid(), 0644, NULL);
    if (ret != PLFS_SUCCESS) { printf("open: %s\n", strplfserr(ret)); return 1; }
    ret = plfs_write(fd, "api\n", 4, 0, getpid(), &bytes);
    if (ret != PLFS_SUCCESS || bytes != 4) { printf("write: %s\n", strplfserr(ret)); return 1; }
    ret = plfs_close(fd, getpid(), getuid(), O_RDWR, NULL, &refs);
    if (ret != PLFS_SUCCESS || refs != 0) { printf("close: %s\n", strplfserr(ret)); return 1; }
    puts("ok");
    return 0;
}
"#,
    )
    .unwrap();
    let libdir = interposer().parent().unwrap().to_path_buf();
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include");
    let program = setup.scratch("api");
    let output = Command::new("cc")
        .args(["-Wall", "-Werror", "-o"])
        .arg(&program)
        .arg(&file)
        .arg(format!("-I{}", include.display()))
        .arg(format!("-L{}", libdir.display()))
        .arg("-lplfs")
        .arg(format!("-Wl,-rpath,{}", libdir.display()))
        .output()
        .unwrap();
    assert!(output.status.success(), "cc: {}", String::from_utf8_lossy(&output.stderr));
    for path in [setup.logical("api"), format!("plfs:{}", setup.logical("api-prefixed"))] {
        let run = setup.run(s(&program), &[&path]);
        assert_eq!(run.stdout, b"ok\n", "{path}");
    }
    assert_eq!(setup.contents("api"), b"api\n");
    assert_eq!(setup.contents("api-prefixed"), b"api\n");
}

/// Names the layout reserves (hidden by readdir, deleted by `plfs recover
/// --fix` as crash debris) and names that are not UTF-8 are refused with
/// EINVAL. The library used to make the reserved one; the other went past
/// plfs to the host directory under the mount point.
#[test]
fn reserved_and_non_utf8_names_are_refused_with_einval() {
    let setup = Setup::new();
    fs::create_dir(&setup.mount).unwrap();
    let script = format!(
        r#"
import errno, os
mount = os.fsencode({mount:?})
os.mkdir(mount + b"/d")
with open(mount + b"/d/f", "wb") as f:
    f.write(b"kept")
for name in [b".plfs-new.12345678.0000000000000001.00000001", b".plfs-gone.x", b"caf\xe9"]:
    path = mount + b"/d/" + name
    for what, call in [
        ("create", lambda: open(path, "wb").close()),
        ("mkdir", lambda: os.mkdir(path)),
        ("rename", lambda: os.rename(mount + b"/d/f", path)),
    ]:
        try:
            call()
        except OSError as error:
            assert error.errno == errno.EINVAL, (what, path, error)
        else:
            raise AssertionError((what, path, "accepted"))
assert os.listdir(mount + b"/d") == [b"f"], os.listdir(mount + b"/d")
print("ok")
"#,
        mount = setup.mount.to_str().unwrap()
    );
    let output = setup.run("python3", &["-c", &script]);
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "ok");
    assert_eq!(
        fs::read_dir(&setup.mount).unwrap().count(),
        0,
        "nothing passed through to the host directory"
    );
    assert_eq!(setup.contents("d/f"), b"kept");
    assert_eq!(
        setup.plfs(&["recover", "--fix", &setup.logical("d/f")]).trim_end().rsplit(": ").next(),
        Some("no problems found")
    );
}

/// Close-to-open between processes on a small_file mount, through plain
/// POSIX calls: `hold` caches its view of a directory, then runs this
/// program again (system(), so the other process is preloaded too) to
/// create, close or unlink files there, and checks each call sees it.
const OTHER_PROCESS_PROGRAM: &str = r#"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
static const char *self;
static int failures;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "line %d: %s (errno %d)\n", __LINE__, #c, errno); failures++; } } while (0)
static void other(const char *path, const char *action) {
    char command[4096];
    snprintf(command, sizeof command, "'%s' '%s' %s", self, path, action);
    if (system(command) != 0) { fprintf(stderr, "%s failed\n", command); exit(3); }
}
static int count(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int names = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) names += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return names;
}
static char *join(const char *dir, const char *name) {
    static char paths[8][4096];
    static int next;
    char *path = paths[next++ % 8];
    snprintf(path, 4096, "%s/%s", dir, name);
    return path;
}
int main(int argc, char **argv) {
    self = argv[0];
    const char *path = argv[1], *action = argv[2];
    struct stat st;
    if (strcmp(action, "create") == 0) {
        int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
        if (fd < 0 || write(fd, "x", 1) != 1 || close(fd) != 0) { perror(path); return 1; }
        return 0;
    }
    if (strcmp(action, "unlink") == 0) {
        if (unlink(path) != 0) { perror(path); return 1; }
        return 0;
    }
    const char *dir = path;
    CHECK(mkdir(dir, 0755) == 0);
    CHECK(count(dir) == 0);
    char *for_stat = join(dir, "for-stat");
    other(for_stat, "create");
    CHECK(stat(for_stat, &st) == 0 && st.st_size == 1);
    char *for_access = join(dir, "for-access");
    other(for_access, "create");
    CHECK(access(for_access, R_OK) == 0);
    char *for_open = join(dir, "for-open");
    other(for_open, "create");
    int fd = open(for_open, O_RDONLY);
    char byte = 0;
    CHECK(fd >= 0 && read(fd, &byte, 1) == 1 && byte == 'x' && close(fd) == 0);
    char *for_readdir = join(dir, "for-readdir");
    other(for_readdir, "create");
    CHECK(count(dir) == 4);
    errno = 0;
    CHECK(stat(join(dir, "missing"), &st) == -1 && errno == ENOENT);
    other(for_stat, "unlink");
    other(for_access, "unlink");
    other(for_open, "unlink");
    other(for_readdir, "unlink");
    CHECK(count(dir) == 0);
    char *kept = join(dir, "for-rmdir");
    other(kept, "create");
    CHECK(stat(kept, &st) == 0);
    other(kept, "unlink");
    CHECK(rmdir(dir) == 0);
    errno = 0;
    CHECK(access(dir, F_OK) == -1 && errno == ENOENT);
    if (failures) return 1;
    puts("ok");
    return 0;
}
"#;

#[test]
fn small_files_closed_by_another_process_are_seen() {
    let setup = Setup::with_workload("small_file");
    let program = compile(&setup, "other_process", OTHER_PROCESS_PROGRAM);
    let output = setup.run(s(&program), &[&setup.logical("d"), "hold"]);
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "ok");
}

/// Eight processes at once create (O_EXCL), write and close one small file
/// each in one directory; once all have closed, each stats every file and
/// must see it at its written size, in each of 20 rounds. A view a rank's
/// create loaded while another rank was closing held that rank's file at
/// size 0 (its name published before its write), and a stat that finds its
/// name answers from the cached view: about one round in three failed.
#[test]
fn small_files_created_at_once_by_several_processes_stat_at_their_size() {
    const RANKS: usize = 8;
    let setup = Setup::with_workload("small_file");
    let program = compile(&setup, "create_storm", include_str!("programs/create_storm.c"));
    for round in 0..20 {
        let dir = setup.logical(&format!("d{round}"));
        setup.run("mkdir", &[&dir]);
        let marks = setup.scratch(&format!("marks{round}"));
        fs::create_dir(&marks).unwrap();
        let ranks: Vec<_> = (0..RANKS)
            .map(|rank| {
                setup
                    .preloaded(s(&program), &[&dir, s(&marks), &rank.to_string(), &RANKS.to_string()])
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for (rank, child) in ranks.into_iter().enumerate() {
            let output = child.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(output.status.success(), "round {round} rank {rank}: {stderr}");
            assert_eq!(
                String::from_utf8_lossy(&output.stdout).trim(),
                "0",
                "round {round} rank {rank}: {stderr}"
            );
        }
    }
}

/// A create for writing (O_CREAT|O_TRUNC, as `>`, cp and mdtest's creat
/// open) goes straight to plfs_open, with no getattr of the new name
/// first: on a small_file mount that getattr of a name not there yet
/// listed the directory's container (a view refresh) on every create, on
/// an n-n mount it stat'ed the missing backend file. strace(1) watches an
/// unmodified python creating ten files. A create onto a directory still
/// fails with EISDIR on every workload.
#[test]
fn a_create_looks_nothing_up_first_and_refuses_a_directory() {
    for workload in ["shared_file", "file_per_proc", "small_file"] {
        let setup = Setup::with_workload(workload);
        let d = setup.logical("d");
        setup.run("mkdir", &[&d]);
        let log = setup.scratch("creates.strace");
        let creates = format!(
            "import os\nfor i in range(10):\n    fd = os.open('{d}/f%d' % i, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)\n    os.write(fd, b'x')\n    os.close(fd)\n"
        );
        let calls = setup.traced_lookups(&log, &creates);
        let listings: Vec<&str> = calls.lines().filter(|call| call.contains(".plfs-smallfile\"")).collect();
        assert!(
            listings.is_empty(),
            "{workload}: creates listed the directory's container:\n{}",
            listings.join("\n")
        );
        let missing: Vec<&str> =
            calls.lines().filter(|call| call.contains("/d/f") && call.contains("ENOENT")).collect();
        if workload == "file_per_proc" {
            assert!(
                missing.is_empty(),
                "{workload}: creates stat'ed the new names first:\n{}",
                missing.join("\n")
            );
        }
        assert_eq!(setup.run("cat", &[&format!("{d}/f9")]).stdout, b"x", "{workload}");
        let error = setup.preloaded("bash", &["-c", &format!("echo z > {d}")]).output().unwrap();
        assert!(!error.status.success(), "{workload}: {error:?}");
        assert!(String::from_utf8_lossy(&error.stderr).contains("Is a directory"), "{workload}: {error:?}");
    }
}

/// `rewinddir` on a plfs stream re-reads the directory: what another
/// (preloaded) process unlinked or created since the first listing shows
/// in the second, on every workload.
#[test]
fn rewinddir_lists_the_directory_again() {
    for workload in ["shared_file", "file_per_proc", "small_file"] {
        let setup = Setup::with_workload(workload);
        let program = compile(&setup, "rewinddir", include_str!("programs/rewinddir.c"));
        let dir = setup.logical("d");
        setup.run("mkdir", &[&dir]);
        setup.run("cp", &["/etc/hostname", &format!("{dir}/kept")]);
        setup.run("cp", &["/etc/hostname", &format!("{dir}/victim")]);
        let change = format!("rm {dir}/victim && cp /etc/hostname {dir}/newcomer");
        let output = setup.run(s(&program), &[&dir, &change]);
        let listed = String::from_utf8_lossy(&output.stdout);
        assert_eq!(listed, "first: kept victim\nagain: kept newcomer\n", "{workload}");
    }
}

/// The rest of the directory-stream calls behave on a plfs directory as on
/// a plain one, on every workload: readdir returns "." and ".." (`ls -a`
/// showed neither), telldir/seekdir return to an entry (glibc's took the
/// interposer's stream for its own: the program hung or crashed),
/// readdir_r, and scandir (glibc's lists with an internal opendir no
/// interposer sees: it failed with ENOENT).
#[test]
fn directory_streams_behave_as_on_a_plain_directory() {
    for workload in ["shared_file", "file_per_proc", "small_file"] {
        let setup = Setup::with_workload(workload);
        let program = compile(&setup, "directory_streams", include_str!("programs/directory_streams.c"));
        let plain = setup.scratch("plain");
        let dir = setup.logical("d");
        for directory in [s(&plain), dir.as_str()] {
            setup.run("mkdir", &[directory, &format!("{directory}/sub")]);
            for name in ["b", "a", ".hidden", "c"] {
                setup.run("cp", &["/etc/hostname", &format!("{directory}/{name}")]);
            }
        }
        let expected = setup.run(s(&program), &[s(&plain)]);
        let listed = setup.run("timeout", &["20", s(&program), &dir]);
        assert_eq!(
            String::from_utf8_lossy(&listed.stdout),
            String::from_utf8_lossy(&expected.stdout),
            "{workload}"
        );
        assert!(String::from_utf8_lossy(&expected.stdout).starts_with("readdir: . .. .hidden a b c sub\n"));
        let shown = setup.run("ls", &["-a", &dir]);
        assert_eq!(String::from_utf8_lossy(&shown.stdout), ".\n..\n.hidden\na\nb\nc\nsub\n", "{workload}");
    }
}

/// Paths of plfs files resolve, and links are refused by name: `readlink
/// -f` and `realpath` (gnulib walks with readlink, which said ENOENT about
/// the mount point libc cannot see), C's realpath and
/// canonicalize_file_name (glibc reads links internally), and `ln` / `ln
/// -s`, refused with EPERM (EXDEV out of the mount) instead of ENOENT.
#[test]
fn real_paths_resolve_and_links_are_refused_clearly() {
    let setup = Setup::new();
    let d = setup.logical("d");
    let f = format!("{d}/f");
    setup.run("mkdir", &[&d]);
    setup.run("cp", &["/etc/hostname", &f]);
    let program = compile(
        &setup,
        "realpath",
        "#define _GNU_SOURCE\n#include <limits.h>\n#include <stdio.h>\n#include <stdlib.h>\nint main(int c, char **v) {\n  char buffer[PATH_MAX];\n  char *a = realpath(v[1], NULL), *b = realpath(v[1], buffer), *e = canonicalize_file_name(v[1]), *m = realpath(v[2], NULL);\n  printf(\"%s %s %s %s\\n\", a, b, e, m ? m : \"missing\");\n  return 0;\n}\n",
    );
    let script = format!(
        "readlink -f {d}/../d/f; realpath {d}/./f; readlink {f}; echo readlink=$?; ln -s f {d}/l 2>&1 | sed 's/.*: //'; ln {f} {d}/h 2>&1 | sed 's/.*: //'; ln {f} {} 2>&1 | sed 's/.*: //'; {} {d}/../d/f {d}/none",
        s(&setup.scratch("h")),
        s(&program)
    );
    let output = setup.run("bash", &["-c", &script]);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!(
            "{f}\n{f}\nreadlink=1\nOperation not permitted\nOperation not permitted\nInvalid cross-device link\n{f} {f} {f} missing\n"
        )
    );
}

/// flock, fcntl record locks and lockf on a plfs file exclude the node's
/// other processes (of the same user), as on a local file system: four
/// processes each add 1 to a counter file 50 times under an exclusive lock
/// and it ends at 200, and `flock -n` fails while another process holds
/// the lock. Before, the locks succeeded and did nothing: the counter
/// ended near 70, and `flock -n` took a lock already held.
#[test]
fn locks_exclude_the_nodes_other_processes() {
    let setup = Setup::new();
    let counter = r#"import fcntl, os, sys
path, how = sys.argv[1], sys.argv[2]
for _ in range(50):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    if how == 'flock':
        fcntl.flock(fd, fcntl.LOCK_EX)
    else:
        fcntl.lockf(fd, fcntl.LOCK_EX)  # fcntl(F_SETLKW) on the whole file
    value = int(os.pread(fd, 32, 0) or b'0')
    os.pwrite(fd, b'%016d' % (value + 1), 0)
    os.close(fd)
"#;
    // lockf(3) itself, which glibc implements with its internal fcntl.
    let lockf = compile(
        &setup,
        "lockf_counter",
        "#include <fcntl.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <unistd.h>\nint main(int c, char **v) {\n  for (int i = 0; i < 50; i++) {\n    int fd = open(v[1], O_RDWR | O_CREAT, 0644);\n    char text[17] = {0};\n    if (fd < 0 || lockf(fd, F_LOCK, 0) != 0) { perror(\"lockf\"); return 1; }\n    long value = pread(fd, text, 16, 0) > 0 ? atol(text) : 0;\n    snprintf(text, sizeof text, \"%016ld\", value + 1);\n    if (pwrite(fd, text, 16, 0) != 16 || close(fd) != 0) { perror(\"write\"); return 1; }\n  }\n  return 0;\n}\n",
    );
    for how in ["flock", "fcntl", "lockf"] {
        let file = setup.logical(&format!("counter-{how}"));
        let script = if how == "lockf" {
            format!("for i in 1 2 3 4; do '{}' '{file}' & done; wait", s(&lockf))
        } else {
            format!("for i in 1 2 3 4; do python3 -c \"$0\" '{file}' {how} & done; wait")
        };
        setup.run("bash", &["-c", &script, counter]);
        let read = setup.run("cat", &[&file]);
        assert_eq!(String::from_utf8_lossy(&read.stdout), "0000000000000200", "{how}");
    }
    let file = setup.logical("held");
    let script = format!(
        "flock -x '{file}' -c 'sleep 2' & sleep 0.5; flock -n '{file}' true; echo held=$?; wait; flock -n '{file}' true; echo free=$?"
    );
    let output = setup.run("bash", &["-c", &script]);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "held=1\nfree=0\n");
    // One file per locked path stays (see `locks`); not left by every run.
    let kept = node_files_of(&setup, "lock");
    assert_eq!(kept.len(), 4, "{kept:?}");
    for file in kept {
        fs::remove_file(file).unwrap();
    }
}

/// Processes that keep a file open and take turns under a lock see what
/// the holder before them wrote: a counter bumped through one descriptor
/// per process (flock and fcntl locks), and sqlite transactions from four
/// connections (rollback journal, fcntl locks), on every workload. The
/// interposer publishes a file's buffered writes before a lock is released
/// and drops its cached view when one is granted, as an NFS client does.
/// Before, each process read its own stale view: the counters ended at 200
/// and 400 of 800 (small_file, shared_file), and sqlite kept 52 of 200
/// committed transactions on shared_file, its integrity check passing.
#[test]
fn lock_holders_see_what_the_holder_before_wrote() {
    let counter = r#"import fcntl, os, sys
path, how = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
for _ in range(50):
    if how == 'flock':
        fcntl.flock(fd, fcntl.LOCK_EX)
    else:
        fcntl.lockf(fd, fcntl.LOCK_EX)
    value = int(os.pread(fd, 32, 0) or b'0')
    os.pwrite(fd, b'%016d' % (value + 1), 0)
    if how == 'flock':
        fcntl.flock(fd, fcntl.LOCK_UN)
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN)
os.close(fd)
"#;
    let database = r#"import sqlite3, sys, time
path, what = sys.argv[1], sys.argv[2]
db = sqlite3.connect(path, timeout=60, isolation_level=None)
db.execute('pragma journal_mode=delete')
if what == 'create':
    db.execute('create table counter(value)')
    db.execute('insert into counter values (0)')
    db.execute('create table log(line)')
elif what == 'check':
    print(db.execute('select value from counter').fetchone()[0], db.execute('select count(*) from log').fetchone()[0], db.execute('pragma integrity_check').fetchone()[0])
else:
    for i in range(50):
        while True:
            try:
                db.execute('begin immediate')
                break
            except sqlite3.OperationalError:
                time.sleep(0.001)
        value = db.execute('select value from counter').fetchone()[0]
        db.execute('update counter set value = ?', (value + 1,))
        db.execute('insert into log values (?)', (f'{what} {i}',))
        db.execute('commit')
db.close()
"#;
    for workload in ["shared_file", "file_per_proc", "small_file"] {
        let setup = Setup::with_workload(workload);
        for how in ["flock", "fcntl"] {
            let file = setup.logical(&format!("counter-{how}"));
            let script = format!("for i in 1 2 3 4; do python3 -c \"$0\" '{file}' {how} & done; wait");
            setup.run("bash", &["-c", &script, counter]);
            let read = setup.run("cat", &[&file]);
            assert_eq!(String::from_utf8_lossy(&read.stdout), "0000000000000200", "{workload} {how}");
        }
        let db = setup.logical("db");
        let script = format!(
            "python3 -c \"$0\" '{db}' create && for i in 1 2 3 4; do python3 -c \"$0\" '{db}' $i & done; wait; python3 -c \"$0\" '{db}' check"
        );
        let output = setup.run("bash", &["-c", &script, database]);
        assert_eq!(String::from_utf8_lossy(&output.stdout), "200 200 ok\n", "{workload}");
        for file in node_files_of(&setup, "lock") {
            fs::remove_file(file).unwrap();
        }
    }
}

/// A Python reader at the end of `latest` while another process publishes
/// a new version there with `mv` (write elsewhere, rename onto the name)
/// reads the end of its own file a second later, as on a local file
/// system; a new open reads the new version. Before, the reader's look for
/// appends found the new file, and on shared_file and small_file it read
/// 4096 bytes of the new version past its own end.
#[test]
fn a_reader_at_the_end_of_a_file_republished_by_mv_reads_its_own_end() {
    let reader = r#"import os, subprocess, sys, time
latest, new = sys.argv[1], sys.argv[2]
fd = os.open(latest, os.O_RDONLY)
first = os.read(fd, 8192)
subprocess.run(['mv', new, latest], check=True)
time.sleep(1.3)
more = os.read(fd, 8192)
with open(latest, 'rb') as f:
    now = f.read()
print(len(first), sorted(set(first)), len(more), len(now), sorted(set(now)))
"#;
    for workload in ["shared_file", "file_per_proc", "small_file"] {
        let setup = Setup::with_workload(workload);
        let (latest, new) = (setup.logical("latest"), setup.logical("new"));
        setup.run("python3", &["-c", &format!("open('{latest}', 'wb').write(b'x' * 4096)")]);
        setup.run("python3", &["-c", &format!("open('{new}', 'wb').write(b'y' * 8192)")]);
        let output = setup.run("python3", &["-c", reader, &latest, &new]);
        assert_eq!(String::from_utf8_lossy(&output.stdout), "4096 [120] 0 8192 [121]\n", "{workload}");
    }
}

/// `tail -f` follows a file other processes append to, on every workload:
/// an open file's size and a read at its cached end look at the store
/// again after a second, and a writer holding its file open publishes
/// what it wrote a second before at its next write. Before, tail printed
/// the first line and nothing more on shared_file and small_file, and
/// nothing of the held-open writer's.
#[test]
fn tail_follows_what_other_processes_append() {
    for workload in ["shared_file", "file_per_proc", "small_file"] {
        let setup = Setup::with_workload(workload);
        let log = setup.logical("log");
        let followed = setup.dir.path().join("followed");
        let script = format!(
            "echo first >> '{log}'\ntimeout 5 tail -f '{log}' > '{}' &\nsleep 1\nfor i in 1 2 3; do echo line$i >> '{log}'; sleep 0.3; done\nwait\n",
            followed.display()
        );
        setup.run("bash", &["-c", &script]);
        let seen = fs::read_to_string(&followed).unwrap();
        assert_eq!(seen, "first\nline1\nline2\nline3\n", "{workload}");
        // A writer that holds its file open and writes a line every 0.3 s
        // publishes within about a second of writing; tail stops before it
        // closes. (Which lines make it depends on timing; the first must.
        // `-F`: on small_file the name itself is published with the lines.)
        let job = setup.logical("job");
        let writer = format!(
            "import os, time\nfd = os.open('{job}', os.O_WRONLY | os.O_CREAT, 0o644)\nfor i in range(8):\n    os.write(fd, b'held %d\\n' % i)\n    time.sleep(0.3)\ntime.sleep(2.5)\nos.close(fd)\n"
        );
        let script = format!(
            "python3 -c \"$0\" &\nsleep 1\ntimeout 3 tail -F '{job}' > '{}' 2>/dev/null\nwait\n",
            followed.display()
        );
        setup.run("bash", &["-c", &script, &writer]);
        let seen = fs::read_to_string(&followed).unwrap();
        let all: String = (0..8).map(|i| format!("held {i}\n")).collect();
        assert!(seen.starts_with("held 0\n") && all.starts_with(&seen), "{workload}: tail saw {seen:?}");
    }
}

/// Shell redirections onto plfs files (README "Redirections"): bash's
/// builtins (echo, printf, read, while-read loops, `exec 3>`, `exec 4<`), external
/// commands writing and reading through a redirected 0, 1 or 2, a group
/// mixing both in order, and a command killed after writing, whose bytes
/// still reach the file. Each line is checked through the library. The
/// same script runs in dash, Debian's /bin/sh: it closes 0 before moving
/// an input file onto it, so the redirection's pipe lands on 0 by itself.
/// Before, the interposer then closed it (`dup3(0, 0)` failed): every
/// `cmd < plfs-file` in a sh script read EBADF. In both shells `exec 4<
/// file` failed the same way (EINVAL in bash, EBADF at the first read in
/// dash): the descriptor reserved for 4 was 4 itself.
#[test]
fn shell_redirections_onto_plfs_files() {
    for shell in ["bash", "dash"] {
        shell_redirections_in(shell);
    }
}

fn shell_redirections_in(shell: &str) {
    let setup = Setup::new();
    let m = setup.logical("");
    let crash = compile(&setup, "crash", CRASH_PROGRAM);
    let script = format!(
        r#"set -e
echo x > {m}f
echo y >> {m}f
printf '%s\n' z >> {m}f
read line < {m}f
echo "read: $line"
while read l; do echo "loop: $l"; done < {m}f
exec 3>{m}g
echo one >&3
echo two >&3
exec 3>&-
cat {m}g
cat < {m}f > {m}copy
wc -l < {m}copy
exec 4< {m}f
read first <&4
echo "fd 4: $first"
cat <&4
exec 4<&-
ls -d / > {m}ls
ls /no/such/path 2> {m}err || true
{{ echo a; ls -d /; echo b; }} > {m}group
{{ {crash}; }} > {m}crashed || true
echo done
"#,
        crash = s(&crash)
    );
    let output = setup.run(shell, &["-c", &script]);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "read: x\nloop: x\nloop: y\nloop: z\none\ntwo\n3\nfd 4: x\ny\nz\ndone\n",
        "{shell}: stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(setup.contents("f"), b"x\ny\nz\n");
    assert_eq!(setup.contents("g"), b"one\ntwo\n");
    assert_eq!(setup.contents("copy"), b"x\ny\nz\n");
    assert_eq!(setup.contents("ls"), b"/\n");
    assert!(String::from_utf8_lossy(&setup.contents("err")).contains("No such file or directory"));
    assert_eq!(setup.contents("group"), b"a\n/\nb\n");
    assert_eq!(setup.contents("crashed"), b"before the crash\n");
}

/// Runs `program args… <dir>` on a plain directory, then under the
/// interposer on a directory of every workload's mount, and checks that
/// each prints what the plain run printed, after `differs` rewrote the
/// plain transcript where plfs documents a difference; `then` checks more
/// on each mount. Returns the plain transcript (unrewritten).
fn same_transcript_as_plain(
    program: &str,
    args: &[&str],
    differs: impl Fn(&str) -> String,
    then: impl Fn(&Setup, &str, &str),
) -> String {
    let plain = tempfile::tempdir().unwrap();
    let control = Command::new(program).args(args).arg(plain.path()).output().unwrap();
    assert!(control.status.success(), "{}", String::from_utf8_lossy(&control.stderr));
    let control = String::from_utf8_lossy(&control.stdout).into_owned();
    let expected = differs(&control);
    for workload in ["shared_file", "file_per_proc", "small_file"] {
        let setup = Setup::with_workload(workload);
        let dir = setup.logical("d");
        setup.run("mkdir", &[&dir]);
        let mut with_dir = args.to_vec();
        with_dir.push(&dir);
        let output = setup.run(program, &with_dir);
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            expected,
            "{workload}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        then(&setup, workload, &dir);
    }
    control
}

/// The transcript as it is.
fn unchanged(transcript: &str) -> String {
    transcript.to_owned()
}

/// A shell's numbered descriptors over plfs files (`exec 4> f`, `exec 5<>
/// f`): dash saves and closes whatever is at a number before it puts a
/// file there, so each `exec N>` closed a backend log or file libplfs had
/// opened at that low number. Before, small_file lost whole files ("No
/// such file or directory" after the close), file_per_proc failed writes
/// with EIO, and shared_file lost a line silently. Libplfs now keeps its
/// backend descriptors at 768 and up under the interposer.
#[test]
fn numbered_shell_descriptors_leave_libplfs_descriptors_alone() {
    let script = "d=$1
exec 3> $d/a
echo a1 >&3
exec 4> $d/b
echo b1 >&4
echo a2 >&3
exec 5<> $d/c
echo c1 >&5
echo a3 >&3
echo b2 >&4
exec 6> $d/e
echo e1 >&6
echo c2 >&5
exec 3>&- 4>&- 5>&- 6>&-
cat $d/a $d/b $d/c $d/e
";
    let plain = same_transcript_as_plain("dash", &["-c", script, "sh"], unchanged, |_, _, _| {});
    assert_eq!(plain, "a1\na2\na3\nb1\nb2\nc1\nc2\ne1\n");
}

/// A log renamed by another process while its writer holds it open (`mv`,
/// logrotate without copytruncate) keeps every line the writer writes
/// after the rename, and the writer's close succeeds and publishes there,
/// on every workload. Before, on shared_file the close failed with ENOENT
/// (Python raised) and left the open record for `plfs recover`; on
/// file_per_proc a rename to a name on the other backend copied the file,
/// and the lines written after it went to the removed copy; on small_file
/// they were orphans (in no file), and the writer's reopen took the
/// renamed file for `app.log`, so the next `mv` found no `app.log`.
#[test]
fn a_log_renamed_by_another_process_keeps_its_writers_lines() {
    let script = r#"
import os, subprocess, sys
d = sys.argv[1]
fd = os.open(d + "/app.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
for generation in range(1, 4):
    os.write(fd, b"before %d\n" % generation)
    subprocess.run(["mv", d + "/app.log", d + "/app.log.%d" % generation], check=True)
    os.write(fd, b"after %d\n" % generation)
    os.close(fd)
    fd = os.open(d + "/app.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
os.close(fd)
for name in sorted(os.listdir(d)):
    print(name, open(d + "/" + name).read().split("\n")[:-1])
"#;
    let plain = same_transcript_as_plain("python3", &["-c", script], unchanged, |setup, workload, dir| {
        if workload == "shared_file" {
            for generation in 1..=3 {
                let found = setup.plfs(&["recover", &format!("{dir}/app.log.{generation}")]);
                assert!(found.contains("no problems found"), "{found}");
            }
        }
    });
    assert_eq!(
        plain,
        "app.log []\napp.log.1 ['before 1', 'after 1']\napp.log.2 ['before 2', 'after 2']\n\
         app.log.3 ['before 3', 'after 3']\n"
    );
}

/// preadv2 and pwritev2 (what Python's `os.preadv` and `os.pwritev` call)
/// with their RWF_* flags, pwrite on an O_APPEND description (Linux writes
/// at the end, whatever the offset) and Python's TemporaryFile (O_TMPFILE
/// first) behave as on a plain directory. Before, preadv2 and pwritev2
/// failed with EBADF, an O_APPEND pwrite overwrote the file's start, and
/// O_TMPFILE failed with EISDIR (a pre-3.11 kernel's answer; EOPNOTSUPP
/// now, the answer of a file system without it).
#[test]
fn vector_calls_and_appends_behave_as_on_a_local_file_system() {
    let script = include_str!("programs/vectors_and_appends.py");
    // EOPNOTSUPP, which Python names ENOTSUP (the same number on Linux).
    let unsupported = |plain: &str| plain.replace("O_TMPFILE opened", "O_TMPFILE error ENOTSUP");
    let plain = same_transcript_as_plain("python3", &["-c", script], unsupported, |_, _, _| {});
    assert!(plain.contains("O_APPEND pwrite (1, 0, b'Sbcdef+!X')"), "{plain}");
}

/// A process sees its own changes to a file at once, through its other
/// descriptors and by name, as on a local file system. Before, on
/// small_file a stat, a write through one descriptor and a stat gave the
/// old size, another descriptor read the old bytes, even after a truncate,
/// and Python's NamedTemporaryFile showed size 0 after a flushed write.
#[test]
fn a_process_sees_its_own_changes_through_every_descriptor() {
    let script = include_str!("programs/own_changes_seen.py");
    let plain = same_transcript_as_plain("python3", &["-c", script], unchanged, |_, _, _| {});
    assert!(plain.contains("after a write 10 b'bbbbbbbbbb'"), "{plain}");
}

/// Python's mmap reads plfs files as a plain file's: a read-only mapping of
/// the whole file, and a private (copy-on-write) one at an offset whose
/// stores stay in memory. A shared writable mapping, whose stores would
/// have to reach the file, is refused with ENODEV. Before, every mmap of a
/// plfs descriptor failed with EBADF.
#[test]
fn mmap_reads_plfs_files_privately() {
    let script = r#"
import errno, mmap, sys
d = sys.argv[1]
with open(d + "/m", "wb") as f:
    f.write(bytes(range(256)) * 40)
with open(d + "/m", "rb") as f:
    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    print("read", len(m), m[0:4].hex(), m[10239], m.find(b"\xfe\xff\x00"))
    m.close()
with open(d + "/m", "r+b") as f:
    m = mmap.mmap(f.fileno(), 4096, access=mmap.ACCESS_COPY, offset=4096)
    m[0:2] = b"zz"
    print("private", len(m), m[0:3])
    m.close()
    try:
        mmap.mmap(f.fileno(), 4096, access=mmap.ACCESS_WRITE).close()
        print("shared writable made")
    except OSError as e:
        print("shared writable", errno.errorcode[e.errno])
print("file", open(d + "/m", "rb").read()[4096:4099].hex())
"#;
    let refused = |plain: &str| plain.replace("shared writable made", "shared writable ENODEV");
    let plain = same_transcript_as_plain("python3", &["-c", script], refused, |_, _, _| {});
    assert!(plain.starts_with("read 10240 00010203 255 254\nprivate 4096 b'zz\\x02'\n"), "{plain}");
}

/// posix_fallocate and fallocate(1) grow a plfs file as on a local file
/// system (zeros after the old end, never a shrink, EINVAL and EBADF where
/// it gives them); punching a hole is refused as EOPNOTSUPP, as on the FUSE
/// mount. Before, every call failed with EBADF: the kernel saw the plfs
/// descriptor's reserved /dev/null.
#[test]
fn fallocate_grows_plfs_files_as_on_a_local_file_system() {
    let script = include_str!("programs/fallocate.py");
    let plain = same_transcript_as_plain("python3", &["-c", script], unchanged, |setup, workload, dir| {
        let punch = setup
            .preloaded("fallocate", &["-p", "-o", "0", "-l", "10", &format!("{dir}/fb")])
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&punch.stderr).contains("unsupported") && punch.status.code() == Some(1),
            "{workload}: {punch:?}"
        );
    });
    assert!(plain.contains("fallocate(1) 0 16384"), "{plain}");
}

/// A closed file's stat answers from what its last close left (FORMAT.md
/// §6.1): unmodified programs in other processes still see a writer's
/// synced bytes while it is open, and its close.
#[test]
fn stats_from_other_processes_follow_an_open_writer() {
    let setup = Setup::new();
    let path = setup.logical("f");
    let script = format!(
        r#"
import os, subprocess
p = {path:?}
def other(fmt):
    return subprocess.run(["stat", "-c", fmt, p], check=True, capture_output=True, text=True).stdout.strip()
with open(p, "w") as f:
    f.write("first\n")
print(other("%s"))
fd = os.open(p, os.O_WRONLY | os.O_APPEND)
os.write(fd, b"second\n")
os.fsync(fd)
print(other("%s"))
os.write(fd, b"third\n")
os.close(fd)
print(other("%s"))
"#
    );
    let output = setup.run("python3", &["-c", &script]);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "6\n13\n19\n");
    assert_eq!(setup.contents("f"), b"first\nsecond\nthird\n");
}

/// fstat of a file being written counts every byte written and forces
/// nothing to disk, as on a local file system: 50 rounds of write + fstat
/// make no fsync (close makes its own, a few). Before, each fstat synced
/// the writer's data and index logs (PLFS 2.5's getattr did): 100
/// fdatasyncs, about 700 µs a round.
#[test]
fn fstat_of_a_file_being_written_forces_nothing_to_disk() {
    let setup = Setup::new();
    let path = setup.logical("f");
    let log = setup.scratch("fsyncs.trace");
    fs::create_dir_all(setup.scratch("")).unwrap();
    let script = format!(
        "import os\nfd = os.open({path:?}, os.O_WRONLY | os.O_CREAT, 0o644)\nfor i in range(50):\n    os.write(fd, b'x' * 100)\n    assert os.fstat(fd).st_size == 100 * (i + 1)\nos.close(fd)\n"
    );
    let trace = setup.traced(&log, "fsync,fdatasync", &script);
    let syncs = trace.lines().filter(|line| line.contains("sync(")).count();
    assert!(syncs < 10, "{syncs} fsyncs for 50 writes and fstats:\n{trace}");
    assert_eq!(setup.contents("f"), vec![b'x'; 5000]);
}

/// Writes a line to stdout, flushes it and dies by SIGKILL.
const CRASH_PROGRAM: &str = r#"
#include <signal.h>
#include <stdio.h>
int main(void) {
    fputs("before the crash\n", stdout);
    fflush(stdout);
    raise(SIGKILL);
    return 0;
}
"#;

/// stdio on a descriptor dup2'd onto a plfs file, a child writing into the
/// same redirection, and freopen of stdin and stdout onto plfs paths.
const REDIRECT_PROGRAM: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { perror("open"); return 1; }
    fflush(stdout);
    int saved = dup(1);
    if (saved < 0 || dup2(fd, 1) != 1 || close(fd) != 0) { perror("dup2"); return 2; }
    printf("hello %d\n", 42);
    fflush(stdout);
    if (system("echo from a child") != 0) { fprintf(stderr, "system failed\n"); return 3; }
    fputs("after the child\n", stdout);
    fflush(stdout);
    if (dup2(saved, 1) != 1 || close(saved) != 0) { perror("restore"); return 4; }
    if (freopen(argv[1], "r", stdin) == NULL) { perror("freopen r"); return 5; }
    char line[64];
    if (fgets(line, sizeof line, stdin) == NULL || strcmp(line, "hello 42\n") != 0) {
        fprintf(stderr, "read back: %s\n", line);
        return 6;
    }
    if (freopen(argv[2], "w", stdout) == NULL) { perror("freopen w"); return 7; }
    printf("via freopen\n");
    fprintf(stderr, "ok\n");
    return 0;
}
"#;

#[test]
fn stdio_through_redirected_descriptors() {
    let setup = Setup::new();
    let program = compile(&setup, "redirect", REDIRECT_PROGRAM);
    let output = setup.run(s(&program), &[&setup.logical("dup2"), &setup.logical("reopened")]);
    assert_eq!(String::from_utf8_lossy(&output.stderr).trim(), "ok");
    assert_eq!(setup.contents("dup2"), b"hello 42\nfrom a child\nafter the child\n");
    assert_eq!(setup.contents("reopened"), b"via freopen\n");
}

/// The kernel applies the umask to what open(2) and mkdir(2) create; the
/// interposer serves those calls itself, so it must too. Without it a
/// shell with `umask 077` made world-writable plfs files and directories.
#[test]
fn creation_honours_the_umask() {
    let setup = Setup::new();
    let m = setup.logical("");
    let script = format!(
        "umask 077; echo secret > {m}f; mkdir {m}d; python3 -c \"import os; os.close(os.open('{m}g', os.O_CREAT | os.O_WRONLY, 0o666))\"; \
         umask 027; echo later > {m}h; mkdir {m}e; stat -c %a {m}f {m}d {m}g {m}h {m}e"
    );
    let output = setup.run("bash", &["-c", &script]);
    // h and e: the same shell changed its umask after its first plfs
    // create; the interposer follows umask(3) rather than rereading it.
    assert_eq!(String::from_utf8_lossy(&output.stdout), "600\n700\n600\n640\n750\n");
}

/// An open for reading went through two lookups of its name (the
/// interposer's getattr, to tell a directory from a file, then plfs_open's
/// own), and every create read /proc/self/status for the umask: on an n-n
/// mount, per file, a second `statx` of the backend file and three more
/// system calls. strace(1) watches an unmodified python creating ten files
/// and reading them back: no lookup of the name at all (the open of the
/// backend file refuses a link and its fstat a directory), the umask read
/// once. A
/// read-only open of a directory still gives a directory descriptor, and
/// one for writing fails with EISDIR.
#[test]
fn an_open_looks_its_name_up_once() {
    let setup = Setup::with_workload("file_per_proc");
    let d = setup.logical("d");
    setup.run("mkdir", &[&d]);
    let log = setup.scratch("opens.strace");
    let program = format!(
        "import os, errno, stat\n\
         for i in range(10):\n    fd = os.open('{d}/f%d' % i, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)\n    os.write(fd, b'x%d' % i)\n    os.close(fd)\n\
         for i in range(10):\n    fd = os.open('{d}/f%d' % i, os.O_RDONLY)\n    assert os.read(fd, 64) == b'x%d' % i\n    os.close(fd)\n\
         fd = os.open('{d}', os.O_RDONLY)\n\
         assert stat.S_ISDIR(os.fstat(fd).st_mode)\n\
         assert sorted(os.listdir(fd)) == sorted('f%d' % i for i in range(10)), os.listdir(fd)\n\
         os.close(fd)\n\
         try:\n    os.open('{d}', os.O_WRONLY)\n    raise SystemExit('opened a directory for writing')\n\
         except IsADirectoryError:\n    pass\n"
    );
    let calls = setup.traced_lookups(&log, &program);
    for i in 0..10 {
        let name = format!("/d/f{i}\"");
        let lookups: Vec<&str> =
            calls.lines().filter(|call| call.contains("statx(AT_FDCWD") && call.contains(&name)).collect();
        // The n-n create of a new name makes none, and neither does the
        // read's plfs_open: it opens the backend file refusing a link and
        // tells a directory by the fstat of what it opened.
        assert!(lookups.is_empty(), "f{i} looked up {} times:\n{}", lookups.len(), lookups.join("\n"));
    }
    let umask_reads = calls.lines().filter(|call| call.contains("/proc/self/status")).count();
    assert!(umask_reads <= 1, "the umask was read {umask_reads} times:\n{calls}");
}

/// Opens, reads and closes `argv[1]` `argv[2]` times, each open's calls
/// between two markers (writes of "<" and ">" to an unused descriptor).
const OPEN_READ_CLOSE_PROGRAM: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    char buf[4096];
    for (int i = 0; i < atoi(argv[2]); i++) {
        write(99, "<", 1);
        int fd = open(argv[1], O_RDONLY);
        if (fd < 0) { perror("open"); return 1; }
        ssize_t n = read(fd, buf, sizeof buf);
        if (n != 6) { fprintf(stderr, "read %zd\n", n); return 2; }
        if (close(fd) != 0) { perror("close"); return 3; }
        write(99, ">", 1);
    }
    return 0;
}
"#;

/// A small n-n file opened, read and closed by an unmodified C program
/// costs the calls a plain file's do (openat, read, close), the fstat that
/// refuses a directory, the reserved descriptor's duplication and close,
/// and the move of the backend descriptor above the program's numbers
/// (`fcntl` and `close`; see `numbered_shell_descriptors_leave_libplfs_
/// descriptors_alone`), and nothing else: the interposer asked for its pid at open and
/// for pid and uid at close (libplfs ignores both there), giving back an
/// open's claim woke waiters nobody had (a futex call), a read that came
/// back short was read again to learn that nothing follows, and the
/// reserved descriptor was an open of /dev/null (a path walk and a new
/// file, 2.5 µs with its close, against 0.6 µs for duplicating one kept
/// open). strace(1) counts the calls between the program's markers.
#[test]
fn an_n_n_read_costs_the_calls_of_a_plain_one_and_five() {
    const ROUNDS: usize = 5;
    let setup = Setup::with_workload("file_per_proc");
    let file = setup.logical("f");
    setup.run("sh", &["-c", &format!("echo hello > {file}")]);
    let program = compile(&setup, "open_read_close", OPEN_READ_CLOSE_PROGRAM);
    let log = setup.scratch("reads.strace");
    let output = Command::new("timeout")
        .arg(TIMEOUT_SECONDS.to_string())
        .args(["strace", "-f", "-qq", "-o"])
        .arg(&log)
        .arg("-E")
        .arg(format!("LD_PRELOAD={}", interposer().display()))
        .arg(&program)
        .args([file.as_str(), &ROUNDS.to_string()])
        .env("PLFSRC", &setup.config)
        .output()
        .unwrap_or_else(|error| panic!("strace: {error} (scripts/install-deps.sh installs it)"));
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let trace = fs::read_to_string(&log).unwrap();
    let mut rounds: Vec<Vec<String>> = Vec::new();
    // The program's own thread, between its markers: a thread the mount
    // may start elsewhere is not the open's cost.
    let mut inside: Option<&str> = None;
    for line in trace.lines() {
        // "PID name(args) = result".
        let (pid, call) = line.split_once(' ').map_or(("", line), |(pid, rest)| (pid, rest.trim_start()));
        if call.starts_with("write(99, \"<\"") {
            rounds.push(Vec::new());
            inside = Some(pid);
        } else if call.starts_with("write(99, \">\"") {
            inside = None;
        } else if inside == Some(pid)
            && let Some(round) = rounds.last_mut()
        {
            round.push(call.split('(').next().unwrap_or_default().to_owned());
        }
    }
    assert_eq!(rounds.len(), ROUNDS, "{trace}");
    // The first open loads libplfs and reads the plfsrc; the rest are the
    // steady state.
    for round in &rounds[1..] {
        let mut names = round.clone();
        names.sort();
        let expected = ["close", "close", "close", "fcntl", "fcntl", "openat", "pread64", "statx"];
        assert_eq!(names, expected, "one open, read and close:\n{}", round.join("\n"));
    }
}

/// The scenarios of `descriptors_the_program_closes_by_range_or_number`:
/// each prints one line the test checks.
const CLOSING_PROGRAM: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/close_range.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char *dir;

static int open_plfs(const char *name, int flags) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, flags, 0644);
    if (fd < 0) { perror(path); exit(1); }
    return fd;
}

static void write_plfs(const char *name, const char *text) {
    int fd = open_plfs(name, O_WRONLY | O_CREAT | O_TRUNC);
    if (write(fd, text, strlen(text)) != (ssize_t)strlen(text)) { perror("write"); exit(1); }
    if (close(fd) != 0) { perror("close"); exit(1); }
}

/* What the kernel holds at fd, asked past the interposer's fstat. */
static const char *kernel_kind(int fd) {
    struct stat st;
    if (syscall(SYS_fstat, fd, &st) != 0) return "closed";
    switch (st.st_mode & S_IFMT) {
    case S_IFCHR: return "device";
    case S_IFIFO: return "pipe";
    case S_IFREG: return "file";
    default: return "other";
    }
}

int main(int argc, char **argv) {
    dir = argv[1];
    write_plfs("warm", "warm\n");

    /* A plfs descriptor gets the number a plain open gets. */
    int plain = open("/dev/zero", O_RDONLY);
    close(plain);
    int fd = open_plfs("warm", O_RDONLY);
    printf("numbers plain=%d plfs=%d\n", plain, fd);
    close(fd);

    /* The program closes every descriptor above 2 in some way, then puts
       a pipe of its own at 1023; a plfs descriptor opened next must not
       be a copy of that pipe. */
    const char *ways[] = {"close-loop", "close_range", "closefrom", "dup2"};
    for (int way = 0; way < 4; way++) {
        write_plfs("warm", "warm\n");
        if (way == 0) for (int i = 3; i < 1024; i++) close(i);
        if (way == 1) close_range(3, ~0U, 0);
        if (way == 2) closefrom(3);
        int pipe_fds[2];
        if (pipe(pipe_fds) != 0) { perror("pipe"); return 1; }
        int high = way == 3 ? dup2(pipe_fds[1], 1023) : fcntl(pipe_fds[1], F_DUPFD, 1023);
        fd = open_plfs("warm", O_RDONLY);
        printf("%s at=%d plfs-descriptor=%s\n", ways[way], high, kernel_kind(fd));
        close(fd);
        close(high);
        close(pipe_fds[0]);
        close(pipe_fds[1]);
    }

    /* plfs descriptors closed by close_range and closefrom: their writes
       are published and their numbers free for the next open. */
    fd = open_plfs("by-range", O_WRONLY | O_CREAT | O_TRUNC);
    if (write(fd, "closed by close_range\n", 22) != 22) { perror("write"); return 1; }
    int result = close_range(fd, fd, 0);
    int again = open_plfs("after-range", O_WRONLY | O_CREAT | O_TRUNC);
    printf("close_range=%d reopened=%d\n", result, again == fd);
    close(again);
    fd = open_plfs("by-closefrom", O_WRONLY | O_CREAT | O_TRUNC);
    if (write(fd, "closed by closefrom\n", 20) != 20) { perror("write"); return 1; }
    closefrom(fd);
    again = open_plfs("after-closefrom", O_WRONLY | O_CREAT | O_TRUNC);
    printf("closefrom reopened=%d\n", again == fd);
    close(again);

    /* CLOSE_RANGE_CLOEXEC marks a plfs descriptor close-on-exec. */
    fd = open_plfs("warm", O_RDONLY);
    result = close_range(fd, fd, CLOSE_RANGE_CLOEXEC);
    printf("cloexec=%d flag=%d\n", result, fcntl(fd, F_GETFD) & FD_CLOEXEC);
    close(fd);
    return 0;
}
"#;

/// Programs close descriptors they never opened one by one, with
/// `close_range` or `closefrom`, or `dup2` onto them. The interposer keeps
/// one descriptor of its own (the source every plfs descriptor number is
/// duplicated from); once the program has closed or replaced it, a plfs
/// open must not duplicate whatever the program put at that number (here a
/// pipe: the copy would keep its write end open). And plfs descriptors
/// closed by `close_range` or `closefrom` are closed as close(2) closes
/// them: before, their table entries stayed, the kernel gave the next open
/// the same number and the interposer aborted the program ("reserved
/// twice"), and their writes waited for the program's exit.
#[test]
fn descriptors_the_program_closes_by_range_or_number() {
    let setup = Setup::new();
    let d = setup.logical("d");
    setup.run("mkdir", &[&d]);
    let program = compile(&setup, "closing", CLOSING_PROGRAM);
    let output = setup.run(s(&program), &[&d]);
    let lines = String::from_utf8_lossy(&output.stdout).into_owned();
    let numbers = lines.lines().find(|line| line.starts_with("numbers ")).unwrap_or_default();
    let (plain, plfs) = numbers.trim_start_matches("numbers ").split_once(' ').unwrap_or_default();
    assert_eq!(plain.trim_start_matches("plain="), plfs.trim_start_matches("plfs="), "{lines}");
    for way in ["close-loop", "close_range", "closefrom", "dup2"] {
        let line = format!("{way} at=1023 plfs-descriptor=device");
        assert!(lines.lines().any(|printed| printed == line), "expected {line:?} in:\n{lines}");
    }
    for line in ["close_range=0 reopened=1", "closefrom reopened=1", "cloexec=0 flag=1"] {
        assert!(lines.lines().any(|printed| printed == line), "expected {line:?} in:\n{lines}");
    }
    // Published by close_range and closefrom: another process reads them.
    let read = setup.run("cat", &[&format!("{d}/by-range"), &format!("{d}/by-closefrom")]);
    assert_eq!(String::from_utf8_lossy(&read.stdout), "closed by close_range\nclosed by closefrom\n");
}

/// A forked child that closes an inherited plfs descriptor (with close(2),
/// or every descriptor above 2 with `close_range`, as Python's
/// `os.closerange` and subprocess do) or exits (which closes them all)
/// leaves its parent's open file as it was, as the kernel does: the
/// child's copy of the description is synced, not closed. Closing it
/// closed the parent's writers in the child, and another process's stat
/// then took the parent's still-open file for closed at its size at the
/// fork (11 bytes after 22 were synced), until the parent closed it. A
/// vfork child (subprocess's) changes nothing at all, since it shares the
/// parent's memory: `stats_from_other_processes_follow_an_open_writer` and
/// the `stat` below run one.
#[test]
fn a_forked_child_that_closes_or_exits_leaves_the_parents_file_open() {
    let setup = Setup::new();
    let endings = [
        ("close", "os.close(fd)\n    os._exit(0)"),
        ("closerange", "os.closerange(3, 100000)\n    os._exit(0)"),
        ("exit", "sys.exit(0)"),
    ];
    for (name, ending) in endings {
        let file = setup.logical(name);
        let script = format!(
            r#"import os, subprocess, sys
p = '{file}'
fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b'parent one\n')
pid = os.fork()
if pid == 0:
    {ending}
assert os.waitpid(pid, 0)[1] == 0
os.write(fd, b'parent two\n')
os.fsync(fd)
print(subprocess.run(['stat', '-c', '%s', p], capture_output=True, text=True, check=True).stdout.strip())
os.close(fd)
"#
        );
        let output = setup.run("python3", &["-c", &script]);
        assert_eq!(String::from_utf8_lossy(&output.stdout), "22\n", "a child that ends with {name}");
        let read = setup.run("cat", &[&file]);
        assert_eq!(String::from_utf8_lossy(&read.stdout), "parent one\nparent two\n", "{name}");
        let size = setup.run("stat", &["-c", "%s", &file]);
        assert_eq!(String::from_utf8_lossy(&size.stdout), "22\n", "{name}");
    }
}

/// Runs `program -c script(path)` on a plain file in the scratch directory
/// and on the plfs file `name`, checks that the plfs file ends up with the
/// plain file's bytes, and returns them.
fn same_as_on_a_plain_file(
    setup: &Setup,
    name: &str,
    program: &str,
    script: impl Fn(&str) -> String,
) -> Vec<u8> {
    fs::create_dir_all(setup.scratch("")).unwrap();
    let plain = setup.scratch(&format!("plain {name}"));
    setup.run(program, &["-c", &script(&plain.display().to_string())]);
    let expected = fs::read(&plain).unwrap();
    let file = setup.logical(&name.replace(' ', "-"));
    setup.run(program, &["-c", &script(&file)]);
    let read = setup.run("cat", &[&file]);
    assert_eq!(String::from_utf8_lossy(&read.stdout), String::from_utf8_lossy(&expected), "{name}");
    expected
}

/// A Python script that writes "parent one", forks a child that writes
/// "child" and ends with `ending`, then writes "parent two".
fn forked_writer_script(path: &str, ending: &str) -> String {
    format!(
        r#"import os, sys
fd = os.open('{path}', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b'parent one\n')
pid = os.fork()
if pid == 0:
    os.write(fd, b'child\n')
    {ending}
assert os.waitpid(pid, 0)[1] == 0
os.write(fd, b'parent two\n')
os.close(fd)
"#
    )
}

/// A forked child that writes through a descriptor it inherited moves its
/// parent's offset, as the kernel's shared open file description does, so
/// the parent's next write lands after the child's instead of over it; and
/// a process that writes and leaves with `_exit` (every `os.fork()` child
/// and multiprocessing worker) keeps its bytes. Each script runs on a
/// plain file too, for the kernel's answer. Before, the parent's offset
/// stayed where the fork left it: "child" was overwritten (a child that
/// left with `_exit` left zeros, its bytes never published).
#[test]
fn a_forked_childs_writes_move_its_parents_offset() {
    let setup = Setup::new();
    let endings = [
        ("_exit", "os._exit(0)"),
        ("exit", "sys.exit(0)"),
        ("close then _exit", "os.close(fd)\n    os._exit(0)"),
    ];
    for (name, ending) in endings {
        let expected =
            same_as_on_a_plain_file(&setup, name, "python3", |path| forked_writer_script(path, ending));
        assert_eq!(expected, b"parent one\nchild\nparent two\n", "on a plain file ({name})");
    }
}

/// Commands a program runs with their output on a file the program is
/// writing (Python's `subprocess.run(cmd, stdout=f)`, by vfork and by fork;
/// a shell's subshells and commands on a descriptor it opened) write after
/// what the program wrote, and the program's next write comes after
/// theirs, as on a plain file (the same scripts run on one). The command's
/// output goes through a redirection's pump, which now moves the
/// description's shared offset as it writes. Before, the program's next
/// write overwrote the commands' output (bash lost "two" and "four").
#[test]
fn commands_writing_to_the_programs_file_write_after_it() {
    let setup = Setup::new();
    let python = |path: &str, how: &str| {
        format!(
            r#"import subprocess
with open('{path}', 'w') as f:
    f.write('parent one\n'); f.flush()
    subprocess.run(['echo', 'child'], stdout=f, check=True{how})
    f.write('parent two\n')
"#
        )
    };
    let shell = |path: &str| {
        format!(
            "exec 3>'{path}'\necho one >&3\n( echo two >&3 )\necho three >&3\nsh -c 'echo four' >&3\n{{ echo five; }} >&3\nexec 3>&-\n"
        )
    };
    let script = |name: &str, path: &str| match name {
        "subprocess" => ("python3", python(path, "")),
        "subprocess by fork" => ("python3", python(path, ", preexec_fn=lambda: None")),
        _ => ("bash", shell(path)),
    };
    for name in ["subprocess", "subprocess by fork", "bash"] {
        let program = script(name, "").0;
        same_as_on_a_plain_file(&setup, name, program, |path| script(name, path).1);
    }
}

/// Programs that edit a file in place work on plfs files as on a plain
/// directory: `sed -i` (a stream's `fileno`, `fstat` of it, a temporary
/// from `mkstemp` renamed over the file), `sort -o` onto its own input
/// (`euidaccess`) and `perl -pi`. Before, sed stopped at "not a regular
/// file" (fopencookie streams had no descriptor) and then at its rename
/// (glibc's mkstemp made the temporary outside plfs), sort said "cannot
/// read" and perl "Cannot make temp name".
#[test]
fn in_place_editors_work_on_plfs_files() {
    let setup = Setup::new();
    fs::create_dir_all(setup.scratch("")).unwrap();
    let script = |dir: &str| {
        format!(
            "set -e\nprintf 'b\\na\\nc\\na\\n' > {dir}/s.txt\nsed -i s/a/A/ {dir}/s.txt\nsort -o {dir}/s.txt {dir}/s.txt\nseq 1 12 > {dir}/n.txt\nperl -pi -e 's/1/one/' {dir}/n.txt\ncat {dir}/s.txt {dir}/n.txt\nls {dir}\n"
        )
    };
    let plain = setup.scratch("editors");
    fs::create_dir(&plain).unwrap();
    let expected = setup.run("bash", &["-c", &script(&plain.display().to_string())]);
    let dir = setup.logical("editors");
    setup.run("mkdir", &[&dir]);
    let edited = setup.run("bash", &["-c", &script(&dir)]);
    assert_eq!(String::from_utf8_lossy(&edited.stdout), String::from_utf8_lossy(&expected.stdout));
    assert!(String::from_utf8_lossy(&expected.stdout).starts_with("A\nA\nb\nc\none\n2\n"));
}

/// Where memfd_create(2) is refused (a container's seccomp filter), plfs
/// files still open and a forked child still shares its parent's offset
/// (the offsets' pages are then anonymous; only a redirection's pump cannot
/// share them). With offsets only in memfd pages every plfs open failed
/// with EPERM there.
#[test]
fn files_open_and_forks_share_offsets_without_memfd() {
    let setup = Setup::new();
    let without = compile(&setup, "without_memfd", include_str!("programs/without_memfd.c"));
    let file = setup.logical("no-memfd");
    let script = forked_writer_script(&file, "os._exit(0)");
    setup.run(&without.display().to_string(), &["python3", "-c", &script]);
    let read = setup.run("cat", &[&file]);
    assert_eq!(String::from_utf8_lossy(&read.stdout), "parent one\nchild\nparent two\n");
}

const TEMPORARY_PROGRAM: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
static int check(const char *what, int fd, const char *name, int suffix) {
    struct stat st;
    if (fd < 0) { perror(what); return 1; }
    if (write(fd, "x", 1) != 1 || fstat(fd, &st) != 0 || st.st_size != 1) { perror(what); return 1; }
    close(fd);
    if (stat(name, &st) != 0 || (st.st_mode & 0777) != 0600) { fprintf(stderr, "%s: %s mode %o\n", what, name, st.st_mode & 0777); return 1; }
    if (suffix && strcmp(name + strlen(name) - 4, ".txt") != 0) { fprintf(stderr, "%s: %s lost its suffix\n", what, name); return 1; }
    printf("%s\n", what);
    return 0;
}
int main(int argc, char **argv) {
    char a[4096], b[4096], c[4096], d[4096];
    snprintf(a, sizeof a, "%s/a.XXXXXX", argv[1]);
    snprintf(b, sizeof b, "%s/b.XXXXXX.txt", argv[1]);
    snprintf(c, sizeof c, "%s/c.XXXXXX", argv[1]);
    snprintf(d, sizeof d, "%s/d.XXXXXX", argv[1]);
    if (check("mkstemp", mkstemp(a), a, 0) || check("mkstemps", mkstemps(b, 4), b, 1)
        || check("mkostemp", mkostemp(c, O_CLOEXEC), c, 0)) return 1;
    struct stat st;
    if (!mkdtemp(d) || stat(d, &st) != 0 || !S_ISDIR(st.st_mode) || (st.st_mode & 0777) != 0700) { perror("mkdtemp"); return 1; }
    printf("mkdtemp\n");
    char bad[4096];
    snprintf(bad, sizeof bad, "%s/e.XXXXX", argv[1]);
    if (mkstemp(bad) != -1) { fprintf(stderr, "five X's accepted\n"); return 1; }
    printf("einval\n");
    return 0;
}
"#;

/// mkstemp, mkstemps, mkostemp and mkdtemp with a template under a mount
/// point make a plfs file (mode 0600, usable through the descriptor, the
/// suffix kept) or a plfs directory (0700); a template without six X's is
/// EINVAL. glibc's own make them with its internal open and mkdir, which
/// reached the local directory the mount point names (here missing: every
/// call failed).
#[test]
fn temporary_names_under_a_mount_are_plfs_files() {
    let setup = Setup::new();
    let program = compile(&setup, "temporaries", TEMPORARY_PROGRAM);
    let dir = setup.logical("tmp");
    setup.run("mkdir", &[&dir]);
    let output = setup.run(&program.display().to_string(), &[&dir]);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "mkstemp\nmkstemps\nmkostemp\nmkdtemp\neinval\n");
    let listed = setup.run("ls", &[&dir]);
    assert_eq!(String::from_utf8_lossy(&listed.stdout).lines().count(), 4, "four names in the mount");
}

/// O_APPEND writes from several processes at once all land, whole and
/// once each, as on a local file system: processes that keep the file
/// open (a Python logger in each of four processes) and shell loops that
/// open, append and close per line (`echo … >> log`), on every workload.
/// Before, each process appended at the end as it saw it, which missed
/// what the others had not closed yet: 506 of 2,000 and 404 of 800 lines
/// were kept. Nothing is left on /dev/shm afterwards.
#[test]
fn appends_from_several_processes_all_land() {
    for workload in ["shared_file", "file_per_proc", "small_file"] {
        let setup = Setup::with_workload(workload);
        let log = setup.logical("log");
        let writer = format!(
            "import os, sys\nfd = os.open('{log}', os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)\nfor j in range(300):\n    os.write(fd, f'python {{sys.argv[1]}} line {{j:04d}}\\n'.encode())\nos.close(fd)\n"
        );
        let script = format!(
            "for i in 1 2 3 4; do python3 -c \"$0\" $i & done\nfor i in 1 2; do ( for j in $(seq 1 150); do echo \"shell $i line $j\" >> '{log}'; done ) & done\nwait\n"
        );
        setup.run("bash", &["-c", &script, &writer]);
        let read = setup.run("cat", &[&log]);
        let mut lines: Vec<String> =
            String::from_utf8_lossy(&read.stdout).lines().map(str::to_owned).collect();
        lines.sort();
        let mut expected: Vec<String> = (1..=4)
            .flat_map(|i| (0..300).map(move |j| format!("python {i} line {j:04}")))
            .chain((1..=2).flat_map(|i| (1..=150).map(move |j| format!("shell {i} line {j}"))))
            .collect();
        expected.sort();
        let missing = expected.iter().filter(|line| lines.binary_search(line).is_err()).count();
        assert_eq!(lines.len(), expected.len(), "{workload}: {missing} lines missing");
        assert_eq!(lines, expected, "{workload}");
        let left = node_files_of(&setup, "end");
        assert!(left.is_empty(), "{workload}: {left:?} left for files no one appends to");
    }
}

/// The files on /dev/shm of `kind` (`end`, `lock`) for files under the
/// setup's mount (each holds its file's logical path).
fn node_files_of(setup: &Setup, kind: &str) -> Vec<PathBuf> {
    let mount = setup.mount.display().to_string();
    let Ok(entries) = fs::read_dir("/dev/shm") else { return Vec::new() };
    entries
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(&format!("plfs-{kind}.")))
        .filter(|entry| {
            let held = fs::read(entry.path()).unwrap_or_default();
            held.windows(mount.len()).any(|window| window == mount.as_bytes())
        })
        .map(|entry| entry.path())
        .collect()
}

/// A forked child appending through a description its parent has closed
/// still shares the file's end with new appenders. Before, the parent's
/// close took the shared end away (its lock test cannot see the child,
/// which holds the same description), and a new appender started its own
/// at the published size: 300 of 601 lines were overwritten.
#[test]
fn a_forked_appender_keeps_sharing_after_its_parent_closes() {
    let setup = Setup::new();
    let file = setup.logical("forked");
    let script = format!(
        r#"import os, subprocess, sys
fd = os.open('{file}', os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(w); os.read(r, 1)
    for j in range(300):
        os.write(fd, b'child line %04d\n' % j)
    os._exit(0)
os.close(r)
os.close(fd)
other = subprocess.Popen([sys.executable, '-c', """
import os, sys
fd = os.open('{file}', os.O_WRONLY | os.O_APPEND)
os.write(fd, b'other ready\\n')
os.write(int(sys.argv[1]), b'x')
for j in range(300):
    os.write(fd, b'other line %04d\\n' % j)
""", str(w)], pass_fds=[w])
other.wait()
assert os.waitpid(pid, 0)[1] == 0
"#
    );
    setup.run("python3", &["-c", &script]);
    let read = setup.run("cat", &[&file]);
    let mut lines: Vec<String> = String::from_utf8_lossy(&read.stdout).lines().map(str::to_owned).collect();
    lines.sort();
    let mut expected: Vec<String> = (0..300)
        .flat_map(|j| [format!("child line {j:04}"), format!("other line {j:04}")])
        .chain(["other ready".to_owned()])
        .collect();
    expected.sort();
    assert_eq!(lines.len(), expected.len());
    assert_eq!(lines, expected);
    // Kept for a description open at a fork (see `ends`); not left behind
    // by every test run.
    for left in node_files_of(&setup, "end") {
        let _ = fs::remove_file(left);
    }
}

/// An appender's next write after another process truncated the file, or
/// appended to it, lands where it would on a local file system: at the new
/// end. Before, it landed at the end it had seen itself, leaving zeros.
#[test]
fn an_appender_follows_truncates_and_appends_by_other_processes() {
    let setup = Setup::new();
    // `how` empties the file from another process while it is open.
    let script = |path: &str, how: &str| {
        format!(
            r#"import os, subprocess
fd = os.open('{path}', os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
os.write(fd, b'one\n')
subprocess.run({how}, check=True)
os.write(fd, b'two\n')
subprocess.run(['sh', '-c', 'echo three >> "$0"', '{path}'], check=True)
os.write(fd, b'four\n')
os.close(fd)
"#
        )
    };
    for (name, how) in
        [("truncate", "['truncate', '-s', '0', '{}']"), ("redirection", "['sh', '-c', ': > \"$0\"', '{}']")]
    {
        let kept =
            same_as_on_a_plain_file(&setup, name, "python3", |path| script(path, &how.replace("{}", path)));
        assert_eq!(String::from_utf8_lossy(&kept), "two\nthree\nfour\n", "{name}");
    }
}

/// Bytes a process wrote are in the file after it leaves with `_exit` or
/// `_Exit` (no atexit handler runs) without closing the descriptor, as on
/// a local file system. Before, the file was empty: nothing published the
/// writer's index.
#[test]
fn writes_before_exit_without_handlers_are_kept() {
    let setup = Setup::new();
    let endings = [("_exit", "os._exit(0)"), ("_Exit", "ctypes.CDLL(None)._Exit(0)")];
    for (name, ending) in endings {
        let file = setup.logical(name);
        let script = format!(
            "import ctypes, os\nfd = os.open('{file}', os.O_WRONLY | os.O_CREAT, 0o644)\nos.write(fd, b'kept\\n')\n{ending}\n"
        );
        setup.run("python3", &["-c", &script]);
        let read = setup.run("cat", &[&file]);
        assert_eq!(String::from_utf8_lossy(&read.stdout), "kept\n", "{name}");
    }
}

/// A stat of a closed shared_file container reads its closed summary in
/// one `openat2` that follows no link (plus its read and close): no
/// `statx` of the container first. strace(1) watches an unmodified python
/// stat ten closed files, each at its size (each written: the summary is
/// left by a writer's close).
#[test]
fn a_closed_containers_stat_is_one_open_of_its_summary() {
    let setup = Setup::with_workload("shared_file");
    let d = setup.logical("d");
    setup.run("mkdir", &[&d]);
    let creates = format!(
        "import os\nfor i in range(10):\n    fd = os.open('{d}/f%d' % i, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)\n    os.write(fd, b'x' * (i + 1))\n    os.close(fd)\n"
    );
    setup.run("python3", &["-c", &creates]);
    let log = setup.scratch("stats.strace");
    let stats =
        format!("import os\nfor i in range(10):\n    assert os.stat('{d}/f%d' % i).st_size == i + 1\n");
    let calls = setup.traced_lookups(&log, &stats);
    for i in 0..10 {
        let container = format!("/d/f{i}\"");
        let summary = format!("/d/f{i}/meta/closed\"");
        let lookups: Vec<&str> =
            calls.lines().filter(|call| call.contains("statx(") && call.contains(&container)).collect();
        assert!(lookups.is_empty(), "f{i}: the container was stat'ed:\n{}", lookups.join("\n"));
        let opens: Vec<&str> = calls.lines().filter(|call| call.contains(&summary)).collect();
        assert!(
            opens.len() == 1 && opens[0].contains("openat2(") && !opens[0].contains("= -1"),
            "f{i}: the summary was not read by one openat2:\n{}",
            opens.join("\n")
        );
    }
}

/// The publish-by-rename workload (rename_support) in `pub` of `setup`'s
/// mount, every process under the interposer; the readers' counts.
fn publish_while_reading_preloaded(setup: &Setup) -> String {
    let program = rename_support::compile(&setup.scratch(""));
    setup.run("mkdir", &[&setup.logical("pub")]);
    rename_support::publish_while_reading(&program, &setup.logical("pub"), |program| {
        let mut command = setup.preloaded(s(program), &[]);
        command.env_remove("PLFS_DEBUG");
        command
    })
}

/// The publish-by-rename workload under the interposer: an unmodified C
/// program renames new versions onto a name while three others open, read
/// and check it; every read sees one whole version.
#[test]
fn rename_by_publishing_processes() {
    let setup = Setup::new();
    let counts = publish_while_reading_preloaded(&setup);
    eprintln!("through the preload: {counts}");
    assert_eq!(counts, rename_support::CLEAN);
    let listing = setup.plfs(&["recover", &setup.logical("pub/target")]);
    assert!(!listing.contains("rename"), "{listing}");
    for index in 0..2 {
        let backend = setup.dir.path().join(format!("backend{index}")).join("pub");
        let leftovers: Vec<String> = fs::read_dir(&backend)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .filter(|name| name.starts_with(".plfs-"))
            .collect();
        assert_eq!(leftovers, Vec::<String>::new(), "left in {}", backend.display());
    }
}

/// The same publish-by-rename on an n-n mount: each version is one plain
/// file, and its rename onto the name is one rename(2) on the backends'
/// file system, whichever backends the two names hash to, so readers never
/// find the name missing. Before, plfs removed the target first and then
/// moved the new version in, and readers saw ENOENT in between.
#[test]
fn rename_by_publishing_processes_on_n_n() {
    let setup = Setup::with_workload("n-n");
    let counts = publish_while_reading_preloaded(&setup);
    eprintln!("through the preload, n-n: {counts}");
    assert_eq!(counts, rename_support::CLEAN);
    let mut files = 0;
    for index in 0..2 {
        let backend = setup.dir.path().join(format!("backend{index}")).join("pub");
        for entry in fs::read_dir(&backend).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            assert!(!name.starts_with(".plfs-"), "left in {}: {name}", backend.display());
            files += 1;
        }
    }
    assert_eq!(files, 1, "one plain file, the last version, on the backends");
}

/// The same publish-by-rename on a small_file mount. Every version is
/// replaced while readers in other processes hold it open, so a reader
/// whose process loads the directory again mid-read must still read its
/// own version. Before, such a read failed with ESTALE (1-2 reads a run).
#[test]
fn rename_by_publishing_processes_on_small_file() {
    let setup = Setup::with_workload("small_file");
    let counts = publish_while_reading_preloaded(&setup);
    eprintln!("through the preload, small_file: {counts}");
    assert_eq!(counts, rename_support::CLEAN);
}

/// The unmodified `setfattr`/`getfattr` under the interposer reach plfs:
/// a directory's `user.plfs.layout` template is set, checked and shown in
/// canonical text, and a file copied in below it is striped over both
/// backends; other attributes are set, listed, read and removed, by path
/// and (from Python) by descriptor. Without the xattr calls intercepted,
/// setfattr fails on the mount point that does not exist on disk.
#[test]
fn extended_attributes_with_setfattr_and_getfattr() {
    let setup = Setup::new();
    let outcome =
        |program: &str, args: &[&str]| setup.preloaded(program, args).stdin(Stdio::null()).output().unwrap();
    let dir = setup.logical("d");
    setup.run("mkdir", &[&dir]);
    setup.run("setfattr", &["-n", "user.plfs.layout", "-v", "-E -1 -c -1 -S 64K", &dir]);
    let shown = setup.run("getfattr", &["--only-values", "-n", "user.plfs.layout", &dir]);
    assert_eq!(String::from_utf8_lossy(&shown.stdout), "-E -1 -c -1 -S 64K");
    let stripe: Value = serde_json::from_str(&setup.plfs(&["getstripe", "--json", &dir])).unwrap();
    assert_eq!(stripe["source"], "directory", "{stripe}");
    // A layout the core refuses: EINVAL, and the template stays.
    let refused = outcome("setfattr", &["-n", "user.plfs.layout", "-v", "-E 1M -c 0", &dir]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("Invalid argument"), "{refused:?}");
    let shown = setup.run("getfattr", &["--only-values", "-n", "user.plfs.layout", &dir]);
    assert_eq!(String::from_utf8_lossy(&shown.stdout), "-E -1 -c -1 -S 64K");

    // A file created below the template follows it onto both backends.
    let data = random_bytes(1024 * 1024 + 77, 11);
    let source = setup.scratch("striped");
    fs::write(&source, &data).unwrap();
    let file = setup.logical("d/f");
    setup.run("cp", &[s(&source), &file]);
    assert!(setup.contents("d/f") == data);
    let stripe: Value = serde_json::from_str(&setup.plfs(&["getstripe", "--json", &file])).unwrap();
    assert_eq!(stripe["backends"].as_array().map(Vec::len), Some(2), "{stripe}");
    // Its layout is fixed once it has data; the data stays.
    let refused = outcome("setfattr", &["-n", "user.plfs.layout", "-v", "-c 1", &file]);
    assert!(!refused.status.success(), "{refused:?}");
    assert!(setup.contents("d/f") == data);

    // Plain attributes: set, dumped (listxattr), read, removed.
    setup.run("setfattr", &["-n", "user.tag", "-v", "hello", &file]);
    let dump = setup.run("getfattr", &["-d", &file]);
    assert!(String::from_utf8_lossy(&dump.stdout).contains("user.tag=\"hello\""), "{dump:?}");
    let dump = setup.run("getfattr", &["-d", &dir]);
    assert!(String::from_utf8_lossy(&dump.stdout).contains("user.plfs.layout="), "{dump:?}");
    setup.run("setfattr", &["-x", "user.tag", &file]);
    let missing = outcome("getfattr", &["-n", "user.tag", &file]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("No such attribute"), "{missing:?}");

    // The descriptor forms (fsetxattr & co), as Python calls them on an fd.
    let script = format!(
        r#"
import errno, os
fd = os.open({file:?}, os.O_RDONLY)
os.setxattr(fd, "user.fd", b"by descriptor", os.XATTR_CREATE)
try:
    os.setxattr(fd, "user.fd", b"again", os.XATTR_CREATE)
    raise SystemExit("XATTR_CREATE replaced a value")
except OSError as error:
    assert error.errno == errno.EEXIST, error
assert os.getxattr(fd, "user.fd") == b"by descriptor"
assert os.listxattr(fd) == ["user.fd"], os.listxattr(fd)
os.removexattr(fd, "user.fd")
assert os.listxattr(fd) == []
os.close(fd)
dfd = os.open({dir:?}, os.O_RDONLY | os.O_DIRECTORY)
assert os.getxattr(dfd, "user.plfs.layout") == b"-E -1 -c -1 -S 64K"
os.close(dfd)
try:
    os.setxattr({dir:?}, "system.posix_acl_access", b"x")
    raise SystemExit("a system attribute was kept")
except OSError as error:
    assert error.errno == errno.EOPNOTSUPP, error
print("ok")
"#
    );
    let output = setup.run("python3", &["-c", &script]);
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "ok");
    assert!(setup.contents("d/f") == data);
}

/// The PLFS 2.5 fixtures (crates/plfs-core/testdata/plfs25), all six on
/// the mount's two backends, read in place by unmodified programs under
/// the interposer: `cat` and `cmp` give the library's bytes (`plfs cp`,
/// which plfs-core checks against what the 2.5 writers wrote), `stat`
/// gives the size and 2.5's 0600, and shell appends, truncations and
/// `cp` onto the file fail with EACCES without changing a byte.
#[test]
fn plfs_25_containers_read_by_unmodified_programs() {
    let setup = Setup::new();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plfs-core/testdata/plfs25");
    let scenarios = ["strided", "overlap", "truncate", "metalink", "flattened", "open"];
    // 2.5 put each container on the backend its name hashed to (b0 or
    // b1: backend0 or backend1 here) and made the access file, whose mode
    // is the file's, 0600 (git keeps 0644).
    let copy = format!(
        "set -e; for s in {}; do for b in 0 1; do \
         if [ -d {f}/$s/b$b ]; then cp -a {f}/$s/b$b/. backend$b/; fi; done; done; \
         find backend0 backend1 -name .plfsaccess113918400 -exec chmod 600 {{}} +",
        scenarios.join(" "),
        f = s(&fixtures)
    );
    let copied = Command::new("bash").arg("-c").arg(copy).current_dir(setup.dir.path()).status().unwrap();
    assert!(copied.success());
    for scenario in scenarios {
        let name = format!("{scenario}.ckpt");
        let file = setup.logical(&name);
        let library = setup.contents(&name);
        assert!(!library.is_empty(), "{scenario}");
        let expected = setup.scratch(&format!("{scenario}.expected"));
        fs::write(&expected, &library).unwrap();
        let cat = setup.run("cat", &[&file]);
        assert!(cat.stdout == library, "{scenario}: cat printed other bytes than the library reads");
        setup.run("cmp", &[&file, s(&expected)]);
        let md5 = |path: &str| -> String {
            let output = setup.run("md5sum", &[path]);
            String::from_utf8_lossy(&output.stdout).split(' ').next().unwrap().to_owned()
        };
        assert_eq!(md5(&file), md5(s(&expected)), "{scenario}: md5sum");
        let stat = setup.run("stat", &["-c", "%s %a %F", &file]);
        assert_eq!(
            String::from_utf8_lossy(&stat.stdout),
            format!("{} 600 regular file\n", library.len()),
            "{scenario}: stat"
        );
        for change in [
            format!("echo x >> {file}"),
            format!("echo x > {file}"),
            format!("truncate -s 0 {file}"),
            format!("cp {} {file}", s(&expected)),
        ] {
            let output = setup.preloaded("sh", &["-c", &change]).stdin(Stdio::null()).output().unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(!output.status.success(), "{scenario}: `{change}` succeeded");
            assert!(stderr.contains("Permission denied"), "{scenario}: `{change}`: {stderr}");
        }
        assert!(setup.contents(&name) == library, "{scenario}: a refused change altered the file");
    }
}

/// The mode, owner and times of a logical file as the library sees them
/// (the `plfs` binary, no interposer): (mode bits, uid, atime s, mtime s).
fn library_attributes(setup: &Setup, inside: &str) -> (u32, u64, i64, i64) {
    let report: Value =
        serde_json::from_str(&setup.plfs(&["stat", "--json", &setup.logical(inside)])).unwrap();
    let seconds = |key: &str| report[key].as_i64().unwrap().div_euclid(1_000_000_000);
    (
        u32::try_from(report["mode"].as_u64().unwrap()).unwrap() & 0o7777,
        report["uid"].as_u64().unwrap(),
        seconds("atime_ns"),
        seconds("mtime_ns"),
    )
}

fn seconds_now() -> i64 {
    i64::try_from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs())
        .unwrap()
}

/// chmod, chown and the utime family were not interposed: `chmod 600 f`,
/// `touch f` or python's os.chmod on a plfs path went to the kernel with
/// the logical path and failed with ENOENT. Unmodified coreutils and
/// python set them here (path, *at and descriptor forms: touch and `cp -p`
/// use futimens/fchmod/fchown on the descriptor they hold), seen by a stat
/// through the interposer and by the library; the same programs on a
/// plain file still reach libc.
#[test]
fn chmod_chown_and_times_from_coreutils_and_python() {
    let setup = Setup::new();
    let m = setup.logical("");
    let plain = setup.scratch("plain");
    let plain = s(&plain);
    let before = seconds_now();
    let script = format!(
        "set -e; echo data > {m}f; chmod 600 {m}f; chown nobody {m}f; touch -d @1000000000 {m}f; \
         stat -c '%a %U %X %Y' {m}f; \
         touch {m}now; echo x > {m}old; touch -d @1200000000 {m}old; touch {m}old; stat -c '%Y' {m}now {m}old; \
         echo plain > {plain}; chmod 640 {plain}; chown nobody {plain}; touch -d @1100000000 {plain}; \
         stat -c '%a %U %Y' {plain}"
    );
    let output = String::from_utf8(setup.run("bash", &["-c", &script]).stdout).unwrap();
    let lines: Vec<&str> = output.lines().collect();
    assert_eq!(lines[0], "600 nobody 1000000000 1000000000", "{output}");
    for line in &lines[1..3] {
        assert!(line.parse::<i64>().unwrap() >= before, "touch without a time set an old mtime: {output}");
    }
    assert_eq!(lines[3], "640 nobody 1100000000", "{output}");
    let nobody = u64::from(uid_of("nobody"));
    assert_eq!(library_attributes(&setup, "f"), (0o600, nobody, 1_000_000_000, 1_000_000_000));
    assert!(library_attributes(&setup, "old").3 >= before);

    // cp -p into the mount and out of it: mode and times follow the file.
    let source = setup.scratch("source");
    fs::write(&source, b"keep my attributes").unwrap();
    let script = format!(
        "set -e; chmod 640 {source}; touch -d @1234567890 {source}; cp -p {source} {m}copy; \
         cp -p {m}copy {back}; stat -c '%a %Y' {m}copy {back}",
        source = s(&source),
        back = s(&setup.scratch("back"))
    );
    let output = String::from_utf8(setup.run("bash", &["-c", &script]).stdout).unwrap();
    assert_eq!(output, "640 1234567890\n640 1234567890\n");
    assert_eq!(setup.contents("copy"), b"keep my attributes");
    let (mode, _, _, mtime) = library_attributes(&setup, "copy");
    assert_eq!((mode, mtime), (0o640, 1_234_567_890));

    // python: os.chmod, os.utime with times (nanoseconds too), and now.
    let script = format!(
        r#"
import os, time
path = {path:?}
open(path, "w").close()
os.chmod(path, 0o604)
os.utime(path, ns=(1_500_000_000_250_000_000, 1_400_000_000_500_000_000))
st = os.stat(path)
print(oct(st.st_mode & 0o7777), st.st_atime_ns, st.st_mtime_ns)
fd = os.open(path, os.O_RDONLY)
os.chmod(fd, 0o644)
os.close(fd)
os.utime(path)
st = os.stat(path)
print(oct(st.st_mode & 0o7777), st.st_mtime >= {before})
"#,
        path = setup.logical("py")
    );
    let output = String::from_utf8(setup.run("python3", &["-c", &script]).stdout).unwrap();
    assert_eq!(output, "0o604 1500000000250000000 1400000000500000000\n0o644 True\n");
    let (mode, _, _, mtime) = library_attributes(&setup, "py");
    assert_eq!(mode, 0o644);
    assert!(mtime >= before);
}

/// The uid of a user name, from id(1).
fn uid_of(user: &str) -> u32 {
    let output = Command::new("id").args(["-u", user]).output().unwrap();
    String::from_utf8(output.stdout).unwrap().trim().parse().unwrap()
}

/// A chmod through the interposer reaches the backend files: after root's
/// `chmod 600`, another user cannot read the file through the interposer
/// (before it, they could), nor change its mode back.
#[test]
fn a_chmod_through_the_interposer_keeps_another_user_out() {
    let setup = Setup::new();
    // Other users traverse the test directory (tempdir makes it 0700).
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(setup.dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let file = setup.logical("secret");
    setup.run("bash", &["-c", &format!("umask 022; echo secret > {file}")]);
    let as_nobody = |program: &str| {
        Command::new("timeout")
            .arg(TIMEOUT_SECONDS.to_string())
            .args(["runuser", "-u", "nobody", "--", "env"])
            .arg(format!("LD_PRELOAD={}", interposer().display()))
            .arg(format!("PLFSRC={}", setup.config.display()))
            .args(program.split(' '))
            .arg(&file)
            .env_remove("LD_PRELOAD")
            .current_dir("/")
            .output()
            .unwrap()
    };
    let readable = as_nobody("cat");
    assert!(
        readable.status.success(),
        "nobody cannot read a 644 file: {}",
        String::from_utf8_lossy(&readable.stderr)
    );
    assert_eq!(readable.stdout, b"secret\n");
    setup.run("chmod", &["600", &file]);
    let refused = as_nobody("cat");
    assert!(
        !refused.status.success(),
        "nobody read a 600 file: {}",
        String::from_utf8_lossy(&refused.stdout)
    );
    assert!(refused.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("Permission denied"), "{stderr}");
    // Nor can they open it up again: the backend files are root's.
    let chmod = as_nobody("chmod 666");
    assert!(!chmod.status.success(), "nobody chmod'ed root's file");
    assert_eq!(library_attributes(&setup, "secret").0, 0o600);
}

/// A working directory inside the mount, as shell scripts, build tools and
/// version control take one (`cd`, `mkdir -p`, `tar -C`, `make -C`, rsync,
/// git, Python's `os.chdir` and `subprocess`'s `cwd=`), on every workload,
/// against a plain directory. Before, chdir into a plfs directory failed
/// with ENOENT: the shell's `cd` failed, `mkdir -p a/b/c` said "File
/// exists" for the mount point, and rsync and git could not start.
#[test]
fn a_working_directory_inside_the_mount_works_as_on_a_plain_directory() {
    let script = r#"set -e
d=$1
cd "$d"
mkdir -p a/b/c
cd a/b
echo one > f
cat f
echo "pwd ${PWD#$d}"
echo "getcwd $(/bin/pwd | sed "s|^$d|D|")"
python3 -c 'import os, sys; print("python", os.getcwd().replace(sys.argv[1], "D"))' "$d"
cd ../..
ls -R .
tar -C a -cf - b | tar -C "$d" -xf -
cat b/f
printf 'all:\n\t@echo made in $(notdir $(CURDIR))\n' > a/Makefile
make -s -C a
rsync -a a/ r/
ls -R r
git init -q g
cd g
echo tracked > t
git add t
git -c user.name=n -c user.email=e@x commit -qm first
git log --format=%s
cd - > /dev/null
echo "back ${PWD#$d}"
python3 - <<'PY'
import os, subprocess
print(subprocess.run(["cat", "f"], cwd="a/b", capture_output=True, text=True, check=True).stdout, end="")
fd = os.open("a", os.O_RDONLY)
os.fchdir(fd)
print("fchdir", os.path.basename(os.getcwd()), sorted(os.listdir()))
os.chdir("..")
os.rename("a", "renamed")
os.chdir("renamed/b")
os.rename("../../renamed", "../../again")
print("after rename", os.path.relpath(os.getcwd(), os.path.dirname(os.path.dirname(os.getcwd()))))
PY
"#;
    let plain = same_transcript_as_plain("bash", &["-c", script, "sh"], unchanged, |_, _, _| {});
    assert!(plain.contains("pwd /a/b\ngetcwd D/a/b\npython D/a/b\n"), "{plain}");
    assert!(plain.ends_with("fchdir a ['Makefile', 'b']\nafter rename again/b\n"), "{plain}");
}

/// From a working directory inside the mount, a relative path that climbs
/// out of it (`../../../x`) names what it names from the logical
/// directory, also when the backends lie at another depth than the mount
/// point: libc gets it made absolute, not resolved from the backend
/// directory that stands for the working directory.
#[test]
fn relative_paths_leaving_the_mount_from_inside_it_resolve_logically() {
    for workload in ["shared_file", "file_per_proc", "small_file"] {
        let setup = Setup::with_backends_in(workload, "deeper/still");
        let top = setup.dir.path();
        fs::write(top.join("outside.txt"), "outside\n").unwrap();
        setup.run("mkdir", &["-p", &setup.logical("d/e")]);
        let script = "cd \"$1/d/e\" && cat ../../../outside.txt && echo written > ../../../new.txt \
                      && mkdir ../../../made && ls ../../.. | grep -c -e outside -e made -e new";
        let output = setup.run("bash", &["-c", script, "sh", s(&setup.mount)]);
        assert_eq!(String::from_utf8_lossy(&output.stdout), "outside\n3\n", "{workload}");
        assert_eq!(fs::read_to_string(top.join("new.txt")).unwrap(), "written\n", "{workload}");
        assert!(top.join("made").is_dir(), "{workload}");
    }
}

/// nftw and ftw (FTW_PHYS, FTW_DEPTH, FTW_ACTIONRETVAL's skips and stop,
/// FTW_CHDIR from a relative path in a working directory inside the mount,
/// a missing top) list what they list in a plain directory, on every
/// workload. Before, glibc's walk (its own internal opens and stats)
/// failed with ENOENT on a plfs path, and from a working directory inside
/// the mount it walked the backend directory: containers and their logs.
#[test]
fn nftw_and_ftw_walk_plfs_directories_as_plain_ones() {
    let setup = Setup::new();
    let program = compile(&setup, "tree_walk", include_str!("programs/tree_walk.c"));
    let plain = same_transcript_as_plain(s(&program), &[], unchanged, |_, _, _| {});
    assert!(plain.contains("depth order violations: 0\n"), "{plain}");
    assert!(plain.contains("entries not in the working directory: 0\n"), "{plain}");
    assert!(plain.contains("nftw stop -> 1\n"), "{plain}");
}

/// Two processes publish one name by rename and unlink it, three others
/// open and read it (`programs/open_race.c`), all unmodified and under the
/// interposer, on a shared_file mount over two backends: the way the
/// silent empty reads were found. An unlink took the shadows at the name
/// along with the logs of the file the other publisher had just put there:
/// readers read 0 bytes of a file whose size said 4096 (29-143 per 5 s), and
/// a publisher's rename(2) failed with ENOENT when the unlink took the
/// hostdir it had just made. Every read here must be whole; a read may
/// still fail with ESTALE when the name was republished and removed again
/// while a reader looked (a known gap), nothing else.
#[test]
fn readers_of_a_name_other_processes_publish_and_unlink_read_whole_files() {
    let setup = Setup::new();
    let source = setup.scratch("open_race.c");
    fs::write(&source, include_str!("programs/open_race.c")).unwrap();
    let program = setup.scratch("open_race");
    let output = Command::new("cc").arg("-O1").arg("-o").arg(&program).arg(&source).output().unwrap();
    assert!(output.status.success(), "cc: {}", String::from_utf8_lossy(&output.stderr));
    let dir = setup.logical("race");
    setup.run("mkdir", &[&dir]);
    let program = program.to_str().unwrap();
    let children: Vec<_> = ["w", "w", "r", "r", "r"]
        .into_iter()
        .map(|role| {
            setup
                .preloaded(program, &[&dir, role, "5"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut whole = 0;
    for child in children {
        let output = child.wait_with_output().unwrap();
        let (stdout, stderr) =
            (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "open_race failed: {stdout} {stderr}");
        whole += stdout
            .split_whitespace()
            .find_map(|field| field.strip_prefix("whole="))
            .map_or(0, |count| count.parse::<u64>().unwrap());
        assert!(stdout.is_empty() || stdout.contains(" short=0"), "{stdout} {stderr}");
        for line in stderr.lines() {
            assert!(line.starts_with("read ") && line.ends_with("Stale file handle"), "{line}\n{stdout}");
        }
    }
    assert!(whole > 0, "the readers met published files");
}
