/*
 * The part the two restart peers (adios_restart.c, hdf5_restart.c) share:
 * the command line, the Pixie3D-like data, the writer and reader
 * decompositions, the value check and the one RESULT line. Each peer only
 * adds its own write and read calls, so both measure exactly the same data
 * and the same regions (crates/plfs-bench/src/peers.rs runs them).
 *
 * The data: NVARS variables, each a global GX x GY x GZ array of doubles
 * stored C order (z slowest, x fastest). The value at (v, x, y, z) is
 *     v * 2^40 + ((z * GY + y) * GX + x)
 * which is exact in a double for any grid below 2^40 points.
 *
 * Writers: a PX x PY x PZ process grid; rank r sits at
 * (r % PX, r / PX % PY, r / (PX * PY)), and a grid of P parts splits a
 * dimension of G points so that part i holds [i * G / P, (i + 1) * G / P).
 *
 * Readers (MPI_COMM_WORLD's size M must match), by --decomp:
 *   uniform      M = N: the writer grid; reader r reads writer r's block.
 *   half         M = N / 2: the writer grid with one dimension halved, the
 *                first even one of z, y, x (so each reader reads two whole
 *                writer blocks).
 *   minus-k      M = N - k (--k K): the grid MPI_Dims_create(M, 3) makes,
 *                its largest count along z, then y, then x; the blocks do
 *                not line up with the writers'.
 *   non-integer  M = PX * PY * (PZ + 1): one more part along z, the seed's
 *                4x4x4 -> 4x4x5 (64 -> 80 readers).
 *   pieces       any M up to GZ: M slabs along z, i.e. the global array
 *                in M contiguous pieces.
 */
#ifndef PLFS_RESTART_COMMON_H
#define PLFS_RESTART_COMMON_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define NVARS 8

enum phase { PHASE_WRITE, PHASE_READ };
enum decomp { DECOMP_UNIFORM, DECOMP_HALF, DECOMP_MINUS_K, DECOMP_NON_INTEGER, DECOMP_PIECES };

struct options {
    enum phase phase;
    const char *dir;
    uint64_t global[3]; /* GX, GY, GZ */
    int procs[3];       /* PX, PY, PZ: the writer grid */
    enum decomp decomp;
    const char *decomp_name;
    int k;
    /* Added to every expected value: a reader told to expect the wrong
     * values must fail, which proves the check runs. */
    int64_t expect_offset;
    const char *transport; /* adios only: MPI or POSIX */
};

/* A rank's box: start and count per dimension, x first. */
struct box {
    uint64_t start[3];
    uint64_t count[3];
};

static void usage_exit(int rank, const char *program, const char *why) {
    if (rank == 0) {
        fprintf(stderr,
                "%s: %s\nusage: %s write|read --dir DIR --grid GXxGYxGZ --procs PXxPYxPZ\n"
                "       [--decomp uniform|half|minus-k|non-integer|pieces] [--k K]\n"
                "       [--expect-offset D] [--transport MPI|POSIX]\n",
                program, why, program);
    }
    MPI_Finalize();
    exit(2);
}

static int parse_triple_u64(const char *text, uint64_t out[3]) {
    char tail;
    unsigned long long a, b, c;
    if (sscanf(text, "%llux%llux%llu%c", &a, &b, &c, &tail) != 3 || a == 0 || b == 0 || c == 0) {
        return -1;
    }
    out[0] = a, out[1] = b, out[2] = c;
    return 0;
}

