use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use plfs::config::plfsrc::PlfsConfig;
use plfs::config::{BackendLocation, BackendRole, LogSettings, SyslogFacility, Tuning, Workload};
use plfs::fs::RootState;
use plfs::striping::syntax::size_text;
use serde::Serialize;

use crate::output::{count, print_json};
use crate::paths::Context;

#[derive(Debug, Args)]
#[command(after_help = "Exit status: 0 if the config parses and every backend directory exists \
    (or was created with --mkdir); 1 otherwise. A missing mount point is only a warning: only \
    FUSE needs it.")]
pub struct Opts {
    /// Create missing backend directories (and global_summary_dir).
    #[arg(long)]
    mkdir: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Report {
    files: Vec<String>,
    global_params: GlobalParams,
    mounts: Vec<MountReport>,
    /// Missing directories and unusable backends: each makes the exit code 1.
    problems: Vec<String>,
    warnings: Vec<String>,
}

#[derive(Serialize)]
struct GlobalParams {
    num_hostdirs: u32,
    threadpool_size: usize,
    lazy_stat: bool,
    lazy_droppings: bool,
    compress_contiguous: bool,
    index_patterns: bool,
    flatten_on_close: bool,
    index_buffer_mbs: u32,
    read_buffer_mbs: u32,
    test_metalink: bool,
    global_summary_dir: Option<DirCheck>,
    mlog_defmask: String,
    mlog_setmasks: String,
    mlog_stderrmask: String,
    mlog_stderr: bool,
    mlog_file: Option<String>,
    mlog_msgbuf_size: usize,
    mlog_syslog: bool,
    mlog_syslogfac: String,
    mlog_ucon: bool,
}

#[derive(Serialize)]
struct MountReport {
    mount_point: String,
    mount_point_exists: bool,
    workload: &'static str,
    statfs: Option<String>,
    backends: Vec<BackendReport>,
    striping: StripingReport,
}

/// The mount's layout settings, as the plfsrc gave them (or their defaults).
#[derive(Serialize)]
struct StripingReport {
    /// lfs setstripe text; `None`: one backend per host, as before layouts.
    default_layout: Option<String>,
    /// Pool name to backend indexes.
    pools: std::collections::BTreeMap<String, Vec<usize>>,
    stripe_imbalance_pct: u32,
    stripe_reserve: u64,
}

#[derive(Serialize)]
struct BackendReport {
    location: String,
    role: &'static str,
    status: Status,
}

#[derive(Serialize)]
struct DirCheck {
    path: String,
    status: Status,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Status {
    Ok,
    Created,
    Missing,
    NotADirectory,
    /// A remote store (HDFS, S3) that did not answer or refused access;
    /// the problem line carries its error.
    Unreachable,
}

impl Status {
    fn text(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Created => "created",
            Status::Missing => "MISSING",
            Status::NotADirectory => "NOT A DIRECTORY",
            Status::Unreachable => "UNREACHABLE",
        }
    }

