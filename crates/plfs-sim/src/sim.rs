//! One seeded run: several processes write, read, sync, close, truncate,
//! rename, unlink and flatten files while faults strike chosen store calls
//! and the machine crashes at random steps. After each crash every file is
//! recovered (`recover --fix`) and checked against the model.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;

use plfs::ErrorKind;
use plfs::attr::FileKind;
use plfs::config::{Tuning, Workload};
use plfs::fs::FileHandle;
use plfs::fs::Plfs;
use plfs::open::OpenFlags;
use plfs::store::faulty::{FaultAction, Op};
use plfs::store::{Store, StorePath};

use crate::model::{Event, EventKind, FileModel, data_of};
use crate::rng::SimRng;
use crate::world::World;

/// The shape of a run.
#[derive(Debug, Clone)]
pub struct Config {
    pub steps: u64,
    pub processes: usize,
    pub backends: usize,
    /// Percent of steps that arm a fault.
    pub fault_percent: u64,
    /// Percent of steps that crash the machine.
    pub crash_percent: u64,
    /// Whether renames and unlinks may strike files that are open.
    pub rename_open_files: bool,
    /// Whether a crash may keep part or all of a file's unsynced tail
    /// (each file independently), or loses every unsynced byte.
    pub tear_on_crash: bool,
    /// How the processes lay files out: containers (shared_file), one
    /// backend file per file (file_per_proc), or names and data packed in
    /// a directory's logs (small_file).
    pub workload: Workload,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            steps: 120,
            processes: 3,
            backends: 2,
            fault_percent: 15,
            crash_percent: 4,
            rename_open_files: true,
            tear_on_crash: true,
            workload: Workload::SharedFile,
        }
    }
}

/// What a run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub steps: u64,
    pub faults: u64,
    pub crashes: u64,
    pub torn_tails: u64,
    pub checks: u64,
    pub bytes_written: u64,
}

impl std::ops::AddAssign for Stats {
    fn add_assign(&mut self, other: Stats) {
        self.steps += other.steps;
        self.faults += other.faults;
        self.crashes += other.crashes;
        self.torn_tails += other.torn_tails;
        self.checks += other.checks;
        self.bytes_written += other.bytes_written;
    }
}

/// A broken promise, with the steps that led to it.
#[derive(Debug, Clone)]
pub struct Failure {
    pub seed: u64,
    pub step: u64,
    pub message: String,
    pub trace: Vec<String>,
    /// What the run did up to the failure.
    pub stats: Stats,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "seed {} failed at step {}: {}", self.seed, self.step, self.message)?;
        writeln!(f, "last steps:")?;
        for line in &self.trace {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}

/// Files live in two directories, so renames cross directories too.
const NAMES: [&str; 6] = ["/f0", "/f1", "/f2", "/d/g0", "/d/g1", "/d/g2"];
const MAX_OFFSET: u64 = 12 << 10;
const TRACE_STEPS: usize = 40;

type FileId = usize;

struct Handle {
    process: usize,
    file: FileId,
    handle: FileHandle,
    /// An earlier call failed: later ones may report it (as fsync reports
    /// a lost write-back), and its unsynced writes stay undurable.
    failed: bool,
    readable: bool,
    writable: bool,
    /// Created, wrote or truncated: its close publishes its process's
    /// records of the directory (small_file).
    dirty: bool,
}

/// A small_file create no sync or close has published yet: only its
/// process sees it, and a crash takes it.
#[derive(Debug, Clone)]
struct Unpublished {
    /// The processes whose create of the name is not published.
    processes: BTreeSet<usize>,
    /// The file other processes still find at the name, if any.
    before: Option<FileId>,
    /// A flush of one of those processes failed: its records may have
    /// reached the logs unsynced, where others can find the file and not
    /// record a create of their own. Only a crash settles it.
    uncertain: bool,
}

pub(crate) struct Sim<'a> {
    seed: u64,
    config: &'a Config,
    rng: SimRng,
    pub(crate) world: World,
    processes: Vec<Plfs>,
    handles: Vec<Handle>,
    files: Vec<FileModel>,
    names: BTreeMap<String, FileId>,
    pub(crate) step: u64,
    stats: Stats,
    trace: VecDeque<String>,
    next_writer: u64,
    /// Writes acknowledged through a process's handles on a file, not yet
    /// synced: a sync through any of them covers all (FileHandle::sync).
    pending: BTreeMap<(usize, FileId), Vec<usize>>,
    /// The process and file the current step worked on, if one: a fault
    /// there may surface later through any of that process's handles on
    /// the file (they share its writers' buffers, see `taint`).
    touched: Option<(usize, FileId)>,
    /// A promise the step broke that no injected fault excuses.
    pub(crate) broken: Option<String>,
    /// small_file names whose create only its process knows of yet.
    unpublished: BTreeMap<String, Unpublished>,
    /// small_file names a failed unlink or rename took away, whose record
    /// may be in a log unsynced: a crash may bring the file back.
    unsettled: BTreeMap<String, FileId>,
}

/// Runs one seed; the same seed and config always take the same steps.
pub fn run(seed: u64, config: &Config) -> Result<Stats, Failure> {
    let mut sim = Sim::new(seed, config, tuning_for(seed));
    let result = sim.run_steps();
    sim.outcome(result)
}

