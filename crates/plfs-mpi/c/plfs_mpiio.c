/*
 * libplfs_mpiio.so: MPI-IO on plfs for unmodified MPI programs, without
 * patching the MPI library (PLFS 2.5 shipped ad_plfs as ROMIO patches).
 *
 * A PMPI wrapper: it defines MPI_File_open/close/sync/set_size/delete and
 * calls the PMPI_ versions. The data itself flows through the MPI
 * library's own POSIX driver (ompio's fbtl posix, ROMIO's ad_ufs) into the
 * LD_PRELOAD interposer libplfs_preload.so, which routes calls on paths
 * under a plfs mount point to libplfs. What this library adds is what
 * ad_plfs added on top of plain POSIX:
 *
 *   - read-only opens: the collective index aggregation on the file's
 *     communicator (plfs_open_collective) BEFORE the MPI library opens the
 *     file, so the MPI library's own open (the next plain open of the file
 *     in this process) keeps the prepared index instead of every rank
 *     reading every index log. Strategy from the hints, as ad_plfs chose:
 *     plfs_uniform_restart=1 -> uniform_restart; else parallel unless
 *     plfs_disable_paropen=1; else broadcast unless
 *     plfs_disable_broadcast=1; else naive. Without any of these three
 *     hints: libplfs's default ($PLFS_OPEN_STRATEGY, else "auto":
 *     broadcast when the file has so few index logs that rank 0 reads
 *     them all sooner than the parallel read's six more rounds finish,
 *     else parallel).
 *   - creating opens: rank 0 creates the container, barrier, then the MPI
 *     library opens (no mkdir storm).
 *   - plfs_flatten_close=1 on a write open: each rank keeps the index
 *     records it writes (plfs_index_retain, up to index_buffer_mbs); after
 *     every rank has closed, plfs_flatten_close_ops gathers them to rank 0,
 *     which writes the global index without reading the index logs back
 *     (or reads them, as plfs_flatten_index does, when the records did not
 *     fit); a failure is a warning (readers then read the index logs).
 *   - ROMIO's data-sieving writes are turned off (romio_ds_write=disable),
 *     also when the program asked for them, as ad_plfs did.
 *   - MPI_File_delete of a plfs path: plfs_unlink when libplfs has it,
 *     else unlink(2) (which the interposer routes).
 *
 * Hints must agree on every rank of the communicator (ad_plfs aborted);
 * here every rank returns MPI_ERR_INFO_VALUE and rank 0 says why.
 *
 * libplfs.so is loaded with dlopen (this library is built before it and
 * links no Rust): $PLFS_LIBPLFS, else <this library's directory>/libplfs.so,
 * else <this library's directory>/../../libplfs.so (the layout of both
 * target/release/mpi/<mpi>/ and $PREFIX/lib/plfs-mpi/<mpi>/), else
 * "libplfs.so" from the loader's search path. The interposer loads the same
 * file, and the dynamic loader maps one file once, so both share one
 * libplfs (one mount table, one open-file registry: that sharing is what
 * lets the MPI library's open keep the collective index).
 *
 * Opens and deletes that fail report through the error handler on
 * MPI_FILE_NULL, as the MPI library's own do (file_null_error).
 *
 * PLFS_MPIIO_VERBOSE=1 prints one line per intercepted plfs open, close
 * and delete to stderr, failed ones too; without it an expected miss (a
 * missing file, a refused permission) prints nothing.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mpi.h>

#include "plfs_mpi.h"

/* ---- libplfs, loaded at run time ---- */

struct libplfs {
    int loaded; /* 1: the functions below are set; -1: loading failed */
    int (*is_plfs_path)(const char *path);
    plfs_error_t (*open)(Plfs_fd **fd, const char *path, int flags, pid_t pid, mode_t mode,
                         Plfs_open_opt *opt);
    plfs_error_t (*close)(Plfs_fd *fd, pid_t pid, uid_t uid, int open_flags, Plfs_close_opt *opt,
                          int *num_ref);
    plfs_error_t (*flatten_index)(Plfs_fd *fd, const char *path);
    plfs_error_t (*open_collective_ops)(Plfs_fd **fd, const char *path, int flags, pid_t pid,
                                        const struct plfs_comm_ops *comm, const char *strategy);
    int (*error_to_errno)(plfs_error_t error);
    const char *(*strerror)(plfs_error_t error);
    plfs_error_t (*unlink)(const char *path); /* optional */
    /* optional: without them, rank 0 flattens from the index logs */
    plfs_error_t (*index_retain)(const char *path);
    plfs_error_t (*flatten_close_ops)(const char *path, const struct plfs_comm_ops *comm, int closed,
                                      int *gathered);
};

