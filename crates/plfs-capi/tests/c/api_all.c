/*
 * Calls every function of plfs.h, on success and error paths, and checks
 * each result; exits non-zero on any mismatch, naming each one on stderr.
 *
 * usage: api_all <mount> <other mount> <small_file mount> <outside dir>
 *   <mount>, <other mount>: shared_file mounts of the plfsrc in $PLFSRC;
 *   <small_file mount>: a small_file (1-n) mount;
 *   <outside dir>: an existing directory no mount covers.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <utime.h>

#include "check.h"


static void errors_and_converters(void)
{
    CHECK(plfs_error_to_errno(PLFS_ENOENT) == ENOENT);
    CHECK(plfs_error_to_errno(PLFS_SUCCESS) == 0);
    CHECK(plfs_error_to_errno(PLFS_TBD) == EIO);
    CHECK(errno_to_plfs_error(EEXIST) == PLFS_EEXIST);
    CHECK(errno_to_plfs_error(0) == PLFS_SUCCESS);
    CHECK(strcmp(strplfserr(PLFS_ENOENT), "No such file or directory") == 0);
    CHECK(strplfserr((plfs_error_t)12345) != NULL);
}

static void paths_and_mounts(const char *mnt, const char *small, const char *outside)
{
    char *inside = join(mnt, "anything");
    char *outside_file = join(outside, "f");
    char *small_file = join(small, "f");
    CHECK(is_plfs_path(inside) == 1);
    CHECK(is_plfs_path(mnt) == 1);
    CHECK(is_plfs_path(outside_file) == 0);
    CHECK(is_plfs_path(NULL) == 0);

    CHECK(plfs_get_filetype(inside) == CONTAINER);
    CHECK(plfs_get_filetype(small_file) == SMALL_FILE);
    CHECK(plfs_get_filetype(outside_file) == PFT_UNKNOWN);
    CHECK(plfs_get_filetype(NULL) == PFT_UNKNOWN);
    int index_type = -1;
    CHECK(plfs_get_fileinfo(inside, &index_type) == CONTAINER);
    CHECK(index_type == CI_BYTERANGE);
    CHECK(plfs_get_fileinfo(small_file, &index_type) == SMALL_FILE);
    CHECK(index_type == CI_UNKNOWN);
    CHECK(plfs_get_fileinfo(inside, NULL) == CONTAINER);

    /* Container mounts keep no small-file caches: a success. On a
     * small_file mount, flush_writes publishes what an open handle wrote
     * before its close, and a read after invalidate_read_cache sees it. */
    EXPECT(plfs_flush_writes(mnt), PLFS_SUCCESS);
    EXPECT(plfs_invalidate_read_cache(mnt), PLFS_SUCCESS);
    Plfs_fd *small_fd = NULL, *small_reader = NULL;
    pid_t pid = getpid();
    ssize_t small_written = -1, small_read = -1;
    char small_buffer[2 * RECORD_BYTES];
    int small_refs = -1;
    EXPECT(plfs_open(&small_fd, small_file, O_CREAT | O_WRONLY, pid, 0644, NULL), PLFS_SUCCESS);
    EXPECT(plfs_write(small_fd, RECORD, RECORD_BYTES, 0, pid, &small_written), PLFS_SUCCESS);
    EXPECT(plfs_flush_writes(small), PLFS_SUCCESS);
    EXPECT(plfs_invalidate_read_cache(small), PLFS_SUCCESS);
    EXPECT(plfs_open(&small_reader, small_file, O_RDONLY, pid, 0, NULL), PLFS_SUCCESS);
    EXPECT(plfs_read(small_reader, small_buffer, sizeof small_buffer, 0, &small_read), PLFS_SUCCESS);
    CHECK(small_read == RECORD_BYTES && memcmp(small_buffer, RECORD, RECORD_BYTES) == 0);
    EXPECT(plfs_close(small_reader, pid, getuid(), O_RDONLY, NULL, &small_refs), PLFS_SUCCESS);
    EXPECT(plfs_close(small_fd, pid, getuid(), O_WRONLY, NULL, &small_refs), PLFS_SUCCESS);
    CHECK(small_refs == 0);
    EXPECT(plfs_flush_writes(outside_file), PLFS_ENOENT);
    EXPECT(plfs_flush_writes(NULL), PLFS_EINVAL);
    EXPECT(plfs_invalidate_read_cache(NULL), PLFS_EINVAL);

    char *host = NULL;
    EXPECT(plfs_gethostname(&host), PLFS_SUCCESS);
    CHECK(host != NULL && strlen(host) > 0);
    EXPECT(plfs_gethostname(NULL), PLFS_EINVAL);
    CHECK(plfs_version() != NULL && strlen(plfs_version()) > 0);
    CHECK(plfs_buildtime() != NULL);
    CHECK(plfs_wtime() > 1.0e9);

    struct statvfs space;
    EXPECT(plfs_statvfs(mnt, &space), PLFS_SUCCESS);
    CHECK(space.f_bsize > 0 && space.f_blocks > 0);
    EXPECT(plfs_statvfs(mnt, NULL), PLFS_EINVAL);
    EXPECT(plfs_statvfs(NULL, &space), PLFS_EINVAL);
    EXPECT(plfs_statvfs(outside_file, &space), PLFS_ENOENT);
    free(inside);
    free(outside_file);
    free(small_file);
}

