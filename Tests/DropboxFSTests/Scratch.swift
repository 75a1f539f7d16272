import DropboxAPI
import DropboxEmulator
@testable import DropboxFS
import Foundation
import TestSupport

/// An emulator and a cache folder, for filesystems made one after another on the same cache
/// (a daemon and the one started after it was killed), none of them running its senders.
struct Scratch {
    let root: URL
    let client: DropboxClient
    let emulator: Emulator

    static func with(_ body: (Scratch) async throws -> Void) async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("core-hidden-" + UUID().uuidString.prefix(8))
        defer { try? FileManager.default.removeItem(at: root) }
        var configuration = EmulatorConfiguration(dataDirectory: root.appendingPathComponent("data"))
        configuration.tokens = ["hidden-token"]
        let emulator = try await Emulator.start(configuration)
        let client = DropboxClient(endpoints: try Endpoints(baseURL: emulator.baseURL), tokens: StaticAccessToken("hidden-token"))
        do {
            try await body(Scratch(root: root, client: client, emulator: emulator))
        } catch {
            await emulator.shutdown()
            throw error
        }
        await emulator.shutdown()
    }

    /// A filesystem on the cache, as a daemon starting finds it.
    func filesystem() throws -> DropboxFileSystem {
        let cache = root.appendingPathComponent("cache")
        try FileManager.default.createDirectory(at: cache, withIntermediateDirectories: true)
        let fs = try DropboxFileSystem(client: client, store: MetadataStore(path: cache.path + "/metadata.sqlite"),
                                       cache: BlockCache(directory: cache, limit: 1 << 30),
                                       queue: UploadQueue(path: cache.path + "/uploads.sqlite"), stagingDirectory: cache.path + "/staging")
        try fs.writeBack.recover()
        return fs
    }

    /// Another client uploads `contents` to `path`.
    func upload(_ contents: String, to path: String) async throws {
        try await upload(Array(contents.utf8), to: path)
    }

    func upload(_ bytes: [UInt8], to path: String) async throws {
        let file = root.appendingPathComponent("upload-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        defer { unlink(file) }
        _ = try await client.uploadFile(file, to: CommitInfo(path: path, mode: .overwrite))
    }
}
