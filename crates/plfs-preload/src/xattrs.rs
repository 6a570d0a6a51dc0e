//! The interposed extended-attribute calls: getxattr, setxattr, listxattr
//! and removexattr with their l* (no symlink following) and f*
//! (descriptor) forms, on plfs paths and descriptors, through libplfs's
//! path-based calls. So `setfattr -n user.plfs.layout -v '…' DIR` sets a
//! directory's layout template under the preload as it does through FUSE.
//!
//! A plfs symbolic link keeps no attributes (ENOTSUP), so the following
//! and the l* forms do the same on plfs paths.

use std::ffi::{CStr, CString, c_char, c_int, c_void};

use libc::{size_t, ssize_t};

use crate::files;
use crate::libplfs::Errno;
use crate::paths::{LibcPath, plfs_path};
use crate::plfs_call;
use crate::posix::{size_result, unit_result};
use crate::real;

/// The logical path of a plfs descriptor (file or directory).
fn fd_path(fd: c_int) -> Option<CString> {
    files::lookup(fd).map(|file| file.path.clone())
}

fn get(path: &CStr, name: *const c_char, value: *mut c_void, size: size_t) -> Result<usize, Errno> {
    let mut length: size_t = 0;
    plfs_call!(getxattr, "plfs_path_getxattr"(path.as_ptr(), name, value, size, &mut length))?;
    Ok(length)
}

fn list(path: &CStr, names: *mut c_char, size: size_t) -> Result<usize, Errno> {
    let mut length: size_t = 0;
    plfs_call!(listxattr, "plfs_path_listxattr"(path.as_ptr(), names, size, &mut length))?;
    Ok(length)
}

fn set(
    path: &CStr,
    name: *const c_char,
    value: *const c_void,
    size: size_t,
    flags: c_int,
) -> Result<(), Errno> {
    if !name.is_null() {
        // SAFETY: a non-NULL name is a C string (the libc contract).
        let name = unsafe { CStr::from_ptr(name) }.to_bytes();
        // POSIX ACLs and other system attributes mean something to the
        // kernel; kept as plain values they would be shown but never
        // enforced (as the FUSE mount refuses them, so `cp -a` falls back
        // to chmod).
        if name.starts_with(b"system.") {
            return Err(libc::ENOTSUP);
        }
    }
    plfs_call!(setxattr, "plfs_path_setxattr"(path.as_ptr(), name, value, size, flags))
}

fn remove(path: &CStr, name: *const c_char) -> Result<(), Errno> {
    plfs_call!(removexattr, "plfs_path_removexattr"(path.as_ptr(), name))
}

macro_rules! path_getxattr {
    ($name:ident) => {
        /// # Safety
        /// The getxattr(2) contract.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            path: *const c_char,
            name: *const c_char,
            value: *mut c_void,
            size: size_t,
        ) -> ssize_t {
            if let Some(logical) = plfs_path(libc::AT_FDCWD, path) {
                return size_result(get(&logical, name, value, size));
            }
            // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
            unsafe { real::$name()(LibcPath::new(libc::AT_FDCWD, path).as_ptr(), name, value, size) }
        }
    };
}

path_getxattr!(getxattr);
path_getxattr!(lgetxattr);

/// # Safety
/// The fgetxattr(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fgetxattr(
    fd: c_int,
    name: *const c_char,
    value: *mut c_void,
    size: size_t,
) -> ssize_t {
    if let Some(logical) = fd_path(fd) {
        return size_result(get(&logical, name, value, size));
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::fgetxattr()(fd, name, value, size) }
}

macro_rules! path_listxattr {
    ($name:ident) => {
        /// # Safety
        /// The listxattr(2) contract.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(path: *const c_char, names: *mut c_char, size: size_t) -> ssize_t {
            if let Some(logical) = plfs_path(libc::AT_FDCWD, path) {
                return size_result(list(&logical, names, size));
            }
            // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
            unsafe { real::$name()(LibcPath::new(libc::AT_FDCWD, path).as_ptr(), names, size) }
        }
    };
}

path_listxattr!(listxattr);
path_listxattr!(llistxattr);

/// # Safety
/// The flistxattr(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn flistxattr(fd: c_int, names: *mut c_char, size: size_t) -> ssize_t {
    if let Some(logical) = fd_path(fd) {
        return size_result(list(&logical, names, size));
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::flistxattr()(fd, names, size) }
}

macro_rules! path_setxattr {
    ($name:ident) => {
        /// # Safety
        /// The setxattr(2) contract.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            path: *const c_char,
            name: *const c_char,
            value: *const c_void,
            size: size_t,
            flags: c_int,
        ) -> c_int {
            if let Some(logical) = plfs_path(libc::AT_FDCWD, path) {
                return unit_result(set(&logical, name, value, size, flags));
            }
            // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
            unsafe { real::$name()(LibcPath::new(libc::AT_FDCWD, path).as_ptr(), name, value, size, flags) }
        }
    };
}

path_setxattr!(setxattr);
path_setxattr!(lsetxattr);

/// # Safety
/// The fsetxattr(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fsetxattr(
    fd: c_int,
    name: *const c_char,
    value: *const c_void,
    size: size_t,
    flags: c_int,
) -> c_int {
    if let Some(logical) = fd_path(fd) {
        return unit_result(set(&logical, name, value, size, flags));
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::fsetxattr()(fd, name, value, size, flags) }
}

macro_rules! path_removexattr {
    ($name:ident) => {
        /// # Safety
        /// The removexattr(2) contract.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(path: *const c_char, name: *const c_char) -> c_int {
            if let Some(logical) = plfs_path(libc::AT_FDCWD, path) {
                return unit_result(remove(&logical, name));
            }
            // SAFETY: forwarded (a relative path made absolute in a mirror, see LibcPath).
            unsafe { real::$name()(LibcPath::new(libc::AT_FDCWD, path).as_ptr(), name) }
        }
    };
}

path_removexattr!(removexattr);
path_removexattr!(lremovexattr);

/// # Safety
/// The fremovexattr(2) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fremovexattr(fd: c_int, name: *const c_char) -> c_int {
    if let Some(logical) = fd_path(fd) {
        return unit_result(remove(&logical, name));
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::fremovexattr()(fd, name) }
}