/* Creates dir/ and file (three records, through two references of one fd)
 * and checks open's errors, query, getattr, xattrs and close. */
static void write_side(const char *mnt, const char *dir, const char *file)
{
    char *missing_parent = join(mnt, "no/such/file");
    char *under_file = join(file, "sub");
    pid_t pid = getpid();

    EXPECT(plfs_mkdir(dir, 0755), PLFS_SUCCESS);
    EXPECT(plfs_mkdir(dir, 0755), PLFS_EEXIST);
    EXPECT(plfs_mkdir(missing_parent, 0755), PLFS_ENOENT);
    EXPECT(plfs_mkdir(NULL, 0755), PLFS_EINVAL);

    Plfs_fd *fd = NULL;
    EXPECT(plfs_open(NULL, file, O_CREAT | O_WRONLY, pid, 0644, NULL), PLFS_EINVAL);
    EXPECT(plfs_open(&fd, NULL, O_CREAT | O_WRONLY, pid, 0644, NULL), PLFS_EINVAL);
    EXPECT(plfs_open(&fd, file, O_WRONLY | O_RDWR, pid, 0644, NULL), PLFS_EINVAL);
    EXPECT(plfs_open(&fd, file, O_RDONLY, pid, 0, NULL), PLFS_ENOENT);
    EXPECT(plfs_open(&fd, dir, O_RDONLY, pid, 0, NULL), PLFS_EISDIR);
    EXPECT(plfs_open(&fd, missing_parent, O_CREAT | O_WRONLY, pid, 0644, NULL), PLFS_ENOENT);
    Plfs_open_opt restart = {0};
    restart.uniform_restart_enable = 1;
    EXPECT(plfs_open(&fd, file, O_CREAT | O_WRONLY, pid, 0644, &restart), PLFS_ENOTSUP);
    CHECK(fd == NULL);

    Plfs_open_opt options = {0};
    options.pinter = PLFS_API;
    EXPECT(plfs_open(&fd, file, O_CREAT | O_WRONLY, pid, 0644, &options), PLFS_SUCCESS);
    CHECK(fd != NULL);
    EXPECT(plfs_open(&fd, file, O_CREAT | O_WRONLY, pid, 0644, NULL), PLFS_SUCCESS); /* a reference */
    Plfs_fd *other = NULL;
    EXPECT(plfs_open(&other, file, O_CREAT | O_EXCL | O_WRONLY, pid, 0644, NULL), PLFS_EEXIST);
    EXPECT(plfs_open(&other, under_file, O_CREAT | O_WRONLY, pid, 0644, NULL), PLFS_ENOTDIR);

    ssize_t written = -1;
    for (int record = 2; record >= 0; record--) {
        EXPECT(plfs_write(fd, RECORD, RECORD_BYTES, record * RECORD_BYTES, pid, &written),
               PLFS_SUCCESS);
        CHECK(written == RECORD_BYTES);
    }
    EXPECT(plfs_write(fd, RECORD, 0, 0, pid, &written), PLFS_SUCCESS);
    CHECK(written == 0);
    EXPECT(plfs_write(NULL, RECORD, 1, 0, pid, &written), PLFS_EBADF);
    EXPECT(plfs_write(fd, RECORD, 1, 0, pid, NULL), PLFS_EINVAL);
    EXPECT(plfs_write(fd, NULL, 1, 0, pid, &written), PLFS_EINVAL);
    EXPECT(plfs_write(fd, RECORD, 1, -1, pid, &written), PLFS_EINVAL);

    size_t writers = 0, readers = 9, bytes = 0;
    int lazy = -1;
    EXPECT(plfs_query(fd, &writers, &readers, &bytes, &lazy), PLFS_SUCCESS);
    CHECK(writers == 2 && readers == 0 && bytes == 3 * (size_t)RECORD_BYTES && lazy == 1);
    EXPECT(plfs_query(fd, NULL, NULL, NULL, NULL), PLFS_SUCCESS);
    EXPECT(plfs_query(NULL, &writers, &readers, &bytes, &lazy), PLFS_EBADF);

    EXPECT(plfs_sync(fd), PLFS_SUCCESS);
    EXPECT(plfs_sync(NULL), PLFS_EBADF);

    struct stat st;
    EXPECT(plfs_getattr(fd, file, &st, 1), PLFS_SUCCESS);
    CHECK(S_ISREG(st.st_mode) && st.st_size == 3 * RECORD_BYTES);
    EXPECT(plfs_getattr(fd, NULL, &st, 0), PLFS_SUCCESS);
    CHECK(st.st_size == 3 * RECORD_BYTES && (st.st_mode & 07777) == 0644);
    EXPECT(plfs_getattr(fd, file, NULL, 0), PLFS_EINVAL);

    /* 2.5's form takes a C string; plfs_setxattr_len any bytes. */
    EXPECT(plfs_setxattr(fd, "value", "user.key"), PLFS_SUCCESS);
    EXPECT(plfs_setxattr(fd, "", "user.empty"), PLFS_SUCCESS);
    EXPECT(plfs_setxattr_len(fd, "a\0b", "user.bytes", 3), PLFS_SUCCESS);
    EXPECT(plfs_setxattr_len(fd, "", "user.none", 0), PLFS_SUCCESS);
    char value[16];
    memset(value, 'x', sizeof value);
    EXPECT(plfs_getxattr(fd, value, "user.key", sizeof value), PLFS_SUCCESS);
    CHECK(strcmp(value, "value") == 0);
    EXPECT(plfs_getxattr(fd, value, "user.key", 3), PLFS_SUCCESS);
    CHECK(memcmp(value, "val", 3) == 0);
    memset(value, 'x', sizeof value);
    EXPECT(plfs_getxattr(fd, value, "user.bytes", sizeof value), PLFS_SUCCESS);
    CHECK(memcmp(value, "a\0b\0", 4) == 0);
    memset(value, 'x', sizeof value);
    EXPECT(plfs_getxattr(fd, value, "user.empty", sizeof value), PLFS_SUCCESS);
    CHECK(value[0] == '\0');
    EXPECT(plfs_getxattr(fd, value, "user.missing", sizeof value), PLFS_ENODATA);
    EXPECT(plfs_getxattr(fd, value, NULL, sizeof value), PLFS_EINVAL);
    EXPECT(plfs_getxattr(fd, NULL, "user.key", sizeof value), PLFS_EINVAL);
    EXPECT(plfs_getxattr(NULL, value, "user.key", sizeof value), PLFS_EBADF);
    EXPECT(plfs_setxattr(fd, NULL, "user.key"), PLFS_EINVAL);
    EXPECT(plfs_setxattr(fd, "v", NULL), PLFS_EINVAL);
    EXPECT(plfs_setxattr(NULL, "v", "user.key"), PLFS_EBADF);
    EXPECT(plfs_setxattr_len(fd, NULL, "user.key", 5), PLFS_EINVAL);
    EXPECT(plfs_setxattr_len(fd, "v", NULL, 1), PLFS_EINVAL);
    EXPECT(plfs_setxattr_len(NULL, "v", "user.key", 1), PLFS_EBADF);

    int refs = -1;
    EXPECT(plfs_close(fd, pid, getuid(), O_WRONLY, NULL, &refs), PLFS_SUCCESS);
    CHECK(refs == 1);
    Plfs_close_opt close_options = {0};
    close_options.pinter = PLFS_API;
    EXPECT(plfs_close(fd, pid, getuid(), O_WRONLY, &close_options, &refs), PLFS_SUCCESS);
    CHECK(refs == 0);
    EXPECT(plfs_close(NULL, pid, getuid(), O_WRONLY, NULL, &refs), PLFS_EBADF);
    free(missing_parent);
    free(under_file);
}

