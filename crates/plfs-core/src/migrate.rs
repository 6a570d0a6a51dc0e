//! `plfs migrate`: a PLFS 2.5 file becomes a plfs file, in place or at
//! another path, with no moment where its name reads neither.
//!
//! In place, for the 2.5 file `<dir>/<name>` whose plfs canonical backend
//! is B (2.5 may have put its container on B or on another backend H):
//!
//! 1. build: a plfs container `.plfs-migrate.<owner>.<name>` in `<dir>`,
//!    canonical on B and with its one writer's logs on B too (the owner
//!    stamp is drawn until both land there), gets every extent the 2.5
//!    index shows, then the file's mode, owner and times;
//! 2. verify: size, mode, owner, times and every byte are read back through
//!    plfs and compared with the 2.5 read; then one rename on B gives it
//!    the name `.plfs-migrated.<owner>.<name>`, which says "verified";
//! 3. switch: on B the verified container and whatever 2.5 left at
//!    `<dir>/<name>` (its container, or a shadow holding metalinked
//!    hostdirs) exchange in one step; when B holds nothing there, one
//!    rename moves the container in. A lookup takes a plfs container on B
//!    before any 2.5 container, so before this step the name reads the 2.5
//!    file and from it on the plfs file;
//! 4. clean up: the 2.5 droppings go: hostdirs its metalinks point at, then
//!    the part the switch displaced (now under the verified name), then its
//!    pieces left at `<dir>/<name>` on the other backends, its access file
//!    last, so whatever is left still names the rest.
//!
//! A crash anywhere leaves a state a rerun, or `plfs recover` of the file,
//! tells from names alone ([`finish_pending`]): a `.plfs-migrate.` container
//! is half built (removed: the 2.5 file was never touched); a
//! `.plfs-migrated.` plfs container (it has `access`) is verified but not
//! switched (switched, then cleaned up); a `.plfs-migrated.` directory
//! without `access` is a displaced 2.5 part, and a 2.5 access file at
//! `<dir>/<name>` on a backend other than B while B holds a plfs file is a
//! clean-up cut short (both finished). Nothing 2.5 wrote is removed
//! before step 3, and step 3 is one rename on one backend.
//!
//! With `--to`, the copy is built and verified beside the destination the
//! same way, then renamed to it (an ordinary plfs rename, see `rename.rs`),
//! and only then is the 2.5 file unlinked; a rerun that finds the
//! destination already there compares it with the 2.5 file before
//! unlinking that.

use std::time::SystemTime;

use serde::Serialize;

use crate::attr::FileAttr;
use crate::clock::system_time_to_ns;
use crate::container::{self, ignore_missing, remove_tree};
use crate::error::{Error, ErrorKind, Result, ResultExt};
use crate::format::access::AccessRecord;
use crate::format::plfs25::{self as format25, DroppingName};
use crate::format::switch::SwitchIntent;
use crate::fs::{Plfs, parse_file_path};
use crate::layout::{self, ContainerPaths, LogId};
use crate::mount_state::MountState;
use crate::open::{OpenFlags, WriterId};
use crate::placement::{HostdirId, name_hash, placement_name};
use crate::plfs25::{self, Found25, Index25};
use crate::store::{EntryKind, Store, StoreExt, StorePath};
use crate::workload::Found;

/// Owner stamps tried until the copy's container and its logs land on the
/// file's canonical backend.
const NAME_ATTEMPTS_MAX: usize = 1 << 16;

/// Bytes copied and compared at a time.
const CHUNK_BYTES: u64 = 8 << 20;

/// The copy's one writer.
const MIGRATE_WRITER: WriterId = 0;

