import DropboxAPI
import Foundation

/// Sends the pending namespace changes (new folders, removals, renames) that something is
/// about to need on Dropbox, in their order (`NamespaceOrder`): an upload, a copy, an fsync of
/// a folder, an unmount. Each sender also runs on its own in the background.
final class NamespaceSender: Sendable {
    let folders: FolderSender
    let moves: MoveSender
    var deletes: DeleteSender { folders.deletes }

    init(folders: FolderSender, moves: MoveSender) {
        self.folders = folders
        self.moves = moves
    }

    /// Sends every pending change at, above or below `paths`, and whatever is older than
    /// those: new folders and removals that may go now first (they are older than every
    /// rename), then the oldest rename, until none touches `paths`.
    ///
    /// Someone waits for this (a mkdir at a name a new folder was renamed away from, an
    /// fsync): a call whose answer was lost on a dying connection is tried again a few times,
    /// as the background rounds try theirs; the next round finds what the lost one did. One
    /// dropped answer of a `move_batch_v2` failed such a mkdir with EIO. Server errors are
    /// not tried again here: the client has tried those already where it may, and a run of
    /// them takes the mount offline (the uploads that wait here retry on their own).
    func send(touching paths: [String]) async throws {
        var lost = 0
        while true {
            do {
                return try await sendOnce(touching: paths)
            } catch where Self.answerWasLost(error) && lost + 1 < Self.lostAnswerAttempts {
                lost += 1
                try await Task.sleep(for: QueuedRounds.retry.wait(attempt: lost - 1))
            }
        }
    }

    /// Tries of `send(touching:)` when answers are lost.
    static let lostAnswerAttempts = 4

    /// A call that may have been carried out, its answer lost with its connection: trying
    /// again finds out. Out of reach, the caller hears so at once.
    private static func answerWasLost(_ error: any Error) -> Bool {
        (error as? any OutcomeUnknownError)?.answerLost == true && ErrnoMapping.fsError(error) != .networkUnreachable
    }

    private func sendOnce(touching paths: [String]) async throws {
        while true {
            if folders.pending.touches(paths) {
                try await folders.sendAll()
            } else if deletes.pending.touches(paths) {
                try await deletes.sendAll()
            } else if moves.pending.touches(paths) || waitsBehindARename(paths) {
                try await moves.sendOldest()
            } else {
                return
            }
        }
    }

    /// Whether a new folder or removal at, above or below `paths` waits for a rename.
    private func waitsBehindARename(_ paths: [String]) -> Bool {
        folders.pending.touches(paths, waiting: true) || deletes.pending.touches(paths, waiting: true)
    }

    /// Sends everything pending (an unmount); throws if some of it is left.
    func sendAll() async throws {
        while true {
            if folders.pending.count > 0 {
                try await folders.sendAll()
            } else if deletes.pending.count > 0 {
                try await deletes.sendAll()
            } else if !moves.pending.isEmpty {
                try await moves.sendOldest()
            } else {
                return
            }
        }
    }

    /// Changes pending, also those waiting behind a rename.
    var total: Int { folders.pending.total + deletes.pending.total + moves.pending.count }

    /// Sends each kind in the background until cancelled.
    func run() async {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.deletes.run() }
            group.addTask { await self.folders.run() }
            group.addTask { await self.moves.run() }
        }
    }
}
