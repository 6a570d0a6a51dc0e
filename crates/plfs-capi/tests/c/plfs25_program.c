/*
 * A program written as a PLFS 2.5 user wrote one, against plfs.h only:
 * it must build unchanged with this library. Writes a file as this
 * process, closes it with num_ref, stats it, and reads it back.
 *
 * usage: plfs25_program <path under a plfs mount>
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plfs.h"

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/mnt/plfs/checkpoint";
    const char *message = "hello from a PLFS 2.5 program\n";
    size_t length = strlen(message);
    Plfs_fd *fd = NULL;
    Plfs_open_opt open_opt;
    Plfs_close_opt close_opt;
    plfs_error_t ret;
    ssize_t bytes;
    int num_ref;
    struct stat st;
    char buffer[256];

    memset(&open_opt, 0, sizeof(open_opt));
    open_opt.pinter = PLFS_API;
    ret = plfs_open(&fd, path, O_CREAT | O_WRONLY, getpid(), 0644, &open_opt);
    if (ret != PLFS_SUCCESS) {
        fprintf(stderr, "plfs_open %s: %s\n", path, strplfserr(ret));
        return 1;
    }
    ret = plfs_write(fd, message, length, 0, getpid(), &bytes);
    if (ret != PLFS_SUCCESS || bytes != (ssize_t)length) {
        fprintf(stderr, "plfs_write: %s\n", strplfserr(ret));
        return 1;
    }
    memset(&close_opt, 0, sizeof(close_opt));
    close_opt.pinter = PLFS_API;
    ret = plfs_close(fd, getpid(), getuid(), O_CREAT | O_WRONLY, &close_opt, &num_ref);
    if (ret != PLFS_SUCCESS || num_ref != 0) {
        fprintf(stderr, "plfs_close: %s (num_ref %d)\n", strplfserr(ret), num_ref);
        return 1;
    }

    ret = plfs_getattr(NULL, path, &st, 0);
    if (ret != PLFS_SUCCESS || st.st_size != (off_t)length) {
        fprintf(stderr, "plfs_getattr: %s (size %ld)\n", strplfserr(ret), (long)st.st_size);
        return 1;
    }

    fd = NULL;
    ret = plfs_open(&fd, path, O_RDONLY, getpid(), 0, NULL);
    if (ret != PLFS_SUCCESS) {
        fprintf(stderr, "plfs_open O_RDONLY: %s\n", strplfserr(ret));
        return 1;
    }
    ret = plfs_read(fd, buffer, sizeof(buffer), 0, &bytes);
    if (ret != PLFS_SUCCESS || bytes != (ssize_t)length || memcmp(buffer, message, length) != 0) {
        fprintf(stderr, "plfs_read: %s (%ld bytes)\n", strplfserr(ret), (long)bytes);
        return 1;
    }
    plfs_close(fd, getpid(), getuid(), O_RDONLY, NULL, &num_ref);
    printf("plfs25_program: OK: %ld bytes\n", (long)bytes);
    return 0;
}
