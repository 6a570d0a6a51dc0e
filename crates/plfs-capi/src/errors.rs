//! `plfs_error_t`: 0 for success, else the errno the failure stands for
//! (as include/plfs.h lists), or one of the few codes of plfs's own.

use std::ffi::{CStr, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::plfs::Error;

/// A `plfs_error_t` value (a C enum: an int).
pub type PlfsError = c_int;

pub const PLFS_SUCCESS: PlfsError = 0;
pub const PLFS_EBADF: PlfsError = libc::EBADF;
pub const PLFS_EINVAL: PlfsError = libc::EINVAL;
pub const PLFS_ENOTSUP: PlfsError = libc::ENOTSUP;
pub const PLFS_ENOMEM: PlfsError = libc::ENOMEM;
pub const PLFS_EEOF: PlfsError = 297;
pub const PLFS_SIGSEGV: PlfsError = 298;
pub const PLFS_SIGBUS: PlfsError = 299;
/// Any failure without an errno of its own.
pub const PLFS_TBD: PlfsError = 300;

/// Errno values stay themselves; everything else becomes PLFS_TBD.
fn from_errno(errno: c_int) -> PlfsError {
    match errno {
        0 => PLFS_SUCCESS,
        1..PLFS_EEOF => errno,
        _ => PLFS_TBD,
    }
}

/// The core error's code, through the core's own errno table.
pub fn code_of(error: &Error) -> PlfsError {
    from_errno(error.errno())
}

/// Runs one C entry point, with the interposer (if any) kept out of it:
/// its error becomes a code, and a panic (a plfs bug) becomes PLFS_TBD
/// instead of unwinding into C.
pub fn guard(body: impl FnOnce() -> Result<(), PlfsError>) -> PlfsError {
    let _bypass = crate::interposer::Bypass::enter();
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => PLFS_SUCCESS,
        Ok(Err(code)) => code,
        Err(_) => {
            tracing::error!("libplfs: internal error (panic) in a C API call");
            PLFS_TBD
        }
    }
}

/// Logs a core error (C callers only see the code) and returns its code.
pub fn report(error: Error) -> PlfsError {
    tracing::debug!("libplfs: {error}");
    code_of(&error)
}

#[unsafe(no_mangle)]
pub extern "C" fn plfs_error_to_errno(error: PlfsError) -> c_int {
    match error {
        PLFS_SUCCESS => 0,
        1..PLFS_EEOF => error,
        _ => libc::EIO,
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn errno_to_plfs_error(errno_value: c_int) -> PlfsError {
    from_errno(errno_value)
}

#[unsafe(no_mangle)]
pub extern "C" fn strplfserr(error: PlfsError) -> *const c_char {
    description(error).as_ptr()
}

fn description(error: PlfsError) -> &'static CStr {
    match error {
        PLFS_SUCCESS => c"Success",
        libc::EPERM => c"Operation not permitted",
        libc::ENOENT => c"No such file or directory",
        libc::ESRCH => c"No such process",
        libc::EINTR => c"Interrupted system call",
        libc::EIO => c"Input/output error",
        libc::ENXIO => c"No such device or address",
        libc::E2BIG => c"Argument list too long",
        libc::EBADF => c"Bad file descriptor",
        libc::EAGAIN => c"Resource temporarily unavailable",
        libc::ENOMEM => c"Cannot allocate memory",
        libc::EACCES => c"Permission denied",
        libc::EFAULT => c"Bad address",
        libc::EBUSY => c"Device or resource busy",
        libc::EEXIST => c"File exists",
        libc::EXDEV => c"Invalid cross-device link",
        libc::ENODEV => c"No such device",
        libc::ENOTDIR => c"Not a directory",
        libc::EISDIR => c"Is a directory",
        libc::EINVAL => c"Invalid argument",
        libc::ENFILE => c"Too many open files in system",
        libc::EMFILE => c"Too many open files",
        libc::ENOTTY => c"Inappropriate ioctl for device",
        libc::ETXTBSY => c"Text file busy",
        libc::EFBIG => c"File too large",
        libc::ENOSPC => c"No space left on device",
        libc::ESPIPE => c"Illegal seek",
        libc::EROFS => c"Read-only file system",
        libc::EMLINK => c"Too many links",
        libc::EPIPE => c"Broken pipe",
        libc::ERANGE => c"Numerical result out of range",
        libc::EDEADLK => c"Resource deadlock avoided",
        libc::ENAMETOOLONG => c"File name too long",
        libc::ENOSYS => c"Function not implemented",
        libc::ENOTEMPTY => c"Directory not empty",
        libc::ELOOP => c"Too many levels of symbolic links",
        libc::ENODATA => c"No data available",
        libc::ETIME => c"Timer expired",
        libc::EOVERFLOW => c"Value too large for defined data type",
        libc::EBADFD => c"File descriptor in bad state",
        libc::EPROTOTYPE => c"Protocol wrong type for socket",
        libc::ENOTSUP => c"Operation not supported",
        libc::ETIMEDOUT => c"Connection timed out",
        libc::ESTALE => c"Stale file handle",
        libc::EDQUOT => c"Disk quota exceeded",
        PLFS_EEOF => c"End of file",
        PLFS_SIGSEGV => c"Segmentation fault",
        PLFS_SIGBUS => c"Bus error",
        PLFS_TBD => c"Unclassified plfs error",
        _ => c"Unknown plfs error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plfs::ErrorKind;

    #[test]
    fn codes_are_errno_values_and_round_trip() {
        for kind in [ErrorKind::NotFound, ErrorKind::InvalidInput, ErrorKind::Corrupt, ErrorKind::Unsupported]
        {
            let code = code_of(&Error::new(kind, "x"));
            assert_eq!(plfs_error_to_errno(code), kind.errno());
            assert_eq!(errno_to_plfs_error(kind.errno()), code);
        }
        assert_eq!(plfs_error_to_errno(PLFS_TBD), libc::EIO);
        assert_eq!(errno_to_plfs_error(-5), PLFS_TBD);
        assert!(!strplfserr(12345).is_null());
    }

    #[test]
    fn a_panic_becomes_a_code() {
        assert_eq!(guard(|| panic!("bug")), PLFS_TBD);
        assert_eq!(guard(|| Err(PLFS_EINVAL)), PLFS_EINVAL);
    }
}
