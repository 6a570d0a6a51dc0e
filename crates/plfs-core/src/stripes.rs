//! Striped files on a container mount (docs/FORMAT.md §15): the layout a
//! new file gets, reading it back, and placing a component's stripes on
//! backends when a writer first reaches it.
//!
//! Placement is lazy so a file only ever has data objects where it has
//! bytes: a small file under a progressive layout stays one data log on one
//! backend. Writers on several hosts that reach a component at once agree
//! on its backends through the store's exclusive create of its
//! `stripes.<c>` record, the primitive container creation relies on too:
//! the first record wins and every loser reads it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;
use std::sync::atomic::Ordering;

use crate::container::{LogLocation, ignore_missing, read_index_log};
use crate::error::{Error, ErrorKind, Result, ResultExt};
use crate::format::index_log::Record;
use crate::format::striping::{self as format, StripesRecord};
use crate::layout::{ContainerEntry, LogKind, classify_container_entry};
use crate::mount_state::{MountState, canonical};
use crate::placement::BackendId;
use crate::protection::{self, Pieces};
use crate::store::{Store, StoreExt, StorePath};
use crate::striping::placement::{BackendSpace, choose_backends, component_bytes};
use crate::striping::{LAYOUT_XATTR, Layout};

/// The layout a file created at `path` gets: the mount's default (None
/// keeps the pre-layout placement, one hostdir backend per host, and writes
/// no layout file). The one place the create path asks, so directory
/// templates can be looked up here too.
pub(crate) fn layout_for_new_file(mount: &MountState, path: &StorePath) -> Result<Option<Layout>> {
    match path.parent() {
        Some(parent) => layout_of_directory(mount, &parent),
        None => Ok(mount.default_layout().cloned()),
    }
}

/// The layout files created in directory `parent` get: its template
/// (`user.plfs.layout`, see fs/layouts.rs), else the mount's default.
pub(crate) fn layout_of_directory(mount: &MountState, parent: &StorePath) -> Result<Option<Layout>> {
    let (backend, _) = canonical(mount, parent);
    let store = mount.store(backend);
    let location = parent.join(&crate::layout::dir_xattr_name(LAYOUT_XATTR)?)?;
    match read_layout_attribute(store, &location)? {
        Some(layout) => Ok(Some(layout)),
        None => Ok(mount.default_layout().cloned()),
    }
}

/// A layout kept as the extended attribute at `location`, or None.
fn read_layout_attribute(store: &dyn Store, location: &StorePath) -> Result<Option<Layout>> {
    let bytes = match store.read_all(location) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error.context(format!("{}: {location}", store.url()))),
    };
    let value =
        crate::format::xattr::decode(&bytes).with_context(|| format!("{}: {location}", store.url()))?;
    let text = String::from_utf8(value)
        .map_err(|_| Error::corrupt(format!("{}: {location}: the layout is not UTF-8 text", store.url())))?;
    text.parse::<Layout>().with_context(|| format!("{}: {location}", store.url())).map(Some)
}

/// The file's layout, or None for a file created without one.
pub(crate) fn read_layout(mount: &MountState, path: &StorePath) -> Result<Option<Layout>> {
    let (backend, paths) = canonical(mount, path);
    let store = mount.store(backend);
    // `plfs setstripe` on a file that has no data yet (or setfattr of
    // user.plfs.layout) keeps the layout as the file's attribute; it was
    // set after the creation record, so it wins.
    let attribute = paths.xattr_dir().join(&crate::layout::xattr_component(LAYOUT_XATTR)?)?;
    if let Some(layout) = read_layout_attribute(store, &attribute)? {
        return Ok(Some(layout));
    }
    match store.read_all(&paths.layout()) {
        Ok(bytes) => format::decode_layout(&bytes).map(Some).map_err(|error| {
            // A crash before the file's first sync can cut it (creation
            // does not sync it), so say how to rewrite it. An unknown
            // version is a newer plfs's, not damage.
            let hint = if error.kind() == ErrorKind::Corrupt {
                format!(" (`plfs recover --fix /{path}` rewrites it)")
            } else {
                String::new()
            };
            error.context(format!("{}: {}{hint}", store.url(), paths.layout()))
        }),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error.context(format!("{}: {}", store.url(), paths.layout()))),
    }
}

/// Whether the record at `location` holds bytes `decode` refuses as
/// damaged (not a newer version, not a record that decodes but names what
/// this mount has not got): what `recover --fix` may replace.
fn bytes_are_damaged<T>(
    store: &dyn Store,
    location: &StorePath,
    decode: impl Fn(&[u8]) -> Result<T>,
) -> Result<bool> {
    match store.read_all(location) {
        Ok(bytes) => Ok(decode(&bytes).is_err_and(|error| error.kind() == ErrorKind::Corrupt)),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(false),
        Err(error) => Err(error.context(format!("{}: {location}", store.url()))),
    }
}

/// Component `component`'s backends as recorded, or None before its first
/// byte was written. A record naming a backend the mount has not got, or
/// one that holds no logs, is `Corrupt` naming the record.
pub(crate) fn read_stripes(
    mount: &MountState,
    path: &StorePath,
    component: u32,
) -> Result<Option<Vec<BackendId>>> {
    let (backend, paths) = canonical(mount, path);
    let store = mount.store(backend);
    let record_path = paths.stripes(component);
    let label = || format!("{}: {record_path}", store.url());
    let bytes = match store.read_all(&record_path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error.context(label())),
    };
    // A crash may cut a record placed after its writer's first sync (see
    // `place_component`), so say how to rebuild it.
    let record = StripesRecord::decode(&bytes)
        .with_context(|| format!("{} (`plfs recover --fix /{path}` rebuilds it)", label()))?;
    if record.component != component {
        return Err(Error::corrupt(format!("{}: holds component {}", label(), record.component)));
    }
    let shadow = mount.placement.shadow_backends();
    let backends = match located_backends(mount, &record, &format!("/{path}: {}", label()))? {
        Some(backends) => backends,
        None => record.backends.iter().map(|index| BackendId(*index as usize)).collect(),
    };
    if let Some(bad) = backends.iter().find(|backend| !shadow.contains(backend)) {
        return Err(Error::corrupt(format!(
            "{}: names backend {} but the mount has no shadow backend of that index ({} backends)",
            label(),
            bad.0,
            mount.placement.backend_count()
        )));
    }
    Ok(Some(backends))
}

/// What a stripes record keeps to recognise a backend: its URL without
/// access parameters (an S3 endpoint or credentials file may change, the
/// bucket and prefix do not), without a trailing slash.
pub(crate) fn backend_location(store: &dyn Store) -> &str {
    let url = store.url();
    let url = url.split_once('?').map_or(url, |(location, _)| location);
    url.trim_end_matches('/')
}

/// The backends of a version 3 record found by their locations, so a
/// plfsrc that lists the same backends in another order still reads and
/// writes each stripe where it is. None when positions must do: a version
/// 2 record (no locations), or a mount that has none of the record's
/// locations (the backends were moved as a whole, e.g. copied elsewhere).
/// A record some of whose locations the mount has and others not is an
/// error naming the record and both lists: following positions there
/// would put stripes on backends the file was never placed on.
fn located_backends(
    mount: &MountState,
    record: &StripesRecord,
    label: &str,
) -> Result<Option<Vec<BackendId>>> {
    if record.locations.is_empty() {
        return Ok(None);
    }
    let shadow = mount.placement.shadow_backends();
    let at = |backend: BackendId| backend_location(mount.store(backend));
    let found: Vec<Option<BackendId>> = record
        .backends
        .iter()
        .zip(&record.locations)
        .map(|(&position, location)| {
            let position = BackendId(position as usize);
            if shadow.contains(&position) && at(position) == location {
                return Some(position);
            }
            shadow.iter().copied().find(|&backend| at(backend) == location)
        })
        .collect();
    if found.iter().all(Option::is_none) {
        return Ok(None);
    }
    let mut distinct: Vec<BackendId> = found.iter().flatten().copied().collect();
    distinct.sort();
    distinct.dedup();
    if found.iter().all(Option::is_some) && distinct.len() == found.len() {
        return Ok(Some(found.into_iter().flatten().collect()));
    }
    let recorded: Vec<String> = record
        .backends
        .iter()
        .zip(&record.locations)
        .map(|(position, location)| format!("{position} {location}"))
        .collect();
    let mounted: Vec<String> =
        shadow.iter().map(|&backend| format!("{} {}", backend.0, at(backend))).collect();
    Err(Error::invalid(format!(
        "{label}: the component was placed on backends [{}], but this mount's backends are [{}]: \
         a backend was moved or renamed in the plfsrc; name it as before to write this component \
         (reads are unaffected)",
        recorded.join(", "),
        mounted.join(", ")
    )))
}

