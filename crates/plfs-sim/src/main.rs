//! `plfs-sim`: runs seeded simulations (see the library) and the crash-point
//! sweep; prints each failing seed with the command that replays it.

use std::process::ExitCode;
use std::time::Instant;

use plfs::config::Workload;
use plfs_sim::{Config, Stats, run, sweep};

const USAGE: &str = "usage: plfs-sim [--seed S | --seeds N [--from S]] [--steps N] [--processes N]
                [--workload shared_file|file_per_proc|small_file]
                [--no-rename-open] [--keep-going]
       plfs-sim --sweep

  --seed S          run one seed and print its steps if it fails
  --seeds N         run N seeds, from --from (default 0)
  --steps N         steps per seed (default 120)
  --processes N     processes per seed (default 3)
  --workload W      how files are laid out (default shared_file)
  --no-rename-open  never rename or unlink a file that is open
  --keep-going      run every seed, then list the failing ones
  --sweep           the crash-point sweep";

struct Args {
    from: u64,
    seeds: u64,
    sweep: bool,
    keep_going: bool,
    config: Config,
}

fn parse() -> Result<Args, String> {
    let mut args = Args { from: 0, seeds: 1, sweep: false, keep_going: false, config: Config::default() };
    let mut it = std::env::args().skip(1);
    let number = |flag: &str, value: Option<String>| -> Result<u64, String> {
        let value = value.ok_or_else(|| format!("{flag} needs a number"))?;
        value.parse().map_err(|_| format!("{flag}: {value:?} is not a number"))
    };
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--seed" => {
                args.from = number("--seed", it.next())?;
                args.seeds = 1;
            }
            "--seeds" => args.seeds = number("--seeds", it.next())?,
            "--from" => args.from = number("--from", it.next())?,
            "--steps" => args.config.steps = number("--steps", it.next())?,
            "--processes" => args.config.processes = number("--processes", it.next())?.max(1) as usize,
            "--workload" => args.config.workload = workload(it.next())?,
            "--no-rename-open" => args.config.rename_open_files = false,
            "--keep-going" => args.keep_going = true,
            "--sweep" => args.sweep = true,
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    Ok(args)
}

fn workload(value: Option<String>) -> Result<Workload, String> {
    let value = value.ok_or("--workload needs shared_file, file_per_proc or small_file")?;
    Workload::from_name(&value)
        .ok_or_else(|| format!("--workload: {value:?} is not shared_file, file_per_proc or small_file"))
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    let started = Instant::now();
    if args.sweep {
        let report = sweep::sweep(|_, _| {});
        for (case, failure) in &report.failures {
            println!("FAIL {case:?}\n{failure}");
        }
        print_stats(report.cases, "cases", &report.stats, started);
        return if report.failures.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE };
    }
    let mut total = Stats::default();
    let mut failing = Vec::new();
    let flags = replay_flags(&args.config);
    for seed in args.from..args.from.saturating_add(args.seeds) {
        match run(seed, &args.config) {
            Ok(stats) => total += stats,
            Err(failure) => {
                total += failure.stats;
                println!("{failure}");
                println!("replay: plfs-sim --seed {seed}{flags}\n");
                failing.push(seed);
                if !args.keep_going {
                    break;
                }
            }
        }
    }
    print_stats(args.seeds, "seeds", &total, started);
    if failing.is_empty() {
        ExitCode::SUCCESS
    } else {
        println!("{} failing seeds: {failing:?}", failing.len());
        ExitCode::FAILURE
    }
}

fn replay_flags(config: &Config) -> String {
    let default = Config::default();
    let mut flags = String::new();
    if config.steps != default.steps {
        flags += &format!(" --steps {}", config.steps);
    }
    if config.processes != default.processes {
        flags += &format!(" --processes {}", config.processes);
    }
    match config.workload {
        Workload::SharedFile => {}
        Workload::FilePerProc => flags += " --workload file_per_proc",
        Workload::SmallFile => flags += " --workload small_file",
    }
    if !config.rename_open_files {
        flags += " --no-rename-open";
    }
    flags
}

fn print_stats(runs: u64, what: &str, stats: &Stats, started: Instant) {
    println!(
        "{runs} {what}: {} steps, {} faults injected, {} crashes ({} torn tails), {} checks, {} bytes written, {:.1} s",
        stats.steps,
        stats.faults,
        stats.crashes,
        stats.torn_tails,
        stats.checks,
        stats.bytes_written,
        started.elapsed().as_secs_f64()
    );
}
