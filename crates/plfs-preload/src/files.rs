//! The descriptor table: which kernel descriptors are plfs files, and the
//! open-file state behind them.
//!
//! A plfs descriptor is a real kernel descriptor reserved for the purpose
//! (an `O_PATH | O_CLOEXEC` descriptor of /dev/null, see `reserve`), so its
//! number is the one the kernel would have given, can never be handed to
//! another open, and fails with EBADF if some call reaches the kernel with
//! it anyway.
//! `dup` reserves another such descriptor and shares the `OpenFile` (offset
//! and status flags), as the kernel's open file description is shared.

use std::collections::BTreeMap;
use std::ffi::{CString, c_int, c_void};
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once, OnceLock, RwLock};

use libc::{off_t, ssize_t};

use crate::ends::{self, SharedEnd};
use crate::guard::inside;
use crate::libplfs::{Errno, PlfsFd};
use crate::locks::{self, LockFile};
use crate::offsets::Offset;
use crate::plfs_call;
use crate::real;

/// The status flags F_SETFL may change (the rest are fixed at open).
const SETTABLE_STATUS_FLAGS: c_int = libc::O_APPEND | libc::O_NONBLOCK;

/// What a plfs descriptor refers to.
#[derive(Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    /// A directory opened with open(2) (for fdopendir, fstat, *at calls).
    Directory,
}

/// The open file description of a plfs descriptor.
#[derive(Debug)]
pub struct OpenFile {
    /// The absolute logical path.
    pub path: CString,
    pub kind: Kind,
    /// Access mode and status flags, as F_GETFL reports them.
    status_flags: AtomicI32,
    /// Held by read, write and lseek for their whole call, as the kernel
    /// holds f_pos.
    position: Mutex<()>,
    /// The file offset, which a forked child shares (see `offsets`).
    offset: Offset,
    /// NULL for directories and after close.
    handle: AtomicPtr<c_void>,
    /// [`GENERATION`] when it was opened: an older one was inherited
    /// through fork.
    generation: u64,
    /// For a description opened O_APPEND for writing: the end of file its
    /// appends share with the node's other appenders (see `ends`).
    end: Option<SharedEnd>,
    /// The lock file flock and record locks go to, from the first such
    /// call (see `locks`).
    locks: OnceLock<Result<LockFile, Errno>>,
}

impl OpenFile {
    fn handle(&self) -> PlfsFd {
        self.handle.load(Ordering::Acquire)
    }

    pub fn status_flags(&self) -> c_int {
        self.status_flags.load(Ordering::Acquire)
    }

    pub fn set_status_flags(&self, flags: c_int) {
        let kept = self.status_flags() & !SETTABLE_STATUS_FLAGS;
        self.status_flags.store(kept | (flags & SETTABLE_STATUS_FLAGS), Ordering::Release);
    }

    fn position(&self) -> std::sync::MutexGuard<'_, ()> {
        self.position.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Closes the plfs file now (once); later calls do nothing.
    ///
    /// A description inherited through fork is only synced (what this
    /// process wrote through it is written out) and its handle left
    /// unclosed: the handle is this process's copy of the parent's, and
    /// closing it closed the parent's writers on the backends, so other
    /// processes took the parent's still-open file for closed at its size
    /// at the fork and ignored what the parent synced after. A child that
    /// closes an inherited descriptor, or exits (which closes them all),
    /// must leave the parent's file as it was, as the kernel does.
    fn close_now(&self) -> Result<(), Errno> {
        let handle = self.handle.swap(std::ptr::null_mut(), Ordering::AcqRel);
        if handle.is_null() {
            return Ok(());
        }
        let own = self.generation == GENERATION.load(Ordering::Acquire);
        let closed = if own {
            let mut references: c_int = 0;
            // PLFS 2.5's plfs_close took the closing pid and uid; libplfs
            // ignores both (a handle knows its writers), so no getpid and
            // getuid per close.
            plfs_call!(
                close,
                "plfs_close"(handle, 0, 0, self.status_flags(), std::ptr::null_mut(), &mut references)
            )
        } else {
            plfs_call!(sync, "plfs_sync"(handle))
        };
        // After the close: what this description appended is published
        // before another opener may start the end afresh.
        if let Some(end) = &self.end {
            end.leave(own);
        }
        closed
    }
}

impl Drop for OpenFile {
    /// The last descriptor of a description was closed while a call on
    /// another thread still used it: that call's end closes the file.
    fn drop(&mut self) {
        let _ = self.close_now();
    }
}

#[derive(Debug)]
struct Descriptor {
    file: Arc<OpenFile>,
    /// FD_CLOEXEC as the program set it (the reserved descriptor is always
    /// close-on-exec: plfs state cannot cross exec).
    close_on_exec: bool,
}