/// The record of `backends` for component `component`.
fn record_of(mount: &MountState, component: u32, backends: &[BackendId]) -> StripesRecord {
    StripesRecord {
        component,
        backends: backends.iter().map(|backend| backend.0 as u32).collect(),
        locations: backends
            .iter()
            .map(|&backend| backend_location(mount.store(backend)).to_owned())
            .collect(),
    }
}

/// The backends a component may use: the mount's shadow backends, narrowed
/// to its pool.
fn candidates(
    mount: &MountState,
    path: &StorePath,
    layout: &Layout,
    component: usize,
) -> Result<Vec<BackendId>> {
    let shadow = mount.placement.shadow_backends();
    let Some(pool) = &layout.components()[component].pool else { return Ok(shadow.to_vec()) };
    let members = mount.striping.pools.get(pool).ok_or_else(|| {
        Error::invalid(format!(
            "/{path}: layout component {} names pool {pool:?}, which this mount has not got",
            component + 1
        ))
    })?;
    let chosen: Vec<BackendId> =
        shadow.iter().copied().filter(|backend| members.contains(&backend.0)).collect();
    if chosen.is_empty() {
        return Err(Error::invalid(format!("/{path}: pool {pool:?} has no backend that holds logs")));
    }
    Ok(chosen)
}

/// This file's bytes on each backend from its components before
/// `component` ([`component_bytes`]; all placed, [`Striping::locate`]), so
/// placement can put the new one's heavier stripes where the file has
/// least.
fn file_bytes_before(
    layout: &Layout,
    component: usize,
    placed: &[OnceLock<Box<[BackendId]>>],
) -> BTreeMap<BackendId, u64> {
    let mut bytes = BTreeMap::new();
    for (earlier, slot) in placed.iter().enumerate().take(component) {
        let Some(backends) = slot.get() else { continue };
        let shares = component_bytes(&layout.components()[earlier], backends.len());
        for (backend, share) in backends.iter().zip(shares) {
            *bytes.entry(*backend).or_insert(0u64) += share;
        }
    }
    bytes
}

/// Reads component `component`'s record, or makes it: backends chosen
/// by free space (and, among equally empty ones, where the file has the
/// fewest bytes), published with an exclusive create. A writer that loses
/// the race takes the winner's record. `placed`: the components this open
/// knows ([`Striping`]).
fn place_component(
    mount: &MountState,
    path: &StorePath,
    layout: &Layout,
    component: usize,
    placed: &[OnceLock<Box<[BackendId]>>],
) -> Result<Vec<BackendId>> {
    let index = component as u32;
    if let Some(found) = read_stripes(mount, path, index)? {
        return Ok(found);
    }
    let file_bytes = file_bytes_before(layout, component, placed);
    let on = |backend: BackendId| file_bytes.get(&backend).copied().unwrap_or(0);
    let candidates = candidates(mount, path, layout, component)?;
    let mut spaces = Vec::with_capacity(candidates.len());
    for backend in candidates {
        let store = mount.store(backend);
        match store.space() {
            Ok(space) => spaces.push(BackendSpace {
                backend: backend.0,
                total_bytes: space.blocks.saturating_mul(space.block_size),
                free_bytes: space.blocks_available.saturating_mul(space.block_size),
                file_bytes: on(backend),
            }),
            // A backend that cannot say is placed as if it had room: its
            // writes fail by themselves, naming it, if it has none.
            Err(error) => {
                tracing::debug!("{}: no free space figure for placement: {error}", store.url());
                spaces.push(BackendSpace {
                    backend: backend.0,
                    total_bytes: u64::MAX,
                    free_bytes: u64::MAX,
                    file_bytes: on(backend),
                });
            }
        }
    }
    let count = layout.components()[component].stripe_count.resolve(spaces.len() as u32);
    // The mount's turn: one step per component placed, so this mount's
    // files take the equally empty backends in turn (a writer that loses
    // the create race below has spent a turn; that skews nothing lasting).
    let rotor = mount.placement_rotor.fetch_add(1, Ordering::Relaxed);
    let chosen = choose_backends(&spaces, count, &mount.striping, rotor)
        .with_context(|| format!("/{path}: placing layout component {}", component + 1))?;
    let chosen: Vec<BackendId> = chosen.into_iter().map(BackendId).collect();
    let record = record_of(mount, index, &chosen);
    let (backend, paths) = canonical(mount, path);
    let store = mount.store(backend);
    let access = protection::read_access(mount, path)?;
    // Exclusive and whole for racing writers, but not synced here (two
    // fsyncs per new file under the default layout): `sync_creation`
    // syncs the file's records before a writer's first synced byte. A
    // crash may cut one placed after that; `recover --fix` rebuilds it
    // from where its data is, and reads never need it.
    let public = &Pieces::of(&access).public;
    match store.create_new_deferred_protected(&paths.stripes(index), &record.encode(), public) {
        Ok(()) => Ok(chosen),
        Err(error) if error.kind() == ErrorKind::AlreadyExists => read_stripes(mount, path, index)?
            .ok_or_else(|| Error::new(ErrorKind::Io, format!("/{path}: stripes record {index} vanished"))),
        Err(error) => Err(error.context(format!("{}: {}", store.url(), paths.stripes(index)))),
    }
}

/// An open striped file's layout and the backends of the components it
/// has reached so far (filled once each, then read without locks).
#[derive(Debug)]
pub(crate) struct Striping {
    layout: Layout,
    placed: Vec<OnceLock<Box<[BackendId]>>>,
}

impl Striping {
    pub(crate) fn new(layout: Layout) -> Striping {
        let placed = layout.components().iter().map(|_| OnceLock::new()).collect();
        Striping { layout, placed }
    }

    /// The backend holding logical byte `offset`, and the first offset
    /// past it that may lie elsewhere (a write splits there).
    pub(crate) fn locate(
        &self,
        mount: &MountState,
        path: impl Fn() -> StorePath,
        offset: u64,
    ) -> Result<(BackendId, u64)> {
        let beyond = || {
            Error::invalid(format!(
                "/{}: offset {offset} is past the end of the file's layout ({} bytes)",
                path(),
                self.layout.end().unwrap_or(u64::MAX)
            ))
        };
        let component = self.layout.locate(offset, |_| 1).ok_or_else(beyond)?.component;
        // Components are placed in order: a writer that starts in a later
        // one (a shared file's writer of a middle segment) places or reads
        // the earlier ones' records first, so every component is placed
        // knowing where the file's earlier bytes go, whichever writer gets
        // there first. An earlier component's record names backends only;
        // its data objects are still made by its first byte.
        for earlier in 0..=component {
            if self.placed[earlier].get().is_none() {
                let backends = place_component(mount, &path(), &self.layout, earlier, &self.placed)?;
                let _ = self.placed[earlier].set(backends.into_boxed_slice());
            }
        }
        let backends: &[BackendId] = self.placed[component].get().expect("placed above");
        let location = self.layout.locate(offset, |_| backends.len() as u32).ok_or_else(beyond)?;
        Ok((backends[location.stripe as usize], location.unit_end))
    }
}

/// What `plfs recover` finds wrong between a striped file's layout and its
/// logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LayoutProblem {
    /// The layout file or a stripes record does not decode (or is newer
    /// than this plfs): writers refuse the file; reads do not need it.
    Damaged,
    /// Data lies in a component that has no stripes record (a crash
    /// between placing and publishing cannot do that; a lost file can).
    /// The fix rebuilds the record from where the data is.
    MissingRecord,
    /// A log holds bytes of a stripe its component's record puts on
    /// another backend. Reads are unaffected (they follow the index); the
    /// bytes stay where they are.
    WrongBackend,
    /// A stripes record for a component the layout has not got, or in a
    /// file without a layout: the fix removes it.
    StrayRecord,
}

