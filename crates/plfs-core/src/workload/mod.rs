//! The seam between the `Plfs` façade and the three ways a mount keeps its
//! files (PLFS 2.5's `LogicalFS`, with ContainerFS, FlatFileFS and
//! SmallFileFS): containers for `shared_file` (n-1), one plain backend file
//! per logical file for `file_per_proc` (n-n), and names in their
//! directory's container for `small_file` (1-N).
//!
//! The façade resolves paths, mirrors directories on every backend and
//! serves symlinks, the same way for every workload; whatever concerns a
//! logical *file* it asks the mount's one [`Workload`], chosen once from the
//! configuration ([`for_mount`]). An open file is a [`WorkloadFile`] trait
//! object, one per open (never per read or write); where every open of a
//! file in a process shares one state (a container's writers and merged
//! index) the workload says so in what `open` returns ([`Opened::Shared`]),
//! and the façade's registry of open files (`fs/open_files.rs`) keeps that
//! [`SharedFile`] by path for every workload alike. What only containers
//! can do (damage checks, a collective open from a shared index, the tools
//! that read logs) is the optional [`ContainerOps`] capability; its absence
//! gives the error the caller reports.

mod file_per_proc;
mod plfs25_file;
mod shared_file;
mod small_file;

use std::fmt::Debug;
use std::sync::Arc;
use std::time::SystemTime;

use crate::attr::{FileAttr, FileKind, Owner};
use crate::config::Workload as WorkloadName;
use crate::container::{Inventory, SizeSummary};
use crate::error::{Error, ErrorKind, Result};
use crate::format::access::AccessRecord;
use crate::load::LoadedIndex;
use crate::mount_state::MountState;
use crate::open::{OpenFlags, WriterId};
use crate::placement::BackendId;
use crate::plfs25::Found25;
use crate::smallfile::FileStat;
use crate::store::{EntryKind, Metadata, Store, StorePath};
use crate::striping::Layout;

/// What a logical path is, as the mount's workload found it.
#[derive(Debug, Clone)]
pub(crate) enum Found {
    File(FoundFile),
    Directory(Metadata),
    Symlink(Metadata),
}

/// A logical file as its workload found it: what permission checks need,
/// and what only that workload reads back (its `detail`).
#[derive(Debug, Clone)]
pub(crate) struct FoundFile {
    pub(crate) mode: u32,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    detail: FileDetail,
}

/// The record each workload keeps a file's attributes in. Only the
/// workload that made a [`FoundFile`] looks inside it.
#[derive(Debug, Clone)]
enum FileDetail {
    /// A container's access record, and its size when the lookup found it
    /// in the container's closed summary.
    Access(AccessRecord, Option<SizeSummary>),
    /// An n-n file's own backend entry.
    Plain(Metadata),
    /// A small file's entry in its directory's container.
    Small(FileStat),
    /// A PLFS 2.5 container, read in place (read-only).
    Plfs25(Found25),
}

impl FoundFile {
    /// A container's access record (for extended attributes, which live
    /// in the container); None for files that have no container.
    /// The PLFS 2.5 container behind the file, when it is one (read in
    /// place; the tools show it as such).
    pub(crate) fn plfs25(&self) -> Option<&Found25> {
        match &self.detail {
            FileDetail::Plfs25(found) => Some(found),
            _ => None,
        }
    }

    /// The size a container's closed summary gave the lookup.
    pub(crate) fn closed_size(&self) -> Option<SizeSummary> {
        match &self.detail {
            FileDetail::Access(_, size) => *size,
            _ => None,
        }
    }

    pub(crate) fn access_record(&self) -> Option<&AccessRecord> {
        match &self.detail {
            FileDetail::Access(access, _) => Some(access),
            FileDetail::Plain(_) | FileDetail::Small(_) | FileDetail::Plfs25(_) => None,
        }
    }
}

/// A file found by another workload than the one asked: a bug, reported
/// rather than panicking (every `FoundFile` comes from the mount's own
/// workload).
fn foreign_file(path: &StorePath) -> Error {
    Error::new(ErrorKind::Internal, format!("/{path}: a file found by another workload"))
}

/// The layout of a file about to be created in directory `parent`: the
/// directory's template (`user.plfs.layout`, see fs/layouts.rs), else the
/// mount's default; `None` keeps the one-backend-per-host placement.
pub(crate) fn layout_for_new_file(state: &MountState, parent: &StorePath) -> Result<Option<Layout>> {
    crate::stripes::layout_of_directory(state, parent)
}

/// The layout a container file's data follows: its own (set before its
/// first write) or the one it was created with; `None` for a file created
/// without one.
pub(crate) fn layout_of_file(state: &MountState, path: &StorePath) -> Result<Option<Layout>> {
    crate::stripes::read_layout(state, path)
}

