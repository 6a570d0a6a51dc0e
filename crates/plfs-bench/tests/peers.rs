//! The restart peers (crates/plfs-bench/peers/, built by `make peers`)
//! at a small scale: 4 writers in a 1x2x2 grid write a 7x6x12 grid (no
//! dimension splits evenly everywhere), then every read decomposition reads
//! it back on its own number of readers (4, 2, 3, 5 and 5) with every value
//! checked, reading exactly the byte ranges plfs's readers read in
//! `plfs bench restart` (checked against `Layout::reader_extents` for 4 and
//! 8 writers). Two reads must fail: one told to expect other values, and one
//! of a file with one value changed on disk, which names that value's
//! (v,x,y,z). A missing peer program skips, or fails under
//! PLFS_REQUIRE_MPI=1 (`make test`).

use plfs_bench::BenchError;
use plfs_bench::peers::{Decomp, Peer, PeerPhase, PeerProgram, PeerRun};
use plfs_bench::restart::Layout;

const GRID: [u64; 3] = [7, 6, 12];
const PROCS: [usize; 3] = [1, 2, 2];

fn required() -> bool {
    std::env::var("PLFS_REQUIRE_MPI").is_ok_and(|value| value == "1")
}

fn program(peer: Peer) -> Option<PeerProgram> {
    match PeerProgram::find(peer) {
        Ok(program) => Some(program),
        Err(unavailable) => {
            assert!(!required(), "PLFS_REQUIRE_MPI=1 but {unavailable}");
            eprintln!("skipping: {unavailable}");
            None
        }
    }
}

/// The value restart_common.h writes at (v, x, y, z).
fn value(v: u64, x: u64, y: u64, z: u64) -> f64 {
    ((v << 40) + (z * GRID[1] + y) * GRID[0] + x) as f64
}

fn restart(peer: Peer) {
    let Some(program) = program(peer) else { return };
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join(peer.as_str());
    let mut run = PeerRun::new(dir.clone(), GRID, PROCS, Decomp::Uniform, 4);
    let total = run.total_bytes();
    assert_eq!(total, 7 * 6 * 12 * 8 * 8);

    let write = program.run_phase(&run, PeerPhase::Write).unwrap();
    assert_eq!((write.peer, write.phase, write.ranks, write.bytes), (peer, PeerPhase::Write, 4, total));
    assert!(dir.join(peer.file_name()).is_file());
    // Every reader backs some free memory before its clock, as the bench
    // asks after dropping the page cache; the reads are the same.
    run.back_memory_bytes = 4 << 20;

    let decomps = [
        (Decomp::Uniform, 4),
        (Decomp::Half, 2),
        (Decomp::MinusK, 3),
        (Decomp::NonInteger, 5),
        (Decomp::Pieces, 5),
    ];
    for (decomp, readers) in decomps {
        (run.decomp, run.readers) = (decomp, readers);
        let name = decomp.as_str();
        let read = program.run_phase(&run, PeerPhase::Read).unwrap_or_else(|e| panic!("{peer} {name}: {e}"));
        eprintln!("{peer} {name}: {read:?}");
        assert_eq!(read.phase, PeerPhase::Read);
        assert_eq!(read.decomp, name);
        assert_eq!((read.writers, read.ranks), (4, readers), "{peer} {name}");
        // Every reader's boxes together cover the whole array exactly once.
        assert_eq!(read.bytes, total, "{peer} {name}");
        assert_eq!(read.errors, 0);
        assert!(read.max_rss_kib > 0 && read.seconds > 0.0, "{read:?}");
    }

    // Readers that expect every value plus one find all of them wrong.
    (run.decomp, run.readers) = (Decomp::Half, 2);
    run.expect_offset = 1;
    match program.run_phase(&run, PeerPhase::Read) {
        Err(BenchError::Data { problem, .. }) => {
            assert!(problem.starts_with(&format!("{} wrong values", total / 8)), "{problem}");
            assert!(problem.contains("(v,x,y,z)="), "{problem}");
        }
        other => panic!("{peer}: a read expecting other values gave {other:?}"),
    }
    run.expect_offset = 0;

    // One value changed in the file: the read names it. The peers store
    // raw little-endian doubles, so the value's bytes occur once.
    let file = dir.join(peer.file_name());
    let mut bytes = std::fs::read(&file).unwrap();
    let target = value(1, 5, 0, 0).to_le_bytes();
    let at: Vec<usize> = bytes.windows(8).enumerate().filter(|(_, w)| *w == target).map(|(i, _)| i).collect();
    assert_eq!(at.len(), 1, "{peer}: the value of (1,5,0,0) at {at:?} in {}", file.display());
    bytes[at[0]..at[0] + 8].copy_from_slice(&(-1.0f64).to_le_bytes());
    std::fs::write(&file, bytes).unwrap();
    (run.decomp, run.readers) = (Decomp::Pieces, 3);
    match program.run_phase(&run, PeerPhase::Read) {
        Err(BenchError::Data { problem, .. }) => {
            assert!(problem.starts_with("1 wrong values"), "{problem}");
            assert!(problem.contains("(v,x,y,z)=(1,5,0,0)"), "{problem}");
        }
        other => panic!("{peer}: a read of a changed file gave {other:?}"),
    }
}

