/*
 * One writing process of an N-1 strided file on a FUSE mount, for the
 * crash tests in crates/plfs-cli/tests/fuse.rs. It knows nothing of plfs.
 *
 *   hold_writes PATH WRITER WRITERS RECORDS SYNCED SIZE
 *
 * Record k of writer w lies at (k*WRITERS + w)*SIZE and holds
 * byte_of(w, k, i). Writes records 0..SYNCED with one pwrite each, fsyncs,
 * writes records SYNCED..RECORDS without an fsync, prints "written" and
 * waits on stdin with the file still open (the test kills it, or closes
 * stdin to let it exit).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned char byte_of(long long writer, long long record, long long position) {
    return (unsigned char)((writer * 31 + record * 7 + position * 13) % 251 + 1);
}

static void die(const char *what, const char *path) {
    fprintf(stderr, "hold_writes: %s %s: %s\n", what, path, strerror(errno));
    exit(2);
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: hold_writes PATH WRITER WRITERS RECORDS SYNCED SIZE\n");
        return 2;
    }
    const char *path = argv[1];
    long long writer = atoll(argv[2]), writers = atoll(argv[3]), records = atoll(argv[4]);
    long long synced = atoll(argv[5]), size = atoll(argv[6]);
    unsigned char *buf = malloc((size_t)size);
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    if (buf == NULL || fd < 0) {
        die("open", path);
    }
    for (long long k = 0; k < records; k++) {
        if (k == synced && fsync(fd) != 0) {
            die("fsync", path);
        }
        for (long long i = 0; i < size; i++) {
            buf[i] = byte_of(writer, k, i);
        }
        off_t at = (off_t)((k * writers + writer) * size);
        if (pwrite(fd, buf, (size_t)size, at) != (ssize_t)size) {
            die("pwrite", path);
        }
    }
    printf("written\n");
    fflush(stdout);
    char line[16];
    while (fgets(line, sizeof line, stdin) != NULL) {
    }
    if (close(fd) != 0) {
        die("close", path);
    }
    return 0;
}
