/* Several processes creating, renaming, rewriting and unlinking files in one
 * directory at once, each checking what it reads. Plain POSIX calls, so it
 * runs unchanged on a plain directory and on a FUSE mount.
 *
 *   churn DIR ID OPS SIZE
 *
 * Process ID does OPS operations, chosen by a generator seeded with ID:
 * - publish: write DIR/tmp.ID whole (every 8-byte word holds one stamp),
 *   close, rename it onto DIR/pub.N (N in 0..NAMES-1, shared by all);
 * - read: open DIR/pub.N, read it, check it is SIZE bytes of one stamp;
 * - hold: the same, with a publish onto or an unlink of that name between
 *   its two halves (the open file must stay whole);
 * - rewrite: open DIR/pub.N read-write, write its own stamp back over it,
 *   in two halves with an unlink or rename of the name in between;
 * - unlink DIR/pub.N.
 * A published name only ever holds whole files, so every open of it either
 * fails with ENOENT or reads SIZE bytes of one stamp. Prints one line:
 * ops= open_errors= read_errors= short= bad= other_errors= */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NAMES 12

static long open_errors, read_errors, shorts, bad, other_errors;
static char dir[4096];
static size_t size;
static uint64_t state;

static uint64_t next(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

static void complain(const char *what, const char *path) {
    fprintf(stderr, "%s %s: %s\n", what, path, strerror(errno));
}

static void name(char *out, long n) { snprintf(out, 4096, "%s/pub.%ld", dir, n); }

static void fill(char *buf, uint64_t stamp) {
    for (size_t i = 0; i + 8 <= size; i += 8) memcpy(buf + i, &stamp, 8);
}

static int write_all(int fd, const char *buf, size_t len, off_t at) {
    size_t done = 0;
    while (done < len) {
        ssize_t n = pwrite(fd, buf + done, len - done, at + (off_t)done);
        if (n <= 0) return -1;
        done += (size_t)n;
    }
    return 0;
}

/* Reads [at, at+len) of fd; -1 on error, else bytes read. */
static ssize_t read_some(int fd, char *buf, size_t len, off_t at) {
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, buf + got, len - got, at + (off_t)got);
        if (n < 0) return -1;
        if (n == 0) break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

/* Checks SIZE bytes of one stamp, and nothing beyond. */
static void check(const char *buf, ssize_t got, const char *what, const char *path) {
    if (got != (ssize_t)size) {
        shorts++;
        fprintf(stderr, "%s %s: %zd bytes\n", what, path, got);
        return;
    }
    uint64_t stamp;
    memcpy(&stamp, buf, 8);
    for (size_t i = 8; i + 8 <= size; i += 8)
        if (memcmp(buf + i, &stamp, 8) != 0) {
            bad++;
            fprintf(stderr, "%s %s: mixed at %zu\n", what, path, i);
            return;
        }
}

static void publish(long n, uint64_t stamp, char *buf) {
    char tmp[4096], target[4096];
    snprintf(tmp, sizeof tmp, "%s/tmp.%d", dir, (int)(stamp >> 40));
    name(target, n);
    fill(buf, stamp);
    int fd = open(tmp, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0) { other_errors++; complain("create", tmp); return; }
    if (write_all(fd, buf, size, 0) != 0) { other_errors++; complain("write", tmp); }
    if (close(fd) != 0) { other_errors++; complain("close", tmp); }
    if (rename(tmp, target) != 0) { other_errors++; complain("rename", tmp); }
}

static void unlink_name(long n) {
    char target[4096];
    name(target, n);
    if (unlink(target) != 0 && errno != ENOENT) { other_errors++; complain("unlink", target); }
}

/* Opens pub.N for reading (ENOENT is fine); reads it in two halves with
 * `between` run in the middle when set. */
static void read_name(long n, char *buf, void (*between)(long, uint64_t, char *), uint64_t stamp, char *spare) {
    char path[4096];
    name(path, n);
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        if (errno != ENOENT) { open_errors++; complain("open", path); }
        return;
    }
    size_t half = size / 2;
    ssize_t first = read_some(fd, buf, half, 0);
    if (between) between(n, stamp, spare);
    ssize_t second = first < 0 ? -1 : read_some(fd, buf + first, size + 1 - (size_t)first, first);
    if (first < 0 || second < 0) { read_errors++; complain("read", path); }
    else check(buf, first + second, between ? "hold" : "read", path);
    if (close(fd) != 0) { other_errors++; complain("close", path); }
}

static void replace_or_unlink(long n, uint64_t stamp, char *spare) {
    if (stamp & 1) publish(n, stamp, spare);
    else unlink_name(n);
}

/* Writes its own stamp over a published file in two halves, the name
 * replaced or unlinked in between; readers see one stamp or the other only
 * where the halves overlap a read, so this file is checked afterwards only
 * through its own descriptor. */
static void rewrite(long n, uint64_t stamp, char *buf, char *spare) {
    char path[4096];
    name(path, n);
    int fd = open(path, O_RDWR);
    if (fd < 0) {
        if (errno != ENOENT) { open_errors++; complain("open rw", path); }
        return;
    }
    /* Its current stamp, written back unchanged: readers of the name
     * still see one stamp throughout. */
    ssize_t got = read_some(fd, buf, 8, 0);
    if (got == 8) {
        uint64_t old;
        memcpy(&old, buf, 8);
        fill(buf, old);
        size_t half = size / 2;
        if (write_all(fd, buf, half, 0) != 0) { other_errors++; complain("rewrite", path); }
        replace_or_unlink(n, stamp, spare);
        if (write_all(fd, buf + half, size - half, (off_t)half) != 0) { other_errors++; complain("rewrite", path); }
        got = read_some(fd, spare, size + 1, 0);
        if (got < 0) { read_errors++; complain("reread", path); }
        else check(spare, got, "rewrite", path);
    } else if (got < 0) {
        read_errors++;
        complain("read rw", path);
    } else {
        shorts++;
        fprintf(stderr, "short %s: %zd bytes at open for rewrite\n", path, got);
    }
    if (close(fd) != 0) { other_errors++; complain("close rw", path); }
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: churn DIR ID OPS SIZE\n");
        return 64;
    }
    snprintf(dir, sizeof dir, "%s", argv[1]);
    long id = atol(argv[2]), ops = atol(argv[3]);
    size = (size_t)atol(argv[4]) / 8 * 8;
    state = 0x9e3779b97f4a7c15ULL ^ (uint64_t)(id + 1) * 0xbf58476d1ce4e5b9ULL;
    char *buf = malloc(size + 8), *spare = malloc(size + 8);
    /* Debugging aid: CHURN_ONLY="0126" limits the op kinds (next() % 10). */
    const char *only = getenv("CHURN_ONLY");
    for (long op = 0; op < ops; op++) {
        long n = (long)(next() % NAMES);
        /* Stamp: process id in the top bits, op count below. */
        uint64_t stamp = ((uint64_t)id << 40) | (uint64_t)op;
        int kind = (int)(next() % 10);
        if (only && !strchr(only, '0' + kind)) continue;
        switch (kind) {
        case 0: case 1: case 2: publish(n, stamp, buf); break;
        case 3: case 4: case 5: read_name(n, buf, NULL, 0, NULL); break;
        case 6: read_name(n, buf, replace_or_unlink, stamp, spare); break;
        case 7: rewrite(n, stamp, buf, spare); break;
        default: unlink_name(n); break;
        }
    }
    printf("ops=%ld open_errors=%ld read_errors=%ld short=%ld bad=%ld other_errors=%ld\n", ops, open_errors,
           read_errors, shorts, bad, other_errors);
    return 0;
}
