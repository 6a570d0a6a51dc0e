//! Loading a file's merged index: from its flattened global index when that
//! is still valid, otherwise by reading every index log on every backend
//! (in parallel on the mount's read pool).

use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};

use crate::checksums::LogChecksums;
use crate::config::VerifyReads;
use crate::container::{self, LogLocation, MetaRecords};
use crate::error::{Error, ErrorKind, Result, ResultExt};
use crate::format::global_index::{CoveredLog, GlobalExtent, GlobalGroup, GlobalIndex, GlobalSlot};
use crate::format::index_log::Record;
use crate::index::{Extent, Group, LogRef, MergedIndex, Slot};
use crate::layout::{ContainerPaths, LogId, LogKind};
use crate::mount_state::MountState;
use crate::placement::{BackendId, HostdirId};
use crate::protection::{self, Pieces};
use crate::store::{StoreExt, StorePath};

/// Below this many index logs, they are read one after another.
const PARALLEL_INDEX_LOGS_MIN: usize = 8;

/// A merged index and the logs its `LogRef`s number (`logs[r.0]`).
#[derive(Debug)]
pub struct LoadedIndex {
    pub index: MergedIndex,
    pub logs: Vec<LogLocation>,
    /// Index records read (0 when loaded from a global index).
    pub records: u64,
    #[cfg_attr(not(test), expect(dead_code, reason = "only the tests ask where an index came from"))]
    pub from_global_index: bool,
    /// Each log's data checksums (`logs[i]`), built from the records when
    /// reads verify data, or received with a collective open's index;
    /// empty when loaded from a global index (readers then load a log's
    /// table from its index log when they need it).
    pub checksums: Vec<LogChecksums>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefer {
    /// Use a valid global index if there is one.
    GlobalIndex,
    /// Always read the index logs (flatten, map, recover).
    IndexLogs,
}

pub(crate) fn load_index(mount: &MountState, path: &StorePath, prefer: Prefer) -> Result<LoadedIndex> {
    if prefer == Prefer::GlobalIndex
        && let Some(loaded) = try_global_index(mount, path)?
    {
        return Ok(loaded);
    }
    load_from_logs(mount, path)
}

/// Whether `meta/` shows exactly the closed logs the global index covers.
pub(crate) fn global_index_matches(global: &GlobalIndex, meta: &MetaRecords) -> bool {
    if meta.damaged || !meta.open.is_empty() {
        return false;
    }
    let covered: BTreeSet<LogId> = global.logs.iter().map(|log| log.id).collect();
    let present: BTreeSet<LogId> = meta.sizes.iter().map(|size| size.log).collect();
    covered == present
}

/// What a file's global index is worth to a reader.
#[derive(Debug)]
pub enum GlobalIndexStatus {
    /// Covers exactly the file's logs, all closed.
    Valid(LoadedIndex),
    /// The file was never flattened.
    Missing,
    /// Present but not usable; says why (changed since, or damaged).
    Ignored(String),
}

/// Reads the global index (one open) and `meta/` (one listing) to decide
/// whether it may be used.
pub(crate) fn read_global_index(mount: &MountState, path: &StorePath) -> Result<GlobalIndexStatus> {
    let (backend, paths) = container::canonical(mount, path);
    let store = mount.store(backend);
    let location = || format!("{}: {}", store.url(), paths.global_index());
    let bytes = match store.read_all(&paths.global_index()) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(GlobalIndexStatus::Missing),
        Err(error) => return Err(error.context(location())),
    };
    let global = match GlobalIndex::decode(&bytes) {
        Ok(global) => global,
        Err(error) => return Ok(GlobalIndexStatus::Ignored(format!("{}: {error}", location()))),
    };
    let meta = container::read_meta(mount, path)?;
    if !global_index_matches(&global, &meta) {
        return Ok(GlobalIndexStatus::Ignored(format!(
            "{}: stale (the file changed after it was flattened; `plfs flatten` rebuilds it)",
            location()
        )));
    }
    match LoadedIndex::from_global(mount, &global) {
        Ok(loaded) => Ok(GlobalIndexStatus::Valid(loaded)),
        Err(error) => Ok(GlobalIndexStatus::Ignored(format!("{}: {error}", location()))),
    }
}

