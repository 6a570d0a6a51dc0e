//! `plfs bench … --backend URL`: plfs against raw N-N streams on the same
//! store, run as a user would, on posix:// stores (the hdfs:// and s3://
//! runs need servers; the code path past `open_store` is the same).

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_plfs");

fn plfs_bench(args: &[&str]) -> Output {
    Command::new(BIN).arg("bench").args(args).output().unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn posix_url(dir: &Path) -> String {
    format!("posix://{}", dir.display())
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
}

#[test]
fn n1_strided_on_a_store_compares_plfs_with_raw_streams_at_every_size() {
    let store = tempfile::Builder::new().prefix("plfs-bench-store.").tempdir().unwrap();
    let url = posix_url(store.path());
    let output = plfs_bench(&[
        "n1-strided",
        "--backend",
        &url,
        "--writers",
        "3",
        "--records",
        "10",
        "--size",
        "4099,8192",
        "--read",
        "--json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["verified"], true, "{report}");
    assert_eq!(report["backends"], serde_json::json!([url]));
    assert_eq!(report["target_ratio"], 0.9);
    let sizes = report["sizes"].as_array().unwrap();
    assert_eq!(sizes.len(), 2, "{report}");
    // The first size runs raw first, the next plfs first (order alternates);
    // each side reads twice, the first side first and last.
    let orders = [
        ["write raw-nn", "write plfs", "read raw-nn", "read plfs", "read plfs 2", "read raw-nn 2"],
        ["write plfs", "write raw-nn", "read plfs", "read raw-nn", "read raw-nn 2", "read plfs 2"],
    ];
    for ((size, record_bytes), order) in sizes.iter().zip([4099u64, 8192]).zip(orders) {
        let total = 3 * 10 * record_bytes;
        assert_eq!(size["record_bytes"], record_bytes);
        assert_eq!(size["total_bytes"], total);
        assert_eq!(size["verified"], true, "{size}");
        let names: Vec<&str> =
            size["phases"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
        assert_eq!(names, order, "{size}");
        for phase in size["phases"].as_array().unwrap() {
            // Every byte written, and every byte read back and checked.
            assert_eq!(phase["bytes"], total, "{phase}");
            assert_eq!(phase["bad_records"], 0, "{phase}");
        }
        for figure in [
            "plfs_write_mibs",
            "raw_write_mibs",
            "write_ratio",
            "plfs_read_mibs",
            "raw_read_mibs",
            "read_ratio",
        ] {
            let value = size[figure].as_f64().unwrap_or_else(|| panic!("{figure} missing in {size}"));
            assert!(value > 0.0 && value.is_finite(), "{figure} = {value}");
        }
        let ratio = size["plfs_write_mibs"].as_f64().unwrap() / size["raw_write_mibs"].as_f64().unwrap();
        assert!((size["write_ratio"].as_f64().unwrap() - ratio).abs() < 1e-9, "{size}");
        // A side's read figure is its bytes over its time in both passes.
        let read_mibs = |target: &str| {
            let passes: Vec<&Value> = size["phases"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["op"] == "read" && p["target"] == target)
                .collect();
            assert_eq!(passes.len(), 2, "{size}");
            let bytes: f64 = passes.iter().map(|p| p["bytes"].as_f64().unwrap()).sum();
            let seconds: f64 = passes.iter().map(|p| p["seconds"].as_f64().unwrap()).sum();
            bytes / f64::from(1 << 20) / seconds
        };
        for (figure, target) in [("plfs_read_mibs", "plfs"), ("raw_read_mibs", "raw-nn")] {
            let expected = read_mibs(target);
            assert!((size[figure].as_f64().unwrap() - expected).abs() < 1e-9 * expected, "{figure}: {size}");
        }
        assert_eq!(size["datanode_traffic"], serde_json::json!([]), "no DataNodes were given");
    }
    assert_eq!(entries(store.path()), Vec::<String>::new(), "the bench left files on the store");
}

#[test]
fn a_mount_over_two_stores_spreads_plfs_and_raw_objects_by_volume_and_keeps_them_when_asked() {
    let root = tempfile::Builder::new().prefix("plfs-bench-store.").tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&b).unwrap();
    let output = plfs_bench(&[
        "n1-strided",
        "--backend",
        &posix_url(&a),
        "--backend",
        &posix_url(&b),
        "--writers",
        "2",
        "--mib-per-process",
        "1",
        "--size",
        "1000",
        "--read",
        "--keep",
    ]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}{}", stderr(&output));
    assert!(text.contains("verified: every byte read back"), "{text}");
    assert!(text.contains("plfs/raw"), "{text}");
    // Kept: each store has the plfs directory and the raw directory, and
    // writer r's raw object is on store r % 2.
    for (store, writer) in [(&a, 0), (&b, 1)] {
        let mut names = entries(store);
        names.sort();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(names[1].ends_with("-raw"), "{names:?}");
        assert_eq!(entries(&store.join(&names[1])), [format!("object.{writer}")]);
        // 1 MiB per process in whole 1000 B records.
        let object = store.join(&names[1]).join(format!("object.{writer}"));
        assert_eq!(std::fs::metadata(object).unwrap().len(), 1048 * 1000);
    }
}

#[test]
fn bad_and_dead_backends_fail_naming_the_url() {
    let missing = tempfile::tempdir().unwrap().path().join("gone");
    let dead_posix = posix_url(&missing);
    for url in ["ftp://host/x", "posix://relative/dir", dead_posix.as_str(), "hdfs://127.0.0.1:1/bench"] {
        let output =
            plfs_bench(&["n1-strided", "--backend", url, "--writers", "1", "--records", "1", "--size", "10"]);
        assert!(!output.status.success(), "{url} was accepted");
        let message = stderr(&output);
        assert!(message.contains(url), "the error does not name {url}: {message}");
    }
}

#[test]
fn store_options_are_checked_before_anything_runs() {
    let store = tempfile::tempdir().unwrap();
    let url = posix_url(store.path());
    // Several sizes belong to the store benchmark.
    let output = plfs_bench(&["n1-strided", "--size", "10,20", "--records", "1"]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("--backend"), "{}", stderr(&output));
    // A plfs directory count makes no sense with store URLs.
    let output = plfs_bench(&["n1-strided", "--backend", &url, "--backends", "2"]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("--backends"), "{}", stderr(&output));
    // DataNode addresses must be HTTP addresses, checked before the stores are touched.
    let output = plfs_bench(&["n1-strided", "--backend", &url, "--datanode-jmx", "https://dn:9864"]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("https://dn:9864"), "{}", stderr(&output));
    let list = store.path().join("datanodes.txt");
    std::fs::write(&list, "0 http://127.0.0.1:1 bean extra\n").unwrap();
    let output =
        plfs_bench(&["n1-strided", "--backend", &url, "--datanode-jmx-file", list.to_str().unwrap()]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("datanodes.txt:1"), "{}", stderr(&output));
    assert_eq!(entries(store.path()), ["datanodes.txt"]);
}

/// A DataNode JMX servlet whose n-th answer reports n × `step` bytes read
/// and written; serves until the test binary exits.
fn counting_datanode(port_label: u16, step: u64) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let mut stream = stream.unwrap();
            let mut request = Vec::new();
            let mut byte = [0u8; 1];
            while !request.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap() == 1 {
                request.push(byte[0]);
            }
            let bytes = (n as u64 + 1) * step;
            let body = format!(
                r#"{{"beans":[{{"name":"Hadoop:service=DataNode,name=DataNodeActivity-127.0.0.1-{port_label}","BytesRead":{bytes},"BytesWritten":{bytes}}}]}}"#
            );
            let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
            stream.write_all(answer.as_bytes()).unwrap();
        }
    });
    url
}

