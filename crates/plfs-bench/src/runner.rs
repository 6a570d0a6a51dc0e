//! The parent side: sets up a work directory, runs every phase with one
//! process per rank behind a common start barrier, and turns the workers'
//! clocks into bandwidths.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use plfs::config::plfsrc;
use plfs::fs::{Options, Plfs};
use plfs::open::OpenFlags;

use crate::error::{BenchError, Result};
use crate::protocol::{self, Channel, Event, NoPhase, Order, Report};
use crate::report::{BenchReport, PhaseReport};
use crate::worker::{
    Op, SHARED_NAME, Target, WORKER_SPEC_ENV, WorkerResult, WorkerSpec, direct_path, interface_backend_dirs,
    interface_mount_point, interface_plfsrc, now_ns, plfs_backend_dirs,
};
use crate::{BenchSpec, MpiioSetup, WorkerCommand, Workload};

/// Time for every worker to start and finish its set-up.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// Time for a phase's I/O; generous, it only stops a hung worker.
const PHASE_TIMEOUT: Duration = Duration::from_secs(3600);
/// How far ahead the start instant is set, so every worker has read "GO"
/// and is waiting before it arrives, even on a loaded two-core machine.
const GO_DELAY: Duration = Duration::from_millis(100);

/// The write phases in the order they run; the reads follow in the same
/// order. The plfs interfaces go last so the baselines cannot be blamed on
/// anything they left behind (every phase fdatasyncs before its clock
/// stops, so only clean page cache carries over).
fn phase_plan(spec: &BenchSpec) -> Vec<(Target, Op)> {
    let mut targets: Vec<Target> = match spec.workload {
        Workload::N1Strided | Workload::N1Segmented => vec![Target::DirectN1, Target::PlainNn],
        Workload::Nn => vec![Target::PlainNn],
    };
    // MPI-IO on a plain file is a baseline too: what MPI-IO itself costs,
    // the ceiling of the mpiio interface.
    if spec.mpiio.is_some() {
        targets.push(Target::MpiioPlain);
    }
    if spec.library {
        targets.push(Target::Plfs);
    }
    if spec.preload.is_some() {
        targets.push(Target::Preload);
    }
    if spec.mpiio.is_some() {
        targets.push(Target::Mpiio);
    }
    if spec.fuse_dir.is_some() {
        targets.push(Target::Fuse);
    }
    let mut plan: Vec<(Target, Op)> = targets.iter().map(|t| (*t, Op::Write)).collect();
    if spec.read {
        plan.extend(targets.iter().map(|t| (*t, Op::Read)));
    }
    plan
}

/// Runs every phase of `spec`, starting workers with `workers`.
pub fn run(spec: &BenchSpec, workers: &WorkerCommand) -> Result<BenchReport> {
    validate(spec)?;
    fs::create_dir_all(&spec.dir).map_err(BenchError::io("creating", &spec.dir))?;
    // Absolute, because the plfsrc of the preload and mpiio mounts must
    // name absolute paths (and mpirun's ranks need not share our cwd).
    let parent = fs::canonicalize(&spec.dir).map_err(BenchError::io("resolving", &spec.dir))?;
    let work = WorkDir::create(&parent, spec.keep)?;
    for dir in plfs_backend_dirs(work.path(), spec.backends)
        .into_iter()
        .chain([work.path().join("direct"), work.path().join("nn")])
    {
        fs::create_dir_all(&dir).map_err(BenchError::io("creating", &dir))?;
    }
    let shared = direct_path(work.path());
    fs::File::create(&shared).map_err(BenchError::io("creating", &shared))?;
    // The interposer and the MPI-IO wrapper each get a plfs mount of their
    // own; their shared file exists before the clock starts, as the
    // direct N-1 one does.
    if spec.preload.is_some() {
        interface_mount(spec, work.path(), Target::Preload)?;
    }
    if spec.mpiio.is_some() {
        interface_mount(spec, work.path(), Target::Mpiio)?;
        let mount_point = interface_mount_point(work.path(), Target::Mpiio);
        fs::create_dir(&mount_point)
            .map_err(BenchError::io("creating the mpiio mount point", &mount_point))?;
        let plain = mpiio_plain_path(work.path());
        if let Some(dir) = plain.parent() {
            fs::create_dir_all(dir).map_err(BenchError::io("creating", dir))?;
        }
        fs::File::create(&plain).map_err(BenchError::io("creating", &plain))?;
    }
    // The FUSE phases get a work directory of their own inside the mount.
    let fuse_work = match &spec.fuse_dir {
        Some(dir) => {
            let fuse_work = WorkDir::create(dir, spec.keep)?;
            if spec.workload != Workload::Nn {
                let shared = fuse_work.path().join(SHARED_NAME);
                fs::File::create(&shared).map_err(BenchError::io("creating", &shared))?;
            }
            Some(fuse_work)
        }
        None => None,
    };
    let mut phases = Vec::new();
    let mut cache_dropped = spec.drop_caches && spec.read;
    for (target, op) in phase_plan(spec) {
        // Whatever an earlier phase left dirty (directory entries, access
        // files) is written back now, not during the next phase's clock.
        // SAFETY: sync(2) takes no arguments and cannot fail.
        unsafe { libc::sync() };
        if op == Op::Read
            && cache_dropped
            && let Err(error) = drop_page_cache()
        {
            eprintln!("plfs bench: --drop-caches: {error}; reads come from the page cache (warm)");
            cache_dropped = false;
        }
        let fuse_dir = fuse_work.as_ref().map(|dir| dir.path());
        phases.push(run_phase(spec, workers, work.path(), fuse_dir, target, op)?);
    }
    Ok(BenchReport::from_phases(spec, work.path(), spec.keep, phases, cache_dropped))
}

