import Foundation

/// Batch routes of the namespace: `files/delete_batch`, `files/move_batch_v2` and
/// `files/create_folder_batch`.
extension DropboxClient {
    /// Deletes through `files/delete_batch`, 1,000 entries a call, polling each job until it
    /// is done. One result per entry, in order. A job Dropbox fails as a whole (too many
    /// write operations at once) is thrown: nothing of it is known done, and every entry may
    /// be sent again (see `Routes.deleteBatch`).
    public func deleteBatch(_ entries: [DeleteArgument]) async throws -> [DeleteBatchResultEntry] {
        try await inBatches(entries, of: Self.deleteBatchLimit, route: "delete_batch") { part in
            try await awaitJob(try await rpc(Routes.deleteBatch, DeleteBatchArgument(entries: part)),
                               check: Routes.deleteBatchCheck)
        }
    }

    public static let deleteBatchLimit = 1000

    /// Makes folders through `files/create_folder_batch` (missing parents too, as Dropbox
    /// does), 1,000 a call. One result per path, in order; a folder already there answers
    /// `conflict/folder`. A job failed as a whole is thrown (every path may be sent again).
    public func createFolderBatch(_ paths: [String]) async throws -> [CreateFolderBatchResultEntry] {
        try await inBatches(paths, of: Self.folderBatchLimit, route: "create_folder_batch") { part in
            try await awaitJob(try await rpc(Routes.createFolderBatch, CreateFolderBatchArgument(paths: part)),
                               check: Routes.createFolderBatchCheck)
        }
    }

    /// Moves through `files/move_batch_v2`, 1,000 a call, polling each job until it is done.
    /// One result per entry, in order. A job failed as a whole is thrown.
    public func moveBatch(_ entries: [MoveBatchArgument.Entry]) async throws -> [MoveBatchResultEntry] {
        try await inBatches(entries, of: Self.moveBatchLimit, route: "move_batch_v2") { part in
            try await awaitJob(try await rpc(Routes.moveBatch, MoveBatchArgument(entries: part)), check: Routes.moveBatchCheck)
        }
    }

    public static let moveBatchLimit = 1000

    /// Dropbox takes 10,000; 1,000 keeps each request and its answer small.
    public static let folderBatchLimit = 1000

    private func inBatches<Item, Entry>(_ items: [Item], of size: Int, route: String,
                                        _ send: ([Item]) async throws -> [Entry]) async throws -> [Entry] {
        var results: [Entry] = []
        for start in stride(from: 0, to: items.count, by: size) {
            let part = Array(items[start..<min(start + size, items.count)])
            let done = try await send(part)
            guard done.count == part.count else {
                throw ClientError.undecodable("\(route) answered \(done.count) results for \(part.count) entries")
            }
            results += done
        }
        return results
    }

    /// The entries of a batch launched as `launch`, polling its job through `check` if it
    /// runs as one.
    private func awaitJob<Entry>(_ launch: BatchJobLaunch<Entry>,
                                 check: Route<AsyncJobArgument, BatchJobStatus<Entry>, NoRouteError>) async throws -> [Entry] {
        let job: String
        switch launch {
        case .complete(let done): return done
        case .asyncJobID(let id): job = id
        case .other(let tag): throw ClientError.undecodable("\(check.name) launch answered \(tag)")
        }
        var polls = 0
        while true {
            switch try await rpc(check, AsyncJobArgument(asyncJobId: job)) {
            case .complete(let done): return done
            case .inProgress:
                // Soon for the small jobs a mount sends, then at most once a second.
                try await Task.sleep(for: .milliseconds(min(1000, 20 << min(polls, 6))))
                polls += 1
            case .failed(let why): throw ClientError.undecodable("\(check.name): the job failed: \(why)")
            case .other(let tag): throw ClientError.undecodable("\(check.name) answered \(tag)")
            }
        }
    }
}