/// Small buffers and few hostdirs, varied by seed, so frames, patterns,
/// metalinks and flushes all happen within a short run.
fn tuning_for(seed: u64) -> Tuning {
    let mut rng = SimRng::new(seed ^ 0x5157_0000_0000_0001);
    Tuning {
        threadpool_size: 1,
        num_hostdirs: 1 + rng.below(4) as u32,
        index_flush_bytes: *rng.pick(&[64, 256, 4096, 256 << 10]),
        index_patterns: rng.chance(70),
        compress_contiguous: rng.chance(70),
        flatten_on_close: rng.chance(30),
        lazy_droppings: rng.chance(50),
        read_handles_max: 1 + rng.below(8) as usize,
        readahead_bytes: 4096,
        ..Tuning::default()
    }
}

impl<'a> Sim<'a> {
    pub(crate) fn new(seed: u64, config: &'a Config, tuning: Tuning) -> Sim<'a> {
        let mut sim = Sim {
            seed,
            config,
            rng: SimRng::new(seed),
            world: World::new(config.backends, tuning, config.workload),
            processes: Vec::new(),
            handles: Vec::new(),
            files: Vec::new(),
            names: BTreeMap::new(),
            step: 0,
            stats: Stats::default(),
            trace: VecDeque::new(),
            next_writer: 1,
            pending: BTreeMap::new(),
            touched: None,
            broken: None,
            unpublished: BTreeMap::new(),
            unsettled: BTreeMap::new(),
        };
        sim.start();
        sim
    }

    pub(crate) fn outcome(mut self, result: Result<(), String>) -> Result<Stats, Failure> {
        let stats = self.finish_stats();
        match result {
            Ok(()) => Ok(stats),
            Err(message) => Err(Failure {
                stats,
                seed: self.seed,
                step: self.step,
                message,
                trace: self.trace.into_iter().collect(),
            }),
        }
    }

    fn start(&mut self) {
        self.processes = (0..self.config.processes).map(|_| self.world.mount()).collect();
        self.processes[0].mkdir("/d", 0o755).expect("mkdir /d on an empty memory store");
    }

    fn finish_stats(&mut self) -> Stats {
        self.stats.faults = self.world.injected();
        self.stats
    }

    pub(crate) fn note(&mut self, line: String) {
        if self.trace.len() == TRACE_STEPS {
            self.trace.pop_front();
        }
        self.trace.push_back(format!("{:>4} {line}", self.step));
    }

    fn run_steps(&mut self) -> Result<(), String> {
        for step in 1..=self.config.steps {
            self.step = step;
            self.stats.steps += 1;
            self.world.tick();
            if self.rng.chance(self.config.crash_percent) {
                self.crash_and_check()?;
                continue;
            }
            let armed = self.rng.chance(self.config.fault_percent);
            if armed {
                let backend = self.rng.below(self.config.backends as u64) as usize;
                let op = *self.rng.pick(&FAULT_OPS);
                let action = match self.rng.below(4) {
                    0 => FaultAction::Eio,
                    1 => FaultAction::Enospc,
                    2 => FaultAction::ShortWrite(self.rng.below(64) as usize),
                    _ => FaultAction::TornAppend,
                };
                self.world.arm(backend, op, action);
                self.note(format!("arm {action:?} on next {op} of backend {backend}"));
            }
            self.take_step(Sim::one_step)?;
            if !armed && self.rng.chance(3) {
                self.quiesce_and_check()?;
            }
        }
        self.crash_and_check()
    }

    /// Runs one step with whatever fault is armed, then disarms: an error
    /// is a broken promise unless the fault fired during the step.
    pub(crate) fn take_step(
        &mut self,
        step: impl FnOnce(&mut Self) -> Result<(), Unexpected>,
    ) -> Result<(), String> {
        let before = self.world.injected();
        self.touched = None;
        let outcome = step(self);
        let fired = self.world.injected() > before;
        self.world.disarm();
        if let Some(message) = self.broken.take() {
            return Err(message);
        }
        match outcome {
            Ok(()) => {}
            Err(Unexpected(message)) if !fired => return Err(message),
            Err(Unexpected(message)) => {
                self.note(format!("  (after an injected fault) {message}"));
                self.taint();
            }
        }
        Ok(())
    }

    /// A failed call may have retired a writer's logs and lost records
    /// other handles of the same process acknowledged (a read or stat
    /// flushes every writer's buffered index; an open with O_TRUNC syncs
    /// its truncate record): each such handle's next
    /// sync or close may report it, and its unsynced writes are in doubt.
    fn taint(&mut self) {
        let Some((process, file)) = self.touched else { return };
        for pending in self.unpublished.values_mut() {
            if pending.processes.contains(&process) {
                pending.uncertain = true;
            }
        }
        // small_file: a flush carries every record of the process's
        // directory, so its failure loses other files' records too.
        let deferred = self.deferred_names();
        for handle in &mut self.handles {
            if handle.process == process && (handle.file == file || deferred) {
                handle.failed = true;
            }
        }
        if deferred {
            // Each small_file handle writes through its own session, so a
            // later sync or close of another handle does not cover what
            // the failure lost: every unsynced write of the process is in
            // doubt.
            self.pending.retain(|&(pending_process, _), _| pending_process != process);
        }
    }

    fn one_step(&mut self) -> Result<(), Unexpected> {
        match self.rng.below(100) {
            0..=14 => self.open(),
            15..=44 => self.write(),
            45..=59 => self.read(),
            60..=67 => self.sync(),
            68..=75 => self.close(),
            76..=80 => self.truncate(),
            81..=86 => self.rename(),
            87..=90 => self.unlink(),
            91..=94 => self.flatten(),
            _ => self.stat(),
        }
    }

    fn open(&mut self) -> Result<(), Unexpected> {
        let process = self.rng.below(self.processes.len() as u64) as usize;
        let name = *self.rng.pick(&NAMES);
        let (read, write) = match self.rng.below(3) {
            0 => (true, false),
            1 => (false, true),
            _ => (true, true),
        };
        let truncate = write && self.rng.chance(10);
        self.open_with(process, name, read, write, truncate)
    }

    /// Opens `name`; a writer also creates it.
    pub(crate) fn open_with(
        &mut self,
        process: usize,
        name: &str,
        read: bool,
        write: bool,
        truncate: bool,
    ) -> Result<(), Unexpected> {
        let flags = OpenFlags { read, write, create: write, truncate, ..OpenFlags::default() };
        let unseen = self.unseen_by(name, process);
        if unseen && flags.truncate {
            // Another process's unpublished create and this one's would
            // each make a file; which one the name keeps is the stamps'.
            return Ok(());
        }
        let writer = self.next_writer;
        self.next_writer += 1;
        let existed = self.names.get(name).copied();
        self.note(format!("p{process} open {name} {flags:?} writer {writer}"));
        let result = self.processes[process].open(name, flags, 0o644, writer);
        let file = match existed {
            Some(file) => file,
            None if flags.create => {
                self.files.push(FileModel::default());
                self.files.len() - 1
            }
            None => {
                return match result {
                    Err(error) if error.kind() == ErrorKind::NotFound => Ok(()),
                    Err(error) => Err(unexpected(format!("open of absent {name}: {error}"))),
                    Ok(_) => Err(unexpected(format!("{name} opened, but it was never created"))),
                };
            }
        };
        if unseen && !flags.create {
            // The file is only in another process's unpublished records.
            return match result {
                Err(error) if error.kind() == ErrorKind::NotFound => Ok(()),
                Err(error) => Err(unexpected(format!("open {name}: {error}"))),
                Ok(handle) => {
                    self.note(format!("  {name} found before its create was published"));
                    handle.close().map_err(|error| unexpected(format!("close {name}: {error}")))
                }
            };
        }
        // An open with O_TRUNC syncs a truncate record through a writer of
        // the process's open file; if that fails, the process's other
        // handles on the file may report it too (as every descriptor open
        // when a write-back failed sees it at its next fsync on Linux).
        self.touched = Some((process, file));
        if flags.truncate {
            let seq = self.step;
            self.files[file].events.push(Event {
                seq,
                kind: EventKind::Truncate { size: 0 },
                durable: false,
                visible: false,
                process,
                published: None,
            });
        }
        match result {
            Ok(handle) => {
                if let Some(old) = self.unsettled.remove(name) {
                    // A crash may bring back the file a failed unlink or
                    // rename took from the name, and this open's file
                    // with it (an open-or-create binds to it).
                    self.unpublished.insert(
                        name.to_owned(),
                        Unpublished { processes: BTreeSet::new(), before: Some(old), uncertain: true },
                    );
                }
                let before = self.names.insert(name.to_owned(), file);
                if self.deferred_names() && flags.create && (existed.is_none() || unseen) {
                    let before =
                        if unseen { self.unpublished.get(name).and_then(|u| u.before) } else { before };
                    let pending = self.unpublished.entry(name.to_owned()).or_insert_with(|| Unpublished {
                        processes: BTreeSet::new(),
                        before,
                        uncertain: false,
                    });
                    pending.processes.insert(process);
                }
                // A new handle joins the process's open file, and any loss
                // it has yet to report.
                let failed = self.handles.iter().any(|h| h.process == process && h.file == file && h.failed);
                // An open records something (so its close publishes) when
                // it truncates or makes the file; one that finds the file
                // records nothing until it writes.
                let dirty = flags.truncate || (flags.create && (existed.is_none() || unseen));
                self.handles.push(Handle {
                    process,
                    file,
                    handle,
                    failed,
                    readable: read,
                    writable: write,
                    dirty,
                });
                Ok(())
            }
            Err(error) => {
                if existed.is_none() {
                    self.settle_name(process, name, file)?;
                }
                Err(unexpected(format!("open {name}: {error}")))
            }
        }
    }

    /// After a failed create: the name holds the new file or nothing, and
    /// a stat says which (on small_file, the creating process's stat: a
    /// create it recorded is its own until published).
    fn settle_name(&mut self, process: usize, name: &str, file: FileId) -> Result<(), Unexpected> {
        match self.processes[if self.deferred_names() { process } else { 0 }].stat(name) {
            Ok(_) if self.deferred_names() && self.names.get(name).is_some_and(|&f| f != file) => Ok(()),
            Ok(_) => {
                let before = self.names.insert(name.to_owned(), file);
                if self.deferred_names() {
                    let pending = self.unpublished.entry(name.to_owned()).or_insert_with(|| Unpublished {
                        processes: BTreeSet::new(),
                        before,
                        uncertain: false,
                    });
                    pending.processes.insert(process);
                }
                Ok(())
            }
            Err(error) if error.kind() == ErrorKind::NotFound => {
                if !self.deferred_names() {
                    self.names.remove(name);
                }
                Ok(())
            }
            Err(error) => Err(unexpected(format!("stat {name} after a failed call: {error}"))),
        }
    }

    fn pick_handle(&mut self, writable: bool) -> Option<usize> {
        let candidates: Vec<usize> =
            (0..self.handles.len()).filter(|&i| !writable || self.handles[i].writable).collect();
        (!candidates.is_empty()).then(|| *self.rng.pick(&candidates))
    }

    fn write(&mut self) -> Result<(), Unexpected> {
        let Some(index) = self.pick_handle(true) else { return self.open() };
        let length = match self.rng.below(4) {
            0 => 1 + self.rng.below(16),
            1 => 512,
            2 => 1 + self.rng.below(2048),
            _ => 100,
        };
        // Strided and sequential offsets make patterns; random ones overlap.
        let offset = match self.rng.below(3) {
            0 => self.rng.below(MAX_OFFSET),
            _ => length * self.rng.below(MAX_OFFSET / length),
        };
        self.touched = Some((self.handles[index].process, self.handles[index].file));
        self.write_with(index, offset, length)
    }

    pub(crate) fn write_with(&mut self, index: usize, offset: u64, length: u64) -> Result<(), Unexpected> {
        let seq = self.step;
        let Some(handle) = self.handles.get(index) else { return Ok(()) };
        let (file, process) = (handle.file, handle.process);
        self.handles[index].dirty = true;
        self.note(format!("h{index} (p{process} file {file}) write {length} @ {offset}"));
        let result = self.handles[index].handle.write(&data_of(seq, length as usize), offset);
        let event = Event {
            seq,
            kind: EventKind::Write { offset, length },
            durable: false,
            visible: false,
            process,
            published: None,
        };
        self.files[file].events.push(event);
        self.stats.bytes_written += length;
        match result {
            Ok(written) if written as u64 == length => {
                let event_index = self.files[file].events.len() - 1;
                self.pending.entry((process, file)).or_default().push(event_index);
                Ok(())
            }
            Ok(written) => Err(unexpected(format!("short write: {written} of {length}"))),
            // small_file: a handle whose records a failed flush lost (its
            // file's create among them) fails later calls with that error.
            Err(error) if self.handles[index].failed && self.deferred_names() => {
                self.note(format!("  write reports an earlier failure: {error}"));
                Ok(())
            }
            Err(error) => {
                self.handles[index].failed = true;
                Err(unexpected(format!("write: {error}")))
            }
        }
    }

    fn read(&mut self) -> Result<(), Unexpected> {
        let index = if self.rng.chance(50) { self.pick_handle(false) } else { None };
        let length = 1 + self.rng.below(4096) as usize;
        let offset = self.rng.below(MAX_OFFSET);
        let mut buffer = vec![0u8; length];
        let (file, got) = match index {
            Some(index) => {
                let handle = &self.handles[index];
                if !handle.readable {
                    return Ok(());
                }
                let file = handle.file;
                self.touched = Some((handle.process, file));
                self.note(format!("h{index} read {length} @ {offset}"));
                let got = self.handles[index].handle.read(&mut buffer, offset);
                if let Err(error) = &got
                    && self.handles[index].failed
                    && self.deferred_names()
                {
                    // A small_file read publishes the handle's writes
                    // first, and so reports a flush that lost them.
                    self.note(format!("  read reports an earlier failure: {error}"));
                    return Ok(());
                }
                (file, got)
            }
            None => {
                let Some((name, file)) = self.pick_name() else { return Ok(()) };
                let process = self.rng.below(self.processes.len() as u64) as usize;
                self.touched = Some((process, file));
                self.note(format!("p{process} open {name} read-only, read {length} @ {offset}, close"));
                let result =
                    self.processes[process].open(&name, OpenFlags::RDONLY, 0, 0).and_then(|handle| {
                        let got = handle.read(&mut buffer, offset);
                        handle.close()?;
                        got
                    });
                if self.unseen_by(&name, process) {
                    // Not created yet for this process, or another file.
                    return match result {
                        Err(error) if error.kind() != ErrorKind::NotFound => {
                            Err(unexpected(format!("read {name}: {error}")))
                        }
                        _ => Ok(()),
                    };
                }
                (file, result)
            }
        };
        let got = got.map_err(|error| unexpected(format!("read {length} @ {offset}: {error}")))?;
        for (i, &value) in buffer[..got].iter().enumerate() {
            let at = offset + i as u64;
            if !self.files[file].ever_written(at, value) {
                return Err(Unexpected(format!(
                    "read of file {file} returned {value:#04x} at offset {at}, which no write ever put there"
                )));
            }
        }
        Ok(())
    }

    fn pick_name(&mut self) -> Option<(String, FileId)> {
        let names: Vec<(String, FileId)> = self.names.iter().map(|(n, f)| (n.clone(), *f)).collect();
        (!names.is_empty()).then(|| self.rng.pick(&names).clone())
    }

    /// Marks what a completed sync (`durable`) or last close made visible:
    /// every write acknowledged through this process's handles on the file.
    fn settle_pending(&mut self, process: usize, file: FileId, durable: bool) {
        for event in self.pending.remove(&(process, file)).unwrap_or_default() {
            let event = &mut self.files[file].events[event];
            event.visible = true;
            event.published.get_or_insert(self.step);
            event.durable |= durable;
        }
    }

    fn sync(&mut self) -> Result<(), Unexpected> {
        let Some(index) = self.pick_handle(true) else { return Ok(()) };
        self.sync_with(index)
    }

    pub(crate) fn sync_with(&mut self, index: usize) -> Result<(), Unexpected> {
        if index >= self.handles.len() {
            return Ok(());
        }
        self.touched = Some((self.handles[index].process, self.handles[index].file));
        self.note(format!("h{index} sync"));
        match self.handles[index].handle.sync() {
            Ok(()) => {
                let (process, file) = (self.handles[index].process, self.handles[index].file);
                self.settle_pending(process, file, true);
                self.handles[index].dirty = false;
                self.published_with(process, file);
                Ok(())
            }
            Err(error) => {
                // As with fsync: the failure is reported once and the
                // writes it covers are in doubt for good; a later sync that
                // succeeds says nothing about them.
                let (process, file) = (self.handles[index].process, self.handles[index].file);
                self.pending.remove(&(process, file));
                let handle = &mut self.handles[index];
                let earlier = handle.failed;
                handle.failed = true;
                if earlier {
                    self.note(format!("  sync reports an earlier failure: {error}"));
                    return Ok(());
                }
                Err(unexpected(format!("sync: {error}")))
            }
        }
    }

    fn close(&mut self) -> Result<(), Unexpected> {
        let Some(index) = self.pick_handle(false) else { return Ok(()) };
        self.close_handle(index)
    }

    pub(crate) fn close_handle(&mut self, index: usize) -> Result<(), Unexpected> {
        if index >= self.handles.len() {
            return Ok(());
        }
        self.touched = Some((self.handles[index].process, self.handles[index].file));
        self.note(format!("h{index} close"));
        let handle = self.handles.swap_remove(index);
        let (process, file, failed, dirty) = (handle.process, handle.file, handle.failed, handle.dirty);
        let last = !self.handles.iter().any(|h| h.process == process && h.file == file);
        let result = handle.handle.close();
        if last {
            // Finished either way: no later sync reaches these writes.
            let pending = self.pending.remove(&(process, file)).unwrap_or_default();
            if result.is_ok() {
                for event in pending {
                    let event = &mut self.files[file].events[event];
                    event.visible = true;
                    event.published.get_or_insert(self.step);
                }
            }
        }
        if result.is_ok() && dirty {
            self.published_with(process, file);
        }
        if result.is_err() && self.deferred_names() {
            // Its own session's writes are lost; another handle's close
            // must not count them as published.
            self.pending.remove(&(process, file));
        }
        match result {
            Ok(()) => Ok(()),
            Err(_) if failed => Ok(()),
            Err(error) => Err(unexpected(format!("close: {error}"))),
        }
    }

    fn truncate(&mut self) -> Result<(), Unexpected> {
        let size = if self.rng.chance(30) { 0 } else { self.rng.below(MAX_OFFSET) };
        let seq = self.step;
        let (file, result, failed_before) = match self.pick_handle(true).filter(|_| self.rng.chance(50)) {
            Some(index) => {
                let failed_before = self.handles[index].failed;
                self.touched = Some((self.handles[index].process, self.handles[index].file));
                self.note(format!("h{index} truncate {size}"));
                self.handles[index].dirty = true;
                (self.handles[index].file, self.handles[index].handle.truncate(size), failed_before)
            }
            None => {
                let Some((name, _)) = self.pick_name() else { return Ok(()) };
                let process = self.rng.below(self.processes.len() as u64) as usize;
                return self.truncate_path(process, &name, size);
            }
        };
        let process = self.touched.map_or(usize::MAX, |(process, _)| process);
        self.files[file].events.push(Event {
            seq,
            kind: EventKind::Truncate { size },
            durable: false,
            visible: false,
            process,
            published: None,
        });
        match result {
            Err(error) if failed_before && self.deferred_names() => {
                self.note(format!("  truncate reports an earlier failure: {error}"));
                Ok(())
            }
            result => result.map_err(|error| unexpected(format!("truncate {size}: {error}"))),
        }
    }

    pub(crate) fn truncate_path(&mut self, process: usize, name: &str, size: u64) -> Result<(), Unexpected> {
        let Some(&file) = self.names.get(name) else { return Ok(()) };
        if self.unseen_by(name, process) {
            return Ok(());
        }
        self.touched = Some((process, file));
        self.note(format!("p{process} truncate {name} {size}"));
        let result = self.processes[process].truncate(name, size);
        let seq = self.step;
        self.files[file].events.push(Event {
            seq,
            kind: EventKind::Truncate { size },
            durable: false,
            visible: false,
            process,
            published: None,
        });
        result.map_err(|error| unexpected(format!("truncate {name} {size}: {error}")))
    }

    /// Whether creates stay in their process until published (small_file).
    fn deferred_names(&self) -> bool {
        self.config.workload == Workload::SmallFile
    }

    /// Whether `name` may be bound, for `process`, to a file other than
    /// the model's (or none): another process's create of it is not
    /// published, or a failed flush may have lost one.
    fn unseen_by(&self, name: &str, process: usize) -> bool {
        self.unpublished
            .get(name)
            .is_some_and(|pending| pending.uncertain || !pending.processes.contains(&process))
    }

    /// `process` published its records of `name`'s directory (a sync,
    /// the close of a handle that changed something, an unlink or a
    /// rename there): its creates there are everyone's now.
    fn published(&mut self, process: usize, name: &str) {
        let dir = directory_of(name);
        self.unpublished.retain(|pending_name, pending| {
            pending.uncertain || directory_of(pending_name) != dir || !pending.processes.contains(&process)
        });
    }

    /// Like [`published`](Self::published), for the directory of `file`
    /// (where the model has it; a file with no name publishes nothing the
    /// model tracks).
    fn published_with(&mut self, process: usize, file: FileId) {
        let names: Vec<String> =
            self.names.iter().filter(|&(_, &f)| f == file).map(|(name, _)| name.clone()).collect();
        for name in names {
            self.published(process, &name);
        }
    }

    /// A failed small_file unlink or rename took `name` away from `file`
    /// in the model; a crash decides whether it stays away.
    fn unsettled_removal(&mut self, name: &str, file: FileId) {
        self.unsettled.insert(name.to_owned(), file);
    }

    /// Whether files are containers (shared_file), which flatten and
    /// recover work on.
    fn containers(&self) -> bool {
        self.config.workload == Workload::SharedFile
    }

    fn is_open(&self, file: FileId) -> bool {
        self.handles.iter().any(|h| h.file == file)
    }

    fn rename(&mut self) -> Result<(), Unexpected> {
        let Some((from, file)) = self.pick_name() else { return Ok(()) };
        let to = self.rng.pick(&NAMES).to_string();
        if to == from {
            return Ok(());
        }
        let replaced = self.names.get(&to).copied();
        if !self.config.rename_open_files && (self.is_open(file) || replaced.is_some_and(|f| self.is_open(f)))
        {
            return Ok(());
        }
        let process = self.rng.below(self.processes.len() as u64) as usize;
        self.rename_with(process, &from, &to)
    }

    pub(crate) fn rename_with(&mut self, process: usize, from: &str, to: &str) -> Result<(), Unexpected> {
        let (from, to) = (from.to_owned(), to.to_owned());
        let Some(&file) = self.names.get(&from) else { return Ok(()) };
        if self.unseen_by(&from, process)
            || self.unseen_by(&to, process)
            || self.unpublished.contains_key(&to)
        {
            // The process does not know the file (or the target) yet, or
            // the target's binding is not settled.
            return Ok(());
        }
        let replaced = self.names.get(&to).copied();
        self.touched = Some((process, file));
        self.note(format!("p{process} rename {from} -> {to} (file {file} over {replaced:?})"));
        match self.processes[process].rename(&from, &to) {
            Ok(()) => {
                self.published(process, &from);
                self.published(process, &to);
                self.names.remove(&from);
                self.names.insert(to, file);
                Ok(())
            }
            Err(error) => {
                // rename(2) that fails changes nothing: the file stays at
                // its old name and the target as it was. (One that went
                // through despite reporting an error, as over NFS, has the
                // file at the new name only.) Anything else is a broken
                // promise even though a fault explains the error.
                let at_from = self.exists(process, &from)?;
                let at_to = self.exists(process, &to)?;
                match (at_from, at_to) {
                    (true, at_to) if at_to == replaced.is_some() => {}
                    (false, true) => {
                        self.names.remove(&from);
                        self.names.insert(to.clone(), file);
                        if self.deferred_names() {
                            // Its record may be in the log unsynced: a
                            // crash can undo it.
                            self.unsettled_removal(&from, file);
                            let pending = self.unpublished.entry(to.clone()).or_insert_with(|| Unpublished {
                                processes: BTreeSet::new(),
                                before: replaced,
                                uncertain: true,
                            });
                            pending.uncertain = true;
                        }
                    }
                    (true, at_to) => {
                        let what = if at_to { "made a file appear at" } else { "removed the file at" };
                        self.broken = Some(format!("rename {from} -> {to} failed ({error}) but {what} {to}"));
                    }
                    (false, false) => {
                        self.broken = Some(format!(
                            "rename {from} -> {to} failed ({error}) and left the file at neither name"
                        ));
                    }
                }
                Err(unexpected(format!("rename {from} -> {to}: {error}")))
            }
        }
    }

    /// Whether a file is at `name`, as `process` knows it on small_file
    /// (its own unpublished changes count), else as every process does.
    fn exists(&self, process: usize, name: &str) -> Result<bool, Unexpected> {
        let asker = if self.deferred_names() { process } else { 0 };
        match self.processes[asker].stat(name) {
            Ok(attr) if attr.kind == FileKind::File => Ok(true),
            Ok(attr) => Err(Unexpected(format!("{name} is a {:?}, not a file", attr.kind))),
            Err(error) if error.kind() == ErrorKind::NotFound => Ok(false),
            Err(error) => Err(Unexpected(format!("stat {name} after a failed call: {error}"))),
        }
    }

    fn unlink(&mut self) -> Result<(), Unexpected> {
        let Some((name, file)) = self.pick_name() else { return Ok(()) };
        if !self.config.rename_open_files && self.is_open(file) {
            return Ok(());
        }
        let process = self.rng.below(self.processes.len() as u64) as usize;
        self.unlink_with(process, &name)
    }

    pub(crate) fn unlink_with(&mut self, process: usize, name: &str) -> Result<(), Unexpected> {
        let name = name.to_owned();
        if !self.names.contains_key(&name) || self.unseen_by(&name, process) {
            return Ok(());
        }
        self.touched = self.names.get(&name).map(|&file| (process, file));
        self.note(format!("p{process} unlink {name}"));
        match self.processes[process].unlink(&name) {
            Ok(()) => {
                self.published(process, &name);
                self.names.remove(&name);
                Ok(())
            }
            Err(error) => {
                if !self.exists(process, &name)?
                    && let Some(file) = self.names.remove(&name)
                    && self.deferred_names()
                {
                    self.unsettled_removal(&name, file);
                }
                Err(unexpected(format!("unlink {name}: {error}")))
            }
        }
    }

    fn flatten(&mut self) -> Result<(), Unexpected> {
        let Some((name, file)) = self.pick_name() else { return Ok(()) };
        let process = self.rng.below(self.processes.len() as u64) as usize;
        self.touched = Some((process, file));
        self.flatten_with(process, &name)
    }

    pub(crate) fn flatten_with(&mut self, process: usize, name: &str) -> Result<(), Unexpected> {
        self.note(format!("p{process} flatten {name}"));
        match self.processes[process].flatten(name) {
            Ok(_) => Ok(()),
            // Refused, by design, while an open record says a writer has
            // the file open: a handle here, or one whose close failed.
            Err(error) if error.kind() == ErrorKind::InvalidInput => {
                self.note(format!("  flatten refused: {error}"));
                Ok(())
            }
            // Only containers have an index to flatten.
            Err(error) if !self.containers() && error.kind() == ErrorKind::Unsupported => Ok(()),
            Err(error) if error.kind() == ErrorKind::NotFound && self.unseen_by(name, process) => Ok(()),
            Err(error) => Err(unexpected(format!("flatten {name}: {error}"))),
        }
    }

    fn stat(&mut self) -> Result<(), Unexpected> {
        let Some((name, file)) = self.pick_name() else { return Ok(()) };
        let process = self.rng.below(self.processes.len() as u64) as usize;
        self.touched = Some((process, file));
        self.note(format!("p{process} stat {name}"));
        // A name only another process knows yet may be missing here, or
        // another file: neither is checked.
        let unseen = self.unseen_by(&name, process);
        let attr = match self.processes[process].stat(&name) {
            Err(error) if error.kind() == ErrorKind::NotFound && unseen => return Ok(()),
            result => result.map_err(|error| unexpected(format!("stat {name}: {error}")))?,
        };
        if unseen {
            return Ok(());
        }
        let extent = self.files[file].max_extent();
        if attr.size > extent {
            return Err(Unexpected(format!(
                "stat {name} says {} bytes; no write or truncate reached past {extent}",
                attr.size
            )));
        }
        Ok(())
    }

    /// Closes every handle (faults off), then checks every file as after a
    /// crash: closed means durable.
    fn quiesce_and_check(&mut self) -> Result<(), String> {
        self.note("quiesce: close every handle, then check".into());
        while !self.handles.is_empty() {
            self.close_handle(self.handles.len() - 1).map_err(|Unexpected(message)| message)?;
        }
        self.check_all(false)
    }

    pub(crate) fn crash_and_check(&mut self) -> Result<(), String> {
        self.world.freeze();
        self.handles.clear();
        self.processes.clear();
        self.pending.clear();
        // What was only visible (closed, not synced) may be gone now.
        for event in self.files.iter_mut().flat_map(|file| file.events.iter_mut()) {
            event.visible = event.durable;
        }
        self.stats.torn_tails += self.world.crash(&mut self.rng, self.config.tear_on_crash);
        self.stats.crashes += 1;
        self.note("crash: every process gone, unsynced bytes lost or torn".into());
        self.start_after_crash();
        self.settle_unpublished_after_crash()?;
        self.check_all(true)
    }

    /// After a crash on small_file, what the model could not tell is
    /// looked at: a name a failed unlink or rename took away may be back;
    /// a create the model could not tell was published (a read or a write
    /// a second after the last publishes too) may have survived, and the
    /// name then holds the new file or the one before it, with no byte of
    /// either promised (neither was synced).
    fn settle_unpublished_after_crash(&mut self) -> Result<(), String> {
        let checker = self.world.mount();
        for (name, file) in std::mem::take(&mut self.unsettled) {
            if self.names.contains_key(&name) {
                continue;
            }
            match checker.stat(&name) {
                Ok(_) => {
                    self.note(format!("  {name}: a failed removal of it did not survive the crash"));
                    self.names.insert(name, file);
                }
                Err(error) if error.kind() == ErrorKind::NotFound => {}
                Err(error) => return Err(format!("stat {name} after a crash: {error}")),
            }
        }
        for (name, pending) in std::mem::take(&mut self.unpublished) {
            let there = match checker.stat(&name) {
                Ok(_) => true,
                Err(error) if error.kind() == ErrorKind::NotFound => false,
                Err(error) => return Err(format!("stat {name} after a crash: {error}")),
            };
            let Some(&file) = self.names.get(&name) else { continue };
            if !there {
                // Neither the create nor a file before it was made durable.
                self.note(format!("  {name}: its unpublished create is gone"));
                self.names.remove(&name);
                continue;
            }
            let mut either = FileModel::default();
            for model in pending.before.into_iter().chain([file]) {
                either
                    .events
                    .extend(self.files[model].events.iter().map(|event| Event { durable: false, ..*event }));
            }
            either.events.sort_by_key(|event| event.seq);
            self.files.push(either);
            self.names.insert(name, self.files.len() - 1);
        }
        Ok(())
    }

    fn start_after_crash(&mut self) {
        self.processes = (0..self.config.processes).map(|_| self.world.mount()).collect();
    }

    /// The promises, file by file: `recover --fix` leaves nothing for a
    /// second `recover --verify` to find; stat and a full read agree; the
    /// contents are what the model allows; the namespace is the model's.
    fn check_all(&mut self, recover: bool) -> Result<(), String> {
        self.stats.checks += 1;
        let checker = self.world.mount();
        let names: Vec<(String, FileId)> = self.names.iter().map(|(n, f)| (n.clone(), *f)).collect();
        if recover {
            // Removed files whose deletion a fault or the crash cut short
            // are finished by recover of their directory, file or not.
            for dir in ["/", "/d"] {
                checker
                    .recover_directory(dir, true)
                    .map_err(|error| format!("recover --fix {dir}: {error}"))?;
            }
            for memory in &self.world.memories {
                for dir in ["", "d"] {
                    let Ok(entries) = memory.list(&StorePath::parse(dir).expect("a valid path")) else {
                        continue;
                    };
                    if let Some(left) = entries.iter().find(|entry| entry.name.starts_with(".plfs-reclaim."))
                    {
                        return Err(format!(
                            "recover --fix /{dir} left a removed file's pieces: {}/{dir}/{}",
                            memory.url(),
                            left.name
                        ));
                    }
                }
            }
        }
        for (name, file) in &names {
            if self.unpublished.contains_key(name) {
                // A create whose publishing failed: here or not.
                continue;
            }
            // recover repairs containers; a file of the other workloads
            // is a backend file or a name in its directory's logs, which
            // the directory's recover above covers.
            if recover && self.containers() {
                checker.recover(name, true).map_err(|error| format!("recover --fix {name}: {error}"))?;
                let report = checker
                    .recover_with(name, false, true)
                    .map_err(|error| format!("recover --verify {name} after --fix: {error}"))?;
                if !report.findings.is_empty() {
                    return Err(format!(
                        "recover --verify {name} after --fix still finds {:?}",
                        report.findings
                    ));
                }
            }
            let attr = checker.stat(name).map_err(|error| format!("stat {name} (file {file}): {error}"))?;
            let handle = checker
                .open(name, OpenFlags::RDONLY, 0, 0)
                .map_err(|error| format!("open {name} (file {file}): {error}"))?;
            let mut contents = vec![0u8; attr.size as usize + 4096];
            let mut got = 0;
            loop {
                let count = handle
                    .read(&mut contents[got..], got as u64)
                    .map_err(|error| format!("read {name} (file {file}) @ {got}: {error}"))?;
                if count == 0 {
                    break;
                }
                got += count;
                if got == contents.len() {
                    contents.resize(got + 4096, 0);
                }
            }
            contents.truncate(got);
            handle.close().map_err(|error| format!("close {name}: {error}"))?;
            if got as u64 != attr.size {
                return Err(format!("stat {name} says {} bytes but reads return {got}", attr.size));
            }
            self.files[*file]
                .check(&contents, recover)
                .map_err(|error| format!("{name} (file {file}): {error}"))?;
        }
        let mut listed = BTreeSet::new();
        for dir in ["/", "/d"] {
            for entry in checker.readdir(dir).map_err(|error| format!("readdir {dir}: {error}"))? {
                if entry.kind == FileKind::File {
                    let prefix = if dir == "/" { "" } else { dir };
                    listed.insert(format!("{prefix}/{}", entry.name));
                }
            }
        }
        let expected: BTreeSet<String> =
            self.names.keys().filter(|name| !self.unpublished.contains_key(*name)).cloned().collect();
        listed.retain(|name| !self.unpublished.contains_key(name));
        if listed != expected {
            return Err(format!("readdir lists {listed:?}, the model has {expected:?}"));
        }
        Ok(())
    }
}

/// The directory part of a simulated name ("/" or "/d").
fn directory_of(name: &str) -> &str {
    match name.rfind('/') {
        Some(0) | None => "/",
        Some(at) => &name[..at],
    }
}

/// An error from a call: a bug unless an injected fault explains it.
pub(crate) struct Unexpected(pub(crate) String);

fn unexpected(message: String) -> Unexpected {
    Unexpected(message)
}

/// The calls the random faults strike.
const FAULT_OPS: [Op; 14] = [
    Op::Append,
    Op::Append,
    Op::Sync,
    Op::Close,
    Op::CreateAppend,
    Op::CreateNew,
    Op::CreateDir,
    Op::Replace,
    Op::Rename,
    Op::RemoveFile,
    Op::RemoveDir,
    Op::List,
    Op::OpenRead,
    Op::ReadAt,
];

#[cfg(test)]
mod tests {
    use super::*;

