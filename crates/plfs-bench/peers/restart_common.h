/*
 * The part the two restart peers (adios_restart.c, hdf5_restart.c) share:
 * the command line, the Pixie3D-like data, the writers' and readers'
 * regions, the value check and the one RESULT line. Each peer only adds
 * its own write and read calls, so both measure exactly the same data and
 * the same regions (crates/plfs-bench/src/peers.rs runs them).
 *
 * The data: NVARS variables, each a global GX x GY x GZ array of doubles
 * stored C order (z slowest, x fastest). The value at (v, x, y, z) is
 *     v * 2^40 + ((z * GY + y) * GX + x)
 * which is exact in a double for any grid below 2^40 points. Laid end to
 * end (variable 0's array, then variable 1's, ...) this is the file
 * `plfs bench restart --pattern pixie3d` writes through plfs and as the
 * direct N-1 file (crates/plfs-bench/src/restart/layout.rs).
 *
 * The grids come from the command line, and the decomposition rules
 * (which M, which reader grid) live in the Rust bench alone: this program
 * has no rule of its own that could drift from the plfs readers'.
 *
 * Writers: the --procs PXxPYxPZ process grid; rank r sits at
 * (r % PX, r / PX % PY, r / (PX * PY)), and a grid of P parts splits a
 * dimension of G points so that part i holds [i * G / P, (i + 1) * G / P).
 *
 * Readers (MPI_COMM_WORLD's size is M):
 *   --readers-grid RXxRYxRZ  (RX * RY * RZ = M) each reader one box of that
 *                            grid, placed like the writers' (uniform, half,
 *                            minus-k and non-integer all read this way);
 *   --decomp pieces          the file (all variables end to end) in M
 *                            contiguous runs of values: reader r reads
 *                            values [r * T / M, (r + 1) * T / M) of the
 *                            T = NVARS * GX * GY * GZ, which in each variable
 *                            it touches is up to 5 boxes (a part row, rows,
 *                            planes, rows, a part row).
 * --decomp otherwise only names the decomposition in the RESULT line.
 *
 * Phase `regions` does no I/O: each rank writes the byte ranges of that
 * file its read would cover to DIR/regions.RANK ("offset len" lines, in
 * read order, touching ranges merged), so a test can hold them against the
 * plfs readers'.
 */
#ifndef PLFS_RESTART_COMMON_H
#define PLFS_RESTART_COMMON_H

#include <errno.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#define NVARS 8

enum phase { PHASE_WRITE, PHASE_READ, PHASE_REGIONS };

struct options {
    enum phase phase;
    const char *dir;
    uint64_t global[3]; /* GX, GY, GZ */
    int procs[3];       /* PX, PY, PZ: the writer grid */
    int readers[3];     /* RX, RY, RZ: the reader grid, unless pieces */
    int have_readers;
    int pieces;
    const char *decomp_name;
    /* Added to every expected value: a reader told to expect the wrong
     * values must fail, which proves the check runs. */
    int64_t expect_offset;
    const char *transport; /* adios only: MPI or POSIX */
    /* Bytes to touch and free right before the clock (--back-memory). */
    uint64_t back_memory;
};

/* A box: start and count per dimension, x first. */
struct box {
    uint64_t start[3];
    uint64_t count[3];
};

/* What one rank writes or reads: per variable up to MAX_BOXES boxes, in
 * file order; the rank's buffer for the variable holds them one after the
 * other, each in C order (which, the boxes being in file order, is the
 * order of the points in the file). */
static uint64_t box_points(const struct box *b) { return b->count[0] * b->count[1] * b->count[2]; }

#define MAX_BOXES 5
struct regions {
    struct box boxes[NVARS][MAX_BOXES];
    int nboxes[NVARS];
    uint64_t points[NVARS];
};

