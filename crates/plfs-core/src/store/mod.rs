//! The I/O-store seam: everything plfs keeps on a backend goes through [`Store`].
//!
//! The trait is shaped so that append-only and directory-less stores can
//! implement it without emulating POSIX: logs are written only through
//! [`AppendWriter`] (HDFS has no pwrite), whole small files are published
//! atomically with [`Store::create_new`] / [`Store::replace`] (S3 conditional
//! puts), and [`Store::create_dir_all`] is `mkdir -p` (HDFS `mkdirs`, a no-op
//! on S3). How each call maps onto HDFS and S3 is in docs/ARCHITECTURE.md.
//!
//! Wrappers ([`faulty::FaultyStore`], [`counting::CountingStore`]) decorate any
//! store; every store and wrapper runs the one suite in `conformance`
//! (test support, with `test_server`: compiled for this crate's tests and
//! under the `testing` feature, never into the production library).

#[cfg(any(test, feature = "testing"))]
pub mod conformance;
pub mod counting;
pub mod faulty;
#[cfg(feature = "hdfs")]
pub mod hdfs;
#[cfg(test)]
pub mod hooked;
pub mod memory;
pub mod path;
pub mod posix;
#[cfg(feature = "s3")]
pub mod s3;
#[cfg(any(test, feature = "testing"))]
pub mod test_server;

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use crate::error::{Error, ErrorKind, Result};

pub use path::StorePath;

/// What a store can do beyond the required calls. Callers branch on these,
/// never on the concrete store type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Directories exist as objects of their own (false on S3: prefixes).
    pub directories: bool,
    /// Mode bits are stored and returned by `metadata`.
    pub modes: bool,
    /// Owner uid/gid can be set and are returned by `metadata`.
    pub owners: bool,
    /// Access and modification times can be set.
    pub times: bool,
    /// Symbolic links are stored natively.
    pub symlinks: bool,
    /// `rename` of a directory is a single atomic step.
    pub atomic_dir_rename: bool,
    /// [`Store::exchange`] works: two entries swap places in one atomic
    /// step (Linux `renameat2(RENAME_EXCHANGE)`). A logical rename onto an
    /// existing file switches containers with it, so readers of the target
    /// see the old file or the new one, never neither.
    pub exchange: bool,
    /// [`Store::open_write`] works: bytes can be written at any offset and
    /// an object's length set (pwrite, ftruncate). False on HDFS and S3,
    /// whose objects are written once, front to back.
    pub random_writes: bool,
    /// An [`AppendWriter`] keeps writing to the object it created after
    /// that object's name was removed, and its later appends never bring
    /// the name back (POSIX descriptors). The closed summary (FORMAT.md
    /// §6.1) is sealed by a late append and is only made where this holds.
    pub unlinked_appends: bool,
}

impl Capabilities {
    pub const ALL: Capabilities = Capabilities {
        directories: true,
        modes: true,
        owners: true,
        times: true,
        symlinks: true,
        atomic_dir_rename: true,
        exchange: true,
        random_writes: true,
        unlinked_appends: true,
    };
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Directory,
    Symlink,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub kind: EntryKind,
}

/// What a store knows about one object. Fields a store cannot provide are None.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    pub kind: EntryKind,
    pub size: u64,
    /// Permission bits only (no file-type bits).
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub atime: Option<SystemTime>,
    pub mtime: Option<SystemTime>,
    pub ctime: Option<SystemTime>,
}

/// Capacity figures for statfs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SpaceInfo {
    pub block_size: u64,
    pub blocks: u64,
    pub blocks_free: u64,
    pub blocks_available: u64,
    pub files: u64,
    pub files_free: u64,
    pub name_max: u64,
}

/// Permission bits and owner for a piece plfs creates (a container's
/// directories and files; docs/FORMAT.md §1, "Permissions of the pieces").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Protection {
    /// The exact permission bits (`& 0o7777`), not reduced by any umask.
    pub mode: u32,
    /// Owner to give the piece; `None` keeps the creating process's.
    pub uid: Option<u32>,
    /// Group to give the piece; `None` keeps the one the store chose.
    pub gid: Option<u32>,
}