fn try_global_index(mount: &MountState, path: &StorePath) -> Result<Option<LoadedIndex>> {
    match read_global_index(mount, path)? {
        GlobalIndexStatus::Valid(loaded) => Ok(Some(loaded)),
        GlobalIndexStatus::Missing => Ok(None),
        GlobalIndexStatus::Ignored(reason) => {
            tracing::warn!("{reason}; reading index logs instead");
            Ok(None)
        }
    }
}

impl LoadedIndex {
    /// The index as a global index: what `flatten` stores and what a
    /// collective open sends between ranks.
    pub fn to_global(&self) -> GlobalIndex {
        let layers = self.index.layers();
        let extent = |(logical, extent): (u64, Extent)| GlobalExtent {
            logical,
            length: extent.length,
            log: extent.log.0,
            physical: extent.physical,
        };
        GlobalIndex {
            eof: self.index.eof(),
            logs: self
                .logs
                .iter()
                .map(|log| CoveredLog { id: log.id, backend: log.backend.0 as u32, hostdir: log.hostdir.0 })
                .collect(),
            extents: layers.frozen_extents.into_iter().map(extent).collect(),
            groups: layers
                .groups
                .iter()
                .map(|group| GlobalGroup {
                    start: group.start,
                    stride: group.stride,
                    end: group.end,
                    slots: group
                        .slots
                        .iter()
                        .map(|slot| GlobalSlot {
                            offset: slot.offset,
                            length: slot.length,
                            first_block: slot.first_block,
                            count: slot.count,
                            physical: slot.physical,
                            log: slot.log.0,
                        })
                        .collect(),
                })
                .collect(),
            frozen_limit: layers.frozen_limit,
            overlay: layers.overlay.into_iter().map(extent).collect(),
        }
    }

    pub(crate) fn from_global(mount: &MountState, global: &GlobalIndex) -> Result<LoadedIndex> {
        if let Some(log) =
            global.logs.iter().find(|log| log.backend as usize >= mount.placement.backend_count())
        {
            return Err(Error::corrupt(format!(
                "names backend {} for log {} but this mount has {}",
                log.backend,
                log.id,
                mount.placement.backend_count()
            )));
        }
        let extent = |extent: &GlobalExtent| {
            (
                extent.logical,
                Extent { length: extent.length, log: LogRef(extent.log), physical: extent.physical },
            )
        };
        let groups = global
            .groups
            .iter()
            .map(|group| Group {
                start: group.start,
                stride: group.stride,
                end: group.end,
                slots: group
                    .slots
                    .iter()
                    .map(|slot| Slot {
                        offset: slot.offset,
                        length: slot.length,
                        first_block: slot.first_block,
                        count: slot.count,
                        physical: slot.physical,
                        log: LogRef(slot.log),
                    })
                    .collect(),
            })
            .collect();
        let index = MergedIndex::from_layers(
            global.extents.iter().map(extent).collect(),
            groups,
            global.frozen_limit,
            global.overlay.iter().map(extent),
            global.eof,
            mount.tuning.compress_contiguous,
        )
        .ok_or_else(|| Error::corrupt("its extents and groups overlap"))?;
        let logs = global
            .logs
            .iter()
            .map(|log| LogLocation {
                backend: BackendId(log.backend as usize),
                hostdir: HostdirId(log.hostdir),
                id: log.id,
                has_index: true,
                has_data: true,
            })
            .collect();
        Ok(LoadedIndex { index, logs, records: 0, from_global_index: true, checksums: Vec::new() })
    }

