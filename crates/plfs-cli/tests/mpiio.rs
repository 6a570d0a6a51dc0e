//! MPI-IO on plfs for an unmodified MPI program: crates/plfs-mpi/tests/c/
//! mpiio_strided.c, built with each MPI's mpicc, runs under that MPI's
//! mpirun with `LD_PRELOAD="libplfs_mpiio.so libplfs_preload.so"`. Four
//! ranks write N-1 strided 47001-byte records (MPI_File_write_at, then a
//! vector file view and MPI_File_write_all), three ranks read every byte
//! back; `plfs map --json` shows one data log per writing process. Open
//! MPI runs with both its io components (ompio, romio321), MPICH with
//! ROMIO. Fails (instead of skipping) when PLFS_REQUIRE_MPI=1 and an MPI
//! is missing. No timing is asserted.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const PLFS: &str = env!("CARGO_BIN_EXE_plfs");
const WRITERS: u64 = 4;
const READERS: u64 = 3;
const RECORDS: u64 = 8;
const RECORD_BYTES: u64 = 47001;
/// A hung collective ends the run instead of hanging `make test`.
const TIMEOUT_SECONDS: u32 = 180;

mod mpi_support;

use mpi_support::{on_path as available, required};

/// target/<profile>: the plfs binary, libplfs.so, libplfs_preload.so, and
/// mpi/<flavor>/libplfs_mpiio.so (crates/plfs-mpi/build.rs puts it there).
fn libraries(flavor: &str) -> (PathBuf, PathBuf) {
    let dir = Path::new(PLFS).parent().unwrap();
    let mpiio = dir.join("mpi").join(flavor).join("libplfs_mpiio.so");
    let preload = dir.join("libplfs_preload.so");
    for library in [&mpiio, &preload, &dir.join("libplfs.so")] {
        assert!(
            library.exists(),
            "{} is missing: run `cargo build --release --workspace` first (`make test` does; libplfs_preload.so comes from crates/plfs-preload)",
            library.display()
        );
    }
    (mpiio, preload)
}

struct Run<'a> {
    flavor: &'a str,
    /// Open MPI's io component (`--mca io`); None for MPICH.
    io: Option<&'a str>,
    program: PathBuf,
    plfsrc: PathBuf,
    preload: String,
    /// PLFS_MPIIO_VERBOSE for the ranks.
    verbose: bool,
    /// Run mpirun (and so the ranks) as this user instead of root.
    user: Option<&'a str>,
}

impl Run<'_> {
    fn mpirun(&self, ranks: u64, args: &[&str]) -> Output {
        let mut command = match self.user {
            Some(user) => {
                let mut command = Command::new("runuser");
                command.args(["-u", user, "--", "timeout"]);
                command
            }
            None => Command::new("timeout"),
        };
        command.args(["--kill-after=10", &TIMEOUT_SECONDS.to_string(), &format!("mpirun.{}", self.flavor)]);
        let environment = [
            ("LD_PRELOAD", self.preload.as_str()),
            ("PLFSRC", self.plfsrc.to_str().unwrap()),
            ("PLFS_MPIIO_VERBOSE", if self.verbose { "1" } else { "0" }),
        ];
        mpi_support::launch(&mut command, self.flavor, self.io, &environment, ranks, &self.program);
        command.args(args).env("PLFSRC", &self.plfsrc);
        command.output().unwrap()
    }

    fn expect(&self, ranks: u64, args: &[&str], success: &str) -> (String, String) {
        let output = self.mpirun(ranks, args);
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let name = format!("{} {:?} {args:?}", self.flavor, self.io);
        assert!(output.status.success(), "{name}: {}\nstdout:\n{stdout}\nstderr:\n{stderr}", output.status);
        assert!(
            stdout.contains(success),
            "{name}: expected {success:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
        (stdout, stderr)
    }

    /// A run that must fail (exit status not 0); its stdout and stderr.
    /// Runs a job that must fail. MPICH's launcher can drop every line a
    /// job wrote to stderr when one rank aborts (its proxies are killed
    /// before they forward what they hold: seen on a loaded machine, with
    /// even MPICH's own "MPI_Abort" line gone), so a run with an empty
    /// stderr is tried again, a few times; any run that says something is
    /// judged as it is.
    fn expect_failure(&self, ranks: u64, args: &[&str]) -> (String, String) {
        let name = format!("{} {:?} {args:?}", self.flavor, self.io);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let output = self.mpirun(ranks, args);
            let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
            let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
            assert!(!output.status.success(), "{name} succeeded\nstdout:\n{stdout}\nstderr:\n{stderr}");
            if !stderr.trim().is_empty() || attempt == 3 {
                return (stdout, stderr);
            }
            eprintln!("{name}: the launcher forwarded no stderr; running it again");
        }
    }

    /// The global index written at close is byte for byte the one
    /// `plfs flatten` then writes from the index logs.
    fn assert_flattened_as_from_storage(&self, file: &Path, dir: &Path) {
        let name = file.file_name().unwrap();
        let found: Vec<PathBuf> = (0..2)
            .map(|backend| dir.join(format!("b{backend}")).join(name).join("global.index"))
            .filter(|path| path.exists())
            .collect();
        assert_eq!(found.len(), 1, "one global index for {}: {found:?}", file.display());
        let at_close = std::fs::read(&found[0]).unwrap();
        let output =
            Command::new(PLFS).arg("flatten").arg(file).env("PLFSRC", &self.plfsrc).output().unwrap();
        assert!(output.status.success(), "plfs flatten: {}", String::from_utf8_lossy(&output.stderr));
        assert_eq!(
            at_close,
            std::fs::read(&found[0]).unwrap(),
            "{}: the index flatten writes differs",
            file.display()
        );
    }

    fn map(&self, file: &Path) -> serde_json::Value {
        let output = Command::new(PLFS)
            .args(["map", "--json"])
            .arg(file)
            .env("PLFSRC", &self.plfsrc)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "plfs map {}: {}",
            file.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).unwrap()
    }
}

