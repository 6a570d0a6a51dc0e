/*
 * plfs_mpi.h: collective opens for MPI programs.
 *
 * libplfs links no MPI library. This header wraps the caller's MPI_Comm in
 * a table of functions (struct plfs_comm_ops) made of MPI calls, compiled
 * into the caller's program by the caller's own mpicc; libplfs calls back
 * through the table. So one libplfs serves Open MPI and MPICH alike, and
 * the collectives go over whatever interconnect the program's MPI uses.
 *
 *   Plfs_fd *fd = NULL;
 *   plfs_error_t rc = plfs_open_collective(&fd, "/mnt/plfs/ckpt", O_RDONLY,
 *                                          rank, MPI_COMM_WORLD, "parallel");
 *
 * Every rank of comm must call plfs_open_collective with the same path,
 * flags and strategy. An error on any rank the open depends on (a missing
 * file found by rank 0, an index log a rank cannot read) is returned on
 * every rank; no rank is left waiting in a collective.
 */
#ifndef PLFS_MPI_H
#define PLFS_MPI_H

#include <stdint.h>
#include <stdlib.h>
#include <mpi.h>

#include "plfs.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when struct plfs_comm_ops changes; libplfs refuses others. */
#define PLFS_COMM_OPS_VERSION 1

/*
 * A communicator as libplfs sees it. Every function returns MPI_SUCCESS (0)
 * or an MPI error code; counts are bytes. context is passed back untouched.
 */
struct plfs_comm_ops {
    uint32_t version;     /* PLFS_COMM_OPS_VERSION */
    uint32_t struct_size; /* sizeof(struct plfs_comm_ops) */
    void *context;
    int (*rank)(void *context, int *rank);
    int (*size)(void *context, int *size);
    int (*barrier)(void *context);
    int (*bcast)(void *context, void *buf, int count, int root);
    /* Every rank sends count bytes; root receives size*count in rank order. */
    int (*gather)(void *context, const void *send, int count, void *recv, int root);
    int (*gatherv)(void *context, const void *send, int count, void *recv, const int *counts,
                   const int *displacements, int root);
    int (*allgather)(void *context, const void *send, int count, void *recv);
    int (*allgatherv)(void *context, const void *send, int count, void *recv, const int *counts,
                      const int *displacements);
    /* Like MPI_Comm_split; fills *out, which the caller releases. */
    int (*split)(void *context, int color, int key, struct plfs_comm_ops *out);
    /* Frees context (a split communicator); NULL when the caller owns it. */
    void (*release)(void *context);
};

/*
 * The Rust side. strategy is "naive", "broadcast", "parallel", "flatten",
 * "uniform_restart" or "auto" (broadcast for a file of few index logs,
 * else parallel: rank 0 decides and says so in its first message); NULL
 * means $PLFS_OPEN_STRATEGY, else "auto". Opens that
 * are not read-only need no exchange: each rank opens the file itself
 * (rank 0 first when O_CREAT, so the container is made once; a file it
 * creates gets mode 0644; on a small_file mount rank 0 publishes its create
 * first, so no other rank creates the file again). A non-NULL *fd is
 * reopened (a reference added) without communication, so ranks must agree
 * on it too. Files of file_per_proc and small_file mounts have no index:
 * every strategy opens them as plfs_open does, on each rank (a small_file
 * rank first drops its cached view of the directory).
 */
plfs_error_t plfs_open_collective_ops(Plfs_fd **fd, const char *path, int flags, pid_t pid,
                                      const struct plfs_comm_ops *comm, const char *strategy);

/*
 * Flatten on close. plfs_index_retain, called after a write open and
 * before the first write, makes this process keep the index records it
 * appends to path (up to index_buffer_mbs of the plfsrc). Once every rank
 * of comm has closed its writers, each calls plfs_flatten_close_ops
 * (closed: 1 when its own close succeeded): the ranks' records are
 * gathered to rank 0, which writes the global index without reading any
 * index log; when a rank kept nothing (no retain, past its budget, a
 * failed close) or all of them pass rank 0's index_buffer_mbs, rank 0
 * reads the index logs as plfs_flatten_index does. Every rank returns the
 * same result; *gathered (if not NULL) is 1 on the gather path.
 */
