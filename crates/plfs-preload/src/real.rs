//! The real libc functions, found with `dlsym(RTLD_NEXT, …)` on first use
//! and cached. Variadic functions (open, openat, fcntl) keep their variadic
//! type so the call follows the C calling convention for `...`.

use std::ffi::{c_char, c_int, c_long, c_uint, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{DIR, FILE, dirent, dirent64, gid_t, iovec, mode_t, off_t, off64_t, size_t, ssize_t, uid_t};

/// scandir's filter: nonzero keeps the entry.
pub type DirentFilter = Option<unsafe extern "C" fn(*const dirent) -> c_int>;
/// scandir's order (alphasort, versionsort or the program's own).
pub type DirentOrder = Option<unsafe extern "C" fn(*mut *const dirent, *mut *const dirent) -> c_int>;

/// The address of `name` in the objects loaded after this one. A libc
/// function that cannot be found ends the process: continuing would call
/// through a null pointer.
fn lookup(name: &'static str, slot: &AtomicUsize) -> usize {
    let cached = slot.load(Ordering::Acquire);
    if cached != 0 {
        return cached;
    }
    let _inside = crate::guard::Inside::enter();
    // SAFETY: name is a NUL-terminated literal (the macro appends "\0").
    let address = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) } as usize;
    if address == 0 {
        crate::diagnostics::fatal(&format!("libplfs_preload: libc has no {}", name.trim_end_matches('\0')));
    }
    slot.store(address, Ordering::Release);
    address
}

macro_rules! real_functions {
    ($($name:ident: $type:ty;)*) => {
        $(
            pub fn $name() -> $type {
                static SLOT: AtomicUsize = AtomicUsize::new(0);
                let address = lookup(concat!(stringify!($name), "\0"), &SLOT);
                // SAFETY: lookup never returns 0, and the symbol is the libc
                // function of that name, whose C type is $type.
                unsafe { std::mem::transmute::<usize, $type>(address) }
            }
        )*
    };
}

