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

    /// A Python script: `threads` threads each make `operations` random calls in `folder` of
    /// the mount (created first), on nine paths two and three deep. Errnos a disk gives to such
    /// calls are expected; any other fails the script, but ENOTCONN (the daemon killed) ends
    /// the thread. With `progress`, the count of calls made is written there now and then.
    static func operations(folder: String, seed: Int, threads: Int, operations: Int, progress: String? = nil) -> String {
        """
        import errno, os, random, threading, time
        base = os.environ['M'] + '/\(folder)'
        os.mkdir(base)
        paths = ['a', 'b', 'c', 'a/x', 'a/y', 'b/x', 'b/x/z', 'a/x/z', 'c/x']
        expected = {errno.ENOENT, errno.EEXIST, errno.ENOTDIR, errno.EISDIR, errno.ENOTEMPTY, errno.EINVAL}
        unexpected, made, lock = [], [0], threading.Lock()
        progress = \(progress.map { "'\($0)'" } ?? "None")
        def call(rng):
            r = rng.random()
            p, q = base + '/' + rng.choice(paths), base + '/' + rng.choice(paths)
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
            for _ in range(\(operations)):
                try:
                    call(rng)
                except OSError as e:
                    if e.errno == errno.ENOTCONN: return
                    if e.errno not in expected: unexpected.append(errno.errorcode.get(e.errno, e.errno))
                with lock:
                    made[0] += 1
                    if progress and made[0] % 20 == 0:
                        with open(progress, 'a') as f: f.write('%d\\n' % made[0])
        workers = [threading.Thread(target=thread, args=(n,)) for n in range(\(threads))]
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
