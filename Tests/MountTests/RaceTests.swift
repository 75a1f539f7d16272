import Foundation
import Testing

/// Calls that name a file by its inode (open, truncate, a time set) racing calls that move or
/// remove its name. The kernel resolves the path, then sends the call for the inode it found;
/// a rename or unlink in another thread can land in between. POSIX: the call acts on that
/// file, wherever its name went, or fails with ENOENT; it never makes a file at the old name.
@Suite("mount: calls racing renames", .serialized, .timeLimit(.minutes(10)))
struct RaceTests {
    /// One thread makes `p`, renames it to `q` and unlinks `q`, 2,000 times; three others
    /// open `p` to read, open it to write (no O_CREAT) and truncate it, all the while. Before
    /// the fix, an open that had looked the file up before the rename attached to the old
    /// name: readers got EIO (a node with no revision), and writers and truncates made an
    /// empty `p` again (145 times in 2,000 rounds).
    @Test func openOrTruncateRacingARenameNeverFailsNorRevivesTheOldName() async throws {
        try await MountFixture.with { m in
            let script = """
                import errno, os, threading
                root = os.environ['M'] + '/race'
                os.mkdir(root)
                p, q = root + '/p', root + '/q'
                stop = False
                errors, revived = {}, []
                def renamer():
                    global stop
                    try:
                        for i in range(2000):
                            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                            os.write(fd, b'x' * 100)
                            os.close(fd)
                            os.rename(p, q)
                            os.unlink(q)
                            if os.path.exists(p):
                                revived.append(i)
                    finally:
                        stop = True
                def racer(act):
                    while not stop:
                        try:
                            act()
                        except OSError as e:
                            if e.errno != errno.ENOENT:
                                errors[errno.errorcode[e.errno]] = errors.get(errno.errorcode[e.errno], 0) + 1
                def read():
                    fd = os.open(p, os.O_RDONLY)
                    try:
                        data = os.read(fd, 1000)
                        assert data in (b'', b'x' * 100) or data.startswith(b'b'), data
                    finally:
                        os.close(fd)
                def write():
                    fd = os.open(p, os.O_RDWR)
                    try:
                        os.write(fd, b'b')
                    finally:
                        os.close(fd)
                def truncate():
                    os.truncate(p, 5)
                threads = [threading.Thread(target=renamer)] + [threading.Thread(target=racer, args=(a,)) for a in (read, write, truncate)]
                [t.start() for t in threads]
                [t.join() for t in threads]
                print('errors', errors, 'revived', len(revived), 'listing', sorted(os.listdir(root)))
                assert not errors, errors
                assert not revived, 'p came back after rounds %s' % revived[:10]
                assert os.listdir(root) == [], os.listdir(root)
                """
            let result = try await m.python(script, timeout: 300)
            #expect(result.status == 0, "\(result.stdout)\(result.stderr)\n\(m.log.suffix(3000))")
        }
    }

    /// One thread saves `target` atomically, 500 times (writes a temporary file, renames it
    /// over `target`); another opens and reads `target` all the while. As on a disk, every
    /// open succeeds and reads one whole save. Before the fix, an open of the file the kernel
    /// had looked up just before a rename replaced it failed with ENOENT (a quarter of the
    /// opens): nothing held the replaced file, never uploaded, and its bytes were gone.
    @Test func readsOfAFileSavedByRenameOverItAlwaysOpenAWholeSave() async throws {
        try await MountFixture.with { m in
            let script = """
                import hashlib, os, threading
                root = os.environ['M'] + '/saves'
                os.mkdir(root)
                target, temporary = root + '/target', root + '/.target.tmp'
                def save(i):
                    body = (b'save %d ' % i) * (1 + i % 700)
                    with open(temporary, 'wb') as f:
                        f.write(hashlib.sha256(body).hexdigest().encode() + b'\\n' + body)
                    os.rename(temporary, target)
                save(0)
                stop, failures, reads = False, [], [0]
                def saver():
                    global stop
                    try:
                        for i in range(1, 501):
                            save(i)
                    finally:
                        stop = True
                def reader():
                    while not stop:
                        try:
                            with open(target, 'rb') as f:
                                data = f.read()
                        except OSError as e:
                            failures.append(os.strerror(e.errno))
                            continue
                        digest, _, body = data.partition(b'\\n')
                        if hashlib.sha256(body).hexdigest().encode() != digest:
                            failures.append('torn: %d bytes' % len(data))
                        reads[0] += 1
                threads = [threading.Thread(target=saver), threading.Thread(target=reader)]
                [t.start() for t in threads]
                [t.join() for t in threads]
                print('reads', reads[0], 'failures', len(failures), failures[:5])
                assert not failures, failures[:5]
                assert os.listdir(root) == ['target'], os.listdir(root)
                """
            let result = try await m.python(script, timeout: 300)
            #expect(result.status == 0, "\(result.stdout)\(result.stderr)\n\(m.log.suffix(3000))")
        }
    }

