//! The parent side: sets up a work directory, runs every phase with one
//! process per rank behind a common start barrier, and turns the workers'
//! clocks into bandwidths.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use crate::report::{BenchReport, PhaseReport};
use crate::worker::{
    MARKER, Op, Target, WORKER_SPEC_ENV, WorkerResult, WorkerSpec, direct_path, now_ns, plfs_backend_dirs,
};
use crate::{BenchSpec, WorkerCommand, Workload};

/// Time for every worker to start and finish its set-up.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// Time for a phase's I/O; generous, it only stops a hung worker.
const PHASE_TIMEOUT: Duration = Duration::from_secs(3600);
/// How far ahead the start instant is set, so every worker has read "GO"
/// and is waiting before it arrives, even on a loaded two-core machine.
const GO_DELAY: Duration = Duration::from_millis(100);

/// The write phases in the order they run; the reads follow in the same
/// order. Plfs goes last so the baselines cannot be blamed on anything it
/// left behind (every phase fdatasyncs before its clock stops, so only
/// clean page cache carries over).
fn phase_plan(spec: &BenchSpec) -> Vec<(Target, Op)> {
    let mut targets: Vec<Target> = match spec.workload {
        Workload::N1Strided | Workload::N1Segmented => vec![Target::DirectN1, Target::PlainNn, Target::Plfs],
        Workload::Nn => vec![Target::PlainNn, Target::Plfs],
    };
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
pub fn run(spec: &BenchSpec, workers: &WorkerCommand) -> Result<BenchReport, String> {
    validate(spec)?;
    fs::create_dir_all(&spec.dir).map_err(|e| format!("creating {}: {e}", spec.dir.display()))?;
    let work = WorkDir::create(&spec.dir, spec.keep)?;
    for dir in plfs_backend_dirs(work.path(), spec.backends)
        .into_iter()
        .chain([work.path().join("direct"), work.path().join("nn")])
    {
        fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    let shared = direct_path(work.path());
    fs::File::create(&shared).map_err(|e| format!("creating {}: {e}", shared.display()))?;
    // The FUSE phases get a work directory of their own inside the mount.
    let fuse_work = match &spec.fuse_dir {
        Some(dir) => {
            let fuse_work = WorkDir::create(dir, spec.keep)?;
            if spec.workload != Workload::Nn {
                let shared = fuse_work.path().join("shared");
                fs::File::create(&shared).map_err(|e| format!("creating {}: {e}", shared.display()))?;
            }
            Some(fuse_work)
        }
        None => None,
    };
    let mut phases = Vec::new();
    for (target, op) in phase_plan(spec) {
        // Whatever an earlier phase left dirty (directory entries, access
        // files) is written back now, not during the next phase's clock.
        // SAFETY: sync(2) takes no arguments and cannot fail.
        unsafe { libc::sync() };
        let fuse_dir = fuse_work.as_ref().map(|dir| dir.path());
        phases.push(run_phase(spec, workers, work.path(), fuse_dir, target, op)?);
    }
    Ok(BenchReport::from_phases(spec, work.path(), spec.keep, phases))
}

fn validate(spec: &BenchSpec) -> Result<(), String> {
    if spec.writers == 0 {
        return Err("bench: at least one writer is needed".to_owned());
    }
    if spec.records == 0 || spec.record_bytes == 0 {
        return Err("bench: records and record size must be positive".to_owned());
    }
    if spec.backends == 0 {
        return Err("bench: plfs needs at least one backend dir".to_owned());
    }
    spec.records
        .checked_mul(spec.writers as u64)
        .and_then(|n| n.checked_mul(spec.record_bytes as u64))
        .filter(|total| *total < 1 << 60)
        .ok_or_else(|| "bench: total size overflows".to_owned())?;
    Ok(())
}

/// The run's own directory, removed on drop (success or failure) unless
/// asked to keep it.
struct WorkDir {
    path: PathBuf,
    keep: bool,
}

impl WorkDir {
    fn create(parent: &Path, keep: bool) -> Result<WorkDir, String> {
        let path = parent.join(format!("plfs-bench.{}.{}", std::process::id(), now_ns()));
        fs::create_dir(&path).map_err(|e| format!("creating {}: {e}", path.display()))?;
        Ok(WorkDir { path, keep })
    }

    fn path(&self) -> &Path {
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

/// What a worker's stdout said.
enum Event {
    Ready,
    Result(WorkerResult),
    Error(String),
    Eof,
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

fn forward(rank: usize, stdout: ChildStdout, events: Sender<(usize, Event)>) {
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        // A test harness may print on the same line before the marker.
        let Some(at) = line.find(MARKER) else { continue };
        let rest = &line[at + MARKER.len()..];
        let event = if rest.starts_with("READY") {
            Event::Ready
        } else if let Some(json) = rest.strip_prefix("RESULT ") {
            // Parse one value and ignore anything a harness appends after it.
            match serde_json::Deserializer::from_str(json).into_iter::<WorkerResult>().next() {
                Some(Ok(result)) => Event::Result(result),
                Some(Err(error)) => Event::Error(format!("unreadable result {json:?}: {error}")),
                None => Event::Error("empty result line".to_owned()),
            }
        } else if let Some(message) = rest.strip_prefix("ERROR ") {
            Event::Error(message.to_owned())
        } else {
            continue;
        };
        if events.send((rank, event)).is_err() {
            return;
        }
    }
    let _ = events.send((rank, Event::Eof));
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
) -> Result<PhaseReport, String> {
    let name = format!("{} {}", op.as_str(), target.as_str());
    let (sender, events) = mpsc::channel();
    let mut workers = Workers { children: Vec::with_capacity(spec.writers) };
    for rank in 0..spec.writers {
        let worker_spec = WorkerSpec {
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
        };
        let json = serde_json::to_string(&worker_spec).map_err(|e| format!("{name}: encoding spec: {e}"))?;
        let mut process = Command::new(&command.program);
        process.args(&command.args_prefix);
        if command.spec_as_arg {
            process.arg(&json);
        }
        let mut child = process
            .env(WORKER_SPEC_ENV, &json)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("{name}: starting worker {rank} ({}): {e}", command.program.display()))?;
        let stdout = child.stdout.take().ok_or_else(|| format!("{name}: worker {rank} has no stdout"))?;
        let sender = sender.clone();
        std::thread::spawn(move || forward(rank, stdout, sender));
        workers.children.push(child);
    }
    drop(sender);

    let mut ready = vec![false; spec.writers];
    let deadline = Instant::now() + READY_TIMEOUT;
    while ready.iter().any(|r| !r) {
        match next_event(&events, deadline, &name, "getting ready")? {
            (rank, Event::Ready) => ready[rank] = true,
            (rank, Event::Error(message)) => return Err(format!("{name}: worker {rank}: {message}")),
            (rank, Event::Eof) => {
                let note = exit_note(&mut workers.children[rank]);
                return Err(format!("{name}: worker {rank} exited before it was ready{note}"));
            }
            (rank, Event::Result(_)) => return Err(format!("{name}: worker {rank} reported before GO")),
        }
    }

    let start_ns = now_ns() + GO_DELAY.as_nanos() as u64;
    for (rank, child) in workers.children.iter_mut().enumerate() {
        let mut stdin = child.stdin.take().ok_or_else(|| format!("{name}: worker {rank} has no stdin"))?;
        writeln!(stdin, "GO {start_ns}").map_err(|e| format!("{name}: starting worker {rank}: {e}"))?;
    }

    let mut results: Vec<Option<WorkerResult>> = vec![None; spec.writers];
    let deadline = Instant::now() + PHASE_TIMEOUT;
    while results.iter().any(Option::is_none) {
        match next_event(&events, deadline, &name, "running")? {
            (rank, Event::Result(result)) => results[rank] = Some(result),
            (rank, Event::Error(message)) => return Err(format!("{name}: worker {rank}: {message}")),
            (rank, Event::Eof) if results[rank].is_none() => {
                let note = exit_note(&mut workers.children[rank]);
                return Err(format!("{name}: worker {rank} exited without a result{note}"));
            }
            (_, Event::Eof | Event::Ready) => {}
        }
    }
    for (rank, child) in workers.children.iter_mut().enumerate() {
        let status = child.wait().map_err(|e| format!("{name}: waiting for worker {rank}: {e}"))?;
        if !status.success() {
            return Err(format!("{name}: worker {rank} reported a result but exited with {status}"));
        }
    }
    let results: Vec<WorkerResult> = results.into_iter().flatten().collect();
    PhaseReport::from_results(&name, target, op, spec.total_bytes(), start_ns, &results)
}

fn next_event(
    events: &Receiver<(usize, Event)>,
    deadline: Instant,
    phase: &str,
    doing: &str,
) -> Result<(usize, Event), String> {
    let left = deadline.saturating_duration_since(Instant::now());
    events.recv_timeout(left).map_err(|error| match error {
        RecvTimeoutError::Timeout => format!("{phase}: workers still {doing} at the deadline"),
        RecvTimeoutError::Disconnected => format!("{phase}: every worker's output closed"),
    })
}
