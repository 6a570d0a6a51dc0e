//! Containers on backends: lock-free creation, finding every log of a file
//! on every backend, reading metadata records, and removal.
//!
//! Creation assembles a complete container (version, access file, meta
//! directory) under a private temporary name and publishes it with one
//! no-replace rename, so any number of racing creators end with exactly one
//! container and no reader ever sees a half-made one. On stores without
//! atomic directory rename (S3) the access file's conditional create is the
//! deciding step instead.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::error::{Error, ErrorKind, Result, ResultExt};
use crate::format;
use crate::format::access::AccessRecord;
use crate::format::closed::ClosedSummary;
use crate::format::index_log::{self, DecodedIndexLog, Record};
use crate::format::version::VersionRecord;
use crate::layout::{self, ContainerEntry, ContainerPaths, LogId, LogKind, MetaEntry, SizeRecord};
use crate::mount_state::MountState;
use crate::placement::{BackendId, HostdirId};
use crate::protection::{self, Pieces};
use crate::store::{EntryKind, Metadata, NewPiece, Store, StoreExt, StorePath};
use crate::striping::Layout;

/// Racing creators retry a few times when they lose in a way that leaves no
/// container behind (e.g. the winner unlinked it again at once).
const CREATE_ATTEMPTS_MAX: usize = 6;

/// What a logical path of a container mount is, as seen on its canonical
/// backend (the other workloads have lookups of their own).
#[derive(Debug, Clone)]
pub enum Lookup {
    File(AccessRecord),
    Directory(Metadata),
    Symlink(Metadata),
}

// Defined below the workloads so that protection (same layer) can find a
// container without importing this module.
pub(crate) use crate::mount_state::canonical;
pub(crate) use crate::placement::placement_name;

/// Finds what is at `path`. A directory holding an access file is a file.
pub(crate) fn lookup(mount: &MountState, path: &StorePath) -> Result<Lookup> {
    reject_container_insides(mount, path)?;
    lookup_entry(mount, path)
}

/// A path through a file reaches the inside of its container (`f/meta`,
/// `f/hostdir.3/…`): that is not a logical entry, and POSIX says ENOTDIR.
/// Only components with a container entry's name cost a lookup of their
/// parent, so ordinary paths cost nothing.
fn reject_container_insides(mount: &MountState, path: &StorePath) -> Result<()> {
    let mut prefix = StorePath::root();
    for component in path.components() {
        // A damaged container (Corrupt) is a file too, not a way in.
        if !prefix.is_root()
            && layout::classify_container_entry(component) != ContainerEntry::Unknown
            && match lookup_entry(mount, &prefix) {
                Ok(found) => matches!(found, Lookup::File(_)),
                Err(error) => error.kind() == ErrorKind::Corrupt,
            }
        {
            return Err(Error::new(ErrorKind::NotADirectory, format!("/{path}: /{prefix} is a file")));
        }
        prefix = prefix.join(component)?;
    }
    Ok(())
}

fn lookup_entry(mount: &MountState, path: &StorePath) -> Result<Lookup> {
    let (backend, paths) = canonical(mount, path);
    let store = mount.store(backend);
    // The store's own error already names its url and the path.
    let mut metadata = store.metadata(path)?;
    // A directory whose access file is missing may be a container that
    // another process unlinked or renamed away (one rename each) between
    // the two reads, or one that replaced another: the entry is read again
    // after the miss, and only a second miss in a row makes it a directory
    // (or a container that lost its access file). A lookup then answers
    // with what was at the name at some point during it, never with a
    // directory that was a file throughout.
    let mut missed = false;
    loop {
        match metadata.kind {
            EntryKind::Symlink => return Ok(Lookup::Symlink(metadata)),
            EntryKind::File => {
                return Err(Error::corrupt(format!(
                    "{}: {path} is a plain file where plfs expects a container or directory",
                    store.url()
                )));
            }
            EntryKind::Directory => {}
        }
        match store.read_all(&paths.access()) {
            Ok(bytes) => {
                return match AccessRecord::decode(&bytes) {
                    Ok(access) => Ok(Lookup::File(access)),
                    // A user's symlink named "access" in a logical directory.
                    Err(_) if store.metadata(&paths.access())?.kind != EntryKind::File => {
                        Ok(Lookup::Directory(metadata))
                    }
                    // A crash before the file's first sync can cut it (creation
                    // does not sync it), so say how to rebuild it.
                    Err(error) => Err(error.context(format!(
                        "{}: {} (`plfs recover --fix /{path}` rebuilds it)",
                        store.url(),
                        paths.access()
                    ))),
                };
            }
            Err(error) if error.kind() == ErrorKind::NotFound && !missed => {
                missed = true;
                // NotFound now: the file went (unlink, rename away).
                metadata = store.metadata(path)?;
            }
            Err(error) if error.kind() == ErrorKind::NotFound && lost_access_file(store, &paths)? => {
                return Err(Error::corrupt(format!(
                    "{}: {path} is a file whose container has lost its access file \
                     (its logs are kept; `plfs recover --fix /{path}` rebuilds it)",
                    store.url()
                )));
            }
            // NotFound: a logical directory. IsADirectory: a logical directory
            // holding a user's file (a container) named "access".
            Err(error) if matches!(error.kind(), ErrorKind::NotFound | ErrorKind::IsADirectory) => {
                return Ok(Lookup::Directory(metadata));
            }
            Err(error) => return Err(error),
        }
    }
}

