//! The file-system API of one mount: what the CLI, FUSE, the C library and
//! the preload call. Paths are relative to the mount point ("/dir/file").

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLockReadGuard};
use std::time::SystemTime;

use crate::attr::{Credentials, DirEntryInfo, FileAttr, FileKind, Owner, R_OK, W_OK, X_OK};
use crate::clock::Stamper;
use crate::config::{BackendLocation, BackendRole, MountConfig, Tuning, Workload};
use crate::container;
use crate::error::{Error, ErrorKind, Result, ResultExt};
use crate::layout;
use crate::load::LoadedIndex;
use crate::mount_state::{MountState, placement_rotor_start};
use crate::open::{OpenFlags, WriterId};
use crate::placement::{BackendId, Placement};
use crate::reader::{LogCache, ReadPool};
use crate::store::{EntryKind, SharedStore, SpaceInfo, StorePath, posix::PosixStore};
use crate::striping::StripingConfig;
use crate::workload::{
    self, AttributeChange, ContainerOps, Found, OpenRequest, Opened, WorkloadFile, no_index,
};

mod layouts;
mod open_files;
pub use layouts::{BackendData, BackendUsage};
use open_files::{OpenEntry, OpenFiles, Release, hold_gates};

/// Removals of a file other processes keep making at a rename's target
/// (n-n, small_file) before the rename gives up with EEXIST.
const RENAME_REPLACE_ATTEMPTS_MAX: usize = 64;

/// Who this process is, as recorded in logs and access files.
#[derive(Debug, Clone)]
pub struct Options {
    pub hostname: String,
    pub pid: u32,
    /// Owner recorded for files this mount creates.
    pub uid: u32,
    pub gid: u32,
    pub stamper: Stamper,
    pub tuning: Tuning,
}

impl Options {
    /// The real host, process and clock.
    pub fn from_environment(tuning: Tuning) -> Options {
        Options {
            hostname: crate::host::hostname(),
            pid: std::process::id(),
            // SAFETY: geteuid and getegid cannot fail and touch no memory.
            uid: unsafe { libc::geteuid() },
            // SAFETY: as geteuid.
            gid: unsafe { libc::getegid() },
            stamper: Stamper::process_wide(),
            tuning,
        }
    }
}

/// One mount as the façade holds it: the state its workloads share, and
/// beside it the workload that keeps its files, chosen once when the mount
/// is built, and the files open in this process. It derefs to the shared
/// state, so façade code reads either part the same way
/// (`self.state.placement`, `self.state.files`).
#[derive(Debug)]
struct Mount {
    shared: Arc<MountState>,
    files: Box<dyn workload::Workload>,
    open_files: OpenFiles,
}

impl std::ops::Deref for Mount {
    type Target = MountState;

    fn deref(&self) -> &MountState {
        &self.shared
    }
}

/// What [`Plfs::entry`] reports.
#[derive(Debug, Clone, Copy)]
struct Entry {
    kind: FileKind,
    mode: u32,
    uid: u32,
    gid: u32,
}

/// A rename a workload did in one switch ([`Plfs::replace_file`]).
struct Replaced {
    /// Where the replaced file, open here, lives on until its last close.
    kept: Option<String>,
}

/// One mounted plfs namespace over its backends.
#[derive(Debug, Clone)]
pub struct Plfs {
    state: Arc<Mount>,
}

impl Plfs {
    /// A mount over already-opened stores, in configured order.
    pub fn new(backends: Vec<(SharedStore, BackendRole)>, options: Options) -> Result<Plfs> {
        Plfs::with_workload(backends, options, Workload::SharedFile)
    }

    /// A mount laid out for `workload`: containers for shared_file (n-1),
    /// one plain file per logical file for file_per_proc (n-n, whose
    /// backends must all write in place), and one small-file store over
    /// all backends for small_file (1-N; see `smallfile::mount`).
    pub fn with_workload(
        backends: Vec<(SharedStore, BackendRole)>,
        options: Options,
        workload: Workload,
    ) -> Result<Plfs> {
        Plfs::build(
            backends,
            options,
            workload,
            crate::smallfile::DEFAULT_MAX_CONTAINERS,
            StripingConfig::default(),
        )
    }

    /// A shared_file mount whose new files are striped as `striping` says
    /// (what a plfsrc's striping keys give [`Plfs::from_config`]).
    pub fn with_striping(
        backends: Vec<(SharedStore, BackendRole)>,
        options: Options,
        striping: StripingConfig,
    ) -> Result<Plfs> {
        Plfs::build(
            backends,
            options,
            Workload::SharedFile,
            crate::smallfile::DEFAULT_MAX_CONTAINERS,
            striping,
        )
    }

    /// The layout this mount was built for (plfsrc `workload:`).
    pub fn workload(&self) -> Workload {
        self.state.workload
    }

    fn build(
        backends: Vec<(SharedStore, BackendRole)>,
        options: Options,
        workload: Workload,
        max_smallfile_containers: usize,
        striping: StripingConfig,
    ) -> Result<Plfs> {
        let roles: Vec<BackendRole> = backends.iter().map(|(_, role)| *role).collect();
        let placement = Placement::new(&roles, options.tuning.num_hostdirs)?;
        let tuning = options.tuning.clone();
        let placement_rotor = AtomicU64::new(
            striping.rotor_start.unwrap_or_else(|| placement_rotor_start(&options.hostname, options.pid)),
        );
        let state = MountState {
            stores: backends.into_iter().map(|(store, _)| store).collect(),
            workload,
            placement,
            log_cache: LogCache::new(tuning.read_handles_max, tuning.readahead_bytes),
            read_pool: ReadPool::new(tuning.threadpool_size, crate::host::cores_per_local_rank())?,
            tuning,
            hostname: options.hostname,
            pid: options.pid,
            uid: options.uid,
            gid: options.gid,
            stamper: options.stamper,
            retained: Default::default(),
            striping,
            placement_rotor,
            reclaimer: crate::reclaim::Reclaimer::new(options.tuning.background_reclaim),
        };
        let files = workload::for_mount(workload, &state, max_smallfile_containers)?;
        Ok(Plfs {
            state: Arc::new(Mount { shared: Arc::new(state), files, open_files: OpenFiles::default() }),
        })
    }

    /// A mount from its configuration; opens each backend's store.
    pub fn from_config(mount: &MountConfig, options: Options) -> Result<Plfs> {
        let mut backends = Vec::with_capacity(mount.backends.len());
        for backend in &mount.backends {
            backends.push((open_store(&backend.location)?, backend.role));
        }
        let max_containers = usize::try_from(mount.max_smallfile_containers).unwrap_or(usize::MAX);
        Plfs::build(backends, options, mount.workload, max_containers, mount.striping.clone())
            .with_context(|| mount.mount_point.display().to_string())
    }