static TABLE: RwLock<BTreeMap<c_int, Descriptor>> = RwLock::new(BTreeMap::new());
/// Forks this copy of the table has been through: a description opened in
/// an earlier generation is the parent's, inherited.
static GENERATION: AtomicU64 = AtomicU64::new(0);
/// The pid the process hooks last saw (when registered, and in each child
/// after fork); 0 before. Another pid from getpid() is a vfork child (or
/// a clone without fork handlers), which shares this memory with its
/// parent.
static OWN_PID: AtomicI32 = AtomicI32::new(0);
/// Entries in TABLE: while 0, descriptor calls skip the lock entirely.
static COUNT: AtomicUsize = AtomicUsize::new(0);

fn table_read() -> std::sync::RwLockReadGuard<'static, BTreeMap<c_int, Descriptor>> {
    TABLE.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn table_write() -> std::sync::RwLockWriteGuard<'static, BTreeMap<c_int, Descriptor>> {
    TABLE.write().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The plfs open file behind `fd`, or None for every other descriptor.
pub fn lookup(fd: c_int) -> Option<Arc<OpenFile>> {
    if COUNT.load(Ordering::Acquire) == 0 || inside() {
        return None;
    }
    table_read().get(&fd).map(|descriptor| Arc::clone(&descriptor.file))
}

/// The logical path of a plfs directory descriptor (for *at calls).
pub fn directory_path(fd: c_int) -> Option<String> {
    let file = lookup(fd)?;
    (file.kind == Kind::Directory).then(|| file.path.to_string_lossy().into_owned())
}

/// Reserves a kernel descriptor number, at least `minimum` when given.
fn reserve(minimum: Option<c_int>) -> Result<c_int, Errno> {
    crate::reserve::reserve(minimum.unwrap_or(0))
}

fn install(fd: c_int, file: Arc<OpenFile>, close_on_exec: bool) {
    register_process_hooks();
    let previous = table_write().insert(fd, Descriptor { file, close_on_exec });
    // The kernel gave us fd: no plfs descriptor can have had that number.
    assert!(previous.is_none(), "plfs descriptor {fd} reserved twice");
    COUNT.fetch_add(1, Ordering::AcqRel);
}

/// Removes `fd` from the table; the caller closes the kernel descriptor.
fn remove(fd: c_int) -> Option<Arc<OpenFile>> {
    let removed = table_write().remove(&fd)?;
    COUNT.fetch_sub(1, Ordering::AcqRel);
    Some(removed.file)
}

/// Opens `path` (absolute, under a mount point) and returns its new
/// descriptor.
pub fn open(path: CString, flags: c_int, mode: libc::mode_t) -> Result<c_int, Errno> {
    open_described(path, flags, mode, None)
}

/// [`open`] for a redirection's pump, whose description's offset is
/// another process's (see `offsets`).
pub fn open_with_offset(
    path: CString,
    flags: c_int,
    mode: libc::mode_t,
    offset: Offset,
) -> Result<c_int, Errno> {
    open_described(path, flags, mode, Some(offset))
}

fn open_described(
    path: CString,
    flags: c_int,
    mode: libc::mode_t,
    offset: Option<Offset>,
) -> Result<c_int, Errno> {
    // An unnamed file in a directory: what open(2) answers on a file
    // system without it, so programs fall back to a named temporary file.
    // (It was EISDIR, a kernel before 3.11's answer.)
    if flags & libc::O_TMPFILE == libc::O_TMPFILE {
        return Err(libc::EOPNOTSUPP);
    }
    // First, so that nothing is opened when there is no slot for it.
    let offset = match offset {
        Some(offset) => offset,
        None => Offset::new()?,
    };
    let mut kind = if looks_up_first(flags) { kind_for_open(&path, flags)? } else { Kind::File };
    let mut handle: PlfsFd = std::ptr::null_mut();
    let mut end = None;
    if kind == Kind::File {
        // Joined before libplfs opens the file, so that a first holder's
        // size includes everything earlier holders published.
        let appends = flags & libc::O_APPEND != 0 && flags & libc::O_ACCMODE != libc::O_RDONLY;
        let joining = if appends { ends::join(&path) } else { None };
        let opened = open_handle(&path, flags, mode);
        let truncated = flags & libc::O_TRUNC != 0;
        match (joining, &opened) {
            // By path, as a stat sees it: everything published (an open
            // handle's getattr syncs it first, which would make the
            // container's creation durable at every open).
            (Some(joining), Ok(_)) => match stat_path(&path) {
                Ok(stat) => end = Some(joining.finish(stat.st_size, truncated)),
                Err(_) => joining.abandon(),
            },
            (Some(joining), Err(_)) => joining.abandon(),
            (None, Ok(_)) if truncated => ends::truncated(&path, 0),
            (None, _) => {}
        }
        match opened {
            Ok(opened) => handle = opened,
            // Only now is it known to be a directory: decided as before,
            // by its attributes (a read-only open of one is a directory
            // descriptor; a write is EISDIR).
            Err(libc::EISDIR) if flags & libc::O_ACCMODE == libc::O_RDONLY => {
                kind = kind_for_open(&path, flags)?;
                if kind == Kind::File {
                    return Err(libc::EISDIR);
                }
            }
            Err(error) => return Err(error),
        }
    }
    let file = Arc::new(OpenFile {
        path,
        kind,
        status_flags: AtomicI32::new(flags & (libc::O_ACCMODE | SETTABLE_STATUS_FLAGS)),
        position: Mutex::new(()),
        offset,
        handle: AtomicPtr::new(handle),
        generation: GENERATION.load(Ordering::Acquire),
        end,
        locks: OnceLock::new(),
    });
    let fd = reserve(None)?;
    install(fd, file, flags & libc::O_CLOEXEC != 0);
    Ok(fd)
}