/* Reads file back, flattens its index, truncates it. */
static void read_side(const char *dir, const char *file)
{
    pid_t pid = getpid();
    Plfs_fd *fd = NULL;
    EXPECT(plfs_open(&fd, file, O_RDONLY, pid, 0, NULL), PLFS_SUCCESS);
    char buffer[4 * sizeof RECORD];
    ssize_t got = -1;
    EXPECT(plfs_read(fd, buffer, sizeof buffer, 0, &got), PLFS_SUCCESS);
    CHECK(got == 3 * RECORD_BYTES);
    for (int record = 0; record < 3; record++) {
        CHECK(memcmp(buffer + record * RECORD_BYTES, RECORD, RECORD_BYTES) == 0);
    }
    EXPECT(plfs_read(fd, buffer, sizeof buffer, 3 * RECORD_BYTES, &got), PLFS_SUCCESS);
    CHECK(got == 0);
    EXPECT(plfs_read(fd, NULL, sizeof buffer, 0, &got), PLFS_EINVAL);
    EXPECT(plfs_read(fd, buffer, sizeof buffer, 0, NULL), PLFS_EINVAL);
    EXPECT(plfs_read(fd, buffer, sizeof buffer, -5, &got), PLFS_EINVAL);
    EXPECT(plfs_read(NULL, buffer, sizeof buffer, 0, &got), PLFS_EBADF);
    ssize_t written = -1;
    EXPECT(plfs_write(fd, RECORD, 1, 0, pid, &written), PLFS_EBADF);

    struct stat st;
    EXPECT(plfs_getattr(fd, NULL, &st, 0), PLFS_SUCCESS); /* syncs a reader: nothing to do */
    CHECK(st.st_size == 3 * RECORD_BYTES);
    size_t writers = 9, readers = 0;
    EXPECT(plfs_query(fd, &writers, &readers, NULL, NULL), PLFS_SUCCESS);
    CHECK(writers == 0 && readers == 1);

    EXPECT(plfs_flatten_index(fd, file), PLFS_SUCCESS);
    EXPECT(plfs_flatten_index(fd, NULL), PLFS_EINVAL);
    EXPECT(plfs_flatten_index(NULL, file), PLFS_EBADF);
    int refs = -1;
    EXPECT(plfs_close(fd, pid, getuid(), O_RDONLY, NULL, &refs), PLFS_SUCCESS);
    CHECK(refs == 0);

    /* Truncate by path, then through an fd open for writing. */
    EXPECT(plfs_trunc(NULL, file, 2 * RECORD_BYTES, 0), PLFS_SUCCESS);
    EXPECT(plfs_getattr(NULL, file, &st, 1), PLFS_SUCCESS);
    CHECK(st.st_size == 2 * RECORD_BYTES);
    fd = NULL;
    EXPECT(plfs_open(&fd, file, O_RDWR, pid, 0, NULL), PLFS_SUCCESS);
    EXPECT(plfs_trunc(fd, file, 5, 1), PLFS_SUCCESS);
    EXPECT(plfs_getattr(fd, file, &st, 1), PLFS_SUCCESS);
    CHECK(st.st_size == 5);
    EXPECT(plfs_read(fd, buffer, sizeof buffer, 0, &got), PLFS_SUCCESS);
    CHECK(got == 5 && memcmp(buffer, RECORD, 5) == 0);
    EXPECT(plfs_trunc(fd, file, -1, 1), PLFS_EINVAL);
    EXPECT(plfs_close(fd, pid, getuid(), O_RDWR, NULL, NULL), PLFS_SUCCESS);
    /* An fd open only for reading truncates its file by path, as 2.5 did
     * with no fd. */
    fd = NULL;
    EXPECT(plfs_open(&fd, file, O_RDONLY, pid, 0, NULL), PLFS_SUCCESS);
    EXPECT(plfs_trunc(fd, NULL, 3, 0), PLFS_SUCCESS);
    EXPECT(plfs_getattr(fd, NULL, &st, 1), PLFS_SUCCESS);
    CHECK(st.st_size == 3);
    EXPECT(plfs_read(fd, buffer, sizeof buffer, 0, &got), PLFS_SUCCESS);
    CHECK(got == 3 && memcmp(buffer, RECORD, 3) == 0);
    EXPECT(plfs_close(fd, pid, getuid(), O_RDONLY, NULL, NULL), PLFS_SUCCESS);
    EXPECT(plfs_trunc(NULL, dir, 0, 0), PLFS_EISDIR);
    EXPECT(plfs_trunc(NULL, NULL, 0, 0), PLFS_EINVAL);
    char *missing = join(dir, "missing");
    EXPECT(plfs_trunc(NULL, missing, 0, 0), PLFS_ENOENT);
    free(missing);
}

