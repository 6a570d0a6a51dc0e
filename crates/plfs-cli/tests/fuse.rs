//! The FUSE mount, driven for real: each test starts `plfs mount MNT
//! --foreground` on a temporary three-backend plfsrc, waits for the kernel to
//! list the mount, runs ordinary tools through it (cp, tar, rsync, dd, fio,
//! fsx, pjdfstest, runuser) and always unmounts, also when it fails.
//!
//! Needs root, the Debian tools from scripts/install-deps.sh, and fsx and
//! pjdfstest from scripts/install-test-tools.sh (found via PLFS_TEST_TOOLS);
//! `make test` provides all three. The `harness_*` tests run the same
//! workloads on a plain directory, so a failure on the mount is the mount's.

mod fuse_support;
mod rename_support;

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use fuse_support::*;

const MIN: Duration = Duration::from_secs(60);
const GIB: u64 = 1 << 30;

// ---------------------------------------------------------------------------
// The harness itself, on a plain directory
// ---------------------------------------------------------------------------

/// The fio job really is N-1 strided (4 writers, interleaved records, one
/// file of exactly jobs x records x 47001 bytes), its inline verify reads
/// every record back, a later `--verify_only` pass re-reads them all, and
/// that pass catches a single corrupted byte.
#[test]
fn harness_fio_job_on_plain_dir() {
    let _serial = serial();
    let dir = plain_dir("plfs-harness-fio.");
    let work = dir.path().join("work");
    let data = dir.path().join("data");
    fs::create_dir_all(&work).unwrap();
    fs::create_dir_all(&data).unwrap();
    let job = FioJob { jobs: 4, records_per_job: 100 };
    let per_job = job.records_per_job * FIO_RECORD;

    let json = job.run(&data, &work, &[], MIN);
    let (bytes, _, _) = fio_summary(&json);
    assert_eq!(bytes, vec![(per_job, per_job); 4], "each job writes and verifies its own records");
    let file = data.join("n1-strided.dat");
    assert_eq!(fs::metadata(&file).unwrap().len(), job.file_size());

    // Records are interleaved: record r starts with a verify header written
    // by job r % 4, whose offset field says where it is.
    let handle = fs::File::open(&file).unwrap();
    for record in [0u64, 1, 2, 3, 4, 7, 398, 399] {
        let mut header = [0u8; 32];
        handle.read_exact_at(&mut header, record * FIO_RECORD).unwrap();
        // struct verify_header: magic u16, verify_type u16, len u32, rand_seed
        // u64, offset u64, ...
        assert_eq!(u16::from_le_bytes([header[0], header[1]]), 0xacca, "record {record} has a verify header");
        let offset = u64::from_le_bytes(header[16..24].try_into().unwrap());
        assert_eq!(offset, record * FIO_RECORD, "record {record}'s header names its own offset");
    }

    let json = job.run(&data, &work, &["--verify_only"], MIN);
    let (bytes, _, _) = fio_summary(&json);
    // (--verify_only counts the writes it replays without issuing them.)
    let reads: Vec<u64> = bytes.iter().map(|&(_, read)| read).collect();
    assert_eq!(reads, vec![per_job; 4], "--verify_only re-reads every record");
    assert_eq!(
        fs::metadata(&file).unwrap().len(),
        job.file_size(),
        "--verify_only must not lay the file out again"
    );

    // One flipped byte in the middle of record 7 (job 3's second record).
    let at = 7 * FIO_RECORD + 100;
    let mut byte = [0u8];
    handle.read_exact_at(&mut byte, at).unwrap();
    fs::OpenOptions::new().write(true).open(&file).unwrap().write_all_at(&[!byte[0]], at).unwrap();
    let (output, report) = job.run_raw(&data, &work, &["--verify_only"], MIN);
    assert!(!output.status.success(), "fio --verify_only missed a corrupted byte");
    let said = format!(
        "{}{}{report}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(said.contains("crc32c: verify failed at file"), "fio failed, but not by verifying: {said}");
}

/// The pjdfstest output parser and the docs/POSIX.md patterns, on canned
/// text; and every row of docs/POSIX.md parses.
#[test]
fn harness_pjdfstest_parser_and_patterns() {
    let stdout = "chmod::ok_case                                   ok\n\
                  link::remove_link::fifo                          FAILED\n\
                  \tcalled `Result::unwrap()` on an `Err` value: EPERM\n\
                  open::erofs_named                                skipped\n\
                  \tRemounts (allow_remount) are not allowed in the configuration file\n\
                  \u{1b}[34mrename::colored\u{1b}[0m                 \u{1b}[32mok\u{1b}[0m\n\
                  \nSummary: 1 failed, 1 skipped, 2 passed, 0 expected failures, 4 total\n";
    let results = parse_pjdfstest(stdout);
    assert_eq!(results.passed, ["chmod::ok_case", "rename::colored"]);
    assert_eq!(
        results.failed,
        [(
            "link::remove_link::fifo".to_owned(),
            "called `Result::unwrap()` on an `Err` value: EPERM".to_owned()
        )]
    );
    assert_eq!(results.skipped.len(), 1);
    assert!(results.summary.starts_with("Summary: 1 failed, 1 skipped, 2 passed"));

    assert!(pattern_matches("*::fifo", "link::remove_link::fifo"));
    assert!(!pattern_matches("*::fifo", "link::remove_link::fifo_x"));
    assert!(pattern_matches("link::*", "link::anything::here"));
    assert!(pattern_matches("*::enametoolong_path", "mknod::privileged::enametoolong_path"));
    assert!(pattern_matches("a::*::c", "a::b::c"));
    assert!(!pattern_matches("a::*::c", "a::b::d"));
    assert!(pattern_matches("exact::name", "exact::name"));
    assert!(!pattern_matches("exact::name", "exact::name::regular"));

    let exceptions = posix_exceptions();
    assert!(!exceptions.is_empty(), "docs/POSIX.md lists no pjdfstest cases");
    assert!(excused("mkfifo::changed_time_fields_success", &exceptions).is_some());
}

/// fsx itself passes on the host file system with both configurations
/// (short runs; the mount gets the long ones).
#[test]
fn harness_fsx_on_plain_dir() {
    let _serial = serial();
    let dir = plain_dir("plfs-harness-fsx.");
    let elapsed_default = run_fsx(dir.path(), "fsx-default", dir.path(), 2000, 1, None, MIN);
    let elapsed_rich = run_fsx(dir.path(), "fsx-rich", dir.path(), 2000, 2, Some(FSX_RICH_CONFIG), MIN);
    println!(
        "fsx on a plain directory: 2000 ops default {elapsed_default:.1?}, 2000 ops rich {elapsed_rich:.1?}"
    );
}

/// The pjdfstest configuration and the result parser, on the host file
/// system: every case passes or is skipped for a missing optional feature.
#[test]
fn harness_pjdfstest_on_plain_dir() {
    let _serial = serial();
    require_root();
    let dir = plain_dir("plfs-harness-pjd.");
    let work = dir.path().join("work");
    let target = dir.path().join("target");
    fs::create_dir_all(&work).unwrap();
    fs::create_dir_all(&target).unwrap();
    let secondary = other_fs_dir(&target, &[Path::new("/dev/shm"), Path::new("/run"), Path::new("/tmp")]);
    let results = run_pjdfstest(&target, secondary.as_deref(), &work, 5 * MIN);
    println!(
        "pjdfstest on the host file system: {} passed, {} skipped, {} failed in {:.1?}",
        results.passed.len(),
        results.skipped.len(),
        results.failed.len(),
        results.elapsed
    );
    assert!(results.passed.len() > 300, "only {} cases passed: {}", results.passed.len(), results.summary);
    assert!(
        results.failed.is_empty(),
        "pjdfstest fails on the host file system itself: {:#?}",
        results.failed
    );
}

// ---------------------------------------------------------------------------
// Round trips through the mount
// ---------------------------------------------------------------------------

/// The publish-by-rename workload on a plain directory: the control for
/// `rename_by_publishing_processes` (the program and the counting hold).
#[test]
fn harness_rename_publishing_on_plain_dir() {
    let _serial = serial();
    let dir = plain_dir("plfs-harness-rename.");
    let program = rename_support::compile(dir.path());
    let published = dir.path().join("pub");
    fs::create_dir(&published).unwrap();
    let counts =
        rename_support::publish_while_reading(&program, s(&published), |program| Command::new(program));
    assert_eq!(counts, rename_support::CLEAN);
}

/// One process publishes a file by renaming new versions onto it while
/// three others open, read and check it, through a real mount over three
/// backends: every read sees one whole version (the name is never missing,
/// never EIO, never short), and nothing hidden is left on the backends.
#[test]
fn rename_by_publishing_processes() {
    let _serial = serial();
    let mut mount = PlfsMount::new(&[]);
    let program = rename_support::compile(&mount.scratch);
    fs::create_dir(mount.path("pub")).unwrap();
    let counts = rename_support::publish_while_reading(&program, s(&mount.path("pub")), |program| {
        Command::new(program)
    });
    eprintln!("through FUSE: {counts}");
    assert_eq!(counts, rename_support::CLEAN, "daemon log:\n{}", mount.log_tail(30));
    // The kernel sends a close's release after close(2) returns, and the
    // last release of a replaced file removes it: unmount waits for them.
    mount.unmount();
    assert_nothing_hidden_left(&mount);
    let target = mount.path("pub/target");
    let recover = mount.plfs(&["recover", s(&target)]);
    assert!(recover.status.success(), "plfs recover: {}", describe(&recover));
}

/// The same on an n-n mount, with two of the readers on the backend file
/// itself, the file another node's n-n mount opens. The daemon is one
/// process for all, so each rename finds the target open there (the
/// mount's readers hold it) and must keep it for them. Before, such a
/// rename hid the target first and then moved the new version in: the
/// kernel kept that from the mount's readers, but the backend file was
/// missing in between.
#[test]
fn rename_by_publishing_processes_on_n_n() {
    let _serial = serial();
    let mut mount = PlfsMount::with_workload("file_per_proc", &[]);
    let program = rename_support::compile(&mount.scratch);
    fs::create_dir(mount.path("pub")).unwrap();
    // Which backend holds `target`: where a first version lands.
    fs::write(mount.path("pub/target"), b"x").unwrap();
    let on_backend = mount
        .backends
        .iter()
        .map(|backend| backend.join("pub/target"))
        .find(|path| path.exists())
        .expect("the n-n file on a backend");
    fs::remove_file(mount.path("pub/target")).unwrap();
    let through_mount = mount.path("pub/target");
    let readers = [&through_mount, &through_mount, &on_backend, &on_backend].map(|path| s(path).to_owned());
    let counts =
        rename_support::publish_while_reading_at(&program, s(&mount.path("pub")), &readers, |program| {
            Command::new(program)
        });
    eprintln!("through FUSE, n-n (two readers on the backend file): {counts}");
    assert_eq!(counts, rename_support::CLEAN, "daemon log:\n{}", mount.log_tail(30));
    mount.unmount();
    assert_nothing_hidden_left(&mount);
}

/// After the unmount: no hidden name in `pub` on any backend.
fn assert_nothing_hidden_left(mount: &PlfsMount) {
    for backend in &mount.backends {
        let leftovers: Vec<String> = fs::read_dir(backend.join("pub"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .filter(|name| name.starts_with(".plfs-"))
            .collect();
        assert_eq!(leftovers, Vec::<String>::new(), "left in {}", backend.display());
    }
}

/// Processes of the churn workload (programs/churn.c) and what each does.
const CHURNERS: usize = 8;
const CHURN_OPS: &str = "400";
const CHURN_BYTES: &str = "12288";

/// Runs `programs/churn.c` as CHURNERS processes at once in `dir` and
/// returns their summed counts, `ops=… open_errors=0 …`.
fn churn(program: &Path, dir: &Path) -> String {
    let children: Vec<_> = (0..CHURNERS)
        .map(|id| {
            Command::new(program)
                .args([s(dir), &id.to_string(), CHURN_OPS, CHURN_BYTES])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut totals: Vec<(String, u64)> = Vec::new();
    let mut errors = String::new();
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "churn: {}", describe(&output));
        errors.push_str(&String::from_utf8_lossy(&output.stderr));
        for (index, field) in String::from_utf8_lossy(&output.stdout).split_whitespace().enumerate() {
            let (name, value) = field.split_once('=').unwrap();
            let value: u64 = value.parse().unwrap();
            match totals.get_mut(index) {
                Some((_, total)) => *total += value,
                None => totals.push((name.to_owned(), value)),
            }
        }
    }
    if !errors.is_empty() {
        eprintln!("churn errors:\n{}", errors.lines().take(30).collect::<Vec<_>>().join("\n"));
    }
    totals.iter().map(|(name, total)| format!("{name}={total}")).collect::<Vec<_>>().join(" ")
}

fn compile_churn(dir: &Path) -> PathBuf {
    let source = dir.join("churn.c");
    fs::write(&source, include_str!("programs/churn.c")).unwrap();
    let program = dir.join("churn");
    run_ok(Command::new("cc").arg("-O1").arg("-o").arg(&program).arg(&source), MIN);
    program
}

fn churn_clean() -> String {
    let ops = CHURNERS * CHURN_OPS.parse::<usize>().unwrap();
    format!("ops={ops} open_errors=0 read_errors=0 short=0 bad=0 other_errors=0")
}

/// The churn workload on a plain directory: the control for
/// `churning_processes_in_one_directory`.
#[test]
fn harness_churn_on_plain_dir() {
    let _serial = serial();
    let dir = plain_dir("plfs-harness-churn.");
    let program = compile_churn(dir.path());
    let work = dir.path().join("d");
    fs::create_dir(&work).unwrap();
    assert_eq!(churn(&program, &work), churn_clean());
}

/// Eight processes create, publish by rename, read, rewrite and unlink
/// files in one directory through a real mount, with files replaced and
/// unlinked while others hold them open: every open of a published name
/// reads one whole file (never empty, never EIO), and once they are done
/// nothing hidden is left on any backend and `plfs recover` finds nothing.
#[test]
fn churning_processes_in_one_directory() {
    let _serial = serial();
    let mut mount = PlfsMount::new(&[]);
    let program = compile_churn(&mount.scratch);
    let dir = mount.path("churn");
    fs::create_dir(&dir).unwrap();
    let counts = churn(&program, &dir);
    eprintln!("through FUSE: {counts}");
    assert_eq!(counts, churn_clean(), "daemon log:\n{}", mount.log_tail(30));
    let published: Vec<PathBuf> = fs::read_dir(&dir).unwrap().map(|entry| entry.unwrap().path()).collect();
    // Releases come after close(2) returns; unmount waits for them (the
    // last one of an unlinked or replaced file removes it).
    mount.unmount();
    for backend in &mount.backends {
        let leftovers: Vec<String> = fs::read_dir(backend.join("churn"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .filter(|name| name.starts_with(".plfs-"))
            .collect();
        assert_eq!(leftovers, Vec::<String>::new(), "left in {}", backend.display());
    }
    // Whatever was published last, through the library; recover looks at
    // each file's directory for debris too.
    for file in &published {
        let recover = mount.plfs(&["recover", s(file)]);
        assert!(recover.status.success(), "plfs recover: {}", describe(&recover));
        let said = String::from_utf8_lossy(&recover.stdout);
        assert!(said.contains("no problems found"), "plfs recover: {}", describe(&recover));
    }
}

#[test]
fn cp_round_trip() {
    let _serial = serial();
    let mount = PlfsMount::new(&[]);
    let src = mount.scratch("tree");
    make_tree(&src);
    let into = mount.path("cp");
    let out = mount.scratch("cp-out");
    run_ok(Command::new(system_tool("cp")).arg("-a").arg(&src).arg(&into), 2 * MIN);
    compare_trees(&src, &into, true);
    run_ok(Command::new(system_tool("cp")).arg("-a").arg(&into).arg(&out), 2 * MIN);
    compare_trees(&src, &out, true);
    // The logical files are plfs containers on the backends, not plain copies.
    let totals = mount.map_totals("cp/big.bin");
    assert_eq!(totals["eof"], 3 * 1024 * 1024 + 7, "{totals}");
}

/// The other workloads through the mount: a tree copied in and out with
/// cp -a (then renamed and partly removed), compared file by file, and the
/// backends hold what the workload promises.
#[test]
fn n_n_and_small_file_mounts_round_trip() {
    let _serial = serial();
    for workload in ["file_per_proc", "small_file"] {
        let mount = PlfsMount::with_workload(workload, &[]);
        let src = mount.scratch("tree");
        make_tree(&src);
        let into = mount.path("cp");
        let out = mount.scratch("cp-out");
        run_ok(Command::new(system_tool("cp")).arg("-a").arg(&src).arg(&into), 2 * MIN);
        // Small files keep no modes (they report 0644; docs/ARCHITECTURE.md).
        let compare = |expected: &Path, actual: &Path| match workload {
            "file_per_proc" => compare_trees(expected, actual, true),
            _ => compare_contents(expected, actual),
        };
        compare(&src, &into);
        run_ok(Command::new(system_tool("cp")).arg("-a").arg(&into).arg(&out), 2 * MIN);
        compare(&src, &out);
        let moved = mount.path("moved");
        fs::rename(&into, &moved).unwrap();
        fs::remove_file(moved.join("big.bin")).unwrap();
        assert!(!moved.join("big.bin").exists(), "{workload}");
        let backend_files: Vec<PathBuf> =
            mount.backends.iter().flat_map(|backend| walk_files(backend)).collect();
        match workload {
            // One plain file per logical file, no container.
            "file_per_proc" => assert!(
                backend_files.iter().all(|file| !file.to_string_lossy().contains("hostdir.")),
                "{backend_files:?}"
            ),
            // Files are records in per-directory logs, never backend files of their own.
            _ => assert!(
                backend_files.iter().all(|file| file.to_string_lossy().contains(".plfs-smallfile/")),
                "{backend_files:?}"
            ),
        }
    }
}

/// `rewinddir` re-reads the directory through the mount (as a plain file
/// system does): a file unlinked and one created by another process since
/// the first listing show as such in the second. Also for small files. The
/// first listing is what the directory holds when it is read, not when it
/// was opened: before, a file made between the two was missing from it
/// (`os.listdir(fd)` of a descriptor opened early listed nothing).
#[test]
fn rewinddir_lists_the_directory_again() {
    let _serial = serial();
    for workload in ["shared_file", "small_file"] {
        let mount = PlfsMount::with_workload(workload, &[]);
        let source = mount.scratch("rewinddir.c");
        fs::write(&source, include_str!("programs/rewinddir.c")).unwrap();
        let program = mount.scratch("rewinddir");
        run_ok(Command::new("cc").arg("-O1").arg("-o").arg(&program).arg(&source), MIN);
        let dir = mount.path("d");
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("kept"), b"k").unwrap();
        fs::write(dir.join("victim"), b"v").unwrap();
        let change = format!("rm {0}/victim && echo n > {0}/newcomer", dir.display());
        let before = format!("echo e > {0}/early", dir.display());
        let output = run_ok(Command::new(&program).arg(&dir).arg(&change).arg(&before), MIN);
        let listed = String::from_utf8_lossy(&output.stdout);
        assert_eq!(listed, "first: early kept victim\nagain: early kept newcomer\n", "{workload}");
    }
}

/// Two processes publish one name by rename and unlink it, three others
/// open it over and over (`programs/open_race.c`): on a plain directory
/// such an open finds a whole file or fails with ENOENT, and so it must
/// through the mount, on every workload. Before, an open that reached the
/// file just as it was unlinked failed with EIO (shared_file: a lookup took
/// the vanishing container for a directory), ESTALE (the kernel retries
/// that only once) or EINVAL (small_file refused to open the hidden name
/// of a file unlinked while open); each within a few seconds.
#[test]
fn opens_racing_publication_and_unlink_find_a_whole_file_or_nothing() {
    let _serial = serial();
    let plain = plain_dir("plfs-harness-open-race.");
    let source = plain.path().join("open_race.c");
    fs::write(&source, include_str!("programs/open_race.c")).unwrap();
    let program = plain.path().join("open_race");
    run_ok(Command::new("cc").arg("-O1").arg("-o").arg(&program).arg(&source), MIN);
    let race = |dir: &Path, seconds: &str| -> Vec<String> {
        let spawn = |role: &str| {
            Command::new(&program)
                .arg(dir)
                .arg(role)
                .arg(seconds)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let children: Vec<_> = ["w", "w", "r", "r", "r"].into_iter().map(spawn).collect();
        let mut problems = Vec::new();
        let mut whole = 0;
        for child in children {
            let output = child.wait_with_output().unwrap();
            assert!(output.status.success(), "open_race: {}", describe(&output));
            let counts = String::from_utf8_lossy(&output.stdout).into_owned();
            whole += counts
                .split_whitespace()
                .find_map(|field| field.strip_prefix("whole="))
                .map_or(0, |count| count.parse::<u64>().unwrap());
            if !counts.is_empty() && !counts.contains("errors=0 short=0") {
                problems.push(format!(
                    "{} ({})",
                    counts.trim(),
                    String::from_utf8_lossy(&output.stderr).trim()
                ));
            }
        }
        // A race only where the readers met published files.
        assert!(whole > 0, "no reader read a published file in {}", dir.display());
        problems
    };
    let work = plain.path().join("d");
    fs::create_dir(&work).unwrap();
    assert_eq!(race(&work, "2"), Vec::<String>::new(), "on a plain directory");
    for workload in ["shared_file", "file_per_proc", "small_file"] {
        let mount = PlfsMount::with_workload(workload, &[]);
        let dir = mount.path("race");
        fs::create_dir(&dir).unwrap();
        assert_eq!(race(&dir, "6"), Vec::<String>::new(), "{workload}");
    }
}

/// A file renamed and then unlinked while a descriptor holds it open (in
/// the process that removes it, and in another one) reads, writes and
/// fstats as on a plain directory, on every workload; nothing is left once
/// the descriptor closes. Before, on small_file the unlink failed with
/// EINVAL (four sqlite processes lost 3 in 4 transactions to
/// SQLITE_IOERR_DELETE on their journal) and a rename left the
/// descriptor with ENOENT.
#[test]
fn files_renamed_and_unlinked_while_open_stay_usable() {
    let _serial = serial();
    let script = include_str!("programs/open_across_unlink.py");
    let plain = tempfile::tempdir().unwrap();
    let transcript = |dir: &Path, holders: &str| {
        let output = run_ok(Command::new("python3").arg("-c").arg(script).arg(dir).arg(holders), MIN);
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    for workload in ["shared_file", "file_per_proc", "small_file"] {
        let mut mount = PlfsMount::with_workload(workload, &[]);
        for holders in ["one", "two"] {
            let dir = mount.path(holders);
            fs::create_dir(&dir).unwrap();
            let expected = transcript(plain.path(), holders);
            assert_eq!(transcript(&dir, holders), expected, "{workload}, {holders}");
        }
        // The kernel sends a release after close(2) returns, and the
        // daemon's worker deletes the last close's unlinked file after
        // that: recover run at once found its pieces pending (CI, once).
        // Unmount waits for both.
        mount.unmount();
        for holders in ["one", "two"] {
            let dir = mount.path(holders);
            let found = mount.plfs(&["recover", dir.to_str().unwrap()]);
            let text = String::from_utf8_lossy(&found.stdout);
            assert!(text.contains("no problems found"), "{workload}, {holders}: {text}");
        }
    }
}

/// A process sees its own changes to a file at once through its other
/// descriptors and by name (`own_changes_seen.py` against a plain
/// directory). Before, on small_file the daemon answered a stat after a
/// write with the old size and another descriptor read the old bytes.
#[test]
fn a_process_sees_its_own_changes_through_every_descriptor() {
    let _serial = serial();
    let expected = same_transcript_as_plain(include_str!("programs/own_changes_seen.py"), |_, _| {});
    assert!(expected.contains("after a write 10 b'bbbbbbbbbb'"), "{expected}");
}

/// posix_fallocate and fallocate(1) grow a file on the mount as on a plain
/// directory (`fallocate.py`); punching a hole is EOPNOTSUPP. Before, the
/// daemon answered ENOSYS: `fallocate -l` failed ("Operation not
/// supported") and posix_fallocate wrote the zeros through glibc.
#[test]
fn fallocate_grows_files_as_on_a_plain_directory() {
    let _serial = serial();
    let expected = same_transcript_as_plain(include_str!("programs/fallocate.py"), |workload, dir| {
        let punch = Command::new("fallocate")
            .args(["-p", "-o", "0", "-l", "10"])
            .arg(dir.join("fb"))
            .output()
            .unwrap();
        assert_eq!(punch.status.code(), Some(1), "{workload}: {punch:?}");
    });
    assert!(expected.contains("fallocate(1) 0 16384"), "{expected}");
}

/// Runs the Python `script` with a directory argument on a plain directory,
/// then on a directory of a fresh mount of every workload, and checks that
/// each prints what the plain run printed; `then` checks more on each
/// mount. Returns the plain transcript.
fn same_transcript_as_plain(script: &str, then: impl Fn(&str, &Path)) -> String {
    let transcript = |dir: &Path| {
        let output = run_ok(Command::new("python3").arg("-c").arg(script).arg(dir), MIN);
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let plain = tempfile::tempdir().unwrap();
    let expected = transcript(plain.path());
    for workload in ["shared_file", "file_per_proc", "small_file"] {
        let mount = PlfsMount::with_workload(workload, &[]);
        let dir = mount.path("d");
        fs::create_dir(&dir).unwrap();
        assert_eq!(transcript(&dir), expected, "{workload}");
        then(workload, &dir);
    }
    expected
}

/// Same names, kinds, bytes and link targets; modes and times not compared.
fn compare_contents(expected: &Path, actual: &Path) {
    for entry in fs::read_dir(expected).unwrap() {
        let entry = entry.unwrap();
        let (from, to) = (entry.path(), actual.join(entry.file_name()));
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            assert!(to.is_dir(), "{} is not a directory", to.display());
            compare_contents(&from, &to);
        } else if kind.is_symlink() {
            assert_eq!(fs::read_link(&from).unwrap(), fs::read_link(&to).unwrap(), "{}", to.display());
        } else {
            assert!(fs::read(&from).unwrap() == fs::read(&to).unwrap(), "{} differs", to.display());
        }
    }
    let count = |dir: &Path| fs::read_dir(dir).unwrap().count();
    assert_eq!(count(expected), count(actual), "{} has other entries", actual.display());
}

fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            files.extend(walk_files(&entry.path()));
        } else if kind.is_file() {
            files.push(entry.path());
        }
    }
    files
}

#[test]
fn tar_round_trip() {
    let _serial = serial();
    let mount = PlfsMount::new(&[]);
    let src = mount.scratch("tree");
    make_tree(&src);
    let into = mount.path("tar");
    let out = mount.scratch("tar-out");
    fs::create_dir(&into).unwrap();
    fs::create_dir(&out).unwrap();
    // tar exits non-zero on "file changed as we read it", so an unstable
    // size or mtime through the mount fails here too.
    let pipe = |from: &Path, to: &Path| {
        bash(&format!("tar -C '{}' -cf - . | tar -C '{}' -xpf -", s(from), s(to)), &mount.scratch, 2 * MIN);
    };
    pipe(&src, &into);
    compare_trees(&src, &into, true);
    pipe(&into, &out);
    compare_trees(&src, &out, true);
    // And an archive file stored in the mount, listed and extracted from it.
    bash(&format!("tar -C '{}' -cf '{}/tree.tar' .", s(&src), s(&mount.mountpoint)), &mount.scratch, 2 * MIN);
    let out2 = mount.scratch("tar-out2");
    fs::create_dir(&out2).unwrap();
    bash(&format!("tar -C '{}' -xpf '{}/tree.tar'", s(&out2), s(&mount.mountpoint)), &mount.scratch, 2 * MIN);
    compare_trees(&src, &out2, true);
}

#[test]
fn rsync_round_trip() {
    let _serial = serial();
    system_tool("rsync");
    let mount = PlfsMount::new(&[]);
    let src = mount.scratch("tree");
    make_tree(&src);
    let into = mount.path("rsync");
    let out = mount.scratch("rsync-out");
    let rsync = |args: &[&str], from: &Path, to: &Path| {
        let output = run_ok(
            Command::new(system_tool("rsync"))
                .args(args)
                .arg(format!("{}/", s(from)))
                .arg(format!("{}/", s(to))),
            2 * MIN,
        );
        String::from_utf8(output.stdout).unwrap()
    };
    // rsync writes a temporary file and renames it over the target.
    rsync(&["-a"], &src, &into);
    compare_trees(&src, &into, true);
    // Sizes and mtimes came through, so a second run has nothing to do.
    let again = rsync(&["-a", "--itemize-changes"], &src, &into);
    assert_eq!(again, "", "second rsync -a into the mount wanted to transfer:\n{again}");
    // A changed file (same size, new mtime) goes through the delta path,
    // reading the old version from the mount as its basis.
    let big = src.join("big.bin");
    fs::OpenOptions::new().write(true).open(&big).unwrap().write_all_at(b"CHANGED", 1_000_000).unwrap();
    let file = fs::File::options().write(true).open(&big).unwrap();
    file.set_modified(std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_650_000_000)).unwrap();
    rsync(&["-a", "--no-whole-file"], &src, &into);
    compare_trees(&src, &into, true);
    rsync(&["-a"], &into, &out);
    compare_trees(&src, &out, true);
}

#[test]
fn dd_round_trip() {
    let _serial = serial();
    let mount = PlfsMount::new(&[]);
    let data = mount.scratch("random.bin");
    write_file(&data, &random_bytes(64 * 1024 * 1024 + 12345, 7), 0o644, None);
    let expected = mount.scratch("expected.bin");
    fs::copy(&data, &expected).unwrap();
    let patch = mount.scratch("patch.bin");
    write_file(&patch, &random_bytes(3 * 1024 * 1024, 8), 0o644, None);
    let inside = mount.path("dd.bin");
    let out = mount.scratch("dd-out.bin");
    let dd = |args: &str| bash(&format!("dd status=none {args}"), &mount.scratch, 2 * MIN);

    dd(&format!("if='{}' of='{}' bs=1M conv=fsync", s(&data), s(&inside)));
    cmp(&data, &inside, MIN);
    dd(&format!("if='{}' of='{}' bs=1M", s(&inside), s(&out)));
    cmp(&data, &out, MIN);

    // Overwrite in the middle, then past EOF (leaving a hole), both on the
    // mount and on a local copy.
    for seek in [5, 70] {
        let args = format!("if='{}' bs=1M seek={seek} conv=notrunc", s(&patch));
        dd(&format!("{args} of='{}'", s(&inside)));
        dd(&format!("{args} of='{}'", s(&expected)));
    }
    assert_eq!(fs::metadata(&inside).unwrap().len(), 73 * 1024 * 1024);
    cmp(&expected, &inside, MIN);
    dd(&format!("if='{}' of='{}' bs=1M", s(&inside), s(&out)));
    cmp(&expected, &out, MIN);

    // Odd block sizes both ways.
    let odd = mount.path("odd.bin");
    dd(&format!("if='{}' of='{}' bs=47001 count=300", s(&data), s(&odd)));
    let odd_out = mount.scratch("odd-out.bin");
    dd(&format!("if='{}' of='{}' bs=4093", s(&odd), s(&odd_out)));
    assert_eq!(fs::read(&odd_out).unwrap(), fs::read(&data).unwrap()[..300 * 47001]);
}

/// A 1 GiB file holding five 5-byte markers: copied in with
/// `cp --sparse=always` it must stay sparse in the container (the index
/// map shows holes, not a gigabyte of zeros), read back byte-exact, and
/// copy out sparse again.
#[test]
fn sparse_1gib_round_trip() {
    let _serial = serial();
    let mount = PlfsMount::new(&[]);
    let markers: [(u64, &str); 5] = [
        (0, "FIRST"),
        (3 * 4096 + 17, "PAGE3"),
        (300 << 20, "300MB"),
        (777_777_777, "ODD77"),
        (GIB - 5, "LAST!"),
    ];
    let make_sparse = |path: &Path| {
        run_ok(Command::new(system_tool("truncate")).arg("-s").arg("1G").arg(path), MIN);
        for (offset, marker) in markers {
            bash(
                &format!(
                    "printf '{marker}' | dd of='{}' bs=64 oflag=seek_bytes seek={offset} conv=notrunc status=none",
                    s(path)
                ),
                &mount.scratch,
                MIN,
            );
        }
        assert_eq!(fs::metadata(path).unwrap().len(), GIB, "{}", path.display());
    };
    let src = mount.scratch("sparse.src");
    make_sparse(&src);
    assert!(fs::metadata(&src).unwrap().blocks() * 512 < 1 << 20, "the source itself is sparse");

    let check_map = |inside: &str| {
        let totals = mount.map_totals(inside);
        println!("plfs map --totals {inside}: {totals}");
        assert_eq!(totals["eof"], GIB, "{inside}: {totals}");
        assert!(totals["holes"].as_u64().unwrap() >= 1, "{inside} has no holes: {totals}");
        assert!(totals["data_bytes"].as_u64().unwrap() <= 64 << 20, "{inside} stored zeros: {totals}");
        assert!(totals["hole_bytes"].as_u64().unwrap() >= GIB - (64 << 20), "{inside}: {totals}");
    };

    let inside = mount.path("sparse.bin");
    let started = Instant::now();
    run_ok(Command::new(system_tool("cp")).arg("--sparse=always").arg(&src).arg(&inside), 5 * MIN);
    let copy_in = started.elapsed();
    assert_eq!(fs::metadata(&inside).unwrap().len(), GIB);
    let started = Instant::now();
    cmp(&src, &inside, 5 * MIN);
    let cmp_time = started.elapsed();
    check_map("sparse.bin");

    // Made in place: truncate to 1 GiB, then dd conv=notrunc at the offsets.
    let in_place = mount.path("in-place.bin");
    make_sparse(&in_place);
    cmp(&src, &in_place, 5 * MIN);
    check_map("in-place.bin");

    let out = mount.scratch("sparse.out");
    let started = Instant::now();
    run_ok(Command::new(system_tool("cp")).arg("--sparse=always").arg(&inside).arg(&out), 5 * MIN);
    let copy_out = started.elapsed();
    cmp(&src, &out, 5 * MIN);
    let allocated = fs::metadata(&out).unwrap().blocks() * 512;
    println!(
        "1 GiB sparse: cp in {copy_in:.1?}, cmp through the mount {cmp_time:.1?}, cp out {copy_out:.1?}; \
         st_blocks in the mount {} bytes, copied out {allocated} bytes allocated",
        fs::metadata(&inside).unwrap().blocks() * 512
    );
    assert!(allocated <= 64 << 20, "copied out {allocated} bytes allocated: not sparse");
}

// ---------------------------------------------------------------------------
// fio, fsx, pjdfstest
// ---------------------------------------------------------------------------

/// 4 fio processes write interleaved 47001-byte records into one file
/// through the mount and verify them; after a clean unmount and a fresh
/// daemon, `fio --verify_only` reads every record back again.
#[test]
fn fio_n1_strided_verify() {
    let _serial = serial();
    system_tool("fio");
    let mut mount = PlfsMount::new(&[]);
    let job = FioJob { jobs: 4, records_per_job: 500 };
    let per_job = job.records_per_job * FIO_RECORD;
    let work = mount.scratch.clone();

    let json = job.run(&mount.mountpoint, &work, &[], 10 * MIN);
    let (bytes, write_bw, verify_bw) = fio_summary(&json);
    assert_eq!(bytes, vec![(per_job, per_job); 4], "each job writes, then verifies, its records");
    let file = mount.path("n1-strided.dat");
    assert_eq!(fs::metadata(&file).unwrap().len(), job.file_size());
    let totals = mount.map_totals("n1-strided.dat");
    println!(
        "fio N-1 strided through the mount: {} MB, write {write_bw:.0} MiB/s, inline verify {verify_bw:.0} MiB/s; map {totals}",
        job.file_size() / 1_000_000
    );
    assert_eq!(totals["eof"], job.file_size(), "{totals}");
    assert_eq!(totals["holes"], 0, "every record was written: {totals}");

    mount.unmount();
    mount.mount();
    let json = job.run(&mount.mountpoint, &work, &["--verify_only"], 10 * MIN);
    let (bytes, _, reverify_bw) = fio_summary(&json);
    let reads: Vec<u64> = bytes.iter().map(|&(_, read)| read).collect();
    assert_eq!(reads, vec![per_job; 4], "--verify_only after a remount re-reads every record");
    println!(
        "fio --verify_only after remount: {reverify_bw:.0} MiB/s, all {} records good",
        job.jobs * job.records_per_job
    );
}

/// Unaligned writes through read-write opens (what fio and IOR do) reach
/// the daemon as one request each, so one index record each, from several
/// processes at once; every byte reads back, through the mount and
/// through the library.
#[test]
fn read_write_opens_make_one_index_record_per_write() {
    let _serial = serial();
    let mount = PlfsMount::new(&[]);
    const RECORD: u64 = 47001;
    const WRITERS: u64 = 3;
    const PER_WRITER: u64 = 40;
    let path = mount.path("rw.dat");
    fs::File::create(&path).unwrap();
    // Writer w's k-th record at slot 2 * (k * WRITERS + w), shifted by up
    // to 1261 bytes: a gap after every record, so the index cannot merge
    // neighbours, and no fixed stride, so it cannot fold a writer's records
    // into one pattern record either.
    let record = |w: u64, k: u64| random_bytes(RECORD as usize, 100 + w * 1000 + k);
    let slot = |w: u64, k: u64| 2 * (k * WRITERS + w) * RECORD + (w * 7919 + k * k * 104_729) % 97 * 13;
    std::thread::scope(|scope| {
        for w in 0..WRITERS {
            let path = &path;
            scope.spawn(move || {
                let file = fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
                for k in 0..PER_WRITER {
                    file.write_all_at(&record(w, k), slot(w, k)).unwrap();
                }
            });
        }
    });
    let totals = mount.map_totals("rw.dat");
    // At most: the index may still fold a few records into one pattern.
    let records = totals["records"].as_u64().unwrap();
    assert!(
        records <= WRITERS * PER_WRITER,
        "{records} index records for {} write(2)s: {totals}",
        WRITERS * PER_WRITER
    );
    let data = fs::read(&path).unwrap();
    for w in 0..WRITERS {
        for k in 0..PER_WRITER {
            let (at, len) = (slot(w, k) as usize, RECORD as usize);
            assert!(data[at..at + len] == record(w, k), "writer {w} record {k}");
            // Up to where the next record may start (its shift is smaller).
            let gap = &data[(at + len).min(data.len())..(at + 2 * len - 1261).min(data.len())];
            assert!(gap.iter().all(|&b| b == 0), "the hole after writer {w} record {k}");
        }
    }
}

/// A reader holding the file open with cached pages sees a read-write
/// open's write at once (the kernel drops the pages a direct write
/// overlaps), and so do new processes: `cat`, and `nobody`.
#[test]
fn cached_readers_see_writes_of_read_write_opens() {
    let _serial = serial();
    let mount = PlfsMount::new(&["allow_other"]);
    let path = mount.path("shared.txt");
    let old = random_bytes(3 * 4096 + 100, 21);
    write_file(&path, &old, 0o644, None);
    let reader = fs::File::open(&path).unwrap();
    let mut seen = vec![0u8; old.len()];
    reader.read_exact_at(&mut seen, 0).unwrap();
    assert_eq!(seen, old);
    // Another process, a read-write descriptor (`1<>`), 8 bytes at 5000.
    bash(&format!("printf NEWBYTES | dd status=none bs=8 seek=625 1<>'{}'", s(&path)), &mount.scratch, MIN);
    let mut expected = old.clone();
    expected[5000..5008].copy_from_slice(b"NEWBYTES");
    reader.read_exact_at(&mut seen, 0).unwrap();
    assert!(seen == expected, "the open reader's cached pages are stale");
    let cat = bash(&format!("cat '{}'", s(&path)), &mount.scratch, MIN);
    assert!(cat.stdout == expected, "cat in a new process");
    let nobody = run_ok(Command::new("runuser").args(["-u", "nobody", "--", "cat"]).arg(&path), MIN);
    assert!(nobody.stdout == expected, "cat as nobody");
}

/// Files under the backends whose names start with `prefix` ("data.",
/// "index."): the logs of every container there.
fn backend_logs(backends: &[PathBuf], prefix: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, prefix: &str, found: &mut Vec<PathBuf>) {
        for entry in fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                walk(&entry.path(), prefix, found);
            } else if entry.file_name().to_string_lossy().starts_with(prefix) {
                found.push(entry.path());
            }
        }
    }
    let mut found = Vec::new();
    for backend in backends {
        walk(backend, prefix, &mut found);
    }
    found
}

