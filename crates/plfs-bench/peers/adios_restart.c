/*
 * The ADIOS BP restart peer, with ADIOS 1.x (the library the seed
 * measured). Writers write DIR/restart.bp through ADIOS's MPI transport
 * (or --transport POSIX: one subfile per writer under DIR/restart.bp.dir/)
 * as one process group each: every writer's block of each variable
 * (var0..var7) is one contiguous chunk in the file, with the global
 * dimensions and its offsets in the BP index. Readers open the file with the
 * BP read method and read their regions of every variable (one box of
 * the reader grid, or a contiguous piece's few boxes) with selective
 * bounding-box reads, which ADIOS assembles from the writers' chunks.
 * The data and the regions are restart_common.h's.
 *
 * Run under mpirun (N ranks to write, M to read), e.g.
 *   mpirun.openmpi -np 4 adios_restart write --dir D --grid 64x64x64 --procs 1x2x2
 *   mpirun.openmpi -np 3 adios_restart read --dir D --grid 64x64x64 --procs 1x2x2 --decomp minus-k --readers-grid 1x1x3
 */
#include <adios.h>
#include <adios_error.h>
#include <adios_read.h>

#include "restart_common.h"

#define PEER "adios"

/* Exits the whole job naming the call that failed and ADIOS's message. */
#define CHECK(failed, call)                                                                             \
    do {                                                                                                \
        if (failed) {                                                                                   \
            fprintf(stderr, PEER ": %s failed (%s:%d) on %s: %s\n", call, __FILE__, __LINE__, path, \
                    adios_get_last_errmsg());                                                           \
            MPI_Abort(MPI_COMM_WORLD, 3);                                                               \
        }                                                                                               \
    } while (0)

static double write_phase(const struct options *o, const struct box *b, double *bufs[NVARS], const char *path) {
    uint64_t bytes = box_points(b) * NVARS * sizeof(double);
    CHECK(adios_init_noxml(MPI_COMM_WORLD) != 0, "adios_init_noxml");
    /* The whole group is buffered and written at close: room for the
     * data and the BP index that goes with it. */
    adios_set_max_buffer_size(bytes / (1024 * 1024) + 16);
    int64_t group;
    CHECK(adios_declare_group(&group, "restart", "", adios_stat_no) != 0, "adios_declare_group");
    CHECK(adios_select_method(group, o->transport, "", "") != 0, "adios_select_method");
    /* BP dimensions are C order, z slowest, given as numbers: each
     * writer's block is its own. */
    char local[96], global[96], offsets[96];
    snprintf(local, sizeof local, "%llu,%llu,%llu", (unsigned long long)b->count[2], (unsigned long long)b->count[1],
             (unsigned long long)b->count[0]);
    snprintf(global, sizeof global, "%llu,%llu,%llu", (unsigned long long)o->global[2],
             (unsigned long long)o->global[1], (unsigned long long)o->global[0]);
    snprintf(offsets, sizeof offsets, "%llu,%llu,%llu", (unsigned long long)b->start[2],
             (unsigned long long)b->start[1], (unsigned long long)b->start[0]);
    for (int v = 0; v < NVARS; v++) {
        char name[16];
        snprintf(name, sizeof name, "var%d", v);
        CHECK(adios_define_var(group, name, "", adios_double, local, global, offsets) == 0, "adios_define_var");
    }

    MPI_Barrier(MPI_COMM_WORLD);
    double began = MPI_Wtime();
    int64_t fd;
    CHECK(adios_open(&fd, "restart", path, "w", MPI_COMM_WORLD) != 0, "adios_open");
    uint64_t total;
    CHECK(adios_group_size(fd, bytes, &total) != 0, "adios_group_size");
    for (int v = 0; v < NVARS; v++) {
        char name[16];
        snprintf(name, sizeof name, "var%d", v);
        CHECK(adios_write(fd, name, bufs[v]) != 0, "adios_write");
    }
    CHECK(adios_close(fd) != 0, "adios_close");
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    /* Every writer's data is in the file once all have closed. */
    MPI_Barrier(MPI_COMM_WORLD);
    sync_output(path, rank, PEER);
    double seconds = MPI_Wtime() - began;
    adios_finalize(rank);
    return seconds;
}

