//! Inspection and repair for the `plfs` tools: the merged index as a map,
//! every physical piece of a file, flattening, and crash recovery.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Serialize;

use crate::config::BackendLocation;
// What `Plfs::inventory` and `Plfs::file_version` report; the modules that
// define them are crate-private, so the report types are named from here.
use crate::container;
pub use crate::container::{Inventory, LogLocation};
use crate::error::{Error, ErrorKind, Result, ResultExt};
use crate::format::access::AccessRecord;
use crate::format::data_log::{self, DATA_MAGIC, LogHeader};
use crate::format::index_log;
pub use crate::format::version::VersionRecord;
use crate::fs::Plfs;
use crate::layout::{self, ContainerEntry, MetaEntry};
pub use crate::layout::{LogId, LogKind};
use crate::load::{self, Prefer};
use crate::mount_state::MountState;
pub use crate::placement::HostdirId;
use crate::placement::{BackendId, name_hash};
use crate::plfs25::{self, Found25};
use crate::rename::{self, HeldIntent};
use crate::store::{DirEntry, EntryKind, Protection, ReadHandle, Store, StoreExt, StorePath};
use crate::stripes::{self, LayoutProblem};
use crate::workload::Found;

/// One extent of the merged index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MapEntry {
    pub logical: u64,
    pub length: u64,
    pub writer: u64,
    /// The data log, as `<backend url>/<path>`.
    pub log: String,
    pub physical: u64,
    /// Of a striped file: the component and stripe of the extent's first
    /// byte, and the backend its bytes are on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stripe: Option<StripeOf>,
}

/// Where bytes of a striped file lie in its layout (FORMAT.md §15).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct StripeOf {
    /// Counted from 1, as `plfs getstripe` and messages count components.
    pub component: usize,
    /// Counted from 0 within the component.
    pub stripe: u32,
    /// The backend's position in the mount's list.
    pub backend: usize,
}

