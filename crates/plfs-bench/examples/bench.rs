//! A stand-alone driver, for measuring without the plfs CLI:
//!
//! ```text
//! cargo run --release -p plfs-bench --example bench -- n1-strided \
//!     --writers 4 --records 2000 --size 47001 --read --dir /var/tmp/plfs-bench
//! ```
//!
//! It re-executes itself as `bench bench-worker <json>` for every worker,
//! exactly as the CLI does with `plfs bench-worker`.

use std::path::PathBuf;
use std::process::ExitCode;

use plfs_bench::{BenchSpec, WorkerCommand, Workload};

const USAGE: &str = "usage: bench n1-strided|n1-segmented|nn [--writers N] [--records K] [--size BYTES] \
                     [--backends B] [--read] [--keep] [--json] [--dir DIR]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let result = if args.get(1).map(String::as_str) == Some("bench-worker") {
        plfs_bench::worker_main(&args[2..])
    } else {
        drive(&args[1..])
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("bench: {error}");
            ExitCode::FAILURE
        }
    }
}

fn drive(args: &[String]) -> Result<(), String> {
    let workload: Workload = args.first().ok_or(USAGE)?.parse()?;
    let mut spec = BenchSpec::new(workload, std::env::temp_dir());
    let mut json = false;
    let mut rest = args[1..].iter();
    while let Some(flag) = rest.next() {
        let mut value = || rest.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"));
        let number = |text: &String| text.parse::<u64>().map_err(|e| format!("{flag} {text}: {e}"));
        match flag.as_str() {
            "--writers" => spec.writers = number(value()?)? as usize,
            "--records" => spec.records = number(value()?)?,
            "--size" => spec.record_bytes = number(value()?)? as usize,
            "--backends" => spec.backends = number(value()?)? as usize,
            "--dir" => spec.dir = PathBuf::from(value()?),
            "--read" => spec.read = true,
            "--keep" => spec.keep = true,
            "--json" => json = true,
            other => return Err(format!("unknown option {other}\n{USAGE}")),
        }
    }
    let report = plfs_bench::run(&spec, &WorkerCommand::current_exe("bench-worker")?)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
    } else {
        print!("{}", report.to_text());
    }
    Ok(())
}
