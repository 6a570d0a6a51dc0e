# preadv2/pwritev2 (what Python's os.preadv and os.pwritev call), their
# RWF_* flags, pwrite on an O_APPEND description (Linux appends),
# O_TMPFILE and a name longer than NAME_MAX. Prints one line per step;
# the tests compare it with a plain directory's.
import errno
import os
import sys
import tempfile

d = sys.argv[1]


def step(name, action):
    try:
        print(name, action(), flush=True)
    except OSError as error:
        print(name, "error", errno.errorcode[error.errno], flush=True)


def read_into(fd, sizes, offset):
    buffers = [bytearray(size) for size in sizes]
    return os.preadv(fd, buffers, offset), [bytes(buffer) for buffer in buffers]


fd = os.open(d + "/v", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
step("pwritev", lambda: os.pwritev(fd, [b"ab", b"cd", b"ef"], 0))
step("preadv", lambda: read_into(fd, [2, 3], 1))
step("preadv at the offset", lambda: (os.lseek(fd, 2, os.SEEK_SET), read_into(fd, [2], -1), os.lseek(fd, 0, os.SEEK_CUR)))
step("pwritev RWF_DSYNC", lambda: os.pwritev(fd, [b"S"], 0, os.RWF_DSYNC))
step("pwritev RWF_APPEND", lambda: (os.pwritev(fd, [b"+"], 1, os.RWF_APPEND), os.pread(fd, 20, 0), os.lseek(fd, 0, os.SEEK_CUR)))
step("pwritev RWF_APPEND at the offset", lambda: (os.pwritev(fd, [b"!"], -1, os.RWF_APPEND), os.pread(fd, 20, 0), os.lseek(fd, 0, os.SEEK_CUR)))
os.close(fd)
fd = os.open(d + "/v", os.O_WRONLY | os.O_APPEND)
step("O_APPEND pwrite", lambda: (os.pwrite(fd, b"X", 0), os.lseek(fd, 0, os.SEEK_CUR), open(d + "/v", "rb").read()))
step("O_APPEND pwritev", lambda: (os.pwritev(fd, [b"Y"], 0), open(d + "/v", "rb").read()))
step("O_APPEND write", lambda: (os.write(fd, b"Z"), os.lseek(fd, 0, os.SEEK_CUR), open(d + "/v", "rb").read()))
os.close(fd)
step("a 256-byte name", lambda: open(d + "/" + "n" * 256, "w"))
step("O_TMPFILE", lambda: (os.close(os.open(d, os.O_TMPFILE | os.O_RDWR, 0o600)), "opened")[1])
with tempfile.TemporaryFile(dir=d) as temporary:
    temporary.write(b"t" * 5)
    temporary.seek(0)
    print("TemporaryFile", temporary.read())
print("listing", sorted(os.listdir(d)))
