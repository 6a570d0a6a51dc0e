//! The files open in this process, by logical path: the façade's one
//! registry for every workload. It counts each path's opens, keeps what
//! the opens of a file share (the workload's [`SharedFile`], where it has
//! one), moves entries when a file or a directory above it is renamed,
//! keeps a replaced file's entry at its hidden name until the last close,
//! and holds names while a rename or unlink moves their storage.
//!
//! Each entry has a gate: every call through a handle holds it shared; a
//! rename or unlink holds the gates of the files at its names exclusively
//! from before the storage switches until the entries know their new
//! paths. Without it a read between the switch and the move of the entry
//! loaded the index of the file that took the name (wrong bytes) or chased
//! logs that had moved (ENOENT on an open descriptor).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::load::LoadedIndex;
use crate::mount_state::MountState;
use crate::store::StorePath;
use crate::workload::{Opened, SharedFile, WorkloadFile};

/// One file open in this process: what its handles share.
#[derive(Debug)]
pub(super) struct OpenEntry {
    gate: RwLock<()>,
    /// Where the file is now; the registry moves it (under its tables'
    /// lock, which is taken first) and finds the entry by it at close.
    path: Mutex<StorePath>,
    /// The workload's state of the file, where its opens share one.
    shared: Option<Arc<dyn SharedFile>>,
    /// How many times the file moved: a handle of its own (a small file's)
    /// learns its new path at its next call (see `FileHandle::gated`).
    moves: AtomicU64,
}

impl OpenEntry {
    /// Held shared around every call through a handle.
    pub(super) fn gated(&self) -> RwLockReadGuard<'_, ()> {
        self.gate.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn shared(&self) -> Option<&dyn SharedFile> {
        self.shared.as_deref()
    }

    /// The file's logical path as it is now.
    pub(super) fn path(&self) -> StorePath {
        lock(&self.path).clone()
    }

    /// Moves so far; a handle that saw fewer asks [`path`](Self::path).
    pub(super) fn moves(&self) -> u64 {
        self.moves.load(Ordering::Acquire)
    }

    fn set_path(&self, path: StorePath) {
        if let Some(shared) = &self.shared {
            shared.moved(&path);
        }
        *lock(&self.path) = path;
        self.moves.fetch_add(1, Ordering::AcqRel);
    }
}

#[derive(Debug)]
struct Slot {
    entry: Arc<OpenEntry>,
    opens: usize,
    /// A rename replaced this file, or an unlink removed its name, while
    /// it was open here: it lives on at a hidden name until its last close
    /// here removes it.
    doomed: bool,
}

impl Slot {
    fn new(path: &StorePath, shared: Option<Arc<dyn SharedFile>>) -> Slot {
        let entry = OpenEntry {
            gate: RwLock::new(()),
            path: Mutex::new(path.clone()),
            shared,
            moves: AtomicU64::new(0),
        };
        Slot { entry: Arc::new(entry), opens: 0, doomed: false }
    }
}

/// Who holds a logical path while its storage may change under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Claim {
    /// Opens looking the file up and registering (shared).
    Opening(usize),
    /// A rename or unlink moving the file (exclusive).
    Moving,
}

#[derive(Debug, Default)]
struct Tables {
    slots: HashMap<StorePath, Slot>,
    claims: HashMap<StorePath, Claim>,
    /// Callers waiting on `released`: a claim given back wakes them only
    /// when there are some (a wake-up is a system call, once per open).
    waiters: usize,
}

/// What the end of one open found.
pub(super) enum Release {
    /// Other opens of the file remain here.
    Others,
    /// The file's last open here (or a detached one): its shared state
    /// finishes; `replaced` is the hidden path of a file a rename replaced,
    /// to remove now.
    Last { replaced: Option<StorePath> },
}

/// The open files and the paths a rename or unlink is moving: an open of
/// such a path waits for the move (it then finds the file the name has
/// after it), and a move waits for the opens of its paths to register, so
/// the entries of its paths hold still while it runs.
#[derive(Debug, Default)]
pub(super) struct OpenFiles {
    tables: Mutex<Tables>,
    released: Condvar,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl OpenFiles {
    fn lock(&self) -> MutexGuard<'_, Tables> {
        lock(&self.tables)
    }

    /// Waits for a claim to be given back, counted as a waiter meanwhile.
    fn wait<'a>(&'a self, mut tables: MutexGuard<'a, Tables>) -> MutexGuard<'a, Tables> {
        tables.waiters += 1;
        let mut tables = self.released.wait(tables).unwrap_or_else(PoisonError::into_inner);
        tables.waiters -= 1;
        tables
    }

