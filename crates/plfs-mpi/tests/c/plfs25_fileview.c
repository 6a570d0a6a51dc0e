/*
 * PLFS 2.5's regression program data-sieving/fileview-with-ds-switch.c,
 * rewritten from what it checks: four ranks see the file as a 1024 x 1024
 * array of chars through a subarray file view, rank r's 5 x 5 block at row
 * (r / 2) * 5, column (r % 2) * 5, and each writes its block of '0' + r with
 * one MPI_File_write, with the ROMIO hint romio_ds_write set to "disable"
 * or "enable" (2.5's driver must keep data sieving off either way; the test
 * compares the two files). The view's position is 0 before the write and 25
 * after. 2.5 passed the subarray as the memory type of a 100-byte buffer
 * (reading past its end); here memory holds the 25 chars contiguously. After
 * a reopen each rank reads its block back through the same view.
 *
 * usage: mpirun -np 4 plfs25_fileview <file> disable_ds|enable_ds
 *        (rank 0 prints "plfs25_fileview: OK" when every rank passed)
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define SIDE 1024
#define BLOCK 5

static void check(int code, const char *what, int rank)
{
    if (code != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING];
        int length = 0;
        MPI_Error_string(code, text, &length);
        fprintf(stderr, "plfs25_fileview: rank %d: %s: %s\n", rank, what, text);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* Sets the subarray view of `rank`'s block on `fh`. */
static void view(MPI_File fh, MPI_Datatype block, int rank)
{
    char native[] = "native";
    check(MPI_File_set_view(fh, 0, MPI_CHAR, block, native, MPI_INFO_NULL), "MPI_File_set_view", rank);
}

int main(int argc, char **argv)
{
    int rank, ranks, errors = 0, all_errors = 0, i;
    int sizes[2] = { SIDE, SIDE };
    int subsizes[2] = { BLOCK, BLOCK };
    int starts[2];
    char mine[BLOCK * BLOCK], back[BLOCK * BLOCK];
    MPI_Datatype block;
    MPI_Offset position = -1;
    MPI_Info info;
    MPI_File fh;
    MPI_Status status;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (ranks != 4 || argc != 3 || (strcmp(argv[2], "disable_ds") != 0 && strcmp(argv[2], "enable_ds") != 0)) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -np 4 %s <file> disable_ds|enable_ds\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Info_create(&info);
    MPI_Info_set(info, "romio_ds_write", strcmp(argv[2], "enable_ds") == 0 ? "enable" : "disable");

    starts[0] = (rank / 2) * BLOCK;
    starts[1] = (rank % 2) * BLOCK;
    MPI_Type_create_subarray(2, sizes, subsizes, starts, MPI_ORDER_C, MPI_CHAR, &block);
    MPI_Type_commit(&block);
    memset(mine, '0' + rank, sizeof mine);

    check(MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_WRONLY, info, &fh), "open", rank);
    MPI_Barrier(MPI_COMM_WORLD);
    view(fh, block, rank);
    check(MPI_File_get_position(fh, &position), "MPI_File_get_position", rank);
    if (position != 0) {
        fprintf(stderr, "plfs25_fileview: rank %d: position %lld before the write\n", rank, (long long)position);
        errors++;
    }
    check(MPI_File_write(fh, mine, BLOCK * BLOCK, MPI_CHAR, &status), "MPI_File_write", rank);
    check(MPI_File_get_position(fh, &position), "MPI_File_get_position", rank);
    if (position != BLOCK * BLOCK) {
        fprintf(stderr, "plfs25_fileview: rank %d: position %lld after the write\n", rank, (long long)position);
        errors++;
    }
    check(MPI_File_close(&fh), "close", rank);

    check(MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_RDONLY, info, &fh), "reopen", rank);
    view(fh, block, rank);
    memset(back, 0, sizeof back);
    check(MPI_File_read(fh, back, BLOCK * BLOCK, MPI_CHAR, &status), "MPI_File_read", rank);
    for (i = 0; i < BLOCK * BLOCK; i++) {
        if (back[i] != mine[i]) {
            fprintf(stderr, "plfs25_fileview: rank %d: byte %d of the block reads %d, not %d\n", rank, i, back[i],
                    mine[i]);
            errors++;
            break;
        }
    }
    check(MPI_File_close(&fh), "close", rank);

    MPI_Allreduce(&errors, &all_errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        if (all_errors > 0)
            fprintf(stderr, "plfs25_fileview: FAILED: %d errors\n", all_errors);
        else
            printf("plfs25_fileview: OK\n");
    }
    MPI_Type_free(&block);
    MPI_Info_free(&info);
    MPI_Finalize();
    return all_errors > 0 ? 1 : 0;
}