/// Writes dirty pages back, then empties the page cache (`echo 3 >
/// /proc/sys/vm/drop_caches`), so the reads that follow come from the
/// disk, as a restart's do after the writers' pages are gone. Needs root.
pub fn drop_page_cache() -> Result<()> {
    const DROP_CACHES: &str = "/proc/sys/vm/drop_caches";
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    fs::write(DROP_CACHES, "3")
        .map_err(BenchError::io("emptying the page cache (needs root) through", DROP_CACHES))
}

fn validate(spec: &BenchSpec) -> Result<()> {
    if spec.writers == 0 {
        return Err(BenchError::invalid("bench: at least one writer is needed"));
    }
    if spec.records == 0 || spec.record_bytes == 0 {
        return Err(BenchError::invalid("bench: records and record size must be positive"));
    }
    if spec.backends == 0 {
        return Err(BenchError::invalid("bench: plfs needs at least one backend dir"));
    }
    if spec.mpiio.is_some() && spec.workload != Workload::N1Strided {
        return Err(BenchError::invalid(format!(
            "bench: the mpiio interface runs n1-strided only, not {}",
            spec.workload
        )));
    }
    if spec.mpiio.is_some() && i32::try_from(spec.record_bytes).is_err() {
        return Err(BenchError::invalid("bench: mpiio records must fit an MPI int count"));
    }
    spec.records
        .checked_mul(spec.writers as u64)
        .and_then(|n| n.checked_mul(spec.record_bytes as u64))
        .filter(|total| *total < 1 << 60)
        .ok_or_else(|| BenchError::invalid("bench: total size overflows"))?;
    Ok(())
}

/// Backend dirs and a plfsrc for `target`'s own mount, and (for the N-1
/// workloads) the shared file, created through the library from that same
/// plfsrc so it is the container the interposer will open.
fn interface_mount(spec: &BenchSpec, work: &Path, target: Target) -> Result<()> {
    let mount_point = interface_mount_point(work, target);
    // No layout, as the library target's mount (`mount_stores`) has none:
    // the interfaces then differ in the interface alone, not in placement.
    let mut text = format!(
        "- mount_point: {}\n  workload: shared_file\n  default_layout: none\n  backends:\n",
        mount_point.display()
    );
    for dir in interface_backend_dirs(work, target, spec.backends) {
        fs::create_dir_all(&dir).map_err(BenchError::io("creating", &dir))?;
        text.push_str(&format!("    - location: posix://{}\n", dir.display()));
    }
    let path = interface_plfsrc(work, target);
    fs::write(&path, text).map_err(BenchError::io("writing", &path))?;
    if spec.workload == Workload::Nn {
        return Ok(());
    }
    let name = path.display().to_string();
    let config = plfsrc::parse_file(&path).map_err(BenchError::plfs("reading", name.as_str()))?;
    let mount =
        config.mounts.first().ok_or_else(|| BenchError::invalid(format!("{}: no mount", path.display())))?;
    let plfs = Plfs::from_config(mount, Options::from_environment(config.tuning.clone()))
        .map_err(BenchError::plfs("mounting", name))?;
    // Writer id: this process, which never writes; the ranks are 0..N
    // (mpiio) or their pids (preload).
    let logical = format!("/{SHARED_NAME}");
    let on_mount = format!("{logical} on the {} mount", target.as_str());
    let handle = plfs
        .open(&logical, OpenFlags::WRONLY.create(), 0o644, u64::from(std::process::id()))
        .map_err(BenchError::plfs("creating", on_mount.as_str()))?;
    handle.close().map_err(BenchError::plfs("closing", on_mount))
}