/// The most logs whose names start with `prefix` that any one backend
/// holds: a node's writer keeps one log pair per backend its file's layout
/// sends data to (the mount default spreads a large file over them).
fn most_logs_on_one_backend(backends: &[PathBuf], prefix: &str) -> usize {
    backends
        .iter()
        .map(|backend| backend_logs(std::slice::from_ref(backend), prefix).len())
        .max()
        .unwrap_or(0)
}

/// Every local process writing one file goes through the daemon's one
/// writer for it: while the file is open on the node, one data log and one
/// index log, however many processes write (the PLFS papers' one index per
/// node through FUSE), and every byte reads back.
#[test]
fn local_processes_share_one_log_pair_per_file() {
    let _serial = serial();
    let mount = PlfsMount::new(&[]);
    const RECORD: usize = 47001;
    const WRITERS: usize = 4;
    const PER_WRITER: usize = 6;
    let path = mount.path("n1.dat");
    // Held open meanwhile, as a job's other ranks hold it: the node's
    // writer lives from the first open to the last close.
    let held = fs::File::create(&path).unwrap();
    let source = mount.scratch("records");
    let records = random_bytes(RECORD * WRITERS * PER_WRITER, 5);
    fs::write(&source, &records).unwrap();
    // Every record by a `dd` of its own: 24 processes, 4 at a time.
    std::thread::scope(|scope| {
        for w in 0..WRITERS {
            let (source, path, scratch) = (&source, &path, &mount.scratch);
            scope.spawn(move || {
                let script = format!(
                    "for k in $(seq 0 {last}); do slot=$((k * {WRITERS} + {w})); \
                     dd status=none if='{src}' of='{dst}' bs={RECORD} skip=$slot seek=$slot count=1 \
                     conv=notrunc || exit 1; done",
                    last = PER_WRITER - 1,
                    src = s(source),
                    dst = s(path),
                );
                bash(&script, scratch, MIN);
            });
        }
    });
    assert!(fs::read(&path).unwrap() == records, "the records read back through the mount");
    let (data, index) = (backend_logs(&mount.backends, "data."), backend_logs(&mount.backends, "index."));
    let (data_most, index_most) = (
        most_logs_on_one_backend(&mount.backends, "data."),
        most_logs_on_one_backend(&mount.backends, "index."),
    );
    assert!(
        data_most == 1 && index_most == 1 && data.len() == index.len() && data.len() <= mount.backends.len(),
        "{} data and {} index logs ({data_most} and {index_most} at most on one backend) for {} writing \
         processes, e.g. {:?}",
        data.len(),
        index.len(),
        WRITERS * PER_WRITER,
        data.first()
    );
    drop(held);
    let totals = mount.map_totals("n1.dat");
    let written = totals["records"].as_u64().unwrap();
    // A write that crosses a stripe unit (1 MiB under the mount's default
    // layout) is cut there, one record per piece: at most one more record
    // per unit boundary inside the file.
    let boundaries = (RECORD * WRITERS * PER_WRITER) as u64 / (1 << 20);
    assert!(
        written <= (WRITERS * PER_WRITER) as u64 + boundaries,
        "{written} index records for 24 write(2)s and {boundaries} stripe unit boundaries: {totals}"
    );
}

