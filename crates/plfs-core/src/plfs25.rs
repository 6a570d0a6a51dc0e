//! PLFS 2.5 containers, read in place and read-only, so a site can point
//! plfs at backends 2.5 wrote and read its files before (or instead of)
//! migrating them (`plfs migrate`).
//!
//! A 2.5 container is a directory holding `.plfsaccess113918400` on the
//! backend 2.5 hashed the file name to (sdbm over the canonical backends;
//! plfs hashes with CRC32C, so both places are asked). Its index is the
//! flattened `global.index` when there is one, otherwise every
//! `dropping.index.*` of every `hostdir.*`, following metalinks to other
//! backends. Overlapping writes resolve as 2.5 resolved them: for each
//! byte, the entry with the latest end timestamp, then begin timestamp,
//! then pid wins. The layout and names are in `format::plfs25` and
//! docs/FORMAT.md ("PLFS 2.5 containers").

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use crate::attr::{FileAttr, FileKind};
use crate::clock::ns_to_system_time;
use crate::config::BackendLocation;
use crate::error::{Error, ErrorKind, Result, ResultExt};
use crate::format::plfs25::{
    self as format, ACCESS_FILE, DroppingName, GLOBAL_INDEX, GlobalIndex, HOSTDIR_PREFIX, META_DIR, MetaName,
};
use crate::format::switch::SwitchIntent;
use crate::mount_state::{MountState, canonical};
use crate::placement::{BackendId, placement_name};
use crate::store::posix::PosixStore;
use crate::store::{EntryKind, Metadata, ReadHandle, SharedStore, Store, StoreExt, StorePath};

/// Why a 2.5 file cannot be changed, naming the way out. PermissionDenied
/// (EACCES): the file is readable but not writable, which is what
/// `cp`, shells and editors then say; ENOTSUP would read as a missing
/// feature of the application's call rather than of the file.
pub(crate) fn read_only(path: &str) -> Error {
    Error::new(
        ErrorKind::PermissionDenied,
        format!(
            "{path}: a PLFS 2.5 container, which plfs reads in place but never changes; \
             `plfs migrate {path}` turns it into a plfs file"
        ),
    )
}

/// Where a 2.5 container was found: its canonical backend, its access
/// file (whose mode, owner and times are the file's), and the directory
/// holding it there: the file's own path, or where an in-place migration
/// cut short between its two renames moved it ([`find_switching`]).
#[derive(Debug, Clone)]
pub(crate) struct Found25 {
    pub(crate) backend: BackendId,
    pub(crate) access: Metadata,
    pub(crate) dir: StorePath,
}

/// Whether `path` is a 2.5 container: on the backend 2.5 hashed its name
/// to, or on plfs's own canonical backend for it (one or two metadata
/// calls).
pub(crate) fn find(mount: &MountState, path: &StorePath) -> Result<Option<Found25>> {
    find_beyond(mount, path, false)
}

/// Like [`find`], when plfs's own canonical backend has nothing at `path`:
/// only 2.5's backend can hold the container, and on a mount where both
/// hashes pick the same backend a missing name costs no extra call.
pub(crate) fn find_elsewhere(mount: &MountState, path: &StorePath) -> Result<Option<Found25>> {
    find_beyond(mount, path, true)
}

