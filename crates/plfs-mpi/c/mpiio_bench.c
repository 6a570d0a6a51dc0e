/*
 * The `mpiio` interface of `plfs bench n1-strided`: an ordinary MPI-IO
 * program, run by the bench under mpirun with libplfs_mpiio.so and
 * libplfs_preload.so preloaded (it knows nothing of plfs).
 *
 *   mpiio_bench write PATH RECORDS SIZE
 *   mpiio_bench read  PATH RECORDS SIZE
 *
 * With N ranks, rank w's record k is global record k*N + w at offset
 * (k*N + w)*SIZE, and its bytes are plfs-bench's fill_record pattern
 * (crates/plfs-bench/src/pattern.rs, ported word for word below), so the
 * bench's other phases and this one write identical files. write: one
 * MPI_File_write_at per record, MPI_File_sync, close. read: rank r reads
 * rank (r+1)%N's records with MPI_File_read_at and verifies every byte.
 *
 * Each rank times open .. close between two MPI_Barriers with
 * CLOCK_REALTIME and prints one line in the bench workers' format:
 *   PLFS-BENCH-RESULT {"rank":R,"began_ns":B,"end_ns":E,"bytes":X,
 *                      "records":K,"bad_records":M,"first_bad":null|"...",
 *                      "opened_ns":O,"io_done_ns":D}
 * (O: MPI_File_open returned; D: the last record's I/O returned, before
 * MPI_File_sync and MPI_File_close), and on failure PLFS-BENCH-ERROR
 * <message> (then aborts). The program knows nothing of plfs, so the bench
 * also runs it on a plain file, to show what MPI-IO itself costs.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#define GOLDEN 0x9E3779B97F4A7C15ULL

/* pattern.rs: seed(). */
static uint64_t seed_of(uint64_t record) {
    uint64_t z = (record + 0x504C465342454E43ULL) * GOLDEN;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* pattern.rs: word(). */
static uint64_t word_of(uint64_t seed, uint64_t j) {
    return seed ^ ((j + 1) * GOLDEN);
}

/* Little-endian bytes of a word, as Rust's to_le_bytes, on any host. */
static void put_le(unsigned char *out, uint64_t word, size_t count) {
    for (size_t b = 0; b < count; b++) {
        out[b] = (unsigned char)(word >> (8 * b));
    }
}

/* Eight bytes as a little-endian word (u64::from_le_bytes). Spelled out
 * byte by byte so any host gets it right; GCC and Clang turn the pattern
 * into one load on a little-endian host, and put_le64 into one store. */
static inline uint64_t get_le64(const unsigned char *in) {
    return (uint64_t)in[0] | (uint64_t)in[1] << 8 | (uint64_t)in[2] << 16 | (uint64_t)in[3] << 24 |
           (uint64_t)in[4] << 32 | (uint64_t)in[5] << 40 | (uint64_t)in[6] << 48 | (uint64_t)in[7] << 56;
}

static inline void put_le64(unsigned char *out, uint64_t word) {
    out[0] = (unsigned char)word;
    out[1] = (unsigned char)(word >> 8);
    out[2] = (unsigned char)(word >> 16);
    out[3] = (unsigned char)(word >> 24);
    out[4] = (unsigned char)(word >> 32);
    out[5] = (unsigned char)(word >> 40);
    out[6] = (unsigned char)(word >> 48);
    out[7] = (unsigned char)(word >> 56);
}

/* pattern.rs: fill_record(), a word at a time as there: filling and
 * checking byte by byte cost more CPU than the I/O being measured (61% of
 * the MPI-IO read phase's samples were here), so on a busy machine this
 * program, not MPI-IO, set the figure. */
static void fill_record(uint64_t record, unsigned char *buf, size_t size) {
    uint64_t seed = seed_of(record);
    size_t j = 0;
    for (; (j + 1) * 8 <= size; j++) {
        put_le64(buf + j * 8, word_of(seed, j));
    }
    put_le(buf + j * 8, word_of(seed, j), size - j * 8);
}

/* pattern.rs: verify_record(), a word at a time; returns the first wrong
 * byte, or -1. */
static long long verify_record(uint64_t record, const unsigned char *buf, size_t size,
                               unsigned *found, unsigned *expected) {
    uint64_t seed = seed_of(record);
    size_t j = 0;
    for (; (j + 1) * 8 <= size; j++) {
        if (get_le64(buf + j * 8) != word_of(seed, j)) {
            break;
        }
    }
    /* The word that differs (or the tail), byte by byte for the position. */
    unsigned char want[8];
    put_le(want, word_of(seed, j), 8);
    size_t count = size - j * 8 < 8 ? size - j * 8 : 8;
    for (size_t b = 0; b < count; b++) {
        if (buf[j * 8 + b] != want[b]) {
            *found = buf[j * 8 + b];
            *expected = want[b];
            return (long long)(j * 8 + b);
        }
    }
    return -1;
}

static unsigned long long now_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (unsigned long long)now.tv_sec * 1000000000ULL + (unsigned long long)now.tv_nsec;
}

