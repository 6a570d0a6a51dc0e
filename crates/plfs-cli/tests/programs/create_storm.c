#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
/* create_storm DIR MARKDIR RANK N: creates DIR/rRANK with O_EXCL (as
   mdtest did), writes 100 bytes and closes it, waits until all N ranks have
   closed theirs (a marker file each in MARKDIR, a real directory), then
   stats every rank's file and prints how many are missing or not 100 bytes
   long (each named on stderr). */
int main(int argc, char **argv) {
    const char *dir = argv[1], *marks = argv[2];
    int rank = atoi(argv[3]), n = atoi(argv[4]), bad = 0;
    char path[4096], mark[4096], buf[100];
    memset(buf, 'x', sizeof buf);
    snprintf(path, sizeof path, "%s/r%d", dir, rank);
    int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);
    if (fd < 0 || write(fd, buf, 100) != 100 || close(fd) != 0) { perror(path); return 2; }
    snprintf(mark, sizeof mark, "%s/m%d", marks, rank);
    close(open(mark, O_CREAT | O_WRONLY, 0644));
    for (;;) {
        int done = 0;
        for (int i = 0; i < n; i++) {
            struct stat st;
            snprintf(mark, sizeof mark, "%s/m%d", marks, i);
            done += stat(mark, &st) == 0;
        }
        if (done == n) break;
        usleep(1000);
    }
    for (int i = 0; i < n; i++) {
        struct stat st;
        snprintf(path, sizeof path, "%s/r%d", dir, i);
        if (stat(path, &st) != 0 || st.st_size != 100) { bad++; fprintf(stderr, "rank %d: %s size %ld\n", rank, path, (long)st.st_size); }
    }
    printf("%d\n", bad);
    return 0;
}