/// Whether a directory without an access file is a container that lost it
/// (a crash never does that; a person or a failing disk can). Its data must
/// not pass for an empty directory that rmdir would delete. The sign is a
/// plain `version` file: a logical directory holds no plain files but plfs's
/// reserved ones (a user's file named `version` is a container directory).
/// Costs one metadata call per directory looked up.
pub(crate) fn lost_access_file(store: &dyn Store, paths: &ContainerPaths) -> Result<bool> {
    match store.metadata(&paths.version()) {
        Ok(metadata) if metadata.kind == EntryKind::File => {}
        Ok(_) => return Ok(false),
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(false),
        Err(error) => return Err(error),
    }
    // Without atomic directory rename a container being made shows its meta
    // directory and version file before its access file.
    Ok(store.capabilities().atomic_dir_rename || !being_created(store, paths)?)
}

/// Whether `path` is a file whose container is damaged (its access file
/// lost or undecodable): lookups fail with `Corrupt` naming it, yet it is
/// listed as a file and may be unlinked, which is how users clean up.
pub(crate) fn is_damaged(mount: &MountState, path: &StorePath) -> Result<bool> {
    if path.is_root() {
        return Ok(false);
    }
    match lookup_entry(mount, path) {
        Err(error) if error.kind() == ErrorKind::Corrupt => {
            let (backend, _) = canonical(mount, path);
            Ok(mount.store(backend).metadata(path)?.kind == EntryKind::Directory)
        }
        _ => Ok(false),
    }
}

