//! The FUSE operations over one [`Plfs`] mount.
//!
//! Every handler has the same shape: validate the arguments, load what it
//! needs (path, handle), call the core, and reply, returning early with an
//! errno at the first failure. The work happens in `do_*` methods that
//! return `Result<_, Errno>`; the trait methods only reply.
//!
//! Cache decisions, each keeping "a reader on the node sees what another
//! local process wrote and flushed; close-to-open between nodes" true:
//! - One writer per daemon: every local process's writes to a file go to
//!   the file's one data and index log pair on this node (the PLFS papers'
//!   one index per node through FUSE), appended in the order the daemon
//!   serves them, each record stamped then, so the last write wins as it
//!   would on one disk. fsync by any process syncs the pair (everything
//!   written so far); close flushes its index records, so a killed client
//!   loses nothing it wrote, and only a killed daemon loses what no one
//!   synced or closed.
//! - No writeback cache by default: writes go through to the daemon at
//!   once, and other nodes see the data once the writer flushes. With
//!   writeback cache the kernel does read-modify-write of partial pages
//!   and keeps the size itself (see docs/POSIX.md), and this daemon clears
//!   set-ID bits (FUSE_HANDLE_KILLPRIV_V2), so a cached write costs no
//!   getxattr round trip (`drop_set_id`).
//! - Page cache on for opens that can read (readahead, mmap, exec), never
//!   keep_cache: local processes share one kernel inode and page cache,
//!   which write-through keeps current; every open drops the cached pages,
//!   so an open sees what other nodes wrote and closed before it
//!   (close-to-open). Opens that can write are direct I/O (see
//!   `open_flags`; read-write ones where the kernel allows mmap of direct
//!   I/O files); the kernel drops cached pages a direct write overlaps.
//!   `-o direct_io` makes every open direct. docs/POSIX.md ("Caching").
//! - Attributes and names are cached by the kernel for `attr_timeout` and
//!   `entry_timeout` (1 s each by default, libfuse's; `-o attr_timeout=S`).
//!   Every change made through this mount is the kernel's own request, and
//!   the kernel updates or drops what it cached for it (create, write,
//!   truncate, rename, unlink). What it cannot know the daemon tells it
//!   (`invalidate_attr`): a file opened for reading whose size here is not
//!   the one last reported (another node, or the library, changed it), so
//!   an open still sees what other nodes closed before it; and a write the
//!   daemon placed elsewhere than the kernel asked (O_APPEND). Other nodes'
//!   changes reach stat and names within the timeouts (inodes name paths,
//!   so a cached name still reaches whatever file now has that path; an
//!   open finds it there). A damaged file's
//!   stand-in attributes are never cached (its stat must keep failing).
//! - No auto_inval_data: it would cost a getattr before every read, and
//!   the open-time check above keeps sizes right.
//! - Rename over a file: the kernel moves its dentry only when the reply
//!   arrives, so an open(2) of the name may still reach the replaced
//!   node. Such an open gets the file now at the name, direct I/O (that
//!   inode's size and pages are another version's); opens wait while a
//!   rename or unlink switches names (`namespace`), so every handle on one
//!   named node reads one version. See docs/POSIX.md.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    AccessFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    InitFlags, KernelConfig, LockOwner, Notifier, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use plfs::ErrorKind;
use plfs::attr::{Credentials, DirEntryInfo, FileKind, Owner};
use plfs::config::BackendLocation;
use plfs::fs::Plfs;
use plfs::open::{self, WriterId};
use plfs::store::SharedStore;
use plfs::xattr::XattrMode;

use crate::capability::{self, AbsentCapabilities};
use crate::handles::HandleTable;
use crate::inode::{InodeTable, Located, ROOT};
use crate::process;
use crate::statfs::{SpaceOracle, SpaceSource};

/// How long the kernel may trust a name → inode answer, and attributes,
/// unless the mount says otherwise (`-o entry_timeout=S,attr_timeout=S`):
/// libfuse's defaults, which is what a FUSE user expects; other nodes'
/// changes show in stat within this (docs/POSIX.md).
pub const ENTRY_TTL_DEFAULT: Duration = Duration::from_secs(1);
pub const ATTR_TTL_DEFAULT: Duration = Duration::from_secs(1);

/// st_blksize: tools size their buffers from it (cp, tar), and plfs
/// wants large writes, each of which costs one index record.
pub const BLOCK_SIZE_HINT: u32 = 1 << 20;

/// Longest file name, as every POSIX backend allows.
const NAME_MAX_BYTES: usize = 255;

/// d_ino for readdir entries the kernel has not looked up: the top bit
/// keeps them apart from real inode numbers (a counter from 2).
const UNKNOWN_INO_BIT: u64 = 1 << 63;

/// Daemon settings beyond the core's.
#[derive(Debug, Clone)]
pub struct FsOptions {
    /// Where statfs is answered from (plfsrc `statfs:`); the core's
    /// canonical root backend if None.
    pub statfs: Option<BackendLocation>,
    /// How long a statfs may wait for its backend before answering from
    /// the last good figures (or EIO).
    pub statfs_timeout: Duration,
    /// Largest write request asked of the kernel. The kernel caps it at
    /// fs.fuse.max_pages_limit pages (1 MiB by default).
    pub max_write_bytes: u32,
    /// Background requests (readahead, async reads) the kernel may queue.
    pub max_background: u16,
    /// Open every file with FOPEN_DIRECT_IO (`-o direct_io`): no page
    /// cache, each write(2) one request however it is aligned, and writers
    /// of one file run in parallel; but no readahead, and shared mmap only
    /// where the kernel offers FUSE_DIRECT_IO_ALLOW_MMAP.
    pub direct_io: bool,
    /// The kernel's writeback cache (`-o writeback_cache`): writes land in
    /// the page cache and reach the daemon merged, up to max_write per
    /// request, at close, fsync or memory pressure; pages are kept across
    /// opens. For files only this node writes: the kernel then keeps the
    /// size itself and writes back whole pages (docs/POSIX.md).
    pub writeback_cache: bool,
    /// How long the kernel may cache attributes (`-o attr_timeout`).
    pub attr_timeout: Duration,
    /// How long the kernel may cache a name's inode (`-o entry_timeout`).
    pub entry_timeout: Duration,
}

impl Default for FsOptions {
    fn default() -> FsOptions {
        FsOptions {
            statfs: None,
            statfs_timeout: Duration::from_secs(2),
            max_write_bytes: 4 << 20,
            max_background: 64,
            direct_io: false,
            writeback_cache: false,
            attr_timeout: ATTR_TTL_DEFAULT,
            entry_timeout: ENTRY_TTL_DEFAULT,
        }
    }
}

/// One FUSE open: a core handle plus what the open asked for.
#[derive(Debug)]
struct OpenHandle {
    ino: INodeNo,
    /// Taken at release. Reads and writes hold the lock shared, so they run
    /// in parallel on one handle (the kernel issues readahead that way).
    handle: RwLock<Option<plfs::fs::FileHandle>>,
    /// O_APPEND: every write goes to the end as plfs sees it.
    append: bool,
}

impl OpenHandle {
    fn with<T>(
        &self,
        f: impl FnOnce(&plfs::fs::FileHandle) -> plfs::Result<T>,
    ) -> Result<plfs::Result<T>, Errno> {
        let guard = self.handle.read().unwrap_or_else(PoisonError::into_inner);
        let handle = guard.as_ref().ok_or(Errno::EBADF)?;
        Ok(f(handle))
    }

