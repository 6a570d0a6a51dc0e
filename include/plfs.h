/*
 * plfs.h: the C API of plfs, with the PLFS 2.5 names and signatures so
 * programs written against PLFS 2.5 build unchanged. Implemented in Rust
 * (crates/plfs-capi), installed as libplfs.so / libplfs.a.
 *
 * Conventions (as in PLFS 2.5):
 *  - every call returns a plfs_error_t: PLFS_SUCCESS (0) or an error whose
 *    value is the errno it stands for (PLFS_ENOENT == ENOENT, ...), so
 *    plfs_error_to_errno is the identity on those;
 *  - paths are logical paths under a mount point of the plfsrc found the
 *    usual way ($PLFSRC, ~/.plfsrc, /etc/plfsrc), optionally written with
 *    2.5's MPI-IO prefix: "plfs:/mnt/plfs/f" is "/mnt/plfs/f";
 *  - the pid passed to plfs_open and plfs_write names the writer and must
 *    be unique among the writers of a file (MPI programs pass the rank);
 *  - NULL where a pointer is required returns PLFS_EINVAL (PLFS_EBADF for
 *    a NULL Plfs_fd or Plfs_dirp), never crashes.
 *
 * Thread safety: every call may run on many threads at once, including on
 * one shared Plfs_fd, except that plfs_open (reopen) and plfs_close of the
 * same fd must not race each other (as in PLFS 2.5).
 *
 * Differences from PLFS 2.5 are noted at each call; the main ones:
 * plfs_readdir fills a std::set<std::string> only in C++ (an inline function
 * below), only shared_file (container) mounts are served, and
 * plfs_expand_path's mount/backend outputs are opaque tokens.
 */
#ifndef PLFS_H
#define PLFS_H

/* PLFS 2.5's plfs.h included stdio.h, stdarg.h and string.h, and its own
 * programs rely on that (strdup, printf without their headers). */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <utime.h>

#include "plfs_error.h"

/* The PLFS API this header implements: 2.5's, so programs that choose
 * between API generations by these numbers pick 2.5's calls (plfs_error_t
 * results, num_ref, bytes_read ...). This library's own version is
 * plfs_version(). */
#define plfs_VERSION_MAJOR 2
#define plfs_VERSION_MINOR 5
#define plfs_VERSION_PATCH 0
#define plfs_package_string "plfs 2.5"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { PLFS_API, PLFS_POSIX, PLFS_MPIIO } plfs_interface;

/* An open logical file. Opaque. Calling plfs_open again with the same
 * (non-NULL) *fd adds a reference instead of opening anew; plfs_close
 * drops one and frees the fd with the last. */
typedef struct Plfs_fd Plfs_fd;

typedef struct Plfs_open_opt {
    char *index_stream;         /* ignored: collective opens use plfs_mpi.h */
    int buffer_index;           /* ignored */
    plfs_interface pinter;
    int reopen;                 /* ignored */
    int uniform_restart_enable; /* not supported: must be 0 */
    pid_t uniform_restart_rank;
} Plfs_open_opt;

/* The layout of the mount a path is on (plfs_get_filetype). */
typedef enum { CONTAINER, FLAT_FILE, SMALL_FILE, PFT_UNKNOWN } plfs_filetype;

/* Index types (plfs_get_fileinfo). */
#define CI_UNKNOWN 0
#define CI_BYTERANGE 1
#define CI_PATTERN 2
#define CI_MDHIM 3

/* An open directory listing (plfs_opendir_c). Opaque. */
typedef struct Plfs_dirp Plfs_dirp;

typedef struct Plfs_close_opt {
    off_t last_offset;          /* ignored: sizes come from the logs */
    size_t total_bytes;         /* ignored */
    int valid_meta;             /* ignored */
    plfs_interface pinter;
    size_t num_procs;           /* ignored */
} Plfs_close_opt;

/* 1 if a mount point of the plfsrc covers path (relative: from the current
 * directory), else 0. */
int is_plfs_path(const char *path);

/* Not in PLFS 2.5. The plfsrc's mount points, each NUL-terminated, then one
 * more NUL, copied into buf when size holds them all. Returns the bytes the
 * list needs (call again with a larger buffer when that exceeds size), 1
 * when there is no plfsrc (just the final NUL), -1 for NULL buf with a
 * non-zero size. */
ssize_t plfs_mount_points(char *buf, size_t size);

/* access(2) for this process's real user and groups; mask is F_OK or any
 * of R_OK|W_OK|X_OK (other bits: PLFS_EINVAL). A directory above a mount
 * point answers as the local directory, or, when there is none, as one
 * readable and searchable by all and writable by none (PLFS_EROFS). */
plfs_error_t plfs_access(const char *path, int mask);

plfs_error_t plfs_chmod(const char *path, mode_t mode);

/* (uid_t)-1 / (gid_t)-1 leave that id unchanged. */
plfs_error_t plfs_chown(const char *path, uid_t uid, gid_t gid);