/// What `migrate` did with one file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MigrateOutcome {
    /// A 2.5 file, now a verified plfs file.
    #[default]
    Migrated,
    /// Already a plfs file (an earlier run's leftovers, if any, finished).
    NotPlfs25,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MigrateReport {
    pub path: String,
    /// Where the plfs file is: `path` itself when migrated in place.
    pub to: String,
    pub outcome: MigrateOutcome,
    /// Logical size.
    pub size: u64,
    /// Bytes the 2.5 index points at (holes excluded).
    pub data_bytes: u64,
    /// 2.5 index entries read, and the bytes of index they took.
    pub index_entries_before: u64,
    pub index_bytes_before: u64,
    /// Bytes of the plfs file's index logs.
    pub index_bytes_after: u64,
    /// What an earlier, interrupted run left, and what became of it.
    pub recovered: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct MigrateOptions {
    /// Migrate a 2.5 file whose `meta/` says a host still has it open (its
    /// writer is known to be dead): the copy holds what readers see now.
    pub force_open: bool,
}

/// The 2.5 file being migrated: its merged index and attributes.
struct Source {
    index: Index25,
    attr: FileAttr,
}

impl Plfs {
    /// Turns the PLFS 2.5 file at `path` into a plfs file of the same name
    /// (see the module comment); `progress` is told of bytes copied and of
    /// bytes verified. A plfs file is left as it is (after finishing what
    /// an interrupted migration of it left).
    pub fn migrate(
        &self,
        path: &str,
        options: &MigrateOptions,
        progress: &dyn Fn(u64),
    ) -> Result<MigrateReport> {
        let logical = parse_file_path(path)?;
        let state = self.state();
        let mut report =
            MigrateReport { path: path.to_owned(), to: path.to_owned(), ..MigrateReport::default() };
        report.recovered = finish_pending(self, &logical, true).context(path.to_owned())?;
        let Some(found) = plfs25_at(self, &logical, path)? else {
            report.outcome = MigrateOutcome::NotPlfs25;
            report.index_bytes_after = self.index_bytes(path)?;
            return Ok(report);
        };
        let source = Source::open(state, &logical, &found, path, options)?;
        let building = self.building_name(&logical, true)?;
        let shown = format!("/{building}");
        let result =
            build(self, &building, &source, progress).and_then(|()| verify(self, &shown, &source, progress));
        if let Err(error) = result {
            rename_remove_quietly(state, &building);
            return Err(error.context(path.to_owned()));
        }
        let (b, _) = container::canonical(state, &logical);
        let store = state.store(b);
        let verified = verified_name(&building)?;
        store.rename(&building, &verified).with_context(|| format!("{}: {building}", store.url()))?;
        switch(state, &logical, &verified).context(path.to_owned())?;
        clean_up(state, &logical).context(path.to_owned())?;
        report.fill(&source);
        report.index_bytes_after = self.index_bytes(path)?;
        Ok(report)
    }

    /// Like [`migrate`](Self::migrate), but the plfs file is made at `to`
    /// on `target` (this mount or another), which must not exist; the 2.5
    /// file is unlinked once the copy there is verified.
    pub fn migrate_to(
        &self,
        path: &str,
        target: &Plfs,
        to: &str,
        options: &MigrateOptions,
        progress: &dyn Fn(u64),
    ) -> Result<MigrateReport> {
        let logical = parse_file_path(path)?;
        let destination = parse_file_path(to)?;
        layout::check_user_path(&destination)?;
        let state = self.state();
        let mut report =
            MigrateReport { path: path.to_owned(), to: to.to_owned(), ..MigrateReport::default() };
        report.recovered = finish_pending(target, &destination, true).context(to.to_owned())?;
        let Some(found) = plfs25_at(self, &logical, path)? else {
            report.outcome = MigrateOutcome::NotPlfs25;
            return Ok(report);
        };
        let source = Source::open(state, &logical, &found, path, options)?;
        match target.stat(to) {
            // An earlier run got as far as the rename: the 2.5 file goes
            // only if the destination holds exactly its bytes.
            Ok(_) => {
                verify(target, to, &source, progress).map_err(|error| {
                    Error::new(
                        ErrorKind::AlreadyExists,
                        format!("{to}: exists and is not a copy of {path} ({error})"),
                    )
                })?;
                report.recovered.push(format!("{to}: a verified copy of {path} from an earlier run"));
            }
            Err(error) if error.kind() == ErrorKind::NotFound => {
                let building = target.building_name(&destination, false)?;
                let shown = format!("/{building}");
                let result = build(target, &building, &source, progress)
                    .and_then(|()| verify(target, &shown, &source, progress))
                    .and_then(|()| target.rename_noreplace(&shown, to));
                if let Err(error) = result {
                    rename_remove_quietly(target.state(), &building);
                    return Err(error.context(path.to_owned()));
                }
            }
            Err(error) => return Err(error.context(to.to_owned())),
        }
        report.fill(&source);
        drop(source);
        self.unlink(path)?;
        report.index_bytes_after = target.index_bytes(to)?;
        Ok(report)
    }

    /// A fresh `.plfs-migrate.` name beside `logical`, canonical on the
    /// same backend (and, `logs_there`, with this process's logs there too).
    fn building_name(&self, logical: &StorePath, logs_there: bool) -> Result<StorePath> {
        let state = self.state();
        let name = logical.file_name().ok_or_else(|| Error::new(ErrorKind::IsADirectory, "/"))?;
        let parent = logical.parent().unwrap_or_default();
        let (b, _) = container::canonical(state, logical);
        let hostdir: HostdirId = state.placement.hostdir(&state.hostname);
        for _ in 0..NAME_ATTEMPTS_MAX {
            let owner = LogId::new(state.stamper.next(), 0, state.pid, &state.hostname);
            let candidate = parent.join(&layout::migration_name(false, name, &owner))?;
            let file = placement_name(&candidate);
            if state.placement.canonical_backend(file) == b
                && (!logs_there || state.placement.hostdir_backend(file, hostdir) == b)
            {
                return Ok(candidate);
            }
        }
        Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "/{logical}: no name beside it keeps a copy's container and logs on its canonical backend \
                 {} (is that backend excluded from holding logs?); `plfs migrate --to` copies elsewhere",
                state.store(b).url()
            ),
        ))
    }
}