#[derive(Debug, Clone)]
pub(crate) struct LayoutFinding {
    pub problem: LayoutProblem,
    pub location: String,
    pub detail: String,
    pub fixed: bool,
}

/// Checks a striped file's layout and stripes records against its logs
/// (`logs`: the file's own, with index logs), repairing with `fix` what
/// can be repaired.
pub(crate) fn check(
    mount: &MountState,
    path: &StorePath,
    logs: &[LogLocation],
    fix: bool,
) -> Result<Vec<LayoutFinding>> {
    let (backend, paths) = canonical(mount, path);
    let store = mount.store(backend);
    let at = |what: &StorePath| format!("{}/{what}", store.url());
    let mut findings = Vec::new();
    let damaged = |error: &Error| matches!(error.kind(), ErrorKind::Corrupt | ErrorKind::Unsupported);
    let layout = match read_layout(mount, path) {
        Ok(layout) => layout,
        Err(error)
            if damaged(&error)
                && fix
                && bytes_are_damaged(store, &paths.layout(), format::decode_layout)? =>
        {
            // Cut by a crash before the file's first sync (sync_creation
            // syncs it before any data), or other damage: the layout only
            // says where later writes go, so the one the file's directory
            // gives new files takes its place (none: the file goes on
            // without one, its writers one log per host).
            let parent = path.parent().unwrap_or_default();
            let replacement = layout_of_directory(mount, &parent)?;
            let location = at(&paths.layout());
            match &replacement {
                Some(layout) => store
                    .replace(&paths.layout(), &format::encode_layout(layout))
                    .with_context(|| location.clone())?,
                None => {
                    ignore_missing(store.remove_file(&paths.layout())).with_context(|| location.clone())?
                }
            }
            let rewritten = replacement.as_ref().map_or("removed".to_owned(), |layout| {
                format!("rewritten as the directory's layout for new files ({layout})")
            });
            findings.push(LayoutFinding {
                problem: LayoutProblem::Damaged,
                location,
                detail: format!("{error}; {rewritten}; reads are unaffected"),
                fixed: true,
            });
            replacement
        }
        Err(error) if damaged(&error) => {
            findings.push(LayoutFinding {
                problem: LayoutProblem::Damaged,
                location: at(&paths.layout()),
                detail: format!("{error}; writers refuse the file, reads are unaffected"),
                fixed: false,
            });
            return Ok(findings);
        }
        Err(error) => return Err(error),
    };
    let components = layout.as_ref().map_or(0, |layout| layout.components().len());
    let entries = match store.list(path) {
        Ok(entries) => entries,
        Err(error) if error.kind() == ErrorKind::NotFound => Vec::new(),
        Err(error) => return Err(error.context(at(path))),
    };
    for entry in entries {
        let ContainerEntry::Stripes(component) = classify_container_entry(&entry.name) else { continue };
        if (component as usize) < components {
            continue;
        }
        let record = paths.stripes(component);
        let fixed = fix && {
            ignore_missing(store.remove_file(&record))?;
            true
        };
        let detail = match &layout {
            Some(layout) => format!("the layout has {} components", layout.components().len()),
            None => "the file has no layout".to_owned(),
        };
        findings.push(LayoutFinding {
            problem: LayoutProblem::StrayRecord,
            location: at(&record),
            detail,
            fixed,
        });
    }
    let Some(layout) = layout else { return Ok(findings) };
    let mut placed = Vec::with_capacity(components);
    for component in 0..components as u32 {
        match read_stripes(mount, path, component) {
            Ok(found) => placed.push(found),
            // Bytes that do not decode: made without a sync (placement
            // does not sync it; the first sync of a writer that knew it
            // did), so a crash may cut it. The fix removes it: data in the
            // component rebuilds it below from where that data is, and
            // with none the next writer places the component again.
            Err(error)
                if fix && bytes_are_damaged(store, &paths.stripes(component), StripesRecord::decode)? =>
            {
                let record = paths.stripes(component);
                ignore_missing(store.remove_file(&record)).with_context(|| at(&record))?;
                findings.push(LayoutFinding {
                    problem: LayoutProblem::Damaged,
                    location: at(&record),
                    detail: format!("{error}; removed (rebuilt from its data if it has any)"),
                    fixed: true,
                });
                placed.push(None);
            }
            // A record naming backends this mount has not got (moved in
            // the plfsrc) is reported like a damaged one.
            Err(error) if damaged(&error) || error.kind() == ErrorKind::InvalidInput => {
                findings.push(LayoutFinding {
                    problem: LayoutProblem::Damaged,
                    location: at(&paths.stripes(component)),
                    detail: format!("{error}; writers refuse the component, reads are unaffected"),
                    fixed: false,
                });
                placed.push(None);
            }
            Err(error) => return Err(error),
        }
    }
    // Where data of unplaced components lies: component → unit → backends.
    let mut seen: Vec<BTreeMap<u64, BTreeSet<BackendId>>> = vec![BTreeMap::new(); components];
    for log in logs.iter().filter(|log| log.has_index) {
        let records = read_index_log(mount, path, log)?.records;
        let mut wrong = 0u64;
        let mut first_wrong = None;
        for (logical, _) in records.iter().flat_map(blocks) {
            let Some(location) = layout.locate(logical, |_| 1) else { continue };
            let component = &layout.components()[location.component];
            match &placed[location.component] {
                Some(backends) => {
                    let stripe = layout.locate(logical, |_| backends.len() as u32).expect("inside").stripe;
                    if backends[stripe as usize] != log.backend {
                        wrong += 1;
                        first_wrong.get_or_insert((
                            logical,
                            location.component,
                            stripe,
                            backends[stripe as usize],
                        ));
                    }
                }
                None => {
                    let unit = (logical - component.start) / component.stripe_size;
                    seen[location.component].entry(unit).or_default().insert(log.backend);
                }
            }
        }
        if let Some((logical, component, stripe, expected)) = first_wrong {
            findings.push(LayoutFinding {
                problem: LayoutProblem::WrongBackend,
                location: format!("{}/{}", mount.store(log.backend).url(), log.path(path, LogKind::Index)),
                detail: format!(
                    "{wrong} writes on backend {} belong to stripes on other backends (the first at offset {logical}: \
                     component {} stripe {stripe}, recorded on backend {}); reads are unaffected, the bytes stay",
                    log.backend.0,
                    component + 1,
                    expected.0
                ),
                fixed: false,
            });
        }
    }
    for (component, units) in seen.iter().enumerate().filter(|(_, units)| !units.is_empty()) {
        let record = paths.stripes(component as u32);
        let rebuilt = if fix { rebuild(mount, path, &layout, component, units)? } else { None };
        let detail = match &rebuilt {
            Some(backends) => format!(
                "data of {} stripe units lies in the component; rebuilt from where it is: backends {:?}",
                units.len(),
                backends.iter().map(|backend| backend.0).collect::<Vec<_>>()
            ),
            None if fix => format!(
                "data of {} stripe units lies in the component, placed inconsistently: not rebuilt",
                units.len()
            ),
            None => format!("data of {} stripe units lies in the component", units.len()),
        };
        findings.push(LayoutFinding {
            problem: LayoutProblem::MissingRecord,
            location: at(&record),
            detail,
            fixed: rebuilt.is_some(),
        });
    }
    Ok(findings)
}