    /// Closes the core handle; the last close of a file finishes its logs.
    fn close(&self) -> plfs::Result<()> {
        let taken = self.handle.write().unwrap_or_else(PoisonError::into_inner).take();
        taken.map_or(Ok(()), plfs::fs::FileHandle::close)
    }
}

/// A directory listing taken when a readdir starts from offset 0 (the
/// first one, and again after `rewinddir` or `lseek(fd, 0)`), so offsets
/// stay stable while the directory changes under a long `ls`, and a
/// descriptor opened before entries were made lists them, as getdents on a
/// plain file system does. (It was taken at opendir: `os.listdir(fd)` of a
/// directory descriptor opened before its files were created listed
/// nothing.)
#[derive(Debug)]
struct DirListing {
    ino: INodeNo,
    parent: INodeNo,
    entries: RwLock<Option<Arc<Vec<DirEntryInfo>>>>,
}

impl DirListing {
    fn new(ino: INodeNo, parent: INodeNo) -> DirListing {
        DirListing { ino, parent, entries: RwLock::new(None) }
    }

    /// The snapshot a readdir from `offset` serves: a fresh one from
    /// `relist` when it starts at 0 (or none was taken yet), else the one
    /// the listing's earlier reads served.
    fn snapshot(
        &self,
        offset: u64,
        relist: impl FnOnce() -> Result<Vec<DirEntryInfo>, Errno>,
    ) -> Result<Arc<Vec<DirEntryInfo>>, Errno> {
        if offset != 0
            && let Some(entries) = self.entries.read().unwrap_or_else(PoisonError::into_inner).clone()
        {
            return Ok(entries);
        }
        let fresh = Arc::new(relist()?);
        *self.entries.write().unwrap_or_else(PoisonError::into_inner) = Some(fresh.clone());
        Ok(fresh)
    }

    /// Entry `index` of `entries`: "." and ".." first, then the snapshot.
    fn entry(entries: &[DirEntryInfo], index: usize) -> Option<(&str, FileKind)> {
        match index {
            0 => Some((".", FileKind::Directory)),
            1 => Some(("..", FileKind::Directory)),
            _ => entries.get(index - 2).map(|entry| (entry.name.as_str(), entry.kind)),
        }
    }
}

/// A name's inode and attributes as a lookup or create answers them.
#[derive(Debug)]
struct Entry {
    attr: FileAttr,
    /// How long the kernel may keep `attr` (zero for stand-ins).
    attr_ttl: Duration,
}

/// A plfs mount as a FUSE file system.
pub struct PlfsFs {
    plfs: Plfs,
    inodes: Mutex<InodeTable>,
    files: Mutex<HandleTable<OpenHandle>>,
    dirs: Mutex<HandleTable<DirListing>>,
    space: SpaceOracle,
    /// The writer of every file this daemon writes: one log pair per file
    /// per node, whichever local process (or the kernel) writes.
    writer: WriterId,
    options: FsOptions,
    /// Makes the hidden names of unlinked open files unique.
    hidden_count: AtomicU64,
    capabilities: AbsentCapabilities,
    /// Held shared by opens, creates, reads, writes and releases,
    /// exclusively by renames and unlinks: the core
    /// moves a replaced or unlinked file's open handles to its hidden name
    /// only after its switch, and this table learns of it later still, so
    /// an open in between would join the old file's handles on the new
    /// file's name (one kernel inode, pages of two versions).
    namespace: RwLock<()>,
    /// The kernel granted FUSE_DIRECT_IO_ALLOW_MMAP at init: shared mmap
    /// of a direct-I/O open, kept coherent with its direct requests.
    direct_io_mmap: bool,
    /// The kernel granted FUSE_HANDLE_KILLPRIV_V2 at init (asked only with
    /// the writeback cache): this daemon clears set-user-ID and
    /// set-group-ID bits on write, truncate and chown (`drop_set_id`).
    kill_set_id: bool,
    /// The session's channel for telling the kernel its cache is stale;
    /// set once the session exists (unset in a file system never mounted).
    notifier: Arc<OnceLock<Notifier>>,
}