    pub(crate) fn state(&self) -> &MountState {
        &self.state
    }

    /// The workload that keeps this mount's files.
    pub(crate) fn files(&self) -> &dyn workload::Workload {
        self.state.files.as_ref()
    }

    pub fn stores(&self) -> &[SharedStore] {
        &self.state.stores
    }

    pub fn placement(&self) -> &Placement {
        &self.state.placement
    }

    /// The backend holding `path`'s canonical entry (a file's container or
    /// plain file, a directory's canonical copy), so an interface never
    /// computes placement names itself.
    pub fn canonical_backend(&self, path: &StorePath) -> BackendId {
        crate::mount_state::canonical(&self.state, path).0
    }

    /// Opens (and with `create`, creates) a logical file for `writer`.
    pub fn open(&self, path: &str, flags: OpenFlags, mode: u32, writer: WriterId) -> Result<FileHandle> {
        self.open_as(path, flags, mode, writer, None)
    }

    /// Like [`open`](Self::open); a file it creates belongs to `owner`
    /// (FUSE passes the calling user) instead of this process's user.
    pub fn open_as(
        &self,
        path: &str,
        flags: OpenFlags,
        mode: u32,
        writer: WriterId,
        owner: Option<Owner>,
    ) -> Result<FileHandle> {
        let logical = parse_file_path(path)?;
        if flags.create {
            layout::check_user_path(&logical)?;
        }
        // An interface acting for another user (FUSE) names the owner and
        // checks that user's permissions itself.
        let acting_for = owner;
        let owner = owner.unwrap_or(Owner { uid: self.state.uid, gid: self.state.gid });
        if !flags.read && !flags.write {
            return Err(Error::invalid(format!("{path}: open needs read or write access")));
        }
        let mask = if flags.read { R_OK } else { 0 } | if flags.write { W_OK } else { 0 };
        let check_access = || self.access(path, mask, &Credentials::of_this_process());
        let request = OpenRequest {
            shown: path,
            flags,
            mode,
            writer,
            owner,
            check_access: if acting_for.is_none() { Some(&check_access) } else { None },
        };
        // The file at the name as of one instant: no rename or unlink of
        // the name runs until this open has registered.
        let _claim = self.state.open_files.claim_open(&logical);
        let opened = self.state.files.open(&self.state.shared, &logical, &request)?;
        // The file open here under this name was replaced by another
        // process (unlinked and made again, or renamed onto): its handles
        // keep it, detached, and this open gets the file at the name now.
        if let Some(entry) = self.state.open_files.get(&logical)
            && entry.shared().is_some_and(|shared| shared.replaced_at_name())
        {
            self.state.open_files.detach(&logical);
        }
        let truncate = matches!(opened, Opened::Shared { truncate: true, .. });
        let handle = self.join(&logical, opened, None, flags, writer);
        if truncate && let Err(error) = handle.truncate(0) {
            // This open fails: it no longer counts as an open of the file.
            if let Err(closing) = handle.close() {
                tracing::warn!("{path}: closing an unclosed handle failed: {closing}");
            }
            return Err(error.context(path.to_owned()));
        }
        if flags.read && !flags.write {
            match handle.file.prepare_reads() {
                Ok(()) => {}
                // Another process removed the file while this open ran: the
                // open comes after the removal, as an open that started a
                // moment later would (its reads could only fail).
                Err(error) if error.kind() == ErrorKind::Stale => {
                    if let Err(closing) = handle.close() {
                        tracing::warn!("{path}: closing an unclosed handle failed: {closing}");
                    }
                    return Err(Error::new(
                        ErrorKind::NotFound,
                        format!("{path}: removed by another process during the open"),
                    ));
                }
                // Best effort: a file that cannot be read (damaged) opens
                // as before, and its reads say why.
                Err(error) => tracing::debug!("{path}: loading what reads need at the open: {error}"),
            }
        }
        Ok(handle)
    }

    /// Counts an open the workload made in the registry of open files and
    /// makes its handle.
    fn join(
        &self,
        logical: &StorePath,
        opened: Opened,
        index: Option<LoadedIndex>,
        flags: OpenFlags,
        writer: WriterId,
    ) -> FileHandle {
        let (entry, file) = self.state.open_files.join(&self.state.shared, logical, opened, index);
        let moves_seen = AtomicU64::new(entry.moves());
        FileHandle {
            mount: self.state.clone(),
            entry,
            file,
            flags,
            writer,
            moves_seen,
            telling: Mutex::new(()),
            closed: false,
        }
    }

    /// What is at `logical`, as the mount's workload sees it.
    pub(crate) fn found(&self, logical: &StorePath) -> Result<Found> {
        self.state.files.lookup(&self.state, logical)
    }

    /// The container capability, when `logical` is a damaged container
    /// (see [`is_damaged_file`](Self::is_damaged_file)).
    pub(crate) fn damaged(&self, logical: &StorePath) -> Result<Option<&dyn ContainerOps>> {
        match self.state.files.containers() {
            Some(containers) if containers.is_damaged(&self.state, logical)? => Ok(Some(containers)),
            _ => Ok(None),
        }
    }

    /// Opens for reading with an index another rank built and checked.
    pub(crate) fn open_prepared(
        &self,
        logical: &StorePath,
        flags: OpenFlags,
        writer: WriterId,
        index: LoadedIndex,
    ) -> Result<FileHandle> {
        let containers = self.state.files.containers().ok_or_else(|| no_index(format_args!("/{logical}")))?;
        let _claim = self.state.open_files.claim_open(logical);
        Ok(self.join(logical, containers.open_prepared(), Some(index), flags, writer))
    }

    /// Fails unless `logical` is a regular file with a container.
    pub(crate) fn check_is_file(&self, logical: &StorePath) -> Result<()> {
        match self.found(logical)? {
            Found::File(_) if self.state.files.containers().is_some() => Ok(()),
            Found::File(_) => Err(no_index(format_args!("/{logical}"))),
            Found::Directory(_) => Err(Error::new(ErrorKind::IsADirectory, format!("/{logical}"))),
            Found::Symlink(_) => Err(Error::invalid(format!("/{logical}: is a symbolic link"))),
        }
    }

