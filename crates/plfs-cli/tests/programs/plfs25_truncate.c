/*
 * PLFS 2.5's regression program truncate_ops/truncate.c, rewritten from what
 * it checks, with plain POSIX calls on a file in a plfs mount (2.5 ran it
 * through FUSE): truncate an empty file to 0 twice; pwrite 0 bytes twice;
 * grow an empty file to 100 with truncate, twice; write 3 bytes and shrink
 * to 1, twice; write 3 bytes, reopen without O_TRUNC and write 3 more at
 * offset 2. After each step the size must be what the step leaves (0, 0,
 * 100, 1, 5), and, where 2.5 only looked at the size, so do the bytes: the
 * grown file reads back as zeros, the overwritten one as "fobar". 2.5 ran
 * `plfs_map` on the file after each step; given a second argument, this
 * program runs `<that command> <file>` there and requires it to exit 0.
 *
 * usage: plfs25_truncate <file> [<map command>]   (exit 0: passed)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *file;
static const char *map_command;

static void fail(const char *step, const char *what)
{
    printf("plfs25_truncate: FAILED: %s: %s: %s\n", step, what, errno ? strerror(errno) : "");
    exit(1);
}

/* open(2) with the flags 2.5 used, failing the step when it fails. */
static int open_for(const char *step, int flags)
{
    int fd;
    errno = 0;
    fd = open(file, flags, S_IRWXU);
    if (fd < 0)
        fail(step, "open");
    return fd;
}

static void close_for(const char *step, int fd)
{
    errno = 0;
    if (close(fd) != 0)
        fail(step, "close");
}

static void pwrite_for(const char *step, int fd, const char *bytes, size_t count, off_t offset)
{
    errno = 0;
    if (pwrite(fd, bytes, count, offset) != (ssize_t)count)
        fail(step, "pwrite");
}

static void truncate_for(const char *step, off_t length)
{
    errno = 0;
    if (truncate(file, length) != 0)
        fail(step, "truncate");
}

/* The size stat reports and the bytes a fresh open reads must both be
 * `expected` (of `length` bytes). */
static void check(const char *step, const char *expected, size_t length)
{
    struct stat st;
    char back[256];
    ssize_t got;
    int fd;

    if (map_command != NULL) {
        char command[4096];
        snprintf(command, sizeof command, "%s '%s' >/dev/null", map_command, file);
        errno = 0;
        if (system(command) != 0)
            fail(step, command);
    }
    errno = 0;
    if (stat(file, &st) != 0)
        fail(step, "stat");
    if (st.st_size != (off_t)length) {
        printf("plfs25_truncate: FAILED: %s: size should be %lu, is %ld\n", step, (unsigned long)length,
               (long)st.st_size);
        exit(1);
    }
    fd = open_for(step, O_RDONLY);
    errno = 0;
    got = pread(fd, back, sizeof back, 0);
    if (got != (ssize_t)length || memcmp(back, expected, length) != 0) {
        printf("plfs25_truncate: FAILED: %s: read %ld bytes back, not the %lu expected\n", step, (long)got,
               (unsigned long)length);
        exit(1);
    }
    close_for(step, fd);
    printf("%s: %s is size %lu\n", step, file, (unsigned long)length);
}

int main(int argc, char **argv)
{
    static const char zeros[100] = { 0 };
    int fd;

    if (argc != 2 && argc != 3) {
        printf("usage: %s <file> [<map command>]\n", argv[0]);
        return 2;
    }
    file = argv[1];
    map_command = argc == 3 ? argv[2] : NULL;

    fd = open_for("truncate to 0", O_WRONLY | O_CREAT | O_TRUNC);
    close_for("truncate to 0", fd);
    truncate_for("truncate to 0", 0);
    truncate_for("truncate to 0", 0);
    check("truncate to 0", "", 0);

    fd = open_for("write 0 bytes", O_WRONLY | O_CREAT | O_TRUNC);
    pwrite_for("write 0 bytes", fd, "foo", 0, 0);
    pwrite_for("write 0 bytes", fd, "foo", 0, 0);
    close_for("write 0 bytes", fd);
    check("write 0 bytes", "", 0);

    fd = open_for("truncate to 100", O_WRONLY | O_CREAT | O_TRUNC);
    close_for("truncate to 100", fd);
    truncate_for("truncate to 100", 100);
    truncate_for("truncate to 100", 100);
    check("truncate to 100", zeros, sizeof zeros);

    fd = open_for("write 3, truncate to 1", O_WRONLY | O_CREAT | O_TRUNC);
    pwrite_for("write 3, truncate to 1", fd, "foo", 3, 0);
    close_for("write 3, truncate to 1", fd);
    truncate_for("write 3, truncate to 1", 1);
    truncate_for("write 3, truncate to 1", 1);
    check("write 3, truncate to 1", "f", 1);

    fd = open_for("overwrite", O_WRONLY | O_CREAT | O_TRUNC);
    pwrite_for("overwrite", fd, "foo", 3, 0);
    close_for("overwrite", fd);
    fd = open_for("overwrite", O_WRONLY | O_CREAT);
    pwrite_for("overwrite", fd, "bar", 3, 2);
    close_for("overwrite", fd);
    check("overwrite", "fobar", 5);

    errno = 0;
    if (unlink(file) != 0)
        fail("unlink", "unlink");
    errno = 0;
    if (access(file, F_OK) == 0 || errno != ENOENT)
        fail("unlink", "the file is still there");
    printf("plfs25_truncate: OK\n");
    return 0;
}