plfs_error_t plfs_index_retain(const char *path);
plfs_error_t plfs_flatten_close_ops(const char *path, const struct plfs_comm_ops *comm, int closed,
                                    int *gathered);

/* ---- The MPI side, compiled into the caller. ---- */

static inline MPI_Comm plfs_mpi_comm_(void *context) { return *(MPI_Comm *)context; }

static inline int plfs_mpi_rank_(void *context, int *rank) {
    return MPI_Comm_rank(plfs_mpi_comm_(context), rank);
}

static inline int plfs_mpi_size_(void *context, int *size) {
    return MPI_Comm_size(plfs_mpi_comm_(context), size);
}

static inline int plfs_mpi_barrier_(void *context) { return MPI_Barrier(plfs_mpi_comm_(context)); }

static inline int plfs_mpi_bcast_(void *context, void *buf, int count, int root) {
    return MPI_Bcast(buf, count, MPI_BYTE, root, plfs_mpi_comm_(context));
}

static inline int plfs_mpi_gather_(void *context, const void *send, int count, void *recv, int root) {
    return MPI_Gather(send, count, MPI_BYTE, recv, count, MPI_BYTE, root, plfs_mpi_comm_(context));
}

static inline int plfs_mpi_gatherv_(void *context, const void *send, int count, void *recv,
                                    const int *counts, const int *displacements, int root) {
    return MPI_Gatherv(send, count, MPI_BYTE, recv, counts, displacements, MPI_BYTE, root,
                       plfs_mpi_comm_(context));
}

static inline int plfs_mpi_allgather_(void *context, const void *send, int count, void *recv) {
    return MPI_Allgather(send, count, MPI_BYTE, recv, count, MPI_BYTE, plfs_mpi_comm_(context));
}

static inline int plfs_mpi_allgatherv_(void *context, const void *send, int count, void *recv,
                                       const int *counts, const int *displacements) {
    return MPI_Allgatherv(send, count, MPI_BYTE, recv, counts, displacements, MPI_BYTE,
                          plfs_mpi_comm_(context));
}

static inline void plfs_mpi_release_split_(void *context) {
    MPI_Comm_free((MPI_Comm *)context);
    free(context);
}

static inline int plfs_mpi_split_(void *context, int color, int key, struct plfs_comm_ops *out);

/* Fills ops for *comm, which must outlive every use of ops. */
static inline void plfs_mpi_comm_ops(MPI_Comm *comm, struct plfs_comm_ops *ops) {
    ops->version = PLFS_COMM_OPS_VERSION;
    ops->struct_size = (uint32_t)sizeof(struct plfs_comm_ops);
    ops->context = comm;
    ops->rank = plfs_mpi_rank_;
    ops->size = plfs_mpi_size_;
    ops->barrier = plfs_mpi_barrier_;
    ops->bcast = plfs_mpi_bcast_;
    ops->gather = plfs_mpi_gather_;
    ops->gatherv = plfs_mpi_gatherv_;
    ops->allgather = plfs_mpi_allgather_;
    ops->allgatherv = plfs_mpi_allgatherv_;
    ops->split = plfs_mpi_split_;
    ops->release = NULL;
}

static inline int plfs_mpi_split_(void *context, int color, int key, struct plfs_comm_ops *out) {
    MPI_Comm *child = (MPI_Comm *)malloc(sizeof *child);
    if (child == NULL) {
        return MPI_ERR_OTHER;
    }
    int rc = MPI_Comm_split(plfs_mpi_comm_(context), color, key, child);
    if (rc != MPI_SUCCESS) {
        free(child);
        return rc;
    }
    plfs_mpi_comm_ops(child, out);
    out->release = plfs_mpi_release_split_;
    return MPI_SUCCESS;
}

/* Opens path on every rank of comm, building the index once for all of
 * them with strategy (see plfs_open_collective_ops). */
static inline plfs_error_t plfs_open_collective(Plfs_fd **fd, const char *path, int flags, pid_t pid,
                                                MPI_Comm comm, const char *strategy) {
    struct plfs_comm_ops ops;
    MPI_Comm handle = comm;
    plfs_mpi_comm_ops(&handle, &ops);
    return plfs_open_collective_ops(fd, path, flags, pid, &ops, strategy);
}

#ifdef __cplusplus
}
#endif

#endif /* PLFS_MPI_H */