impl MigrateReport {
    fn fill(&mut self, source: &Source) {
        self.size = source.index.eof;
        self.data_bytes = source.index.data_bytes();
        self.index_entries_before = source.index.entries;
        self.index_bytes_before = source.index.index_bytes;
    }
}

impl Source {
    fn open(
        state: &MountState,
        logical: &StorePath,
        found: &Found25,
        path: &str,
        options: &MigrateOptions,
    ) -> Result<Source> {
        let open = plfs25::open_hosts(state, found).context(path.to_owned())?;
        if !open.is_empty() && !options.force_open {
            let hosts: Vec<_> = open.into_iter().collect();
            return Err(Error::new(
                ErrorKind::PermissionDenied,
                format!(
                    "{path}: a PLFS 2.5 file still open on {} (an open record in its meta/): \
                     not migrated; once those writers are gone, `plfs migrate --force-open` \
                     migrates what readers see",
                    hosts.join(", ")
                ),
            ));
        }
        let index = plfs25::load(state, logical, found).context(path.to_owned())?;
        let attr = plfs25::attr(state, logical, found).context(path.to_owned())?;
        Ok(Source { index, attr })
    }

    /// The written ranges of the file, adjacent extents joined: what the
    /// copy writes (holes stay holes).
    fn runs(&self) -> Vec<(u64, u64)> {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for (&start, extent) in &self.index.extents {
            let end = start + extent.length;
            match runs.last_mut() {
                Some(last) if last.1 == start => last.1 = end,
                _ => runs.push((start, end)),
            }
        }
        runs
    }
}

/// The 2.5 container at `logical`, if that is what the name is.
fn plfs25_at(plfs: &Plfs, logical: &StorePath, path: &str) -> Result<Option<Found25>> {
    match plfs.found(logical).context(path.to_owned())? {
        Found::File(file) => Ok(file.plfs25().cloned()),
        Found::Directory(_) => Err(Error::new(ErrorKind::IsADirectory, path.to_owned())),
        Found::Symlink(_) => Err(Error::invalid(format!("{path}: is a symbolic link"))),
    }
}

