/*
 * N-1 strided POSIX I/O from an MPI job, for the simulated-node tests
 * (crates/plfs-cli/tests/nodes.rs). It knows nothing of plfs: the path is
 * on a FUSE mount, or the preload (LD_PRELOAD) puts it on plfs.
 *
 *   nodes_strided hosts
 *   nodes_strided write  PATH RECORDS SIZE
 *   nodes_strided read   PATH RECORDS SIZE WRITERS
 *   nodes_strided follow PATH RECORDS SIZE READERS
 *   nodes_strided crash  PATH RECORDS SIZE SYNCED
 *
 * Record k of writer w lies at (k*WRITERS + w)*SIZE and holds
 * byte_of(w, k, i). hosts: rank 0 prints "rank R host H" for every rank
 * (gathered over MPI, so the line also proves the ranks talk). write: every
 * rank writes its records (pwrite), fsyncs and closes. read: any number of
 * ranks check the size and read and verify their share of the records.
 * follow: the first READERS ranks read while the others write: per round
 * every writer writes one record and fsyncs, then the readers open the
 * file afresh and verify every record written so far. crash: every rank
 * writes SYNCED rounds with an fsync after each, then the rest without,
 * rank 0 prints "crash: written" and waits for a line on stdin (the test
 * kills a node meanwhile). Rank 0 prints one "nodes_strided: OK ..." line
 * on success; any failure prints why and aborts the job.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mpi.h>

static int rank, ranks;
static char host[256];

static unsigned char byte_of(long long writer, long long record, long long position) {
    return (unsigned char)((writer * 31 + record * 7 + position * 13) % 251 + 1);
}

static void die(const char *what, const char *path) {
    fprintf(stderr, "nodes_strided: rank %d on %s: %s %s: %s\n", rank, host, what, path, strerror(errno));
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static void fill(unsigned char *buf, long long writer, long long record, long long size) {
    for (long long i = 0; i < size; i++) {
        buf[i] = byte_of(writer, record, i);
    }
}

static void write_record(int fd, const char *path, unsigned char *buf, long long writer, long long writers,
                         long long record, long long size) {
    fill(buf, writer, record, size);
    if (pwrite(fd, buf, (size_t)size, (record * writers + writer) * size) != size) {
        die("pwrite", path);
    }
}

/* Reads slot `slot` and checks it against writer slot%writers, record slot/writers. */
static void verify_slot(int fd, const char *path, unsigned char *buf, long long slot, long long writers,
                        long long size) {
    ssize_t got = pread(fd, buf, (size_t)size, slot * size);
    if (got != size) {
        fprintf(stderr, "nodes_strided: rank %d on %s: %s slot %lld: read %zd of %lld bytes (%s)\n", rank, host,
                path, slot, got, size, got < 0 ? strerror(errno) : "short");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    for (long long i = 0; i < size; i++) {
        if (buf[i] != byte_of(slot % writers, slot / writers, i)) {
            fprintf(stderr, "nodes_strided: rank %d on %s: %s byte %lld (slot %lld) is %d, expected %d\n", rank,
                    host, path, slot * size + i, slot, buf[i], byte_of(slot % writers, slot / writers, i));
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
}

/* Rank 0 creates the file, then everyone opens it for writing. */
static int open_shared(const char *path) {
    if (rank == 0) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || close(fd) != 0) {
            die("create", path);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    int fd = open(path, O_WRONLY);
    if (fd < 0) {
        die("open for writing", path);
    }
    printf("rank %d host %s pid %ld\n", rank, host, (long)getpid());
    fflush(stdout);
    return fd;
}

static void hosts(void) {
    char *all = malloc((size_t)ranks * sizeof host);
    MPI_Allgather(host, sizeof host, MPI_CHAR, all, sizeof host, MPI_CHAR, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 0; r < ranks; r++) {
            printf("rank %d host %s\n", r, all + (size_t)r * sizeof host);
        }
        printf("nodes_strided: OK: %d ranks\n", ranks);
    }
    free(all);
}

static void write_all(const char *path, long long records, long long size) {
    int fd = open_shared(path);
    unsigned char *buf = malloc((size_t)size);
    for (long long k = 0; k < records; k++) {
        write_record(fd, path, buf, rank, ranks, k, size);
    }
    if (fsync(fd) != 0) {
        die("fsync", path);
    }
    /* Every rank holds the file open until all have written, as a
     * checkpoint's ranks do: through FUSE a node's ranks then share one open
     * of the file in their daemon, so one log pair per node. */
    MPI_Barrier(MPI_COMM_WORLD);
    if (close(fd) != 0) {
        die("close", path);
    }
    free(buf);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        printf("nodes_strided: OK: %d writers wrote %lld bytes\n", ranks, ranks * records * size);
    }
}

static void read_all(const char *path, long long records, long long size, long long writers) {
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        die("open and stat", path);
    }
    if (st.st_size != writers * records * size) {
        fprintf(stderr, "nodes_strided: rank %d on %s: %s is %lld bytes, expected %lld\n", rank, host, path,
                (long long)st.st_size, writers * records * size);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    unsigned char *buf = malloc((size_t)size);
    for (long long slot = rank; slot < writers * records; slot += ranks) {
        verify_slot(fd, path, buf, slot, writers, size);
    }
    close(fd);
    free(buf);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        printf("nodes_strided: OK: %d readers verified %lld bytes\n", ranks, writers * records * size);
    }
}

