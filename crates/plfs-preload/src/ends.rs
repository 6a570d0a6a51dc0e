//! The end of file that O_APPEND writers on one node share.
//!
//! The kernel places each O_APPEND write at the end of the file under the
//! inode's lock, so processes appending to one log never overwrite each
//! other. Through the interposer every process has its own libplfs and its
//! own view of the size: what another process appended but has not closed
//! is invisible to it. Four shell loops appending 200 lines each to one
//! file kept 434 lines; a long-lived appender (a logging framework in each
//! rank) overwrote nearly everything the others wrote.
//!
//! So the O_APPEND descriptions of one file, in the processes of one user
//! on one node, share the file's end in a small file on /dev/shm. An
//! append takes its range with one atomic add there, as the kernel takes
//! it under its lock; a write past the end through such a description
//! moves the end with it. The file is named by the user and a hash of the
//! logical path, and holds the whole path, so two paths whose hashes meet
//! never share an end (the second falls back to its own view).
//!
//! Who may trust the end it holds: every holder keeps a shared `flock` on
//! the file while it has the description open. The opener that finds no
//! holder (its exclusive lock is granted) starts the end afresh from the
//! size it sees once libplfs has opened the file, which includes all that
//! earlier holders wrote, since they closed (and so published) before
//! letting their lock go. The last holder to leave removes the file, so
//! /dev/shm keeps nothing for files no one is appending to; an opener that
//! locked a file just removed so starts over with a new one.
//!
//! What is not shared: appends by other users, other nodes and FUSE
//! mounts (the FUSE daemon orders its own clients' appends), and O_APPEND
//! set later with F_SETFL. A truncate, an `O_TRUNC` open, an unlink or a
//! rename of the path through the interposer resets or forgets the end;
//! one done elsewhere while appenders here hold the file open is not seen
//! by their next append (it lands at the old end). Where /dev/shm is
//! missing or refuses the file, a description appends at its own view of
//! the size as before.

use std::ffi::{CStr, CString, c_int};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU32, Ordering};

use crate::real;
use crate::reserve::identity;

/// Where the files live: a tmpfs every process of the node sees.
const DIRECTORY: &str = "/dev/shm";
const MAGIC: u32 = u32::from_le_bytes(*b"PEND");
/// Bumped when [`Header`] changes: a holder of another version is not
/// joined (each side keeps its own view).
const VERSION: u32 = 1;
/// The longest logical path that can share an end (PATH_MAX).
const KEY_LIMIT: usize = 4096;
const HEADER_BYTES: usize = 64;
const FILE_BYTES: usize = HEADER_BYTES + KEY_LIMIT;
/// Where the descriptor goes: the lowest free number from here, beside the
/// offsets memfd (1000) and the reserve's source (1023), out of the way of
/// the numbers programs count on.
const FILE_NUMBER: c_int = 1001;

/// The start of the shared file (native byte order: it never leaves the
/// node, and is rebuilt by the first opener after every last close).
#[repr(C)]
struct Header {
    /// [`MAGIC`] once the header and key are written.
    magic: AtomicU32,
    version: u32,
    key_length: u32,
    _padding: u32,
    /// The file's end as the holders know it.
    end: AtomicI64,
}

/// One description's hold on its file's shared end.
#[derive(Debug)]
pub struct SharedEnd {
    /// The locked descriptor; -1 once left.
    fd: AtomicI32,
    /// What `fd` refers to (device, inode): the program may close that
    /// number or put another file there, which is then not ours to touch.
    identity: (u64, u64),
    name: CString,
    /// The mapping, `FILE_BYTES` long, unmapped on drop.
    header: usize,
    /// The process forked while the description was open: a child may
    /// still append through it after this process closes it.
    forked: AtomicBool,
}

/// A join in progress: the end is trusted only after [`Joining::finish`].
#[derive(Debug)]
pub struct Joining {
    end: SharedEnd,
    /// No one else held the file: this opener sets the end.
    first: bool,
}

impl SharedEnd {
    fn header(&self) -> &Header {
        // SAFETY: `header` is a live FILE_BYTES mapping until drop, and
        // Header's fields are plain integers any bytes make valid.
        unsafe { &*(self.header as *const Header) }
    }

    /// Takes `length` bytes at the end; returns where they start.
    pub fn reserve(&self, length: i64) -> i64 {
        self.header().end.fetch_add(length, Ordering::AcqRel)
    }