fn verified_name(building: &StorePath) -> Result<StorePath> {
    let name = building.file_name().unwrap_or_default();
    let (_, owner, file) = layout::parse_migration_name(name)
        .ok_or_else(|| Error::new(ErrorKind::Internal, format!("{building}: not a migration name")))?;
    building.parent().unwrap_or_default().join(&layout::migration_name(true, file, &owner))
}

/// Step 1: the copy, as a plfs file at `building` on `plfs`.
fn build(plfs: &Plfs, building: &StorePath, source: &Source, progress: &dyn Fn(u64)) -> Result<()> {
    let state = plfs.state();
    let attr = &source.attr;
    let now = state.stamper.now_ns();
    let access = AccessRecord {
        // Writable by its owner while the copy is written; the file's own
        // mode follows.
        mode: (attr.mode | 0o600) & 0o7777,
        uid: attr.uid,
        gid: attr.gid,
        atime_ns: now,
        mtime_ns: now,
        ctime_ns: now,
        times_stamp: state.stamper.next(),
    };
    container::create(state, building, &access, true, None)?;
    let shown = format!("/{building}");
    let handle = plfs.open(&shown, OpenFlags::WRONLY, 0, MIGRATE_WRITER)?;
    let mut buffer = Vec::new();
    let mut written_end = 0;
    for (start, end) in source.runs() {
        let mut offset = start;
        while offset < end {
            let length = (end - offset).min(CHUNK_BYTES) as usize;
            buffer.resize(length, 0);
            read_full(&mut buffer, offset, |buf, at| source.index.read(buf, at))?;
            let mut done = 0;
            while done < length {
                done += handle.write(&buffer[done..], offset + done as u64)?;
            }
            offset += length as u64;
            progress(length as u64);
        }
        written_end = end;
    }
    if source.index.eof > written_end {
        handle.truncate(source.index.eof)?;
    }
    handle.close()?;
    if attr.mode & 0o7777 != access.mode {
        plfs.chmod(&shown, attr.mode & 0o7777)?;
    }
    plfs.utime(&shown, Some(attr.atime), Some(attr.mtime))
}

/// Step 2: the plfs file at `shown` must be the 2.5 file, byte for byte,
/// with its size, mode, owner and modification time.
fn verify(plfs: &Plfs, shown: &str, source: &Source, progress: &dyn Fn(u64)) -> Result<()> {
    let attr = plfs.stat(shown)?;
    let want = &source.attr;
    let eof = source.index.eof;
    let differs = |what: &str, got: String, expected: String| {
        Err(Error::corrupt(format!("{shown}: the copy's {what} is {got}, the PLFS 2.5 file's {expected}")))
    };
    if attr.size != eof {
        return differs("size", attr.size.to_string(), eof.to_string());
    }
    if (attr.mode, attr.uid, attr.gid) != (want.mode & 0o7777, want.uid, want.gid) {
        return differs(
            "mode and owner",
            format!("{:04o} {}:{}", attr.mode, attr.uid, attr.gid),
            format!("{:04o} {}:{}", want.mode & 0o7777, want.uid, want.gid),
        );
    }
    if ns(attr.mtime) != ns(want.mtime) {
        return differs("mtime", ns(attr.mtime).to_string(), ns(want.mtime).to_string());
    }
    let handle = plfs.open(shown, OpenFlags::RDONLY, 0, MIGRATE_WRITER)?;
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    let mut offset = 0;
    while offset < eof {
        let length = (eof - offset).min(CHUNK_BYTES) as usize;
        ours.resize(length, 0);
        theirs.resize(length, 0);
        read_full(&mut ours, offset, |buf, at| handle.read(buf, at))?;
        read_full(&mut theirs, offset, |buf, at| source.index.read(buf, at))?;
        if let Some(at) = ours.iter().zip(&theirs).position(|(a, b)| a != b) {
            return Err(Error::corrupt(format!(
                "{shown}: byte {} of the copy differs from the PLFS 2.5 file",
                offset + at as u64
            )));
        }
        offset += length as u64;
        progress(length as u64);
    }
    handle.close()
}

