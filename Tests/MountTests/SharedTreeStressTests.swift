import Foundation
import Testing

/// Threads of random operations on one small shared tree, where the differential suite runs
/// one call at a time: renames, removals, new folders and writes of several threads meet in
/// the queue, the upload batches and the inode table. The outcome of each call depends on
/// the interleaving, so no model predicts it; what must hold whatever the interleaving is
/// checked instead: no call fails as a disk never would (EIO, say), and once the folder is
/// fsynced the mount shows exactly what Dropbox holds, which a second mount with a cache of
/// its own shows too (names, kinds, bytes). Fixed seeds; the interleavings differ each run.
@Suite("mount: random operations of many threads on a shared tree", .serialized, .timeLimit(.minutes(10)))
struct SharedTreeStressTests {
    @Test func concurrentOperationsLeaveWhatDropboxHolds() async throws {
        try await MountFixture.with(seeds: []) { m in
            let seeds = [1, 2, 3]
            for seed in seeds {
                let run = try await m.python(Self.operations(folder: "shared-\(seed)", seed: seed, threads: 8, operations: 300), timeout: 300)
                #expect(run.status == 0, "seed \(seed): \(run.stdout)\(run.stderr)\n\(m.log.suffix(2000))")
                #expect(try await m.syncFolder("\"$M/shared-\(seed)\"").status == 0)
            }
            let fresh = try await m.mountAnother("fresh")
            for seed in seeds {
                let shown = try await m.python(Self.snapshot(of: m.mountpoint + "/shared-\(seed)"))
                let heldOnDropbox = try await m.python(Self.snapshot(of: fresh + "/shared-\(seed)"))
                #expect(shown.status == 0 && heldOnDropbox.status == 0, "\(shown.stderr)\(heldOnDropbox.stderr)")
                print("seed \(seed): \(shown.stdout.split(separator: "\n").count) entries")
                #expect(shown.stdout == heldOnDropbox.stdout, "seed \(seed): the mount shows\n\(shown.stdout)\nDropbox holds\n\(heldOnDropbox.stdout)")
            }
        }
    }

    /// The same, with the daemon killed (-9) while the threads run: mounted again on its
    /// cache, it sends what its queue kept and, once the folder is fsynced, shows what a mount
    /// with a fresh cache shows.
    @Test func aKillInTheMiddleLeavesWhatDropboxHolds() async throws {
        try await MountFixture.with(seeds: []) { m in
            for seed in [4, 5] {
                let progress = m.root.appendingPathComponent("progress-\(seed)").path
                async let run = m.python(Self.operations(folder: "killed-\(seed)", seed: seed, threads: 6, operations: 400,
                                                          progress: progress), timeout: 300)
                try await eventually("the threads to make 300 calls", timeout: 120) {
                    (try? String(contentsOfFile: progress, encoding: .utf8)).flatMap { Int($0.split(separator: "\n").last ?? "") } ?? 0 >= 300
                }
                try await m.killDaemon()
                let killed = try await run
                #expect(killed.status == 0, "seed \(seed): \(killed.stdout)\(killed.stderr)")
                try await m.mount()
                #expect(try await m.syncFolder("\"$M/killed-\(seed)\"").status == 0)
                let fresh = try await m.mountAnother("fresh-\(seed)")
                let shown = try await m.python(Self.snapshot(of: m.mountpoint + "/killed-\(seed)"))
                let heldOnDropbox = try await m.python(Self.snapshot(of: fresh + "/killed-\(seed)"))
                #expect(shown.status == 0 && heldOnDropbox.status == 0, "\(shown.stderr)\(heldOnDropbox.stderr)")
                print("seed \(seed): \(shown.stdout.split(separator: "\n").count) entries")
                #expect(shown.stdout == heldOnDropbox.stdout, "seed \(seed): the mount shows\n\(shown.stdout)\nDropbox holds\n\(heldOnDropbox.stdout)")
            }
        }
    }