static struct libplfs plfs;
static pthread_once_t plfs_once = PTHREAD_ONCE_INIT;
static char plfs_load_error[PATH_MAX + 256];

static int verbose(void) {
    const char *value = getenv("PLFS_MPIIO_VERBOSE");
    return value != NULL && value[0] != '\0' && strcmp(value, "0") != 0;
}

static void *try_dlopen(const char *path) {
    void *handle = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (handle == NULL) {
        snprintf(plfs_load_error, sizeof plfs_load_error, "%s", dlerror());
    }
    return handle;
}

static void *open_libplfs(void) {
    const char *explicit_path = getenv("PLFS_LIBPLFS");
    if (explicit_path != NULL && explicit_path[0] != '\0') {
        return try_dlopen(explicit_path);
    }
    Dl_info info;
    if (dladdr((void *)open_libplfs, &info) != 0 && info.dli_fname != NULL) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", info.dli_fname);
        char *slash = strrchr(dir, '/');
        if (slash != NULL) {
            *slash = '\0';
            const char *relative[] = {"/libplfs.so", "/../../libplfs.so"};
            for (size_t i = 0; i < sizeof relative / sizeof relative[0]; i++) {
                char candidate[PATH_MAX + 32];
                snprintf(candidate, sizeof candidate, "%s%s", dir, relative[i]);
                if (access(candidate, R_OK) == 0) {
                    return try_dlopen(candidate);
                }
            }
        }
    }
    return try_dlopen("libplfs.so");
}

#define PLFS_SYMBOL(field, name)                                                                  \
    do {                                                                                          \
        *(void **)(&plfs.field) = dlsym(handle, name);                                            \
        if (plfs.field == NULL) {                                                                 \
            snprintf(plfs_load_error, sizeof plfs_load_error, "libplfs.so lacks %s", name);       \
            plfs.loaded = -1;                                                                     \
            return;                                                                               \
        }                                                                                         \
    } while (0)

static void load_libplfs(void) {
    void *handle = open_libplfs();
    if (handle == NULL) {
        plfs.loaded = -1;
        return;
    }
    PLFS_SYMBOL(is_plfs_path, "is_plfs_path");
    PLFS_SYMBOL(open, "plfs_open");
    PLFS_SYMBOL(close, "plfs_close");
    PLFS_SYMBOL(flatten_index, "plfs_flatten_index");
    PLFS_SYMBOL(open_collective_ops, "plfs_open_collective_ops");
    PLFS_SYMBOL(error_to_errno, "plfs_error_to_errno");
    PLFS_SYMBOL(strerror, "strplfserr");
    *(void **)(&plfs.unlink) = dlsym(handle, "plfs_unlink");
    *(void **)(&plfs.index_retain) = dlsym(handle, "plfs_index_retain");
    *(void **)(&plfs.flatten_close_ops) = dlsym(handle, "plfs_flatten_close_ops");
    plfs.loaded = 1;
}

/* 1: libplfs is usable. Without it no path is a plfs path: a program that
 * is not using plfs must keep working, so this only warns (once). */
static int have_libplfs(void) {
    pthread_once(&plfs_once, load_libplfs);
    if (plfs.loaded != 1) {
        static int warned = 0;
        if (!warned) {
            warned = 1;
            fprintf(stderr, "plfs_mpiio: libplfs not loaded (%s); MPI-IO passes through untouched\n",
                    plfs_load_error);
        }
        return 0;
    }
    return 1;
}

/* The path MPI should see: an optional "plfs:" prefix (ad_plfs's) removed. */
static const char *strip_prefix(const char *filename) {
    if (filename != NULL && strncmp(filename, "plfs:", 5) == 0) {
        return filename + 5;
    }
    return filename;
}

