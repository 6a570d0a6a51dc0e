//! Runs each workload end to end at a tiny size with real worker
//! processes: this test binary re-executed, running only the `worker`
//! test, which is a no-op unless the bench set its spec variable.

use plfs_bench::{BenchReport, BenchSpec, WORKER_SPEC_ENV, WorkerCommand, Workload};

/// Worker entry point when re-executed by the bench.
#[test]
fn worker() {
    if std::env::var_os(WORKER_SPEC_ENV).is_none() {
        return;
    }
    if let Err(error) = plfs_bench::worker_main(&[]) {
        panic!("bench worker failed: {error}");
    }
}

fn tiny(workload: Workload, root: &std::path::Path) -> BenchSpec {
    BenchSpec {
        workload,
        writers: 2,
        records: 20,
        record_bytes: 47001,
        read: true,
        dir: root.to_path_buf(),
        backends: 3,
        keep: false,
        fuse_dir: None,
        library: true,
        preload: None,
        mpiio: None,
    }
}

fn run(spec: &BenchSpec) -> BenchReport {
    let command = WorkerCommand::test_binary("worker").unwrap();
    let report = plfs_bench::run(spec, &command).unwrap();
    eprintln!("{}", report.to_text());
    report
}

fn assert_sound(report: &BenchReport, with_direct: bool) {
    assert!(report.verified, "{}", report.to_text());
    assert_eq!(report.total_bytes, 2 * 20 * 47001);
    let mut figures = vec![report.plfs_mibs, report.nn_mibs, report.ratio_vs_nn];
    figures.extend([report.read_plfs_mibs, report.read_nn_mibs, report.read_ratio_vs_nn].map(Option::unwrap));
    if with_direct {
        figures.extend(
            [
                report.direct_n1_mibs,
                report.ratio_vs_direct,
                report.read_direct_n1_mibs,
                report.read_ratio_vs_direct,
            ]
            .map(Option::unwrap),
        );
    } else {
        assert_eq!(report.direct_n1_mibs, None);
        assert_eq!(report.read_direct_n1_mibs, None);
    }
    for figure in figures {
        assert!(figure > 0.0 && figure.is_finite(), "{figure} in {}", report.to_text());
    }
    for phase in &report.phases {
        assert_eq!(phase.bytes, report.total_bytes, "{}", phase.name);
        assert_eq!(phase.bad_records, 0, "{}", phase.name);
    }
    let json = serde_json::to_value(report).unwrap();
    for field in [
        "plfs_mibs",
        "direct_n1_mibs",
        "nn_mibs",
        "ratio_vs_nn",
        "ratio_vs_direct",
        "read_plfs_mibs",
        "read_nn_mibs",
        "verified",
    ] {
        assert!(json.get(field).is_some(), "JSON lacks {field}");
    }
}

fn assert_cleaned(root: &std::path::Path) {
    let left: Vec<_> = std::fs::read_dir(root).unwrap().collect();
    assert!(left.is_empty(), "work dir left behind: {left:?}");
}

#[test]
fn n1_strided_writes_reads_back_and_verifies() {
    let root = tempfile::tempdir().unwrap();
    let report = run(&tiny(Workload::N1Strided, root.path()));
    assert_sound(&report, true);
    assert_eq!(report.phases.len(), 6);
    assert_cleaned(root.path());
}

#[test]
fn n1_segmented_writes_reads_back_and_verifies() {
    let root = tempfile::tempdir().unwrap();
    let report = run(&tiny(Workload::N1Segmented, root.path()));
    assert_sound(&report, true);
    assert_cleaned(root.path());
}

#[test]
fn nn_writes_reads_back_and_verifies() {
    let root = tempfile::tempdir().unwrap();
    let report = run(&tiny(Workload::Nn, root.path()));
    assert_sound(&report, false);
    assert_eq!(report.phases.len(), 4);
    assert_cleaned(root.path());
}

#[test]
fn without_read_only_write_phases_run_and_keep_leaves_files() {
    let root = tempfile::tempdir().unwrap();
    let spec = BenchSpec { read: false, keep: true, records: 3, ..tiny(Workload::N1Strided, root.path()) };
    let report = run(&spec);
    assert_eq!(report.phases.len(), 3);
    assert_eq!(report.read_plfs_mibs, None);
    assert!(report.plfs_mibs > 0.0);
    assert!(report.dir.join("direct").join("shared").exists());
    assert!(report.dir.join("nn").join("file.1").exists());
}

#[test]
fn a_worker_that_cannot_start_is_an_error_not_a_hang() {
    let root = tempfile::tempdir().unwrap();
    let command = WorkerCommand {
        program: "/nonexistent/plfs-bench-worker".into(),
        args_prefix: Vec::new(),
        spec_as_arg: true,
    };
    let error = plfs_bench::run(&tiny(Workload::Nn, root.path()), &command).unwrap_err();
    assert!(error.contains("starting worker 0"), "{error}");
    assert_cleaned(root.path());
}