impl Protection {
    /// Just a mode, owned as the store makes it.
    pub fn mode(mode: u32) -> Protection {
        Protection { mode, uid: None, gid: None }
    }

    fn changes_owner(&self) -> bool {
        self.uid.is_some() || self.gid.is_some()
    }
}

/// A backend that holds plfs containers and directories.
///
/// All paths are relative to the store's root. Every method is safe to call
/// from many threads and many processes at once; the atomicity each promises
/// is what container creation relies on to stay lock-free.
pub trait Store: Send + Sync + fmt::Debug {
    /// The backend's location as configured, e.g. `posix:///data/b0`.
    fn url(&self) -> &str;

    fn capabilities(&self) -> Capabilities;

    /// Creates one directory; `AlreadyExists` if anything is at `path`,
    /// `NotFound` if the parent is missing.
    fn create_dir(&self, path: &StorePath, mode: u32) -> Result<()>;

    /// Creates a directory and its missing parents; succeeds if it exists.
    fn create_dir_all(&self, path: &StorePath) -> Result<()>;

    /// Entries of a directory, excluding `.` and `..`, in no particular order.
    fn list(&self, path: &StorePath) -> Result<Vec<DirEntry>>;

    /// Metadata of the object itself (symlinks are not followed).
    fn metadata(&self, path: &StorePath) -> Result<Metadata>;

    fn remove_file(&self, path: &StorePath) -> Result<()>;

    /// Removes an empty directory; `DirectoryNotEmpty` otherwise.
    fn remove_dir(&self, path: &StorePath) -> Result<()>;

    /// Moves `from` to `to` in one atomic step, failing with `AlreadyExists`
    /// when anything is already at `to` (never replaces, never moves into).
    fn rename(&self, from: &StorePath, to: &StorePath) -> Result<()>;

    /// Where `path` is in this machine's file system tree, when the store
    /// is a directory of it (POSIX); None for every other store. Two such
    /// stores on one file system can move an entry between them with one
    /// rename(2): the n-n layout moves a file between backends that way,
    /// keeping its inode, so a writer in another process keeps writing to
    /// the file under its new name (a copy would take its later writes to
    /// an unlinked inode). A wrapper that must see every change (fault
    /// injection) answers None.
    fn local_path(&self, path: &StorePath) -> Option<std::path::PathBuf> {
        let _ = path;
        None
    }

    /// Swaps the entries at `a` and `b` (files or directories, both must
    /// exist) in one atomic step: `NotFound` if either is missing. Only
    /// with `capabilities().exchange`; a store without it answers
    /// `Unsupported` (see [`unsupported_exchange`]), and so may a POSIX
    /// file system that cannot exchange (the caller then falls back).
    fn exchange(&self, a: &StorePath, b: &StorePath) -> Result<()>;

    /// Publishes a small file with all of `contents` at once, or fails with
    /// `AlreadyExists`. Readers never see a partial file, and a crash
    /// never leaves one. An empty file's name may be durable only at the
    /// next [`sync_dir`](Self::sync_dir) of its directory (POSIX: nothing
    /// in it can be torn, so it is made without a temporary file or sync).
    fn create_new(&self, path: &StorePath, contents: &[u8]) -> Result<()>;

    /// [`create_new`](Self::create_new), except that the store may finish
    /// making the file readable after it returns: it is in place, a
    /// reader that gets to it first waits for it, and
    /// [`settle`](Self::settle) waits for every such file. Its contents
    /// need not be durable before [`sync_file`](Self::sync_file) (a crash
    /// may leave it empty or cut short). For the small files of a new
    /// container, which every writer of a new file waits for: on HDFS each
    /// file's close waits about 500 ms for the NameNode, and this overlaps
    /// that wait with the writer's work.
    fn create_new_deferred(&self, path: &StorePath, contents: &[u8]) -> Result<()> {
        self.create_new(path, contents)
    }

