# posix_fallocate and fallocate(1) on a file: growth, no shrink, the
# errors a local file system gives. Prints one line per step; the tests
# compare it with a plain directory's.
import errno, os, subprocess, sys
d = sys.argv[1]
fd = os.open(d + "/fa", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"abc")
os.posix_fallocate(fd, 0, 8192)
print("grown", os.fstat(fd).st_size, os.pread(fd, 8, 0))
os.posix_fallocate(fd, 0, 100)
print("kept", os.fstat(fd).st_size)
for offset, length in [(-1, 10), (0, 0)]:
    try:
        os.posix_fallocate(fd, offset, length)
    except OSError as e:
        print("refused", errno.errorcode[e.errno])
ro = os.open(d + "/fa", os.O_RDONLY)
try:
    os.posix_fallocate(ro, 0, 20000)
except OSError as e:
    print("read-only", errno.errorcode[e.errno])
os.close(ro)
os.close(fd)
print("closed", os.stat(d + "/fa").st_size)
print("fallocate(1)", subprocess.run(["fallocate", "-l", "16384", d + "/fb"]).returncode, os.stat(d + "/fb").st_size)