    /// Merges index logs already read (by this rank or others).
    pub(crate) fn from_records(
        mount: &MountState,
        path: &StorePath,
        logs: Vec<LogLocation>,
        decoded: &[Vec<Record>],
    ) -> Result<LoadedIndex> {
        if let Some(log) = without_data_log(&logs, decoded) {
            return Err(Error::corrupt(format!(
                "{}: index log {} has records but its data log is missing",
                mount.store(log.backend).url(),
                log.path(path, LogKind::Index)
            )));
        }
        let mut records_total = 0u64;
        for records in decoded {
            if let Some(newest) = records.iter().map(Record::stamp).max() {
                mount.stamper.observe(newest);
            }
            records_total += records.len() as u64;
        }
        let index = MergedIndex::from_logs(
            decoded.iter().enumerate().map(|(i, records)| (LogRef(i as u32), records.as_slice())),
            mount.tuning.compress_contiguous,
        );
        let checksums = if mount.tuning.verify_reads == VerifyReads::Off {
            Vec::new()
        } else {
            decoded.iter().map(|records| LogChecksums::from_records(records)).collect()
        };
        Ok(LoadedIndex { index, logs, records: records_total, from_global_index: false, checksums })
    }
}

pub(crate) fn load_from_logs(mount: &MountState, path: &StorePath) -> Result<LoadedIndex> {
    let mut attempt = 1;
    loop {
        let logs = container::file_logs(mount, path)?;
        // Before the index logs: a writer renames its open record to its
        // size record only after its last frame is appended, so every size
        // record seen now is matched by the index log read next. Read
        // after, it could count a frame appended since that read (a writer
        // closing meanwhile), which looked like lost records.
        let meta = container::read_meta(mount, path)?;
        match read_all_index_logs(mount, path, &logs) {
            // An index log with data records whose data log the listing
            // missed: a rename moving the logs had moved the data log and
            // not yet its index (an open writer's log has no size record
            // for `file_logs` to check). Look again; a data log that stays
            // missing is damage, refused by `from_records`.
            Ok(decoded) if attempt < LOAD_ATTEMPTS_MAX && without_data_log(&logs, &decoded).is_some() => {
                attempt += 1
            }
            Ok(decoded) => {
                check_nothing_lost(mount, path, &meta, &logs, &decoded)?;
                return LoadedIndex::from_records(mount, path, logs, &decoded);
            }
            // A log listed a moment ago is gone: a rename replaced the file
            // (or a truncate reclaimed the log). Look again.
            Err(error) if error.kind() == ErrorKind::NotFound && attempt < LOAD_ATTEMPTS_MAX => attempt += 1,
            Err(error) => return Err(error),
        }
    }
}

/// Loads of a file's index logs, when one keeps vanishing under the load.
const LOAD_ATTEMPTS_MAX: usize = 4;

/// The first log whose index records write data that has no data log.
fn without_data_log<'a>(logs: &'a [LogLocation], decoded: &[Vec<Record>]) -> Option<&'a LogLocation> {
    logs.iter()
        .zip(decoded)
        .find(|(log, records)| !log.has_data && records.iter().any(Record::writes_data))
        .map(|(log, _)| log)
}

/// Refuses a file whose closed logs' size records count data their index
/// logs no longer hold: its size says the data is there, and reads would
/// return zeros for it. Data is never guessed; `plfs recover` reports the
/// loss and `--fix` makes the size agree with what can be read.
fn check_nothing_lost(
    mount: &MountState,
    path: &StorePath,
    meta: &container::MetaRecords,
    logs: &[LogLocation],
    decoded: &[Vec<Record>],
) -> Result<()> {
    if meta.sizes.is_empty() {
        return Ok(());
    }
    let claimed: std::collections::HashMap<LogId, &crate::layout::SizeRecord> =
        meta.sizes.iter().map(|size| (size.log, size)).collect();
    for (log, records) in logs.iter().zip(decoded) {
        let Some(claimed) = claimed.get(&log.id) else { continue };
        if let Some(lost) = container::records_lost(claimed, &container::summarize(log.id, records)) {
            return Err(Error::corrupt(format!(
                "{}: index log {}: {lost}; run `plfs recover --fix` to make the size agree with the data \
                 still indexed",
                mount.store(log.backend).url(),
                log.path(path, LogKind::Index)
            )));
        }
    }
    Ok(())
}