    /// Waits until every file [`create_new_deferred`](Self::create_new_deferred)
    /// made through this store (in this process) is readable; reports the
    /// first that failed. Dropping the store settles too.
    fn settle(&self) -> Result<()> {
        Ok(())
    }

    /// Makes the names in directory `dir` durable (POSIX: fsync of the
    /// directory). Stores whose namespace changes are durable once made
    /// (the memory store, HDFS's NameNode, S3) need nothing.
    fn sync_dir(&self, dir: &StorePath) -> Result<()> {
        let _ = dir;
        Ok(())
    }

    /// Makes the contents of an existing small file durable (POSIX: fsync
    /// of the file): one made by [`fill_private_dir`](Self::fill_private_dir)
    /// or [`create_new_deferred`](Self::create_new_deferred). Stores whose
    /// files are durable once written (HDFS, S3) need nothing.
    fn sync_file(&self, path: &StorePath) -> Result<()> {
        let _ = path;
        Ok(())
    }

    /// Atomically replaces (or creates) a small file with `contents`.
    fn replace(&self, path: &StorePath, contents: &[u8]) -> Result<()>;

    /// Creates a new, empty log for appending; `AlreadyExists` if present.
    fn create_append(&self, path: &StorePath) -> Result<Box<dyn AppendWriter>>;

    /// Opens an object for positional reads.
    fn open_read(&self, path: &StorePath) -> Result<Box<dyn ReadHandle>>;

    /// Opens a plain file for writes at any offset, creating it as `how`
    /// says. Only the n-n layout needs this; a store without
    /// `capabilities().random_writes` answers `Unsupported` (see
    /// [`unsupported_random_writes`]).
    fn open_write(&self, path: &StorePath, how: WriteOpen) -> Result<Box<dyn RandomWriter>>;

    /// Sets permission bits (`Unsupported` without `capabilities().modes`).
    fn set_mode(&self, path: &StorePath, mode: u32) -> Result<()>;

    /// Sets owner and group; `None` leaves one unchanged.
    fn set_owner(&self, path: &StorePath, uid: Option<u32>, gid: Option<u32>) -> Result<()>;

    /// Sets access and modification times; `None` leaves one unchanged.
    fn set_times(&self, path: &StorePath, atime: Option<SystemTime>, mtime: Option<SystemTime>)
    -> Result<()>;

    /// Creates a symbolic link at `path` whose text is `target`.
    fn symlink(&self, target: &str, path: &StorePath) -> Result<()>;

    fn read_link(&self, path: &StorePath) -> Result<String>;

    /// Capacity of the backend, for statfs.
    fn space(&self) -> Result<SpaceInfo>;

    /// Identifies the file system holding the backend, so backends sharing
    /// one are counted once when statfs sums them; `None` (the default)
    /// when the store cannot tell, and it counts as its own.
    fn filesystem_id(&self) -> Option<u64> {
        None
    }

    /// Gives an existing piece `protection`: owner first (a chown may clear
    /// set-id bits), then mode; what the store cannot keep
    /// (`capabilities()`) is skipped.
    fn protect(&self, path: &StorePath, protection: &Protection) -> Result<()> {
        by_parts::protect(self, path, protection)
    }

    /// [`create_dir`](Self::create_dir) with `protection`. mkdir's mode less
    /// the umask is never wider than `protection.mode`, so the directory is
    /// at no moment more open than asked.
    fn create_dir_protected(&self, path: &StorePath, protection: &Protection) -> Result<()> {
        by_parts::create_dir_protected(self, path, protection)
    }

    /// [`create_append`](Self::create_append) with `protection`. This
    /// default applies it after the create, before the first byte; a store
    /// that can create with a mode (POSIX) does so.
    fn create_append_protected(
        &self,
        path: &StorePath,
        protection: &Protection,
    ) -> Result<Box<dyn AppendWriter>> {
        by_parts::create_append_protected(self, path, protection)
    }

