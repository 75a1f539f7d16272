#!/usr/bin/env python3
"""Edge cases of POSIX calls, each printed as one line (its result or its errno), in the
folder given: run in a folder of the mount and in one on local disk, the two outputs must be
the same (Tests/MountTests/ToolWorkloadTests). Renames of folders onto folders, files and
their own subfolders, trailing slashes, O_APPEND with pwrite, O_DIRECT, holes, mmap, locks,
descriptors of unlinked and renamed-over files, seekdir, deletes during a listing, an O_EXCL
race, a removed working folder, and which times each kind of change moves.

Left out: what doc/SEMANTICS.md says differs (symlinks, hard links and FIFOs, user xattrs,
SEEK_DATA, a folder's link count, reads moving the access time).
Usage: python3 Scripts/lib/edge_calls.py FOLDER"""
import ctypes
import ctypes.util
import errno
import fcntl
import mmap
import multiprocessing
import os
import stat
import sys

root = os.path.abspath(sys.argv[1])
os.chdir(root)
out = []


def check(name, call):
    try:
        out.append(f"{name}: ok {call()!r}")
    except OSError as error:
        out.append(f"{name}: {errno.errorcode.get(error.errno, error.errno)}")


def write(path, data=b"x"):
    with open(path, "wb") as file:
        file.write(data)


def read(path):
    with open(path, "rb") as file:
        return file.read()