    /// The same, with another client changing the same paths on Dropbox all the while
    /// (uploads, deletes, moves, new folders): conflicts are settled as doc/SEMANTICS.md says,
    /// and once the folder is fsynced and the change feed has brought the last of them, the
    /// mount shows what Dropbox holds, and no call failed as a disk's never would meanwhile.
    /// (EIO from fsyncs and reads, and ESTALE, were found here, about one run in ten: see the
    /// issue notes for what was mended.)
    @Test func anotherClientChangingTheTreeMeanwhile() async throws {
        try await MountFixture.with(seeds: []) { m in
            let folder = "contested"
            #expect(try await m.sh("mkdir \"$M/\(folder)\"").status == 0)
            #expect(try await m.syncFolder("\"$M/\(folder)\"").status == 0)  // on Dropbox, for the other client
            let run = try await m.python(Self.operations(folder: folder, seed: 6, threads: 6, operations: 300, remoteCalls: 400), timeout: 300)
            #expect(run.status == 0, "\(run.stdout)\(run.stderr)\n\(m.log.suffix(2000))")
            #expect(try await m.syncFolder("\"$M/\(folder)\"").status == 0)
            let fresh = try await m.mountAnother("fresh")
            var last = ""
            try await eventually("the mount to show what Dropbox holds", timeout: 60) {
                let shown = try await m.python(Self.snapshot(of: m.mountpoint + "/" + folder))
                let heldOnDropbox = try await m.python(Self.snapshot(of: fresh + "/" + folder))
                last = "the mount shows\n\(shown.stdout)\(shown.stderr)\nDropbox holds\n\(heldOnDropbox.stdout)\(heldOnDropbox.stderr)"
                return shown.status == 0 && heldOnDropbox.status == 0 && shown.stdout == heldOnDropbox.stdout
            }
            #expect(!last.isEmpty, "\(last)")
        }
    }

    /// Two mounts of one account, threads of random operations on each in the same folder at
    /// once: each mount is the other's other client, changing what the first has just read
    /// or changed itself. No call fails as a disk's never would, and once both folders are
    /// fsynced and the change feed has brought the last change, both mounts show what a third
    /// mount with an empty cache shows. (Found by this workload: a rename whose call the
    /// change feed answered first hid from its mount, for good, a folder the other mount made
    /// in its target after it.)
    @Test func twoMountsChangingOneTreeAtOnceEndShowingWhatDropboxHolds() async throws {
        try await MountFixture.with(seeds: []) { m in
            let second = try await m.mountAnother("second")
            for seed in [7, 8, 9] {
                let folder = "both-\(seed)"
                #expect(try await m.sh("mkdir \"$M/\(folder)\"").status == 0)
                #expect(try await m.syncFolder("\"$M/\(folder)\"").status == 0)
                try await eventually("the second mount to show \(folder)") { FileManager.default.fileExists(atPath: second + "/" + folder) }
                async let here = m.python(Self.operations(folder: folder, seed: seed, threads: 3, operations: 300), timeout: 300)
                async let there = m.python(Self.operations(folder: folder, seed: seed + 50, threads: 3, operations: 300, root: second), timeout: 300)
                for (mount, run) in [("first", try await here), ("second", try await there)] {
                    #expect(run.status == 0, "seed \(seed), \(mount) mount: \(run.stdout)\(run.stderr)\n\(m.log.suffix(2000))")
                }
                #expect(try await m.syncFolder("\"$M/\(folder)\"").status == 0)
                #expect(try await m.syncFolder("\"\(second)/\(folder)\"").status == 0)
            }
            let fresh = try await m.mountAnother("fresh")
            for seed in [7, 8, 9] {
                let folder = "both-\(seed)"
                let heldOnDropbox = try await m.python(Self.snapshot(of: fresh + "/" + folder))
                #expect(heldOnDropbox.status == 0, "\(heldOnDropbox.stderr)")
                print("seed \(seed): \(heldOnDropbox.stdout.split(separator: "\n").count) entries")
                for mount in [m.mountpoint, second] {
                    var last = ""
                    try await eventually("\(mount) to show what Dropbox holds in \(folder)", timeout: 60) {
                        let shown = try await m.python(Self.snapshot(of: mount + "/" + folder))
                        last = "\(mount) shows\n\(shown.stdout)\(shown.stderr)\nDropbox holds\n\(heldOnDropbox.stdout)"
                        return shown.status == 0 && shown.stdout == heldOnDropbox.stdout
                    }
                    #expect(!last.isEmpty, "\(last)")
                }
            }
        }
    }