#[test]
fn adios_restart_reads_back_every_decomposition() {
    restart(Peer::Adios);
}

#[test]
fn hdf5_restart_reads_back_every_decomposition() {
    restart(Peer::Hdf5);
}

/// The regions each peer reader reads are, byte for byte and in order, the
/// extents the plfs reader of the same rank reads in `plfs bench restart`
/// (the peers get the reader grid from the bench, and cut pieces the same
/// way), for 4 and 8 writers with blocks that split unevenly.
fn regions_match_the_plfs_readers(peer: Peer) {
    let Some(program) = program(peer) else { return };
    let root = tempfile::tempdir().unwrap();
    for (procs, block) in [([1, 2, 2], [7, 3, 6]), ([2, 2, 2], [3, 5, 7])] {
        let layout = Layout::Pixie3d { grid: procs, block };
        let n = layout.writers() as usize;
        let mut cases: Vec<(Decomp, usize)> =
            Decomp::ALL.iter().map(|d| (*d, d.readers(n, 1, None).unwrap())).collect();
        cases.extend([(Decomp::Pieces, 3), (Decomp::NonInteger, 7)]);
        for (decomp, m) in cases {
            let dir = root.path().join(format!("{n}-{}-{m}", decomp.as_str()));
            let run = PeerRun::of_layout(dir, &layout, decomp, m).unwrap();
            let regions = program.reader_regions(&run).unwrap();
            for (r, got) in regions.iter().enumerate() {
                let want = layout.reader_extents(decomp, m as u64, r as u64);
                assert_eq!(got, &want, "{peer}: {n} writers, {} reader {r} of {m}", decomp.as_str());
            }
        }
    }
}

#[test]
fn adios_readers_read_the_plfs_readers_regions() {
    regions_match_the_plfs_readers(Peer::Adios);
}

#[test]
fn hdf5_readers_read_the_plfs_readers_regions() {
    regions_match_the_plfs_readers(Peer::Hdf5);
}

#[test]
fn a_missing_program_is_unavailable_not_an_error() {
    // PLFS_PEERS_DIR is process-wide and the other tests need the real
    // directory, so the check runs in a child: this test binary again.
    if std::env::var_os("PEERS_TEST_CHILD").is_none() {
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "a_missing_program_is_unavailable_not_an_error", "--nocapture"])
            .env("PEERS_TEST_CHILD", "1")
            .env("PLFS_PEERS_DIR", "/nonexistent/peers")
            .status()
            .unwrap();
        assert!(status.success());
        return;
    }
    let unavailable = PeerProgram::find(Peer::Hdf5).unwrap_err();
    let message = unavailable.to_string();
    assert!(message.starts_with("peer hdf5 unavailable: hdf5_restart is not built"), "{message}");
    assert!(message.contains("/nonexistent/peers"), "{message}");
}