/// Byte `i` of record `k` of writer `w` as tests/programs/hold_writes.c
/// writes it.
fn held_record(w: u64, k: u64, size: u64) -> Vec<u8> {
    (0..size).map(|i| ((w * 31 + k * 7 + i * 13) % 251 + 1) as u8).collect()
}

/// A writing process killed with SIGKILL loses nothing it wrote: its writes
/// went to the node's shared writer, and the kernel's flush at its death
/// put them in the index log, for this node's processes at once and for
/// another node at its next open, while the other writers keep the file
/// open. The daemon killed with SIGKILL loses only what was never synced
/// or flushed: after `plfs recover --fix`, every record written before an
/// fsync or by the killed process reads back, and every other one reads
/// back as its own bytes or as a hole.
#[test]
fn killed_writers_and_a_killed_daemon_lose_only_unsynced_writes() {
    use std::io::BufRead;
    const SIZE: u64 = 47001;
    const WRITERS: u64 = 3;
    const RECORDS: u64 = 8;
    const SYNCED: u64 = 5;
    let _serial = serial();
    let mut mount = PlfsMount::new(&[]);
    let source = mount.scratch("hold_writes.c");
    fs::write(&source, include_str!("programs/hold_writes.c")).unwrap();
    let program = mount.scratch("hold_writes");
    run_ok(Command::new("cc").arg("-O1").arg("-o").arg(&program).arg(&source), MIN);
    let path = mount.path("held.dat");
    let mut writers: Vec<std::process::Child> = (0..WRITERS)
        .map(|w| {
            let mut child = Command::new(&program)
                .arg(&path)
                .args([w, WRITERS, RECORDS, SYNCED, SIZE].map(|n| n.to_string()))
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let mut line = String::new();
            std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
            assert_eq!(line, "written\n", "writer {w}");
            child
        })
        .collect();
    writers[0].kill().unwrap();
    writers[0].wait().unwrap();
    let record_at = |data: &[u8], w: u64, k: u64| {
        let at = ((k * WRITERS + w) * SIZE) as usize;
        data.get(at..at + SIZE as usize).map(<[u8]>::to_vec)
    };
    let data = fs::read(&path).unwrap();
    for (w, k) in (0..WRITERS).flat_map(|w| (0..RECORDS).map(move |k| (w, k))) {
        assert!(record_at(&data, w, k) == Some(held_record(w, k, SIZE)), "writer {w} record {k} on the node");
    }
    {
        let other_node = mount.second_over_same_backends(&[]);
        let seen = fs::read(other_node.path("held.dat")).unwrap();
        for k in 0..RECORDS {
            assert!(record_at(&seen, 0, k) == Some(held_record(0, k, SIZE)), "killed writer's record {k}");
        }
    }
    assert_eq!(
        most_logs_on_one_backend(&mount.backends, "index."),
        1,
        "one index log per backend for the node's writers"
    );

    mount.crash();
    for writer in &mut writers[1..] {
        writer.kill().unwrap();
        writer.wait().unwrap();
    }
    let logical = mount.mountpoint.join("held.dat");
    let fixed = mount.plfs(&["recover", "--fix", logical.to_str().unwrap()]);
    assert!(fixed.status.success(), "{}", describe(&fixed));
    mount.mount();
    let data = fs::read(&path).unwrap();
    for (w, k) in (0..WRITERS).flat_map(|w| (0..RECORDS).map(move |k| (w, k))) {
        let expected = held_record(w, k, SIZE);
        match record_at(&data, w, k) {
            Some(found) if found == expected => {}
            found if k < SYNCED || w == 0 => {
                panic!("writer {w} record {k} lost: {:?} bytes", found.map(|f| f.len()))
            }
            Some(found) => {
                assert!(found.iter().all(|&b| b == 0), "writer {w} record {k}: neither its bytes nor a hole")
            }
            None => {}
        }
    }
}