#[test]
fn datanodes_from_the_launchers_file_get_bytes_per_phase() {
    let store = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let list = state.path().join("datanodes.txt");
    std::fs::write(&list, format!("0 {}\n1 {}\n", counting_datanode(9866, 10), counting_datanode(9867, 20)))
        .unwrap();
    let output = plfs_bench(&[
        "n1-strided",
        "--backend",
        &posix_url(store.path()),
        "--writers",
        "2",
        "--records",
        "4",
        "--size",
        "1000",
        "--read",
        "--datanode-jmx-file",
        list.to_str().unwrap(),
        "--jmx-settle",
        "0",
        "--json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["datanode_jmx"].as_array().unwrap().len(), 2, "{report}");
    let traffic = report["sizes"][0]["datanode_traffic"].as_array().unwrap();
    assert_eq!(traffic.len(), 6, "two writes and four reads: {report}");
    for phase in traffic {
        let served: Vec<(&str, u64)> = phase["datanodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| (d["datanode"].as_str().unwrap(), d["bytes_read"].as_u64().unwrap()))
            .collect();
        assert_eq!(served, [("127.0.0.1:9866", 10), ("127.0.0.1:9867", 20)], "{phase}");
    }
    assert_eq!(entries(store.path()), Vec::<String>::new());
}