/* create, mode, chmod, chown, utime, access, getattr by path. */
static void attributes(const char *dir, const char *file, const char *created)
{
    char *missing = join(dir, "missing");
    char *under_file = join(file, "sub");
    mode_t mode = 0;
    EXPECT(plfs_create(created, 0600, O_EXCL, getpid()), PLFS_SUCCESS);
    EXPECT(plfs_create(created, 0600, O_EXCL, getpid()), PLFS_EEXIST);
    EXPECT(plfs_create(created, 0600, 0, getpid()), PLFS_SUCCESS);
    EXPECT(plfs_create(NULL, 0600, 0, getpid()), PLFS_EINVAL);
    EXPECT(plfs_create(missing, 0600, 0, -1), PLFS_EINVAL); /* pids are never negative */
    EXPECT(plfs_mode(created, &mode), PLFS_SUCCESS);
    CHECK(mode == (S_IFREG | 0600));
    EXPECT(plfs_mode(dir, &mode), PLFS_SUCCESS);
    CHECK(S_ISDIR(mode));
    EXPECT(plfs_mode(missing, &mode), PLFS_ENOENT);
    EXPECT(plfs_mode(under_file, &mode), PLFS_ENOTDIR);
    EXPECT(plfs_mode(created, NULL), PLFS_EINVAL);
    EXPECT(plfs_mode(NULL, &mode), PLFS_EINVAL);

    EXPECT(plfs_chmod(created, 0640), PLFS_SUCCESS);
    EXPECT(plfs_mode(created, &mode), PLFS_SUCCESS);
    CHECK(mode == (S_IFREG | 0640));
    EXPECT(plfs_chmod(missing, 0640), PLFS_ENOENT);
    EXPECT(plfs_chmod(NULL, 0640), PLFS_EINVAL);

    struct stat st;
    EXPECT(plfs_chown(created, getuid(), (gid_t)-1), PLFS_SUCCESS);
    EXPECT(plfs_getattr(NULL, created, &st, 0), PLFS_SUCCESS);
    CHECK(st.st_uid == getuid() && st.st_size == 0 && st.st_ino != 0);
    EXPECT(plfs_chown(missing, getuid(), getgid()), PLFS_ENOENT);
    EXPECT(plfs_chown(NULL, getuid(), getgid()), PLFS_EINVAL);

    struct utimbuf times = {1000000, 2000000};
    EXPECT(plfs_utime(created, &times), PLFS_SUCCESS);
    EXPECT(plfs_getattr(NULL, created, &st, 0), PLFS_SUCCESS);
    CHECK(st.st_atime == 1000000 && st.st_mtime == 2000000);
    EXPECT(plfs_utime(created, NULL), PLFS_SUCCESS);
    EXPECT(plfs_getattr(NULL, created, &st, 0), PLFS_SUCCESS);
    CHECK(st.st_mtime > 2000000);
    EXPECT(plfs_utime(missing, &times), PLFS_ENOENT);
    EXPECT(plfs_utime(NULL, &times), PLFS_EINVAL);

    /* plfs_utimens: nanoseconds kept, UTIME_OMIT leaves one, UTIME_NOW. */
    struct timespec both[2] = {{3000000, 250}, {4000000, 500}};
    EXPECT(plfs_utimens(created, both), PLFS_SUCCESS);
    EXPECT(plfs_getattr(NULL, created, &st, 0), PLFS_SUCCESS);
    CHECK(st.st_atim.tv_sec == 3000000 && st.st_atim.tv_nsec == 250);
    CHECK(st.st_mtim.tv_sec == 4000000 && st.st_mtim.tv_nsec == 500);
    struct timespec omit_access[2] = {{0, UTIME_OMIT}, {5000000, 0}};
    EXPECT(plfs_utimens(created, omit_access), PLFS_SUCCESS);
    EXPECT(plfs_getattr(NULL, created, &st, 0), PLFS_SUCCESS);
    CHECK(st.st_atime == 3000000 && st.st_mtime == 5000000);
    struct timespec now_modify[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
    EXPECT(plfs_utimens(created, now_modify), PLFS_SUCCESS);
    EXPECT(plfs_getattr(NULL, created, &st, 0), PLFS_SUCCESS);
    CHECK(st.st_atime == 3000000 && st.st_mtime > 5000000);
    struct timespec bad[2] = {{0, 1000000000}, {0, 0}};
    EXPECT(plfs_utimens(created, bad), PLFS_EINVAL);
    EXPECT(plfs_utimens(missing, NULL), PLFS_ENOENT);
    EXPECT(plfs_utimens(NULL, NULL), PLFS_EINVAL);

    EXPECT(plfs_access(created, F_OK), PLFS_SUCCESS);
    EXPECT(plfs_access(created, R_OK | W_OK), PLFS_SUCCESS);
    EXPECT(plfs_access(dir, R_OK | X_OK), PLFS_SUCCESS);
    EXPECT(plfs_access(missing, F_OK), PLFS_ENOENT);
    EXPECT(plfs_access(created, 0x100), PLFS_EINVAL);
    EXPECT(plfs_access(NULL, F_OK), PLFS_EINVAL);

    EXPECT(plfs_getattr(NULL, dir, &st, 0), PLFS_SUCCESS);
    CHECK(S_ISDIR(st.st_mode));
    EXPECT(plfs_getattr(NULL, missing, &st, 0), PLFS_ENOENT);
    EXPECT(plfs_getattr(NULL, under_file, &st, 0), PLFS_ENOTDIR);
    EXPECT(plfs_getattr(NULL, NULL, &st, 0), PLFS_EINVAL);
    free(missing);
    free(under_file);
}

/* symlink, readlink, link, rename (within and across mounts). */
static void names(const char *mnt, const char *other_mnt, const char *dir, const char *file,
                  const char *created)
{
    char *link = join(mnt, "link");
    char *missing = join(dir, "missing");
    char *renamed = join(dir, "renamed");
    char *across = join(other_mnt, "moved");
    char *hard = join(mnt, "hard");

    EXPECT(plfs_symlink("target-text", link), PLFS_SUCCESS);
    EXPECT(plfs_symlink("target-text", link), PLFS_EEXIST);
    EXPECT(plfs_symlink(NULL, link), PLFS_EINVAL);
    EXPECT(plfs_symlink("target-text", NULL), PLFS_EINVAL);
    char text[64];
    int bytes = -1;
    EXPECT(plfs_readlink(link, text, sizeof text, &bytes), PLFS_SUCCESS);
    CHECK(bytes == 11 && strcmp(text, "target-text") == 0);
    EXPECT(plfs_readlink(link, text, 4, &bytes), PLFS_SUCCESS);
    CHECK(bytes == 4 && memcmp(text, "targ", 4) == 0);
    EXPECT(plfs_readlink(file, text, sizeof text, &bytes), PLFS_EINVAL);
    EXPECT(plfs_readlink(missing, text, sizeof text, &bytes), PLFS_ENOENT);
    EXPECT(plfs_readlink(link, NULL, sizeof text, &bytes), PLFS_EINVAL);
    EXPECT(plfs_readlink(link, text, sizeof text, NULL), PLFS_EINVAL);
    EXPECT(plfs_readlink(NULL, text, sizeof text, &bytes), PLFS_EINVAL);
    mode_t mode = 0;
    EXPECT(plfs_mode(link, &mode), PLFS_SUCCESS);
    CHECK(S_ISLNK(mode));

    EXPECT(plfs_link(file, hard), PLFS_ENOSYS);
    EXPECT(plfs_link(NULL, hard), PLFS_EINVAL);
    EXPECT(plfs_link(file, NULL), PLFS_EINVAL);

    struct stat st;
    EXPECT(plfs_rename(created, renamed), PLFS_SUCCESS);
    EXPECT(plfs_getattr(NULL, created, &st, 0), PLFS_ENOENT);
    EXPECT(plfs_getattr(NULL, renamed, &st, 0), PLFS_SUCCESS);
    CHECK(S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0640);
    EXPECT(plfs_rename(created, renamed), PLFS_ENOENT);
    EXPECT(plfs_rename(renamed, across), PLFS_EXDEV);
    EXPECT(plfs_rename(dir, file), PLFS_ENOTDIR);
    EXPECT(plfs_rename(NULL, renamed), PLFS_EINVAL);
    EXPECT(plfs_rename(renamed, NULL), PLFS_EINVAL);
    free(link);
    free(missing);
    free(renamed);
    free(across);
    free(hard);
}

/* Listings: plfs_readdir (C: checks, then ENOTSUP) and the C calls. */
static void listings(const char *mnt, const char *dir, const char *file)
{
    char *missing = join(dir, "missing");
    int placeholder = 0;
    EXPECT(plfs_readdir(mnt, &placeholder), PLFS_ENOTSUP);
    EXPECT(plfs_readdir(missing, &placeholder), PLFS_ENOENT);
    EXPECT(plfs_readdir(file, &placeholder), PLFS_ENOTDIR);
    EXPECT(plfs_readdir(mnt, NULL), PLFS_EINVAL);
    EXPECT(plfs_readdir(NULL, &placeholder), PLFS_EINVAL);

    Plfs_dirp *dirp = NULL;
    EXPECT(plfs_opendir_c(mnt, &dirp), PLFS_SUCCESS);
    char name[256];
    char tiny[2];
    EXPECT(plfs_readdir_c(dirp, tiny, sizeof tiny), PLFS_ERANGE); /* "dir" does not fit */
    const char *expected[] = {"dir", "file", "link"};
    for (int entry = 0; entry < 3; entry++) {
        EXPECT(plfs_readdir_c(dirp, name, sizeof name), PLFS_SUCCESS);
        CHECK(strcmp(name, expected[entry]) == 0);
    }
    for (int again = 0; again < 2; again++) {
        EXPECT(plfs_readdir_c(dirp, name, sizeof name), PLFS_SUCCESS);
        CHECK(name[0] == '\0');
    }
    EXPECT(plfs_readdir_c(dirp, NULL, sizeof name), PLFS_EINVAL);
    EXPECT(plfs_readdir_c(dirp, name, 0), PLFS_EINVAL);
    EXPECT(plfs_readdir_c(NULL, name, sizeof name), PLFS_EBADF);
    EXPECT(plfs_closedir_c(dirp), PLFS_SUCCESS);
    EXPECT(plfs_closedir_c(NULL), PLFS_EBADF);

    dirp = NULL;
    EXPECT(plfs_opendir_c(file, &dirp), PLFS_ENOTDIR);
    EXPECT(plfs_opendir_c(missing, &dirp), PLFS_ENOENT);
    CHECK(dirp == NULL);
    EXPECT(plfs_opendir_c(mnt, NULL), PLFS_EINVAL);
    EXPECT(plfs_opendir_c(NULL, &dirp), PLFS_EINVAL);
    free(missing);
}

static void expansion(const char *mnt, const char *outside, const char *file)
{
    char *physical = NULL;
    void *mount = NULL, *backend = NULL;
    EXPECT(plfs_expand_path(file, &physical, &mount, &backend), PLFS_SUCCESS);
    CHECK(physical != NULL && mount != NULL && backend != NULL);
    if (physical != NULL) {
        /* A container: a directory on its canonical backend. */
        struct stat st;
        CHECK(strstr(physical, "/file") != NULL && stat(physical, &st) == 0 && S_ISDIR(st.st_mode));
        free(physical);
    }
    void *root_mount = NULL;
    physical = NULL;
    EXPECT(plfs_expand_path(mnt, &physical, &root_mount, NULL), PLFS_SUCCESS);
    CHECK(root_mount == mount);
    free(physical);
    char *outside_file = join(outside, "f");
    EXPECT(plfs_expand_path(outside_file, &physical, NULL, NULL), PLFS_ENOENT);
    EXPECT(plfs_expand_path(file, NULL, NULL, NULL), PLFS_EINVAL);
    EXPECT(plfs_expand_path(NULL, &physical, NULL, NULL), PLFS_EINVAL);
    free(outside_file);
}

/* rmdir, unlink, and what each refuses. */
static void removal(const char *mnt, const char *dir, const char *file)
{
    char *renamed = join(dir, "renamed");
    char *link = join(mnt, "link");
    EXPECT(plfs_rmdir(dir), PLFS_ENOTEMPTY);
    EXPECT(plfs_rmdir(file), PLFS_ENOTDIR);
    EXPECT(plfs_unlink(dir), PLFS_EISDIR);
    EXPECT(plfs_unlink(renamed), PLFS_SUCCESS);
    EXPECT(plfs_unlink(renamed), PLFS_ENOENT);
    EXPECT(plfs_rmdir(dir), PLFS_SUCCESS);
    EXPECT(plfs_rmdir(dir), PLFS_ENOENT);
    EXPECT(plfs_unlink(link), PLFS_SUCCESS);
    EXPECT(plfs_unlink(file), PLFS_SUCCESS);
    EXPECT(plfs_unlink(NULL), PLFS_EINVAL);
    EXPECT(plfs_rmdir(NULL), PLFS_EINVAL);
    struct stat st;
    EXPECT(plfs_getattr(NULL, file, &st, 0), PLFS_ENOENT);
    free(renamed);
    free(link);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s <mount> <other mount> <small_file mount> <outside dir>\n",
                argv[0]);
        return 2;
    }
    const char *mnt = argv[1], *other_mnt = argv[2], *small = argv[3], *outside = argv[4];
    char *dir = join(mnt, "dir");
    char *file = join(mnt, "file");
    char *created = join(dir, "created");

    errors_and_converters();
    paths_and_mounts(mnt, small, outside);
    write_side(mnt, dir, file);
    read_side(dir, file);
    attributes(dir, file, created);
    names(mnt, other_mnt, dir, file, created);
    listings(mnt, dir, file);
    expansion(mnt, outside, file);
    removal(mnt, dir, file);

    free(dir);
    free(file);
    free(created);
    if (failures > 0) {
        printf("api_all: FAILED: %d of %d checks\n", failures, checks);
        return 1;
    }
    printf("api_all: OK: %d checks\n", checks);
    return 0;
}
