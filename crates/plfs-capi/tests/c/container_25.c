/*
 * A container PLFS 2.5 wrote, read in place through the C API: stat gives
 * the size and 2.5's 0600, plfs_open O_RDONLY and plfs_read give the
 * expected bytes (whole, and in odd pieces across extents), and every way
 * of changing it fails with PLFS_EACCES (plfs never writes into a 2.5
 * container: `plfs migrate` converts it) without changing a byte.
 *
 * usage: container_25 <file on a plfs mount> <plain file with its bytes>
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

/* The whole of a plain file, malloc'd; exits if it cannot be read. */
static char *slurp(const char *path, size_t *length)
{
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        perror(path);
        exit(2);
    }
    fseek(file, 0, SEEK_END);
    *length = (size_t)ftell(file);
    rewind(file);
    char *bytes = malloc(*length + 1);
    if (bytes == NULL || fread(bytes, 1, *length, file) != *length) {
        perror(path);
        exit(2);
    }
    fclose(file);
    return bytes;
}

/* Reads the whole file through one plfs_open, in pieces of `piece`
 * bytes (the last one asks for more than is left), and compares. */
static void read_back(const char *path, const char *expected, size_t length, size_t piece)
{
    Plfs_fd *fd = NULL;
    int num_ref = -1;
    char *got = malloc(length + piece);
    CHECK(got != NULL);
    EXPECT(plfs_open(&fd, path, O_RDONLY, getpid(), 0, NULL), PLFS_SUCCESS);
    if (fd == NULL || got == NULL) {
        free(got);
        return;
    }
    size_t offset = 0;
    for (;;) {
        ssize_t bytes = -1;
        EXPECT(plfs_read(fd, got + offset, piece, (off_t)offset, &bytes), PLFS_SUCCESS);
        if (bytes <= 0) {
            break;
        }
        offset += (size_t)bytes;
    }
    CHECK(offset == length);
    CHECK(offset == length && memcmp(got, expected, length) == 0);
    /* Writing through a read-only descriptor fails as write(2) does. */
    ssize_t wrote = -1;
    EXPECT(plfs_write(fd, "x", 1, 0, getpid(), &wrote), PLFS_EBADF);
    EXPECT(plfs_close(fd, getpid(), getuid(), O_RDONLY, NULL, &num_ref), PLFS_SUCCESS);
    CHECK(num_ref == 0);
    free(got);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s <plfs file> <expected bytes>\n", argv[0]);
        return 2;
    }
    const char *path = argv[1];
    size_t length = 0;
    char *expected = slurp(argv[2], &length);

    struct stat st;
    EXPECT(plfs_getattr(NULL, path, &st, 0), PLFS_SUCCESS);
    CHECK(S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0600);
    CHECK(st.st_size == (off_t)length);

    read_back(path, expected, length, length + 100);
    read_back(path, expected, length, 97);

    /* Every change is refused with EACCES, before anything is written. */
    const int write_flags[] = {O_WRONLY, O_RDWR, O_WRONLY | O_APPEND, O_RDWR | O_CREAT, O_WRONLY | O_TRUNC};
    for (size_t i = 0; i < sizeof write_flags / sizeof write_flags[0]; i++) {
        Plfs_fd *fd = NULL;
        EXPECT(plfs_open(&fd, path, write_flags[i], getpid(), 0644, NULL), PLFS_EACCES);
        CHECK(fd == NULL);
    }
    EXPECT(plfs_trunc(NULL, path, 0, 0), PLFS_EACCES);
    EXPECT(plfs_chmod(path, 0644), PLFS_EACCES);
    EXPECT(plfs_create(path, 0644, 0, getpid()), PLFS_EACCES);
    EXPECT(plfs_create(path, 0644, O_EXCL, getpid()), PLFS_EEXIST);

    EXPECT(plfs_getattr(NULL, path, &st, 0), PLFS_SUCCESS);
    CHECK(st.st_size == (off_t)length && (st.st_mode & 07777) == 0600);
    read_back(path, expected, length, 4096);

    free(expected);
    printf("container_25: %s: %d checks, %d failures\n", failures == 0 ? "OK" : "FAILED", checks, failures);
    if (failures == 0) {
        printf("container_25: OK: %zu bytes\n", length);
    }
    return failures == 0 ? 0 : 1;
}