    /// Waits until no move holds `path`, then holds it for an open: the
    /// file at the name as of one instant, no rename or unlink of the name
    /// runs until the open has registered.
    pub(super) fn claim_open(&self, path: &StorePath) -> ClaimGuard<'_> {
        let mut tables = self.lock();
        loop {
            match tables.claims.get_mut(path) {
                None => {
                    tables.claims.insert(path.clone(), Claim::Opening(1));
                    break;
                }
                Some(Claim::Opening(count)) => {
                    *count += 1;
                    break;
                }
                Some(Claim::Moving) => {
                    tables = self.wait(tables);
                }
            }
        }
        ClaimGuard { registry: self, paths: vec![path.clone()] }
    }

    /// Waits until nothing holds any of `paths`, then holds them all for a
    /// move, and returns the entries open at them now.
    pub(super) fn claim_move(&self, paths: &[&StorePath]) -> (ClaimGuard<'_>, Vec<Arc<OpenEntry>>) {
        let mut tables = self.lock();
        while paths.iter().any(|path| tables.claims.contains_key(*path)) {
            tables = self.wait(tables);
        }
        let mut held = Vec::with_capacity(paths.len());
        let mut open = Vec::new();
        for path in paths {
            if tables.claims.insert((*path).clone(), Claim::Moving).is_none() {
                held.push((*path).clone());
            }
            if let Some(slot) = tables.slots.get(*path) {
                open.push(slot.entry.clone());
            }
        }
        (ClaimGuard { registry: self, paths: held }, open)
    }

    /// [`claim_move`](Self::claim_move) for a directory being renamed: it
    /// waits until nothing holds a path below `dir`, then holds every open
    /// path below it.
    pub(super) fn claim_move_under(&self, dir: &StorePath) -> (ClaimGuard<'_>, Vec<Arc<OpenEntry>>) {
        let mut tables = self.lock();
        while tables.claims.keys().any(|path| path.starts_with(dir)) {
            tables = self.wait(tables);
        }
        let below: Vec<StorePath> =
            tables.slots.keys().filter(|path| path.starts_with(dir)).cloned().collect();
        let open = below.iter().map(|path| tables.slots[path].entry.clone()).collect();
        for path in &below {
            tables.claims.insert(path.clone(), Claim::Moving);
        }
        (ClaimGuard { registry: self, paths: below }, open)
    }

    /// Counts one more open of `path`, whose workload opened it as
    /// `opened`; the caller holds an open claim on `path`. Returns the
    /// entry and this open's handle. Close-to-open: an open sees what other
    /// hosts synced before it, even when the file was already open here,
    /// so a shared state is told (`reopened`, or `seed` with the `index` a
    /// collective open built).
    pub(super) fn join(
        &self,
        mount: &Arc<MountState>,
        path: &StorePath,
        opened: Opened,
        index: Option<LoadedIndex>,
    ) -> (Arc<OpenEntry>, Box<dyn WorkloadFile>) {
        let mut tables = self.lock();
        let (file, shared) = match opened {
            Opened::Own(file) => (file, None),
            Opened::Shared { state, .. } => {
                let existing = tables.slots.get(path).and_then(|slot| slot.entry.shared.clone());
                let shared = existing.unwrap_or_else(|| {
                    // The file's first open here. An entry without a shared
                    // state (a PLFS 2.5 file open here that a container has
                    // replaced since) is another file's: it goes on detached.
                    let shared = state(mount, path);
                    tables.slots.insert(path.clone(), Slot::new(path, Some(shared.clone())));
                    shared
                });
                (shared.clone().handle(), Some(shared))
            }
        };
        let slot = tables.slots.entry(path.clone()).or_insert_with(|| Slot::new(path, None));
        if let Some(shared) = shared {
            match index {
                Some(index) => shared.seed(index),
                None if slot.opens > 0 => shared.reopened(),
                None => {}
            }
        }
        slot.opens += 1;
        (slot.entry.clone(), file)
    }

    /// The entry open at `path`, if any.
    pub(super) fn get(&self, path: &StorePath) -> Option<Arc<OpenEntry>> {
        self.lock().slots.get(path).map(|slot| slot.entry.clone())
    }

    pub(super) fn is_open(&self, path: &StorePath) -> bool {
        self.lock().slots.contains_key(path)
    }

    /// An unlink of `path`: its handles here keep their entry, detached,
    /// and finish at each close; a file created at the name later gets an
    /// entry of its own, never theirs.
    pub(super) fn detach(&self, path: &StorePath) {
        self.lock().slots.remove(path);
    }

    /// A rename moved the file at `source` to `target`; the file it
    /// replaced, if it was open here, lives on at `replaced` until its last
    /// close here, and its handles follow it there (they must never read
    /// or write the new file).
    pub(super) fn moved(&self, source: &StorePath, target: &StorePath, replaced: Option<StorePath>) {
        let mut tables = self.lock();
        if let Some(replaced) = replaced
            && let Some(mut slot) = tables.slots.remove(target)
        {
            slot.entry.set_path(replaced.clone());
            slot.doomed = true;
            tables.slots.insert(replaced, slot);
        }
        if let Some(slot) = tables.slots.remove(source) {
            slot.entry.set_path(target.clone());
            tables.slots.insert(target.clone(), slot);
        }
    }

    /// An unlink hid the file open at `path` at `hidden`: its handles
    /// follow it there, and its last close here removes it.
    pub(super) fn unlinked(&self, path: &StorePath, hidden: StorePath) {
        let mut tables = self.lock();
        if let Some(mut slot) = tables.slots.remove(path) {
            slot.entry.set_path(hidden.clone());
            slot.doomed = true;
            tables.slots.insert(hidden, slot);
        }
    }

    /// A file [`unlinked`](Self::unlinked) for a rename that then failed
    /// is back at `path`: its handles follow it, and their last close no
    /// longer removes it.
    pub(super) fn unhidden(&self, hidden: &StorePath, path: &StorePath) {
        let mut tables = self.lock();
        if let Some(mut slot) = tables.slots.remove(hidden) {
            slot.entry.set_path(path.clone());
            slot.doomed = false;
            tables.slots.insert(path.clone(), slot);
        }
    }

    /// Directory `source` was renamed to `target`: every file open below
    /// it follows.
    pub(super) fn moved_under(&self, source: &StorePath, target: &StorePath) {
        let mut tables = self.lock();
        let below: Vec<StorePath> =
            tables.slots.keys().filter(|path| path.starts_with(source)).cloned().collect();
        for path in below {
            let Some(slot) = tables.slots.remove(&path) else { continue };
            // Below `source`, so the rest is "" or "/…" of valid components.
            let rest = &path.as_str()[source.as_str().len()..];
            let moved = StorePath::parse(&format!("{}{rest}", target.as_str())).unwrap_or(path);
            slot.entry.set_path(moved.clone());
            tables.slots.insert(moved, slot);
        }
    }

    /// One open of `entry` ends.
    pub(super) fn release(&self, entry: &Arc<OpenEntry>) -> Release {
        let mut tables = self.lock();
        let path = entry.path();
        match tables.slots.get_mut(&path) {
            Some(slot) if Arc::ptr_eq(&slot.entry, entry) => {
                slot.opens -= 1;
                if slot.opens > 0 {
                    return Release::Others;
                }
                let doomed = tables.slots.remove(&path).is_some_and(|slot| slot.doomed);
                Release::Last { replaced: doomed.then_some(path) }
            }
            // Detached by an unlink: every close finishes what it can.
            _ => Release::Last { replaced: None },
        }
    }
}

/// Paths held by an open or a move, given back when it drops.
pub(super) struct ClaimGuard<'a> {
    registry: &'a OpenFiles,
    paths: Vec<StorePath>,
}

impl Drop for ClaimGuard<'_> {
    fn drop(&mut self) {
        let mut tables = self.registry.lock();
        for path in &self.paths {
            match tables.claims.get_mut(path) {
                Some(Claim::Opening(count)) if *count > 1 => *count -= 1,
                _ => {
                    tables.claims.remove(path);
                }
            }
        }
        // A waiter counted itself under the lock before it waited (the
        // wait lets the lock go atomically), so none is missed here.
        let waiting = tables.waiters > 0;
        drop(tables);
        if waiting {
            self.registry.released.notify_all();
        }
    }
}

/// Holds the gates of the files a move claimed, exclusively: every call
/// through their handles finished, none starts until the move is done
/// (closes too, so the entries of the claimed paths hold still).
pub(super) fn hold_gates(open: &[Arc<OpenEntry>]) -> Vec<RwLockWriteGuard<'_, ()>> {
    open.iter().map(|entry| entry.gate.write().unwrap_or_else(PoisonError::into_inner)).collect()
}
