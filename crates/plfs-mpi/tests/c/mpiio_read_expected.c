/*
 * An unmodified MPI-IO program that reads a file and compares it with a
 * plain copy of the bytes it should hold. It knows nothing of plfs;
 * libplfs_mpiio.so and libplfs_preload.so (LD_PRELOAD) put its file on
 * plfs.
 *
 *   mpiio_read_expected PATH EXPECTED PIECE
 *
 * Every rank opens PATH MPI_MODE_RDONLY, checks MPI_File_get_size against
 * EXPECTED's length, and reads pieces of PIECE bytes round robin (piece i
 * by rank i % size) with MPI_File_read_at, one more piece past the end
 * (which must read 0 bytes), comparing each with EXPECTED. Rank 0 prints
 * "mpiio_read_expected: OK: <ranks> ranks read <bytes> bytes" when every
 * rank saw every byte right; the program exits 1 otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 4) {
        if (rank == 0) {
            fprintf(stderr, "usage: %s PATH EXPECTED PIECE\n", argv[0]);
        }
        MPI_Finalize();
        return 2;
    }
    long piece = atol(argv[3]);
    FILE *plain = fopen(argv[2], "rb");
    if (plain == NULL || piece <= 0) {
        perror(argv[2]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    fseek(plain, 0, SEEK_END);
    long length = ftell(plain);
    rewind(plain);
    char *expected = malloc((size_t)length + 1);
    char *got = malloc((size_t)piece);
    if (expected == NULL || got == NULL || fread(expected, 1, (size_t)length, plain) != (size_t)length) {
        perror("read expected");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    fclose(plain);

    int failures = 0;
    long verified = 0;
    MPI_File fh;
    int rc = MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    if (rc != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING];
        int text_length;
        MPI_Error_string(rc, text, &text_length);
        fprintf(stderr, "rank %d: MPI_File_open %s: %s\n", rank, argv[1], text);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Offset file_size = -1;
    MPI_File_get_size(fh, &file_size);
    if (file_size != length) {
        fprintf(stderr, "rank %d: MPI_File_get_size %lld, expected %ld\n", rank, (long long)file_size, length);
        failures++;
    }
    long pieces = (length + piece - 1) / piece;
    for (long i = rank; i <= pieces; i += size) {
        long offset = i * piece;
        long want = offset >= length ? 0 : (length - offset < piece ? length - offset : piece);
        MPI_Status status;
        int count = -1;
        memset(got, 0xEE, (size_t)piece);
        rc = MPI_File_read_at(fh, (MPI_Offset)offset, got, (int)piece, MPI_BYTE, &status);
        MPI_Get_count(&status, MPI_BYTE, &count);
        if (rc != MPI_SUCCESS || count != want) {
            fprintf(stderr, "rank %d: read_at %ld: rc %d, %d bytes, expected %ld\n", rank, offset, rc, count, want);
            failures++;
        } else if (memcmp(got, expected + offset, (size_t)want) != 0) {
            fprintf(stderr, "rank %d: read_at %ld: other bytes than expected\n", rank, offset);
            failures++;
        } else {
            verified += want;
        }
    }
    MPI_File_close(&fh);

    int all_failures = 0;
    long all_verified = 0;
    MPI_Reduce(&failures, &all_failures, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&verified, &all_verified, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Bcast(&all_failures, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0 && all_failures == 0 && all_verified == length) {
        printf("mpiio_read_expected: OK: %d ranks read %ld bytes\n", size, all_verified);
    } else if (rank == 0) {
        fprintf(stderr, "mpiio_read_expected: %d failures, %ld of %ld bytes verified\n", all_failures,
                all_verified, length);
    }
    free(expected);
    free(got);
    MPI_Finalize();
    return all_failures == 0 && (rank != 0 || all_verified == length) ? 0 : 1;
}