    /// [`create_new`](Self::create_new) with `protection` (by default
    /// applied right after).
    fn create_new_protected(&self, path: &StorePath, contents: &[u8], protection: &Protection) -> Result<()> {
        by_parts::create_new_protected(self, path, contents, protection)
    }

    /// [`create_new_deferred`](Self::create_new_deferred) with `protection`.
    fn create_new_deferred_protected(
        &self,
        path: &StorePath,
        contents: &[u8],
        protection: &Protection,
    ) -> Result<()> {
        by_parts::create_new_deferred_protected(self, path, contents, protection)
    }

    /// [`replace`](Self::replace) with `protection` (by default applied
    /// right after).
    fn replace_protected(&self, path: &StorePath, contents: &[u8], protection: &Protection) -> Result<()> {
        by_parts::replace_protected(self, path, contents, protection)
    }

    /// Makes `pieces` (each a direct child of `dir`) in `dir`, a directory
    /// the caller has just made under a name only it knows and publishes
    /// afterwards with one [`rename`](Self::rename) (a new container's
    /// staging directory). When it returns every piece is in place, with
    /// its protection and all its contents, but durable only as
    /// [`create_new_deferred`](Self::create_new_deferred) says: the caller
    /// syncs the files ([`sync_file`](Self::sync_file)) and `dir`
    /// ([`sync_dir`](Self::sync_dir)) when it needs them durable (a new
    /// container: at its first sync, as a plain creat(2) is durable only
    /// at fsync). A failure may leave some pieces behind, which the caller
    /// removes with `dir`. Since nobody looks into `dir` before the rename,
    /// a store may write the files under their own names (POSIX: no
    /// temporary names, no syncs). The default makes the pieces at once,
    /// one thread each, with the deferred and protected calls.
    fn fill_private_dir(&self, dir: &StorePath, pieces: &[NewPiece<'_>]) -> Result<()> {
        by_parts::fill_private_dir(self, dir, pieces)
    }

    /// Reads a whole small object ([`StoreExt::read_all`]): an access or
    /// version file, read on every stat and open. The default opens it,
    /// asks its length and reads; a store that can do it in fewer calls
    /// (POSIX: one `fstat` instead of two) does.
    fn read_small(&self, path: &StorePath) -> Result<Vec<u8>> {
        by_parts::read_small(self, path)
    }

    /// Reads the start of the small file `path` inside directory `dir`
    /// into `buf` and returns how many bytes it read: a stat reads a
    /// container's closed summary so. Fails unless `dir` is a directory
    /// itself (a symbolic link there is not followed). What it reads may
    /// be shorter than the file only when `buf` is, or where one read of
    /// the store returns less; callers read sealed records, whose checksum
    /// tells a whole one, and treat any failure as "not read here". The
    /// default asks `dir`'s metadata and then [`read_small`](Self::read_small)s
    /// `path`; POSIX opens `path` refusing every symbolic link below its
    /// root and reads once (`openat2`, `read`, `close` where the default
    /// makes five calls).
    fn read_head_below(&self, dir: &StorePath, path: &StorePath, buf: &mut [u8]) -> Result<usize> {
        by_parts::read_head_below(self, dir, path, buf)
    }

    /// Opens the regular file at `path` for reading without following a
    /// symbolic link there: fails where `path` is a link, a directory or
    /// missing (a caller that must say which looks it up then). The
    /// default looks it up and then opens it; POSIX opens it with
    /// `O_NOFOLLOW` and tells a directory by the `fstat` it makes anyway,
    /// so an n-n file opens for reading in two calls instead of three.
    fn open_file_read(&self, path: &StorePath) -> Result<Box<dyn ReadHandle>> {
        by_parts::open_file_read(self, path)
    }
}

/// One piece [`Store::fill_private_dir`] makes.
#[derive(Debug, Clone, Copy)]
pub enum NewPiece<'a> {
    /// An empty directory.
    Dir { path: &'a StorePath, protection: &'a Protection },
    /// A small file holding all of `contents`.
    File { path: &'a StorePath, contents: &'a [u8], protection: &'a Protection },
}

/// The default bodies of [`Store`]'s protected calls: the plain call, then
/// [`Store::protect`], each through `store` itself. A wrapper spells out
/// every trait method (`clippy::missing_trait_methods` is denied on them,
/// so none inherits a default silently); one that wants each piece to go
/// through its own hooks (fault injection, counting) calls these.
pub mod by_parts {
    use crate::error::{Error, ErrorKind, Result};
    use crate::store::{
        AppendWriter, EntryKind, NewPiece, Protection, ReadHandle, Store, StorePath, read_exact_at,
    };

