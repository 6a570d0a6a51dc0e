/*
 * Threads sharing one Plfs_fd, as plfs.h allows: each thread writes its own
 * records as its own writer (pid) while stat, query and sync run, then the
 * file is read back and every byte checked.
 *
 * usage: threads <path under a plfs mount>
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plfs.h"

#define THREADS 4
#define RECORDS 64
#define RECORD_BYTES 1000

static Plfs_fd *shared = NULL;
static const char *path = NULL;

static char expected_byte(int writer, int record)
{
    return (char)('a' + (writer * 7 + record) % 26);
}

static void *writer_main(void *argument)
{
    int writer = (int)(long)argument;
    char record[RECORD_BYTES];
    for (int index = 0; index < RECORDS; index++) {
        memset(record, expected_byte(writer, index), sizeof record);
        /* Interleaved: record `index` of every writer is adjacent. */
        off_t offset = ((off_t)index * THREADS + writer) * RECORD_BYTES;
        ssize_t written = 0;
        if (plfs_write(shared, record, sizeof record, offset, 1000 + writer, &written) != PLFS_SUCCESS ||
            written != RECORD_BYTES) {
            return (void *)1;
        }
        struct stat st;
        size_t writers = 0;
        if (plfs_getattr(shared, path, &st, 1) != PLFS_SUCCESS ||
            plfs_query(shared, &writers, NULL, NULL, NULL) != PLFS_SUCCESS || writers != THREADS + 1) {
            return (void *)1;
        }
        if (index % 16 == 0 && plfs_sync(shared) != PLFS_SUCCESS) {
            return (void *)1;
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s <path under a plfs mount>\n", argv[0]);
        return 2;
    }
    path = argv[1];
    /* Opens and closes are not concurrent (the 2.5 contract): one open
     * plus one reference per thread, taken before the threads start. */
    for (int open = 0; open <= THREADS; open++) {
        if (plfs_open(&shared, path, O_CREAT | O_RDWR, getpid(), 0644, NULL) != PLFS_SUCCESS) {
            fprintf(stderr, "threads: plfs_open failed\n");
            return 1;
        }
    }
    pthread_t threads[THREADS];
    for (long writer = 0; writer < THREADS; writer++) {
        if (pthread_create(&threads[writer], NULL, writer_main, (void *)writer) != 0) {
            fprintf(stderr, "threads: pthread_create failed\n");
            return 1;
        }
    }
    int failed = 0;
    for (int writer = 0; writer < THREADS; writer++) {
        void *result = NULL;
        pthread_join(threads[writer], &result);
        failed |= result != NULL;
    }
    if (failed) {
        fprintf(stderr, "threads: a writer thread failed\n");
        return 1;
    }
    static char contents[THREADS * RECORDS * RECORD_BYTES + 1];
    ssize_t got = 0;
    if (plfs_read(shared, contents, sizeof contents, 0, &got) != PLFS_SUCCESS ||
        got != THREADS * RECORDS * RECORD_BYTES) {
        fprintf(stderr, "threads: read %ld bytes\n", (long)got);
        return 1;
    }
    for (int index = 0; index < RECORDS; index++) {
        for (int writer = 0; writer < THREADS; writer++) {
            const char *record = contents + ((size_t)index * THREADS + writer) * RECORD_BYTES;
            for (int byte = 0; byte < RECORD_BYTES; byte++) {
                if (record[byte] != expected_byte(writer, index)) {
                    fprintf(stderr, "threads: writer %d record %d byte %d is wrong\n", writer, index, byte);
                    return 1;
                }
            }
        }
    }
    int refs = -1;
    for (int close = 0; close <= THREADS; close++) {
        if (plfs_close(shared, getpid(), getuid(), O_RDWR, NULL, &refs) != PLFS_SUCCESS ||
            refs != THREADS - close) {
            fprintf(stderr, "threads: close %d left %d references\n", close, refs);
            return 1;
        }
    }
    printf("threads: OK: %ld bytes\n", (long)got);
    return 0;
}
