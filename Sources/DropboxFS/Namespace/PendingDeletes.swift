import Foundation
import Synchronization

/// unlink and rmdir answered here, waiting to be done on Dropbox (`DeleteSender` sends them,
/// batched). Each is in the durable queue before the call returns. Until Dropbox has done it,
/// its path (a folder's with everything below) is hidden from the mount's view, while the
/// store goes on holding what Dropbox holds: a delete Dropbox refuses (the file changed
/// elsewhere since) shows the file again, as it would be after a failed delete.
///
/// Order: whatever else reaches Dropbox at a path with a delete pending (an upload, a mkdir,
/// a move) first has the deletes sent (`DeleteSender.send(touching:)`). Deletes of distinct
/// paths commute among themselves.
public final class PendingDeletes: RoundQueue {
    let queue: UploadQueue
    let signal = ChangeSignal()
    private let state: Mutex<State>

    private struct State {
        var nextID: Int64
        var byPath: [String: QueuedDelete] = [:]
        /// Hidden names folders take on Dropbox while their delete is checked: hidden too.
        var aside: Set<String> = []
        var lastAdded = ContinuousClock.now
    }

    /// Takes up the deletes a previous mount left.
    init(queue: UploadQueue) throws {
        self.queue = queue
        let records = try queue.allDeletes()
        var state = State(nextID: (records.map(\.id).max() ?? 0) + 1)
        for record in records where state.byPath[record.pathLower] == nil { state.byPath[record.pathLower] = record }
        self.state = Mutex(state)
    }

    /// Whether a path, or a folder above it, has a delete pending (or is a folder being deleted).
    public func hides(_ pathLower: String) -> Bool {
        state.withLock { Self.hides(pathLower, $0) }
    }

    /// `nodes` less those `hides` hides (one look at the state for a whole listing).
    func visible(_ nodes: [Node]) -> [Node] {
        state.withLock { state in
            if state.byPath.isEmpty && state.aside.isEmpty { return nodes }
            return nodes.filter { !Self.hides($0.pathLower, state) }
        }
    }

    private static func hides(_ pathLower: String, _ state: State) -> Bool {
        if state.byPath.isEmpty && state.aside.isEmpty { return false }
        return Node.selfAndAncestors(pathLower).contains { key in
            let key = String(key)
            return state.byPath[key] != nil || state.aside.contains(key)
        }
    }

    /// Records the delete of `node` (as Dropbox has it) durably; returns once it would
    /// survive a crash of the daemon. `durable: false` for a delete Dropbox has made already,
    /// which a full disk kept the store from learning: it hides the name until a round of
    /// `DeleteSender` finds it done and the store has caught up.
    func add(_ node: Node, durable: Bool = true) throws {
        let first: Bool = try state.withLock { state in
            if state.byPath[node.pathLower] != nil { return false }
            let record = QueuedDelete(id: state.nextID, pathLower: node.pathLower, name: node.name,
                                      rev: node.isFolder ? nil : node.rev, isFolder: node.isFolder)
            if durable { try queue.saveDelete(record) }
            state.nextID += 1
            state.byPath[node.pathLower] = record
            state.lastAdded = .now
            return state.byPath.count == 1
        }
        // The sender wakes for the first; later ones it finds when its quiet wait ends (woken
        // for each, it cost a task switch per unlink of an `rm -r`).
        if first { signal.notify() }
    }

    /// Whether a delete is pending at, above or below any of `paths`.
    func touches(_ paths: [String]) -> Bool { state.withLock { Node.anyTouches(paths, pending: $0.byPath) } }

    /// Every pending delete, oldest first.
    var all: [QueuedDelete] { state.withLock { $0.byPath.values.sorted { $0.id < $1.id } } }

    public var count: Int { state.withLock { $0.byPath.count } }

    /// When the newest delete was added.
    var lastAdded: ContinuousClock.Instant { state.withLock { $0.lastAdded } }

    /// Deletes Dropbox has done, or refused for good: they leave the queue and the view.
    func finished(_ records: [QueuedDelete]) throws {
        guard !records.isEmpty else { return }
        try queue.removeDeletes(records.map(\.id))
        state.withLock { state in
            for record in records where state.byPath[record.pathLower]?.id == record.id {
                state.byPath.removeValue(forKey: record.pathLower)
            }
        }
        signal.notify()
    }

    /// A folder's hidden name while its delete is checked there, hidden from the view.
    func setAside(_ pathLower: String, _ hidden: Bool) {
        state.withLock { state in
            if hidden { state.aside.insert(pathLower) } else { state.aside.remove(pathLower) }
        }
    }
}
