//! libplfs.so, loaded at first use: from `$PLFS_LIBPLFS`, else from the
//! directory this interposer was loaded from. The interposer never links
//! the core itself, so the C API, the interposer and the MPI-IO wrapper in
//! one process share one core (one open-file state, one merged index).
//!
//! Each function is looked up on its own: a libplfs without, say,
//! `plfs_rename` still serves everything else, and that call fails with
//! ENOSYS after a one-time message naming the missing function.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::sync::{Mutex, OnceLock};

use libc::{gid_t, mode_t, off_t, pid_t, size_t, ssize_t, uid_t};

use crate::diagnostics::message;
use crate::guard::Inside;

/// `Plfs_fd *` and `Plfs_dirp *`: opaque to the interposer.
pub type PlfsFd = *mut c_void;
pub type PlfsDirp = *mut c_void;

/// An errno value, as every interposer-side failure is reported.
pub type Errno = c_int;

type IsPlfsPath = unsafe extern "C" fn(*const c_char) -> c_int;
type MountPoints = unsafe extern "C" fn(*mut c_char, size_t) -> ssize_t;
type Open = unsafe extern "C" fn(*mut PlfsFd, *const c_char, c_int, pid_t, mode_t, *mut c_void) -> c_int;
type Read = unsafe extern "C" fn(PlfsFd, *mut c_char, size_t, off_t, *mut ssize_t) -> c_int;
type Write = unsafe extern "C" fn(PlfsFd, *const c_char, size_t, off_t, pid_t, *mut ssize_t) -> c_int;
type Close = unsafe extern "C" fn(PlfsFd, pid_t, uid_t, c_int, *mut c_void, *mut c_int) -> c_int;
type Getattr = unsafe extern "C" fn(PlfsFd, *const c_char, *mut libc::stat, c_int) -> c_int;
type Trunc = unsafe extern "C" fn(PlfsFd, *const c_char, off_t, c_int) -> c_int;
type PathOnly = unsafe extern "C" fn(*const c_char) -> c_int;
type TwoPaths = unsafe extern "C" fn(*const c_char, *const c_char) -> c_int;
type PathMode = unsafe extern "C" fn(*const c_char, mode_t) -> c_int;
type PathOwner = unsafe extern "C" fn(*const c_char, uid_t, gid_t) -> c_int;
type PathTimes = unsafe extern "C" fn(*const c_char, *const libc::timespec) -> c_int;
type PathInt = unsafe extern "C" fn(*const c_char, c_int) -> c_int;
type Opendir = unsafe extern "C" fn(*const c_char, *mut PlfsDirp) -> c_int;
type Readdir = unsafe extern "C" fn(PlfsDirp, *mut c_char, size_t) -> c_int;
type Closedir = unsafe extern "C" fn(PlfsDirp) -> c_int;
type Statvfs = unsafe extern "C" fn(*const c_char, *mut libc::statvfs) -> c_int;
type Sync = unsafe extern "C" fn(PlfsFd) -> c_int;
type ErrorToErrno = unsafe extern "C" fn(c_int) -> c_int;
type GetXattr = unsafe extern "C" fn(*const c_char, *const c_char, *mut c_void, size_t, *mut size_t) -> c_int;
type ListXattr = unsafe extern "C" fn(*const c_char, *mut c_char, size_t, *mut size_t) -> c_int;
type SetXattr = unsafe extern "C" fn(*const c_char, *const c_char, *const c_void, size_t, c_int) -> c_int;
type RemoveXattr = unsafe extern "C" fn(*const c_char, *const c_char) -> c_int;