/// A plfs file handle for `path`, opened with libplfs.
fn open_handle(path: &CString, flags: c_int, mode: libc::mode_t) -> Result<PlfsFd, Errno> {
    let mut handle: PlfsFd = std::ptr::null_mut();
    // The writer id matters only to an open that may write (O_TRUNC
    // truncates even a read-only open); a read-only one saves the getpid.
    let writes = flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0;
    let pid = if writes { crate::writer::current() } else { 0 };
    // O_CLOEXEC and the like mean nothing to libplfs.
    let plfs_flags =
        flags & (libc::O_ACCMODE | libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC | libc::O_APPEND);
    // The kernel applies the umask to a mode open(2) creates with;
    // libplfs takes modes as given, so the interposer applies it.
    let mode = if flags & libc::O_CREAT != 0 { mode & !crate::umask::current() } else { mode };
    plfs_call!(open, "plfs_open"(&mut handle, path.as_ptr(), plfs_flags, pid, mode, std::ptr::null_mut()))?;
    Ok(handle)
}

/// Whether an open must look the path up before plfs_open: only when a
/// directory there changes the answer beyond plfs_open's own EISDIR
/// (O_DIRECTORY, and O_CREAT|O_EXCL, which is EEXIST on a directory).
/// Every other open (creates for writing as `>`, cp and mdtest's creat
/// make them, and plain opens for reading) goes to plfs_open first: the
/// getattr was a second lookup of the same name per open (on n-n a second
/// `statx` of the backend file; on a small_file mount, of a name not there
/// yet, a reload of the directory's view, so a create storm listed the
/// directory's logs once per file and cached views mid-storm).
fn looks_up_first(flags: c_int) -> bool {
    flags & libc::O_DIRECTORY != 0 || flags & (libc::O_CREAT | libc::O_EXCL) == libc::O_CREAT | libc::O_EXCL
}

/// Directories open as directory descriptors (read-only), files as files.
fn kind_for_open(path: &CString, flags: c_int) -> Result<Kind, Errno> {
    let writing = flags & libc::O_ACCMODE != libc::O_RDONLY;
    match stat_path(path) {
        Ok(stat) if stat.st_mode & libc::S_IFMT == libc::S_IFDIR => {
            if writing || flags & libc::O_CREAT != 0 && flags & libc::O_EXCL != 0 {
                Err(if writing { libc::EISDIR } else { libc::EEXIST })
            } else {
                Ok(Kind::Directory)
            }
        }
        Ok(_) if flags & libc::O_DIRECTORY != 0 => Err(libc::ENOTDIR),
        Err(libc::ENOENT) if flags & libc::O_DIRECTORY != 0 => Err(libc::ENOENT),
        // Anything else (including a libplfs without plfs_getattr) is for
        // plfs_open to decide.
        _ => Ok(Kind::File),
    }
}

/// Closes a plfs descriptor; None when `fd` is not one.
pub fn close(fd: c_int) -> Option<Result<(), Errno>> {
    let file = lookup(fd).and_then(|_| remove(fd))?;
    // SAFETY: fd is the reserved descriptor, ours to close.
    unsafe { real::close()(fd) };
    // The last descriptor of the description closes the plfs file, with
    // its error reported; otherwise another descriptor still uses it.
    Some(match Arc::try_unwrap(file) {
        Ok(file) => file.close_now(),
        Err(_) => Ok(()),
    })
}

/// The plfs descriptors in `first..=last`.
pub fn within(first: c_int, last: c_int) -> Vec<c_int> {
    if COUNT.load(Ordering::Acquire) == 0 || inside() || first > last {
        return Vec::new();
    }
    table_read().range(first..=last).map(|(&fd, _)| fd).collect()
}

