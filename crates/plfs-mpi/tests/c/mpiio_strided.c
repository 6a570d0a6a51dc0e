/*
 * An unmodified MPI-IO program: N-1 strided records, written and read back
 * with plain MPI-IO calls. It knows nothing of plfs; libplfs_mpiio.so and
 * libplfs_preload.so (LD_PRELOAD) put the file on plfs.
 *
 *   mpiio_strided write-at   PATH RECORDS SIZE [hint=key=value ...]
 *   mpiio_strided write-view PATH RECORDS SIZE [hint=key=value ...]
 *   mpiio_strided read       PATH RECORDS SIZE WRITERS [hint=key=value ...]
 *   mpiio_strided delete     PATH
 *
 * Writers (the ranks of the run) write record k of rank w at
 * (k*WRITERS + w)*SIZE: write-at with MPI_File_write_at per record,
 * write-view with a vector file view and one MPI_File_write_all. Each
 * writer prints "rank R pid P". read runs on any number of ranks: each
 * checks the size and reads (MPI_File_read_at_all) and verifies its share
 * of the bytes. Rank 0 prints one "mpiio_strided: OK ..." line on success.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

static unsigned char byte_of(long long writer, long long record, long long position) {
    return (unsigned char)((writer * 31 + record * 7 + position * 13) % 251 + 1);
}

static void fail(const char *what, int code) {
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    fprintf(stderr, "mpiio_strided: %s: %s\n", what, text);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

#define CHECK(call)                                                                               \
    do {                                                                                          \
        int rc_ = (call);                                                                         \
        if (rc_ != MPI_SUCCESS) {                                                                 \
            fail(#call, rc_);                                                                     \
        }                                                                                         \
    } while (0)

static MPI_Info hints_from(int argc, char **argv, int first) {
    MPI_Info info;
    MPI_Info_create(&info);
    for (int i = first; i < argc; i++) {
        if (strncmp(argv[i], "hint=", 5) != 0) {
            continue;
        }
        char *pair = strdup(argv[i] + 5);
        char *equals = strchr(pair, '=');
        if (equals == NULL) {
            fprintf(stderr, "mpiio_strided: %s: expected hint=key=value\n", argv[i]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        *equals = '\0';
        MPI_Info_set(info, pair, equals + 1);
        free(pair);
    }
    return info;
}

static void write_records(const char *path, long long records, long long size, int view, MPI_Info info) {
    int rank = 0, ranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    printf("rank %d pid %ld\n", rank, (long)getpid());
    fflush(stdout);
    MPI_File fh;
    CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_WRONLY | MPI_MODE_CREATE, info, &fh));
    unsigned char *buf = malloc((size_t)(records * size));
    for (long long k = 0; k < records; k++) {
        for (long long i = 0; i < size; i++) {
            buf[k * size + i] = byte_of(rank, k, i);
        }
    }
    MPI_Status status;
    if (view) {
        MPI_Datatype strided;
        CHECK(MPI_Type_vector((int)records, (int)size, (int)(size * ranks), MPI_BYTE, &strided));
        CHECK(MPI_Type_commit(&strided));
        CHECK(MPI_File_set_view(fh, (MPI_Offset)rank * size, MPI_BYTE, strided, "native", info));
        CHECK(MPI_File_write_all(fh, buf, (int)(records * size), MPI_BYTE, &status));
        MPI_Type_free(&strided);
    } else {
        for (long long k = 0; k < records; k++) {
            MPI_Offset offset = (MPI_Offset)((k * ranks + rank) * size);
            CHECK(MPI_File_write_at(fh, offset, buf + k * size, (int)size, MPI_BYTE, &status));
        }
    }
    int written = 0;
    MPI_Get_count(&status, MPI_BYTE, &written);
    CHECK(MPI_File_sync(fh));
    CHECK(MPI_File_close(&fh));
    free(buf);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        printf("mpiio_strided: OK: %d writers wrote %lld bytes (%s)\n", ranks, records * size * ranks,
               view ? "file view, write_all" : "write_at");
    }
}

static void read_records(const char *path, long long records, long long size, long long writers, MPI_Info info) {
    int rank = 0, ranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    MPI_File fh;
    CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, info, &fh));
    long long total = records * size * writers;
    MPI_Offset reported = 0;
    CHECK(MPI_File_get_size(fh, &reported));
    long long failures = 0;
    if (reported != total) {
        fprintf(stderr, "mpiio_strided: rank %d: size %lld, expected %lld\n", rank, (long long)reported, total);
        failures++;
    }
    /* A contiguous share per rank: not the writers' pattern. */
    long long share = (total + ranks - 1) / ranks;
    long long start = share * rank < total ? share * rank : total;
    long long end = start + share < total ? start + share : total;
    unsigned char *buf = malloc((size_t)(share > 0 ? share : 1));
    memset(buf, 0, (size_t)(share > 0 ? share : 1));
    MPI_Status status;
    CHECK(MPI_File_read_at_all(fh, start, buf, (int)(end - start), MPI_BYTE, &status));
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    if (count != end - start) {
        fprintf(stderr, "mpiio_strided: rank %d: read %d bytes, expected %lld\n", rank, count, end - start);
        failures++;
    }
    for (long long offset = start; offset < end; offset++) {
        long long slot = offset / size;
        unsigned char expected = byte_of(slot % writers, slot / writers, offset % size);
        if (buf[offset - start] != expected) {
            if (failures < 5) {
                fprintf(stderr, "mpiio_strided: rank %d: byte %lld is %u, expected %u\n", rank, offset,
                        buf[offset - start], expected);
            }
            failures++;
        }
    }
    free(buf);
    CHECK(MPI_File_close(&fh));
    long long verified = failures == 0 ? end - start : 0, all_verified = 0, all_failures = 0;
    MPI_Reduce(&verified, &all_verified, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&failures, &all_failures, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0 && all_failures == 0 && all_verified == total) {
        printf("mpiio_strided: OK: %d readers verified %lld bytes\n", ranks, all_verified);
    } else if (rank == 0) {
        printf("mpiio_strided: FAILED: %lld failures, %lld of %lld bytes verified\n", all_failures,
               all_verified, total);
    }
}