    /// After a write shorter than its reservation: the end goes back to
    /// `written_end` unless another append has already taken the bytes
    /// after `reserved_end` (then the gap stays, as zeros).
    pub fn give_back(&self, reserved_end: i64, written_end: i64) {
        let _ = self.header().end.compare_exchange(
            reserved_end,
            written_end,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// A write through the description ended at `end`.
    pub fn reached(&self, end: i64) {
        self.header().end.fetch_max(end, Ordering::AcqRel);
    }

    /// The file was truncated to `length` through the description.
    pub fn truncated(&self, length: i64) {
        self.header().end.store(length, Ordering::Release);
    }

    /// The process is forking: the child shares the description, lock
    /// included (a lock belongs to the description, not the process).
    pub fn forking(&self) {
        self.forked.store(true, Ordering::Release);
    }

    /// The description is closed (its data published). `last_chance`: the
    /// description is this process's own, not one inherited through fork
    /// (whose lock the parent still holds through the same description),
    /// so the file goes if no one else holds it.
    ///
    /// A description open at a fork keeps the file: the lock test cannot
    /// tell a child still appending through the same description from no
    /// one, and removing the name would give later openers an end of their
    /// own. The next first holder of the name starts it afresh and removes
    /// it.
    pub fn leave(&self, last_chance: bool) {
        let fd = self.fd.swap(-1, Ordering::AcqRel);
        if fd < 0 || identity(fd) != Some(self.identity) {
            return;
        }
        let last_chance = last_chance && !self.forked.load(Ordering::Acquire);
        // SAFETY: fd is ours (checked above); flock takes an int.
        if last_chance && unsafe { real::flock()(fd, libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            remove_if_ours(&self.name, self.identity);
        }
        // SAFETY: ours; closing it lets our lock go.
        unsafe { real::close()(fd) };
    }
}

impl Drop for SharedEnd {
    fn drop(&mut self) {
        // A hold not left (a failed join) leaves here.
        self.leave(false);
        // SAFETY: our mapping, used by no one once the owner is dropped.
        unsafe { libc::munmap(self.header as *mut libc::c_void, FILE_BYTES) };
    }
}

impl Joining {
    /// The join completes once libplfs has opened the file and `size` is
    /// what it sees. A first holder starts the end there; a later one
    /// moves it there if it is further (another node's closed writes);
    /// `truncated`: the open emptied the file, so the end is `size`.
    pub fn finish(self, size: i64, truncated: bool) -> SharedEnd {
        let header = self.end.header();
        if self.first {
            header.end.store(size, Ordering::Release);
            header.magic.store(MAGIC, Ordering::Release);
            let fd = self.end.fd.load(Ordering::Acquire);
            // SAFETY: ours. Converting to shared lets waiting joiners in.
            unsafe { real::flock()(fd, libc::LOCK_SH) };
        } else if truncated {
            header.end.store(size, Ordering::Release);
        } else {
            header.end.fetch_max(size, Ordering::AcqRel);
        }
        self.end
    }

    /// The open failed: a first holder removes the file it made.
    pub fn abandon(self) {
        self.end.leave(self.first);
    }
}

/// Joins the end of `path` (the absolute logical path) shared by this
/// user's O_APPEND descriptions on this node, or starts it. None where it
/// cannot be shared: the description then appends at its own view of the
/// size.
pub fn join(path: &CStr) -> Option<Joining> {
    let key = path.to_bytes();
    if key.len() > KEY_LIMIT {
        return None;
    }
    let name = name_of("end", key);
    // A file removed by its last holder between our open and our lock is
    // reopened under its name; a few rounds at most, as each needs a
    // holder leaving at that instant.
    for _ in 0..8 {
        let fd = open_high(&name)?;
        let Some(identity) = owned_identity(fd) else {
            close(fd);
            return None;
        };
        // SAFETY: ours; flock takes an int.
        let first = unsafe { real::flock()(fd, libc::LOCK_EX | libc::LOCK_NB) } == 0;
        // SAFETY: as above; blocks only while a first holder sets the end.
        if !first && unsafe { real::flock()(fd, libc::LOCK_SH) } != 0 {
            close(fd);
            return None;
        }
        if name_identity(&name) != Some(identity) {
            close(fd);
            continue;
        }
        return map(fd, identity, name, key, first);
    }
    None
}

/// The file was truncated to `length` by path (truncate(2), an `O_TRUNC`
/// open): appenders here that hold it append from there.
pub fn truncated(path: &CStr, length: i64) {
    let key = path.to_bytes();
    if key.len() > KEY_LIMIT {
        return;
    }
    let name = name_of("end", key);
    // SAFETY: a C string and valid flags; no file is made.
    let fd = unsafe { real::open()(name.as_ptr(), libc::O_RDWR | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
    if fd < 0 {
        return;
    }
    let Some(identity) = owned_identity(fd) else {
        close(fd);
        return;
    };
    // Not a holder: dropping it closes fd and unmaps (as map does on
    // failure).
    if let Some(other) = map(fd, identity, name, key, false) {
        other.end.truncated(length);
    }
}

/// The path is gone (unlink) or names another file now (rename): openers
/// from here on start a new end. Holders keep the one they have.
pub fn forget(path: &CStr) {
    let key = path.to_bytes();
    if key.len() <= KEY_LIMIT {
        // SAFETY: a C string; in a sticky directory only our own file goes.
        unsafe { real::unlink()(name_of("end", key).as_ptr()) };
    }
}

/// `/dev/shm/plfs-<kind>.<euid>.<hash of the path>` (kind: `end` here,
/// `lock` for `locks`).
pub(crate) fn name_of(kind: &str, key: &[u8]) -> CString {
    // FNV-1a: a stable hash across builds (the name must be the same in
    // every process), and collisions are caught by the stored key.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in key {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    // SAFETY: geteuid cannot fail.
    let user = unsafe { libc::geteuid() };
    CString::new(format!("{DIRECTORY}/plfs-{kind}.{user}.{hash:016x}")).expect("no NUL in the name")
}

/// Opens (or makes) the file at `name`, at a high descriptor number.
pub(crate) fn open_high(name: &CStr) -> Option<c_int> {
    // SAFETY: a C string and valid flags; mode for a new file.
    let fd = unsafe {
        real::open()(name.as_ptr(), libc::O_RDWR | libc::O_CREAT | libc::O_NOFOLLOW | libc::O_CLOEXEC, 0o600)
    };
    (fd >= 0).then(|| crate::reserve::move_up(fd, FILE_NUMBER))
}

/// The identity of `fd` if it is a regular file of ours that no one else
/// can open (/dev/shm is writable by all: a file another user made under
/// our name is not trusted).
pub(crate) fn owned_identity(fd: c_int) -> Option<(u64, u64)> {
    let stat = fstat(fd)?;
    // SAFETY: geteuid cannot fail.
    let ours = stat.st_uid == unsafe { libc::geteuid() };
    let plain = stat.st_mode & libc::S_IFMT == libc::S_IFREG && stat.st_mode & 0o077 == 0;
    (ours && plain).then_some((stat.st_dev, stat.st_ino))
}

/// Maps the file; a first holder writes its header and key, a later one
/// checks them. Closes `fd` on failure.
fn map(fd: c_int, identity: (u64, u64), name: CString, key: &[u8], first: bool) -> Option<Joining> {
    let sized = if first {
        // SAFETY: ours; the length fits an off_t.
        unsafe { real::ftruncate()(fd, FILE_BYTES as libc::off_t) == 0 }
    } else {
        fstat(fd).is_some_and(|stat| stat.st_size >= FILE_BYTES as libc::off_t)
    };
    if !sized {
        close(fd);
        return None;
    }
    // SAFETY: a shared mapping of our file, FILE_BYTES long.
    let page = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            FILE_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if page == libc::MAP_FAILED {
        close(fd);
        return None;
    }
    let end = SharedEnd {
        fd: AtomicI32::new(fd),
        identity,
        name,
        header: page as usize,
        forked: AtomicBool::new(false),
    };
    let header_pointer = page.cast::<Header>();
    // SAFETY: the key area follows the header inside the mapping.
    let stored_key =
        unsafe { std::slice::from_raw_parts_mut(page.cast::<u8>().add(HEADER_BYTES), KEY_LIMIT) };
    if first {
        // Unmarked while it is rewritten: a joiner that finds it so (its
        // first holder died here) does not join.
        end.header().magic.store(0, Ordering::Release);
        // SAFETY: plain fields of our mapping; no one else holds the file.
        unsafe {
            (*header_pointer).version = VERSION;
            (*header_pointer).key_length = key.len() as u32;
        }
        stored_key[..key.len()].copy_from_slice(key);
        return Some(Joining { end, first });
    }
    let header = end.header();
    let matches = header.magic.load(Ordering::Acquire) == MAGIC
        && header.version == VERSION
        && header.key_length as usize == key.len()
        && &stored_key[..key.len()] == key;
    // Dropping `end` on a mismatch closes fd and unmaps.
    matches.then_some(Joining { end, first })
}

fn fstat(fd: c_int) -> Option<libc::stat> {
    // SAFETY: stat is plain data, filled by fstat.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid buffer.
    (unsafe { real::fstat()(fd, &mut stat) } == 0).then_some(stat)
}

/// The size of the file `fd` refers to.
pub(crate) fn file_size(fd: c_int) -> Option<i64> {
    fstat(fd).map(|stat| stat.st_size)
}

fn name_identity(name: &CStr) -> Option<(u64, u64)> {
    // SAFETY: stat is plain data, filled by lstat.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a C string and a valid buffer.
    (unsafe { real::lstat()(name.as_ptr(), &mut stat) } == 0).then_some((stat.st_dev, stat.st_ino))
}

/// Removes `name` if it is still the file we hold exclusively.
fn remove_if_ours(name: &CStr, identity: (u64, u64)) {
    if name_identity(name) == Some(identity) {
        // SAFETY: a C string.
        unsafe { real::unlink()(name.as_ptr()) };
    }
}

pub(crate) fn close(fd: c_int) {
    // SAFETY: only called with descriptors this module opened.
    unsafe { real::close()(fd) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A logical path no other test or process uses.
    fn key(name: &str) -> CString {
        CString::new(format!("/plfs-ends-test/{}/{name}", std::process::id())).unwrap()
    }

    fn exists(name: &CStr) -> bool {
        name_identity(name).is_some()
    }

    #[test]
    fn holders_share_one_end_and_the_last_to_leave_removes_it() {
        let path = key("shared");
        let name = name_of("end", path.to_bytes());
        // Two descriptions (in one process here; their locks conflict as
        // two processes' would).
        let first = join(&path).expect("/dev/shm takes the file");
        assert!(first.first);
        let first = first.finish(100, false);
        let second = join(&path).unwrap();
        assert!(!second.first, "the first still holds it");
        let second = second.finish(40, false);
        assert_eq!(first.reserve(10), 100, "a smaller size seen later does not move the end back");
        assert_eq!(second.reserve(5), 110);
        second.give_back(115, 112);
        assert_eq!(first.reserve(1), 112, "a short write gave back what it did not write");
        first.give_back(120, 100);
        assert_eq!(second.reserve(0), 113, "taken since: left alone");
        second.reached(500);
        assert_eq!(first.reserve(0), 500);
        truncated(&path, 7);
        assert_eq!(second.reserve(1), 7, "a truncate by path is seen by holders");

        first.leave(true);
        assert!(exists(&name), "still held by the second");
        second.leave(true);
        assert!(!exists(&name), "the last holder removes it");
        // A new first holder starts from the size it sees.
        let again = join(&path).unwrap();
        assert!(again.first);
        let again = again.finish(3, false);
        assert_eq!(again.reserve(1), 3);
        drop(again);
        assert!(exists(&name), "a hold dropped without leaving as the owner keeps the name");
        forget(&path);
        assert!(!exists(&name), "forget removes the name");
    }

    #[test]
    fn a_file_others_could_open_or_another_paths_file_is_not_joined() {
        let path = key("refused");
        let name = name_of("end", path.to_bytes());
        let made = join(&path).unwrap().finish(0, false);
        made.leave(false);
        // Readable by the group: someone else may have made or opened it.
        // SAFETY: a C string.
        assert_eq!(unsafe { libc::chmod(name.as_ptr(), 0o640) }, 0);
        assert!(join(&path).is_none(), "a file with group or other bits is refused");
        // SAFETY: as above.
        assert_eq!(unsafe { libc::chmod(name.as_ptr(), 0o600) }, 0);
        // Another path whose name met this one's: its key differs.
        let other = key("other");
        let mut bytes = std::fs::read(name.to_str().unwrap()).unwrap();
        bytes[HEADER_BYTES..HEADER_BYTES + other.to_bytes().len()].copy_from_slice(other.to_bytes());
        bytes[8..12].copy_from_slice(&(other.to_bytes().len() as u32).to_ne_bytes());
        std::fs::write(name.to_str().unwrap(), &bytes).unwrap();
        // Held (as by that path's appender), so the join is not a first one.
        let held = open_high(&name).unwrap();
        // SAFETY: ours.
        assert_eq!(unsafe { real::flock()(held, libc::LOCK_SH) }, 0);
        assert!(join(&path).is_none(), "a file holding another path's key is not joined");
        close(held);
        forget(&path);
    }
}
