/*
 * The main calls of plfs.h on an n-n (file_per_proc) or a 1-n (small_file)
 * mount, checking every byte read back; exits non-zero on any mismatch,
 * naming each one on stderr.
 *
 * usage: workloads <mount> <n-n|1-n> write
 *        workloads <mount> <n-n|1-n> verify
 *   write: runs the calls in <mount>/d and leaves <mount>/d/kept (three
 *          records) and <mount>/d/f (five bytes) behind;
 *   verify: run as a second process after write: reads both back, then
 *          removes everything write left.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include "check.h"


/* The names plfs_readdir_c gives for dir, in its order, joined by ','. */
static void list(const char *dir, char *out, size_t out_bytes)
{
    Plfs_dirp *dirp = NULL;
    out[0] = '\0';
    EXPECT(plfs_opendir_c(dir, &dirp), PLFS_SUCCESS);
    if (dirp == NULL) {
        return;
    }
    char name[256];
    for (;;) {
        plfs_error_t error = plfs_readdir_c(dirp, name, sizeof name);
        CHECK(error == PLFS_SUCCESS);
        if (error != PLFS_SUCCESS || name[0] == '\0') {
            break;
        }
        if (out[0] != '\0') {
            strncat(out, ",", out_bytes - strlen(out) - 1);
        }
        strncat(out, name, out_bytes - strlen(out) - 1);
    }
    EXPECT(plfs_closedir_c(dirp), PLFS_SUCCESS);
}

/* Reads all of path (at most buffer_bytes) into buffer; the byte count. */
static ssize_t read_file(const char *path, char *buffer, size_t buffer_bytes)
{
    pid_t pid = getpid();
    Plfs_fd *fd = NULL;
    ssize_t got = -1;
    EXPECT(plfs_open(&fd, path, O_RDONLY, pid, 0, NULL), PLFS_SUCCESS);
    if (fd == NULL) {
        return -1;
    }
    EXPECT(plfs_read(fd, buffer, buffer_bytes, 0, &got), PLFS_SUCCESS);
    EXPECT(plfs_close(fd, pid, getuid(), O_RDONLY, NULL, NULL), PLFS_SUCCESS);
    return got;
}

/* Records 2, 1, 0 (in that order) and one at 4, leaving record 3 a hole. */
static void write_records(Plfs_fd *fd, const int *records, int count)
{
    ssize_t written = -1;
    for (int i = 0; i < count; i++) {
        EXPECT(plfs_write(fd, RECORD, RECORD_BYTES, records[i] * RECORD_BYTES, getpid(), &written),
               PLFS_SUCCESS);
        CHECK(written == RECORD_BYTES);
    }
}