/// What `open` asks of a workload: the façade has parsed the path and
/// checked what does not depend on the workload.
pub(crate) struct OpenRequest<'a> {
    /// The path as the caller wrote it, for error messages.
    pub(crate) shown: &'a str,
    pub(crate) flags: OpenFlags,
    pub(crate) mode: u32,
    pub(crate) writer: WriterId,
    /// Who a file this open creates belongs to.
    pub(crate) owner: Owner,
    /// Checks this process's permission for the open's access mode, where
    /// the backend would refuse only at the first read or write; None when
    /// an interface acting for another user (FUSE) checks that user's.
    pub(crate) check_access: Option<&'a dyn Fn() -> Result<()>>,
}

/// A change of a file's attributes (chmod, chown, utime).
#[derive(Debug, Clone, Copy)]
pub(crate) enum AttributeChange {
    Mode(u32),
    Owner {
        uid: Option<u32>,
        gid: Option<u32>,
    },
    /// `None` leaves a time unchanged.
    Times {
        atime: Option<SystemTime>,
        mtime: Option<SystemTime>,
    },
}

impl AttributeChange {
    /// Applies the change to an entry the store keeps itself (a directory,
    /// a symlink, an n-n file).
    pub(crate) fn apply_to_store(&self, store: &dyn Store, path: &StorePath) -> Result<()> {
        match *self {
            AttributeChange::Mode(mode) => store.set_mode(path, mode & 0o7777),
            AttributeChange::Owner { uid, gid } => store.set_owner(path, uid, gid),
            AttributeChange::Times { atime, mtime } => store.set_times(path, atime, mtime),
        }
    }

    /// Whether it applies to a symlink itself (lchown, utimensat with
    /// AT_SYMLINK_NOFOLLOW); Linux has no mode for links.
    pub(crate) fn applies_to_symlinks(&self) -> bool {
        !matches!(self, AttributeChange::Mode(_))
    }
}

/// How a mount keeps its logical files. The façade calls these for files
/// only; directories and symlinks are the façade's.
pub(crate) trait Workload: Debug + Send + Sync {
    /// What is at `path` (a file, or a directory or symlink on its
    /// canonical backend).
    fn lookup(&self, mount: &MountState, path: &StorePath) -> Result<Found>;

    /// [`lookup`](Self::lookup) for a `stat`, which may find a file's
    /// attributes where it can read them at once (a closed container's
    /// summary).
    fn lookup_for_stat(&self, mount: &MountState, path: &StorePath) -> Result<Found> {
        self.lookup(mount, path)
    }

    /// `stat` of a file `lookup` found; `open` is its state in this
    /// process when the façade's registry has one (a container open here).
    fn file_attr(
        &self,
        mount: &MountState,
        path: &StorePath,
        file: &FoundFile,
        open: Option<&dyn SharedFile>,
    ) -> Result<FileAttr>;

