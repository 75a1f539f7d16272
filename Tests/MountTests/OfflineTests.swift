import DropboxAPI
import Foundation
import Testing
import TestSupport

/// Dropbox out of reach (doc/SEMANTICS.md, "Offline"): the mount goes on serving its cache
/// and queueing changes, fails fast where it needs Dropbox, and sends everything once it is
/// back. The outage is the emulator's: connections refused (`setReachable(false)`) or 503s.
@Suite("mount: Dropbox out of reach", .serialized, .timeLimit(.minutes(5)))
struct OfflineTests {
    @Test func anOutageIsServedFromTheCacheAndEveryChangeReachesDropboxAfter() async throws {
        try await MountFixture.with(seeds: []) { m in
            for name in ["cached", "edited", "removed", "uncached"] {
                try await m.uploadElsewhere("\(name)\n", to: "/work/\(name).txt")
            }
            try await eventually("the mount to see the files") {
                (try? await m.sh("ls \"$M/work\"").stdout.split(separator: "\n").count) == 4
            }
            let warm = try await m.sh("cat \"$M/work/cached.txt\" \"$M/work/edited.txt\"")
            #expect(warm.stdout == "cached\nedited\n")
            // What will be copied in, and a reference of the copy as it should end.
            let source = m.root.appendingPathComponent("source").path
            let reference = m.root.appendingPathComponent("reference").path
            let made = try await m.sh("""
                mkdir -p '\(source)/sub' && for i in 1 2 3 4 5; do head -c $((i * 3000)) /dev/urandom > "\(source)/f$i.bin"; done
                printf 'deep\\n' > '\(source)/sub/deep.txt'
                cp -r '\(source)' '\(reference)' && mv '\(reference)/f1.bin' '\(reference)/first.bin'
                """)
            #expect(made.status == 0, "\(made.stderr)")

            try await m.emulator.setReachable(false)
            let offline = try await m.sh("""
                set -e
                cp -r '\(source)' "$M/work/copied"
                mv "$M/work/copied/f1.bin" "$M/work/copied/first.bin"
                rm "$M/work/removed.txt"
                printf 'local line\\n' >> "$M/work/edited.txt"
                mkdir "$M/work/made offline"
                python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)' "$M/work/copied/first.bin"
                cp "$M/work/cached.txt" "$M/cached copy.txt"
                cat "$M/cached copy.txt"
                ls "$M/work" | sort | tr '\\n' ' '
                """)
            #expect(offline.status == 0, "\(offline.stderr)\n\(m.log)")
            #expect(offline.stdout == "cached\ncached.txt copied edited.txt made offline uncached.txt ")
            // Content never fetched cannot be read, and says why at once.
            let uncached = try await m.sh("cat \"$M/work/uncached.txt\"")
            #expect(uncached.status != 0)
            #expect(uncached.stderr.contains("Network is unreachable"), "\(uncached.stderr)")
            try await eventually("the status to say offline") { try await m.status().contains("offline     since") }
            // Another client edits the file this mount edited meanwhile.
            try m.emulator.writeFileDirectly("/work/edited.txt", contents: Array("remote edit\n".utf8))

            try await m.emulator.setReachable(true)
            try await eventually("the copy to reach Dropbox", timeout: 60) {
                (try? await m.expectOnDropbox(reference, at: "/work/copied")) != nil
            }
            try await eventually("the edit, the removal and the new folder to reach Dropbox", timeout: 60) {
                let names = Set(try await m.client.listAll("/work").map(\.name))
                return names.contains("made offline") && !names.contains("removed.txt")
                    && names.contains { $0.hasPrefix("edited (conflicted copy ") }
            }
            // cp inside the mount out of reach: its copy_file_range, which Dropbox makes when
            // reachable, failed with ENETUNREACH; the kernel now copies from the cache.
            try await eventually("the copy made out of reach to reach Dropbox", timeout: 60) {
                (try? await m.remoteText("/cached copy.txt")) == "cached\n"
            }
            // Both versions of the edited file are kept, on Dropbox and in the mount.
            let entries = try await m.client.listAll("/work")
            let copy = try #require(entries.first { $0.name.hasPrefix("edited (conflicted copy ") })
            #expect(try await m.remoteText(copy.pathLower ?? "") == "edited\nlocal line\n")
            #expect(try await m.remoteText("/work/edited.txt") == "remote edit\n")
            try await eventually("the mount to show both versions") {
                let shown = try await m.sh("cat \"$M/work/edited.txt\" \"$M/work/\(copy.name)\"")
                return shown.stdout == "remote edit\nedited\nlocal line\n"
            }
            try await eventually("the status to be online") { try await !m.status().contains("offline") }
            // The outage is in the log once, not once a request.
            let log = m.log
            #expect(log.components(separatedBy: "Dropbox is out of reach").count - 1 == 1, "\(log)")
            #expect(log.components(separatedBy: "Dropbox is reachable again").count - 1 == 1, "\(log)")
        }
    }

    @Test func aMountStartedOfflineServesItsCacheAndOneWithoutACacheFailsInOneLine() async throws {
        try await MountFixture.with(seeds: []) { m in
            try await m.uploadElsewhere("kept\n", to: "/notes/kept.txt")
            try await eventually("the mount to show the file") { (try? await m.sh("cat \"$M/notes/kept.txt\"").stdout) == "kept\n" }
            try await m.unmount()
            try await m.emulator.setReachable(false)

            let elsewhere = m.root.appendingPathComponent("another-cache").path
            let fresh = try await ProcessRunner.run(MountFixture.binary, ["mount", m.mountpoint, "--cache-dir", elsewhere], environment: m.environment)
            #expect(fresh.status != 0)
            #expect(fresh.stderr.contains("out of reach") && fresh.stderr.contains("no cache"), "\(fresh.stderr)")
            #expect(fresh.stderr.split(separator: "\n").count == 1, "\(fresh.stderr)")
            #expect(!m.isMounted)

            let cached = try await ProcessRunner.run(MountFixture.binary, ["mount", m.mountpoint, "--cache-dir", m.cacheDirectory], environment: m.environment)
            #expect(cached.status == 0, "\(cached.stderr)")
            #expect(cached.stderr.contains("serving the cached view"), "\(cached.stderr)")
            #expect(cached.stderr.split(separator: "\n").count == 1, "\(cached.stderr)")
            let served = try await m.sh("cat \"$M/notes/kept.txt\" && printf 'new\\n' > \"$M/notes/written offline.txt\" && ls \"$M/notes\"")
            #expect(served.status == 0, "\(served.stderr)")
            #expect(served.stdout == "kept\nkept.txt\nwritten offline.txt\n")
            #expect(try await m.status().contains("offline     since"))

            try await m.emulator.setReachable(true)
            try await eventually("the file written offline to reach Dropbox", timeout: 60) {
                (try? await m.remoteText("/notes/written offline.txt")) == "new\n"
            }
        }
    }