static void follow(const char *path, long long records, long long size, int readers) {
    if (readers < 1 || readers >= ranks) {
        fprintf(stderr, "nodes_strided: follow needs 1..%d readers, not %d\n", ranks - 1, readers);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long long writers = ranks - readers, writer = rank - readers;
    /* The writers alone create and open the file. */
    MPI_Comm role;
    MPI_Comm_split(MPI_COMM_WORLD, rank < readers, rank, &role);
    int fd = -1;
    if (rank >= readers) {
        if (writer == 0) {
            int created = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (created < 0 || close(created) != 0) {
                die("create", path);
            }
        }
        MPI_Barrier(role);
        fd = open(path, O_WRONLY);
        if (fd < 0) {
            die("open for writing", path);
        }
    }
    unsigned char *buf = malloc((size_t)size);
    for (long long k = 0; k < records; k++) {
        if (rank >= readers) {
            write_record(fd, path, buf, writer, writers, k, size);
            if (fsync(fd) != 0) {
                die("fsync", path);
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank < readers) {
            int in = open(path, O_RDONLY);
            if (in < 0) {
                die("open for reading", path);
            }
            for (long long slot = rank; slot < (k + 1) * writers; slot += readers) {
                verify_slot(in, path, buf, slot, writers, size);
            }
            close(in);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (fd >= 0 && close(fd) != 0) {
        die("close", path);
    }
    free(buf);
    MPI_Comm_free(&role);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        printf("nodes_strided: OK: %d readers followed %lld writers for %lld rounds\n", readers, writers, records);
    }
}

static void crash(const char *path, long long records, long long size, long long synced) {
    int fd = open_shared(path);
    unsigned char *buf = malloc((size_t)size);
    for (long long k = 0; k < records; k++) {
        write_record(fd, path, buf, rank, ranks, k, size);
        if (k < synced && fsync(fd) != 0) {
            die("fsync", path);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        printf("crash: written\n");
        fflush(stdout);
        char line[16];
        if (fgets(line, sizeof line, stdin) == NULL) {
            fprintf(stderr, "nodes_strided: crash: stdin closed before the node was killed\n");
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    close(fd);
    free(buf);
    if (rank == 0) {
        printf("nodes_strided: OK: no node was killed\n");
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    gethostname(host, sizeof host - 1);
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "hosts") == 0) {
        hosts();
    } else if (argc >= 5) {
        const char *path = argv[2];
        long long records = atoll(argv[3]), size = atoll(argv[4]);
        long long extra = argc > 5 ? atoll(argv[5]) : 0;
        if (strcmp(mode, "write") == 0) {
            write_all(path, records, size);
        } else if (strcmp(mode, "read") == 0 && argc > 5) {
            read_all(path, records, size, extra);
        } else if (strcmp(mode, "follow") == 0 && argc > 5) {
            follow(path, records, size, (int)extra);
        } else if (strcmp(mode, "crash") == 0 && argc > 5) {
            crash(path, records, size, extra);
        } else {
            mode = "";
        }
    } else {
        mode = "";
    }
    if (*mode == '\0') {
        if (rank == 0) {
            fprintf(stderr, "usage: nodes_strided hosts | write|read|follow|crash PATH RECORDS SIZE [N]\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Finalize();
    return 0;
}
