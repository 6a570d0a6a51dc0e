//! Which calls are plfs calls: a path (relative ones resolved against the
//! current directory or the directory descriptor of an *at call) that a
//! mount point of the plfsrc covers, as libplfs's `is_plfs_path` says,
//! also when written with PLFS 2.5's `plfs:` prefix.
//!
//! A working directory (or a directory descriptor) in a backend mirror of
//! a plfs directory stands for that directory (see `cwd`): relative paths
//! are resolved against the logical path, and a relative path that leaves
//! the mount reaches libc made absolute ([`LibcPath`]).

use std::ffi::{CStr, CString, c_char, c_int};

use crate::cwd;
use crate::files;
use crate::guard::{Inside, inside};
use crate::libplfs::library;
use crate::mounts;

/// PLFS 2.5's MPI-IO prefix for plfs paths (libplfs strips it too).
const PREFIX: &[u8] = b"plfs:";

/// PATH_MAX: longer paths are never plfs paths (libc will refuse them).
pub const PATH_BYTES_MAX: usize = 4096;

/// The absolute logical path when `path` (relative to `dirfd`) is a plfs
/// path, with or without the `plfs:` prefix PLFS 2.5 accepted (as libplfs
/// does: `open("plfs:/mnt/plfs/f")` from any program is the plfs file);
/// None for every other path, which libc then gets as it was written, and
/// whenever the call must go to libc (inside libplfs, libplfs missing,
/// NULL path).
pub fn plfs_path(dirfd: c_int, path: *const c_char) -> Option<CString> {
    if inside() || path.is_null() {
        return None;
    }
    // SAFETY: libc callers pass a C string; NULL was excluded.
    let written = unsafe { CStr::from_ptr(path) }.to_bytes();
    let bytes = written.strip_prefix(PREFIX).unwrap_or(written);
    if bytes.is_empty() || bytes.len() > PATH_BYTES_MAX {
        return None;
    }
    // The common case for every other file: no allocation, and libplfs is
    // not even loaded. The interposer's own reading of the plfsrc comes
    // first; libplfs's list only when that failed.
    let own = mounts::mount_points();
    let points = match own {
        Some(points) => Some(points),
        None => library()?.mount_points.as_deref(),
    };
    if let Some(points) = points
        && certainly_elsewhere(dirfd, bytes, points)
    {
        return None;
    }
    let library = library()?;
    let absolute = absolute(dirfd, bytes)?;
    // The interposer's own points come from the core's parser, normalised
    // as libplfs's are, and `absolute` is normalised the same way: the
    // prefix test is libplfs's answer, without a second normalisation (and
    // its allocations) inside libplfs on every call.
    if let Some(points) = own {
        return points.iter().any(|point| under(&absolute, point)).then(|| CString::new(absolute).ok())?;
    }
    let is_plfs_path = library.is_plfs_path?;
    let absolute = CString::new(absolute).ok()?;
    let _inside = Inside::enter();
    // SAFETY: absolute is a C string.
    (unsafe { is_plfs_path(absolute.as_ptr()) } == 1).then_some(absolute)
}

/// Whether `path` is under none of `points`, decided without allocating:
/// a clean absolute path by its prefix; a relative one without ".." (so it
/// stays below the current directory) when the current directory is in no
/// mount and holds none.
fn certainly_elsewhere(dirfd: c_int, path: &[u8], points: &[Vec<u8>]) -> bool {
    let outside = |absolute: &[u8]| is_clean(absolute) && !points.iter().any(|point| under(absolute, point));
    if path[0] == b'/' {
        return outside(path);
    }
    if dirfd != libc::AT_FDCWD || path.split(|&byte| byte == b'/').any(|part| part == b"..") {
        return false;
    }
    let mut buffer = [0u8; PATH_BYTES_MAX + 1];
    // SAFETY: buffer is writable for its length.
    if unsafe { crate::real::getcwd()(buffer.as_mut_ptr().cast(), buffer.len()) }.is_null() {
        return false;
    }
    let length = buffer.iter().position(|&byte| byte == 0).unwrap_or(0);
    let cwd = &buffer[..length];
    // Below the working directory: neither in a mount nor above one, nor
    // a backend mirror standing for a plfs directory.
    length > 0
        && outside(cwd)
        && !points.iter().any(|point| under(point, cwd))
        && cwd::logical_of(cwd).is_none()
}

/// Whether a lexical prefix test on `path` is exact: no empty, "." or ".."
/// component to normalise away.
fn is_clean(path: &[u8]) -> bool {
    path.split(|&byte| byte == b'/').skip(1).all(|part| !matches!(part, b"" | b"." | b"..")) || path == b"/"
}

/// Whether `path` is `point` or below it.
pub fn under(path: &[u8], point: &[u8]) -> bool {
    point == b"/" || (path.starts_with(point) && matches!(path.get(point.len()), None | Some(b'/')))
}

