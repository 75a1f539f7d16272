import Foundation

extension DropboxClient {
    /// One file of a batch: what to send and where it lands, and its bytes' closed session
    /// if an earlier try of the batch sent them.
    public struct BatchItem: Sendable {
        public var localPath: String
        public var commit: CommitInfo
        public var staged: StagedBytes?
        public init(localPath: String, commit: CommitInfo, staged: StagedBytes? = nil) {
            self.localPath = localPath
            self.commit = commit
            self.staged = staged
        }
    }

    /// A file's bytes in a closed upload session, not committed yet: Dropbox keeps such a
    /// session a week, and any commit (of any path) can take it once.
    public struct StagedBytes: Sendable, Equatable {
        public var session: String
        public var size: Int64
        public var hash: String
    }

    /// Uploads many files with few commits: each file's bytes go into its own closed upload
    /// session (`parallelism` at once), then up to 1,000 sessions are committed by one
    /// `finish_batch_v2` call — Dropbox serialises writes per namespace, so one commit for many
    /// files is far faster than one each. Entries refused for contention are committed again;
    /// an ambiguous batch failure is settled by checking each file's content hash.
    /// Returns one result per item, in order.
    /// `staged` hears of each item whose bytes this call put in a session (a retry of a
    /// failed commit can take them and send no byte again).
    public func uploadBatch(_ items: [BatchItem], tuning: UploadTuning = UploadTuning(), parallelism: Int = 8,
                            progress: (@Sendable (Int) -> Void)? = nil,
                            staged heard: (@Sendable (Int, StagedBytes) -> Void)? = nil) async throws -> [Result<FileMetadata, any Error>] {
        var results = [Result<FileMetadata, any Error>?](repeating: nil, count: items.count)
        var staged: [StagedItem] = []

        let unsent = items.indices.filter { items[$0].staged == nil }
        for index in items.indices {
            if let bytes = items[index].staged { staged.append((index, bytes)) }
        }
        try await withThrowingTaskGroup(of: (Int, Result<StagedBytes, any Error>).self) { group in
            var next = 0
            func launch() {
                let index = unsent[next]
                let item = items[index]
                next += 1
                group.addTask { (index, await Result { try await self.stage(item.localPath, tuning: tuning) }) }
            }
            for _ in 0..<min(parallelism, unsent.count) { launch() }
            while let (index, outcome) = try await group.next() {
                switch outcome {
                case .success(let bytes):
                    staged.append((index, bytes))
                    heard?(index, bytes)
                case .failure(let error): results[index] = .failure(error)
                }
                if next < unsent.count { launch() }
            }
        }

        staged.sort { $0.index < $1.index }
        var pending = staged
        var rounds = 0
        while !pending.isEmpty {
            rounds += 1
            var retry: [StagedItem] = []
            for group in stride(from: 0, to: pending.count, by: tuning.batchSize).map({ Array(pending[$0..<min($0 + tuning.batchSize, pending.count)]) }) {
                do {
                    try await commit(group, of: items, round: rounds, into: &results, retry: &retry)
                } catch {
                    // This call's files not yet settled fail with its error (one whose outcome
                    // is unknown says so); files earlier calls committed stay committed.
                    for item in group where results[item.index] == nil && !retry.contains(where: { $0.index == item.index }) {
                        results[item.index] = .failure(error)
                    }
                }
                progress?(results.compactMap { $0 }.count)
            }
            if !retry.isEmpty { try await Task.sleep(for: .milliseconds(Int(self.retry.backoff(attempt: rounds) * 1000))) }
            pending = retry
        }
        return results.map { $0 ?? .failure(CallError<NoRouteError>.client(.local("not uploaded"))) }
    }

    /// A file's bytes in a closed session, and its place among the batch's items.
    private typealias StagedItem = (index: Int, bytes: StagedBytes)

    /// One `finish_batch_v2` call for `group` (of at most a call's worth): each file's result,
    /// or its place in `retry` for the next round.
    private func commit(_ group: [StagedItem], of items: [BatchItem], round: Int,
                        into results: inout [Result<FileMetadata, any Error>?], retry: inout [StagedItem]) async throws {
        let argument = UploadSessionFinishBatchArgument(entries: group.map {
            UploadSessionFinishArgument(cursor: UploadSessionCursor(sessionId: $0.bytes.session, offset: $0.bytes.size), commit: items[$0.index].commit)
        })
        let entries: [UploadSessionFinishBatchResultEntry]
        do {
            entries = try await rpc(Routes.uploadSessionFinishBatch, argument, timeout: 600).entries
        } catch let error as CallError<NoRouteError> where error.outcomeUnknown {
            // Unknown outcome: a file holding our bytes was committed; others are
            // retried while the budget lasts.
            for item in group {
                if let file = try await checkAfter(error, { try await committedFile(at: items[item.index].commit.path, hash: item.bytes.hash) }) {
                    results[item.index] = .success(file)
                } else if round < self.retry.maxAttempts {
                    retry.append(item)
                } else {
                    results[item.index] = .failure(error)
                }
            }
            return
        }
        for (item, entry) in zip(group, entries) {
            switch entry {
            case .success(let file):
                results[item.index] = file.contentHash == nil || file.contentHash == item.bytes.hash
                    ? .success(file)
                    : .failure(CallError<PathWriteError>.client(.contentHashMismatch(expected: item.bytes.hash, actual: file.contentHash!)))
            case .failure(let failure) where failure.isTransient && round < self.retry.maxAttempts:
                retry.append(item)
            case .failure(let failure) where failure == .lookupFailed(.notFound) && round > 1:
                // Committed by an earlier round whose answer was lost.
                if let file = try await committedFile(at: items[item.index].commit.path, hash: item.bytes.hash) {
                    results[item.index] = .success(file)
                } else {
                    results[item.index] = .failure(CallError.route(failure, summary: failure.summary, userMessage: nil, requestID: nil))
                }
            case .failure(let failure):
                results[item.index] = .failure(CallError.route(failure, summary: failure.summary, userMessage: nil, requestID: nil))
            }
        }
    }

    /// Sends one file's bytes into a closed session, for a batch to commit (`BatchItem.staged`).
    public func stage(_ localPath: String, tuning: UploadTuning = UploadTuning()) async throws -> StagedBytes {
        let (fd, size) = try FileIO.openForReading(localPath)
        defer { close(fd) }
        if size > tuning.singleRequestLimit {
            let (session, hash) = try await sendConcurrentSession(fd: fd, size: size, tuning: tuning, progress: nil)
            return StagedBytes(session: session, size: size, hash: hash)
        }
        // A small file is read once, hashed and sent from memory: read again by curl's
        // callback, on the transfer loop's one thread, it cost each of a batch's files a
        // second read there.
        let body: RequestBody
        let hash: String
        if size <= CurlTransport.smallBody {
            let bytes = try FileIO.read(fd, length: Int(size))
            hash = ContentHasher.hash(bytes)
            body = .bytes(bytes)
        } else {
            hash = ContentHasher.combine(try await FileIO.blockDigestsOffPool(fd, offset: 0, length: size))
            body = .file(descriptor: fd, offset: 0, length: size)
        }
        let start = try await upload(Routes.uploadSessionStart, UploadSessionStartArgument(close: true, contentHash: hash), body: body)
        return StagedBytes(session: start.sessionId, size: size, hash: hash)
    }
}

extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