fn ns(time: SystemTime) -> u64 {
    system_time_to_ns(time)
}

fn read_full(
    buf: &mut [u8],
    offset: u64,
    mut read: impl FnMut(&mut [u8], u64) -> Result<usize>,
) -> Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let count = read(&mut buf[done..], offset + done as u64)?;
        if count == 0 {
            return Err(Error::corrupt(format!(
                "ends at {} where {} bytes were expected",
                offset + done as u64,
                offset + buf.len() as u64
            )));
        }
        done += count;
    }
    Ok(())
}

/// Step 3: the verified copy takes the name on its canonical backend B.
fn switch(state: &MountState, logical: &StorePath, verified: &StorePath) -> Result<()> {
    let (b, _) = container::canonical(state, logical);
    let store = state.store(b);
    let context = || format!("{}: {verified} -> {logical}", store.url());
    if !store.exists(logical).with_context(context)? {
        store.rename(verified, logical).with_context(context)?;
    } else if store.capabilities().exchange {
        // 2.5 has a container or a shadow here: one exchange keeps the
        // name readable throughout.
        store.exchange(verified, logical).with_context(context)?;
    } else {
        // S3 and HDFS cannot exchange: the 2.5 part moves aside, then the
        // copy moves in, with an intent first that says where the 2.5
        // file is meanwhile (see `finish_switch`).
        let (_, owner, file) = layout::parse_migration_name(verified.file_name().unwrap_or_default())
            .ok_or_else(|| Error::new(ErrorKind::Internal, format!("{verified}: not a migration name")))?;
        // A fresh name: never the copy's own (a rerun's stamps can repeat
        // an earlier run's only under a test's manual clock, but a rename
        // onto a name taken would fail the switch every time).
        let parent = logical.parent().unwrap_or_default();
        let aside = loop {
            let name = layout::migration_name(true, file, &LogId { stamp: state.stamper.next(), ..owner });
            if Some(name.as_str()) != verified.file_name() && !store.exists(&parent.join(&name)?)? {
                break name;
            }
        };
        let intent = SwitchIntent { verified: verified.file_name().unwrap_or_default().to_owned(), aside };
        let intent_path = plfs25::switch_intent_path(logical)?;
        store
            .create_new(&intent_path, &intent.encode())
            .with_context(|| format!("{}: {intent_path}", store.url()))?;
        finish_switch(state, logical, &intent)?;
    }
    state.log_cache.forget_under(logical);
    Ok(())
}