/// Creates the container for `path` unless one exists. Returns whether this
/// call created it. `exclusive` turns an existing container into an error.
/// A striped file's `layout` is part of the container from the start, so
/// no writer ever sees the file without it.
pub(crate) fn create(
    mount: &MountState,
    path: &StorePath,
    access: &AccessRecord,
    exclusive: bool,
    layout: Option<&Layout>,
) -> Result<bool> {
    let name = path.file_name().ok_or_else(|| Error::new(ErrorKind::IsADirectory, "/"))?;
    let (backend, paths) = canonical(mount, path);
    let store = mount.store(backend);
    for _ in 0..CREATE_ATTEMPTS_MAX {
        match lookup(mount, path) {
            Ok(Lookup::File(_)) if exclusive => {
                return Err(Error::new(ErrorKind::AlreadyExists, path.to_string()));
            }
            Ok(Lookup::File(_)) => return Ok(false),
            // Without atomic directory rename, another creator's container
            // is visible before its access file: join that race.
            Ok(Lookup::Directory(_))
                if !store.capabilities().atomic_dir_rename && being_created(store, &paths)? => {}
            Ok(Lookup::Directory(_)) => return Err(Error::new(ErrorKind::IsADirectory, path.to_string())),
            Ok(Lookup::Symlink(_)) => return Err(Error::new(ErrorKind::AlreadyExists, path.to_string())),
            Err(error) if error.kind() == ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
        let parent = path.parent().unwrap_or_default();
        match store.metadata(&parent) {
            Ok(metadata) if metadata.kind == EntryKind::Directory => {}
            Ok(_) => return Err(Error::new(ErrorKind::NotADirectory, parent.to_string())),
            Err(error) => return Err(error.context(format!("parent of {path}"))),
        }
        let published = if store.capabilities().atomic_dir_rename {
            publish_by_rename(mount, store, &parent, name, &paths, access, layout)?
        } else {
            publish_by_access_file(store, &paths, access, layout)?
        };
        if published {
            return Ok(true);
        }
        // Another creator won. Its access file may not be readable yet (on
        // HDFS it is closed in the background), and seeing it is enough.
        if store.metadata(&paths.access()).is_ok_and(|metadata| metadata.kind == EntryKind::File) {
            return if exclusive {
                Err(Error::new(ErrorKind::AlreadyExists, path.to_string()))
            } else {
                Ok(false)
            };
        }
    }
    Err(Error::new(
        ErrorKind::Io,
        format!(
            "{path}: container creation kept racing with removal; gave up after {CREATE_ATTEMPTS_MAX} attempts"
        ),
    ))
}

fn publish_by_rename(
    mount: &MountState,
    store: &dyn Store,
    parent: &StorePath,
    name: &str,
    paths: &ContainerPaths,
    access: &AccessRecord,
    layout: Option<&Layout>,
) -> Result<bool> {
    let temporary = parent.join(&layout::new_container_name(name, mount.stamper.next(), mount.pid))?;
    let staged = ContainerPaths::new(temporary.clone());
    let pieces = Pieces::of(access);
    let assemble = || -> Result<()> {
        // Every piece has the file's protection before the rename publishes
        // it: no moment where a reader could open the pieces more widely.
        store.create_dir_protected(&temporary, &pieces.container)?;
        // The staging directory is private until the rename, so the store
        // may make its pieces in whatever way is quickest (POSIX: in place,
        // no sync; HDFS: at once, the files settled at the file's close).
        // They are made durable at the file's first sync (sync_creation),
        // as a plain creat(2) is: a crash before it may leave the access,
        // version and layout files empty or cut short, which `recover
        // --fix` rebuilds (a layout from the directory's: reads do not
        // need it, since index records name the log of every byte).
        let (meta, version, access_path, layout_path) =
            (staged.meta_dir(), staged.version(), staged.access(), staged.layout());
        let (version_bytes, access_bytes) = (VersionRecord::current().encode(), access.encode());
        let layout_bytes = layout.map(format::striping::encode_layout);
        let mut new = vec![
            NewPiece::Dir { path: &meta, protection: &pieces.meta },
            NewPiece::File { path: &version, contents: &version_bytes, protection: &pieces.public },
            NewPiece::File { path: &access_path, contents: &access_bytes, protection: &pieces.public },
        ];
        if let Some(layout_bytes) = &layout_bytes {
            new.push(NewPiece::File {
                path: &layout_path,
                contents: layout_bytes,
                protection: &pieces.public,
            });
        }
        store.fill_private_dir(&temporary, &new)?;
        store.rename(&temporary, &paths.dir)
    };
    match assemble() {
        Ok(()) => Ok(true),
        Err(error) => {
            remove_tree(store, &temporary).ok();
            if error.kind() == ErrorKind::AlreadyExists {
                Ok(false)
            } else {
                Err(error.context(format!("{}: creating container {}", store.url(), paths.dir)))
            }
        }
    }
}

/// Makes a container's creation durable: the contents of its version,
/// access and layout files and its stripes records, its entries and its
/// name. Creation syncs none of them (`publish_by_rename`, and placement
/// for stripes records); a writer calls this before its first synced
/// byte, so data reported synced never sits in a container a crash could
/// take apart. A piece gone since (another process renamed or removed the
/// file while it was open) is skipped: the logs still sync, and a
/// journaled file system (ext4, XFS) commits the names made before them
/// with them.
pub(crate) fn sync_creation(mount: &MountState, path: &StorePath) -> Result<()> {
    let (backend, paths) = canonical(mount, path);
    let store = mount.store(backend);
    let parent = path.parent().unwrap_or_default();
    ignore_missing(store.sync_file(&paths.version()))?;
    ignore_missing(store.sync_file(&paths.access()))?;
    // Where the file's later writes go: synced with the first data, so a
    // layout a crash cut belongs to a file none of whose bytes were synced.
    // So are the stripes records placed so far (placement does not sync
    // them either).
    match store.sync_file(&paths.layout()) {
        Ok(()) => {
            let entries = match store.list(&paths.dir) {
                Ok(entries) => entries,
                Err(error) if error.kind() == ErrorKind::NotFound => Vec::new(),
                Err(error) => return Err(error),
            };
            for entry in entries {
                if matches!(layout::classify_container_entry(&entry.name), ContainerEntry::Stripes(_)) {
                    ignore_missing(store.sync_file(&paths.dir.join(&entry.name)?))?;
                }
            }
        }
        Err(error) if error.kind() == ErrorKind::NotFound => {}
        Err(error) => return Err(error),
    }
    ignore_missing(store.sync_dir(&paths.dir))?;
    ignore_missing(store.sync_dir(&parent))
}

fn publish_by_access_file(
    store: &dyn Store,
    paths: &ContainerPaths,
    access: &AccessRecord,
    layout: Option<&Layout>,
) -> Result<bool> {
    let pieces = Pieces::of(access);
    store.create_dir_all(&paths.meta_dir())?;
    match store.create_new_protected(&paths.version(), &VersionRecord::current().encode(), &pieces.public) {
        Ok(()) => {}
        Err(error) if error.kind() == ErrorKind::AlreadyExists => {}
        Err(error) => return Err(error),
    }
    // Before the access file that publishes the container. Racing creators
    // each try; the first layout stays (creators of one mount agree on it).
    if let Some(layout) = layout {
        match store.create_new_protected(
            &paths.layout(),
            &format::striping::encode_layout(layout),
            &pieces.public,
        ) {
            Ok(()) => {}
            Err(error) if error.kind() == ErrorKind::AlreadyExists => {}
            Err(error) => return Err(error),
        }
    }
    match store.create_new_protected(&paths.access(), &access.encode(), &pieces.public) {
        // Only the winner sets the directories' protection. (No store
        // without atomic directory rename keeps modes today: S3.)
        Ok(()) => {
            store.protect(&paths.dir, &pieces.container)?;
            store.protect(&paths.meta_dir(), &pieces.meta)?;
            Ok(true)
        }
        Err(error) if error.kind() == ErrorKind::AlreadyExists => Ok(false),
        Err(error) => Err(error),
    }
}

/// Whether a directory is a container that `publish_by_access_file` is
/// still making: only its `meta/` directory (made first) and perhaps its
/// `version` file, no access file yet. A logical directory cannot look like
/// that unless a user made an empty `meta` directory and nothing else in it.
/// A creator that finished since the caller looked for the access file
/// (there is one now), or a directory removed since, also means: look again.
fn being_created(store: &dyn Store, paths: &ContainerPaths) -> Result<bool> {
    let entries = match store.list(&paths.dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(true),
        Err(error) => return Err(error),
    };
    let mut has_meta = false;
    for entry in &entries {
        match (layout::classify_container_entry(&entry.name), entry.kind) {
            (ContainerEntry::Access, EntryKind::File) => return Ok(true),
            (ContainerEntry::Meta, EntryKind::Directory) => has_meta = true,
            (ContainerEntry::Version | ContainerEntry::Layout, EntryKind::File) => {}
            _ => return Ok(false),
        }
    }
    Ok(has_meta)
}

/// Removes a directory tree on one store, deepest entries first.
pub(crate) fn remove_tree(store: &dyn Store, path: &StorePath) -> Result<()> {
    let entries = match store.list(path) {
        Ok(entries) => entries,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error),
    };
    for entry in entries {
        let child = path.join(&entry.name)?;
        match entry.kind {
            EntryKind::Directory => remove_tree(store, &child)?,
            EntryKind::File | EntryKind::Symlink => ignore_missing(store.remove_file(&child))?,
        }
    }
    ignore_missing(store.remove_dir(path))
}

