//! nftw and ftw over plfs directories. glibc's own walk opens, reads and
//! stats through internal calls no interposer sees: on a plfs path it failed
//! with ENOENT, and from a working directory inside the mount it walked the
//! backend directory that stands for it, containers and logs included. For
//! a plfs path the interposer walks itself, through its own opendir,
//! readdir and stat family, with glibc's flags, type flags and return
//! values; every other path goes to glibc's walk.

use std::ffi::{CStr, CString, c_char, c_int};

use crate::cwd;
use crate::dirs;
use crate::files;
use crate::meta;
use crate::paths::plfs_path;

/// `struct FTW` of <ftw.h>.
#[repr(C)]
pub struct Ftw {
    base: c_int,
    level: c_int,
}

pub type NftwCallback = unsafe extern "C" fn(*const c_char, *const libc::stat, c_int, *mut Ftw) -> c_int;
pub type FtwCallback = unsafe extern "C" fn(*const c_char, *const libc::stat, c_int) -> c_int;

// Type flags.
const FTW_F: c_int = 0;
const FTW_D: c_int = 1;
const FTW_DNR: c_int = 2;
const FTW_NS: c_int = 3;
const FTW_SL: c_int = 4;
const FTW_DP: c_int = 5;
const FTW_SLN: c_int = 6;
// nftw's flags.
const FTW_PHYS: c_int = 1;
const FTW_MOUNT: c_int = 2;
const FTW_CHDIR: c_int = 4;
const FTW_DEPTH: c_int = 8;
const FTW_ACTIONRETVAL: c_int = 16;
// FTW_ACTIONRETVAL's answers.
const FTW_CONTINUE: c_int = 0;
const FTW_SKIP_SUBTREE: c_int = 2;
const FTW_SKIP_SIBLINGS: c_int = 3;

#[derive(Clone, Copy)]
enum Callback {
    New(NftwCallback),
    Old(FtwCallback),
}

/// What a visit tells the walk.
enum Next {
    Continue,
    /// FTW_SKIP_SUBTREE from a directory's FTW_D visit.
    SkipSubtree,
    SkipSiblings,
    /// End the walk and return this.
    Stop(c_int),
}

struct Walk {
    callback: Callback,
    flags: c_int,
    /// The path as the caller spelled it, then each entry's name appended:
    /// what the callback gets.
    path: Vec<u8>,
    /// The same path, absolute and logical: what the walk itself opens and
    /// stats (FTW_CHDIR moves the working directory under relative paths).
    logical: Vec<u8>,
    device: libc::dev_t,
}

impl Walk {
    fn visit(&self, stat: &libc::stat, kind: c_int, base: usize, level: usize) -> Next {
        let path = CString::new(self.path.clone()).unwrap_or_default();
        let result = match self.callback {
            Callback::New(callback) => {
                let mut ftw = Ftw { base: base as c_int, level: level as c_int };
                // SAFETY: the caller's callback, with a C string, a stat and
                // a struct FTW that live across the call.
                unsafe { callback(path.as_ptr(), stat, kind, &mut ftw) }
            }
            Callback::Old(callback) => {
                // ftw has no FTW_SL or FTW_SLN: it follows links.
                let kind = if kind == FTW_SLN { FTW_NS } else { kind };
                // SAFETY: as above.
                unsafe { callback(path.as_ptr(), stat, kind) }
            }
        };
        if self.flags & FTW_ACTIONRETVAL == 0 {
            return if result == 0 { Next::Continue } else { Next::Stop(result) };
        }
        match result {
            FTW_CONTINUE => Next::Continue,
            FTW_SKIP_SUBTREE => Next::SkipSubtree,
            FTW_SKIP_SIBLINGS => Next::SkipSiblings,
            other => Next::Stop(other),
        }
    }