static int is_plfs(const char *path) {
    return path != NULL && have_libplfs() && plfs.is_plfs_path(path) == 1;
}

/* Through the interposer, this process writes as its MPI_COMM_WORLD rank,
 * as PLFS 2.5's MPI-IO driver passed the rank as the pid: writer ids then
 * name ranks in `plfs map`, and plfs_uniform_restart finds each rank's logs.
 * Without the interposer (or an older one) writers stay pids. */
static void name_writer(void) {
    static int named = 0;
    if (named) {
        return;
    }
    named = 1;
    void (*set_writer)(long) = NULL;
    *(void **)(&set_writer) = dlsym(RTLD_DEFAULT, "plfs_preload_set_writer");
    int world_rank = 0;
    if (set_writer != NULL && MPI_Comm_rank(MPI_COMM_WORLD, &world_rank) == MPI_SUCCESS) {
        set_writer(world_rank);
    }
}

/* ROMIO's classes for the same errnos (ADIOI_Err_create_code). */
static int mpi_error_of_errno(int error) {
    switch (error) {
    case ENOENT:
    case ENOTDIR:
        return MPI_ERR_NO_SUCH_FILE;
    case EEXIST:
        return MPI_ERR_FILE_EXISTS;
    case EACCES:
    case EPERM:
        return MPI_ERR_ACCESS;
    case ENOSPC:
        return MPI_ERR_NO_SPACE;
    case EDQUOT:
        return MPI_ERR_QUOTA;
    case EROFS:
        return MPI_ERR_READ_ONLY;
    case EINVAL:
    case EISDIR:
    case ENAMETOOLONG:
        return MPI_ERR_BAD_FILE;
    default:
        return MPI_ERR_IO;
    }
}

static int mpi_error_of(plfs_error_t error) { return mpi_error_of_errno(plfs.error_to_errno(error)); }

/* ---- hints ---- */

/* HINT_STRATEGY_GIVEN is no hint of its own (read_hints sets it): it
 * travels with the others so that hints_agree checks it too. */
enum {
    HINT_DISABLE_BROADCAST,
    HINT_DISABLE_PAROPEN,
    HINT_UNIFORM_RESTART,
    HINT_FLATTEN_CLOSE,
    HINT_STRATEGY_GIVEN,
    HINTS
};

static const char *const hint_names[HINTS] = {"plfs_disable_broadcast", "plfs_disable_paropen",
                                              "plfs_uniform_restart", "plfs_flatten_close",
                                              "presence of plfs_disable_broadcast, plfs_disable_paropen or plfs_uniform_restart"};

/* atoi of each hint (0 when absent), as ad_plfs_hints read them;
 * hints[HINT_STRATEGY_GIVEN] is 1 when any of the strategy hints is
 * present (even as 0), so that ranks agree on it too. */
static void read_hints(MPI_Info info, int hints[HINTS]) {
    for (int i = 0; i < HINTS; i++) {
        hints[i] = 0;
    }
    for (int i = 0; i < HINT_STRATEGY_GIVEN; i++) {
        if (info == MPI_INFO_NULL) {
            continue;
        }
        char value[MPI_MAX_INFO_VAL + 1];
        int flag = 0;
        if (MPI_Info_get(info, hint_names[i], MPI_MAX_INFO_VAL, value, &flag) == MPI_SUCCESS && flag) {
            if (i != HINT_FLATTEN_CLOSE) {
                hints[HINT_STRATEGY_GIVEN] = 1;
            }
            hints[i] = atoi(value);
            if (hints[i] < -INT_MAX) {
                hints[i] = -INT_MAX; /* so hints_agree can negate it */
            }
        }
    }
}

/* MPI_SUCCESS when every rank of comm passed the same hints; otherwise
 * MPI_ERR_INFO_VALUE on every rank, and rank 0 names the hint. One
 * MPI_Allreduce finds both bounds (the minimum of each hint and of its
 * negation): every collective round of an open is a wait for the slowest
 * rank, and with more ranks than free cores an MPI that busy-polls (MPICH)
 * took about 30 ms a round here. */