pub(crate) fn ignore_missing(result: Result<()>) -> Result<()> {
    match result {
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// One writer's logs, wherever they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLocation {
    pub backend: BackendId,
    pub hostdir: HostdirId,
    pub id: LogId,
    pub has_index: bool,
    pub has_data: bool,
}

impl LogLocation {
    pub fn path(&self, container: &StorePath, kind: LogKind) -> StorePath {
        ContainerPaths::new(container.clone()).log(self.hostdir, kind, &self.id)
    }
}

/// Everything found in a container's directories across all backends.
#[derive(Debug, Default)]
pub struct Inventory {
    pub logs: Vec<LogLocation>,
    /// Names plfs does not write, with their backend: for `plfs recover`.
    pub unknown: Vec<(BackendId, StorePath)>,
}

/// Lists every hostdir of the container on every backend (hostdirs may be
/// anywhere after a rename or a change of num_hostdirs).
pub(crate) fn inventory(mount: &MountState, path: &StorePath) -> Result<Inventory> {
    let paths = ContainerPaths::new(path.clone());
    let mut found: BTreeMap<(BackendId, HostdirId, LogId), (bool, bool)> = BTreeMap::new();
    let mut inventory = Inventory::default();
    for backend in mount.placement.all_backends() {
        let store = mount.store(backend);
        let entries = match store.list(path) {
            Ok(entries) => entries,
            Err(error) if error.kind() == ErrorKind::NotFound => continue,
            Err(error) => return Err(error.context(format!("{}: listing {path}", store.url()))),
        };
        for entry in entries {
            let ContainerEntry::Hostdir(hostdir) = layout::classify_container_entry(&entry.name) else {
                continue;
            };
            // plfs makes hostdirs as directories; a link is a PLFS 2.5
            // metalink that a migration (crate::migrate) is removing, and
            // may dangle once the switch displaced its shadow.
            if entry.kind == EntryKind::Symlink {
                continue;
            }
            let hostdir_path = paths.hostdir(hostdir);
            let logs =
                store.list(&hostdir_path).with_context(|| format!("{}: {hostdir_path}", store.url()))?;
            for log in logs {
                match layout::parse_log_name(&log.name) {
                    Some((kind, id)) => {
                        let slot = found.entry((backend, hostdir, id)).or_insert((false, false));
                        match kind {
                            LogKind::Index => slot.0 = true,
                            LogKind::Data => slot.1 = true,
                        }
                    }
                    None => inventory.unknown.push((backend, hostdir_path.join(&log.name)?)),
                }
            }
        }
    }
    inventory.logs = found
        .into_iter()
        .map(|((backend, hostdir, id), (has_index, has_data))| LogLocation {
            backend,
            hostdir,
            id,
            has_index,
            has_data,
        })
        .collect();
    Ok(inventory)
}

/// The file's index logs: those of the [`inventory`] that `meta/` names
/// (an open or a size record; a writer makes its open record before its
/// logs). Other logs in the file's directories are not the file's: while a
/// rename replaces a file, the new file's logs and the old one's share the
/// target's shadow containers on other backends for a moment (rename.rs),
/// and each file's readers take only their own. When a size record is
/// damaged, which logs are the file's is unknown: all are taken.
pub(crate) fn file_logs(mount: &MountState, path: &StorePath) -> Result<Vec<LogLocation>> {
    let mut stuck = 0;
    let mut replacements = 0;
    let mut last_named: Option<Vec<LogId>> = None;
    let mut empty_before = false;
    loop {
        let look = file_logs_once(mount, path)?;
        // No logs at all: an empty file, or listings that opened `meta/`
        // and the container by name just before another process's rename
        // or unlink moved them away and removed what they held (they read
        // empty directories). A second look tells: the file is empty twice,
        // or now has its logs, or is gone.
        if look.complete && look.logs.is_empty() && !empty_before {
            empty_before = true;
            continue;
        }
        if look.complete {
            return Ok(look.logs);
        }
        if look.absent {
            // No `meta/`: gone, or a container (maybe a newer one) came
            // after; look again at that one.
            require_container(mount, path)?;
        }
        // `meta/` named other closed logs than at the last look: the file
        // was replaced again meanwhile (a name republished by rename faster
        // than one look runs), which is no sign of damage.
        if last_named.as_ref().is_some_and(|named| *named != look.closed)
            && replacements < FILE_REPLACEMENTS_MAX
        {
            replacements += 1;
        } else if stuck + 1 < FILE_LOGS_ATTEMPTS_MAX {
            stuck += 1;
            // A log can be away for a moment: an unlink of the file that
            // was at this name before takes its shadows along and returns
            // this file's logs right after (rename::gather_removed). Looks
            // at once could all fall in that moment, and then the file read
            // short, silently: they wait a little longer each time.
            std::thread::sleep(STUCK_LOOK_PAUSE * (1 << stuck));
        } else {
            // A size record whose log stays missing is damage `plfs
            // recover` reports; read what there is.
            return Ok(look.logs);
        }
        last_named = Some(look.closed);
    }
}

/// Fails with `Stale` when no container is at `path`. A reader that opened
/// the file and loads its index after another process unlinked it (or
/// renamed it away) finds no `meta/` and no logs, which passed for an empty
/// file: it read 0 bytes of a whole file, silently.
fn require_container(mount: &MountState, path: &StorePath) -> Result<()> {
    let (backend, paths) = canonical(mount, path);
    let store = mount.store(backend);
    match store.metadata(&paths.access()) {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == ErrorKind::NotFound => Err(Error::new(
            ErrorKind::Stale,
            format!(
                "/{path}: the file is gone: another process unlinked it or renamed it away after it was \
                 opened here, before this process had loaded it (open it again by name)"
            ),
        )),
        Err(error) => Err(error.context(store.url().to_owned())),
    }
}

/// Looks taken while a rename replaces the file can disagree (meta/ of the
/// old file, its logs on another backend already moved away): then look
/// again, a bounded number of times.
const FILE_LOGS_ATTEMPTS_MAX: usize = 8;

/// The first pause between looks that disagree; it doubles each time (all
/// seven pauses: about 32 ms, paid only by a file whose log stays missing).
const STUCK_LOOK_PAUSE: std::time::Duration = std::time::Duration::from_micros(125);

/// Looks again when each disagreeing look found `meta/` naming other logs
/// (the file replaced once more), on top of `FILE_LOGS_ATTEMPTS_MAX`.
const FILE_REPLACEMENTS_MAX: usize = 64;

/// One look at a file's logs.
struct FileLogsLook {
    logs: Vec<LogLocation>,
    /// Every closed log that `meta/` names was found, with its data log
    /// when its size record counts data (a rename moves a data log before
    /// its index log, so a listing in between sees an index alone), and
    /// `meta/` named something if index logs were found.
    complete: bool,
    /// The closed logs `meta/` named, sorted.
    closed: Vec<LogId>,
    /// `meta/` was missing (see [`MetaRecords::absent`]); never complete.
    absent: bool,
}

fn file_logs_once(mount: &MountState, path: &StorePath) -> Result<FileLogsLook> {
    // meta/ first: a writer that starts after it was read has logs the
    // listing may show, and they are newer than this reader's view anyway.
    let names = |meta: &MetaRecords| -> HashSet<LogId> {
        meta.open.iter().copied().chain(meta.sizes.iter().map(|size| size.log)).collect()
    };
    let meta = read_meta(mount, path)?;
    let inventory = inventory(mount, path)?;
    let mut damaged = meta.damaged;
    let mut named = names(&meta);
    if !damaged && inventory.logs.iter().any(|log| log.has_index && !named.contains(&log.id)) {
        // A listing racing with a writer's close can miss both its open
        // record (just removed) and its size record (made before that);
        // a second listing, started after, sees the size record.
        let again = read_meta(mount, path)?;
        damaged = again.damaged;
        named.extend(names(&again));
    }
    let found: HashMap<LogId, bool> =
        inventory.logs.iter().filter(|log| log.has_index).map(|log| (log.id, log.has_data)).collect();
    // `meta/` naming nothing beside index logs: the listing may have read
    // the replaced file's `meta/` while its removal emptied it (the
    // directory was opened by name just before a rename switched the name
    // to the new file).
    let emptied = meta.open.is_empty() && meta.sizes.is_empty() && !meta.damaged && !found.is_empty();
    let complete = !emptied
        && !meta.absent
        && meta
            .sizes
            .iter()
            .all(|size| found.get(&size.log).is_some_and(|has_data| *has_data || size.bytes == 0));
    let mut closed: Vec<LogId> = meta.sizes.iter().map(|size| size.log).collect();
    closed.sort_unstable();
    let logs = inventory
        .logs
        .into_iter()
        .filter(|log| log.has_index && (damaged || named.contains(&log.id)))
        .collect();
    Ok(FileLogsLook { logs, complete, closed, absent: meta.absent })
}

/// The records in `meta/`, split into open records and size records.
#[derive(Debug, Default)]
pub struct MetaRecords {
    pub open: Vec<LogId>,
    pub sizes: Vec<SizeRecord>,
    /// A size record name failed its checksum: sizes must come from logs.
    pub damaged: bool,
    /// There was no `meta/` to list: no container at the path then (one
    /// that another process removed or renamed away), or one made without
    /// atomic directory renames that has none yet.
    pub absent: bool,
}

pub(crate) fn read_meta(mount: &MountState, path: &StorePath) -> Result<MetaRecords> {
    let (backend, paths) = canonical(mount, path);
    let store = mount.store(backend);
    let mut records = MetaRecords::default();
    let entries = match store.list(&paths.meta_dir()) {
        Ok(entries) => entries,
        Err(error) if error.kind() == ErrorKind::NotFound => {
            records.absent = true;
            return Ok(records);
        }
        Err(error) => return Err(error.context(format!("{}: {}", store.url(), paths.meta_dir()))),
    };
    for entry in entries {
        match layout::parse_meta_name(&entry.name) {
            Some(Ok(MetaEntry::Open(id))) => records.open.push(id),
            Some(Ok(MetaEntry::Size(size))) => records.sizes.push(size),
            Some(Err(error)) => {
                tracing::warn!("{}: {}: {error}; sizes will be read from index logs", store.url(), path);
                records.damaged = true;
            }
            None => {}
        }
    }
    Ok(records)
}

/// Reads and decodes one index log. A torn tail is skipped, and logged as
/// [`torn_tail_is_expected`] says.
pub(crate) fn read_index_log(
    mount: &MountState,
    path: &StorePath,
    log: &LogLocation,
) -> Result<DecodedIndexLog> {
    let store = mount.store(log.backend);
    let log_path = log.path(path, LogKind::Index);
    let label = || format!("{}: index log {log_path}", store.url());
    let bytes = store.read_all(&log_path).with_context(label)?;
    let decoded = index_log::decode(&bytes).with_context(label)?;
    if let Some(torn) = decoded.torn_tail {
        // Only now is meta/ worth a listing; if it cannot be read, warn.
        let expected =
            read_meta(mount, path).is_ok_and(|meta| torn_tail_is_expected(&meta, &log.id, &mount.hostname));
        if expected {
            tracing::debug!(
                "{}: ignoring {} bytes at offset {}: its writer is still open, mid-append",
                label(),
                torn.length,
                torn.offset
            );
        } else {
            tracing::warn!(
                "{}: ignoring torn tail of {} bytes at offset {} (run `plfs recover`)",
                label(),
                torn.length,
                torn.offset
            );
        }
    }
    Ok(decoded)
}

/// Whether a torn tail of `log` is what a reader normally sees while the
/// log's writer is appending a frame: its open record is in `meta/`, it
/// has no size record yet (written at close), and it may still be running.
/// Otherwise the frame will never be completed: damage worth a warning
/// (a crash mid-append, which `plfs recover` reports).
pub(crate) fn torn_tail_is_expected(meta: &MetaRecords, log: &LogId, hostname: &str) -> bool {
    meta.open.contains(log)
        && !meta.sizes.iter().any(|size| size.log == *log)
        && log.writer_may_be_alive(hostname)
}

/// Size, blocks and newest stamp of a file, from its records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SizeSummary {
    pub eof: u64,
    pub bytes: u64,
    pub last_stamp: u64,
}

