//! `plfs`: use a plfs mount without FUSE, inspect and repair its files, and
//! run the demo and the benchmarks.

mod commands;
mod copy;
mod output;
mod paths;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use tracing_subscriber::filter::LevelFilter;

use crate::paths::Context;

#[derive(Debug, Parser)]
#[command(
    name = "plfs",
    version,
    about = "Parallel Log-Structured File System: tools, copy, demo and benchmarks",
    long_about = "Parallel Log-Structured File System: tools, copy, demo and benchmarks.\n\n\
        Paths under a mount point named in the plfsrc are plfs files, reached through the \
        library (no FUSE mount needed); every other path is an ordinary file.\n\n\
        Exit codes: 0 success, 1 operational error (or, for recover and check-config, \
        problems that remain), 2 usage error."
)]
struct Cli {
    /// The plfsrc to read, instead of $PLFSRC, ~/.plfsrc or /etc/plfsrc.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,

    /// More log output on stderr (-v info, -vv debug, -vvv trace); warnings always show.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Parse the plfsrc, show mounts and backends, and check their directories exist (HDFS and S3: list their roots).
    CheckConfig(commands::check_config::Opts),
    /// Library and format version; with FILE, the versions that created it.
    Version(commands::version::Opts),
    /// The merged index of a file: every extent, then totals.
    Map(commands::map::Opts),
    /// Physical pieces of a logical file, or the logical file of a physical path.
    Query(commands::query::Opts),
    /// List a plfs directory.
    Ls(commands::ls::Opts),
    /// Attributes of a plfs file or directory.
    Stat(commands::stat::Opts),
    /// Remove plfs files (and directories with -r).
    Rm(commands::rm::Opts),
    /// Create plfs directories.
    Mkdir(commands::mkdir::Opts),
    /// Rename a plfs file or directory within its mount.
    Mv(commands::mv::Opts),
    /// Copy a file between plfs and ordinary paths, in parallel.
    Cp(commands::cp::Opts),
    /// Merge a file's index logs into one global index that readers prefer.
    Flatten(commands::flatten::Opts),
    /// Find, and with --fix repair, what crashed writers left in a file
    /// (or, given a directory, what removed files left in it).
    Recover(commands::recover::Opts),
    /// Turn PLFS 2.5 files (one, or all under a directory) into plfs files.
    Migrate(commands::migrate::Opts),
    /// Set a directory's layout template, or a new file's layout (lfs setstripe syntax).
    Setstripe(commands::setstripe::Opts),
    /// Show the layout of a file or directory and where a file's data is.
    Getstripe(commands::getstripe::Opts),
    /// Used and free bytes and inodes per backend and in total.
    Df(commands::df::Opts),
    /// Run the N-1 strided benchmark on a temporary three-backend mount and
    /// show the container it made; needs no plfsrc.
    Demo(commands::demo::Opts),
    /// Compare plfs with direct N-1 and N-N writes using N processes.
    Bench(Box<commands::bench::Opts>),
    /// Mount a configured mount point over FUSE, for every tool on the node.
    Mount(commands::mount::Opts),
    /// Unmount a plfs FUSE mount and wait for its daemon to close its files.
    Umount(commands::umount::Opts),
    /// One benchmark process (started by `plfs bench`).
    #[command(hide = true)]
    BenchWorker(BenchWorkerArgs),
}

#[derive(Debug, Args)]
struct BenchWorkerArgs {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

impl Command {
    fn name(&self) -> &'static str {
        match self {
            Command::CheckConfig(_) => "check-config",
            Command::Version(_) => "version",
            Command::Map(_) => "map",
            Command::Query(_) => "query",
            Command::Ls(_) => "ls",
            Command::Stat(_) => "stat",
            Command::Rm(_) => "rm",
            Command::Mkdir(_) => "mkdir",
            Command::Mv(_) => "mv",
            Command::Cp(_) => "cp",
            Command::Flatten(_) => "flatten",
            Command::Recover(_) => "recover",
            Command::Migrate(_) => "migrate",
            Command::Setstripe(_) => "setstripe",
            Command::Getstripe(_) => "getstripe",
            Command::Df(_) => "df",
            Command::Demo(_) => "demo",
            Command::Bench(_) => "bench",
            Command::Mount(_) => "mount",
            Command::Umount(_) => "umount",
            Command::BenchWorker(_) => "bench-worker",
        }
    }
}

/// The commands that only print what they read: when whoever reads their
/// output goes away (`plfs map F | head`), they stop there, the way `ls`
/// and `cat` do. Rust ignores SIGPIPE, which turns the broken pipe into a
/// panic in `println!`; these commands get the default action back. Every
/// other command keeps it ignored: a daemon or a writer must see EPIPE on a
/// backend's socket as an error, never die of it halfway.
fn stops_on_a_closed_stdout(command: &Command) -> bool {
    matches!(
        command,
        Command::CheckConfig(_)
            | Command::Version(_)
            | Command::Map(_)
            | Command::Query(_)
            | Command::Ls(_)
            | Command::Stat(_)
            | Command::Getstripe(_)
            | Command::Df(_)
    )
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if stops_on_a_closed_stdout(&cli.command) {
        // SAFETY: set before any thread starts; SIG_DFL is a valid action.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    init_logging(cli.verbose);
    let name = cli.command.name();
    let context = Context::new(cli.config);
    let result = match cli.command {
        Command::CheckConfig(opts) => commands::check_config::run(&context, &opts),
        Command::Version(opts) => commands::version::run(&context, &opts),
        Command::Map(opts) => commands::map::run(&context, &opts),
        Command::Query(opts) => commands::query::run(&context, &opts),
        Command::Ls(opts) => commands::ls::run(&context, &opts),
        Command::Stat(opts) => commands::stat::run(&context, &opts),
        Command::Rm(opts) => commands::rm::run(&context, &opts),
        Command::Mkdir(opts) => commands::mkdir::run(&context, &opts),
        Command::Mv(opts) => commands::mv::run(&context, &opts),
        Command::Cp(opts) => commands::cp::run(&context, &opts),
        Command::Flatten(opts) => commands::flatten::run(&context, &opts),
        Command::Recover(opts) => commands::recover::run(&context, &opts),
        Command::Migrate(opts) => commands::migrate::run(&context, &opts),
        Command::Setstripe(opts) => commands::setstripe::run(&context, &opts),
        Command::Getstripe(opts) => commands::getstripe::run(&context, &opts),
        Command::Df(opts) => commands::df::run(&context, &opts),
        Command::Demo(opts) => commands::demo::run(&opts),
        Command::Bench(opts) => commands::bench::run(&opts),
        Command::Mount(opts) => commands::mount::run(&context, &opts, cli.verbose),
        Command::Umount(opts) => commands::umount::run(&opts),
        Command::BenchWorker(args) => commands::bench::worker(&args.args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("plfs: {name}: {}", output::error_text(&error));
            ExitCode::FAILURE
        }
    }
}

/// Core warnings (torn tails skipped, handles closed late) must reach the
/// user even without -v, so WARN is the floor.
fn init_logging(verbose: u8) {
    let level = match verbose {
        0 => LevelFilter::WARN,
        1 => LevelFilter::INFO,
        2 => LevelFilter::DEBUG,
        _ => LevelFilter::TRACE,
    };
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(verbose > 1)
        .without_time()
        .init();
}
