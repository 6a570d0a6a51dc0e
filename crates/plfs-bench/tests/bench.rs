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
        verify_reads: Default::default(),
        drop_caches: false,
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
        // Every worker tells when its open and its last record returned.
        let split = phase.ranks.unwrap_or_else(|| panic!("{}: no split inside the ranks", phase.name));
        for part in [split.open_ms, split.io_ms, split.close_ms] {
            assert!(part.min >= 0.0 && part.max <= phase.seconds * 1e3, "{}: {split:?}", phase.name);
        }
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
fn drop_caches_reads_cold_as_root_and_says_warm_otherwise() {
    let root = tempfile::tempdir().unwrap();
    let report = run(&BenchSpec { drop_caches: true, ..tiny(Workload::N1Strided, root.path()) });
    assert!(report.verified);
    // SAFETY: geteuid cannot fail.
    let as_root = unsafe { libc::geteuid() } == 0;
    assert_eq!(report.page_cache_dropped, as_root);
    let said =
        if as_root { "page cache was emptied before each read phase" } else { "page cache is not dropped" };
    assert!(report.compared.contains(said), "{}", report.compared);
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
    assert!(matches!(error, plfs_bench::BenchError::Spawn { rank: 0, .. }), "{error:?}");
    assert!(error.to_string().contains("starting worker 0"), "{error}");
    assert_cleaned(root.path());
}

/// A DataNode's JMX servlet, counting: its n-th answer reports BytesRead
/// n × `read_step` and BytesWritten n × `write_step`, so every phase
/// between two snapshots (one GET each) shows exactly one step.
fn counting_datanode(port_label: u16, read_step: u64, write_step: u64) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        // Serves until the test binary exits.
        for (n, stream) in listener.incoming().enumerate() {
            let mut stream = stream.unwrap();
            let mut request = Vec::new();
            let mut byte = [0u8; 1];
            while !request.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap() == 1 {
                request.push(byte[0]);
            }
            let n = n as u64 + 1;
            let body = format!(
                r#"{{"beans":[{{"name":"Hadoop:service=DataNode,name=DataNodeActivity-127.0.0.1-{port_label}","BytesRead":{},"BytesWritten":{}}}]}}"#,
                n * read_step,
                n * write_step
            );
            let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
            stream.write_all(answer.as_bytes()).unwrap();
        }
    });
    url
}

fn store_spec(stores: &[&std::path::Path]) -> plfs_bench::StoreBenchSpec {
    plfs_bench::StoreBenchSpec {
        writers: 2,
        records: 6,
        sizes: vec![3000, 4096],
        jmx_settle: std::time::Duration::ZERO,
        ..plfs_bench::StoreBenchSpec::new(stores.iter().map(|p| format!("posix://{}", p.display())).collect())
    }
}

#[test]
fn the_store_bench_reports_bytes_per_datanode_for_every_phase() {
    let root = tempfile::tempdir().unwrap();
    let mut spec = store_spec(&[root.path()]);
    spec.datanodes = vec![counting_datanode(9866, 100, 300), counting_datanode(9867, 7, 0)];
    let report = plfs_bench::run_store(&spec, &WorkerCommand::test_binary("worker").unwrap()).unwrap();
    eprintln!("{}", report.to_text());
    assert!(report.verified);
    assert_eq!(report.sizes.len(), 2);
    let orders = [
        ["write raw-nn", "write plfs", "read raw-nn", "read plfs", "read plfs 2", "read raw-nn 2"],
        ["write plfs", "write raw-nn", "read plfs", "read raw-nn", "read raw-nn 2", "read plfs 2"],
    ];
    for (size, order) in report.sizes.iter().zip(orders) {
        let phases: Vec<&str> = size.datanode_traffic.iter().map(|t| t.phase.as_str()).collect();
        assert_eq!(phases, order);
        for traffic in &size.datanode_traffic {
            let seen: Vec<(&str, u64, u64)> = traffic
                .datanodes
                .iter()
                .map(|d| (d.datanode.as_str(), d.bytes_read, d.bytes_written))
                .collect();
            assert_eq!(seen, [("127.0.0.1:9866", 100, 300), ("127.0.0.1:9867", 7, 0)], "{}", traffic.phase);
        }
        let read = size.datanode_traffic.iter().find(|t| t.phase == "read plfs").unwrap();
        assert_eq!(read.total_read, 107);
        assert_eq!(read.amplification, 107.0 / (2 * 6 * size.record_bytes) as f64);
        assert_eq!(read.max_over_mean, Some(100.0 / 53.5));
    }
    let text = report.to_text();
    assert!(text.contains("MiB per DataNode") && text.contains("127.0.0.1:9867"), "{text}");
    assert_cleaned(root.path());
}

#[test]
fn the_store_bench_stops_naming_a_datanode_that_does_not_answer() {
    let root = tempfile::tempdir().unwrap();
    let mut spec = store_spec(&[root.path()]);
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    spec.datanodes = vec![format!("http://{dead}")];
    let error =
        plfs_bench::run_store(&spec, &WorkerCommand::test_binary("worker").unwrap()).unwrap_err().to_string();
    assert!(error.contains(&format!("http://{dead}")), "{error}");
    assert_cleaned(root.path());
}

#[test]
fn repeated_store_runs_give_medians_per_size() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let spec = plfs_bench::StoreBenchSpec { read: false, ..store_spec(&[a.path(), b.path()]) };
    let command = WorkerCommand::test_binary("worker").unwrap();
    // As `--repeat` does: every other run swaps which side goes first.
    let reports: Vec<_> = (0..2)
        .map(|run| {
            let spec = plfs_bench::StoreBenchSpec { plfs_first: run % 2 == 0, ..spec.clone() };
            plfs_bench::run_store(&spec, &command).unwrap()
        })
        .collect();
    let summary = plfs_bench::StoreRepeatedReport::new(reports);
    assert_eq!(summary.runs, 2);
    let sizes: Vec<usize> = summary.sizes.iter().map(|s| s.record_bytes).collect();
    assert_eq!(sizes, [3000, 4096]);
    for size in &summary.sizes {
        let ratio = size.write_ratio.unwrap();
        assert!(ratio.min <= ratio.median && ratio.median <= ratio.max && ratio.min > 0.0);
        assert_eq!(size.read_ratio, None, "no read-back was asked for");
        // Both orders ran, so the order-cancelled ratio exists and sits
        // between the two orders' figures.
        let crossover = size.write_crossover.unwrap();
        let (low, high) =
            (crossover.plfs_first.min(crossover.raw_first), crossover.plfs_first.max(crossover.raw_first));
        assert!(low <= crossover.ratio && crossover.ratio <= high, "{crossover:?}");
        assert_eq!(size.read_crossover, None);
    }
    assert!(summary.to_text().contains("plfs/raw"));
    assert_cleaned(a.path());
    assert_cleaned(b.path());
}