/// Two daemons over the same backends, as two nodes: what one mount's
/// writer closed, a reader through the other reads at its next open,
/// though it read (and cached) the old bytes through an earlier open.
#[test]
fn a_second_mount_reads_what_the_first_closed() {
    let _serial = serial();
    let first = PlfsMount::new(&[]);
    let second = first.second_over_same_backends(&[]);
    let old = random_bytes(1024 * 1024 + 7, 31);
    fs::write(first.path("f.bin"), &old).unwrap();
    let held = fs::File::open(second.path("f.bin")).unwrap();
    let mut seen = Vec::new();
    (&held).read_to_end(&mut seen).unwrap();
    assert!(seen == old, "the second mount reads the first's file");
    let new = random_bytes(70_000, 32);
    {
        let file = fs::OpenOptions::new().read(true).write(true).open(first.path("f.bin")).unwrap();
        file.write_all_at(&new, 12_345).unwrap();
    }
    let mut expected = old.clone();
    expected[12_345..12_345 + new.len()].copy_from_slice(&new);
    let reopened = fs::read(second.path("f.bin")).unwrap();
    assert!(reopened == expected, "an open after the writer's close sees its bytes");
    let cat = bash(&format!("cat '{}'", s(&second.path("f.bin"))), &second.scratch, MIN);
    assert!(cat.stdout == expected, "cat through the second mount");
    drop(held);
}

