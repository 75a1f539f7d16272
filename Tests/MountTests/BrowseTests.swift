import DropboxAPI
import Foundation
import Testing
import TestSupport

/// Everyday tools on a mounted account: the listing, reading and searching a user does.
@Suite("mount: browsing and reading", .serialized, .timeLimit(.minutes(5)))
struct BrowseTests {
    @Test func everydayToolsSeeTheSampleTree() async throws {
        try await MountFixture.with { m in
            let ls = try await m.sh("ls -lR \"$M\" | grep -c '^[-d]'")
            let everything = try await m.client.listAll("", recursive: true).count
            #expect(Int(ls.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) == everything)

            let cat = try await m.sh("cat \"$M/README.txt\"")
            #expect(cat.stdout.hasPrefix("Welcome to dropboxfs!"))

            let stat = try await m.sh("stat -c '%s %F %a' \"$M/Photos/IMG_1001.jpg\" \"$M/Photos\"")
            #expect(stat.stdout == "1048576 regular file 644\n4096 directory 755\n")

            let grep = try await m.sh("grep -rl 'lazy dog' \"$M/Archive\" | wc -l")
            #expect(grep.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "200")

            let find = try await m.sh("find \"$M\" -name '*.txt' | wc -l")
            #expect(find.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "202")

            let du = try await m.sh("du -sk \"$M/Photos\" | cut -f1")
            #expect(Int(du.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) == (256 + 1024 + 3072))

            let unicode = try await m.sh("cat \"$M/Ünïcødé — 文件/héllo wörld.txt\"")
            #expect(unicode.stdout == "Grüße, 世界! 👋\n")
            // Lookups are exact, as on any Linux filesystem (doc/SEMANTICS.md); a new name that
            // differs only in case from an entry is refused, since Dropbox would take it for that one.
            #expect(try await m.sh("cat \"$M/README.txt\" | head -c 7").stdout == "Welcome")
            #expect(try await m.sh("cat \"$M/readme.TXT\"").status != 0)
            #expect(try await m.sh("touch \"$M/readme.TXT\"").stderr.contains("File exists"))
            // The log says why, for a name `ls` does not show.
            #expect(m.log.contains("create /readme.TXT: refused (File exists): Dropbox takes the name for the existing 'README.txt'"))
            #expect(try await m.sh("mkdir \"$M/ARCHIVE\"").stderr.contains("File exists"))
            #expect(m.log.contains("mkdir /ARCHIVE: refused (File exists): Dropbox takes the name for the existing 'Archive'"))

            let xattr = try await m.sh("getfattr --only-values -n user.dropbox.content_hash \"$M/README.txt\"")
            let remote = try await m.client.rpc(Routes.getMetadata, GetMetadataArgument(path: "/README.txt")).fileMetadata
            #expect(xattr.stdout == remote?.contentHash)
            #expect(try await m.sh("getfattr --only-values -n user.dropbox.rev \"$M/README.txt\"").stdout == remote?.rev)

            let df = try await m.sh("df -k --output=size,used \"$M\" | tail -1")
            let fields = df.stdout.split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { Int64($0) }
            let used = try await m.client.rpc(Routes.getSpaceUsage, NoArgument()).used
            #expect(fields == [Int64(2 << 40) / 1024, (used + 4095) / 4096 * 4])  // whole 4 KiB blocks

            // touch makes an empty file, on Dropbox once synced.
            let write = try await m.sh("touch \"$M/new.txt\" && sync \"$M/new.txt\"")
            #expect(write.status == 0, "\(write.stderr)")
            #expect(try await m.client.rpc(Routes.getMetadata, GetMetadataArgument(path: "/new.txt")).fileMetadata?.size == 0)
        }
    }

