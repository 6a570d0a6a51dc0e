//! The LD_PRELOAD interposer (libplfs_preload.so), when this process has
//! one: while a program's own call runs in this library, the interposer
//! must pass this library's libc calls straight to libc. Otherwise the
//! first call (which reads the plfsrc) is interposed, the interposer loads
//! this library's mount list, which waits for that same first call: a
//! deadlock on the program's first plfs call.

use std::ffi::c_int;
use std::sync::OnceLock;

type Enter = extern "C" fn() -> c_int;
type Leave = extern "C" fn(c_int);

fn hooks() -> Option<(Enter, Leave)> {
    static HOOKS: OnceLock<Option<(Enter, Leave)>> = OnceLock::new();
    *HOOKS.get_or_init(|| {
        // SAFETY: RTLD_DEFAULT and C string names; dlsym does no file I/O.
        let (enter, leave) = unsafe {
            (
                libc::dlsym(libc::RTLD_DEFAULT, c"plfs_preload_enter".as_ptr()),
                libc::dlsym(libc::RTLD_DEFAULT, c"plfs_preload_leave".as_ptr()),
            )
        };
        if enter.is_null() || leave.is_null() {
            return None;
        }
        // SAFETY: the interposer exports both with these signatures
        // (crates/plfs-preload/src/guard.rs).
        Some(unsafe {
            (
                std::mem::transmute::<*mut libc::c_void, Enter>(enter),
                std::mem::transmute::<*mut libc::c_void, Leave>(leave),
            )
        })
    })
}

/// Marks this thread as inside libplfs for the interposer until dropped.
pub struct Bypass {
    leave: Option<(Leave, c_int)>,
}

impl Bypass {
    pub fn enter() -> Bypass {
        Bypass { leave: hooks().map(|(enter, leave)| (leave, enter())) }
    }
}

impl Drop for Bypass {
    fn drop(&mut self) {
        if let Some((leave, was_inside)) = self.leave {
            leave(was_inside);
        }
    }
}