/// A lost stripes record rebuilt from the backends its data is on: the
/// stripe count the component resolves to on this mount, each stripe on
/// the one backend holding its units, stripes without data on unused
/// candidates. None when the data does not fit one such record.
fn rebuild(
    mount: &MountState,
    path: &StorePath,
    layout: &Layout,
    component: usize,
    units: &BTreeMap<u64, BTreeSet<BackendId>>,
) -> Result<Option<Vec<BackendId>>> {
    let candidates = candidates(mount, path, layout, component)?;
    let count = layout.components()[component].stripe_count.resolve(candidates.len() as u32) as u64;
    let mut stripes: Vec<Option<BackendId>> = vec![None; count as usize];
    for (unit, backends) in units {
        let [backend] = backends.iter().copied().collect::<Vec<_>>()[..] else { return Ok(None) };
        let slot = &mut stripes[(unit % count) as usize];
        if slot.is_some_and(|known| known != backend) {
            return Ok(None);
        }
        *slot = Some(backend);
    }
    let used: BTreeSet<BackendId> = stripes.iter().flatten().copied().collect();
    if used.len() != stripes.iter().flatten().count()
        || !used.iter().all(|backend| candidates.contains(backend))
    {
        return Ok(None);
    }
    let mut spare = candidates.into_iter().filter(|backend| !used.contains(backend));
    let mut backends = Vec::with_capacity(stripes.len());
    for stripe in stripes {
        match stripe.or_else(|| spare.next()) {
            Some(backend) => backends.push(backend),
            None => return Ok(None),
        }
    }
    let record = record_of(mount, component as u32, &backends);
    let (canonical_backend, paths) = canonical(mount, path);
    let access = protection::read_access(mount, path)?;
    mount.store(canonical_backend).create_new_protected(
        &paths.stripes(component as u32),
        &record.encode(),
        &Pieces::of(&access).public,
    )?;
    Ok(Some(backends))
}

