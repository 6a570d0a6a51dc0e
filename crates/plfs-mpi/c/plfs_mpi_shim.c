/*
 * The MPI shim of the plfs command: the few MPI calls the Rust binary
 * needs (start, stop, the world communicator as a struct plfs_comm_ops),
 * built once per MPI by build.rs and loaded at run time, so the binary
 * itself links no MPI and picks the MPI of the mpirun that started it.
 */
#include <stdint.h>
#include <string.h>

#include "plfs_mpi.h"

static MPI_Comm plfs_shim_world;
static int plfs_shim_started_mpi;
static char plfs_shim_version[MPI_MAX_LIBRARY_VERSION_STRING];

uint32_t plfs_mpi_shim_abi(void) { return PLFS_COMM_OPS_VERSION; }

/* Starts MPI unless the program already has, and describes the world. */
int plfs_mpi_shim_init(struct plfs_comm_ops *world) {
    int initialized = 0;
    int rc = MPI_Initialized(&initialized);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    if (!initialized) {
        rc = MPI_Init(NULL, NULL);
        if (rc != MPI_SUCCESS) {
            return rc;
        }
        plfs_shim_started_mpi = 1;
    }
    plfs_shim_world = MPI_COMM_WORLD;
    plfs_mpi_comm_ops(&plfs_shim_world, world);
    return MPI_SUCCESS;
}

/* Stops MPI if this shim started it. */
int plfs_mpi_shim_finalize(void) {
    int finalized = 0;
    if (!plfs_shim_started_mpi || MPI_Finalized(&finalized) != MPI_SUCCESS || finalized) {
        return MPI_SUCCESS;
    }
    return MPI_Finalize();
}

/* The MPI library's own description (first line), for reports. */
const char *plfs_mpi_shim_library(void) {
    int length = 0;
    if (MPI_Get_library_version(plfs_shim_version, &length) != MPI_SUCCESS) {
        return "unknown MPI";
    }
    char *newline = strchr(plfs_shim_version, '\n');
    if (newline != NULL) {
        *newline = '\0';
    }
    return plfs_shim_version;
}

/* Ends every rank at once (a rank that cannot go on must not leave the
 * others waiting in a collective). */
void plfs_mpi_shim_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }
