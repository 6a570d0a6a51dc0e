//! PLFS 2.5's regression suite (plfs/plfs-regression), its C programs that
//! do not call the plfs API, rewritten from what they check (the two that
//! do, offset.c and access.c, are in crates/plfs-capi/tests/c_api.rs). Each
//! is built with -Wall -Wextra -Werror as C and as C++ and run as 2.5 ran it:
//!
//! - truncate_ops/truncate.c, readdir_ops/dir_ops.c and
//!   write_read_error/replace_char.c (tests/programs/plfs25_*.c) make POSIX
//!   calls on files in a plfs mount: here through a real FUSE mount and under
//!   libplfs_preload.so;
//! - noncontig_short/noncontig_short.c and
//!   data-sieving/fileview-with-ds-switch.c (crates/plfs-mpi/tests/c/) use
//!   MPI-IO, which 2.5 sent through its ROMIO driver: here through
//!   libplfs_mpiio.so under Open MPI (ompio and romio321) and MPICH.
//!
//! What the programs wrote is then read back through the library (`plfs
//! cp`), so a mistake the program cannot see from its own side still fails.

mod fuse_support;
mod mpi_support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use fuse_support::{PlfsMount, describe, run, serial};

const BIN: &str = env!("CARGO_BIN_EXE_plfs");
/// A hung program or collective fails the test instead of hanging CI.
const TIMEOUT: Duration = Duration::from_secs(180);

#[derive(Clone, Copy, Debug)]
enum Language {
    C,
    Cpp,
}

const LANGUAGES: [Language; 2] = [Language::C, Language::Cpp];