    /// stat (lstat with FTW_PHYS) of the current path; the type flag when
    /// it fails (FTW_NS, or FTW_SLN for a dangling link when following).
    fn stat(&self) -> Result<libc::stat, c_int> {
        let path = CString::new(self.logical.clone()).map_err(|_| FTW_NS)?;
        // SAFETY: stat is plain data; all-zero is valid.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        let found = if self.flags & FTW_PHYS != 0 {
            // SAFETY: a C string and a stat buffer; the interposer's own call.
            unsafe { meta::lstat(path.as_ptr(), &mut stat) }
        } else {
            // SAFETY: as above.
            unsafe { meta::stat(path.as_ptr(), &mut stat) }
        };
        if found == 0 {
            return Ok(stat);
        }
        // SAFETY: as above.
        let link = unsafe { meta::lstat(path.as_ptr(), &mut stat) } == 0
            && stat.st_mode & libc::S_IFMT == libc::S_IFLNK;
        Err(if self.flags & FTW_PHYS == 0 && link { FTW_SLN } else { FTW_NS })
    }

    fn chdir(&self, logical: &[u8]) -> Result<(), c_int> {
        let path = CString::new(logical).map_err(|_| libc::EINVAL)?;
        // SAFETY: a C string; the interposer's own chdir.
        if unsafe { cwd::chdir(path.as_ptr()) } == 0 { Ok(()) } else { Err(files::errno()) }
    }

    /// The entry at the current path, whose name starts at `base`.
    fn entry(&mut self, base: usize, level: usize) -> Result<Next, c_int> {
        let stat = match self.stat() {
            Ok(stat) => stat,
            Err(kind) => {
                // SAFETY: all-zero is a valid stat; the callback's is undefined.
                let zero: libc::stat = unsafe { std::mem::zeroed() };
                return Ok(self.visit(&zero, kind, base, level));
            }
        };
        match stat.st_mode & libc::S_IFMT {
            libc::S_IFDIR => {
                if self.flags & FTW_MOUNT != 0 && stat.st_dev != self.device {
                    return Ok(Next::Continue);
                }
                self.directory(&stat, base, level)
            }
            libc::S_IFLNK => Ok(self.visit(&stat, FTW_SL, base, level)),
            _ => Ok(self.visit(&stat, FTW_F, base, level)),
        }
    }

    fn directory(&mut self, stat: &libc::stat, base: usize, level: usize) -> Result<Next, c_int> {
        let names = match self.names() {
            Ok(names) => names,
            Err(libc::EACCES) => return Ok(self.visit(stat, FTW_DNR, base, level)),
            Err(error) => return Err(error),
        };
        if self.flags & FTW_DEPTH == 0 {
            match self.visit(stat, FTW_D, base, level) {
                Next::Continue => {}
                Next::SkipSubtree => return Ok(Next::Continue),
                other => return Ok(other),
            }
        }
        if self.flags & FTW_CHDIR != 0 {
            let here = self.logical.clone();
            self.chdir(&here)?;
        }
        let (path_length, logical_length) = (self.path.len(), self.logical.len());
        for name in names {
            self.path.push(b'/');
            self.path.extend_from_slice(&name);
            self.logical.push(b'/');
            self.logical.extend_from_slice(&name);
            let next = self.entry(path_length + 1, level + 1);
            self.path.truncate(path_length);
            self.logical.truncate(logical_length);
            match next? {
                Next::Continue | Next::SkipSubtree => {}
                Next::SkipSiblings => break,
                stop @ Next::Stop(_) => return Ok(stop),
            }
        }
        if self.flags & FTW_CHDIR != 0 {
            // Back in the directory holding this one, as for its siblings.
            let parent = parent(&self.logical).to_vec();
            self.chdir(&parent)?;
        }
        if self.flags & FTW_DEPTH != 0 {
            return Ok(self.visit(stat, FTW_DP, base, level));
        }
        Ok(Next::Continue)
    }

    /// The names in the current directory (without "." and ".."), read
    /// whole before the walk goes down, so it holds one stream at a time.
    fn names(&self) -> Result<Vec<Vec<u8>>, c_int> {
        let path = CString::new(self.logical.clone()).map_err(|_| libc::EINVAL)?;
        // SAFETY: a C string; the interposer's own directory streams.
        let stream = unsafe { dirs::opendir(path.as_ptr()) };
        if stream.is_null() {
            return Err(files::errno());
        }
        let mut names = Vec::new();
        loop {
            // SAFETY: a live stream of ours.
            let entry = unsafe { dirs::readdir64(stream) };
            if entry.is_null() {
                break;
            }
            // SAFETY: d_name is a NUL-terminated array in the entry.
            let name = unsafe { CStr::from_ptr((*entry).d_name.as_ptr()) }.to_bytes();
            if name != b"." && name != b".." {
                names.push(name.to_vec());
            }
        }
        // SAFETY: the stream, closed once.
        unsafe { dirs::closedir(stream) };
        Ok(names)
    }
}