# Renames, removals and creations that must fail, and how.
os.mkdir("d"); write("d/f", b"hello"); os.mkdir("e"); write("e/g"); os.mkdir("empty")
check("rename folder onto a non-empty folder", lambda: os.rename("d", "e"))
check("rename folder onto an empty folder", lambda: os.rename("d", "empty"))
check("what it holds then", lambda: sorted(os.listdir("empty")))
check("rename folder onto a file", lambda: os.rename("empty", "e/g"))
check("rename file onto a folder", lambda: os.rename("e/g", "empty"))
check("rename folder into itself", lambda: os.rename("empty", "empty/sub"))
os.mkdir("empty/sub2")
check("rename folder into its subfolder", lambda: os.rename("empty", "empty/sub2/x"))
check("rmdir of a file", lambda: os.rmdir("e/g"))
check("unlink of a folder", lambda: os.unlink("e"))
check("mkdir of an existing name", lambda: os.mkdir("e"))
check("O_EXCL of an existing file", lambda: os.open("e/g", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
check("open a folder for writing", lambda: os.open("e", os.O_WRONLY))
check("truncate a folder", lambda: os.truncate("e", 0))
check("open file/", lambda: os.open("e/g/", os.O_RDONLY))
check("stat file/x", lambda: os.stat("e/g/x"))
check("mkdir under a file", lambda: os.mkdir("e/g/x"))
check("name of 255 bytes", lambda: os.close(os.open("a" * 255, os.O_CREAT | os.O_WRONLY)))
check("name of 256 bytes", lambda: os.close(os.open("a" * 256, os.O_CREAT | os.O_WRONLY)))
check("rmdir of a non-empty folder", lambda: os.rmdir("e"))
check("rmdir folder/.", lambda: os.rmdir("e/."))
check("rmdir folder/..", lambda: os.rmdir("e/.."))
check("rename a file to itself", lambda: os.rename("e/g", "e/g"))
check("rename a folder to itself", lambda: os.rename("e", "e"))
check("rename a missing name", lambda: os.rename("nope", "x"))
check("rename into a missing folder", lambda: os.rename("e/g", "nodir/g"))
check("mkdir name/", lambda: os.mkdir("slash/"))
check("O_CREAT name/", lambda: os.open("newf/", os.O_CREAT | os.O_WRONLY))
check("rename file/ to a name", lambda: os.rename("e/g/", "g2"))
check("rmdir name/", lambda: os.rmdir("slash/"))

# Bytes: holes, appends, read-only descriptors, mappings, O_DIRECT, growth.
fd = os.open("hole", os.O_CREAT | os.O_RDWR); os.pwrite(fd, b"z", 10000); os.close(fd)
check("a hole reads as zeros", lambda: (os.stat("hole").st_size, read("hole")[:5], read("hole").count(0)))
fd = os.open("app", os.O_CREAT | os.O_WRONLY | os.O_APPEND); os.write(fd, b"abc"); os.pwrite(fd, b"XY", 0); os.close(fd)
check("pwrite with O_APPEND appends", lambda: read("app"))
fd = os.open("app", os.O_RDONLY)
check("write to a read-only descriptor", lambda: os.write(fd, b"q"))
check("ftruncate of a read-only descriptor", lambda: os.ftruncate(fd, 0))
os.close(fd)
check("O_RDONLY|O_TRUNC", lambda: (os.close(os.open("app", os.O_RDONLY | os.O_TRUNC)), os.stat("app").st_size))
write("a", b"0123456789")
fd = os.open("a", os.O_RDWR | os.O_APPEND)
check("ftruncate then append", lambda: (os.ftruncate(fd, 3), os.write(fd, b"Z"), os.pread(fd, 20, 0)))
os.close(fd)
check("truncate to grow", lambda: (os.truncate("a", 8), read("a")))
write("m", b"\0" * 8192)
fd = os.open("m", os.O_RDWR); mapping = mmap.mmap(fd, 8192); mapping[100:105] = b"MMAPD"; mapping.flush(); mapping.close(); os.close(fd)
check("a mapping's write read back", lambda: read("m")[100:105])
write("mp", b"A" * 8192)
fd = os.open("mp", os.O_RDWR); mapping = mmap.mmap(fd, 8192)
check("O_TRUNC while mapped", lambda: (os.close(os.open("mp", os.O_WRONLY | os.O_TRUNC)), os.stat("mp").st_size))
mapping.close(); os.close(fd)


def direct():
    fd = os.open("direct", os.O_CREAT | os.O_RDWR | os.O_DIRECT)
    out_buffer = mmap.mmap(-1, 4096); out_buffer.write(b"D" * 4096)
    written = os.write(fd, out_buffer)
    os.lseek(fd, 0, os.SEEK_SET)
    in_buffer = mmap.mmap(-1, 4096)
    got = os.readv(fd, [in_buffer])
    os.close(fd)
    return written, got, in_buffer[:3]


check("O_DIRECT", direct)
fd = os.open("far", os.O_CREAT | os.O_RDWR); os.pwrite(fd, b"E", 20_000_000); os.close(fd)
check("a write far past the end", lambda: (os.stat("far").st_size, read("far")[10_000_000:10_000_004]))
check("posix_fallocate", lambda: (lambda fd: (os.posix_fallocate(fd, 0, 100000), os.fstat(fd).st_size, os.close(fd)))(os.open("a", os.O_RDWR)))
descriptors = [os.open("a", os.O_RDWR) for _ in range(50)]
for i, each in enumerate(descriptors):
    os.pwrite(each, bytes([65 + i % 26]), i)
for each in descriptors:
    os.close(each)
check("50 descriptors of one file", lambda: read("a")[:50])
fd = os.open("hole", os.O_RDONLY)
check("SEEK_END", lambda: os.lseek(fd, 0, os.SEEK_END))
os.close(fd)
check("readlink of a file", lambda: os.readlink("app"))
write("z", b"zz"); os.chmod("z", 0)
check("root reads a file of mode 0", lambda: read("z"))
check("a create of mode 0 writes", lambda: (lambda fd: (os.write(fd, b"ok"), os.close(fd)))(os.open("m0", os.O_CREAT | os.O_WRONLY, 0)))
check("its mode", lambda: oct(os.stat("m0").st_mode & 0o7777))

# Descriptors whose names went, moved or were taken.
fd = os.open("u", os.O_CREAT | os.O_RDWR); os.write(fd, b"data"); os.unlink("u")
check("fstat of an unlinked file", lambda: (os.fstat(fd).st_nlink, os.fstat(fd).st_size, os.pread(fd, 10, 0)))
os.close(fd)
write("ro1", b"one"); write("ro2", b"two")
fd = os.open("ro2", os.O_RDONLY); os.rename("ro1", "ro2")
check("a renamed-over file read", lambda: (os.pread(fd, 10, 0), read("ro2")))
os.close(fd)
write("ren", b"first")
fd = os.open("ren", os.O_RDWR); os.rename("ren", "ren2"); os.write(fd, b"SECOND"); os.close(fd)
check("a write after the file's rename", lambda: read("ren2"))
os.mkdir("dd"); fd = os.open("dd/f", os.O_CREAT | os.O_RDWR); os.rename("dd", "dd2"); os.write(fd, b"inner"); os.fsync(fd); os.close(fd)
check("a write after its folder's rename", lambda: read("dd2/f"))
fd = os.open("dd2/f", os.O_RDWR); os.unlink("dd2/f"); write("dd2/f", b"new"); os.pwrite(fd, b"OLD", 0)
check("an unlinked file beside its new namesake", lambda: (os.pread(fd, 10, 0), read("dd2/f")))
os.close(fd)
fd = os.open("app", os.O_RDWR)
check("flock", lambda: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB))
check("lockf", lambda: fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB))
os.close(fd)

# Listings.
os.mkdir("big")
for i in range(2000):
    write(f"big/{i:05}")


def seekdir():
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.opendir.restype = ctypes.c_void_p
    libc.readdir.restype = ctypes.c_void_p; libc.readdir.argtypes = [ctypes.c_void_p]
    libc.telldir.restype = ctypes.c_long; libc.telldir.argtypes = [ctypes.c_void_p]
    libc.seekdir.argtypes = [ctypes.c_void_p, ctypes.c_long]
    libc.closedir.argtypes = [ctypes.c_void_p]
    folder = libc.opendir(b"big")
    names, position = [], None
    for i in range(1000):
        if i == 500:
            position = libc.telldir(folder)
        names.append(ctypes.string_at(libc.readdir(folder) + 19))  # d_name in struct dirent64
    libc.seekdir(folder, position)
    again = ctypes.string_at(libc.readdir(folder) + 19)
    libc.closedir(folder)
    return again == names[500], len(names)