/* Each rank reads back only the records it wrote (as a restart on the same
 * number of ranks does), which is all plfs_uniform_restart promises. */
static void read_own_records(const char *path, long long records, long long size, MPI_Info info) {
    int rank = 0, ranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    MPI_File fh;
    CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, info, &fh));
    unsigned char *buf = malloc((size_t)size);
    long long failures = 0;
    for (long long k = 0; k < records; k++) {
        MPI_Status status;
        memset(buf, 0, (size_t)size);
        CHECK(MPI_File_read_at(fh, (MPI_Offset)((k * ranks + rank) * size), buf, (int)size, MPI_BYTE, &status));
        for (long long i = 0; i < size; i++) {
            if (buf[i] != byte_of(rank, k, i)) {
                if (failures < 5) {
                    fprintf(stderr, "mpiio_strided: rank %d: record %lld byte %lld is %u, expected %u\n", rank,
                            k, i, buf[i], byte_of(rank, k, i));
                }
                failures++;
            }
        }
    }
    free(buf);
    CHECK(MPI_File_close(&fh));
    long long all_failures = 0;
    MPI_Reduce(&failures, &all_failures, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        if (all_failures == 0) {
            printf("mpiio_strided: OK: %d ranks read their own records\n", ranks);
        } else {
            printf("mpiio_strided: FAILED: %lld wrong bytes in own records\n", all_failures);
        }
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    if (argc < 3) {
        fprintf(stderr, "usage: mpiio_strided write-at|write-view|read|read-own|delete PATH ...\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *mode = argv[1], *path = argv[2];
    if (strcmp(mode, "delete") == 0) {
        int rank = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        if (rank == 0) {
            CHECK(MPI_File_delete(path, MPI_INFO_NULL));
            printf("mpiio_strided: OK: deleted\n");
        }
    } else if ((strcmp(mode, "write-at") == 0 || strcmp(mode, "write-view") == 0) && argc >= 5) {
        MPI_Info info = hints_from(argc, argv, 5);
        write_records(path, atoll(argv[3]), atoll(argv[4]), strcmp(mode, "write-view") == 0, info);
        MPI_Info_free(&info);
    } else if (strcmp(mode, "read-own") == 0 && argc >= 5) {
        MPI_Info info = hints_from(argc, argv, 5);
        read_own_records(path, atoll(argv[3]), atoll(argv[4]), info);
        MPI_Info_free(&info);
    } else if (strcmp(mode, "read") == 0 && argc >= 6) {
        MPI_Info info = hints_from(argc, argv, 6);
        read_records(path, atoll(argv[3]), atoll(argv[4]), atoll(argv[5]), info);
        MPI_Info_free(&info);
    } else {
        fprintf(stderr, "mpiio_strided: bad arguments\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Finalize();
    return 0;
}