/// `path` made absolute and lexically normalised ("." and ".." removed), so
/// the prefix test in libplfs sees the same spelling as the plfsrc.
fn absolute(dirfd: c_int, path: &[u8]) -> Option<Vec<u8>> {
    if path.starts_with(b"/") && is_clean(path) {
        // Already normal, as a program that names its files by absolute
        // paths writes them: one copy (with room for the NUL the CString
        // adds) instead of splitting it into a vector of components and
        // joining them again on every call (a tenth of a preloaded stat).
        let mut normal = Vec::with_capacity(path.len() + 1);
        normal.extend_from_slice(path);
        return Some(normal);
    }
    let mut joined = if path.starts_with(b"/") {
        Vec::new()
    } else if dirfd == libc::AT_FDCWD {
        cwd::current()?
    } else if let Some(directory) = files::directory_path(dirfd) {
        directory.into_bytes()
    } else {
        descriptor_path(dirfd)?
    };
    joined.push(b'/');
    joined.extend_from_slice(path);
    Some(normalise(&joined))
}

/// The path a real directory descriptor was opened with, from /proc.
fn descriptor_path(dirfd: c_int) -> Option<Vec<u8>> {
    let link = CString::new(format!("/proc/self/fd/{dirfd}")).ok()?;
    let mut buffer = vec![0u8; PATH_BYTES_MAX + 1];
    // SAFETY: link is a C string and buffer writable for its length.
    let length = unsafe { libc::readlink(link.as_ptr(), buffer.as_mut_ptr().cast(), buffer.len()) };
    let length = usize::try_from(length).ok().filter(|&length| length > 0 && length <= PATH_BYTES_MAX)?;
    buffer.truncate(length);
    buffer.starts_with(b"/").then_some(buffer)
}

/// The path a libc call that is no plfs call gets: the caller's own, except
/// a relative one while the working directory is a backend mirror (a
/// relative path that leaves the mount, such as `../../x`): the kernel would
/// resolve it from the mirror, so it goes made absolute from the logical
/// working directory.
pub struct LibcPath {
    original: *const c_char,
    absolute: Option<CString>,
}

impl LibcPath {
    pub fn new(dirfd: c_int, path: *const c_char) -> LibcPath {
        LibcPath { original: path, absolute: Self::rewritten(dirfd, path) }
    }

    fn rewritten(dirfd: c_int, path: *const c_char) -> Option<CString> {
        if dirfd != libc::AT_FDCWD || path.is_null() {
            return None;
        }
        // SAFETY: libc callers pass a C string; NULL was excluded, so its
        // first byte can be read (an absolute path ends the check at once).
        if matches!(unsafe { *path } as u8, b'/' | 0) || inside() || !cwd::maybe_in_mirror() {
            return None;
        }
        // SAFETY: as above.
        let written = unsafe { CStr::from_ptr(path) }.to_bytes();
        CString::new(absolute(libc::AT_FDCWD, written)?).ok()
    }

    pub fn as_ptr(&self) -> *const c_char {
        self.absolute.as_ref().map_or(self.original, |absolute| absolute.as_ptr())
    }
}

/// "/a/./b//../c" → "/a/c". Lexical: a ".." after a symbolic link is taken
/// lexically too (plfs namespaces hold no symbolic links).
pub fn normalise(path: &[u8]) -> Vec<u8> {
    let mut parts: Vec<&[u8]> = Vec::new();
    for part in path.split(|&byte| byte == b'/') {
        match part {
            b"" | b"." => {}
            b".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    if parts.is_empty() {
        return b"/".to_vec();
    }
    let mut normal = Vec::with_capacity(path.len() + 1);
    for part in parts {
        normal.push(b'/');
        normal.extend_from_slice(part);
    }
    normal
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_clean_paths_take_the_fast_negative_answer() {
        for clean in [&b"/"[..], b"/a", b"/mnt/plfs/f", b"/a.b/..c"] {
            assert!(is_clean(clean), "{}", String::from_utf8_lossy(clean));
        }
        for unclean in [&b"/a//b"[..], b"/a/./b", b"/mnt/plfs/../x", b"/a/", b"/a/.."] {
            assert!(!is_clean(unclean), "{}", String::from_utf8_lossy(unclean));
        }
    }

    /// An absolute path that is already clean skips `normalise`: the
    /// answer must be the same as `normalise`'s for every spelling.
    #[test]
    fn absolute_paths_come_out_as_normalise_makes_them() {
        for path in [
            &b"/"[..],
            b"//",
            b"/a",
            b"/mnt/plfs/f",
            b"/a.b/..c",
            b"/a//b",
            b"/a/./b",
            b"/mnt/plfs/../x",
            b"/a/",
            b"/a/..",
        ] {
            assert_eq!(
                absolute(libc::AT_FDCWD, path),
                Some(normalise(path)),
                "{}",
                String::from_utf8_lossy(path)
            );
        }
    }

    #[test]
    fn under_respects_component_boundaries() {
        assert!(under(b"/mnt/plfs", b"/mnt/plfs"));
        assert!(under(b"/mnt/plfs/f", b"/mnt/plfs"));
        assert!(!under(b"/mnt/plfsx/f", b"/mnt/plfs"));
        assert!(!under(b"/mnt", b"/mnt/plfs"));
        assert!(under(b"/anything", b"/"));
    }
}