/// The switch on a backend B that cannot exchange, from wherever a crash
/// left it; every step can be redone. The intent beside the name names the
/// verified copy V and the aside name A (both `.plfs-migrated.` names):
///
/// 1. the 2.5 part at the name on B is renamed to A. From here until 2,
///    B has nothing at the name, and a lookup that finds nothing there
///    reads the intent and the 2.5 file at A (`plfs25::find_switching`);
/// 2. V is renamed to the name: the plfs file, whole;
/// 3. the intent goes. A, a `.plfs-migrated.` directory without `access`,
///    is then removed by [`clean_up`] like the part an exchange displaces.
///
/// A name already holding a plfs file means 2 was done. A name with
/// nothing and no 2.5 file at A (nor, where A is a shadow, on another
/// backend) means the 2.5 file was unlinked while the switch was cut
/// short: the copy goes too. Returns what it did.
fn finish_switch(state: &MountState, logical: &StorePath, intent: &SwitchIntent) -> Result<String> {
    let (b, paths) = container::canonical(state, logical);
    let store = state.store(b);
    let parent = logical.parent().unwrap_or_default();
    let verified = parent.join(&intent.verified)?;
    let aside = parent.join(&intent.aside)?;
    let context = || format!("{}: switching {verified} -> {logical}", store.url());
    let done = if store.exists(&paths.access()).with_context(context)? {
        "switched in"
    } else if store.exists(logical).with_context(context)? {
        store.rename(logical, &aside).with_context(context)?;
        store.rename(&verified, logical).with_context(context)?;
        "2.5 file put aside, copy switched in"
    } else if store.exists(&aside.join(format25::ACCESS_FILE)?).with_context(context)?
        // What was put aside may be a shadow of a 2.5 container on another
        // backend, which still holds the file.
        || plfs25::find_elsewhere(state, logical).with_context(context)?.is_some()
    {
        store.rename(&verified, logical).with_context(context)?;
        "copy switched in"
    } else {
        ignore_missing(remove_tree(store, &aside)).with_context(context)?;
        crate::rename::remove_everywhere(state, &verified).with_context(context)?;
        "the PLFS 2.5 file was unlinked meanwhile; its copy removed"
    };
    state.log_cache.forget_under(logical);
    plfs25::forget_switch(state, logical).with_context(context)?;
    Ok(done.to_owned())
}

/// Step 4: every 2.5 piece left once `logical` is a plfs file on B.
/// Returns what it removed. Every step can be redone.
fn clean_up(state: &MountState, logical: &StorePath) -> Result<Vec<String>> {
    let (b, paths) = container::canonical(state, logical);
    let store_b = state.store(b);
    let mut removed = Vec::new();
    if !store_b.exists(&paths.access())? {
        return Ok(removed);
    }
    let name = logical.file_name().unwrap_or_default();
    let parent = logical.parent().unwrap_or_default();
    for (hidden, verified, _) in migration_entries(store_b, &parent, name)? {
        if verified && !store_b.exists(&ContainerPaths::new(hidden.clone()).access())? {
            remove_25(state, store_b, &hidden, logical, true)?;
            removed.push(format!("{}/{hidden}: the PLFS 2.5 part the switch displaced", store_b.url()));
        }
    }
    for backend in state.placement.all_backends().filter(|backend| *backend != b) {
        let store = state.store(backend);
        if store.exists(&logical.join(format25::ACCESS_FILE)?)? {
            remove_25(state, store, logical, logical, false)?;
            removed.push(format!("{}/{logical}: the PLFS 2.5 container", store.url()));
        }
    }
    Ok(removed)
}

/// Removes the 2.5 pieces of the container listed at `listed` on `store`
/// (metalinks resolved as for `logical`): metalinked hostdirs first, the
/// access file last. A `hidden` directory is plfs's own and goes whole; at
/// `logical` on another backend, plfs pieces (a shadow container's
/// hostdirs) stay.
fn remove_25(
    state: &MountState,
    store: &dyn Store,
    listed: &StorePath,
    logical: &StorePath,
    hidden: bool,
) -> Result<()> {
    let context = || format!("{}: {listed}", store.url());
    // A dangling metalink would fail plfs's listing of the file's shadow
    // containers: the link goes after its hostdir's droppings and before
    // the emptied hostdir (a crash in between leaves an empty directory).
    for (link, location) in plfs25::metalinked_hostdirs(state, store, listed, logical)? {
        let shown = || location.shown();
        remove_droppings(location.store.as_ref(), &location.path, false).with_context(shown)?;
        ignore_missing(store.remove_file(&listed.join(&link)?)).with_context(context)?;
        remove_if_empty(location.store.as_ref(), &location.path).with_context(shown)?;
    }
    let entries = match store.list(listed) {
        Ok(entries) => entries,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error.context(context())),
    };
    for entry in &entries {
        let child = listed.join(&entry.name)?;
        let name = entry.name.as_str();
        match entry.kind {
            EntryKind::Symlink if name.starts_with(format25::HOSTDIR_PREFIX) => {
                ignore_missing(store.remove_file(&child)).with_context(context)?
            }
            EntryKind::Directory if name.starts_with(format25::HOSTDIR_PREFIX) => {
                remove_droppings(store, &child, true).with_context(context)?
            }
            EntryKind::Directory if name == format25::META_DIR => {
                remove_tree(store, &child).with_context(context)?
            }
            EntryKind::File
                if name == format25::GLOBAL_INDEX || name.starts_with(format25::VERSION_PREFIX) =>
            {
                ignore_missing(store.remove_file(&child)).with_context(context)?
            }
            _ => {}
        }
    }
    ignore_missing(store.remove_file(&listed.join(format25::ACCESS_FILE)?)).with_context(context)?;
    if hidden {
        remove_tree(store, listed).with_context(context)
    } else {
        remove_if_empty(store, listed).with_context(context)
    }
}