/// close_range and closefrom over the plfs descriptors in `first..=last`:
/// each is closed as close(2) closes it (see `OpenFile::close_now` for
/// one inherited through fork); the first failure is the result.
pub fn close_within(first: c_int, last: c_int) -> Result<(), Errno> {
    let mut result = Ok(());
    for fd in within(first, last) {
        if let Some(Err(error)) = close(fd) {
            result = result.and(Err(error));
        }
    }
    result
}

/// Whether this is a vfork child (or a clone without fork handlers) of a
/// process that has plfs state: it shares that memory with its parent, so
/// it must change none of it. One getpid, for the rare calls that ask.
pub fn shares_parent_memory() -> bool {
    let own = OWN_PID.load(Ordering::Acquire);
    // SAFETY: getpid cannot fail.
    own != 0 && own != unsafe { libc::getpid() }
}

/// dup and F_DUPFD: a new descriptor (at least `minimum`) sharing `file`.
pub fn duplicate(file: Arc<OpenFile>, minimum: Option<c_int>, close_on_exec: bool) -> Result<c_int, Errno> {
    let fd = reserve(minimum)?;
    install(fd, file, close_on_exec);
    Ok(fd)
}

/// dup2/dup3 onto `target`, which is closed first if open (plfs or not).
pub fn duplicate_onto(file: Arc<OpenFile>, target: c_int, close_on_exec: bool) -> Result<c_int, Errno> {
    // A plfs descriptor at target is closed as close(2) would.
    if let Some(result) = close(target) {
        result?;
    }
    // The interposer's own source descriptor at target is replaced too.
    crate::reserve::forget_within(target, target);
    let fd = reserve(None)?;
    // A free target is often the lowest free number, which the
    // reservation then took itself (`exec 4< file` in bash and dash):
    // dup3 onto itself would fail with EINVAL.
    if fd != target {
        // SAFETY: both are descriptors; dup3 closes a real target atomically.
        let placed = unsafe { real::dup3()(fd, target, libc::O_CLOEXEC) };
        let error = errno();
        // SAFETY: fd was only a source for dup3.
        unsafe { real::close()(fd) };
        if placed < 0 {
            return Err(error);
        }
    }
    install(target, file, close_on_exec);
    Ok(target)
}

/// Drops the plfs state of `target` when a real descriptor is duplicated
/// onto it (dup2 of a non-plfs fd over a plfs one).
pub fn forget(target: c_int) -> Option<Arc<OpenFile>> {
    lookup(target).and_then(|_| remove(target))
}

pub fn close_on_exec(fd: c_int) -> bool {
    table_read().get(&fd).is_some_and(|descriptor| descriptor.close_on_exec)
}

pub fn set_close_on_exec(fd: c_int, value: bool) {
    if let Some(descriptor) = table_write().get_mut(&fd) {
        descriptor.close_on_exec = value;
    }
}

fn require_file(file: &OpenFile) -> Result<PlfsFd, Errno> {
    match file.kind {
        Kind::Directory => Err(libc::EISDIR),
        Kind::File => {
            let handle = file.handle();
            if handle.is_null() { Err(libc::EBADF) } else { Ok(handle) }
        }
    }
}

fn check_access(file: &OpenFile, writing: bool) -> Result<(), Errno> {
    let mode = file.status_flags() & libc::O_ACCMODE;
    let allowed = if writing { mode != libc::O_RDONLY } else { mode != libc::O_WRONLY };
    if allowed { Ok(()) } else { Err(libc::EBADF) }
}

pub fn pread(file: &OpenFile, buffer: &mut [u8], offset: i64) -> Result<usize, Errno> {
    let handle = require_file(file)?;
    check_access(file, false)?;
    let offset = off_t::try_from(offset).map_err(|_| libc::EINVAL)?;
    let mut count: ssize_t = 0;
    plfs_call!(read, "plfs_read"(handle, buffer.as_mut_ptr().cast(), buffer.len(), offset, &mut count))?;
    usize::try_from(count).map_err(|_| libc::EIO)
}

pub fn pwrite(file: &OpenFile, buffer: &[u8], offset: i64) -> Result<usize, Errno> {
    let handle = require_file(file)?;
    check_access(file, true)?;
    let offset = off_t::try_from(offset).map_err(|_| libc::EINVAL)?;
    let mut count: ssize_t = 0;
    // The writer is the calling process as it is now: after fork the child
    // writes its own data log instead of appending to its parent's.
    let pid = crate::writer::current();
    plfs_call!(write, "plfs_write"(handle, buffer.as_ptr().cast(), buffer.len(), offset, pid, &mut count))?;
    if let Some(end) = &file.end {
        end.reached(offset + count as off_t);
    }
    usize::try_from(count).map_err(|_| libc::EIO)
}

