/*
 * plfs_statvfs of a mount over several backends: prints the mount's size,
 * free bytes and inode count as plfs sums them, so the test can compare
 * them with the backends' own file systems.
 *
 * usage: statvfs_sum <mount point>
 */
#include <sys/statvfs.h>

#include "check.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s <mount point>\n", argv[0]);
        return 2;
    }
    struct statvfs space;
    EXPECT(plfs_statvfs(argv[1], &space), PLFS_SUCCESS);
    CHECK(space.f_frsize > 0);
    printf("size %llu files %llu\n", (unsigned long long)space.f_blocks * space.f_frsize,
           (unsigned long long)space.f_files);
    if (failures > 0) {
        fprintf(stderr, "statvfs_sum: %d of %d checks failed\n", failures, checks);
        return 1;
    }
    printf("statvfs_sum: OK\n");
    return 0;
}
