# A file renamed, then unlinked, while a descriptor holds it open: POSIX
# keeps it readable and writable through the descriptor until the last
# close, and fstat follows it (sqlite's journals, temporary files, log
# rotation), and writes through it after a rename reach the file at its
# new name. Prints a transcript to compare with a plain directory's.
# Usage: open_across_unlink.py DIR one|two ("two": another process holds
# the descriptor while this one renames and unlinks).
import os
import subprocess
import sys

directory, holders = sys.argv[1], sys.argv[2]
first, second = os.path.join(directory, "held"), os.path.join(directory, "moved")


def step(label, call):
    try:
        print(label, call())
    except OSError as error:
        print(label, "error", error.strerror)


if holders == "two":
    # The holder: waits for a line on stdin between its two turns.
    holder = (
        "import os, sys\n"
        "fd = os.open(sys.argv[1], os.O_RDWR)\n"
        "print('ready', flush=True); sys.stdin.readline()\n"
        "print('read', os.pread(fd, 16, 0)); os.pwrite(fd, b'xy', 5)\n"
        "print('read', os.pread(fd, 16, 0)); print('links', os.fstat(fd).st_nlink)\n"
        "os.close(fd)\n"
    )
    with open(first, "wb") as f:
        f.write(b"hello")
    child = subprocess.Popen([sys.executable, "-c", holder, first], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    print(child.stdout.readline().strip())
    step("rename", lambda: os.rename(first, second))
    step("unlink", lambda: os.unlink(second))
    child.stdin.write("go\n")
    child.stdin.flush()
    print(child.stdout.read().strip())
    print("exit", child.wait())
else:
    with open(first, "wb") as f:
        f.write(b"hello")
    fd = os.open(first, os.O_RDWR)
    step("rename", lambda: os.rename(first, second))
    step("read", lambda: os.pread(fd, 16, 0))
    step("write", lambda: os.pwrite(fd, b"HE", 0))
    step("fstat size", lambda: os.fstat(fd).st_size)
    step("unlink", lambda: os.unlink(second))
    step("read", lambda: os.pread(fd, 16, 0))
    step("write", lambda: os.pwrite(fd, b"xy", 5))
    step("read", lambda: os.pread(fd, 16, 0))
    step("fstat", lambda: (os.fstat(fd).st_size, os.fstat(fd).st_nlink))
    step("exists", lambda: os.path.exists(second))
    os.close(fd)
    # Renamed, written through the descriptor, closed, read by name: some
    # of these names live on another backend than their old ones (n-n).
    for turn in range(6):
        old, new = os.path.join(directory, f"a{turn}"), os.path.join(directory, f"zz{turn}")
        with open(old, "wb") as f:
            f.write(b"hello")
        fd = os.open(old, os.O_RDWR)
        os.rename(old, new)
        step(f"write {turn}", lambda: os.pwrite(fd, b"HE", 0))
        os.close(fd)
        step(f"by name {turn}", lambda: open(new, "rb").read())
        os.unlink(new)
step("listed", lambda: sorted(os.listdir(directory)))