/// read(2): at the shared offset, which it advances.
pub fn read(file: &OpenFile, buffer: &mut [u8]) -> Result<usize, Errno> {
    let _position = file.position();
    let offset = file.offset.get();
    let count = pread(file, buffer, offset)?;
    file.offset.set(offset + count as i64);
    Ok(count)
}

/// write(2): at the shared offset (at the end with O_APPEND), which it
/// advances.
pub fn write(file: &OpenFile, buffer: &[u8]) -> Result<usize, Errno> {
    let _position = file.position();
    let length = i64::try_from(buffer.len()).map_err(|_| libc::EINVAL)?;
    if file.status_flags() & libc::O_APPEND != 0 {
        let (offset, count) = append(file, buffer)?;
        file.offset.set(offset + count as i64);
        return Ok(count);
    }
    let offset = file.offset.advance(length);
    let written = pwrite(file, buffer, offset);
    let count = written.as_ref().map_or(0, |&count| count as i64);
    if count < length {
        file.offset.take_back(offset + length, offset + count);
    }
    written
}

/// Writes `buffer` at the end of file: the node's shared end where there
/// is one (the range taken there as the kernel takes it under the inode
/// lock), else the size. Returns where it went and how much was written.
pub fn append(file: &OpenFile, buffer: &[u8]) -> Result<(i64, usize), Errno> {
    let length = i64::try_from(buffer.len()).map_err(|_| libc::EINVAL)?;
    match &file.end {
        Some(end) => {
            require_file(file)?;
            check_access(file, true)?;
            let offset = end.reserve(length);
            let written = pwrite(file, buffer, offset);
            let count = written.as_ref().map_or(0, |&count| count as i64);
            if count < length {
                end.give_back(offset + length, offset + count);
            }
            Ok((offset, written?))
        }
        None => {
            let offset = size(file)?;
            Ok((offset, pwrite(file, buffer, offset)?))
        }
    }
}

/// pwrite(2) and its vector forms as Linux does them: on a description
/// opened O_APPEND the bytes go to the end of file whatever the offset
/// (pwrite(2), BUGS), and the file offset does not move. Before, they went
/// to the offset and overwrote what was there.
pub fn positioned_write(file: &OpenFile, buffer: &[u8], offset: i64) -> Result<usize, Errno> {
    if file.status_flags() & libc::O_APPEND != 0 {
        return append(file, buffer).map(|(_, count)| count);
    }
    pwrite(file, buffer, offset)
}

/// The description's offset (a redirection's pump carries it on).
pub fn offset(file: &OpenFile) -> i64 {
    file.offset.get()
}

/// Where a redirection's pump finds the description's offset to move it
/// as it writes (see `offsets`); None when the memfd holding it is gone.
pub fn shareable_offset(file: &OpenFile) -> Option<(c_int, u64)> {
    file.offset.shareable()
}

/// Sets the offset a redirection's pump reached.
pub fn set_offset(file: &OpenFile, offset: i64) {
    let _position = file.position();
    file.offset.set(offset);
}

/// Closes the plfs file of a description now (a redirection's pump, done
/// with its copy).
pub fn close_description(file: &OpenFile) -> Result<(), Errno> {
    file.close_now()
}

fn lock_file(file: &OpenFile) -> Result<&LockFile, Errno> {
    file.locks.get_or_init(|| LockFile::open(&file.path)).as_ref().map_err(|&error| error)
}

/// Before a lock is released or downgraded: what this process wrote to
/// the file and libplfs still buffers is published, so the next holder,
/// refreshed, reads it (an NFS client flushes at unlock).
fn publish(file: &OpenFile) -> Result<(), Errno> {
    match file.kind {
        Kind::Directory => Ok(()),
        Kind::File => plfs_call!(flush, "plfs_flush"(require_file(file)?)),
    }
}

/// After a lock is granted: the file's cached view is dropped, so reads
/// and stats see what the holders before published (an NFS client
/// revalidates its cache at lock). No I/O until the next read.
fn refresh(file: &OpenFile) -> Result<(), Errno> {
    match file.kind {
        Kind::Directory => Ok(()),
        Kind::File => plfs_call!(refresh, "plfs_refresh"(require_file(file)?)),
    }
}

/// Runs `lock`, which releases a lock when `releases` and grants one when
/// `grants` (a downgrade does both), with this process's writes published
/// before a release and its view refreshed after a grant. A failed
/// publish does not keep the lock (whoever waits would wait for nothing):
/// it is released and the failure reported.
fn coherent(
    file: &OpenFile,
    releases: bool,
    grants: bool,
    lock: impl FnOnce() -> Result<(), Errno>,
) -> Result<(), Errno> {
    let published = if releases { publish(file) } else { Ok(()) };
    lock()?;
    if grants {
        refresh(file)?;
    }
    published
}