impl std::fmt::Debug for PlfsFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlfsFs").field("options", &self.options).finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl PlfsFs {
    pub fn new(plfs: Plfs, options: FsOptions) -> PlfsFs {
        let space = SpaceOracle::new(space_source(&plfs, options.statfs.clone()), options.statfs_timeout);
        // Seconds since the epoch: different in every run, so an inode
        // number from an earlier daemon never matches.
        let started = SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |since| since.as_secs().max(1));
        PlfsFs {
            plfs,
            inodes: Mutex::new(InodeTable::new(Generation(started))),
            files: Mutex::new(HandleTable::default()),
            dirs: Mutex::new(HandleTable::default()),
            space,
            writer: WriterId::from(std::process::id()),
            options,
            hidden_count: AtomicU64::new(0),
            capabilities: AbsentCapabilities::default(),
            namespace: RwLock::new(()),
            direct_io_mmap: false,
            kill_set_id: false,
            notifier: Arc::new(OnceLock::new()),
        }
    }

    /// Where the session puts its notifier once it exists.
    pub fn notifier_slot(&self) -> Arc<OnceLock<Notifier>> {
        self.notifier.clone()
    }

    /// Drops the kernel's cached attributes of `ino` (not its pages), so
    /// its next stat, or read past the size it had, asks again. Safe from
    /// any request handler: the kernel takes no lock a request holds.
    fn invalidate_attr(&self, ino: INodeNo) {
        if let Some(notifier) = self.notifier.get()
            && let Err(error) = notifier.inval_inode(ino, -1, 0)
        {
            tracing::debug!("invalidating the attributes of inode {ino}: {error}");
        }
    }

    /// Clears the set-user-ID bit of the regular file at `path`, and its
    /// set-group-ID bit where group execute is set (without it the bit
    /// means mandatory locking, and Linux keeps it), as the kernel would
    /// on a write, truncate or chown by a process without CAP_FSETID;
    /// with FUSE_HANDLE_KILLPRIV_V2 it leaves that to this daemon.
    fn drop_set_id(&self, op: &str, ino: INodeNo, path: &str) -> Result<(), Errno> {
        let attr = self.core(op, path, self.plfs.stat(path))?;
        if attr.kind != FileKind::File {
            return Ok(());
        }
        let mut mode = attr.mode & !libc::S_ISUID;
        if mode & libc::S_IXGRP != 0 {
            mode &= !libc::S_ISGID;
        }
        if mode != attr.mode {
            self.core(op, path, self.plfs.chmod(path, mode))?;
            // The kernel's mode is now stale (after a write it does not
            // ask again by itself).
            self.invalidate_attr(ino);
        }
        Ok(())
    }

    /// The TTL of attributes the kernel is sent.
    fn attr_ttl(&self) -> Duration {
        self.options.attr_timeout
    }

    /// Closes every handle still open (the kernel does not always release
    /// them at unmount): indexes flushed, size records published, unlinked
    /// files removed. Returns how many were open.
    pub fn close_all(&self) -> usize {
        let open = lock(&self.files).drain();
        let count = open.len();
        for file in open {
            // Failures are logged by `finish`; shutdown goes on regardless.
            let _ = self.finish(&file);
        }
        lock(&self.dirs).drain();
        count
    }

    /// How a file is opened (never keep_cache: every open drops cached
    /// pages). Opens that can write bypass the page cache: each write(2)
    /// becomes one request, so one index record, however it is aligned
    /// (write-through of the page cache sends the partial first page of an
    /// unaligned write as a request of its own: two records per write),
    /// data is copied once less, and writers of one file run in parallel.
    /// The kernel drops cached pages a direct write overlaps, so cached
    /// readers on the node still see it. Read-write opens do so only where
    /// the kernel lets direct-I/O files be mmapped shared (its pages then
    /// written back and dropped around every direct request); elsewhere
    /// they keep the page cache so mmap works. Write-only opens cannot
    /// mmap or exec anyway. `-o direct_io` does the same for every open.
    fn open_flags(&self, flags: i32) -> FopenFlags {
        if self.options.writeback_cache && !self.options.direct_io {
            // Local writes keep the pages current, and other nodes' writes
            // are not looked for with this option (docs/POSIX.md).
            return FopenFlags::FOPEN_KEEP_CACHE;
        }
        let access = flags & libc::O_ACCMODE;
        let direct = self.options.direct_io
            || access == libc::O_WRONLY
            || (access == libc::O_RDWR && self.direct_io_mmap);
        if direct {
            FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
        } else if access == libc::O_RDONLY {
            // A read-only handle has nothing to flush: close(2) then waits
            // for no FLUSH request (one round trip less per open-read-close).
            FopenFlags::FOPEN_NOFLUSH
        } else {
            FopenFlags::empty()
        }
    }

    fn generation(&self) -> Generation {
        lock(&self.inodes).generation()
    }

    /// The mount-relative path of `ino`.
    /// The path a node names now. A regular file that lost its name (a
    /// rename replaced it) between the kernel's lookup and this request
    /// answers ESTALE: the kernel then looks the name up again once
    /// (LOOKUP_REVAL) and finds the file that replaced it, where ENOENT
    /// would tell an open(2) racing with a rename that the name is gone.
    fn path(&self, ino: INodeNo) -> Result<String, Errno> {
        let inodes = lock(&self.inodes);
        inodes.path(ino).ok_or(if inodes.kind(ino) == Some(FileKind::File) {
            Errno::ESTALE
        } else {
            Errno::ENOENT
        })
    }

    fn child_path(&self, parent: INodeNo, name: &str) -> Result<String, Errno> {
        Ok(join(&self.path(parent)?, name))
    }

    /// Maps a core error to its errno (the core's one table), logging it
    /// with the operation and path: backend trouble as a warning, the
    /// everyday refusals (ENOENT, EEXIST, …) at debug.
    fn fail(&self, op: &str, path: &str, error: &plfs::Error) -> Errno {
        match error.kind() {
            ErrorKind::Io | ErrorKind::Corrupt | ErrorKind::Unavailable | ErrorKind::Internal => {
                tracing::warn!("{op} {path}: {error}");
            }
            _ => tracing::debug!("{op} {path}: {error}"),
        }
        Errno::from_i32(error.errno())
    }

    fn core<T>(&self, op: &str, path: &str, result: plfs::Result<T>) -> Result<T, Errno> {
        result.map_err(|error| self.fail(op, path, &error))
    }

    /// Attributes of `path` as the kernel wants them for `ino`, noted as
    /// sent.
    fn attr(&self, op: &str, ino: INodeNo, path: &str) -> Result<FileAttr, Errno> {
        let attr = self.core(op, path, self.plfs.stat(path))?;
        let mut fuse = fuse_attr(ino, &attr);
        let mut inodes = lock(&self.inodes);
        if inodes.is_hidden(ino) {
            fuse.nlink = 0;
        }
        inodes.report_size(ino, fuse.size);
        Ok(fuse)
    }

    /// Looks `name` up in `parent` after a create or lookup, counting the
    /// kernel's new reference.
    fn entry(&self, op: &str, parent: INodeNo, name: &str, path: &str) -> Result<Entry, Errno> {
        let (attr, stand_in) = self.core(op, path, self.lookup_stat(op, path))?;
        let mut inodes = lock(&self.inodes);
        let ino = inodes.lookup(parent, name, attr.kind).ok_or(Errno::ENOENT)?;
        if !stand_in {
            inodes.report_size(ino, attr.size);
        }
        Ok(Entry {
            attr: fuse_attr(ino, &attr),
            attr_ttl: if stand_in { Duration::ZERO } else { self.attr_ttl() },
        })
    }

    /// Replies to a request that makes or finds a name.
    fn reply_entry(&self, reply: ReplyEntry, entry: Result<Entry, Errno>) {
        match entry {
            Ok(entry) => reply.entry_with_ttls(
                &entry.attr_ttl,
                &self.options.entry_timeout,
                &entry.attr,
                self.generation(),
            ),
            Err(errno) => reply.error(errno),
        }
    }

    /// `stat` for a lookup or a readdirplus entry, and whether the
    /// attributes are a stand-in. A damaged file (its container's access
    /// file lost or undecodable) gets stand-in attributes, so it stays
    /// listed and can be unlinked (the kernel looks a name up first);
    /// they are never cached, so its stat and open still fail with EIO,
    /// logged naming it.
    fn lookup_stat(&self, op: &str, path: &str) -> plfs::Result<(plfs::attr::FileAttr, bool)> {
        match self.plfs.stat(path) {
            Err(error)
                if error.kind() == ErrorKind::Corrupt && self.plfs.is_damaged_file(path).unwrap_or(false) =>
            {
                tracing::warn!("{op} {path}: {error} (listed, and removable, as a file whose stat fails)");
                let epoch = UNIX_EPOCH;
                let stand_in = plfs::attr::FileAttr {
                    kind: FileKind::File,
                    size: 0,
                    blocks: 0,
                    mode: 0,
                    uid: 0,
                    gid: 0,
                    nlink: 1,
                    atime: epoch,
                    mtime: epoch,
                    ctime: epoch,
                };
                Ok((stand_in, true))
            }
            other => other.map(|attr| (attr, false)),
        }
    }

    fn file(&self, fh: FileHandle) -> Result<Arc<OpenHandle>, Errno> {
        lock(&self.files).get(fh).ok_or(Errno::EBADF)
    }

    fn do_lookup(&self, parent: INodeNo, name: &OsStr) -> Result<Entry, Errno> {
        let name = component(name)?;
        if plfs::fs::is_reserved_name(name) {
            // Hidden from readdir, so hidden from lookup too.
            return Err(Errno::ENOENT);
        }
        let path = self.child_path(parent, name)?;
        self.entry("lookup", parent, name, &path)
    }

    /// Attributes of a node. A node a rename replaced answers for the file
    /// it still has open here while it can, else for the file now at its
    /// former name (what an open of it reaches, see `do_open`). With a
    /// handle (the kernel asks so when a read reaches its cached size) the
    /// size is the handle's own file's, whichever version that is.
    fn do_getattr(&self, ino: INodeNo, fh: Option<FileHandle>) -> Result<(FileAttr, Duration), Errno> {
        // Not across a rename or unlink: the kernel asks for attributes in
        // the middle of read(2) on an open descriptor (a read past its
        // cached size), and fails that read with our errno. A path taken
        // before an unlink hid the file, stat'ed after, is gone: ENOENT on
        // an open file (the churn test's last failure).
        let _namespace = self.namespace.read().unwrap_or_else(PoisonError::into_inner);
        let located = lock(&self.inodes).locate(ino);
        let mut attr = match located {
            Some(Located::Replaced { name, hidden }) => {
                let of_file =
                    |path: &str| self.plfs.stat(path).ok().filter(|attr| attr.kind == FileKind::File);
                let attr = match hidden.as_deref().and_then(of_file) {
                    Some(attr) => attr,
                    None => match self.plfs.stat(&name) {
                        Ok(attr) if attr.kind == FileKind::File => attr,
                        // Nothing at the name: gone, as on a local file
                        // system after the unlink (ESTALE, retried once by
                        // the kernel, reached programs under churn).
                        Err(error) if error.kind() == ErrorKind::NotFound => return Err(Errno::ENOENT),
                        // Something else now: the kernel looks the name up again.
                        _ => return Err(Errno::ESTALE),
                    },
                };
                fuse_attr(ino, &attr)
            }
            _ => {
                let path = self.path(ino)?;
                self.attr("getattr", ino, &path)?
            }
        };
        if let Some(file) = fh.and_then(|fh| lock(&self.files).get(fh))
            && file.ino == ino
            && let Ok(Ok(size)) = file.with(|handle| handle.size())
        {
            attr.size = size;
        }
        lock(&self.inodes).report_size(ino, attr.size);
        Ok((attr, self.attr_ttl()))
    }

    #[allow(clippy::too_many_arguments)]
    fn do_setattr(
        &self,
        caller: u32,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        fh: Option<FileHandle>,
    ) -> Result<(FileAttr, Duration), Errno> {
        let path = self.path(ino)?;
        let times = atime.is_some() || mtime.is_some();
        // Size first: a truncate moves mtime, and a caller setting both
        // (tar, rsync) wants its own mtime to win.
        if let Some(size) = size {
            let open = fh.and_then(|fh| lock(&self.files).get(fh));
            match open {
                Some(file) => self.core("truncate", &path, file.with(|handle| handle.truncate(size))?)?,
                None => self.core("truncate", &path, self.plfs.truncate(&path, size))?,
            }
            // CAP_FSETID taken as root (fuser does not pass the kernel's
            // FATTR_KILL_SUIDGID).
            if self.kill_set_id && caller != 0 {
                self.drop_set_id("truncate", ino, &path)?;
            }
        }
        if let Some(mode) = mode {
            self.core("chmod", &path, self.plfs.chmod(&path, mode & 0o7777))?;
        }
        // On a symlink these act on the link itself (lchown, utimensat with
        // AT_SYMLINK_NOFOLLOW), as the core does for links.
        if uid.is_some() || gid.is_some() {
            self.core("chown", &path, self.plfs.chown(&path, uid, gid))?;
            // Whoever asks: the kernel drops the bits at every chown of a
            // file, root's too.
            if self.kill_set_id {
                self.drop_set_id("chown", ino, &path)?;
            }
        }
        if times {
            let now = SystemTime::now();
            let resolve = |time: TimeOrNow| match time {
                TimeOrNow::SpecificTime(time) => time,
                TimeOrNow::Now => now,
            };
            self.core("utimens", &path, self.plfs.utime(&path, atime.map(resolve), mtime.map(resolve)))?;
        }
        let attr = self.attr("setattr", ino, &path)?;
        Ok((attr, self.attr_ttl()))
    }

    /// fallocate(2): mode 0 grows the file to `offset + length` as a
    /// truncate up would (plfs reserves no backend space ahead of writes, so
    /// a later write may still find a backend full); KEEP_SIZE alone changes
    /// nothing; other modes (punching or zeroing a range, collapsing,
    /// inserting) are EOPNOTSUPP, which glibc's posix_fallocate answers by
    /// writing zeros itself. The preload does the same. (It was ENOSYS, so
    /// `fallocate -l` failed and `posix_fallocate` wrote the zeros.)
    fn do_fallocate(
        &self,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
    ) -> Result<(), Errno> {
        if mode & !libc::FALLOC_FL_KEEP_SIZE != 0 {
            return Err(Errno::EOPNOTSUPP);
        }
        if length == 0 {
            return Err(Errno::EINVAL);
        }
        let end = offset.checked_add(length).filter(|&end| end <= i64::MAX as u64).ok_or(Errno::EFBIG)?;
        if mode & libc::FALLOC_FL_KEEP_SIZE != 0 {
            return Ok(());
        }
        let path = self.path(ino)?;
        let file = lock(&self.files).get(fh).ok_or(Errno::EBADF)?;
        let size = self.core("fallocate", &path, file.with(|handle| handle.size())?)?;
        if size < end {
            self.core("fallocate", &path, file.with(|handle| handle.truncate(end))?)?;
        }
        Ok(())
    }

    /// Who owns something `req` creates in `parent`: the caller, with the
    /// directory's group instead when the directory is set-group-ID (the
    /// kernel leaves this to the file system). Also says whether it was.
    fn creator(&self, req: &Request, parent: INodeNo) -> Result<(Owner, bool), Errno> {
        let dir = self.path(parent)?;
        let attr = self.core("create", &dir, self.plfs.stat(&dir))?;
        let setgid = attr.mode & libc::S_ISGID != 0;
        let gid = if setgid { attr.gid } else { req.gid() };
        Ok((Owner { uid: req.uid(), gid }, setgid))
    }

    /// A name for something being created (the core refuses plfs's
    /// reserved names, for every interface).
    fn new_child(&self, parent: INodeNo, name: &OsStr) -> Result<(String, String), Errno> {
        let name = component(name)?;
        let path = self.child_path(parent, name)?;
        Ok((name.to_owned(), path))
    }

    fn do_mknod(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32) -> Result<Entry, Errno> {
        // plfs files are containers; there is nowhere to keep a device
        // number or a FIFO. EPERM is mknod(2)'s "type not supported".
        if mode & libc::S_IFMT != libc::S_IFREG {
            return Err(Errno::EPERM);
        }
        let (name, path) = self.new_child(parent, name)?;
        let flags = open::OpenFlags::WRONLY.create().exclusive();
        let (owner, _) = self.creator(req, parent)?;
        let handle = self.core(
            "mknod",
            &path,
            self.plfs.open_as(&path, flags, mode & 0o7777, self.writer, Some(owner)),
        )?;
        self.core("mknod", &path, handle.close())?;
        self.entry("mknod", parent, &name, &path)
    }

    fn do_mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32) -> Result<Entry, Errno> {
        let (name, path) = self.new_child(parent, name)?;
        let (owner, setgid) = self.creator(req, parent)?;
        // A directory made in a set-group-ID directory is one too.
        let mode = if setgid { mode | libc::S_ISGID } else { mode };
        self.core("mkdir", &path, self.plfs.mkdir_as(&path, mode & 0o7777, Some(owner)))?;
        self.entry("mkdir", parent, &name, &path)
    }

    fn do_symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        target: &Path,
    ) -> Result<Entry, Errno> {
        let (name, path) = self.new_child(parent, name)?;
        let target = target.to_str().ok_or(Errno::EINVAL)?;
        let (owner, _) = self.creator(req, parent)?;
        self.core("symlink", &path, self.plfs.symlink_as(target, &path, Some(owner)))?;
        self.entry("symlink", parent, &name, &path)
    }

    fn do_readlink(&self, ino: INodeNo) -> Result<String, Errno> {
        let path = self.path(ino)?;
        self.core("readlink", &path, self.plfs.readlink(&path))
    }

    /// Moves a file that is about to lose its name but is still open to a
    /// hidden name in the same directory, so its handles keep working
    /// until the last one closes (POSIX unlink-while-open). Returns the
    /// node and its hidden path, or None if the file is not open here.
    fn hide_open_file(
        &self,
        parent: INodeNo,
        name: &str,
        path: &str,
    ) -> Result<Option<(INodeNo, String)>, Errno> {
        let ino = {
            let inodes = lock(&self.inodes);
            match inodes.peek(parent, name) {
                Some(ino) if inodes.opens(ino) > 0 && inodes.kind(ino) == Some(FileKind::File) => ino,
                _ => return Ok(None),
            }
        };
        let count = self.hidden_count.fetch_add(1, Ordering::Relaxed);
        // Hidden from readdir, and what `plfs recover` clears if the daemon
        // dies before the last close.
        let hidden = self.core("unlink (open file)", path, self.plfs.hide(path, (ino.0 << 20) ^ count))?;
        lock(&self.inodes).hide(parent, name, hidden.clone());
        Ok(Some((ino, hidden)))
    }

    fn do_unlink(&self, parent: INodeNo, name: &OsStr) -> Result<(), Errno> {
        let name = component(name)?;
        let _namespace = self.namespace.write().unwrap_or_else(PoisonError::into_inner);
        let path = self.child_path(parent, name)?;
        if self.hide_open_file(parent, name, &path)?.is_none() {
            self.core("unlink", &path, self.plfs.unlink(&path))?;
            lock(&self.inodes).unlinked(parent, name);
        }
        Ok(())
    }

    fn do_rmdir(&self, parent: INodeNo, name: &OsStr) -> Result<(), Errno> {
        let name = component(name)?;
        let path = self.child_path(parent, name)?;
        self.core("rmdir", &path, self.plfs.rmdir(&path))?;
        lock(&self.inodes).detach(parent, name);
        Ok(())
    }

    fn do_rename(
        &self,
        parent: INodeNo,
        name: &OsStr,
        new_parent: INodeNo,
        new_name: &OsStr,
        flags: RenameFlags,
    ) -> Result<(), Errno> {
        // RENAME_EXCHANGE would need both renames to happen at once, which
        // plfs's per-backend renames cannot promise; WHITEOUT is overlayfs's.
        if !(flags - RenameFlags::RENAME_NOREPLACE).is_empty() {
            tracing::debug!("rename: flags {flags:?} not supported");
            return Err(Errno::EINVAL);
        }
        let name = component(name)?;
        let _namespace = self.namespace.write().unwrap_or_else(PoisonError::into_inner);
        let from = self.child_path(parent, name)?;
        let (new_name, to) = self.new_child(new_parent, new_name)?;
        if flags.contains(RenameFlags::RENAME_NOREPLACE) {
            self.core("rename", &from, self.plfs.rename_noreplace(&from, &to))?;
        } else if let Some(hidden) = self.core("rename", &from, self.plfs.rename_keep_replaced(&from, &to))? {
            // A replaced file open here lives on at the hidden path the
            // core returns until its last close; a failed rename leaves it
            // where it was.
            lock(&self.inodes).hide_replaced(new_parent, &new_name, hidden);
        }
        lock(&self.inodes).rename(parent, name, new_parent, &new_name);
        Ok(())
    }

    /// Opens the file of `ino`. The node counts the open before its path
    /// is taken, so the last close of an unlinked file cannot remove it
    /// from under an open reaching it. A node whose name a rename gave to
    /// another file (the kernel still routes an open(2) of the name to it
    /// until the rename's reply moves its dentry) opens the file now at
    /// that name: a reader never gets a version older than one it has
    /// already seen, nor a replaced file being removed. Such an open counts
    /// on the node now at the name (an unlink of it must find the file
    /// open), and is direct I/O, since the kernel's inode may hold another
    /// version's size and pages.
    fn do_open(&self, ino: INodeNo, flags: i32) -> Result<(FileHandle, FopenFlags), Errno> {
        let _namespace = self.namespace.read().unwrap_or_else(PoisonError::into_inner);
        let opened = lock(&self.inodes).open(ino);
        let (counted, path, fopen) = match opened {
            Some((counted, Located::Named(path) | Located::Hidden(path))) => {
                (counted, path, self.open_flags(flags))
            }
            Some((counted, Located::Replaced { name, .. })) => {
                (counted, name, self.open_flags(flags) | FopenFlags::FOPEN_DIRECT_IO)
            }
            // Replaced and gone: the kernel looks the name up again.
            None if lock(&self.inodes).kind(ino) == Some(FileKind::File) => return Err(Errno::ESTALE),
            None => return Err(Errno::ENOENT),
        };
        let flags = self.core_open_flags(flags);
        let opened = open::OpenFlags::from_posix(flags)
            .and_then(|open_flags| self.plfs.open_as(&path, open_flags, 0, self.writer, None));
        let handle = match opened {
            Ok(handle) => handle,
            Err(error) => {
                self.unopened(counted);
                return Err(self.fail("open", &path, &error));
            }
        };
        if flags & libc::O_ACCMODE != libc::O_WRONLY {
            self.check_reported_size(counted, &path, &handle);
        }
        let fh = self.register(counted, handle, flags)?;
        Ok((fh, fopen))
    }

    /// Close-to-open with cached attributes: an open for reading finds the
    /// file's size as plfs knows it now, and when the kernel last got
    /// another (another node, or the library, wrote or truncated it since),
    /// drops the kernel's attributes, so a read past the old size and the
    /// next stat ask again. The open drops the cached pages itself (no
    /// keep_cache). Write-only opens skip it: nothing they do reads the
    /// kernel's size, and the size can cost a read of the file's metadata.
    fn check_reported_size(&self, ino: INodeNo, path: &str, handle: &plfs::fs::FileHandle) {
        let size = match handle.size() {
            Ok(size) => size,
            Err(error) => {
                // The read that follows reports it; the kernel's copy is
                // suspect either way.
                self.fail("open (size)", path, &error);
                return self.invalidate_attr(ino);
            }
        };
        if lock(&self.inodes).reported_size(ino) != Some(size) {
            self.invalidate_attr(ino);
        }
    }

    /// The flags a FUSE open asks the core for. With the writeback cache
    /// the kernel reads the rest of a partly written page through a
    /// write-only open too, and places O_APPEND writes itself (it owns the
    /// size): so write-only becomes read-write and O_APPEND is dropped.
    fn core_open_flags(&self, flags: i32) -> i32 {
        if !self.options.writeback_cache {
            return flags;
        }
        let flags = flags & !libc::O_APPEND;
        if flags & libc::O_ACCMODE == libc::O_WRONLY {
            (flags & !libc::O_ACCMODE) | libc::O_RDWR
        } else {
            flags
        }
    }

    /// Gives back an open counted on `ino` that did not happen, removing an
    /// unlinked file whose last handle closed meanwhile.
    fn unopened(&self, ino: INodeNo) {
        let doomed = lock(&self.inodes).released(ino);
        if let Some(hidden) = doomed
            && let Err(error) = self.plfs.unlink(&hidden)
        {
            self.fail("release (unlinked file)", &hidden, &error);
        }
    }

    /// Registers a handle whose open `ino` has counted already.
    fn register(&self, ino: INodeNo, handle: plfs::fs::FileHandle, flags: i32) -> Result<FileHandle, Errno> {
        let open = OpenHandle { ino, handle: RwLock::new(Some(handle)), append: flags & libc::O_APPEND != 0 };
        // A new open asks the backend about file capabilities again.
        self.capabilities.recheck(ino);
        let Some((fh, _)) = lock(&self.files).insert(open) else {
            // The handle closes as the OpenHandle drops.
            tracing::warn!("open: {} handles already open", crate::handles::HANDLES_MAX);
            self.unopened(ino);
            return Err(Errno::ENFILE);
        };
        Ok(fh)
    }

    fn do_create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        flags: i32,
    ) -> Result<(Entry, FileHandle), Errno> {
        let (name, path) = self.new_child(parent, name)?;
        // Counted open before an unlink of the new name can look.
        let _namespace = self.namespace.read().unwrap_or_else(PoisonError::into_inner);
        let flags = self.core_open_flags(flags);
        let open_flags = open::OpenFlags::from_posix(flags | libc::O_CREAT)
            .map_err(|error| self.fail("create", &path, &error))?;
        let (owner, _) = self.creator(req, parent)?;
        let handle = self.core(
            "create",
            &path,
            self.plfs.open_as(&path, open_flags, mode & 0o7777, self.writer, Some(owner)),
        )?;
        let entry = match self.entry("create", parent, &name, &path) {
            Ok(entry) => entry,
            Err(errno) => {
                drop(handle.close());
                return Err(errno);
            }
        };
        lock(&self.inodes).opened(entry.attr.ino);
        let fh = self.register(entry.attr.ino, handle, flags)?;
        Ok((entry, fh))
    }

    fn do_read(&self, fh: FileHandle, offset: u64, size: u32, reply: ReplyData) {
        // Not across a rename or unlink: while one moves a replaced file's
        // open handles to its hidden name, the storage has switched before
        // the handles learn their new path, and a read in between would
        // load the new file's index (wrong bytes) or chase its logs as the
        // name keeps changing (ENOENT on an open descriptor).
        let _namespace = self.namespace.read().unwrap_or_else(PoisonError::into_inner);
        let file = match self.file(fh) {
            Ok(file) => file,
            Err(errno) => return reply.error(errno),
        };
        READ_BUFFER.with_borrow_mut(|buffer| {
            buffer.resize(size as usize, 0);
            match file.with(|handle| handle.read(buffer, offset)) {
                Ok(Ok(count)) => reply.data(&buffer[..count]),
                Ok(Err(error)) => reply.error(self.fail("read", &self.path_or_ino(file.ino), &error)),
                Err(errno) => reply.error(errno),
            }
            // A 1 MiB buffer per request thread is kept; anything larger
            // (max_read raised by hand) is given back.
            if buffer.capacity() > READ_BUFFER_KEPT_BYTES {
                *buffer = Vec::new();
            }
        });
    }

    fn path_or_ino(&self, ino: INodeNo) -> String {
        self.path(ino).unwrap_or_else(|_| format!("inode {ino}"))
    }

    /// `kill_set_id`: the kernel's FUSE_WRITE_KILL_SUIDGID, a write by a
    /// process without CAP_FSETID.
    fn do_write(&self, fh: FileHandle, offset: u64, data: &[u8], kill_set_id: bool) -> Result<u32, Errno> {
        // Not across a rename or unlink, as for reads: a writer's first
        // write makes its logs under the file's current path.
        let _namespace = self.namespace.read().unwrap_or_else(PoisonError::into_inner);
        let file = self.file(fh)?;
        // Before the data, as the kernel does it: a write that fails here
        // has written nothing.
        if kill_set_id && self.kill_set_id {
            self.drop_set_id("write", file.ino, &self.path(file.ino)?)?;
        }
        // Every handle was opened for the daemon's writer, also for the
        // kernel's page-cache write-back (mmap), which comes from no process.
        let written = file.with(|handle| {
            // O_APPEND: the end as plfs knows it, which includes other
            // nodes' closed writes the kernel's cached size may not.
            let placed = if file.append { handle.size()? } else { offset };
            Ok((placed, handle.write(data, placed)?))
        })?;
        let (placed, written) =
            written.map_err(|error| self.fail("write", &self.path_or_ino(file.ino), &error))?;
        if placed != offset {
            // Not where the kernel thinks: its cached size is wrong. (After
            // any other write the kernel marks its size stale itself.)
            self.invalidate_attr(file.ino);
        }
        u32::try_from(written).map_err(|_| Errno::EIO)
    }

    fn do_flush(&self, fh: FileHandle) -> Result<(), Errno> {
        let file = self.file(fh)?;
        file.with(|handle| handle.flush())?
            .map_err(|error| self.fail("flush", &self.path_or_ino(file.ino), &error))
    }

    fn do_fsync(&self, fh: FileHandle) -> Result<(), Errno> {
        let file = self.file(fh)?;
        file.with(|handle| handle.sync())?
            .map_err(|error| self.fail("fsync", &self.path_or_ino(file.ino), &error))
    }

    fn do_release(&self, fh: FileHandle) -> Result<(), Errno> {
        // An unlink or rename that finds the file open must find it still
        // open when it hides it, or nothing would remove the hidden name.
        let _namespace = self.namespace.read().unwrap_or_else(PoisonError::into_inner);
        let file = lock(&self.files).remove(fh).ok_or(Errno::EBADF)?;
        self.finish(&file)
    }

    /// Closes a released handle and, when it was the last handle of an
    /// unlinked file, removes the file.
    fn finish(&self, file: &OpenHandle) -> Result<(), Errno> {
        let path = self.path_or_ino(file.ino);
        let closed = file.close().map_err(|error| self.fail("release", &path, &error));
        let doomed = lock(&self.inodes).released(file.ino);
        if let Some(hidden) = doomed
            && let Err(error) = self.plfs.unlink(&hidden)
        {
            self.fail("release (unlinked file)", &hidden, &error);
        }
        closed
    }

    /// The listing is taken by the first readdir (see `DirListing`); the
    /// kernel checked the directory's kind and modes before asking.
    fn do_opendir(&self, ino: INodeNo) -> Result<FileHandle, Errno> {
        self.path(ino)?;
        let parent = lock(&self.inodes).parent(ino).unwrap_or(ROOT);
        let listing = DirListing::new(ino, parent);
        let (fh, _) = lock(&self.dirs).insert(listing).ok_or(Errno::ENFILE)?;
        Ok(fh)
    }

    /// The directory's entries now, for a listing read again from its start.
    fn relist(&self, listing: &DirListing) -> Result<Vec<DirEntryInfo>, Errno> {
        let path = self.path(listing.ino)?;
        self.core("readdir", &path, self.plfs.readdir(&path))
    }

    fn do_readdir(&self, fh: FileHandle, offset: u64, reply: &mut ReplyDirectory) -> Result<(), Errno> {
        let listing = lock(&self.dirs).get(fh).ok_or(Errno::EBADF)?;
        let entries = listing.snapshot(offset, || self.relist(&listing))?;
        let mut index = usize::try_from(offset).map_err(|_| Errno::EINVAL)?;
        while let Some((name, kind)) = DirListing::entry(&entries, index) {
            let ino = match index {
                0 => listing.ino,
                1 => listing.parent,
                _ => lock(&self.inodes)
                    .peek(listing.ino, name)
                    .unwrap_or_else(|| unknown_ino(listing.ino, name)),
            };
            if reply.add(ino, index as u64 + 1, file_type(kind), name) {
                break;
            }
            index += 1;
        }
        Ok(())
    }

    fn do_readdirplus(
        &self,
        fh: FileHandle,
        offset: u64,
        reply: &mut ReplyDirectoryPlus,
    ) -> Result<(), Errno> {
        let listing = lock(&self.dirs).get(fh).ok_or(Errno::EBADF)?;
        let entries = listing.snapshot(offset, || self.relist(&listing))?;
        let dir_path = self.path(listing.ino)?;
        let generation = self.generation();
        let mut index = usize::try_from(offset).map_err(|_| Errno::EINVAL)?;
        let mut dir_attr = None;
        while let Some((name, _)) = DirListing::entry(&entries, index) {
            let next = index as u64 + 1;
            index += 1;
            if name == "." || name == ".." {
                // The kernel takes no reference for these and ignores their
                // attributes; the directory's own do.
                let attr = match &dir_attr {
                    Some(attr) => *attr,
                    None => *dir_attr.insert(self.attr("readdirplus", listing.ino, &dir_path)?),
                };
                let ino = if name == "." { listing.ino } else { listing.parent };
                if reply.add(ino, next, name, &self.attr_ttl(), &FileAttr { ino, ..attr }, generation) {
                    break;
                }
                continue;
            }
            let path = join(&dir_path, name);
            let (attr, stand_in) = match self.lookup_stat("readdirplus", &path) {
                Ok(found) => found,
                // Gone since opendir: leave it out, as a fresh listing would.
                Err(error) if error.kind() == ErrorKind::NotFound => continue,
                Err(error) => return Err(self.fail("readdirplus", &path, &error)),
            };
            let ino = {
                let mut inodes = lock(&self.inodes);
                let Some(ino) = inodes.lookup(listing.ino, name, attr.kind) else {
                    return Err(Errno::ENOENT);
                };
                if !stand_in {
                    inodes.report_size(ino, attr.size);
                }
                ino
            };
            let fuse = fuse_attr(ino, &attr);
            let ttl = if stand_in { Duration::ZERO } else { self.attr_ttl() };
            if reply.add(ino, next, name, &ttl, &fuse, generation) {
                // Not sent, so the kernel holds no reference for it.
                lock(&self.inodes).forget(ino, 1);
                break;
            }
        }
        Ok(())
    }

    fn do_setxattr(
        &self,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
    ) -> Result<(), Errno> {
        if position != 0 {
            return Err(Errno::EINVAL);
        }
        let mode = match flags {
            0 => XattrMode::Any,
            libc::XATTR_CREATE => XattrMode::Create,
            libc::XATTR_REPLACE => XattrMode::Replace,
            _ => return Err(Errno::EINVAL),
        };
        if value.len() > plfs::xattr::VALUE_MAX_BYTES {
            return Err(Errno::E2BIG);
        }
        let name = name.to_str().ok_or(Errno::EINVAL)?;
        if name.starts_with("system.") {
            // POSIX ACLs and other system attributes mean something to the
            // kernel; stored as plain values they would be shown (`ls`'s
            // "+") but never enforced, and `cp -a` would set an ACL in
            // place of the mode bits. Refused, tools fall back to chmod.
            return Err(Errno::ENOTSUP);
        }
        let path = self.path(ino)?;
        self.capabilities.recheck(ino);
        self.core("setxattr", &path, self.plfs.set_xattr(&path, name, value, mode))
    }

    fn do_getxattr(&self, ino: INodeNo, name: &OsStr) -> Result<Vec<u8>, Errno> {
        let name = name.to_str().ok_or(Errno::EINVAL)?;
        let capability = name == capability::NAME;
        if capability && self.capabilities.is_absent(ino) {
            // Counted by a test: a cached write(2) used to ask this each time.
            tracing::trace!("getxattr inode {ino}: {name} absent (remembered)");
            return Err(Errno::NO_XATTR);
        }
        let path = self.path(ino)?;
        match self.plfs.get_xattr(&path, name) {
            Ok(value) => Ok(value),
            Err(error) => {
                if capability && error.kind() == ErrorKind::NoAttribute {
                    self.capabilities.note_absent(ino);
                }
                Err(self.fail("getxattr", &path, &error))
            }
        }
    }

    fn do_listxattr(&self, ino: INodeNo) -> Result<Vec<u8>, Errno> {
        let path = self.path(ino)?;
        let names = self.core("listxattr", &path, self.plfs.list_xattrs(&path))?;
        let mut list = Vec::with_capacity(names.iter().map(|name| name.len() + 1).sum());
        for name in names {
            list.extend_from_slice(name.as_bytes());
            list.push(0);
        }
        Ok(list)
    }

    fn do_removexattr(&self, ino: INodeNo, name: &OsStr) -> Result<(), Errno> {
        let name = name.to_str().ok_or(Errno::EINVAL)?;
        let path = self.path(ino)?;
        self.capabilities.recheck(ino);
        self.core("removexattr", &path, self.plfs.remove_xattr(&path, name))
    }

    fn do_access(&self, req: &Request, ino: INodeNo, mask: AccessFlags) -> Result<(), Errno> {
        let path = self.path(ino)?;
        let who = Credentials { uid: req.uid(), gid: req.gid(), groups: process::groups(req.pid()) };
        self.core("access", &path, self.plfs.access(&path, mask.bits() as u32, &who))
    }
}

