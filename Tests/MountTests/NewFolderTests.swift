import DropboxAPI
import Foundation
import Testing
import TestSupport

/// mkdir answered from local state and sent to Dropbox in the background: batched (counted
/// in the emulator's stats), free when taken back before it was sent, durable across a
/// kill -9 of the daemon, and made with the names as typed.
@Suite("mount: new folders answered here, sent batched", .serialized, .timeLimit(.minutes(3)))
struct NewFolderTests {
    /// 60 folders (`mkdir -p` of 20 three-deep paths) and a file in some: Dropbox makes the
    /// folders in one `create_folder_batch`, none through `create_folder_v2`, with the
    /// casing typed (an upload into a folder would make it in lower case).
    @Test func newFoldersReachDropboxInOneRequestWithTheirNames() async throws {
        try await MountFixture.with(seeds: []) { m in
            try await m.emulator.resetStats()
            let made = try await m.sh("""
                for i in $(seq -w 1 20); do mkdir -p "$M/Tree/Pkg$i/Src/Lib"; done
                for i in 01 07 13; do echo "file $i" > "$M/Tree/Pkg$i/Src/Lib/Main.c"; done
                find "$M/Tree" -type d | wc -l
                """)
            #expect(made.status == 0, "\(made.stderr)")
            #expect(made.stdout == "61\n")
            #expect(try await m.syncFolder("\"$M/Tree\"").status == 0)
            let folders = try await m.client.listAll("/tree", recursive: true).compactMap(\.folderMetadata)
            #expect(folders.count == 61)
            #expect(Set(folders.map(\.name)) == Set(["Tree", "Src", "Lib"] + (1...20).map { String(format: "Pkg%02d", $0) }))
            #expect(try await m.client.listAll("").map(\.name) == ["Tree"])
            let stats = try await m.routeStats()
            #expect(MountFixture.requests(stats, ["files/create_folder_v2"]) == 0, "\(stats)")
            #expect(MountFixture.requests(stats, ["files/create_folder_batch"]) == 1, "\(stats)")
        }
    }

    /// A folder made and removed before it was sent (a build's scratch folder) costs no
    /// request; one made, filled and emptied again reaches Dropbox only as what is left.
    @Test func aFolderTakenBackBeforeItWasSentCostsNoRequest() async throws {
        try await MountFixture.with(seeds: []) { m in
            try await m.emulator.resetStats()
            let made = try await m.sh("mkdir -p \"$M/scratch/a/b\" && rmdir \"$M/scratch/a/b\" \"$M/scratch/a\" \"$M/scratch\" && ls -A \"$M\"")
            #expect(made.status == 0, "\(made.stderr)")
            #expect(made.stdout == "")
            #expect(try await m.syncFolder("\"$M\"").status == 0)
            let stats = try await m.routeStats()
            #expect(MountFixture.requests(stats, ["files/create_folder_v2", "files/create_folder_batch", "files/delete_v2", "files/delete_batch"]) == 0, "\(stats)")
            #expect(try await m.client.listAll("").isEmpty)
        }
    }

    /// A completed mkdir survives a kill -9 of the daemon before Dropbox heard of it (its
    /// folder calls are refused meanwhile): the next mount shows the folders, and makes them.
    @Test func newFoldersSurviveAKillOfTheDaemon() async throws {
        try await MountFixture.with(seeds: []) { m in
            try await m.emulator.setFaults(["403:p=1,routes=files/create_folder_batch"])
            #expect(try await m.sh("mkdir -p \"$M/Kept/Deeper\" && mkdir \"$M/Also\"").status == 0)
            try await m.killDaemon()
            #expect(try await m.client.listAll("").isEmpty)  // not sent: the calls were refused
            try await m.emulator.setFaults([])
            try await m.mount()
            let listed = try await m.sh("ls \"$M\"; ls \"$M/Kept\"")
            #expect(listed.stdout == "Also\nKept\nDeeper\n", "\(listed)")
            #expect(try await m.syncFolder("\"$M\"").status == 0)
            let names = try await m.client.listAll("", recursive: true).map { ($0.pathLower ?? "") + " " + $0.name }.sorted()
            #expect(names == ["/also Also", "/kept Kept", "/kept/deeper Deeper"])
        }
    }
}
