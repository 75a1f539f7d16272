import DropboxAPI
import Foundation
import Testing
import TestSupport

/// Bad networks, dead daemons, full caches and bad credentials: the mount stays correct and
/// fails clearly.
@Suite("mount: faults, recovery, limits", .serialized, .timeLimit(.minutes(5)))
struct RobustnessTests {
    @Test func readsUnderInjectedFaultsReturnCorrectBytes() async throws {
        try await MountFixture.with(seeds: ["files=200,dirs=4,depth=1,size=20K,root=/tree", "big=64M"]) { m in
            let reference = try await m.sh("cat $(find \"$M/tree\" -type f | sort) \"$M/big.bin\" | sha256sum")
            // Start cold: new cache, new mount, then the faults.
            try await m.unmount()
            try FileManager.default.removeItem(atPath: m.cacheDirectory)
            try await m.emulator.setFaults(["500:p=0.05", "503:p=0.05", "429:p=0.05,retry_after=0", "reset:p=0.02"])
            try await m.mount()
            let faulty = try await m.sh("cat $(find \"$M/tree\" -type f | sort) \"$M/big.bin\" | sha256sum", timeout: 300)
            #expect(faulty.status == 0, "\(faulty.stderr)")
            #expect(faulty.stdout == reference.stdout)
        }
    }

