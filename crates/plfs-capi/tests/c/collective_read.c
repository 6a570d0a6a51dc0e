/*
 * collective_read: an MPI program using libplfs as PLFS 2.5 programs did.
 *
 *   mpirun -np P collective_read DIR/mnt/file RECORDS RECORD_BYTES
 *
 * Every rank writes RECORDS records N-1 strided (record k of rank r at
 * offset (k*P + r) * RECORD_BYTES), then the file is opened collectively
 * with each strategy and every rank reads every byte back and checks it.
 * Then the error paths: a missing file must fail with PLFS_ENOENT on every
 * rank, an unknown strategy with PLFS_EINVAL, NULL pointers with error
 * codes. Prints "collective_read: OK ..." on rank 0 and exits 0 only when
 * every check on every rank passed. The mount may have any workload: on an
 * n-n or 1-n mount there is no index to flatten (PLFS_ENOTSUP), and every
 * strategy is an ordinary open on each rank.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plfs.h"
#include "plfs_mpi.h"

static int failures;

#define CHECK(condition, ...)                                                                  \
    do {                                                                                       \
        if (!(condition)) {                                                                    \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", rank, __FILE__, __LINE__, \
                    #condition);                                                               \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fprintf(stderr, "\n");                                                             \
            failures++;                                                                        \
        }                                                                                      \
    } while (0)

static unsigned char byte_at(long record, long position) {
    return (unsigned char)(record * 131 + position * 7 + (record >> 3));
}

static int rank;

static void write_strided(const char *path, int ranks, long records, long record_bytes) {
    Plfs_fd *fd = NULL;
    plfs_error_t rc = plfs_open_collective(&fd, path, O_WRONLY | O_CREAT, rank, MPI_COMM_WORLD, NULL);
    CHECK(rc == PLFS_SUCCESS && fd != NULL, "write open: %s", strplfserr(rc));
    if (fd == NULL) {
        return;
    }
    char *buf = malloc((size_t)record_bytes);
    for (long k = 0; k < records; k++) {
        long record = k * ranks + rank;
        for (long i = 0; i < record_bytes; i++) {
            buf[i] = (char)byte_at(record, i);
        }
        ssize_t written = -1;
        rc = plfs_write(fd, buf, (size_t)record_bytes, (off_t)(record * record_bytes), rank, &written);
        CHECK(rc == PLFS_SUCCESS && written == record_bytes, "write: %s", strplfserr(rc));
    }
    free(buf);
    int refs = -1;
    rc = plfs_close(fd, rank, 0, O_WRONLY, NULL, &refs);
    CHECK(rc == PLFS_SUCCESS && refs == 0, "close after write: %s, %d refs", strplfserr(rc), refs);
}

/* Opens with strategy and reads every byte; returns the bytes verified. */
static long read_back(const char *path, const char *strategy, long total_records, long record_bytes) {
    Plfs_fd *fd = NULL;
    plfs_error_t rc = plfs_open_collective(&fd, path, O_RDONLY, rank, MPI_COMM_WORLD, strategy);
    CHECK(rc == PLFS_SUCCESS && fd != NULL, "%s open: %s", strategy, strplfserr(rc));
    if (fd == NULL) {
        return 0;
    }
    long verified = 0;
    char *buf = malloc((size_t)record_bytes);
    for (long record = 0; record < total_records; record++) {
        ssize_t got = -1;
        rc = plfs_read(fd, buf, (size_t)record_bytes, (off_t)(record * record_bytes), &got);
        CHECK(rc == PLFS_SUCCESS && got == record_bytes, "%s read of record %ld: %s, %zd bytes", strategy,
              record, strplfserr(rc), got);
        for (long i = 0; got == record_bytes && i < record_bytes; i++) {
            if ((unsigned char)buf[i] != byte_at(record, i)) {
                CHECK(0, "%s: record %ld byte %ld is %u, not %u", strategy, record, i, (unsigned char)buf[i],
                      byte_at(record, i));
                break;
            }
            verified++;
        }
    }
    ssize_t got = -1;
    rc = plfs_read(fd, buf, (size_t)record_bytes, (off_t)(total_records * record_bytes), &got);
    CHECK(rc == PLFS_SUCCESS && got == 0, "%s: read at the end: %s, %zd bytes", strategy, strplfserr(rc), got);
    free(buf);
    int refs = -1;
    rc = plfs_close(fd, rank, 0, O_RDONLY, NULL, &refs);
    CHECK(rc == PLFS_SUCCESS && refs == 0, "%s close: %s", strategy, strplfserr(rc));
    return verified;
}

