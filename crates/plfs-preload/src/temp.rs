//! mkstemp and its kin, and mkdtemp, on plfs paths.
//!
//! glibc makes the file with its internal open, which no interposer sees:
//! a template under a mount point became a file in the directory the mount
//! point names on the local file system (or failed with ENOENT), and the
//! program's rename of it into the mount then failed (`sed -i`: "cannot
//! rename …: No such file or directory"). Here a name is drawn and the file
//! made with an exclusive plfs open, as glibc does with its own open; for
//! mkdtemp, whose mkdir is glibc's internal one too, the directory with a
//! plfs mkdir.

use std::ffi::{CString, c_char, c_int};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::files;
use crate::libplfs::Errno;
use crate::paths::plfs_path;
use crate::plfs_call;
use crate::posix::int_result;
use crate::real;

/// The characters glibc draws a template's X's from.
const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
/// X's a template ends with (before its suffix).
const XS: usize = 6;
/// Names tried before giving up with EEXIST (glibc tries 62^3).
const ATTEMPTS: usize = 1000;

/// Where the template's six X's are, with `suffix` bytes after them; None
/// (EINVAL) when it does not hold six X's there.
fn xs_range(template: &[u8], suffix: usize) -> Option<std::ops::Range<usize>> {
    let end = template.len().checked_sub(suffix)?;
    let start = end.checked_sub(XS)?;
    template[start..end].iter().all(|&byte| byte == b'X').then_some(start..end)
}

/// A value to draw names from: different per call, process and moment.
fn seed() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    // SAFETY: getpid cannot fail.
    let pid = unsafe { libc::getpid() } as u64;
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    (now.tv_nsec as u64)
        ^ (now.tv_sec as u64).rotate_left(32)
        ^ pid.rotate_left(48)
        ^ count.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// splitmix64: one step of a small, well-mixed generator.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Draws names for a template under a mount point until `create` makes
/// one (anything but EEXIST ends the draw); None for any other template.
///
/// # Safety
/// `template` is NULL or a writable C string.
unsafe fn draw<T>(
    template: *mut c_char,
    suffix: c_int,
    mut create: impl FnMut(CString) -> Result<T, Errno>,
) -> Option<Result<T, Errno>> {
    // Only the directory decides; the X's are a name like any other.
    plfs_path(libc::AT_FDCWD, template)?;
    // SAFETY: the caller's writable C string (not NULL: plfs_path took it).
    let length = unsafe { libc::strlen(template) };
    // SAFETY: as above, `length` bytes, read while nothing else refers to them.
    let written = unsafe { std::slice::from_raw_parts(template.cast::<u8>(), length) };
    let Some(xs) = usize::try_from(suffix).ok().and_then(|suffix| xs_range(written, suffix)) else {
        return Some(Err(libc::EINVAL));
    };
    let mut state = seed();
    let mut result = Err(libc::EEXIST);
    for _ in 0..ATTEMPTS {
        let mut draw = next(&mut state);
        for index in xs.clone() {
            // SAFETY: within the caller's writable string.
            unsafe { *template.add(index) = LETTERS[(draw % LETTERS.len() as u64) as usize] as c_char };
            draw /= LETTERS.len() as u64;
        }
        // plfs_path again, now with the name drawn.
        let Some(logical) = plfs_path(libc::AT_FDCWD, template) else {
            return Some(Err(libc::EINVAL));
        };
        result = create(logical);
        if !matches!(result, Err(libc::EEXIST)) {
            break;
        }
    }
    Some(result)
}

/// Makes the file of a template under a mount point (mkstemp and its kin);
/// None for any other template.
///
/// # Safety
/// `template` is NULL or a writable C string.
unsafe fn make(template: *mut c_char, suffix: c_int, flags: c_int) -> Option<c_int> {
    let flags = (flags & !libc::O_ACCMODE) | libc::O_RDWR | libc::O_CREAT | libc::O_EXCL;
    // SAFETY: the caller's template.
    unsafe { draw(template, suffix, |logical| files::open(logical, flags, 0o600)) }.map(int_result)
}

/// # Safety
/// The mkdtemp(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkdtemp(template: *mut c_char) -> *mut c_char {
    let mkdir = |logical: CString| {
        plfs_call!(mkdir, "plfs_mkdir"(logical.as_ptr(), 0o700 & !crate::umask::current()))
    };
    // SAFETY: the caller's template.
    match unsafe { draw(template, 0, mkdir) } {
        Some(Ok(())) => template,
        Some(Err(error)) => {
            files::set_errno(error);
            std::ptr::null_mut()
        }
        // SAFETY: forwarded unchanged.
        None => unsafe { real::mkdtemp()(template) },
    }
}

/// # Safety
/// The mkstemp(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkstemp(template: *mut c_char) -> c_int {
    // SAFETY: the caller's template.
    if let Some(result) = unsafe { make(template, 0, 0) } {
        return result;
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::mkstemp()(template) }
}

/// # Safety
/// The mkstemp(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkstemp64(template: *mut c_char) -> c_int {
    // SAFETY: the caller's template.
    if let Some(result) = unsafe { make(template, 0, 0) } {
        return result;
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::mkstemp64()(template) }
}

/// # Safety
/// The mkostemp(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkostemp(template: *mut c_char, flags: c_int) -> c_int {
    // SAFETY: the caller's template.
    if let Some(result) = unsafe { make(template, 0, flags) } {
        return result;
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::mkostemp()(template, flags) }
}

/// # Safety
/// The mkostemp(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkostemp64(template: *mut c_char, flags: c_int) -> c_int {
    // SAFETY: the caller's template.
    if let Some(result) = unsafe { make(template, 0, flags) } {
        return result;
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::mkostemp64()(template, flags) }
}

/// # Safety
/// The mkstemps(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkstemps(template: *mut c_char, suffix: c_int) -> c_int {
    // SAFETY: the caller's template.
    if let Some(result) = unsafe { make(template, suffix, 0) } {
        return result;
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::mkstemps()(template, suffix) }
}

/// # Safety
/// The mkstemps(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkstemps64(template: *mut c_char, suffix: c_int) -> c_int {
    // SAFETY: the caller's template.
    if let Some(result) = unsafe { make(template, suffix, 0) } {
        return result;
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::mkstemps64()(template, suffix) }
}

/// # Safety
/// The mkostemps(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkostemps(template: *mut c_char, suffix: c_int, flags: c_int) -> c_int {
    // SAFETY: the caller's template.
    if let Some(result) = unsafe { make(template, suffix, flags) } {
        return result;
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::mkostemps()(template, suffix, flags) }
}

/// # Safety
/// The mkostemps(3) contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkostemps64(template: *mut c_char, suffix: c_int, flags: c_int) -> c_int {
    // SAFETY: the caller's template.
    if let Some(result) = unsafe { make(template, suffix, flags) } {
        return result;
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::mkostemps64()(template, suffix, flags) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_need_six_xs_before_their_suffix() {
        assert_eq!(xs_range(b"/mnt/f.XXXXXX", 0), Some(7..13));
        assert_eq!(xs_range(b"/mnt/f.XXXXXX.txt", 4), Some(7..13));
        assert_eq!(xs_range(b"/mnt/f.XXXXXX.txt", 0), None, "the suffix is not X's");
        assert_eq!(xs_range(b"fXXXXX", 0), None, "five X's");
        assert_eq!(xs_range(b"fXXXXXX", 9), None, "a suffix longer than the template");
    }

    #[test]
    fn draws_differ() {
        let mut state = seed();
        let first = next(&mut state);
        assert_ne!(first, next(&mut state));
        assert_ne!(seed(), seed());
    }
}