/// With attributes and names cached for a minute, every change one
/// process makes through the mount (size by write, O_APPEND and truncate,
/// rename, rename over a file, unlink) is what another user's process sees
/// next: the kernel keeps what it cached right for its own requests, and
/// the daemon tells it what it placed itself (O_APPEND).
#[test]
fn changes_through_the_mount_show_at_once_with_cached_attributes() {
    let _serial = serial();
    let mount = PlfsMount::new(&["allow_other", "attr_timeout=60", "entry_timeout=60"]);
    let dir = mount.path("d");
    fs::create_dir(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
    // The reader: another user, a new process per look.
    let look = |script: &str| -> String {
        let output = run(
            Command::new("runuser").args(["-u", "nobody", "--", "bash", "-c", script]).current_dir(&dir),
            MIN,
        );
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
    };
    let size = |name: &str| look(&format!("stat -c %s {name} 2>/dev/null || echo gone"));
    let writer = |script: &str| bash(script, &dir, MIN);

    writer("printf 0123456789 > f");
    assert_eq!(size("f"), "10\n", "after the create");
    assert_eq!(look("cat f"), "0123456789", "contents after the create");
    writer("printf abcde >> f");
    assert_eq!(size("f"), "15\n", "after an O_APPEND write");
    writer("truncate -s 3 f");
    assert_eq!(size("f"), "3\n", "after a truncate");
    assert_eq!(look("cat f"), "012", "contents after the truncate");
    writer(
        "exec 3<>f; printf XY >&3; exec 3>&-; printf 0123456789abcdefghij | dd of=f bs=20 seek=1 conv=notrunc status=none",
    );
    assert_eq!(size("f"), "40\n", "after a write past the end");
    writer("mv f g");
    assert_eq!(size("f"), "gone\n", "the old name after a rename");
    assert_eq!(size("g"), "40\n", "the new name after a rename");
    writer("printf 1234567 > h");
    assert_eq!(size("h"), "7\n");
    writer("mv g h");
    assert_eq!(size("h"), "40\n", "a name renamed over shows the file moved there");
    assert!(look("cat h").starts_with("XY2"), "contents of the file renamed over another");
    assert_eq!(size("g"), "gone\n");
    writer("rm h");
    assert_eq!(size("h"), "gone\n", "after an unlink");
    writer("printf new > h");
    assert_eq!(look("cat h"), "new", "a new file under an unlinked name");
}

/// A second mount stands for another node: what it changes is seen here
/// by an open at once (close-to-open: the open finds another size than
/// the kernel cached and drops the kernel's attributes), and by stat once
/// the attribute and entry timeouts have passed, not before.
#[test]
fn changes_behind_the_mount_show_at_open_and_after_the_timeouts() {
    let _serial = serial();
    const TTL: Duration = Duration::from_secs(3);
    let first = PlfsMount::new(&[]);
    let second = first.second_over_same_backends(&["attr_timeout=3", "entry_timeout=3"]);
    let old = random_bytes(100_000, 41);
    fs::write(first.path("f"), &old).unwrap();
    assert_eq!(fs::metadata(second.path("f")).unwrap().len(), old.len() as u64);

    // Another node appends and closes: an open here sees every byte.
    let more = random_bytes(50_000, 42);
    fs::OpenOptions::new().append(true).open(first.path("f")).unwrap().write_all(&more).unwrap();
    let cached_at = Instant::now();
    let seen = fs::read(second.path("f")).unwrap();
    let mut expected = old.clone();
    expected.extend_from_slice(&more);
    assert!(
        seen.len() == expected.len() && seen == expected,
        "an open after the other node's close reads {} bytes of {}",
        seen.len(),
        expected.len()
    );
    assert_eq!(fs::metadata(second.path("f")).unwrap().len(), expected.len() as u64, "stat after that open");

    // Another node truncates, renames and unlinks; stat here is answered
    // from the cache until the timeouts pass.
    fs::write(second.path("g"), b"gee").unwrap();
    assert_eq!(fs::metadata(second.path("g")).unwrap().len(), 3);
    let looked_at = Instant::now();
    fs::OpenOptions::new().write(true).open(first.path("f")).unwrap().set_len(10).unwrap();
    fs::rename(first.path("g"), first.path("g2")).unwrap();
    let cached_f = fs::metadata(second.path("f")).unwrap().len();
    let cached_g = fs::metadata(second.path("g")).map(|m| m.len()).ok();
    if cached_at.elapsed() < TTL - Duration::from_millis(500)
        && looked_at.elapsed() < TTL - Duration::from_millis(500)
    {
        // Only meaningful while the cache is surely valid; a loaded
        // machine may take longer, and then there is nothing to show.
        assert_eq!(cached_f, expected.len() as u64, "stat within attr_timeout answers from the cache");
        assert_eq!(cached_g, Some(3), "a name within entry_timeout answers from the cache");
    }
    thread_sleep_past(looked_at.max(cached_at), TTL);
    assert_eq!(fs::metadata(second.path("f")).unwrap().len(), 10, "stat after attr_timeout");
    assert!(fs::metadata(second.path("g")).is_err(), "a renamed name after entry_timeout");
    assert_eq!(fs::read(second.path("g2")).unwrap(), b"gee", "the new name");
    fs::remove_file(first.path("g2")).unwrap();
    thread_sleep_past(Instant::now(), TTL);
    assert!(fs::metadata(second.path("g2")).is_err(), "an unlinked name after entry_timeout");
}

/// Sleeps until `timeout` and a margin for the kernel's clock have passed
/// since `since`.
fn thread_sleep_past(since: Instant, timeout: Duration) {
    let until = since + timeout + Duration::from_millis(300);
    if let Some(left) = until.checked_duration_since(Instant::now()) {
        std::thread::sleep(left);
    }
}

const FSX_OPS: u64 = 20_000;

/// fsx's default operations (pread, pwrite, mmap reads and writes, truncate).
#[test]
fn fsx_seed_1_default_ops() {
    let _serial = serial();
    test_tool("fsx"); // before mounting: a missing tool is the clearer failure
    let mount = PlfsMount::new(&[]);
    let artifacts = mount.scratch("fsx-1");
    fs::create_dir(&artifacts).unwrap();
    let elapsed = run_fsx(&mount.mountpoint, "fsx-1.dat", &artifacts, FSX_OPS, 1, None, 15 * MIN);
    println!("fsx -N {FSX_OPS} -S 1 (default ops) on the mount: A-OK in {elapsed:.1?}");
}

/// fsx with close/reopen, fsync, fdatasync, msync invalidate, sendfile,
/// fadvise and copy_file_range on a file up to 1 MiB.
#[test]
fn fsx_seed_2_rich_ops() {
    let _serial = serial();
    test_tool("fsx");
    let mount = PlfsMount::new(&[]);
    let artifacts = mount.scratch("fsx-2");
    fs::create_dir(&artifacts).unwrap();
    let elapsed =
        run_fsx(&mount.mountpoint, "fsx-2.dat", &artifacts, FSX_OPS, 2, Some(FSX_RICH_CONFIG), 15 * MIN);
    println!("fsx -N {FSX_OPS} -S 2 (rich ops) on the mount: A-OK in {elapsed:.1?}");
}

/// fsx's rich operations (mmap, truncate, fsync, close/reopen, …) on a
/// mount with `-o writeback_cache`: the kernel's read-modify-write of
/// partial pages and its own size keep every byte right.
#[test]
fn fsx_rich_ops_with_writeback_cache() {
    let _serial = serial();
    test_tool("fsx");
    let mount = PlfsMount::new(&["writeback_cache"]);
    let artifacts = mount.scratch("fsx-wb");
    fs::create_dir(&artifacts).unwrap();
    let elapsed =
        run_fsx(&mount.mountpoint, "fsx-wb.dat", &artifacts, FSX_OPS, 3, Some(FSX_RICH_CONFIG), 15 * MIN);
    println!("fsx -N {FSX_OPS} -S 3 (rich ops) with writeback_cache: A-OK in {elapsed:.1?}");
}

/// `-o writeback_cache`: several writers' unaligned N-1 writes through
/// write-only opens land in the page cache and reach the daemon merged,
/// so fewer index records than writes; they read back byte for byte
/// through the mount and, after the writers' fsync and close, through
/// another mount of the same backends. O_APPEND still appends.
///
/// Each writer fills its own segment back to front, so the daemon can
/// hardly merge two writes that reach it one by one (the next one ends
/// where the last began): without the writeback cache 140 records were
/// counted for the 160 writes, with it 18 to 20 here.
#[test]
fn writeback_cache_merges_segmented_writes() {
    let _serial = serial();
    let mount = PlfsMount::new(&["writeback_cache"]);
    const RECORD: usize = 47001;
    const WRITERS: usize = 4;
    const PER_WRITER: usize = 40;
    let path = mount.path("wb.dat");
    fs::File::create(&path).unwrap();
    let record = |w: usize, k: usize| random_bytes(RECORD, (w * 1000 + k) as u64);
    std::thread::scope(|scope| {
        for w in 0..WRITERS {
            let path = &path;
            scope.spawn(move || {
                let file = fs::OpenOptions::new().write(true).open(path).unwrap();
                for k in (0..PER_WRITER).rev() {
                    file.write_all_at(&record(w, k), ((w * PER_WRITER + k) * RECORD) as u64).unwrap();
                }
                file.sync_all().unwrap();
            });
        }
    });
    let mut expected = Vec::with_capacity(RECORD * WRITERS * PER_WRITER);
    for slot in 0..WRITERS * PER_WRITER {
        expected.extend_from_slice(&record(slot / PER_WRITER, slot % PER_WRITER));
    }
    assert!(fs::read(&path).unwrap() == expected, "read back through the mount");
    let other = mount.second_over_same_backends(&[]);
    assert!(fs::read(other.path("wb.dat")).unwrap() == expected, "read back through another mount");
    // How far below the write count depends on when the kernel's dirty
    // throttling flushes (FUSE gets a small share of the dirty limit): a
    // loaded 2-core CI machine saw 75 records for an earlier, strided
    // version of this test, so the bound leaves room.
    let records = mount.map_totals("wb.dat")["records"].as_u64().unwrap();
    let writes = (WRITERS * PER_WRITER) as u64;
    assert!(records <= writes / 2, "{records} index records for {writes} write(2)s");

    let log = mount.path("log.txt");
    bash(&format!("printf first >> '{0}'; printf second >> '{0}'", s(&log)), &mount.scratch, MIN);
    assert_eq!(fs::read(&log).unwrap(), b"firstsecond");
}

/// Which set-ID bits a write, truncate, O_TRUNC open and chown leave, in
/// `dir`: the same sequence on a plain directory and on the mount. Each
/// step starts from mode 06777 (or 06767) on a file root owns.
fn set_id_bits_after_each_change(dir: &Path) -> Vec<(&'static str, u32)> {
    let path = dir.join("set-id");
    fs::write(&path, b"x").unwrap();
    let mode = |bits: u32| fs::set_permissions(&path, fs::Permissions::from_mode(bits)).unwrap();
    let bits = || fs::metadata(&path).unwrap().mode() & 0o7777;
    let nobody = |script: &str| {
        run_ok(
            Command::new(system_tool("runuser"))
                .args(["-u", "nobody", "--", "bash", "-c", script])
                .arg(&path),
            MIN,
        )
    };
    let mut seen = Vec::new();
    mode(0o6777);
    nobody(r#"printf more >> "$0""#);
    seen.push(("write by nobody", bits()));
    mode(0o6777);
    fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"root").unwrap();
    seen.push(("write by root", bits()));
    mode(0o6777);
    nobody(r#"truncate -s 1 "$0""#);
    seen.push(("truncate by nobody", bits()));
    mode(0o6777);
    nobody(r#": > "$0""#);
    seen.push(("O_TRUNC open by nobody", bits()));
    mode(0o6777);
    std::os::unix::fs::chown(&path, Some(0), Some(0)).unwrap();
    seen.push(("chown by root", bits()));
    mode(0o6767);
    std::os::unix::fs::chown(&path, Some(0), Some(0)).unwrap();
    seen.push(("chown by root, no group execute", bits()));
    seen
}

/// What a truncating open of a program that is running leaves, in `dir`:
/// the errors of an `O_RDONLY | O_TRUNC` and an `O_WRONLY | O_TRUNC`
/// open, the file's bytes afterwards, and how the program ended when
/// killed. Then, once it has exited, whether such an open truncates.
fn truncating_opens_of_a_running_program(dir: &Path) -> (Vec<Option<i32>>, bool, Option<i32>, u64) {
    let program = fs::read(system_tool("sleep")).unwrap();
    let path = dir.join("sleeper");
    fs::write(&path, &program).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    let mut running = Command::new(&path).arg("60").spawn().unwrap();
    let truncating_open = |access: fs::OpenOptions| {
        let mut options = access;
        options.custom_flags(libc::O_TRUNC);
        options.open(&path).err().map(|error| error.raw_os_error().unwrap_or(0))
    };
    let refused = vec![
        truncating_open(fs::OpenOptions::new().read(true).clone()),
        truncating_open(fs::OpenOptions::new().write(true).clone()),
    ];
    let whole = fs::read(&path).unwrap() == program;
    running.kill().unwrap();
    let ended_by = running.wait().unwrap().signal();
    let mut options = fs::OpenOptions::new();
    options.read(true).custom_flags(libc::O_TRUNC);
    drop(options.open(&path).unwrap());
    (refused, whole, ended_by, fs::metadata(&path).unwrap().len())
}

/// An `O_RDONLY | O_TRUNC` open of a program that is running fails with
/// ETXTBSY and leaves the file whole, as on a local file system. With
/// FUSE_ATOMIC_O_TRUNC the daemon emptied the file on the open before the
/// kernel refused it, and the program died of SIGBUS (pjdfstest's
/// `open::etxtbsy` failed when the program died before the refusal).
#[test]
fn a_truncating_open_of_a_running_program_leaves_it_whole() {
    let _serial = serial();
    let plain = plain_dir("plfs-etxtbsy.");
    let expected = truncating_opens_of_a_running_program(plain.path());
    assert_eq!(
        expected,
        (vec![Some(libc::ETXTBSY), Some(libc::ETXTBSY)], true, Some(libc::SIGKILL), 0),
        "on a plain directory"
    );
    let mount = PlfsMount::new(&[]);
    assert_eq!(truncating_opens_of_a_running_program(&mount.mountpoint), expected, "through the mount");
}

/// `-o writeback_cache` asks the kernel for FUSE_HANDLE_KILLPRIV_V2 (so a
/// cached write no longer costs a getxattr round trip, below), which
/// leaves clearing set-user-ID and set-group-ID bits to the daemon: on a
/// write or truncate by a process without CAP_FSETID and on every chown,
/// set-group-ID only with group execute, exactly as on a plain directory.
/// Before, an O_TRUNC open by another user kept both bits on the mount.
#[test]
fn writeback_cache_clears_set_id_bits_as_a_local_file_system_does() {
    let _serial = serial();
    system_tool("runuser");
    let plain = plain_dir("plfs-set-id.");
    let expected = set_id_bits_after_each_change(plain.path());
    assert_eq!(
        expected,
        [
            ("write by nobody", 0o777),
            ("write by root", 0o6777),
            ("truncate by nobody", 0o777),
            ("O_TRUNC open by nobody", 0o777),
            ("chown by root", 0o777),
            ("chown by root, no group execute", 0o2767),
        ],
        "on a plain directory"
    );
    let mount = PlfsMount::new(&["writeback_cache", "allow_other"]);
    assert_eq!(set_id_bits_after_each_change(&mount.mountpoint), expected, "through the mount");
    drop(mount);
    // The default mount's writes are direct I/O, which the kernel does not
    // check; everything else clears as on the plain directory (an O_TRUNC
    // open is the kernel's truncate, since the daemon does not take
    // O_TRUNC inside the open).
    let mount = PlfsMount::new(&["allow_other"]);
    let mut direct = expected.clone();
    direct[0].1 = 0o6777;
    assert_eq!(set_id_bits_after_each_change(&mount.mountpoint), direct, "through the default mount");
}

/// Every cached write(2) asked the daemon for security.capability (the
/// kernel's file_remove_privs), one synchronous round trip per write held
/// under the inode lock, which serialised a node's writers of a file.
/// With FUSE_HANDLE_KILLPRIV_V2 the kernel asks once per attribute
/// refresh. The daemon logs every such getxattr at trace level, whether
/// the backend answers it or its memory of an absent attribute does.
#[test]
fn writeback_cache_writes_do_not_ask_for_capabilities() {
    let _serial = serial();
    // Attributes kept for the whole test: each refresh may ask once more.
    let mount = PlfsMount::trace_logged(&["writeback_cache", "attr_timeout=600"]);
    const WRITES: usize = 400;
    let path = mount.path("records.dat");
    let file = fs::File::create(&path).unwrap();
    let record = random_bytes(47001, 7);
    for k in 0..WRITES {
        file.write_all_at(&record, (k * record.len()) as u64).unwrap();
    }
    file.sync_all().unwrap();
    drop(file);
    assert_eq!(fs::metadata(&path).unwrap().len(), (WRITES * record.len()) as u64);
    let log = fs::read_to_string(&mount.log).unwrap();
    let asked =
        log.lines().filter(|line| line.contains("getxattr") && line.contains("security.capability")).count();
    assert!(asked >= 1, "the first write asks (no getxattr line in the log; was it written at trace level?)");
    assert!(
        asked <= 4,
        "{asked} getxattr requests for security.capability for {WRITES} writes; log tail:\n{}",
        mount.log_tail(20)
    );
}

/// The whole pjdfstest suite on the mount (allow_other, so its dummy users
/// reach it). Every failing case must be listed, with its reason, in
/// docs/POSIX.md; a new failure fails this test.
#[test]
fn pjdfstest_on_mount() {
    let _serial = serial();
    test_tool("pjdfstest");
    let mount = PlfsMount::new(&["allow_other"]);
    let target = mount.path("pjdfstest");
    fs::create_dir(&target).unwrap();
    let secondary = mount.scratch("secondary-fs");
    fs::create_dir(&secondary).unwrap();
    let results = run_pjdfstest(&target, Some(&secondary), &mount.scratch, 15 * MIN);
    let exceptions = posix_exceptions();

    println!(
        "pjdfstest on the plfs mount: {} passed, {} skipped, {} failed in {:.1?}",
        results.passed.len(),
        results.skipped.len(),
        results.failed.len(),
        results.elapsed
    );
    // The unexcused first: a CI log's excerpt keeps the start of this output.
    let mut unexcused = Vec::new();
    let mut listed = Vec::new();
    for (case, message) in &results.failed {
        match excused(case, &exceptions) {
            Some(reason) => listed.push(format!("  FAILED (docs/POSIX.md: {reason}) {case}")),
            None => {
                println!("  FAILED (not in docs/POSIX.md) {case}: {message}");
                unexcused.push(format!("{case}: {message}"));
            }
        }
    }
    for line in listed {
        println!("{line}");
    }
    let mut skip_reasons: std::collections::BTreeMap<&str, usize> = Default::default();
    for (_, reason) in &results.skipped {
        *skip_reasons.entry(reason.as_str()).or_default() += 1;
    }
    for (reason, count) in skip_reasons {
        println!("  skipped {count}: {reason}");
    }
    for (pattern, _) in &exceptions {
        if !results.failed.iter().any(|(case, _)| pattern_matches(pattern, case)) {
            println!("  note: docs/POSIX.md lists `{pattern}`, which no longer fails; remove it");
        }
    }
    assert!(
        results.passed.len() >= 150,
        "only {} cases passed ({}); is the mount usable at all?",
        results.passed.len(),
        results.summary
    );
    assert!(
        unexcused.is_empty(),
        "{} pjdfstest failure(s) are neither fixed nor listed in docs/POSIX.md:\n{}",
        unexcused.len(),
        unexcused.join("\n")
    );
}

// ---------------------------------------------------------------------------
// Permissions and lifecycle
// ---------------------------------------------------------------------------

/// With allow_other, another user is allowed or denied exactly by the mode
/// bits and ownership, on files and directories.
#[test]
fn non_root_user_permissions() {
    let _serial = serial();
    system_tool("runuser");
    let mount = PlfsMount::new(&["allow_other"]);
    let runuser = system_tool("runuser");
    let as_nobody = |args: &[&str]| {
        run(Command::new(&runuser).args(["-u", "nobody", "--"]).args(args).current_dir("/"), MIN)
    };
    let denied = |args: &[&str], what: &str| {
        let output = as_nobody(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success()
                && (stderr.contains("Permission denied") || stderr.contains("Operation not permitted")),
            "nobody should be refused {what} ({args:?}) but: {}",
            describe(&output)
        );
    };
    let allowed = |args: &[&str], what: &str| {
        let output = as_nobody(args);
        assert!(
            output.status.success(),
            "nobody should be allowed {what} ({args:?}) but: {}",
            describe(&output)
        );
        output
    };

    let secret = mount.path("secret");
    write_file(&secret, b"root only\n", 0o600, None);
    let public = mount.path("public");
    write_file(&public, b"for everyone\n", 0o644, None);
    let root_dir = mount.path("root-dir");
    fs::create_dir(&root_dir).unwrap();
    fs::set_permissions(&root_dir, fs::Permissions::from_mode(0o755)).unwrap();
    let private_dir = mount.path("private-dir");
    fs::create_dir(&private_dir).unwrap();
    fs::set_permissions(&private_dir, fs::Permissions::from_mode(0o700)).unwrap();
    write_file(&private_dir.join("inner"), b"inner\n", 0o644, None);
    let open_dir = mount.path("open-dir");
    fs::create_dir(&open_dir).unwrap();
    fs::set_permissions(&open_dir, fs::Permissions::from_mode(0o777)).unwrap();
    for path in [&secret, &public, &root_dir] {
        assert_eq!(fs::metadata(path).unwrap().uid(), 0, "{} owned by root", path.display());
    }

    denied(&["cat", s(&secret)], "reading a 0600 file owned by root");
    let output = allowed(&["cat", s(&public)], "reading a 0644 file");
    assert_eq!(output.stdout, b"for everyone\n");
    denied(&["sh", "-c", &format!("echo more >> '{}'", s(&public))], "writing a 0644 file owned by root");
    denied(&["touch", &format!("{}/x", s(&root_dir))], "creating in a 0755 directory owned by root");
    denied(&["mkdir", &format!("{}/d", s(&root_dir))], "mkdir in a 0755 directory owned by root");
    denied(&["ls", s(&private_dir)], "listing a 0700 directory owned by root");
    denied(
        &["cat", &format!("{}/inner", s(&private_dir))],
        "reaching through a 0700 directory owned by root",
    );
    denied(&["chmod", "0666", s(&public)], "chmod of root's file");
    denied(&["rm", "-f", s(&public)], "removing root's file from a 0755 directory it does not own");
    assert!(!root_dir.join("x").exists() && public.exists());
    assert_eq!(fs::read(&public).unwrap(), b"for everyone\n");

    // Allowed where the bits allow it, and the new file is nobody's.
    let mine = open_dir.join("mine");
    allowed(&["touch", s(&mine)], "creating in a 0777 directory");
    allowed(
        &["sh", "-c", &format!("echo mine > '{}' && chmod 0600 '{}'", s(&mine), s(&mine))],
        "writing its own file",
    );
    let meta = fs::metadata(&mine).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o7777), (65534, 0o600), "nobody's new file");
    assert_eq!(fs::read(&mine).unwrap(), b"mine\n", "root still reads it");
}

/// `plfs umount` and SIGTERM / SIGINT shut the daemon down cleanly (exit 0,
/// mount gone), and what was written (and fsynced, for the file still open
/// when SIGTERM arrives) is there after a remount.
#[test]
fn clean_shutdown_keeps_data() {
    let _serial = serial();
    let mut mount = PlfsMount::new(&[]);
    let a = random_bytes(5 * 1024 * 1024 + 3, 11);
    fs::write(mount.path("a.bin"), &a).unwrap();
    mount.unmount();
    mount.mount();
    assert_eq!(fs::read(mount.path("a.bin")).unwrap(), a, "after plfs umount and remount");

    let b = random_bytes(2 * 1024 * 1024 + 1, 12);
    let mut open = fs::File::create(mount.path("b.bin")).unwrap();
    open.write_all(&b).unwrap();
    open.sync_all().unwrap();
    mount.stop_with_signal(libc::SIGTERM);
    drop(open);
    mount.mount();
    assert_eq!(fs::read(mount.path("a.bin")).unwrap(), a, "after SIGTERM");
    assert_eq!(fs::read(mount.path("b.bin")).unwrap(), b, "an fsynced file open at SIGTERM");

    fs::write(mount.path("c.bin"), b"after SIGINT").unwrap();
    mount.stop_with_signal(libc::SIGINT);
    mount.mount();
    assert_eq!(fs::read(mount.path("c.bin")).unwrap(), b"after SIGINT");
    let names: Vec<String> = fs::read_dir(&mount.mountpoint)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.len() == 3, "{names:?}");
}