static int hints_agree(MPI_Comm comm, const int hints[HINTS], const char *path) {
    int mine[2 * HINTS], bounds[2 * HINTS], low[HINTS], high[HINTS];
    for (int i = 0; i < HINTS; i++) {
        mine[i] = hints[i];
        mine[HINTS + i] = -hints[i]; /* read_hints keeps INT_MIN out */
    }
    int rc = MPI_Allreduce(mine, bounds, 2 * HINTS, MPI_INT, MPI_MIN, comm);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    for (int i = 0; i < HINTS; i++) {
        low[i] = bounds[i];
        high[i] = -bounds[HINTS + i];
    }
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    for (int i = 0; i < HINTS; i++) {
        if (low[i] != high[i]) {
            if (rank == 0) {
                fprintf(stderr,
                        "plfs_mpiio: %s: hint %s differs between ranks (from %d to %d); every rank "
                        "must pass the same plfs hints\n",
                        path, hint_names[i], low[i], high[i]);
            }
            return MPI_ERR_INFO_VALUE;
        }
    }
    return MPI_SUCCESS;
}

/* ad_plfs's order of precedence for read-only opens, when the program
 * passed a strategy hint; NULL (libplfs's default) when it passed none. */
static const char *strategy_of(const int hints[HINTS]) {
    if (!hints[HINT_STRATEGY_GIVEN]) {
        return NULL;
    }
    if (hints[HINT_UNIFORM_RESTART]) {
        return "uniform_restart";
    }
    if (!hints[HINT_DISABLE_PAROPEN]) {
        return "parallel";
    }
    if (!hints[HINT_DISABLE_BROADCAST]) {
        return "broadcast";
    }
    return "naive";
}

/* ROMIO's data-sieving writes read, modify and rewrite whole blocks that
 * other ranks are writing too (under fcntl locks, which plfs does not
 * give): on plfs that rewrites their bytes as this writer's. ad_plfs
 * declared data-sieving writes unsupported, so a program asking for them
 * (romio_ds_write=enable) still got none, and 2.5's regression test
 * (data-sieving) checks exactly that; here the hint is always set to
 * disable, whatever the program passed. ompio ignores the hint. Returns a
 * new info to free, or MPI_INFO_NULL when none could be made. */
static MPI_Info with_driver_hints(MPI_Info info, const char *path) {
    MPI_Info copy = MPI_INFO_NULL;
    if (info != MPI_INFO_NULL) {
        char value[MPI_MAX_INFO_VAL + 1];
        int flag = 0;
        if (MPI_Info_get(info, "romio_ds_write", MPI_MAX_INFO_VAL, value, &flag) == MPI_SUCCESS && flag &&
            strcmp(value, "disable") != 0 && verbose()) {
            fprintf(stderr, "plfs_mpiio: %s: romio_ds_write=%s ignored: data-sieving writes are off on plfs\n",
                    path, value);
        }
        if (MPI_Info_dup(info, &copy) != MPI_SUCCESS) {
            return MPI_INFO_NULL;
        }
    } else if (MPI_Info_create(&copy) != MPI_SUCCESS) {
        return MPI_INFO_NULL;
    }
    MPI_Info_set(copy, "romio_ds_write", "disable");
    return copy;
}

/* ---- the files this library opened on plfs ---- */

struct plfs_file {
    MPI_File handle;
    MPI_Comm comm; /* a duplicate for flatten on close, freed at close; else MPI_COMM_NULL */
    int rank;      /* in the file's communicator */
    char *path;    /* without the prefix */
    Plfs_fd *index_fd; /* the collective read open, held until close */
    int flatten_on_close;
    struct plfs_file *next;
};

static struct plfs_file *files = NULL;
static pthread_mutex_t files_lock = PTHREAD_MUTEX_INITIALIZER;

static void remember(struct plfs_file *file) {
    pthread_mutex_lock(&files_lock);
    file->next = files;
    files = file;
    pthread_mutex_unlock(&files_lock);
}

