"""Random file-system calls in one small tree, from several processes at once.

Usage: shared_tree_calls.py FOLDER SEED PROCESSES CALLS [PROGRESS_FILE]
       shared_tree_calls.py --api URL TOKEN DROPBOX_FOLDER SEED CALLS

Each process makes CALLS random calls (mkdir, rmdir, rename, writes through each open mode,
truncate, read, unlink, listdir, fsync, short pauses) on paths one to three names deep below
FOLDER, drawn from a few names so that the processes meet on the same entries. The outcome of
each call depends on the interleaving, so nothing predicts it; what is checked is that no call
fails as a call on a local disk never would: the errnos a disk gives such calls (ENOENT,
EEXIST, ENOTDIR, EISDIR, ENOTEMPTY, EINVAL) are expected, any other is printed as
"unexpected ERRNO CALL PATH [PATH2]" and makes the exit status 1.
With PROGRESS_FILE, the count of calls made by all processes is appended to it every 20
calls (for a caller that acts once enough were made: a kill in the middle).
With --api, one process makes CALLS changes on the same paths through Dropbox's HTTP API
(URL, with TOKEN) below DROPBOX_FOLDER instead, as another client: uploads, deletes, moves,
new folders; refusals (409) are expected.
Used by Scripts/stress-two-mounts, which runs it on two mounts of one account at once, and by
the mount tests' SharedTreeStressTests.
SHARED_TREE_KILLS=1 expects ENOTCONN and ECONNABORTED too (the daemon killed meanwhile).
"""
import errno
import http.client
import json
import multiprocessing
import os
import random
import sys
import time
import urllib.error
import urllib.request

NAMES = ["n%d" % i for i in range(8)]
EXPECTED = {errno.ENOENT, errno.EEXIST, errno.ENOTDIR, errno.EISDIR, errno.ENOTEMPTY, errno.EINVAL}
# SHARED_TREE_KILLS=1: the daemon is killed (-9) and mounted again meanwhile; a call under way
# then fails with ENOTCONN or ECONNABORTED.
if os.environ.get("SHARED_TREE_KILLS"):
    EXPECTED |= {errno.ENOTCONN, errno.ECONNABORTED}


def random_path(rng):
    depth = rng.choices([1, 2, 3], weights=[5, 4, 2])[0]
    return "/".join(rng.choice(NAMES) for _ in range(depth))


KINDS = [(0.14, "mkdir"), (0.22, "rmdir"), (0.40, "rename"), (0.58, "write"), (0.63, "truncate"), (0.75, "read"),
         (0.84, "unlink"), (0.89, "listdir"), (0.93, "sleep"), (1.0, "fsync")]


def call(rng, folder, last):
    """Makes one random call; `last` is set to its kind and paths first, for the report."""
    r = rng.random()
    name, other = random_path(rng), random_path(rng)
    p, q = folder + "/" + name, folder + "/" + other
    last[:] = [next(kind for bound, kind in KINDS if r < bound), name, other]
    if r < 0.14:
        os.mkdir(p)
    elif r < 0.22:
        os.rmdir(p)
    elif r < 0.40:
        os.rename(p, q)
    elif r < 0.58:
        flags = rng.choice([os.O_WRONLY | os.O_CREAT | os.O_TRUNC, os.O_RDWR | os.O_CREAT,
                            os.O_WRONLY | os.O_CREAT | os.O_APPEND, os.O_RDWR])
        fd = os.open(p, flags, 0o644)
        try:
            if rng.random() < 0.85:
                os.pwrite(fd, bytes([rng.randint(0, 255)]) * rng.randint(1, 9000), rng.randint(0, 60000))
            if rng.random() < 0.1:
                os.fsync(fd)
        finally:
            os.close(fd)
    elif r < 0.63:
        os.truncate(p, rng.randint(0, 20000))
    elif r < 0.75:
        with open(p, "rb") as f:
            f.read()
    elif r < 0.84:
        os.unlink(p)
    elif r < 0.89:
        os.listdir(p)
    elif r < 0.93:
        time.sleep(rng.random() * 0.2)  # lets a round of uploads or renames start
    else:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def process(folder, seed, number, calls, failures, made, progress):
    rng = random.Random(seed * 1000 + number)
    last = []
    for _ in range(calls):
        try:
            call(rng, folder, last)
        except OSError as e:
            if e.errno not in EXPECTED:
                failures.put("unexpected %s %s (%s)" % (errno.errorcode.get(e.errno, e.errno), " ".join(last), e))
        with made.get_lock():
            made.value += 1
            if progress and made.value % 20 == 0:
                with open(progress, "a") as f:
                    f.write("%d\n" % made.value)


def api_client(url, token, folder, seed, calls):
    """Another client's changes through the API; returns how many were refused (409), or
    failed as the emulator's injected faults make calls fail (429, 5xx, a dropped connection:
    the change may or may not have been made, as for any client)."""
    rng = random.Random(seed * 1000 + 999)

    def call(route, argument, body=None):
        headers = {"Authorization": "Bearer " + token}
        if body is None:
            headers["Content-Type"] = "application/json"
            body = json.dumps(argument).encode()
        else:
            headers["Content-Type"] = "application/octet-stream"
            headers["Dropbox-API-Arg"] = json.dumps(argument)
        request = urllib.request.Request(url + "/2/files/" + route, data=body, headers=headers)
        try:
            urllib.request.urlopen(request).read()
            return 0
        except urllib.error.HTTPError as e:
            if e.code != 409 and e.code != 429 and e.code < 500:
                raise
            return 1
        except (urllib.error.URLError, http.client.HTTPException, ConnectionError):
            # `drop:` faults close the connection: with them, the client stopped the run.
            return 1

    refused = 0
    for _ in range(calls):
        p, q, r = folder + "/" + random_path(rng), folder + "/" + random_path(rng), rng.random()
        if r < 0.4:
            refused += call("upload", {"path": p, "mode": "overwrite"}, bytes([rng.randint(0, 255)]) * rng.randint(0, 20000))
        elif r < 0.6:
            refused += call("delete_v2", {"path": p})
        elif r < 0.8:
            refused += call("move_v2", {"from_path": p, "to_path": q})
        else:
            refused += call("create_folder_v2", {"path": p})
        time.sleep(rng.random() * 0.02)
    return refused


def main():
    if sys.argv[1] == "--api":
        url, token, folder, seed, calls = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
        refused = api_client(url, token, folder, seed, calls)
        print("another client: %d calls, %d refused" % (calls, refused))
        return
    folder, seed, processes, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    progress = sys.argv[5] if len(sys.argv) > 5 else None
    os.makedirs(folder, exist_ok=True)
    failures = multiprocessing.Queue()
    made = multiprocessing.Value("i", 0)
    workers = [multiprocessing.Process(target=process, args=(folder, seed, n, calls, failures, made, progress))
               for n in range(processes)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    found = 0
    while not failures.empty():
        print(failures.get())
        found += 1
    print("%d calls, %d unexpected errnos" % (made.value, found))
    sys.exit(1 if found or any(w.exitcode != 0 for w in workers) else 0)


if __name__ == "__main__":
    main()