/// A daemon killed with SIGKILL leaves containers that `plfs recover`
/// repairs, and nothing an fsync acknowledged is lost.
#[test]
fn a_crashed_daemon_leaves_recoverable_files() {
    let _serial = serial();
    let mut mount = PlfsMount::new(&[]);
    let synced = random_bytes(3 * 1024 * 1024 + 5, 21);
    let mut open = fs::File::create(mount.path("crash.bin")).unwrap();
    open.write_all(&synced).unwrap();
    open.sync_all().unwrap();
    open.write_all(b"not synced").unwrap();
    mount.crash();
    drop(open);
    let logical = mount.mountpoint.join("crash.bin");
    let logical = logical.to_str().unwrap();
    let report = mount.plfs(&["recover", logical]);
    assert_eq!(report.status.code(), Some(1), "a stale open record is reported: {report:?}");
    let fixed = mount.plfs(&["recover", "--fix", logical]);
    assert!(fixed.status.success(), "{fixed:?}");
    let clean = mount.plfs(&["recover", logical]);
    assert!(clean.status.success(), "nothing left to fix: {clean:?}");
    mount.mount();
    let back = fs::read(mount.path("crash.bin")).unwrap();
    assert!(back.len() >= synced.len(), "{} bytes after recovery", back.len());
    assert_eq!(&back[..synced.len()], &synced[..], "every fsynced byte survives");
}