static struct plfs_file *forget(MPI_File handle) {
    pthread_mutex_lock(&files_lock);
    struct plfs_file **link = &files;
    while (*link != NULL && (*link)->handle != handle) {
        link = &(*link)->next;
    }
    struct plfs_file *found = *link;
    if (found != NULL) {
        *link = found->next;
    }
    pthread_mutex_unlock(&files_lock);
    return found;
}

static void free_file(struct plfs_file *file) {
    if (file->comm != MPI_COMM_NULL) {
        MPI_Comm_free(&file->comm);
    }
    free(file->path);
    free(file);
}

/* An open or delete that failed before there is a file handle reports
 * through the error handler on MPI_FILE_NULL (MPI_ERRORS_RETURN unless the
 * program set another), as the MPI library's own open and delete do. The
 * direct way, MPI_File_call_errhandler(MPI_FILE_NULL, code), is refused by
 * Open MPI 4.1 with parameter checking on (its default): it raises
 * MPI_ERR_ARG on MPI_COMM_WORLD, whose handler is fatal, so an ordinary
 * miss (a read-only open to see whether a file exists) killed the job. So
 * the handler is looked up and applied here. Returns code. */
static int file_null_error(MPI_Comm comm, const char *call, const char *path, int code) {
    MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
    if (MPI_File_get_errhandler(MPI_FILE_NULL, &handler) != MPI_SUCCESS || handler == MPI_ERRORS_RETURN) {
        if (handler != MPI_ERRHANDLER_NULL) {
            MPI_Errhandler_free(&handler);
        }
        return code;
    }
    MPI_Comm abort_comm = MPI_COMM_NULL;
    if (handler == MPI_ERRORS_ARE_FATAL) {
        abort_comm = MPI_COMM_WORLD;
    }
#ifdef MPI_ERRORS_ABORT
    if (handler == MPI_ERRORS_ABORT) {
        abort_comm = comm; /* MPI 4: only the processes of the call */
    }
#else
    (void)comm;
#endif
    if (abort_comm != MPI_COMM_NULL) {
        char text[MPI_MAX_ERROR_STRING];
        int length = 0;
        if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) {
            snprintf(text, sizeof text, "MPI error %d", code);
        }
        fprintf(stderr, "plfs_mpiio: %s %s: %s (the error handler of MPI_FILE_NULL is fatal: aborting)\n", call,
                path, text);
        MPI_Abort(abort_comm, code);
    }
#ifdef OPEN_MPI
    /* A handler the program wrote: Open MPI can only call it through a
     * real file handle, so a scratch one (/dev/null, this rank alone)
     * carries it; the handler sees that handle instead of MPI_FILE_NULL. */
    MPI_File scratch = MPI_FILE_NULL;
    if (PMPI_File_open(MPI_COMM_SELF, "/dev/null", MPI_MODE_RDONLY, MPI_INFO_NULL, &scratch) == MPI_SUCCESS) {
        MPI_File_set_errhandler(scratch, handler);
        MPI_File_call_errhandler(scratch, code);
        PMPI_File_close(&scratch);
    }
#else
    MPI_File_call_errhandler(MPI_FILE_NULL, code);
#endif
    MPI_Errhandler_free(&handler);
    return code;
}

/* ---- the wrappers ---- */

/* Rank 0 creates the container (plfs_open O_CREAT, then close) before the
 * others look for it. The outcome is broadcast: every rank returns the
 * same result. */
static int create_first(MPI_Comm comm, const char *path, int rank) {
    int code = MPI_SUCCESS;
    if (rank == 0) {
        mode_t mask = umask(0);
        umask(mask);
        Plfs_fd *fd = NULL;
        plfs_error_t rc = plfs.open(&fd, path, O_WRONLY | O_CREAT, getpid(), 0666 & ~mask, NULL);
        if (rc == PLFS_SUCCESS) {
            rc = plfs.close(fd, getpid(), getuid(), O_WRONLY | O_CREAT, NULL, NULL);
        }
        if (rc != PLFS_SUCCESS) {
            if (verbose()) {
                fprintf(stderr, "plfs_mpiio: creating %s: %s\n", path, plfs.strerror(rc));
            }
            code = mpi_error_of(rc);
        }
    }
    int rc = MPI_Bcast(&code, 1, MPI_INT, 0, comm);
    return rc == MPI_SUCCESS ? code : rc;
}

