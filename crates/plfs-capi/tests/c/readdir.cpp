// PLFS 2.5's plfs_readdir from C++: the void * is a std::set<std::string>.
//
// usage: readdir <plfs mount>   (creates a, b/ and c there, lists them)
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <set>
#include <string>

#include "plfs.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s <plfs mount>\n", argv[0]);
        return 2;
    }
    const std::string mount = argv[1];
    if (plfs_create((mount + "/a").c_str(), 0644, 0, getpid()) != PLFS_SUCCESS ||
        plfs_mkdir((mount + "/b").c_str(), 0755) != PLFS_SUCCESS ||
        plfs_create((mount + "/c").c_str(), 0644, 0, getpid()) != PLFS_SUCCESS) {
        std::fprintf(stderr, "readdir: could not create the entries\n");
        return 1;
    }
    std::set<std::string> names;
    plfs_error_t ret = plfs_readdir(mount.c_str(), &names);
    const std::set<std::string> expected = {"a", "b", "c"};
    if (ret != PLFS_SUCCESS || names != expected) {
        std::fprintf(stderr, "readdir: %s, %zu names\n", strplfserr(ret), names.size());
        return 1;
    }
    std::set<std::string> empty;
    if (plfs_readdir((mount + "/b").c_str(), &empty) != PLFS_SUCCESS || !empty.empty()) {
        std::fprintf(stderr, "readdir: b/ is not empty\n");
        return 1;
    }
    if (plfs_readdir((mount + "/missing").c_str(), &names) != PLFS_ENOENT ||
        plfs_readdir((mount + "/a").c_str(), &names) != PLFS_ENOTDIR ||
        plfs_readdir(mount.c_str(), NULL) != PLFS_EINVAL) {
        std::fprintf(stderr, "readdir: wrong error codes\n");
        return 1;
    }
    std::printf("readdir: OK: %zu names\n", names.size());
    return 0;
}
