import DropboxAPI
import DropboxEmulator
import DropboxFS
import Foundation
import TestSupport

/// A mount's core without the kernel: an emulator started in this process, the filesystem
/// with its caches in a folder of its own, and its change watcher and uploader running, as
/// the daemon runs them. `with` always stops them, shuts the emulator down and removes every
/// file, even when the test fails.
final class CoreFixture: Sendable {
    static let token = "core-token"

    let root: URL
    let emulator: Emulator
    let client: DropboxClient
    let fs: DropboxFileSystem
    /// The system calls a program would make, modelled over `fs`.
    let kernel: CoreKernel

    private init(root: URL, emulator: Emulator) throws {
        self.root = root
        self.emulator = emulator
        client = DropboxClient(endpoints: try Endpoints(baseURL: emulator.baseURL), tokens: StaticAccessToken(Self.token))
        let cache = root.appendingPathComponent("cache")
        try FileManager.default.createDirectory(at: cache, withIntermediateDirectories: true)
        fs = try DropboxFileSystem(client: client, store: MetadataStore(path: cache.path + "/metadata.sqlite"),
                                   cache: BlockCache(directory: cache, limit: 1 << 30),
                                   queue: UploadQueue(path: cache.path + "/uploads.sqlite"), stagingDirectory: cache.path + "/staging")
        kernel = CoreKernel(fs: fs)
    }

    /// `feedPageSize`: the entries of a change feed page (Dropbox's 2,000 when nil, or
    /// `DROPBOXFS_DIFF_PAGE_SIZE`).
    static func with(feedPageSize: Int? = nil, _ body: (CoreFixture) async throws -> Void) async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("core-test-" + UUID().uuidString.prefix(8))
        defer { try? FileManager.default.removeItem(at: root) }
        var configuration = EmulatorConfiguration(dataDirectory: root.appendingPathComponent("data"))
        configuration.tokens = [token]
        if let size = feedPageSize ?? ProcessInfo.processInfo.environment["DROPBOXFS_DIFF_PAGE_SIZE"].flatMap({ Int($0) }) {
            configuration.pageSize = size
        }
        let emulator = try await Emulator.start(configuration)
        var failure: (any Error)?
        do {
            let core = try CoreFixture(root: root, emulator: emulator)
            try core.fs.writeBack.recover()
            // As the mount's listener does, less the kernel's part.
            core.fs.watcher.setListener { [fs = core.fs] changes, everything in fs.settleInodes(afterForeign: changes, everything: everything) }
            try await core.fs.watcher.catchUp()
            let watching = Task { await core.fs.watcher.run() }
            let uploading = Task { await core.fs.uploader.run() }
            do { try await body(core) } catch { failure = error }
            watching.cancel()
            uploading.cancel()
            await emulator.shutdown()
            await watching.value
            await uploading.value
        } catch {
            await emulator.shutdown()
            throw error
        }
        if let failure { throw failure }
    }

    /// Runs `operations` in a new folder `name` of `base` (made if missing) through the
    /// kernel model and on local disk, off Swift's cooperative threads; the difference, if
    /// any, is the failure.
    func differential(_ operations: [Step], named name: String, base: String) async throws -> Result<Void, any Error> {
        let (tested, local) = (base + "/" + name, root.path + "/local" + base + "/" + name)
        let runner = DifferentialRunner(tested: kernel, testedRoot: tested, localRoot: local, remoteRoot: tested, client: client)
        return try await offPool { [kernel] in
            if case .failure(let error) = kernel.stat(base) { _ = try kernel.mkdir(base).value("mkdir \(base) (\(error))") }
            _ = try kernel.mkdir(tested).value("mkdir \(tested) in the core")
            try FileManager.default.createDirectory(atPath: local, withIntermediateDirectories: true)
            var running = runner
            return Result { try running.run(operations) }
        }
    }
}