/// Summarises one log's records the way its size record would.
pub fn summarize(log: LogId, records: &[Record]) -> SizeRecord {
    let mut summary = SizeRecord { log, max_end: 0, bytes: 0, last_stamp: 0, truncate: None };
    for record in records {
        absorb(&mut summary, record);
    }
    summary
}

/// Folds one more record of a log into its summary.
pub(crate) fn absorb(summary: &mut SizeRecord, record: &Record) {
    match record {
        // An empty write changes nothing, not even the size (POSIX).
        Record::Write(write) if write.length == 0 => {}
        Record::Write(write) => {
            summary.max_end = summary.max_end.max(write.logical.saturating_add(write.length));
            summary.bytes += write.length;
            summary.last_stamp = summary.last_stamp.max(write.stamp);
        }
        Record::Truncate(truncate) => {
            // Writes before a log's own truncate cannot reach past it.
            summary.max_end = 0;
            summary.truncate = Some((truncate.stamp, truncate.size));
            summary.last_stamp = summary.last_stamp.max(truncate.stamp);
        }
        Record::Pattern(pattern) => {
            summary.max_end = summary.max_end.max(pattern.end());
            summary.bytes += pattern.bytes();
            summary.last_stamp = summary.last_stamp.max(pattern.stamp_last);
        }
    }
}

