import DropboxAPI
import Foundation

/// Sends the pending new folders (`PendingFolders`) to Dropbox: in the background once
/// mkdirs stop coming for a moment, and at once when something must find them there (a move,
/// an fsync, an unmount). One round makes every folder pending when it starts through
/// `create_folder_batch` (1,000 a call), after the removals pending at those names
/// (`rmdir x; mkdir x`). A folder already there (another client's, or made by an upload into
/// it) counts as made. Rounds run one at a time, in order.
final class FolderSender: Sendable {
    let pending: PendingFolders
    let deletes: DeleteSender
    let calls: TreeCalls
    /// Hears the folders a round made, each at the path the mount knows it by, with the id
    /// Dropbox gave it (`FolderTimes`: a time kept for one before it had an id goes under it).
    let made: @Sendable ([(path: String, id: String)]) -> Void
    private let rounds = QueuedRounds()

    init(pending: PendingFolders, deletes: DeleteSender, calls: TreeCalls,
         made: @escaping @Sendable ([(path: String, id: String)]) -> Void = { _ in }) {
        self.pending = pending
        self.deletes = deletes
        self.calls = calls
        self.made = made
    }

    /// How long mkdirs wait for the next one before they go (`tar x`, `mkdir -p`, `cp -r`
    /// make folders in bursts: sent together, they cost one request).
    static let quiet: Duration = .milliseconds(200)

    /// Sends new folders until cancelled; failures wait and try again (they stay queued).
    func run() async {
        await rounds.run(pending, quiet: Self.quiet, what: "new folders", reachability: calls.client.reachability) {
            try await self.sendRound()
        }
    }

    /// One round after those already running.
    func sendAll() async throws { try await rounds.sendAll { try await self.sendRound() } }

    /// Returns once the rounds started so far have ended, whatever their outcome.
    func roundsUnderWayEnd() async { await rounds.underWayEnd() }

    private func sendRound() async throws {
        let records = pending.startSending()
        guard !records.isEmpty else { return }
        defer { pending.stopSending(records) }  // those not finished wait for the next round
        try await make(records)
    }

    private func make(_ records: [QueuedFolder]) async throws {
        try await deletes.send(touching: records.map(\.pathLower))
        FuseLog.trace("folders: round of \(records.count):\(records.prefix(32).map { " #\($0.id) \($0.path)" }.joined())")
        let results = try await calls.watcher.changingOwn(records.map { ($0.pathLower, .subtree) }) {
            try await calls.client.createFolderBatch(records.map(\.path))
        }
        var done: [QueuedFolder] = [], found: [QueuedFolder] = [], refused: [QueuedFolder] = []
        var made: [Metadata] = [], failures: [String] = []
        for (record, result) in zip(records, results) {
            switch result {
            case .success(let folder):
                done.append(record)
                made.append(.folder(folder))
            case .failure(.path(.conflict(.folder))):
                found.append(record)
            case .failure(.path(.tooManyWriteOperations)), .failure(.path(.insufficientSpace)), .failure(.other):
                failures.append("\(record.path): \(result)")
            case .failure(let error):
                // What Dropbox will never make (a file holds the name, say): the folder
                // leaves the view, and what was written into it fails to upload as it would
                // have in a folder that could not be made.
                FuseLog.error("mkdir \(record.path): Dropbox refused the folder (\(error)); it is gone from the mount")
                refused.append(record)
            }
        }
        // The store has the folders before they stop showing from here. One found there
        // already (another client's, or made by a round whose answer was lost) comes into the
        // store only by a catch-up: if that failed, it stays pending, shown from here, and
        // the next round finds it again.
        let caughtUp = await calls.watcher.catchUp(after: made)
        FuseLog.trace("folders: made\(done.map { " #\($0.id)" }.joined()), found\(found.map { " #\($0.id)" }.joined()), "
            + "refused\(refused.map { " #\($0.id)" }.joined()), \(failures.count) failed, caught up: \(caughtUp)")
        try pending.finished(made: caughtUp ? done + found : done, refused: refused)
        self.made(zip(done, made).compactMap { record, folder in folder.id.map { (record.pathLower, $0) } })
        if !failures.isEmpty {
            throw FSError.io("\(failures.count) folders not made: \(failures.prefix(3).joined(separator: "; "))")
        }
    }
}
