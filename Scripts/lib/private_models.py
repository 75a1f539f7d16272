"""Processes that each keep a model of their own folder, while all of them list the tree.

Usage: private_models.py FOLDER SEED PROCESSES CALLS

Each process makes CALLS random calls in a folder of its own below FOLDER (p0, p1, ...) on
four file names: O_TRUNC writes, appends (O_APPEND), pwrites past the end, ftruncates, writes
through a shared mapping, renames over each other, renames of the folder itself away and
back, chmod, utime, fsync; it keeps in memory what each file must hold (bytes, mode, a time
set on purpose) and checks a file against it now and then, and every file at the end: size
and mode by stat, bytes by read. Between its calls it lists and stats the whole tree
(`ls -lR`) and makes, removes and renames entries in a shared folder, so that the processes'
listings, lookups and renames meet the others' writes. No interleaving changes what a process's
own files must hold, so any difference is a fault ("p2 op 311: f1: 0 bytes read, want 983").
Every unexpected errno is one too. Exit status 1 on any, with the last calls of the process.

Found, on a mount whose listings handed the kernel the sizes a folder's snapshot had taken:
reads of files just written came back short or empty.
"""
import errno
import mmap
import os
import random
import sys

NAMES = ["f%d" % k for k in range(4)]
# What a disk answers the shared folder's calls when another process got there first.
RACES = {errno.ENOENT, errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR, errno.EINVAL}
KINDS = ["write", "write", "append", "pwrite", "truncate", "mmap", "rename", "rename folder", "chmod", "utime",
         "check", "check", "check", "list all", "shared", "shared", "fsync"]


def list_all(top):
    for folder, folders, files in os.walk(top):
        for name in folders + files:
            try:
                os.lstat(os.path.join(folder, name))
            except FileNotFoundError:
                pass


def shared_call(rng, shared):
    name = shared + "/" + rng.choice("abc")
    kind = rng.randrange(5)
    try:
        if kind == 0:
            os.mkdir(name)
        elif kind == 1:
            os.rmdir(name)
        elif kind == 2:
            os.rename(name, shared + "/" + rng.choice("abc"))
        elif kind == 3:
            with open(name + ".txt", "w") as f:
                f.write("x" * rng.randrange(100))
        else:
            os.unlink(name + ".txt")
    except OSError as error:
        if error.errno not in RACES:
            raise