check("seekdir to a telldir", seekdir)


def listing_while_deleting():
    seen = set()
    with os.scandir("big") as entries:
        for k, entry in enumerate(entries):
            seen.add(entry.name)
            if k == 10:
                for j in range(1000, 2000):
                    os.unlink(f"big/{j:05}")
    return len(seen) >= 1000, all(f"{j:05}" in seen for j in range(1000))


check("a listing while half the folder goes", listing_while_deleting)
check("what is left", lambda: len(os.listdir("big")))
check("scandir's types", lambda: sorted({(entry.is_dir(), entry.is_file()) for entry in os.scandir(".")}))


def exclusive(_):
    try:
        os.close(os.open(os.path.join(root, "excl"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return 1
    except OSError:
        return 0


with multiprocessing.Pool(4) as pool:
    check("O_EXCL race of 8: winners", lambda: sum(pool.map(exclusive, range(8))))
fd = os.open("big", os.O_RDONLY | os.O_DIRECTORY)
check("fsync of a folder", lambda: os.fsync(fd))
os.close(fd)

# A working folder removed.
os.mkdir("gone"); os.chdir("gone"); os.rmdir("../gone")
check("create in a removed working folder", lambda: os.open("x", os.O_CREAT | os.O_WRONLY))
check("mkdir in it", lambda: os.mkdir("sub"))
check("list it", lambda: os.listdir("."))
check("stat it", lambda: (os.stat(".").st_nlink, stat.S_ISDIR(os.stat(".").st_mode)))
os.chdir(root)

# Times: which changes move mtime and ctime, and times set (atime too) read back exactly.
def old(path):
    os.utime(path, (1000, 1000))


def moved(path):
    status = os.stat(path)
    return status.st_mtime > 1000, status.st_ctime > 1000


for name, setup, change in [
    ("O_TRUNC of an empty file", lambda p: write(p, b""), lambda p: os.close(os.open(p, os.O_WRONLY | os.O_TRUNC))),
    ("O_TRUNC", write, lambda p: os.close(os.open(p, os.O_WRONLY | os.O_TRUNC))),
    ("truncate to its size", lambda p: write(p, b"abc"), lambda p: os.truncate(p, 3)),
    ("ftruncate to its size", lambda p: write(p, b"abc"), lambda p: (lambda fd: (os.ftruncate(fd, 3), os.close(fd)))(os.open(p, os.O_RDWR))),
    ("a write of 0 bytes", write, lambda p: (lambda fd: (os.write(fd, b""), os.close(fd)))(os.open(p, os.O_WRONLY))),
    ("a read", write, lambda p: read(p)),
    ("an append", write, lambda p: (lambda fd: (os.write(fd, b"d"), os.close(fd)))(os.open(p, os.O_WRONLY | os.O_APPEND))),
    ("chmod", write, lambda p: os.chmod(p, 0o640)),
    ("utime to now", write, lambda p: os.utime(p, None)),
]:
    path = "t-" + name.replace(" ", "-")
    setup(path); old(path); change(path)
    check(f"times after {name}", lambda: moved(path))
write("t-rename"); old("t-rename"); os.rename("t-rename", "t-renamed")
check("times after a rename", lambda: moved("t-renamed"))
os.mkdir("tf"); old("tf"); write("tf/x")
check("a folder's times after a create in it", lambda: moved("tf"))
old("tf"); os.unlink("tf/x")
check("after an unlink in it", lambda: moved("tf"))
old("tf"); os.mkdir("tf/s")
check("after a mkdir in it", lambda: moved("tf"))
old("tf"); os.chmod("tf", 0o700)
check("after its chmod", lambda: moved("tf"))
write("ts")
check("times set, nanoseconds too", lambda: (os.utime("ts", ns=(1_000_000_000, 2_000_000_123)), os.stat("ts").st_atime_ns, os.stat("ts").st_mtime_ns))
check("the access time alone", lambda: (os.utime("ts", ns=(5_000_000_000, os.stat("ts").st_mtime_ns)), os.stat("ts").st_atime_ns, os.stat("ts").st_mtime_ns))
check("a folder's", lambda: (os.utime("tf", ns=(7_000_000_000, 8_000_000_000)), os.stat("tf").st_atime_ns, os.stat("tf").st_mtime_ns))
check("before 1970", lambda: (os.utime("ts", ns=(-1_000_000_000, 0)), os.stat("ts").st_atime_ns, os.stat("ts").st_mtime_ns))
check("after 2038", lambda: (os.utime("ts", (4_000_000_000, 4_000_000_000)), os.stat("ts").st_mtime))
check("modes", lambda: (os.chmod("ts", 0o600), os.chmod("tf", 0o700), oct(os.stat("ts").st_mode), oct(os.stat("tf").st_mode)))

check("what the folder holds at the end", lambda: sorted(os.listdir(".")))
print("\n".join(out))