    /// Owner first (a chown may clear set-id bits), then mode; what the
    /// store cannot keep (`capabilities()`) is skipped.
    pub fn protect<S: Store + ?Sized>(store: &S, path: &StorePath, protection: &Protection) -> Result<()> {
        let capabilities = store.capabilities();
        if capabilities.owners && protection.changes_owner() {
            store.set_owner(path, protection.uid, protection.gid)?;
        }
        if capabilities.modes {
            store.set_mode(path, protection.mode)?;
        }
        Ok(())
    }

    pub fn create_dir_protected<S: Store + ?Sized>(
        store: &S,
        path: &StorePath,
        protection: &Protection,
    ) -> Result<()> {
        store.create_dir(path, protection.mode & 0o777)?;
        store.protect(path, protection)
    }

    pub fn create_append_protected<S: Store + ?Sized>(
        store: &S,
        path: &StorePath,
        protection: &Protection,
    ) -> Result<Box<dyn AppendWriter>> {
        let writer = store.create_append(path)?;
        store.protect(path, protection)?;
        Ok(writer)
    }

    pub fn create_new_protected<S: Store + ?Sized>(
        store: &S,
        path: &StorePath,
        contents: &[u8],
        protection: &Protection,
    ) -> Result<()> {
        store.create_new(path, contents)?;
        store.protect(path, protection)
    }

    pub fn create_new_deferred_protected<S: Store + ?Sized>(
        store: &S,
        path: &StorePath,
        contents: &[u8],
        protection: &Protection,
    ) -> Result<()> {
        store.create_new_deferred(path, contents)?;
        store.protect(path, protection)
    }

    pub fn replace_protected<S: Store + ?Sized>(
        store: &S,
        path: &StorePath,
        contents: &[u8],
        protection: &Protection,
    ) -> Result<()> {
        store.replace(path, contents)?;
        store.protect(path, protection)
    }

    /// The default of [`Store::read_small`].
    pub fn read_small<S: Store + ?Sized>(store: &S, path: &StorePath) -> Result<Vec<u8>> {
        let handle = store.open_read(path)?;
        let length = handle.len()?;
        let mut buf = vec![0u8; small_length(path, length)?];
        read_exact_at(handle.as_ref(), &mut buf, 0).map_err(|e| e.context(path.to_string()))?;
        Ok(buf)
    }

    /// The default of [`Store::read_head_below`].
    pub fn read_head_below<S: Store + ?Sized>(
        store: &S,
        dir: &StorePath,
        path: &StorePath,
        buf: &mut [u8],
    ) -> Result<usize> {
        let metadata = store.metadata(dir)?;
        if metadata.kind != EntryKind::Directory {
            return Err(Error::new(ErrorKind::NotADirectory, format!("{}: {dir}", store.url())));
        }
        let bytes = store.read_small(path)?;
        let count = bytes.len().min(buf.len());
        buf[..count].copy_from_slice(&bytes[..count]);
        Ok(count)
    }

    /// The default of [`Store::open_file_read`].
    pub fn open_file_read<S: Store + ?Sized>(store: &S, path: &StorePath) -> Result<Box<dyn ReadHandle>> {
        match store.metadata(path)?.kind {
            EntryKind::File => store.open_read(path),
            EntryKind::Directory => {
                Err(Error::new(ErrorKind::IsADirectory, format!("{}: {path}", store.url())))
            }
            EntryKind::Symlink => Err(Error::invalid(format!("{}: {path} is a symbolic link", store.url()))),
        }
    }