static void parse_options(int argc, char **argv, int rank, struct options *o) {
    memset(o, 0, sizeof *o);
    o->decomp = DECOMP_UNIFORM;
    o->decomp_name = "uniform";
    o->transport = "MPI";
    int have_grid = 0, have_procs = 0;
    if (argc < 2) usage_exit(rank, argv[0], "no phase");
    if (strcmp(argv[1], "write") == 0) o->phase = PHASE_WRITE;
    else if (strcmp(argv[1], "read") == 0) o->phase = PHASE_READ;
    else usage_exit(rank, argv[0], "the phase is write or read");
    for (int i = 2; i < argc; i++) {
        const char *flag = argv[i];
        if (i + 1 >= argc) usage_exit(rank, argv[0], "a flag without its value");
        const char *value = argv[++i];
        if (strcmp(flag, "--dir") == 0) {
            o->dir = value;
        } else if (strcmp(flag, "--grid") == 0) {
            if (parse_triple_u64(value, o->global) != 0) usage_exit(rank, argv[0], "--grid is GXxGYxGZ");
            have_grid = 1;
        } else if (strcmp(flag, "--procs") == 0) {
            uint64_t p[3];
            if (parse_triple_u64(value, p) != 0 || p[0] > 65536 || p[1] > 65536 || p[2] > 65536)
                usage_exit(rank, argv[0], "--procs is PXxPYxPZ");
            o->procs[0] = (int)p[0], o->procs[1] = (int)p[1], o->procs[2] = (int)p[2];
            have_procs = 1;
        } else if (strcmp(flag, "--decomp") == 0) {
            o->decomp_name = value;
            if (strcmp(value, "uniform") == 0) o->decomp = DECOMP_UNIFORM;
            else if (strcmp(value, "half") == 0) o->decomp = DECOMP_HALF;
            else if (strcmp(value, "minus-k") == 0) o->decomp = DECOMP_MINUS_K;
            else if (strcmp(value, "non-integer") == 0) o->decomp = DECOMP_NON_INTEGER;
            else if (strcmp(value, "pieces") == 0) o->decomp = DECOMP_PIECES;
            else usage_exit(rank, argv[0], "unknown --decomp");
        } else if (strcmp(flag, "--k") == 0) {
            o->k = atoi(value);
        } else if (strcmp(flag, "--expect-offset") == 0) {
            o->expect_offset = strtoll(value, NULL, 10);
        } else if (strcmp(flag, "--transport") == 0) {
            o->transport = value;
        } else {
            usage_exit(rank, argv[0], "unknown flag");
        }
    }
    if (!o->dir || !have_grid || !have_procs) usage_exit(rank, argv[0], "--dir, --grid and --procs are required");
    if (o->global[0] * o->global[1] * o->global[2] >= ((uint64_t)1 << 40))
        usage_exit(rank, argv[0], "--grid has 2^40 points or more: the values would not be exact");
    for (int d = 0; d < 3; d++) {
        if ((uint64_t)o->procs[d] > o->global[d]) usage_exit(rank, argv[0], "--procs exceeds --grid in a dimension");
    }
}

/* Part i of P of a dimension of G points. */
static void split(uint64_t g, int parts, int i, uint64_t *start, uint64_t *count) {
    uint64_t begin = g * (uint64_t)i / (uint64_t)parts;
    uint64_t end = g * (uint64_t)(i + 1) / (uint64_t)parts;
    *start = begin;
    *count = end - begin;
}

/* Rank r's box in a grid of parts[3] ranks over the global array. */
static struct box grid_box(const struct options *o, const int parts[3], int r) {
    int at[3] = {r % parts[0], r / parts[0] % parts[1], r / (parts[0] * parts[1])};
    struct box b;
    for (int d = 0; d < 3; d++) split(o->global[d], parts[d], at[d], &b.start[d], &b.count[d]);
    return b;
}

/* The writer grid, which needs exactly PX * PY * PZ ranks; 0, or -1 after
 * printing why on rank 0. */
static int writer_grid(const struct options *o, int n, int rank, int parts[3]) {
    memcpy(parts, o->procs, sizeof(int) * 3);
    int expected = parts[0] * parts[1] * parts[2];
    if (n != expected) {
        if (rank == 0)
            fprintf(stderr, "write: --procs %dx%dx%d needs %d writers, mpirun started %d\n", parts[0], parts[1],
                    parts[2], expected, n);
        return -1;
    }
    return 0;
}

/* The reader grid the decomposition defines; 0, or -1 after printing why
 * (on rank 0) when it cannot run with M readers. */