fn find_beyond(mount: &MountState, path: &StorePath, ours_is_empty: bool) -> Result<Option<Found25>> {
    if path.is_root() {
        return Ok(None);
    }
    let backends = mount.placement.canonical_backends();
    let hashed = backends[format::backend_slot(placement_name(path), backends.len())];
    let ours = canonical(mount, path).0;
    let access = path.join(ACCESS_FILE)?;
    let candidates = match (hashed == ours, ours_is_empty) {
        (true, true) => vec![],
        (true, false) => vec![hashed],
        (false, true) => vec![hashed],
        (false, false) => vec![hashed, ours],
    };
    for backend in candidates {
        match mount.store(backend).metadata(&access) {
            Ok(metadata) if metadata.kind == EntryKind::File => {
                return Ok(Some(Found25 { backend, access: metadata, dir: path.clone() }));
            }
            Ok(_) => {}
            Err(error) if matches!(error.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {}
            Err(error) => return Err(error),
        }
    }
    Ok(None)
}

/// The 2.5 container of `path` where an in-place migration's switch put it
/// aside, when a crash (or the moment between its two renames) left the
/// name empty on the canonical backend B: the switch intent beside the name
/// (`format::switch`) names the aside directory. Only asked where a lookup
/// found nothing at the name, and only on a backend that cannot exchange
/// two directories (elsewhere the switch is one exchange and there is no
/// such moment): one read, NotFound in the common case.
pub(crate) fn find_switching(mount: &MountState, path: &StorePath) -> Result<Option<Found25>> {
    let Some(parent) = path.parent() else { return Ok(None) };
    let (backend, _) = canonical(mount, path);
    let store = mount.store(backend);
    if store.capabilities().exchange {
        return Ok(None);
    }
    let intent_path = switch_intent_path(path)?;
    let intent = match store.read_all(&intent_path) {
        Ok(bytes) => SwitchIntent::decode(&bytes)
            .map_err(|error| error.context(format!("{}: {intent_path}", store.url())))?,
        Err(error) if matches!(error.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
            return Ok(None);
        }
        Err(error) => return Err(error),
    };
    let dir = parent.join(&intent.aside)?;
    match store.metadata(&dir.join(ACCESS_FILE)?) {
        Ok(access) if access.kind == EntryKind::File => Ok(Some(Found25 { backend, access, dir })),
        Ok(_) => Ok(None),
        Err(error) if matches!(error.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => Ok(None),
        Err(error) => Err(error),
    }
}

/// Where the switch intent of the file at `path` is: beside it, on its
/// canonical backend.
pub(crate) fn switch_intent_path(path: &StorePath) -> Result<StorePath> {
    let name = path.file_name().ok_or_else(|| Error::new(ErrorKind::IsADirectory, "/"))?;
    path.parent().unwrap_or_default().join(&crate::layout::switch_intent_name(name))
}

/// Removes the switch intent of `path`, if there is one.
pub(crate) fn forget_switch(mount: &MountState, path: &StorePath) -> Result<()> {
    let (backend, _) = canonical(mount, path);
    match mount.store(backend).remove_file(&switch_intent_path(path)?) {
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// A file or directory on some store: a mount backend, or a backend 2.5
/// named by absolute path that this mount does not list.
#[derive(Debug, Clone)]
pub(crate) struct Location {
    pub(crate) store: SharedStore,
    pub(crate) path: StorePath,
}

impl Location {
    pub(crate) fn shown(&self) -> String {
        format!("{}/{}", self.store.url().trim_end_matches('/'), self.path)
    }
}

/// The POSIX directory a mount backend is rooted at.
fn store_root(store: &dyn Store) -> Option<String> {
    match BackendLocation::parse(store.url()) {
        Ok(BackendLocation::Posix(root)) => Some(root.to_str()?.trim_end_matches('/').to_owned()),
        _ => None,
    }
}

/// `physical` (an absolute POSIX path 2.5 wrote) as a path on one of the
/// mount's backends, if one is rooted above it and holds it.
fn on_mount_backend(mount: &MountState, physical: &str) -> Result<Option<Location>> {
    for (index, store) in mount.stores.iter().enumerate() {
        let Some(root) = store_root(store.as_ref()) else { continue };
        let Some(rest) = physical.strip_prefix(&root).filter(|rest| rest.starts_with('/') || rest.is_empty())
        else {
            continue;
        };
        let relative = rest.split('/').filter(|part| !part.is_empty()).collect::<Vec<_>>().join("/");
        let path = StorePath::parse(&relative)?;
        if mount.store(BackendId(index)).exists(&path)? {
            return Ok(Some(Location { store: store.clone(), path }));
        }
    }
    Ok(None)
}

/// `physical` read directly where 2.5 wrote it, when it exists on this
/// host but lies outside every mount backend.
fn on_this_host(physical: &str) -> Result<Option<Location>> {
    let file = Path::new(physical);
    let (Some(parent), Some(name)) = (file.parent(), file.file_name().and_then(|name| name.to_str())) else {
        return Ok(None);
    };
    if std::fs::symlink_metadata(file).is_err() {
        return Ok(None);
    }
    let store = PosixStore::new(parent, format!("posix://{}", parent.display()))?;
    Ok(Some(Location { store: Arc::new(store), path: StorePath::parse(name)? }))
}

/// One hostdir of a container, and how it was reached.
#[derive(Debug, Clone)]
pub(crate) struct Hostdir {
    pub(crate) name: String,
    pub(crate) location: Location,
    /// The metalink text, when the canonical container holds a link.
    pub(crate) metalink: Option<String>,
}

/// Every hostdir of the container at `path`, metalinks followed: to the
/// absolute backend path 2.5 wrote into the link (a mount backend rooted
/// there, or the path itself on this host), and when that has moved, to
/// the same path in the container on the mount's own backends.
pub(crate) fn hostdirs(mount: &MountState, path: &StorePath, found: &Found25) -> Result<Vec<Hostdir>> {
    let store = &mount.stores[found.backend.0];
    let dir = &found.dir;
    let mut hostdirs = Vec::new();
    for entry in store.list(dir).with_context(|| format!("{}: {dir}", store.url()))? {
        if !entry.name.starts_with(HOSTDIR_PREFIX) {
            continue;
        }
        let listed = dir.join(&entry.name)?;
        match entry.kind {
            EntryKind::Directory => hostdirs.push(Hostdir {
                name: entry.name,
                location: Location { store: store.clone(), path: listed },
                metalink: None,
            }),
            EntryKind::Symlink => {
                let text = store.read_link(&listed)?;
                // 2.5 wrote the link for the file's own path.
                let relative = path.join(&entry.name)?;
                let location = follow_metalink(mount, store.as_ref(), &relative, &text)?;
                hostdirs.push(Hostdir { name: entry.name, location, metalink: Some(text) });
            }
            EntryKind::File => {}
        }
    }
    Ok(hostdirs)
}

fn follow_metalink(
    mount: &MountState,
    store: &dyn Store,
    relative: &StorePath,
    text: &str,
) -> Result<Location> {
    let (_, backend) = format::parse_metalink(text).ok_or_else(|| {
        Error::corrupt(format!("{}: {relative}: metalink {text:?} names no backend", store.url()))
    })?;
    if let Some(root) = format::posix_path(backend) {
        let physical = format!("{}/{relative}", root.trim_end_matches('/'));
        if let Some(location) = on_mount_backend(mount, &physical)? {
            return Ok(location);
        }
        if let Some(location) = on_this_host(&physical)? {
            return Ok(location);
        }
    }
    for other in mount.placement.all_backends() {
        match mount.store(other).metadata(relative) {
            Ok(metadata) if metadata.kind == EntryKind::Directory => {
                return Ok(Location { store: mount.stores[other.0].clone(), path: relative.clone() });
            }
            Ok(_) => {}
            Err(error) if matches!(error.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {}
            Err(error) => return Err(error),
        }
    }
    if let Some(location) = put_aside(mount, relative)? {
        return Ok(location);
    }
    Err(Error::new(
        ErrorKind::NotFound,
        format!(
            "{}: {relative}: metalink to {backend}: the hostdir is neither there nor at /{relative} \
             on any backend of this mount",
            store.url()
        ),
    ))
}

/// The hostdir `relative` (`<file>/hostdir.<N>`) where an in-place
/// migration's switch cut short put the file's 2.5 part on its canonical
/// backend aside: a metalink of the 2.5 container on another backend
/// pointed at that part (its shadow). Asked only once the hostdir was
/// found nowhere else.
fn put_aside(mount: &MountState, relative: &StorePath) -> Result<Option<Location>> {
    let (Some(file), Some(hostdir)) = (relative.parent(), relative.file_name()) else { return Ok(None) };
    if file.is_root() {
        return Ok(None);
    }
    let (backend, _) = canonical(mount, &file);
    let store = &mount.stores[backend.0];
    let intent = match store.read_all(&switch_intent_path(&file)?) {
        Ok(bytes) => SwitchIntent::decode(&bytes)?,
        Err(error) if matches!(error.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
            return Ok(None);
        }
        Err(error) => return Err(error),
    };
    let path = file.parent().unwrap_or_default().join(&intent.aside)?.join(hostdir)?;
    match store.metadata(&path) {
        Ok(metadata) if metadata.kind == EntryKind::Directory => {
            Ok(Some(Location { store: store.clone(), path }))
        }
        Ok(_) => Ok(None),
        Err(error) if matches!(error.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => Ok(None),
        Err(error) => Err(error),
    }
}

/// The metalinks of a 2.5 container and the hostdirs they point at, for removing
/// them: the container is listed at `listed` on `store` (its own name, or
/// the hidden name a migration moved it to) and its metalinks resolved as
/// for `logical`. A link whose hostdir is gone already (an earlier
/// migration run removed it) is skipped, so the removal can be redone.
pub(crate) fn metalinked_hostdirs(
    mount: &MountState,
    store: &dyn Store,
    listed: &StorePath,
    logical: &StorePath,
) -> Result<Vec<(String, Location)>> {
    let mut found = Vec::new();
    let entries = match store.list(listed) {
        Ok(entries) => entries,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(found),
        Err(error) => return Err(error.context(format!("{}: {listed}", store.url()))),
    };
    for entry in entries {
        if entry.kind != EntryKind::Symlink || !entry.name.starts_with(HOSTDIR_PREFIX) {
            continue;
        }
        let text = store.read_link(&listed.join(&entry.name)?)?;
        match follow_metalink(mount, store, &logical.join(&entry.name)?, &text) {
            Ok(location) => found.push((entry.name, location)),
            Err(error) if error.kind() == ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
    }
    Ok(found)
}

/// Hosts that still have the 2.5 file `found` open (its `meta/` holds
/// their open records): a writer there may add to it.
pub(crate) fn open_hosts(mount: &MountState, found: &Found25) -> Result<BTreeSet<String>> {
    Ok(read_meta(mount.store(found.backend), &found.dir)?.open_hosts)
}

/// A piece of the merged index: `length` bytes of data dropping `chunk`
/// at `physical`, written by `pid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Extent25 {
    pub(crate) length: u64,
    pub(crate) chunk: usize,
    pub(crate) physical: u64,
    pub(crate) pid: i32,
}

/// One entry as read, before merging.
#[derive(Debug, Clone, Copy)]
struct Raw {
    logical: u64,
    extent: Extent25,
    begin: f64,
    end: f64,
}

/// The merged index of a 2.5 file, and an open of it for reading.
#[derive(Debug)]
pub(crate) struct Index25 {
    pub(crate) extents: BTreeMap<u64, Extent25>,
    pub(crate) eof: u64,
    /// Data droppings, by chunk number.
    pub(crate) chunks: Vec<Location>,
    /// Entries read (from the global index or the index droppings).
    pub(crate) entries: u64,
    /// Bytes of 2.5 index read: what the index costs on disk.
    pub(crate) index_bytes: u64,
    pub(crate) from_global_index: bool,
    handles: Mutex<HashMap<usize, Arc<dyn ReadHandle>>>,
}

/// Loads the merged index of the 2.5 container at `path`: its global
/// index if it has one, otherwise its index droppings.
pub(crate) fn load(mount: &MountState, path: &StorePath, found: &Found25) -> Result<Index25> {
    let store = mount.store(found.backend);
    let global_path = found.dir.join(GLOBAL_INDEX)?;
    let global = match store.read_all(&global_path) {
        Ok(bytes) => Some(bytes),
        Err(error) if error.kind() == ErrorKind::NotFound => None,
        Err(error) => return Err(error),
    };
    let mut raws = Vec::new();
    let mut chunks = Vec::new();
    let index_bytes;
    let from_global_index = global.is_some();
    if let Some(bytes) = global {
        index_bytes = bytes.len() as u64;
        let what = format!("{}/{global_path}", store.url().trim_end_matches('/'));
        let global = GlobalIndex::decode(&bytes, &what)?;
        let mut walked = None;
        for chunk in &global.chunks {
            chunks.push(resolve_chunk(mount, path, found, chunk, &mut walked).context(what.clone())?);
        }
        for entry in &global.entries {
            raws.push(Raw {
                logical: entry.logical,
                extent: Extent25 {
                    length: entry.length,
                    chunk: entry.id as usize,
                    physical: entry.physical,
                    pid: entry.tail,
                },
                begin: entry.begin,
                end: entry.end,
            });
        }
    } else {
        let mut total = 0;
        let mut chunk_of: HashMap<(usize, String), usize> = HashMap::new();
        for (slot, hostdir) in hostdirs(mount, path, found)?.iter().enumerate() {
            let dir = &hostdir.location;
            for entry in dir.store.list(&dir.path).with_context(|| dir.shown())? {
                let Some(name) = DroppingName::parse(&entry.name).filter(|name| name.index) else { continue };
                let dropping = dir.path.join(&entry.name)?;
                let bytes = dir.store.read_all(&dropping)?;
                total += bytes.len() as u64;
                for entry in format::decode_entries(&bytes) {
                    let data = name.data_of(entry.id).name();
                    let chunk = match chunk_of.get(&(slot, data.clone())) {
                        Some(chunk) => *chunk,
                        None => {
                            chunks.push(Location { store: dir.store.clone(), path: dir.path.join(&data)? });
                            chunk_of.insert((slot, data), chunks.len() - 1);
                            chunks.len() - 1
                        }
                    };
                    raws.push(Raw {
                        logical: entry.logical,
                        extent: Extent25 {
                            length: entry.length,
                            chunk,
                            physical: entry.physical,
                            pid: entry.id,
                        },
                        begin: entry.begin,
                        end: entry.end,
                    });
                }
            }
        }
        index_bytes = total;
    }
    let entries = raws.len() as u64;
    let (extents, eof) = merge(raws);
    Ok(Index25 {
        extents,
        eof,
        chunks,
        entries,
        index_bytes,
        from_global_index,
        handles: Mutex::new(HashMap::new()),
    })
}

/// A data dropping a global index names by absolute path: on the mount
/// backend rooted above it, where it is on this host, or (moved) the
/// dropping of that name in the container's hostdir of that name.
fn resolve_chunk(
    mount: &MountState,
    path: &StorePath,
    found: &Found25,
    physical: &str,
    walked: &mut Option<Vec<Hostdir>>,
) -> Result<Location> {
    if let Some(posix) = format::posix_path(physical) {
        if let Some(location) = on_mount_backend(mount, posix)? {
            return Ok(location);
        }
        if let Some(location) = on_this_host(posix)? {
            return Ok(location);
        }
    }
    let mut parts = physical.rsplit('/');
    let (name, hostdir) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if walked.is_none() {
        *walked = Some(hostdirs(mount, path, found)?);
    }
    for dir in walked.iter().flatten().filter(|dir| dir.name == hostdir) {
        let candidate = dir.location.path.join(name)?;
        if dir.location.store.exists(&candidate)? {
            return Ok(Location { store: dir.location.store.clone(), path: candidate });
        }
    }
    Err(Error::new(
        ErrorKind::NotFound,
        format!("data dropping {physical}: neither there nor in /{path}/{hostdir} on this mount"),
    ))
}

/// Resolves overlaps as 2.5 did: every byte shows the newest entry that
/// covers it (end timestamp, then begin timestamp, then pid), so entries
/// are laid down oldest first and each newer one cuts what it covers out
/// of the older ones. Zero-length entries only move the end of file.
fn merge(mut raws: Vec<Raw>) -> (BTreeMap<u64, Extent25>, u64) {
    raws.sort_by(|a, b| {
        a.end.total_cmp(&b.end).then(a.begin.total_cmp(&b.begin)).then(a.extent.pid.cmp(&b.extent.pid))
    });
    let mut extents = BTreeMap::new();
    let mut eof = 0;
    for raw in raws {
        eof = eof.max(raw.logical + raw.extent.length);
        if raw.extent.length > 0 {
            lay_down(&mut extents, raw.logical, raw.extent);
        }
    }
    (extents, eof)
}

fn lay_down(extents: &mut BTreeMap<u64, Extent25>, start: u64, extent: Extent25) {
    let end = start + extent.length;
    let cut = |piece: Extent25, by: u64| Extent25 {
        length: piece.length - by,
        physical: piece.physical + by,
        ..piece
    };
    if let Some((&before, &piece)) = extents.range(..start).next_back()
        && before + piece.length > start
    {
        extents.insert(before, Extent25 { length: start - before, ..piece });
        if before + piece.length > end {
            extents.insert(end, cut(piece, end - before));
        }
    }
    let inside: Vec<u64> = extents.range(start..end).map(|(offset, _)| *offset).collect();
    for offset in inside {
        let piece = extents.remove(&offset).expect("listed");
        if offset + piece.length > end {
            extents.insert(end, cut(piece, end - offset));
        }
    }
    extents.insert(start, extent);
}

impl Index25 {
    /// Reads at `offset`; holes read as zeros, and nothing past the end of
    /// file (the bytes a truncate left in a data dropping are not indexed).
    pub(crate) fn read(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        if offset >= self.eof {
            return Ok(0);
        }
        let wanted = buf.len().min(usize::try_from(self.eof - offset).unwrap_or(usize::MAX));
        let end = offset + wanted as u64;
        buf[..wanted].fill(0);
        let first = self.extents.range(..=offset).next_back().map_or(offset, |(start, _)| *start);
        for (&start, extent) in self.extents.range(first..end) {
            let from = start.max(offset);
            let to = (start + extent.length).min(end);
            if from >= to {
                continue;
            }
            let target = &mut buf[(from - offset) as usize..(to - offset) as usize];
            let handle = self.handle(extent.chunk)?;
            let at = extent.physical + (from - start);
            let mut done = 0;
            while done < target.len() {
                let count = handle.read_at(&mut target[done..], at + done as u64)?;
                if count == 0 {
                    return Err(Error::corrupt(format!(
                        "{}: ends before byte {} that the PLFS 2.5 index points at",
                        self.chunks[extent.chunk].shown(),
                        at + done as u64
                    )));
                }
                done += count;
            }
        }
        Ok(wanted)
    }

    fn handle(&self, chunk: usize) -> Result<Arc<dyn ReadHandle>> {
        let mut handles = self.handles.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(handle) = handles.get(&chunk) {
            return Ok(handle.clone());
        }
        let location = &self.chunks[chunk];
        let handle: Arc<dyn ReadHandle> =
            Arc::from(location.store.open_read(&location.path).with_context(|| location.shown())?);
        handles.insert(chunk, handle.clone());
        Ok(handle)
    }

    /// Bytes of data the merged index points at.
    pub(crate) fn data_bytes(&self) -> u64 {
        self.extents.values().map(|extent| extent.length).sum()
    }

    /// Writers (pids) whose bytes show.
    pub(crate) fn writers(&self) -> BTreeSet<i32> {
        self.extents.values().map(|extent| extent.pid).collect()
    }
}

/// What `meta/` says: size records of hosts not writing, and which hosts
/// still have the file open.
#[derive(Debug, Default)]
struct MetaSummary {
    size: u64,
    blocks: u64,
    mtime_ns: u64,
    sized: usize,
    open_hosts: BTreeSet<String>,
}

fn read_meta(store: &dyn Store, path: &StorePath) -> Result<MetaSummary> {
    let mut summary = MetaSummary::default();
    let entries = match store.list(&path.join(META_DIR)?) {
        Ok(entries) => entries,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(summary),
        Err(error) => return Err(error),
    };
    summary.open_hosts =
        entries.iter().filter_map(|entry| format::open_record_host(&entry.name)).map(str::to_owned).collect();
    for meta in entries.iter().filter_map(|entry| MetaName::parse(&entry.name)) {
        // A host still writing may have written past its last record.
        if summary.open_hosts.contains(&meta.host) {
            continue;
        }
        summary.size = summary.size.max(meta.last_offset);
        summary.blocks += meta.bytes.div_ceil(512);
        summary.mtime_ns = summary.mtime_ns.max(meta.mtime_ns);
        summary.sized += 1;
    }
    Ok(summary)
}

/// `stat` of a 2.5 file, as 2.5 answered it: mode, owner and times of the
/// access file; size and blocks from the size records in `meta/`; while
/// a host has it open (or no size record exists, which 2.5 answered with
/// 0 but is a crashed writer's file), the index's end of file as well.
pub(crate) fn attr(mount: &MountState, path: &StorePath, found: &Found25) -> Result<FileAttr> {
    let store = mount.store(found.backend);
    let meta = read_meta(store, &found.dir)?;
    let (mut size, mut blocks) = (meta.size, meta.blocks);
    if !meta.open_hosts.is_empty() || meta.sized == 0 {
        let index = load(mount, path, found)?;
        size = size.max(index.eof);
        if meta.sized == 0 {
            blocks = index.data_bytes().div_ceil(512);
        }
    }
    let access = &found.access;
    let epoch = std::time::SystemTime::UNIX_EPOCH;
    let access_mtime = access.mtime.unwrap_or(epoch);
    let mtime = access_mtime.max(ns_to_system_time(meta.mtime_ns));
    Ok(FileAttr {
        kind: FileKind::File,
        size,
        blocks,
        mode: access.mode.unwrap_or(0o600) & 0o7777,
        uid: access.uid.unwrap_or(mount.uid),
        gid: access.gid.unwrap_or(mount.gid),
        nlink: 1,
        atime: access.atime.unwrap_or(epoch),
        mtime,
        ctime: access.ctime.unwrap_or(mtime).max(mtime),
    })
}

/// What a piece of a 2.5 container is (`plfs query`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PieceKind25 {
    Container,
    Access,
    Version,
    GlobalIndex,
    MetaDir,
    OpenRecord,
    SizeRecord,
    Hostdir,
    Metalink,
    IndexDropping,
    DataDropping,
    Unknown,
}

/// One physical piece: where, what, how many bytes.
#[derive(Debug, Clone)]
pub(crate) struct Piece25 {
    pub(crate) location: Location,
    pub(crate) kind: PieceKind25,
    pub(crate) bytes: u64,
}

/// Every piece of the 2.5 container at `path`, metalinks followed.
pub(crate) fn pieces(mount: &MountState, path: &StorePath, found: &Found25) -> Result<Vec<Piece25>> {
    let store = &mount.stores[found.backend.0];
    let at = |path: StorePath| Location { store: store.clone(), path };
    let dir = &found.dir;
    let mut pieces = vec![Piece25 { location: at(dir.clone()), kind: PieceKind25::Container, bytes: 0 }];
    for entry in store.list(dir)? {
        let child = dir.join(&entry.name)?;
        let bytes = if entry.kind == EntryKind::File { store.metadata(&child)?.size } else { 0 };
        let kind = match entry.name.as_str() {
            ACCESS_FILE => PieceKind25::Access,
            GLOBAL_INDEX => PieceKind25::GlobalIndex,
            META_DIR => PieceKind25::MetaDir,
            name if name.starts_with(format::VERSION_PREFIX) => PieceKind25::Version,
            name if name.starts_with(HOSTDIR_PREFIX) => continue,
            _ => PieceKind25::Unknown,
        };
        pieces.push(Piece25 { location: at(child.clone()), kind, bytes });
        if kind == PieceKind25::MetaDir {
            for record in store.list(&child)? {
                let kind = if format::open_record_host(&record.name).is_some() {
                    PieceKind25::OpenRecord
                } else if MetaName::parse(&record.name).is_some() {
                    PieceKind25::SizeRecord
                } else {
                    PieceKind25::Unknown
                };
                pieces.push(Piece25 { location: at(child.join(&record.name)?), kind, bytes: 0 });
            }
        }
    }
    for hostdir in hostdirs(mount, path, found)? {
        if hostdir.metalink.is_some() {
            let link = dir.join(&hostdir.name)?;
            pieces.push(Piece25 { location: at(link), kind: PieceKind25::Metalink, bytes: 0 });
        }
        let dir = &hostdir.location;
        pieces.push(Piece25 { location: dir.clone(), kind: PieceKind25::Hostdir, bytes: 0 });
        for entry in dir.store.list(&dir.path)? {
            let child = dir.path.join(&entry.name)?;
            let kind = match DroppingName::parse(&entry.name) {
                Some(name) if name.index => PieceKind25::IndexDropping,
                Some(_) => PieceKind25::DataDropping,
                None => PieceKind25::Unknown,
            };
            let bytes = dir.store.metadata(&child)?.size;
            pieces.push(Piece25 {
                location: Location { store: dir.store.clone(), path: child },
                kind,
                bytes,
            });
        }
    }
    Ok(pieces)
}

/// The release and data format named by the container's version dropping
/// (None when it has none: 2.5 made it after publishing the container).
pub(crate) fn version(mount: &MountState, found: &Found25) -> Result<Option<(String, String)>> {
    Ok(mount
        .store(found.backend)
        .list(&found.dir)?
        .iter()
        .find_map(|entry| format::parse_version_name(&entry.name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(logical: u64, length: u64, end: f64, pid: i32) -> Raw {
        Raw {
            logical,
            extent: Extent25 { length, chunk: pid as usize, physical: 0, pid },
            begin: end - 0.5,
            end,
        }
    }

    #[test]
    fn newer_entries_cut_older_ones_whatever_the_order_read() {
        // pid 1 wrote 0..100 first, pid 2 then 20..40, pid 3 last 30..120.
        let entries = [raw(30, 90, 3.0, 3), raw(0, 100, 1.0, 1), raw(20, 20, 2.0, 2), raw(200, 0, 0.5, 4)];
        let (extents, eof) = merge(entries.to_vec());
        let layout: Vec<(u64, u64, i32, u64)> = extents
            .iter()
            .map(|(offset, extent)| (*offset, extent.length, extent.pid, extent.physical))
            .collect();
        assert_eq!(layout, vec![(0, 20, 1, 0), (20, 10, 2, 0), (30, 90, 3, 0)]);
        assert_eq!(eof, 200, "a zero-length entry extends the file");
        // Ties on both stamps: the higher pid wins.
        let (extents, _) = merge(vec![raw(0, 10, 1.0, 9), raw(0, 10, 1.0, 2)]);
        assert_eq!(extents[&0].pid, 9);
        // A newer write inside an older one splits it, shifting the tail.
        let (extents, _) = merge(vec![raw(0, 100, 1.0, 1), raw(40, 10, 2.0, 2)]);
        assert_eq!(extents[&50], Extent25 { length: 50, chunk: 1, physical: 50, pid: 1 });
    }
}