    /// Attributes of a file, directory or symlink.
    pub fn stat(&self, path: &str) -> Result<FileAttr> {
        let logical = StorePath::parse(path)?;
        // A file open here answers with what this process knows (below);
        // one that is not may answer from what its last close left.
        let open = self.state.open_files.get(&logical);
        let found = match open {
            Some(_) => self.found(&logical),
            None => self.state.files.lookup_for_stat(&self.state, &logical),
        };
        match found.context(path.to_owned())? {
            Found::File(file) => {
                // Held still against a rename moving it meanwhile.
                let _gate = open.as_ref().map(|entry| entry.gated());
                let shared = open.as_ref().and_then(|entry| entry.shared());
                self.state.files.file_attr(&self.state, &logical, &file, shared).context(path.to_owned())
            }
            Found::Directory(metadata) | Found::Symlink(metadata) => {
                let kind = if metadata.kind == EntryKind::Directory {
                    FileKind::Directory
                } else {
                    FileKind::Symlink
                };
                let epoch = SystemTime::UNIX_EPOCH;
                let (atime, mtime, ctime) = if kind == FileKind::Directory {
                    self.directory_times(&logical, &metadata)?
                } else {
                    (metadata.atime, metadata.mtime, metadata.ctime)
                };
                Ok(FileAttr {
                    kind,
                    size: metadata.size,
                    blocks: metadata.size.div_ceil(512),
                    mode: metadata.mode.unwrap_or(default_mode(kind)),
                    uid: metadata.uid.unwrap_or(self.state.uid),
                    gid: metadata.gid.unwrap_or(self.state.gid),
                    // Counting subdirectories would cost a listing of every
                    // backend per stat; 1 is the convention (btrfs) for "not
                    // counted", which tools like find(1) honour, whereas 2
                    // would claim the directory has no subdirectories.
                    nlink: 1,
                    atime: atime.unwrap_or(epoch),
                    mtime: mtime.unwrap_or(epoch),
                    ctime: ctime.or(mtime).unwrap_or(epoch),
                })
            }
        }
    }

    /// A directory's entries are spread over the backends (each file's
    /// container sits on its own canonical backend), so each backend's copy
    /// of the directory changes on its own: the newest times of all copies
    /// are the directory's.
    fn directory_times(
        &self,
        logical: &StorePath,
        canonical: &crate::store::Metadata,
    ) -> Result<(Option<SystemTime>, Option<SystemTime>, Option<SystemTime>)> {
        let (mut atime, mut mtime, mut ctime) = (canonical.atime, canonical.mtime, canonical.ctime);
        let (canonical_backend, _) = container::canonical(&self.state, logical);
        for backend in self.state.placement.all_backends().filter(|b| *b != canonical_backend) {
            let metadata = match self.state.store(backend).metadata(logical) {
                Ok(metadata) => metadata,
                Err(error) if error.kind() == ErrorKind::NotFound => continue,
                Err(error) => return Err(error),
            };
            atime = atime.max(metadata.atime);
            mtime = mtime.max(metadata.mtime);
            ctime = ctime.max(metadata.ctime);
        }
        Ok((atime, mtime, ctime))
    }

    /// Sets a file's size, as a log record (no log is rewritten).
    pub fn truncate(&self, path: &str, size: u64) -> Result<()> {
        let handle = self.open(path, OpenFlags::WRONLY, 0, u64::from(self.state.pid))?;
        let result = handle.truncate(size);
        let closed = handle.close();
        result.and(closed)
    }

    /// Removes a file or symlink.
    pub fn unlink(&self, path: &str) -> Result<()> {
        self.unlink_keeping(&parse_file_path(path)?, path, false).map(drop)
    }

    /// [`unlink`](Self::unlink); a file open here is hidden instead, and
    /// its hidden path returned. Where it cannot be hidden it is removed,
    /// its handles left detached, unless `keep_open` asks to fail instead
    /// (a rename may fail; an unlink should not).
    fn unlink_keeping(&self, logical: &StorePath, path: &str, keep_open: bool) -> Result<Option<StorePath>> {
        let found = match self.found(logical) {
            Ok(found) => found,
            // Removing a damaged file is how users clean up after damage
            // that `plfs recover` cannot repair or they do not care to.
            Err(error) if error.kind() == ErrorKind::Corrupt => match self.damaged(logical)? {
                Some(containers) => {
                    return containers
                        .remove_damaged(&self.state, logical)
                        .context(path.to_owned())
                        .map(|()| None);
                }
                None => return Err(error.context(path.to_owned())),
            },
            Err(error) => return Err(error.context(path.to_owned())),
        };
        match found {
            Found::Directory(_) => Err(Error::new(ErrorKind::IsADirectory, path.to_owned())),
            Found::Symlink(_) => {
                let (backend, _) = container::canonical(&self.state, logical);
                self.state.store(backend).remove_file(logical).context(path.to_owned()).map(|()| None)
            }
            Found::File(file) => {
                let (_claim, open) = self.state.open_files.claim_move(&[logical]);
                let _gates = hold_gates(&open);
                if !open.is_empty() {
                    // POSIX: the handles open here keep the file, whole and
                    // writable, until their last close removes it (NFS's
                    // "silly rename"). Processes elsewhere do not count.
                    match self.hide_open(logical) {
                        Ok(hidden) => return Ok(Some(hidden)),
                        Err(error) if keep_open => return Err(error.context(path.to_owned())),
                        Err(error) => tracing::debug!("{path}: unlinked while open, not hidden: {error}"),
                    }
                }
                // Handles still open here, where the file could not be
                // hidden, keep their entry, detached.
                self.state.open_files.detach(logical);
                self.state.files.unlink(&self.state, logical, &file).context(path.to_owned()).map(|()| None)
            }
        }
    }

    /// Moves a file open in this process to a hidden name beside it, whose
    /// last close here removes it, and returns that name. Its gates are
    /// held by the caller.
    fn hide_open(&self, logical: &StorePath) -> Result<StorePath> {
        let hidden = self.hidden_path(logical, self.state.stamper.next())?;
        self.state.files.rename_file(&self.state, logical, &hidden, false)?;
        self.state.open_files.unlinked(logical, hidden.clone());
        Ok(hidden)
    }

    /// The hidden name `logical` takes while unlinked but open: reserved
    /// (hidden from listings, cleared by `plfs recover`), unique by
    /// `unique` and this process, and placed on the same backend as the
    /// name it replaces, so hiding never moves data between backends.
    fn hidden_path(&self, logical: &StorePath, unique: u64) -> Result<StorePath> {
        let name = logical.file_name().ok_or_else(|| Error::new(ErrorKind::IsADirectory, "/"))?;
        let placement = &self.state.placement;
        let home = placement.canonical_backend(name);
        // One backend in K takes a given name: K tries on average. A retry
        // takes a fresh stamp, never `unique + 1`: that may be the next
        // stamp, which other hidden names of this file draw (a small_file
        // rename's copy beside its target), and the two would be one name.
        let mut unique = unique;
        let hidden = loop {
            let hidden = layout::removed_container_name(name, unique, self.state.pid, &self.state.hostname);
            if placement.canonical_backend(&hidden) == home {
                break hidden;
            }
            unique = self.state.stamper.next();
        };
        logical.parent().unwrap_or_default().join(&hidden)
    }

