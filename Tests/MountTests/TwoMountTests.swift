import DropboxAPI
import Foundation
import Testing
import TestSupport

/// Two mounts of one account, each with its own cache, as on two machines: each sees the
/// other's changes through the change feed, with the kernel's caches invalidated, and
/// simultaneous edits of one file end as that file and one conflicted copy on both.
@Suite("mount: two mounts of one account", .serialized, .timeLimit(.minutes(5)))
struct TwoMountTests {
    /// Every entry under a folder, sorted, files with a checksum of what reading them gives.
    static func snapshot(_ m: MountFixture, _ folder: String) async throws -> String {
        try await m.sh("""
            cd '\(folder)' && find . -mindepth 1 | LC_ALL=C sort | while read -r p; do
                if [ -f "$p" ]; then printf '%s %s\\n' "$p" "$(sha256sum < "$p" | cut -c1-16)"; else printf '%s/\\n' "$p"; fi
            done
            """).stdout
    }

    /// Waits until `b` shows what `a` shows under `folder`; returns the seconds it took.
    static func converge(_ m: MountFixture, _ a: String, _ b: String, _ folder: String) async throws -> Double {
        let started = ContinuousClock.now
        let expected = try await snapshot(m, a + folder)
        try await eventually("\(b) to show what \(a) shows", timeout: 60) { try await snapshot(m, b + folder) == expected }
        let took = ContinuousClock.now - started
        return Double(took.components.seconds) + Double(took.components.attoseconds) / 1e18
    }

    @Test func twoMountsConvergeOnTwoHundredMixedChangesAndNeverShowOldBytes() async throws {
        try await MountFixture.with(seeds: []) { m in
            let a = m.mountpoint
            let b = try await m.mountAnother()
            // The base: 120 files in 6 folders, a folder to move and one to remove, on Dropbox,
            // seen by the other mount and read there (its page cache holds the old bytes).
            let base = try await m.sh("""
                set -e
                mkdir -p "$M/s/box" "$M/s/trash"
                for d in 1 2 3 4 5 6; do mkdir "$M/s/d$d"; done
                for i in $(seq 1 120); do printf 'base %s\\n' $i > "$M/s/d$((i % 6 + 1))/f$i.txt"; done
                for i in 1 2 3 4 5; do printf 'box %s\\n' $i > "$M/s/box/b$i.txt"; printf 'trash %s\\n' $i > "$M/s/trash/t$i.txt"; done
                python3 -c 'import os, sys; os.fsync(os.open(sys.argv[1], os.O_RDONLY))' "$M/s"
                """)
            #expect(base.status == 0, "\(base.stderr)")
            _ = try await Self.converge(m, a, b, "/s")
            #expect(try await m.sh("cat \"\(b)\"/s/d*/*.txt > /dev/null").status == 0)

            // 200 changes on the first mount: 20 mkdirs, 60 new files, 40 edits (half
            // rewritten, half appended), 40 renames (10 into another folder), 38 removals, a
            // folder moved and a folder removed with what it holds.
            let changes = try await m.sh("""
                set -e
                for n in $(seq 1 20); do mkdir "$M/s/n$n"; for k in 1 2 3; do printf 'new %s %s\\n' $n $k > "$M/s/n$n/new$k.txt"; done; done
                for i in $(seq 1 20); do printf 'rewritten %s\\n' $i > "$M/s/d$((i % 6 + 1))/f$i.txt"; done
                for i in $(seq 21 40); do printf 'appended %s\\n' $i >> "$M/s/d$((i % 6 + 1))/f$i.txt"; done
                for i in $(seq 41 70); do mv "$M/s/d$((i % 6 + 1))/f$i.txt" "$M/s/d$((i % 6 + 1))/renamed$i.txt"; done
                for i in $(seq 71 80); do mv "$M/s/d$((i % 6 + 1))/f$i.txt" "$M/s/n1/moved$i.txt"; done
                for i in $(seq 81 118); do rm "$M/s/d$((i % 6 + 1))/f$i.txt"; done
                mv "$M/s/box" "$M/s/box moved"
                rm -r "$M/s/trash"
                python3 -c 'import os, sys; os.fsync(os.open(sys.argv[1], os.O_RDONLY))' "$M/s"
                """)
            #expect(changes.status == 0, "\(changes.stderr)")
            let forward = try await Self.converge(m, a, b, "/s")
            // And back: ten changes on the second mount reach the first.
            let back = try await m.sh("""
                set -e
                for i in 1 2 3 4 5; do printf 'from b %s\\n' $i > "\(b)/s/n2/from-b$i.txt"; done
                printf 'b rewrote\\n' > "\(b)/s/d2/f1.txt"
                mv "\(b)/s/n3/new1.txt" "\(b)/s/n3/renamed-by-b.txt"
                rm "\(b)/s/n4/new1.txt" "\(b)/s/n4/new2.txt"
                mkdir "\(b)/s/made-by-b"
                python3 -c 'import os, sys; os.fsync(os.open(sys.argv[1], os.O_RDONLY))' "\(b)/s"
                """)
            #expect(back.status == 0, "\(back.stderr)")
            let backward = try await Self.converge(m, b, a, "/s")
            // Measured, not bounded here (no wall-clock bounds in tests); the issue's notes take it.
            print("two mounts: 200 changes seen by the other mount \(String(format: "%.2f", forward)) s after the fsync, 10 back in \(String(format: "%.2f", backward)) s")
        }
    }

    @Test func simultaneousEditsEndAsOneFileAndOneConflictedCopyOnBothMounts() async throws {
        try await MountFixture.with(seeds: []) { m in
            let a = m.mountpoint
            let b = try await m.mountAnother()
            let made = try await m.sh("mkdir \"$M/both\" && printf 'original\\n' > \"$M/both/doc.txt\" && python3 -c 'import os, sys; os.fsync(os.open(sys.argv[1], os.O_RDONLY))' \"$M/both\"")
            #expect(made.status == 0, "\(made.stderr)")
            try await eventually("the other mount to read the file") { (try? await m.sh("cat '\(b)/both/doc.txt'").stdout) == "original\n" }
            // Both edit before either has uploaded, then both fsync at once.
            let edited = try await m.sh("""
                printf 'edited on a\\n' > '\(a)/both/doc.txt' && printf 'edited on b\\n' > '\(b)/both/doc.txt' || exit 1
                python3 -c 'import os, sys; os.fsync(os.open(sys.argv[1], os.O_RDONLY))' '\(a)/both/doc.txt' & first=$!
                python3 -c 'import os, sys; os.fsync(os.open(sys.argv[1], os.O_RDONLY))' '\(b)/both/doc.txt' & second=$!
                wait $first && wait $second
                """)
            #expect(edited.status == 0, "\(edited.stderr)")
            for mount in [a, b] {
                try await eventually("\(mount) to show the file and one conflicted copy", timeout: 60) {
                    let shown = try await m.sh("cd '\(mount)/both' && ls && cat doc.txt && cat doc\\ \\(conflicted\\ copy\\ *\\).txt").stdout
                    let lines = shown.split(separator: "\n").map(String.init)
                    guard lines.count == 4, lines[0].hasPrefix("doc (conflicted copy "), lines[0].hasSuffix(").txt"),
                          lines[1] == "doc.txt" else { return false }
                    return Set(lines[2...]) == ["edited on a", "edited on b"]
                }
            }
            #expect(try await Self.snapshot(m, a + "/both") == Self.snapshot(m, b + "/both"))
        }
    }
}
