#!/usr/bin/env python3
"""Workers that reach their folders only through a descriptor while the folders move.

Usage: [PAUSE=SECONDS] dirfd_workers.py ROOT SEED WORKERS OPS

Each worker holds a descriptor of its own folder and works only through it (openat with
O_TRUNC, O_APPEND, ftruncate, renameat, unlinkat, fchmodat, fstatat, fsync, listing by
descriptor), keeping a model of the folder (names, bytes, modes), and checks against it now
and then; meanwhile a mover renames the worker folders between parents (a/, b/, a/sub/),
pausing PAUSE seconds (default 0.01) after each rename, and a lister walks the tree. At the
end each folder, found by path, must hold what its model says. Exit status 1 on any fault.

Run by the tests with PAUSE=0 (RaceTests). With PAUSE=0 every fsync once waited as long as
the mover went on: it waited for every rename above its file, those made after it began too
(fixed in the ninety-fourth session; `FsyncBesideRenamesTests`).
"""
import errno, json, os, random, stat, sys, time

root, seed, workers, ops = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
PAUSE = float(os.environ.get("PAUSE", "0.01"))
PARENTS = ["a", "b", "a/sub"]


def where(k):
    for p in PARENTS:
        if os.path.isdir(f"{root}/{p}/w{k}"):
            return f"{root}/{p}/w{k}"
    return None


def worker(k):
    rng = random.Random(seed * 100 + k)
    while True:
        try:
            fd = os.open(where(k), os.O_RDONLY | os.O_DIRECTORY); break
        except (FileNotFoundError, TypeError):  # moved between the look and the open (None: mid-move)
            pass
    model = {}  # name -> [bytes, mode]
    bad, done = [], []
    names = ["x", "y", "z", "Long name"]
    for i in range(ops):
        kind = rng.choice(["write", "write", "append", "rename", "unlink", "chmod", "check", "check", "list", "trunc", "fsync"])
        name = rng.choice(names)
        try:
            if kind == "write":
                data = bytes([rng.randrange(256)]) * rng.randrange(0, 6000)
                f = os.open(name, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644, dir_fd=fd)
                os.write(f, data); os.close(f)
                model[name] = [data, model[name][1] if name in model else 0o644]
            elif kind == "append" and name in model:
                data = bytes([rng.randrange(256)]) * rng.randrange(1, 3000)
                f = os.open(name, os.O_WRONLY | os.O_APPEND, dir_fd=fd)
                os.write(f, data); os.close(f)
                model[name][0] += data
            elif kind == "trunc" and name in model:
                size = rng.randrange(0, 7000)
                f = os.open(name, os.O_WRONLY, dir_fd=fd)
                os.ftruncate(f, size); os.close(f)
                model[name][0] = model[name][0][:size].ljust(size, b"\0")
            elif kind == "rename" and name in model:
                other = rng.choice(names)
                if other != name:
                    os.rename(name, other, src_dir_fd=fd, dst_dir_fd=fd)
                    model[other] = model.pop(name)
            elif kind == "unlink" and name in model:
                os.unlink(name, dir_fd=fd)
                del model[name]
            elif kind == "chmod" and name in model:
                mode = rng.choice([0o600, 0o640, 0o755, 0o644])
                os.chmod(name, mode, dir_fd=fd)
                model[name][1] = mode
            elif kind == "fsync" and name in model:
                f = os.open(name, os.O_RDONLY, dir_fd=fd)
                os.fsync(f); os.close(f)
            elif kind == "list":
                listed = sorted(os.listdir(fd))
                if listed != sorted(model):
                    bad.append(f"w{k} op {i}: listed {listed}, want {sorted(model)}")
            elif kind == "check" and name in model:
                st = os.stat(name, dir_fd=fd)
                f = os.open(name, os.O_RDONLY, dir_fd=fd)
                got = b""
                while True:
                    chunk = os.read(f, 65536)
                    if not chunk: break
                    got += chunk
                os.close(f)
                data, mode = model[name]
                if got != data or st.st_size != len(data) or stat.S_IMODE(st.st_mode) != mode:
                    bad.append(f"w{k} op {i}: {name}: read {len(got)} size {st.st_size} mode {stat.S_IMODE(st.st_mode):o}, want {len(data)} mode {mode:o}; last {done[-6:]}")
            done.append(f"{i}:{kind} {name}")
        except OSError as e:
            bad.append(f"w{k} op {i}: {kind} {name}: {e}; last {done[-6:]}")
        if len(bad) > 3:
            break
    # at the end: the folder, found by path, holds what the model says
    os.close(fd)
    return bad, model


def mover(stop):
    rng = random.Random(seed)
    while not os.path.exists(stop):
        k = rng.randrange(workers)
        src = where(k)
        if src is None: continue
        dst = f"{root}/{rng.choice(PARENTS)}/w{k}"
        if dst == src: continue
        try:
            os.rename(src, dst); time.sleep(PAUSE)
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.EINVAL): raise


def lister(stop):
    while not os.path.exists(stop):
        for folder, dirs, files in os.walk(root):
            for n in files:
                try: os.lstat(os.path.join(folder, n))
                except FileNotFoundError: pass


def main():
    for p in PARENTS: os.makedirs(f"{root}/{p}", exist_ok=True)
    for k in range(workers): os.mkdir(f"{root}/a/w{k}")
    stop = f"{root}/stop"
    helpers = []
    for job in (mover, lister):
        pid = os.fork()
        if pid == 0:
            job(stop); os._exit(0)
        helpers.append(pid)
    kids = []
    for k in range(workers):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            bad, model = worker(k)
            os.write(w, json.dumps({"bad": bad, "model": {n: [v[0].hex(), v[1]] for n, v in model.items()}}).encode())
            os._exit(0)
        os.close(w); kids.append((pid, r))
    results = []
    for pid, r in kids:
        out = b""
        while True:
            c = os.read(r, 1 << 20)
            if not c: break
            out += c
        os.waitpid(pid, 0)
        results.append(json.loads(out))
    open(stop, "w").close()
    for pid in helpers: os.waitpid(pid, 0)
    bad = []
    for k, res in enumerate(results):
        bad += res["bad"]
        path = where(k)
        want = {n: (bytes.fromhex(h), m) for n, (h, m) in res["model"].items()}
        have = sorted(os.listdir(path))
        if have != sorted(want): bad.append(f"w{k} at end: {have} want {sorted(want)}")
        for n, (data, mode) in want.items():
            try:
                got = open(f"{path}/{n}", "rb").read(); m = stat.S_IMODE(os.stat(f"{path}/{n}").st_mode)
                if got != data or m != mode: bad.append(f"w{k} at end: {n}: {len(got)} bytes mode {m:o}, want {len(data)} {mode:o}")
            except OSError as e:
                bad.append(f"w{k} at end: {n}: {e}")
    print(f"seed {seed}: {workers} workers x {ops} ops, {len(bad)} faults")
    for b in bad[:30]: print(b)
    sys.exit(1 if bad else 0)


main()