    /// Like [`rename`](Self::rename) but fails with `AlreadyExists` if
    /// anything is at `to` (RENAME_NOREPLACE).
    pub fn rename_noreplace(&self, from: &str, to: &str) -> Result<()> {
        match self.entry(&StorePath::parse(to)?) {
            Ok(_) => Err(Error::new(ErrorKind::AlreadyExists, to.to_owned())),
            Err(error) if error.kind() == ErrorKind::NotFound => self.rename(from, to),
            Err(error) => Err(error),
        }
    }

    /// Moves a file, symlink or directory; an existing target file is
    /// replaced, an existing target directory must be empty. Replacing a
    /// file is atomic for readers of the target (see `rename.rs`).
    pub fn rename(&self, from: &str, to: &str) -> Result<()> {
        layout::check_user_path(&parse_file_path(to)?)?;
        self.rename_keeping(from, to).map(drop)
    }

    /// Moves a file to a reserved name beside it, hidden from listings, and
    /// returns that path: what an interface does with a file unlinked while
    /// still open (FUSE), so reads and writes through it go on until the
    /// last close unlinks the hidden path. `unique` tells apart the names
    /// one process hides; `plfs recover` clears what a crash leaves hidden.
    pub fn hide(&self, path: &str, unique: u64) -> Result<String> {
        let hidden = format!("/{}", self.hidden_path(&parse_file_path(path)?, unique)?);
        self.rename_keeping(path, &hidden)?;
        Ok(hidden)
    }

    /// Like [`rename`](Self::rename); when the file it replaces is open in
    /// this process, returns the hidden path (in the target's directory)
    /// where that file lives on, whole, until its last close here removes
    /// it (POSIX: open handles keep reading a replaced file). FUSE names its
    /// node by that path. Every workload keeps such a file: containers and
    /// n-n files in the one switch of the rename, small files (and n-n
    /// files on stores that cannot swap entries) by hiding it just before.
    pub fn rename_keep_replaced(&self, from: &str, to: &str) -> Result<Option<String>> {
        layout::check_user_path(&parse_file_path(to)?)?;
        self.rename_keeping(from, to)
    }

    /// Whether a rename onto an existing file is one atomic switch for its
    /// readers (container mounts); n-n and small-file mounts remove the
    /// target first.
    pub fn replaces_atomically(&self) -> bool {
        self.state.files.replaces_atomically()
    }

    /// [`rename`](Self::rename) without the reserved-name check on `to`.
    fn rename_keeping(&self, from: &str, to: &str) -> Result<Option<String>> {
        let source = parse_file_path(from)?;
        let target = parse_file_path(to)?;
        if source == target {
            return Ok(None);
        }
        if target.starts_with(&source) {
            return Err(Error::invalid(format!("cannot move {from} into itself ({to})")));
        }
        let kind = self.entry(&source).context(from.to_owned())?.kind;
        // A target open here that had to be hidden before the move.
        let mut hidden = None;
        match self.entry(&target) {
            Ok(existing) => match (kind, existing.kind) {
                (FileKind::Directory, FileKind::Directory) => self.rmdir(to)?,
                (FileKind::Directory, _) => return Err(Error::new(ErrorKind::NotADirectory, to.to_owned())),
                (_, FileKind::Directory) => return Err(Error::new(ErrorKind::IsADirectory, to.to_owned())),
                // A container replaces a container in one switch, below.
                (FileKind::File, FileKind::File) if self.replaces_atomically() => {}
                // n-n and small_file replace in one switch where they can,
                // else remove the target first.
                (FileKind::File, FileKind::File) => {
                    if let Some(replaced) = self
                        .replace_file(&source, &target)
                        .with_context(|| format!("rename {from} to {to}"))?
                    {
                        return Ok(replaced.kept);
                    }
                    hidden = self.remove_target(&target, to)?;
                }
                // Another process may remove it first: gone either way.
                _ => self.remove_target(&target, to).map(drop)?,
            },
            Err(error) if error.kind() == ErrorKind::NotFound => {}
            Err(error) => return Err(error.context(to.to_owned())),
        }
        match kind {
            FileKind::Directory => {
                self.state.files.release_directory(&self.state, &source)?;
                // Files open below it follow it, as their own renames do.
                let (_claim, open) = self.state.open_files.claim_move_under(&source);
                let _gates = hold_gates(&open);
                self.rename_everywhere(&source, &target)?;
                self.state.open_files.moved_under(&source, &target);
                Ok(None)
            }
            FileKind::Symlink => {
                let text = self.readlink(from)?;
                let (old, _) = container::canonical(&self.state, &source);
                let (new, _) = container::canonical(&self.state, &target);
                self.state.store(new).symlink(&text, &target).context(to.to_owned())?;
                self.state.store(old).remove_file(&source).context(from.to_owned()).map(|()| None)
            }
            FileKind::File => match (self.rename_file_replacing(&source, &target, to), hidden) {
                (Ok(_), Some(hidden)) => Ok(Some(format!("/{hidden}"))),
                (Err(error), Some(hidden)) => {
                    self.unhide(&hidden, &target);
                    Err(error)
                }
                (result, None) => result,
            },
        }
        .with_context(|| format!("rename {from} to {to}"))
    }

    /// Takes the file at `target` out of a rename's way where it cannot
    /// be replaced in one switch: unlinked, or, open here, hidden beside
    /// it (returned) for its handles; where that fails, so does the rename.
    /// Gone already is fine.
    fn remove_target(&self, target: &StorePath, to: &str) -> Result<Option<StorePath>> {
        match self.unlink_keeping(target, to, true) {
            Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
            result => result,
        }
    }

    /// Puts a file hidden for a rename that then failed back under its
    /// name, as if the rename never began; where something took the name
    /// meanwhile it stays hidden, and its last close here removes it.
    fn unhide(&self, hidden: &StorePath, target: &StorePath) {
        let open_files = &self.state.open_files;
        let (_claim, open) = open_files.claim_move(&[hidden, target]);
        let _gates = hold_gates(&open);
        match self.state.files.rename_file(&self.state, hidden, target, false) {
            Ok(_) => open_files.unhidden(hidden, target),
            Err(error) => tracing::warn!("/{target}: left hidden at /{hidden} by a failed rename: {error}"),
        }
    }