    /// Renames queued in an outage (case-only ones, a folder over an empty folder, a file into
    /// a folder made just before), a chmod, a truncate and new folders, then the daemon killed
    /// and mounted again out of reach, and one more rename: when Dropbox is back, with its
    /// answers slowed, the queue drains while `find` walks the tree again and again, and every
    /// walk must show what the last one before the return showed; Dropbox must end with it.
    /// (The steps of the differential suite's seed 112, which failed once in CI and never in a
    /// replay: most likely its truncate, of a file just uploaded, out of reach; see
    /// `aFileJustUploadedReadsWithoutDropbox`.)
    @Test func theTreeHoldsStillWhileAQueueLeftByAnOutageAndAKillDrains() async throws {
        try await MountFixture.with(seeds: [], mount: false) { m in
            try await DifferentialTests.mount(m)
            let fsync = "python3 -c 'import os, sys\nfor p in sys.argv[1:]:\n  fd = os.open(p, os.O_RDONLY); os.fsync(fd); os.close(fd)'"
            let made = try await m.sh("""
                set -e; mkdir "$M/q"; cd "$M/q"; mkdir a b c e
                head -c 30000 /dev/urandom > été
                \(fsync) été a b c e .
                mv b B; mv B b; mkdir d
                """)
            #expect(made.status == 0, "\(made.stderr)")
            try await m.emulator.setReachable(false)
            let offline = try await m.sh("""
                set -e; cd "$M/q"
                chmod 555 été; mv -T c b; truncate -s 5573 été; mv été d/b; mkdir d/a; mv b B; mv B b
                """)
            #expect(offline.status == 0, "\(offline.stderr)")
            try await m.killDaemon()
            try await m.mount(options: DifferentialTests.mountOptions)
            let walk = "cd \"$M/q\" && find . -mindepth 1 -type d -printf '%P/ %m\\n' -o -type f -printf '%P %m %s\\n' | sort && find . -type f -exec md5sum {} +"
            let moved = try await m.sh("mv \"$M/q/b\" \"$M/q/e/f\" && \(walk)")
            #expect(moved.status == 0, "\(moved.stderr)")
            let shown = moved.stdout
            #expect(shown.hasPrefix("a/ 755\nd/ 755\nd/a/ 755\nd/b 555 5573\ne/ 755\ne/f/ 755\n"), "\(shown)")

            try m.emulator.replaceFaults(["latency:ms=40,answer=1"])
            try await m.emulator.setReachable(true)
            try await eventually("Dropbox to hold the tree", timeout: 120) {
                let again = try await m.sh(walk)
                #expect(again.stdout == shown, "while the queue drained:\n\(again.stdout)\(again.stderr)\n\(m.log)")
                guard again.stdout == shown else { return true }
                let remote = try await m.client.listAll("/q", recursive: true).compactMap { entry -> String? in
                    guard let path = entry.pathLower, path != "/q" else { return nil }
                    if case .file(let file) = entry { return "\(path) \(file.size)" }
                    return path + "/"
                }.sorted()
                return remote == ["/q/a/", "/q/d/", "/q/d/a/", "/q/d/b 5573", "/q/e/", "/q/e/f/"]
            }
        }
    }