static void write_phase(const char *mnt, int small)
{
    pid_t pid = getpid();
    char *dir = join(mnt, "d");
    char *sub = join(dir, "sub");
    char *file = join(dir, "f");
    char *kept = join(dir, "kept");
    char *created = join(dir, "g");
    char *renamed = join(dir, "h");
    char *moved = join(sub, "h");
    char buffer[8 * sizeof RECORD];
    struct stat st;

    CHECK(plfs_get_filetype(file) == (small ? SMALL_FILE : FLAT_FILE));
    EXPECT(plfs_mkdir(dir, 0755), PLFS_SUCCESS);
    EXPECT(plfs_mkdir(sub, 0755), PLFS_SUCCESS);
    EXPECT(plfs_mkdir(dir, 0755), PLFS_EEXIST);

    /* Write out of order with a hole; publish before the close. */
    Plfs_fd *fd = NULL;
    EXPECT(plfs_open(&fd, file, O_CREAT | O_WRONLY | O_TRUNC, pid, 0644, NULL), PLFS_SUCCESS);
    const int records[] = {2, 1, 0, 4};
    write_records(fd, records, 4);
    EXPECT(plfs_sync(fd), PLFS_SUCCESS);
    EXPECT(plfs_flush_writes(dir), PLFS_SUCCESS);
    EXPECT(plfs_invalidate_read_cache(dir), PLFS_SUCCESS);
    EXPECT(plfs_getattr(fd, file, &st, 1), PLFS_SUCCESS);
    CHECK(S_ISREG(st.st_mode) && st.st_size == 5 * RECORD_BYTES);
    EXPECT(plfs_flatten_index(fd, file), PLFS_ENOTSUP); /* no index: nothing to flatten */
    EXPECT(plfs_close(fd, pid, getuid(), O_WRONLY, NULL, NULL), PLFS_SUCCESS);

    ssize_t got = read_file(file, buffer, sizeof buffer);
    CHECK(got == 5 * RECORD_BYTES);
    for (int record = 0; record < 5; record++) {
        const char *at = buffer + record * RECORD_BYTES;
        if (record == 3) {
            CHECK(at[0] == 0 && memcmp(at, at + 1, RECORD_BYTES - 1) == 0);
        } else {
            CHECK(memcmp(at, RECORD, RECORD_BYTES) == 0);
        }
    }

    /* Read-modify-write through one fd: it reads its own write. */
    fd = NULL;
    ssize_t written = -1;
    EXPECT(plfs_open(&fd, file, O_RDWR, pid, 0, NULL), PLFS_SUCCESS);
    EXPECT(plfs_write(fd, "XY", 2, 1, pid, &written), PLFS_SUCCESS);
    EXPECT(plfs_read(fd, buffer, 4, 0, &got), PLFS_SUCCESS);
    CHECK(got == 4 && memcmp(buffer, "0XY3", 4) == 0);
    /* Truncate through the fd, then by path. */
    EXPECT(plfs_trunc(fd, file, 2 * RECORD_BYTES, 1), PLFS_SUCCESS);
    EXPECT(plfs_getattr(fd, file, &st, 1), PLFS_SUCCESS);
    CHECK(st.st_size == 2 * RECORD_BYTES);
    EXPECT(plfs_close(fd, pid, getuid(), O_RDWR, NULL, NULL), PLFS_SUCCESS);
    EXPECT(plfs_trunc(NULL, file, 5, 0), PLFS_SUCCESS);
    EXPECT(plfs_getattr(NULL, file, &st, 0), PLFS_SUCCESS);
    CHECK(st.st_size == 5);
    got = read_file(file, buffer, sizeof buffer);
    CHECK(got == 5 && memcmp(buffer, "0XY34", 5) == 0);
    EXPECT(plfs_trunc(NULL, dir, 0, 0), PLFS_EISDIR);

    /* A second file, closed: what the verify phase reads in a new process. */
    fd = NULL;
    EXPECT(plfs_open(&fd, kept, O_CREAT | O_WRONLY, pid, 0644, NULL), PLFS_SUCCESS);
    const int three[] = {0, 1, 2};
    write_records(fd, three, 3);
    EXPECT(plfs_close(fd, pid, getuid(), O_WRONLY, NULL, NULL), PLFS_SUCCESS);

    /* create, utime, rename within and between directories, unlink. */
    EXPECT(plfs_create(created, 0644, O_EXCL, pid), PLFS_SUCCESS);
    EXPECT(plfs_create(created, 0644, O_EXCL, pid), PLFS_EEXIST);
    struct utimbuf times = {1000000, 2000000};
    EXPECT(plfs_utime(created, &times), PLFS_SUCCESS);
    EXPECT(plfs_getattr(NULL, created, &st, 0), PLFS_SUCCESS);
    CHECK(st.st_atime == 1000000 && st.st_mtime == 2000000 && st.st_size == 0);
    char names[1024];
    list(dir, names, sizeof names);
    CHECK(strcmp(names, "f,g,kept,sub") == 0);
    EXPECT(plfs_rename(created, renamed), PLFS_SUCCESS);
    EXPECT(plfs_getattr(NULL, created, &st, 0), PLFS_ENOENT);
    EXPECT(plfs_rename(renamed, moved), PLFS_SUCCESS);
    EXPECT(plfs_getattr(NULL, renamed, &st, 0), PLFS_ENOENT);
    EXPECT(plfs_getattr(NULL, moved, &st, 0), PLFS_SUCCESS);
    CHECK(S_ISREG(st.st_mode) && st.st_mtime == 2000000);
    list(sub, names, sizeof names);
    CHECK(strcmp(names, "h") == 0);
    EXPECT(plfs_rmdir(sub), PLFS_ENOTEMPTY);
    EXPECT(plfs_unlink(moved), PLFS_SUCCESS);
    EXPECT(plfs_unlink(moved), PLFS_ENOENT);
    EXPECT(plfs_rmdir(sub), PLFS_SUCCESS);
    EXPECT(plfs_rmdir(dir), PLFS_ENOTEMPTY);
    list(dir, names, sizeof names);
    CHECK(strcmp(names, "f,kept") == 0);

    free(dir);
    free(sub);
    free(file);
    free(kept);
    free(created);
    free(renamed);
    free(moved);
}

static void verify_phase(const char *mnt)
{
    char *dir = join(mnt, "d");
    char *file = join(dir, "f");
    char *kept = join(dir, "kept");
    char buffer[8 * sizeof RECORD];
    struct stat st;

    char names[1024];
    list(dir, names, sizeof names);
    CHECK(strcmp(names, "f,kept") == 0);
    ssize_t got = read_file(kept, buffer, sizeof buffer);
    CHECK(got == 3 * RECORD_BYTES);
    for (int record = 0; record < 3; record++) {
        CHECK(memcmp(buffer + record * RECORD_BYTES, RECORD, RECORD_BYTES) == 0);
    }
    got = read_file(file, buffer, sizeof buffer);
    CHECK(got == 5 && memcmp(buffer, "0XY34", 5) == 0);

    EXPECT(plfs_unlink(kept), PLFS_SUCCESS);
    EXPECT(plfs_unlink(file), PLFS_SUCCESS);
    EXPECT(plfs_getattr(NULL, file, &st, 0), PLFS_ENOENT);
    list(dir, names, sizeof names);
    CHECK(strcmp(names, "") == 0);
    EXPECT(plfs_rmdir(dir), PLFS_SUCCESS);
    EXPECT(plfs_getattr(NULL, dir, &st, 0), PLFS_ENOENT);
    free(dir);
    free(file);
    free(kept);
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[2], "n-n") != 0 && strcmp(argv[2], "1-n") != 0) ||
        (strcmp(argv[3], "write") != 0 && strcmp(argv[3], "verify") != 0)) {
        fprintf(stderr, "usage: %s <mount> <n-n|1-n> <write|verify>\n", argv[0]);
        return 2;
    }
    const char *mnt = argv[1];
    int small = strcmp(argv[2], "1-n") == 0;
    if (strcmp(argv[3], "write") == 0) {
        write_phase(mnt, small);
    } else {
        verify_phase(mnt);
    }
    if (failures > 0) {
        printf("workloads %s %s: FAILED: %d of %d checks\n", argv[2], argv[3], failures, checks);
        return 1;
    }
    printf("workloads %s %s: OK: %d checks\n", argv[2], argv[3], checks);
    return 0;
}
