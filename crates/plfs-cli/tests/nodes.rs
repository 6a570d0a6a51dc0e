//! Many nodes, real MPI: 4 simulated nodes (scripts/plfs-nodes: each its
//! own network, UTS and mount namespace, hostname plfsnodeK) × 2 ranks,
//! Open MPI launching into them over TCP through the script's launch agent.
//! N-1 strided files are written and read back byte for byte through the
//! library (`plfs bench open`, every collective open strategy), the preload,
//! MPI-IO (the PMPI wrapper) and FUSE (one daemon per node, same plfsrc);
//! a reader node follows writer nodes that write and sync; a node is killed
//! mid-write and `plfs recover` on it makes the synced bytes whole. Every
//! file must show the hostdirs and log names of every writing node.
//! Skips (with the reason) without root, iproute2, util-linux or Open MPI;
//! fails instead under PLFS_REQUIRE_MPI=1 (`make test`). No timing is
//! asserted.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

mod fuse_support;
mod mpi_support;
mod nodes_support;

use fuse_support::{describe, run};
use nodes_support::{MPI_TIMEOUT_SECONDS, Nodes, PLFS, available, compile};

const NODES: usize = 4;
const RANKS_PER_NODE: usize = 2;
const RANKS: usize = NODES * RANKS_PER_NODE;
/// Readers of a read-back: not a multiple of the ranks per node, so most
/// read records that another node wrote.
const READERS: usize = 6;
const RECORDS: u64 = 8;
const RECORD_BYTES: u64 = 47001;
/// Beyond mpirun's own timeout: only a wedged launcher hits this.
const RUN_TIMEOUT: Duration = Duration::from_secs(MPI_TIMEOUT_SECONDS + 30);

/// What record `record` of writer `writer` holds at `position` (the C
/// programs' byte_of).
fn byte_of(writer: u64, record: u64, position: u64) -> u8 {
    ((writer * 31 + record * 7 + position * 13) % 251 + 1) as u8
}

/// The bytes of slot `slot` of an N-1 strided file of `writers` writers.
fn slot_bytes(slot: u64, writers: u64) -> Vec<u8> {
    (0..RECORD_BYTES).map(|i| byte_of(slot % writers, slot / writers, i)).collect()
}

fn program(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(name)
}