/// `plfs bench fuse` mounts, streams through both paths, runs the N-1
/// comparison with a phase through the mount, verifies, and unmounts.
#[test]
fn bench_fuse_compares_the_mount_with_the_library() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let output = run(
        Command::new(BIN)
            .args(["bench", "fuse", "--stream-mib", "8", "--writers", "2", "--records", "10"])
            .args(["--read", "--json", "--dir", dir.path().to_str().unwrap()]),
        Duration::from_secs(300),
    );
    assert!(output.status.success(), "{output:?}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["verified"], true, "{report}");
    for figure in ["write_library_mibs", "write_fuse_mibs", "read_library_mibs", "read_fuse_mibs"] {
        assert!(report["streaming"][figure].as_f64().unwrap() > 0.0, "{figure}: {report}");
    }
    let n1 = &report["n1_strided"]["reports"][0];
    assert!(n1["fuse_mibs"].as_f64().unwrap() > 0.0 && n1["read_fuse_mibs"].as_f64().unwrap() > 0.0, "{n1}");
    let left: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "the scratch directory is removed: {left:?}");
    assert!(!fs::read_to_string("/proc/self/mountinfo").unwrap().contains("plfs-bench-fuse."), "unmounted");
}

/// A size-limited tmpfs for one test; unmounted when dropped (the flag:
/// still mounted).
struct Tmpfs(PathBuf, bool);