    /// One thread makes `p` and unlinks it, 1,500 times (in a second folder, with an fsync
    /// between and unlinks only now and then); two others open `p`, read it and `fstat` the
    /// descriptor, and `stat` the path. Before the fix, an open that came after the unlink for
    /// the inode the kernel had looked up before it attached to nothing, and its read failed
    /// with EIO (529 times in 1,500 rounds): it must read the file (another descriptor holds
    /// it) or fail with ENOENT.
    @Test func openRacingAnUnlinkReadsTheFileOrNothing() async throws {
        try await MountFixture.with { m in
            let script = """
                import errno, os, random, threading
                errors = {}
                def race(folder, mutate):
                    os.mkdir(folder)
                    p = folder + '/p'
                    stop = []
                    def mutator():
                        try:
                            r = random.Random(1)
                            for i in range(1500):
                                mutate(p, r)
                        finally:
                            stop.append(True)
                    def reader():
                        while not stop:
                            try:
                                fd = os.open(p, os.O_RDONLY)
                                try:
                                    os.read(fd, 10000)
                                    os.fstat(fd)
                                finally:
                                    os.close(fd)
                                os.stat(p)
                            except OSError as e:
                                if e.errno != errno.ENOENT:
                                    key = folder + ' ' + errno.errorcode[e.errno]
                                    errors[key] = errors.get(key, 0) + 1
                    threads = [threading.Thread(target=mutator), threading.Thread(target=reader), threading.Thread(target=reader)]
                    [t.start() for t in threads]
                    [t.join() for t in threads]
                def unlink(p, r):
                    with open(p, 'wb') as f:
                        f.write(b'u' * 100)
                    os.unlink(p)
                def fsync(p, r):
                    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
                    os.pwrite(fd, b's' * 100, r.randrange(0, 3000))
                    os.fsync(fd)
                    os.close(fd)
                    if r.random() < 0.3:
                        os.unlink(p)
                race(os.environ['M'] + '/unlink', unlink)
                race(os.environ['M'] + '/fsync', fsync)
                print('errors', errors)
                assert not errors, errors
                """
            let result = try await m.python(script, timeout: 600)
            #expect(result.status == 0, "\(result.stdout)\(result.stderr)\n\(m.log.suffix(3000))")
        }
    }