/// Reads and decodes the index logs in parallel; results keep `logs` order.
pub(crate) fn read_all_index_logs(
    mount: &MountState,
    path: &StorePath,
    logs: &[LogLocation],
) -> Result<Vec<Vec<Record>>> {
    let slots: Vec<Mutex<Option<Result<Vec<Record>>>>> = logs.iter().map(|_| Mutex::new(None)).collect();
    let tasks: Vec<_> = logs
        .iter()
        .zip(&slots)
        .map(|(log, slot)| {
            move || -> Result<()> {
                let decoded = container::read_index_log(mount, path, log).map(|d| d.records);
                *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(decoded);
                Ok(())
            }
        })
        .collect();
    // Handing a few small logs to the pool costs more in thread wake-ups
    // than it saves; many logs (or slow stores) are where it pays.
    if logs.len() >= PARALLEL_INDEX_LOGS_MIN {
        mount.read_pool.run_all(tasks)?;
    } else {
        tasks.into_iter().try_for_each(|task| task())?;
    }
    slots
        .into_iter()
        .map(|slot| slot.into_inner().unwrap_or_else(PoisonError::into_inner).unwrap_or(Ok(Vec::new())))
        .collect()
}

/// Writes the global index of a file whose writers have all closed.
pub(crate) fn flatten(mount: &MountState, path: &StorePath) -> Result<(GlobalIndex, LoadedIndex)> {
    let meta = container::read_meta(mount, path)?;
    if !meta.open.is_empty() {
        return Err(Error::invalid(format!(
            "{path}: {} writer(s) still have the file open; flatten after they close (or run `plfs recover --fix` if they crashed)",
            meta.open.len()
        )));
    }
    let loaded = load_from_logs(mount, path)?;
    let global = loaded.to_global();
    publish_global(mount, path, &global)?;
    Ok((global, loaded))
}

/// [`flatten`] with some index logs' records already in memory (a
/// collective close gathered them from the writers): only the file's other
/// logs are read. The logs are listed and merged exactly as `flatten` lists
/// and merges them, so both write the same global index. Returns it, the
/// merged index and how many index logs were read.
pub(crate) fn flatten_with_records(
    mount: &MountState,
    path: &StorePath,
    mut known: std::collections::HashMap<LogId, Vec<Record>>,
) -> Result<(GlobalIndex, LoadedIndex, usize)> {
    let meta = container::read_meta(mount, path)?;
    if !meta.open.is_empty() {
        return Err(Error::invalid(format!(
            "{path}: {} writer(s) still have the file open; flatten after they close",
            meta.open.len()
        )));
    }
    let logs = container::file_logs(mount, path)?;
    let unknown: Vec<LogLocation> = logs.iter().filter(|log| !known.contains_key(&log.id)).cloned().collect();
    let mut read = read_all_index_logs(mount, path, &unknown)?.into_iter();
    let decoded: Vec<Vec<Record>> = logs
        .iter()
        .map(|log| known.remove(&log.id).unwrap_or_else(|| read.next().unwrap_or_default()))
        .collect();
    check_nothing_lost(mount, path, &meta, &logs, &decoded)?;
    let loaded = LoadedIndex::from_records(mount, path, logs, &decoded)?;
    let global = loaded.to_global();
    publish_global(mount, path, &global)?;
    Ok((global, loaded, unknown.len()))
}

/// Replaces the file's global index with `global` in one step (readers see
/// the old one or the new one, never a part).
fn publish_global(mount: &MountState, path: &StorePath, global: &GlobalIndex) -> Result<()> {
    let (backend, paths) = container::canonical(mount, path);
    let store = mount.store(backend);
    // It lists where every byte is: protected like the logs.
    let protection = Pieces::of(&protection::read_access(mount, path)?).file;
    store
        .replace_protected(&ContainerPaths::new(path.clone()).global_index(), &global.encode(), &protection)
        .with_context(|| format!("{}: writing {}", store.url(), paths.global_index()))
}
