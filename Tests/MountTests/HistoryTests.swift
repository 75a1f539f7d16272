import DropboxAPI
import Foundation
import Testing
import TestSupport

/// The history views (`F/.dropbox/revisions/NAME/`, `F/.dropbox/deleted/`), restore, shared
/// links and search, used through a mount (doc/SEMANTICS.md, "History").
@Suite("mount: history, links, search", .serialized, .timeLimit(.minutes(5)))
struct HistoryTests {
    static var cli: String { MountFixture.binary }

    @Test func aFileEditedThreeTimesShowsThreeRevisionsAndRestores() async throws {
        try await MountFixture.with { m in
            let written = try await m.python("""
                import os
                os.mkdir(os.environ["M"] + "/Reports")
                for text in ["one\\n", "two!\\n", "three!!\\n"]:
                    fd = os.open(os.environ["M"] + "/Reports/q3.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                    os.write(fd, text.encode())
                    os.fsync(fd)
                    os.close(fd)
                """)
            #expect(written.status == 0, "\(written.stderr)")
            let view = "\"$M/Reports/.dropbox/revisions/q3.txt\""
            let names = try await m.sh("ls \(view)").stdout.split(separator: "\n").map(String.init)
            #expect(names.count == 3, "\(names)")
            #expect(names.allSatisfy { $0.hasSuffix(".txt") && $0.count > 20 })
            let contents = try await m.sh("for f in \(view)/*; do cat \"$f\"; done").stdout
            #expect(contents == "one\ntwo!\nthree!!\n")
            let sizes = try await m.sh("stat -c %s \(view)/*").stdout
            #expect(sizes == "4\n5\n8\n")
            // Hidden: listed nowhere, walked by nothing.
            #expect(!(try await m.sh("ls -a \"$M/Reports\"").stdout.contains(".dropbox")))
            #expect(!(try await m.sh("find \"$M\"").stdout.contains(".dropbox")))

            let oldest = try #require(names.first?.split(separator: "_").dropFirst(2).first?.split(separator: ".").first.map(String.init))
            let restored = try await m.sh("'\(Self.cli)' restore \"$M/Reports/q3.txt\" --rev \(oldest)")
            #expect(restored.status == 0, "\(restored.stderr)")
            #expect(restored.stdout.contains("restored \(m.mountpoint)/Reports/q3.txt"))
            #expect(try await m.sh("cat \"$M/Reports/q3.txt\"").stdout == "one\n")
            #expect(try await m.remoteText("/Reports/q3.txt") == "one\n")
            #expect(try await m.sh("ls \(view) | wc -l").stdout == "4\n")
        }
    }

    @Test func aDeletedFileShowsUnderDeletedAndComesBack() async throws {
        try await MountFixture.with { m in
            _ = try await m.sh("mkdir \"$M/Old\" && printf 'keep me\\n' > \"$M/Old/a.txt\" && printf 'me too\\n' > \"$M/Old/b.txt\" && printf 'stays\\n' > \"$M/Old/c.txt\"")
            #expect(try await m.syncFolder("\"$M/Old\"").status == 0)
            _ = try await m.sh("rm \"$M/Old/a.txt\" \"$M/Old/b.txt\"")
            let deleted = try await m.sh("ls \"$M/Old/.dropbox/deleted\"")
            #expect(deleted.stdout == "a.txt\nb.txt\n", "\(deleted.stderr)")
            #expect(try await m.sh("cat \"$M/Old/.dropbox/deleted/a.txt\"").stdout == "keep me\n")

            let moved = try await m.sh("mv \"$M/Old/.dropbox/deleted/a.txt\" \"$M/Old/\"")
            #expect(moved.status == 0, "\(moved.stderr)")
            #expect(try await m.sh("cat \"$M/Old/a.txt\"").stdout == "keep me\n")
            #expect(try await m.remoteText("/Old/a.txt") == "keep me\n")
            #expect(try await m.sh("ls \"$M/Old/.dropbox/deleted\"").stdout == "b.txt\n")

            let restored = try await m.sh("'\(Self.cli)' restore \"$M/Old/b.txt\"")
            #expect(restored.status == 0, "\(restored.stderr)")
            #expect(try await m.sh("cat \"$M/Old/b.txt\"").stdout == "me too\n")
            #expect(try await m.sh("ls \"$M/Old\"").stdout == "a.txt\nb.txt\nc.txt\n")
            #expect(try await m.sh("ls \"$M/Old/.dropbox/deleted\"").stdout == "")
        }
    }

    @Test func nothingInTheViewsCanBeWrittenOrDeleted() async throws {
        try await MountFixture.with { m in
            _ = try await m.sh("mkdir \"$M/V\" && printf 'x\\n' > \"$M/V/f.txt\" && printf 'y\\n' > \"$M/V/g.txt\"")
            #expect(try await m.syncFolder("\"$M/V\"").status == 0)
            _ = try await m.sh("rm \"$M/V/g.txt\"")
            let version = try await m.sh("ls -d \"$M/V/.dropbox/revisions/f.txt\"/*").stdout.trimmingCharacters(in: .newlines)
            #expect(!version.isEmpty)
            let attempts = [
                "touch \"$M/V/.dropbox/new\"", "mkdir \"$M/V/.dropbox/revisions/d\"", "rmdir \"$M/V/.dropbox/deleted\"",
                "rm \"$M/V/.dropbox/deleted/g.txt\"", "rm '\(version)'", "printf more >> '\(version)'", "truncate -s 0 '\(version)'",
                "touch -d 2001-01-01 '\(version)'", "mv '\(version)' \"$M/V/.dropbox/revisions/f.txt/renamed\"",
                "cp \"$M/V/f.txt\" \"$M/V/.dropbox/deleted/\"", "mv \"$M/V/f.txt\" \"$M/V/.dropbox/deleted/\"",
                "setfattr -n user.dropbox.pinned -v 1 '\(version)'", "printf z > \"$M/V/.dropbox/deleted/g.txt\"",
            ]
            for attempt in attempts {
                let result = try await m.sh(attempt)
                #expect(result.status != 0 && result.stderr.contains("Read-only file system"), "\(attempt): \(result.stderr)")
            }
            // A real file cannot take the name either (Dropbox refuses it).
            #expect(try await m.sh("touch \"$M/V/.dropbox\"").status != 0)
            #expect(try await m.sh("cat \"$M/V/f.txt\" \"$M/V/.dropbox/deleted/g.txt\"").stdout == "x\ny\n")
            #expect(try await m.sh("ls \"$M/V\"").stdout == "f.txt\n")
            #expect(try await m.sh("stat -c %A '\(version)' \"$M/V/.dropbox/deleted\"").stdout == "-r--r--r--\ndr-xr-xr-x\n")
        }
    }

