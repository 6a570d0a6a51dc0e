/* nftw and ftw over a small tree made under argv[1]: each walk's entries
 * (path below the root, type flag, level, base) are printed sorted, since
 * the order within a directory is readdir's; FTW_DEPTH's order (a directory
 * after everything in it) and FTW_ACTIONRETVAL's skips are checked here. */
#define _XOPEN_SOURCE 700
#define _GNU_SOURCE
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

static char lines[256][300];
static int count;
static size_t root_length;
static int depth_violations;

static void note(const char *path, int type, int level, int base, long size) {
    snprintf(lines[count++], sizeof lines[0], "%s type=%d level=%d base=%s size=%ld",
             path[root_length] ? path + root_length : "(root)", type, level, path + base, size);
}

static char closed[64][300];
static int closed_count;
static int check_cwd, cwd_misses;

static int visit(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
    note(path, type, ftw->level, ftw->base, type == FTW_F ? (long)sb->st_size : -1);
    /* FTW_DEPTH: nothing below a directory comes after the directory. */
    for (int i = 0; i < closed_count; i++) {
        size_t n = strlen(closed[i]);
        if (strncmp(path, closed[i], n) == 0 && path[n] == '/') depth_violations++;
    }
    if (type == FTW_DP) snprintf(closed[closed_count++], sizeof closed[0], "%s", path);
    /* FTW_CHDIR: the entry is in the working directory. */
    struct stat here;
    if (check_cwd && lstat(path + ftw->base, &here) != 0) cwd_misses++;
    return 0;
}

static int skip_sub(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
    note(path, type, ftw->level, ftw->base, -1);
    (void)sb;
    if (type == FTW_D && strcmp(path + ftw->base, "sub") == 0) return FTW_SKIP_SUBTREE;
    return FTW_CONTINUE;
}

static int stop_at_root(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
    note(path, type, ftw->level, ftw->base, -1);
    (void)sb;
    return FTW_STOP;
}

static int old_visit(const char *path, const struct stat *sb, int type) {
    const char *slash = strrchr(path, '/');
    note(path, type, 0, slash ? (int)(slash + 1 - path) : 0, type == FTW_F ? (long)sb->st_size : -1);
    return 0;
}

static int compare(const void *a, const void *b) { return strcmp(a, b); }

static void flush(const char *title, int result) {
    qsort(lines, count, sizeof lines[0], compare);
    printf("%s -> %d\n", title, result);
    for (int i = 0; i < count; i++) printf("  %s\n", lines[i]);
    count = 0;
}

static void make(const char *root, const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, name);
    if (text == NULL) { if (mkdir(path, 0755) != 0) { perror(path); exit(1); } return; }
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) || close(fd) != 0) { perror(path); exit(1); }
}

int main(int argc, char **argv) {
    char root[512];
    snprintf(root, sizeof root, "%s/tree", argv[1]);
    root_length = strlen(root);
    make(argv[1], "tree", NULL);
    make(root, "a.txt", "hello\n");
    make(root, "sub", NULL);
    make(root, "sub/b.txt", "0123456789");
    make(root, "sub/deeper", NULL);
    make(root, "sub/deeper/c.txt", "");
    make(root, "empty", NULL);
    make(root, "stop", "x");

    flush("nftw physical", nftw(root, visit, 8, FTW_PHYS));
    flush("nftw depth", nftw(root, visit, 8, FTW_PHYS | FTW_DEPTH));
    printf("depth order violations: %d\n", depth_violations);
    flush("nftw skip subtree", nftw(root, skip_sub, 8, FTW_PHYS | FTW_ACTIONRETVAL));
    flush("nftw stop", nftw(root, stop_at_root, 8, FTW_PHYS | FTW_ACTIONRETVAL));
    flush("ftw", ftw(root, old_visit, 8));
    char relative[512];
    if (chdir(argv[1]) != 0) { perror("chdir"); return 1; }
    snprintf(relative, sizeof relative, "tree");
    root_length = strlen(relative);
    check_cwd = 1;
    flush("nftw relative, chdir", nftw(relative, visit, 8, FTW_PHYS | FTW_CHDIR));
    printf("entries not in the working directory: %d\n", cwd_misses);
    char here[512];
    printf("cwd after: %s\n", getcwd(here, sizeof here) && strcmp(here, argv[1]) == 0 ? "unchanged" : here);
    check_cwd = 0;
    int missing = nftw("no-such-tree", visit, 8, 0);
    flush("nftw missing", missing);
    if (missing != 0) perror("nftw no-such-tree");
    return 0;
}
