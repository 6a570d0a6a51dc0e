# What a process sees of its own changes to a file through other
# descriptors and by name: a local file system shows each change at once.
# Prints one line per step; the tests compare it with a plain directory's.
import os
import sys
import tempfile

d = sys.argv[1]
name = d + "/changed"
fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
os.write(fd, b"a" * 5)
os.close(fd)
reader = os.open(name, os.O_RDONLY)
writer = os.open(name, os.O_WRONLY)
print("before", os.stat(name).st_size, os.pread(reader, 100, 0))
os.pwrite(writer, b"b" * 10, 0)
print("after a write", os.stat(name).st_size, os.pread(reader, 100, 0))
os.ftruncate(writer, 3)
print("after a truncate", os.stat(name).st_size, os.pread(reader, 100, 0))
later = os.open(name, os.O_RDONLY)
print("a later open", os.pread(later, 100, 0))
for descriptor in (later, writer, reader):
    os.close(descriptor)
os.unlink(name)
with tempfile.NamedTemporaryFile(dir=d) as temporary:
    temporary.write(b"y" * 10)
    temporary.flush()
    print("NamedTemporaryFile", os.path.getsize(temporary.name))