/// flock(2) on a plfs description.
pub fn flock(file: &OpenFile, operation: c_int) -> Result<(), Errno> {
    let locks = lock_file(file)?;
    let kind = operation & !libc::LOCK_NB;
    // LOCK_SH may downgrade an exclusive lock.
    let releases = kind == libc::LOCK_UN || kind == libc::LOCK_SH;
    let grants = kind == libc::LOCK_SH || kind == libc::LOCK_EX;
    coherent(file, releases, grants, || locks.flock(operation))
}

/// fcntl's record-lock commands on a plfs description; `lock` is the
/// caller's struct flock, which F_GETLK fills in.
pub fn record_lock(file: &OpenFile, command: c_int, lock: *mut libc::flock) -> Result<(), Errno> {
    // SAFETY: the caller passed a struct flock, or NULL.
    let given = unsafe { lock.as_mut() }.ok_or(libc::EFAULT)?;
    let setting = !matches!(command, libc::F_GETLK | libc::F_OFD_GETLK);
    // As the kernel: a read lock needs a description open for reading, a
    // write lock one open for writing.
    match c_int::from(given.l_type) {
        libc::F_RDLCK if setting => check_access(file, false)?,
        libc::F_WRLCK if setting => check_access(file, true)?,
        libc::F_RDLCK | libc::F_WRLCK | libc::F_UNLCK => {}
        _ => return Err(libc::EINVAL),
    }
    let mut absolute = locks::absolute(given, file.offset.get(), || size(file))?;
    let locks = lock_file(file)?;
    if !setting {
        locks.fcntl(command, &mut absolute)?;
        *given = absolute;
        return Ok(());
    }
    let kind = c_int::from(absolute.l_type);
    // A read lock may downgrade a write lock.
    let releases = kind == libc::F_UNLCK || kind == libc::F_RDLCK;
    let grants = kind != libc::F_UNLCK;
    coherent(file, releases, grants, || locks.fcntl(command, &mut absolute))
}

pub fn size(file: &OpenFile) -> Result<i64, Errno> {
    Ok(getattr(file, true)?.st_size)
}

pub fn lseek(file: &OpenFile, offset: i64, whence: c_int) -> Result<i64, Errno> {
    let _position = file.position();
    let base = match whence {
        libc::SEEK_SET => 0,
        libc::SEEK_CUR => file.offset.get(),
        libc::SEEK_END => size(file)?,
        // plfs keeps no hole map: all of the file is data, the end is the
        // only hole (what filesystems without SEEK_HOLE support report).
        libc::SEEK_DATA | libc::SEEK_HOLE => {
            let end = size(file)?;
            if offset < 0 || offset >= end {
                return Err(libc::ENXIO);
            }
            let position = if whence == libc::SEEK_DATA { offset } else { end };
            file.offset.set(position);
            return Ok(position);
        }
        _ => return Err(libc::EINVAL),
    };
    let position = base.checked_add(offset).filter(|&position| position >= 0).ok_or(libc::EINVAL)?;
    file.offset.set(position);
    Ok(position)
}

/// fstat of an open file (plfs_getattr with the fd, so its own unflushed
/// writes count) or directory.
pub fn getattr(file: &OpenFile, size_only: bool) -> Result<libc::stat, Errno> {
    // SAFETY: stat is plain data; all-zero is valid.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    let handle = file.handle();
    plfs_call!(getattr, "plfs_getattr"(handle, file.path.as_ptr(), &mut stat, c_int::from(size_only)))?;
    Ok(stat)
}

pub fn stat_path(path: &CString) -> Result<libc::stat, Errno> {
    // SAFETY: stat is plain data; all-zero is valid.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    plfs_call!(getattr, "plfs_getattr"(std::ptr::null_mut(), path.as_ptr(), &mut stat, 0))?;
    Ok(stat)
}

pub fn truncate(file: &OpenFile, length: i64) -> Result<(), Errno> {
    let handle = require_file(file)?;
    check_access(file, true).map_err(|_| libc::EINVAL)?;
    let length = off_t::try_from(length).map_err(|_| libc::EINVAL)?;
    plfs_call!(trunc, "plfs_trunc"(handle, file.path.as_ptr(), length, 1))?;
    match &file.end {
        Some(end) => end.truncated(length),
        None => ends::truncated(&file.path, length),
    }
    Ok(())
}