impl std::fmt::Display for StripeOf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "c{}/s{}@b{}", self.component, self.stripe, self.backend)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MapTotals {
    pub writers: usize,
    pub logs: usize,
    /// Index records read (a pattern record counts once).
    pub records: u64,
    pub extents: usize,
    /// Entries the merged index stores (extents plus pattern slots).
    pub index_entries: usize,
    /// Heap bytes of the merged index.
    pub index_memory_bytes: usize,
    pub data_bytes: u64,
    pub holes: u64,
    pub hole_bytes: u64,
    pub eof: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileMap {
    pub entries: Vec<MapEntry>,
    pub totals: MapTotals,
    /// What the file is when it is not a plfs container: a PLFS 2.5
    /// container read in place, with its index's size on disk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
}

/// What a physical piece of a container is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PieceKind {
    Container,
    ShadowContainer,
    Access,
    Version,
    GlobalIndex,
    Xattr,
    MetaDir,
    OpenRecord,
    SizeRecord,
    Hostdir,
    IndexLog,
    DataLog,
    /// The one plain file of an n-n logical file.
    FlatFile,
    /// A rename in progress (or cut short) is moving this container.
    RenameIntent,
    /// A PLFS 2.5 container (read in place, read-only); its pieces are
    /// shown with the nearest plfs kinds (index and data droppings as
    /// index and data logs).
    Plfs25Container,
    /// A PLFS 2.5 hostdir that is a symlink to a shadow backend.
    Metalink,
    /// A striped file's layout (FORMAT.md §15).
    Layout,
    /// The backends of one component of a striped file.
    Stripes,
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PhysicalPiece {
    pub backend: String,
    pub path: String,
    pub kind: PieceKind,
    pub bytes: u64,
    /// Of a striped file: for a stripes record, each stripe of its
    /// component and the backend it is placed on; for a data log, the
    /// stripes it holds bytes of.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stripes: Vec<StripeOf>,
}

/// One problem `recover` found, and whether it was repaired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub problem: Problem,
    pub location: String,
    pub detail: String,
    pub fixed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Problem {
    /// An open record whose writer is gone.
    StaleOpenRecord,
    /// An open record on another host: cannot tell if its writer lives.
    OpenElsewhere,
    /// A torn frame at the end of an index log.
    TornIndexTail,
    /// A data log with no index log (nothing points at its bytes).
    OrphanDataLog,
    /// An index log with records but no data log.
    MissingDataLog,
    /// A closed log with neither open nor size record, while a damaged
    /// size record makes readers take every log: the fix gives it one.
    MissingSizeRecord,
    /// A log `meta/` does not name: a file removed or replaced at this
    /// name left it (its clean-up failed, or a crash cut it short), and
    /// readers skip it. The fix removes it; giving it a size record would
    /// put that other file's bytes into this one.
    ForeignLog,
    /// A size record whose log no longer exists.
    DanglingSizeRecord,
    /// A half-built or half-removed container left by a crash.
    Debris,
    /// The pieces of a removed file whose deletion (after its unlink
    /// returned) a crash or exit cut short: not damage but work left, which
    /// recover finishes, with or without the fix.
    PendingReclaim,
    /// A file unlinked (or displaced by a rename) while open, whose holder
    /// may still be running: on this host its process exists, or it is on
    /// another host. Not damage: its last close removes it, so the fix
    /// leaves it (deleting it would take the holder's data).
    HeldOpen,
    /// A rename onto a name that a crash cut short (finished by the fix),
    /// or one still running (left alone).
    InterruptedRename,
    /// A `plfs migrate` of a PLFS 2.5 file that a crash cut short: a
    /// half-built copy (removed by the fix), a verified copy (switched
    /// in), or 2.5 pieces of a switched file (removed).
    InterruptedMigration,
    /// A name plfs does not write.
    UnknownEntry,
    /// Data bytes whose CRC32C does not match their index record
    /// (checked with `verify`); not fixable, the bytes are reported.
    DataChecksumMismatch,
    /// A container whose access file is lost or does not decode: the file
    /// cannot be opened. The fix writes a new one (mode and owner from the
    /// container directory), so its logs read again.
    DamagedAccessFile,
    /// A closed log's size record counts data its index log no longer
    /// holds (the index log was cut short): fixed by publishing a size
    /// record of what the index log holds, so stat agrees with reads; the
    /// lost records' bytes cannot be found again.
    LostIndexRecords,
    /// Index records pointing past the end of their data log: a crash kept
    /// the unsynced index frame but not the data. The fix drops them (and
    /// the global index, which may name them); their bytes are lost.
    UnbackedIndexRecords,
    /// A global index naming bytes past the end of a data log (flattened
    /// before the logs were synced, then a crash): the fix removes it.
    UnbackedGlobalIndex,
    /// An index log whose header or frames are damaged: the file cannot
    /// be read until it is restored.
    CorruptIndexLog,
    /// A data log whose header is damaged or names another writer. Its
    /// data still reads (records address it by offset); logs are never
    /// rewritten in place, so it stays.
    DamagedDataLogHeader,
    /// The version file is missing or damaged: `plfs version` cannot say
    /// which format and release created the file (readers do not need it).
    DamagedVersionFile,
    /// A striped file's layout file or a stripes record does not decode
    /// (or is newer than this plfs): writers refuse the file; reads do not
    /// need it.
    DamagedLayout,
    /// Data lies in a layout component without a stripes record: the fix
    /// rebuilds the record from the backends the data is on.
    MissingStripesRecord,
    /// A log holds bytes of stripes its component's record puts on other
    /// backends; reads are unaffected and the bytes stay.
    StripeOnWrongBackend,
    /// A stripes record of a component the layout has not got (or of a
    /// file without a layout): the fix removes it.
    StrayStripesRecord,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RecoveryReport {
    pub findings: Vec<Finding>,
}

impl RecoveryReport {
    pub fn unfixed(&self) -> usize {
        self.findings.iter().filter(|finding| !finding.fixed).count()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FlattenReport {
    pub logs: usize,
    /// Entries stored: extents plus pattern slots.
    pub extents: usize,
    pub bytes: u64,
    pub eof: u64,
}

impl Plfs {
    /// The merged index of a file, read from its index logs.
    pub fn map(&self, path: &str) -> Result<FileMap> {
        let state = self.state();
        if let Some((logical, found)) = plfs25_file(self, path)? {
            return map25(state, &logical, &found).context(path.to_owned());
        }
        let logical = file_path(self, path)?;
        let loaded = load::load_index(state, &logical, Prefer::IndexLogs).context(path.to_owned())?;
        let log_names: Vec<String> = loaded
            .logs
            .iter()
            .map(|log| format!("{}/{}", state.store(log.backend).url(), log.path(&logical, LogKind::Data)))
            .collect();
        let striped = StripedMap::read(state, &logical).context(path.to_owned())?;
        let extents = loaded.index.extents();
        let mut entries = Vec::with_capacity(extents.len());
        let mut totals = MapTotals {
            writers: loaded.logs.iter().map(|log| log.id.writer).collect::<BTreeSet<_>>().len(),
            logs: loaded.logs.len(),
            records: loaded.records,
            extents: extents.len(),
            index_entries: loaded.index.entry_count(),
            index_memory_bytes: loaded.index.memory_bytes(),
            eof: loaded.index.eof(),
            ..MapTotals::default()
        };
        let mut position = 0;
        for (logical_offset, extent) in extents {
            if logical_offset > position {
                totals.holes += 1;
                totals.hole_bytes += logical_offset - position;
            }
            position = logical_offset + extent.length;
            totals.data_bytes += extent.length;
            let log = &loaded.logs[extent.log.0 as usize];
            entries.push(MapEntry {
                logical: logical_offset,
                length: extent.length,
                writer: log.id.writer,
                log: log_names[extent.log.0 as usize].clone(),
                physical: extent.physical,
                stripe: striped.as_ref().and_then(|striped| striped.stripe_of(logical_offset, log.backend)),
            });
        }
        if totals.eof > position {
            totals.holes += 1;
            totals.hole_bytes += totals.eof - position;
        }
        Ok(FileMap { entries, totals, format: None })
    }

    /// Bytes of a plfs file's index logs and global index (what
    /// `plfs migrate` reports before and after).
    pub(crate) fn index_bytes(&self, path: &str) -> Result<u64> {
        Ok(self
            .query(path)?
            .iter()
            .filter(|piece| matches!(piece.kind, PieceKind::IndexLog | PieceKind::GlobalIndex))
            .map(|piece| piece.bytes)
            .sum())
    }

    /// Every physical piece of a file on every backend.
    pub fn query(&self, path: &str) -> Result<Vec<PhysicalPiece>> {
        let state = self.state();
        if let Some(backend) = self.files().plain_file_backend(state, &crate::fs::parse_file_path(path)?) {
            return self.query_plain(path, backend);
        }
        if let Some((logical, found)) = plfs25_file(self, path)? {
            let pieces = plfs25::pieces(state, &logical, &found).context(path.to_owned())?;
            return Ok(pieces.into_iter().map(piece25).collect());
        }
        let logical = file_path(self, path)?;
        let (canonical, _) = container::canonical(state, &logical);
        let mut pieces = Vec::new();
        for backend in state.placement.all_backends() {
            let store = state.store(backend);
            let kind = if backend == canonical { PieceKind::Container } else { PieceKind::ShadowContainer };
            match store.metadata(&logical) {
                Ok(metadata) if metadata.kind == EntryKind::Directory => {}
                Ok(_) => continue,
                Err(error) if error.kind() == ErrorKind::NotFound => continue,
                Err(error) => return Err(error.context(format!("{}: {path}", store.url()))),
            }
            pieces.push(piece(store, &logical, kind, 0));
            walk_container(store, &logical, &mut pieces)?;
        }
        if pieces.is_empty() {
            return Err(Error::new(ErrorKind::NotFound, path.to_owned()));
        }
        self.annotate_stripes(&logical, path, &mut pieces)?;
        Ok(pieces)
    }

    /// Of a striped file: names on each stripes record the stripes it
    /// places, and on each data log the stripes it holds bytes of (from
    /// the merged index, so only striped files pay for reading it).
    fn annotate_stripes(&self, logical: &StorePath, path: &str, pieces: &mut [PhysicalPiece]) -> Result<()> {
        let state = self.state();
        let Some(striped) = StripedMap::read(state, logical).context(path.to_owned())? else { return Ok(()) };
        for (component, placed) in striped.placed.iter().enumerate() {
            let Some(backends) = placed else { continue };
            let (canonical, paths) = container::canonical(state, logical);
            let (url, record) = (state.store(canonical).url(), paths.stripes(component as u32).to_string());
            let Some(piece) = pieces.iter_mut().find(|piece| piece.backend == url && piece.path == record)
            else {
                continue;
            };
            piece.stripes = backends
                .iter()
                .enumerate()
                .map(|(stripe, backend)| StripeOf {
                    component: component + 1,
                    stripe: stripe as u32,
                    backend: backend.0,
                })
                .collect();
        }
        let mut held: BTreeMap<String, BTreeSet<StripeOf>> = BTreeMap::new();
        for entry in self.map(path)?.entries {
            let Some(first) = entry.stripe else { continue };
            let stripes = held.entry(entry.log).or_default();
            striped.stripes_in(entry.logical, entry.length, BackendId(first.backend), stripes);
        }
        for piece in pieces.iter_mut().filter(|piece| piece.kind == PieceKind::DataLog) {
            if let Some(stripes) = held.remove(&format!("{}/{}", piece.backend, piece.path)) {
                piece.stripes = stripes.into_iter().collect();
            }
        }
        Ok(())
    }

    /// An n-n file's one physical piece: the plain file on its backend.
    fn query_plain(&self, path: &str, backend: BackendId) -> Result<Vec<PhysicalPiece>> {
        let state = self.state();
        let logical = crate::fs::parse_file_path(path)?;
        match self.found(&logical).context(path.to_owned())? {
            Found::File(_) => {
                let store = state.store(backend);
                let metadata = store.metadata(&logical).context(path.to_owned())?;
                Ok(vec![piece(store, &logical, PieceKind::FlatFile, metadata.size)])
            }
            Found::Directory(_) => Err(Error::new(ErrorKind::IsADirectory, path.to_owned())),
            Found::Symlink(_) => Err(Error::invalid(format!("{path}: is a symbolic link"))),
        }
    }

    /// The logical file (mount-relative) a physical log or container path
    /// belongs to, if it lies inside one of this mount's POSIX backends.
    pub fn logical_of(&self, physical: &Path) -> Result<Option<String>> {
        let state = self.state();
        for backend in state.placement.all_backends() {
            let store = state.store(backend);
            let Ok(BackendLocation::Posix(root)) = BackendLocation::parse(store.url()) else { continue };
            let Ok(relative) = physical.strip_prefix(&root) else { continue };
            let Some(relative) = relative.to_str() else { continue };
            let inside = StorePath::parse(relative)?;
            let mut prefix = StorePath::root();
            for component in inside.components() {
                if layout::parse_hostdir_name(component).is_some() || component == layout::META_DIR {
                    break;
                }
                prefix = prefix.join(component)?;
                if let Ok(Found::File(_)) = self.found(&prefix) {
                    return Ok(Some(format!("/{prefix}")));
                }
            }
        }
        Ok(None)
    }

    /// Whether `path` is a PLFS 2.5 container, read in place (read-only).
    pub fn is_plfs25(&self, path: &str) -> Result<bool> {
        Ok(plfs25_file(self, path)?.is_some())
    }

    /// Merges every index log into the global index readers then prefer.
    pub fn flatten(&self, path: &str) -> Result<FlattenReport> {
        let logical = file_path(self, path)?;
        let (global, loaded) = load::flatten(self.state(), &logical).context(path.to_owned())?;
        Ok(FlattenReport {
            logs: global.logs.len(),
            extents: loaded.index.entry_count(),
            bytes: loaded.index.data_bytes(),
            eof: global.eof,
        })
    }

    /// The format and release that created a file.
    pub fn file_version(&self, path: &str) -> Result<VersionRecord> {
        let state = self.state();
        if let Some((_, found)) = plfs25_file(self, path)? {
            // Format 0: not a plfs format; the release is 2.5's own tag.
            let (tag, data) =
                plfs25::version(state, &found)?.unwrap_or_else(|| ("2.x".to_owned(), "?".to_owned()));
            return Ok(VersionRecord {
                format_version: 0,
                library_version: format!("PLFS {tag} (data format {data})"),
            });
        }
        let logical = file_path(self, path)?;
        let (backend, paths) = container::canonical(state, &logical);
        let store = state.store(backend);
        let bytes = store.read_all(&paths.version()).with_context(|| format!("{}: {path}", store.url()))?;
        VersionRecord::decode(&bytes).with_context(|| format!("{}: {}", store.url(), paths.version()))
    }

    /// What crashes leave in directory `path` itself rather than in one
    /// file: the pieces of removed files still to delete (always deleted:
    /// their unlinks returned long ago) and, with `fix`, half-built and
    /// half-removed containers. For a file that is gone, this is how its
    /// leftovers are reached.
    pub fn recover_directory(&self, path: &str, fix: bool) -> Result<RecoveryReport> {
        let logical = StorePath::parse(path)?;
        match self.found(&logical).context(path.to_owned())? {
            Found::Directory(_) => {}
            _ => return Err(Error::new(ErrorKind::NotADirectory, path.to_owned())),
        }
        let mut recovery =
            Recovery { state: self.state(), path: &logical, fix, verify: false, report: Default::default() };
        recovery.debris_in(&logical).context(path.to_owned())?;
        // Small files unlinked while open live on in their directory's
        // container, not as backend entries.
        let (files, state) = (self.files(), self.state());
        for name in files.hidden_files(state, &logical).context(path.to_owned())? {
            let hidden = logical.join(&name)?;
            if let Some(detail) = held_open(state, &name) {
                recovery.note(Problem::HeldOpen, format!("/{hidden}"), detail, false);
                continue;
            }
            let fixed = fix && {
                files.remove_replaced(state, &hidden).context(path.to_owned())?;
                true
            };
            let what = "a file unlinked while open, left by a crash".to_owned();
            recovery.note(Problem::Debris, format!("/{hidden}"), what, fixed);
        }
        Ok(recovery.report)
    }

    /// Finds, and with `fix` repairs, what crashes leave behind.
    pub fn recover(&self, path: &str, fix: bool) -> Result<RecoveryReport> {
        self.recover_with(path, fix, false)
    }

    /// Like [`recover`](Self::recover); with `verify`, also reads every
    /// data byte the index logs point at and checks it against the CRC32C
    /// its record carries.
    pub fn recover_with(&self, path: &str, fix: bool, verify: bool) -> Result<RecoveryReport> {
        let logical = StorePath::parse(path)?;
        // A migration cut short first: it decides whether the name is a
        // 2.5 file (nothing more to check) or a plfs one.
        // Only container mounts hold 2.5 files and migrations; on others
        // the file's path is a plain file, not a directory to look in.
        let migration = if self.files().containers().is_some() {
            crate::migrate::finish_pending(self, &logical, fix).context(path.to_owned())?
        } else {
            Vec::new()
        };
        let mut report = RecoveryReport::default();
        for note in migration {
            let location = note.split(": ").next().unwrap_or_default().to_owned();
            report.findings.push(Finding {
                problem: Problem::InterruptedMigration,
                location,
                detail: note,
                fixed: fix,
            });
        }
        if !report.findings.is_empty() && plfs25_file(self, path)?.is_some() {
            return Ok(report);
        }
        // A damaged container is what recover repairs; anything else must
        // be a plfs file, as for the other tools.
        if self.damaged(&logical).context(path.to_owned())?.is_none() {
            file_path(self, path)?;
        }
        let mut recovery = Recovery { state: self.state(), path: &logical, fix, verify, report };
        recovery.run().context(path.to_owned())?;
        Ok(recovery.report)
    }
}

/// Bytes read at a time when checking a pattern's data.
const VERIFY_CHUNK_BYTES: u64 = 8 << 20;

/// Checks every write's data against its CRC32C; returns one line per
/// mismatch naming the logical and physical offsets.
/// Where a record's bytes end in its data log (0 for a truncate).
/// For a removed name (`.plfs-gone.*`) whose holder may still be running,
/// what to tell about it; None when it is debris (its process is gone, or
/// the name does not say whose it is).
fn held_open(state: &MountState, name: &str) -> Option<String> {
    let owner = layout::removed_owner(name)?;
    if !owner.writer_may_be_alive(&state.hostname) {
        return None;
    }
    Some(if owner.host == name_hash(&state.hostname) {
        format!("a file unlinked while open by pid {}, still running: its last close removes it", owner.pid)
    } else {
        format!(
            "a file unlinked while open by pid {} on another host (hash {:08x}), which may still be running: \
             run recover there",
            owner.pid, owner.host
        )
    })
}

fn physical_end(record: &index_log::Record) -> u64 {
    match record {
        index_log::Record::Write(write) => write.physical + write.length,
        index_log::Record::Pattern(pattern) => pattern.physical + pattern.count * pattern.length,
        index_log::Record::Truncate(_) => 0,
    }
}

fn verify_data(data: &dyn ReadHandle, records: &[index_log::Record]) -> Result<Vec<String>> {
    let mut mismatches = Vec::new();
    let mut buffer = Vec::new();
    let read = |physical: u64, length: u64, buffer: &mut Vec<u8>| -> Result<()> {
        buffer.resize(length as usize, 0);
        let got = data.read_at(buffer, physical)?;
        if got < buffer.len() {
            return Err(Error::corrupt(format!(
                "data log ends at {} inside a record's {length} bytes at {physical}",
                physical + got as u64
            )));
        }
        Ok(())
    };
    for record in records {
        match record {
            index_log::Record::Write(write) => {
                read(write.physical, write.length, &mut buffer)?;
                let actual = crc32c::crc32c(&buffer);
                if actual != write.data_crc {
                    mismatches.push(format!(
                        "{} bytes at logical {} (physical {}): crc {actual:08x}, index says {:08x}",
                        write.length, write.logical, write.physical, write.data_crc
                    ));
                }
            }
            index_log::Record::Pattern(pattern) => {
                // Blocks are back to back: read several per call.
                let per_chunk = (VERIFY_CHUNK_BYTES / pattern.length).max(1);
                let mut crc_of_crcs = 0u32;
                let mut block = 0;
                while block < pattern.count {
                    let blocks = per_chunk.min(pattern.count - block);
                    let physical = pattern.physical + block * pattern.length;
                    read(physical, blocks * pattern.length, &mut buffer)?;
                    for data in buffer.chunks(pattern.length as usize) {
                        let crc = crc32c::crc32c(data);
                        crc_of_crcs = crc32c::crc32c_append(crc_of_crcs, &crc.to_le_bytes());
                    }
                    block += blocks;
                }
                if crc_of_crcs != pattern.data_crc {
                    mismatches.push(format!(
                        "pattern of {} × {} bytes from logical {} (physical {}): data does not match its crc {:08x}",
                        pattern.count, pattern.length, pattern.logical, pattern.physical, pattern.data_crc
                    ));
                }
            }
            index_log::Record::Truncate(_) => {}
        }
    }
    Ok(mismatches)
}

/// Parses a path the tools accept only if it names a plfs file kept in a
/// container (the workload says why other files are not).
fn file_path(plfs: &Plfs, path: &str) -> Result<StorePath> {
    let logical = StorePath::parse(path)?;
    match plfs.found(&logical).context(path.to_owned())? {
        // flatten and recover would write into it.
        Found::File(file) if file.plfs25().is_some() => Err(plfs25::read_only(path)),
        Found::File(_) if plfs.files().containers().is_some() => Ok(logical),
        Found::File(_) => Err(plfs.files().no_container(path)),
        Found::Directory(_) => Err(Error::new(ErrorKind::IsADirectory, path.to_owned())),
        Found::Symlink(_) => Err(Error::invalid(format!("{path}: is a symbolic link"))),
    }
}

/// The PLFS 2.5 container at `path`, if that is what the file is.
fn plfs25_file(plfs: &Plfs, path: &str) -> Result<Option<(StorePath, Found25)>> {
    let logical = StorePath::parse(path)?;
    Ok(match plfs.found(&logical) {
        Ok(Found::File(file)) => file.plfs25().cloned().map(|found| (logical, found)),
        _ => None,
    })
}

/// `plfs map` of a 2.5 file: its merged index, writers by pid, and what
/// its index costs on disk.
fn map25(state: &MountState, logical: &StorePath, found: &Found25) -> Result<FileMap> {
    let index = plfs25::load(state, logical, found)?;
    let mut entries = Vec::with_capacity(index.extents.len());
    let mut totals = MapTotals {
        writers: index.writers().len(),
        logs: index.chunks.len(),
        records: index.entries,
        extents: index.extents.len(),
        index_entries: index.extents.len(),
        index_memory_bytes: index.extents.len() * std::mem::size_of::<(u64, plfs25::Extent25)>(),
        eof: index.eof,
        ..MapTotals::default()
    };
    let mut position = 0;
    for (&offset, extent) in &index.extents {
        if offset > position {
            totals.holes += 1;
            totals.hole_bytes += offset - position;
        }
        position = offset + extent.length;
        totals.data_bytes += extent.length;
        entries.push(MapEntry {
            logical: offset,
            length: extent.length,
            writer: extent.pid as u64,
            log: index.chunks[extent.chunk].shown(),
            physical: extent.physical,
            stripe: None,
        });
    }
    if totals.eof > position {
        totals.holes += 1;
        totals.hole_bytes += totals.eof - position;
    }
    let source = if index.from_global_index { "global.index" } else { "index droppings" };
    let format = format!(
        "PLFS 2.5 container, read-only (`plfs migrate` converts it): index {} entries, {} bytes on disk ({source})",
        index.entries, index.index_bytes
    );
    Ok(FileMap { entries, totals, format: Some(format) })
}

fn piece25(piece: plfs25::Piece25) -> PhysicalPiece {
    use plfs25::PieceKind25 as Kind;
    let kind = match piece.kind {
        Kind::Container => PieceKind::Plfs25Container,
        Kind::Access => PieceKind::Access,
        Kind::Version => PieceKind::Version,
        Kind::GlobalIndex => PieceKind::GlobalIndex,
        Kind::MetaDir => PieceKind::MetaDir,
        Kind::OpenRecord => PieceKind::OpenRecord,
        Kind::SizeRecord => PieceKind::SizeRecord,
        Kind::Hostdir => PieceKind::Hostdir,
        Kind::Metalink => PieceKind::Metalink,
        Kind::IndexDropping => PieceKind::IndexLog,
        Kind::DataDropping => PieceKind::DataLog,
        Kind::Unknown => PieceKind::Unknown,
    };
    let location = piece.location;
    PhysicalPiece {
        backend: location.store.url().to_owned(),
        path: location.path.to_string(),
        kind,
        bytes: piece.bytes,
        stripes: Vec::new(),
    }
}

fn piece(store: &dyn Store, path: &StorePath, kind: PieceKind, bytes: u64) -> PhysicalPiece {
    PhysicalPiece {
        backend: store.url().to_owned(),
        path: path.to_string(),
        kind,
        bytes,
        stripes: Vec::new(),
    }
}

/// A striped file's layout and its components' recorded backends, to say
/// which component and stripe a logical offset is in.
struct StripedMap {
    layout: crate::striping::Layout,
    /// Per component: its stripes record's backends, None if unplaced.
    placed: Vec<Option<Vec<BackendId>>>,
    /// Stripes of an unplaced component: as many as this mount would give.
    pool_size: u32,
}

impl StripedMap {
    /// None for a file without a layout. A damaged layout or record is
    /// not an error here (reads follow the index, `plfs recover` names
    /// the damage): the file maps without stripes.
    fn read(state: &MountState, path: &StorePath) -> Result<Option<StripedMap>> {
        let damaged = |error: &Error| matches!(error.kind(), ErrorKind::Corrupt | ErrorKind::Unsupported);
        let layout = match stripes::read_layout(state, path) {
            Ok(Some(layout)) => layout,
            Ok(None) => return Ok(None),
            Err(error) if damaged(&error) => return Ok(None),
            Err(error) => return Err(error),
        };
        let mut placed = Vec::with_capacity(layout.components().len());
        for component in 0..layout.components().len() as u32 {
            match stripes::read_stripes(state, path, component) {
                Ok(found) => placed.push(found),
                Err(error) if damaged(&error) || error.kind() == ErrorKind::InvalidInput => placed.push(None),
                Err(error) => return Err(error),
            }
        }
        let pool_size = state.placement.shadow_backends().len() as u32;
        Ok(Some(StripedMap { layout, placed, pool_size }))
    }

    /// The component and stripe of `offset`, with the backend its bytes
    /// are on (`backend`, from the log that holds them).
    fn stripe_of(&self, offset: u64, backend: BackendId) -> Option<StripeOf> {
        let component = self.layout.locate(offset, |_| 1)?.component;
        let stripes = self.placed[component].as_ref().map_or(self.pool_size, |placed| placed.len() as u32);
        let location = self.layout.locate(offset, |_| stripes)?;
        Some(StripeOf { component: component + 1, stripe: location.stripe, backend: backend.0 })
    }

    /// Adds the stripes bytes `[offset, offset + length)` lie in: unit by
    /// unit, leaving a component once all its stripes were seen, so a
    /// long extent (one stripe of a huge component) costs little.
    fn stripes_in(&self, offset: u64, length: u64, backend: BackendId, into: &mut BTreeSet<StripeOf>) {
        let end = offset.saturating_add(length);
        let mut position = offset;
        let mut units_in_component = (usize::MAX, 0u64);
        while position < end {
            let Some(found) = self.stripe_of(position, backend) else { return };
            into.insert(found);
            let component = &self.layout.components()[found.component - 1];
            let stripes =
                self.placed[found.component - 1].as_ref().map_or(self.pool_size, |p| p.len() as u32);
            if units_in_component.0 != found.component {
                units_in_component = (found.component, 0);
            }
            units_in_component.1 += 1;
            let Some(location) = self.layout.locate(position, |_| stripes) else { return };
            position = if units_in_component.1 >= u64::from(stripes) {
                match component.end {
                    Some(component_end) => component_end,
                    None => return,
                }
            } else {
                location.unit_end
            };
        }
    }
}

fn walk_container(store: &dyn Store, container: &StorePath, pieces: &mut Vec<PhysicalPiece>) -> Result<()> {
    let mut entries = store.list(container)?;
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    for entry in entries {
        let child = container.join(&entry.name)?;
        let size = |path: &StorePath| store.metadata(path).map(|m| m.size).unwrap_or(0);
        match layout::classify_container_entry(&entry.name) {
            ContainerEntry::Access => pieces.push(piece(store, &child, PieceKind::Access, size(&child))),
            ContainerEntry::Version => pieces.push(piece(store, &child, PieceKind::Version, size(&child))),
            ContainerEntry::Xattrs => {
                let mut names = store.list(&child)?;
                names.sort_by(|a, b| a.name.cmp(&b.name));
                for name in names {
                    let attribute = child.join(&name.name)?;
                    pieces.push(piece(store, &attribute, PieceKind::Xattr, size(&attribute)));
                }
            }
            ContainerEntry::GlobalIndex => {
                pieces.push(piece(store, &child, PieceKind::GlobalIndex, size(&child)))
            }
            ContainerEntry::Meta => {
                pieces.push(piece(store, &child, PieceKind::MetaDir, 0));
                let mut names = store.list(&child)?;
                names.sort_by(|a, b| a.name.cmp(&b.name));
                for name in names {
                    let kind = match layout::parse_meta_name(&name.name) {
                        Some(Ok(MetaEntry::Open(_))) => PieceKind::OpenRecord,
                        Some(Ok(MetaEntry::Size(_))) => PieceKind::SizeRecord,
                        _ => PieceKind::Unknown,
                    };
                    pieces.push(piece(store, &child.join(&name.name)?, kind, 0));
                }
            }
            ContainerEntry::Hostdir(_) => {
                pieces.push(piece(store, &child, PieceKind::Hostdir, 0));
                let mut logs = store.list(&child)?;
                logs.sort_by(|a, b| a.name.cmp(&b.name));
                for log in logs {
                    let log_path = child.join(&log.name)?;
                    let kind = match layout::parse_log_name(&log.name) {
                        Some((LogKind::Index, _)) => PieceKind::IndexLog,
                        Some((LogKind::Data, _)) => PieceKind::DataLog,
                        None => PieceKind::Unknown,
                    };
                    pieces.push(piece(store, &log_path, kind, size(&log_path)));
                }
            }
            ContainerEntry::RenameIntent => {
                pieces.push(piece(store, &child, PieceKind::RenameIntent, size(&child)))
            }
            ContainerEntry::Layout => pieces.push(piece(store, &child, PieceKind::Layout, size(&child))),
            ContainerEntry::Stripes(_) => pieces.push(piece(store, &child, PieceKind::Stripes, size(&child))),
            ContainerEntry::Unknown => pieces.push(piece(store, &child, PieceKind::Unknown, size(&child))),
        }
    }
    Ok(())
}

struct Recovery<'a> {
    state: &'a MountState,
    path: &'a StorePath,
    fix: bool,
    verify: bool,
    report: RecoveryReport,
}

impl Recovery<'_> {
    fn note(&mut self, problem: Problem, location: String, detail: String, fixed: bool) {
        self.report.findings.push(Finding { problem, location, detail, fixed });
    }

    fn run(&mut self) -> Result<()> {
        self.debris()?;
        if self.renames()? {
            return Ok(());
        }
        self.access_file()?;
        self.version_file()?;
        let meta = container::read_meta(self.state, self.path)?;
        let inventory = container::inventory(self.state, self.path)?;
        for (backend, unknown) in &inventory.unknown {
            let url = self.state.store(*backend).url().to_owned();
            self.note(Problem::UnknownEntry, format!("{url}/{unknown}"), "left in place".into(), false);
        }
        let open: BTreeSet<LogId> = meta.open.iter().copied().collect();
        let sized: BTreeMap<LogId, layout::SizeRecord> = meta.sizes.iter().map(|s| (s.log, *s)).collect();
        let present: BTreeSet<LogId> = inventory.logs.iter().map(|log| log.id).collect();
        let foreign =
            self.foreign_logs(&meta, &inventory.logs, |id| open.contains(id) || sized.contains_key(id))?;
        let mut logs = Vec::with_capacity(inventory.logs.len());
        for log in inventory.logs {
            if foreign.contains(&log.id) {
                self.foreign_log(&log)?;
            } else {
                self.check_log(&log, open.contains(&log.id), sized.get(&log.id))?;
                logs.push(log);
            }
        }
        self.check_global_index(&logs)?;
        for finding in stripes::check(self.state, self.path, &logs, self.fix)? {
            let problem = match finding.problem {
                LayoutProblem::Damaged => Problem::DamagedLayout,
                LayoutProblem::MissingRecord => Problem::MissingStripesRecord,
                LayoutProblem::WrongBackend => Problem::StripeOnWrongBackend,
                LayoutProblem::StrayRecord => Problem::StrayStripesRecord,
            };
            self.note(problem, finding.location, finding.detail, finding.fixed);
        }
        for size in sized.values().filter(|size| !present.contains(&size.log)) {
            let (backend, paths) = container::canonical(self.state, self.path);
            let location = format!("{}/{}", self.state.store(backend).url(), paths.meta(&size.name())?);
            let fixed = self.fix && {
                container::ignore_missing(self.state.store(backend).remove_file(&paths.meta(&size.name())?))?;
                true
            };
            self.note(Problem::DanglingSizeRecord, location, "its logs are gone".into(), fixed);
        }
        if self.fix {
            // A fix may have changed what a stat shows (size records made
            // or removed, the access file rebuilt): the summary goes after
            // it, as after any change; the next close leaves a new one.
            let (backend, paths) = container::canonical(self.state, self.path);
            container::drop_closed_summary(self.state.store(backend), &paths)?;
        }
        Ok(())
    }

    /// The logs in the file's directories that are not the file's (as
    /// readers decide, `container::file_logs`): neither an open nor a size
    /// record names them. A writer makes its open record before its logs,
    /// so one that started after `meta` was read is named by a second
    /// look. With a damaged size record, which logs are the file's is
    /// unknown: none is called foreign.
    fn foreign_logs(
        &self,
        meta: &container::MetaRecords,
        logs: &[LogLocation],
        named: impl Fn(&LogId) -> bool,
    ) -> Result<BTreeSet<LogId>> {
        // (A data log alone is an orphan, whoever left it: check_log.)
        let unnamed: BTreeSet<LogId> =
            logs.iter().filter(|log| log.has_index).map(|log| log.id).filter(|id| !named(id)).collect();
        if meta.damaged || unnamed.is_empty() {
            return Ok(BTreeSet::new());
        }
        let again = container::read_meta(self.state, self.path)?;
        if again.damaged {
            return Ok(BTreeSet::new());
        }
        let named_now: BTreeSet<LogId> =
            again.open.iter().copied().chain(again.sizes.iter().map(|size| size.log)).collect();
        Ok(unnamed.into_iter().filter(|id| !named_now.contains(id)).collect())
    }

    fn foreign_log(&mut self, log: &LogLocation) -> Result<()> {
        let store = self.state.store(log.backend);
        let index_path = log.path(self.path, LogKind::Index);
        let fixed = self.fix && {
            // Index log first: a crash in between leaves an orphan data
            // log, never an index record pointing at nothing.
            container::ignore_missing(store.remove_file(&index_path))?;
            container::ignore_missing(store.remove_file(&log.path(self.path, LogKind::Data)))?;
            true
        };
        self.note(
            Problem::ForeignLog,
            format!("{}/{index_path}", store.url()),
            "no open or size record names it: left by a file removed or replaced at this name; readers skip it"
                .into(),
            fixed,
        );
        Ok(())
    }

    /// A lost or undecodable access file; the fix writes a new one with the
    /// container directory's owner and its mode less execute bits (the
    /// file's own mode is what was lost), so the logs read again.
    fn access_file(&mut self) -> Result<()> {
        if !container::is_damaged(self.state, self.path)? {
            return Ok(());
        }
        let (backend, paths) = container::canonical(self.state, self.path);
        let store = self.state.store(backend);
        let location = format!("{}/{}", store.url(), paths.access());
        let problem = match store.read_all(&paths.access()) {
            Ok(bytes) => match AccessRecord::decode(&bytes) {
                Err(error) => format!("does not decode ({error})"),
                Ok(_) => return Ok(()),
            },
            Err(error) if error.kind() == ErrorKind::NotFound => "is missing".to_owned(),
            Err(error) => return Err(error.context(location)),
        };
        let directory = store.metadata(self.path)?;
        let now = self.state.stamper.now_ns();
        let access = AccessRecord {
            mode: directory.mode.map_or(0o600, |mode| mode & 0o666),
            uid: directory.uid.unwrap_or(self.state.uid),
            gid: directory.gid.unwrap_or(self.state.gid),
            atime_ns: now,
            mtime_ns: directory.mtime.map_or(now, crate::clock::system_time_to_ns),
            ctime_ns: now,
            times_stamp: self.state.stamper.next(),
        };
        let fixed = self.fix && {
            store.replace(&paths.access(), &access.encode()).with_context(|| location.clone())?;
            true
        };
        let detail = if fixed {
            format!("{problem}; rebuilt with mode {:04o}, owner {}:{}", access.mode, access.uid, access.gid)
        } else {
            format!("{problem}; the file cannot be opened")
        };
        self.note(Problem::DamagedAccessFile, location, detail, fixed);
        Ok(())
    }

    /// Half-built (`.plfs-new.*`) and half-removed (`.plfs-gone.*`)
    /// containers and removed files still to delete (`.plfs-reclaim.*`) in
    /// the file's directory, on every backend.
    fn debris(&mut self) -> Result<()> {
        self.debris_in(&self.path.parent().unwrap_or_default())
    }

    fn debris_in(&mut self, parent: &StorePath) -> Result<()> {
        let mut listings = Vec::new();
        for backend in self.state.placement.all_backends() {
            match self.state.store(backend).list(parent) {
                Ok(entries) => listings.push((backend, entries)),
                Err(error) if error.kind() == ErrorKind::NotFound => {}
                Err(error) => return Err(error),
            }
        }
        self.return_from_reclaims(parent, &listings)?;
        for (backend, entries) in &listings {
            let store = self.state.store(*backend);
            for entry in entries {
                let debris = parent.join(&entry.name)?;
                if layout::is_reclaim(&entry.name) {
                    // The unlink already returned: finishing it is no repair
                    // and needs no --fix. Its process, if still running,
                    // may be deleting it too; both ignore what is gone.
                    container::remove_tree(store, &debris)?;
                    self.note(
                        Problem::PendingReclaim,
                        format!("{}/{debris}", store.url()),
                        "pieces of a removed file, left when its process stopped: deleted".into(),
                        true,
                    );
                    continue;
                }
                if layout::is_moving_file(&entry.name) && entry.kind == EntryKind::File {
                    // The file it was copied from is still at its name, or
                    // it is the file a rename replaced: nothing to keep.
                    let fixed = self.fix && {
                        container::ignore_missing(store.remove_file(&debris))?;
                        true
                    };
                    let what = "a copy left by a rename between backends that stopped midway".to_owned();
                    self.note(Problem::Debris, format!("{}/{debris}", store.url()), what, fixed);
                    continue;
                }
                if !layout::is_new_container(&entry.name) && !layout::is_removed(&entry.name) {
                    continue;
                }
                if let Some(detail) = held_open(self.state, &entry.name) {
                    self.note(Problem::HeldOpen, format!("{}/{debris}", store.url()), detail, false);
                    continue;
                }
                let fixed = self.fix && {
                    // An n-n file unlinked while open is a plain file.
                    if entry.kind == EntryKind::File {
                        container::ignore_missing(store.remove_file(&debris))?;
                    } else {
                        container::remove_tree(store, &debris)?;
                    }
                    true
                };
                self.note(
                    Problem::Debris,
                    format!("{}/{debris}", store.url()),
                    "left by a crash".into(),
                    fixed,
                );
            }
        }
        Ok(())
    }

    /// Before the pieces of removed files in `parent` are deleted: an
    /// unlink stopped between taking a shadow container along and moving
    /// back what was not the removed file's may hold logs of the file
    /// another process put at the name meanwhile; they go back to it
    /// (`rename::return_from_reclaim`). Before, recover deleted them, and
    /// that file read as 0 bytes. Moving them is no repair of damage, as
    /// the deletion after it is not: it needs no --fix.
    fn return_from_reclaims(
        &mut self,
        parent: &StorePath,
        listings: &[(BackendId, Vec<DirEntry>)],
    ) -> Result<()> {
        let mut reclaims = BTreeSet::new();
        let mut names = BTreeSet::new();
        for entry in listings.iter().flat_map(|(_, entries)| entries) {
            if layout::is_reclaim(&entry.name) {
                reclaims.insert(&entry.name);
            } else if !layout::is_reserved(&entry.name) && entry.kind == EntryKind::Directory {
                names.insert(&entry.name);
            }
        }
        for reclaim in &reclaims {
            let owners: Vec<&String> =
                names.iter().copied().filter(|name| layout::reclaim_may_be_of(reclaim, name)).collect();
            let named_only = owners.len() > 1;
            for name in owners {
                let (name, removed) = (parent.join(name)?, parent.join(reclaim)?);
                let returned = rename::return_from_reclaim(self.state, &name, &removed, named_only)?;
                if returned > 0 {
                    self.note(
                        Problem::PendingReclaim,
                        format!("/{removed}"),
                        format!(
                            "{returned} logs of /{name}, taken along by an unlink that stopped midway: \
                             returned to it"
                        ),
                        true,
                    );
                }
            }
        }
        Ok(())
    }

    /// The version file on the canonical backend must decode. One that is
    /// empty or the start of this release's record was cut by a crash
    /// before the file's first sync (creation does not sync it): the fix
    /// writes it whole. Other damage is only reported.
    fn version_file(&mut self) -> Result<()> {
        let (backend, paths) = container::canonical(self.state, self.path);
        let store = self.state.store(backend);
        let location = format!("{}/{}", store.url(), paths.version());
        let current = VersionRecord::current().encode();
        let (problem, cut) = match store.read_all(&paths.version()) {
            Ok(bytes) => match VersionRecord::decode(&bytes) {
                Ok(_) => return Ok(()),
                Err(error) => (error.to_string(), current.starts_with(&bytes)),
            },
            Err(error) if error.kind() == ErrorKind::NotFound => ("missing".to_owned(), false),
            Err(error) => return Err(error.context(location)),
        };
        if cut {
            let fixed = self.fix && {
                store.replace(&paths.version(), &current).with_context(|| location.clone())?;
                true
            };
            let detail = format!("{problem}; cut short by a crash before the file's first sync");
            self.note(Problem::DamagedVersionFile, location, detail, fixed);
            return Ok(());
        }
        let detail = format!(
            "{problem}; the data still reads, but the format and release that created it are unknown"
        );
        self.note(Problem::DamagedVersionFile, location, detail, false);
        Ok(())
    }

    /// A data log's header must decode and name the log's own writer.
    /// One cut inside its header with nothing pointing into it is a writer
    /// that died creating it (or is creating it now), not damage.
    fn data_log_header(
        &mut self,
        store: &dyn Store,
        data_path: &StorePath,
        id: &LogId,
        has_writes: bool,
    ) -> Result<()> {
        let location = format!("{}/{data_path}", store.url());
        let handle = store.open_read(data_path).with_context(|| location.clone())?;
        let mut bytes = vec![0; data_log::HEADER_MAX_BYTES];
        let mut filled = 0;
        while filled < bytes.len() {
            let count =
                handle.read_at(&mut bytes[filled..], filled as u64).with_context(|| location.clone())?;
            if count == 0 {
                break;
            }
            filled += count;
        }
        bytes.truncate(filled);
        if !has_writes && crate::format::frame::is_truncated_header(&bytes, DATA_MAGIC) {
            return Ok(());
        }
        let problem = match LogHeader::decode(&bytes, DATA_MAGIC, "data log") {
            Ok((header, _)) if header.created_stamp != id.stamp || header.writer != id.writer => format!(
                "its header names stamp {:016x} writer {:016x}, its name stamp {:016x} writer {:016x}",
                header.created_stamp, header.writer, id.stamp, id.writer
            ),
            Ok(_) => return Ok(()),
            Err(error) => error.to_string(),
        };
        let detail = format!("{problem}; its data still reads, and a log is never rewritten in place");
        self.note(Problem::DamagedDataLogHeader, location, detail, false);
        Ok(())
    }

    /// A flatten may publish its global index before the logs it merges
    /// are synced; a crash then keeps the index but not the data. A global
    /// index naming bytes past a data log's end fails every read of them:
    /// the fix removes it (a cache: readers merge the index logs instead).
    fn check_global_index(&mut self, logs: &[LogLocation]) -> Result<()> {
        let (backend, paths) = container::canonical(self.state, self.path);
        let store = self.state.store(backend);
        let global_path = paths.global_index();
        let bytes = match store.read_all(&global_path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == ErrorKind::NotFound => return Ok(()),
            Err(error) => return Err(error.context(format!("{}/{global_path}", store.url()))),
        };
        // A global index that does not decode is ignored by readers.
        let Ok(global) = crate::format::global_index::GlobalIndex::decode(&bytes) else { return Ok(()) };
        let mut ends = vec![0u64; global.logs.len()];
        let mut extend = |log: u32, end: u64| {
            if let Some(slot) = ends.get_mut(log as usize) {
                *slot = (*slot).max(end);
            }
        };
        for extent in &global.extents {
            extend(extent.log, extent.physical + extent.length);
        }
        for slot in global.groups.iter().flat_map(|group| &group.slots) {
            extend(slot.log, slot.physical + slot.count * slot.length);
        }
        for (covered, end) in global.logs.iter().zip(ends) {
            let Some(log) = logs.iter().find(|log| log.id == covered.id) else { continue };
            let data_path = log.path(self.path, LogKind::Data);
            let data_store = self.state.store(log.backend);
            let length = if log.has_data {
                data_store
                    .metadata(&data_path)
                    .with_context(|| format!("{}/{data_path}", data_store.url()))?
                    .size
            } else {
                0
            };
            if end > length {
                let fixed = self.fix && {
                    container::ignore_missing(store.remove_file(&global_path))?;
                    true
                };
                let detail = format!(
                    "it names bytes up to {end} of data log {data_path}, which ends at {length} (data lost in a \
                     crash){}",
                    if fixed { "; removed, readers merge the index logs" } else { "; reads of them fail" }
                );
                self.note(
                    Problem::UnbackedGlobalIndex,
                    format!("{}/{global_path}", store.url()),
                    detail,
                    fixed,
                );
                break;
            }
        }
        Ok(())
    }

    /// Renames a crash cut short in the file's directory, finished (the new
    /// file at its target name, the replaced one removed), and the clean-up
    /// of a switched rename of this very file. Returns whether a rename onto
    /// this file is still running: its logs are then not checked, as some
    /// in its shadows belong to the file being replaced.
    fn renames(&mut self) -> Result<bool> {
        let parent = self.path.parent().unwrap_or_default();
        let name = self.path.file_name().unwrap_or_default();
        let mut running = false;
        for found in crate::rename::finish_interrupted(self.state, &parent, self.fix)? {
            running |= found.in_progress && layout::is_swap_for(&found.location, name);
            let fixed = self.fix && !found.in_progress;
            self.note(Problem::InterruptedRename, found.location, found.detail, fixed);
        }
        if running {
            return Ok(true);
        }
        let (backend, paths) = container::canonical(self.state, self.path);
        let store = self.state.store(backend);
        if let Some(intent) = crate::rename::target_intent(store, self.path)? {
            let location = format!("{}/{}", store.url(), paths.rename_intent());
            let detail = match crate::rename::classify_intent(self.state, self.path, &intent) {
                HeldIntent::Starting => return Ok(false),
                HeldIntent::Switched => {
                    if self.fix {
                        crate::rename::finish_target(self.state, self.path, &intent)?;
                    }
                    format!(
                        "rename /{} -> /{} cut short after the switch: clean-up finished",
                        intent.source, intent.target
                    )
                }
                HeldIntent::Stale => {
                    if self.fix {
                        container::ignore_missing(store.remove_file(&paths.rename_intent()))
                            .with_context(|| store.url().to_owned())?;
                    }
                    format!("the intent of rename /{} -> /{}, undone: removed", intent.source, intent.target)
                }
            };
            self.note(Problem::InterruptedRename, location, detail, self.fix);
        }
        Ok(false)
    }

    fn check_log(
        &mut self,
        log: &LogLocation,
        is_open: bool,
        size: Option<&layout::SizeRecord>,
    ) -> Result<()> {
        let has_size = size.is_some();
        let store = self.state.store(log.backend);
        let index_path = log.path(self.path, LogKind::Index);
        let data_path = log.path(self.path, LogKind::Data);
        let location = |path: &StorePath| format!("{}/{path}", store.url());
        if !log.has_index {
            let fixed = self.fix && !is_open && {
                container::ignore_missing(store.remove_file(&data_path))?;
                true
            };
            self.note(
                Problem::OrphanDataLog,
                location(&data_path),
                "no index log points into it".into(),
                fixed,
            );
            return Ok(());
        }
        let bytes = store.read_all(&index_path).with_context(|| location(&index_path))?;
        let decoded = match index_log::decode(&bytes) {
            Ok(decoded) => decoded,
            Err(error) if matches!(error.kind(), ErrorKind::Corrupt | ErrorKind::Unsupported) => {
                let detail = format!("{error}; readers refuse the file until it is restored");
                self.note(Problem::CorruptIndexLog, location(&index_path), detail, false);
                return Ok(());
            }
            Err(error) => return Err(error.context(location(&index_path))),
        };
        let writer_alive = is_open && self.writer_alive(&log.id);
        if let Some(torn) = decoded.torn_tail {
            let fixed = self.fix && !writer_alive && {
                // The cut copy keeps the log's own mode and owner.
                let metadata = store.metadata(&index_path)?;
                let protection =
                    Protection { mode: metadata.mode.unwrap_or(0o600), uid: metadata.uid, gid: metadata.gid };
                store.replace_protected(&index_path, &bytes[..decoded.valid_length as usize], &protection)?;
                true
            };
            let detail = format!("{} bytes at offset {} ignored by readers", torn.length, torn.offset);
            self.note(Problem::TornIndexTail, location(&index_path), detail, fixed);
        }
        let mut records = decoded.records;
        let has_writes = records.iter().any(index_log::Record::writes_data);
        if log.has_data {
            self.data_log_header(store, &data_path, &log.id, has_writes)?;
        }
        if has_writes && log.has_data {
            // A crash keeps or loses each log's unsynced tail on its own:
            // index records may survive whose data did not. Their bytes are
            // gone (data carries no framing to find them by); reads of them
            // fail, so the fix drops the records, and the size record and
            // global index that count them are redone below.
            let data_length = store.metadata(&data_path).with_context(|| location(&data_path))?.size;
            let backed = |record: &index_log::Record| physical_end(record) <= data_length;
            let unbacked = records.iter().filter(|record| !backed(record)).count();
            if unbacked > 0 {
                let fixed = self.fix && !writer_alive && {
                    let header = decoded.header.as_ref().expect("a log with records has a header");
                    records.retain(backed);
                    let mut cut = header.encode(crate::format::data_log::INDEX_MAGIC);
                    cut.extend_from_slice(&index_log::encode_frames(&records));
                    let metadata = store.metadata(&index_path)?;
                    let protection = Protection {
                        mode: metadata.mode.unwrap_or(0o600),
                        uid: metadata.uid,
                        gid: metadata.gid,
                    };
                    store.replace_protected(&index_path, &cut, &protection)?;
                    let (backend, paths) = container::canonical(self.state, self.path);
                    container::ignore_missing(self.state.store(backend).remove_file(&paths.global_index()))?;
                    true
                };
                let detail = format!(
                    "{unbacked} index record(s) point past the end of the data log at {data_length} (data lost \
                     in a crash){}",
                    if fixed { "; dropped, and the global index removed" } else { "; reads of them fail" }
                );
                self.note(Problem::UnbackedIndexRecords, location(&index_path), detail, fixed);
                if !fixed {
                    records.retain(backed);
                }
            }
        }
        if has_writes && !log.has_data {
            self.note(
                Problem::MissingDataLog,
                location(&data_path),
                "its index log has records".into(),
                false,
            );
        } else if has_writes && self.verify {
            let handle = store.open_read(&data_path).with_context(|| location(&data_path))?;
            for mismatch in verify_data(handle.as_ref(), &records).with_context(|| location(&data_path))? {
                self.note(Problem::DataChecksumMismatch, location(&data_path), mismatch, false);
            }
        }
        if let Some(claimed) = size {
            let held = container::summarize(log.id, &records);
            // Close publishes the size record durably without syncing the
            // logs it summarises (a sync per close would cost every writer),
            // so after a crash the record may count records the index log
            // lost, or, after a failed append that was in fact kept, fewer
            // than it holds. Readers go by the index log: the size record
            // is made to agree with it.
            let disagrees = (claimed.max_end, claimed.bytes, claimed.last_stamp, claimed.truncate)
                != (held.max_end, held.bytes, held.last_stamp, held.truncate);
            let lost = container::records_lost(claimed, &held).or_else(|| {
                disagrees.then(|| {
                    format!(
                        "its size record counts {} data bytes ending at offset {} (truncate {:?}), but the \
                         index log holds records for {} bytes ending at {} (truncate {:?})",
                        claimed.bytes,
                        claimed.max_end,
                        claimed.truncate,
                        held.bytes,
                        held.max_end,
                        held.truncate
                    )
                })
            });
            if let Some(lost) = lost {
                let fixed = self.fix && {
                    // The new record first: a crash in between leaves both,
                    // and recover runs again.
                    crate::file::publish_size_record(self.state, self.path, &held)?;
                    let (backend, paths) = container::canonical(self.state, self.path);
                    if held.name() != claimed.name() {
                        container::ignore_missing(
                            self.state.store(backend).remove_file(&paths.meta(&claimed.name())?),
                        )?;
                    }
                    // A global index covers logs by name, not by what they
                    // hold: one flattened before the crash would still
                    // answer reads from records the size record no longer
                    // counts (stat and reads would disagree). Readers merge
                    // the index logs instead.
                    container::ignore_missing(self.state.store(backend).remove_file(&paths.global_index()))?;
                    true
                };
                let outcome = if fixed {
                    "; the size record now counts what the index log holds (the lost bytes stay unreadable)"
                } else {
                    "; stat counts bytes that reads cannot find, and reads fail"
                };
                self.note(
                    Problem::LostIndexRecords,
                    location(&index_path),
                    format!("{lost}{outcome}"),
                    fixed,
                );
            }
        }
        if is_open && !has_size {
            let problem = if writer_alive { Problem::OpenElsewhere } else { Problem::StaleOpenRecord };
            let fixed = self.fix && !writer_alive && {
                let summary = container::summarize(log.id, &records);
                crate::file::publish_size_record(self.state, self.path, &summary)?;
                true
            };
            let detail = format!("writer {} pid {}", log.id.writer, log.id.pid);
            self.note(problem, location(&index_path), detail, fixed);
        } else if !is_open && !has_size {
            let fixed = self.fix && {
                let summary = container::summarize(log.id, &records);
                crate::file::publish_size_record(self.state, self.path, &summary)?;
                true
            };
            let detail = "readers and stat skip it".into();
            self.note(Problem::MissingSizeRecord, location(&index_path), detail, fixed);
        } else if is_open && has_size {
            // Closed, but the open record's removal was cut short.
            let (backend, paths) = container::canonical(self.state, self.path);
            let open_path = paths.meta(&layout::open_record_name(&log.id))?;
            let fixed = self.fix && {
                container::ignore_missing(self.state.store(backend).remove_file(&open_path))?;
                true
            };
            let url = self.state.store(backend).url().to_owned();
            self.note(
                Problem::StaleOpenRecord,
                format!("{url}/{open_path}"),
                "log already closed".into(),
                fixed,
            );
        }
        Ok(())
    }

    /// A writer on this host is alive if its pid exists; on another host
    /// there is no way to know, so it counts as alive.
    /// (A log naming this very process on this host was written by an
    /// earlier process that had the same pid: the tool writes no logs.)
    fn writer_alive(&self, id: &LogId) -> bool {
        let same_host = id.host == name_hash(&self.state.hostname);
        if same_host && id.pid == self.state.pid {
            return false;
        }
        id.writer_may_be_alive(&self.state.hostname)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{ManualClock, Stamper};
    use crate::config::{BackendRole, Tuning, VerifyReads};
    use crate::fs::Options;
    use crate::open::OpenFlags;
    use crate::store::SharedStore;
    use crate::store::memory::MemoryStore;
    use std::sync::Arc;

    fn mount(stores: &[SharedStore], pid: u32) -> Plfs {
        let options = Options {
            hostname: "node0".into(),
            pid,
            uid: 0,
            gid: 0,
            stamper: Stamper::new(Arc::new(ManualClock::new(1))),
            tuning: Tuning { threadpool_size: 1, ..Tuning::default() },
        };
        Plfs::new(stores.iter().map(|s| (s.clone(), BackendRole::Any)).collect(), options).unwrap()
    }

    fn flattening_mount(stores: &[SharedStore], pid: u32) -> Plfs {
        let options = Options {
            hostname: "node0".into(),
            pid,
            uid: 0,
            gid: 0,
            stamper: Stamper::new(Arc::new(ManualClock::new(u64::from(pid) * 1000))),
            tuning: Tuning { threadpool_size: 1, flatten_on_close: true, ..Tuning::default() },
        };
        Plfs::new(stores.iter().map(|s| (s.clone(), BackendRole::Any)).collect(), options).unwrap()
    }

    #[test]
    fn the_last_writer_to_close_flattens() {
        let stores = stores(2);
        let (first, second) = (flattening_mount(&stores, 1), flattening_mount(&stores, 2));
        let a = first.open("/f", OpenFlags::WRONLY.create(), 0o644, 0).unwrap();
        let b = second.open("/f", OpenFlags::WRONLY, 0, 1).unwrap();
        for record in 0..6u64 {
            let handle = if record % 2 == 0 { &a } else { &b };
            handle.write(&[record as u8; 10], record * 10).unwrap();
        }
        let logical = StorePath::parse("f").unwrap();
        let has_global = |plfs: &Plfs| {
            load::load_index(plfs.state(), &logical, Prefer::GlobalIndex).unwrap().from_global_index
        };
        a.close().unwrap();
        assert!(!has_global(&first), "a writer is still open: no global index yet");
        b.close().unwrap();
        assert!(has_global(&first), "the last close flattened");
        // A later writer makes it stale; its own close rebuilds it.
        let c = first.open("/f", OpenFlags::WRONLY, 0, 2).unwrap();
        c.write(&[9; 10], 60).unwrap();
        c.sync().unwrap();
        assert!(!has_global(&second), "stale while the new writer is open");
        c.close().unwrap();
        assert!(has_global(&second));
        let reader = mount(&stores, 3);
        let handle = reader.open("/f", OpenFlags::RDONLY, 0, 9).unwrap();
        let mut buf = [0u8; 70];
        assert_eq!(handle.read(&mut buf, 0).unwrap(), 70);
        for (i, byte) in buf.iter().enumerate() {
            assert_eq!(*byte, if i < 60 { (i / 10) as u8 } else { 9 });
        }
    }

    #[test]
    fn verify_finds_a_flipped_data_byte_in_a_pattern_and_in_a_plain_write() {
        let stores = posix_stores();
        let plfs = Plfs::new(
            stores.1.iter().map(|s| (s.clone(), BackendRole::Any)).collect(),
            Options {
                hostname: "node0".into(),
                pid: 1,
                uid: 0,
                gid: 0,
                stamper: Stamper::new(Arc::new(ManualClock::new(1))),
                tuning: Tuning { threadpool_size: 1, ..Tuning::default() },
            },
        )
        .unwrap();
        strided(&plfs);
        let handle = plfs.open("/s", OpenFlags::WRONLY, 0, 0).unwrap();
        handle.write_as(&[7; 33], 200, 5).unwrap();
        handle.close().unwrap();
        let clean = plfs.recover_with("/s", false, true).unwrap();
        assert!(clean.findings.is_empty(), "{clean:?}");
        // Flip one byte in every data log (past its 64-byte header).
        let pieces = plfs.query("/s").unwrap();
        let data_logs: Vec<_> = pieces.iter().filter(|p| p.kind == PieceKind::DataLog).collect();
        assert_eq!(data_logs.len(), 4);
        for piece in &data_logs {
            let root = piece.backend.strip_prefix("posix://").unwrap();
            let file = Path::new(root).join(&piece.path);
            let mut bytes = std::fs::read(&file).unwrap();
            let last = bytes.len() - 1;
            bytes[last] ^= 0x01;
            std::fs::write(&file, bytes).unwrap();
        }
        let report = plfs.recover_with("/s", false, true).unwrap();
        let mismatches: Vec<_> =
            report.findings.iter().filter(|f| f.problem == Problem::DataChecksumMismatch).collect();
        assert_eq!(mismatches.len(), 4, "{report:?}");
        assert!(mismatches.iter().any(|f| f.detail.starts_with("pattern of 3 × 10 bytes")), "{report:?}");
        assert!(mismatches.iter().any(|f| f.detail.starts_with("33 bytes at logical 200")), "{report:?}");
        // Without verify nothing reads the data.
        assert!(plfs.recover("/s", false).unwrap().findings.is_empty());
    }

    fn posix_stores() -> (tempfile::TempDir, Vec<SharedStore>) {
        let dir = tempfile::tempdir().unwrap();
        let stores = (0..2)
            .map(|i| {
                let root = dir.path().join(format!("b{i}"));
                std::fs::create_dir(&root).unwrap();
                let url = format!("posix://{}", root.display());
                Arc::new(crate::store::posix::PosixStore::new(&root, url).unwrap()) as SharedStore
            })
            .collect();
        (dir, stores)
    }

    fn stores(count: usize) -> Vec<SharedStore> {
        (0..count).map(|i| Arc::new(MemoryStore::new(format!("mem://b{i}"))) as SharedStore).collect()
    }

    /// Three writers, strided 10-byte records with a hole at the end.
    fn strided(plfs: &Plfs) {
        let handle = plfs.open("/s", OpenFlags::WRONLY.create(), 0o644, 0).unwrap();
        for record in 0..9u64 {
            handle.write_as(&[record as u8; 10], record * 10, record % 3).unwrap();
        }
        handle.truncate(100).unwrap();
        handle.close().unwrap();
    }

    #[test]
    fn map_reports_extents_and_totals() {
        let stores = stores(2);
        let plfs = mount(&stores, 1);
        strided(&plfs);
        let map = plfs.map("/s").unwrap();
        assert_eq!(map.entries.len(), 9);
        for (record, entry) in map.entries.iter().enumerate() {
            assert_eq!(
                (entry.logical, entry.length, entry.writer),
                (record as u64 * 10, 10, record as u64 % 3)
            );
        }
        assert_eq!(
            map.totals,
            MapTotals {
                writers: 3,
                logs: 3,
                // Each writer's three strided writes are one pattern record.
                records: 4,
                extents: 9,
                index_entries: map.totals.index_entries,
                index_memory_bytes: map.totals.index_memory_bytes,
                data_bytes: 90,
                holes: 1,
                hole_bytes: 10,
                eof: 100
            }
        );
    }

    #[test]
    fn query_lists_every_piece_and_finds_the_owner_of_none_outside() {
        let stores = stores(3);
        let plfs = mount(&stores, 1);
        strided(&plfs);
        let pieces = plfs.query("/s").unwrap();
        let count = |kind| pieces.iter().filter(|p| p.kind == kind).count();
        assert_eq!(count(PieceKind::Container), 1);
        assert_eq!(count(PieceKind::Access), 1);
        assert_eq!(count(PieceKind::IndexLog), 3);
        assert_eq!(count(PieceKind::DataLog), 3);
        assert_eq!(count(PieceKind::SizeRecord), 3);
        assert_eq!(count(PieceKind::OpenRecord), 0);
        assert!(plfs.logical_of(Path::new("/not/a/backend")).unwrap().is_none());
    }

    #[test]
    fn flatten_is_preferred_while_valid_and_ignored_once_stale() {
        let stores = stores(2);
        let plfs = mount(&stores, 1);
        strided(&plfs);
        let report = plfs.flatten("/s").unwrap();
        // Three writers' strided runs: one group of three slots.
        assert_eq!((report.logs, report.extents, report.bytes, report.eof), (3, 3, 90, 100));
        let loaded =
            load::load_index(plfs.state(), &StorePath::parse("s").unwrap(), Prefer::GlobalIndex).unwrap();
        assert!(loaded.from_global_index);
        let reader = mount(&stores, 2);
        let handle = reader.open("/s", OpenFlags::RDONLY, 0, 5).unwrap();
        let mut buf = vec![0xFF; 100];
        assert_eq!(handle.read(&mut buf, 0).unwrap(), 100);
        assert_eq!(&buf[40..50], &[4u8; 10]);
        assert_eq!(&buf[90..], &[0u8; 10]);
        handle.close().unwrap();
        // A later write makes the global index stale: readers must not use it.
        let writer = plfs.open("/s", OpenFlags::WRONLY, 0, 7).unwrap();
        writer.write(b"new", 0).unwrap();
        writer.close().unwrap();
        let loaded =
            load::load_index(plfs.state(), &StorePath::parse("s").unwrap(), Prefer::GlobalIndex).unwrap();
        assert!(!loaded.from_global_index);
        let handle = reader.open("/s", OpenFlags::RDONLY, 0, 5).unwrap();
        assert_eq!(handle.read(&mut buf, 0).unwrap(), 100);
        assert_eq!(&buf[..3], b"new");
        handle.close().unwrap();
    }

    #[test]
    fn tools_refuse_directories() {
        let stores = stores(2);
        let plfs = mount(&stores, 1);
        plfs.mkdir("/d", 0o755).unwrap();
        assert_eq!(plfs.map("/d").unwrap_err().kind(), ErrorKind::IsADirectory);
        assert_eq!(plfs.flatten("/d").unwrap_err().kind(), ErrorKind::IsADirectory);
        assert_eq!(plfs.recover("/d", false).unwrap_err().kind(), ErrorKind::IsADirectory);
        assert_eq!(plfs.file_version("/d").unwrap_err().kind(), ErrorKind::IsADirectory);
        assert_eq!(plfs.query("/missing").unwrap_err().kind(), ErrorKind::NotFound);
    }

    #[test]
    fn flatten_refuses_while_writers_are_open() {
        let stores = stores(1);
        let plfs = mount(&stores, 1);
        let handle = plfs.open("/busy", OpenFlags::WRONLY.create(), 0o644, 0).unwrap();
        handle.write(b"x", 0).unwrap();
        let error = plfs.flatten("/busy").unwrap_err();
        assert!(error.to_string().contains("still have the file open"), "{error}");
        handle.close().unwrap();
        plfs.flatten("/busy").unwrap();
    }

    #[test]
    fn recover_repairs_a_crashed_writer() {
        let stores = stores(2);
        let crashed = mount(&stores, crate::fs::tests::dead_pid());
        let handle = crashed.open("/c", OpenFlags::WRONLY.create(), 0o644, 0).unwrap();
        handle.write(&[9; 50], 0).unwrap();
        handle.sync().unwrap();
        // The process "dies": its handle is leaked, so no close, no size record.
        std::mem::forget(handle);
        let plfs = mount(&stores, 1);
        let inventory = plfs.inventory("/c").unwrap();
        let log = &inventory.logs[0];
        let index_path = log.path(&StorePath::parse("c").unwrap(), LogKind::Index);
        let store = &stores[log.backend.0];
        let mut torn = store.read_all(&index_path).unwrap();
        torn.extend_from_slice(b"PFRM\x40\x00\x00\x00garbage");
        store.replace(&index_path, &torn).unwrap();
        let orphan = StorePath::parse(&format!(
            "c/hostdir.{}/data.{}",
            log.hostdir.0,
            LogId { stamp: 1, writer: 2, pid: 3, host: 4 }
        ))
        .unwrap();
        let orphan_store = &stores[log.backend.0];
        let mut writer = orphan_store.create_append(&orphan).unwrap();
        writer.append(b"lost").unwrap();
        writer.close().unwrap();

        let report = plfs.recover("/c", false).unwrap();
        let problems: BTreeSet<String> = report.findings.iter().map(|f| format!("{:?}", f.problem)).collect();
        // pid 4242 on this host is not alive in the test, so the record is stale.
        assert!(problems.contains("TornIndexTail"), "{report:?}");
        assert!(problems.contains("OrphanDataLog"), "{report:?}");
        assert!(problems.contains("StaleOpenRecord") || problems.contains("OpenElsewhere"), "{report:?}");
        assert!(report.findings.iter().all(|f| !f.fixed));

        let fixed = plfs.recover("/c", true).unwrap();
        assert!(fixed.findings.iter().all(|f| f.fixed), "{fixed:?}");
        assert_eq!(plfs.recover("/c", false).unwrap().findings, vec![]);
        assert_eq!(plfs.stat("/c").unwrap().size, 50);
        let handle = plfs.open("/c", OpenFlags::RDONLY, 0, 1).unwrap();
        let mut buf = [0u8; 50];
        assert_eq!(handle.read(&mut buf, 0).unwrap(), 50);
        assert_eq!(buf, [9u8; 50]);
        handle.close().unwrap();
    }

    /// An unlink whose clean-up fails on one backend leaves the removed
    /// file's logs in a shadow container there. A new file at that name
    /// must never take them: readers skip logs `meta/` does not name, and
    /// `recover --fix` used to give them a size record, so the old file's
    /// bytes came back inside the new one (plfs-sim seed 300).
    #[test]
    fn recover_removes_logs_a_failed_unlink_left_and_never_adds_them_to_a_new_file() {
        use crate::store::faulty::{Fault, FaultAction, FaultyStore, Op};
        let inner = stores(2);
        let faulty: Vec<Arc<FaultyStore>> =
            inner.iter().map(|store| Arc::new(FaultyStore::new(store.clone()))).collect();
        let shared: Vec<SharedStore> = faulty.iter().map(|store| store.clone() as SharedStore).collect();
        let on_host = |host: usize| {
            let options = Options {
                hostname: format!("node{host}"),
                pid: 1,
                uid: 0,
                gid: 0,
                stamper: Stamper::new(Arc::new(ManualClock::new(1))),
                tuning: Tuning { threadpool_size: 1, ..Tuning::default() },
            };
            Plfs::new(shared.iter().map(|s| (s.clone(), BackendRole::Any)).collect(), options).unwrap()
        };
        // Writers on enough hosts that the old file has logs on both backends.
        for host in 0..16 {
            let plfs = on_host(host);
            let handle = plfs.open("/victim", OpenFlags::WRONLY.create(), 0o644, host as u64).unwrap();
            handle.write(&[0xEE; 100], 0).unwrap();
            handle.close().unwrap();
        }
        let plfs = on_host(0);
        let backends: BTreeSet<usize> =
            plfs.inventory("/victim").unwrap().logs.iter().map(|l| l.backend.0).collect();
        assert_eq!(backends.len(), 2, "the old file has logs on both backends");

        // The canonical rename succeeds; moving the shadow aside fails.
        let canonical = plfs.canonical_backend(&StorePath::parse("victim").unwrap());
        let other = &faulty[1 - canonical.0];
        other.add_fault(Fault::new(Op::Rename, FaultAction::Eio));
        assert!(plfs.unlink("/victim").is_err(), "the injected fault fired");
        other.clear();
        plfs.finish_removals();
        assert_eq!(plfs.stat("/victim").unwrap_err().kind(), ErrorKind::NotFound);

        let handle = plfs.open("/victim", OpenFlags::WRONLY.create(), 0o644, 0).unwrap();
        handle.write(b"new", 0).unwrap();
        handle.close().unwrap();
        let read = |plfs: &Plfs| {
            let handle = plfs.open("/victim", OpenFlags::RDONLY, 0, 0).unwrap();
            let mut buf = [0u8; 200];
            let got = handle.read(&mut buf, 0).unwrap();
            handle.close().unwrap();
            (plfs.stat("/victim").unwrap().size, buf[..got].to_vec())
        };
        assert_eq!(read(&plfs), (3, b"new".to_vec()), "readers skip the old file's logs");

        let report = plfs.recover("/victim", true).unwrap();
        assert_eq!(read(&plfs), (3, b"new".to_vec()), "recover --fix kept the old file's bytes out");
        assert!(report.findings.iter().any(|f| f.problem == Problem::ForeignLog && f.fixed), "{report:?}");
        assert!(report.findings.iter().all(|f| f.problem == Problem::ForeignLog), "{report:?}");
        assert_eq!(plfs.recover("/victim", false).unwrap().findings, vec![]);
        assert_eq!(plfs.inventory("/victim").unwrap().logs.len(), 1, "only the new file's log is left");
    }

    fn tuned_mount(stores: &[SharedStore], pid: u32, tuning: Tuning) -> Plfs {
        let options = Options {
            hostname: "node0".into(),
            pid,
            uid: 0,
            gid: 0,
            stamper: Stamper::new(Arc::new(ManualClock::new(u64::from(pid) * 1000))),
            tuning: Tuning { threadpool_size: 1, ..tuning },
        };
        Plfs::new(stores.iter().map(|s| (s.clone(), BackendRole::Any)).collect(), options).unwrap()
    }

    const RECORD_BYTES: usize = 4096;

    fn record_bytes(record: u64) -> Vec<u8> {
        (0..RECORD_BYTES).map(|i| (record as usize * 31 + i * 7) as u8).collect()
    }

    /// `writers` writers, 64 strided records each, closed.
    fn checkpoint(plfs: &Plfs, writers: u64) -> u64 {
        let handle = plfs.open("/ckpt", OpenFlags::WRONLY.create(), 0o644, 0).unwrap();
        let records = writers * 64;
        for record in 0..records {
            handle.write_as(&record_bytes(record), record * RECORD_BYTES as u64, record % writers).unwrap();
        }
        handle.close().unwrap();
        records * RECORD_BYTES as u64
    }

    /// The logs of /ckpt, as (store, index path, data path), oldest writer first.
    fn logs_of(plfs: &Plfs, stores: &[SharedStore]) -> Vec<(SharedStore, StorePath, StorePath)> {
        let container = StorePath::parse("ckpt").unwrap();
        let mut logs = plfs.inventory("/ckpt").unwrap().logs;
        logs.sort_by_key(|log| log.id.writer);
        logs.iter()
            .map(|log| {
                let store = stores[log.backend.0].clone();
                (store, log.path(&container, LogKind::Index), log.path(&container, LogKind::Data))
            })
            .collect()
    }

    fn flip(store: &SharedStore, path: &StorePath, offset: usize) {
        let mut bytes = store.read_all(path).unwrap();
        bytes[offset] ^= 0x10;
        store.replace(path, &bytes).unwrap();
    }

    /// Reads the whole file in `chunk`-byte reads, in order.
    fn read_all(plfs: &Plfs, chunk: usize) -> Result<Vec<u8>> {
        let handle = plfs.open("/ckpt", OpenFlags::RDONLY, 0, 0)?;
        let mut out = Vec::new();
        let mut buf = vec![0; chunk];
        loop {
            let count = handle.read(&mut buf, out.len() as u64)?;
            if count == 0 {
                break;
            }
            out.extend_from_slice(&buf[..count]);
        }
        handle.close()?;
        Ok(out)
    }

    #[test]
    fn reads_refuse_a_flipped_data_byte_and_name_the_log_and_offset() {
        for patterns in [false, true] {
            let stores = stores(2);
            let tuning = Tuning { index_patterns: patterns, ..Tuning::default() };
            let writer = tuned_mount(&stores, 1, tuning.clone());
            let size = checkpoint(&writer, 1);
            let (store, _, data) = logs_of(&writer, &stores).remove(0);
            let header = store.read_all(&data).unwrap().len() - size as usize;
            // Byte 100 of record 5.
            let damaged = header + 5 * RECORD_BYTES + 100;
            flip(&store, &data, damaged);
            let record_start = header + 5 * RECORD_BYTES;
            let whole = tuned_mount(&stores, 2, tuning.clone());
            let error = read_all(&whole, 1 << 20).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Corrupt, "patterns {patterns}: {error}");
            let text = error.to_string();
            assert!(text.contains("/ckpt: read of"), "{text}");
            assert!(text.contains(&format!("data log {}: {data}", store.url())), "{text}");
            // A pattern's one checksum covers all its blocks.
            let (bytes, at) = if patterns { (size, header) } else { (RECORD_BYTES as u64, record_start) };
            assert!(text.contains(&format!("{bytes} bytes at offset {at} fail their checksum")), "{text}");
            // Record-sized reads in order find it too (a pattern at its last block).
            assert_eq!(read_all(&whole, RECORD_BYTES).unwrap_err().kind(), ErrorKind::Corrupt);
            // A read of part of the record is not checked unless `always`.
            let handle = whole.open("/ckpt", OpenFlags::RDONLY, 0, 0).unwrap();
            let mut part = [0u8; 200];
            handle.read(&mut part, 5 * RECORD_BYTES as u64).unwrap();
            handle.close().unwrap();
            let always =
                tuned_mount(&stores, 3, Tuning { verify_reads: VerifyReads::Always, ..tuning.clone() });
            let handle = always.open("/ckpt", OpenFlags::RDONLY, 0, 0).unwrap();
            assert_eq!(
                handle.read(&mut part, 5 * RECORD_BYTES as u64).unwrap_err().kind(),
                ErrorKind::Corrupt
            );
            // Bytes of other records still read under `always`; a
            // pattern's blocks can only be checked all together.
            let other = handle.read(&mut part, 7 * RECORD_BYTES as u64);
            if patterns {
                assert_eq!(other.unwrap_err().kind(), ErrorKind::Corrupt);
            } else {
                assert_eq!(other.unwrap(), 200);
                assert_eq!(part[..], record_bytes(7)[..200]);
            }
            handle.close().unwrap();
            // `off` returns the flipped byte.
            let off = tuned_mount(&stores, 4, Tuning { verify_reads: VerifyReads::Off, ..tuning });
            let read = read_all(&off, 1 << 20).unwrap();
            assert_eq!(read[5 * RECORD_BYTES + 100], record_bytes(5)[100] ^ 0x10);
        }
    }

    #[test]
    fn reads_through_a_global_index_check_data_too() {
        let stores = stores(2);
        let plfs = tuned_mount(&stores, 1, Tuning { index_patterns: false, ..Tuning::default() });
        let size = checkpoint(&plfs, 2);
        plfs.flatten("/ckpt").unwrap();
        let (store, _, data) = logs_of(&plfs, &stores).remove(1);
        let length = store.read_all(&data).unwrap().len();
        flip(&store, &data, length - 1);
        let reader = tuned_mount(&stores, 2, Tuning::default());
        let logical = StorePath::parse("ckpt").unwrap();
        assert!(load::load_index(reader.state(), &logical, Prefer::GlobalIndex).unwrap().from_global_index);
        let error = read_all(&reader, size as usize).unwrap_err();
        assert!(
            error.to_string().contains(&format!("{data}: 4096 bytes at offset {}", length - 4096)),
            "{error}"
        );
    }

    #[test]
    fn an_index_log_cut_short_is_found_refused_and_fixed_so_stat_agrees_with_reads() {
        for cut_to_header in [true, false] {
            let stores = stores(2);
            let plfs = tuned_mount(&stores, 1, Tuning::default());
            let size = checkpoint(&plfs, 2);
            let (store, index, _) = logs_of(&plfs, &stores).remove(0);
            let bytes = store.read_all(&index).unwrap();
            // Cut to its header (47 bytes for host node0), or inside it.
            let cut = if cut_to_header { 47 } else { 10 };
            store.replace(&index, &bytes[..cut]).unwrap();
            let reader = tuned_mount(&stores, 2, Tuning::default());
            assert_eq!(reader.stat("/ckpt").unwrap().size, size);
            // Reads refuse rather than return the lost records as zeros.
            let error = read_all(&reader, 1 << 20).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Corrupt);
            assert!(error.to_string().contains(&format!("index log {index}")), "{error}");
            assert!(error.to_string().contains("index records were lost"), "{error}");
            for verify in [false, true] {
                let report = reader.recover_with("/ckpt", false, verify).unwrap();
                assert!(
                    report.findings.iter().any(|f| f.problem == Problem::LostIndexRecords && !f.fixed),
                    "{report:?}"
                );
            }
            let fixed = reader.recover("/ckpt", true).unwrap();
            assert_eq!(fixed.unfixed(), 0, "{fixed:?}");
            assert!(fixed.findings.iter().any(|f| f.problem == Problem::LostIndexRecords), "{fixed:?}");
            assert_eq!(reader.recover("/ckpt", false).unwrap().findings, vec![]);
            let after = tuned_mount(&stores, 3, Tuning::default());
            let read = read_all(&after, 1 << 20).unwrap();
            assert_eq!(after.stat("/ckpt").unwrap().size, read.len() as u64);
            // Writer 1's records (odd ones) survive; writer 0's read as holes.
            assert_eq!(read[RECORD_BYTES..2 * RECORD_BYTES], record_bytes(1)[..]);
            assert!(read[..RECORD_BYTES].iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn recover_reports_damaged_data_log_headers_and_version_files() {
        let stores = stores(2);
        let plfs = tuned_mount(&stores, 1, Tuning::default());
        checkpoint(&plfs, 1);
        let (store, _, data) = logs_of(&plfs, &stores).remove(0);
        flip(&store, &data, 20);
        let (backend, paths) = container::canonical(plfs.state(), &StorePath::parse("ckpt").unwrap());
        flip(&stores[backend.0], &paths.version(), 9);
        for verify in [false, true] {
            let report = plfs.recover_with("/ckpt", true, verify).unwrap();
            let problems: Vec<Problem> = report.findings.iter().map(|f| f.problem).collect();
            assert!(problems.contains(&Problem::DamagedDataLogHeader), "{report:?}");
            assert!(problems.contains(&Problem::DamagedVersionFile), "{report:?}");
            assert_eq!(report.unfixed(), 2, "nothing is claimed fixed: {report:?}");
        }
        // The data itself still reads.
        assert_eq!(read_all(&plfs, 1 << 20).unwrap()[..RECORD_BYTES], record_bytes(0)[..]);
    }
}