    /// Out of reach, a change that needs bytes never fetched fails with ENETUNREACH and
    /// changes nothing: a truncate(2) that keeps a part of the file, a write into it, and an
    /// ftruncate through a descriptor (coreutils' `truncate -s`). The ftruncate was kept in
    /// the view and its close said ENETUNREACH (the file could not be sealed without the part
    /// kept); the truncation then reached Dropbox once it was back, after the command had
    /// failed (doc/SEMANTICS.md, "Offline").
    @Test func aChangeNeedingBytesOutOfReachFailsChangingNothing() async throws {
        try await MountFixture.with(seeds: []) { m in
            let text = String(repeating: "0123456789abcdef", count: 1 << 14)  // 256 KiB
            try await m.uploadElsewhere(text, to: "/far.txt")
            try await eventually("the mount to show the file") { (try? await m.sh("stat -c %s \"$M/far.txt\"").stdout) == "262144\n" }
            try await m.emulator.setReachable(false)
            let refused = try await m.sh("""
                python3 -c 'import os, sys; os.truncate(sys.argv[1], 5573)' "$M/far.txt"; echo "truncate(2) $?"
                printf x | dd of="$M/far.txt" bs=1 seek=1000 conv=notrunc status=none; echo "write $?"
                stat -c %s "$M/far.txt"
                """)
            #expect(refused.stdout == "truncate(2) 1\nwrite 1\n262144\n", "\(refused.stdout)\(refused.stderr)")
            #expect(refused.stderr.components(separatedBy: "Network is unreachable").count == 3, "\(refused.stderr)")
            let descriptor = try await m.sh("truncate -s 5573 \"$M/far.txt\"; echo \"truncate $?\"; stat -c %s \"$M/far.txt\"")
            #expect(descriptor.stdout == "truncate 1\n262144\n", "\(descriptor.stdout)\(descriptor.stderr)")
            #expect(descriptor.stderr.contains("failed to truncate") && descriptor.stderr.contains("Network is unreachable"),
                    "\(descriptor.stderr)")
            try await m.emulator.setReachable(true)
            // Back in reach: nothing was queued, and the same call now fetches and truncates.
            try await eventually("the mount to read the file from Dropbox again", timeout: 60) {
                (try? await m.sh("cat \"$M/far.txt\""))?.stdout == text
            }
            #expect(try await m.sh("sync \"$M\"").status == 0)
            #expect(try await m.remoteText("/far.txt") == text)
            #expect(try await m.sh("truncate -s 5573 \"$M/far.txt\" && sync \"$M/far.txt\" && wc -c < \"$M/far.txt\"").stdout == "5573\n")
            #expect(try await m.remoteText("/far.txt") == String(text.prefix(5573)))
        }
    }

    /// Out of reach, a write into the one cached block of a file whose other blocks were never
    /// fetched needs nothing more, but its `close` says ENETUNREACH: the file cannot be sealed
    /// without them (doc/SEMANTICS.md, "Offline"). Back in reach, the change kept in the view
    /// is sealed and sent, and an fsync of its folder returns only once Dropbox has it.
    @Test func aWriteIntoAPartlyCachedFileOfflineReachesDropboxBeforeTheFolderFsyncReturns() async throws {
        try await MountFixture.with(seeds: []) { m in
            let text = String(repeating: "0123456789abcdef", count: 3 << 18)  // 12 MiB: three blocks
            try await m.uploadElsewhere(text, to: "/w/big.txt")
            try await eventually("the mount to show the file") { (try? await m.sh("stat -c %s \"$M/w/big.txt\"").stdout) == "12582912\n" }
            // The last block read (read-ahead goes on from there: past the end).
            #expect(try await m.sh("tail -c 16 \"$M/w/big.txt\"").stdout == "0123456789abcdef")
            try await m.emulator.setReachable(false)
            let offline = try await m.sh("""
                head -c 1 "$M/w/big.txt" > /dev/null; echo "read of an uncached block $?"
                printf XYZ | dd of="$M/w/big.txt" bs=1 seek=12582900 conv=notrunc status=none; echo "dd $?"
                tail -c 16 "$M/w/big.txt"
                """)
            // The write needs only its block; the close says the file could not be sealed, and
            // the change stays in the view.
            #expect(offline.stdout == "read of an uncached block 1\ndd 1\n0123XYZ789abcdef", "\(offline.stdout)\(offline.stderr)")
            #expect(offline.stderr.contains("closing output file") && offline.stderr.contains("Network is unreachable"), "\(offline.stderr)")
            try await m.emulator.setReachable(true)
            try await eventually("the mount to read from Dropbox again", timeout: 60) {
                (try? await m.sh("head -c 1 \"$M/w/big.txt\""))?.stdout == "0"
            }
            let synced = try await m.sh("sync \"$M/w\"")
            #expect(synced.status == 0, "\(synced.stderr)")
            var expected = Array(text.utf8)
            expected.replaceSubrange(12582900..<12582903, with: Array("XYZ".utf8))
            #expect(try await m.remoteText("/w/big.txt") == String(decoding: expected, as: UTF8.self))
        }
    }

    /// The folder fsync of the test above, made as soon as the mount is online again, while
    /// the seal Dropbox's return starts for that file still downloads the blocks it needs
    /// (downloads slowed): the fsync seals the file itself first and waits for it. It
    /// waited only for files already sealed, and returned with the old bytes on Dropbox (CI
    /// met this once as a race in the test above). A machine slower than the slowed downloads
    /// lets the seal finish first: the test then passes without telling anything.
    @Test func aFolderFsyncRightAfterDropboxReturnsSendsWhatTheOutageLeftUnsealed() async throws {
        try await MountFixture.with(seeds: []) { m in
            let text = String(repeating: "0123456789abcdef", count: 3 << 18)  // 12 MiB: three blocks
            try await m.uploadElsewhere(text, to: "/w/big.txt")
            try await eventually("the mount to show the file") { (try? await m.sh("stat -c %s \"$M/w/big.txt\"").stdout) == "12582912\n" }
            #expect(try await m.sh("tail -c 16 \"$M/w/big.txt\"").stdout == "0123456789abcdef")
            try await m.emulator.setReachable(false)
            let offline = try await m.sh("printf XYZ | dd of=\"$M/w/big.txt\" bs=1 seek=12582900 conv=notrunc status=none; echo \"dd $?\"")
            #expect(offline.stdout == "dd 1\n" && offline.stderr.contains("Network is unreachable"), "\(offline.stdout)\(offline.stderr)")
            try m.emulator.replaceFaults(["latency:ms=4000,routes=files/download"])
            try await m.emulator.setReachable(true)
            try await eventually("the mount to be online again", timeout: 60) {
                (try? m.statusReport())?["offline_since"] == nil
            }
            let synced = try await m.sh("sync \"$M/w\"")
            #expect(synced.status == 0, "\(synced.stderr)")
            var expected = Array(text.utf8)
            expected.replaceSubrange(12582900..<12582903, with: Array("XYZ".utf8))
            #expect(try await m.remoteText("/w/big.txt") == String(decoding: expected, as: UTF8.self))
            try await m.emulator.setFaults([])
        }
    }

    /// A file written here and just uploaded reads from here at once: its bytes go to the
    /// block cache after the upload, and until they were there a read of it asked Dropbox,
    /// failing with ENETUNREACH in an outage that came just then (CI met it as a truncate(2)
    /// that failed, seed 112 of the differential suite).
    @Test func aFileJustUploadedReadsWithoutDropbox() async throws {
        try await MountFixture.with(seeds: []) { m in
            let made = try await m.sh("""
                head -c 62914561 /dev/urandom > "$M/just.bin"
                python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)' "$M/just.bin"
                """)
            #expect(made.status == 0, "\(made.stderr)")
            try await m.emulator.setReachable(false)
            let read = try await m.sh("tail -c 1 \"$M/just.bin\" | wc -c; head -c 5573 \"$M/just.bin\" | wc -c")
            #expect(read.stdout == "1\n5573\n", "\(read.stdout)\(read.stderr)")
            try await m.emulator.setReachable(true)
        }
    }

    /// `rm -r` in an outage of folders made here that Dropbox never got: each rmdir takes its
    /// folder back from the queue. Each take-back woke the queue's sender, whose round (tried
    /// in the outage, failing at once) held the folders while it ran; an rmdir that came then
    /// had to send its folder first, and failed with ENETUNREACH, the folder left in place.
    @Test func rmROfNewFoldersInAnOutageRemovesEveryOne() async throws {
        try await MountFixture.with(seeds: []) { m in
            // The folders stay queued, and the sender in its retries: Dropbox refuses them.
            try await m.emulator.setFaults(["500:p=1,routes=files/create_folder_batch"])
            let made = try await m.sh("for i in $(seq 1 40); do mkdir -p \"$M/n$i/a/b\"; done")
            #expect(made.status == 0, "\(made.stderr)")
            try await eventually("a round of new folders tried") { (try await m.routeStats()["files/create_folder_batch"]?["requests"] ?? 0) > 0 }
            try await m.emulator.setReachable(false)
            try await eventually("the mount to find Dropbox out of reach") { try m.statusReport()["offline_since"] != nil }
            let removed = try await m.sh("for i in $(seq 1 40); do rm -r \"$M/n$i\" || echo \"n$i left\"; done; ls \"$M\"")
            #expect(removed.stdout.isEmpty && removed.stderr.isEmpty, "\(removed.stdout)\(removed.stderr)")
            try m.emulator.replaceFaults([])
            try await m.emulator.setReachable(true)
            try await eventually("the mount to be online again", timeout: 60) { try m.statusReport()["offline_since"] == nil }
            #expect(try await m.sh("sync \"$M\"").status == 0)
            #expect(try await m.client.listAll("").isEmpty)
        }
    }

    /// A folder made in an outage and renamed there is made at its new name instead of moved:
    /// renamed as a move, it had to be made at its old name first, so in the outage an rmdir
    /// of its old parent (`mkdir -p a/b; mv a/b c; rmdir a`), a rename over that parent, and
    /// a mkdir at its old name failed with ENETUNREACH (differential, tree mix with outages).
    /// What the queue holds survives a kill -9, and Dropbox gets folders alone, no move.
    @Test func foldersMadeAndRenamedInAnOutageAreMadeWhereTheyEnd() async throws {
        try await MountFixture.with(seeds: []) { m in
            #expect(try await m.sh("ls \"$M\"").status == 0)  // listed: known empty offline
            try await m.emulator.setReachable(false)
            try await eventually("the mount to find Dropbox out of reach") { try m.statusReport()["offline_since"] != nil }
            let renamed = try await m.sh("""
                set -e
                mkdir -p "$M/a/b"; mv "$M/a/b" "$M/c"; rmdir "$M/a"
                mkdir "$M/d" "$M/d/x"; mv "$M/d/x" "$M/y"; mv "$M/y" "$M/e"; mv -T "$M/e" "$M/d"
                mkdir -p "$M/f/g"; mv "$M/f/g" "$M/h"; mkdir "$M/f/g"
                cd "$M" && find . | sort
                """)
            let expected = ".\n./c\n./d\n./f\n./f/g\n./h\n"
            #expect(renamed.status == 0 && renamed.stdout == expected, "\(renamed.stdout)\(renamed.stderr)")
            try await m.killDaemon()
            try await m.mount()
            #expect(try await m.sh("cd \"$M\" && find . | sort").stdout == expected)
            try await m.emulator.setReachable(true)
            try await eventually("the mount to be online again", timeout: 60) { try m.statusReport()["offline_since"] == nil }
            #expect(try await m.sh("sync \"$M\"").status == 0)
            #expect(try await m.client.listAll("", recursive: true).compactMap(\.pathDisplay).sorted() == ["/c", "/d", "/f", "/f/g", "/h"])
            let stats = try await m.routeStats()
            #expect(stats["files/move_v2"]?["requests"] ?? 0 == 0 && stats["files/move_batch_v2"]?["requests"] ?? 0 == 0, "\(stats)")
        }
    }

    /// Another client renames a folder this mount has listed, folders inside it listed too:
    /// the change feed brings every entry of the moved tree at its new path, so the mount
    /// knows those folders whole there and serves them in an outage. It dropped their listings
    /// (the entries came at paths never listed), and `ls` of the renamed folder failed with
    /// ENETUNREACH. The feed brings the source's removal first or last, as the names sort.
    @Test(arguments: [("a", "moved"), ("source", "moved")])
    func aFolderRenamedElsewhereStaysListedAtItsNewName(source: String, target: String) async throws {
        try await MountFixture.with(seeds: []) { m in
            for path in ["one.txt", "b/two.txt", "b/c/three.txt", "empty/.keep"] {
                try await m.uploadElsewhere("x\n", to: "/\(source)/\(path)")
            }
            _ = try await m.client.rpc(Routes.delete, DeleteArgument(path: "/\(source)/empty/.keep"))
            let tree = ".:\nb\nempty\none.txt\n\n./b:\nc\ntwo.txt\n\n./b/c:\nthree.txt\n\n./empty:\n"
            try await eventually("the mount to list the tree") {
                (try? await m.sh("cd \"$M/\(source)\" && ls -R .").stdout) == tree
            }
            _ = try await m.client.rpc(Routes.move, RelocationArgument(from: "/\(source)", to: "/\(target)"))
            try await eventually("the mount to see the rename") { (try? await m.sh("ls \"$M\"").stdout) == "\(target)\n" }
            try await m.emulator.setReachable(false)
            try await eventually("the mount to find Dropbox out of reach") { try m.statusReport()["offline_since"] != nil }
            let listed = try await m.sh("cd \"$M/\(target)\" && ls -R .")
            #expect(listed.status == 0 && listed.stdout == tree, "\(listed.stdout)\(listed.stderr)")
        }
    }

    /// A new folder made and removed in an outage at the name a folder Dropbox holds was
    /// renamed away from: the removal unlisted that name, which was the renamed folder's
    /// listing too (Dropbox has it there until the rename is sent), and an rmdir of the
    /// renamed folder had to list it again: ENETUNREACH (differential, tree mix with outages).
    @Test func aNewFolderTakenBackLeavesTheRenamedFolderAtItsNameListed() async throws {
        try await MountFixture.with(seeds: []) { m in
            #expect(try await m.sh("mkdir \"$M/b\" && sync \"$M\"").status == 0)
            try await m.emulator.setReachable(false)
            try await eventually("the mount to find Dropbox out of reach") { try m.statusReport()["offline_since"] != nil }
            let removed = try await m.sh("cd \"$M\" && mv b x && mkdir b && rmdir b && rmdir x && ls -A")
            #expect(removed.status == 0 && removed.stdout.isEmpty, "\(removed.stdout)\(removed.stderr)")
            try await m.emulator.setReachable(true)
            try await eventually("the mount to be online again", timeout: 60) { try m.statusReport()["offline_since"] == nil }
            #expect(try await m.sh("sync \"$M\"").status == 0)
            #expect(try await m.client.listAll("").isEmpty)
        }
    }

    /// Renames in an outage over folders made here that Dropbox never got (as
    /// `rmROfNewFoldersInAnOutageRemovesEveryOne` for rmdir): each replaces its folder, taken
    /// back from the queue. One that came while the round sending the folder was under way
    /// sent a round of its own, and failed with ENETUNREACH (differential, tree mix with
    /// outages and server errors).
    @Test func renamesOverNewFoldersInAnOutageReplaceEveryOne() async throws {
        try await MountFixture.with(seeds: []) { m in
            // The round sending them is under way when the outage begins, and for a while.
            try await m.emulator.setFaults(["latency:ms=4000,routes=files/create_folder_batch"])
            let made = try await m.sh("for i in $(seq 1 40); do mkdir \"$M/t$i\"; done")
            #expect(made.status == 0, "\(made.stderr)")
            try await eventually("a round of new folders sent") { (try await m.routeStats()["files/create_folder_batch"]?["requests"] ?? 0) > 0 }
            try await m.emulator.setReachable(false)
            let renamed = try await m.sh("for i in $(seq 1 40); do mkdir \"$M/s$i\" && mv -T \"$M/s$i\" \"$M/t$i\" || echo \"t$i left\"; done; ls \"$M\" | grep s")
            #expect(renamed.stdout.isEmpty && renamed.stderr.isEmpty, "\(renamed.stdout)\(renamed.stderr)")
            try m.emulator.replaceFaults([])
            try await m.emulator.setReachable(true)
            try await eventually("the mount to be online again", timeout: 60) { try m.statusReport()["offline_since"] == nil }
            #expect(try await m.sh("sync \"$M\"").status == 0)
            #expect(try await m.client.listAll("").map(\.name).sorted() == (1...40).map { "t\($0)" }.sorted())
        }
    }

    /// A folder renamed in an outage, new folders made and renamed inside it and at its old
    /// name, and it renamed back over one of them and removed: as on a disk. Either it is on
    /// Dropbox already, or the round making it was under way as the outage began (Dropbox
    /// may have it or not). Differential, tree mix with outages: a new folder renamed out of
    /// the renamed folder stayed queued (a move needs it made first), and a mkdir at its old
    /// name had to send it; a rename of the folder while its round ran did the same to its
    /// own old name. Both answered ENETUNREACH.
    @Test(arguments: [false, true])
    func aFolderRenamedInAnOutageTakesNewFoldersInAndOutAndGoes(cutOffWhileMade: Bool) async throws {
        try await MountFixture.with(seeds: []) { m in
            if cutOffWhileMade {
                #expect(try await m.sh("ls \"$M\"").status == 0)  // listed: known empty offline
                try await m.emulator.setFaults(["latency:ms=4000,routes=files/create_folder_batch"])
                #expect(try await m.sh("mkdir \"$M/a\"").status == 0)
                try await eventually("the round making it sent") { (try await m.routeStats()["files/create_folder_batch"]?["requests"] ?? 0) > 0 }
            } else {
                #expect(try await m.sh("mkdir \"$M/a\" && sync \"$M\"").status == 0)
            }
            try await m.emulator.setReachable(false)
            let steps = try await m.sh("""
                set -e
                cd "$M"
                mv -T a d; mkdir d/b; mv -T d/b c; mkdir d/b; mkdir b; mkdir a; mkdir été; rmdir d/b; rmdir a
                mkdir a; mv -T été a; rmdir c; mv -T b a; mv -T d a; rmdir a
                ls -A
                """)
            #expect(steps.status == 0 && steps.stdout.isEmpty, "\(steps.stdout)\(steps.stderr)")
            try m.emulator.replaceFaults([])
            try await m.emulator.setReachable(true)
            try await eventually("the mount to be online again", timeout: 60) { try m.statusReport()["offline_since"] == nil }
            #expect(try await m.sh("sync \"$M\"").status == 0)
            #expect(try await m.client.listAll("").isEmpty)
        }
    }

    /// A folder renamed away and back, and a new folder renamed over it in an outage, as on a
    /// disk: the folder on Dropbox already or made here too, the two renames still queued as
    /// the outage begins or sent. (These passed; the case that failed is the next test's.)
    @Test(arguments: [(true, false), (true, true), (false, false), (false, true)])
    func aNewFolderRenamedInAnOutageOverAFolderRenamedAwayAndBackReplacesIt(onDropbox: Bool, renamesSent: Bool) async throws {
        try await MountFixture.with(seeds: []) { m in
            #expect(try await m.sh("printf x > \"$M/f\"" + (onDropbox ? " && mkdir \"$M/a\" && sync \"$M\"" : "")).status == 0)
            let steps = try await m.sh("cd \"$M\" && " + (onDropbox ? "" : "mkdir a && ") + "mv -T a e && mv -T e a && mkdir c" + (renamesSent ? " && sync ." : ""))
            #expect(steps.status == 0, "\(steps.stderr)")
            try await m.emulator.setReachable(false)
            let over = try await m.sh("cd \"$M\" && mv -T c a && ls -A")
            #expect(over.status == 0 && over.stdout == "a\nf\n", "\(over.stdout)\(over.stderr)")
            try await m.emulator.setReachable(true)
            try await eventually("the mount to be online again", timeout: 60) { try m.statusReport()["offline_since"] == nil }
            #expect(try await m.sh("sync \"$M\"").status == 0)
            #expect(try await m.client.listAll("").map(\.name).sorted() == ["a", "f"])
        }
    }

    /// The same with every folder still queued as the outage begins (the round sending them
    /// failing), and a new folder renamed away from the name first (the differential's
    /// shrunk sequence: `mkdir e e/f a; mv e b; <outage>; mv a e; mv e a; mkdir c; mv c a`).
    @Test func aNewFolderRenamedInAnOutageOverANewFolderRenamedAwayAndBackInItReplacesIt() async throws {
        try await MountFixture.with(seeds: []) { m in
            try await m.emulator.setFaults(["500:p=1,routes=files/create_folder_batch"])
            let made = try await m.sh("cd \"$M\" && mkdir e e/f a && mv -T e b")
            #expect(made.status == 0, "\(made.stderr)")
            try await eventually("a round of new folders tried") { (try await m.routeStats()["files/create_folder_batch"]?["requests"] ?? 0) > 0 }
            try await m.emulator.setReachable(false)
            try await eventually("the mount to find Dropbox out of reach") { try m.statusReport()["offline_since"] != nil }
            let over = try await m.sh("cd \"$M\" && mv -T a e && mv -T e a && mkdir c && mv -T c a && ls -A")
            #expect(over.status == 0 && over.stdout == "a\nb\n", "\(over.stdout)\(over.stderr)")
            try m.emulator.replaceFaults([])
            try await m.emulator.setReachable(true)
            try await eventually("the mount to be online again", timeout: 60) { try m.statusReport()["offline_since"] == nil }
            #expect(try await m.sh("sync \"$M\"").status == 0)
            #expect(try await m.client.listAll("", recursive: true).compactMap(\.pathDisplay).sorted() == ["/a", "/b", "/b/f"])
        }
    }

    /// `df` (statfs) in an outage answers the account's space as Dropbox last told it: the
    /// mount asks as it starts, and later only in the background. It asked at the first
    /// statfs, and at the first after each 30 s, failing with ENETUNREACH in an outage (and
    /// `rm -r`, which makes one, said so for the folder it was removing).
    @Test func dfInAnOutageAnswersTheSpaceLastKnown() async throws {
        try await MountFixture.with(seeds: ["demo"]) { m in
            try await eventually("the mount to ask for the account's space") {
                (try await m.routeStats()["users/get_space_usage"]?["requests"] ?? 0) > 0
            }
            let used = try await m.client.rpc(Routes.getSpaceUsage, NoArgument()).used
            try await m.emulator.setReachable(false)
            try await eventually("the mount to find Dropbox out of reach") { try m.statusReport()["offline_since"] != nil }
            let df = try await m.sh("df -k --output=size,used \"$M\" | tail -1")
            let fields = df.stdout.split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { Int64($0) }
            #expect(fields == [Int64(2 << 40) / 1024, (used + 4095) / 4096 * 4], "\(df.stdout)\(df.stderr)")
            try await m.emulator.setReachable(true)
        }
    }

    /// The status of a mount started offline where a daemon was killed says offline from
    /// the moment `mount` returns: the new daemon wrote its report only after it said
    /// "ready", so for a moment `status` showed the killed daemon's report, online, and tests
    /// that waited for "online again" went on while the mount was still offline.
    /// Out of reach, the uploader leaves the queue alone until Dropbox is back or someone
    /// waits for an upload: every try fails at once, yet each pass looks at the whole queue
    /// and each failure sets its own retry, so 30,000 files written in an outage kept a
    /// fifth of a core busy while nothing happened. A file closed in an outage is not tried
    /// (the status shows it queued, with no failure, two reports later: it was tried and
    /// failed 0.4 s after its close before); an fsync of it tries it (and returns, its bytes
    /// kept on the local disk); it reaches Dropbox once Dropbox is back.
    @Test func aQueueIsLeftAloneInAnOutageUntilSomeoneWaitsOrDropboxIsBack() async throws {
        try await MountFixture.with(seeds: []) { m in
            #expect(try await m.sh("ls \"$M\"").status == 0)  // the root is known: a create needs no Dropbox
            try await m.emulator.setReachable(false)
            // Known to be out of reach (the change feed's call finds it): a first try is how an
            // outage is found.
            try await eventually("the outage seen", timeout: 120) { try m.statusReport()["offline_since"] != nil }
            #expect(try await m.sh("echo queued > \"$M/queued.txt\" && echo later > \"$M/later.txt\"").status == 0)
            let closed = Date()
            func queued() throws -> [String: Any]? {
                let uploads = try m.statusReport()["uploads"] as? [[String: Any]] ?? []
                return uploads.first { ($0["path"] as? String)?.hasSuffix("/queued.txt") == true }
            }
            // Two reports written after the close (one every 2 s): well past the file's quiet
            // moment (0.4 s), when a pass took it.
            var reports = Set<String>()
            try await eventually("two status reports after the close", timeout: 60) {
                let written = try FileManager.default.attributesOfItem(atPath: try m.statusFile())[.modificationDate] as? Date
                if let written, written > closed.addingTimeInterval(2) { reports.insert("\(written.timeIntervalSince1970)") }
                return reports.count >= 2
            }
            let waiting = try #require(try queued(), "not in the status")
            #expect(waiting["failure"] == nil, "tried in the outage: \(waiting)")
            // Listed oldest first.
            let listed = (try m.statusReport()["uploads"] as? [[String: Any]] ?? []).compactMap { $0["path"] as? String }
            #expect(listed == ["/queued.txt", "/later.txt"], "\(listed)")
            #expect(try await m.sh("sync \"$M/queued.txt\"").status == 0)
            try await eventually("the fsync's try in the status", timeout: 60) { try queued()?["failure"] != nil }
            try await m.emulator.setReachable(true)
            try await eventually("the files on Dropbox", timeout: 120) {
                let (first, second) = (try? await m.remoteText("/queued.txt"), try? await m.remoteText("/later.txt"))
                return first == "queued\n" && second == "later\n"
            }
        }
    }

    @Test func theStatusAfterMountIsTheNewDaemonsNotTheKilledOnes() async throws {
        try await MountFixture.with(seeds: []) { m in
            for _ in 0..<3 {
                let killed = m.daemonPIDs()
                try await m.killDaemon()
                try await m.emulator.setReachable(false)
                try await m.mount()
                let report = try m.statusReport()
                #expect(report["offline_since"] != nil, "\(report)")
                #expect(!killed.contains(Int32(report["pid"] as? Int ?? 0)), "\(report)")
                try await m.emulator.setReachable(true)
            }
        }
    }

    /// Files closed while Dropbox is out of reach wait in the queue, as many as the user
    /// writes: none of them may keep a descriptor of the daemon's. Each held its staging
    /// file open until uploaded; a CI run whose uploads fell behind ran out of descriptors
    /// (`create .../staging/30692: Too many open files`) and writes failed with EIO. Here the
    /// daemon gets 256 descriptors and 1,500 files are written out of reach.
    @Test func filesWaitingForDropboxHoldNoDescriptorEach() async throws {
        try await MountFixture.with(seeds: []) { m in
            let pid = try #require(m.daemonPIDs().first)
            let limited = try await m.sh("prlimit --pid \(pid) --nofile=256:256")
            #expect(limited.status == 0, "\(limited.stderr)")
            try await Self.writeManyOutOfReach(m, readingBack: true)
            try await m.emulator.setReachable(true)
            try await Self.expectManyOnDropbox(m)
            #expect(!m.log.contains("Too many open files"), "\(m.log.suffix(2000))")
        }
    }

    /// The same queue of 1,500 files, left by a daemon killed out of reach, taken up by the
    /// next with 256 descriptors: the recovery opened each queued file and kept it open, and
    /// the files past the limit were "lost their staging file; dropped".
    @Test func aLongQueueLeftByAKilledDaemonIsTakenUpWithFewDescriptors() async throws {
        try await MountFixture.with(seeds: []) { m in
            try await Self.writeManyOutOfReach(m, readingBack: false)
            try await m.killDaemon()
            let mounted = try await m.sh("""
                prlimit --nofile=256:256 '\(MountFixture.binary)' mount "$M" --cache-dir '\(m.cacheDirectory)'
                """)
            try #require(mounted.status == 0, "\(mounted.stderr)")
            try await m.emulator.setReachable(true)
            try await Self.expectManyOnDropbox(m)
            #expect(!m.log.contains("lost its staging file"), "\(m.log.suffix(2000))")
        }
    }

    static let manyCount = 1500

    /// Makes Dropbox out of reach and writes `manyCount` small files into /many, reading some
    /// back if asked.
    private static func writeManyOutOfReach(_ m: MountFixture, readingBack: Bool) async throws {
        #expect(try await m.sh("ls \"$M\"").status == 0)  // the root is known: mkdir needs no Dropbox
        try await m.emulator.setReachable(false)
        let written = try await m.python("""
            import os
            os.mkdir(os.environ['M'] + '/many')
            for i in range(\(manyCount)):
                with open(os.environ['M'] + '/many/f%04d' % i, 'w') as f:
                    f.write('file %d\\n' % i)
            if \(readingBack ? "True" : "False"):
                for i in range(0, \(manyCount), 7):
                    assert open(os.environ['M'] + '/many/f%04d' % i).read() == 'file %d\\n' % i, i
            """, timeout: 600)
        try #require(written.status == 0, "\(written.stderr)\n\(m.log.suffix(2000))")
    }

    /// Waits for every file of `writeManyOutOfReach` to be on Dropbox, and checks one's bytes.
    private static func expectManyOnDropbox(_ m: MountFixture) async throws {
        try await eventually("the files to reach Dropbox", timeout: 300) {
            (try? await m.client.listAll("/many", recursive: false).filter { $0.name.hasPrefix("f") }.count) == manyCount
        }
        #expect(try await m.remoteText("/many/f0777") == "file 777\n")
    }

    /// A server that answers, but only 503, is out of reach too: after a run of them the
    /// mount stops waiting on retries.
    /// An fsync waiting for a file whose early chunk is in flight as an outage begins
    /// returns once that send fails, the file kept on the local disk: the uploader, idle in
    /// an outage unless someone waits, must go on with what an fsync waits for for as long as
    /// it waits. Idle but for the fsync's first wake (the file could not go then: its chunk
    /// was in flight), it never tried the file, and the fsync hung until Dropbox was back
    /// (found by the large-file differential: an msync).
    @Test func anFsyncWaitingForAnEarlySendCaughtByAnOutageReturns() async throws {
        try await MountFixture.with(seeds: [], mount: false) { m in
            try await m.mount(options: ["timeout=2"])  // a silent request is given up after 2 + 2 s
            #expect(try await m.sh("ls \"$M\"").status == 0)  // the root is known: a create needs no Dropbox
            // The first chunk sent before the close (32 MiB) is taken and never answered.
            try await m.emulator.setFaults(["silent:routes=files/upload_session/append_v2"])
            // Written from empty, front to back: once past 32 MiB, the first chunk goes while
            // the writer waits; then the rest, and the close.
            let marker = m.root.appendingPathComponent("chunk-under-way").path
            let writing = Task {
                try await m.python("""
                    import os, time
                    with open(os.environ['M'] + '/big.bin', 'wb') as f:
                        for _ in range(33):
                            f.write(os.urandom(1 << 20))
                            f.flush()
                        while not os.path.exists('\(marker)'):
                            time.sleep(0.02)
                        f.write(os.urandom(7 << 20))
                    """)
            }
            // Its session is started, then the chunk sent (and held).
            try await eventually("the early chunk under way", timeout: 60) {
                MountFixture.requests(try await m.emulator.routeStats(), ["files/upload_session/start"]) > 0
            }
            #expect(FileManager.default.createFile(atPath: marker, contents: nil))
            let written = try await writing.value
            #expect(written.status == 0, "\(written.stderr)")
            // The fsync waits for the chunk; then the outage drops its connection.
            let syncing = Task { try await m.sh("sync \"$M/big.bin\"", timeout: 120) }
            try await eventually("the fsync under way", timeout: 60) { try await m.sh("pgrep -x sync").status == 0 }
            try await m.emulator.setReachable(false)
            let synced = try await syncing.value
            #expect(synced.status == 0, "\(synced.stderr)")
            #expect(try m.statusReport()["offline_since"] != nil)
            try await m.emulator.setReachable(true)
            try await m.emulator.setFaults([])
            let expected = try await m.sh("sha256sum < \"$M/big.bin\"").stdout
            try await eventually("the file on Dropbox", timeout: 120) {
                (try? await m.client.metadataIfExists("/big.bin")?.fileMetadata?.size) == 40 << 20
            }
            #expect(try await m.sh("sha256sum < \"$M/big.bin\"").stdout == expected)
        }
    }

    @Test func aRunOfServerErrorsIsAnOutageAndTheQueueDrainsAfter() async throws {
        try await MountFixture.with(seeds: []) { m in
            try await m.uploadElsewhere("never read\n", to: "/storm/uncached.txt")
            try await eventually("the mount to list the file") { (try? await m.sh("ls \"$M/storm\"").stdout) == "uncached.txt\n" }
            try await m.emulator.setFaults(["503"])
            let written = try await m.sh("mkdir \"$M/storm/in\" && printf 'during\\n' > \"$M/storm/in/during.txt\"")
            #expect(written.status == 0, "\(written.stderr)")
            try await eventually("the status to say offline", timeout: 60) { try await m.status().contains("offline     since") }
            let uncached = try await m.sh("cat \"$M/storm/uncached.txt\"")
            #expect(uncached.stderr.contains("Network is unreachable"), "\(uncached.stderr)")
            try await m.emulator.setFaults([])
            try await eventually("the file to reach Dropbox", timeout: 60) {
                (try? await m.remoteText("/storm/in/during.txt")) == "during\n"
            }
            try await eventually("the status to be online") { try await !m.status().contains("offline") }
        }
    }

    /// A server that takes connections and never answers (a network gone quiet, a proxy
    /// half dead) is an outage too: a listing that needs it fails once two tries went silent
    /// for `-o timeout` (it hung through eight tries of two minutes each), the mount serves
    /// its cache meanwhile, and it is back once the server answers again — the change feed's
    /// longpoll, held by the silent server, does not keep the probe waiting.
    @Test func aServerThatStopsAnsweringIsAnOutageThatEnds() async throws {
        try await MountFixture.with(seeds: [], options: ["timeout=2"]) { m in
            try await m.uploadElsewhere("cached\n", to: "/work/cached.txt")
            try await m.uploadElsewhere("never listed\n", to: "/later/file.txt")
            try await eventually("the mount to read the file and see the folder") {
                (try? await m.sh("cat \"$M/work/cached.txt\" && ls \"$M\"").stdout) == "cached\nlater\nwork\n"
            }
            // The change feed's longpoll goes silent first: a change made behind the API's
            // back ends the one under way, and the next is held.
            try await m.emulator.setFaults(["silent:routes=files/list_folder/longpoll"])
            try m.emulator.writeFileDirectly("/work/poke.txt", contents: Array("poke\n".utf8))
            try await eventually("a longpoll to be held") {
                try await m.emulator.routeStats()["files/list_folder/longpoll"]?["delayed"] ?? 0 > 0
            }
            try await m.emulator.resetStats()
            try await m.emulator.setFaults(["silent"])  // every request
            let silent = try await m.sh("ls \"$M/later\"", timeout: 120)
            #expect(silent.status != 0)
            #expect(silent.stderr.contains("Network is unreachable"), "\(silent.stderr)")
            #expect(try await m.emulator.routeStats()["files/list_folder"]?["requests"] == 2)  // two silent tries
            try await eventually("the status to say offline") { try await m.status().contains("offline     since") }
            let served = try await m.sh("cat \"$M/work/cached.txt\" && printf 'new\\n' > \"$M/work/new.txt\" && cat \"$M/work/new.txt\"")
            #expect(served.status == 0, "\(served.stderr)")
            #expect(served.stdout == "cached\nnew\n")

            try await m.emulator.setFaults([])
            try await eventually("the status to be online", timeout: 60) { try await !m.status().contains("offline") }
            try await eventually("the file written meanwhile to reach Dropbox", timeout: 60) {
                (try? await m.remoteText("/work/new.txt")) == "new\n"
            }
            #expect(try await m.sh("ls \"$M/later\"").stdout == "file.txt\n")
        }
    }

    /// A commit whose answer is lost while Dropbox cannot be asked about it (the connection
    /// cut as it answers, then server errors): the file is on Dropbox, the mount does not
    /// know. A newer version written meanwhile must replace it, not go beside it as a
    /// conflicted copy of the mount's own commit (found by the differential suite with
    /// outages, seed 2568679572159912355).
    @Test func aNewerVersionReplacesOurCommitWhoseAnswerWasLost() async throws {
        try await MountFixture.with(seeds: []) { m in
            let commits = "files/upload+files/upload_session/finish+files/upload_session/finish_batch_v2"
            try await m.emulator.setFaults(["reset:p=1,after=0,routes=\(commits)", "503:p=1,routes=files/get_metadata"])
            #expect(try await m.sh("mkdir \"$M/lost\" && printf 'first\\n' > \"$M/lost/b.txt\"").status == 0)
            // Seen by listing: get_metadata answers 503 to this test too.
            try await eventually("the first version to be committed, its answer lost", timeout: 60) {
                (try? await m.client.listAll("/lost"))?.first?.fileMetadata?.size == 6
            }
            try await eventually("that upload to have failed, for all the mount knows", timeout: 120) {
                let uploads = try m.statusReport()["uploads"] as? [[String: Any]] ?? []
                return uploads.contains { $0["failure"] != nil }
            }
            #expect(try await m.sh("printf 'second\\n' > \"$M/lost/b.txt\"").status == 0)
            try await m.emulator.setFaults([])
            try await eventually("the second version to replace it", timeout: 60) {
                (try? await m.remoteText("/lost/b.txt")) == "second\n"
            }
            let names = try await m.client.listAll("/lost").map(\.name)
            #expect(names == ["b.txt"], "\(names)\n\(m.log)")
            #expect(try await m.sh("cat \"$M/lost/b.txt\"").stdout == "second\n")
        }
    }

    /// A file Dropbox holds, written where its blocks are not cached and closed while Dropbox
    /// is out of reach: the close cannot seal it (the unwritten blocks must come first) and
    /// says ENETUNREACH. Its writes then waited, unsealed, for another close of the file or
    /// an unmount: Dropbox coming back sent nothing (the differential suite, seed
    /// 11732908445391763287; failed before).
    @Test func aFileClosedUnsealedInAnOutageIsSealedAndSentWhenDropboxIsBack() async throws {
        try await MountFixture.with(seeds: []) { m in
            try await m.uploadElsewhere(String(repeating: "a", count: 5 << 20), to: "/big.txt")
            try await eventually("the mount to see the file") { (try? await m.sh("ls \"$M\"").stdout) == "big.txt\n" }
            // Written while Dropbox is there (the block written comes first), closed once it
            // is not: the other block is not in the cache.
            let flag = m.root.appendingPathComponent("close-now").path
            let writing = Task { try await m.python("""
                import os, time
                fd = os.open(os.environ["M"] + "/big.txt", os.O_RDWR)
                os.pwrite(fd, b"X", 0)
                open("\(flag).written", "w").close()
                while not os.path.exists("\(flag)"): time.sleep(0.02)
                try:
                    os.close(fd)
                    print("closed")
                except OSError as error:
                    print(error.errno)
                """) }
            try await eventually("the write") { FileManager.default.fileExists(atPath: flag + ".written") }
            try await m.emulator.setReachable(false)
            FileManager.default.createFile(atPath: flag, contents: nil)
            let written = try await writing.value
            #expect(written.status == 0, "\(written.stderr)")
            try await eventually("the mount to find Dropbox out of reach") { try m.statusReport()["offline_since"] != nil }
            try await m.emulator.setReachable(true)
            try await eventually("the write to reach Dropbox", timeout: 60) {
                (try? await m.remoteText("/big.txt")).map { $0.hasPrefix("Xa") && $0.utf8.count == 5 << 20 } == true
            }
        }
    }

    /// A version sealed while the one before it was uploading, whose upload the outage then
    /// cut: the two must not go up together after it, both replacing the same revision (the
    /// second then conflicted with the first and went beside it as a conflicted copy; found
    /// by the differential suite with outages, seed 2568679572159912355).
    @Test func aVersionSealedDuringAnUploadTheOutageCutReplacesIt() async throws {
        try await MountFixture.with(seeds: []) { m in
            let first = try await m.sh("mkdir \"$M/cut\" && printf 'one\\n' > \"$M/cut/f.txt\" && python3 -c 'import os, sys; os.fsync(os.open(sys.argv[1], os.O_RDONLY))' \"$M/cut\"")
            #expect(first.status == 0, "\(first.stderr)")
            try await m.emulator.setFaults(["latency:ms=120000,routes=files/upload+files/upload_session/start"])
            try await m.emulator.resetStats()
            #expect(try await m.sh("printf 'two\\n' > \"$M/cut/f.txt\"").status == 0)
            // Its bytes may be staged early: under way means taken by its upload, not only staged.
            try await eventually("its upload to be under way") {
                let stats = try await m.routeStats()
                let uploads = try m.statusReport()["uploads"] as? [[String: Any]] ?? []
                return (stats["files/upload"]?["delayed"] ?? 0) + (stats["files/upload_session/start"]?["delayed"] ?? 0) > 0
                    && uploads.contains { $0["path"] as? String == "/cut/f.txt" && $0["state"] as? String == "uploading" }
            }
            #expect(try await m.sh("printf 'three\\n' > \"$M/cut/f.txt\"").status == 0)
            try await m.emulator.setReachable(false)
            try await eventually("the mount to find Dropbox out of reach") { try m.statusReport()["offline_since"] != nil }
            try m.emulator.replaceFaults([])
            try await m.emulator.setReachable(true)
            try await eventually("the newest version to reach Dropbox", timeout: 60) {
                (try? await m.remoteText("/cut/f.txt")) == "three\n"
            }
            try await eventually("the queue to drain") { try m.statusReport()["uploads_pending"] as? Int == 0 }
            let names = try await m.client.listAll("/cut").map(\.name)
            #expect(names == ["f.txt"], "\(names)\n\(m.log)")
        }
    }
}
