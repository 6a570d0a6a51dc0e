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
//! Slots come from pages this process mapped, 512 to a page, and go back
//! to a free list when their description closes. Around a fork:
//! - a slot in use then may be in use in both processes afterwards, and
//!   neither knows when the other is done with it, so it is never reused
//!   (8 bytes per description open at a fork; a description open across
//!   many forks costs them once);
//! - the child drops the free list and the page it inherited (the parent
//!   goes on taking slots from them) and maps its own.
//!
//! A page is never unmapped: a slot may be read by a call that is still
//! running on another thread when its description closes.

use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use crate::libplfs::Errno;

const PAGE_BYTES: usize = 4096;
const SLOTS_PER_PAGE: usize = PAGE_BYTES / std::mem::size_of::<AtomicI64>();

struct Pool {
    /// The page slots are taken from next (its address), 0 for none.
    page: usize,
    /// Slots of `page` taken so far.
    taken: usize,
    /// Slots given back since the last fork (their addresses).
    free: Vec<usize>,
}

static POOL: Mutex<Pool> = Mutex::new(Pool { page: 0, taken: SLOTS_PER_PAGE, free: Vec::new() });
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
    epoch: u64,
}

impl Offset {
    /// A new offset, 0.
    pub fn new() -> Result<Offset, Errno> {
        let mut pool = pool();
        let address = match pool.free.pop() {
            Some(address) => address,
            None => {
                if pool.taken == SLOTS_PER_PAGE {
                    pool.page = map_page()?;
                    pool.taken = 0;
                }
                let address = pool.page + pool.taken * std::mem::size_of::<AtomicI64>();
                pool.taken += 1;
                address
            }
        };
        // The epoch is read under the pool's lock, which the fork handlers
        // take too: a slot taken before a fork is always of the older epoch.
        let epoch = EPOCH.load(Ordering::Acquire);
        drop(pool);
        // SAFETY: the address is an aligned slot of a page mapped read-write
        // for the rest of the process, and no other Offset of this process
        // holds it (it was never taken, or was given back).
        let slot = unsafe { &*(address as *const AtomicI64) };
        slot.store(0, Ordering::Release);
        Ok(Offset { slot, epoch })
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
        if self.epoch == EPOCH.load(Ordering::Acquire) {
            pool.free.push(std::ptr::from_ref(self.slot) as usize);
        }
    }
}

fn map_page() -> Result<usize, Errno> {
    // SAFETY: a fresh anonymous mapping; nothing else refers to it.
    let page = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            PAGE_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if page == libc::MAP_FAILED {
        return Err(crate::files::errno());
    }
    Ok(page as usize)
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
    pool.page = 0;
    pool.taken = SLOTS_PER_PAGE;
}

thread_local! {
    static FORK_GUARD: std::cell::RefCell<Option<std::sync::MutexGuard<'static, Pool>>> =
        const { std::cell::RefCell::new(None) };
}