    /// The mount's own attributes are answered by name, never listed (`getfattr -d`, like
    /// `rsync -X` or `tar --xattrs`, copies what is listed): a file or folder made here has
    /// no id, revision or content hash until Dropbox has it; once synced, `getfattr -n`
    /// answers them (a folder only its id) and `getfattr -d` still lists none.
    @Test func ownAttributesAreAnsweredByNameOnly() async throws {
        try await MountFixture.with { m in
            let fresh = try await m.sh("cd \"$M\" && echo new > fresh.txt && mkdir fresh-folder && getfattr -d fresh.txt fresh-folder")
            #expect(fresh.status == 0 && fresh.stderr.isEmpty && fresh.stdout.isEmpty, "\(fresh)")
            #expect(try await m.syncFolder("\"$M\"").status == 0)
            let synced = try await m.sh("cd \"$M\" && getfattr -d fresh.txt fresh-folder")
            #expect(synced.status == 0 && synced.stderr.isEmpty && synced.stdout.isEmpty, "\(synced)")
            for name in ["user.dropbox.content_hash", "user.dropbox.rev", "user.dropbox.id"] {
                #expect(try await m.sh("getfattr --only-values -n \(name) \"$M/fresh.txt\"").stdout.count > 10, "\(name)")
            }
            #expect(try await m.sh("getfattr --only-values -n user.dropbox.id \"$M/fresh-folder\"").stdout.hasPrefix("id:"))
            #expect(try await m.sh("getfattr -n user.dropbox.rev \"$M/fresh-folder\"").status != 0)
        }
    }

    /// `-o noxattr`: no extended attributes at all (the kernel, told they are not
    /// implemented, stops asking: `ls -l` no longer costs a request per file); the rest of
    /// the mount is as usual.
    @Test func noxattrTurnsExtendedAttributesOff() async throws {
        try await MountFixture.with(options: ["noxattr"]) { m in
            let get = try await m.sh("getfattr -n user.dropbox.content_hash \"$M/README.txt\"")
            #expect(get.status != 0 && get.stderr.contains("Operation not supported"), "\(get)")
            let list = try await m.sh("getfattr -d \"$M/README.txt\"")
            #expect(!list.stdout.contains("user.dropbox"), "\(list)")
            #expect(try await m.sh("ls -l \"$M/README.txt\" | cut -c1-10").stdout == "-rw-r--r--\n")
            #expect(try await m.sh("cat \"$M/README.txt\" | head -c 7").stdout == "Welcome")
        }
    }

    @Test func copiesOutMatchTheServerByteForByte() async throws {
        try await MountFixture.with(seeds: ["files=1000,dirs=10,depth=1,size=3000,unicode,root=/tree", "big=1G"]) { m in
            let out = m.root.appendingPathComponent("out").path
            let copy = try await m.sh("cp -r \"$M/tree\" '\(out)' && find '\(out)' -type f | wc -l", timeout: 300)
            #expect(copy.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "1000")
            // Every copied file has the content hash Dropbox reports for it.
            let files = try await m.client.listAll("/tree", recursive: true).compactMap(\.fileMetadata)
            var checked = 0
            for file in files {
                let relative = String(file.pathDisplay!.dropFirst("/tree".count))
                let local = URL(fileURLWithPath: out + relative)
                guard let data = try? Data(contentsOf: local) else { continue }
                #expect(ContentHasher.hash(Array(data)) == file.contentHash)
                checked += 1
            }
            #expect(checked == 1000)

            let big = try await m.sh("cp \"$M/big.bin\" '\(out)/big.bin' && sha256sum '\(out)/big.bin' | cut -c1-64", timeout: 300)
            // One sequential read downloads each byte about once.
            let downloaded = Double(try await m.routeStats()["files/download"]?["bytes_out"] ?? 0)
            let read: Double = Double(1 << 30) + 1000 * 3000
            #expect(downloaded <= read * 1.05)
            let reference = try await m.sh("curl -s -X POST '\(m.emulator.baseURL)/2/files/download' -H 'Authorization: Bearer \(MountFixture.token)' -H 'Dropbox-API-Arg: {\"path\":\"/big.bin\"}' | sha256sum | cut -c1-64", timeout: 300)
            #expect(big.stdout == reference.stdout)
            #expect(big.stdout.count == 65)
        }
    }