    /// [`rename_file`](Self::rename_file), and where files are not
    /// containers (n-n, small_file: the caller removed the target, and
    /// stores never rename over an entry) a file another process made at
    /// the target meanwhile is removed and the move tried again, as
    /// rename(2) replaces it. Before, two processes publishing one name by
    /// rename failed with EEXIST (and with ENOENT when the other removed
    /// the target first).
    fn rename_file_replacing(
        &self,
        source: &StorePath,
        target: &StorePath,
        to: &str,
    ) -> Result<Option<String>> {
        let mut attempts = 0;
        loop {
            let error = match self.rename_file(source, target) {
                Err(error)
                    if error.kind() == ErrorKind::AlreadyExists
                        && !self.replaces_atomically()
                        && attempts < RENAME_REPLACE_ATTEMPTS_MAX =>
                {
                    error
                }
                result => return result,
            };
            attempts += 1;
            match self.entry(target) {
                Ok(entry) if entry.kind == FileKind::File => match self.unlink(to) {
                    Err(error) if error.kind() != ErrorKind::NotFound => return Err(error),
                    _ => {}
                },
                // Removed again meanwhile: the move is simply tried again.
                Err(gone) if gone.kind() == ErrorKind::NotFound => {}
                // A directory or a link: rename(2) would fail too.
                _ => return Err(error),
            }
        }
    }

    /// Both names are held and the handles of both files wait, from before
    /// the storage switches until they know their new paths; the entries of
    /// both names hold still meanwhile (see `open_files`).
    fn rename_file(&self, source: &StorePath, target: &StorePath) -> Result<Option<String>> {
        let open_files = &self.state.open_files;
        let (_claim, open) = open_files.claim_move(&[source, target]);
        let _gates = hold_gates(&open);
        let keep_replaced = open_files.is_open(target);
        let replaced = self.state.files.rename_file(&self.state, source, target, keep_replaced)?;
        let kept = replaced.as_ref().map(|path| format!("/{path}"));
        open_files.moved(source, target, replaced);
        Ok(kept)
    }

    /// A file moved onto another in one switch by the workload, if it can
    /// (n-n, small_file); None when it did nothing. A target open in this
    /// process lives on at a hidden name beside it, its handles following
    /// it, until their last close here removes it.
    fn replace_file(&self, source: &StorePath, target: &StorePath) -> Result<Option<Replaced>> {
        let open_files = &self.state.open_files;
        let (_claim, open) = open_files.claim_move(&[source, target]);
        let _gates = hold_gates(&open);
        let keep = if open_files.is_open(target) {
            Some(self.hidden_path(target, self.state.stamper.next())?)
        } else {
            None
        };
        if !self.state.files.replace_file(&self.state, source, target, keep.as_ref())? {
            return Ok(None);
        }
        let kept = keep.as_ref().map(|path| format!("/{path}"));
        open_files.moved(source, target, keep);
        Ok(Some(Replaced { kept }))
    }

    fn rename_everywhere(&self, source: &StorePath, target: &StorePath) -> Result<()> {
        self.state.log_cache.forget_under(source);
        for backend in self.state.placement.all_backends() {
            let store = self.state.store(backend);
            container::ignore_missing(store.rename(source, target))
                .with_context(|| store.url().to_owned())?;
        }
        Ok(())
    }

    /// Creates a directory on every backend (canonical first, so a racing
    /// mkdir of the same name fails cleanly).
    pub fn mkdir(&self, path: &str, mode: u32) -> Result<()> {
        self.mkdir_as(path, mode, None)
    }

    /// Like [`mkdir`](Self::mkdir), owned by `owner` where the stores keep owners.
    pub fn mkdir_as(&self, path: &str, mode: u32, owner: Option<Owner>) -> Result<()> {
        if StorePath::parse(path)?.is_root() {
            return Err(Error::new(ErrorKind::AlreadyExists, format!("{path}: the mount root")));
        }
        let logical = parse_file_path(path)?;
        layout::check_user_path(&logical)?;
        if !self.state.files.files_are_backend_entries() {
            // A file of that name has no backend entry to collide with.
            match self.entry(&logical) {
                Ok(_) => return Err(Error::new(ErrorKind::AlreadyExists, path.to_owned())),
                Err(error) if error.kind() == ErrorKind::NotFound => {}
                Err(error) => return Err(error.context(path.to_owned())),
            }
        }
        let (canonical, _) = container::canonical(&self.state, &logical);
        let store = self.state.store(canonical);
        store.create_dir(&logical, mode & 0o7777).context(path.to_owned())?;
        for backend in self.state.placement.all_backends() {
            let store = self.state.store(backend);
            if backend != canonical {
                store.create_dir_all(&logical).context(path.to_owned())?;
            }
            if store.capabilities().modes {
                store.set_mode(&logical, mode & 0o7777).context(path.to_owned())?;
            }
            if let Some(owner) = owner.filter(|_| store.capabilities().owners) {
                store.set_owner(&logical, Some(owner.uid), Some(owner.gid)).context(path.to_owned())?;
            }
        }
        self.inherit_layout(path, &logical)
    }

    /// Removes an empty directory from every backend, the canonical last.
    pub fn rmdir(&self, path: &str) -> Result<()> {
        let logical = parse_file_path(path)?;
        match self.found(&logical).context(path.to_owned())? {
            Found::Directory(_) => {}
            _ => return Err(Error::new(ErrorKind::NotADirectory, path.to_owned())),
        }
        if !self.readdir(path)?.is_empty() {
            return Err(Error::new(ErrorKind::DirectoryNotEmpty, path.to_owned()));
        }
        // What the workload holds under it in this process goes first.
        self.state.files.release_directory(&self.state, &logical).context(path.to_owned())?;
        let (canonical, _) = container::canonical(&self.state, &logical);
        let others = self.state.placement.all_backends().filter(|backend| *backend != canonical);
        // The logical directory is empty, so whatever remains on a backend is
        // plfs debris (orphan shadows, half-made containers): remove it too.
        for backend in others.chain([canonical]) {
            let store = self.state.store(backend);
            container::remove_tree(store, &logical).with_context(|| format!("{}: {path}", store.url()))?;
        }
        Ok(())
    }

