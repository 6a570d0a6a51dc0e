//! File offsets in memory that fork shares.
//!
//! The kernel keeps a file's offset in the open file description, and a
//! forked child shares the description with its parent: what the child
//! writes through an inherited descriptor moves the parent's offset too,
//! so the parent's next write lands after the child's (a Python program
//! that forks a worker or runs `subprocess.run(cmd, stdout=f)` on a file
//! it writes, a shell-like program whose children log to its log file).
//! A plfs description lives in the interposer's memory, which fork copies,
//! so each description's offset is a slot in a page mapped `MAP_SHARED`:
//! after a fork the child's copy of the description reads and moves the
//! same slot as the parent's.
//!
//! Slots come from pages of a memfd, 512 to a page, and go back to a free
//! list when their description closes. A redirection's pump (a fresh
//! process, see `pump`) gets the memfd and writes the offset it reaches
//! into the same slot, so a parent that ran `subprocess.run(cmd,
//! stdout=f)` writes after what `cmd` wrote. The memfd sits at a high
//! descriptor number, out of the program's way; the program may still
//! close it or put another file at its number, so its identity (device
//! and inode) is checked before the pool grows it or a pump is given it.
//! Where memfd_create is refused (a container's seccomp filter), pages are
//! anonymous: forked children still share them; pumps cannot.
//!
//! Around a fork:
//! - a slot in use then may be in use in both processes afterwards, and
//!   neither knows when the other is done with it, so it is never reused
//!   (8 bytes per description open at a fork; a description open across
//!   many forks costs them once);
//! - the child leaves the free list, the page and the memfd it inherited to
//!   the parent and makes its own.
//!
//! A page is never unmapped: a slot may be read by a call that is still
//! running on another thread when its description closes.

use std::ffi::c_int;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use crate::files::errno;
use crate::libplfs::Errno;
use crate::real;
use crate::reserve::identity;

const PAGE_BYTES: usize = 4096;
const SLOT_BYTES: usize = std::mem::size_of::<AtomicI64>();
const SLOTS_PER_PAGE: usize = PAGE_BYTES / SLOT_BYTES;

/// Where the memfd is moved: the lowest free number from here, near the
/// reserve's source (1023), far from the numbers programs count on.
const FILE_NUMBER: c_int = 1000;

/// A memfd that holds slots: its descriptor number and what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PoolFile {
    fd: c_int,
    identity: (u64, u64),
}

impl PoolFile {
    /// Whether `fd` still refers to this memfd.
    fn is_open(&self) -> bool {
        identity(self.fd) == Some(self.identity)
    }
}

struct Pool {
    /// The memfd new pages come from; None before the first, after a fork.
    file: Option<PoolFile>,
    /// Its size in pages.
    pages: usize,
    /// The page slots are taken from next (its address), 0 for none.
    page: usize,
    /// The memfd offset of `page`.
    page_position: u64,
    /// Slots of `page` taken so far.
    taken: usize,
    /// Slots given back since the last fork (address and memfd position).
    free: Vec<(usize, u64)>,
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    file: None,
    pages: 0,
    page: 0,
    page_position: 0,
    taken: SLOTS_PER_PAGE,
    free: Vec::new(),
});
/// Forks this process has made or come from: a slot taken in an earlier
/// epoch may be shared with another process and is never given back.
static EPOCH: AtomicU64 = AtomicU64::new(0);

fn pool() -> std::sync::MutexGuard<'static, Pool> {
    POOL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One description's offset.
#[derive(Debug)]
pub struct Offset {
    slot: &'static AtomicI64,
    /// The fork epoch it was taken in; `u64::MAX` for one a pump attached
    /// to, which is another process's.
    epoch: u64,
    /// The memfd holding the slot, and the slot's place in it.
    file: Option<PoolFile>,
    position: u64,
}

