import DropboxAPI
import Foundation
import Testing
import TestSupport

/// Pinned files (doc/SEMANTICS.md, "Pinned files"): downloaded without being read, never
/// evicted, kept current, readable while Dropbox is out of reach.
@Suite("mount: pinned files", .serialized, .timeLimit(.minutes(5)))
struct PinTests {
    /// Distinct text of about `size` bytes.
    static func text(_ seed: String, _ size: Int) -> String {
        var lines = ""
        var n = 0
        while lines.utf8.count < size { lines += "\(seed) line \(n)\n"; n += 1 }
        return lines
    }

    @Test func pinnedFoldersSurviveACacheLimitSmallerThanThemAndStayCurrent() async throws {
        try await MountFixture.with(seeds: [], options: ["cache_size=1M"]) { m in
            let first = Self.text("first", 600_000), second = Self.text("second", 700_000), other = Self.text("other", 2_000_000)
            try await m.uploadElsewhere(first, to: "/keep/a.txt")
            try await m.uploadElsewhere(second, to: "/keep/sub/b.txt")
            try await m.uploadElsewhere(other, to: "/other/big.txt")
            try await eventually("the mount to show the files") { (try? await m.sh("ls \"$M/keep\" \"$M/other\"").status) == 0 }

            let pinned = try await ProcessRunner.run(MountFixture.binary, ["pin", m.mountpoint + "/keep"], environment: m.environment)
            #expect(pinned.status == 0, "\(pinned.stderr)")
            let attribute = try await m.sh("python3 -c 'import os, sys; print(os.getxattr(sys.argv[1], \"user.dropbox.pinned\").decode())' \"$M/keep/sub/b.txt\"")
            #expect(attribute.stdout == "1\n", "\(attribute.stderr)")
            try await eventually("the pinned files to be downloaded, past the limit") {
                let report = try m.statusReport()
                return report["pinned_bytes"] as? Int == 1_300_000 + Self.overshoot(first, second) && report["pinned_missing_bytes"] as? Int == 0
                    && report["pinned_over_limit"] as? Bool == true
            }
            #expect(try await m.status().contains("more than the cache limit"))
            // Unpinned content goes through the cache and is evicted; the pinned stays.
            #expect(try await m.sh("cat \"$M/other/big.txt\"").stdout == other)
            try await eventually("the cache to hold the pinned files alone") {
                let report = try m.statusReport()
                return report["cache_bytes"] as? Int == report["pinned_bytes"] as? Int && report["downloaded_bytes"] as? Int ?? 0 >= 3_300_000
            }

            // Changed on Dropbox: downloaded again without a read.
            let changed = Self.text("changed", 650_000)
            try await m.uploadElsewhere(changed, to: "/keep/a.txt")
            try await eventually("the new version to be downloaded") {
                try m.statusReport()["pinned_bytes"] as? Int == changed.utf8.count + second.utf8.count
                    && m.statusReport()["pinned_missing_bytes"] as? Int == 0
            }

            try await m.emulator.setReachable(false)
            let offline = try await m.sh("cat \"$M/keep/a.txt\" \"$M/keep/sub/b.txt\"")
            #expect(offline.status == 0, "\(offline.stderr)")
            #expect(offline.stdout == changed + second)
            try await m.emulator.setReachable(true)

            let unpinned = try await ProcessRunner.run(MountFixture.binary, ["unpin", m.mountpoint + "/keep"], environment: m.environment)
            #expect(unpinned.status == 0, "\(unpinned.stderr)")
            let inner = try await ProcessRunner.run(MountFixture.binary, ["unpin", m.mountpoint + "/keep/a.txt"], environment: m.environment)
            #expect(inner.status != 0 && inner.stderr.contains("not pinned"), "\(inner.stderr)")
            let gone = try await m.sh("python3 -c 'import os, sys; os.getxattr(sys.argv[1], \"user.dropbox.pinned\")' \"$M/keep/sub/b.txt\"")
            #expect(gone.stderr.contains("No data available"), "\(gone.stderr)")
        }
    }

    /// `text` makes files a little over the sizes asked for.
    static func overshoot(_ files: String...) -> Int { files.reduce(0) { $0 + $1.utf8.count } - 1_300_000 }
}
