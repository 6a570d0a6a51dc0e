//! `plfs bench restart` end to end at a tiny size, with real processes:
//! this test binary re-executed, running only `restart_worker`, which is a
//! no-op unless the bench set its spec variable.

use plfs_bench::peers::Peer;
use plfs_bench::restart::{Block, Decomp, Pattern, RestartReport, RestartSpec, run_restart};
use plfs_bench::{WORKER_SPEC_ENV, WorkerCommand};

/// Entry point when re-executed by the bench.
#[test]
fn restart_worker() {
    if std::env::var_os(WORKER_SPEC_ENV).is_none() {
        return;
    }
    if let Err(error) = plfs_bench::restart::worker_main(&[]) {
        panic!("restart worker failed: {error}");
    }
}

fn run(pattern: Pattern, writers: usize, readers: Option<usize>, peers: Vec<Peer>) -> RestartReport {
    run_decomps(pattern, writers, readers, peers, Decomp::ALL.to_vec())
}

fn run_decomps(
    pattern: Pattern,
    writers: usize,
    readers: Option<usize>,
    peers: Vec<Peer>,
    decomps: Vec<Decomp>,
) -> RestartReport {
    let root = tempfile::tempdir().unwrap();
    let spec = RestartSpec {
        pattern,
        writers,
        readers,
        k: 1,
        decomps,
        dir: root.path().to_path_buf(),
        backends: 2,
        repeat: 1,
        keep: false,
        peers,
        strategy: None,
    };
    let report = run_restart(&spec, &WorkerCommand::test_binary("restart_worker").unwrap()).unwrap();
    eprintln!("{}", report.to_text());
    // The run's directory is gone.
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
    report
}

/// Every decomposition read every byte of both files back correctly, with
/// the expected reader counts, and the plfs points carry their ratios.
fn assert_sound(report: &RestartReport, readers: &[(&str, usize)]) {
    assert!(report.verified, "{}", report.to_text());
    let phases = &report.phases[0];
    assert_eq!(phases.len(), 2 + 2 * readers.len());
    for phase in phases {
        assert_eq!(phase.bytes, report.file_bytes, "{phase:?}");
        assert_eq!(phase.bad_bytes, 0, "{phase:?}");
        assert!(phase.mibs > 0.0 && phase.mibs.is_finite(), "{phase:?}");
        assert!(phase.max_rss_kib > 0, "{phase:?}");
    }
    for (decomp, m) in readers {
        for target in ["direct-n1", "plfs"] {
            let point = report
                .points
                .iter()
                .find(|p| p.op == "read" && p.target == target && p.decomp.as_deref() == Some(decomp))
                .unwrap_or_else(|| panic!("no {target} {decomp} point"));
            assert_eq!(point.processes, *m, "{decomp}");
            assert_eq!(point.ratio_vs_direct.is_some(), target == "plfs");
            assert_eq!(point.ratio_vs_uniform.is_some(), target == "plfs");
        }
    }
    let json = serde_json::to_value(report).unwrap();
    for field in ["points", "warm", "verified", "file_bytes", "index_entries"] {
        assert!(json.get(field).is_some(), "JSON lacks {field}");
    }
    assert!(json["points"][0]["mibs"]["median"].is_number());
}

#[test]
fn strided_restart_reads_every_decomposition_back_and_verifies() {
    // Peers asked for are not applicable to records: said so, and the rest
    // runs.
    let report = run(
        Pattern::Strided { record_bytes: 4099, total_bytes: 4 * 6 * 4099 },
        4,
        Some(5),
        Peer::ALL.to_vec(),
    );
    assert!(report.peers.is_empty());
    assert_eq!(report.peer_notes.len(), 1);
    assert!(
        report.peer_notes[0].contains("not applicable to the strided pattern"),
        "{:?}",
        report.peer_notes
    );
    assert!(report.to_text().contains("not applicable to the strided pattern"));
    assert_eq!(report.file_bytes, 4 * 6 * 4099);
    assert_eq!(report.index_entries, 4 * 6);
    assert_sound(&report, &[("uniform", 4), ("half", 2), ("minus-k", 3), ("non-integer", 5), ("pieces", 5)]);
}

#[test]
fn pixie3d_restart_reads_every_decomposition_back_and_verifies() {
    let report = run(Pattern::Pixie3d { block: Block::Small }, 4, None, Vec::new());
    // 1x2x2 writers of 16^3 blocks: a 16x32x32 array of 8 variables.
    assert_eq!(report.global, Some([16, 32, 32]));
    assert_eq!(report.file_bytes, 8 * 16 * 32 * 32 * 8);
    assert_sound(&report, &[("uniform", 4), ("half", 2), ("minus-k", 3), ("non-integer", 5), ("pieces", 4)]);
}

/// A reader's clock holds its reads, not the first touch of its buffers: a
/// pieces reader of the medium checkpoint reads 4 MiB runs into 4 MiB
/// buffers, 2,048 pages with the expected bytes', which, faulted in inside
/// the clock, cost it 512 faults per MiB that a uniform reader (32 KiB
/// runs) never pays. Counted per process with getrusage, so the bound
/// holds whatever else the machine runs. Without the fix: plfs 788 and
/// direct 512 faults per MiB.
#[test]
fn reader_buffers_are_faulted_in_before_the_clock() {
    let report =
        run_decomps(Pattern::Pixie3d { block: Block::Medium }, 4, None, Vec::new(), vec![Decomp::Pieces]);
    assert!(report.verified, "{}", report.to_text());
    for phase in report.phases[0].iter().filter(|p| p.op == "read") {
        let faults = phase.faults_per_mib.expect("a plfs or direct phase counts its faults");
        // The buffers alone were 512 per MiB. What a direct reader has
        // left is next to nothing; plfs's own first touches stay (the
        // merged index, one 1 MiB read-ahead window per log stream its
        // 8 KiB records go through: 276 per MiB here), which are its cost.
        let bound = if phase.target == "plfs" { 512.0 } else { 64.0 };
        assert!(
            faults < bound,
            "{} {:?}: {faults} page faults per MiB in the clock",
            phase.target,
            phase.decomp
        );
    }
}