/// What a closed log's size record (`claimed`) counts that its index log
/// (summarised as `held`) no longer holds: index records lost, e.g. to a
/// log cut short. `stat` would count their bytes, but no reader can find
/// them (data bytes carry no framing of their own), so they would read as
/// zeros. None when the index log holds everything the record counts.
pub fn records_lost(claimed: &SizeRecord, held: &SizeRecord) -> Option<String> {
    (held.bytes < claimed.bytes || held.last_stamp < claimed.last_stamp).then(|| {
        format!(
            "its size record counts {} data bytes, ending at offset {}, but the index log holds records \
             for {} bytes, ending at {}: index records were lost",
            claimed.bytes, claimed.max_end, held.bytes, held.max_end
        )
    })
}

/// The file's size from per-log summaries: the newest truncate (stamp T,
/// size S) sets a floor; only writes after T can extend past S. A log whose
/// records straddle T is resolved from its records via `records_of`.
pub(crate) fn combine_sizes(
    summaries: &[SizeRecord],
    mut records_of: impl FnMut(&LogId) -> Result<Vec<Record>>,
) -> Result<SizeSummary> {
    let newest_truncate = summaries.iter().filter_map(|s| s.truncate.map(|t| (t, s.log))).max();
    let mut result = SizeSummary {
        eof: newest_truncate.map_or(0, |((_, size), _)| size),
        bytes: summaries.iter().map(|s| s.bytes).sum(),
        last_stamp: summaries.iter().map(|s| s.last_stamp).max().unwrap_or(0),
    };
    let Some(((truncate_stamp, _), truncating_log)) = newest_truncate else {
        result.eof = summaries.iter().map(|s| s.max_end).max().unwrap_or(0);
        return Ok(result);
    };
    for summary in summaries {
        if summary.log == truncating_log || summary.log.stamp > truncate_stamp {
            result.eof = result.eof.max(summary.max_end);
        } else if summary.last_stamp > truncate_stamp && summary.max_end > result.eof {
            // A pattern counts at its last stamp, as in the merge.
            for record in records_of(&summary.log)? {
                match record {
                    Record::Write(write) if write.stamp > truncate_stamp && write.length > 0 => {
                        result.eof = result.eof.max(write.logical.saturating_add(write.length));
                    }
                    Record::Pattern(pattern) if pattern.stamp_last > truncate_stamp => {
                        result.eof = result.eof.max(pattern.end());
                    }
                    _ => {}
                }
            }
        }
    }
    Ok(result)
}

/// Computes a closed or open file's size from `meta/`, reading only the
/// index logs of writers that are still open (or crashed open) and of logs
/// that straddle the newest truncate.
pub(crate) fn size_from_meta(mount: &MountState, path: &StorePath) -> Result<SizeSummary> {
    size_of(mount, path, &read_meta(mount, path)?)
}

