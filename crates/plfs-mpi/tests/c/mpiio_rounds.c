/*
 * Counts the collective rounds an MPI-IO program pays in MPI_File_open,
 * the reads and MPI_File_close of a read-only open. On an oversubscribed
 * machine every round is a wait until every rank has been scheduled, so
 * the count, not the bytes, sets what a small read-only open costs.
 *
 *   mpiio_rounds PATH RECORDS SIZE SHIFT [key=value ...]
 *
 * Every rank writes RECORDS strided records of SIZE bytes (record i of
 * rank r at (i * size + r) * SIZE) with MPI_File_write_at and closes
 * (odd ranks last record first: their index logs then hold a record per
 * write instead of one strided pattern, so with many records the index
 * messages outgrow a first message and take a second round);
 * then every rank opens PATH MPI_MODE_RDONLY with the key=value pairs as
 * hints, reads the records of rank (r + SHIFT) % size back with
 * MPI_File_read_at (SHIFT 0 under plfs_uniform_restart, which reads only
 * a rank's own records), checks them, and closes.
 *
 * This program defines the MPI collectives itself and forwards them to
 * their PMPI_ names, so the calls libplfs_mpiio.so makes (and the
 * communicator table of plfs_mpi.h it hands to libplfs) land here first
 * and are counted. The MPI library's own internal collectives (those of
 * its PMPI_File_open) do not go through these names, so they are not
 * counted: the figures are what the plfs layer adds. MPI_Comm_free is
 * shown apart (a local call in Open MPI and MPICH).
 *
 * Rank r prints one line:
 *   mpiio_rounds: rank R: write open N close N; read open N (kind n ...) read N close N
 * and rank 0 "mpiio_rounds: OK" when every rank read every byte right.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

enum { BARRIER, BCAST, GATHER, GATHERV, ALLGATHER, ALLGATHERV, ALLREDUCE, REDUCE, ALLTOALL, DUP, SPLIT, KINDS };
static const char *const kind_names[KINDS] = {"barrier",   "bcast",     "gather",   "gatherv",
                                              "allgather", "allgatherv", "allreduce", "reduce",
                                              "alltoall",  "comm_dup",  "comm_split"};
static long counts[KINDS];
static long frees;
static int counting;

static void count(int kind) {
    if (counting) {
        counts[kind]++;
    }
}

int MPI_Barrier(MPI_Comm comm) {
    count(BARRIER);
    return PMPI_Barrier(comm);
}

int MPI_Bcast(void *buf, int n, MPI_Datatype type, int root, MPI_Comm comm) {
    count(BCAST);
    return PMPI_Bcast(buf, n, type, root, comm);
}

int MPI_Gather(const void *send, int sn, MPI_Datatype st, void *recv, int rn, MPI_Datatype rt, int root,
               MPI_Comm comm) {
    count(GATHER);
    return PMPI_Gather(send, sn, st, recv, rn, rt, root, comm);
}

int MPI_Gatherv(const void *send, int sn, MPI_Datatype st, void *recv, const int rn[], const int rd[],
                MPI_Datatype rt, int root, MPI_Comm comm) {
    count(GATHERV);
    return PMPI_Gatherv(send, sn, st, recv, rn, rd, rt, root, comm);
}

int MPI_Allgather(const void *send, int sn, MPI_Datatype st, void *recv, int rn, MPI_Datatype rt, MPI_Comm comm) {
    count(ALLGATHER);
    return PMPI_Allgather(send, sn, st, recv, rn, rt, comm);
}

int MPI_Allgatherv(const void *send, int sn, MPI_Datatype st, void *recv, const int rn[], const int rd[],
                   MPI_Datatype rt, MPI_Comm comm) {
    count(ALLGATHERV);
    return PMPI_Allgatherv(send, sn, st, recv, rn, rd, rt, comm);
}

int MPI_Allreduce(const void *send, void *recv, int n, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    count(ALLREDUCE);
    return PMPI_Allreduce(send, recv, n, type, op, comm);
}

int MPI_Reduce(const void *send, void *recv, int n, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) {
    count(REDUCE);
    return PMPI_Reduce(send, recv, n, type, op, root, comm);
}

int MPI_Alltoall(const void *send, int sn, MPI_Datatype st, void *recv, int rn, MPI_Datatype rt, MPI_Comm comm) {
    count(ALLTOALL);
    return PMPI_Alltoall(send, sn, st, recv, rn, rt, comm);
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *out) {
    count(DUP);
    return PMPI_Comm_dup(comm, out);
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *out) {
    count(SPLIT);
    return PMPI_Comm_split(comm, color, key, out);
}

int MPI_Comm_free(MPI_Comm *comm) {
    if (counting) {
        frees++;
    }
    return PMPI_Comm_free(comm);
}

static long total(void) {
    long sum = 0;
    for (int i = 0; i < KINDS; i++) {
        sum += counts[i];
    }
    return sum;
}

static void restart(void) {
    memset(counts, 0, sizeof counts);
    frees = 0;
    counting = 1;
}

static unsigned char byte_of(long record, long i) { return (unsigned char)(record * 131 + i * 7 + 1); }

#define CHECK(call)                                                                                               \
    do {                                                                                                          \
        int rc_ = (call);                                                                                         \
        if (rc_ != MPI_SUCCESS) {                                                                                 \
            char text_[MPI_MAX_ERROR_STRING];                                                                     \
            int length_ = 0;                                                                                      \
            MPI_Error_string(rc_, text_, &length_);                                                               \
            fprintf(stderr, "mpiio_rounds: rank %d: %s: %s\n", rank, #call, text_);                               \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                                         \
        }                                                                                                         \
    } while (0)

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 5 || atol(argv[2]) <= 0 || atol(argv[3]) <= 0 || atol(argv[4]) < 0) {
        if (rank == 0) {
            fprintf(stderr, "usage: %s PATH RECORDS SIZE SHIFT [key=value ...]\n", argv[0]);
        }
        MPI_Finalize();
        return 2;
    }
    const char *path = argv[1];
    long records = atol(argv[2]), record_bytes = atol(argv[3]), shift = atol(argv[4]);
    unsigned char *buffer = malloc((size_t)record_bytes);
    if (buffer == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Info info;
    MPI_Info_create(&info);
    for (int i = 5; i < argc; i++) {
        char *equals = strchr(argv[i], '=');
        if (equals == NULL) {
            fprintf(stderr, "mpiio_rounds: %s is not key=value\n", argv[i]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        *equals = '\0';
        MPI_Info_set(info, argv[i], equals + 1);
    }

    MPI_File fh;
    restart();
    CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh));
    long write_open = total();
    for (long k = 0; k < records; k++) {
        long record = rank % 2 == 0 ? k : records - 1 - k;
        long slot = record * size + rank;
        for (long i = 0; i < record_bytes; i++) {
            buffer[i] = byte_of(slot, i);
        }
        MPI_Status status;
        CHECK(MPI_File_write_at(fh, (MPI_Offset)(slot * record_bytes), buffer, (int)record_bytes, MPI_BYTE,
                                &status));
    }
    restart();
    CHECK(MPI_File_close(&fh));
    long write_close = total();
    counting = 0;
    PMPI_Barrier(MPI_COMM_WORLD);

    restart();
    CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, info, &fh));
    long open_counts[KINDS];
    memcpy(open_counts, counts, sizeof counts);
    long read_open = total(), open_frees = frees;
    restart();
    int wrong = 0;
    int source = (int)((rank + shift) % size);
    for (long record = 0; record < records; record++) {
        long slot = record * size + source;
        MPI_Status status;
        CHECK(MPI_File_read_at(fh, (MPI_Offset)(slot * record_bytes), buffer, (int)record_bytes, MPI_BYTE,
                               &status));
        for (long i = 0; i < record_bytes; i++) {
            if (buffer[i] != byte_of(slot, i)) {
                if (wrong++ == 0) {
                    fprintf(stderr, "mpiio_rounds: rank %d: record %ld byte %ld is wrong\n", rank, slot, i);
                }
                break;
            }
        }
    }
    long reads = total();
    restart();
    CHECK(MPI_File_close(&fh));
    long read_close = total(), close_frees = frees;
    counting = 0;

    char line[1024];
    int used = snprintf(line, sizeof line, "mpiio_rounds: rank %d: write open %ld close %ld; read open %ld (", rank,
                        write_open, write_close, read_open);
    for (int i = 0; i < KINDS; i++) {
        if (open_counts[i] != 0 && used < (int)sizeof line) {
            used += snprintf(line + used, sizeof line - (size_t)used, " %s %ld", kind_names[i], open_counts[i]);
        }
    }
    if (used < (int)sizeof line) {
        snprintf(line + used, sizeof line - (size_t)used, " ) read %ld close %ld; comm_free open %ld close %ld",
                 reads, read_close, open_frees, close_frees);
    }
    /* One rank at a time, so the lines do not interleave. */
    for (int turn = 0; turn < size; turn++) {
        if (turn == rank) {
            printf("%s\n", line);
            fflush(stdout);
        }
        PMPI_Barrier(MPI_COMM_WORLD);
    }
    int all_wrong = 0;
    PMPI_Allreduce(&wrong, &all_wrong, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && all_wrong == 0) {
        printf("mpiio_rounds: OK\n");
    }
    MPI_Info_free(&info);
    free(buffer);
    MPI_Finalize();
    return all_wrong == 0 ? 0 : 1;
}