/// "rank R pid P" lines: pid by rank.
fn pids_of(stdout: &str) -> BTreeMap<u64, u64> {
    stdout
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            match (words.next(), words.next(), words.next(), words.next()) {
                (Some("rank"), Some(rank), Some("pid"), Some(pid)) => {
                    Some((rank.parse().ok()?, pid.parse().ok()?))
                }
                _ => None,
            }
        })
        .collect()
}

/// The records of the strided pattern each writer id's extents cover, and
/// the data logs each writer id wrote.
fn slots_and_logs(map: &serde_json::Value) -> BTreeMap<u64, (BTreeSet<u64>, BTreeSet<String>)> {
    let mut writers: BTreeMap<u64, (BTreeSet<u64>, BTreeSet<String>)> = BTreeMap::new();
    for entry in map["entries"].as_array().unwrap() {
        let (logical, length) = (entry["logical"].as_u64().unwrap(), entry["length"].as_u64().unwrap());
        let writer = writers.entry(entry["writer"].as_u64().unwrap()).or_default();
        writer.1.insert(entry["log"].as_str().unwrap().to_owned());
        if length > 0 {
            writer.0.extend(logical / RECORD_BYTES..=(logical + length - 1) / RECORD_BYTES);
        }
    }
    writers
}

/// Whether `mpicc.<flavor>` and `mpirun.<flavor>` are there (a missing one
/// fails the test under PLFS_REQUIRE_MPI=1).
fn have_mpi(flavor: &str) -> bool {
    let (mpicc, mpirun) = (format!("mpicc.{flavor}"), format!("mpirun.{flavor}"));
    if !available(&mpicc) || !available(&mpirun) {
        assert!(
            !required(),
            "PLFS_REQUIRE_MPI=1 but {mpicc} or {mpirun} is missing (scripts/install-deps.sh)"
        );
        eprintln!("skipping {flavor}: {mpicc} or {mpirun} is missing");
        return false;
    }
    true
}

/// crates/plfs-mpi/tests/c/<name>.c built with `mpicc.<flavor>` into dir.
fn compile_program(flavor: &str, name: &str, dir: &Path) -> PathBuf {
    let mpicc = format!("mpicc.{flavor}");
    let program = dir.join(format!("{name}_{flavor}"));
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../plfs-mpi/tests/c/{name}.c"));
    let compiled = Command::new(&mpicc)
        .args(["-O2", "-Wall", "-Wextra", "-Werror"])
        .arg(&source)
        .arg("-o")
        .arg(&program)
        .output()
        .unwrap();
    assert!(compiled.status.success(), "{mpicc}: {}", String::from_utf8_lossy(&compiled.stderr));
    program
}