    /// An open with O_TRUNC whose truncate record fails to sync reports it,
    /// and the close of the process's other handle on the file may report
    /// it again: that is a loss reported twice, not a broken promise
    /// (plfs-sim seeds 3223, 7661, 9751, 15611, 15920 of 20,000).
    #[test]
    fn a_failed_truncating_open_may_fail_the_processs_other_handles_close() {
        let config = Config { steps: 0, processes: 1, backends: 1, ..Config::default() };
        let tuning = Tuning { threadpool_size: 1, num_hostdirs: 1, ..Tuning::default() };
        let mut sim = Sim::new(1, &config, tuning);
        sim.take_step(|sim| sim.open_with(0, "/f0", true, true, false)).unwrap();
        sim.take_step(|sim| sim.write_with(0, 0, 100)).unwrap();
        sim.take_step(|sim| sim.sync_with(0)).unwrap();
        sim.world.arm(0, Op::Sync, FaultAction::Eio);
        let injected = sim.world.injected();
        sim.take_step(|sim| sim.open_with(0, "/f0", false, true, true)).unwrap();
        assert_eq!(sim.world.injected(), injected + 1, "the truncate's sync failed");
        assert_eq!(sim.handles.len(), 1, "the open failed");
        sim.take_step(|sim| sim.close_handle(0)).unwrap();
        sim.quiesce_and_check().unwrap();
    }
}