/// Removes the 2.5 droppings of a hostdir, and (`and_dir`) the hostdir
/// once empty.
fn remove_droppings(store: &dyn Store, dir: &StorePath, and_dir: bool) -> Result<()> {
    let entries = match store.list(dir) {
        Ok(entries) => entries,
        Err(error) if matches!(error.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => return Ok(()),
        Err(error) => return Err(error),
    };
    for entry in entries.iter().filter(|entry| DroppingName::parse(&entry.name).is_some()) {
        ignore_missing(store.remove_file(&dir.join(&entry.name)?))?;
    }
    if and_dir { remove_if_empty(store, dir) } else { Ok(()) }
}

fn remove_if_empty(store: &dyn Store, dir: &StorePath) -> Result<()> {
    match store.remove_dir(dir) {
        Err(error) if matches!(error.kind(), ErrorKind::NotFound | ErrorKind::DirectoryNotEmpty) => Ok(()),
        other => other,
    }
}

/// The migration names beside `name` in `parent` on `store`: path,
/// whether verified, and the migrating process.
fn migration_entries(
    store: &dyn Store,
    parent: &StorePath,
    name: &str,
) -> Result<Vec<(StorePath, bool, LogId)>> {
    let entries = match store.list(parent) {
        Ok(entries) => entries,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error.context(format!("{}: {parent}", store.url()))),
    };
    let mut found = Vec::new();
    for entry in entries {
        if let Some((verified, owner, file)) = layout::parse_migration_name(&entry.name)
            && file == name
        {
            found.push((parent.join(&entry.name)?, verified, owner));
        }
    }
    Ok(found)
}

/// Removes a half-built copy after a failure, saying (not failing) if even
/// that fails: a rerun or `plfs recover` removes it.
fn rename_remove_quietly(state: &MountState, building: &StorePath) {
    if let Err(error) = crate::rename::remove_everywhere(state, building) {
        tracing::warn!("{building}: removing a half-built copy failed ({error}); `plfs recover` removes it");
    }
}