/// Per request thread: the buffer reads land in before they are sent.
const READ_BUFFER_KEPT_BYTES: usize = 1 << 20;

thread_local! {
    static READ_BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Replies to an xattr request under the size-probe protocol: size 0 asks
/// how big the value is, a buffer too small gets ERANGE.
fn reply_xattr(reply: ReplyXattr, size: u32, value: &[u8]) {
    let Ok(length) = u32::try_from(value.len()) else { return reply.error(Errno::E2BIG) };
    if size == 0 {
        reply.size(length);
    } else if length > size {
        reply.error(Errno::ERANGE);
    } else {
        reply.data(value);
    }
}

/// A file name from the kernel as the core takes it.
fn component(name: &OsStr) -> Result<&str, Errno> {
    if name.as_bytes().len() > NAME_MAX_BYTES {
        return Err(Errno::ENAMETOOLONG);
    }
    // The core's paths are UTF-8 strings.
    name.to_str().ok_or(Errno::EINVAL)
}

fn join(dir: &str, name: &str) -> String {
    if dir == "/" { format!("/{name}") } else { format!("{dir}/{name}") }
}

/// A stable stand-in inode number for a readdir entry the kernel has not
/// looked up (plain readdir takes no reference, so none is allocated).
fn unknown_ino(parent: INodeNo, name: &str) -> INodeNo {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (parent.0, name).hash(&mut hasher);
    INodeNo(hasher.finish() | UNKNOWN_INO_BIT)
}

fn file_type(kind: FileKind) -> FileType {
    match kind {
        FileKind::File => FileType::RegularFile,
        FileKind::Directory => FileType::Directory,
        FileKind::Symlink => FileType::Symlink,
    }
}

/// The core's attributes as FUSE sends them.
fn fuse_attr(ino: INodeNo, attr: &plfs::attr::FileAttr) -> FileAttr {
    FileAttr {
        ino,
        size: attr.size,
        blocks: attr.blocks,
        atime: attr.atime,
        mtime: attr.mtime,
        ctime: attr.ctime,
        crtime: attr.ctime,
        kind: file_type(attr.kind),
        perm: (attr.mode & 0o7777) as u16,
        nlink: attr.nlink,
        uid: attr.uid,
        gid: attr.gid,
        rdev: 0,
        blksize: BLOCK_SIZE_HINT,
        flags: 0,
    }
}

/// statfs figures from the configured `statfs` backend (its store opened
/// on first use, on the helper thread, since opening may hang too), else
/// from the core.
fn space_source(plfs: &Plfs, location: Option<BackendLocation>) -> Arc<SpaceSource> {
    match location {
        None => {
            let plfs = plfs.clone();
            Arc::new(move || plfs.statfs())
        }
        Some(location) => {
            let store: Mutex<Option<SharedStore>> = Mutex::new(None);
            Arc::new(move || {
                let mut store = lock(&store);
                let opened = match store.as_ref() {
                    Some(opened) => opened.clone(),
                    None => store.insert(plfs::fs::open_store(&location)?).clone(),
                };
                drop(store);
                opened.space()
            })
        }
    }
}

impl Filesystem for PlfsFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Big writes, async reads and max_pages are in fuser's defaults.
        // Readdirplus lets `ls -l` take one round trip per page of entries,
        // and parallel dirops let lookups in one directory run at once.
        //
        // Not FUSE_ATOMIC_O_TRUNC, although O_TRUNC inside the open would
        // save a setattr: the kernel sends that open before it checks that
        // the file may be truncated at all. An `O_RDONLY | O_TRUNC` open of
        // a program that is running emptied it here, and only then did the
        // kernel answer ETXTBSY (the program died of SIGBUS). Without it the
        // kernel makes every check first and truncates with a setattr.
        let wanted = [
            InitFlags::FUSE_DO_READDIRPLUS,
            InitFlags::FUSE_READDIRPLUS_AUTO,
            InitFlags::FUSE_PARALLEL_DIROPS,
        ];
        for flag in wanted {
            if let Err(missing) = config.add_capabilities(flag) {
                tracing::info!("kernel lacks FUSE capability {missing:?}");
            }
        }
        if self.options.writeback_cache && config.add_capabilities(InitFlags::FUSE_WRITEBACK_CACHE).is_err() {
            tracing::warn!("kernel lacks FUSE_WRITEBACK_CACHE: -o writeback_cache ignored");
            self.options.writeback_cache = false;
        }
        // Every cached write(2) asks whether set-ID bits or a file
        // capability must go (file_remove_privs): a GETXATTR of
        // security.capability, one synchronous round trip per write, taken
        // under the inode lock, so it serialises every local writer of a
        // file. With KILLPRIV_V2 the kernel marks a file checked (S_NOSEC)
        // until its attributes are next refreshed, and sends writes that
        // must clear the bits flagged; this daemon then clears them (see
        // `drop_set_id`). Only the writeback cache takes the cached write
        // path for every write; the default mount's writes are direct and
        // never ask.
        if self.options.writeback_cache {
            self.kill_set_id = config.add_capabilities(InitFlags::FUSE_HANDLE_KILLPRIV_V2).is_ok();
            if !self.kill_set_id {
                tracing::info!(
                    "kernel lacks FUSE_HANDLE_KILLPRIV_V2: every cached write asks for security.capability"
                );
            }
        }
        // Read-write opens go direct only if they can still be mmapped
        // (fsx, databases); see `open_flags`.
        self.direct_io_mmap = config.add_capabilities(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP).is_ok();
        if !self.direct_io_mmap {
            tracing::info!("kernel lacks FUSE_DIRECT_IO_ALLOW_MMAP: read-write opens use the page cache");
        }
        if let Err(nearest) = config.set_max_write(self.options.max_write_bytes) {
            let _ = config.set_max_write(nearest);
        }
        // As much readahead as the kernel offers at init; the mount raises
        // the device's read_ahead_kb afterwards (see mount::tune_readahead).
        if let Err(offered) = config.set_max_readahead(u32::MAX) {
            let _ = config.set_max_readahead(offered);
        }
        if let Err(nearest) = config.set_max_background(self.options.max_background) {
            let _ = config.set_max_background(nearest);
        }
        tracing::info!(
            "FUSE ABI {:?}; max_write asked {} bytes (the kernel caps it at fs.fuse.max_pages_limit pages)",
            config.kernel_abi(),
            self.options.max_write_bytes
        );
        Ok(())
    }

    fn destroy(&mut self) {
        let open = self.close_all();
        if open > 0 {
            tracing::info!("closed {open} file handles left open at unmount");
        }
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.reply_entry(reply, self.do_lookup(parent, name));
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        lock(&self.inodes).forget(ino, nlookup);
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        match self.do_fallocate(ino, fh, offset, length, mode) {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.do_getattr(ino, fh) {
            Ok((attr, ttl)) => reply.attr(&ttl, &attr),
            Err(errno) => reply.error(errno),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        match self.do_setattr(req.uid(), ino, mode, uid, gid, size, atime, mtime, fh) {
            Ok((attr, ttl)) => reply.attr(&ttl, &attr),
            Err(errno) => reply.error(errno),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.do_readlink(ino) {
            Ok(target) => reply.data(target.as_bytes()),
            Err(errno) => reply.error(errno),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        self.reply_entry(reply, self.do_mknod(req, parent, name, mode));
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, _umask: u32, reply: ReplyEntry) {
        self.reply_entry(reply, self.do_mkdir(req, parent, name, mode));
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.do_unlink(parent, name) {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.do_rmdir(parent, name) {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        self.reply_entry(reply, self.do_symlink(req, parent, link_name, target));
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        match self.do_rename(parent, name, newparent, newname, flags) {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    fn link(&self, _req: &Request, _ino: INodeNo, _newparent: INodeNo, _newname: &OsStr, reply: ReplyEntry) {
        // A plfs file is a container directory on each backend; there is no
        // second name for it to have.
        reply.error(Errno::EPERM);
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.do_open(ino, flags.0) {
            Ok((fh, fopen)) => reply.opened(fh, fopen),
            Err(errno) => reply.error(errno),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        self.do_read(fh, offset, size, reply);
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let kill_set_id = write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID);
        match self.do_write(fh, offset, data, kill_set_id) {
            Ok(written) => reply.written(written),
            Err(errno) => reply.error(errno),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        match self.do_flush(fh) {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        match self.do_release(fh) {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        match self.do_fsync(fh) {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.do_opendir(ino) {
            Ok(fh) => reply.opened(fh, FopenFlags::empty()),
            Err(errno) => reply.error(errno),
        }
    }

    fn readdir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        match self.do_readdir(fh, offset, &mut reply) {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    fn readdirplus(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        match self.do_readdirplus(fh, offset, &mut reply) {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        lock(&self.dirs).remove(fh);
        reply.ok();
    }

    fn fsyncdir(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        // Directory changes are made by the core's store calls as they
        // happen; there is nothing buffered to sync.
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.space.query() {
            Ok(info) => {
                let block_size = u32::try_from(info.block_size).unwrap_or(u32::MAX);
                let name_max = u32::try_from(info.name_max).unwrap_or(NAME_MAX_BYTES as u32);
                reply.statfs(
                    info.blocks,
                    info.blocks_free,
                    info.blocks_available,
                    info.files,
                    info.files_free,
                    block_size,
                    name_max,
                    block_size,
                );
            }
            Err(errno) => reply.error(errno),
        }
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
        reply: ReplyEmpty,
    ) {
        match self.do_setxattr(ino, name, value, flags, position) {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        match self.do_getxattr(ino, name) {
            Ok(value) => reply_xattr(reply, size, &value),
            Err(errno) => reply.error(errno),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        match self.do_listxattr(ino) {
            Ok(list) => reply_xattr(reply, size, &list),
            Err(errno) => reply.error(errno),
        }
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.do_removexattr(ino, name) {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        // Only reached without default_permissions (the kernel checks mode
        // bits itself with it), e.g. a library user mounting without it.
        match self.do_access(req, ino, mask) {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        match self.do_create(req, parent, name, mode, flags) {
            Ok((entry, fh)) => {
                // One TTL for the name and the attributes here: the shorter.
                let ttl = entry.attr_ttl.min(self.options.entry_timeout);
                reply.created(&ttl, &entry.attr, self.generation(), fh, self.open_flags(flags))
            }
            Err(errno) => reply.error(errno),
        }
    }
}
