/*
 * The directories above a mount point, which plfs does not hold but
 * programs walk through: plfs_access, plfs_getattr and plfs_mode answer as
 * the local directory when it exists, and as a directory readable and
 * searchable by all, writable by none, when it does not (a mount used
 * through libplfs needs nothing on disk).
 *
 * usage: above_mount <existing ancestor> <ancestor missing on disk>
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s <existing ancestor> <missing ancestor>\n", argv[0]);
        return 2;
    }
    const char *local = argv[1];
    const char *missing = argv[2];
    struct stat st, real;
    mode_t mode = 0;

    EXPECT(plfs_access(local, R_OK | X_OK), PLFS_SUCCESS);
    EXPECT(plfs_getattr(NULL, local, &st, 0), PLFS_SUCCESS);
    CHECK(stat(local, &real) == 0 && st.st_ino == real.st_ino && st.st_mode == real.st_mode);
    EXPECT(plfs_mode(local, &mode), PLFS_SUCCESS);
    CHECK(mode == real.st_mode);

    CHECK(access(missing, F_OK) != 0);
    EXPECT(plfs_access(missing, F_OK), PLFS_SUCCESS);
    EXPECT(plfs_access(missing, R_OK | X_OK), PLFS_SUCCESS);
    EXPECT(plfs_access(missing, W_OK), PLFS_EROFS);
    EXPECT(plfs_getattr(NULL, missing, &st, 0), PLFS_SUCCESS);
    CHECK(S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0555 && st.st_uid == 0);
    EXPECT(plfs_mode(missing, &mode), PLFS_SUCCESS);
    CHECK(mode == (S_IFDIR | 0555));
    /* Below the missing ancestor but beside the mount: nothing. */
    char *beside = join(missing, "beside");
    EXPECT(plfs_access(beside, F_OK), PLFS_ENOENT);
    EXPECT(plfs_getattr(NULL, beside, &st, 0), PLFS_ENOENT);
    free(beside);

    printf("above_mount: %d checks, %d failures\n", checks, failures);
    if (failures == 0) {
        printf("above_mount: OK\n");
    }
    return failures == 0 ? 0 : 1;
}
