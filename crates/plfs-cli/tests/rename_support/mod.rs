//! The publish-by-rename workload shared by the FUSE and preload tests: a C
//! program (`publish.c`) that renames new versions onto a name, and readers
//! that open, read and check it, run as separate processes.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

pub const SOURCE: &str = include_str!("publish.c");
/// Versions the publisher renames into place.
pub const PUBLISHES: u32 = 400;
/// Opens and reads of a reader at most; it stops once it has read the last
/// version, so the readers overlap the whole run of publishes.
pub const READS_MAX: u32 = 200_000;
pub const READERS: usize = 3;
/// Bytes of each version.
pub const VERSION_BYTES: u32 = 24 * 1024;

/// Builds the program into `dir`.
pub fn compile(dir: &Path) -> PathBuf {
    let source = dir.join("publish.c");
    std::fs::write(&source, SOURCE).unwrap();
    let program = dir.join("publish");
    let output = Command::new("cc").arg("-O1").arg("-o").arg(&program).arg(&source).output().unwrap();
    assert!(output.status.success(), "cc: {}", String::from_utf8_lossy(&output.stderr));
    program
}

/// Runs the workload in `dir` (which must exist, holding no `target`), each
/// process made by `command` (which adds LD_PRELOAD where needed), and
/// returns the readers' summed counts, e.g. `missing=0 open_errors=0 …`.
pub fn publish_while_reading(program: &Path, dir: &str, command: impl Fn(&Path) -> Command) -> String {
    let target = format!("{dir}/target");
    publish_while_reading_at(program, dir, &vec![target; READERS], command)
}

/// [`publish_while_reading`] with one reader per path of `readers`, each
/// the published file seen some way (through the mount, or as the
/// backend file another node would open).
pub fn publish_while_reading_at(
    program: &Path,
    dir: &str,
    readers: &[String],
    command: impl Fn(&Path) -> Command,
) -> String {
    let first =
        command(program).args(["publish", dir, "1", &VERSION_BYTES.to_string(), "1"]).output().unwrap();
    assert!(first.status.success(), "first publish: {}", String::from_utf8_lossy(&first.stderr));
    let spawn = |args: &[String]| -> Child {
        command(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let readers: Vec<Child> = readers
        .iter()
        .map(|target| {
            let last = PUBLISHES.to_string();
            spawn(&["check".into(), target.clone(), READS_MAX.to_string(), VERSION_BYTES.to_string(), last])
        })
        .collect();
    let publisher = spawn(&[
        "publish".into(),
        dir.to_owned(),
        (PUBLISHES - 1).to_string(),
        VERSION_BYTES.to_string(),
        "2".into(),
    ]);
    let published = publisher.wait_with_output().unwrap();
    assert!(published.status.success(), "publisher: {}", String::from_utf8_lossy(&published.stderr));
    let mut totals = [0u64; 6];
    let mut errors = String::new();
    for reader in readers {
        let output: Output = reader.wait_with_output().unwrap();
        assert!(output.status.success(), "reader: {}", String::from_utf8_lossy(&output.stderr));
        errors.push_str(&String::from_utf8_lossy(&output.stderr));
        let text = String::from_utf8_lossy(&output.stdout);
        for (total, field) in totals.iter_mut().zip(text.trim().split(' ')) {
            *total +=
                field.split('=').nth(1).and_then(|value| value.parse::<u64>().ok()).unwrap_or(u64::MAX / 8);
        }
    }
    let names = ["missing", "open_errors", "read_errors", "short", "bad", "backwards"];
    let summary: Vec<String> =
        names.iter().zip(totals).map(|(name, total)| format!("{name}={total}")).collect();
    let summary = summary.join(" ");
    if !errors.is_empty() {
        eprintln!("reader errors:\n{}", errors.lines().take(20).collect::<Vec<_>>().join("\n"));
    }
    summary
}

/// The counts of a run in which every read saw one whole version.
pub const CLEAN: &str = "missing=0 open_errors=0 read_errors=0 short=0 bad=0 backwards=0";
