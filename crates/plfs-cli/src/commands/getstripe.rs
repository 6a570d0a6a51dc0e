//! `plfs getstripe`: the layout of a file or a directory's template, its
//! components, and where a file's data is.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use plfs::ErrorKind;
use plfs::attr::FileKind;
use plfs::striping::syntax::size_text;
use plfs::striping::{Layout, StripeCount};
use plfs::tools::PieceKind;
use serde::Serialize;

use crate::output::print_json;
use crate::paths::Context;

#[derive(Debug, Args)]
pub struct Opts {
    /// A plfs file or directory.
    path: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Report {
    path: String,
    kind: &'static str,
    /// lfs setstripe text of the layout in effect; `None`: one backend per host.
    layout: Option<String>,
    /// Where it comes from: "file", "directory" (a template set on it),
    /// "mount-default", or "none".
    source: &'static str,
    components: Vec<ComponentReport>,
    /// A file's data per backend (only backends holding some).
    backends: Vec<BackendReport>,
}

#[derive(Serialize)]
struct ComponentReport {
    start: u64,
    /// `None`: to the end of the file.
    end: Option<u64>,
    /// -1: every backend of the pool.
    stripe_count: i64,
    /// Stripes on this mount (the count capped by the pool's backends).
    stripes: u32,
    stripe_size: u64,
    pool: Option<String>,
    /// Backends the component may use.
    pool_backends: Vec<usize>,
    /// Of a file: each stripe placed so far and its backend (a component
    /// is placed at the first byte written to it, so this may be empty).
    placed: Vec<PlacedStripe>,
}

#[derive(Serialize)]
struct PlacedStripe {
    stripe: u32,
    backend: usize,
}

#[derive(Serialize)]
struct BackendReport {
    backend: usize,
    location: String,
    objects: u64,
    bytes: u64,
}

pub fn run(context: &Context, opts: &Opts) -> Result<ExitCode> {
    let target = context.resolve_plfs(&opts.path)?;
    let plfs = &target.plfs;
    let attr = plfs.stat(&target.path).map_err(|error| target.error(error))?;
    let own = plfs.layout(&target.path).map_err(|error| target.error(error))?;
    let (layout, source) = match (own, attr.kind) {
        (Some(layout), FileKind::Directory) => (Some(layout), "directory"),
        (Some(layout), _) => (Some(layout), "file"),
        (None, FileKind::Directory) => match plfs.default_layout() {
            Some(layout) => (Some(layout.clone()), "mount-default"),
            None => (None, "none"),
        },
        // A file created with a layout (a template's or the mount's
        // default) keeps it in its container, not as an attribute.
        (None, _) => match plfs.file_layout(&target.path) {
            Ok(Some(layout)) => (Some(layout), "file"),
            Ok(None) => (None, "none"),
            // An n-n or small file has no container to read it from.
            Err(error) if error.kind() == ErrorKind::Unsupported => (None, "none"),
            Err(error) => return Err(target.error(error)),
        },
    };
    let mut backends = Vec::new();
    if attr.kind == FileKind::File {
        match plfs.data_per_backend(&target.path) {
            Ok(data) => {
                for (backend, data) in data {
                    backends.push(BackendReport {
                        backend,
                        location: plfs.stores()[backend].url().to_owned(),
                        objects: data.objects,
                        bytes: data.bytes,
                    });
                }
            }
            // An n-n or small file has no container to list.
            Err(error) if error.kind() == ErrorKind::Unsupported => {}
            Err(error) => return Err(target.error(error)),
        }
    }
    let mut components = layout.as_ref().map_or_else(Vec::new, |layout| components(plfs, layout));
    if attr.kind == FileKind::File && !components.is_empty() {
        place_stripes(plfs, &target.path, &mut components).map_err(|error| target.error(error))?;
    }
    let report = Report {
        path: target.shown().display().to_string(),
        kind: if attr.kind == FileKind::Directory { "directory" } else { "file" },
        layout: layout.as_ref().map(ToString::to_string),
        source,
        components,
        backends,
    };
    if opts.json {
        print_json(&report)?;
    } else {
        print_text(&report);
    }
    Ok(ExitCode::SUCCESS)
}

fn components(plfs: &plfs::fs::Plfs, layout: &Layout) -> Vec<ComponentReport> {
    let stores = plfs.stores().len();
    layout
        .components()
        .iter()
        .map(|component| {
            let pool_backends = plfs.pool_backends(component.pool.as_deref()).unwrap_or_default();
            ComponentReport {
                start: component.start,
                end: component.end,
                stripe_count: match component.stripe_count {
                    StripeCount::Count(count) => i64::from(count),
                    StripeCount::All => -1,
                },
                stripes: component
                    .stripe_count
                    .resolve(u32::try_from(pool_backends.len()).unwrap_or(u32::MAX)),
                stripe_size: component.stripe_size,
                pool: component.pool.clone(),
                pool_backends: if component.pool.is_some() { pool_backends } else { (0..stores).collect() },
                placed: Vec::new(),
            }
        })
        .collect()
}

/// Fills in each component's placed stripes from the file's stripes
/// records (what `plfs query` lists), so the user sees where each stripe
/// went, not only what the layout allows.
fn place_stripes(plfs: &plfs::fs::Plfs, path: &str, components: &mut [ComponentReport]) -> plfs::Result<()> {
    let pieces = plfs.query(path)?;
    for piece in pieces.iter().filter(|piece| piece.kind == PieceKind::Stripes) {
        for stripe in &piece.stripes {
            // Components count from 1 in records and messages.
            let Some(component) = stripe.component.checked_sub(1).and_then(|index| components.get_mut(index))
            else {
                continue;
            };
            if !component.placed.iter().any(|placed| placed.stripe == stripe.stripe) {
                component.placed.push(PlacedStripe { stripe: stripe.stripe, backend: stripe.backend });
            }
        }
    }
    for component in components.iter_mut() {
        component.placed.sort_by_key(|placed| placed.stripe);
    }
    Ok(())
}

fn print_text(report: &Report) {
    println!("{}", report.path);
    let source = match report.source {
        "file" => "set on the file",
        "directory" => "directory template",
        "mount-default" => "no template; new files get the mount default",
        _ => "one backend per host (no layout)",
    };
    println!("  layout: {} ({source})", report.layout.as_deref().unwrap_or("none"));
    for (index, component) in report.components.iter().enumerate() {
        let end = component.end.map_or("EOF".to_owned(), size_text);
        let count =
            if component.stripe_count < 0 { "-1".to_owned() } else { component.stripe_count.to_string() };
        let pool = component.pool.as_deref().map(|pool| format!("  pool {pool}")).unwrap_or_default();
        println!(
            "  component {index}: [{}, {end})  stripe_count {count} ({} stripes)  stripe_size {}{pool}",
            size_text(component.start),
            component.stripes,
            size_text(component.stripe_size)
        );
        if report.kind == "file" {
            let placed: Vec<String> = component
                .placed
                .iter()
                .map(|placed| format!("s{}@b{}", placed.stripe, placed.backend))
                .collect();
            if placed.is_empty() {
                println!("    stripes: not placed yet");
            } else {
                println!("    stripes: {}", placed.join(" "));
            }
        }
    }
    if report.kind == "file" {
        if report.backends.is_empty() {
            println!("  data: none yet");
        }
        for backend in &report.backends {
            println!(
                "  backend {} ({}): {} objects, {} bytes",
                backend.backend, backend.location, backend.objects, backend.bytes
            );
        }
    }
}