    fn is_problem(self) -> bool {
        !matches!(self, Status::Ok | Status::Created)
    }
}

pub fn run(context: &Context, opts: &Opts) -> Result<ExitCode> {
    let config = context.require_config()?;
    let report = check(config, opts.mkdir)?;
    if opts.json {
        print_json(&report)?;
    } else {
        print_text(&report);
    }
    Ok(if report.problems.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn check(config: &PlfsConfig, mkdir: bool) -> Result<Report> {
    let mut problems = Vec::new();
    let mut warnings = Vec::new();
    let summary_dir = match &config.tuning.global_summary_dir {
        Some(dir) => {
            let status = check_dir(dir, mkdir)?;
            if status.is_problem() {
                problems.push(format!("global_summary_dir {}: {}", dir.display(), status.text()));
            }
            Some(DirCheck { path: dir.display().to_string(), status })
        }
        None => None,
    };
    let mut mounts = Vec::new();
    for mount in &config.mounts {
        let mount_point_exists = mount.mount_point.is_dir();
        if !mount_point_exists {
            warnings.push(format!(
                "mount point {} does not exist (only needed to mount with FUSE)",
                mount.mount_point.display()
            ));
        }
        let mut backends = Vec::new();
        for backend in &mount.backends {
            let (status, detail) = match &backend.location {
                BackendLocation::Posix(dir) => (check_dir(dir, mkdir)?, None),
                remote => check_remote(remote, mkdir),
            };
            if status.is_problem() {
                problems.push(format!(
                    "mount {}: backend {}: {}{}",
                    mount.mount_point.display(),
                    backend.location,
                    status.text(),
                    detail.map(|detail| format!(" ({detail})")).unwrap_or_default()
                ));
            }
            backends.push(BackendReport {
                location: backend.location.to_string(),
                role: role_name(backend.role),
                status,
            });
        }
        mounts.push(MountReport {
            mount_point: mount.mount_point.display().to_string(),
            mount_point_exists,
            workload: workload_name(mount.workload),
            statfs: mount.statfs.as_ref().map(ToString::to_string),
            backends,
            striping: StripingReport {
                default_layout: mount.striping.default_layout.as_ref().map(ToString::to_string),
                pools: mount.striping.pools.clone(),
                stripe_imbalance_pct: mount.striping.imbalance_pct,
                stripe_reserve: mount.striping.reserve_bytes,
            },
        });
    }
    Ok(Report {
        files: config.files.iter().map(|file| file.display().to_string()).collect(),
        global_params: global_params(&config.tuning, &config.logging, summary_dir),
        mounts,
        problems,
        warnings,
    })
}

fn check_dir(dir: &Path, mkdir: bool) -> Result<Status> {
    match std::fs::metadata(dir) {
        Ok(metadata) if metadata.is_dir() => Ok(Status::Ok),
        Ok(_) => Ok(Status::NotADirectory),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            if !mkdir {
                return Ok(Status::Missing);
            }
            std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("creating {}: {e}", dir.display()))?;
            Ok(Status::Created)
        }
        Err(error) => Err(anyhow::anyhow!("{}: {error}", dir.display())),
    }
}

/// Asks a remote store for its root directory, creating it with `--mkdir`.
/// Any failure is a finding, not an error of the command, so every backend
/// is reported, with the store's words.
fn check_remote(location: &BackendLocation, mkdir: bool) -> (Status, Option<String>) {
    let (status, words) = match plfs::fs::check_store_root(location, mkdir) {
        Ok(RootState::Present) => (Status::Ok, None),
        Ok(RootState::Created) => (Status::Created, None),
        Ok(RootState::Missing(words)) => (Status::Missing, Some(words)),
        Ok(RootState::NotADirectory(words)) => (Status::NotADirectory, Some(words)),
        Err(error) => (Status::Unreachable, Some(error.to_string())),
    };
    // One problem per line: S3 servers answer with multi-line XML.
    (status, words.map(|words| words.split_whitespace().collect::<Vec<_>>().join(" ")))
}

fn role_name(role: BackendRole) -> &'static str {
    match role {
        BackendRole::Canonical => "CANONICAL",
        BackendRole::Shadow => "SHADOW",
        BackendRole::Any => "untyped",
    }
}

fn workload_name(workload: Workload) -> &'static str {
    match workload {
        Workload::SharedFile => "shared_file",
        Workload::FilePerProc => "file_per_proc",
        Workload::SmallFile => "small_file",
    }
}

