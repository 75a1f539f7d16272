import DropboxAPI
import Foundation
import Testing
import TestSupport

/// A small file's bytes go into an upload session of their own soon after its close, while
/// its commit waits for its batch (`WriteBack+EarlyStaging`): the commit then sends no byte
/// again. Here both of the uploader's batch slots are taken by commits Dropbox does not answer,
/// so files written meanwhile cannot be committed: only early staging can send their bytes.
@Suite("mount: small files' bytes staged early", .serialized, .timeLimit(.minutes(5)))
struct EarlyStagingTests {
    static let commits = ["files/upload", "files/upload_session/finish", "files/upload_session/finish_batch_v2"]

    /// Two lone files (`UploadSchedule.batchesAtOnce`), each committed alone and held.
    static func holdBothBatchSlots(_ m: MountFixture) async throws {
        try await m.emulator.setFaults(["silent:routes=" + commits.joined(separator: "+")])
        for index in 1...2 {
            #expect(try await m.sh("mkdir -p \"$M/held\" && echo \(index) > \"$M/held/\(index).txt\"").status == 0)
            try await eventually("commit \(index) to be held") { MountFixture.requests(try await m.routeStats(), commits) == index }
        }
    }

    @Test func bytesGoWhileTheirCommitWaitsAndAreNotSentAgain() async throws {
        try await MountFixture.with(seeds: []) { m in
            try await Self.holdBothBatchSlots(m)
            let made = try await m.sh("mkdir \"$M/burst\" && for i in $(seq 1 20); do echo file $i > \"$M/burst/f$i.txt\"; done")
            #expect(made.status == 0, "\(made.stderr)")
            try await eventually("the files' bytes to be staged") {
                MountFixture.requests(try await m.routeStats(), ["files/upload_session/start"]) == 22
            }
            #expect(MountFixture.requests(try await m.routeStats(), Self.commits) == 2)

            try await m.emulator.setFaults([])
            let synced = try await m.syncFolder("\"$M\"")
            #expect(synced.status == 0, "\(synced.stderr)")
            let stats = try await m.routeStats()
            #expect(MountFixture.requests(stats, ["files/upload_session/start", "files/upload_session/append_v2"]) == 22,
                    "no byte sent twice: \(stats)")
            #expect(try await m.client.listAll("/burst").count == 20)
            #expect(try await m.remoteText("/burst/f7.txt") == "file 7\n")
            #expect(try await m.remoteText("/held/2.txt") == "2\n")
        }
    }

    /// Bytes staged for a version are that version's only: a file deleted after they went is
    /// never committed, and one rewritten after they went lands with its new content.
    @Test func stagedBytesOfADeletedOrRewrittenFileAreNeverCommitted() async throws {
        try await MountFixture.with(seeds: []) { m in
            try await Self.holdBothBatchSlots(m)
            #expect(try await m.sh("mkdir \"$M/e\" && echo gone > \"$M/e/a.txt\" && echo old > \"$M/e/b.txt\"").status == 0)
            try await eventually("the files' bytes to be staged") {
                MountFixture.requests(try await m.routeStats(), ["files/upload_session/start"]) == 4
            }
            #expect(try await m.sh("rm \"$M/e/a.txt\" && echo new > \"$M/e/b.txt\"").status == 0)

            try await m.emulator.setFaults([])
            let synced = try await m.syncFolder("\"$M\"")
            #expect(synced.status == 0, "\(synced.stderr)")
            #expect(try await m.client.listAll("/e").map(\.name) == ["b.txt"])
            #expect(try await m.remoteText("/e/b.txt") == "new\n")
            #expect(try await m.sh("cat \"$M/e/b.txt\"").stdout == "new\n")
        }
    }
}