    /// A whole object's length as a buffer size, or an error naming it.
    pub fn small_length(path: &StorePath, length: u64) -> Result<usize> {
        usize::try_from(length).map_err(|_| {
            Error::new(ErrorKind::InvalidInput, format!("{path}: {length} bytes is too large to load"))
        })
    }

    /// The default of [`Store::fill_private_dir`]: every piece at once
    /// (the last on the caller's thread), files deferred, since on HDFS
    /// each file's close waits for the NameNode and every writer of a new
    /// file waits for these. The first failure in `pieces`' order wins.
    pub fn fill_private_dir<S: Store + ?Sized>(
        store: &S,
        _dir: &StorePath,
        pieces: &[NewPiece<'_>],
    ) -> Result<()> {
        let make = |piece: &NewPiece<'_>| match *piece {
            NewPiece::Dir { path, protection } => store.create_dir_protected(path, protection),
            NewPiece::File { path, contents, protection } => {
                store.create_new_deferred_protected(path, contents, protection)
            }
        };
        let Some((last, others)) = pieces.split_last() else { return Ok(()) };
        std::thread::scope(|scope| {
            let handles: Vec<_> = others.iter().map(|piece| scope.spawn(move || make(piece))).collect();
            let last = make(last);
            let mut first = Ok(());
            for handle in handles {
                let result = handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                first = first.and(result);
            }
            first.and(last)
        })
    }
}

/// An append-only log being written. Bytes become durable at `sync`.
pub trait AppendWriter: Send + fmt::Debug {
    /// Appends all of `buf` or fails; a failure may leave a torn tail that
    /// readers must detect (the index format's checksums do).
    fn append(&mut self, buf: &[u8]) -> Result<()>;

    /// Makes every appended byte durable, and readable by every reader.
    fn sync(&mut self) -> Result<()>;

    /// The first half of [`sync`](Self::sync): every appended byte is
    /// durable when it returns, and a reader that reaches such bytes before
    /// [`publish`](Self::publish) gets them (waiting if it must), never a
    /// short read. Callers that sync several logs persist them in the order
    /// crash safety needs, then publish them all at once: on HDFS publishing
    /// is a file close that waits about 500 ms for the NameNode, and paying
    /// that once per log in a row dominated small checkpoints. Stores where
    /// durability and visibility are one step do all of `sync` here.
    fn persist(&mut self) -> Result<()> {
        self.sync()
    }

    /// The second half of [`sync`](Self::sync), after
    /// [`persist`](Self::persist): nothing to do on stores whose persist
    /// already published.
    fn publish(&mut self) -> Result<()> {
        Ok(())
    }

    /// Whether [`publish`](Self::publish) has work to do, so callers
    /// publishing several logs overlap them only when it pays.
    fn publish_pending(&self) -> bool {
        false
    }

    /// Bytes in the log so far: the physical offset of the next append.
    fn len(&self) -> u64;

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Where the log is now, when the store can tell: another process may
    /// have renamed it, or a directory above it, since it was opened. None
    /// where the store cannot say (every store but POSIX) or the log was
    /// removed.
    fn current_path(&self) -> Option<StorePath> {
        None
    }

    /// Finishes the log. Durability still needs a `sync` first.
    fn close(self: Box<Self>) -> Result<()>;
}

/// Whether [`Store::open_write`] may or must create the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOpen {
    /// The object must exist (`NotFound` otherwise).
    Existing,
    /// Creates the object with permission bits `mode` (before any umask);
    /// `AlreadyExists` if anything is at the path.
    CreateNew { mode: u32 },
}

/// A plain file open for positional writes and reads (pwrite/pread on one
/// descriptor), shareable between threads.
pub trait RandomWriter: ReadHandle {
    /// Writes all of `buf` at `offset`, extending the object if needed;
    /// a gap before `offset` reads as zeros.
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()>;