static int reader_grid(const struct options *o, int m, int rank, int parts[3]) {
    const int *p = o->procs;
    int n = p[0] * p[1] * p[2];
    int expected = m;
    memcpy(parts, p, sizeof(int) * 3);
    switch (o->decomp) {
    case DECOMP_UNIFORM:
        expected = n;
        break;
    case DECOMP_HALF: {
        int d = p[2] % 2 == 0 ? 2 : p[1] % 2 == 0 ? 1 : p[0] % 2 == 0 ? 0 : -1;
        if (d < 0) {
            if (rank == 0) fprintf(stderr, "--decomp half: no writer grid dimension of %dx%dx%d is even\n", p[0], p[1], p[2]);
            return -1;
        }
        parts[d] /= 2;
        expected = n / 2;
        break;
    }
    case DECOMP_MINUS_K: {
        expected = n - o->k;
        if (o->k < 1 || expected < 1) {
            if (rank == 0) fprintf(stderr, "--decomp minus-k: --k %d must be in 1..%d\n", o->k, n - 1);
            return -1;
        }
        int dims[3] = {0, 0, 0};
        MPI_Dims_create(expected, 3, dims); /* non-increasing: dims[0] largest */
        parts[2] = dims[0], parts[1] = dims[1], parts[0] = dims[2];
        break;
    }
    case DECOMP_NON_INTEGER:
        parts[2] += 1;
        expected = p[0] * p[1] * parts[2];
        break;
    case DECOMP_PIECES:
        parts[0] = 1, parts[1] = 1, parts[2] = m;
        break;
    }
    if (m != expected) {
        if (rank == 0)
            fprintf(stderr, "--decomp %s of %d writers needs %d readers, mpirun started %d\n", o->decomp_name, n,
                    expected, m);
        return -1;
    }
    for (int d = 0; d < 3; d++) {
        if ((uint64_t)parts[d] > o->global[d]) {
            if (rank == 0)
                fprintf(stderr, "--decomp %s: %d readers along dimension %d exceed the grid's %llu points\n",
                        o->decomp_name, parts[d], d, (unsigned long long)o->global[d]);
            return -1;
        }
    }
    return 0;
}

static uint64_t box_points(const struct box *b) { return b->count[0] * b->count[1] * b->count[2]; }

static double expected_value(const struct options *o, int v, uint64_t x, uint64_t y, uint64_t z) {
    return (double)((uint64_t)v << 40) + (double)((z * o->global[1] + y) * o->global[0] + x) +
           (double)o->expect_offset;
}

/* Fills buf (the box, C order) with variable v's true values (no offset). */
static void fill_box(const struct options *o, const struct box *b, int v, double *buf) {
    uint64_t i = 0;
    for (uint64_t z = b->start[2]; z < b->start[2] + b->count[2]; z++)
        for (uint64_t y = b->start[1]; y < b->start[1] + b->count[1]; y++)
            for (uint64_t x = b->start[0]; x < b->start[0] + b->count[0]; x++)
                buf[i++] = (double)((uint64_t)v << 40) + (double)((z * o->global[1] + y) * o->global[0] + x);
}

/* Counts the wrong values of variable v in buf; names the first on stderr. */
static uint64_t check_box(const struct options *o, const struct box *b, int v, const double *buf, int rank,
                          const char *peer, int *reported) {
    uint64_t i = 0, wrong = 0;
    for (uint64_t z = b->start[2]; z < b->start[2] + b->count[2]; z++)
        for (uint64_t y = b->start[1]; y < b->start[1] + b->count[1]; y++)
            for (uint64_t x = b->start[0]; x < b->start[0] + b->count[0]; x++, i++) {
                double want = expected_value(o, v, x, y, z);
                if (buf[i] == want) continue;
                if (!*reported) {
                    fprintf(stderr, "%s rank %d: wrong value at (v,x,y,z)=(%d,%llu,%llu,%llu) in %s: %.17g, expected %.17g\n",
                            peer, rank, v, (unsigned long long)x, (unsigned long long)y, (unsigned long long)z, o->dir,
                            buf[i], want);
                    *reported = 1;
                }
                wrong++;
            }
    return wrong;
}

static double max_rss_kib(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return (double)usage.ru_maxrss; /* KiB on Linux */
}

/* Rank 0 prints the one line peers.rs parses: bytes summed over ranks,
 * seconds of the slowest rank's open..close, peak RSS of the largest
 * rank, wrong values summed. Returns the total of wrong values on every
 * rank (so every rank exits the same way). */
static uint64_t report(const char *peer, const struct options *o, int ranks, int rank, uint64_t bytes,
                       double seconds, uint64_t wrong) {
    unsigned long long sums[2] = {bytes, wrong}, totals[2];
    double mine[2] = {seconds, max_rss_kib()}, maxima[2];
    MPI_Allreduce(sums, totals, 2, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(mine, maxima, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("RESULT peer=%s phase=%s decomp=%s writers=%d ranks=%d bytes=%llu seconds=%.9f max_rss_kib=%.0f "
               "errors=%llu\n",
               peer, o->phase == PHASE_WRITE ? "write" : "read", o->decomp_name,
               o->procs[0] * o->procs[1] * o->procs[2], ranks, totals[0], maxima[0], maxima[1], totals[1]);
        fflush(stdout);
    }
    return totals[1];
}

#endif
