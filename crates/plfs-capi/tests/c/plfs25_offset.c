/*
 * PLFS 2.5's regression program plfs_offset (offset.c), rewritten from what
 * it checks: create a file, write 6 bytes at 0 and 5 more at 6, close,
 * reopen read-write and read the 11 bytes back. Written the way 2.5's
 * programs were: strdup and printf come through plfs.h, which included
 * string.h and stdio.h in 2.5; built as C and as C++.
 *
 * usage: plfs25_offset <file under a plfs mount>   (exit 0: passed)
 */
#include <fcntl.h>
#include <stdlib.h>

#include "plfs.h"

int main(int argc, char **argv)
{
    const char first[] = "Testing";
    const char second[] = "PLFSRW";
    char back[16];
    Plfs_fd *pfd = NULL;
    ssize_t bytes = 0;
    int refs = -1;
    char *path;

    if (argc != 2) {
        printf("usage: %s <file>\n", argv[0]);
        return 10;
    }
    path = strdup(argv[1]);
    if (plfs_open(&pfd, path, O_CREAT | O_TRUNC | O_RDWR, 99, 0666, NULL) != PLFS_SUCCESS) {
        printf("create %s failed\n", path);
        return 1;
    }
    if (plfs_write(pfd, first, 6, 0, 99, &bytes) != PLFS_SUCCESS || bytes != 6) {
        printf("first write failed\n");
        return 2;
    }
    if (plfs_write(pfd, second, 5, 6, 99, &bytes) != PLFS_SUCCESS || bytes != 5) {
        printf("second write failed\n");
        return 3;
    }
    if (plfs_close(pfd, 99, 99, O_CREAT | O_TRUNC | O_RDWR, NULL, &refs) != PLFS_SUCCESS || refs != 0) {
        printf("close failed\n");
        return 4;
    }
    pfd = NULL;
    if (plfs_open(&pfd, path, O_RDWR, 99, 0666, NULL) != PLFS_SUCCESS) {
        printf("reopen failed\n");
        return 5;
    }
    memset(back, 0, sizeof back);
    if (plfs_read(pfd, back, 11, 0, &bytes) != PLFS_SUCCESS || bytes != 11 ||
        memcmp(back, "TestinPLFSR", 11) != 0) {
        printf("read back %ld bytes: %s\n", (long)bytes, back);
        return 6;
    }
    if (plfs_close(pfd, 99, 1, O_RDWR, NULL, &refs) != PLFS_SUCCESS) {
        printf("second close failed\n");
        return 7;
    }
    free(path);
    printf("plfs25_offset: OK\n");
    return 0;
}