/* Drops one reference; *num_ref (if num_ref is not NULL) is how many are
 * left. The last close finishes the file's writers and frees fd. opt is
 * ignored: sizes come from the logs. */
plfs_error_t plfs_close(Plfs_fd *fd, pid_t pid, uid_t uid, int open_flags, Plfs_close_opt *opt,
                        int *num_ref);

/* Creates path (an existing file is truncated, as creat(2)) and closes it.
 * Of flags only O_EXCL counts, as in 2.5. */
plfs_error_t plfs_create(const char *path, mode_t mode, int flags, pid_t pid);

/* Writes the global index of fd's file (every writer must have closed):
 * later readers open it instead of every index log. */
plfs_error_t plfs_flatten_index(Plfs_fd *fd, const char *path);

/* Attributes of fd's file (fd's buffered index records flushed first) or, when fd is NULL, of
 * path (a directory above a mount point: as for plfs_access). Every field
 * is filled whatever size_only says. st_ino is a hash of
 * the logical path (plfs has no inode numbers). */
plfs_error_t plfs_getattr(Plfs_fd *fd, const char *path, struct stat *st, int size_only);

/* Copies up to len bytes of attribute key into value and zeroes the rest of
 * value; a longer value is cut at len (as 2.5). Missing: PLFS_ENODATA. */
plfs_error_t plfs_getxattr(Plfs_fd *fd, void *value, const char *key, size_t len);

/* Sets attribute key to the C string value (its bytes without the NUL),
 * replacing any: 2.5's three-argument form. */
plfs_error_t plfs_setxattr(Plfs_fd *fd, const void *value, const char *key);

/* Not in PLFS 2.5: sets attribute key to len bytes (any bytes, NULs
 * included), replacing any. */
plfs_error_t plfs_setxattr_len(Plfs_fd *fd, const void *value, const char *key, size_t len);

/* Not in PLFS 2.5: the extended attributes of path (a file or a directory;
 * no descriptor needed) with the conventions of getxattr(2) & co.
 * *length (if not NULL) is the whole value's (list's) length; size 0 only
 * asks for it; a shorter buffer is PLFS_ERANGE (nothing is cut). The list
 * is the names, each ended by a NUL, sorted. flags: 0, XATTR_CREATE
 * (PLFS_EEXIST if present) or XATTR_REPLACE (PLFS_ENODATA if absent); a
 * value too long to keep is PLFS_E2BIG. Missing: PLFS_ENODATA. */
plfs_error_t plfs_path_getxattr(const char *path, const char *key, void *value, size_t size,
                                size_t *length);
plfs_error_t plfs_path_listxattr(const char *path, char *list, size_t size, size_t *length);
plfs_error_t plfs_path_setxattr(const char *path, const char *key, const void *value, size_t size,
                                int flags);
plfs_error_t plfs_path_removexattr(const char *path, const char *key);

/* Hard links are impossible (a file is a container): always PLFS_ENOSYS
 * for valid arguments, as in 2.5. */
plfs_error_t plfs_link(const char *path, const char *to);

plfs_error_t plfs_mkdir(const char *path, mode_t mode);

/* *mode = the type and permission bits of path, as st_mode. */
plfs_error_t plfs_mode(const char *path, mode_t *mode);

/* Opens (with O_CREAT, creates) a logical file. flags are open(2) flags;
 * mode applies when the file is created. A symbolic link is not followed:
 * PLFS_ELOOP, as open(2) with O_NOFOLLOW (2.5 followed it). opt may be NULL. Calling again
 * with the same non-NULL *fd adds a reference. */
plfs_error_t plfs_open(Plfs_fd **fd, const char *path, int flags, pid_t pid, mode_t mode,
                       Plfs_open_opt *opt);

/* References of fd as writers and/or readers (by its open mode), bytes
 * written through fd, and the lazy_stat setting. NULL outputs are skipped. */
plfs_error_t plfs_query(Plfs_fd *fd, size_t *writers, size_t *readers, size_t *bytes_written,
                        int *lazy_stat);

/* Reads up to size bytes at offset; *bytes_read is 0 at or past the end.
 * Holes read as zeros. */
plfs_error_t plfs_read(Plfs_fd *fd, char *buf, size_t size, off_t offset, ssize_t *bytes_read);

/* In C++ (see the end of this header): fills the std::set<std::string>
 * that entries points to with the names in path. In C, where no set can
 * exist, this checks path (PLFS_ENOENT, PLFS_ENOTDIR, ...) and returns
 * PLFS_ENOTSUP: C programs list with plfs_opendir_c. */
#ifndef __cplusplus
plfs_error_t plfs_readdir(const char *path, void *entries);
#endif

/* Opens a listing of path (the names, without "." and ".."). */
plfs_error_t plfs_opendir_c(const char *path, Plfs_dirp **dirp);