int MPI_File_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh) {
    const char *path = strip_prefix(filename);
    if (!is_plfs(path)) {
        return PMPI_File_open(comm, path, amode, info, fh);
    }
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    name_writer();
    int hints[HINTS];
    read_hints(info, hints);
    int code = hints_agree(comm, hints, path);
    if (code != MPI_SUCCESS) {
        return file_null_error(comm, "MPI_File_open", path, code);
    }

    struct plfs_file *file = calloc(1, sizeof *file);
    if (file == NULL) {
        return file_null_error(comm, "MPI_File_open", path, MPI_ERR_NO_MEM);
    }
    file->comm = MPI_COMM_NULL;
    file->rank = rank;
    file->path = strdup(path);
    /* Only flatten on close talks after the open returns, so only it
     * needs a communicator of its own: MPI_Comm_dup is a collective round
     * too, and with more ranks than free cores every round waits until
     * each rank has been scheduled. The exchanges inside this call run on
     * the caller's comm: every rank is in this collective call, so they
     * run in the same order on every rank, and MPI keeps collective
     * traffic apart from the program's point-to-point messages. */
    int flatten_on_close = !(amode & MPI_MODE_RDONLY) && hints[HINT_FLATTEN_CLOSE] != 0;
    if (file->path == NULL || (flatten_on_close && MPI_Comm_dup(comm, &file->comm) != MPI_SUCCESS)) {
        free_file(file);
        return file_null_error(comm, "MPI_File_open", path, MPI_ERR_NO_MEM);
    }

    if (amode & MPI_MODE_RDONLY) {
        const char *strategy = strategy_of(hints);
        struct plfs_comm_ops ops;
        MPI_Comm open_comm = comm;
        plfs_mpi_comm_ops(&open_comm, &ops);
        plfs_error_t rc = plfs.open_collective_ops(&file->index_fd, path, O_RDONLY, getpid(), &ops, strategy);
        if (verbose()) {
            /* Without a hint: what libplfs's default will be. */
            const char *chosen = strategy != NULL ? strategy : getenv("PLFS_OPEN_STRATEGY");
            fprintf(stderr, "plfs_mpiio: rank %d: collective open of %s (%s): %s\n", rank, path,
                    chosen != NULL && chosen[0] != '\0' ? chosen : "auto", plfs.strerror(rc));
        }
        if (rc != PLFS_SUCCESS) {
            /* The same error on every rank (plfs_open_collective's
             * promise); the verbose line above already said which. */
            free_file(file);
            return file_null_error(comm, "MPI_File_open", path, mpi_error_of(rc));
        }
    } else {
        file->flatten_on_close = flatten_on_close;
        /* With MPI_MODE_EXCL the MPI library must be the one to create. */
        if ((amode & MPI_MODE_CREATE) && !(amode & MPI_MODE_EXCL)) {
            code = create_first(comm, path, rank);
            if (verbose()) {
                fprintf(stderr, "plfs_mpiio: rank %d: rank 0 created %s: %d\n", rank, path, code);
            }
            if (code != MPI_SUCCESS) {
                free_file(file);
                return file_null_error(comm, "MPI_File_open", path, code);
            }
        }
    }

    MPI_Info driver_info = with_driver_hints(info, path);
    code = PMPI_File_open(comm, path, amode, driver_info == MPI_INFO_NULL ? info : driver_info, fh);
    if (driver_info != MPI_INFO_NULL) {
        MPI_Info_free(&driver_info);
    }
    if (code != MPI_SUCCESS) {
        if (file->index_fd != NULL) {
            plfs.close(file->index_fd, getpid(), getuid(), O_RDONLY, NULL, NULL);
        }
        free_file(file);
        return code;
    }
    if (file->flatten_on_close && plfs.index_retain != NULL && plfs.flatten_close_ops != NULL) {
        /* Before any write (the MPI library's open made no logs yet): a
         * failure only means rank 0 reads the index logs at close. */
        plfs_error_t rc = plfs.index_retain(path);
        if (rc != PLFS_SUCCESS) {
            fprintf(stderr, "plfs_mpiio: rank %d: keeping the index records of %s: %s\n", rank, path,
                    plfs.strerror(rc));
        }
    }
    file->handle = *fh;
    remember(file);
    return MPI_SUCCESS;
}