    /// A walk over more files than `max_inodes` leaves the daemon's inode table at about
    /// that size: the mount asks the kernel to drop the longest-known files, not waiting for
    /// it to run short of memory (a `find` over a million entries kept a million inodes
    /// here). A file held open keeps its inode; what was dropped is looked up again.
    @Test func aWalkOverMoreFilesThanTheInodeLimitKeepsTheTableBounded() async throws {
        try await MountFixture.with(seeds: ["files=5000,dirs=1,depth=0,size=10,root=/many"], options: ["max_inodes=1000"]) { m in
            let walked = try await m.python("""
            import os, subprocess
            first = os.environ["M"] + "/many/file-000000.txt"
            fd = os.open(first, os.O_RDONLY)
            held = os.fstat(fd).st_ino
            found = subprocess.run(["find", os.environ["M"] + "/many", "-type", "f"], capture_output=True, text=True, check=True)
            assert len(found.stdout.split()) == 5000, len(found.stdout.split())
            assert os.stat(first).st_ino == held
            assert os.pread(fd, 6, 0) == b"line 0"
            os.close(fd)
            # A report of the status written after the walk counts this upload.
            marker = os.open(os.environ["M"] + "/marker", os.O_WRONLY | os.O_CREAT, 0o644)
            os.fsync(marker)
            os.close(marker)
            """)
            #expect(walked.status == 0, "\(walked.stderr)")
            try await eventually("the kernel to drop the oldest inodes", timeout: 30) {
                let status = try await m.status()
                return status.contains(", 1 done") && Self.inodesKnown(status) <= 1_200
            }
            let long = try await m.sh("ls -l \"$M/many\" | grep -c '^-'")
            #expect(long.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "5000")
            #expect(try await m.sh("cat \"$M/many/file-000001.txt\"").stdout.hasPrefix("line 0"))
        }
    }

    /// The inode number a plain `readdir` shows (past the first readdirplus answer, the
    /// kernel asks without attributes) is the one `stat` then gives, and the one the next
    /// mount gives: `git` and backup tools keep inode numbers and rescan a file whose number
    /// changed. A `seekdir` past the end reads nothing (it crashed the daemon when the
    /// readdir answer was sized before it was filled).
    @Test func inodeNumbersShownByReaddirAreTheOnesStatGivesAcrossMounts() async throws {
        try await MountFixture.with(seeds: ["files=600,dirs=1,depth=0,size=10,root=/many"]) { m in
            let script = """
            import ctypes, json, os
            folder = os.environ["M"] + "/many"
            shown = {entry.name: entry.inode() for entry in os.scandir(folder)}
            assert len(shown) == 600, len(shown)
            stated = {name: os.stat(folder + "/" + name).st_ino for name in shown}
            wrong = [name for name in shown if shown[name] != stated[name]]
            assert not wrong, (len(wrong), wrong[:3])
            assert len(set(stated.values())) == 600
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
            os.lseek(fd, 1000000, os.SEEK_SET)
            buffer = ctypes.create_string_buffer(4096)
            getdents64 = 217
            assert ctypes.CDLL(None, use_errno=True).syscall(getdents64, fd, buffer, 4096) == 0
            os.close(fd)
            print(json.dumps(stated, sort_keys=True))
            """
            let before = try await m.python(script)
            #expect(before.status == 0, "\(before.stderr)")
            #expect(try await m.unmount().status == 0)
            try await m.mount()
            let after = try await m.python(script)
            #expect(after.status == 0, "\(after.stderr)")
            #expect(!before.stdout.isEmpty && after.stdout == before.stdout)
        }
    }

    /// The inodes the daemon knows the kernel holds, from `dropboxfs status`.
    static func inodesKnown(_ status: String) -> Int {
        let line = status.split(separator: "\n").first { $0.contains("inodes") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? .max
    }

    @Test func aTenThousandEntryDirectory() async throws {
        try await MountFixture.with(seeds: ["files=10000,dirs=1,depth=0,size=10,root=/many"]) { m in
            let ls = try await m.sh("ls \"$M/many\" | wc -l")
            #expect(ls.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "10000")
            let long = try await m.sh("ls -l \"$M/many\" | grep -c '^-'")
            #expect(long.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "10000")
            #expect(try await m.sh("cat \"$M/many/file-009999.txt\"").stdout.hasPrefix("line 0"))
            // Inodes the kernel forgets are forgotten here too: memory follows what is in use.
            _ = try await m.sh("sync; echo 2 > /proc/sys/vm/drop_caches")
            try await eventually("the kernel's forgets to reach the daemon", timeout: 15) { Self.inodesKnown(try await m.status()) < 1000 }
        }
    }
}
