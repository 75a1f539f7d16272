import DropboxAPI
import DropboxEmulator
@testable import DropboxFS
import Foundation
import Synchronization
import TestSupport

/// An emulator and a cache folder, for filesystems made one after another on the same cache
/// (a daemon and the one started after it was killed), none of them running its senders.
struct Scratch {
    let root: URL
    let client: DropboxClient
    let emulator: Emulator
    /// What runs on beside the filesystems made on the cache: stopped and settled before it is
    /// removed. (The filesystems themselves are not kept: a test drops one as a killed
    /// daemon, and makes the next on the same cache.)
    private let made = Made()

    private final class Made: Sendable {
        let stagingPools = Mutex<[StagingPool]>([])
        let uploaders = Mutex<[Task<Void, Never>]>([])
    }

    static func with(_ body: (Scratch) async throws -> Void) async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("core-hidden-" + UUID().uuidString.prefix(8))
        defer { removeTestFolder(root) }
        var configuration = EmulatorConfiguration(dataDirectory: root.appendingPathComponent("data"))
        configuration.tokens = ["hidden-token"]
        let emulator = try await Emulator.start(configuration)
        let client = DropboxClient(endpoints: try Endpoints(baseURL: emulator.baseURL), tokens: StaticAccessToken("hidden-token"))
        let scratch = Scratch(root: root, client: client, emulator: emulator)
        var failure: (any Error)?
        do { try await body(scratch) } catch { failure = error }
        await scratch.stop()
        await emulator.shutdown()
        scratch.settle()
        if let failure { throw failure }
    }

    /// Runs the filesystem's uploader, as the daemon does, until the body has ended.
    func startUploader(_ fs: DropboxFileSystem) {
        made.uploaders.withLock { $0.append(Task { await fs.uploader.run() }) }
    }

    private func stop() async {
        let uploaders = made.uploaders.withLock { $0 }
        for uploader in uploaders { uploader.cancel() }
        for uploader in uploaders { await uploader.value }
    }

    /// Waits for what the filesystems still do on disk after the body (their staging pools
    /// rename and empty files on a queue of their own): the cache folder, removed while a
    /// pool did, was left behind.
    private func settle() {
        for pool in made.stagingPools.withLock({ $0 }) { pool.settle() }
    }

    /// A filesystem on the cache, as a daemon starting finds it.
    func filesystem() throws -> DropboxFileSystem {
        let cache = root.appendingPathComponent("cache")
        try FileManager.default.createDirectory(at: cache, withIntermediateDirectories: true)
        let fs = try DropboxFileSystem(client: client, store: MetadataStore(path: cache.path + "/metadata.sqlite"),
                                       cache: BlockCache(directory: cache, limit: 1 << 30),
                                       queue: UploadQueue(path: cache.path + "/uploads.sqlite"), stagingDirectory: cache.path + "/staging")
        try fs.writeBack.recover()
        made.stagingPools.withLock { $0.append(fs.writeBack.pool) }
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

/// Removes a test's folder, again while anything is left of it: a database closing
/// meanwhile deletes its journal under the removal, which then gives up on the file gone.
func removeTestFolder(_ folder: URL) {
    for _ in 0..<10 where FileManager.default.fileExists(atPath: folder.path) {
        try? FileManager.default.removeItem(at: folder)
    }
}