/// [`size_from_meta`] from records already listed.
fn size_of(mount: &MountState, path: &StorePath, meta: &MetaRecords) -> Result<SizeSummary> {
    let mut inventory_cache: Option<Inventory> = None;
    let mut locate = |id: &LogId| -> Result<Option<LogLocation>> {
        let hostdir = HostdirId(id.host % mount.placement.num_hostdirs());
        let backend = mount.placement.hostdir_backend(placement_name(path), hostdir);
        let guess = LogLocation { backend, hostdir, id: *id, has_index: true, has_data: true };
        if mount.store(backend).exists(&guess.path(path, LogKind::Index))? {
            return Ok(Some(guess));
        }
        if inventory_cache.is_none() {
            inventory_cache = Some(inventory(mount, path)?);
        }
        let inventory = inventory_cache.as_ref().expect("just filled");
        Ok(inventory.logs.iter().find(|log| log.id == *id && log.has_index).cloned())
    };
    let mut summaries: Vec<SizeRecord> = Vec::new();
    let mut loaded: BTreeMap<LogId, Vec<Record>> = BTreeMap::new();
    if meta.damaged {
        let all = inventory(mount, path)?;
        for log in all.logs.iter().filter(|log| log.has_index) {
            let records = read_index_log(mount, path, log)?.records;
            summaries.push(summarize(log.id, &records));
            loaded.insert(log.id, records);
        }
    } else {
        let closed: HashSet<LogId> = meta.sizes.iter().map(|s| s.log).collect();
        summaries.extend(meta.sizes.iter().copied());
        for id in meta.open.iter().filter(|id| !closed.contains(id)) {
            if let Some(log) = locate(id)? {
                let records = read_index_log(mount, path, &log)?.records;
                summaries.push(summarize(*id, &records));
                loaded.insert(*id, records);
            }
        }
    }
    combine_sizes(&summaries, |id| {
        if let Some(records) = loaded.get(id) {
            return Ok(records.clone());
        }
        match locate(id)? {
            Some(log) => Ok(read_index_log(mount, path, &log)?.records),
            None => Ok(Vec::new()),
        }
    })
}

/// For a stat: the container's closed summary (FORMAT.md §6.1), when it
/// holds a whole one — one small read that refuses a symlink at the
/// container (POSIX: `openat2`, `read`, `close`; elsewhere a `statx` of
/// the container first), instead of the access file and a listing of
/// `meta/`. `None` (no
/// container here, no summary, a summary torn, unsealed or unreadable, a
/// store that makes none) sends the caller to the full lookup, which
/// reports whatever is wrong.
pub(crate) fn closed_summary(mount: &MountState, path: &StorePath) -> Result<Option<ClosedSummary>> {
    if path.is_root() {
        return Ok(None);
    }
    let (backend, paths) = canonical(mount, path);
    let store = mount.store(backend);
    if !store.capabilities().unlinked_appends {
        return Ok(None);
    }
    reject_container_insides(mount, path)?;
    // The store refuses a symlink at `path`: a read through it would find
    // the summary of the container it points at.
    let mut buf = [0u8; CLOSED_SUMMARY_READ_BYTES];
    match store.read_head_below(path, &paths.closed_summary(), &mut buf) {
        // A full buffer is no record this build knows.
        Ok(count) if count < buf.len() => Ok(ClosedSummary::decode(&buf[..count]).ok()),
        _ => Ok(None),
    }
}

/// What a stat reads of `meta/closed`: more than any version of the record
/// (82 bytes now), so one that fills it is not believed.
const CLOSED_SUMMARY_READ_BYTES: usize = 256;

/// Removes the container's closed summary; whether there was one. Every
/// change to what a stat shows makes this call after the change is made
/// and before it can be seen (a writer's first write, chmod, chown, utime,
/// `plfs recover --fix`); see [`publish_closed_summary`] for why that is
/// enough.
pub(crate) fn drop_closed_summary(store: &dyn Store, paths: &ContainerPaths) -> Result<bool> {
    if !store.capabilities().unlinked_appends {
        return Ok(false);
    }
    match store.remove_file(&paths.closed_summary()) {
        Ok(()) => Ok(true),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(false),
        Err(error) => Err(error),
    }
}

/// The last writer to close leaves what a stat of the file shows in
/// `meta/closed`, so the next stats read one small file. Lock-free: the
/// record is created under its own name without its CRC32C, `meta/` and
/// the access file are read again, and only if nothing changed (no open
/// record, the same size records, the same access record) is the CRC
/// appended. Whoever changes the file afterwards removes the name first
/// ([`drop_closed_summary`]); an append to a removed file never brings
/// the name back (`Capabilities::unlinked_appends`), so a summary becomes
/// whole only if no change began before its second look, and any change
/// after that look removes it. A writer opens its log with that removal
/// behind its open record, so no write of its can be counted by a stale
/// summary. No fsync: a summary lost or torn in a crash is only absent.
pub(crate) fn publish_closed_summary(mount: &MountState, path: &StorePath) -> Result<()> {
    let (backend, paths) = canonical(mount, path);
    let store = mount.store(backend);
    if !store.capabilities().unlinked_appends {
        return Ok(());
    }
    let before = read_meta(mount, path)?;
    if !before.open.is_empty() || before.damaged {
        // Another writer is open: its close leaves the summary.
        return Ok(());
    }
    let access = protection::read_access(mount, path)?;
    let size = size_of(mount, path, &before)?;
    let record =
        ClosedSummary { access, eof: size.eof, bytes: size.bytes, last_stamp: size.last_stamp }.encode();
    let (body, seal) = record.split_at(record.len() - 4);
    let target = paths.closed_summary();
    let protection = Pieces::of(&access).public;
    let mut log = match store.create_append_protected(&target, &protection) {
        // Another closer's, or one left unsealed: removing it costs no one
        // anything but a slower stat.
        Err(error) if error.kind() == ErrorKind::AlreadyExists => {
            ignore_missing(store.remove_file(&target))?;
            store.create_append_protected(&target, &protection)?
        }
        other => other?,
    };
    log.append(body)?;
    let after = read_meta(mount, path)?;
    let unchanged = after.open.is_empty()
        && !after.damaged
        && same_sizes(&before.sizes, &after.sizes)
        && protection::read_access(mount, path)? == access;
    if !unchanged {
        drop(log.close());
        return ignore_missing(store.remove_file(&target));
    }
    log.append(seal)?;
    log.close()
}

fn same_sizes(a: &[SizeRecord], b: &[SizeRecord]) -> bool {
    let sorted = |records: &[SizeRecord]| {
        let mut records = records.to_vec();
        records.sort_by_key(|record| record.log);
        records
    };
    a.len() == b.len() && sorted(a) == sorted(b)
}

