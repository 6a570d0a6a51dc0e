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
        let dir = tempfile::Builder::new().prefix("plfs-preload-test.").tempdir().unwrap();
        let mut text = String::new();
        let mount = dir.path().join("mnt");
        text.push_str(&format!("- mount_point: {}\n  workload: {workload}\n  backends:\n", mount.display()));
        for index in 0..2 {
            let backend = dir.path().join(format!("backend{index}"));
            fs::create_dir(&backend).unwrap();
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

/// The publish-by-rename workload under the interposer: an unmodified C
/// program renames new versions onto a name while three others open, read
/// and check it; every read sees one whole version.
#[test]
fn rename_by_publishing_processes() {
    let setup = Setup::new();
    let program = rename_support::compile(&setup.scratch(""));
    setup.run("mkdir", &[&setup.logical("pub")]);
    let counts = rename_support::publish_while_reading(&program, &setup.logical("pub"), |program| {
        let mut command = setup.preloaded(s(program), &[]);
        command.env_remove("PLFS_DEBUG");
        command
    });
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