int MPI_File_close(MPI_File *fh) {
    struct plfs_file *file = forget(*fh);
    int code = PMPI_File_close(fh);
    if (file == NULL) {
        return code;
    }
    if (file->index_fd != NULL) {
        plfs.close(file->index_fd, getpid(), getuid(), O_RDONLY, NULL, NULL);
    }
    if (file->flatten_on_close && plfs.flatten_close_ops != NULL) {
        /* Collective: its first exchange is where every rank's writers are
         * closed; its last keeps every rank here until rank 0 has
         * published the index. */
        int rank = file->rank;
        struct plfs_comm_ops ops;
        plfs_mpi_comm_ops(&file->comm, &ops);
        int gathered = 0;
        plfs_error_t rc = plfs.flatten_close_ops(file->path, &ops, code == MPI_SUCCESS, &gathered);
        if (rank == 0 && (verbose() || rc != PLFS_SUCCESS)) {
            fprintf(stderr, "plfs_mpiio: flattening the index of %s (%s): %s%s\n", file->path,
                    gathered ? "gathered from the ranks" : "read from the index logs", plfs.strerror(rc),
                    rc == PLFS_SUCCESS ? "" : " (readers will read the index logs)");
        }
    } else if (file->flatten_on_close) {
        /* Every rank's writers are closed once all ranks reach here. */
        int rank = file->rank;
        MPI_Barrier(file->comm);
        if (rank == 0 && code == MPI_SUCCESS) {
            Plfs_fd *fd = NULL;
            plfs_error_t rc = plfs.open(&fd, file->path, O_RDONLY, getpid(), 0, NULL);
            if (rc == PLFS_SUCCESS) {
                rc = plfs.flatten_index(fd, file->path);
                plfs_error_t closed = plfs.close(fd, getpid(), getuid(), O_RDONLY, NULL, NULL);
                if (rc == PLFS_SUCCESS) {
                    rc = closed;
                }
            }
            /* The file is written and closed either way: a global index
             * that is not there only means readers read the index logs,
             * so a failed flatten is a warning, not an MPI error. */
            if (verbose() || rc != PLFS_SUCCESS) {
                fprintf(stderr, "plfs_mpiio: flattening the index of %s: %s%s\n", file->path, plfs.strerror(rc),
                        rc == PLFS_SUCCESS ? "" : " (readers will read the index logs)");
            }
        }
        /* Nobody reopens the file before rank 0 has flattened. */
        MPI_Barrier(file->comm);
    }
    if (verbose()) {
        fprintf(stderr, "plfs_mpiio: rank %d: closed %s: %d\n", file->rank, file->path, code);
    }
    free_file(file);
    return code;
}

/* The MPI library's fsync reaches plfs through the interposer. */
int MPI_File_sync(MPI_File fh) { return PMPI_File_sync(fh); }

/* The MPI library's ftruncate reaches plfs through the interposer. */
int MPI_File_set_size(MPI_File fh, MPI_Offset size) { return PMPI_File_set_size(fh, size); }

int MPI_File_delete(const char *filename, MPI_Info info) {
    const char *path = strip_prefix(filename);
    if (!is_plfs(path)) {
        return PMPI_File_delete(path, info);
    }
    int code = MPI_SUCCESS;
    if (plfs.unlink != NULL) {
        plfs_error_t rc = plfs.unlink(path);
        if (rc != PLFS_SUCCESS) {
            code = mpi_error_of(rc);
        }
    } else if (unlink(path) != 0) {
        /* No plfs_unlink in this libplfs: the interposer routes unlink. */
        code = mpi_error_of_errno(errno);
    }
    if (verbose()) {
        fprintf(stderr, "plfs_mpiio: deleted %s: %d\n", path, code);
    }
    if (code != MPI_SUCCESS) {
        return file_null_error(MPI_COMM_SELF, "MPI_File_delete", path, code);
    }
    return code;
}