    /// An fsync whose upload met a server error the client may not try again waits for the
    /// upload's next try, which goes. Here the file changed elsewhere meanwhile: its commit is
    /// refused, and the upload of the conflicted copy (with autorename: not idempotent) gets a
    /// 500. That failed the fsync with EIO, though the bytes were safe and went up two
    /// seconds later (two mounts stressing one tree with `500:p=0.03`). A run of such errors
    /// takes the mount offline, and an fsync then returns once the bytes are on the local
    /// disk (OfflineTests).
    @Test func anFsyncOutlivesAServerErrorOnItsUpload() async throws {
        try await MountFixture.with(seeds: []) { m in
            try await m.uploadElsewhere("theirs 1\n", to: "/f.txt")
            try await eventually("the mount to show the file") { try await m.sh("cat \"$M/f.txt\"").stdout == "theirs 1\n" }
            try await m.stallChangeFeed(trigger: "/trigger.txt")
            try await m.uploadElsewhere("theirs 2\n", to: "/f.txt")
            // The first upload is the commit Dropbox refuses; the second, the copy's, fails.
            try await m.emulator.setFaults(["500:p=1,routes=files/list_folder/longpoll", "500:skip=1,times=1,routes=files/upload"])
            let synced = try await m.sh("""
                python3 -c 'import os, sys
                fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)
                os.write(fd, b"mine\\n")
                os.fsync(fd)
                os.close(fd)' "$M/f.txt"
                """)
            #expect(synced.status == 0, "\(synced.stderr)\n\(m.log.suffix(3000))")
            let stats = try await m.routeStats()
            #expect(MountFixture.requests(stats, ["files/upload"]) >= 3, "\(stats)")
            try await m.emulator.setFaults([])
            let copies = try await m.client.listAll("").compactMap(\.fileMetadata).filter { $0.name.contains("conflicted copy") }
            #expect(copies.count == 1, "\(copies.map(\.name))")
            if let copy = copies.first { #expect(try await m.remoteText(copy.pathDisplay ?? "") == "mine\n") }
            #expect(try await m.remoteText("/f.txt") == "theirs 2\n")
        }
    }

    /// A daemon killed (-9) while an fsync of a folder waited for Dropbox and another
    /// client's change in that folder was to be told to the kernel: the kernel holds the
    /// folder's lock until the fsync is answered, and the invalidation waited for it; the
    /// killed daemon then never ended (that thread in D state), the kernel never dropped its
    /// connection, and the fsync and every call in the folder hung for good
    /// (`Scripts/stress-two-mounts --kill-after`, seed 452). Such invalidations now wait in
    /// the daemon until the fsync is answered, and the kill ends the fsync (failed before:
    /// nothing was ever held).
    @Test func aKillWhileAFolderIsFsyncedLeavesNoCallHanging() async throws {
        try await MountFixture.with(seeds: []) { m in
            #expect(try await m.sh("mkdir \"$M/d\" && echo a > \"$M/d/a.txt\"").status == 0)
            #expect(try await m.syncFolder("\"$M\"").status == 0)
            let commits = ["files/upload", "files/upload_session/start", "files/upload_session/finish", "files/upload_session/finish_batch_v2"]
            try await m.emulator.setFaults(["silent:routes=" + commits.joined(separator: "+")])
            #expect(try await m.sh("echo mine > \"$M/d/mine.txt\"").status == 0)
            async let held = m.syncFolder("\"$M/d\"")
            // The upload may be the background flush's, begun before the fsync reached the
            // daemon: the other client's change must come while the fsync is answered.
            try await eventually("the fsync's upload to be held") {
                let stats = try await m.routeStats()
                let folders = (try? m.statusReport()["kernel_locks_held"] as? Int) ?? 0
                return commits.reduce(0) { $0 + (stats[$1]?["delayed"] ?? 0) } > 0 && folders > 0
            }
            _ = try await m.client.rpc(Routes.createFolder, CreateFolderArgument(path: "/d/theirs"))
            try await eventually("the new entry's invalidation to wait for the fsync") {
                (try? m.statusReport()["invalidations_held"] as? Int) ?? 0 > 0
            }
            try await m.killDaemon()
            let fsync = try await held
            #expect(fsync.status != 0, "the fsync ended with the daemon: \(fsync.stderr)")
            try m.emulator.replaceFaults([])
            try await m.mount()
            #expect(try await m.syncFolder("\"$M/d\"").status == 0)
            #expect(try await m.remoteText("/d/mine.txt") == "mine\n")
            #expect(try await m.sh("test -d \"$M/d/theirs\"").status == 0)
        }
    }

    /// The same for a read waiting for Dropbox: the kernel keeps the file's pages locked until
    /// the read is answered, and dropping them for another client's new version of the file
    /// waited for that lock (failed before: nothing was held). The reader has the file open
    /// for writing too: a file open only for reading is left its inode instead, its pages
    /// kept for it (`FileLifeTests`), and nothing waits.
    @Test func aKillWhileAReadWaitsForDropboxLeavesNoCallHanging() async throws {
        try await MountFixture.with(seeds: []) { m in
            try await m.uploadElsewhere("old\n", to: "/f.txt")
            try await eventually("the file to show") { try await m.sh("test -f \"$M/f.txt\"").status == 0 }
            try await m.emulator.setFaults(["silent:routes=files/download"])
            async let held = m.sh("python3 -c 'import sys; print(open(sys.argv[1], \"r+\").read(), end=\"\")' \"$M/f.txt\"")
            try await eventually("the read to wait for its download") {
                let stats = try await m.routeStats()
                let locks = (try? m.statusReport()["kernel_locks_held"] as? Int) ?? 0
                return (stats["files/download"]?["delayed"] ?? 0) > 0 && locks > 0
            }
            try await m.uploadElsewhere("new\n", to: "/f.txt")
            try await eventually("the new version's page invalidation to wait for the read") {
                (try? m.statusReport()["invalidations_held"] as? Int) ?? 0 > 0
            }
            try await m.killDaemon()
            let read = try await held
            #expect(read.status != 0, "the read ended with the daemon: \(read.stdout)")
            try m.emulator.replaceFaults([])
            try await m.mount()
            #expect(try await m.sh("cat \"$M/f.txt\"").stdout == "new\n")
        }
    }

    /// A daemon gone while something else still holds its /dev/fuse descriptor (here a copy
    /// taken with pidfd_getfd; in the wild, a thread of the killed daemon that could not end):
    /// the kernel keeps the connection, and every call on the mountpoint waits for an answer,
    /// the next `dropboxfs mount`'s `stat` too (failed before: that mount waited until the
    /// test's runner stopped it). The mount aborts such a connection first.
    @Test func aMountOverAConnectionItsDeadDaemonLeftOpenTakesItsPlace() async throws {
        try await MountFixture.with { m in
            let daemon = try #require(m.daemonPIDs().first)
            let ready = m.root.appendingPathComponent("descriptor-copied").path
            let copier = m.root.appendingPathComponent("copy-descriptor.py")
            try """
                import ctypes, os, signal, sys
                pid, fd, ready = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
                copy = ctypes.CDLL(None, use_errno=True).syscall(438, os.pidfd_open(pid), fd, 0)  # pidfd_getfd
                if copy >= 0:
                    open(ready, "w").close()
                    signal.pause()
                """.write(to: copier, atomically: true, encoding: .utf8)
            let started = try await m.sh("""
                fd=$(ls -l /proc/\(daemon)/fd | awk '$NF == "/dev/fuse" { print $(NF-2); exit }')
                python3 '\(copier.path)' \(daemon) "$fd" '\(ready)' >/dev/null 2>&1 </dev/null &
                echo $!
                """)
            let holder = try #require(Int32(started.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
            defer { kill(holder, SIGKILL) }
            try await eventually("the descriptor's copy") { FileManager.default.fileExists(atPath: ready) }
            kill(daemon, SIGKILL)
            try await eventually("the daemon to end") { m.daemonPIDs().isEmpty }
            try await m.mount()
            #expect(try await m.sh("cat \"$M/README.txt\"").status == 0)
        }
    }

    /// A daemon killed while its invalidation waited in the kernel for a folder's lock, held
    /// for a caller whose request had not reached the daemon (the window `KernelLockHolds`
    /// leaves open): its stuck thread keeps it a zombie, holding its connection and its cache
    /// (SQLite's lock). Lazily unmounted, the mountpoint no longer names that connection, and
    /// the next mount of the same cache failed, "in use by another dropboxfs mount", until
    /// someone aborted the connection by hand (found by Scripts/stress-two-mounts). The mount
    /// finds the zombie through the cache's owner file and aborts its connection.
    @Test func aMountOfACacheItsZombieDaemonStillHoldsAbortsThatDaemonsConnection() async throws {
        try await MountFixture.with(mount: false) { m in
            m.daemonEnvironment["DROPBOXFS_TEST_UNANSWERED_FSYNCDIR"] = "1"
            try await m.mount()
            let daemon = try #require(m.daemonPIDs().first)
            let connection = try #require(FuseConnection.number(of: m.mountpoint))
            var held: Task<ProcessRunner.Result, any Error>?
            do {
                try await m.uploadElsewhere("x\n", to: "/d/f.txt")
                try await eventually("the file to show") { try await m.sh("test -f \"$M/d/f.txt\"").status == 0 }
                held = Task { try await m.syncFolder("\"$M/d\"") }
                try await eventually("the folder's fsync to wait for the daemon") {
                    Int(KernelText.read("\(FuseConnection.controlDirectory)/\(connection)/waiting")?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 0 > 0
                }
                _ = try await m.client.rpc(Routes.delete, DeleteArgument(path: "/d/f.txt"))
                try await eventually("the daemon's invalidation to wait for the folder's lock") { Self.threadStates(of: daemon).contains("D") }
                kill(daemon, SIGKILL)
                try await eventually("the daemon to be a zombie") { Self.threadStates(of: daemon).first == "Z" }
                let detached = try await ProcessRunner.run("/usr/bin/env", ["fusermount3", "-u", "-z", m.mountpoint])
                #expect(detached.status == 0, "\(detached.stderr)")
                try await m.mount()
                #expect(try await m.sh("head -c 7 \"$M/README.txt\"").stdout == "Welcome")
                let sync = try await held?.value
                #expect(sync?.status != 0, "the folder's fsync ended with its daemon's connection")
                // The cache names its new daemon, and no daemon once that one ended cleanly.
                let record = try #require(Self.cacheOwnerRecord(in: m.cacheDirectory))
                #expect(record.hasPrefix("\(try #require(m.daemonPIDs().first)) "), "\(record)")
                try await m.unmount()
                #expect(Self.cacheOwnerRecord(in: m.cacheDirectory) == nil)
            } catch {
                // Never leave the stuck daemon and the waiting fsync behind.
                if Self.threadStates(of: daemon).first == "Z" { FuseConnection.abort(connection) }
                _ = try? await held?.value
                throw error
            }
        }
    }

    /// The cache's record of its daemon (`CacheOwner`): "pid connection".
    static func cacheOwnerRecord(in cacheDirectory: String) -> String? {
        let accounts = (try? FileManager.default.contentsOfDirectory(atPath: cacheDirectory)) ?? []
        return accounts.lazy.compactMap { KernelText.read(cacheDirectory + "/" + $0 + "/daemon") }.first
    }

    /// The state letter of each thread of `pid`, its main thread first.
    static func threadStates(of pid: Int32) -> [Character] {
        let threads = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return ([ProcessStatus.of(pid)] + threads.compactMap(Int32.init).map { ProcessStatus.of(pid, thread: $0) }).compactMap { $0?.state }
    }

    /// libfuse's workers serve request after request on the session's one /dev/fuse
    /// descriptor. The loop's settings once went to libfuse's 3.2 entry point, which read
    /// them as its old struct (clone_fd on, no idle worker kept): nearly every request then
    /// started a thread that opened /dev/fuse again, and it exited once idle.
    @Test func requestsAreServedByLastingWorkersOnOneDescriptor() async throws {
        try await MountFixture.with { m in
            let daemon = try #require(m.daemonPIDs().first)
            // Four processes keep the mount busy while the script samples the daemon's
            // /dev/fuse descriptors; it prints the most seen at once and the sample count.
            let sampled = try await m.sh("""
                finished=$(mktemp -u)
                (
                    for p in 1 2 3 4; do (for i in $(seq 1 300); do stat "$M/README.txt"; ls "$M"; done >/dev/null) & done
                    wait; touch "$finished"
                ) &
                most=0; samples=0
                while [ ! -e "$finished" ]; do
                    n=$(ls -l /proc/\(daemon)/fd | grep -c /dev/fuse)
                    [ "$n" -gt "$most" ] && most=$n
                    samples=$((samples + 1))
                done
                rm -f "$finished"
                echo "$most $samples"
                """)
            let figures = sampled.stdout.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
            #expect(figures.count == 2, "\(sampled.stdout) \(sampled.stderr)")
            let most = figures.first ?? 0, samples = figures.last ?? 0
            #expect(samples > 10)
            #expect(most == 1, "the daemon held \(most) /dev/fuse descriptors at once")
        }
    }

    @Test func blockCacheStaysUnderItsLimit() async throws {
        try await MountFixture.with(seeds: ["big=48M"], options: ["cache_size=8M"]) { m in
            let sum = try await m.sh("sha256sum \"$M/big.bin\" | cut -c1-64")
            #expect(sum.stdout.count == 65)
            let used = try await m.sh("du -sk \"\(m.cacheDirectory)\"/*/blocks | cut -f1")
            let kib = Int(used.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? .max
            #expect(kib <= 8 * 1024 + 4 * 1024, "block cache holds \(kib) KiB with an 8 MiB limit")
            // Evicted blocks are fetched again: reading twice still gives the same bytes.
            #expect(try await m.sh("sha256sum \"$M/big.bin\" | cut -c1-64").stdout == sum.stdout)
        }
    }

    @Test func aFullCacheDiskSlowsReadsButNeverFailsThem() async throws {
        try await MountFixture.with(seeds: ["big=24M"], mount: false) { m in
            // The cache directory on a 2 MiB filesystem: no 4 MiB block ever fits.
            let mounted = try await m.mountWithCacheOnSmallDisk(size: "2m")
            #expect(mounted.status == 0, "\(mounted.stderr)")
            let viaMount = try await m.sh("sha256sum \"$M/big.bin\" | cut -c1-64")
            let direct = try await m.sh("curl -s -X POST '\(m.emulator.baseURL)/2/files/download' -H 'Authorization: Bearer \(MountFixture.token)' -H 'Dropbox-API-Arg: {\"path\":\"/big.bin\"}' | sha256sum | cut -c1-64")
            #expect(viaMount.status == 0)
            #expect(viaMount.stdout == direct.stdout)
            try await m.unmount()
        }
    }

    @Test func aKilledDaemonIsRecoveredByUnmountAndByANewMount() async throws {
        try await MountFixture.with { m in
            for pid in m.daemonPIDs() { kill(pid, SIGKILL) }
            try await eventually("the daemon to die") { m.daemonPIDs().isEmpty }
            let stale = try await m.sh("ls \"$M\"")
            #expect(stale.status != 0)
            // ENOTCONN once the kernel has torn the connection down; ECONNABORTED when `ls`
            // meets it while the dead daemon's device is still being released (seen in a
            // full run): either way the mount is known dead.
            #expect(stale.stderr.contains("Transport endpoint is not connected") || stale.stderr.contains("Software caused connection abort"),
                    "\(stale.stderr)")
            // A new mount on top of the dead one recovers it.
            try await m.mount()
            #expect(try await m.sh("cat \"$M/README.txt\" | head -c 7").stdout == "Welcome")
            // And unmount recovers a dead one too.
            for pid in m.daemonPIDs() { kill(pid, SIGKILL) }
            try await eventually("the daemon to die") { m.daemonPIDs().isEmpty }
            try await m.unmount()
            #expect(!m.isMounted)
        }
    }

    @Test func sigtermUnmountsAndEndsTheDaemon() async throws {
        try await MountFixture.with { m in
            _ = try await m.sh("cat \"$M/README.txt\" > /dev/null")
            let daemons = m.daemonPIDs()
            #expect(daemons.count == 1)
            for pid in daemons { kill(pid, SIGTERM) }
            try await eventually("the mount to go away", timeout: 10) { !m.isMounted }
            try await eventually("the daemon to exit", timeout: 10) { m.daemonPIDs().isEmpty }
            // Its caches are intact: the next mount serves the tree without listing it again.
            try await m.emulator.resetStats()
            try await m.mount()
            #expect(try await m.sh("ls \"$M\" | wc -l").stdout == "8\n")
            #expect(try await m.routeStats()["files/list_folder"] == nil)
        }
    }

    @Test func mountFailsClearlyOnBadTokenOrDeadServer() async throws {
        try await MountFixture.with(mount: false) { m in
            var environment = m.environment
            environment["DROPBOXFS_ACCESS_TOKEN"] = "not-a-token"
            let bad = try await ProcessRunner.run(MountFixture.binary, ["mount", m.mountpoint, "--cache-dir", m.cacheDirectory], environment: environment)
            #expect(bad.status == 1)
            #expect(bad.stderrLines.count == 1)
            #expect(bad.stderr.contains("invalid_access_token"))
            #expect(!m.isMounted)

            environment = m.environment
            environment["DROPBOXFS_API_URL"] = "http://127.0.0.1:9"
            let dead = try await ProcessRunner.run(MountFixture.binary, ["mount", m.mountpoint, "--cache-dir", m.cacheDirectory], environment: environment)
            #expect(dead.status == 1)
            #expect(dead.stderr.contains("Couldn't connect"))
            #expect(!m.isMounted)

            let missing = try await ProcessRunner.run(MountFixture.binary, ["mount", m.mountpoint + "/nope"], environment: m.environment)
            #expect(missing.status == 1)
            #expect(missing.stderr.contains("no such directory"))
            FileManager.default.createFile(atPath: m.root.path + "/a-file", contents: Data("x".utf8))
            let file = try await ProcessRunner.run(MountFixture.binary, ["mount", m.root.path + "/a-file"], environment: m.environment)
            #expect(file.status == 1 && file.stderrLines.count == 1 && file.stderr.contains("not a directory"), "\(file.stderr)")

            // Our options' bad values: one line naming the option, nothing mounted.
            for option in ["timeout=0", "timeout=soon", "max_inodes=5", "cache_size=lots"] {
                let refused = try await ProcessRunner.run(MountFixture.binary, ["mount", m.mountpoint, "--cache-dir", m.cacheDirectory, "-o", option],
                                                          environment: m.environment)
                #expect(refused.status == 1, "\(option)")
                #expect(refused.stderrLines.count == 1 && refused.stderr.contains(option), "\(option): \(refused.stderr)")
                #expect(!m.isMounted)
            }
        }
    }

    /// What is wrong on this machine (the mountpoint, an option FUSE does not know) is said in
    /// one line before Dropbox is tried: with Dropbox out of reach, "out of reach" was all a
    /// mount on a missing directory said; an unknown option read `io("cannot create the FUSE
    /// session …")` after libfuse's own line.
    @Test func mountSaysWhatIsWrongHereBeforeTryingDropbox() async throws {
        try await MountFixture.with(mount: false) { m in
            var dead = m.environment
            dead["DROPBOXFS_API_URL"] = "http://127.0.0.1:9"
            let missing = try await ProcessRunner.run(MountFixture.binary, ["mount", m.mountpoint + "/nope", "--cache-dir", m.cacheDirectory], environment: dead)
            #expect(missing.status == 1 && missing.stderrLines.count == 1 && missing.stderr.contains("no such directory"), "\(missing.stderr)")
            FileManager.default.createFile(atPath: m.root.path + "/a-file", contents: Data("x".utf8))
            let file = try await ProcessRunner.run(MountFixture.binary, ["mount", m.root.path + "/a-file", "--cache-dir", m.cacheDirectory], environment: dead)
            #expect(file.status == 1 && file.stderrLines.count == 1 && file.stderr.contains("not a directory"), "\(file.stderr)")
            for environment in [dead, m.environment] {
                let unknown = try await ProcessRunner.run(MountFixture.binary, ["mount", m.mountpoint, "--cache-dir", m.cacheDirectory, "-o", "noxattr,bogus"],
                                                          environment: environment)
                #expect(unknown.status == 1 && unknown.stderrLines.count == 1, "\(unknown.stderr)")
                #expect(unknown.stderr.contains("unknown option(s): `-o bogus'") && !unknown.stderr.contains("io("), "\(unknown.stderr)")
                #expect(!m.isMounted)
            }
        }
    }

    /// A second mount of the same cache directory (the store holds its file exclusively) is
    /// refused in one clear line; the first goes on serving.
    @Test func aCacheDirectoryServesOneMountAtATime() async throws {
        try await MountFixture.with { m in
            let other = m.root.appendingPathComponent("second").path
            try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
            let second = try await ProcessRunner.run(MountFixture.binary, ["mount", other, "--cache-dir", m.cacheDirectory], environment: m.environment)
            let mounted = (KernelText.read("/proc/self/mounts") ?? "").contains(" \(other) ")
            if mounted { _ = try await m.sh("fusermount3 -u -z '\(other)'") }
            #expect(second.status == 1)
            #expect(second.stderrLines.count == 1)
            #expect(second.stderr.contains("is in use by another dropboxfs mount"), "\(second.stderr)")
            #expect(!mounted)
            #expect(try await m.sh("ls \"$M\" > /dev/null").status == 0)
        }
    }

    /// A cache store damaged between two mounts (a disk error; a file overwritten) is refused
    /// in one line that names the file, says what it held and what to do, and leaves it as it
    /// is; put back, the mount serves again. The mount said only "SQLite error 26: file is not
    /// a database", naming no file.
    @Test func aDamagedCacheStoreIsNamedAndLeftAsItIs() async throws {
        try await MountFixture.with(seeds: []) { m in
            #expect(try await m.sh("echo kept > \"$M/kept.txt\"").status == 0)
            try await m.unmount()
            let account = try FileManager.default.contentsOfDirectory(atPath: m.cacheDirectory).filter { $0.hasPrefix("dbid") }
            #expect(account.count == 1, "\(account)")
            let cache = m.cacheDirectory + "/" + (account.first ?? "")
            for (store, says) in [("metadata.sqlite", "kept only on this machine"), ("blocks.sqlite", "copies of what Dropbox holds"),
                                  ("uploads.sqlite", "not yet on Dropbox")] {
                let path = cache + "/" + store
                #expect(try await m.sh("""
                    cd '\(cache)' && mv \(store) \(store).good && (mv \(store)-wal \(store)-wal.good 2>/dev/null || true) \
                    && head -c 8192 /dev/urandom > \(store) && cp \(store) \(store).damaged
                    """).status == 0)
                let refused = try await ProcessRunner.run(MountFixture.binary, ["mount", m.mountpoint, "--cache-dir", m.cacheDirectory],
                                                          environment: m.environment)
                #expect(refused.status == 1, "\(store): \(refused.stdout)")
                #expect(refused.stderrLines.count == 1, "\(store): \(refused.stderr)")
                #expect(refused.stderr.contains(path + " is damaged") && refused.stderr.contains(says), "\(store): \(refused.stderr)")
                #expect(!m.isMounted)
                #expect(try await m.sh("cmp '\(path)' '\(path).damaged'").status == 0, "\(store) left as it was")
                #expect(try await m.sh("""
                    cd '\(cache)' && rm \(store) \(store).damaged && mv \(store).good \(store) && (mv \(store)-wal.good \(store)-wal 2>/dev/null || true)
                    """).status == 0)
            }
            try await m.mount()
            #expect(try await m.sh("cat \"$M/kept.txt\"").stdout == "kept\n")
        }
    }

    /// A machine with many mounts (containers, snaps, systemd's own): the kernel's table of
    /// them is longer than a page, and the newest mounts come last. `unmount` said "not a
    /// dropboxfs mount" and `status` did not list the mount: the table was read with Foundation,
    /// which returns only the first page of a /proc file.
    @Test func aMountAmongManyOthersIsFoundByStatusAndUnmount() async throws {
        try await MountFixture.with(mount: false) { m in
            for index in 0..<60 { try await m.scratchDisk("other-mounts/\(index)", size: "64k") }
            #expect(try await m.sh("cat /proc/self/mounts").stdout.utf8.count > 4096, "the table is longer than a page")
            try await m.mount()
            let status = try await ProcessRunner.run(MountFixture.binary, ["status", m.mountpoint], environment: m.environment)
            #expect(status.status == 0, "\(status.stderr)")
            #expect(status.stdout.contains(m.mountpoint), "\(status.stdout)")
            let unmounted = try await ProcessRunner.run(MountFixture.binary, ["unmount", m.mountpoint], environment: m.environment)
            #expect(unmounted.status == 0, "\(unmounted.stderr)")
            try await eventually("the mount to go away") { !m.isMounted }
        }
    }

    @Test func mountTypeFuseDropboxfsWorksAsFstabWould() async throws {
        try await MountFixture.with(mount: false) { m in
            // mount(8) → mount.fuse3 → `sh -c 'dropboxfs SOURCE MOUNTPOINT -o OPTIONS'` with the
            // system's default PATH: the binary must be installed, as Scripts/install does. For
            // the test, our build stands in /usr/local/bin (whatever was there is put back).
            let installed = "/usr/local/bin/dropboxfs"
            let saved = installed + ".before-mount-test"
            let hadOne = FileManager.default.fileExists(atPath: installed)
            if hadOne { try FileManager.default.moveItem(atPath: installed, toPath: saved) }
            try FileManager.default.createSymbolicLink(atPath: installed, withDestinationPath: MountFixture.binary)
            defer {
                try? FileManager.default.removeItem(atPath: installed)
                if hadOne { try? FileManager.default.moveItem(atPath: saved, toPath: installed) }
            }
            let options = "api_url=\(m.emulator.baseURL),cache_dir=\(m.cacheDirectory),_netdev"
            let result = try await m.sh("mount -t fuse.dropboxfs default \"$M\" -o '\(options)'")
            #expect(result.status == 0, "\(result.stderr)")
            #expect(m.isMounted)
            #expect(try await m.sh("grep -c ' \(m.mountpoint) fuse.dropboxfs ' /proc/mounts").stdout == "1\n")
            #expect(try await m.sh("cat \"$M/README.txt\" | head -c 7").stdout == "Welcome")
            let status = try await ProcessRunner.run(MountFixture.binary, ["status", m.mountpoint], environment: m.environment)
            #expect(status.stdout.contains("account"))
            try await m.unmount()
        }
    }
}
