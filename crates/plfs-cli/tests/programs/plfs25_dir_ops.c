/*
 * PLFS 2.5's regression program readdir_ops/dir_ops.c, rewritten from what
 * it checks, with plain POSIX calls in a plfs mount (2.5 ran it through
 * FUSE): mkdir a directory; with it open (opendir), create a file in it with
 * fopen and close both; opendir again and find the file with readdir;
 * unlink the file, rewinddir the same stream and no longer find it; closedir
 * and rmdir the now empty directory. Where 2.5 printed an error and went
 * on, this program stops with exit 1; it also requires the directory to be
 * gone at the end.
 *
 * usage: plfs25_dir_ops <directory> <file name>   (exit 0: passed)
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void fail(const char *what, const char *path)
{
    printf("plfs25_dir_ops: FAILED: %s %s: %s\n", what, path, errno ? strerror(errno) : "");
    exit(1);
}

/* Whether a pass of readdir over `dir` from where it stands sees `name`. */
static int listed(DIR *dir, const char *name)
{
    struct dirent *entry;
    int found = 0;
    errno = 0;
    while ((entry = readdir(dir)) != NULL) {
        if (strcmp(entry->d_name, name) == 0)
            found = 1;
    }
    if (errno != 0)
        fail("readdir", name);
    return found;
}

int main(int argc, char **argv)
{
    const char *path;
    const char *name;
    char file[4096];
    DIR *dir;
    FILE *stream;

    if (argc != 3) {
        printf("usage: %s <directory> <file name>\n", argv[0]);
        return 2;
    }
    path = argv[1];
    name = argv[2];
    snprintf(file, sizeof file, "%s/%s", path, name);

    errno = 0;
    if (mkdir(path, S_IRWXU) != 0)
        fail("mkdir", path);
    errno = 0;
    if ((dir = opendir(path)) == NULL)
        fail("opendir", path);
    errno = 0;
    if ((stream = fopen(file, "w")) == NULL)
        fail("fopen", file);
    errno = 0;
    if (fclose(stream) != 0)
        fail("fclose", file);
    errno = 0;
    if (closedir(dir) != 0)
        fail("closedir", path);

    errno = 0;
    if ((dir = opendir(path)) == NULL)
        fail("opendir again", path);
    errno = 0;
    if (!listed(dir, name))
        fail("readdir does not list the new file", file);
    errno = 0;
    if (unlink(file) != 0)
        fail("unlink", file);
    rewinddir(dir);
    errno = 0;
    if (listed(dir, name))
        fail("readdir after rewinddir still lists the unlinked file", file);
    errno = 0;
    if (closedir(dir) != 0)
        fail("closedir", path);
    errno = 0;
    if (rmdir(path) != 0)
        fail("rmdir", path);
    errno = 0;
    if (access(path, F_OK) == 0 || errno != ENOENT)
        fail("the directory is still there:", path);
    printf("plfs25_dir_ops: OK\n");
    return 0;
}