real_functions! {
    open: unsafe extern "C" fn(*const c_char, c_int, ...) -> c_int;
    open64: unsafe extern "C" fn(*const c_char, c_int, ...) -> c_int;
    openat: unsafe extern "C" fn(c_int, *const c_char, c_int, ...) -> c_int;
    openat64: unsafe extern "C" fn(c_int, *const c_char, c_int, ...) -> c_int;
    creat: unsafe extern "C" fn(*const c_char, mode_t) -> c_int;
    creat64: unsafe extern "C" fn(*const c_char, mode_t) -> c_int;
    __open_2: unsafe extern "C" fn(*const c_char, c_int) -> c_int;
    __open64_2: unsafe extern "C" fn(*const c_char, c_int) -> c_int;
    __openat_2: unsafe extern "C" fn(c_int, *const c_char, c_int) -> c_int;
    __openat64_2: unsafe extern "C" fn(c_int, *const c_char, c_int) -> c_int;
    close: unsafe extern "C" fn(c_int) -> c_int;
    close_range: unsafe extern "C" fn(c_uint, c_uint, c_int) -> c_int;
    closefrom: unsafe extern "C" fn(c_int);
    _exit: unsafe extern "C" fn(c_int) -> !;
    read: unsafe extern "C" fn(c_int, *mut c_void, size_t) -> ssize_t;
    write: unsafe extern "C" fn(c_int, *const c_void, size_t) -> ssize_t;
    pread: unsafe extern "C" fn(c_int, *mut c_void, size_t, off_t) -> ssize_t;
    pwrite: unsafe extern "C" fn(c_int, *const c_void, size_t, off_t) -> ssize_t;
    pread64: unsafe extern "C" fn(c_int, *mut c_void, size_t, off64_t) -> ssize_t;
    pwrite64: unsafe extern "C" fn(c_int, *const c_void, size_t, off64_t) -> ssize_t;
    readv: unsafe extern "C" fn(c_int, *const iovec, c_int) -> ssize_t;
    writev: unsafe extern "C" fn(c_int, *const iovec, c_int) -> ssize_t;
    preadv: unsafe extern "C" fn(c_int, *const iovec, c_int, off_t) -> ssize_t;
    pwritev: unsafe extern "C" fn(c_int, *const iovec, c_int, off_t) -> ssize_t;
    preadv64: unsafe extern "C" fn(c_int, *const iovec, c_int, off64_t) -> ssize_t;
    pwritev64: unsafe extern "C" fn(c_int, *const iovec, c_int, off64_t) -> ssize_t;
    lseek: unsafe extern "C" fn(c_int, off_t, c_int) -> off_t;
    lseek64: unsafe extern "C" fn(c_int, off64_t, c_int) -> off64_t;
    fstat: unsafe extern "C" fn(c_int, *mut libc::stat) -> c_int;
    fstat64: unsafe extern "C" fn(c_int, *mut libc::stat64) -> c_int;
    stat: unsafe extern "C" fn(*const c_char, *mut libc::stat) -> c_int;
    stat64: unsafe extern "C" fn(*const c_char, *mut libc::stat64) -> c_int;
    lstat: unsafe extern "C" fn(*const c_char, *mut libc::stat) -> c_int;
    lstat64: unsafe extern "C" fn(*const c_char, *mut libc::stat64) -> c_int;
    fstatat: unsafe extern "C" fn(c_int, *const c_char, *mut libc::stat, c_int) -> c_int;
    fstatat64: unsafe extern "C" fn(c_int, *const c_char, *mut libc::stat64, c_int) -> c_int;
    __xstat: unsafe extern "C" fn(c_int, *const c_char, *mut libc::stat) -> c_int;
    __xstat64: unsafe extern "C" fn(c_int, *const c_char, *mut libc::stat64) -> c_int;
    __lxstat: unsafe extern "C" fn(c_int, *const c_char, *mut libc::stat) -> c_int;
    __lxstat64: unsafe extern "C" fn(c_int, *const c_char, *mut libc::stat64) -> c_int;
    __fxstat: unsafe extern "C" fn(c_int, c_int, *mut libc::stat) -> c_int;
    __fxstat64: unsafe extern "C" fn(c_int, c_int, *mut libc::stat64) -> c_int;
    __fxstatat: unsafe extern "C" fn(c_int, c_int, *const c_char, *mut libc::stat, c_int) -> c_int;
    __fxstatat64: unsafe extern "C" fn(c_int, c_int, *const c_char, *mut libc::stat64, c_int) -> c_int;
    statx: unsafe extern "C" fn(c_int, *const c_char, c_int, c_uint, *mut libc::statx) -> c_int;
    ftruncate: unsafe extern "C" fn(c_int, off_t) -> c_int;
    ftruncate64: unsafe extern "C" fn(c_int, off64_t) -> c_int;
    preadv2: unsafe extern "C" fn(c_int, *const iovec, c_int, off_t, c_int) -> ssize_t;
    preadv64v2: unsafe extern "C" fn(c_int, *const iovec, c_int, off64_t, c_int) -> ssize_t;
    pwritev2: unsafe extern "C" fn(c_int, *const iovec, c_int, off_t, c_int) -> ssize_t;
    pwritev64v2: unsafe extern "C" fn(c_int, *const iovec, c_int, off64_t, c_int) -> ssize_t;
    mmap: unsafe extern "C" fn(*mut c_void, size_t, c_int, c_int, c_int, off_t) -> *mut c_void;
    mmap64: unsafe extern "C" fn(*mut c_void, size_t, c_int, c_int, c_int, off64_t) -> *mut c_void;
    fallocate: unsafe extern "C" fn(c_int, c_int, off_t, off_t) -> c_int;
    fallocate64: unsafe extern "C" fn(c_int, c_int, off64_t, off64_t) -> c_int;
    posix_fallocate: unsafe extern "C" fn(c_int, off_t, off_t) -> c_int;
    posix_fallocate64: unsafe extern "C" fn(c_int, off64_t, off64_t) -> c_int;
    truncate: unsafe extern "C" fn(*const c_char, off_t) -> c_int;
    truncate64: unsafe extern "C" fn(*const c_char, off64_t) -> c_int;
    fsync: unsafe extern "C" fn(c_int) -> c_int;
    fdatasync: unsafe extern "C" fn(c_int) -> c_int;
    unlink: unsafe extern "C" fn(*const c_char) -> c_int;
    unlinkat: unsafe extern "C" fn(c_int, *const c_char, c_int) -> c_int;
    rename: unsafe extern "C" fn(*const c_char, *const c_char) -> c_int;
    renameat: unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char) -> c_int;
    renameat2: unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char, c_uint) -> c_int;
    mkdir: unsafe extern "C" fn(*const c_char, mode_t) -> c_int;
    umask: unsafe extern "C" fn(mode_t) -> mode_t;
    mkdirat: unsafe extern "C" fn(c_int, *const c_char, mode_t) -> c_int;
    rmdir: unsafe extern "C" fn(*const c_char) -> c_int;
    opendir: unsafe extern "C" fn(*const c_char) -> *mut DIR;
    fdopendir: unsafe extern "C" fn(c_int) -> *mut DIR;
    readdir: unsafe extern "C" fn(*mut DIR) -> *mut dirent;
    readdir64: unsafe extern "C" fn(*mut DIR) -> *mut dirent64;
    closedir: unsafe extern "C" fn(*mut DIR) -> c_int;
    dirfd: unsafe extern "C" fn(*mut DIR) -> c_int;
    rewinddir: unsafe extern "C" fn(*mut DIR);
    readlink: unsafe extern "C" fn(*const c_char, *mut c_char, size_t) -> ssize_t;
    readlinkat: unsafe extern "C" fn(c_int, *const c_char, *mut c_char, size_t) -> ssize_t;
    symlink: unsafe extern "C" fn(*const c_char, *const c_char) -> c_int;
    symlinkat: unsafe extern "C" fn(*const c_char, c_int, *const c_char) -> c_int;
    link: unsafe extern "C" fn(*const c_char, *const c_char) -> c_int;
    linkat: unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char, c_int) -> c_int;
    chdir: unsafe extern "C" fn(*const c_char) -> c_int;
    fchdir: unsafe extern "C" fn(c_int) -> c_int;
    getcwd: unsafe extern "C" fn(*mut c_char, size_t) -> *mut c_char;
    __getcwd_chk: unsafe extern "C" fn(*mut c_char, size_t, size_t) -> *mut c_char;
    get_current_dir_name: unsafe extern "C" fn() -> *mut c_char;
    nftw: unsafe extern "C" fn(*const c_char, crate::walk::NftwCallback, c_int, c_int) -> c_int;
    nftw64: unsafe extern "C" fn(*const c_char, crate::walk::NftwCallback, c_int, c_int) -> c_int;
    ftw: unsafe extern "C" fn(*const c_char, crate::walk::FtwCallback, c_int) -> c_int;
    ftw64: unsafe extern "C" fn(*const c_char, crate::walk::FtwCallback, c_int) -> c_int;
    realpath: unsafe extern "C" fn(*const c_char, *mut c_char) -> *mut c_char;
    canonicalize_file_name: unsafe extern "C" fn(*const c_char) -> *mut c_char;
    __realpath_chk: unsafe extern "C" fn(*const c_char, *mut c_char, size_t) -> *mut c_char;
    telldir: unsafe extern "C" fn(*mut DIR) -> c_long;
    seekdir: unsafe extern "C" fn(*mut DIR, c_long);
    readdir_r: unsafe extern "C" fn(*mut DIR, *mut dirent, *mut *mut dirent) -> c_int;
    readdir64_r: unsafe extern "C" fn(*mut DIR, *mut dirent64, *mut *mut dirent64) -> c_int;
    scandirat: unsafe extern "C" fn(c_int, *const c_char, *mut *mut *mut dirent, DirentFilter, DirentOrder) -> c_int;
    access: unsafe extern "C" fn(*const c_char, c_int) -> c_int;
    faccessat: unsafe extern "C" fn(c_int, *const c_char, c_int, c_int) -> c_int;
    euidaccess: unsafe extern "C" fn(*const c_char, c_int) -> c_int;
    eaccess: unsafe extern "C" fn(*const c_char, c_int) -> c_int;
    mkstemp: unsafe extern "C" fn(*mut c_char) -> c_int;
    mkstemp64: unsafe extern "C" fn(*mut c_char) -> c_int;
    mkostemp: unsafe extern "C" fn(*mut c_char, c_int) -> c_int;
    mkostemp64: unsafe extern "C" fn(*mut c_char, c_int) -> c_int;
    mkstemps: unsafe extern "C" fn(*mut c_char, c_int) -> c_int;
    mkstemps64: unsafe extern "C" fn(*mut c_char, c_int) -> c_int;
    mkostemps: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int;
    mkostemps64: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int;
    mkdtemp: unsafe extern "C" fn(*mut c_char) -> *mut c_char;
    dup: unsafe extern "C" fn(c_int) -> c_int;
    dup2: unsafe extern "C" fn(c_int, c_int) -> c_int;
    dup3: unsafe extern "C" fn(c_int, c_int, c_int) -> c_int;
    fcntl: unsafe extern "C" fn(c_int, c_int, ...) -> c_int;
    fcntl64: unsafe extern "C" fn(c_int, c_int, ...) -> c_int;
    fopen: unsafe extern "C" fn(*const c_char, *const c_char) -> *mut FILE;
    fopen64: unsafe extern "C" fn(*const c_char, *const c_char) -> *mut FILE;
    fdopen: unsafe extern "C" fn(c_int, *const c_char) -> *mut FILE;
    freopen: unsafe extern "C" fn(*const c_char, *const c_char, *mut FILE) -> *mut FILE;
    freopen64: unsafe extern "C" fn(*const c_char, *const c_char, *mut FILE) -> *mut FILE;
    fflush: unsafe extern "C" fn(*mut FILE) -> c_int;
    copy_file_range: unsafe extern "C" fn(c_int, *mut off64_t, c_int, *mut off64_t, size_t, c_uint) -> ssize_t;
    sendfile: unsafe extern "C" fn(c_int, c_int, *mut off_t, size_t) -> ssize_t;
    sendfile64: unsafe extern "C" fn(c_int, c_int, *mut off64_t, size_t) -> ssize_t;
    statfs: unsafe extern "C" fn(*const c_char, *mut libc::statfs) -> c_int;
    statfs64: unsafe extern "C" fn(*const c_char, *mut libc::statfs64) -> c_int;
    fstatfs: unsafe extern "C" fn(c_int, *mut libc::statfs) -> c_int;
    fstatfs64: unsafe extern "C" fn(c_int, *mut libc::statfs64) -> c_int;
    statvfs: unsafe extern "C" fn(*const c_char, *mut libc::statvfs) -> c_int;
    statvfs64: unsafe extern "C" fn(*const c_char, *mut libc::statvfs64) -> c_int;
    fstatvfs: unsafe extern "C" fn(c_int, *mut libc::statvfs) -> c_int;
    fstatvfs64: unsafe extern "C" fn(c_int, *mut libc::statvfs64) -> c_int;
    isatty: unsafe extern "C" fn(c_int) -> c_int;
    flock: unsafe extern "C" fn(c_int, c_int) -> c_int;
    lockf: unsafe extern "C" fn(c_int, c_int, off_t) -> c_int;
    lockf64: unsafe extern "C" fn(c_int, c_int, off64_t) -> c_int;
    posix_fadvise: unsafe extern "C" fn(c_int, off_t, off_t, c_int) -> c_int;
    posix_fadvise64: unsafe extern "C" fn(c_int, off64_t, off64_t, c_int) -> c_int;
    chmod: unsafe extern "C" fn(*const c_char, mode_t) -> c_int;
    fchmod: unsafe extern "C" fn(c_int, mode_t) -> c_int;
    fchmodat: unsafe extern "C" fn(c_int, *const c_char, mode_t, c_int) -> c_int;
    chown: unsafe extern "C" fn(*const c_char, uid_t, gid_t) -> c_int;
    lchown: unsafe extern "C" fn(*const c_char, uid_t, gid_t) -> c_int;
    fchown: unsafe extern "C" fn(c_int, uid_t, gid_t) -> c_int;
    fchownat: unsafe extern "C" fn(c_int, *const c_char, uid_t, gid_t, c_int) -> c_int;
    utime: unsafe extern "C" fn(*const c_char, *const libc::utimbuf) -> c_int;
    utimes: unsafe extern "C" fn(*const c_char, *const libc::timeval) -> c_int;
    lutimes: unsafe extern "C" fn(*const c_char, *const libc::timeval) -> c_int;
    futimes: unsafe extern "C" fn(c_int, *const libc::timeval) -> c_int;
    futimesat: unsafe extern "C" fn(c_int, *const c_char, *const libc::timeval) -> c_int;
    utimensat: unsafe extern "C" fn(c_int, *const c_char, *const libc::timespec, c_int) -> c_int;
    futimens: unsafe extern "C" fn(c_int, *const libc::timespec) -> c_int;
    getxattr: unsafe extern "C" fn(*const c_char, *const c_char, *mut c_void, size_t) -> ssize_t;
    lgetxattr: unsafe extern "C" fn(*const c_char, *const c_char, *mut c_void, size_t) -> ssize_t;
    fgetxattr: unsafe extern "C" fn(c_int, *const c_char, *mut c_void, size_t) -> ssize_t;
    listxattr: unsafe extern "C" fn(*const c_char, *mut c_char, size_t) -> ssize_t;
    llistxattr: unsafe extern "C" fn(*const c_char, *mut c_char, size_t) -> ssize_t;
    flistxattr: unsafe extern "C" fn(c_int, *mut c_char, size_t) -> ssize_t;
    setxattr: unsafe extern "C" fn(*const c_char, *const c_char, *const c_void, size_t, c_int) -> c_int;
    lsetxattr: unsafe extern "C" fn(*const c_char, *const c_char, *const c_void, size_t, c_int) -> c_int;
    fsetxattr: unsafe extern "C" fn(c_int, *const c_char, *const c_void, size_t, c_int) -> c_int;
    removexattr: unsafe extern "C" fn(*const c_char, *const c_char) -> c_int;
    lremovexattr: unsafe extern "C" fn(*const c_char, *const c_char) -> c_int;
    fremovexattr: unsafe extern "C" fn(c_int, *const c_char) -> c_int;
}
