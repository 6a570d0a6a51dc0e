/*
 * Close-to-open between processes on a 1-n (small_file) mount, through
 * plfs.h: this process caches its view of a directory, another process
 * (this program again, started with system()) creates, closes or unlinks
 * files in it, and each call here must see what the other one closed.
 *
 * usage: other_process <dir> hold    (the checks; makes <dir>, removes it)
 *        other_process <path> create (writes "x" and closes)
 *        other_process <path> unlink
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static const char *self;

/* Runs this program as another process on path; exits if that fails. */
static void other(const char *path, const char *action)
{
    char command[4096];
    snprintf(command, sizeof command, "'%s' '%s' %s", self, path, action);
    if (system(command) != 0) {
        fprintf(stderr, "%s failed\n", command);
        exit(3);
    }
}

/* How many names plfs_readdir_c gives for dir. */
static int count(const char *dir)
{
    Plfs_dirp *dirp = NULL;
    int names = 0;
    EXPECT(plfs_opendir_c(dir, &dirp), PLFS_SUCCESS);
    if (dirp == NULL) {
        return -1;
    }
    char name[256];
    while (plfs_readdir_c(dirp, name, sizeof name) == PLFS_SUCCESS && name[0] != '\0') {
        names++;
    }
    EXPECT(plfs_closedir_c(dirp), PLFS_SUCCESS);
    return names;
}

static void hold(const char *dir)
{
    struct stat st;
    EXPECT(plfs_mkdir(dir, 0755), PLFS_SUCCESS);
    /* Caches this process's view of dir. */
    CHECK(count(dir) == 0);

    char *stat_path = join(dir, "for-stat");
    other(stat_path, "create");
    EXPECT(plfs_getattr(NULL, stat_path, &st, 0), PLFS_SUCCESS);
    CHECK(st.st_size == 1);

    char *access_path = join(dir, "for-access");
    other(access_path, "create");
    EXPECT(plfs_access(access_path, F_OK), PLFS_SUCCESS);

    char *open_path = join(dir, "for-open");
    other(open_path, "create");
    Plfs_fd *fd = NULL;
    EXPECT(plfs_open(&fd, open_path, O_RDONLY, getpid(), 0, NULL), PLFS_SUCCESS);
    if (fd != NULL) {
        int references = 0;
        EXPECT(plfs_close(fd, getpid(), getuid(), O_RDONLY, NULL, &references), PLFS_SUCCESS);
    }

    /* A new file in a directory this process has cached in full. */
    char *listed_path = join(dir, "for-readdir");
    other(listed_path, "create");
    CHECK(count(dir) == 4);

    /* Names nobody made still miss. */
    char *missing = join(dir, "missing");
    EXPECT(plfs_getattr(NULL, missing, &st, 0), PLFS_ENOENT);
    EXPECT(plfs_access(missing, F_OK), PLFS_ENOENT);

    /* Everything removed elsewhere: the listing is empty, rmdir succeeds. */
    other(stat_path, "unlink");
    other(access_path, "unlink");
    other(open_path, "unlink");
    other(listed_path, "unlink");
    CHECK(count(dir) == 0);
    char *kept = join(dir, "for-rmdir");
    other(kept, "create");
    EXPECT(plfs_getattr(NULL, kept, &st, 0), PLFS_SUCCESS);
    other(kept, "unlink");
    EXPECT(plfs_rmdir(dir), PLFS_SUCCESS);
    EXPECT(plfs_access(dir, F_OK), PLFS_ENOENT);
    free(stat_path);
    free(access_path);
    free(open_path);
    free(listed_path);
    free(missing);
    free(kept);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s <path> <hold|create|unlink>\n", argv[0]);
        return 2;
    }
    self = argv[0];
    const char *path = argv[1];
    if (strcmp(argv[2], "create") == 0) {
        Plfs_fd *fd = NULL;
        ssize_t written = 0;
        int references = 0;
        int flags = O_CREAT | O_WRONLY | O_TRUNC;
        EXPECT(plfs_open(&fd, path, flags, getpid(), 0644, NULL), PLFS_SUCCESS);
        if (fd == NULL) {
            return 1;
        }
        EXPECT(plfs_write(fd, "x", 1, 0, getpid(), &written), PLFS_SUCCESS);
        EXPECT(plfs_close(fd, getpid(), getuid(), flags, NULL, &references), PLFS_SUCCESS);
    } else if (strcmp(argv[2], "unlink") == 0) {
        EXPECT(plfs_unlink(path), PLFS_SUCCESS);
    } else if (strcmp(argv[2], "hold") == 0) {
        hold(path);
    } else {
        fprintf(stderr, "unknown action %s\n", argv[2]);
        return 2;
    }
    if (failures > 0) {
        printf("other_process %s: FAILED: %d of %d checks\n", argv[2], failures, checks);
        return 1;
    }
    printf("other_process %s: OK: %d checks\n", argv[2], checks);
    return 0;
}
