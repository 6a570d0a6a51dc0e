/*
 * The checking helpers the C API test programs share: EXPECT compares a
 * plfs_error_t with the one wanted, CHECK a condition; both count, name the
 * failing line on stderr and let the program go on, so one run reports
 * every mismatch; main() prints the counts and exits non-zero on any failure.
 */
#ifndef PLFS_TEST_CHECK_H
#define PLFS_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plfs.h"

static int failures = 0;
static int checks = 0;

#define EXPECT(call, want)                                                                   \
    do {                                                                                     \
        plfs_error_t got_ = (call);                                                          \
        checks++;                                                                            \
        if (got_ != (want)) {                                                                \
            fprintf(stderr, "%s:%d: %s = %d (%s), expected %d (%s)\n", __FILE__, __LINE__,   \
                    #call, (int)got_, strplfserr(got_), (int)(want), strplfserr(want));      \
            failures++;                                                                      \
        }                                                                                    \
    } while (0)

#define CHECK(condition)                                                                     \
    do {                                                                                     \
        checks++;                                                                            \
        if (!(condition)) {                                                                  \
            fprintf(stderr, "%s:%d: %s is false\n", __FILE__, __LINE__, #condition);         \
            failures++;                                                                      \
        }                                                                                    \
    } while (0)

/* dir + "/" + name, malloc'd; exits on allocation failure. */
__attribute__((unused)) static char *join(const char *dir, const char *name)
{
    size_t bytes = strlen(dir) + strlen(name) + 2;
    char *path = malloc(bytes);
    if (path == NULL) {
        perror("malloc");
        exit(2);
    }
    snprintf(path, bytes, "%s/%s", dir, name);
    return path;
}

static const char RECORD[] = "0123456789abcdefghijklmnopqrstuvwxyz";
#define RECORD_BYTES ((ssize_t)(sizeof RECORD - 1))

#endif