impl Offset {
    /// A new offset, 0.
    pub fn new() -> Result<Offset, Errno> {
        let mut pool = pool();
        let (address, position) = match pool.free.pop() {
            Some(free) => free,
            None => {
                if pool.taken == SLOTS_PER_PAGE {
                    add_page(&mut pool)?;
                }
                let taken = pool.taken;
                pool.taken += 1;
                (pool.page + taken * SLOT_BYTES, pool.page_position + (taken * SLOT_BYTES) as u64)
            }
        };
        // Read under the pool's lock, which the fork handlers take too: a
        // slot taken before a fork is always of the older epoch.
        let epoch = EPOCH.load(Ordering::Acquire);
        let file = pool.file;
        drop(pool);
        // SAFETY: the address is an aligned slot of a page mapped read-write
        // for the rest of the process, and no other Offset of this process
        // holds it (it was never taken, or was given back).
        let slot = unsafe { &*(address as *const AtomicI64) };
        slot.store(0, Ordering::Release);
        Ok(Offset { slot, epoch, file, position })
    }

    /// The slot at `position` of the memfd `fd` (a pump's, given by the
    /// process that made the redirection).
    pub fn attach(fd: c_int, position: u64) -> Result<Offset, Errno> {
        let within = (position % PAGE_BYTES as u64) as usize;
        if !within.is_multiple_of(SLOT_BYTES) {
            return Err(libc::EINVAL);
        }
        let page = map(Some((fd, position - within as u64)))?;
        // SAFETY: an aligned slot of a page just mapped read-write, never
        // unmapped.
        let slot = unsafe { &*((page + within) as *const AtomicI64) };
        Ok(Offset { slot, epoch: u64::MAX, file: None, position })
    }

    /// The memfd descriptor and position a pump attaches to, while the
    /// memfd is still open at its number.
    pub fn shareable(&self) -> Option<(c_int, u64)> {
        self.file.filter(PoolFile::is_open).map(|file| (file.fd, self.position))
    }

    pub fn get(&self) -> i64 {
        self.slot.load(Ordering::Acquire)
    }

    pub fn set(&self, offset: i64) {
        self.slot.store(offset, Ordering::Release);
    }

    /// Moves the offset on by `count` and returns where it was: a write's
    /// place, taken at once so that writers in two processes sharing the
    /// description (after fork) get one range each, as the kernel gives.
    pub fn advance(&self, count: i64) -> i64 {
        self.slot.fetch_add(count, Ordering::AcqRel)
    }

    /// Undoes part of an [`advance`](Self::advance) from `from` to `to`
    /// (the write wrote less), unless another process moved it since.
    pub fn take_back(&self, from: i64, to: i64) {
        let _ = self.slot.compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire);
    }
}

impl Drop for Offset {
    fn drop(&mut self) {
        let mut pool = pool();
        if self.epoch == EPOCH.load(Ordering::Acquire) && self.file == pool.file {
            pool.free.push((std::ptr::from_ref(self.slot) as usize, self.position));
        }
    }
}

/// Grows the pool's memfd by a page and maps it; a memfd the program
/// closed (or replaced) is left alone and a new one made.
fn add_page(pool: &mut Pool) -> Result<(), Errno> {
    let file = match pool.file.filter(PoolFile::is_open) {
        Some(file) => Some(file),
        None => {
            // Where memfd_create is refused (a seccomp filter), the page is
            // anonymous: forked children still share it, pumps cannot.
            // (The free list is empty here: a page is added only then.)
            let file = create_file().ok();
            pool.file = file;
            pool.pages = 0;
            file
        }
    };
    let Some(file) = file else {
        pool.page = map(None)?;
        pool.page_position = 0;
        pool.taken = 0;
        return Ok(());
    };
    let position = (pool.pages * PAGE_BYTES) as u64;
    let length = libc::off_t::try_from(position as usize + PAGE_BYTES).map_err(|_| libc::EFBIG)?;
    // SAFETY: our memfd (checked just above); ftruncate takes an int and a length.
    if unsafe { real::ftruncate()(file.fd, length) } != 0 {
        return Err(errno());
    }
    pool.page = map(Some((file.fd, position)))?;
    pool.page_position = position;
    pool.pages += 1;
    pool.taken = 0;
    Ok(())
}