    /// A folder renamed back and forth 400 times while two threads make files and folders
    /// in it through a descriptor of it: each lands in the folder, wherever its name is,
    /// here and on Dropbox. The kernel holds no lock on a folder being renamed, so a create
    /// may come in between. Before the fix, with 1,000 renames, 820 of 4,287 were made at the folder's old path,
    /// out of sight, and Dropbox got hundreds of conflicted copies of the folder.
    /// Each maker stops at 450 files (600 entries), about what it makes alone in the time of
    /// the renames: each rename costs more with every entry below the folder and every rename
    /// not yet on Dropbox, and on a loaded machine the makers, unbounded, made ever more while
    /// the renames slowed (238 s beside a build, 35-63 s alone).
    /// Twice in clean-clone CI runs, a file the final listing showed could not be opened
    /// (ENOENT) until the kernel's entry for it expired (1 s): a rename of the folder had come
    /// between the create's answer and its hand-over, and the kernel was handed an inode of the
    /// folder's old path (`HandedEntryTests`). Each file is now read back at once, through the
    /// entry its create gave (with 3 ms slept before each create's answer, every read back
    /// failed before the fix). A failure at the end says whether a second listing still shows
    /// the file and whether it opens once the kernel's entries have expired.
    /// Once more in CI, a file listed was ENOENT for a second: the change feed, caught up during
    /// a rename's call, brought the move in two pages, the removals at the old path first, and
    /// the store had the folder at neither place between them (`OwnMoveInPagesTests`). The
    /// feed's pages hold 100 entries here, so that each move spans many: at Dropbox's 2,000 a
    /// move of this folder spans two only once it holds 1,000 entries; at 100 the code before
    /// the fix lost hundreds of files from the final listing in two runs of four.
    @Test func entriesMadeInAFolderBeingRenamedLandInIt() async throws {
        try await MountFixture.with(feedPageSize: 100) { m in
            let script = """
                import errno, os, threading, time
                root = os.environ['M'] + '/moving'
                os.mkdir(root)
                a, b = root + '/A', root + '/B'
                os.mkdir(a)
                folders = [os.open(a, os.O_RDONLY | os.O_DIRECTORY) for _ in range(2)]
                stop, made = [], []
                def renamer():
                    try:
                        for i in range(400):
                            os.rename(a, b)
                            os.rename(b, a)
                    finally:
                        stop.append(True)
                def maker(k):
                    i = 0
                    while not stop and i < 450:
                        name = 'f%d-%d' % (k, i)
                        i += 1
                        fd = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=folders[k])
                        os.write(fd, name.encode())
                        os.close(fd)
                        # Read back at once, while the kernel holds the entry the create gave
                        # it (for 1 s): it must be the file's inode, wherever the folder went.
                        fd = os.open(name, os.O_RDONLY, dir_fd=folders[k])
                        back = os.read(fd, 100)
                        os.close(fd)
                        assert back == name.encode(), '%s read back %r' % (name, back)
                        made.append(name)
                        if i % 3 == 0:
                            os.mkdir(name + '.d', dir_fd=folders[k])
                            made.append(name + '.d')
                threads = [threading.Thread(target=renamer)] + [threading.Thread(target=maker, args=(k,)) for k in range(2)]
                [t.start() for t in threads]
                [t.join() for t in threads]
                assert made, 'nothing made'
                missing = sorted(set(made) - set(os.listdir(a)))
                assert not missing, '%d of %d missing: %s' % (len(missing), len(made), missing[:10])
                assert os.listdir(root) == ['A'], sorted(os.listdir(root))[:10]
                def content(path):
                    try:
                        return open(path).read()
                    except OSError as error:
                        return error.strerror
                for name in made:
                    if name.endswith('.d'):
                        continue
                    found = content(a + '/' + name)
                    if found != name:
                        # Which side is wrong: listed again? still so once the kernel's entries
                        # (1 s) have expired, when the mount is asked afresh?
                        listed = name in os.listdir(a)
                        time.sleep(1.5)
                        raise AssertionError('%s: %s; listed again: %s; 1.5 s later: %s' % (name, found, listed, content(a + '/' + name)))
                print(len(made))
                """
            let result = try await m.python(script, timeout: 600)
            #expect(result.status == 0, "\(result.stdout)\(result.stderr)\n\(m.log.suffix(3000))")
            let made = Int(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
            try await m.unmount()
            let onDropbox = try await m.client.listAll("/moving", recursive: false).map(\.pathLower)
            #expect(onDropbox == ["/moving", "/moving/a"] || onDropbox == ["/moving/a"], "\(onDropbox.prefix(10))")
            #expect(try await m.client.listAll("/moving/a", recursive: false).count >= made, "Dropbox's /moving/a lacks entries")
        }
    }

    /// Workers that reach their folders only through descriptors (openat, renameat, fsync,
    /// listing by descriptor) while a mover renames those folders between parents with no
    /// pause (Scripts/lib/dirfd_workers.py): each folder holds what its worker's model says.
    /// Before the fix, an fsync waited for every rename above its file, those made after it
    /// began too, and the workers' fsyncs did not return while the mover went on (the run
    /// was killed by its 300 s guard).
    @Test func workersThroughFolderDescriptorsFsyncWhileTheirFoldersMoveWithoutPause() async throws {
        try await MountFixture.with(seeds: []) { m in
            let run = try await m.sh("PAUSE=0 python3 '\(MountFixture.libraryScript("dirfd_workers.py"))' \"$M\" 1 3 150",
                                     timeout: 300)
            #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        }
    }
}
