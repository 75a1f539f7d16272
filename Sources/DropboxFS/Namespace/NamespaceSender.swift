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

    /// Sends every change at, above or below `paths` that was pending when this began, and
    /// whatever is older than those: new folders and removals that may go now first (they
    /// are older than every rename), then the oldest rename, until none touches `paths`.
    /// Changes made meanwhile are not waited for: an fsync that waited for every rename
    /// above its file, also those made after it began, went on as long as another process
    /// renamed the folder back and forth.
    ///
    /// Someone waits for this (a mkdir at a name a new folder was renamed away from, an
    /// fsync): a round that met a call whose outcome is unknown (its answer lost on a dying
    /// connection, or a server error: 5xx, which the client does not try again on a call
    /// that is not idempotent, a rename or a new folder) is sent again a few times, as the
    /// background rounds do; the next round finds what the failed one did. One dropped
    /// answer of a `move_batch_v2` failed such a mkdir with EIO, and so did one 500. The
    /// tries are counted from the last round that went through: a wait behind many rounds
    /// fails only on one round that keeps failing, not on a few failures spread among them.
    func send(touching paths: [String]) async throws {
        let newest = moves.pending.order.newest
        var failed = 0
        while let next = Self.next(touching: paths, upTo: newest, folders: folders.pending, deletes: deletes.pending, moves: moves.pending) {
            do {
                switch next {
                case .newFolders: try await folders.sendAll()
                case .removals: try await deletes.sendAll()
                case .oldestRename: try await moves.sendOldest()
                }
                failed = 0
            } catch where Self.outcomeWasUnknown(error) && failed + 1 < Self.attempts {
                failed += 1
                try await Task.sleep(for: QueuedRounds.retry.wait(attempt: failed - 1))
            }
        }
    }

    /// Tries of a round of `send(touching:)` when outcomes are unknown: 15 s of waits at most
    /// between them.
    static let attempts = 6

    /// A call that may have been carried out, and whose round can be sent again to find
    /// out. Out of reach, the caller hears so at once.
    private static func outcomeWasUnknown(_ error: any Error) -> Bool {
        guard ErrnoMapping.fsError(error) != .networkUnreachable, let call = error as? any OutcomeUnknownError else { return false }
        return call.answerLost || call.outcomeUnknown
    }

    /// What `send(touching:)` sends next.
    enum NextRound: Equatable { case newFolders, removals, oldestRename }

    /// The next round for the changes at, above or below `paths`: new folders and removals
    /// that may go now (older than every rename), else the oldest rename while one touches
    /// `paths` or any new folder or removal there is pending; nil once none is. That last
    /// check reads no barrier: one that waits behind a rename has the oldest go first, and
    /// one that may go now since a rename finished after the checks above goes next turn.
    /// Asked "waits behind a rename?" instead, with the barrier read a second time, a rename
    /// finishing between the two reads made neither true: an fsync of a folder returned with
    /// a removal below it unsent (four-at-once differential, tree mix).
    /// Only changes numbered `upTo` or before count.
    static func next(touching paths: [String], upTo newest: Int64 = .max,
                     folders: PendingFolders, deletes: PendingDeletes, moves: PendingMoves) -> NextRound? {
        if folders.touches(paths, upTo: newest) { return .newFolders }
        if deletes.touches(paths, upTo: newest) { return .removals }
        if moves.touches(paths, upTo: newest) || folders.touchesAny(paths, upTo: newest) || deletes.touchesAny(paths, upTo: newest) {
            return .oldestRename
        }
        return nil
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
            } else if total == 0 {
                return
            }  // else the last rename finished after the counts were read: they go next turn
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