/// mmap(2) of a plfs file: anonymous memory holding the file's bytes
/// `offset..offset + length` as they are at the call (zeros past the end),
/// with the protection asked for. That is what a private mapping shows
/// until the file changes, and what a read-only shared one shows too, so
/// numpy's memmap, Python's mmap and programs that map their input read
/// plfs files. The differences: the whole range is read at the call, and
/// later writes to the file (here or elsewhere) do not show in the memory.
/// A shared writable mapping, whose stores would have to reach the file,
/// is ENODEV (what a file system without mmap gives). Before, every mmap
/// of a plfs descriptor failed with EBADF: the kernel saw its reserved
/// /dev/null.
pub fn map(
    file: &OpenFile,
    address: *mut libc::c_void,
    length: usize,
    protection: c_int,
    flags: c_int,
    offset: i64,
) -> Result<*mut libc::c_void, Errno> {
    if file.kind == Kind::Directory {
        return Err(libc::ENODEV);
    }
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as i64;
    if length == 0 || offset < 0 || offset % page != 0 {
        return Err(libc::EINVAL);
    }
    let shared = match flags & 0x0f {
        libc::MAP_PRIVATE => false,
        libc::MAP_SHARED | libc::MAP_SHARED_VALIDATE => true,
        _ => return Err(libc::EINVAL),
    };
    if shared && protection & libc::PROT_WRITE != 0 {
        return Err(libc::ENODEV);
    }
    if flags & libc::MAP_SYNC != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    // mmap needs a descriptor open for reading, whatever the protection.
    check_access(file, false).map_err(|_| libc::EACCES)?;
    let anonymous = (flags & !0x0f & !libc::MAP_SYNC) | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
    // SAFETY: an anonymous mapping; `address` is the program's hint (or
    // its MAP_FIXED target, as it asked).
    let mapped =
        unsafe { real::mmap()(address, length, libc::PROT_READ | libc::PROT_WRITE, anonymous, -1, 0) };
    if mapped == libc::MAP_FAILED {
        return Err(errno());
    }
    let unmap = |error: Errno| {
        // SAFETY: our own mapping of `length` bytes.
        unsafe { libc::munmap(mapped, length) };
        Err(error)
    };
    // SAFETY: the mapping is `length` writable bytes, ours until returned.
    let memory = unsafe { std::slice::from_raw_parts_mut(mapped.cast::<u8>(), length) };
    let mut filled = 0;
    while filled < length {
        let at = offset + filled as i64;
        match pread(file, &mut memory[filled..], at) {
            Ok(0) => break,
            Ok(count) => filled += count,
            Err(libc::EINTR) => {}
            Err(error) => return unmap(error),
        }
    }
    let asked = protection & (libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC);
    // SAFETY: our own mapping, given the program's protection.
    if asked != libc::PROT_READ | libc::PROT_WRITE && unsafe { libc::mprotect(mapped, length, asked) } != 0 {
        return unmap(errno());
    }
    Ok(mapped)
}

/// posix_fallocate, and fallocate without flags (`mode` 0) or with only
/// FALLOC_FL_KEEP_SIZE: the file grows to at least `offset + length`, its
/// new bytes reading as zeros, as after a local file system's allocation.
/// plfs cannot reserve backend space ahead of the writes (logs grow as
/// they are written), so a later write may still find a backend full; with
/// KEEP_SIZE nothing visible changes. Other modes (punching or zeroing a
/// range, collapsing, inserting) are EOPNOTSUPP, as on the FUSE mount,
/// which programs take as "not here" (glibc's posix_fallocate then writes
/// zeros itself). Before, every call failed with EBADF from the kernel.
pub fn allocate(file: &OpenFile, mode: c_int, offset: i64, length: i64) -> Result<(), Errno> {
    if mode & !libc::FALLOC_FL_KEEP_SIZE != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    if offset < 0 || length <= 0 {
        return Err(libc::EINVAL);
    }
    let end = offset.checked_add(length).ok_or(libc::EFBIG)?;
    if file.kind == Kind::Directory {
        return Err(libc::ENODEV);
    }
    check_access(file, true)?;
    if mode & libc::FALLOC_FL_KEEP_SIZE != 0 || size(file)? >= end {
        return Ok(());
    }
    truncate(file, end)
}

pub fn sync(file: &OpenFile) -> Result<(), Errno> {
    match file.kind {
        Kind::Directory => Ok(()),
        Kind::File => plfs_call!(sync, "plfs_sync"(require_file(file)?)),
    }
}

/// Every open plfs file (one per description), for fork and exit.
fn open_files() -> Vec<Arc<OpenFile>> {
    let mut files: Vec<Arc<OpenFile>> = Vec::new();
    for descriptor in table_read().values() {
        if !files.iter().any(|seen| Arc::ptr_eq(seen, &descriptor.file)) {
            files.push(Arc::clone(&descriptor.file));
        }
    }
    files
}