    /// Cuts or extends (with zeros) the object to `size` bytes.
    fn set_len(&self, size: u64) -> Result<()>;

    /// Makes every written byte and the length durable.
    fn sync(&self) -> Result<()>;
}

/// The answer of a store without random writes, naming it.
pub fn unsupported_random_writes(store_url: &str, path: &StorePath) -> Error {
    Error::new(
        ErrorKind::Unsupported,
        format!(
            "{store_url}: {path}: this store cannot write at an offset (no pwrite), which the n-n layout needs"
        ),
    )
}

/// The answer of a store that cannot swap two entries, naming it.
pub fn unsupported_exchange(store_url: &str, a: &StorePath, b: &StorePath) -> Error {
    Error::new(
        ErrorKind::Unsupported,
        format!("{store_url}: exchange {a} <-> {b}: this store cannot swap two entries atomically"),
    )
}

/// Positional reads of one object, shareable between threads.
pub trait ReadHandle: Send + Sync + fmt::Debug {
    /// Reads up to `buf.len()` bytes at `offset`; short only at end of object.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize>;

    /// Reads into `bufs` one after the other from `offset` on, as one
    /// `read_at` of their total would; short only at end of object. A
    /// store that can do it in one call (POSIX preadv) does, so a read
    /// spanning many contiguous records of one log costs one request; the
    /// default reads buffer by buffer.
    fn read_vectored_at(&self, bufs: &mut [std::io::IoSliceMut<'_>], offset: u64) -> Result<usize> {
        let mut done = 0;
        for buf in bufs.iter_mut() {
            let want = buf.len();
            let count = self.read_at(buf, offset + done as u64)?;
            done += count;
            if count < want {
                break;
            }
        }
        Ok(done)
    }

    /// Current size of the object.
    fn len(&self) -> Result<u64>;

    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }
}

/// Convenience calls built only from the required ones.
pub trait StoreExt: Store {
    /// Reads a whole (small) object.
    fn read_all(&self, path: &StorePath) -> Result<Vec<u8>> {
        self.read_small(path)
    }

    /// Whether anything exists at `path`.
    fn exists(&self, path: &StorePath) -> Result<bool> {
        match self.metadata(path) {
            Ok(_) => Ok(true),
            Err(error) if error.kind() == ErrorKind::NotFound => Ok(false),
            Err(error) => Err(error),
        }
    }
}

impl<S: Store + ?Sized> StoreExt for S {}

/// Fills `buf` from `offset`, failing with `Corrupt` if the object ends first.
pub fn read_exact_at(handle: &dyn ReadHandle, buf: &mut [u8], offset: u64) -> Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let count = handle.read_at(&mut buf[done..], offset + done as u64)?;
        if count == 0 {
            return Err(Error::corrupt(format!(
                "object ends at {} but {} bytes were expected from offset {offset}",
                offset + done as u64,
                buf.len()
            )));
        }
        done += count;
    }
    Ok(())
}

/// Fills `bufs`, one after the other, with the object's bytes from
/// `offset` on, in as few calls as the store allows ([`ReadHandle::read_vectored_at`]).
/// An object that ends first is an error, never zeros.
pub fn read_exact_vectored_at(handle: &dyn ReadHandle, bufs: &mut [&mut [u8]], offset: u64) -> Result<()> {
    let total: usize = bufs.iter().map(|buf| buf.len()).sum();
    let mut slices: Vec<std::io::IoSliceMut<'_>> =
        bufs.iter_mut().map(|buf| std::io::IoSliceMut::new(buf)).collect();
    let mut rest = &mut slices[..];
    let mut done = 0;
    while done < total {
        let count = handle.read_vectored_at(rest, offset + done as u64)?;
        if count == 0 {
            return Err(Error::corrupt(format!(
                "object ends at {} but {total} bytes were expected from offset {offset}",
                offset + done as u64
            )));
        }
        done += count;
        std::io::IoSliceMut::advance_slices(&mut rest, count);
    }
    Ok(())
}

pub type SharedStore = Arc<dyn Store>;
