//! `plfs bench … --plot FILE.png --report DIR` on tiny real runs: the
//! files are there, are PNGs of the panel size, and report.md names every
//! PNG it holds. What the pictures look like is checked by eye (and the
//! drawing itself by plfs-bench's plot tests), not against golden images.

use std::path::Path;
use std::process::{Command, Output};

const PLFS: &str = env!("CARGO_BIN_EXE_plfs");

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Width and height from a PNG's IHDR chunk, after checking the signature.
fn png_size(path: &Path) -> (u32, u32) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{} is not a PNG", path.display());
    assert_eq!(&bytes[12..16], b"IHDR", "{}", path.display());
    let word = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    (word(16), word(20))
}

/// report.md links every PNG in the directory, and every link is a PNG there.
/// The report directory holds exactly the `expected` figures (800x500
/// PNGs, each linked from report.md), a table, and every one of `words`.
fn check_report(dir: &Path, expected: &[&str], words: &[&str]) {
    let markdown = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let mut pngs: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".png"))
        .collect();
    pngs.sort();
    let mut want: Vec<String> = expected.iter().map(|n| format!("{n}.png")).collect();
    want.sort();
    assert_eq!(pngs, want, "{markdown}");
    for png in &pngs {
        assert!(markdown.contains(&format!("]({png})")), "{png} not linked:\n{markdown}");
        assert_eq!(png_size(&dir.join(png)), (800, 500), "{png}");
    }
    assert!(markdown.contains("|---|"), "no table:\n{markdown}");
    for word in words {
        assert!(markdown.contains(word), "{word}:\n{markdown}");
    }
}

#[test]
fn n1_strided_with_repeats_draws_its_figure_and_report() {
    let scratch = tempfile::Builder::new().prefix("plfs-bench-plot.").tempdir().unwrap();
    let work = scratch.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let png = scratch.path().join("n1.png");
    let report = scratch.path().join("report");
    let output = Command::new(PLFS)
        .args(["bench", "n1-strided", "--writers", "2", "--records", "8", "--size", "1000", "--read"])
        .args(["--repeat", "2", "--dir"])
        .arg(&work)
        .arg("--plot")
        .arg(&png)
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(png_size(&png), (800, 500));
    // The table has the three ways of writing and the text report the medians.
    check_report(
        &report,
        &["n1-strided"],
        &["direct N-1", "N-N", "plfs", "| write |", "| read |", "median of 2 runs"],
    );
}

#[test]
fn mdtest_draws_a_panel_per_phase() {
    let scratch = tempfile::Builder::new().prefix("plfs-bench-plot.").tempdir().unwrap();
    let png = scratch.path().join("mdtest.png");
    let report = scratch.path().join("report");
    let output = Command::new(PLFS)
        .args(["bench", "mdtest", "--procs", "2", "--files", "10", "--backends", "1,2", "--dir"])
        .arg(scratch.path())
        .arg("--plot")
        .arg(&png)
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    // create, stat, read and remove: two panels a row.
    assert_eq!(png_size(&png), (1600, 1000));
    check_report(&report, &["mdtest-create", "mdtest-stat", "mdtest-read", "mdtest-remove"], &[]);
}

#[test]
fn open_without_mpirun_draws_time_and_memory_per_strategy() {
    let scratch = tempfile::Builder::new().prefix("plfs-bench-plot.").tempdir().unwrap();
    let report = scratch.path().join("report");
    let output = Command::new(PLFS)
        .args(["bench", "open", "--writers", "4", "--records", "4", "--threads", "2", "--repeat", "2"])
        .args(["--no-drop-caches", "--dir"])
        .arg(scratch.path())
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    check_report(
        &report,
        &["open-time", "open-close-time", "open-read-bandwidth", "open-memory"],
        &["naive", "broadcast", "parallel", "flatten"],
    );
}

#[test]
fn a_plot_name_that_is_not_png_is_refused_before_the_run() {
    let scratch = tempfile::Builder::new().prefix("plfs-bench-plot.").tempdir().unwrap();
    let output = Command::new(PLFS)
        .args(["bench", "n1-strided", "--writers", "2", "--records", "4", "--plot", "figure.svg", "--dir"])
        .arg(scratch.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("figure.svg"), "{}", stderr(&output));
    // Nothing ran: no work directory was made.
    assert_eq!(std::fs::read_dir(scratch.path()).unwrap().count(), 0);
}

#[test]
fn a_store_run_draws_bandwidth_and_ratio_against_record_size() {
    let scratch = tempfile::Builder::new().prefix("plfs-bench-plot.").tempdir().unwrap();
    let store = scratch.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let png = scratch.path().join("store.png");
    let report = scratch.path().join("report");
    let output = Command::new(PLFS)
        .args(["bench", "n1-strided", "--writers", "2", "--records", "6", "--size", "4099,8192", "--read"])
        .arg("--backend")
        .arg(format!("posix://{}", store.display()))
        .arg("--plot")
        .arg(&png)
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(png_size(&png), (1600, 500));
    check_report(&report, &["store-n1-strided", "store-n1-strided-ratio"], &["| 4099 | 8192 |"]);
}

#[test]
fn restart_draws_bandwidth_per_phase_and_reader_memory() {
    let scratch = tempfile::Builder::new().prefix("plfs-bench-plot.").tempdir().unwrap();
    let work = scratch.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let png = scratch.path().join("restart.png");
    let report = scratch.path().join("report");
    let output = Command::new(PLFS)
        .args(["bench", "restart", "--writers", "2", "--total-mib", "1", "--size", "4096"])
        .args(["--decomp", "uniform,pieces", "--peers", "none", "--dir"])
        .arg(&work)
        .arg("--plot")
        .arg(&png)
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(png_size(&png), (1600, 500));
    check_report(
        &report,
        &["restart-bandwidth", "restart-memory"],
        &["write (N=2)", "uniform (M=2)", "pieces (M=2)", "plfs", "direct-n1"],
    );
}

#[test]
fn cost_draws_the_counted_runs_and_the_extrapolation() {
    let scratch = tempfile::Builder::new().prefix("plfs-bench-plot.").tempdir().unwrap();
    let report = scratch.path().join("report");
    let output = Command::new(PLFS)
        .args(["bench", "cost", "--ranks", "1,2,4", "--pattern", "regular", "--dir"])
        .arg(scratch.path())
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    check_report(
        &report,
        &["cost-opens-regular", "cost-busiest-regular", "cost-messages-regular", "cost-metadata-regular"],
        &["open naive", "open parallel", "model agrees"],
    );
    let png = scratch.path().join("model.png");
    let output =
        Command::new(PLFS).args(["bench", "cost", "--extrapolate", "--plot"]).arg(&png).output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    // Eight panels (four quantities, two patterns), two to a row.
    assert_eq!(png_size(&png), (1600, 2000));
}

#[test]
fn index_draws_a_bar_per_case() {
    let scratch = tempfile::Builder::new().prefix("plfs-bench-plot.").tempdir().unwrap();
    let report = scratch.path().join("report");
    let output = Command::new(PLFS)
        .args([
            "bench",
            "index",
            "--writers",
            "4",
            "--records",
            "50",
            "--random-writes",
            "1000",
            "--lookups",
            "100",
        ])
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    check_report(
        &report,
        &["index-memory", "index-log-bytes", "index-build", "index-lookups"],
        &["strided", "random-small", "plain write records"],
    );
}