    /// A Python script: `threads` threads each make `operations` random calls in `folder` of
    /// the mount (created first unless it exists), on nine paths two and three deep; `root`:
    /// of that mount instead. Errnos a
    /// disk gives to such calls are expected; any other fails the script, but ENOTCONN or
    /// ECONNABORTED (the daemon killed) ends the thread. With `progress`, the count of calls made is written
    /// there now and then. With `remoteCalls`, one more thread makes as many changes on
    /// Dropbox at the same paths, as another client.
    static func operations(folder: String, seed: Int, threads: Int, operations: Int, progress: String? = nil, remoteCalls: Int = 0,
                           root: String? = nil) -> String {
        """
        import errno, json, os, random, threading, time, urllib.error, urllib.request
        base = \(root.map { "'\($0)'" } ?? "os.environ['M']") + '/\(folder)'
        os.makedirs(base, exist_ok=True)
        paths = ['a', 'b', 'c', 'a/x', 'a/y', 'b/x', 'b/x/z', 'a/x/z', 'c/x']
        expected = {errno.ENOENT, errno.EEXIST, errno.ENOTDIR, errno.EISDIR, errno.ENOTEMPTY, errno.EINVAL}
        unexpected, made, lock = [], [0], threading.Lock()
        progress = \(progress.map { "'\($0)'" } ?? "None")
        kinds = [(0.15, 'mkdir'), (0.23, 'rmdir'), (0.43, 'rename'), (0.60, 'write'), (0.65, 'truncate'), (0.78, 'read'),
                 (0.84, 'unlink'), (0.88, 'listdir'), (0.93, 'sleep'), (1.0, 'fsync')]
        def call(rng, last):
            r = rng.random()
            p, q = base + '/' + rng.choice(paths), base + '/' + rng.choice(paths)
            last[:] = [next(kind for bound, kind in kinds if r < bound), p[len(base) + 1:], q[len(base) + 1:]]
            if r < 0.15: os.mkdir(p)
            elif r < 0.23: os.rmdir(p)
            elif r < 0.43: os.rename(p, q)
            elif r < 0.60:
                flags = rng.choice([os.O_WRONLY | os.O_CREAT | os.O_TRUNC, os.O_RDWR | os.O_CREAT, os.O_WRONLY | os.O_CREAT | os.O_APPEND])
                fd = os.open(p, flags, 0o644)
                try: os.pwrite(fd, bytes([rng.randint(0, 255)]) * rng.randint(1, 9000), rng.randint(0, 60000))
                finally: os.close(fd)
            elif r < 0.65: os.truncate(p, rng.randint(0, 20000))
            elif r < 0.78:
                with open(p, 'rb') as f: f.read()
            elif r < 0.84: os.unlink(p)
            elif r < 0.88: os.listdir(p)
            elif r < 0.93: time.sleep(rng.random() * 0.3)  # lets a round of uploads or renames start
            else:
                fd = os.open(p, os.O_RDONLY)
                try: os.fsync(fd)
                finally: os.close(fd)
        def thread(number):
            rng = random.Random(\(seed) * 100 + number)
            last = []
            for _ in range(\(operations)):
                try:
                    call(rng, last)
                except OSError as e:
                    if e.errno in (errno.ENOTCONN, errno.ECONNABORTED): return  # the daemon killed (a call under way gets the second)
                    if e.errno not in expected: unexpected.append((errno.errorcode.get(e.errno, e.errno), *last))
                with lock:
                    made[0] += 1
                    if progress and made[0] % 20 == 0:
                        with open(progress, 'a') as f: f.write('%d\\n' % made[0])
        def dropbox(route, argument, body=None):
            headers = {'Authorization': 'Bearer ' + os.environ['DROPBOXFS_ACCESS_TOKEN']}
            if body is None:
                headers['Content-Type'] = 'application/json'
                body = json.dumps(argument).encode()
            else:
                headers['Content-Type'] = 'application/octet-stream'
                headers['Dropbox-API-Arg'] = json.dumps(argument)
            request = urllib.request.Request(os.environ['DROPBOXFS_API_URL'] + '/2/files/' + route, data=body, headers=headers)
            try: urllib.request.urlopen(request).read()
            except urllib.error.HTTPError as e:
                if e.code != 409: raise  # 409: the path was not there, or taken
        def other_client():
            rng = random.Random(\(seed) * 100 + 99)
            for _ in range(\(remoteCalls)):
                p, q, r = '/\(folder)/' + rng.choice(paths), '/\(folder)/' + rng.choice(paths), rng.random()
                if r < 0.4: dropbox('upload', {'path': p, 'mode': 'overwrite'}, bytes([rng.randint(0, 255)]) * rng.randint(0, 20000))
                elif r < 0.6: dropbox('delete_v2', {'path': p})
                elif r < 0.8: dropbox('move_v2', {'from_path': p, 'to_path': q})
                else: dropbox('create_folder_v2', {'path': p})
                time.sleep(rng.random() * 0.05)
        workers = [threading.Thread(target=thread, args=(n,)) for n in range(\(threads))]
        if \(remoteCalls): workers.append(threading.Thread(target=other_client))
        [w.start() for w in workers]
        [w.join() for w in workers]
        print('calls', made[0], 'unexpected errnos', unexpected[:10])
        assert not unexpected, unexpected
        """
    }

    /// A Python script printing a tree: folders, and files with the MD5 of their bytes, sorted.
    static func snapshot(of folder: String) -> String {
        """
        import hashlib, os
        base = '\(folder)'
        lines = []
        for root, folders, files in os.walk(base):
            for name in folders: lines.append('folder ' + os.path.relpath(os.path.join(root, name), base))
            for name in files:
                with open(os.path.join(root, name), 'rb') as f:
                    lines.append('file ' + os.path.relpath(os.path.join(root, name), base) + ' ' + hashlib.md5(f.read()).hexdigest())
        print('\\n'.join(sorted(lines)))
        """
    }
}
