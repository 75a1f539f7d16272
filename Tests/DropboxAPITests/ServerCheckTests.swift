import DropboxAPI
import DropboxEmulator
import Foundation
import TestSupport
import Testing

/// The client checks what a server says before anything trusts it: the emulator's `lie`
/// faults answer like a broken or hostile server, and each lie must be refused cleanly,
/// write nothing outside the client's own directories, and leave the client working.
@Suite("client: what the server says is checked", .timeLimit(.minutes(2)))
struct ServerCheckTests {
    static var quick: RetryPolicy {
        var policy = RetryPolicy()
        policy.maxAttempts = 3
        policy.baseDelay = 0.01
        return policy
    }

    /// Whether a call failed as a refused, undecodable reply that names `field`.
    static func refused(_ error: any Error, naming field: String) -> Bool {
        "\(error)".contains("unexpected reply") && "\(error)".contains(field)
    }

    @Test func aContentHashThatIsNotHexIsRefused() async throws {
        try await withClient(retry: Self.quick) { client, emulator in
            try await withScratch { scratch in
                let local = scratch.appendingPathComponent("in.bin")
                try writePattern(local, size: 100_000)
                _ = try await client.uploadFile(local.path, to: CommitInfo(path: "/f.bin"))
                let outside = scratch.appendingPathComponent("pwned").path
                try await emulator.setFaults(["lie:what=content_hash,value=../../../../../../../..\(outside)"])
                await #expect { try await client.rpc(Routes.getMetadata, GetMetadataArgument(path: "/f.bin")) } throws: {
                    Self.refused($0, naming: "content_hash")
                }
                await #expect { try await client.listAll("") } throws: { Self.refused($0, naming: "content_hash") }
                let target = scratch.appendingPathComponent("out.bin").path
                await #expect { try await client.downloadFile("/f.bin", to: target) } throws: { Self.refused($0, naming: "content_hash") }
                #expect(!FileManager.default.fileExists(atPath: target))
                #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path) == ["in.bin"])
                try await emulator.setFaults([])
                let file = try await client.downloadFile("/f.bin", to: target)
                #expect(file.contentHash == (try localContentHash(local)))
            }
        }
    }

    @Test func namesAndPathsThatLeaveTheirFolderAreRefused() async throws {
        try await withClient(retry: Self.quick) { client, emulator in
            try await withScratch { scratch in
                let local = scratch.appendingPathComponent("in.bin")
                try writePattern(local, size: 1000)
                _ = try await client.uploadFile(local.path, to: CommitInfo(path: "/d/escape.bin"))
                let destination = scratch.appendingPathComponent("dest").path
                for lie in ["lie:what=name", "lie:what=name,value=../", "lie:what=name,value=a/"] {
                    try await emulator.setFaults([lie])
                    await #expect(Comment(rawValue: lie)) { try await client.downloadTree("/d", to: destination) } throws: {
                        Self.refused($0, naming: "name")
                    }
                }
                #expect(!FileManager.default.fileExists(atPath: scratch.appendingPathComponent("escape.bin").path))
                #expect(!FileManager.default.fileExists(atPath: "/tmp/escape.bin"))
                try await emulator.setFaults([])
                let report = try await client.downloadTree("/d", to: destination)
                #expect(report.files == 1 && report.failures.isEmpty)
                #expect(FileManager.default.fileExists(atPath: destination + "/escape.bin"))
            }
        }
    }

    @Test func aRangedDownloadOfAnotherRangeIsRefusedAndRetried() async throws {
        try await withClient(retry: Self.quick) { client, emulator in
            try await withScratch { scratch in
                let local = scratch.appendingPathComponent("in.bin")
                try writePattern(local, size: 100_000)
                _ = try await client.uploadFile(local.path, to: CommitInfo(path: "/r.bin"))
                let expected = Array(try Data(contentsOf: local)[1000..<5000])
                try await emulator.setFaults(["lie:what=content_range,routes=files/download"])
                await #expect { try await client.downloadRange("/r.bin", range: 1000..<5000) } throws: { error in
                    "\(error)".contains("Content-Range")
                }
                let stats = try await emulator.routeStats()
                #expect(stats["files/download"]?["requests"] == Self.quick.maxAttempts)  // refused, then tried again
                // One lie in two: the retry gets the right bytes.
                try await emulator.setFaults(["lie:what=content_range,every=2,routes=files/download"])
                #expect(try await client.downloadRange("/r.bin", range: 1000..<5000) == expected)
                #expect(try await client.downloadRange("/r.bin", range: 1000..<5000) == expected)
            }
        }
    }

    @Test func plainHTTPGoesOnlyToLoopbackAddresses() throws {
        for url in ["http://127.0.0.1:9", "http://127.8.9.10:9/", "http://[::1]:9", "http://localhost:9", "http://LOCALHOST:9",
                    "https://127.evil.example"] {
            #expect(throws: Never.self, Comment(rawValue: url)) { try Endpoints(baseURL: url) }
        }
        for url in ["http://127.evil.example:9/", "http://127.0.0.1.nip.io:9", "http://localhost.evil.example:9", "http://[::2]:9",
                    "http://128.0.0.1:9", "http://example.com"] {
            #expect(throws: (any Error).self, Comment(rawValue: url)) { try Endpoints(baseURL: url) }
        }
    }
}
