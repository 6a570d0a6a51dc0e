//! The LD_PRELOAD interposer (libplfs_preload.so), when this process has
//! one: while a program's own call runs in this library, the interposer
//! must pass this library's libc calls straight to libc. Otherwise the
//! first call (which reads the plfsrc) is interposed, the interposer loads
//! this library's mount list, which waits for that same first call: a
//! deadlock on the program's first plfs call.

use std::ffi::c_int;
use std::sync::OnceLock;

/// Where the backend descriptors this library keeps open go when the
/// interposer is loaded ([`crate::plfs::store::posix::keep_descriptors_above`]).
const KEPT_DESCRIPTORS_FLOOR: c_int = 768;

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
        // The program under the interposer owns the low descriptor numbers
        // (a shell's `exec 5<>file` closes whatever is at 5): the backend
        // files this library keeps open go above them, below the
        // interposer's own (1000 and up) and select's 1024.
        crate::plfs::store::posix::keep_descriptors_above(KEPT_DESCRIPTORS_FLOOR);
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