/* Copies the next name into dname; "" at the end. A name longer than
 * bufsz - 1 is PLFS_ERANGE and stays next. */
plfs_error_t plfs_readdir_c(Plfs_dirp *dirp, char *dname, size_t bufsz);

plfs_error_t plfs_closedir_c(Plfs_dirp *dirp);

/* Copies the link text (as much as fits) into buf and zeroes the rest of
 * buf; *bytes is the number of text bytes copied. */
plfs_error_t plfs_readlink(const char *path, char *buf, size_t bufsize, int *bytes);

/* Within one mount (across mounts: PLFS_EXDEV). */
plfs_error_t plfs_rename(const char *from, const char *to);

plfs_error_t plfs_rmdir(const char *path);

plfs_error_t plfs_statvfs(const char *path, struct statvfs *stbuf);

/* Makes to (under a mount) a symbolic link whose text is path. */
plfs_error_t plfs_symlink(const char *path, const char *to);

/* Makes what was written through fd durable, data and index. */
plfs_error_t plfs_sync(Plfs_fd *fd);

/* Not in PLFS 2.5: publishes what fd's writes left buffered (a container's
 * index records, a small file's directory records), so other processes
 * reading the file after plfs_refresh or an open see it; a container makes
 * nothing durable here (plfs_sync does). The interposer calls it before a
 * lock is released. */
plfs_error_t plfs_flush(Plfs_fd *fd);

/* Not in PLFS 2.5: drops this process's cached view of fd's file (merged
 * index, size, a small file's directory), so the next read and stat see
 * what other processes published since; fd's own writes stay. No I/O until
 * then. The interposer calls it when a lock is granted. */
plfs_error_t plfs_refresh(Plfs_fd *fd);

/* Small-file (1-N) caches of dir: publish this process's buffered records,
 * drop its cached view. Container mounts keep none: success, as in 2.5. */
plfs_error_t plfs_flush_writes(const char *dir);
plfs_error_t plfs_invalidate_read_cache(const char *dir);

/* Sets the size: through fd when it is open for writing, else of path
 * (fd may be NULL). open_file is accepted and not needed. */
plfs_error_t plfs_trunc(Plfs_fd *fd, const char *path, off_t offset, int open_file);

plfs_error_t plfs_unlink(const char *path);

/* ut NULL: both times are now, as utime(2). */
plfs_error_t plfs_utime(const char *path, struct utimbuf *ut);

/* Not in PLFS 2.5: utimensat(2)'s times (nanoseconds; per entry UTIME_NOW
 * or UTIME_OMIT); times NULL: both are now. */
plfs_error_t plfs_utimens(const char *path, const struct timespec times[2]);

/* Writes size bytes at offset as writer pid. */
plfs_error_t plfs_write(Plfs_fd *fd, const char *buf, size_t size, off_t offset, pid_t pid,
                        ssize_t *bytes_written);

/* The layout of the mount path is on; PFT_UNKNOWN if none covers it. */
plfs_filetype plfs_get_filetype(const char *path);

/* plfs_get_filetype, and *ixtypep (if not NULL): CI_BYTERANGE for
 * containers, else CI_UNKNOWN. */
plfs_filetype plfs_get_fileinfo(const char *path, int *ixtypep);

/* *physical = where logical lives on its canonical backend, malloc'd (free
 * it with free()). *pmountp and *pbackp (each may be NULL) are opaque
 * tokens, equal for the same mount / backend. */
plfs_error_t plfs_expand_path(const char *logical, char **physical, void **pmountp, void **pbackp);

/* *hname = this host's name, in static storage: do not free or modify. */
plfs_error_t plfs_gethostname(char **hname);

/* plfs_error_to_errno, errno_to_plfs_error and strplfserr: plfs_error.h. */

/* Semi-private in 2.5 (plfs_private.h). Static strings. */
const char *plfs_version(void);
const char *plfs_buildtime(void);
/* Wall-clock seconds since the epoch. */
double plfs_wtime(void);

#ifdef __cplusplus
}

#include <set>
#include <string>

/* PLFS 2.5's plfs_readdir for C++ callers: entries points to a
 * std::set<std::string>, which receives the names in path. Built on the C
 * listing calls (the library itself is not C++). */
inline plfs_error_t plfs_readdir(const char *path, void *entries)
{
    if (entries == NULL) {
        return PLFS_EINVAL;
    }
    std::set<std::string> *names = static_cast<std::set<std::string> *>(entries);
    Plfs_dirp *dirp = NULL;
    plfs_error_t error = plfs_opendir_c(path, &dirp);
    if (error != PLFS_SUCCESS) {
        return error;
    }
    char name[4096];
    while ((error = plfs_readdir_c(dirp, name, sizeof name)) == PLFS_SUCCESS && name[0] != '\0') {
        names->insert(name);
    }
    plfs_error_t closed = plfs_closedir_c(dirp);
    return error != PLFS_SUCCESS ? error : closed;
}
#endif

#endif /* PLFS_H */
