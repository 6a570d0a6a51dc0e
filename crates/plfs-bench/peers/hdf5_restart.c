/*
 * The parallel HDF5 restart peer: the canonical self-describing layout
 * (the seed calls it "netCDF"). One file, DIR/restart.h5, holding one
 * contiguous GZ x GY x GX dataset of doubles per variable (var0..var7);
 * each writer writes its block and each reader reads its regions as a
 * hyperslab (the union of its boxes, in one call per variable),
 * collectively, through the MPI-IO file driver. The data and the regions
 * are restart_common.h's.
 *
 * Run under mpirun (N ranks to write, M to read), e.g.
 *   mpirun.openmpi -np 4 hdf5_restart write --dir D --grid 64x64x64 --procs 1x2x2
 *   mpirun.openmpi -np 2 hdf5_restart read --dir D --grid 64x64x64 --procs 1x2x2 --decomp half --readers-grid 1x1x2
 */
#include <hdf5.h>

#include "restart_common.h"

#define PEER "hdf5"

/* Exits the whole job naming the call that failed (HDF5 has printed its
 * own error stack): a peer that cannot write or read its file has no
 * figure to give. CHECK_ID names the call that made a handle. */
#define CHECK_ID(id, call)                                                                 \
    do {                                                                                   \
        if ((id) < 0) {                                                                    \
            fprintf(stderr, PEER ": %s failed (%s:%d) on %s\n", call, __FILE__, __LINE__, path); \
            MPI_Abort(MPI_COMM_WORLD, 3);                                                  \
        }                                                                                  \
    } while (0)
#define CHECK(call) CHECK_ID(call, #call)

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    struct options o;
    parse_options(argc, argv, rank, &o);

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
    snprintf(path, sizeof path, "%s/restart.h5", o.dir);

    /* HDF5 dimensions are C order: z slowest. */
    hsize_t global[3] = {o.global[2], o.global[1], o.global[0]};

    MPI_Barrier(MPI_COMM_WORLD);
    double began = MPI_Wtime();
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    CHECK_ID(fapl, "H5Pcreate(H5P_FILE_ACCESS)");
    CHECK(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL));
    hid_t file = o.phase == PHASE_WRITE ? H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl)
                                        : H5Fopen(path, H5F_ACC_RDONLY, fapl);
    CHECK_ID(file, o.phase == PHASE_WRITE ? "H5Fcreate" : "H5Fopen");
    hid_t xfer = H5Pcreate(H5P_DATASET_XFER);
    CHECK_ID(xfer, "H5Pcreate(H5P_DATASET_XFER)");
    CHECK(H5Pset_dxpl_mpio(xfer, H5FD_MPIO_COLLECTIVE));
    /* Contiguous (no chunking), and no fill pass before the writers' own
     * data: the layout is the plain global array and nothing more. */
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    CHECK_ID(dcpl, "H5Pcreate(H5P_DATASET_CREATE)");
    CHECK(H5Pset_layout(dcpl, H5D_CONTIGUOUS));
    CHECK(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER));
    for (int v = 0; v < NVARS; v++) {
        char name[16];
        snprintf(name, sizeof name, "var%d", v);
        hid_t set;
        if (o.phase == PHASE_WRITE) {
            hid_t space = H5Screate_simple(3, global, NULL);
            CHECK_ID(space, "H5Screate_simple");
            set = H5Dcreate2(file, name, H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
            CHECK_ID(set, "H5Dcreate2");
            CHECK(H5Sclose(space));
        } else {
            set = H5Dopen2(file, name, H5P_DEFAULT);
            CHECK_ID(set, "H5Dopen2");
        }
        hid_t filespace = H5Dget_space(set);
        CHECK_ID(filespace, "H5Dget_space");
        /* The union of the variable's boxes, whose points HDF5 takes in
         * file order: the order they sit in the buffer. A rank with none
         * still joins the collective call, with empty selections. */
        hsize_t points = re.points[v] ? re.points[v] : 1;
        hid_t memspace = H5Screate_simple(1, &points, NULL);
        CHECK_ID(memspace, "H5Screate_simple");
        if (re.nboxes[v] == 0) {
            CHECK(H5Sselect_none(filespace));
            CHECK(H5Sselect_none(memspace));
        }
        for (int i = 0; i < re.nboxes[v]; i++) {
            const struct box *b = &re.boxes[v][i];
            hsize_t start[3] = {b->start[2], b->start[1], b->start[0]};
            hsize_t count[3] = {b->count[2], b->count[1], b->count[0]};
            CHECK(H5Sselect_hyperslab(filespace, i == 0 ? H5S_SELECT_SET : H5S_SELECT_OR, start, NULL, count, NULL));
        }
        if (o.phase == PHASE_WRITE) CHECK(H5Dwrite(set, H5T_NATIVE_DOUBLE, memspace, filespace, xfer, bufs[v]));
        else CHECK(H5Dread(set, H5T_NATIVE_DOUBLE, memspace, filespace, xfer, bufs[v]));
        CHECK(H5Sclose(memspace));
        CHECK(H5Sclose(filespace));
        CHECK(H5Dclose(set));
    }
    CHECK(H5Pclose(dcpl));
    CHECK(H5Pclose(xfer));
    CHECK(H5Fclose(file));
    CHECK(H5Pclose(fapl));
    /* H5Fclose is collective: the file is whole when it returns. */
    if (o.phase == PHASE_WRITE) sync_output(path, rank, PEER);
    double seconds = MPI_Wtime() - began;

    double checking = MPI_Wtime();
    uint64_t wrong = o.phase == PHASE_READ ? check_regions(&o, &re, bufs, rank, PEER) : 0;
    seconds += making + (MPI_Wtime() - checking);
    for (int v = 0; v < NVARS; v++) free(bufs[v]);
    uint64_t total_wrong = report(PEER, &o, ranks, rank, regions_points(&re) * sizeof(double), seconds, wrong);
    MPI_Finalize();
    return total_wrong == 0 ? 0 : 1;
}