/// Before fork: every plfs file is synced, so buffered data and index
/// records are written once, by the parent, and not again by a child that
/// inherits a copy of the buffers.
extern "C" fn before_fork() {
    if COUNT.load(Ordering::Acquire) == 0 || inside() {
        crate::offsets::before_fork();
        return;
    }
    for file in open_files() {
        let _ = sync(&file);
        if let Some(end) = &file.end {
            end.forking();
        }
    }
    // The table is held across fork so no other thread can be inside it
    // when the child's copy of the lock is taken: the child would wait on
    // a holder that does not exist in it.
    FORK_GUARD.with(|guard| *guard.borrow_mut() = Some(table_write()));
    crate::offsets::before_fork();
}

/// In the parent and in the child, after fork: the forking thread (the
/// child's only thread) lets the table go.
extern "C" fn after_fork() {
    crate::offsets::after_fork();
    FORK_GUARD.with(|guard| guard.borrow_mut().take());
}

/// In the child after fork: what the table holds now was inherited.
extern "C" fn after_fork_in_child() {
    crate::offsets::after_fork_in_child();
    FORK_GUARD.with(|guard| guard.borrow_mut().take());
    GENERATION.fetch_add(1, Ordering::AcqRel);
    // SAFETY: getpid cannot fail.
    OWN_PID.store(unsafe { libc::getpid() }, Ordering::Release);
}

thread_local! {
    static FORK_GUARD: std::cell::RefCell<Option<std::sync::RwLockWriteGuard<'static, BTreeMap<c_int, Descriptor>>>> =
        const { std::cell::RefCell::new(None) };
}

/// At exit: stdio streams are flushed (a plfs FILE's buffer goes through
/// the descriptor) and then every plfs file still open is closed, so a
/// program that exits without closing keeps what it wrote. (atexit runs
/// before libc's own stdio flush, hence the explicit fflush.)
extern "C" fn at_exit() {
    if COUNT.load(Ordering::Acquire) == 0 || inside() {
        return;
    }
    // SAFETY: fflush(NULL) flushes every stream.
    unsafe { real::fflush()(std::ptr::null_mut()) };
    let descriptors: Vec<c_int> = table_read().keys().copied().collect();
    for fd in descriptors {
        let _ = close(fd);
    }
}

/// The longest [`publish_before_exit`] may take before SIGALRM ends the
/// process (a close on a slow backend takes seconds; a deadlock, forever).
const PUBLISH_SECONDS: u32 = 60;

/// Before _exit: every plfs descriptor is closed as at exit (a description
/// inherited through fork is synced), and the redirections this process
/// writes into are published, so another process sees what this one
/// wrote once it is gone. A vfork child changes nothing (it shares its
/// parent's memory, and its _exit after a failed exec must leave the
/// parent's files as they are).
///
/// _exit is async-signal-safe and publishing is not: a signal handler's
/// _exit that interrupted code holding a lock the publishing needs (its
/// own thread's call into libplfs is skipped, `inside`; malloc's lock is
/// not) would never return. So SIGALRM goes back to its default action
/// and an alarm ends the process if publishing takes longer than
/// [`PUBLISH_SECONDS`].
pub fn publish_before_exit() {
    if inside() || shares_parent_memory() {
        return;
    }
    let files = COUNT.load(Ordering::Acquire) != 0;
    if !files && !crate::pump::publishes_at_exit() {
        return;
    }
    // SAFETY: the process is ending; its SIGALRM handler and pending alarm
    // no longer matter.
    unsafe {
        libc::signal(libc::SIGALRM, libc::SIG_DFL);
        let mut alarm: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut alarm);
        libc::sigaddset(&mut alarm, libc::SIGALRM);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &alarm, std::ptr::null_mut());
        libc::alarm(PUBLISH_SECONDS);
    }
    if files {
        let descriptors: Vec<c_int> = table_read().keys().copied().collect();
        for fd in descriptors {
            let _ = close(fd);
        }
    }
    crate::pump::flush_before_exit();
}

fn register_process_hooks() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: these are extern "C" functions without arguments that
        // live as long as the process (this library is never unloaded).
        unsafe {
            OWN_PID.store(libc::getpid(), Ordering::Release);
            libc::pthread_atfork(Some(before_fork), Some(after_fork), Some(after_fork_in_child));
            libc::atexit(at_exit);
        }
    });
}

pub fn errno() -> Errno {
    // SAFETY: errno is thread-local and always readable.
    unsafe { *libc::__errno_location() }
}

pub fn set_errno(value: Errno) {
    // SAFETY: errno is thread-local and always writable.
    unsafe { *libc::__errno_location() = value };
}