/// A shared_file mount `dir/mnt` over two POSIX backends in dir: (mount
/// point, plfsrc).
fn plfs_in(dir: &Path) -> (PathBuf, PathBuf) {
    let mount = dir.join("mnt");
    let mut config = format!("- mount_point: {}\n  workload: shared_file\n  backends:\n", mount.display());
    for backend in 0..2 {
        let path = dir.join(format!("b{backend}"));
        std::fs::create_dir(&path).unwrap();
        config.push_str(&format!("    - location: posix://{}\n", path.display()));
    }
    let plfsrc = dir.join("plfsrc");
    std::fs::write(&plfsrc, config).unwrap();
    // A real (empty) directory at the mount point, as a FUSE mount point
    // would be: ROMIO and ompio statfs the file or its directory to choose
    // their file-system driver.
    std::fs::create_dir(&mount).unwrap();
    (mount, plfsrc)
}

/// LD_PRELOAD for the ranks. libplfs_mpiio.so first: its MPI_File_* must
/// shadow libmpi's, and it has nothing the interposer would shadow (see
/// the README).
fn preload_of(flavor: &str) -> String {
    let (mpiio, preload) = libraries(flavor);
    format!("{} {}", mpiio.display(), preload.display())
}

fn mpiio(flavor: &str, io: Option<&str>) {
    if !have_mpi(flavor) {
        return;
    }
    let dir = tempfile::Builder::new().prefix("plfs-mpiio-test.").tempdir().unwrap();
    let program = compile_program(flavor, "mpiio_strided", dir.path());
    let (mount, plfsrc) = plfs_in(dir.path());
    let run = Run { flavor, io, program, plfsrc, preload: preload_of(flavor), verbose: true, user: None };
    let (records, size) = (RECORDS.to_string(), RECORD_BYTES.to_string());
    let total = WRITERS * RECORDS * RECORD_BYTES;
    let wrote = |how: &str| format!("mpiio_strided: OK: {WRITERS} writers wrote {total} bytes ({how})");
    let read_ok = format!("mpiio_strided: OK: {READERS} readers verified {total} bytes");
    let read_args = |file: &str, hint: Option<&'static str>| -> Vec<String> {
        let mut args =
            vec!["read".to_owned(), file.to_owned(), records.clone(), size.clone(), WRITERS.to_string()];
        args.extend(hint.map(str::to_owned));
        args
    };

    // 1. MPI_File_write_at: every rank writes its own records, into its
    // own data log, as writer id = its rank (the wrapper names it to the
    // interposer, as PLFS 2.5's driver passed the rank).
    let file = mount.join("strided_at");
    let file_arg = format!("plfs:{}", file.display());
    let (stdout, stderr) = run.expect(WRITERS, &["write-at", &file_arg, &records, &size], &wrote("write_at"));
    assert!(stderr.contains("rank 0 created"), "the wrapper did not intercept the open:\n{stderr}");
    let pids = pids_of(&stdout);
    assert_eq!(pids.len() as u64, WRITERS, "{stdout}");
    let writers = slots_and_logs(&run.map(&file));
    assert_eq!(
        writers.keys().copied().collect::<BTreeSet<_>>(),
        (0..WRITERS).collect::<BTreeSet<_>>(),
        "writer ids in `plfs map` are the writing ranks"
    );
    for rank in 0..WRITERS {
        let (slots, logs) = &writers[&rank];
        // One per backend the layout sent its records to: the mount's
        // default spreads the file's later megabytes over both backends.
        assert!((1..=2).contains(&logs.len()), "rank {rank} wrote one data log per backend: {logs:?}");
        let expected: BTreeSet<u64> = (0..RECORDS).map(|record| record * WRITERS + rank).collect();
        assert_eq!(slots, &expected, "rank {rank} wrote exactly its own records");
    }
    // A restart on as many ranks with plfs_uniform_restart: each rank reads
    // only its own index log.
    let (_, stderr) = run.expect(
        WRITERS,
        &["read-own", &file_arg, &records, &size, "hint=plfs_uniform_restart=1"],
        &format!("mpiio_strided: OK: {WRITERS} ranks read their own records"),
    );
    let opened = format!("collective open of {} (uniform_restart): Success", file.display());
    assert_eq!(stderr.matches(&opened).count() as u64, WRITERS, "{opened:?} on every rank:\n{stderr}");
    // Read back on another number of ranks: libplfs's default (auto), the
    // parallel index read (any strategy hint), then broadcast
    // (plfs_disable_paropen=1).
    for (hint, strategy) in [
        (None, "auto"),
        (Some("hint=plfs_disable_paropen=0"), "parallel"),
        (Some("hint=plfs_disable_paropen=1"), "broadcast"),
    ] {
        let args = read_args(&file_arg, hint);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (_, stderr) = run.expect(READERS, &args, &read_ok);
        let opened = format!("collective open of {} ({strategy}): Success", file.display());
        assert_eq!(stderr.matches(&opened).count() as u64, READERS, "{opened:?} on every reader:\n{stderr}");
    }
    run.expect(1, &["delete", &file_arg], "mpiio_strided: OK: deleted");
    let stat = Command::new(PLFS).arg("stat").arg(&file).env("PLFSRC", &run.plfsrc).output().unwrap();
    assert!(!stat.status.success(), "MPI_File_delete left {}", file.display());

    // 2. A vector file view and MPI_File_write_all (collective buffering
    // may move the data to aggregator ranks: each writing process still
    // has exactly one data log), flattened at close.
    let file = mount.join("strided_view");
    let file_arg = file.display().to_string();
    let (stdout, stderr) = run.expect(
        WRITERS,
        &["write-view", &file_arg, &records, &size, "hint=plfs_flatten_close=1"],
        &wrote("file view, write_all"),
    );
    // The ranks' in-memory records were gathered to rank 0, and the index
    // it wrote is the one `plfs flatten` writes from the index logs.
    let flattened = format!("flattening the index of {} (gathered from the ranks): Success", file.display());
    assert!(stderr.contains(&flattened), "no flatten from gathered records at close:\n{stderr}");
    run.assert_flattened_as_from_storage(&file, dir.path());
    assert_eq!(pids_of(&stdout).len() as u64, WRITERS, "{stdout}");
    let writers = slots_and_logs(&run.map(&file));
    assert!(!writers.is_empty());
    let mut covered = BTreeSet::new();
    for (writer, (slots, logs)) in &writers {
        assert!(*writer < WRITERS, "writer {writer} is not a writing rank");
        assert!((1..=2).contains(&logs.len()), "writer {writer} wrote one data log per backend: {logs:?}");
        covered.extend(slots);
    }
    assert_eq!(covered, (0..WRITERS * RECORDS).collect(), "every record was written");
    let args = read_args(&file_arg, None);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run.expect(READERS, &args, &read_ok);

    // 3. The same with index_buffer_mbs: 0, so no rank can keep its
    // records: rank 0 reads the index logs at close instead (today's path),
    // and writes the same index.
    let mut config = std::fs::read_to_string(&run.plfsrc).unwrap();
    config.insert_str(0, "- global_params:\n  index_buffer_mbs: 0\n");
    let plfsrc = dir.path().join("plfsrc.no-index-buffer");
    std::fs::write(&plfsrc, config).unwrap();
    let run = Run { plfsrc, ..run };
    let file = mount.join("strided_view_unbuffered");
    let file_arg = file.display().to_string();
    let (_, stderr) = run.expect(
        WRITERS,
        &["write-view", &file_arg, &records, &size, "hint=plfs_flatten_close=1"],
        &wrote("file view, write_all"),
    );
    let flattened = format!("flattening the index of {} (read from the index logs): Success", file.display());
    assert!(stderr.contains(&flattened), "no flatten from the index logs at close:\n{stderr}");
    run.assert_flattened_as_from_storage(&file, dir.path());
    let args = read_args(&file_arg, None);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run.expect(READERS, &args, &read_ok);
}