static void error_paths(const char *missing, const char *path) {
    static const char *strategies[] = {"naive", "broadcast", "parallel", "flatten"};
    for (size_t s = 0; s < sizeof strategies / sizeof *strategies; s++) {
        Plfs_fd *fd = NULL;
        plfs_error_t rc = plfs_open_collective(&fd, missing, O_RDONLY, rank, MPI_COMM_WORLD, strategies[s]);
        CHECK(rc == PLFS_ENOENT && fd == NULL, "%s open of a missing file: %s", strategies[s], strplfserr(rc));
        CHECK(plfs_error_to_errno(rc) == ENOENT, "errno of %d", (int)rc);
    }
    Plfs_fd *fd = NULL;
    plfs_error_t rc = plfs_open_collective(&fd, path, O_RDONLY, rank, MPI_COMM_WORLD, "bogus");
    CHECK(rc == PLFS_EINVAL && fd == NULL, "unknown strategy: %s", strplfserr(rc));

    /* NULL pointers: error codes, never a crash (same on every rank). */
    CHECK(plfs_open_collective(NULL, path, O_RDONLY, rank, MPI_COMM_WORLD, NULL) == PLFS_EINVAL, "NULL fd");
    CHECK(plfs_open_collective(&fd, NULL, O_RDONLY, rank, MPI_COMM_WORLD, NULL) == PLFS_EINVAL, "NULL path");
    CHECK(plfs_open_collective_ops(&fd, path, O_RDONLY, rank, NULL, NULL) == PLFS_EINVAL, "NULL comm");
    CHECK(plfs_open(NULL, path, O_RDONLY, rank, 0, NULL) == PLFS_EINVAL, "plfs_open NULL fd");
    CHECK(plfs_open(&fd, NULL, O_RDONLY, rank, 0, NULL) == PLFS_EINVAL, "plfs_open NULL path");
    ssize_t count = 0;
    char byte;
    CHECK(plfs_read(NULL, &byte, 1, 0, &count) == PLFS_EBADF, "plfs_read NULL fd");
    CHECK(plfs_write(NULL, &byte, 1, 0, rank, &count) == PLFS_EBADF, "plfs_write NULL fd");
    CHECK(plfs_close(NULL, rank, 0, O_RDONLY, NULL, NULL) == PLFS_EBADF, "plfs_close NULL fd");
    CHECK(strplfserr(PLFS_ENOENT) != NULL && strplfserr((plfs_error_t)12345) != NULL, "strplfserr");

    /* An independent open, a second reference, and NULL buffers. */
    rc = plfs_open(&fd, path, O_RDONLY, rank, 0, NULL);
    CHECK(rc == PLFS_SUCCESS && fd != NULL, "plfs_open: %s", strplfserr(rc));
    if (fd != NULL) {
        Plfs_fd *same = fd;
        CHECK(plfs_open(&same, path, O_RDONLY, rank, 0, NULL) == PLFS_SUCCESS && same == fd, "reopen");
        CHECK(plfs_read(fd, NULL, 1, 0, &count) == PLFS_EINVAL, "plfs_read NULL buf");
        CHECK(plfs_read(fd, &byte, 1, 0, NULL) == PLFS_EINVAL, "plfs_read NULL count");
        CHECK(plfs_read(fd, &byte, 1, -1, &count) == PLFS_EINVAL, "plfs_read negative offset");
        CHECK(plfs_write(fd, &byte, 1, 0, rank, &count) == PLFS_EBADF, "write to a read-only fd");
        int refs = -1;
        CHECK(plfs_close(fd, rank, 0, O_RDONLY, NULL, &refs) == PLFS_SUCCESS && refs == 1, "first close");
        CHECK(plfs_close(fd, rank, 0, O_RDONLY, NULL, &refs) == PLFS_SUCCESS && refs == 0, "last close");
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int ranks = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (argc != 4) {
        if (rank == 0) {
            fprintf(stderr, "usage: collective_read PATH RECORDS RECORD_BYTES\n");
        }
        MPI_Finalize();
        return 2;
    }
    const char *path = argv[1];
    long records = atol(argv[2]);
    long record_bytes = atol(argv[3]);
    char missing[4096];
    snprintf(missing, sizeof missing, "%s.missing", path);

    write_strided(path, ranks, records, record_bytes);
    MPI_Barrier(MPI_COMM_WORLD);

    long total_records = records * ranks;
    long verified = 0;
    verified += read_back(path, "naive", total_records, record_bytes);
    verified += read_back(path, "broadcast", total_records, record_bytes);
    verified += read_back(path, "parallel", total_records, record_bytes);
    /* Flatten once (rank 0), then the flatten strategy uses the global index. */
    if (rank == 0) {
        Plfs_fd *fd = NULL;
        plfs_error_t rc = plfs_open(&fd, path, O_RDONLY, rank, 0, NULL);
        CHECK(rc == PLFS_SUCCESS, "open to flatten: %s", strplfserr(rc));
        if (fd != NULL) {
            rc = plfs_flatten_index(fd, path);
            plfs_error_t want = plfs_get_filetype(path) == CONTAINER ? PLFS_SUCCESS : PLFS_ENOTSUP;
            CHECK(rc == want, "flatten: %s, expected %s", strplfserr(rc), strplfserr(want));
            plfs_close(fd, rank, 0, O_RDONLY, NULL, NULL);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    verified += read_back(path, "flatten", total_records, record_bytes);
    verified += read_back(path, NULL, total_records, record_bytes);

    error_paths(missing, path);

    long expected = 5 * total_records * record_bytes;
    CHECK(verified == expected, "verified %ld of %ld bytes", verified, expected);
    int all_failures = 0;
    MPI_Allreduce(&failures, &all_failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    long all_verified = 0;
    MPI_Allreduce(&verified, &all_verified, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("collective_read: %s: %d ranks, %ld bytes verified, %d failures\n",
               all_failures == 0 ? "OK" : "FAILED", ranks, all_verified, all_failures);
    }
    MPI_Finalize();
    return all_failures == 0 ? 0 : 1;
}