/// target/<profile>/<name>, which `cargo build --workspace` makes.
fn library(relative: &str) -> String {
    let path = Path::new(PLFS).parent().unwrap().join(relative);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --release --workspace` first (`make test` does)",
        path.display()
    );
    path.display().to_string()
}

/// A shared_file plfsrc over four backends in the nodes' scratch
/// directory, and its mount point (a plain directory until a node mounts
/// it: the preload and MPI-IO need only the name). No layout: these tests
/// check that each node writes into the one hostdir its name picks, which
/// a striped file's writers do on every backend (tests/layouts.rs).
fn plfsrc(nodes: &Nodes) -> (PathBuf, PathBuf) {
    let mount = nodes.path("mnt");
    std::fs::create_dir(&mount).unwrap();
    let mut text = format!(
        "- mount_point: {}\n  workload: shared_file\n  default_layout: none\n  backends:\n",
        mount.display()
    );
    for backend in 0..4 {
        let path = nodes.path(&format!("b{backend}"));
        std::fs::create_dir(&path).unwrap();
        text.push_str(&format!("    - location: posix://{}\n", path.display()));
    }
    let plfsrc = nodes.path("plfsrc");
    std::fs::write(&plfsrc, text).unwrap();
    (plfsrc, mount)
}

/// Runs `command` to success and requires `success` on its stdout.
fn expect(command: &mut Command, success: &str) -> String {
    let description = format!("{command:?}");
    let output = run(command, RUN_TIMEOUT);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{description}: {}", describe(&output));
    assert!(stdout.contains(success), "{description}: expected {success:?}: {}", describe(&output));
    stdout
}

fn plfs(plfsrc: &Path) -> Command {
    let mut command = Command::new(PLFS);
    command.arg("--config").arg(plfsrc).env_remove("PLFSRC");
    command
}

/// The file, copied out through the library.
fn contents(plfsrc: &Path, file: &Path, scratch: &Path) -> Vec<u8> {
    let out = scratch.join("copy");
    let _ = std::fs::remove_file(&out);
    run_ok(plfs(plfsrc).arg("cp").arg(file).arg(&out));
    std::fs::read(&out).unwrap()
}

fn run_ok(command: &mut Command) -> String {
    let description = format!("{command:?}");
    let output = run(command, RUN_TIMEOUT);
    assert!(output.status.success(), "{description}: {}", describe(&output));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Requires `file` to hold exactly the N-1 strided records of `writers`
/// writers, `RECORDS` each.
fn check_strided(plfsrc: &Path, file: &Path, writers: u64, scratch: &Path) {
    let bytes = contents(plfsrc, file, scratch);
    assert_eq!(bytes.len() as u64, writers * RECORDS * RECORD_BYTES, "size of {}", file.display());
    for (slot, record) in bytes.chunks(RECORD_BYTES as usize).enumerate() {
        assert!(record == slot_bytes(slot as u64, writers), "{}: record slot {slot} differs", file.display());
    }
}

/// The host hash that ends the log names node `node` writes (from its
/// hostname, plfsnodeK), in hex.
fn host_hash(node: usize) -> String {
    format!("{:08x}", plfs::placement::name_hash(&format!("plfsnode{node}")))
}

/// The (hostdir, host hash) of every log of `file`, from `plfs map --json`
/// (log names end in the writer's host hash).
fn hostdirs(plfsrc: &Path, file: &Path) -> BTreeSet<(String, String)> {
    let map: serde_json::Value =
        serde_json::from_str(&run_ok(plfs(plfsrc).args(["map", "--json"]).arg(file))).unwrap();
    map["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| {
            let log = Path::new(entry["log"].as_str().unwrap());
            let hostdir = log.parent().unwrap().file_name().unwrap().to_string_lossy().into_owned();
            let name = log.file_name().unwrap().to_string_lossy().into_owned();
            (hostdir, name.rsplit('.').next().unwrap().to_owned())
        })
        .collect()
}

/// Requires the logs of `file` to come from exactly the nodes `writers`,
/// each writing into the hostdir its hostname picks: the point of running
/// on several nodes.
fn check_hosts(plfsrc: &Path, file: &Path, writers: std::ops::Range<usize>) {
    let found = hostdirs(plfsrc, file);
    let hosts: BTreeSet<String> = found.iter().map(|(_, host)| host.clone()).collect();
    let expected: BTreeSet<String> = writers.map(host_hash).collect();
    assert_eq!(hosts, expected, "{}: the host hashes of its logs", file.display());
    let dirs: BTreeSet<&String> = found.iter().map(|(dir, _)| dir).collect();
    assert!(dirs.len() > 1, "{}: every node wrote into one hostdir: {found:?}", file.display());
    for host in &hosts {
        let dirs: BTreeSet<&String> = found.iter().filter(|(_, h)| h == host).map(|(dir, _)| dir).collect();
        assert_eq!(dirs.len(), 1, "{}: host {host} wrote into several hostdirs: {dirs:?}", file.display());
    }
}

/// Through FUSE every node's ranks write through its daemon's one writer:
/// one index log per node for a file written in one open (the slides'
/// "one index per node"), not one per rank.
fn check_one_log_per_node(plfsrc: &Path, file: &Path, nodes: usize) {
    let map: serde_json::Value =
        serde_json::from_str(&run_ok(plfs(plfsrc).args(["map", "--json"]).arg(file))).unwrap();
    let logs: BTreeSet<String> = map["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["log"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(logs.len(), nodes, "{}: data logs {logs:#?}", file.display());
}

fn strided_program(nodes: &Nodes) -> PathBuf {
    compile(&program("tests/programs/nodes_strided.c"), nodes.dir.path())
}

#[test]
fn nodes_have_their_own_hostnames_and_addresses_and_talk_over_tcp() {
    if !available() {
        return;
    }
    let nodes = Nodes::up(NODES, RANKS_PER_NODE);
    for node in 0..NODES {
        let addresses = run_ok(nodes.exec(node, "ip").args(["-o", "-4", "addr", "show"]));
        let found: Vec<&str> = addresses.lines().filter_map(|line| line.split_whitespace().nth(3)).collect();
        assert_eq!(
            found,
            ["127.0.0.1/8", &format!("{}/24", nodes.address(node))],
            "node {node}: {addresses}"
        );
        let hostname = run_ok(&mut nodes.exec(node, "hostname"));
        assert_eq!(hostname.trim(), format!("plfsnode{node}"));
    }
    let program = strided_program(&nodes);
    let stdout = expect(nodes.mpirun(RANKS, &[], &program).arg("hosts"), &format!("OK: {RANKS} ranks"));
    for rank in 0..RANKS {
        let line = format!("rank {rank} host plfsnode{}\n", rank / RANKS_PER_NODE);
        assert!(stdout.contains(&line), "{line:?} missing:\n{stdout}");
    }
}

/// The library: `plfs bench open` (the plfs binary under mpirun) writes an
/// N-1 strided file from every rank, then opens it collectively with
/// every strategy on the first READERS ranks, each reading and checking
/// every byte.
#[test]
fn library_collective_open_every_strategy_across_nodes() {
    if !available() {
        return;
    }
    let nodes = Nodes::up(NODES, RANKS_PER_NODE);
    let work = nodes.path("bench");
    std::fs::create_dir(&work).unwrap();
    let mut command = nodes.mpirun(RANKS, &[], Path::new(PLFS));
    command
        // -v: the parallel read says which group each rank joined.
        .args(["-v", "bench", "open", "--writers", &RANKS.to_string(), "--readers", &READERS.to_string()])
        .args(["--records", &RECORDS.to_string(), "--size", &RECORD_BYTES.to_string()])
        .args(["--strategy", "all", "--repeat", "1", "--verify", "--json", "--no-drop-caches", "--keep"])
        .arg("--dir")
        .arg(&work)
        .env_remove("PLFS_MPI_SHIM")
        .env_remove("PLFS_OPEN_GROUP_RANKS");
    let description = format!("{command:?}");
    let output = run(&mut command, RUN_TIMEOUT);
    assert!(output.status.success(), "{description}: {}", describe(&output));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    check_node_groups(&String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: not one JSON report:\n{stdout}"));
    assert_eq!(report["ranks"], RANKS as u64);
    assert_eq!(report["ok"], true, "{stdout}");
    let (writers, readers) = (RANKS as u64, READERS as u64);
    let names: Vec<&str> =
        report["strategies"].as_array().unwrap().iter().map(|s| s["strategy"].as_str().unwrap()).collect();
    assert_eq!(names, ["naive", "broadcast", "parallel", "flatten"]);
    for strategy in report["strategies"].as_array().unwrap() {
        let name = strategy["strategy"].as_str().unwrap();
        // As on one node (bench_open_mpi.rs): naive N*M, broadcast and
        // parallel N, flatten 1 global index per reader.
        let (index_log_opens, global_index_opens) = match name {
            "naive" => (writers * readers, readers),
            "broadcast" | "parallel" => (writers, 0),
            _ => (0, 1),
        };
        assert_eq!(strategy["index_log_opens"], index_log_opens, "{name}");
        assert_eq!(strategy["global_index_opens"], global_index_opens, "{name}");
        assert_eq!(strategy["verified_bytes"], writers * RECORDS * RECORD_BYTES * readers, "{name}");
        assert_eq!(strategy["errors"].as_array().unwrap().len(), 0, "{name}: {strategy}");
    }
    // Every rank's index log sits in its node's hostdir.
    let mut hosts = BTreeSet::new();
    let mut dirs = BTreeSet::new();
    let listing = run_ok(Command::new("find").arg(&work).args(["-name", "index.*", "-path", "*/hostdir.*"]));
    for log in listing.lines().map(Path::new) {
        dirs.insert(log.parent().unwrap().file_name().unwrap().to_owned());
        hosts.insert(log.file_name().unwrap().to_string_lossy().rsplit('.').next().unwrap().to_owned());
    }
    let expected: BTreeSet<String> = (0..NODES).map(host_hash).collect();
    assert_eq!(hosts, expected, "index logs of the bench file:\n{listing}");
    assert!(dirs.len() > 1, "one hostdir for every node:\n{listing}");
}

/// The parallel read's groups are the readers' nodes: each reader's line
/// ("rank R of M on host H: group [..], G groups") names a group that is
/// exactly the readers on its host, READERS / RANKS_PER_NODE of them, where
/// √M consecutive ranks ({0,1,2} {3,4,5}) would span nodes.
fn check_node_groups(stderr: &str) {
    let mut joined = std::collections::BTreeMap::new();
    for line in stderr.lines().filter(|line| line.contains("parallel index read: rank ")) {
        let fields = line.split("parallel index read: rank ").nth(1).unwrap();
        let (rank, rest) = fields.split_once(" of ").unwrap();
        let (host, rest) = rest.split_once(" on host ").unwrap().1.split_once(": group ").unwrap();
        let (group, groups) = rest.split_once("], ").unwrap();
        let entry = (host.to_owned(), format!("{group}]"), groups.to_owned());
        let rank: usize = rank.parse().unwrap();
        assert_eq!(*joined.entry(rank).or_insert_with(|| entry.clone()), entry, "rank {rank}:\n{stderr}");
    }
    assert_eq!(joined.keys().copied().collect::<Vec<_>>(), (0..READERS).collect::<Vec<_>>(), "{stderr}");
    let nodes = READERS / RANKS_PER_NODE;
    for (host, group, groups) in joined.values() {
        let on_host: Vec<String> =
            joined.iter().filter(|(_, other)| other.0 == *host).map(|(rank, _)| rank.to_string()).collect();
        assert_eq!(*group, format!("[{}]", on_host.join(", ")), "group on {host}:\n{stderr}");
        assert_eq!(on_host.len(), RANKS_PER_NODE, "readers on {host}:\n{stderr}");
        assert_eq!(*groups, format!("{nodes} groups"), "{stderr}");
        assert!(host.starts_with("plfsnode"), "{host}");
    }
}

/// `plfs bench n1-strided --interface mpiio` starts mpirun.openmpi from
/// PATH; with the nodes' wrapper (`plfs-nodes up` makes it) first there,
/// its MPI-IO ranks write and read on the nodes.
#[test]
fn bench_n1_strided_mpiio_ranks_run_on_the_nodes() {
    if !available() {
        return;
    }
    let nodes = Nodes::up(NODES, RANKS_PER_NODE);
    let work = nodes.path("bench");
    std::fs::create_dir(&work).unwrap();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![PathBuf::from("/run/plfs-nodes/bin")];
    dirs.extend(std::env::split_paths(&path));
    let mut command = Command::new(PLFS);
    command
        .args(["bench", "n1-strided", "--interface", "mpiio", "--writers", &RANKS.to_string()])
        .args(["--records", &RECORDS.to_string(), "--size", &RECORD_BYTES.to_string(), "--read", "--keep"])
        .arg("--dir")
        .arg(&work)
        .env("PATH", std::env::join_paths(dirs).unwrap())
        .env_remove("PLFSRC");
    expect(&mut command, "verified: every byte read back in every phase matched");
    let listing = run_ok(Command::new("find").arg(&work).args(["-name", "index.*", "-path", "*/hostdir.*"]));
    let hosts: BTreeSet<String> = listing
        .lines()
        .map(|log| {
            Path::new(log).file_name().unwrap().to_string_lossy().rsplit('.').next().unwrap().to_owned()
        })
        .collect();
    assert_eq!(hosts, (0..NODES).map(host_hash).collect(), "index logs of the MPI-IO phase:\n{listing}");
}

/// The preload: an unmodified MPI program's open/pwrite/pread on a path
/// under the mount point, on every node.
#[test]
fn preload_n1_strided_across_nodes() {
    if !available() {
        return;
    }
    let nodes = Nodes::up(NODES, RANKS_PER_NODE);
    let program = strided_program(&nodes);
    let (plfsrc, mount) = plfsrc(&nodes);
    let preload = library("libplfs_preload.so");
    let environment = [("LD_PRELOAD", preload.as_str()), ("PLFSRC", plfsrc.to_str().unwrap())];
    let file = mount.join("preloaded");
    let (records, size) = (RECORDS.to_string(), RECORD_BYTES.to_string());
    let path = file.to_str().unwrap();
    let stdout = expect(
        nodes.mpirun(RANKS, &environment, &program).args(["write", path, &records, &size]),
        &format!("OK: {RANKS} writers"),
    );
    assert_eq!(stdout.matches(" host plfsnode").count(), RANKS, "{stdout}");
    expect(
        nodes.mpirun(READERS, &environment, &program).args([
            "read",
            path,
            &records,
            &size,
            &RANKS.to_string(),
        ]),
        &format!("OK: {READERS} readers verified"),
    );
    assert!(!mount.join("preloaded").exists(), "the preload left the file on the host directory");
    check_strided(&plfsrc, &file, RANKS as u64, nodes.dir.path());
    check_hosts(&plfsrc, &file, 0..NODES);
}

/// MPI-IO through the PMPI wrapper (libplfs_mpiio.so with the preload):
/// write_at from every node, reads with the parallel and broadcast
/// strategies and a uniform restart; a file view with write_all,
/// flattened at close.
#[test]
fn mpiio_n1_strided_across_nodes() {
    if !available() {
        return;
    }
    let nodes = Nodes::up(NODES, RANKS_PER_NODE);
    let program = compile(&program("../plfs-mpi/tests/c/mpiio_strided.c"), nodes.dir.path());
    let (plfsrc, mount) = plfsrc(&nodes);
    let preload = format!("{} {}", library("mpi/openmpi/libplfs_mpiio.so"), library("libplfs_preload.so"));
    let environment =
        [("LD_PRELOAD", preload.as_str()), ("PLFSRC", plfsrc.to_str().unwrap()), ("PLFS_MPIIO_VERBOSE", "1")];
    let (records, size) = (RECORDS.to_string(), RECORD_BYTES.to_string());
    let total = RANKS as u64 * RECORDS * RECORD_BYTES;
    let mpirun = |ranks: usize, args: &[&str], success: &str| -> String {
        let mut command = nodes.mpirun(ranks, &environment, &program);
        command.args(args);
        let output = run(&mut command, RUN_TIMEOUT);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success() && stdout.contains(success), "{args:?}: {}", describe(&output));
        String::from_utf8_lossy(&output.stderr).into_owned()
    };

    let file = mount.join("strided_at");
    let path = file.to_str().unwrap();
    mpirun(RANKS, &["write-at", path, &records, &size], &format!("{RANKS} writers wrote {total} bytes"));
    check_strided(&plfsrc, &file, RANKS as u64, nodes.dir.path());
    check_hosts(&plfsrc, &file, 0..NODES);
    let read_ok = format!("{READERS} readers verified {total} bytes");
    for (hint, strategy) in [
        (None, "auto"),
        (Some("hint=plfs_disable_paropen=0"), "parallel"),
        (Some("hint=plfs_disable_paropen=1"), "broadcast"),
    ] {
        let mut args = vec!["read", path, &records, &size];
        let writers = RANKS.to_string();
        args.push(&writers);
        args.extend(hint);
        let stderr = mpirun(READERS, &args, &read_ok);
        let opened = format!("collective open of {path} ({strategy}): Success");
        assert_eq!(stderr.matches(&opened).count(), READERS, "{opened:?} on every reader:\n{stderr}");
    }
    let stderr = mpirun(
        RANKS,
        &["read-own", path, &records, &size, "hint=plfs_uniform_restart=1"],
        &format!("{RANKS} ranks read their own records"),
    );
    let opened = format!("collective open of {path} (uniform_restart): Success");
    assert_eq!(stderr.matches(&opened).count(), RANKS, "{opened:?} on every rank:\n{stderr}");

    let file = mount.join("strided_view");
    let path = file.to_str().unwrap();
    let stderr = mpirun(
        RANKS,
        &["write-view", path, &records, &size, "hint=plfs_flatten_close=1"],
        &format!("{RANKS} writers wrote {total} bytes"),
    );
    // Flatten on close gathers the ranks' records ("(gathered from the
    // ranks)") or reads the logs ("(read from the index logs)").
    assert!(
        stderr
            .lines()
            .any(|line| line.contains(&format!("flattening the index of {path}"))
                && line.ends_with(": Success")),
        "no flatten at close:\n{stderr}"
    );
    check_strided(&plfsrc, &file, RANKS as u64, nodes.dir.path());
    mpirun(READERS, &["read", path, &records, &size, &RANKS.to_string()], &read_ok);
}

/// FUSE: every node runs its own daemon at the same mount point from the
/// same plfsrc; each node's ranks write through their own mount, others
/// read back through theirs. Then node 0 reads while nodes 1-3 write and
/// sync, round by round.
#[test]
fn fuse_daemon_per_node() {
    if !available() {
        return;
    }
    let mut nodes = Nodes::up(NODES, RANKS_PER_NODE);
    let program = strided_program(&nodes);
    let (plfsrc, mount) = plfsrc(&nodes);
    for node in 0..NODES {
        nodes.mount(node, &plfsrc, &mount);
    }
    let (records, size) = (RECORDS.to_string(), RECORD_BYTES.to_string());
    let file = mount.join("n1");
    let path = file.to_str().unwrap();
    expect(
        nodes.mpirun(RANKS, &[], &program).args(["write", path, &records, &size]),
        &format!("OK: {RANKS} writers"),
    );
    expect(
        nodes.mpirun(READERS, &[], &program).args(["read", path, &records, &size, &RANKS.to_string()]),
        &format!("OK: {READERS} readers verified"),
    );

    // The first RANKS_PER_NODE ranks (node 0) read; the rest write.
    let followed = mount.join("followed");
    let path = followed.to_str().unwrap();
    let readers = RANKS_PER_NODE.to_string();
    expect(
        nodes.mpirun(RANKS, &[], &program).args(["follow", path, &records, &size, &readers]),
        &format!("OK: {RANKS_PER_NODE} readers followed"),
    );
    nodes.unmount_all();
    check_strided(&plfsrc, &file, RANKS as u64, nodes.dir.path());
    check_hosts(&plfsrc, &file, 0..NODES);
    check_one_log_per_node(&plfsrc, &file, NODES);
    check_strided(&plfsrc, &followed, (RANKS - RANKS_PER_NODE) as u64, nodes.dir.path());
    check_hosts(&plfsrc, &followed, 1..NODES);
}

/// A node dies mid-write (SIGKILL to its ranks, its orted and its FUSE
/// daemon) after every rank synced SYNCED rounds and wrote the rest
/// without syncing. `plfs recover --fix` elsewhere leaves the dead node's
/// open records alone (its writers may live, for all another host can
/// tell); on the node itself it fixes them; then every synced byte reads back,
/// and nothing later reads back as anything but its own bytes or a hole.
#[test]
fn fuse_node_killed_mid_write_then_recover() {
    const CRASH_RECORDS: u64 = 6;
    const SYNCED: u64 = 3;
    const DEAD: usize = NODES - 1;
    if !available() {
        return;
    }
    let mut nodes = Nodes::up(NODES, RANKS_PER_NODE);
    let program = strided_program(&nodes);
    let (plfsrc, mount) = plfsrc(&nodes);
    for node in 0..NODES {
        nodes.mount(node, &plfsrc, &mount);
    }
    let file = mount.join("crashed");
    let mut command = nodes.mpirun(RANKS, &[], &program);
    command
        .args(["crash", file.to_str().unwrap(), &CRASH_RECORDS.to_string(), &RECORD_BYTES.to_string()])
        .arg(SYNCED.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut job = command.spawn().unwrap();
    let mut stdin = job.stdin.take().unwrap();
    let mut stdout = BufReader::new(job.stdout.take().unwrap());
    let mut seen = String::new();
    // mpirun's own timeout ends a hung job, and with it this stdout.
    while !seen.contains("crash: written") {
        let mut line = String::new();
        if stdout.read_line(&mut line).unwrap() == 0 {
            let output = job.wait_with_output().unwrap();
            panic!(
                "the job ended before writing:\n{seen}\nstderr:\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        seen.push_str(&line);
    }
    let killed = nodes.kill_node(DEAD);
    assert!(killed >= RANKS_PER_NODE + 2, "node {DEAD}: only {killed} processes (ranks, orted, daemon)");
    // Rank 0 goes on; the job, one node short, must fail.
    let _ = writeln!(stdin, "go");
    drop(stdin);
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut stdout, &mut rest);
    let status = job.wait().unwrap();
    assert!(!status.success(), "the job survived the loss of node {DEAD}:\n{seen}{rest}");

    let recover = |command: &mut Command, fix: bool| {
        command.arg("recover").args(fix.then_some("--fix")).arg(&file);
        run(command, RUN_TIMEOUT)
    };
    let elsewhere = recover(&mut plfs(&plfsrc), true);
    let report = String::from_utf8_lossy(&elsewhere.stdout);
    assert_eq!(elsewhere.status.code(), Some(1), "recover --fix on the host: {}", describe(&elsewhere));
    // One open record: the dead node's daemon was the one writer of its ranks.
    assert_eq!(report.matches("open-elsewhere").count(), 1, "{report}");
    let mut on_node = nodes.exec(DEAD, PLFS);
    on_node.arg("--config").arg(&plfsrc).env_remove("PLFSRC");
    let fixed = recover(&mut on_node, true);
    let report = String::from_utf8_lossy(&fixed.stdout);
    assert!(fixed.status.success(), "recover --fix on node {DEAD}: {}", describe(&fixed));
    assert_eq!(report.matches("fixed  stale-open-record").count(), 1, "{report}");
    let clean = recover(&mut plfs(&plfsrc), false);
    assert!(clean.status.success(), "problems remain after the fix: {}", describe(&clean));

    let bytes = contents(&plfsrc, &file, nodes.dir.path());
    let synced = SYNCED * RANKS as u64;
    assert!(bytes.len() as u64 >= synced * RECORD_BYTES, "{} bytes: synced records lost", bytes.len());
    for (slot, record) in bytes.chunks(RECORD_BYTES as usize).enumerate() {
        let slot = slot as u64;
        let expected = slot_bytes(slot, RANKS as u64);
        if slot < synced {
            assert!(record == expected, "synced slot {slot} differs after recovery");
        } else {
            let whole = record == &expected[..record.len()];
            let hole = record.iter().all(|&b| b == 0);
            assert!(whole || hole, "unsynced slot {slot} holds neither its bytes nor a hole");
        }
    }
    check_hosts(&plfsrc, &file, 0..NODES);
    nodes.unmount_all();
}