#[test]
fn mpiio_under_open_mpi_ompio() {
    mpiio("openmpi", Some("ompio"));
}

#[test]
fn mpiio_under_open_mpi_romio() {
    mpiio("openmpi", Some("romio321"));
}

#[test]
fn mpiio_under_mpich() {
    mpiio("mpich", None);
}

/// Failed opens and deletes of plfs files report through the error handler
/// on MPI_FILE_NULL, as the MPI standard gives files: crates/plfs-mpi/tests/
/// c/mpiio_errors.c checks the error class every rank gets. Under Open MPI
/// (parameter checking on, its default) the wrapper used to call
/// MPI_File_call_errhandler(MPI_FILE_NULL, ...), which Open MPI refuses
/// with a fatal MPI_ERR_ARG on MPI_COMM_WORLD: every miss killed the job.
fn mpiio_errors(flavor: &str, io: Option<&str>) {
    if !have_mpi(flavor) {
        return;
    }
    let dir = tempfile::Builder::new().prefix("plfs-mpiio-errors.").tempdir().unwrap();
    // nobody runs some of the ranks: it must reach the program, the
    // plfsrc and the backends (tempdir makes 0700 directories).
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let program = compile_program(flavor, "mpiio_errors", dir.path());
    let (mount, plfsrc) = plfs_in(dir.path());
    let mut run =
        Run { flavor, io, program, plfsrc, preload: preload_of(flavor), verbose: false, user: None };
    let missing = mount.join("missing").display().to_string();
    let ranks = 2;
    let ok = |mode: &str| format!("mpiio_errors: OK: {mode} on {ranks} ranks");
    // An expected miss prints nothing of plfs's own.
    let quiet = |stderr: &str| {
        assert!(!stderr.contains("plfs_mpiio"), "{flavor} {io:?}: an expected miss printed:\n{stderr}");
    };

    let (_, stderr) = run.expect(ranks, &["open-rdonly", &missing, "no_such_file"], &ok("open-rdonly"));
    quiet(&stderr);
    let (_, stderr) = run.expect(ranks, &["delete", &missing, "no_such_file"], &ok("delete"));
    quiet(&stderr);
    // The plfs: prefix takes the same way.
    let prefixed = format!("plfs:{missing}");
    run.expect(ranks, &["open-rdonly", &prefixed, "no_such_file"], &ok("open-rdonly"));
    // A handler of the program's own is called, once, with the class.
    let (_, stderr) = run.expect(ranks, &["user", &missing, "no_such_file"], &ok("user"));
    quiet(&stderr);

    let existing = mount.join("existing").display().to_string();
    run.expect(ranks, &["create", &existing, "644"], &ok("create"));
    let (_, stderr) = run.expect(ranks, &["open-excl", &existing, "file_exists"], &ok("open-excl"));
    quiet(&stderr);

    // Hints that differ between ranks: every rank gets MPI_ERR_INFO_VALUE,
    // and rank 0 names the hint with its range.
    let (_, stderr) = run.expect(ranks, &["hints-differ", &existing, "info_value"], &ok("hints-differ"));
    assert!(
        stderr.contains("hint plfs_flatten_close differs between ranks (from 0 to 1)"),
        "{flavor} {io:?}: no word of which hint differs:\n{stderr}"
    );

    // Permission denied: a 0600 file of root's, opened by nobody.
    let secret = mount.join("secret").display().to_string();
    run.expect(ranks, &["create", &secret, "600"], &ok("create"));
    run.user = Some("nobody");
    let (_, stderr) = run.expect(ranks, &["open-rdonly", &secret, "access"], &ok("open-rdonly"));
    quiet(&stderr);
    let (_, stderr) = run.expect(ranks, &["open-create", &secret, "access"], &ok("open-create"));
    quiet(&stderr);
    run.user = None;

    // PLFS_MPIIO_VERBOSE=1 does say what missed.
    run.verbose = true;
    let (_, stderr) = run.expect(ranks, &["open-rdonly", &missing, "no_such_file"], &ok("open-rdonly"));
    assert!(stderr.contains(&format!("collective open of {missing}")), "verbose said nothing:\n{stderr}");
    run.verbose = false;

    // MPI_ERRORS_ARE_FATAL on MPI_FILE_NULL: the job ends, not the open.
    let (stdout, stderr) = run.expect_failure(ranks, &["fatal", &missing]);
    assert!(!stdout.contains("survived"), "{flavor} {io:?}: the open returned:\n{stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!("MPI_File_open {missing}"))
            && stderr.contains("error handler of MPI_FILE_NULL is fatal"),
        "{flavor} {io:?}: no word of why the job ended:\n{stderr}"
    );
}