/// The functions of libplfs.so this interposer uses; None when the loaded
/// library does not (yet) export one.
pub struct Library {
    pub is_plfs_path: Option<IsPlfsPath>,
    /// The plfsrc's mount points (no trailing slash), when libplfs can
    /// list them: a clean absolute path under none of them is not a plfs
    /// path, decided without allocating or calling into libplfs.
    pub mount_points: Option<Vec<Vec<u8>>>,
    pub open: Option<Open>,
    pub read: Option<Read>,
    pub write: Option<Write>,
    pub close: Option<Close>,
    pub getattr: Option<Getattr>,
    pub trunc: Option<Trunc>,
    pub unlink: Option<PathOnly>,
    pub rename: Option<TwoPaths>,
    pub mkdir: Option<PathMode>,
    pub rmdir: Option<PathOnly>,
    pub opendir: Option<Opendir>,
    pub readdir: Option<Readdir>,
    pub closedir: Option<Closedir>,
    pub access: Option<PathInt>,
    pub chmod: Option<PathMode>,
    pub chown: Option<PathOwner>,
    pub utimens: Option<PathTimes>,
    pub statvfs: Option<Statvfs>,
    pub sync: Option<Sync>,
    pub flush: Option<Sync>,
    pub refresh: Option<Sync>,
    pub getxattr: Option<GetXattr>,
    pub listxattr: Option<ListXattr>,
    pub setxattr: Option<SetXattr>,
    pub removexattr: Option<RemoveXattr>,
    error_to_errno: Option<ErrorToErrno>,
}

static LIBRARY: OnceLock<Option<Library>> = OnceLock::new();

/// libplfs, loaded on the first call; None (after one message) when it
/// cannot be loaded, and then every path is passed through to libc.
pub fn library() -> Option<&'static Library> {
    LIBRARY.get_or_init(load).as_ref()
}

fn load() -> Option<Library> {
    let _inside = Inside::enter();
    let path = match std::env::var_os("PLFS_LIBPLFS") {
        Some(path) => path.into_encoded_bytes(),
        None => beside_this_library()?,
    };
    let path = CString::new(path).ok()?;
    // SAFETY: path is a C string. RTLD_GLOBAL lets the MPI-IO wrapper (or a
    // program) that links libplfs.so find this same copy.
    let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if handle.is_null() {
        // SAFETY: dlerror returns NULL or a C string valid until the next dl call.
        let reason = unsafe { libc::dlerror() };
        let reason = if reason.is_null() {
            String::from("unknown error")
        } else {
            // SAFETY: non-NULL, a C string.
            unsafe { CStr::from_ptr(reason) }.to_string_lossy().into_owned()
        };
        message(&format!(
            "libplfs_preload: cannot load {} ({reason}); plfs paths are passed to libc unchanged",
            path.to_string_lossy()
        ));
        return None;
    }
    macro_rules! symbol {
        ($name:literal, $type:ty) => {{
            // SAFETY: handle is a live dlopen handle and the name a C string.
            let address = unsafe { libc::dlsym(handle, concat!($name, "\0").as_ptr().cast()) };
            if address.is_null() {
                None
            } else {
                // SAFETY: libplfs exports $name with the PLFS 2.5 signature
                // (include/plfs.h), which the field's type spells out.
                Some(unsafe { std::mem::transmute::<*mut c_void, $type>(address) })
            }
        }};
    }
    let mount_points = symbol!("plfs_mount_points", MountPoints).and_then(mount_points);
    Some(Library {
        is_plfs_path: symbol!("is_plfs_path", IsPlfsPath),
        mount_points,
        open: symbol!("plfs_open", Open),
        read: symbol!("plfs_read", Read),
        write: symbol!("plfs_write", Write),
        close: symbol!("plfs_close", Close),
        getattr: symbol!("plfs_getattr", Getattr),
        trunc: symbol!("plfs_trunc", Trunc),
        unlink: symbol!("plfs_unlink", PathOnly),
        rename: symbol!("plfs_rename", TwoPaths),
        mkdir: symbol!("plfs_mkdir", PathMode),
        rmdir: symbol!("plfs_rmdir", PathOnly),
        opendir: symbol!("plfs_opendir_c", Opendir),
        readdir: symbol!("plfs_readdir_c", Readdir),
        closedir: symbol!("plfs_closedir_c", Closedir),
        access: symbol!("plfs_access", PathInt),
        chmod: symbol!("plfs_chmod", PathMode),
        chown: symbol!("plfs_chown", PathOwner),
        utimens: symbol!("plfs_utimens", PathTimes),
        statvfs: symbol!("plfs_statvfs", Statvfs),
        sync: symbol!("plfs_sync", Sync),
        flush: symbol!("plfs_flush", Sync),
        refresh: symbol!("plfs_refresh", Sync),
        getxattr: symbol!("plfs_path_getxattr", GetXattr),
        listxattr: symbol!("plfs_path_listxattr", ListXattr),
        setxattr: symbol!("plfs_path_setxattr", SetXattr),
        removexattr: symbol!("plfs_path_removexattr", RemoveXattr),
        error_to_errno: symbol!("plfs_error_to_errno", ErrorToErrno),
    })
}