/// After a truncate to zero at `stamp`, deletes the logs it made entirely
/// obsolete: closed (a size record, no open record) and with every record
/// older than the truncate. Index log first, so a crash in between leaves
/// an orphan data log (reported by `plfs recover`), never an index record
/// pointing at nothing. Logs of writers still open are left alone.
pub(crate) fn reclaim_before(mount: &MountState, path: &StorePath, stamp: u64) -> Result<()> {
    let meta = read_meta(mount, path)?;
    if meta.damaged {
        return Ok(());
    }
    let open: HashSet<LogId> = meta.open.iter().copied().collect();
    let obsolete: Vec<&SizeRecord> =
        meta.sizes.iter().filter(|size| size.last_stamp < stamp && !open.contains(&size.log)).collect();
    if obsolete.is_empty() {
        return Ok(());
    }
    let inventory = inventory(mount, path)?;
    let (backend, paths) = canonical(mount, path);
    for size in obsolete {
        for log in inventory.logs.iter().filter(|log| log.id == size.log) {
            let store = mount.store(log.backend);
            ignore_missing(store.remove_file(&log.path(path, LogKind::Index)))?;
            ignore_missing(store.remove_file(&log.path(path, LogKind::Data)))?;
        }
        ignore_missing(mount.store(backend).remove_file(&paths.meta(&size.name())?))?;
    }
    mount.log_cache.forget_under(path);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::index_log::{TruncateRecord, WriteRecord};
    use crate::index::{LogRef, MergedIndex};
    use proptest::prelude::*;

    #[test]
    fn a_torn_tail_is_expected_only_while_its_writer_is_open_and_may_be_running() {
        let host = "node-a";
        let running = LogId::new(5, 1, std::process::id(), host);
        let crashed = LogId::new(6, 2, crate::fs::tests::dead_pid(), host);
        let elsewhere = LogId::new(7, 3, crate::fs::tests::dead_pid(), "node-b");
        let open = |logs: &[LogId]| MetaRecords { open: logs.to_vec(), ..MetaRecords::default() };
        let all = open(&[running, crashed, elsewhere]);
        // Open and running (here, or on a host whose processes we cannot see).
        assert!(torn_tail_is_expected(&all, &running, host));
        assert!(torn_tail_is_expected(&all, &elsewhere, host));
        // Open, but its process is gone: the frame will never complete.
        assert!(!torn_tail_is_expected(&all, &crashed, host));
        // Closed (no open record, or a size record already): damage.
        assert!(!torn_tail_is_expected(&open(&[crashed]), &running, host));
        let mut closing = open(&[running]);
        closing.sizes.push(SizeRecord { log: running, max_end: 0, bytes: 0, last_stamp: 5, truncate: None });
        assert!(!torn_tail_is_expected(&closing, &running, host));
    }

    fn write(logical: u64, length: u64, stamp: u64) -> Record {
        Record::Write(WriteRecord {
            logical,
            length,
            physical: 0,
            stamp,
            sequence: stamp,
            writer: 0,
            data_crc: 0,
        })
    }

    fn truncate(size: u64, stamp: u64) -> Record {
        Record::Truncate(TruncateRecord { size, stamp, sequence: stamp, writer: 0 })
    }

    proptest! {
        /// The case proptest once found: an empty write past the end.
        #[test]
        fn an_empty_write_does_not_change_the_size(offset in 1u64..1000) {
            let id = LogId { stamp: 1, writer: 0, pid: 1, host: 2 };
            let records = vec![write(offset, 0, 10)];
            let combined = combine_sizes(&[summarize(id, &records)], |_| Ok(records.clone())).unwrap();
            let merged = MergedIndex::from_logs([(LogRef(0), records.as_slice())], true);
            prop_assert_eq!((combined.eof, merged.eof()), (0, 0));
        }

        /// Sizes computed from summaries agree with a full merge, whatever
        /// mix of writes and truncates the logs hold.
        #[test]
        fn summaries_agree_with_the_merge(
            ops in proptest::collection::vec((0usize..4, 0u64..1000, 0u64..200, 0u8..6), 1..40),
            late_start in proptest::collection::vec(any::<bool>(), 4)
        ) {
            // Records of different logs interleave in time; some logs are
            // created before every record, others just before their first.
            let mut per_log: Vec<(Option<LogId>, Vec<Record>)> = vec![(None, Vec::new()); 4];
            for (position, &(log, offset, length, kind)) in ops.iter().enumerate() {
                let stamp = 10 + 2 * position as u64;
                if per_log[log].0.is_none() {
                    let created = if late_start[log] { stamp - 1 } else { 1 + log as u64 };
                    per_log[log].0 = Some(LogId { stamp: created, writer: log as u64, pid: 1, host: 2 });
                }
                per_log[log].1.push(if kind == 0 { truncate(offset, stamp) } else { write(offset, length, stamp) });
            }
            let per_log: Vec<(LogId, Vec<Record>)> =
                per_log.into_iter().filter_map(|(id, records)| id.map(|id| (id, records))).collect();
            let summaries: Vec<SizeRecord> = per_log.iter().map(|(id, r)| summarize(*id, r)).collect();
            let combined = combine_sizes(&summaries, |id| {
                Ok(per_log.iter().find(|(i, _)| i == id).unwrap().1.clone())
            }).unwrap();
            let merged = MergedIndex::from_logs(
                per_log.iter().enumerate().map(|(i, (_, r))| (LogRef(i as u32), r.as_slice())), true);
            prop_assert_eq!(combined.eof, merged.eof());
        }
    }
}