static void usage_exit(int rank, const char *program, const char *why) {
    if (rank == 0) {
        fprintf(stderr,
                "%s: %s\nusage: %s write|read|regions --dir DIR --grid GXxGYxGZ --procs PXxPYxPZ\n"
                "       [--readers-grid RXxRYxRZ | --decomp pieces] [--decomp NAME]\n"
                "       [--expect-offset D] [--transport MPI|POSIX] [--back-memory BYTES]\n",
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

static int parse_grid(const char *text, int out[3]) {
    uint64_t p[3];
    if (parse_triple_u64(text, p) != 0 || p[0] > 65536 || p[1] > 65536 || p[2] > 65536) return -1;
    out[0] = (int)p[0], out[1] = (int)p[1], out[2] = (int)p[2];
    return 0;
}

static void parse_options(int argc, char **argv, int rank, struct options *o) {
    memset(o, 0, sizeof *o);
    o->decomp_name = "uniform";
    o->transport = "MPI";
    int have_grid = 0, have_procs = 0;
    if (argc < 2) usage_exit(rank, argv[0], "no phase");
    if (strcmp(argv[1], "write") == 0) o->phase = PHASE_WRITE;
    else if (strcmp(argv[1], "read") == 0) o->phase = PHASE_READ;
    else if (strcmp(argv[1], "regions") == 0) o->phase = PHASE_REGIONS;
    else usage_exit(rank, argv[0], "the phase is write, read or regions");
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
            if (parse_grid(value, o->procs) != 0) usage_exit(rank, argv[0], "--procs is PXxPYxPZ");
            have_procs = 1;
        } else if (strcmp(flag, "--readers-grid") == 0) {
            if (parse_grid(value, o->readers) != 0) usage_exit(rank, argv[0], "--readers-grid is RXxRYxRZ");
            o->have_readers = 1;
        } else if (strcmp(flag, "--decomp") == 0) {
            o->decomp_name = value;
            o->pieces = strcmp(value, "pieces") == 0;
        } else if (strcmp(flag, "--expect-offset") == 0) {
            o->expect_offset = strtoll(value, NULL, 10);
        } else if (strcmp(flag, "--transport") == 0) {
            o->transport = value;
        } else if (strcmp(flag, "--back-memory") == 0) {
            o->back_memory = strtoull(value, NULL, 10);
        } else {
            usage_exit(rank, argv[0], "unknown flag");
        }
    }
    if (!o->dir || !have_grid || !have_procs) usage_exit(rank, argv[0], "--dir, --grid and --procs are required");
    if (o->phase != PHASE_WRITE && o->pieces == o->have_readers)
        usage_exit(rank, argv[0], "a read needs --readers-grid or --decomp pieces (one of them)");
    if (o->global[0] * o->global[1] * o->global[2] >= ((uint64_t)1 << 40))
        usage_exit(rank, argv[0], "--grid has 2^40 points or more: the values would not be exact");
    for (int d = 0; d < 3; d++) {
        if ((uint64_t)o->procs[d] > o->global[d]) usage_exit(rank, argv[0], "--procs exceeds --grid in a dimension");
        if (o->have_readers && (uint64_t)o->readers[d] > o->global[d])
            usage_exit(rank, argv[0], "--readers-grid exceeds --grid in a dimension");
    }
}

/* Touches --back-memory bytes of fresh memory and frees them, as plfs's
 * and the direct file's readers do before their clock (the bench's
 * host.rs, back_free_memory, says why): after the page cache is dropped a
 * guest with free page reporting gives the freed pages to its host, and
 * the read that fills the page cache again would pay a host fault per
 * page, more or less depending on the folios it gets. */
static void back_free_memory(const struct options *o, int rank, const char *peer) {
    size_t len = (size_t)o->back_memory;
    if (len == 0) return;
    char *at = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (at == MAP_FAILED) {
        fprintf(stderr, "%s rank %d: mmap of %zu bytes to back free memory: %s\n", peer, rank, len, strerror(errno));
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    madvise(at, len, MADV_HUGEPAGE);
    for (size_t i = 0; i < len; i += 4096) ((volatile char *)at)[i] = 1;
    munmap(at, len);
    /* The peak RSS the report shows is the read's, not this memory's: "5"
     * resets it to the current RSS (proc(5), clear_refs). */
    FILE *refs = fopen("/proc/self/clear_refs", "w");
    if (refs == NULL || fputs("5", refs) == EOF || fclose(refs) != 0) {
        fprintf(stderr, "%s rank %d: resetting the peak RSS (/proc/self/clear_refs): %s\n", peer, rank, strerror(errno));
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
}

/* Part i of P of a dimension of G points. */
static void split(uint64_t g, int parts, int i, uint64_t *start, uint64_t *count) {
    uint64_t begin = g * (uint64_t)i / (uint64_t)parts;
    uint64_t end = g * (uint64_t)(i + 1) / (uint64_t)parts;
    *start = begin;
    *count = end - begin;
}

static void add_box(struct regions *re, int v, uint64_t x, uint64_t y, uint64_t z, uint64_t cx, uint64_t cy,
                    uint64_t cz) {
    if (cx == 0 || cy == 0 || cz == 0) return;
    struct box *b = &re->boxes[v][re->nboxes[v]++];
    b->start[0] = x, b->start[1] = y, b->start[2] = z;
    b->count[0] = cx, b->count[1] = cy, b->count[2] = cz;
    re->points[v] += cx * cy * cz;
}

/* Rank r's box of every variable in a grid of parts[3] ranks. */
static void grid_regions(const struct options *o, const int parts[3], int r, struct regions *re) {
    int at[3] = {r % parts[0], r / parts[0] % parts[1], r / (parts[0] * parts[1])};
    uint64_t start[3], count[3];
    for (int d = 0; d < 3; d++) split(o->global[d], parts[d], at[d], &start[d], &count[d]);
    for (int v = 0; v < NVARS; v++) add_box(re, v, start[0], start[1], start[2], count[0], count[1], count[2]);
}

/* Values [a, b) of variable v's array (C order) as boxes in file order: a
 * part row, the rows to the end of its plane, whole planes, whole rows, a
 * part row. */
static void linear_regions(const struct options *o, int v, uint64_t a, uint64_t b, struct regions *re) {
    uint64_t gx = o->global[0], plane = o->global[0] * o->global[1];
    uint64_t pos = a;
#define AT_X (pos % gx)
#define AT_Y (pos / gx % o->global[1])
#define AT_Z (pos / plane)
    if (pos < b && AT_X != 0) {
        uint64_t n = gx - AT_X < b - pos ? gx - AT_X : b - pos;
        add_box(re, v, AT_X, AT_Y, AT_Z, n, 1, 1);
        pos += n;
    }
    if (pos < b && AT_Y != 0) {
        uint64_t rows = o->global[1] - AT_Y, room = (b - pos) / gx;
        if (room < rows) rows = room;
        add_box(re, v, 0, AT_Y, AT_Z, gx, rows, 1);
        pos += rows * gx;
    }
    uint64_t planes = (b - pos) / plane;
    add_box(re, v, 0, 0, AT_Z, gx, o->global[1], planes);
    pos += planes * plane;
    uint64_t rows = (b - pos) / gx;
    add_box(re, v, 0, AT_Y, AT_Z, gx, rows, 1);
    pos += rows * gx;
    add_box(re, v, 0, AT_Y, AT_Z, b - pos, 1, 1);
#undef AT_X
#undef AT_Y
#undef AT_Z
}

/* Reader r of m's values: the whole file's T values in m contiguous runs. */
static void piece_regions(const struct options *o, int m, int r, struct regions *re) {
    uint64_t volume = o->global[0] * o->global[1] * o->global[2], total = volume * NVARS;
    uint64_t first = total * (uint64_t)r / (uint64_t)m, last = total * (uint64_t)(r + 1) / (uint64_t)m;
    for (int v = 0; v < NVARS; v++) {
        uint64_t lo = (uint64_t)v * volume, hi = lo + volume;
        uint64_t a = first > lo ? first : lo, b = last < hi ? last : hi;
        if (a < b) linear_regions(o, v, a - lo, b - lo, re);
    }
}

/* This rank's regions for the phase, given the ranks mpirun started; 0, or
 * -1 after printing why on rank 0. */
static int rank_regions(const struct options *o, int ranks, int rank, struct regions *re) {
    memset(re, 0, sizeof *re);
    const int *parts = o->phase == PHASE_WRITE ? o->procs : o->readers;
    if (o->phase != PHASE_WRITE && o->pieces) {
        piece_regions(o, ranks, rank, re);
        return 0;
    }
    int expected = parts[0] * parts[1] * parts[2];
    if (ranks != expected) {
        if (rank == 0)
            fprintf(stderr, "%s: a %dx%dx%d grid needs %d ranks, mpirun started %d\n",
                    o->phase == PHASE_WRITE ? "--procs" : "--readers-grid", parts[0], parts[1], parts[2], expected,
                    ranks);
        return -1;
    }
    grid_regions(o, parts, rank, re);
    return 0;
}

/* Writes this rank's byte ranges of the end-to-end file (see the top) to
 * DIR/regions.RANK; 0 or -1. */
static int write_regions_file(const struct options *o, const struct regions *re, int rank) {
    char path[4096];
    snprintf(path, sizeof path, "%s/regions.%d", o->dir, rank);
    FILE *out = fopen(path, "w");
    if (!out) {
        perror(path);
        return -1;
    }
    uint64_t gx = o->global[0], gy = o->global[1], gz = o->global[2];
    uint64_t run_offset = 0, run_len = 0;
    for (int v = 0; v < NVARS; v++)
        for (int i = 0; i < re->nboxes[v]; i++) {
            const struct box *b = &re->boxes[v][i];
            for (uint64_t z = b->start[2]; z < b->start[2] + b->count[2]; z++)
                for (uint64_t y = b->start[1]; y < b->start[1] + b->count[1]; y++) {
                    uint64_t offset = ((((uint64_t)v * gz + z) * gy + y) * gx + b->start[0]) * 8;
                    uint64_t len = b->count[0] * 8;
                    if (run_len > 0 && run_offset + run_len == offset) {
                        run_len += len;
                        continue;
                    }
                    if (run_len > 0) fprintf(out, "%llu %llu\n", (unsigned long long)run_offset, (unsigned long long)run_len);
                    run_offset = offset, run_len = len;
                }
        }
    if (run_len > 0) fprintf(out, "%llu %llu\n", (unsigned long long)run_offset, (unsigned long long)run_len);
    return fclose(out) == 0 ? 0 : -1;
}

static uint64_t regions_points(const struct regions *re) {
    uint64_t points = 0;
    for (int v = 0; v < NVARS; v++) points += re->points[v];
    return points;
}

/* One buffer per variable for its regions (at least one double, so an
 * empty variable still has a valid pointer). */
static void alloc_buffers(const struct regions *re, double *bufs[NVARS], int rank, const char *peer) {
    for (int v = 0; v < NVARS; v++) {
        bufs[v] = malloc((re->points[v] ? re->points[v] : 1) * sizeof(double));
        if (!bufs[v]) {
            fprintf(stderr, "%s rank %d: out of memory for %llu points\n", peer, rank,
                    (unsigned long long)re->points[v]);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
}

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

/* Fills every variable's buffer with the true values of its regions. */
static void fill_regions(const struct options *o, const struct regions *re, double *bufs[NVARS]) {
    for (int v = 0; v < NVARS; v++) {
        double *at = bufs[v];
        for (int i = 0; i < re->nboxes[v]; i++) {
            fill_box(o, &re->boxes[v][i], v, at);
            at += box_points(&re->boxes[v][i]);
        }
    }
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

/* Counts the wrong values in every variable's buffer. */
static uint64_t check_regions(const struct options *o, const struct regions *re, double *bufs[NVARS], int rank,
                              const char *peer) {
    uint64_t wrong = 0;
    int reported = 0;
    for (int v = 0; v < NVARS; v++) {
        const double *at = bufs[v];
        for (int i = 0; i < re->nboxes[v]; i++) {
            wrong += check_box(o, &re->boxes[v][i], v, at, rank, peer, &reported);
            at += box_points(&re->boxes[v][i]);
        }
    }
    return wrong;
}
/* fdatasyncs one file; exits the job naming it on failure. */
static void sync_file(const char *path, int rank, const char *peer) {
    int fd = open(path, O_RDONLY);
    if (fd < 0 || fdatasync(fd) != 0) {
        fprintf(stderr, "%s: rank %d: syncing %s: %s\n", peer, rank, path, strerror(errno));
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    close(fd);
}

/* Makes a write phase's output durable before its clock stops, as the
 * bench's plfs and direct writers do (each fdatasyncs what it wrote at its
 * close): without it a peer's write figure would be a page-cache copy set
 * beside theirs. Every rank syncs the output file, and each file of the
 * directory of subfiles beside it where there is one (ADIOS's POSIX
 * transport: PATH.dir/); the first to sync a file writes its pages back,
 * the others find them clean, as the direct file's writers do. */
static void sync_output(const char *path, int rank, const char *peer) {
    sync_file(path, rank, peer);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s.dir", path);
    DIR *d = opendir(dir);
    if (d == NULL) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char sub[8400];
        snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        sync_file(sub, rank, peer);
    }
    closedir(d);
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
