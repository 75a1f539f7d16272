import Foundation

extension DropboxClient {
    /// Deletes through `files/delete_batch`, 1,000 entries a call, polling each job until it
    /// is done. One result per entry, in order. A job Dropbox fails as a whole (too many
    /// write operations at once) is thrown: nothing of it is known done, and every entry may
    /// be sent again (see `Routes.deleteBatch`).
    public func deleteBatch(_ entries: [DeleteArgument]) async throws -> [DeleteBatchResultEntry] {
        var results: [DeleteBatchResultEntry] = []
        for start in stride(from: 0, to: entries.count, by: Self.deleteBatchLimit) {
            let part = Array(entries[start..<min(start + Self.deleteBatchLimit, entries.count)])
            let done = try await deleteBatchJob(part)
            guard done.count == part.count else {
                throw ClientError.undecodable("delete_batch answered \(done.count) results for \(part.count) entries")
            }
            results += done
        }
        return results
    }

    public static let deleteBatchLimit = 1000

    private func deleteBatchJob(_ entries: [DeleteArgument]) async throws -> [DeleteBatchResultEntry] {
        let job: String
        switch try await rpc(Routes.deleteBatch, DeleteBatchArgument(entries: entries)) {
        case .complete(let done): return done
        case .asyncJobID(let id): job = id
        case .other(let tag): throw ClientError.undecodable("delete_batch answered \(tag)")
        }
        var polls = 0
        while true {
            switch try await rpc(Routes.deleteBatchCheck, AsyncJobArgument(asyncJobId: job)) {
            case .complete(let done): return done
            case .inProgress:
                // Soon for the small jobs a mount sends, then at most once a second.
                try await Task.sleep(for: .milliseconds(min(1000, 20 << min(polls, 6))))
                polls += 1
            case .failed(let why): throw ClientError.undecodable("delete_batch job failed: \(why)")
            case .other(let tag): throw ClientError.undecodable("delete_batch/check answered \(tag)")
            }
        }
    }
}