fn source(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// Compiles `source` with `compiler` as `language` under -Wall -Wextra
/// -Werror into `dir`, whatever the file's suffix.
fn compile(compiler: &str, language: Language, source: &Path, dir: &Path, extra: &[&str]) -> PathBuf {
    let stem = source.file_stem().unwrap().to_str().unwrap();
    let program = dir.join(format!("{stem}-{compiler}-{language:?}"));
    let flag = match language {
        Language::C => "c",
        Language::Cpp => "c++",
    };
    let output = Command::new(compiler)
        .args(["-O2", "-Wall", "-Wextra", "-Werror"])
        .args(extra)
        .args(["-x", flag])
        .arg(source)
        .args(["-x", "none", "-o"])
        .arg(&program)
        .output()
        .unwrap_or_else(|error| panic!("{compiler}: {error}"));
    assert!(
        output.status.success(),
        "{compiler} {}:\n{}",
        source.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    program
}

/// The three POSIX programs, built with gcc and g++.
fn posix_programs(dir: &Path) -> Vec<(Language, [PathBuf; 3])> {
    LANGUAGES
        .iter()
        .map(|&language| {
            let compiler = match language {
                Language::C => "gcc",
                Language::Cpp => "g++",
            };
            let build = |name: &str| {
                compile(compiler, language, &source(&format!("tests/programs/{name}.c")), dir, &[])
            };
            (language, [build("plfs25_truncate"), build("plfs25_dir_ops"), build("plfs25_replace_char")])
        })
        .collect()
}

fn stdout_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Requires exit 0 and `expected` in stdout.
fn expect(output: Output, what: &str, expected: &str) -> String {
    let stdout = stdout_of(&output);
    assert!(
        output.status.success() && stdout.contains(expected),
        "{what}: expected {expected:?}\n{}",
        describe(&output)
    );
    stdout
}

/// Text lines like an fs_test check file: each names its writer, block and
/// offset, so every line differs.
fn text_lines() -> Vec<u8> {
    let mut text = String::new();
    for line in 0..3000u64 {
        text.push_str(&format!(
            "rank {} block {line:5} offset {:9} abcdefghijklmnopqrstuvwxyz\n",
            line % 4,
            line * 64
        ));
    }
    text.into_bytes()
}

/// Parses "line L offset O 'a' -> 'b'" from plfs25_replace_char: the
/// offset, the byte it was and the byte it is now.
fn replaced(stdout: &str) -> (usize, u8, u8) {
    let line = stdout.lines().find(|line| line.starts_with("plfs25_replace_char: OK: line ")).unwrap();
    let rest = &line[line.find(" offset ").unwrap() + " offset ".len()..];
    let (offset, chars) = rest.split_once(' ').unwrap();
    let chars = chars.as_bytes();
    assert!(chars.len() == 10 && &chars[3..7] == b" -> ", "{stdout}");
    (offset.parse().unwrap(), chars[1], chars[8])
}

/// The file of `text` with the byte plfs25_replace_char reports replaced:
/// that byte was what the program says, and no other byte changed.
fn check_one_byte_replaced(text: &[u8], stdout: &str, after: &[u8], how: &str) {
    let (offset, was, now) = replaced(stdout);
    assert_eq!(
        text[offset], was,
        "{how}: the program read a byte the file does not have at {offset}: {stdout}"
    );
    assert_ne!(was, now);
    let mut expected = text.to_vec();
    expected[offset] = now;
    assert_eq!(after.len(), expected.len(), "{how}: the file changed size");
    let differing: Vec<usize> = (0..after.len()).filter(|&at| after[at] != expected[at]).collect();
    assert!(differing.is_empty(), "{how}: bytes differ at {differing:?} (replaced {offset})");
}

/// The plfs binary, without any preload, on `config`.
fn plfs(config: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(BIN);
    command.arg("--config").arg(config).args(args).env_remove("PLFSRC").env_remove("LD_PRELOAD");
    run(&mut command, TIMEOUT)
}

/// The bytes of a plfs file, copied out by the library.
fn contents(config: &Path, file: &Path, scratch: &Path) -> Vec<u8> {
    let out = scratch.join(format!("{}.out", file.file_name().unwrap().to_str().unwrap()));
    let _ = fs::remove_file(&out);
    let output = plfs(config, &["cp", file.to_str().unwrap(), out.to_str().unwrap()]);
    assert!(output.status.success(), "plfs cp {}: {}", file.display(), describe(&output));
    fs::read(out).unwrap()
}

/// Copies `text` into plfs with four parallel writers (several data logs,
/// as fs_test's N-1 target had).
fn copy_in(config: &Path, text: &[u8], file: &Path, scratch: &Path) {
    let local = scratch.join("lines.txt");
    fs::write(&local, text).unwrap();
    let output = plfs(config, &["cp", "-j", "4", local.to_str().unwrap(), file.to_str().unwrap()]);
    assert!(output.status.success(), "plfs cp into {}: {}", file.display(), describe(&output));
}

#[test]
fn truncate_dir_ops_and_replace_char_through_fuse() {
    let _serial = serial();
    let mount = PlfsMount::new(&[]);
    let map = format!("{BIN} --config {} map", mount.config.display());
    let text = text_lines();
    for (language, [truncate, dir_ops, replace_char]) in posix_programs(&mount.scratch) {
        let file = mount.path(&format!("truncate-{language:?}"));
        let mut command = Command::new(&truncate);
        command.arg(&file).arg(&map);
        expect(run(&mut command, TIMEOUT), "plfs25_truncate", "plfs25_truncate: OK");

        let dir = mount.path(&format!("dir_ops-{language:?}"));
        let mut command = Command::new(&dir_ops);
        command.arg(&dir).arg("dir_ops_file");
        expect(run(&mut command, TIMEOUT), "plfs25_dir_ops", "plfs25_dir_ops: OK");

        for seed in 1..=3 {
            let file = mount.path(&format!("lines-{language:?}-{seed}"));
            copy_in(&mount.config, &text, &file, &mount.scratch);
            let mut command = Command::new(&replace_char);
            command.arg(&file).arg("#").arg(seed.to_string());
            let stdout = expect(run(&mut command, TIMEOUT), "plfs25_replace_char", "plfs25_replace_char: OK");
            let how = format!("{language:?} seed {seed}");
            check_one_byte_replaced(
                &text,
                &stdout,
                &fs::read(&file).unwrap(),
                &format!("{how}, through FUSE"),
            );
            let library = contents(&mount.config, &file, &mount.scratch);
            check_one_byte_replaced(&text, &stdout, &library, &format!("{how}, through the library"));
        }
    }
}

/// libplfs_preload.so, next to the plfs binary (cargo test does not build
/// cdylibs: `make test` builds the workspace first).
fn interposer() -> PathBuf {
    let library = Path::new(BIN).parent().unwrap().join("libplfs_preload.so");
    assert!(
        library.exists(),
        "{} is missing: run `cargo build --release --workspace` first",
        library.display()
    );
    library
}

/// A plfsrc of two POSIX backends in `dir` for the mount point `mount`.
fn plfsrc(dir: &Path, mount: &Path) -> PathBuf {
    let mut text = format!("- mount_point: {}\n  workload: shared_file\n  backends:\n", mount.display());
    for backend in 0..2 {
        let path = dir.join(format!("backend{backend}"));
        fs::create_dir(&path).unwrap();
        text.push_str(&format!("    - location: posix://{}\n", path.display()));
    }
    let config = dir.join("plfsrc");
    fs::write(&config, text).unwrap();
    config
}

#[test]
fn truncate_dir_ops_and_replace_char_under_the_preload() {
    let dir = tempfile::Builder::new().prefix("plfs25-regression-preload.").tempdir().unwrap();
    let scratch = dir.path().join("scratch");
    fs::create_dir(&scratch).unwrap();
    // The mount point does not exist on disk: only the interposer sees it.
    let mount = dir.path().join("mnt");
    let config = plfsrc(dir.path(), &mount);
    let preloaded = |program: &Path| {
        let mut command = Command::new(program);
        command.env("LD_PRELOAD", interposer()).env("PLFSRC", &config);
        command
    };
    // The map command runs through system(3), so under the interposer too.
    let map = format!("{BIN} --config {} map", config.display());
    let text = text_lines();
    for (language, [truncate, dir_ops, replace_char]) in posix_programs(&scratch) {
        // The map command gets the plain path: the plfs CLI does not take
        // `plfs:` prefixes.
        let mut command = preloaded(&truncate);
        command.arg(mount.join(format!("truncate-{language:?}"))).arg(&map);
        expect(run(&mut command, TIMEOUT), "plfs25_truncate", "plfs25_truncate: OK");
        let mut command = preloaded(&truncate);
        command.arg(format!("plfs:{}/truncate-plfs-{language:?}", mount.display()));
        expect(run(&mut command, TIMEOUT), "plfs25_truncate plfs:", "plfs25_truncate: OK");

        let mut command = preloaded(&dir_ops);
        command.arg(mount.join(format!("dir_ops-{language:?}"))).arg("dir_ops_file");
        expect(run(&mut command, TIMEOUT), "plfs25_dir_ops", "plfs25_dir_ops: OK");

        for seed in 1..=3 {
            let file = mount.join(format!("lines-{language:?}-{seed}"));
            copy_in(&config, &text, &file, &scratch);
            let mut command = preloaded(&replace_char);
            command.arg(&file).arg("#").arg(seed.to_string());
            let stdout = expect(run(&mut command, TIMEOUT), "plfs25_replace_char", "plfs25_replace_char: OK");
            let library = contents(&config, &file, &scratch);
            check_one_byte_replaced(
                &text,
                &stdout,
                &library,
                &format!("{language:?} seed {seed}, under the preload"),
            );
        }
    }
    let listing = plfs(&config, &["ls", mount.to_str().unwrap()]);
    assert!(listing.status.success(), "{}", describe(&listing));
    assert!(
        !stdout_of(&listing).contains("truncate") && !stdout_of(&listing).contains("dir_ops"),
        "the programs' files and directories are gone:\n{}",
        stdout_of(&listing)
    );
}

// ---------------------------------------------------------------------------
// MPI-IO
// ---------------------------------------------------------------------------

/// noncontig_short's file: rank 0's even ints of 0..20, then rank 1's odd
/// ints of 20..40, little-endian.
fn noncontig_expected() -> Vec<u8> {
    let ints = (0..20).step_by(2).chain((21..40).step_by(2));
    ints.flat_map(|value: i32| value.to_le_bytes()).collect()
}

/// fileview's file: the 10 x 10 corner of a 1024-column char array, rank r's
/// 5 x 5 block of b'0' + r at row (r / 2) * 5, column (r % 2) * 5, zeros
/// between, ending at the last block's last byte.
fn fileview_expected() -> Vec<u8> {
    let mut bytes = vec![0u8; 9 * 1024 + 10];
    for row in 0..10 {
        for column in 0..10 {
            bytes[row * 1024 + column] = b'0' + (row / 5 * 2 + column / 5) as u8;
        }
    }
    bytes
}

fn mpi_programs(flavor: &str, io: Option<&str>) {
    let (mpicc, mpicxx, mpirun) =
        (format!("mpicc.{flavor}"), format!("mpicxx.{flavor}"), format!("mpirun.{flavor}"));
    if ![&mpicc, &mpicxx, &mpirun].iter().all(|program| mpi_support::on_path(program)) {
        assert!(!mpi_support::required(), "PLFS_REQUIRE_MPI=1 but {mpicc}, {mpicxx} or {mpirun} is missing");
        eprintln!("skipping {flavor}: {mpicc}, {mpicxx} or {mpirun} is missing");
        return;
    }
    let libraries = Path::new(BIN).parent().unwrap();
    let mpiio = libraries.join("mpi").join(flavor).join("libplfs_mpiio.so");
    assert!(mpiio.exists(), "{} is missing: run `cargo build --release --workspace` first", mpiio.display());
    // The wrapper first, so its MPI_File_* shadow the MPI library's.
    let preload = format!("{} {}", mpiio.display(), interposer().display());

    let dir = tempfile::Builder::new().prefix("plfs25-regression-mpi.").tempdir().unwrap();
    let scratch = dir.path().join("scratch");
    fs::create_dir(&scratch).unwrap();
    let mount = dir.path().join("mnt");
    let config = plfsrc(dir.path(), &mount);
    // A real directory at the mount point, as under FUSE: ROMIO and ompio
    // statfs the file's directory to pick their driver.
    fs::create_dir(&mount).unwrap();

    let mpirun_with = |ranks: u32, program: &Path, args: &[&str]| -> Output {
        let mut command = Command::new(&mpirun);
        let environment = [
            ("LD_PRELOAD", preload.as_str()),
            ("PLFSRC", config.to_str().unwrap()),
            ("PLFS_MPIIO_VERBOSE", "1"),
        ];
        mpi_support::launch(&mut command, flavor, io, &environment, u64::from(ranks), program);
        command.args(args);
        run(&mut command, TIMEOUT)
    };

    for language in LANGUAGES {
        let build = |name: &str| {
            let source = source(&format!("../plfs-mpi/tests/c/{name}.c"));
            match language {
                Language::C => compile(&mpicc, language, &source, &scratch, &[]),
                // Without the SKIP macros mpi.h pulls in the MPI-2 C++
                // bindings (deprecated, and Open MPI's warn under -Wextra);
                // 2.5's programs use the C interface.
                Language::Cpp => compile(
                    &mpicxx,
                    language,
                    &source,
                    &scratch,
                    &["-DOMPI_SKIP_MPICXX", "-DMPICH_SKIP_MPICXX"],
                ),
            }
        };
        let name = format!("{flavor}-{io:?}-{language:?}");

        // 2.5's scripts named the file with the plfs: prefix; both forms.
        let noncontig = build("plfs25_noncontig_short");
        for (file, argument) in [
            (mount.join(format!("noncontig-{name}")), None),
            (mount.join(format!("noncontig-plfs-{name}")), Some("plfs:")),
        ] {
            let argument = format!("{}{}", argument.unwrap_or(""), file.display());
            expect(
                mpirun_with(2, &noncontig, &[&argument]),
                &format!("plfs25_noncontig_short {name}"),
                "plfs25_noncontig_short: OK",
            );
            assert!(
                contents(&config, &file, &scratch) == noncontig_expected(),
                "{name}: {} reads back wrong",
                file.display()
            );
            // Rank 0 deletes the file a second run finds (2.5's first step).
            expect(
                mpirun_with(2, &noncontig, &[&argument]),
                &format!("plfs25_noncontig_short {name}, again"),
                "plfs25_noncontig_short: OK",
            );
            assert!(
                contents(&config, &file, &scratch) == noncontig_expected(),
                "{name}: {} reads back wrong after a rerun",
                file.display()
            );
        }

        // Data sieving asked for or not, the two files are the same and
        // hold exactly the four blocks (2.5 compared the two with diff).
        let fileview = build("plfs25_fileview");
        for switch in ["disable_ds", "enable_ds"] {
            let file = mount.join(format!("fileview-{switch}-{name}"));
            let argument = format!("plfs:{}", file.display());
            let output = mpirun_with(4, &fileview, &[&argument, switch]);
            let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
            expect(output, &format!("plfs25_fileview {switch} {name}"), "plfs25_fileview: OK");
            let bytes = contents(&config, &file, &scratch);
            assert!(
                bytes == fileview_expected(),
                "{name} {switch}: {} holds {} bytes, not the four blocks",
                file.display(),
                bytes.len()
            );
            // The wrapper says (verbosely) that it overrode the hint: four
            // ranks, two opens.
            let overridden =
                stderr.matches(&format!("{}: romio_ds_write=enable ignored", file.display())).count();
            assert_eq!(overridden, if switch == "enable_ds" { 8 } else { 0 }, "{name} {switch}:\n{stderr}");
        }
    }
}

#[test]
fn noncontig_short_and_fileview_under_open_mpi_ompio() {
    mpi_programs("openmpi", Some("ompio"));
}

#[test]
fn noncontig_short_and_fileview_under_open_mpi_romio() {
    mpi_programs("openmpi", Some("romio321"));
}

#[test]
fn noncontig_short_and_fileview_under_mpich() {
    mpi_programs("mpich", None);
}
