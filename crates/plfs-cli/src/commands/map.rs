use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use plfs::tools::MapTotals;

use crate::output::print_json;
use crate::paths::Context;

#[derive(Debug, Args)]
pub struct Opts {
    /// The plfs file whose merged index to show.
    file: PathBuf,
    /// Only the totals, not every extent.
    #[arg(long)]
    totals: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(context: &Context, opts: &Opts) -> Result<ExitCode> {
    let target = context.resolve_plfs(&opts.file)?;
    target.require_file()?;
    let map = target.plfs.map(&target.path).map_err(|e| target.error(e))?;
    match (opts.json, opts.totals) {
        (true, true) => print_json(&map.totals)?,
        (true, false) => print_json(&map)?,
        (false, totals_only) => {
            if !totals_only {
                // A striped file's extents also say where they lie in its
                // layout: component, stripe and backend (c2/s1@b3).
                let striped = map.entries.iter().any(|entry| entry.stripe.is_some());
                let stripe_header = if striped { format!(" {:>12}", "stripe") } else { String::new() };
                println!(
                    "{:>16} {:>12} {:>8} {:>14}{stripe_header}  log",
                    "logical", "length", "writer", "physical"
                );
                for entry in &map.entries {
                    let stripe = match (&entry.stripe, striped) {
                        (Some(stripe), _) => format!(" {:>12}", stripe.to_string()),
                        (None, true) => format!(" {:>12}", "-"),
                        (None, false) => String::new(),
                    };
                    println!(
                        "{:>16} {:>12} {:>8} {:>14}{stripe}  {}",
                        entry.logical, entry.length, entry.writer, entry.physical, entry.log
                    );
                }
                println!();
            }
            print_totals(&map.totals);
            if let Some(format) = &map.format {
                println!("format      {format}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn print_totals(totals: &MapTotals) {
    println!("writers     {}", totals.writers);
    println!("logs        {}", totals.logs);
    println!("records     {}", totals.records);
    println!("extents     {}", totals.extents);
    println!("index       {} entries, {} bytes in memory", totals.index_entries, totals.index_memory_bytes);
    println!("data bytes  {}", totals.data_bytes);
    println!("holes       {} ({} bytes)", totals.holes, totals.hole_bytes);
    println!("eof         {}", totals.eof);
}