#[test]
fn mpiio_errors_under_open_mpi_ompio() {
    mpiio_errors("openmpi", Some("ompio"));
}

#[test]
fn mpiio_errors_under_open_mpi_romio() {
    mpiio_errors("openmpi", Some("romio321"));
}

#[test]
fn mpiio_errors_under_mpich() {
    mpiio_errors("mpich", None);
}

/// The collective rounds the plfs layer adds to an MPI-IO read: the MPI
/// calls every rank of the communicator must make (crates/plfs-mpi/tests/
/// c/mpiio_rounds.c counts them by defining the collectives itself, in
/// front of the wrapper and of the communicator table it hands libplfs).
/// With more ranks than free cores each round is a wait until every rank
/// has been scheduled, and these rounds, not the records, made MPI-IO
/// reads slow. 4 ranks write 8 records each (a creating open: the hint
/// check and rank 0's word that it created the container), then open
/// read-only with each strategy, read and close. Pinned per strategy and
/// rank: the hint check (one MPI_Allreduce), then the strategy's
/// exchange, one round per broadcast, gather or allgather whose messages
/// fit a 4 KiB head; the parallel read also agrees on groups (host names)
/// and splits twice, and its group leaders (ranks 0 and 2) swap their
/// parts. No communicator is duplicated unless a write open flattens on
/// close, and reads and the close of a read-only open take no round.
/// Without a strategy hint the open is libplfs's auto, which for these 4
/// index logs on 4 ranks is a broadcast: 2 rounds (3 past 4 KiB), where
/// it was the parallel read's 8 / 7.
/// Before: 14 / 12 (parallel), 4 (broadcast), 2 (naive, uniform restart)
/// and 3 for the creating open; with the large index 14 / 12 and 4.
fn read_only_rounds(flavor: &str, io: Option<&str>) {
    if !have_mpi(flavor) {
        return;
    }
    let dir = tempfile::Builder::new().prefix("plfs-mpiio-rounds.").tempdir().unwrap();
    let program = compile_program(flavor, "mpiio_rounds", dir.path());
    let (mount, plfsrc) = plfs_in(dir.path());
    let run = Run { flavor, io, program, plfsrc, preload: preload_of(flavor), verbose: false, user: None };
    struct Case {
        strategy: &'static str,
        hints: &'static [&'static str],
        records: &'static str,
        size: &'static str,
        /// Rank r reads the records of rank (r + shift) % 4.
        shift: &'static str,
        /// Of the read-only open, ranks 0 to 3.
        rounds: [u64; 4],
        /// `rounds` are upper bounds rather than exact counts.
        at_most: bool,
    }
    let small = |strategy, hints, shift, rounds| Case {
        strategy,
        hints,
        records: "8",
        size: "4700",
        shift,
        rounds,
        at_most: false,
    };
    let cases = [
        // No strategy hint: libplfs's default, auto, which broadcasts a
        // file of 4 index logs to 4 ranks (what parallel took before).
        small("auto", &[], "1", [2; 4]),
        // Any strategy hint, even a 0, is ad_plfs's precedence: parallel.
        small("parallel", &["plfs_disable_paropen=0"], "1", [8, 7, 8, 7]),
        small("broadcast", &["plfs_disable_paropen=1"], "1", [2; 4]),
        small("naive", &["plfs_disable_paropen=1", "plfs_disable_broadcast=1"], "1", [1; 4]),
        small("uniform_restart", &["plfs_uniform_restart=1"], "0", [1; 4]),
        // 2000 records, the odd ranks' not a pattern: the parts and the
        // merged index outgrow the first message and take a second round
        // (and the bytes still arrive whole: every record is checked).
        // Here the counts are bounds, not exact: which exchanges outgrow
        // their first message varies between runs (8 to 11 rounds seen), as
        // the parts' sizes do; the old code took 14 / 12, and the small
        // cases above pin every round exactly.
        Case {
            records: "2000",
            size: "16",
            at_most: true,
            ..small("parallel_large", &["plfs_disable_paropen=0"], "1", [11, 10, 11, 10])
        },
        Case { records: "2000", size: "16", ..small("auto_large", &[], "1", [3; 4]) },
        Case {
            records: "2000",
            size: "16",
            ..small("broadcast_large", &["plfs_disable_paropen=1"], "1", [3; 4])
        },
    ];
    for Case { strategy, hints, records, size, shift, rounds, at_most } in cases {
        let file = mount.join(strategy).display().to_string();
        let mut args = vec![file.as_str(), records, size, shift];
        args.extend(hints);
        let (stdout, stderr) = run.expect(4, &args, "mpiio_rounds: OK");
        for (rank, rounds) in rounds.iter().enumerate() {
            let prefix = format!("mpiio_rounds: rank {rank}: ");
            let line = stdout.lines().find(|line| line.starts_with(&prefix)).unwrap_or_else(|| {
                panic!("{flavor} {io:?} {strategy}: no line for rank {rank}\n{stdout}\n{stderr}")
            });
            let expected = format!("{prefix}write open 2 close 0; read open {rounds} (");
            let lowest = if at_most { 1 } else { *rounds };
            let within = (lowest..=*rounds).any(|rounds| {
                line.starts_with(&format!("{prefix}write open 2 close 0; read open {rounds} ("))
            });
            assert!(
                within && line.contains(") read 0 close 0;"),
                "{flavor} {io:?} {strategy}: expected {expected:?} (at most: {at_most}), then no round in the reads and close:\n{line}"
            );
        }
    }
}