impl Tmpfs {
    fn mount(path: PathBuf, size: &str) -> Tmpfs {
        fs::create_dir_all(&path).unwrap();
        let mut command = Command::new("mount");
        command.args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"]).arg(&path);
        run_ok(&mut command, Duration::from_secs(30));
        Tmpfs(path, true)
    }

    fn unmount(&mut self) {
        if std::mem::take(&mut self.1) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        self.unmount();
    }
}

/// The mount over backends on two tmpfs file systems (16 and 48 MiB, the
/// second holding two backends), mounted inside the FUSE mount's
/// temporary directory.
struct TmpfsBackedMount {
    mount: PlfsMount,
    file_systems: [Tmpfs; 2],
}

impl Drop for TmpfsBackedMount {
    /// FUSE first, then the file systems under it, and only then (the
    /// mount's own drop) the temporary directory: removed with the tmpfs
    /// still mounted, it failed on their mount points and was left in
    /// /tmp by every passing run. A failing test leaves it all to the
    /// mount's drop, which prints the daemon's log.
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        self.mount.unmount();
        for file_system in &mut self.file_systems {
            file_system.unmount();
        }
    }
}

fn tmpfs_backed_mount() -> TmpfsBackedMount {
    let mut mount = PlfsMount::new(&[]);
    mount.unmount();
    let small = Tmpfs::mount(mount.root.join("fs-small"), "16m");
    let large = Tmpfs::mount(mount.root.join("fs-large"), "48m");
    let backends = [small.0.join("b0"), large.0.join("b1"), large.0.join("b2")];
    let mut text = format!("- mount_point: {}\n  backends:\n", mount.mountpoint.display());
    for backend in &backends {
        fs::create_dir(backend).unwrap();
        text.push_str(&format!("    - location: posix://{}\n", backend.display()));
    }
    fs::write(&mount.config, text).unwrap();
    mount.backends = backends.to_vec();
    mount.mount();
    TmpfsBackedMount { mount, file_systems: [small, large] }
}

/// `df` and `stat -f` on the mount see the sum of its backends' file
/// systems, each once (before, only the root's backend answered: 16 MiB).
#[test]
fn statfs_sums_the_backend_file_systems_once() {
    let _serial = serial();
    let striped = tmpfs_backed_mount();
    let mut command = Command::new("stat");
    command.args(["-f", "-c", "%S %b"]).arg(&striped.mount.mountpoint);
    let output = run_ok(&mut command, Duration::from_secs(30));
    let fields: Vec<u64> = String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .map(|field| field.parse().unwrap())
        .collect();
    assert_eq!(fields[0] * fields[1], 64 << 20, "stat -f: {fields:?}");
    let mut command = Command::new("df");
    command.args(["-B1", "--output=size"]).arg(&striped.mount.mountpoint);
    let output = run_ok(&mut command, Duration::from_secs(30));
    assert!(String::from_utf8_lossy(&output.stdout).contains(&(64u64 << 20).to_string()), "{output:?}");
}

/// `user.plfs.layout` through setfattr/getfattr: validated, kept in
/// canonical text, copied to new subdirectories, settable on an empty file
/// and refused on a file with data.
#[test]
fn layout_xattr_through_setfattr_and_getfattr() {
    let _serial = serial();
    let mount = PlfsMount::new(&[]);
    let setfattr = system_tool("setfattr");
    let getfattr = system_tool("getfattr");
    let get = |path: &Path| {
        let mut command = Command::new(&getfattr);
        command.args(["--only-values", "-n", "user.plfs.layout"]).arg(path);
        String::from_utf8(run_ok(&mut command, Duration::from_secs(30)).stdout).unwrap()
    };
    let set = |path: &Path, value: &str| {
        let mut command = Command::new(&setfattr);
        command.args(["-n", "user.plfs.layout", "-v", value]).arg(path);
        run(&mut command, Duration::from_secs(30))
    };
    let dir = mount.path("d");
    fs::create_dir(&dir).unwrap();
    let output = set(&dir, "-E 1M -c 1 -E -1 -c -1");
    assert!(output.status.success(), "{}", describe(&output));
    assert_eq!(get(&dir), "-E 1M -c 1 -S 1M -E -1 -c -1 -S 1M");
    let refused = set(&dir, "-E 1M -c 0");
    assert!(
        !refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("Invalid argument")
    );
    assert_eq!(get(&dir), "-E 1M -c 1 -S 1M -E -1 -c -1 -S 1M");

    let sub = dir.join("sub");
    fs::create_dir(&sub).unwrap();
    assert_eq!(get(&sub), "-E 1M -c 1 -S 1M -E -1 -c -1 -S 1M");

    let empty = dir.join("empty");
    fs::write(&empty, b"").unwrap();
    assert!(set(&empty, "-c 2 -S 2M").status.success());
    assert_eq!(get(&empty), "-E -1 -c 2 -S 2M");
    let full = dir.join("full");
    fs::write(&full, b"some data").unwrap();
    let refused = set(&full, "-c 2");
    assert!(!refused.status.success(), "{}", describe(&refused));
    assert_eq!(fs::read(&full).unwrap(), b"some data");
}
