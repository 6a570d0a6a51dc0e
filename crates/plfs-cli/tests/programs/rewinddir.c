/*
 * rewinddir re-reads: opens <dir>, runs <before> if given, lists the
 * stream, runs <command> (another process changes the directory), rewinds
 * the same stream and lists it again. Prints both listings, sorted, one
 * line each ("first: a b", "again: a c"); "." and ".." are left out.
 *
 * usage: rewinddir <dir> <command> [<before>]
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void list(DIR *dir, const char *label)
{
    char *names[256];
    int count = 0;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL && count < 256) {
        if (strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0) {
            names[count++] = strdup(entry->d_name);
        }
    }
    qsort(names, count, sizeof names[0], by_name);
    printf("%s:", label);
    for (int i = 0; i < count; i++) {
        printf(" %s", names[i]);
        free(names[i]);
    }
    printf("\n");
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s <dir> <command> [<before>]\n", argv[0]);
        return 2;
    }
    DIR *dir = opendir(argv[1]);
    if (dir == NULL) {
        perror(argv[1]);
        return 1;
    }
    if (argc == 4 && system(argv[3]) != 0) {
        fprintf(stderr, "%s failed\n", argv[3]);
        return 1;
    }
    list(dir, "first");
    fflush(stdout);
    if (system(argv[2]) != 0) {
        fprintf(stderr, "%s failed\n", argv[2]);
        return 1;
    }
    rewinddir(dir);
    list(dir, "again");
    return closedir(dir) == 0 ? 0 : 1;
}