fn global_params(tuning: &Tuning, logging: &LogSettings, summary_dir: Option<DirCheck>) -> GlobalParams {
    let setmasks: Vec<String> = logging
        .setmasks
        .iter()
        .map(|mask| match &mask.facility {
            Some(facility) => format!("{facility}={}", mask.level),
            None => mask.level.to_string(),
        })
        .collect();
    GlobalParams {
        num_hostdirs: tuning.num_hostdirs,
        threadpool_size: tuning.threadpool_size,
        lazy_stat: tuning.lazy_stat,
        lazy_droppings: tuning.lazy_droppings,
        compress_contiguous: tuning.compress_contiguous,
        index_patterns: tuning.index_patterns,
        flatten_on_close: tuning.flatten_on_close,
        index_buffer_mbs: tuning.index_buffer_mbs,
        read_buffer_mbs: tuning.read_buffer_mbs,
        test_metalink: tuning.test_metalink,
        global_summary_dir: summary_dir,
        mlog_defmask: logging.defmask.to_string(),
        mlog_setmasks: setmasks.join(","),
        mlog_stderrmask: logging.stderrmask.to_string(),
        mlog_stderr: logging.stderr,
        mlog_file: logging.file.clone(),
        mlog_msgbuf_size: logging.msgbuf_size,
        mlog_syslog: logging.syslog,
        mlog_syslogfac: match logging.syslogfac {
            SyslogFacility::User => "USER".to_owned(),
            SyslogFacility::Local(n) => format!("LOCAL{n}"),
        },
        mlog_ucon: logging.ucon,
    }
}

fn print_text(report: &Report) {
    println!("Config files:");
    for file in &report.files {
        println!("  {file}");
    }
    let g = &report.global_params;
    println!("Global params:");
    let flag = |value: bool| u8::from(value);
    println!("  num_hostdirs: {}", g.num_hostdirs);
    println!("  threadpool_size: {}", g.threadpool_size);
    println!("  lazy_stat: {}", flag(g.lazy_stat));
    println!("  lazy_droppings: {}", flag(g.lazy_droppings));
    println!("  compress_contiguous: {}", flag(g.compress_contiguous));
    println!("  index_patterns: {}", flag(g.index_patterns));
    println!("  flatten_on_close: {}", flag(g.flatten_on_close));
    println!("  index_buffer_mbs: {}", g.index_buffer_mbs);
    println!("  read_buffer_mbs: {}", g.read_buffer_mbs);
    println!("  test_metalink: {}", flag(g.test_metalink));
    if let Some(dir) = &g.global_summary_dir {
        println!("  global_summary_dir: {} [{}]", dir.path, dir.status.text());
    }
    println!("  mlog_defmask: {}", g.mlog_defmask);
    if !g.mlog_setmasks.is_empty() {
        println!("  mlog_setmasks: {}", g.mlog_setmasks);
    }
    println!("  mlog_stderrmask: {}", g.mlog_stderrmask);
    println!("  mlog_stderr: {}", flag(g.mlog_stderr));
    if let Some(file) = &g.mlog_file {
        println!("  mlog_file: {file}");
    }
    println!("  mlog_msgbuf_size: {}", g.mlog_msgbuf_size);
    println!("  mlog_syslog: {} ({})", flag(g.mlog_syslog), g.mlog_syslogfac);
    println!("  mlog_ucon: {}", flag(g.mlog_ucon));
    for mount in &report.mounts {
        let exists = if mount.mount_point_exists { "" } else { " [does not exist]" };
        println!("Mount point {}{exists}", mount.mount_point);
        println!("  workload: {}", mount.workload);
        if let Some(statfs) = &mount.statfs {
            println!("  statfs: {statfs}");
        }
        println!("  backends:");
        for backend in &mount.backends {
            println!("    {:<9} {} [{}]", backend.role, backend.location, backend.status.text());
        }
        let striping = &mount.striping;
        println!("  default_layout: {}", striping.default_layout.as_deref().unwrap_or("none"));
        for (name, members) in &striping.pools {
            let members: Vec<String> = members.iter().map(ToString::to_string).collect();
            println!("  pool {name}: backends {}", members.join(", "));
        }
        println!("  stripe_imbalance_pct: {}", striping.stripe_imbalance_pct);
        println!("  stripe_reserve: {}", size_text(striping.stripe_reserve));
    }
    for warning in &report.warnings {
        println!("warning: {warning}");
    }
    if report.problems.is_empty() {
        println!("Config ok ({})", count(report.mounts.len(), "mount"));
    } else {
        for problem in &report.problems {
            println!("problem: {problem}");
        }
        let hint = if report.problems.iter().any(|p| p.contains(&format!(": {}", Status::Missing.text()))) {
            " (run with --mkdir to create missing directories)"
        } else {
            ""
        };
        println!("{}{hint}", count(report.problems.len(), "problem"));
    }
}
