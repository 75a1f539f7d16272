import DropboxAPI
import DropboxEmulator
import Foundation
import Testing
import TestSupport

/// The mount follows the account: changes made elsewhere appear, and what did not change is
/// served from the caches across remounts.
@Suite("mount: remote changes and caches", .serialized, .timeLimit(.minutes(5)))
struct ChangeTests {
    @Test func remoteChangesAppearWithinTwoSeconds() async throws {
        try await MountFixture.with { m in
            // Look first, so the kernel and the store hold the old state.
            _ = try await m.sh("ls -l \"$M\" \"$M/Documents\"; cat \"$M/Documents/notes.md\"")

            _ = try await m.client.upload(Routes.upload, UploadArgument(CommitInfo(path: "/Documents/added.txt"), contentHash: nil),
                                          body: .bytes(Array("added elsewhere\n".utf8)))
            try await eventually("the added file") { try await m.sh("cat \"$M/Documents/added.txt\"").stdout == "added elsewhere\n" }

            _ = try await m.client.upload(Routes.upload, UploadArgument(CommitInfo(path: "/Documents/notes.md", mode: .overwrite), contentHash: nil),
                                          body: .bytes(Array("# Changed\n".utf8)))
            try await eventually("the changed content") { try await m.sh("cat \"$M/Documents/notes.md\"").stdout == "# Changed\n" }

            _ = try await m.client.rpc(Routes.move, RelocationArgument(from: "/Documents/added.txt", to: "/Documents/renamed.txt"))
            try await eventually("the rename") {
                let listing = try await m.sh("ls \"$M/Documents\"").stdout
                return listing.contains("renamed.txt") && !listing.contains("added.txt")
            }

            _ = try await m.client.rpc(Routes.delete, DeleteArgument(path: "/Documents/renamed.txt"))
            try await eventually("the delete") { try await m.sh("test -e \"$M/Documents/renamed.txt\"").status != 0 }
        }
    }

    @Test func remountServesAnUnchangedTreeFromTheCache() async throws {
        try await MountFixture.with { m in
            let first = try await m.sh("ls -lR --time-style=+ \"$M\" | md5sum; cat \"$M/Large/sample-8MiB.bin\" | md5sum")
            try await m.unmount()
            try await m.emulator.resetStats()
            try await m.mount()
            let second = try await m.sh("ls -lR --time-style=+ \"$M\" | md5sum; cat \"$M/Large/sample-8MiB.bin\" | md5sum")
            #expect(second.stdout == first.stdout)
            let stats = try await m.routeStats()
            #expect(stats["files/list_folder"] == nil)  // no listing at all: served from SQLite
            #expect(stats["files/download"] == nil)     // content from the block cache
        }
    }

    @Test func cursorResetRelistsAndStaysCorrect() async throws {
        try await MountFixture.with { m in
            _ = try await m.sh("ls -lR \"$M\" > /dev/null")
            // Deleted together with the reset: only a relisting can tell the mount it is gone.
            _ = try await m.client.rpc(Routes.delete, DeleteArgument(path: "/README.txt"))
            try await m.emulator.resetCursors()
            _ = try await m.client.upload(Routes.upload, UploadArgument(CommitInfo(path: "/after-reset.txt"), contentHash: nil), body: .bytes([65]))
            try await eventually("the file made after the reset") { try await m.sh("cat \"$M/after-reset.txt\"").stdout == "A" }
            try await eventually("the file deleted with the reset to go") { try await m.sh("test -e \"$M/README.txt\"").status != 0 }
            #expect(!(try await offPool { try Sys.list(m.mountpoint).value("list") }.contains("README.txt")))
        }
    }
}
