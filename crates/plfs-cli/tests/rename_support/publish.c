/* Publishing a file by rename, as checkpoints are published, and readers
 * that check what they see. Plain POSIX calls, so it runs unchanged on a
 * FUSE mount and under LD_PRELOAD=libplfs_preload.so.
 *
 *   publish DIR COUNT SIZE FIRST   writes DIR/tmp, renames it onto DIR/target,
 *                                  versions FIRST .. FIRST+COUNT-1
 *   check FILE COUNT SIZE LAST     opens, reads and checks FILE until it holds
 *                                  version LAST, at most COUNT times
 *
 * Every 8-byte word of version v holds v. check prints one line of counts:
 * missing (ENOENT at open), open_errors, read_errors, short (not SIZE bytes),
 * bad (words that differ), backwards (an older version after a newer one). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void fill(char *buf, size_t size, uint64_t version) {
    for (size_t i = 0; i + 8 <= size; i += 8) memcpy(buf + i, &version, 8);
}

static int publish(const char *dir, long count, size_t size, long first) {
    char tmp[4096], target[4096];
    snprintf(tmp, sizeof tmp, "%s/tmp", dir);
    snprintf(target, sizeof target, "%s/target", dir);
    char *buf = malloc(size);
    for (long version = first; version < first + count; version++) {
        fill(buf, size, (uint64_t)version);
        int fd = open(tmp, O_CREAT | O_WRONLY | O_TRUNC, 0644);
        if (fd < 0) { perror("open tmp"); return 1; }
        size_t done = 0;
        while (done < size) {
            ssize_t n = write(fd, buf + done, size - done);
            if (n <= 0) { perror("write"); return 2; }
            done += (size_t)n;
        }
        if (close(fd) != 0) { perror("close"); return 3; }
        if (rename(tmp, target) != 0) { perror("rename"); return 4; }
    }
    free(buf);
    return 0;
}

static int check(const char *file, long count, size_t size, uint64_t last) {
    long missing = 0, open_errors = 0, read_errors = 0, shorts = 0, bad = 0, backwards = 0;
    uint64_t newest = 0;
    char *buf = malloc(size + 1);
    char *expected = malloc(size);
    for (long i = 0; i < count && newest != last; i++) {
        int fd = open(file, O_RDONLY);
        if (fd < 0) {
            if (errno == ENOENT) missing++;
            else { open_errors++; fprintf(stderr, "open: %s\n", strerror(errno)); }
            continue;
        }
        size_t got = 0;
        ssize_t n;
        while ((n = read(fd, buf + got, size + 1 - got)) > 0) got += (size_t)n;
        if (n < 0) { read_errors++; fprintf(stderr, "read: %s\n", strerror(errno)); }
        else if (got != size) {
            shorts++;
            uint64_t first = 0;
            if (got >= 8) memcpy(&first, buf, 8);
            fprintf(stderr, "short: %zu of %zu bytes, first word %llu\n", got, size, (unsigned long long)first);
        }
        else {
            uint64_t version;
            memcpy(&version, buf, 8);
            fill(expected, size, version);
            if (memcmp(buf, expected, size) != 0) bad++;
            else if (version < newest) backwards++;
            if (version > newest) newest = version;
        }
        close(fd);
    }
    printf("missing=%ld open_errors=%ld read_errors=%ld short=%ld bad=%ld backwards=%ld\n",
           missing, open_errors, read_errors, shorts, bad, backwards);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 6 && strcmp(argv[1], "publish") == 0)
        return publish(argv[2], atol(argv[3]), (size_t)atol(argv[4]), atol(argv[5]));
    if (argc == 6 && strcmp(argv[1], "check") == 0)
        return check(argv[2], atol(argv[3]), (size_t)atol(argv[4]), (uint64_t)atol(argv[5]));
    fprintf(stderr, "usage: publish DIR COUNT SIZE FIRST | check FILE COUNT SIZE LAST\n");
    return 64;
}