class Process:
    def __init__(self, top, number, seed):
        self.top, self.number = top, number
        self.rng = random.Random(seed * 1000 + number)
        self.folder = "%s/p%d" % (top, number)
        self.model = {}  # name -> [bytes, mode, mtime in ns set on purpose, or None]
        self.done = []
        self.faults = []

    def fault(self, text):
        self.faults.append("p%d %s" % (self.number, text))
        self.faults.extend("      " + call for call in self.done[-10:])

    def check(self, name, when):
        path = self.folder + "/" + name
        if name not in self.model:
            if os.path.exists(path):
                self.fault("%s: %s exists, removed or renamed away" % (when, name))
            return
        data, mode, mtime = self.model[name]
        status = os.stat(path)
        with open(path, "rb") as f:
            read = f.read()
        wrong = []
        if read != data:
            wrong.append("%d bytes read, want %d" % (len(read), len(data)) if len(read) != len(data) else "other bytes")
        if status.st_size != len(data):
            wrong.append("size %d, want %d" % (status.st_size, len(data)))
        if status.st_mode & 0o777 != mode:
            wrong.append("mode %o, want %o" % (status.st_mode & 0o777, mode))
        if mtime is not None and status.st_mtime_ns != mtime:
            wrong.append("mtime %d, want %d" % (status.st_mtime_ns, mtime))
        if wrong:
            self.fault("%s: %s: %s" % (when, name, "; ".join(wrong)))

    def call(self, index):
        rng, model = self.rng, self.model
        kind, name = rng.choice(KINDS), rng.choice(NAMES)
        path = self.folder + "/" + name
        known = name in model
        if kind == "write":
            data = bytes([rng.randrange(256)]) * rng.randrange(0, 5000)
            fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
            os.write(fd, data)
            os.close(fd)
            model[name] = [data, model[name][1] if known else 0o644, None]
            self.done.append("%d: %s %s, %d bytes" % (index, kind, name, len(data)))
        elif kind == "append" and known:
            data = bytes([rng.randrange(256)]) * rng.randrange(1, 3000)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            os.write(fd, data)
            os.close(fd)
            model[name][0] += data
            model[name][2] = None
            self.done.append("%d: %s %s, %d bytes" % (index, kind, name, len(data)))
        elif kind == "pwrite" and known:
            offset, data = rng.randrange(0, 8000), bytes([rng.randrange(256)]) * rng.randrange(1, 3000)
            fd = os.open(path, os.O_WRONLY)
            os.pwrite(fd, data, offset)
            os.close(fd)
            old = model[name][0].ljust(offset, b"\0")
            model[name][0] = old[:offset] + data + old[offset + len(data):]
            model[name][2] = None
            self.done.append("%d: %s %s, %d bytes at %d" % (index, kind, name, len(data), offset))
        elif kind == "truncate" and known:
            size = rng.randrange(0, 9000)
            fd = os.open(path, os.O_WRONLY)
            os.ftruncate(fd, size)
            os.close(fd)
            model[name][0] = model[name][0][:size].ljust(size, b"\0")
            model[name][2] = None
            self.done.append("%d: %s %s to %d" % (index, kind, name, size))
        elif kind == "mmap" and known and model[name][0]:
            old = model[name][0]
            offset = rng.randrange(0, len(old))
            data = bytes([rng.randrange(256)]) * min(rng.randrange(1, 2000), len(old) - offset)
            fd = os.open(path, os.O_RDWR)
            with mmap.mmap(fd, len(old)) as mapping:
                mapping[offset:offset + len(data)] = data
                if rng.random() < 0.5:
                    mapping.flush()
            os.close(fd)
            model[name][0] = old[:offset] + data + old[offset + len(data):]
            model[name][2] = None
            self.done.append("%d: %s %s, %d bytes at %d" % (index, kind, name, len(data), offset))
        elif kind == "rename" and known:
            other = rng.choice(NAMES)
            if other != name:
                os.rename(path, self.folder + "/" + other)
                model[other] = model.pop(name)
                self.done.append("%d: %s %s to %s" % (index, kind, name, other))
        elif kind == "rename folder":
            os.rename(self.folder, self.folder + "-away")
            os.rename(self.folder + "-away", self.folder)
            self.done.append("%d: %s" % (index, kind))
        elif kind == "chmod" and known:
            mode = rng.choice([0o600, 0o644, 0o755, 0o640])
            os.chmod(path, mode)
            model[name][1] = mode
            self.done.append("%d: %s %s %o" % (index, kind, name, mode))
        elif kind == "utime" and known:
            time = rng.randrange(946684800, 1600000000) * 10**9 + rng.randrange(10**9)
            os.utime(path, ns=(time, time))
            model[name][2] = time
            self.done.append("%d: %s %s %d" % (index, kind, name, time))
        elif kind == "check":
            self.check(name, "call %d" % index)
        elif kind == "list all":
            list_all(self.top)
        elif kind == "shared":
            shared_call(rng, self.top + "/shared")
        elif kind == "fsync" and known:
            fd = os.open(path, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
            self.done.append("%d: %s %s" % (index, kind, name))

    def run(self, calls):
        os.mkdir(self.folder)
        for index in range(calls):
            try:
                self.call(index)
            except OSError as error:
                self.fault("call %d: %s" % (index, error))
        for name in NAMES:
            try:
                self.check(name, "at the end")
            except OSError as error:
                self.fault("at the end: %s: %s" % (name, error))
        return self.faults


def main():
    top, seed, processes, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    os.makedirs(top + "/shared", exist_ok=True)
    children = []
    for number in range(processes):
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            try:
                faults = Process(top, number, seed).run(calls)
            except Exception as error:  # a bug here, not the file system's: said as such
                faults = ["p%d: the script failed: %r" % (number, error)]
            os.write(write_end, "\n".join(faults).encode())
            os._exit(0)
        os.close(write_end)
        children.append((pid, read_end))
    faults = []
    for pid, read_end in children:
        report = b""
        while True:
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            report += chunk
        os.close(read_end)
        os.waitpid(pid, 0)
        if report:
            faults += report.decode().split("\n")
    print("seed %d: %d processes x %d calls, %d faults" % (seed, processes, calls, sum(1 for f in faults if not f.startswith(" "))))
    for fault in faults[:60]:
        print(fault)
    sys.exit(1 if faults else 0)


if __name__ == "__main__":
    main()
