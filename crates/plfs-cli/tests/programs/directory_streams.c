/*
 * The directory-stream calls beyond opendir/readdir on <dir>, printed so
 * that a plain directory and a plfs one give the same text whatever order
 * their listings come in:
 *   readdir:   every name, sorted ("." and ".." included);
 *   seekdir:   whether readdir after seekdir(telldir) taken before the
 *              third entry gives that entry again;
 *   readdir_r: how many entries it returns;
 *   scandir:   the names in alphasort order, then with a filter that
 *              leaves out names starting with '.'.
 *
 * usage: directory_streams <dir>
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int visible(const struct dirent *entry)
{
    return entry->d_name[0] != '.';
}

static void print_scan(const char *label, struct dirent **names, int count)
{
    printf("%s %d:", label, count);
    for (int i = 0; i < count; i++) {
        printf(" %s", names[i]->d_name);
        free(names[i]);
    }
    printf("\n");
    free(names);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        return 2;
    }
    DIR *dir = opendir(argv[1]);
    if (dir == NULL) {
        perror("opendir");
        return 1;
    }
    char *names[256];
    char third[256] = "";
    long mark = -1;
    int count = 0;
    for (;;) {
        if (count == 2) {
            mark = telldir(dir);
        }
        struct dirent *entry = readdir(dir);
        if (entry == NULL || count == 256) {
            break;
        }
        if (count == 2) {
            snprintf(third, sizeof third, "%s", entry->d_name);
        }
        names[count++] = strdup(entry->d_name);
    }
    qsort(names, count, sizeof names[0], by_name);
    printf("readdir:");
    for (int i = 0; i < count; i++) {
        printf(" %s", names[i]);
    }
    printf("\n");
    seekdir(dir, mark);
    struct dirent *again = readdir(dir);
    printf("seekdir: %s\n", again != NULL && strcmp(again->d_name, third) == 0 ? "same entry" : "another entry");

    rewinddir(dir);
    struct dirent entry, *result;
    int returned = 0;
    while (readdir_r(dir, &entry, &result) == 0 && result != NULL) {
        returned++;
    }
    printf("readdir_r: %d\n", returned);
    closedir(dir);

    struct dirent **scanned;
    int scanned_count = scandir(argv[1], &scanned, NULL, alphasort);
    if (scanned_count < 0) {
        perror("scandir");
        return 1;
    }
    print_scan("scandir", scanned, scanned_count);
    scanned_count = scandir(argv[1], &scanned, visible, alphasort);
    if (scanned_count < 0) {
        perror("scandir");
        return 1;
    }
    print_scan("scandir filtered", scanned, scanned_count);
    return 0;
}
