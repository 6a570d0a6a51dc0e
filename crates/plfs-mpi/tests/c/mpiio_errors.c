/*
 * An unmodified MPI-IO program that expects opens and deletes to fail the
 * way the MPI standard says: through the error handler on MPI_FILE_NULL,
 * MPI_ERRORS_RETURN unless the program set another. It knows nothing of
 * plfs; libplfs_mpiio.so and libplfs_preload.so (LD_PRELOAD) put its files
 * on plfs.
 *
 *   mpiio_errors create       PATH MODE   every rank opens PATH with
 *                                         MPI_MODE_CREATE, umask so the
 *                                         file gets MODE (octal); success
 *   mpiio_errors open-rdonly  PATH CLASS  MPI_MODE_RDONLY
 *   mpiio_errors open-excl    PATH CLASS  MPI_MODE_CREATE|EXCL|WRONLY
 *   mpiio_errors open-create  PATH CLASS  MPI_MODE_CREATE|WRONLY
 *   mpiio_errors hints-differ PATH CLASS  MPI_MODE_CREATE|WRONLY, the last
 *                                         rank alone with plfs_flatten_close=1
 *   mpiio_errors delete       PATH CLASS  MPI_File_delete on every rank
 *   mpiio_errors user         PATH CLASS  MPI_MODE_RDONLY with a handler of
 *                                         ours on MPI_FILE_NULL: it must be
 *                                         called once with CLASS
 *   mpiio_errors fatal        PATH        MPI_ERRORS_ARE_FATAL on
 *                                         MPI_FILE_NULL, then a read-only
 *                                         open: must not return
 *
 * CLASS: no_such_file, file_exists, access, info_value. Every rank checks the error
 * class of the call's return; rank 0 prints "mpiio_errors: OK: ..." when
 * every rank got it, and the program exits 1 otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <mpi.h>

static int class_named(const char *name) {
    if (strcmp(name, "no_such_file") == 0) {
        return MPI_ERR_NO_SUCH_FILE;
    }
    if (strcmp(name, "file_exists") == 0) {
        return MPI_ERR_FILE_EXISTS;
    }
    if (strcmp(name, "access") == 0) {
        return MPI_ERR_ACCESS;
    }
    if (strcmp(name, "info_value") == 0) {
        return MPI_ERR_INFO_VALUE;
    }
    fprintf(stderr, "mpiio_errors: %s: not an error class this program knows\n", name);
    MPI_Abort(MPI_COMM_WORLD, 2);
    return MPI_ERR_UNKNOWN;
}

static int handler_calls = 0;
static int handler_class = MPI_SUCCESS;

static void count_error(MPI_File *fh, int *code, ...) {
    (void)fh;
    handler_calls++;
    MPI_Error_class(*code, &handler_class);
}

/* 1 when every rank's ok is 1; rank 0 says what each failing rank got. */
static int everyone(int ok, int rank, const char *what, int code) {
    char text[MPI_MAX_ERROR_STRING] = "";
    int length = 0;
    if (!ok) {
        MPI_Error_string(code, text, &length);
        fprintf(stderr, "mpiio_errors: rank %d: %s: got %d (%s)\n", rank, what, code, text);
    }
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, ranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (argc < 3) {
        fprintf(stderr, "usage: mpiio_errors create|open-rdonly|open-excl|open-create|hints-differ|delete|user|fatal PATH ...\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *mode = argv[1], *path = argv[2];
    MPI_File fh = MPI_FILE_NULL;
    int ok = 0;
    char what[256];
    snprintf(what, sizeof what, "%s %s", mode, path);

    if (strcmp(mode, "create") == 0 && argc == 4) {
        umask(~strtol(argv[3], NULL, 8) & 0777);
        int rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
        if (rc == MPI_SUCCESS) {
            rc = MPI_File_close(&fh);
        }
        ok = everyone(rc == MPI_SUCCESS, rank, what, rc);
    } else if (strcmp(mode, "fatal") == 0) {
        MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_ARE_FATAL);
        int rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
        printf("mpiio_errors: rank %d: survived MPI_ERRORS_ARE_FATAL (open returned %d)\n", rank, rc);
        ok = 0;
    } else if (argc == 4) {
        int expected = class_named(argv[3]);
        int rc = MPI_SUCCESS;
        if (strcmp(mode, "delete") == 0) {
            rc = MPI_File_delete(path, MPI_INFO_NULL);
        } else if (strcmp(mode, "user") == 0) {
            MPI_Errhandler handler;
            MPI_File_create_errhandler(count_error, &handler);
            MPI_File_set_errhandler(MPI_FILE_NULL, handler);
            MPI_Errhandler_free(&handler);
            rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
            MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_RETURN);
        } else if (strcmp(mode, "hints-differ") == 0) {
            /* The last rank alone asks for plfs_flatten_close. */
            MPI_Info info = MPI_INFO_NULL;
            if (rank == ranks - 1) {
                MPI_Info_create(&info);
                MPI_Info_set(info, "plfs_flatten_close", "1");
            }
            rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, info, &fh);
            if (info != MPI_INFO_NULL) {
                MPI_Info_free(&info);
            }
        } else {
            int amode = strcmp(mode, "open-rdonly") == 0   ? MPI_MODE_RDONLY
                        : strcmp(mode, "open-excl") == 0   ? MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_WRONLY
                        : strcmp(mode, "open-create") == 0 ? MPI_MODE_CREATE | MPI_MODE_WRONLY
                                                           : -1;
            if (amode == -1) {
                fprintf(stderr, "mpiio_errors: %s: unknown mode\n", mode);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
            rc = MPI_File_open(MPI_COMM_WORLD, path, amode, MPI_INFO_NULL, &fh);
        }
        int class = MPI_SUCCESS;
        MPI_Error_class(rc, &class);
        ok = class == expected;
        if (ok && strcmp(mode, "user") == 0 && (handler_calls != 1 || handler_class != expected)) {
            fprintf(stderr, "mpiio_errors: rank %d: our handler was called %d times (last with class %d)\n", rank,
                    handler_calls, handler_class);
            ok = 0;
        }
        if (rc == MPI_SUCCESS) {
            MPI_File_close(&fh);
        }
        ok = everyone(ok, rank, what, rc);
    } else {
        fprintf(stderr, "mpiio_errors: %s: wrong arguments\n", mode);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (ok && rank == 0) {
        printf("mpiio_errors: OK: %s on %d ranks\n", mode, ranks);
    }
    MPI_Finalize();
    return ok ? 0 : 1;
}
