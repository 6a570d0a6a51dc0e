/*
 * PLFS 2.5's regression program plfs_access (access.c), rewritten from what
 * its driver checks: plfs_access(path, R_OK) printed as "plfs access PATH:
 * CODE". The driver runs it on each directory above the mount point (2.5
 * answers 0), on a directory under the mount (0) and on a missing one
 * (2, ENOENT). strdup and printf come through plfs.h, as in 2.5; built as
 * C and as C++.
 *
 * usage: plfs25_access <path>...
 */
#include <stdlib.h>
#include <unistd.h>

#include "plfs.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        printf("ERROR: No path specified\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        char *path = strdup(argv[i]);
        printf("plfs access %s: %d\n", path, (int)plfs_access(path, R_OK));
        free(path);
    }
    return 0;
}
