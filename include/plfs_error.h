/*
 * plfs_error.h: plfs_error_t, the result of every plfs call, and its
 * converters, with the names of PLFS 2.5's plfs_error.h (programs include
 * either header; plfs.h includes this one).
 *
 * Each PLFS_E* code is the errno it is named after (PLFS_ENOENT == ENOENT),
 * so plfs_error_to_errno is the identity on them. PLFS 2.5 numbered its
 * codes 0, 1, 2, ... in its own order instead; a program that uses the
 * names, as 2.5's own programs do, sees no difference.
 */
#ifndef PLFS_ERROR_H
#define PLFS_ERROR_H

#include <errno.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PLFS_SUCCESS = 0,
    PLFS_EPERM = EPERM,
    PLFS_ENOENT = ENOENT,
    PLFS_ESRCH = ESRCH,
    PLFS_EINTR = EINTR,
    PLFS_EIO = EIO,
    PLFS_ENXIO = ENXIO,
    PLFS_E2BIG = E2BIG,
    PLFS_EBADF = EBADF,
    PLFS_EAGAIN = EAGAIN,
    PLFS_ENOMEM = ENOMEM,
    PLFS_EACCES = EACCES,
    PLFS_EFAULT = EFAULT,
    PLFS_EBUSY = EBUSY,
    PLFS_EEXIST = EEXIST,
    PLFS_EXDEV = EXDEV,
    PLFS_ENODEV = ENODEV,
    PLFS_ENOTDIR = ENOTDIR,
    PLFS_EISDIR = EISDIR,
    PLFS_EINVAL = EINVAL,
    PLFS_ENFILE = ENFILE,
    PLFS_EMFILE = EMFILE,
    PLFS_ENOTTY = ENOTTY,
    PLFS_ETXTBSY = ETXTBSY,
    PLFS_EFBIG = EFBIG,
    PLFS_ENOSPC = ENOSPC,
    PLFS_ESPIPE = ESPIPE,
    PLFS_EROFS = EROFS,
    PLFS_EMLINK = EMLINK,
    PLFS_EPIPE = EPIPE,
    PLFS_ERANGE = ERANGE,
    PLFS_EDEADLK = EDEADLK,
    PLFS_ENAMETOOLONG = ENAMETOOLONG,
    PLFS_ENOSYS = ENOSYS,
    PLFS_ENOTEMPTY = ENOTEMPTY,
    PLFS_ELOOP = ELOOP,
    PLFS_ENODATA = ENODATA,
    PLFS_ETIME = ETIME,
    PLFS_EOVERFLOW = EOVERFLOW,
    PLFS_EBADFD = EBADFD,
    PLFS_EPROTOTYPE = EPROTOTYPE,
    PLFS_ENOTSUP = ENOTSUP,
    PLFS_ETIMEDOUT = ETIMEDOUT,
    PLFS_ESTALE = ESTALE,
    PLFS_EDQUOT = EDQUOT,
    /* Not errno values (their numbers are this library's own). */
    PLFS_EEOF = 297,
    PLFS_SIGSEGV = 298,
    PLFS_SIGBUS = 299,
    PLFS_TBD = 300 /* any other failure; plfs_error_to_errno gives EIO */
} plfs_error_t;

/* As EWOULDBLOCK is EAGAIN in POSIX. */
#define PLFS_EWOULDBLOCK PLFS_EAGAIN

/* The errno a code stands for: itself for PLFS_E* codes, 0 for
 * PLFS_SUCCESS, EIO for the others. */
int plfs_error_to_errno(plfs_error_t error);
/* The code for an errno value: itself, or PLFS_TBD when out of range. */
plfs_error_t errno_to_plfs_error(int errno_value);
/* A static description; never NULL. */
const char *strplfserr(plfs_error_t error);

#ifdef __cplusplus
}
#endif

#endif /* PLFS_ERROR_H */
