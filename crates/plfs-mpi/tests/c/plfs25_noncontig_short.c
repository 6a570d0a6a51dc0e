/*
 * PLFS 2.5's regression program noncontig_short (ROMIO's noncontig test cut
 * to independent I/O), rewritten from what it checks: on two ranks, each
 * writes with MPI_File_write_at one instance of a type that is
 * noncontiguous in memory (every other int of a 20-int buffer, rank 0 the
 * even ones, rank 1 the odd ones) and contiguous in the file (rank r's ten
 * ints at r * 10 ints), with small independent buffer hints; after a close
 * and a reopen, each reads its half back into a buffer of -1s with the same
 * type, and the ints the type skips must still be -1. Rank 0 first deletes
 * the file, which need not exist (its error is returned, not fatal).
 * 2.5 built the type with MPI_LB/MPI_UB markers, removed in MPI 3; here
 * MPI_Type_create_resized gives the same 20-int extent. Where 2.5 only
 * printed "Found N errors", this program exits 1.
 *
 * usage: mpirun -np 2 plfs25_noncontig_short <file>   (rank 0 prints
 *        "plfs25_noncontig_short: OK" when both ranks passed)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define INTS 20

static void check(int code, const char *what, int rank)
{
    if (code != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING];
        int length = 0;
        MPI_Error_string(code, text, &length);
        fprintf(stderr, "plfs25_noncontig_short: rank %d: %s: %s\n", rank, what, text);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

int main(int argc, char **argv)
{
    int rank, ranks, i, errors = 0, all_errors = 0, counted = 0;
    int buffer[INTS];
    MPI_Datatype every_other, shifted, placed;
    MPI_Aint displacement;
    MPI_Offset at;
    MPI_Info info;
    MPI_File fh;
    MPI_Status status;
    const char *file;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (ranks != 2 || argc != 2) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -np 2 %s <file>\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    file = argv[1];
    /* The file handle's own errors come back as codes (the default for
     * files), so each call below is checked. */

    /* Ten ints, one every two, starting `rank` ints in, spanning 20 ints. */
    MPI_Type_vector(INTS / 2, 1, 2, MPI_INT, &every_other);
    displacement = (MPI_Aint)(rank * sizeof(int));
    {
        int one = 1;
        MPI_Type_create_struct(1, &one, &displacement, &every_other, &shifted);
    }
    MPI_Type_create_resized(shifted, 0, (MPI_Aint)(INTS * sizeof(int)), &placed);
    MPI_Type_commit(&placed);
    MPI_Type_free(&shifted);
    MPI_Type_free(&every_other);

    MPI_Info_create(&info);
    MPI_Info_set(info, "ind_rd_buffer_size", "1209");
    MPI_Info_set(info, "ind_wr_buffer_size", "1107");

    if (rank == 0) {
        int code = MPI_File_delete(file, MPI_INFO_NULL);
        int class_ = MPI_SUCCESS;
        MPI_Error_class(code, &class_);
        if (class_ != MPI_SUCCESS && class_ != MPI_ERR_NO_SUCH_FILE)
            check(code, "MPI_File_delete", rank);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    at = (MPI_Offset)rank * (INTS / 2) * (MPI_Offset)sizeof(int);
    check(MPI_File_open(MPI_COMM_WORLD, file, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh), "open", rank);
    for (i = 0; i < INTS; i++)
        buffer[i] = i + rank * INTS;
    check(MPI_File_write_at(fh, at, buffer, 1, placed, &status), "MPI_File_write_at", rank);
    MPI_Get_count(&status, placed, &counted);
    if (counted != 1) {
        fprintf(stderr, "plfs25_noncontig_short: rank %d: wrote %d instances, not 1\n", rank, counted);
        errors++;
    }
    check(MPI_File_close(&fh), "close", rank);
    MPI_Barrier(MPI_COMM_WORLD);

    check(MPI_File_open(MPI_COMM_WORLD, file, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh), "reopen", rank);
    for (i = 0; i < INTS; i++)
        buffer[i] = -1;
    check(MPI_File_read_at(fh, at, buffer, 1, placed, &status), "MPI_File_read_at", rank);
    for (i = 0; i < INTS; i++) {
        int expected = i % 2 == rank ? i + rank * INTS : -1;
        if (buffer[i] != expected) {
            fprintf(stderr, "plfs25_noncontig_short: rank %d: int %d is %d, should be %d\n", rank, i, buffer[i],
                    expected);
            errors++;
        }
    }
    check(MPI_File_close(&fh), "close", rank);

    MPI_Allreduce(&errors, &all_errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        if (all_errors > 0)
            fprintf(stderr, "plfs25_noncontig_short: FAILED: %d errors\n", all_errors);
        else
            printf("plfs25_noncontig_short: OK\n");
    }
    MPI_Type_free(&placed);
    MPI_Info_free(&info);
    MPI_Finalize();
    return all_errors > 0 ? 1 : 0;
}