    /// Names in a directory, merged over all backends.
    pub fn readdir(&self, path: &str) -> Result<Vec<DirEntryInfo>> {
        let logical = StorePath::parse(path)?;
        match self.found(&logical).context(path.to_owned())? {
            Found::Directory(_) => {}
            _ => return Err(Error::new(ErrorKind::NotADirectory, path.to_owned())),
        }
        let mut seen: BTreeMap<String, Vec<(BackendId, EntryKind)>> = BTreeMap::new();
        for backend in self.state.placement.all_backends() {
            let store = self.state.store(backend);
            let entries = match store.list(&logical) {
                Ok(entries) => entries,
                Err(error) if error.kind() == ErrorKind::NotFound => continue,
                Err(error) => return Err(error.context(format!("{}: {path}", store.url()))),
            };
            for entry in entries.into_iter().filter(|entry| !layout::is_reserved(&entry.name)) {
                seen.entry(entry.name).or_default().push((backend, entry.kind));
            }
        }
        let mut result = Vec::with_capacity(seen.len());
        for (name, presence) in seen {
            let canonical = self.state.placement.canonical_backend(&name);
            let Some((_, kind)) = presence.iter().find(|(backend, _)| *backend == canonical) else {
                // A shadow container whose file is gone, or a file another
                // placement (PLFS 2.5's) put on another backend.
                if let Some(kind) = self.state.files.listed_elsewhere(&self.state, &logical, &name)? {
                    result.push(DirEntryInfo { name, kind });
                }
                continue;
            };
            let kind = match kind {
                EntryKind::Symlink => FileKind::Symlink,
                // Files and directories: what a backend entry is depends on
                // how the workload keeps files.
                other => {
                    match self.state.files.listed_kind(&self.state, &logical, &name, *other, canonical)? {
                        Some(kind) => kind,
                        None => continue,
                    }
                }
            };
            result.push(DirEntryInfo { name, kind });
        }
        // Files without a backend entry of their own (small files); a real
        // entry of the same name (a racing mkdir) wins.
        let files = self.state.files.unlisted_files(&self.state, &logical).context(path.to_owned())?;
        if !files.is_empty() {
            let taken: std::collections::HashSet<String> =
                result.iter().map(|entry| entry.name.clone()).collect();
            result.extend(
                files
                    .into_iter()
                    .filter(|name| !taken.contains(name))
                    .map(|name| DirEntryInfo { name, kind: FileKind::File }),
            );
            result.sort_by(|a, b| a.name.cmp(&b.name));
        }
        Ok(result)
    }

    pub fn chmod(&self, path: &str, mode: u32) -> Result<()> {
        self.update_attributes(path, AttributeChange::Mode(mode))
    }

    pub fn chown(&self, path: &str, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        self.update_attributes(path, AttributeChange::Owner { uid, gid })
    }

    /// Sets access and modification times; `None` leaves one unchanged.
    pub fn utime(&self, path: &str, atime: Option<SystemTime>, mtime: Option<SystemTime>) -> Result<()> {
        self.update_attributes(path, AttributeChange::Times { atime, mtime })
    }

    /// Applies `change` to a file as its workload keeps it, or to a
    /// directory on every backend that supports it.
    fn update_attributes(&self, path: &str, change: AttributeChange) -> Result<()> {
        let logical = StorePath::parse(path)?;
        match self.found(&logical).context(path.to_owned())? {
            Found::File(file) => {
                self.state.files.set_file_attributes(&self.state, &logical, path, &file, &change)
            }
            Found::Directory(_) => {
                for backend in self.state.placement.all_backends() {
                    let store = self.state.store(backend);
                    match change.apply_to_store(store, &logical) {
                        Err(error) if error.kind() == ErrorKind::Unsupported => {}
                        other => other.with_context(|| format!("{}: {path}", store.url()))?,
                    }
                }
                Ok(())
            }
            // Owner and times of the link itself (lchown, utimensat with
            // AT_SYMLINK_NOFOLLOW); Linux has no mode for links.
            Found::Symlink(_) if change.applies_to_symlinks() => {
                let (backend, _) = container::canonical(&self.state, &logical);
                let store = self.state.store(backend);
                change.apply_to_store(store, &logical).with_context(|| format!("{}: {path}", store.url()))
            }
            Found::Symlink(_) => {
                Err(Error::new(ErrorKind::Unsupported, format!("{path}: the mode of a symbolic link")))
            }
        }
    }

    /// Kind, mode and owner of an entry, from its canonical backend alone:
    /// what existence and permission checks need, without the file-size
    /// work of [`stat`](Self::stat).
    fn entry(&self, logical: &StorePath) -> Result<Entry> {
        Ok(match self.found(logical)? {
            Found::File(file) => {
                Entry { kind: FileKind::File, mode: file.mode, uid: file.uid, gid: file.gid }
            }
            Found::Directory(metadata) | Found::Symlink(metadata) => {
                let kind = if metadata.kind == EntryKind::Directory {
                    FileKind::Directory
                } else {
                    FileKind::Symlink
                };
                Entry {
                    kind,
                    mode: metadata.mode.unwrap_or(default_mode(kind)),
                    uid: metadata.uid.unwrap_or(self.state.uid),
                    gid: metadata.gid.unwrap_or(self.state.gid),
                }
            }
        })
    }

    /// Whether `path` is a file whose container is damaged (its access file
    /// lost or undecodable): `stat` and `open` fail with `Corrupt` naming
    /// it, `readdir` lists it as a file and `unlink` removes it. Interfaces
    /// use this to keep such a file visible and removable (FUSE looks a
    /// name up before it may unlink it).
    pub fn is_damaged_file(&self, path: &str) -> Result<bool> {
        Ok(self.damaged(&parse_file_path(path)?)?.is_some())
    }

    /// Checks `mask` (R_OK|W_OK|X_OK, or 0 for existence) for `who`.
    pub fn access(&self, path: &str, mask: u32, who: &Credentials) -> Result<()> {
        let attr = self.entry(&StorePath::parse(path)?).context(path.to_owned())?;
        if mask == 0 {
            return Ok(());
        }
        let allowed = if who.uid == 0 {
            // Root may read and write anything, and execute what anyone may.
            let any_execute = attr.mode & 0o111 != 0 || attr.kind == FileKind::Directory;
            R_OK | W_OK | if any_execute { X_OK } else { 0 }
        } else if who.uid == attr.uid {
            (attr.mode >> 6) & 7
        } else if who.gid == attr.gid || who.groups.contains(&attr.gid) {
            (attr.mode >> 3) & 7
        } else {
            attr.mode & 7
        };
        if mask & !allowed != 0 {
            return Err(Error::new(ErrorKind::PermissionDenied, path.to_owned()));
        }
        Ok(())
    }

    /// Creates a symbolic link at `path` whose text is `target`.
    pub fn symlink(&self, target: &str, path: &str) -> Result<()> {
        self.symlink_as(target, path, None)
    }

