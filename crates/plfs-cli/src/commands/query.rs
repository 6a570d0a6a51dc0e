use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;
use plfs::tools::PhysicalPiece;
use serde::Serialize;

use crate::output::{print_json, serde_name};
use crate::paths::{self, Context, Location, PlfsPath};

#[derive(Debug, Args)]
pub struct Opts {
    /// A logical plfs file (lists its physical pieces) or a physical path
    /// inside a backend (names the logical file it belongs to).
    path: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Pieces<'a> {
    logical: String,
    pieces: &'a [PhysicalPiece],
}

#[derive(Serialize)]
struct Owner {
    physical: String,
    logical: String,
    mount_point: String,
}

pub fn run(context: &Context, opts: &Opts) -> Result<ExitCode> {
    match context.resolve(&opts.path)? {
        Location::Plfs(target) => {
            let pieces = target.plfs.query(&target.path).map_err(|e| target.error(e))?;
            let logical = target.shown().display().to_string();
            if opts.json {
                print_json(&Pieces { logical, pieces: &pieces })?;
            } else {
                print_pieces(&logical, &pieces);
            }
        }
        Location::Local(path) => {
            let owner = owner_of(context, &path)?;
            if opts.json {
                print_json(&owner)?;
            } else {
                println!("{} is part of {} (mount {})", owner.physical, owner.logical, owner.mount_point);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn print_pieces(logical: &str, pieces: &[PhysicalPiece]) {
    if pieces.iter().any(|piece| piece.kind == plfs::tools::PieceKind::Plfs25Container) {
        println!("{logical}: PLFS 2.5 container, read in place (read-only; `plfs migrate` converts it)");
    } else {
        println!("{logical}:");
    }
    // A striped file's stripes records and data logs also say which
    // stripes they place or hold: component, stripe and backend.
    let striped = pieces.iter().any(|piece| !piece.stripes.is_empty());
    println!("{:<18} {:>12}  location{}", "kind", "bytes", if striped { "  stripes" } else { "" });
    for piece in pieces {
        let stripes: Vec<String> = piece.stripes.iter().map(ToString::to_string).collect();
        let stripes = if stripes.is_empty() { String::new() } else { format!("  {}", stripes.join(" ")) };
        println!(
            "{:<18} {:>12}  {}/{}{stripes}",
            serde_name(&piece.kind),
            piece.bytes,
            piece.backend.trim_end_matches('/'),
            piece.path
        );
    }
}

fn owner_of(context: &Context, physical: &std::path::Path) -> Result<Owner> {
    let absolute = paths::absolute(physical)?;
    let config = context.require_config()?;
    for mount in &config.mounts {
        let plfs = match context.mount(mount) {
            Ok(plfs) => plfs,
            Err(error) => {
                tracing::warn!("skipping mount {}: {error:#}", mount.mount_point.display());
                continue;
            }
        };
        if let Some(inside) = plfs.logical_of(&absolute)? {
            let owner = PlfsPath { plfs, mount_point: mount.mount_point.clone(), path: inside };
            return Ok(Owner {
                physical: absolute.display().to_string(),
                logical: owner.shown().display().to_string(),
                mount_point: mount.mount_point.display().to_string(),
            });
        }
    }
    bail!(
        "{}: neither under a plfs mount point nor part of a plfs file in any configured backend",
        physical.display()
    )
}