/// `path` without its last component ("/" for a top-level name).
fn parent(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&byte| byte == b'/') {
        Some(0) => b"/",
        Some(slash) => &path[..slash],
        None => b".",
    }
}

/// The walk of a plfs path; None when `path` is no plfs path.
fn walk(path: *const c_char, callback: Callback, flags: c_int) -> Option<c_int> {
    let logical = plfs_path(libc::AT_FDCWD, path)?;
    // SAFETY: plfs_path accepted it as a C string.
    let given = unsafe { CStr::from_ptr(path) }.to_bytes();
    // The last component's offset, trailing slashes aside, as glibc's.
    let trimmed =
        given.len() - given.iter().rev().take_while(|&&byte| byte == b'/').count().min(given.len() - 1);
    let base = given[..trimmed].iter().rposition(|&byte| byte == b'/').map_or(0, |slash| slash + 1);
    let mut walk = Walk { callback, flags, path: given.to_vec(), logical: logical.into_bytes(), device: 0 };
    // The top must be there (glibc calls nothing back otherwise).
    match walk.stat() {
        Ok(top) => walk.device = top.st_dev,
        Err(_) => return Some(-1),
    }
    // FTW_CHDIR: the callbacks run in the directory holding each entry,
    // and the walk ends where it began.
    let start = if flags & FTW_CHDIR != 0 { cwd::current() } else { None };
    if flags & FTW_CHDIR != 0 {
        let holder = parent(&walk.logical).to_vec();
        if let Err(error) = walk.chdir(&holder) {
            files::set_errno(error);
            return Some(-1);
        }
    }
    let result = match walk.entry(base, 0) {
        Ok(Next::Continue | Next::SkipSubtree | Next::SkipSiblings) => 0,
        Ok(Next::Stop(result)) => result,
        Err(error) => {
            files::set_errno(error);
            -1
        }
    };
    if let Some(start) = start {
        let _ = walk.chdir(&start);
    }
    Some(result)
}

macro_rules! walks {
    ($name:ident, $callback:ty, $wrap:path, $contract:literal) => {
        /// # Safety
        #[doc = $contract]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            path: *const c_char,
            callback: $callback,
            open_max: c_int,
            flags: c_int,
        ) -> c_int {
            if let Some(result) = walk(path, $wrap(callback), flags) {
                return result;
            }
            // SAFETY: forwarded unchanged.
            unsafe { crate::real::$name()(path, callback, open_max, flags) }
        }
    };
    ($name:ident, $callback:ty, $wrap:path, $contract:literal, no_flags) => {
        /// # Safety
        #[doc = $contract]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(path: *const c_char, callback: $callback, open_max: c_int) -> c_int {
            if let Some(result) = walk(path, $wrap(callback), 0) {
                return result;
            }
            // SAFETY: forwarded unchanged.
            unsafe { crate::real::$name()(path, callback, open_max) }
        }
    };
}

// stat64 is stat on the 64-bit targets this builds for (see posix.rs).
walks!(nftw, NftwCallback, Callback::New, "The nftw(3) contract.");
walks!(nftw64, NftwCallback, Callback::New, "The nftw(3) contract.");
walks!(ftw, FtwCallback, Callback::Old, "The ftw(3) contract.", no_flags);
walks!(ftw64, FtwCallback, Callback::Old, "The ftw(3) contract.", no_flags);