/// The run's own directory, removed on drop (success or failure) unless
/// asked to keep it.
/// A fresh directory for one run, removed at drop unless kept (also by
/// `plfs bench mdtest`).
pub(crate) struct WorkDir {
    path: PathBuf,
    keep: bool,
}

impl WorkDir {
    pub(crate) fn create(parent: &Path, keep: bool) -> Result<WorkDir> {
        let path = parent.join(format!("plfs-bench.{}.{}", std::process::id(), now_ns()));
        fs::create_dir(&path).map_err(BenchError::io("creating", &path))?;
        Ok(WorkDir { path, keep })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if !self.keep
            && let Err(error) = fs::remove_dir_all(&self.path)
        {
            eprintln!("plfs bench: removing {}: {error}", self.path.display());
        }
    }
}

/// Children still running when a phase fails are killed and reaped.
struct Workers {
    children: Vec<Child>,
}

impl Drop for Workers {
    fn drop(&mut self) {
        for child in &mut self.children {
            if let Ok(None) = child.try_wait() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

fn exit_note(child: &mut Child) -> String {
    match child.wait() {
        Ok(status) => format!(" ({status})"),
        Err(error) => format!(" (wait failed: {error})"),
    }
}

fn run_phase(
    spec: &BenchSpec,
    command: &WorkerCommand,
    work: &Path,
    fuse_dir: Option<&Path>,
    target: Target,
    op: Op,
) -> Result<PhaseReport> {
    let name = format!("{} {}", op.as_str(), target.as_str());
    if let (Target::Mpiio | Target::MpiioPlain, Some(setup)) = (target, &spec.mpiio) {
        return run_mpi_phase(spec, setup, work, target, op, &name);
    }
    let specs: Vec<WorkerSpec> = (0..spec.writers)
        .map(|rank| WorkerSpec {
            workload: spec.workload,
            target,
            op,
            rank,
            writers: spec.writers,
            records: spec.records,
            record_bytes: spec.record_bytes,
            dir: work.to_path_buf(),
            backends: spec.backends,
            fuse_dir: fuse_dir.map(Path::to_path_buf),
            store: None,
            verify_reads: spec.verify_reads,
        })
        .collect();
    let mut environment = Vec::new();
    if let (Target::Preload, Some(preload)) = (target, &spec.preload) {
        // Only the workers get the interposer, not this process.
        environment.push(("LD_PRELOAD", preload.clone().into_os_string()));
        environment.push(("PLFSRC", interface_plfsrc(work, Target::Preload).into_os_string()));
    }
    let (start_ns, results) = run_workers(&name, command, &specs, &environment)?;
    PhaseReport::from_results(&name, target, op, spec.total_bytes(), start_ns, &results)
}

/// Starts one worker process per spec (rank i gets `specs[i]`), with
/// `environment` added to theirs; releases them together once all are
/// ready, and returns the common start instant and every rank's result.
pub(crate) fn run_workers<S: serde::Serialize, R: serde::de::DeserializeOwned + Clone + Send + 'static>(
    name: &str,
    command: &WorkerCommand,
    specs: &[S],
    environment: &[(&str, OsString)],
) -> Result<(u64, Vec<R>)> {
    let writers = specs.len();
    let (sender, events) = mpsc::channel();
    let mut workers = Workers { children: Vec::with_capacity(writers) };
    let protocol_error = |problem: String| BenchError::Protocol { phase: name.to_owned(), problem };
    for (rank, worker_spec) in specs.iter().enumerate() {
        let json = serde_json::to_string(worker_spec)
            .map_err(|source| BenchError::Json { what: format!("{name}: encoding spec"), source })?;
        let mut process = Command::new(&command.program);
        process.args(&command.args_prefix);
        if command.spec_as_arg {
            process.arg(&json);
        }
        process.envs(environment.iter().map(|(key, value)| (key, value)));
        let mut child = process
            .env(WORKER_SPEC_ENV, &json)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|source| BenchError::Spawn {
                phase: name.to_owned(),
                rank,
                program: command.program.clone(),
                source,
            })?;
        let stdout =
            child.stdout.take().ok_or_else(|| protocol_error(format!("worker {rank} has no stdout")))?;
        let sender = sender.clone();
        std::thread::spawn(move || protocol::forward::<R>(Channel::Bench, rank, stdout, sender));
        workers.children.push(child);
    }
    drop(sender);

    let mut ready = vec![false; writers];
    let deadline = Instant::now() + READY_TIMEOUT;
    while ready.iter().any(|r| !r) {
        match next_event(&events, deadline, name, "getting ready")? {
            (rank, Event::Report(Report::Ready { rank: said })) if said == rank => ready[rank] = true,
            (rank, Event::Report(Report::Ready { rank: said })) => {
                return Err(protocol_error(format!("worker {rank} said it was rank {said}")));
            }
            (rank, Event::Report(Report::Error(message))) => {
                return Err(BenchError::Worker { phase: name.to_owned(), rank, message });
            }
            (rank, Event::Malformed(source)) => {
                return Err(BenchError::Malformed { phase: format!("{name}: worker {rank}"), source });
            }
            (rank, Event::Eof) => {
                let note = exit_note(&mut workers.children[rank]);
                return Err(protocol_error(format!("worker {rank} exited before it was ready{note}")));
            }
            (rank, Event::Report(Report::Result(_))) => {
                return Err(protocol_error(format!("worker {rank} reported before GO")));
            }
        }
    }

    let start_ns = now_ns() + GO_DELAY.as_nanos() as u64;
    let go: Order<NoPhase> = Order::Go { start_ns, phase: None };
    for (rank, child) in workers.children.iter_mut().enumerate() {
        // Taken, so stdin closes once GO is written: a worker reads no more.
        let mut stdin =
            child.stdin.take().ok_or_else(|| protocol_error(format!("worker {rank} has no stdin")))?;
        go.send(&mut stdin).map_err(|source| BenchError::Pipe {
            phase: name.to_owned(),
            doing: format!("starting worker {rank}"),
            source,
        })?;
    }

    let mut results: Vec<Option<R>> = vec![None; writers];
    let deadline = Instant::now() + PHASE_TIMEOUT;
    while results.iter().any(Option::is_none) {
        match next_event(&events, deadline, name, "running")? {
            (rank, Event::Report(Report::Result(result))) => results[rank] = Some(result),
            (rank, Event::Report(Report::Error(message))) => {
                return Err(BenchError::Worker { phase: name.to_owned(), rank, message });
            }
            (rank, Event::Malformed(source)) => {
                return Err(BenchError::Malformed { phase: format!("{name}: worker {rank}"), source });
            }
            (rank, Event::Eof) if results[rank].is_none() => {
                let note = exit_note(&mut workers.children[rank]);
                return Err(protocol_error(format!("worker {rank} exited without a result{note}")));
            }
            (_, Event::Eof | Event::Report(Report::Ready { .. })) => {}
        }
    }
    for (rank, child) in workers.children.iter_mut().enumerate() {
        let status = child.wait().map_err(|source| BenchError::Pipe {
            phase: name.to_owned(),
            doing: format!("waiting for worker {rank}"),
            source,
        })?;
        if !status.success() {
            return Err(protocol_error(format!("worker {rank} reported a result but exited with {status}")));
        }
    }
    Ok((start_ns, results.into_iter().flatten().collect()))
}

fn next_event<R>(
    events: &Receiver<(usize, Event<R>)>,
    deadline: Instant,
    phase: &str,
    doing: &'static str,
) -> Result<(usize, Event<R>)> {
    let left = deadline.saturating_duration_since(Instant::now());
    events.recv_timeout(left).map_err(|error| match error {
        RecvTimeoutError::Timeout => BenchError::Timeout { phase: phase.to_owned(), who: "workers", doing },
        RecvTimeoutError::Disconnected => BenchError::Protocol {
            phase: phase.to_owned(),
            problem: "every worker's output closed".to_owned(),
        },
    })
}

/// The plain file the `mpiio-plain` phases share.
fn mpiio_plain_path(work: &Path) -> PathBuf {
    work.join(Target::MpiioPlain.as_str()).join(SHARED_NAME)
}

/// One `mpirun` of the MPI-IO benchmark program: it barriers, times its
/// own open, I/O, sync and close with CLOCK_REALTIME, and each rank prints
/// a result line in the workers' format. mpirun's start-up is outside the
/// clock, as the workers' set-up is. `target` is `Mpiio` (the plfs file,
/// the wrapper and interposer preloaded) or `MpiioPlain` (a plain file,
/// nothing preloaded; the same mpirun arguments otherwise).
fn run_mpi_phase(
    spec: &BenchSpec,
    setup: &MpiioSetup,
    work: &Path,
    target: Target,
    op: Op,
    name: &str,
) -> Result<PhaseReport> {
    let plfsrc_text = interface_plfsrc(work, Target::Mpiio).display().to_string();
    // The wrapper first: its MPI_File_* must shadow the MPI library's.
    let preload = format!("{} {}", setup.wrapper.display(), setup.preload.display());
    let (file, environment) = match target {
        Target::MpiioPlain => (mpiio_plain_path(work), Vec::new()),
        _ => (
            interface_mount_point(work, Target::Mpiio).join(SHARED_NAME),
            vec![("LD_PRELOAD", preload.as_str()), ("PLFSRC", plfsrc_text.as_str())],
        ),
    };
    let mut command = Command::new(&setup.mpirun);
    // Held until the job is done.
    let mut session = None;
    if setup.flavor == "openmpi" {
        // As the restart bench's phases: waiting ranks yield their core
        // however many ranks share it, in a session directory of their own
        // (peers.rs says why).
        session.insert(crate::peers::OmpiSession::new()?).apply(&mut command);
        for (key, value) in environment {
            command.arg("-x").arg(format!("{key}={value}"));
        }
    } else {
        for (key, value) in environment {
            command.args(["-genv", key, value]);
        }
    }
    command
        .arg("-np")
        .arg(spec.writers.to_string())
        .arg(&setup.program)
        .arg(op.as_str())
        .arg(&file)
        .arg(spec.records.to_string())
        .arg(spec.record_bytes.to_string())
        .env_remove("LD_PRELOAD")
        .stdin(Stdio::null());
    let output = command.output().map_err(|e| BenchError::io("starting", &setup.mpirun)(e).context(name))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let protocol_error = |problem: String| BenchError::Protocol { phase: name.to_owned(), problem };
    if !output.status.success() {
        return Err(protocol_error(format!(
            "{} exited with {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
            setup.mpirun.display(),
            output.status
        )));
    }
    let mut results: Vec<Option<WorkerResult>> = vec![None; spec.writers];
    for line in stdout.lines() {
        let result = match Report::<WorkerResult>::parse(Channel::Bench, line) {
            None => continue,
            Some(Ok(Report::Result(result))) => result,
            Some(Ok(Report::Error(message))) => return Err(protocol_error(message)),
            // mpiio_bench has no READY: its ranks start after a barrier.
            Some(Ok(Report::Ready { rank })) => {
                return Err(protocol_error(format!("rank {rank} said READY, which mpiio_bench never does")));
            }
            Some(Err(source)) => return Err(BenchError::Malformed { phase: name.to_owned(), source }),
        };
        let rank = result.rank;
        let slot = results
            .get_mut(rank)
            .ok_or_else(|| protocol_error(format!("result from rank {rank} of {}", spec.writers)))?;
        *slot = Some(result);
    }
    let results: Vec<WorkerResult> = results
        .into_iter()
        .enumerate()
        .map(|(rank, result)| {
            result.ok_or_else(|| {
                protocol_error(format!("no result from rank {rank}\nstdout:\n{stdout}\nstderr:\n{stderr}"))
            })
        })
        .collect::<Result<_>>()?;
    // The ranks' clocks start right after a barrier: the earliest of them
    // is the common start, and how late the others left it is the lag.
    let start_ns = results.iter().map(|r| r.began_ns).min().unwrap_or(0);
    PhaseReport::from_results(name, target, op, spec.total_bytes(), start_ns, &results)
}