static void fail(const char *what, int code) {
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    printf("PLFS-BENCH-ERROR mpiio_bench: %s: %s\n", what, text);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

#define CHECK(call)                                                                               \
    do {                                                                                          \
        int rc_ = (call);                                                                         \
        if (rc_ != MPI_SUCCESS) {                                                                 \
            fail(#call, rc_);                                                                     \
        }                                                                                         \
    } while (0)

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, ranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (argc != 5 || (strcmp(argv[1], "write") != 0 && strcmp(argv[1], "read") != 0)) {
        if (rank == 0) {
            printf("PLFS-BENCH-ERROR usage: mpiio_bench write|read PATH RECORDS SIZE\n");
            fflush(stdout);
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int writing = strcmp(argv[1], "write") == 0;
    const char *path = argv[2];
    long long records = atoll(argv[3]);
    long long size = atoll(argv[4]);
    if (records <= 0 || size <= 0 || size > INT_MAX) {
        if (rank == 0) {
            printf("PLFS-BENCH-ERROR mpiio_bench: bad RECORDS %s or SIZE %s\n", argv[3], argv[4]);
            fflush(stdout);
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* Untimed set-up, as the bench workers do it before their barrier. */
    unsigned char *buf = malloc((size_t)size);
    if (buf == NULL) {
        printf("PLFS-BENCH-ERROR mpiio_bench: no memory for a %lld-byte record\n", size);
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int source = writing ? rank : (rank + 1) % ranks;
    unsigned long long bytes = 0, bad = 0;
    char first_bad[256] = "";

    MPI_Barrier(MPI_COMM_WORLD);
    unsigned long long began = now_ns();
    MPI_File fh;
    MPI_Status status;
    int mode = writing ? MPI_MODE_WRONLY | MPI_MODE_CREATE : MPI_MODE_RDONLY;
    CHECK(MPI_File_open(MPI_COMM_WORLD, path, mode, MPI_INFO_NULL, &fh));
    unsigned long long opened = now_ns();
    for (long long k = 0; k < records; k++) {
        uint64_t record = (uint64_t)(k * ranks + source);
        MPI_Offset offset = (MPI_Offset)(record * (uint64_t)size);
        int count = 0;
        if (writing) {
            fill_record(record, buf, (size_t)size);
            CHECK(MPI_File_write_at(fh, offset, buf, (int)size, MPI_BYTE, &status));
            MPI_Get_count(&status, MPI_BYTE, &count);
            if (count != size) {
                printf("PLFS-BENCH-ERROR mpiio_bench: rank %d wrote %d of %lld bytes at %lld\n", rank,
                       count, size, (long long)offset);
                fflush(stdout);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
            bytes += (unsigned long long)count;
            continue;
        }
        CHECK(MPI_File_read_at(fh, offset, buf, (int)size, MPI_BYTE, &status));
        MPI_Get_count(&status, MPI_BYTE, &count);
        unsigned found = 0, expected = 0;
        long long wrong = -1;
        if (count < size) {
            if (bad++ == 0) {
                snprintf(first_bad, sizeof first_bad,
                         "%s: record %" PRIu64 " at offset %lld: short read, %d of %lld bytes", path,
                         record, (long long)offset, count, size);
            }
        } else if ((wrong = verify_record(record, buf, (size_t)size, &found, &expected)) >= 0) {
            bytes += (unsigned long long)count;
            if (bad++ == 0) {
                snprintf(first_bad, sizeof first_bad,
                         "%s: record %" PRIu64 " at offset %lld: byte %lld is %#04x, expected %#04x", path,
                         record, (long long)offset, wrong, found, expected);
            }
        } else {
            bytes += (unsigned long long)count;
        }
    }
    unsigned long long io_done = now_ns();
    if (writing) {
        /* Durable before the clock stops, as every other phase's fdatasync. */
        CHECK(MPI_File_sync(fh));
    }
    CHECK(MPI_File_close(&fh));
    unsigned long long end = now_ns();
    MPI_Barrier(MPI_COMM_WORLD);

    /* The message has no quote or backslash unless the path does. */
    for (char *c = first_bad; *c != '\0'; c++) {
        if (*c == '"' || *c == '\\') {
            *c = '?';
        }
    }
    char quoted[300] = "null";
    if (bad > 0) {
        snprintf(quoted, sizeof quoted, "\"%s\"", first_bad);
    }
    printf("PLFS-BENCH-RESULT {\"rank\":%d,\"began_ns\":%llu,\"end_ns\":%llu,\"bytes\":%llu,"
           "\"records\":%lld,\"bad_records\":%llu,\"first_bad\":%s,\"opened_ns\":%llu,"
           "\"io_done_ns\":%llu}\n",
           rank, began, end, bytes, records, bad, quoted, opened, io_done);
    fflush(stdout);
    free(buf);
    MPI_Finalize();
    return 0;
}
