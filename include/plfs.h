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
 *    usual way ($PLFSRC, ~/.plfsrc, /etc/plfsrc);
 *  - the pid passed to plfs_open and plfs_write names the writer and must
 *    be unique among the writers of a file (MPI programs pass the rank);
 *  - NULL where a pointer is required returns PLFS_EINVAL, never crashes.
 *
 * This first part of the API covers opening, reading, writing and closing;
 * the rest of PLFS 2.5's calls are added to this header as they are built.
 */
#ifndef PLFS_H
#define PLFS_H

#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PLFS_SUCCESS = 0,
    PLFS_EPERM = 1,
    PLFS_ENOENT = 2,
    PLFS_ESRCH = 3,
    PLFS_EINTR = 4,
    PLFS_EIO = 5,
    PLFS_ENXIO = 6,
    PLFS_E2BIG = 7,
    PLFS_EBADF = 9,
    PLFS_EAGAIN = 11,
    PLFS_ENOMEM = 12,
    PLFS_EACCES = 13,
    PLFS_EFAULT = 14,
    PLFS_EBUSY = 16,
    PLFS_EEXIST = 17,
    PLFS_EXDEV = 18,
    PLFS_ENODEV = 19,
    PLFS_ENOTDIR = 20,
    PLFS_EISDIR = 21,
    PLFS_EINVAL = 22,
    PLFS_ENFILE = 23,
    PLFS_EMFILE = 24,
    PLFS_EFBIG = 27,
    PLFS_ENOSPC = 28,
    PLFS_ESPIPE = 29,
    PLFS_EROFS = 30,
    PLFS_EMLINK = 31,
    PLFS_ERANGE = 34,
    PLFS_EDEADLK = 35,
    PLFS_ENAMETOOLONG = 36,
    PLFS_ENOSYS = 38,
    PLFS_ENOTEMPTY = 39,
    PLFS_ELOOP = 40,
    PLFS_ENODATA = 61,
    PLFS_ETIME = 62,
    PLFS_EOVERFLOW = 75,
    PLFS_EBADFD = 77,
    PLFS_ENOTSUP = 95,
    PLFS_ETIMEDOUT = 110,
    PLFS_ESTALE = 116,
    PLFS_EDQUOT = 122,
    /* Not errno values (their numbers are this library's own). */
    PLFS_EEOF = 297,
    PLFS_SIGSEGV = 298,
    PLFS_SIGBUS = 299,
    PLFS_TBD = 300 /* any other failure; plfs_error_to_errno gives EIO */
} plfs_error_t;

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

typedef struct Plfs_close_opt {
    off_t last_offset;          /* ignored: sizes come from the logs */
    size_t total_bytes;         /* ignored */
    int valid_meta;             /* ignored */
    plfs_interface pinter;
    size_t num_procs;           /* ignored */
} Plfs_close_opt;

/* Opens (with O_CREAT, creates) a logical file. flags are open(2) flags;
 * mode applies when the file is created. opt may be NULL. */
/* 1 if a mount point of the plfsrc covers path (relative: from the current
 * directory), else 0. */
int is_plfs_path(const char *path);

plfs_error_t plfs_open(Plfs_fd **fd, const char *path, int flags, pid_t pid, mode_t mode,
                       Plfs_open_opt *opt);

/* Reads up to size bytes at offset; *bytes_read is 0 at or past the end.
 * Holes read as zeros. */
plfs_error_t plfs_read(Plfs_fd *fd, char *buf, size_t size, off_t offset, ssize_t *bytes_read);

/* Writes size bytes at offset as writer pid. */
plfs_error_t plfs_write(Plfs_fd *fd, const char *buf, size_t size, off_t offset, pid_t pid,
                        ssize_t *bytes_written);

/* Drops one reference; *num_ref (if num_ref is not NULL) is how many are
 * left. The last close finishes the file's writers and frees fd. */
plfs_error_t plfs_close(Plfs_fd *fd, pid_t pid, uid_t uid, int open_flags, Plfs_close_opt *opt,
                        int *num_ref);

/* Writes the global index of fd's file (every writer must have closed):
 * later readers open it instead of every index log. */
plfs_error_t plfs_flatten_index(Plfs_fd *fd, const char *path);

int plfs_error_to_errno(plfs_error_t error);
plfs_error_t errno_to_plfs_error(int errno_value);
/* A static description; never NULL. */
const char *strplfserr(plfs_error_t error);

#ifdef __cplusplus
}
#endif

#endif /* PLFS_H */