    /// Opens (with `request.flags.create`, creates) the file at `path`.
    /// The façade holds the name against renames and unlinks meanwhile,
    /// and counts the open in its registry afterwards.
    fn open(&self, mount: &Arc<MountState>, path: &StorePath, request: &OpenRequest<'_>) -> Result<Opened>;

    /// Removes a file `lookup` found.
    fn unlink(&self, mount: &MountState, path: &StorePath, file: &FoundFile) -> Result<()>;

    /// Moves a file to `target`, whose name is free or (when
    /// [`replaces_atomically`](Self::replaces_atomically)) a file it
    /// replaces. With `keep_replaced` (the replaced file is open in this
    /// process) a replaced file moves to a hidden name instead of going,
    /// returned: it lives on there until the façade's last close of it
    /// calls [`remove_replaced`](Self::remove_replaced).
    fn rename_file(
        &self,
        mount: &MountState,
        source: &StorePath,
        target: &StorePath,
        keep_replaced: bool,
    ) -> Result<Option<StorePath>>;

    /// Removes a file `rename_file` kept at hidden name `path`, at its
    /// last close here. Only a workload that keeps replaced files does
    /// anything.
    fn remove_replaced(&self, _mount: &MountState, _path: &StorePath) -> Result<()> {
        Ok(())
    }

    /// Hidden files in `dir` that are no backend entry of their own (a
    /// small file unlinked while open): `plfs recover` removes what a
    /// crash left of them with [`remove_replaced`](Self::remove_replaced).
    fn hidden_files(&self, _mount: &MountState, _dir: &StorePath) -> Result<Vec<String>> {
        Ok(Vec::new())
    }

    /// Whether a rename onto an existing file is one atomic switch for its
    /// readers, keeping a replaced file open here at a hidden name;
    /// otherwise the façade asks [`replace_file`](Self::replace_file), or
    /// removes the target first.
    fn replaces_atomically(&self) -> bool;

    /// Where [`replaces_atomically`](Self::replaces_atomically) is false:
    /// moves the file at `source` onto the file at `target` in one switch
    /// for readers of `target` if the stores allow, and says whether it
    /// did. False changes nothing, and the façade removes the target
    /// first. With `keep` (the target is open in this process) the old
    /// file lives on at that hidden name beside the target, on its
    /// backend, instead of being removed.
    fn replace_file(
        &self,
        _mount: &MountState,
        _source: &StorePath,
        _target: &StorePath,
        _keep: Option<&StorePath>,
    ) -> Result<bool> {
        Ok(false)
    }

    /// chmod, chown or utime of a file `lookup` found (`shown` is the path
    /// as the caller wrote it, for error messages).
    fn set_file_attributes(
        &self,
        mount: &MountState,
        path: &StorePath,
        shown: &str,
        file: &FoundFile,
        change: &AttributeChange,
    ) -> Result<()>;

    /// The kind readdir lists a backend entry `name` of directory `dir` as
    /// (found as `kind` on its canonical backend `canonical`), or None to
    /// hide it. Symlinks are the façade's and never asked about.
    fn listed_kind(
        &self,
        mount: &MountState,
        dir: &StorePath,
        name: &str,
        kind: EntryKind,
        canonical: BackendId,
    ) -> Result<Option<FileKind>>;

    /// The kind readdir lists an entry `name` of `dir` as that is not on
    /// its canonical backend (plfs's placement), or None to hide it: a
    /// container another placement put elsewhere (PLFS 2.5's).
    fn listed_elsewhere(
        &self,
        _mount: &MountState,
        _dir: &StorePath,
        _name: &str,
    ) -> Result<Option<FileKind>> {
        Ok(None)
    }

    /// Files of `dir` that have no backend entry of their own (small
    /// files); readdir lists them beside the backend entries.
    fn unlisted_files(&self, _mount: &MountState, _dir: &StorePath) -> Result<Vec<String>> {
        Ok(Vec::new())
    }

    /// Whether every file is an entry on its canonical backend, so a mkdir
    /// of its name collides with it there; otherwise the façade checks
    /// first.
    fn files_are_backend_entries(&self) -> bool {
        true
    }

    /// Before directory `dir` is renamed or removed on the backends: let go
    /// of what this process holds under it.
    fn release_directory(&self, _mount: &MountState, _dir: &StorePath) -> Result<()> {
        Ok(())
    }

    /// Publishes this process's pending records of directory `dir`
    /// (`plfs_flush_writes`); a no-op where nothing is buffered per
    /// directory.
    fn flush_writes(&self, _mount: &MountState, _dir: &StorePath) -> Result<()> {
        Ok(())
    }

    /// Drops this process's cached view of directory `dir`
    /// (`plfs_invalidate_read_cache`); a no-op where nothing is cached.
    fn invalidate_read_cache(&self, _mount: &MountState, _dir: &StorePath) {}

    /// The backend whose one plain file holds all of a file's bytes, where
    /// the workload keeps files that way (n-n); `plfs query` shows it.
    fn plain_file_backend(&self, _mount: &MountState, _path: &StorePath) -> Option<BackendId> {
        None
    }

    /// What only containers can do; None on other workloads.
    fn containers(&self) -> Option<&dyn ContainerOps> {
        None
    }

    /// Why a tool that reads a container (map, flatten, recover, version)
    /// cannot work on `path`, a file of this workload.
    fn no_container(&self, path: &str) -> Error {
        no_index(path)
    }
}

/// What only a container mount can do.
pub(crate) trait ContainerOps {
    /// Whether `path` is a file whose container is damaged (its access
    /// file lost or undecodable).
    fn is_damaged(&self, mount: &MountState, path: &StorePath) -> Result<bool>;

    /// Removes the damaged container at `path`, which `lookup` could not
    /// read: how users clean up after damage.
    fn remove_damaged(&self, mount: &MountState, path: &StorePath) -> Result<()>;

    /// Opens for reading with an index another rank built and checked
    /// (collective open): no lookup, the façade seeds the file's shared
    /// state with the index ([`SharedFile::seed`]).
    fn open_prepared(&self) -> Opened;