/// Maps a page shared with whoever maps the same: the page at `position`
/// of memfd `fd`, or an anonymous one (shared with forked children only).
fn map(file: Option<(c_int, u64)>) -> Result<usize, Errno> {
    let (fd, position, anonymous) = match file {
        Some((fd, position)) => (fd, libc::off_t::try_from(position).map_err(|_| libc::EINVAL)?, 0),
        None => (-1, 0, libc::MAP_ANONYMOUS),
    };
    // SAFETY: a new shared mapping of one page; nothing else refers to that
    // address range yet.
    let page = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            PAGE_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | anonymous,
            fd,
            position,
        )
    };
    if page == libc::MAP_FAILED {
        return Err(errno());
    }
    Ok(page as usize)
}

fn create_file() -> Result<PoolFile, Errno> {
    // SAFETY: a C string and valid flags.
    let fd = unsafe { libc::memfd_create(c"plfs-offsets".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(errno());
    }
    let fd = crate::reserve::move_up(fd, FILE_NUMBER);
    match identity(fd) {
        Some(identity) => Ok(PoolFile { fd, identity }),
        None => {
            let error = errno();
            // SAFETY: ours.
            unsafe { real::close()(fd) };
            Err(error)
        }
    }
}

/// Before fork, in the parent: every slot in use is from now on shared.
/// The pool is held across the fork, so no thread is taking a slot at the
/// instant the child's copy of it is made.
pub fn before_fork() {
    let pool = pool();
    EPOCH.fetch_add(1, Ordering::AcqRel);
    FORK_GUARD.with(|guard| *guard.borrow_mut() = Some(pool));
}

/// After fork, in the parent and in the child: the forking thread lets the
/// pool go.
pub fn after_fork() {
    FORK_GUARD.with(|guard| drop(guard.borrow_mut().take()));
}

/// After fork, in the child: the slots the parent takes next (its free
/// list, the rest of its page) are not the child's to take.
pub fn after_fork_in_child() {
    after_fork();
    let mut pool = pool();
    pool.free = Vec::new();
    pool.file = None;
    pool.pages = 0;
    pool.page = 0;
    pool.taken = SLOTS_PER_PAGE;
}

thread_local! {
    static FORK_GUARD: std::cell::RefCell<Option<std::sync::MutexGuard<'static, Pool>>> =
        const { std::cell::RefCell::new(None) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attached_offset_is_the_same_slot_and_slots_are_reused_within_an_epoch() {
        let offset = Offset::new().unwrap();
        offset.set(41);
        let (fd, position) = offset.shareable().expect("the pool's memfd is open");
        let attached = Offset::attach(fd, position).unwrap();
        assert_eq!(attached.get(), 41);
        assert_eq!(attached.advance(9), 41);
        assert_eq!(offset.get(), 50);
        offset.take_back(50, 45);
        assert_eq!(attached.get(), 45);
        offset.take_back(50, 0);
        assert_eq!(attached.get(), 45, "moved since: left alone");

        // One test: the pool is the process's, and another test taking a
        // slot between these steps would take the one given back.
        let first = Offset::new().unwrap();
        let address = std::ptr::from_ref(first.slot) as usize;
        drop(first);
        let again = Offset::new().unwrap();
        assert_eq!(std::ptr::from_ref(again.slot) as usize, address, "given back, taken again");
        // What a fork does to a slot in use: never given back.
        EPOCH.fetch_add(1, Ordering::AcqRel);
        drop(again);
        let other = Offset::new().unwrap();
        assert_ne!(std::ptr::from_ref(other.slot) as usize, address);
    }
}
