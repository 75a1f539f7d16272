import Foundation
import Synchronization

/// How large uploads are cut up.
public struct UploadTuning: Sendable {
    /// Files up to this size go in one `files/upload` request (Dropbox's limit is 150 MiB).
    public var singleRequestLimit: Int64 = 150 << 20
    /// Session chunk size: a multiple of 4 MiB, as concurrent sessions require.
    public var chunkSize: Int64 = 32 << 20
    /// Appends in flight at once for one file.
    public var parallelism = 4
    /// Files in one `finish_batch_v2` call (Dropbox allows 1,000).
    public var batchSize = 1000

    public init() {}
}

extension DropboxClient {
    /// Uploads a local file, checking the content hash Dropbox computed against ours.
    /// Small files go in one request; larger ones through a concurrent upload session whose
    /// 4 MiB-aligned chunks are sent in parallel.
    public func uploadFile(_ localPath: String, to commit: CommitInfo, tuning: UploadTuning = UploadTuning(),
                           progress: (@Sendable (Int64, Int64) -> Void)? = nil) async throws -> FileMetadata {
        let (fd, size) = try FileIO.openForReading(localPath)
        defer { close(fd) }
        if size <= tuning.singleRequestLimit {
            let hash = ContentHasher.combine(try await FileIO.blockDigestsOffPool(fd, offset: 0, length: size))
            let route = commit.autorename ? Routes.uploadAutorenaming : Routes.upload
            let file = try await upload(route, UploadArgument(commit, contentHash: hash), body: .file(descriptor: fd, offset: 0, length: size),
                                        progress: { sent in progress?(sent, size) })
            try Self.check(file, hash: hash)
            return file
        }
        let (sessionID, hash) = try await sendConcurrentSession(fd: fd, size: size, tuning: tuning, progress: progress)
        return try await finishSession(sessionID, size: size, hash: hash, commit: commit)
    }

    /// Sends a file's bytes into a new concurrent session (closed by its last chunk) and
    /// returns the session and the content hash, assembled from the chunks' block digests.
    ///
    /// `resume` continues a session an earlier run (or process) started: chunks it already
    /// sent are only hashed, not sent again. `started` hears the session id before any chunk
    /// goes, `chunkSent` each chunk's offset once the server has it — what a caller records to
    /// resume after a crash.
    public func sendConcurrentSession(fd: Int32, size: Int64, tuning: UploadTuning, resume: SessionResume? = nil,
                                      started: (@Sendable (String) -> Void)? = nil, chunkSent: (@Sendable (Int64) -> Void)? = nil,
                                      progress: (@Sendable (Int64, Int64) -> Void)?) async throws -> (String, String) {
        let sessionID: String
        if let resume {
            sessionID = resume.sessionID
        } else {
            sessionID = try await startConcurrentSession()
            started?(sessionID)
        }
        let chunk = Self.sessionChunkSize(tuning)
        let offsets = Array(stride(from: Int64(0), to: max(size, 1), by: Int(chunk)))
        let chunks = ChunkLedger()
        let alreadySent = resume?.sentChunks ?? []
        // The closing chunk goes last, once every other chunk is in: then a retried close that
        // finds the session already closed can only mean our own earlier attempt closed it.
        try await withThrowingTaskGroup(of: Void.self) { group in
            var next = 0
            var running = 0
            func launch() {
                let offset = offsets[next]
                let length = min(chunk, size - offset)
                let last = next == offsets.count - 1
                next += 1
                running += 1
                group.addTask {
                    if alreadySent.contains(offset) {
                        if let known = resume?.digests[offset] {
                            chunks.record(offset, digests: known)
                        } else {
                            chunks.record(offset, digests: try await FileIO.blockDigestsOffPool(fd, offset: offset, length: length))
                        }
                        progress?(chunks.sent(offset, length), size)
                        return
                    }
                    let blockDigests = try await self.appendConcurrentChunk(session: sessionID, fd: fd, offset: offset, length: length, close: last,
                                                                          progress: { bytes in progress?(chunks.sent(offset, bytes), size) })
                    chunks.record(offset, digests: blockDigests)
                    chunkSent?(offset)
                }
            }
            func launchable() -> Bool {
                next < offsets.count && (next < offsets.count - 1 || running == 0) && running < tuning.parallelism
            }
            while launchable() { launch() }
            while try await group.next() != nil {
                running -= 1
                while launchable() { launch() }
            }
        }
        return (sessionID, ContentHasher.combine(chunks.digests(in: offsets)))
    }