static double read_phase(const struct regions *re, double *bufs[NVARS], const char *path) {
    CHECK(adios_read_init_method(ADIOS_READ_METHOD_BP, MPI_COMM_WORLD, "") != 0, "adios_read_init_method");
    /* One bounding box per box of a variable's regions, into the
     * variable's buffer one after the other. */
    ADIOS_SELECTION *selections[NVARS][MAX_BOXES];
    uint64_t start[NVARS][MAX_BOXES][3], count[NVARS][MAX_BOXES][3];
    for (int v = 0; v < NVARS; v++)
        for (int i = 0; i < re->nboxes[v]; i++)
            for (int d = 0; d < 3; d++) {
                start[v][i][d] = re->boxes[v][i].start[2 - d];
                count[v][i][d] = re->boxes[v][i].count[2 - d];
            }

    MPI_Barrier(MPI_COMM_WORLD);
    double began = MPI_Wtime();
    ADIOS_FILE *file = adios_read_open_file(path, ADIOS_READ_METHOD_BP, MPI_COMM_WORLD);
    CHECK(file == NULL, "adios_read_open_file");
    for (int v = 0; v < NVARS; v++) {
        char name[16];
        snprintf(name, sizeof name, "var%d", v);
        double *at = bufs[v];
        for (int i = 0; i < re->nboxes[v]; i++) {
            selections[v][i] = adios_selection_boundingbox(3, start[v][i], count[v][i]);
            CHECK(selections[v][i] == NULL, "adios_selection_boundingbox");
            CHECK(adios_schedule_read(file, selections[v][i], name, 0, 1, at) != 0, "adios_schedule_read");
            at += box_points(&re->boxes[v][i]);
        }
    }
    CHECK(adios_perform_reads(file, 1) != 0, "adios_perform_reads");
    for (int v = 0; v < NVARS; v++)
        for (int i = 0; i < re->nboxes[v]; i++) adios_selection_delete(selections[v][i]);
    CHECK(adios_read_close(file) != 0, "adios_read_close");
    double seconds = MPI_Wtime() - began;
    adios_read_finalize_method(ADIOS_READ_METHOD_BP);
    return seconds;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    struct options o;
    parse_options(argc, argv, rank, &o);
    if (strcmp(o.transport, "MPI") != 0 && strcmp(o.transport, "POSIX") != 0)
        usage_exit(rank, argv[0], "--transport is MPI or POSIX");

    struct regions re;
    if (rank_regions(&o, ranks, rank, &re) != 0) {
        MPI_Finalize();
        return 2;
    }
    if (o.phase == PHASE_REGIONS) {
        int failed = write_regions_file(&o, &re, rank), any;
        MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        MPI_Finalize();
        return any == 0 ? 0 : 1;
    }
    double *bufs[NVARS];
    alloc_buffers(&re, bufs, rank, PEER);
    /* Making the values (write) and checking them (read) count in the
       clock, as they do for plfs's and the direct file's processes, which
       make and check theirs between their writes and reads. */
    double making = MPI_Wtime();
    if (o.phase == PHASE_WRITE) fill_regions(&o, &re, bufs);
    making = MPI_Wtime() - making;
    if (o.phase == PHASE_READ) back_free_memory(&o, rank, PEER);
    char path[4096];
    snprintf(path, sizeof path, "%s/restart.bp", o.dir);

    /* A writer has one box of every variable (its block of the grid). */
    double seconds =
        o.phase == PHASE_WRITE ? write_phase(&o, &re.boxes[0][0], bufs, path) : read_phase(&re, bufs, path);

    double checking = MPI_Wtime();
    uint64_t wrong = o.phase == PHASE_READ ? check_regions(&o, &re, bufs, rank, PEER) : 0;
    seconds += making + (MPI_Wtime() - checking);
    for (int v = 0; v < NVARS; v++) free(bufs[v]);
    uint64_t total_wrong = report(PEER, &o, ranks, rank, regions_points(&re) * sizeof(double), seconds, wrong);
    MPI_Finalize();
    return total_wrong == 0 ? 0 : 1;
}