    @Test func aRealFolderNamedLikeAViewHasItsOwnViews() async throws {
        try await MountFixture.with { m in
            let made = try await m.sh("mkdir -p \"$M/.dropboxrc/x\" && printf a > \"$M/.dropboxrc/x/f\" && ls -a \"$M/.dropboxrc\"")
            #expect(made.stdout == ".\n..\nx\n", "\(made.stderr)")
            #expect(try await m.syncFolder("\"$M/.dropboxrc\"").status == 0)
            let versions = try await m.sh("ls \"$M/.dropboxrc/x/.dropbox/revisions/f\" | wc -l")
            #expect(versions.stdout == "1\n", "\(versions.stderr)")
            #expect(try await m.sh("ls \"$M/.dropboxrc/.dropbox/revisions\"").stdout == "")  // x is a folder: no versions
        }
    }

    @Test func offlineTheViewsFailAtOnceAndShowWhatWasDoneOnceBack() async throws {
        try await MountFixture.with(seeds: []) { m in
            _ = try await m.sh("mkdir \"$M/w\" && printf one > \"$M/w/f.txt\" && printf gone > \"$M/w/g.txt\"")
            #expect(try await m.syncFolder("\"$M/w\"").status == 0)
            try await m.emulator.setReachable(false)
            _ = try await m.sh("printf two > \"$M/w/f.txt\" && rm \"$M/w/g.txt\"")
            for view in ["\"$M/w/.dropbox/deleted\"", "\"$M/w/.dropbox/revisions/f.txt\""] {
                let result = try await m.sh("ls \(view)")
                #expect(result.status != 0 && result.stderr.contains("unreachable"), "\(view): \(result.stderr)")
            }
            try await m.emulator.setReachable(true)
            try await eventually("the views to answer again") { try await m.sh("ls \"$M/w/.dropbox/deleted\"").stdout == "g.txt\n" }
            #expect(try await m.sh("cat \"$M/w/.dropbox/revisions/f.txt\"/*").stdout == "onetwo")
        }
    }

    @Test func shareTwicePrintsOneLinkThatTheAttributeShows() async throws {
        try await MountFixture.with { m in
            let file = "\"$M/Documents/notes.md\""
            let none = try await m.sh("getfattr --only-values -n user.dropbox.shared_link \(file)")
            #expect(none.status != 0 && none.stderr.contains("No such attribute"), "\(none.stderr)")
            let first = try await m.sh("'\(Self.cli)' share \(file)")
            #expect(first.status == 0, "\(first.stderr)")
            let link = first.stdout.trimmingCharacters(in: .newlines)
            #expect(link.hasPrefix("https://"))
            #expect(try await m.sh("'\(Self.cli)' share \(file)").stdout.trimmingCharacters(in: .newlines) == link)
            #expect(try await m.sh("getfattr --only-values -n user.dropbox.shared_link \(file)").stdout == link)
            #expect(!(try await m.sh("getfattr -d \(file)").stdout.contains("shared_link")))  // asked for by name only
            #expect(try await m.sh("'\(Self.cli)' unshare \(file)").status == 0)
            #expect(try await m.sh("getfattr --only-values -n user.dropbox.shared_link \(file)").status != 0)
        }
    }

    @Test func searchInsideAMountFindsByNameAndPrintsMountPaths() async throws {
        try await MountFixture.with { m in
            _ = try await m.sh("mkdir -p \"$M/Search/deep\" && printf 1 > \"$M/Search/deep/Invoice-2026.pdf\" && printf 22 > \"$M/Search/invoice notes.txt\"")
            #expect(try await m.syncFolder("\"$M/Search\"").status == 0)
            let found = try await m.sh("cd \"$M/Search\" && '\(Self.cli)' search invoice")
            #expect(found.status == 0, "\(found.stderr)")
            let lines = found.stdout.split(separator: "\n")
            #expect(lines.count == 2)
            #expect(lines.contains { $0.hasSuffix("\(m.mountpoint)/Search/deep/Invoice-2026.pdf") && $0.contains(" 1  ") })
            let json = try await m.sh("'\(Self.cli)' search 'invoice notes' --path \"$M/Search\" --json").stdout
            let match = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
            #expect(match?["path"] as? String == m.mountpoint + "/Search/invoice notes.txt")
            // Dropbox promises the casing of the last component only (the mount sends folded
            // parents); the mount path above was found with the mount's own casing.
            #expect((match?["dropbox_path"] as? String)?.lowercased() == "/search/invoice notes.txt")
        }
    }
}
