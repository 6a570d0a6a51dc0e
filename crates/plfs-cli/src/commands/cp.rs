use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Result, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use plfs::ErrorKind;
use plfs::attr::FileKind;

use crate::copy::{self, LocalSink, LocalSource, PlfsSink, PlfsSource, Sink, Source};
use crate::output::human_bytes;
use crate::paths::{self, Context, Location};

#[derive(Debug, Args)]
pub struct Opts {
    /// The file to copy: a plfs path or an ordinary one.
    src: PathBuf,
    /// Where to copy it: a plfs path or an ordinary one; an existing
    /// directory receives a file of SRC's name.
    dst: PathBuf,
    /// Parallel stripes; copying into plfs, each stripe is its own writer
    /// (its own data and index log).
    #[arg(long, short = 'j', default_value_t = default_threads(), value_parser = clap::value_parser!(u16).range(1..=256))]
    threads: u16,
}

fn default_threads() -> u16 {
    std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 8) as u16)
}

pub fn run(context: &Context, opts: &Opts) -> Result<ExitCode> {
    let source = context.resolve(&opts.src)?;
    let target = into_directory(context.resolve(&opts.dst)?, &opts.src)?;
    refuse_same_file(&source, &target)?;
    let started = Instant::now();
    let (size, shown) = match &source {
        Location::Local(path) => {
            let source = LocalSource::open(path)?;
            (copy_from(&source, &target, opts.threads)?, path.display().to_string())
        }
        Location::Plfs(path) => {
            let source = PlfsSource::open(path)?;
            let size = copy_from(&source, &target, opts.threads)?;
            source.close()?;
            (size, path.shown().display().to_string())
        }
    };
    let seconds = started.elapsed().as_secs_f64();
    tracing::info!(
        "copied {shown} ({}) in {seconds:.2} s, {:.1} MiB/s",
        human_bytes(size),
        size as f64 / (1 << 20) as f64 / seconds.max(1e-9)
    );
    Ok(ExitCode::SUCCESS)
}

fn copy_from(source: &dyn Source, target: &Location, threads: u16) -> Result<u64> {
    let size = source.size();
    let sink: Box<dyn Sink> = match target {
        Location::Local(path) => Box::new(LocalSink::create(path, size, source.mode())?),
        Location::Plfs(path) => Box::new(PlfsSink::create(path, source.mode())?),
    };
    let progress = progress_bar(size);
    let result = copy::copy(source, sink, usize::from(threads), &progress);
    progress.finish_and_clear();
    result
}

fn progress_bar(size: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(size);
    if let Ok(style) = ProgressStyle::with_template(
        "{bytes:>10}/{total_bytes:<10} [{wide_bar}] {binary_bytes_per_sec:>12} {eta:>4}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// `cp a dir` means `cp a dir/a`.
fn into_directory(target: Location, src: &std::path::Path) -> Result<Location> {
    Ok(match target {
        Location::Local(path) if path.is_dir() => Location::Local(path.join(paths::file_name(src)?)),
        Location::Plfs(path) => match path.plfs.stat(&path.path) {
            Ok(attr) if attr.kind == FileKind::Directory => {
                Location::Plfs(path.child(&paths::file_name(src)?))
            }
            Ok(_) => Location::Plfs(path),
            Err(error) if error.kind() == ErrorKind::NotFound => Location::Plfs(path),
            Err(error) => return Err(path.error(error)),
        },
        other => other,
    })
}

/// Truncating the target first would destroy the source.
fn refuse_same_file(source: &Location, target: &Location) -> Result<()> {
    let same = match (source, target) {
        (Location::Plfs(a), Location::Plfs(b)) => a.same_mount(b) && a.path == b.path,
        (Location::Local(a), Location::Local(b)) => match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(a), Ok(b)) => {
                use std::os::unix::fs::MetadataExt;
                a.dev() == b.dev() && a.ino() == b.ino()
            }
            _ => false,
        },
        _ => false,
    };
    if same {
        let shown = match source {
            Location::Plfs(path) => path.shown(),
            Location::Local(path) => path.clone(),
        };
        bail!("{}: source and destination are the same file", shown.display());
    }
    Ok(())
}