    /// Starts an empty concurrent upload session (its chunks may then arrive in any order).
    public func startConcurrentSession() async throws -> String {
        try await upload(Routes.uploadSessionStart, UploadSessionStartArgument(sessionType: .concurrent), body: .none).sessionId
    }

    /// Appends one chunk of `fd` (from `offset`, also its session offset) to a concurrent
    /// session, with its content hash, and returns the chunk's block digests. Every chunk
    /// but the closing one must be a multiple of 4 MiB long. A closing append refused as
    /// `closed` was our own earlier attempt whose answer was lost.
    public func appendConcurrentChunk(session: String, fd: Int32, offset: Int64, length: Int64, close: Bool,
                                      progress: (@Sendable (Int64) -> Void)? = nil, background: Bool = false) async throws -> [UInt8] {
        let blockDigests = background
            ? try await LowPriority.run { try FileIO.blockDigests(fd, offset: offset, length: length) }
            : try await FileIO.blockDigestsOffPool(fd, offset: offset, length: length)
        let argument = UploadSessionAppendArgument(cursor: UploadSessionCursor(sessionId: session, offset: offset),
                                                   close: close, contentHash: ContentHasher.combine(blockDigests))
        do {
            _ = try await upload(Routes.uploadSessionAppend, argument, body: .file(descriptor: fd, offset: offset, length: length),
                                 progress: progress, background: background)
        } catch let error as CallError<UploadSessionLookupError> {
            guard close, case .route(.closed, _, _, _) = error else { throw error }
        }
        return blockDigests
    }

    /// The chunk size of concurrent sessions: `tuning.chunkSize` rounded down to 4 MiB.
    public static func sessionChunkSize(_ tuning: UploadTuning) -> Int64 { max(4 << 20, tuning.chunkSize / (4 << 20) * (4 << 20)) }

    /// Commits a closed session holding content with `hash` (a finish of unknown outcome
    /// happened if the path now holds those bytes).
    public func finishSession(_ sessionID: String, size: Int64, hash: String, commit: CommitInfo) async throws -> FileMetadata {
        let finish = UploadSessionFinishArgument(cursor: UploadSessionCursor(sessionId: sessionID, offset: size), commit: commit)
        return try await settle(check: { try await self.committedFile(at: commit.path, hash: hash) }) {
            let file = try await self.upload(Routes.uploadSessionFinish, finish, body: .none)
            try Self.check(file, hash: hash)
            return file
        }
    }

    /// The file at `path` if it holds content with `hash` (after an ambiguous failure).
    public func committedFile(at path: String, hash: String) async throws -> FileMetadata? {
        let file = try await metadataIfExists(path)?.fileMetadata
        return file?.contentHash == hash ? file : nil
    }

    static func check(_ file: FileMetadata, hash: String) throws {
        if let remote = file.contentHash, remote != hash {
            throw CallError<PathWriteError>.client(.contentHashMismatch(expected: hash, actual: remote))
        }
    }
}

/// A concurrent upload session to carry on with: its id, the offsets of the chunks the
/// server already has, and the block digests of those whose digests are known (the others
/// are read again to hash them).
public struct SessionResume: Sendable {
    public var sessionID: String
    public var sentChunks: Set<Int64>
    public var digests: [Int64: [UInt8]]
    public init(sessionID: String, sentChunks: Set<Int64>, digests: [Int64: [UInt8]] = [:]) {
        self.sessionID = sessionID
        self.sentChunks = sentChunks
        self.digests = digests
    }
}

/// Block digests and bytes sent per chunk of a parallel upload.
private final class ChunkLedger: Sendable {
    private let state = Mutex<(digests: [Int64: [UInt8]], sent: [Int64: Int64])>(([:], [:]))

    func record(_ offset: Int64, digests: [UInt8]) { state.withLock { $0.digests[offset] = digests } }

    /// Records progress of one chunk; returns the total sent over all chunks.
    func sent(_ offset: Int64, _ bytes: Int64) -> Int64 {
        state.withLock { $0.sent[offset] = bytes; return $0.sent.values.reduce(0, +) }
    }

    func digests(in offsets: [Int64]) -> [UInt8] { state.withLock { map in offsets.flatMap { map.digests[$0] ?? [] } } }
}
