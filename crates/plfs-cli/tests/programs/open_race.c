/* Opens of one name racing its publication and removal by other processes,
 * the way a reader polls for a result file that writers keep replacing.
 *
 *   open_race DIR w SECONDS   publish DIR/pub (write DIR/tmp.PID whole,
 *                             rename it onto DIR/pub), unlink it, again
 *   open_race DIR r SECONDS   open DIR/pub read-only, read it, close, again
 *
 * On a local file system an open either finds a whole published file or
 * fails with ENOENT; every eighth open here reads what it found. A reader prints `opens= whole= errors= short=`
 * (successful opens, whole reads, other errors, short or wrong reads) and
 * each failure on stderr. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SIZE 4096

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: open_race DIR w|r SECONDS\n");
        return 2;
    }
    char pub[4096], tmp[4096];
    snprintf(pub, sizeof pub, "%s/pub", argv[1]);
    snprintf(tmp, sizeof tmp, "%s/tmp.%d", argv[1], (int)getpid());
    double until = now() + atof(argv[3]);
    static char buf[SIZE + 1];
    long opens = 0, whole = 0, errors = 0, shorts = 0;
    if (strcmp(argv[2], "w") == 0) {
        memset(buf, 'x', SIZE);
        while (now() < until) {
            int fd = open(tmp, O_CREAT | O_WRONLY | O_TRUNC, 0644);
            if (fd < 0 || write(fd, buf, SIZE) != SIZE || close(fd) != 0 || rename(tmp, pub) != 0) {
                fprintf(stderr, "publish %s: %s\n", pub, strerror(errno));
                return 1;
            }
            if (unlink(pub) != 0 && errno != ENOENT) {
                fprintf(stderr, "unlink %s: %s\n", pub, strerror(errno));
                return 1;
            }
        }
        return 0;
    }
    while (now() < until) {
        int fd = open(pub, O_RDONLY);
        if (fd < 0) {
            if (errno != ENOENT) {
                errors++;
                fprintf(stderr, "open %s: %s\n", pub, strerror(errno));
            }
            continue;
        }
        /* Most opens only open and close, which is where the race is
         * narrowest; every eighth reads the file whole. */
        if (opens++ % 8 != 0) {
            close(fd);
            continue;
        }
        ssize_t got = 0, n;
        while ((n = read(fd, buf + got, sizeof buf - (size_t)got)) > 0) got += n;
        if (n < 0) {
            errors++;
            fprintf(stderr, "read %s: %s\n", pub, strerror(errno));
        } else if (got != SIZE || buf[0] != 'x' || buf[SIZE - 1] != 'x') {
            shorts++;
            fprintf(stderr, "read %s: %zd bytes\n", pub, got);
        } else {
            whole++;
        }
        close(fd);
    }
    printf("opens=%ld whole=%ld errors=%ld short=%ld\n", opens, whole, errors, shorts);
    return 0;
}
