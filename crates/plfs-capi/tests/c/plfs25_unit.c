/*
 * The eleven cases of PLFS 2.5's unit suite (tests/plfsunit.cpp, CppUnit),
 * rewritten from what each case checks, as a plain program that builds both
 * as C and as C++ with -Wall -Wextra -Werror. Like 2.5's programs it
 * includes only plfs.h for stdio and string (2.5's plfs.h included them).
 * Two cases check this library's POSIX behaviour where 2.5 differed; each
 * says why.
 *
 * usage: plfs25_unit <plfs mount>
 */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plfs.h"

#ifdef __cplusplus
#include <set>
#include <string>
#endif

static int failures = 0;

#define EXPECT(call, want)                                                                   \
    do {                                                                                     \
        int got_ = (int)(call);                                                              \
        if (got_ != (int)(want)) {                                                           \
            fprintf(stderr, "%s:%d: %s = %d, expected %d\n", __FILE__, __LINE__, #call, got_, \
                    (int)(want));                                                            \
            failures++;                                                                      \
        }                                                                                    \
    } while (0)

#define CHECK(condition)                                                                     \
    do {                                                                                     \
        if (!(condition)) {                                                                  \
            fprintf(stderr, "%s:%d: %s is false\n", __FILE__, __LINE__, #condition);         \
            failures++;                                                                      \
        }                                                                                    \
    } while (0)

static const char *mount;
static pid_t pid;
static uid_t uid;
static gid_t gid;

/* mount + "/" + name in one of a few rotating static buffers. */
static const char *at(const char *name)
{
    static char buffers[4][4096];
    static int next = 0;
    char *path = buffers[next++ % 4];
    snprintf(path, sizeof buffers[0], "%s/%s", mount, name);
    return path;
}

/* A fresh random name under the mount, as 2.5's generateRandomString. */
static void random_path(char *path, size_t size, const char *dir)
{
    snprintf(path, size, "%s/%d%d", dir, rand(), rand());
}

static void create_test(void)
{
    const char *one = at("createtest1");
    const char *two = at("createtest2");
    EXPECT(plfs_create(one, 0666, 0, pid), PLFS_SUCCESS);
    EXPECT(plfs_create(two, 0666, 0, 0), PLFS_SUCCESS);
    /* 2.5's test left O_EXCL out ("not supported"); here it is creat(2)'s. */
    EXPECT(plfs_create(one, 0666, O_EXCL, pid), PLFS_EEXIST);
    EXPECT(plfs_unlink(one), PLFS_SUCCESS);
    EXPECT(plfs_unlink(two), PLFS_SUCCESS);
    EXPECT(plfs_access(one, F_OK), PLFS_ENOENT);
    EXPECT(plfs_access(two, F_OK), PLFS_ENOENT);
}

static void open_close_test(void)
{
    const char *path = at("openclosetest1");
    Plfs_fd *fd = NULL;
    int refs = -1;
    EXPECT(plfs_create(path, 0666, 0, pid), PLFS_SUCCESS);
    EXPECT(plfs_open(&fd, path, O_RDONLY, pid, 0666, NULL), PLFS_SUCCESS);
    CHECK(fd != NULL);
    /* Opening again through the same fd adds a reference. */
    EXPECT(plfs_open(&fd, path, O_RDONLY, 0, 0666, NULL), PLFS_SUCCESS);
    EXPECT(plfs_close(fd, pid, uid, O_RDONLY, NULL, &refs), PLFS_SUCCESS);
    EXPECT(refs, 1);
    EXPECT(plfs_close(fd, pid, uid, O_RDONLY, NULL, &refs), PLFS_SUCCESS);
    EXPECT(refs, 0);
    EXPECT(plfs_unlink(path), PLFS_SUCCESS);
    EXPECT(plfs_access(path, F_OK), PLFS_ENOENT);

    fd = NULL;
    EXPECT(plfs_open(&fd, at("nonexist"), O_RDONLY, pid, 0666, NULL), PLFS_ENOENT);
    CHECK(fd == NULL);
    /* Unlinked while open: gone from the namespace, the fd still closes. */
    EXPECT(plfs_open(&fd, path, O_CREAT, pid, 0666, NULL), PLFS_SUCCESS);
    CHECK(fd != NULL);
    EXPECT(plfs_unlink(path), PLFS_SUCCESS);
    EXPECT(plfs_access(path, F_OK), PLFS_ENOENT);
    EXPECT(plfs_close(fd, pid, uid, O_CREAT, NULL, &refs), PLFS_SUCCESS);
}

/* 13 bytes with the NUL, as 2.5's test wrote them. */
static const char HELLO[] = "HELLO WORLD.";

static void write_sync_read(Plfs_fd *fd, pid_t writer)
{
    char back[sizeof HELLO];
    ssize_t bytes = 0;
    off_t offset = (off_t)rand();
    EXPECT(plfs_write(fd, HELLO, sizeof HELLO, offset, writer, &bytes), PLFS_SUCCESS);
    EXPECT(bytes, sizeof HELLO);
    EXPECT(plfs_sync(fd), PLFS_SUCCESS);
    memset(back, 0, sizeof back);
    EXPECT(plfs_read(fd, back, sizeof back, offset, &bytes), PLFS_SUCCESS);
    EXPECT(bytes, sizeof HELLO);
    CHECK(strcmp(back, HELLO) == 0);
}

static void read_write_test(void)
{
    const char *path = at("readwrite1");
    Plfs_fd *fd = NULL;
    int refs = -1;
    /* Ten writers through one fd, then ten opens of one writer each; every
     * write is read back at its (random, sparse) offset after a sync. */
    EXPECT(plfs_open(&fd, path, O_CREAT | O_RDWR, pid, 0666, NULL), PLFS_SUCCESS);
    for (int round = 0; round < 10; round++) {
        for (pid_t writer = 0; writer < 10; writer++) {
            write_sync_read(fd, writer);
        }
    }
    EXPECT(plfs_close(fd, pid, uid, O_RDWR, NULL, &refs), PLFS_SUCCESS);
    for (int round = 0; round < 10; round++) {
        for (pid_t writer = 0; writer < 10; writer++) {
            fd = NULL;
            EXPECT(plfs_open(&fd, path, O_CREAT | O_RDWR, writer, 0666, NULL), PLFS_SUCCESS);
            write_sync_read(fd, writer);
            EXPECT(plfs_close(fd, writer, uid, O_RDWR, NULL, &refs), PLFS_SUCCESS);
        }
    }
    EXPECT(plfs_unlink(path), PLFS_SUCCESS);
}

/* Every permission mode, set and read back. 2.5 read back a file's mode
 * with 0700 and group/other x bits added (its container directory's, which
 * must stay traversable); here a file's mode is exactly what chmod set, as
 * POSIX says, since a container's own directories never take the file's
 * mode. */
static void chmod_each_mode(const char *path)
{
    for (mode_t mode = 0; mode < 01000; mode++) {
        mode_t result = 0;
        EXPECT(plfs_chmod(path, mode), PLFS_SUCCESS);
        EXPECT(plfs_mode(path, &result), PLFS_SUCCESS);
        EXPECT(result & 0777, mode);
    }
}

static void chmod_test(void)
{
    const char *path = at("chmodetest1");
    EXPECT(plfs_create(path, 0666, 0, pid), PLFS_SUCCESS);
    chmod_each_mode(path);
    EXPECT(plfs_unlink(path), PLFS_SUCCESS);
}

static void chmod_dir_test(void)
{
    const char *path = at("chmoddirtest1");
    EXPECT(plfs_mkdir(path, 0777), PLFS_SUCCESS);
    chmod_each_mode(path);
    EXPECT(plfs_rmdir(path), PLFS_SUCCESS);
}

static void link_test(void)
{
    const char *path = at("linktest1");
    EXPECT(plfs_create(path, 0666, 0, pid), PLFS_SUCCESS);
    EXPECT(plfs_link(path, at("linktest2")), PLFS_ENOSYS);
    EXPECT(plfs_unlink(path), PLFS_SUCCESS);
}

static void chown_test(void)
{
    const char *path = at("chowntest1");
    struct stat st;
    EXPECT(plfs_create(path, 0666, 0, pid), PLFS_SUCCESS);
    if (uid != 0) {
        /* Giving a file away takes privilege. */
        EXPECT(plfs_chown(path, 0, 0), PLFS_EPERM);
    } else {
        for (uid_t owner = 0; owner < 65536; owner += 8000) {
            for (gid_t group = 0; group < 65536; group += 8000) {
                EXPECT(plfs_chown(path, owner, group), PLFS_SUCCESS);
                EXPECT(plfs_getattr(NULL, path, &st, 0), PLFS_SUCCESS);
                EXPECT(st.st_uid, owner);
                EXPECT(st.st_gid, group);
            }
        }
        EXPECT(plfs_chown(path, uid, gid), PLFS_SUCCESS);
    }
    EXPECT(plfs_unlink(path), PLFS_SUCCESS);
}

/* 2.5 opened through a symbolic link to its target. plfs keeps links as
 * text and its core follows none, so opening a link is refused, as
 * open(2) with O_NOFOLLOW refuses it: PLFS_ELOOP, for a link to a file and
 * for a dangling one (2.5: success and PLFS_ENOENT). The link itself
 * (symlink, readlink, unlink) is as in 2.5. */
static void symlink_test(void)
{
    const char *path = at("symlinktest1");
    const char *link = at("symlinktest2");
    Plfs_fd *fd = NULL;
    char text[256];
    char buf[256];
    int bytes = -1;
    EXPECT(plfs_create(path, 0666, 0, pid), PLFS_SUCCESS);
    EXPECT(plfs_symlink(path, link), PLFS_SUCCESS);
    EXPECT(plfs_open(&fd, link, O_CREAT | O_RDWR, pid, 0666, NULL), PLFS_ELOOP);
    CHECK(fd == NULL);
    EXPECT(plfs_unlink(link), PLFS_SUCCESS);
    EXPECT(plfs_access(path, F_OK), PLFS_SUCCESS);
    EXPECT(plfs_symlink("./nonexist.ne", link), PLFS_SUCCESS);
    EXPECT(plfs_open(&fd, link, O_RDWR, pid, 0666, NULL), PLFS_ELOOP);
    EXPECT(plfs_unlink(link), PLFS_SUCCESS);
    for (int i = 0; i < 100; i++) {
        snprintf(text, sizeof text, "./noexist.ne%d", i);
        EXPECT(plfs_symlink(text, link), PLFS_SUCCESS);
        EXPECT(plfs_readlink(link, buf, sizeof buf, &bytes), PLFS_SUCCESS);
        EXPECT(bytes, strlen(text));
        CHECK(strcmp(text, buf) == 0);
        EXPECT(plfs_unlink(link), PLFS_SUCCESS);
    }
    EXPECT(plfs_unlink(path), PLFS_SUCCESS);
}

/* Renames `from` to 30 random names in turn; `from` ends as the last. */
static void rename_30_times(char *from, size_t size)
{
    char to[4096];
    for (int i = 0; i < 30; i++) {
        random_path(to, sizeof to, mount);
        EXPECT(plfs_rename(from, to), PLFS_SUCCESS);
        EXPECT(plfs_access(to, F_OK), PLFS_SUCCESS);
        EXPECT(plfs_access(from, F_OK), PLFS_ENOENT);
        snprintf(from, size, "%s", to);
    }
}

static void rename_test(void)
{
    char file[4096], link[4096], dir[4096];
    snprintf(file, sizeof file, "%s", at("renametest1"));
    snprintf(link, sizeof link, "%s", at("renametest2"));
    snprintf(dir, sizeof dir, "%s", at("dirtoberenamed"));
    EXPECT(plfs_create(file, 0666, 0, pid), PLFS_SUCCESS);
    rename_30_times(file, sizeof file);
    EXPECT(plfs_symlink(file, link), PLFS_SUCCESS);
    rename_30_times(link, sizeof link);
    EXPECT(plfs_mkdir(dir, 0777), PLFS_SUCCESS);
    rename_30_times(dir, sizeof dir);
    EXPECT(plfs_rename(at("renametest1"), at("renametest2")), PLFS_ENOENT);
    EXPECT(plfs_unlink(file), PLFS_SUCCESS);
    EXPECT(plfs_unlink(link), PLFS_SUCCESS);
    EXPECT(plfs_rmdir(dir), PLFS_SUCCESS);
}

/* Removes every entry of dir (each a directory) that is listed; returns
 * how many there were. C++ lists with 2.5's plfs_readdir into a std::set,
 * C with plfs_opendir_c. */
static int remove_listed(const char *dir)
{
    char path[4096];
    int count = 0;
#ifdef __cplusplus
    std::set<std::string> names;
    EXPECT(plfs_readdir(dir, &names), PLFS_SUCCESS);
    for (std::set<std::string>::const_iterator it = names.begin(); it != names.end(); ++it) {
        snprintf(path, sizeof path, "%s/%s", dir, it->c_str());
        EXPECT(plfs_rmdir(path), PLFS_SUCCESS);
        count++;
    }
#else
    Plfs_dirp *dirp = NULL;
    char name[256];
    EXPECT(plfs_opendir_c(dir, &dirp), PLFS_SUCCESS);
    while (plfs_readdir_c(dirp, name, sizeof name) == PLFS_SUCCESS && name[0] != '\0') {
        snprintf(path, sizeof path, "%s/%s", dir, name);
        EXPECT(plfs_rmdir(path), PLFS_SUCCESS);
        count++;
    }
    EXPECT(plfs_closedir_c(dirp), PLFS_SUCCESS);
#endif
    return count;
}

static void dir_test(void)
{
    const char *dir = at("dirtest1");
    char sub[4096];
    int made = 0;
    EXPECT(plfs_mkdir(dir, 0777), PLFS_SUCCESS);
    for (int i = 0; i < 100; i++) {
        random_path(sub, sizeof sub, dir);
        if (plfs_mkdir(sub, 0777) == PLFS_SUCCESS) {
            made++;
        }
    }
    CHECK(made > 90);
    EXPECT(plfs_rmdir(dir), PLFS_ENOTEMPTY);
    EXPECT(remove_listed(dir), made);
    EXPECT(plfs_rmdir(dir), PLFS_SUCCESS);
}

static void truncate_test(void)
{
    const char *path = at("trunctest1");
    Plfs_fd *fd = NULL;
    struct stat st;
    ssize_t bytes = 0;
    int refs = -1;
    EXPECT(plfs_open(&fd, path, O_CREAT | O_RDWR, pid, 0666, NULL), PLFS_SUCCESS);
    EXPECT(plfs_write(fd, "SIMPLE_TRUNCATE_TEST", 21, 0, pid, &bytes), PLFS_SUCCESS);
    EXPECT(bytes, 21);
    EXPECT(plfs_trunc(fd, path, 15, 1), PLFS_SUCCESS);
    EXPECT(plfs_getattr(fd, path, &st, 1), PLFS_SUCCESS);
    EXPECT(st.st_size, 15);
    EXPECT(plfs_close(fd, pid, uid, O_RDWR, NULL, &refs), PLFS_SUCCESS);
    EXPECT(plfs_trunc(NULL, path, 5, 1), PLFS_SUCCESS);
    EXPECT(plfs_getattr(NULL, path, &st, 1), PLFS_SUCCESS);
    EXPECT(st.st_size, 5);
    EXPECT(plfs_unlink(path), PLFS_SUCCESS);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s <plfs mount>\n", argv[0]);
        return 2;
    }
    mount = argv[1];
    pid = getpid();
    uid = getuid();
    gid = getgid();
    srand(25);
    create_test();
    open_close_test();
    read_write_test();
    chmod_test();
    chmod_dir_test();
    link_test();
    chown_test();
    symlink_test();
    rename_test();
    dir_test();
    truncate_test();
    if (failures != 0) {
        fprintf(stderr, "plfs25_unit: %d failures\n", failures);
        return 1;
    }
    printf("plfs25_unit: OK: 11 cases\n");
    return 0;
}
