//! `plfs bench cost`: the cost model checked against exact counts. Runs
//! every operation (create, write, close, stat, each open strategy, the
//! restart read, flatten) with ranks as threads of this process over posix
//! backends, counting every backend and communicator call, and prints the
//! counts beside the model's prediction; `--extrapolate` prints the model
//! at 1K to 64K ranks instead (docs/COST_MODEL.md).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, anyhow, bail};
use clap::Args;
use plfs_bench::cost::{
    CostParams, CostReport, CostRuns, Extrapolation, Pattern, extrapolate, extrapolation_text, run_cost,
};
use plfs_bench::plot::Plot;

use crate::output::print_json;

#[derive(Debug, Args)]
#[command(after_help = "Exits 1 if any count differs from the model's prediction.")]
pub struct Opts {
    /// Rank counts to run, comma-separated.
    #[arg(long, default_value = "1,2,4,8,16,32,64,128")]
    ranks: String,
    /// regular, irregular, or both.
    #[arg(long, default_value = "both")]
    pattern: String,
    /// Records per rank.
    #[arg(long, default_value_t = 8)]
    records: u64,
    /// Bytes per record.
    #[arg(long, default_value_t = 1000)]
    size: u64,
    /// Plfs backend directories.
    #[arg(long, default_value_t = 4)]
    backends: u64,
    /// num_hostdirs of the mount.
    #[arg(long, default_value_t = 32)]
    hostdirs: u32,
    /// Ranks per simulated node (each node its own hostname, so hostdir).
    #[arg(long, default_value_t = 2)]
    ranks_per_node: u64,
    /// Ranks that open the file (the first M); 0: every rank.
    #[arg(long, default_value_t = 0)]
    readers: u64,
    /// Ranks per group of the parallel read (default about the square root of the readers).
    #[arg(long)]
    group: Option<u64>,
    /// Where the run's files go (a fresh subdirectory, removed after).
    #[arg(long, default_value_os_t = std::env::temp_dir())]
    dir: PathBuf,
    /// Print the model at 1K, 4K, 16K and 64K ranks (32 per node) over 4,
    /// 16 and 64 backends instead of measuring.
    #[arg(long)]
    extrapolate: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    plot: super::bench::PlotArgs,
}

fn patterns(text: &str) -> Result<Vec<Pattern>> {
    match text {
        "both" => Ok(vec![Pattern::Regular, Pattern::Irregular]),
        other => Ok(vec![other.parse::<Pattern>().map_err(|e| anyhow!(e))?]),
    }
}

fn rank_counts(text: &str) -> Result<Vec<u64>> {
    text.split(',')
        .map(|count| match count.trim().parse::<u64>() {
            Ok(count) if count > 0 => Ok(count),
            _ => bail!("--ranks: {count:?} is not a positive count"),
        })
        .collect()
}

pub fn run(opts: &Opts) -> Result<ExitCode> {
    opts.plot.check()?;
    if opts.extrapolate {
        let rows = extrapolate();
        let text = extrapolation_text(&rows);
        if opts.json {
            print_json(&rows)?;
        } else {
            print!("{text}");
        }
        opts.plot.emit(&text, || Extrapolation(&rows).figures())?;
        return Ok(ExitCode::SUCCESS);
    }
    if opts.ranks_per_node == 0 {
        bail!("--ranks-per-node must be positive");
    }
    let mut reports: Vec<CostReport> = Vec::new();
    let mut text = String::new();
    for pattern in patterns(&opts.pattern)? {
        for ranks in rank_counts(&opts.ranks)? {
            let params = CostParams {
                ranks,
                readers: if opts.readers == 0 { ranks } else { opts.readers },
                nodes: ranks.div_ceil(opts.ranks_per_node),
                backends: opts.backends,
                num_hostdirs: opts.hostdirs,
                records: opts.records,
                record_bytes: opts.size,
                pattern,
                group_ranks: opts.group,
            };
            let report = run_cost(&params, &opts.dir).map_err(|e| anyhow!(e))?;
            let report_text = report.to_text();
            if !opts.json {
                println!("{report_text}");
            }
            text.push_str(&report_text);
            text.push('\n');
            reports.push(report);
        }
    }
    if opts.json {
        print_json(&reports)?;
    }
    opts.plot.emit(&text, || CostRuns(&reports).figures())?;
    Ok(if reports.iter().all(CostReport::agrees) { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