#[test]
fn read_only_rounds_under_open_mpi_ompio() {
    read_only_rounds("openmpi", Some("ompio"));
}

#[test]
fn read_only_rounds_under_mpich() {
    read_only_rounds("mpich", None);
}

/// The PLFS 2.5 fixtures (crates/plfs-core/testdata/plfs25), all six on
/// the mount's two backends, read in place by an unmodified MPI program
/// (crates/plfs-mpi/tests/c/mpiio_read_expected.c): 3 ranks read 100-byte
/// pieces round robin with MPI_File_read_at and compare them with the
/// library's bytes (`plfs cp`, which plfs-core checks against what the 2.5
/// writers wrote); a write open fails on every rank with MPI_ERR_ACCESS
/// (mpiio_errors.c) and changes nothing.
fn plfs25_containers(flavor: &str, io: Option<&str>) {
    if !have_mpi(flavor) {
        return;
    }
    let dir = tempfile::Builder::new().prefix("plfs-mpiio-25.").tempdir().unwrap();
    let reader = compile_program(flavor, "mpiio_read_expected", dir.path());
    let errors = compile_program(flavor, "mpiio_errors", dir.path());
    let (mount, plfsrc) = plfs_in(dir.path());
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plfs-core/testdata/plfs25");
    let scenarios = ["strided", "overlap", "truncate", "metalink", "flattened", "open"];
    // 2.5 put each container on the backend its name hashed to, and made
    // the access file (whose mode is the file's) 0600; git keeps 0644.
    let copy = format!(
        "set -e; for s in {}; do for b in 0 1; do \
         if [ -d {f}/$s/b$b ]; then cp -a {f}/$s/b$b/. b$b/; fi; done; done; \
         find b0 b1 -name .plfsaccess113918400 -exec chmod 600 {{}} +",
        scenarios.join(" "),
        f = fixtures.display()
    );
    let copied = Command::new("bash").arg("-c").arg(copy).current_dir(dir.path()).status().unwrap();
    assert!(copied.success());
    let mut run = Run {
        flavor,
        io,
        program: reader.clone(),
        plfsrc,
        preload: preload_of(flavor),
        verbose: false,
        user: None,
    };
    let ranks = 3;
    for scenario in scenarios {
        let file = mount.join(format!("{scenario}.ckpt"));
        let expected = dir.path().join(format!("{scenario}.expected"));
        let output = Command::new(PLFS)
            .arg("cp")
            .arg(&file)
            .arg(&expected)
            .env("PLFSRC", &run.plfsrc)
            .output()
            .unwrap();
        assert!(output.status.success(), "plfs cp {scenario}: {}", String::from_utf8_lossy(&output.stderr));
        let bytes = std::fs::read(&expected).unwrap();
        assert!(!bytes.is_empty(), "{scenario}");
        let file_text = file.display().to_string();
        run.program = reader.clone();
        run.expect(
            ranks,
            &[&file_text, expected.to_str().unwrap(), "100"],
            &format!("mpiio_read_expected: OK: {ranks} ranks read {} bytes", bytes.len()),
        );
        run.program = errors.clone();
        run.expect(ranks, &["open-create", &file_text, "access"], "mpiio_errors: OK: open-create");
        let again = dir.path().join(format!("{scenario}.again"));
        let output =
            Command::new(PLFS).arg("cp").arg(&file).arg(&again).env("PLFSRC", &run.plfsrc).output().unwrap();
        assert!(output.status.success() && std::fs::read(&again).unwrap() == bytes, "{scenario}: changed");
    }
}

#[test]
fn plfs25_containers_under_open_mpi_ompio() {
    plfs25_containers("openmpi", Some("ompio"));
}

#[test]
fn plfs25_containers_under_open_mpi_romio() {
    plfs25_containers("openmpi", Some("romio321"));
}

#[test]
fn plfs25_containers_under_mpich() {
    plfs25_containers("mpich", None);
}