/// Finishes (with `fix`) what an interrupted migration of `logical` left,
/// and says what that was: a half-built copy is removed, a verified one
/// switched in, and the 2.5 pieces of a switched file removed. A migration
/// still running in another process is left alone, and fails this call.
pub(crate) fn finish_pending(plfs: &Plfs, logical: &StorePath, fix: bool) -> Result<Vec<String>> {
    let state = plfs.state();
    let Some(name) = logical.file_name() else { return Ok(Vec::new()) };
    let parent = logical.parent().unwrap_or_default();
    let (b, _) = container::canonical(state, logical);
    let store_b = state.store(b);
    let mut notes = Vec::new();
    // A switch cut short first: until it is finished, the names below
    // are not what they seem (the copy is not yet in, the 2.5 file aside).
    if let Some(intent) = switch_intent(state, logical)? {
        let location = format!("{}/{}", store_b.url(), plfs25::switch_intent_path(logical)?);
        let owner = layout::parse_migration_name(&intent.verified).map(|(_, owner, _)| owner);
        if let Some(owner) = owner
            && !(owner.pid == state.pid && owner.host == name_hash(&state.hostname))
            && owner.writer_may_be_alive(&state.hostname)
        {
            return Err(Error::new(
                ErrorKind::PermissionDenied,
                format!("{location}: process {} is migrating /{logical}", owner.pid),
            ));
        }
        if fix {
            let done = finish_switch(state, logical, &intent)?;
            notes.push(format!("{location}: a switch cut short, finished ({done})"));
        } else {
            notes.push(format!("{location}: a switch cut short"));
        }
    }
    for (hidden, verified, owner) in migration_entries(store_b, &parent, name)? {
        let location = format!("{}/{hidden}", store_b.url());
        let own = owner.pid == state.pid && owner.host == name_hash(&state.hostname);
        if !own && owner.writer_may_be_alive(&state.hostname) {
            return Err(Error::new(
                ErrorKind::PermissionDenied,
                format!("{location}: process {} is migrating /{logical}", owner.pid),
            ));
        }
        let is_copy = store_b.exists(&ContainerPaths::new(hidden.clone()).access())?;
        if !verified {
            if fix {
                crate::rename::remove_everywhere(state, &hidden)?;
            }
            notes.push(format!("{location}: a half-built copy{}", if fix { ", removed" } else { "" }));
        } else if is_copy {
            // Nothing at the name: the 2.5 file was unlinked since.
            let pending = match plfs25_at(plfs, logical, &format!("/{logical}")) {
                Ok(found) => found.is_some(),
                Err(error) if error.kind() == ErrorKind::NotFound => false,
                Err(error) => return Err(error),
            };
            if pending {
                if fix {
                    switch(state, logical, &hidden)?;
                }
                notes.push(format!("{location}: a verified copy{}", if fix { ", switched in" } else { "" }));
            } else {
                if fix {
                    crate::rename::remove_everywhere(state, &hidden)?;
                }
                notes.push(format!(
                    "{location}: a copy of a file migrated since{}",
                    if fix { ", removed" } else { "" }
                ));
            }
        }
    }
    let leftovers = if fix { clean_up(state, logical)? } else { pending_25_pieces(state, logical)? };
    notes.extend(leftovers.into_iter().map(|piece| format!("{piece}{}", if fix { ", removed" } else { "" })));
    Ok(notes)
}

/// The switch intent beside `logical` on its canonical backend, if any.
fn switch_intent(state: &MountState, logical: &StorePath) -> Result<Option<SwitchIntent>> {
    let (b, _) = container::canonical(state, logical);
    let store = state.store(b);
    let path = plfs25::switch_intent_path(logical)?;
    match store.read_all(&path) {
        Ok(bytes) => SwitchIntent::decode(&bytes).map(Some).context(format!("{}: {path}", store.url())),
        Err(error) if matches!(error.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => Ok(None),
        Err(error) => Err(error),
    }
}

/// What [`clean_up`] would remove, without removing it.
fn pending_25_pieces(state: &MountState, logical: &StorePath) -> Result<Vec<String>> {
    let (b, paths) = container::canonical(state, logical);
    let store_b = state.store(b);
    let mut found = Vec::new();
    if !store_b.exists(&paths.access())? {
        return Ok(found);
    }
    let name = logical.file_name().unwrap_or_default();
    for (hidden, verified, _) in migration_entries(store_b, &logical.parent().unwrap_or_default(), name)? {
        if verified && !store_b.exists(&ContainerPaths::new(hidden.clone()).access())? {
            found.push(format!("{}/{hidden}: the PLFS 2.5 part the switch displaced", store_b.url()));
        }
    }
    for backend in state.placement.all_backends().filter(|backend| *backend != b) {
        let store = state.store(backend);
        if store.exists(&logical.join(format25::ACCESS_FILE)?)? {
            found.push(format!("{}/{logical}: the PLFS 2.5 container", store.url()));
        }
    }
    Ok(found)
}

#[cfg(test)]
mod remote_tests;
#[cfg(test)]
mod tests;