/// Asks libplfs for its mount points (sized call, then the real one).
fn mount_points(list: MountPoints) -> Option<Vec<Vec<u8>>> {
    // SAFETY: a NULL buffer of size 0 only asks for the size.
    let needed = usize::try_from(unsafe { list(std::ptr::null_mut(), 0) }).ok()?;
    let mut buffer = vec![0u8; needed];
    // SAFETY: buffer is writable for its length.
    let written = unsafe { list(buffer.as_mut_ptr().cast(), buffer.len()) };
    if usize::try_from(written).ok()? != needed {
        return None;
    }
    let points =
        buffer.split(|&byte| byte == 0).filter(|point| !point.is_empty()).map(<[u8]>::to_vec).collect();
    Some(points)
}

/// The path this interposer was loaded from, found with dladdr.
pub fn this_library() -> Option<Vec<u8>> {
    // SAFETY: Dl_info is plain data; all-zero is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let address = this_library as fn() -> Option<Vec<u8>> as *const c_void;
    // SAFETY: address is in this library; info is writable.
    if unsafe { libc::dladdr(address, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a C string owned by the loader.
    Some(unsafe { CStr::from_ptr(info.dli_fname) }.to_bytes().to_vec())
}

/// `<directory of libplfs_preload.so>/libplfs.so`.
fn beside_this_library() -> Option<Vec<u8>> {
    let Some(own) = this_library() else {
        message("libplfs_preload: cannot find where it was loaded from; set PLFS_LIBPLFS=/path/libplfs.so");
        return None;
    };
    let directory = match own.iter().rposition(|&byte| byte == b'/') {
        Some(slash) => &own[..=slash],
        None => b"./",
    };
    let mut path = directory.to_vec();
    path.extend_from_slice(b"libplfs.so");
    Some(path)
}

/// A `plfs_error_t` as an errno value (the values PLFS 2.5 added past the
/// errno range become EIO).
pub fn errno_of(library: &Library, error: c_int) -> Errno {
    let errno = match library.error_to_errno {
        // SAFETY: a plain conversion without pointers.
        Some(convert) => unsafe { convert(error) },
        None => error,
    };
    if errno <= 0 || errno >= 297 { libc::EIO } else { errno }
}

/// The missing functions already named in a message.
static MISSING_REPORTED: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());

/// ENOSYS for a function this libplfs lacks, with one message per function.
pub fn missing(name: &'static str) -> Errno {
    let mut reported = MISSING_REPORTED.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if !reported.contains(&name) {
        reported.push(name);
        drop(reported);
        message(&format!(
            "libplfs_preload: libplfs.so has no {name} (older than the PLFS 2.5 API); such calls fail with ENOSYS"
        ));
    }
    libc::ENOSYS
}

/// Calls a libplfs function with the recursion guard set, turning its
/// `plfs_error_t` into Ok or an errno. `$field` names the function.
///
/// The arguments are expanded inside the unsafe call on purpose: they are
/// the pointers and values of that one C call, and every call site states
/// why they meet the C contract.
#[macro_export]
macro_rules! plfs_call {
    ($field:ident, $name:literal ( $($arg:expr),* $(,)? )) => {{
        match $crate::libplfs::library() {
            None => Err(libc::ENOSYS),
            Some(library) => match library.$field {
                None => Err($crate::libplfs::missing($name)),
                Some(function) => {
                    let _inside = $crate::guard::Inside::enter();
                    // SAFETY: the arguments follow the PLFS 2.5 contract of
                    // this function, checked by the caller.
                    let error = unsafe { function($($arg),*) };
                    if error == 0 { Ok(()) } else { Err($crate::libplfs::errno_of(library, error)) }
                }
            },
        }
    }};
}
