import DropboxAPI
import Foundation
import Testing
import TestSupport

/// A small file's bytes go into an upload session of their own soon after its close, while
/// its commit waits for its batch (`WriteBack+EarlyStaging`): the commit then sends no byte
/// again. Here the commit is held back by a rename Dropbox does not answer (files made in a
/// renamed folder are committed only after the rename), so only early staging can send the
/// bytes. (Not refused: a refusal fails the files' upload, and a run of 5xx answers counts as
/// Dropbox out of reach, when no file is staged early.)
@Suite("mount: small files' bytes staged early", .serialized, .timeLimit(.minutes(5)))
struct EarlyStagingTests {
    static let moves = "files/move_v2+files/move_batch_v2"
    static let uploadRoutes = ["files/upload", "files/upload_session/start", "files/upload_session/append_v2"]

    @Test func bytesGoWhileTheirCommitWaitsAndAreNotSentAgain() async throws {
        try await MountFixture.with(seeds: []) { m in
            #expect(try await m.sh("mkdir \"$M/d\"").status == 0)
            #expect(try await m.syncFolder("\"$M\"").status == 0)
            try await m.emulator.setFaults(["silent:routes=\(Self.moves)"])
            try await m.emulator.resetStats()
            let made = try await m.sh("mv \"$M/d\" \"$M/e\" && for i in $(seq 1 20); do echo file $i > \"$M/e/f$i.txt\"; done")
            #expect(made.status == 0, "\(made.stderr)")
            try await eventually("the files' bytes to be staged") {
                MountFixture.requests(try await m.routeStats(), ["files/upload_session/start"]) == 20
            }
            let held = try await m.routeStats()
            #expect(MountFixture.requests(held, ["files/upload_session/finish_batch_v2", "files/upload_session/finish", "files/upload"]) == 0,
                    "\(held)")

            try await m.emulator.setFaults([])
            let synced = try await m.syncFolder("\"$M/e\"")
            #expect(synced.status == 0, "\(synced.stderr)")
            let stats = try await m.routeStats()
            #expect(MountFixture.requests(stats, Self.uploadRoutes) == 20, "no byte sent twice: \(stats)")
            #expect(try await m.client.listAll("/e").count == 20)
            #expect(try await m.remoteText("/e/f7.txt") == "file 7\n")
        }
    }

    /// Bytes staged for a version are that version's only: a file deleted after they went is
    /// never committed, and one rewritten after they went lands with its new content.
    @Test func stagedBytesOfADeletedOrRewrittenFileAreNeverCommitted() async throws {
        try await MountFixture.with(seeds: []) { m in
            #expect(try await m.sh("mkdir \"$M/d\"").status == 0)
            #expect(try await m.syncFolder("\"$M\"").status == 0)
            try await m.emulator.setFaults(["silent:routes=\(Self.moves)"])
            try await m.emulator.resetStats()
            #expect(try await m.sh("mv \"$M/d\" \"$M/e\" && echo gone > \"$M/e/a.txt\" && echo old > \"$M/e/b.txt\"").status == 0)
            try await eventually("the files' bytes to be staged") {
                MountFixture.requests(try await m.routeStats(), ["files/upload_session/start"]) == 2
            }
            #expect(try await m.sh("rm \"$M/e/a.txt\" && echo new > \"$M/e/b.txt\"").status == 0)

            try await m.emulator.setFaults([])
            let synced = try await m.syncFolder("\"$M/e\"")
            #expect(synced.status == 0, "\(synced.stderr)")
            #expect(try await m.client.listAll("/e").map(\.name) == ["b.txt"])
            #expect(try await m.remoteText("/e/b.txt") == "new\n")
            #expect(try await m.sh("cat \"$M/e/b.txt\"").stdout == "new\n")
        }
    }
}