    /// Like [`symlink`](Self::symlink), owned by `owner` where the store keeps owners.
    pub fn symlink_as(&self, target: &str, path: &str, owner: Option<Owner>) -> Result<()> {
        let logical = parse_file_path(path)?;
        layout::check_user_path(&logical)?;
        match self.entry(&logical) {
            Ok(_) => return Err(Error::new(ErrorKind::AlreadyExists, path.to_owned())),
            Err(error) if error.kind() == ErrorKind::NotFound => {}
            Err(error) => return Err(error.context(path.to_owned())),
        }
        let (backend, _) = container::canonical(&self.state, &logical);
        let store = self.state.store(backend);
        store.symlink(target, &logical).context(path.to_owned())?;
        if let Some(owner) = owner.filter(|_| store.capabilities().owners) {
            store.set_owner(&logical, Some(owner.uid), Some(owner.gid)).context(path.to_owned())?;
        }
        Ok(())
    }

    pub fn readlink(&self, path: &str) -> Result<String> {
        let logical = parse_file_path(path)?;
        let (backend, _) = container::canonical(&self.state, &logical);
        self.state.store(backend).read_link(&logical).context(path.to_owned())
    }

    /// Capacity of the whole mount: the sum over its backends, each file
    /// system counted once (see `layouts::sum_space`).
    pub fn statfs(&self) -> Result<SpaceInfo> {
        Ok(layouts::sum_space(&self.space_per_backend()?))
    }

    /// Logs of a file on every backend, for tools.
    pub fn inventory(&self, path: &str) -> Result<container::Inventory> {
        let logical = parse_file_path(path)?;
        match self.state.files.containers() {
            Some(containers) => containers.inventory(&self.state, &logical),
            None => Err(no_index(format_args!("/{logical}"))),
        }
    }

    /// Publishes this process's pending small-file records of directory
    /// `dir` (`plfs_flush_writes`): other processes see them once they
    /// open the files or invalidate their cache. Other mounts buffer
    /// nothing per directory: a no-op.
    pub fn flush_writes(&self, dir: &str) -> Result<()> {
        let logical = StorePath::parse(dir)?;
        self.state.files.flush_writes(&self.state, &logical).context(dir.to_owned())
    }

    /// Waits until the pieces of every file this mount removed are deleted.
    /// An unlink returns once the file is out of the namespace and leaves
    /// the deletion to a worker of the mount; dropping the mount or a normal
    /// exit finishes it too, and `plfs recover` what a killed process left.
    pub fn finish_removals(&self) {
        self.state.reclaimer.finish();
    }

    /// Drops this process's cached view of small-file directory `dir`
    /// (`plfs_invalidate_read_cache`): the next read, stat or readdir
    /// there sees what other processes published since. A no-op on other
    /// mounts.
    pub fn invalidate_read_cache(&self, dir: &str) -> Result<()> {
        let logical = StorePath::parse(dir)?;
        self.state.files.invalidate_read_cache(&self.state, &logical);
        Ok(())
    }
}

/// A handle on an open file: this open's part of the workload's file
/// (handles of one container file in one process share one merged index;
/// each handle of an n-n file has its own backend descriptor), the file's
/// entry in the mount's registry of open files, and the open's flags.
#[derive(Debug)]
pub struct FileHandle {
    mount: Arc<Mount>,
    entry: Arc<OpenEntry>,
    file: Box<dyn WorkloadFile>,
    flags: OpenFlags,
    writer: WriterId,
    /// The entry's moves this handle's file has been told of.
    moves_seen: AtomicU64,
    /// Held while the file is told of a move.
    telling: Mutex<()>,
    closed: bool,
}

impl FileHandle {
    /// Holds the file's gate for one call (no rename or unlink moves it
    /// meanwhile) and first tells the handle where a move since its last
    /// call put the file.
    fn gated(&self) -> RwLockReadGuard<'_, ()> {
        let gate = self.entry.gated();
        let moves = self.entry.moves();
        if self.moves_seen.load(Ordering::Acquire) != moves {
            // Other threads of this handle wait here until the handle knows:
            // none may write to where the file was.
            let _telling = self.telling.lock().unwrap_or_else(PoisonError::into_inner);
            if self.moves_seen.load(Ordering::Acquire) != moves {
                self.file.moved(&self.entry.path());
                self.moves_seen.store(moves, Ordering::Release);
            }
        }
        gate
    }

    /// The file's path now: where a rename moved it, or its hidden name
    /// once an unlink removed its name while this handle kept it open.
    pub fn path(&self) -> String {
        format!("/{}", self.entry.path())
    }

    /// Whether an unlink removed the file's name while it was open here:
    /// it lives on at a hidden name (what fstat reports as no links).
    pub fn unlinked(&self) -> bool {
        self.entry.path().file_name().is_some_and(layout::is_removed)
    }

    fn refuse_unless(&self, allowed: bool, what: &str) -> Result<()> {
        if allowed {
            Ok(())
        } else {
            Err(Error::new(ErrorKind::BadHandle, format!("/{}: not open for {what}", self.entry.path())))
        }
    }

    /// Writes at `offset` as the writer this handle was opened for.
    pub fn write(&self, buf: &[u8], offset: u64) -> Result<usize> {
        self.write_as(buf, offset, self.writer)
    }

    /// Writes at `offset` as `writer` (each writer id has its own logs in a
    /// container; an n-n file has no logs and ignores it).
    pub fn write_as(&self, buf: &[u8], offset: u64, writer: WriterId) -> Result<usize> {
        self.refuse_unless(self.flags.write, "writing")?;
        let _gate = self.gated();
        self.file.write(buf, offset, writer)
    }

    pub fn read(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.refuse_unless(self.flags.read, "reading")?;
        let _gate = self.gated();
        self.file.read(buf, offset)
    }

    /// Appends buffered index records to the index logs (no fsync), so
    /// processes elsewhere see what was written once they reopen. An n-n
    /// file buffers nothing; a small file publishes its directory's records.
    pub fn flush(&self) -> Result<()> {
        let _gate = self.gated();
        self.file.flush()
    }

    /// Drops this process's cached view of the file (a container's merged
    /// index and size, a small file's directory view), so the next read
    /// and stat see what other processes published since; this process's
    /// own writes stay. No I/O until then. The interposer calls it when a
    /// lock is granted, as an NFS client revalidates its cache there: a
    /// process that takes a lock must see what the holder before it wrote.
    pub fn refresh(&self) -> Result<()> {
        let _gate = self.gated();
        self.file.refresh()
    }

    /// Makes everything written through this process's handles durable
    /// (for a small file: publishes its directory, `flush_writes`).
    pub fn sync(&self) -> Result<()> {
        let _gate = self.gated();
        self.file.sync()
    }

    /// The size as this process sees it (no I/O once known for a
    /// container; an n-n file asks its backend file).
    pub fn size(&self) -> Result<u64> {
        let _gate = self.gated();
        self.file.size()
    }

    pub fn truncate(&self, size: u64) -> Result<()> {
        self.refuse_unless(self.flags.write, "writing")?;
        let _gate = self.gated();
        self.file.truncate(size, self.writer)
    }

    pub fn writer(&self) -> WriterId {
        self.writer
    }

    /// Closes the handle; the last close of a file finishes its writers.
    pub fn close(mut self) -> Result<()> {
        self.closed = true;
        self.finish()
    }

    /// This open ends; at the file's last open here, its shared state
    /// finishes and a file a rename replaced meanwhile goes. Through to
    /// the last close's size records the gate is held: they go into the
    /// container at the file's path, which no move may change meanwhile.
    fn finish(&self) -> Result<()> {
        let _gate = self.gated();
        let closed = self.file.close();
        let Release::Last { replaced } = self.mount.open_files.release(&self.entry) else {
            return closed;
        };
        let finished = self.entry.shared().map_or(Ok(()), |shared| shared.close());
        let removed = replaced.map_or(Ok(()), |path| self.mount.files.remove_replaced(&self.mount, &path));
        closed.and(finished).and(removed)
    }
}

