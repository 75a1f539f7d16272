import Foundation
import Testing
@testable import DropboxEmulator

@Suite("files: metadata, case, ASCII header, ranges", .timeLimit(.minutes(1)))
struct EmulatorFileTests {
    @Test func sha256MatchesKnownVector() {
        #expect(hexString(SHA256.digest(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        // Empty content: SHA-256 of no block digests.
        #expect(referenceContentHash(Data()) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test func streamingContentHashMatchesBlockDefinition() {
        let data = Data((0..<(4 * 1024 * 1024 + 4097)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let hasher = ContentHasher()
        // Feed in awkward pieces that straddle the 4 MiB boundary.
        var offset = 0
        for size in [1, 1_000_003, 3_000_000, 500_000] + Array(repeating: 100_000, count: 10) where offset < data.count {
            let end = min(offset + size, data.count)
            hasher.update(Array(data[offset..<end]))
            offset = end
        }
        hasher.update(Array(data[offset...]))
        #expect(hasher.finishHex() == referenceContentHash(data))
    }

    /// Seeding onto a disk that fills up is a clear error, not a crash (FileHandle's
    /// `write(_:)` trapped on the failed write).
    @Test func seedingOntoAFullDiskFailsClearly() async throws {
        let disk = FileManager.default.temporaryDirectory.appendingPathComponent("emulator-small-disk-" + UUID().uuidString)
        try FileManager.default.createDirectory(at: disk, withIntermediateDirectories: true)
        #expect(mount("tmpfs", disk.path, "tmpfs", 0, "size=2m") == 0, "mount a tmpfs: \(String(cString: strerror(errno)))")
        defer {
            umount2(disk.path, Int32(MNT_DETACH))
            try? FileManager.default.removeItem(at: disk)
        }
        var configuration = EmulatorConfiguration(dataDirectory: disk.appendingPathComponent("data"))
        configuration.seeds = ["files=2,dirs=1,depth=1,size=4M"]
        await #expect {
            let emulator = try await Emulator.start(configuration)
            await emulator.shutdown()
        } throws: { error in
            "\(error)".contains("seed: cannot write")
        }
    }

    @Test func uploadDownloadRoundTripWithContentHash() async throws {
        try await withEmulator { client in
            let content = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0) })
            let up = try await client.upload("files/upload", #"{"path":"/a/b.bin"}"#, content)
            #expect(up.status == 200)
            #expect(up.json["content_hash"]?.stringValue == referenceContentHash(content))
            #expect(up.json["size"]?.intValue == 300_000)
            let down = try await client.download("/a/b.bin")
            #expect(down.status == 200)
            #expect(down.body == content)
            let result = try JSON.parse(down.header("Dropbox-API-Result") ?? "")
            #expect(result["rev"] == up.json["rev"])
            #expect(down.header("X-Dropbox-Request-Id")?.isEmpty == false)
        }
    }

    @Test func pathsAreCaseInsensitiveAndCasePreserving() async throws {
        try await withEmulator { client in
            #expect(try await client.put("/Photos/Summer.JPG", "sun").status == 200)
            let meta = try await client.rpc("files/get_metadata", #"{"path":"/photos/summer.jpg"}"#)
            #expect(meta.status == 200)
            #expect(meta.json["path_display"]?.stringValue == "/Photos/Summer.JPG")
            #expect(meta.json["path_lower"]?.stringValue == "/photos/summer.jpg")
            #expect(meta.json["name"]?.stringValue == "Summer.JPG")

            // Another casing of the same path is the same file: add-mode conflicts.
            let clash = try await client.put("/PHOTOS/summer.jpg", "rain")
            #expect(clash.status == 409)
            #expect(clash.json["error_summary"]?.stringValue?.hasPrefix("path/conflict/file") == true)
            let renamed = try await client.upload("files/upload", #"{"path":"/PHOTOS/summer.jpg","autorename":true}"#, Data("rain".utf8))
            #expect(renamed.json["name"]?.stringValue == "summer (1).jpg")

            // A listing shows one folder, whatever casing created things inside it.
            let list = try await client.rpc("files/list_folder", #"{"path":"/pHoToS"}"#)
            #expect(list.json["entries"]?.arrayValue?.count == 2)
            // Case-only rename keeps the id.
            let id = meta.json["id"]?.stringValue ?? ""
            let moved = try await client.rpc("files/move_v2", #"{"from_path":"/photos/summer.jpg","to_path":"/photos/SUMMER.jpg"}"#)
            #expect(moved.status == 200)
            #expect(moved.json["metadata"]?["id"]?.stringValue == id)
            #expect(moved.json["metadata"]?["name"]?.stringValue == "SUMMER.jpg")
        }
    }

    @Test func apiArgHeaderMustBeASCII() async throws {
        try await withEmulator { client in
            let raw = try await client.upload("files/upload", #"{"path":"/héllo.txt"}"#, Data("x".utf8))
            #expect(raw.status == 400)
            #expect(raw.text.contains("ASCII"))

            let escaped = try await client.upload("files/upload", #"{"path":"/h\u00e9llo \ud83d\ude00.txt"}"#, Data("x".utf8))
            #expect(escaped.status == 200)
            #expect(escaped.json["name"]?.stringValue == "héllo 😀.txt")

            let down = try await client.request("/2/files/download", headers: [
                "Authorization": "Bearer \(TestClient.token)", "Dropbox-API-Arg": #"{"path":"/H\u00c9LLO \ud83d\ude00.TXT"}"#,
            ])
            let header = try #require(down.header("Dropbox-API-Result"))
            #expect(header.utf8.allSatisfy { $0 < 0x80 })
            #expect(header.contains(#"\u00e9"#))
            #expect(try JSON.parse(header)["name"]?.stringValue == "héllo 😀.txt")
        }
    }

    @Test func badInputIsPlainText400() async throws {
        try await withEmulator { client in
            let unknown = try await client.rpc("files/get_metadata", #"{"path":"/x","colour":"red"}"#)
            #expect(unknown.status == 400)
            #expect(unknown.text.contains("unknown field 'colour'"))
            let wrongType = try await client.rpc("files/list_folder", #"{"path":"","recursive":1}"#)
            #expect(wrongType.status == 400)
            let slashRoot = try await client.rpc("files/list_folder", #"{"path":"/"}"#)
            #expect(slashRoot.status == 400)
            let notJSON = try await client.rpc("files/list_folder", "{path")
            #expect(notJSON.status == 400)
            let noAuth = try await client.rpc("files/list_folder", #"{"path":""}"#, token: nil)
            #expect(noAuth.status == 400)
            let badToken = try await client.rpc("files/list_folder", #"{"path":""}"#, token: "nope")
            #expect(badToken.status == 401)
            #expect(badToken.json["error"]?[".tag"]?.stringValue == "invalid_access_token")
            let malformed = try await client.rpc("files/get_metadata", #"{"path":"/a/../b"}"#)
            #expect(malformed.status == 409)
            #expect(malformed.json["error_summary"]?.stringValue?.hasPrefix("path/malformed_path") == true)
            let disallowed = try await client.put("/docs/Thumbs.db", "x")
            #expect(disallowed.json["error_summary"]?.stringValue?.hasPrefix("path/disallowed_name") == true)
        }
    }

    @Test func rangeDownloads() async throws {
        try await withEmulator { client in
            _ = try await client.put("/r.txt", "0123456789")
            let middle = try await client.download("/r.txt", range: "bytes=2-5")
            #expect(middle.status == 206)
            #expect(middle.text == "2345")
            #expect(middle.header("Content-Range") == "bytes 2-5/10")
            let suffix = try await client.download("/r.txt", range: "bytes=-3")
            #expect(suffix.text == "789")
            let open = try await client.download("/r.txt", range: "bytes=7-")
            #expect(open.text == "789")
            let beyond = try await client.download("/r.txt", range: "bytes=10-")
            #expect(beyond.status == 416)
            #expect(beyond.header("Content-Range") == "bytes */10")
            let folder = try await client.download("/")
            #expect(folder.status == 400)
        }
    }

    @Test func quotaIsEnforced() async throws {
        try await withEmulator({ $0.quota = 1000 }) { client in
            #expect(try await client.put("/fits.txt", String(repeating: "a", count: 900)).status == 200)
            let over = try await client.put("/over.txt", String(repeating: "b", count: 200))
            #expect(over.status == 409)
            #expect(over.json["error_summary"]?.stringValue?.hasPrefix("path/insufficient_space") == true)
            let usage = try await client.rpc("users/get_space_usage", nil)
            #expect(usage.json["used"]?.intValue == 900)
            #expect(usage.json["allocation"]?["allocated"]?.intValue == 1000)
        }
    }

    /// A folder chain 400 deep, as `stress-ng --dirdeep` or a deep `mkdir -p` makes. Each
    /// write asked the store for every ancestor of its path (one lookup, and the path folded
    /// again, per level): a `create_folder_batch` of a chain 1,000 deep took the emulator 8 s
    /// of CPU, and a mount's `rm -r` behind it waited. Now the walk up stops at the first
    /// ancestor there: the count of lookups, not a clock, is checked.
    @Test func aWriteDeepInATreeLooksUpAFewAncestorsNotEvery() async throws {
        try await withEmulator { client in
            let chain = (1...400).map { depth in "/deep" + String(repeating: "/d", count: depth - 1) }
            let paths = chain.map { #""\#($0)""# }.joined(separator: ",")
            let lookupsBefore = client.emulator.namespace.entryLookups
            let made = try await client.rpc("files/create_folder_batch", #"{"paths":[\#(paths)]}"#)
            #expect(made.status == 200)
            #expect(made.json["entries"]?.arrayValue?.count == 400)
            #expect(client.emulator.namespace.entryLookups - lookupsBefore < 10 * 400)

            // Missing ancestors are made, and a file is still no folder, however deep.
            let deepest = chain.last!
            #expect(try await client.put(deepest + "/x/y/file.txt", "at depth").status == 200)
            #expect(try await client.rpc("files/get_metadata", #"{"path":"\#(deepest)/x"}"#).json[".tag"]?.stringValue == "folder")
            let underFile = try await client.rpc("files/create_folder_v2", #"{"path":"\#(deepest)/x/y/file.txt/z"}"#)
            #expect(underFile.status == 409)
            #expect(underFile.json["error_summary"]?.stringValue?.hasPrefix("path/conflict/file") == true)
        }
    }
}