    /// Logs of a file on every backend.
    fn inventory(&self, mount: &MountState, path: &StorePath) -> Result<Inventory>;
}

/// What a workload's `open` made of one open of a file. The façade's
/// registry counts every open of a path the same way; this says where the
/// open's calls go.
pub(crate) enum Opened {
    /// This open has a handle of its own (a plain file's descriptor, a
    /// small file's handle, a read-only PLFS 2.5 index).
    Own(Box<dyn WorkloadFile>),
    /// Every open of the file in this process shares one state (a
    /// container's writers and merged index): `state` makes it at the
    /// file's first open here, and each open's handle comes from it
    /// ([`SharedFile::handle`]). With `truncate` the open still truncates
    /// the file to 0 through that handle (O_TRUNC of a file it did not
    /// create), which needs the shared writers.
    Shared { state: fn(&Arc<MountState>, &StorePath) -> Arc<dyn SharedFile>, truncate: bool },
}

/// What every open of one logical file in this process shares. The
/// façade's registry keeps it by path from the file's first open here to
/// its last close, moves it with renames, and calls these hooks; its gate
/// keeps every call through a handle apart from a move of the file.
pub(crate) trait SharedFile: Debug + Send + Sync {
    /// One more open's handle on this state (the one allocation of an open).
    fn handle(self: Arc<Self>) -> Box<dyn WorkloadFile>;

    /// Another open of the file here: close-to-open, it sees what other
    /// hosts synced before it, so cached read state goes.
    fn reopened(&self);

    /// A collective open installs the index another rank loaded.
    fn seed(&self, index: LoadedIndex);

    /// Whether another process put another file at this file's name since
    /// this state was loaded from it (an open of the name then gets a state
    /// of its own; this one stays its handles').
    fn replaced_at_name(&self) -> bool;

    /// The file now lives at `path` (its directory or itself renamed, or
    /// hidden as replaced): what it caches under the old path goes.
    fn moved(&self, path: &StorePath);

    /// The size `stat` reports while the file is open here: from memory
    /// (lazy stat) when `lazy` and this process wrote it; otherwise None,
    /// once what this process buffers reached the backend where stat
    /// reads it.
    fn size_for_stat(&self, lazy: bool) -> Result<Option<SizeSummary>>;

    /// The last close of the file here (every close, once an unlink
    /// detached it from the registry): finishes its writers.
    fn close(&self) -> Result<()>;
}

/// One open of a logical file. The façade's `FileHandle` holds one and
/// checks the open's access mode before each call, holding its registry
/// entry's gate.
pub(crate) trait WorkloadFile: Debug + Send + Sync {
    /// Writes at `offset` as `writer` (each writer id has its own logs in a
    /// container; the other workloads ignore it or record it).
    fn write(&self, buf: &[u8], offset: u64, writer: WriterId) -> Result<usize>;

    fn read(&self, buf: &mut [u8], offset: u64) -> Result<usize>;

    /// Loads now what reads will need, for an open that only reads: the
    /// bytes of the file as it is at the open then stay readable if
    /// another process unlinks it or renames it away before the first
    /// read, as an open file's bytes do on a local file system. Only a
    /// container, which readers otherwise find by name at their first
    /// read, has anything to do.
    fn prepare_reads(&self) -> Result<()> {
        Ok(())
    }

    /// Makes what was written visible to other processes that reopen
    /// (no fsync).
    fn flush(&self) -> Result<()>;

    /// Makes everything written through this process's handles durable.
    fn sync(&self) -> Result<()>;

    /// The size as this process sees it.
    fn size(&self) -> Result<u64>;

    fn truncate(&self, size: u64, writer: WriterId) -> Result<()>;

    /// Drops what this process cached of the file, so the next read and
    /// size see what other processes published since; its own writes stay.
    /// No I/O: the cache is rebuilt at its next use.
    fn refresh(&self) -> Result<()>;

    /// This open ends (a shared state's own close follows at the last
    /// close of the file here).
    fn close(&self) -> Result<()>;

    /// The file now lives at `path` (renamed, or hidden by an unlink while
    /// open). Only a handle that names its file itself (a small file's)
    /// has anything to do: shared states learn it from the registry and a
    /// plain file's descriptor follows its inode.
    fn moved(&self, _path: &StorePath) {}
}

/// The workload of a mount configured for `name`, over `mount`'s stores.
/// `max_smallfile_containers` bounds a small-file mount's open directory
/// containers (0: the engine's default).
pub(crate) fn for_mount(
    name: WorkloadName,
    mount: &MountState,
    max_smallfile_containers: usize,
) -> Result<Box<dyn Workload>> {
    Ok(match name {
        WorkloadName::SharedFile => Box::new(shared_file::Containers::new()),
        WorkloadName::FilePerProc => Box::new(file_per_proc::FilePerProc::new(mount)?),
        WorkloadName::SmallFile => Box::new(small_file::SmallFile::new(mount, max_smallfile_containers)?),
    })
}

/// What the index-only calls (collective open, inventory) answer for a file
/// that is not a container: a plain file with no index or logs.
pub(crate) fn no_index(path: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::Unsupported,
        format!(
            "{path}: an n-n (file_per_proc) file or a small_file (1-n) file has no container, index or logs of its own"
        ),
    )
}