impl Drop for FileHandle {
    fn drop(&mut self) {
        if !self.closed
            && let Err(error) = self.finish()
        {
            tracing::warn!("/{}: closing an unclosed handle failed: {error}", self.entry.path());
        }
    }
}

/// Mode reported for an entry whose store keeps no modes.
fn default_mode(kind: FileKind) -> u32 {
    if kind == FileKind::Symlink { 0o777 } else { 0o755 }
}

pub(crate) fn parse_file_path(path: &str) -> Result<StorePath> {
    let logical = StorePath::parse(path)?;
    if logical.is_root() {
        return Err(Error::new(ErrorKind::IsADirectory, format!("{path}: the mount root")));
    }
    Ok(logical)
}

/// Whether `name` is one plfs keeps for its own pieces (hidden from
/// listings, refused for new entries): an interface hides it from lookups
/// too, without knowing the container's naming.
pub fn is_reserved_name(name: &str) -> bool {
    layout::is_reserved(name)
}

/// Opens the store for a backend location.
pub fn open_store(location: &BackendLocation) -> Result<SharedStore> {
    match location {
        BackendLocation::Posix(path) => Ok(Arc::new(PosixStore::new(path.clone(), location.to_string())?)),
        #[cfg(feature = "s3")]
        BackendLocation::S3 { bucket, prefix, access } => {
            Ok(Arc::new(crate::store::s3::S3Store::new(bucket, prefix, access)?))
        }
        #[cfg(feature = "hdfs")]
        BackendLocation::Hdfs { host, port, path } => {
            Ok(Arc::new(crate::store::hdfs::HdfsStore::new(host, *port, path, location.to_string())?))
        }
        // Reached only in a build without the `hdfs` or `s3` feature.
        #[allow(unreachable_patterns)]
        other => Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "backend {other}: this plfs was built without support for this store (cargo features hdfs, s3)"
            ),
        )),
    }
}

/// What [`check_store_root`] found at a backend's root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootState {
    Present,
    /// Missing, and made by this call.
    Created,
    /// Missing; the store's words.
    Missing(String),
    /// Something other than a directory is there; the store's words.
    NotADirectory(String),
}

/// Looks at the root of a backend and, with `create`, makes a missing one
/// (with its missing parents), as `mkdir -p` would: a POSIX directory, an
/// HDFS directory, an S3 prefix's directory marker (a missing S3 bucket is
/// reported, not created). [`open_store`] refuses a missing root; this is
/// how a new backend gets one (`plfs check-config --mkdir`). An error is a
/// store that could not be asked (refused connection, bad credentials),
/// in its own words.
pub fn check_store_root(location: &BackendLocation, create: bool) -> Result<RootState> {
    let missing = |error: Error, make: &dyn Fn() -> Result<()>| -> Result<RootState> {
        if !create {
            return Ok(RootState::Missing(error.to_string()));
        }
        make()?;
        Ok(RootState::Created)
    };
    match location {
        BackendLocation::Posix(path) => match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => Ok(RootState::Present),
            Ok(_) => Ok(RootState::NotADirectory(format!("{location}: not a directory"))),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                let error = Error::io(error, format!("{location}: backend root {}", path.display()));
                missing(error, &|| {
                    std::fs::create_dir_all(path)
                        .map_err(|error| Error::io(error, format!("{location}: mkdir -p")))
                })
            }
            Err(error) => Err(Error::io(error, format!("{location}: backend root {}", path.display()))),
        },
        #[cfg(feature = "hdfs")]
        BackendLocation::Hdfs { host, port, path } => {
            use crate::store::Store;
            let store = crate::store::hdfs::HdfsStore::connect(host, *port, path, location.to_string())?;
            let root = StorePath::root();
            match store.metadata(&root) {
                Ok(meta) if meta.kind == EntryKind::Directory => Ok(RootState::Present),
                Ok(_) => Ok(RootState::NotADirectory(format!("{location}: backend root is a file"))),
                Err(error) if error.kind() == ErrorKind::NotFound => {
                    missing(error, &|| store.create_dir_all(&root))
                }
                Err(error) if error.kind() == ErrorKind::NotADirectory => {
                    Ok(RootState::NotADirectory(error.to_string()))
                }
                Err(error) => Err(error),
            }
        }
        #[cfg(feature = "s3")]
        BackendLocation::S3 { bucket, prefix, access } => {
            let store = crate::store::s3::S3Store::new(bucket, prefix, access)?;
            match store.root_exists() {
                Ok(true) => Ok(RootState::Present),
                Ok(false) => missing(
                    Error::new(
                        ErrorKind::NotFound,
                        format!("{location}: no directory marker or object under the prefix"),
                    ),
                    &|| store.create_root(),
                ),
                // The bucket: plfs makes directories, not buckets.
                Err(error) if error.kind() == ErrorKind::NotFound => {
                    Ok(RootState::Missing(format!("{error} (create the bucket with the store's own tools)")))
                }
                Err(error) => Err(error),
            }
        }
        // Reached only in a build without the `hdfs` or `s3` feature.
        #[allow(unreachable_patterns)]
        other => open_store(other).map(|_| RootState::Present),
    }
}

#[cfg(test)]
pub(crate) mod tests;
