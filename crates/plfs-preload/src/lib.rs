//! libplfs_preload.so: run unmodified programs on plfs with
//! `LD_PRELOAD=…/libplfs_preload.so PLFSRC=… program`.
//!
//! Calls on paths under a mount point of the plfsrc, and on the
//! descriptors, directory streams and FILE streams opened from them, go to
//! libplfs.so through its PLFS 2.5 C API; every other call goes to the
//! real libc function unchanged.
//!
//! - `guard`: the "inside plfs" flag that sends libplfs's own I/O to libc.
//! - `real`: the real libc functions (`dlsym(RTLD_NEXT, …)`).
//! - `libplfs`: loading libplfs.so and calling it.
//! - `mounts`: the plfsrc's mount points, read without libplfs.
//! - `paths`: which paths are plfs paths.
//! - `cwd`: chdir into a plfs directory, fchdir, the getcwd family.
//! - `files`: the descriptor table and open-file state; fork and exit.
//! - `reserve`: the kernel descriptor numbers plfs descriptors hold.
//! - `offsets`: file offsets in memory a forked child shares.
//! - `ends`: the end of file O_APPEND writers on the node share.
//! - `locks`: flock, record locks and lockf between the node's processes.
//! - `posix`: open, read, write, lseek, dup, fcntl, copy_file_range, …
//! - `meta`: stat family, statx, unlink, rename, mkdir, access, statvfs, …
//! - `attrs`: chmod, chown and the utime family (path, *at, descriptor).
//! - `dirs`: opendir, readdir, closedir, fdopendir, dirfd.
//! - `walk`: nftw and ftw over plfs directories.
//! - `links`: readlink, symlink, link and realpath (plfs keeps no links).
//! - `stdio`: fopen, fdopen (fopencookie streams), freopen.
//! - `temp`: mkstemp and its kin.
//! - `pump`: plfs files redirected onto 0, 1, 2 (or freopen'd): pipes a
//!   pump process drains into (or fills from) the file.
//! - `xattrs`: getxattr, setxattr, listxattr, removexattr (l*, f* too).
//! - `writer`: the writer id (the pid, or the MPI rank the MPI-IO wrapper names).

// plfs_call! expands its arguments inside the one unsafe C call they are
// for (see libplfs.rs); the lint is only honoured at crate level.
#![allow(clippy::macro_metavars_in_unsafe)]

mod attrs;
mod cwd;
mod diagnostics;
mod dirs;
mod ends;
mod files;
mod guard;
mod libplfs;
mod links;
mod locks;
mod meta;
mod mounts;
mod offsets;
mod paths;
mod posix;
mod pump;
mod real;
mod reserve;
mod stdio;
mod temp;
mod umask;
mod walk;
mod writer;
mod xattrs;
