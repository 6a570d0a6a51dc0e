//! The recursion guard. libplfs.so does its own file I/O through libc, and
//! libc's symbols resolve to this interposer first; while a thread is inside
//! libplfs (or inside the interposer's own set-up) every interposed call must
//! go straight to the real libc function.

use std::cell::Cell;

thread_local! {
    // Const-initialised and without a destructor: reading it never
    // allocates and still works while a thread is being torn down.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// True while this thread is inside libplfs or the interposer's set-up, and
/// when the thread-local is gone (thread teardown): pass through then.
pub fn inside() -> bool {
    INSIDE.try_with(Cell::get).unwrap_or(true)
}

/// Marks this thread as inside plfs until dropped. Nesting is allowed: only
/// the outermost guard clears the flag.
pub struct Inside {
    was_inside: bool,
}

impl Inside {
    pub fn enter() -> Inside {
        let was_inside = INSIDE.try_with(|flag| flag.replace(true)).unwrap_or(true);
        Inside { was_inside }
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        if !self.was_inside {
            let _ = INSIDE.try_with(|flag| flag.set(false));
        }
    }
}

/// Not in PLFS 2.5: libplfs.so calls this on entry to each call a program
/// makes to it directly (the interposer's own calls are inside already),
/// so libplfs's own libc calls go straight to libc. Otherwise a program
/// linked against libplfs and run under the interposer re-enters libplfs
/// while libplfs reads its plfsrc, and deadlocks there. Returns what
/// `plfs_preload_leave` needs to restore.
#[unsafe(no_mangle)]
pub extern "C" fn plfs_preload_enter() -> std::ffi::c_int {
    std::ffi::c_int::from(INSIDE.try_with(|flag| flag.replace(true)).unwrap_or(true))
}

/// Not in PLFS 2.5: the end of a call `plfs_preload_enter` began;
/// `was_inside` is what it returned.
#[unsafe(no_mangle)]
pub extern "C" fn plfs_preload_leave(was_inside: std::ffi::c_int) {
    if was_inside == 0 {
        let _ = INSIDE.try_with(|flag| flag.set(false));
    }
}
