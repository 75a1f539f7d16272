import Foundation

extension DropboxClient {
    /// What a tree transfer did: files moved, and those that failed with why.
    public struct TreeReport: Sendable {
        public var files = 0
        public var bytes: Int64 = 0
        public var failures: [(String, String)] = []
    }

    /// Uploads a local directory tree to `remote` (created as needed): files through
    /// `uploadBatch` (few commits), empty directories as folders.
    public func uploadTree(_ localDirectory: String, to remote: String, mode: WriteMode = .add,
                           progress: (@Sendable (Int, Int) -> Void)? = nil) async throws -> TreeReport {
        let base = URL(fileURLWithPath: localDirectory).standardizedFileURL.path
        guard let walker = FileManager.default.enumerator(atPath: base) else { throw ClientError.local("cannot read \(localDirectory)") }
        var items: [BatchItem] = []
        var emptyFolders: [String] = []
        var bytes: Int64 = 0
        var skipped: [(String, String)] = []
        while let relative = walker.nextObject() as? String {
            let full = (base as NSString).appendingPathComponent(relative)
            let target = remote + "/" + relative
            guard let attributes = try? FileManager.default.attributesOfItem(atPath: full) else {
                skipped.append((full, "cannot read"))
                continue
            }
            switch attributes[.type] as? FileAttributeType {
            case .typeDirectory?:
                if (try? FileManager.default.contentsOfDirectory(atPath: full).isEmpty) == true { emptyFolders.append(target) }
            case .typeRegular?:
                items.append(BatchItem(localPath: full, commit: CommitInfo(path: target, mode: mode)))
                bytes += (attributes[.size] as? Int64) ?? Int64((attributes[.size] as? Int) ?? 0)
            default:
                skipped.append((full, "not a regular file or folder (Dropbox holds neither links nor devices)"))
            }
        }
        if items.isEmpty && emptyFolders.isEmpty { emptyFolders.append(remote) }
        for folder in emptyFolders { try await createFolderIfMissing(folder) }
        let total = items.count
        let results = try await uploadBatch(items) { done in progress?(done, total) }
        var report = TreeReport(files: items.count, bytes: bytes, failures: skipped)
        for (item, result) in zip(items, results) {
            if case .failure(let error) = result { report.failures.append((item.commit.path, String(describing: error))) }
        }
        return report
    }

    /// Creates a folder unless one is there. A failure of unknown outcome is settled by
    /// looking: a folder at the path means it worked.
    public func createFolderIfMissing(_ path: String) async throws {
        try await settle(check: { try await self.metadataIfExists(path)?.folderMetadata.map { _ in () } }) {
            do {
                _ = try await self.rpc(Routes.createFolder, CreateFolderArgument(path: path))
            } catch let error as CallError<PathWriteError> {
                guard case .route(.path(.conflict(.folder)), _, _, _) = error else { throw error }
            }
        }
    }

    /// Downloads a Dropbox folder tree into `localDirectory`, `parallelism` files at once,
    /// each checked against its content hash.
    public func downloadTree(_ remote: String, to localDirectory: String, parallelism: Int = 8,
                             progress: (@Sendable (Int64, Int64) -> Void)? = nil) async throws -> TreeReport {
        let entries = try await listAll(remote, recursive: true)
        let prefix = CaseFolding.fold(remote)
        // Local names come from each entry's own display path below the root: Dropbox may
        // case a parent differently in different children's paths, so folders are created
        // from their own entries and files placed by their lower-case parent.
        var folders: [String: String] = [prefix: localDirectory]
        try makeLocalFolder(localDirectory)
        for case .folder(let folder) in entries.sorted(by: { ($0.pathLower ?? "") < ($1.pathLower ?? "") }) {
            guard let lower = folder.pathLower, lower != prefix else { continue }
            let parent = folders[String(lower[..<lower.lastIndex(of: "/")!])] ?? localDirectory
            let path = (parent as NSString).appendingPathComponent(folder.name)
            try makeLocalFolder(path)
            folders[lower] = path
        }
        let files = entries.compactMap(\.fileMetadata)
        let total = files.reduce(Int64(0)) { $0 + $1.size }
        let done = ByteTally()
        var report = TreeReport(files: files.count, bytes: total)
        try await withThrowingTaskGroup(of: (String, String?).self) { group in
            var next = 0
            func launch() {
                let file = files[next]
                next += 1
                let lower = file.pathLower ?? ""
                let parent = folders[String(lower[..<(lower.lastIndex(of: "/") ?? lower.startIndex)])] ?? localDirectory
                let target = (parent as NSString).appendingPathComponent(file.name)
                group.addTask {
                    do {
                        try await self.downloadFile(file.id, to: target)
                        progress?(done.add(file.size), total)
                        return (lower, nil)
                    } catch {
                        return (lower, String(describing: error))
                    }
                }
            }
            for _ in 0..<min(parallelism, files.count) { launch() }
            while let (path, failure) = try await group.next() {
                if let failure { report.failures.append((path, failure)) }
                if next < files.count { launch() }
            }
        }
        return report
    }
}

/// Creates a local folder and those above it (mkdir -p); a failure, such as a file in the
/// way, is told in the system's words (Foundation's createDirectory gave its own sentence).
private func makeLocalFolder(_ path: String) throws {
    var isFolder: ObjCBool = false
    if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue { return }
    let parent = (path as NSString).deletingLastPathComponent
    if !parent.isEmpty, parent != path { try makeLocalFolder(parent) }
    guard mkdir(path, 0o777) != 0 else { return }
    let code = errno
    // Made meanwhile (by a parallel transfer, say): there, as wanted.
    if code == EEXIST, FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue { return }
    throw ClientError.local("cannot create folder \(path): \(String(cString: strerror(code)))")
}

/// A running byte count shared by parallel transfers.
final class ByteTally: @unchecked Sendable {
    private let lock = NSLock()
    private var total: Int64 = 0
    func add(_ n: Int64) -> Int64 { lock.withLock { total += n; return total } }
}