/// Each block of data a record writes: (logical offset, length). A write
/// piece never crosses a stripe unit (writers split there), so its first
/// byte places it.
fn blocks(record: &Record) -> Box<dyn Iterator<Item = (u64, u64)> + '_> {
    match record {
        Record::Write(write) if write.length > 0 => Box::new(std::iter::once((write.logical, write.length))),
        Record::Pattern(pattern) => {
            Box::new((0..pattern.count).map(|k| (pattern.logical + k * pattern.stride, pattern.length)))
        }
        _ => Box::new(std::iter::empty()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Barrier};

    use proptest::prelude::*;

    use super::*;
    use crate::clock::Stamper;
    use crate::config::{BackendRole, Tuning};
    use crate::fs::{Options, Plfs};
    use crate::open::OpenFlags;
    use crate::store::SharedStore;
    use crate::store::memory::MemoryStore;
    use crate::striping::{Component, STRIPE_UNIT, StripeCount, StripingConfig};
    use crate::tools::Problem;

    const KIB: u64 = 1024;
    const MIB: u64 = 1 << 20;

    fn stores(count: usize) -> Vec<SharedStore> {
        (0..count).map(|i| Arc::new(MemoryStore::new(format!("mem://s{i}"))) as SharedStore).collect()
    }

    fn options(host: &str, pid: u32) -> Options {
        Options {
            hostname: host.into(),
            pid,
            uid: 1000,
            gid: 100,
            // One clock for every mount of the test: stamps order writes
            // across "hosts" as synchronised clocks would.
            stamper: Stamper::process_wide(),
            tuning: Tuning { threadpool_size: 2, index_flush_bytes: 4096, ..Tuning::default() },
        }
    }

    fn mount_with(stores: &[SharedStore], striping: StripingConfig, host: &str, pid: u32) -> Plfs {
        let backends = stores.iter().map(|store| (store.clone(), BackendRole::Any)).collect();
        Plfs::with_striping(backends, options(host, pid), striping).unwrap()
    }

    fn mount(stores: &[SharedStore], layout: Option<Layout>) -> Plfs {
        mount_with(stores, StripingConfig { default_layout: layout, ..StripingConfig::default() }, "node0", 7)
    }

    fn component(start: u64, end: Option<u64>, count: StripeCount, size: u64) -> Component {
        Component { start, end, stripe_count: count, stripe_size: size, pool: None }
    }

    /// `-E 1M -c 1 -E 4M -c 2 -E -1 -c -1`, all with 256 KiB stripes.
    fn progressive() -> Layout {
        let size = 256 * KIB;
        Layout::new(vec![
            component(0, Some(MIB), StripeCount::Count(1), size),
            component(MIB, Some(4 * MIB), StripeCount::Count(2), size),
            component(4 * MIB, None, StripeCount::All, size),
        ])
        .unwrap()
    }

    fn pattern(offset: u64, length: usize) -> Vec<u8> {
        (0..length as u64).map(|i| ((offset + i) * 7 % 251) as u8).collect()
    }

    fn read_back(plfs: &Plfs, path: &str) -> Vec<u8> {
        let handle = plfs.open(path, OpenFlags::RDONLY, 0, 99).unwrap();
        let size = handle.size().unwrap() as usize;
        let mut buf = vec![0xEE; size];
        let mut done = 0;
        while done < size {
            let count = handle.read(&mut buf[done..], done as u64).unwrap();
            assert!(count > 0);
            done += count;
        }
        handle.close().unwrap();
        buf
    }

    fn data_logs(plfs: &Plfs, path: &str) -> Vec<LogLocation> {
        plfs.inventory(path).unwrap().logs.into_iter().filter(|log| log.has_data).collect()
    }

    fn stripes_of(plfs: &Plfs, path: &str, component: u32) -> Option<Vec<BackendId>> {
        read_stripes(plfs.state(), &StorePath::parse(path).unwrap(), component).unwrap()
    }

    fn problems(plfs: &Plfs, path: &str, fix: bool) -> Vec<Problem> {
        plfs.recover(path, fix).unwrap().findings.iter().map(|finding| finding.problem).collect()
    }

    #[test]
    fn a_small_file_under_a_progressive_layout_is_one_data_object() {
        let stores = stores(4);
        let layout = Layout::new(vec![
            component(0, Some(MIB), StripeCount::Count(1), MIB),
            component(MIB, None, StripeCount::All, MIB),
        ])
        .unwrap();
        let plfs = mount(&stores, Some(layout.clone()));
        let handle = plfs.open("/small", OpenFlags::WRONLY.create(), 0o644, 1).unwrap();
        for piece in 0..4u64 {
            handle.write(&pattern(piece * 256 * KIB, 256 * KIB as usize), piece * 256 * KIB).unwrap();
        }
        handle.close().unwrap();
        let logs = data_logs(&plfs, "/small");
        assert_eq!(logs.len(), 1, "one data object for 1 MiB under -E 1M -c 1: {logs:?}");
        assert_eq!(stripes_of(&plfs, "/small", 0).map(|backends| backends.len()), Some(1));
        assert_eq!(stripes_of(&plfs, "/small", 1), None, "the second component is never placed");
        assert_eq!(logs[0].backend, stripes_of(&plfs, "/small", 0).unwrap()[0]);
        assert_eq!(read_back(&plfs, "/small"), pattern(0, MIB as usize));
        assert_eq!(read_layout(plfs.state(), &StorePath::parse("small").unwrap()).unwrap(), Some(layout));
        assert!(problems(&plfs, "/small", false).is_empty());
    }

    #[test]
    fn files_without_a_layout_keep_the_classic_container() {
        let stores = stores(4);
        let plfs = mount(&stores, None);
        let handle = plfs.open("/plain", OpenFlags::WRONLY.create(), 0o644, 1).unwrap();
        handle.write(&pattern(0, 3 * MIB as usize), 0).unwrap();
        handle.close().unwrap();
        let path = StorePath::parse("plain").unwrap();
        let (backend, paths) = canonical(plfs.state(), &path);
        let names: Vec<String> =
            stores[backend.0].list(&path).unwrap().into_iter().map(|entry| entry.name).collect();
        assert!(!names.iter().any(|name| name == "layout" || name.starts_with("stripes.")), "{names:?}");
        assert!(!stores[backend.0].exists(&paths.layout()).unwrap());
        let state = plfs.state();
        let hostdir = state.placement.hostdir("node0");
        let logs = data_logs(&plfs, "/plain");
        assert_eq!(logs.len(), 1);
        assert_eq!(
            (logs[0].hostdir, logs[0].backend),
            (hostdir, state.placement.hostdir_backend("plain", hostdir))
        );
    }

    /// Writes crossing stripe units and components, from 4 writers, on 4
    /// backends: every backend gets data, each component's stripes are
    /// where its record says, and the file reads back exactly through the
    /// index logs, through a flattened global index, and in a process
    /// that has no layout configured at all.
    #[test]
    fn a_striped_shared_file_spreads_over_every_backend_and_reads_back() {
        let stores = stores(4);
        let plfs = mount(&stores, Some(progressive()));
        let record = 100_000usize;
        let total = 12 * MIB as usize;
        let mut expected = vec![0u8; total];
        let handle = plfs.open("/ckpt", OpenFlags::RDWR.create(), 0o644, 0).unwrap();
        for (index, offset) in (0..total).step_by(record).enumerate() {
            let length = record.min(total - offset);
            let data = pattern(offset as u64, length);
            assert_eq!(handle.write_as(&data, offset as u64, index as u64 % 4).unwrap(), length);
            expected[offset..offset + length].copy_from_slice(&data);
        }
        // Reads through the open handle see the writes (read state built
        // from the logs while they are being written).
        let mut buf = vec![0u8; 300_000];
        assert_eq!(handle.read(&mut buf, MIB - 1000).unwrap(), buf.len());
        assert!(buf[..] == expected[(MIB - 1000) as usize..][..buf.len()]);
        handle.close().unwrap();
        let placed: Vec<Vec<BackendId>> = (0..3).map(|c| stripes_of(&plfs, "/ckpt", c).unwrap()).collect();
        assert_eq!(placed.iter().map(Vec::len).collect::<Vec<_>>(), vec![1, 2, 4]);
        let logs = data_logs(&plfs, "/ckpt");
        let backends: BTreeSet<BackendId> = logs.iter().map(|log| log.backend).collect();
        assert_eq!(backends.len(), 4, "data on every backend: {logs:?}");
        // Per writer at most one log pair per backend.
        let pairs: BTreeSet<(u64, BackendId)> = logs.iter().map(|log| (log.id.writer, log.backend)).collect();
        assert_eq!(pairs.len(), logs.len());
        assert!(problems(&plfs, "/ckpt", false).is_empty(), "{:?}", plfs.recover("/ckpt", false).unwrap());
        assert!(read_back(&plfs, "/ckpt") == expected);
        let map = plfs.map("/ckpt").unwrap();
        assert_eq!(map.totals.logs, logs.len());
        assert_eq!(map.totals.data_bytes, total as u64);
        plfs.flatten("/ckpt").unwrap();
        let other = mount(&stores, None);
        assert!(
            read_back(&other, "/ckpt") == expected,
            "through the global index, without a layout configured"
        );
        assert_eq!(other.stat("/ckpt").unwrap().size, total as u64);
        // Appending from a process with no layout configured follows the
        // file's layout, not its own mount's.
        let handle = other.open("/ckpt", OpenFlags::WRONLY, 0, 9).unwrap();
        handle.write(&pattern(total as u64, 600 * KIB as usize), total as u64).unwrap();
        handle.close().unwrap();
        assert!(problems(&other, "/ckpt", false).is_empty());
    }

    /// A directory's template (set with `plfs setstripe DIR`) stripes the
    /// files created below it, and a file's own layout, set while it is
    /// still empty, is the one its first writer places stripes by.
    #[test]
    fn templates_and_a_files_own_layout_reach_the_data_path() {
        let stores = stores(4);
        let plfs = mount(&stores, None);
        let four = Layout::striped(StripeCount::Count(4), 64 * KIB).unwrap();
        plfs.mkdir("/wide", 0o755).unwrap();
        plfs.set_layout("/wide", &four).unwrap();
        let write = |path: &str| {
            let handle = plfs.open(path, OpenFlags::WRONLY.create(), 0o644, 1).unwrap();
            handle.write(&pattern(0, MIB as usize), 0).unwrap();
            handle.close().unwrap();
        };
        write("/wide/f");
        assert_eq!(stripes_of(&plfs, "/wide/f", 0).map(|backends| backends.len()), Some(4));
        assert_eq!(data_logs(&plfs, "/wide/f").len(), 4);
        assert_eq!(read_back(&plfs, "/wide/f"), pattern(0, MIB as usize));
        // Outside the directory: the mount default (none), one data log.
        write("/plain");
        assert_eq!(data_logs(&plfs, "/plain").len(), 1);
        assert_eq!(stripes_of(&plfs, "/plain", 0), None);
        // An empty file given a layout of its own.
        plfs.open("/own", OpenFlags::WRONLY.create(), 0o644, 1).unwrap().close().unwrap();
        let two = Layout::striped(StripeCount::Count(2), 64 * KIB).unwrap();
        plfs.set_layout("/own", &two).unwrap();
        write("/own");
        assert_eq!(stripes_of(&plfs, "/own", 0).map(|backends| backends.len()), Some(2));
        assert_eq!(data_logs(&plfs, "/own").len(), 2);
        assert_eq!(read_back(&plfs, "/own"), pattern(0, MIB as usize));
        assert!(problems(&plfs, "/own", false).is_empty());
        // Once it has data its layout is fixed.
        assert!(plfs.set_layout("/own", &four).is_err());
    }

    /// A store that holds every `create_new` of one stripes record until
    /// `racers` callers have reached it, so each racing writer has read
    /// "no record" and chosen its own placement before any record lands;
    /// then counts who won and who lost the exclusive create.
    #[derive(Debug)]
    struct HeldCreates {
        inner: SharedStore,
        record: String,
        barrier: Arc<Barrier>,
        outcomes: Arc<std::sync::Mutex<Vec<bool>>>,
    }

    impl Store for HeldCreates {
        fn url(&self) -> &str {
            self.inner.url()
        }
        fn capabilities(&self) -> crate::store::Capabilities {
            self.inner.capabilities()
        }
        fn create_dir(&self, p: &StorePath, m: u32) -> Result<()> {
            self.inner.create_dir(p, m)
        }
        fn create_dir_all(&self, p: &StorePath) -> Result<()> {
            self.inner.create_dir_all(p)
        }
        fn list(&self, p: &StorePath) -> Result<Vec<crate::store::DirEntry>> {
            self.inner.list(p)
        }
        fn metadata(&self, p: &StorePath) -> Result<crate::store::Metadata> {
            self.inner.metadata(p)
        }
        fn remove_file(&self, p: &StorePath) -> Result<()> {
            self.inner.remove_file(p)
        }
        fn remove_dir(&self, p: &StorePath) -> Result<()> {
            self.inner.remove_dir(p)
        }
        fn rename(&self, f: &StorePath, t: &StorePath) -> Result<()> {
            self.inner.rename(f, t)
        }
        fn local_path(&self, path: &StorePath) -> Option<std::path::PathBuf> {
            self.inner.local_path(path)
        }
        fn exchange(&self, a: &StorePath, b: &StorePath) -> Result<()> {
            self.inner.exchange(a, b)
        }
        fn create_new(&self, p: &StorePath, c: &[u8]) -> Result<()> {
            if p.file_name() != Some(self.record.as_str()) {
                return self.inner.create_new(p, c);
            }
            self.barrier.wait();
            let result = self.inner.create_new(p, c);
            self.outcomes.lock().unwrap().push(result.is_ok());
            result
        }
        fn replace(&self, p: &StorePath, c: &[u8]) -> Result<()> {
            self.inner.replace(p, c)
        }
        fn create_append(&self, p: &StorePath) -> Result<Box<dyn crate::store::AppendWriter>> {
            self.inner.create_append(p)
        }
        fn open_read(&self, p: &StorePath) -> Result<Box<dyn crate::store::ReadHandle>> {
            self.inner.open_read(p)
        }
        fn open_write(
            &self,
            p: &StorePath,
            how: crate::store::WriteOpen,
        ) -> Result<Box<dyn crate::store::RandomWriter>> {
            self.inner.open_write(p, how)
        }
        fn set_mode(&self, p: &StorePath, m: u32) -> Result<()> {
            self.inner.set_mode(p, m)
        }
        fn set_owner(&self, p: &StorePath, u: Option<u32>, g: Option<u32>) -> Result<()> {
            self.inner.set_owner(p, u, g)
        }
        fn set_times(
            &self,
            p: &StorePath,
            a: Option<std::time::SystemTime>,
            m: Option<std::time::SystemTime>,
        ) -> Result<()> {
            self.inner.set_times(p, a, m)
        }
        fn symlink(&self, t: &str, p: &StorePath) -> Result<()> {
            self.inner.symlink(t, p)
        }
        fn read_link(&self, p: &StorePath) -> Result<String> {
            self.inner.read_link(p)
        }
        fn space(&self) -> Result<crate::store::SpaceInfo> {
            self.inner.space()
        }
    }

    /// Writers on several hosts reach a component at once. Each host's
    /// mount puts another pair of backends behind the layout's pool name,
    /// so each chooses a different placement, and the store holds every
    /// create of the component's record until all have chosen: exactly one
    /// create wins, every loser takes the winner's record, and no byte
    /// lands on a backend the record does not name.
    #[test]
    fn writers_on_several_hosts_agree_on_a_components_backends() {
        let hosts = 4usize;
        let barrier = Arc::new(Barrier::new(hosts));
        let outcomes = Arc::new(std::sync::Mutex::new(Vec::new()));
        let stores: Vec<SharedStore> = stores(4)
            .into_iter()
            .map(|inner| {
                Arc::new(HeldCreates {
                    inner,
                    record: crate::layout::stripes_name(1),
                    barrier: barrier.clone(),
                    outcomes: outcomes.clone(),
                }) as SharedStore
            })
            .collect();
        let size = 64 * KIB;
        let layout = Layout::new(vec![
            component(0, Some(size), StripeCount::Count(1), size),
            Component { pool: Some("fast".into()), ..component(size, None, StripeCount::Count(2), size) },
        ])
        .unwrap();
        let first = mount(&stores, Some(layout.clone()));
        first.open("/race", OpenFlags::WRONLY.create(), 0o644, 0).unwrap().close().unwrap();
        let threads: Vec<_> = (0..hosts)
            .map(|host| {
                let stores = stores.clone();
                let layout = layout.clone();
                std::thread::spawn(move || {
                    // Host h's pool "fast" is backends {h, h+1} (mod 4):
                    // no two hosts would choose the same pair.
                    let pool = vec![host, (host + 1) % 4];
                    let striping = StripingConfig {
                        default_layout: Some(layout),
                        pools: [("fast".to_owned(), pool)].into_iter().collect(),
                        ..StripingConfig::default()
                    };
                    let plfs = mount_with(&stores, striping, &format!("host{host}"), 100 + host as u32);
                    let handle = plfs.open("/race", OpenFlags::WRONLY, 0, host as u64).unwrap();
                    for unit in 0..8u64 {
                        let offset = size * (1 + unit) + host as u64 * 1000;
                        handle.write(&pattern(offset, 1000), offset).unwrap();
                    }
                    handle.close().unwrap();
                    stripes_of(&plfs, "/race", 1).expect("placed")
                })
            })
            .collect();
        let seen: Vec<Vec<BackendId>> = threads.into_iter().map(|thread| thread.join().unwrap()).collect();
        let mut outcomes = outcomes.lock().unwrap().clone();
        outcomes.sort();
        assert_eq!(outcomes, [vec![false; hosts - 1], vec![true]].concat(), "one create wins, the rest lose");
        let placed = stripes_of(&first, "/race", 1).expect("component 2 placed");
        assert_eq!(placed.len(), 2);
        assert!(seen.iter().all(|backends| *backends == placed), "{seen:?} vs {placed:?}");
        assert!(problems(&first, "/race", false).is_empty(), "{:?}", first.recover("/race", false).unwrap());
        let logs = data_logs(&first, "/race");
        assert!(logs.iter().all(|log| placed.contains(&log.backend)), "{placed:?} vs {logs:?}");
        let content = read_back(&first, "/race");
        for host in 0..hosts as u64 {
            for unit in 0..8u64 {
                let offset = size * (1 + unit) + host * 1000;
                assert!(
                    content[offset as usize..][..1000] == pattern(offset, 1000)[..],
                    "host {host} unit {unit}"
                );
            }
        }
    }

    /// `plfs map` names each extent's component, stripe and backend, and
    /// `plfs query` the stripes each record places and each data log holds.
    #[test]
    fn map_and_query_name_the_component_stripe_and_backend_of_the_data() {
        let stores = stores(4);
        let plfs = mount(&stores, Some(progressive()));
        let total = 6 * MIB as usize;
        let handle = plfs.open("/m", OpenFlags::WRONLY.create(), 0o644, 0).unwrap();
        handle.write(&pattern(0, total), 0).unwrap();
        handle.close().unwrap();
        let placed: Vec<Vec<BackendId>> = (0..3).map(|c| stripes_of(&plfs, "/m", c).unwrap()).collect();
        let map = plfs.map("/m").unwrap();
        assert!(map.entries.len() > 3, "{map:?}");
        let mut seen = BTreeSet::new();
        for entry in &map.entries {
            let stripe = entry.stripe.unwrap_or_else(|| panic!("no stripe: {entry:?}"));
            let (component, start) = match entry.logical {
                offset if offset < MIB => (1, 0),
                offset if offset < 4 * MIB => (2, MIB),
                _ => (3, 4 * MIB),
            };
            let backends = &placed[component - 1];
            let expected = ((entry.logical - start) / (256 * KIB)) % backends.len() as u64;
            assert_eq!((stripe.component, u64::from(stripe.stripe)), (component, expected), "{entry:?}");
            assert_eq!(BackendId(stripe.backend), backends[stripe.stripe as usize], "{entry:?}");
            assert!(entry.log.starts_with(&format!("{}/", stores[stripe.backend].url())), "{entry:?}");
            seen.insert((stripe.component, stripe.stripe));
        }
        assert_eq!(seen.len(), 1 + 2 + 4, "every stripe of every component: {seen:?}");
        let pieces = plfs.query("/m").unwrap();
        let records: Vec<_> = pieces.iter().filter(|p| p.kind == crate::tools::PieceKind::Stripes).collect();
        assert_eq!(records.len(), 3);
        for record in records {
            let component = record.stripes[0].component;
            let backends: Vec<BackendId> = record.stripes.iter().map(|s| BackendId(s.backend)).collect();
            assert_eq!(backends, placed[component - 1], "{record:?}");
        }
        let logs: Vec<_> = pieces.iter().filter(|p| p.kind == crate::tools::PieceKind::DataLog).collect();
        assert_eq!(logs.len(), 4);
        let mut held = 0;
        for log in logs {
            assert!(!log.stripes.is_empty(), "{log:?}");
            for stripe in &log.stripes {
                assert_eq!(log.backend, stores[stripe.backend].url(), "{log:?}");
                held += 1;
            }
        }
        assert_eq!(held, 1 + 2 + 4);
    }

    /// The plfsrc lists the same backends in another order (all but the
    /// canonical one, which holds the container and is found by its
    /// position, as in PLFS 2.5): the records find each stripe's backend
    /// by its location, so the file reads back, a rewrite lands on the
    /// backends the records placed the stripes on, and `recover` finds
    /// nothing wrong through either order.
    #[test]
    fn a_plfsrc_listing_the_backends_in_another_order_still_follows_the_records() {
        let stores = stores(4);
        let plfs = mount(&stores, Some(progressive()));
        let total = 6 * MIB as usize;
        let handle = plfs.open("/o", OpenFlags::WRONLY.create(), 0o644, 0).unwrap();
        handle.write(&pattern(0, total), 0).unwrap();
        handle.close().unwrap();
        let (kept, _) = canonical(plfs.state(), &StorePath::parse("o").unwrap());
        let others: Vec<usize> = (0..4).filter(|&index| index != kept.0).collect();
        let mut order: Vec<usize> = (0..4).collect();
        for (k, &index) in others.iter().enumerate() {
            order[index] = others[(k + 1) % others.len()];
        }
        let reordered: Vec<SharedStore> = order.iter().map(|&index| stores[index].clone()).collect();
        let other = mount(&reordered, None);
        assert!(read_back(&other, "/o") == pattern(0, total));
        // Rewritten through the reordered mount, with other bytes.
        let rewrite: Vec<u8> = pattern(0, total).iter().map(|byte| byte ^ 0x5a).collect();
        let handle = other.open("/o", OpenFlags::WRONLY, 0, 5).unwrap();
        handle.write(&rewrite, 0).unwrap();
        handle.close().unwrap();
        assert!(problems(&other, "/o", false).is_empty(), "{:?}", other.recover("/o", false).unwrap());
        assert!(problems(&plfs, "/o", false).is_empty(), "{:?}", plfs.recover("/o", false).unwrap());
        assert!(read_back(&other, "/o") == rewrite);
        assert!(read_back(&plfs, "/o") == rewrite);
        // Still one data log per writer per backend: the rewrite went where
        // the first writer's stripes are.
        let logs = data_logs(&plfs, "/o");
        let backends: BTreeSet<BackendId> = logs.iter().map(|log| log.backend).collect();
        assert_eq!((logs.len(), backends.len()), (8, 4), "{logs:?}");
    }

    /// One backend renamed in the plfsrc while the others keep their
    /// locations: a writer reaching a component placed on it fails with an
    /// error naming the file, the record and both backend lists, and what
    /// was written reads back. Every backend moved at once (a copy of the
    /// whole mount) is followed by position.
    #[test]
    fn a_backend_renamed_in_the_plfsrc_is_refused_by_name_and_a_moved_mount_is_followed() {
        let root = tempfile::tempdir().unwrap();
        let dirs: Vec<std::path::PathBuf> =
            (0..3).map(|index| root.path().join(format!("b{index}"))).collect();
        let posix = |labels: &[String]| -> Plfs {
            let stores: Vec<SharedStore> = dirs
                .iter()
                .zip(labels)
                .map(|(dir, label)| {
                    std::fs::create_dir_all(dir).unwrap();
                    Arc::new(crate::store::posix::PosixStore::new(dir, label.clone()).unwrap()) as SharedStore
                })
                .collect();
            mount(&stores, Some(Layout::striped(StripeCount::All, 64 * KIB).unwrap()))
        };
        let labels: Vec<String> = dirs.iter().map(|dir| format!("posix://{}", dir.display())).collect();
        let plfs = posix(&labels);
        let handle = plfs.open("/m", OpenFlags::WRONLY.create(), 0o644, 0).unwrap();
        handle.write(&pattern(0, 512 * KIB as usize), 0).unwrap();
        handle.close().unwrap();

        let mut renamed = labels.clone();
        renamed[1] = "posix:///somewhere/else".to_owned();
        let partly = posix(&renamed);
        assert!(read_back(&partly, "/m") == pattern(0, 512 * KIB as usize), "reads are unaffected");
        let handle = partly.open("/m", OpenFlags::WRONLY, 0, 3).unwrap();
        let error = handle.write(b"more", 512 * KIB).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
        let message = error.to_string();
        for needle in ["/m", "stripes.0", "moved or renamed", "somewhere/else", &labels[1]] {
            assert!(message.contains(needle), "{needle:?} missing from: {message}");
        }
        handle.close().unwrap();
        assert!(read_back(&plfs, "/m") == pattern(0, 512 * KIB as usize));

        let moved: Vec<String> = (0..3).map(|index| format!("posix:///copied/b{index}")).collect();
        let copy = posix(&moved);
        let handle = copy.open("/m", OpenFlags::WRONLY, 0, 4).unwrap();
        handle.write(b"more", 512 * KIB).unwrap();
        handle.close().unwrap();
        assert!(problems(&copy, "/m", false).is_empty());
        assert_eq!(&read_back(&copy, "/m")[512 * KIB as usize..], b"more");
    }

    /// Creation does not sync a striped file's layout (with the mount's
    /// default layout that was four fsyncs per create); the file's first
    /// sync does, before any data. A power loss before it cuts the layout
    /// of a file none of whose bytes were synced: `plfs recover --fix`
    /// rewrites it as the directory's layout (reads never needed it; the
    /// index names the log of every byte) and the file takes writes again.
    /// A file that was synced keeps its layout, its stripes records and its
    /// synced bytes; a record placed after the writer's first sync may be
    /// cut (placement does not sync it), and the fix rebuilds it from where
    /// its synced data is.
    #[test]
    fn power_loss_before_the_first_sync_cuts_only_an_unsynced_files_layout() {
        let memory: Vec<Arc<MemoryStore>> =
            (0..4).map(|i| Arc::new(MemoryStore::new(format!("mem://p{i}")))).collect();
        let stores: Vec<SharedStore> = memory.iter().map(|store| store.clone() as SharedStore).collect();
        let plfs = mount(&stores, Some(progressive()));
        let synced = plfs.open("/s", OpenFlags::WRONLY.create(), 0o644, 0).unwrap();
        // Past the first component's 1 MiB: two components, three backends.
        synced.write(&pattern(0, 2 * MIB as usize), 0).unwrap();
        synced.sync().unwrap();
        synced.close().unwrap();
        let unsynced = plfs.open("/n", OpenFlags::WRONLY.create(), 0o644, 0).unwrap();
        unsynced.write(b"never synced", 0).unwrap();
        unsynced.close().unwrap();
        // A component placed after the writer's first sync: its record is
        // not synced, though the data in it is.
        let later = plfs.open("/t", OpenFlags::WRONLY.create(), 0o644, 0).unwrap();
        later.write(&pattern(0, MIB as usize), 0).unwrap();
        later.sync().unwrap();
        later.write(&pattern(MIB, MIB as usize), MIB).unwrap();
        later.sync().unwrap();
        later.close().unwrap();
        drop(plfs);
        for store in &memory {
            store.discard_unsynced();
        }

        let survivor = mount(&stores, Some(progressive()));
        assert_eq!(read_back(&survivor, "/s"), pattern(0, 2 * MIB as usize));
        assert!(problems(&survivor, "/s", false).is_empty());
        let report = survivor.recover("/n", true).unwrap();
        let fixed: Vec<Problem> = report.findings.iter().filter(|f| f.fixed).map(|f| f.problem).collect();
        assert!(fixed.contains(&Problem::DamagedLayout), "{report:?}");
        assert!(report.findings.iter().all(|finding| finding.fixed), "{report:?}");
        assert!(problems(&survivor, "/n", false).is_empty());
        let path = StorePath::parse("n").unwrap();
        assert_eq!(read_layout(survivor.state(), &path).unwrap(), Some(progressive()));
        let handle = survivor.open("/n", OpenFlags::WRONLY, 0, 0).unwrap();
        handle.write(b"again", 0).unwrap();
        handle.close().unwrap();
        assert_eq!(read_back(&survivor, "/n"), b"again");

        assert_eq!(read_back(&survivor, "/t"), pattern(0, 2 * MIB as usize));
        let handle = survivor.open("/t", OpenFlags::WRONLY, 0, 0).unwrap();
        let error = handle.write(b"x", MIB + 1).unwrap_err();
        assert!(error.to_string().contains("`plfs recover --fix /t` rebuilds it"), "{error}");
        handle.close().unwrap();
        let mut fixed = problems(&survivor, "/t", true);
        fixed.sort_by_key(|problem| format!("{problem:?}"));
        assert_eq!(fixed, vec![Problem::DamagedLayout, Problem::MissingStripesRecord]);
        assert!(problems(&survivor, "/t", false).is_empty());
        let handle = survivor.open("/t", OpenFlags::WRONLY, 0, 0).unwrap();
        handle.write(b"x", MIB + 1).unwrap();
        handle.close().unwrap();
        let mut expected = pattern(0, 2 * MIB as usize);
        expected[MIB as usize + 1] = b'x';
        assert_eq!(read_back(&survivor, "/t"), expected);
        assert!(problems(&survivor, "/t", false).is_empty());
    }

    /// A layout cut short refuses the file's writers with an error that
    /// names the repair; reads go on, and the repair rewrites it as the
    /// directory's layout (none when the mount has no default: the file
    /// then goes on without one).
    #[test]
    fn a_cut_layout_names_the_repair_that_rewrites_it() {
        for default in [Some(progressive()), None] {
            let stores = stores(2);
            let creator = mount(&stores, Some(progressive()));
            let handle = creator.open("/c", OpenFlags::WRONLY.create(), 0o644, 0).unwrap();
            handle.write(b"before", 0).unwrap();
            handle.close().unwrap();
            let path = StorePath::parse("c").unwrap();
            let (backend, paths) = canonical(creator.state(), &path);
            let bytes = stores[backend.0].read_all(&paths.layout()).unwrap();
            stores[backend.0].replace(&paths.layout(), &bytes[..bytes.len() / 2]).unwrap();
            let plfs = mount(&stores, default.clone());
            let handle = plfs.open("/c", OpenFlags::WRONLY, 0, 0).unwrap();
            let error = handle.write(b"after", 6).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Corrupt, "{error}");
            assert!(error.to_string().contains("`plfs recover --fix /c` rewrites it"), "{error}");
            handle.close().unwrap();
            assert_eq!(read_back(&plfs, "/c"), b"before");
            // Without a layout, the stripes record the first write made
            // is one too many, and goes as well.
            let expected = match default {
                Some(_) => vec![Problem::DamagedLayout],
                None => vec![Problem::DamagedLayout, Problem::StrayStripesRecord],
            };
            assert_eq!(problems(&plfs, "/c", true), expected);
            assert!(problems(&plfs, "/c", false).is_empty());
            assert_eq!(read_layout(plfs.state(), &path).unwrap(), default);
            let handle = plfs.open("/c", OpenFlags::WRONLY, 0, 0).unwrap();
            handle.write(b"after", 6).unwrap();
            handle.close().unwrap();
            assert_eq!(read_back(&plfs, "/c"), b"beforeafter");
        }
    }

    #[test]
    fn an_unknown_layout_version_is_refused_naming_the_file() {
        let stores = stores(2);
        let plfs = mount(&stores, Some(progressive()));
        let handle = plfs.open("/v", OpenFlags::WRONLY.create(), 0o644, 0).unwrap();
        handle.write(b"before", 0).unwrap();
        handle.close().unwrap();
        let path = StorePath::parse("v").unwrap();
        let (backend, paths) = canonical(plfs.state(), &path);
        let mut bytes = stores[backend.0].read_all(&paths.layout()).unwrap();
        bytes[8] = 9;
        let body = bytes.len() - 4;
        let crc = crc32c::crc32c(&bytes[..body]);
        bytes[body..].copy_from_slice(&crc.to_le_bytes());
        stores[backend.0].replace(&paths.layout(), &bytes).unwrap();
        let handle = plfs.open("/v", OpenFlags::WRONLY, 0, 0).unwrap();
        let error = handle.write(b"after", 6).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Unsupported, "{error}");
        let message = error.to_string();
        assert!(message.contains("v/layout") && message.contains("version 9"), "{message}");
        handle.close().unwrap();
        // What was written stays readable; recover names the damage.
        assert_eq!(read_back(&plfs, "/v"), b"before");
        assert_eq!(problems(&plfs, "/v", true), vec![Problem::DamagedLayout]);
    }

    #[test]
    fn recover_rebuilds_a_lost_stripes_record_and_reports_misplaced_stripes() {
        let stores = stores(4);
        let plfs = mount(&stores, Some(progressive()));
        let handle = plfs.open("/r", OpenFlags::WRONLY.create(), 0o644, 0).unwrap();
        handle.write(&pattern(0, 6 * MIB as usize), 0).unwrap();
        handle.close().unwrap();
        let path = StorePath::parse("r").unwrap();
        let (backend, paths) = canonical(plfs.state(), &path);
        let store = &stores[backend.0];
        let original = store.read_all(&paths.stripes(2)).unwrap();
        store.remove_file(&paths.stripes(2)).unwrap();
        store.create_new(&paths.stripes(7), &original).unwrap();
        assert_eq!(
            problems(&plfs, "/r", false),
            vec![Problem::StrayStripesRecord, Problem::MissingStripesRecord]
        );
        let report = plfs.recover("/r", true).unwrap();
        assert_eq!(report.unfixed(), 0, "{report:?}");
        assert_eq!(store.read_all(&paths.stripes(2)).unwrap(), original, "rebuilt as it was");
        assert!(!store.exists(&paths.stripes(7)).unwrap());
        assert!(problems(&plfs, "/r", false).is_empty());
        // A record that disagrees with where the bytes are: reported, left.
        let mut swapped = StripesRecord::decode(&original).unwrap();
        swapped.backends.rotate_left(1);
        swapped.locations.rotate_left(1);
        store.replace(&paths.stripes(2), &swapped.encode()).unwrap();
        let report = plfs.recover("/r", true).unwrap();
        assert!(!report.findings.is_empty());
        assert!(
            report.findings.iter().all(|f| f.problem == Problem::StripeOnWrongBackend && !f.fixed),
            "{report:?}"
        );
        assert!(
            read_back(&plfs, "/r") == pattern(0, 6 * MIB as usize),
            "reads follow the index, not the record"
        );
    }

    fn layouts() -> impl Strategy<Value = Layout> {
        let count = prop_oneof![(1u32..6).prop_map(StripeCount::Count), Just(StripeCount::All)];
        proptest::collection::vec((1u64..5, 1u64..4, count), 1..5).prop_map(|specs| {
            let mut components = Vec::new();
            let mut start = 0u64;
            let last = specs.len() - 1;
            for (index, (units, size, count)) in specs.into_iter().enumerate() {
                let size = size * STRIPE_UNIT;
                // Aligned to both this component's stripe size and the next's.
                let start_aligned = start.div_ceil(size) * size;
                if start_aligned != start {
                    break;
                }
                let end = (index != last).then_some(start + units * size * 12);
                components.push(component(start, end, count, size));
                match end {
                    Some(end) => start = end,
                    None => break,
                }
            }
            if components.last().is_some_and(|last| last.end.is_some()) {
                let end = components.last().unwrap().end.unwrap();
                components.push(component(end, None, StripeCount::All, STRIPE_UNIT));
            }
            Layout::new(components).unwrap()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// offset → component → stripe → backend, against a brute-force
        /// walk: each component found by scanning, stripes dealt unit by
        /// unit round-robin over the component's placed backends; and a
        /// whole unit `[offset, unit_end)` sits on one backend while the
        /// byte at `unit_end` starts the next unit.
        #[test]
        fn offsets_map_to_the_backend_of_their_stripe(
            layout in layouts(),
            backends in 1usize..7,
            offsets in proptest::collection::vec(0u64..(64 * MIB), 1..40),
        ) {
            let plfs = mount(&stores(backends), None);
            let striping = Striping::new(layout.clone());
            // Component c's stripes on backends c, c+1, ... (mod count).
            for (index, component) in layout.components().iter().enumerate() {
                let count = component.stripe_count.resolve(backends as u32) as usize;
                let placed: Box<[BackendId]> = (0..count).map(|k| BackendId((index + k) % backends)).collect();
                striping.placed[index].set(placed).unwrap();
            }
            let unit_of = |offset: u64| {
                let (index, component) = layout
                    .components()
                    .iter()
                    .enumerate()
                    .find(|(_, c)| offset >= c.start && c.end.is_none_or(|end| offset < end))
                    .expect("the last component runs to EOF");
                let unit = (offset - component.start) / component.stripe_size;
                let count = component.stripe_count.resolve(backends as u32) as u64;
                let end = (component.start + (unit + 1) * component.stripe_size).min(component.end.unwrap_or(u64::MAX));
                (index, unit, BackendId((index + (unit % count) as usize) % backends), end)
            };
            for offset in offsets {
                let (backend, unit_end) = striping.locate(plfs.state(), || StorePath::parse("x").unwrap(), offset).unwrap();
                let (index, unit, expected, end) = unit_of(offset);
                prop_assert_eq!((backend, unit_end), (expected, end), "offset {}", offset);
                let (last, _) = striping.locate(plfs.state(), || StorePath::parse("x").unwrap(), unit_end - 1).unwrap();
                prop_assert_eq!(last, backend);
                let (next_index, next_unit, _, _) = unit_of(unit_end);
                prop_assert_ne!((next_index, next_unit), (index, unit));
            }
        }
    }
}
