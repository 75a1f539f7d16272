import DropboxAPI
import Foundation
import Synchronization

/// unlink and rmdir answered here, waiting to be done on Dropbox (`DeleteSender` sends them,
/// batched). Each is in the durable queue before the call returns. Until Dropbox has done it,
/// its path (a folder's with everything below) is hidden from the mount's view, while the
/// store goes on holding what Dropbox holds: a delete Dropbox refuses (the file changed
/// elsewhere since) shows the file again, as it would be after a failed delete.
///
/// Order: whatever else reaches Dropbox at a path with a delete pending (an upload, a mkdir,
/// a move) first has the deletes sent (`NamespaceSender.send(touching:)`); a delete made after
/// a pending rename waits for it (`NamespaceOrder`). Deletes of distinct paths commute among
/// themselves.
public final class PendingDeletes: RoundQueue {
    let queue: UploadQueue
    let order: NamespaceOrder
    let handoffs: Handoffs
    let signal = ChangeSignal()
    private let state: Mutex<State>

    private struct State {
        /// Usually one a path; more when a rename brought something else there in between
        /// (`rm B; mv A B; rm B`), oldest first.
        private(set) var byPath: [String: [QueuedDelete]] = [:]
        /// Hidden names on Dropbox, hidden too: those of the queued folders' deletes
        /// (`QueuedDelete.hiddenStep`), a case-only rename's (`PendingMoves.park`), a folder's
        /// removed at once (`DropboxFileSystem.removeNow`).
        private(set) var aside: Set<String> = []
        var lastAdded = ContinuousClock.now
        /// How many keys of `byPath` and `aside` have each depth (their count of `/`). A
        /// path's ancestors are looked up only at depths some key has: hashing every ancestor
        /// cost a path 1,000 folders deep a million bytes hashed a lookup, and each `rmdir` of
        /// an `rm -r` there 2 ms (the removals queued are deeper than the ancestors of what
        /// is removed next). Depth, not length: a key is found by any name canonically
        /// equivalent to it (Swift compares strings so), whose UTF-8 may be longer or shorter.
        private var keyDepths: [Int: Int] = [:]
        /// Ancestors looked up by key since start (tests count them, not time them).
        private(set) var lookups = 0

        mutating func mayHold(depth: Int) -> Bool {
            guard keyDepths[depth] != nil else { return false }
            lookups += 1
            return true
        }

        mutating func append(_ record: QueuedDelete) {
            if byPath[record.pathLower] == nil { counted(record.pathLower, +1) }
            byPath[record.pathLower, default: []].append(record)
            for key in record.hiddenStepKeys { setAside(key, true) }
        }

        /// What is left at a path once some of its records went.
        mutating func setRecords(_ records: [QueuedDelete], at path: String) {
            if records.isEmpty {
                if byPath.removeValue(forKey: path) != nil { counted(path, -1) }
            } else {
                if byPath[path] == nil { counted(path, +1) }
                byPath[path] = records
            }
        }

        mutating func setAside(_ key: String, _ hidden: Bool) {
            if hidden {
                if aside.insert(key).inserted { counted(key, +1) }
            } else if aside.remove(key) != nil {
                counted(key, -1)
            }
        }

        private mutating func counted(_ key: String, _ change: Int) {
            let depth = Self.depth(key)
            let count = keyDepths[depth, default: 0] + change
            keyDepths[depth] = count == 0 ? nil : count
        }

        static func depth(_ key: some StringProtocol) -> Int { key.utf8.reduce(0) { $1 == UInt8(ascii: "/") ? $0 + 1 : $0 } }

        /// Whether `pathLower` or an ancestor of it is a key `found` accepts, looking up only
        /// those at a depth some key has (`selfAndAncestors` goes up one level a step).
        mutating func anyAtOrAbove(_ pathLower: String, _ found: (String) -> Bool) -> Bool {
            var depth = Self.depth(pathLower)
            for key in Node.selfAndAncestors(pathLower) {
                defer { depth -= 1 }
                if mayHold(depth: depth), found(String(key)) { return true }
            }
            return false
        }
    }

    /// Takes up the deletes a previous mount left.
    init(queue: UploadQueue, order: NamespaceOrder, handoffs: Handoffs) throws {
        self.queue = queue
        self.order = order
        self.handoffs = handoffs
        var state = State()
        for record in try queue.allDeletes() { state.append(record) }
        self.state = Mutex(state)
        order.wakes(signal)
    }

    /// Whether a path, or a folder above it, has a delete pending (or is a folder being deleted).
    public func hides(_ pathLower: String) -> Bool {
        state.withLock { Self.hides(pathLower, &$0) }
    }

    /// Which hidden names set aside count, for `hides`.
    enum AsideNames {
        case none
        case all
        /// Only those strictly below a folder: what a rename carried along below its source
        /// (the source itself, and above it, a rename passes through).
        case below(String)

        func counts(_ key: String) -> Bool {
            switch self {
            case .none: return false
            case .all: return true
            case .below(let folder): return key.hasPrefix(folder + "/")
            }
        }
    }

    /// Whether a delete numbered in `ids` is pending at the path or a folder above it (a
    /// path resolved through pending renames: each range of the order has its own paths).
    /// `aside`: which hidden names set aside count too.
    func hides(_ pathLower: String, ids: Range<Int64>, aside: AsideNames) -> Bool {
        state.withLock { (state: inout State) in
            let noAside: Bool = if case .none = aside { true } else { false }
            if state.byPath.isEmpty && (state.aside.isEmpty || noAside) { return false }
            let (byPath, asideKeys) = (state.byPath, state.aside)
            return state.anyAtOrAbove(pathLower) { key in
                byPath[key]?.contains { ids.contains($0.id) } ?? false || (asideKeys.contains(key) && aside.counts(key))
            }
        }
    }

    /// `nodes` less those `hides` hides (one look at the state for a whole listing).
    func visible(_ nodes: [Node]) -> [Node] {
        state.withLock { state in
            if state.byPath.isEmpty && state.aside.isEmpty { return nodes }
            return nodes.filter { !Self.hides($0.pathLower, &state) }
        }
    }

    /// Ancestors looked up by key so far (`State.mayHold`).
    var ancestorLookups: Int { state.withLock { $0.lookups } }

    private static func hides(_ pathLower: String, _ state: inout State) -> Bool {
        if state.byPath.isEmpty && state.aside.isEmpty { return false }
        let (byPath, aside) = (state.byPath, state.aside)
        return state.anyAtOrAbove(pathLower) { byPath[$0] != nil || aside.contains($0) }
    }

    /// Records the delete of `node` (as Dropbox has it) durably; returns once it would
    /// survive a crash of the daemon. `durable: false` for a delete Dropbox has made already,
    /// which a full disk kept the store from learning: it hides the name until a round of
    /// `DeleteSender` finds it done and the store has caught up.
    /// `ifContent`: contents of our own commits there that may have happened unheard of
    /// (`QueuedDelete.ifContent`); `node` is then the file as the store has it, if it has it.
    func add(_ node: Node, durable: Bool = true, ifContent: [String] = []) throws {
        let first: Bool = try state.withLock { state in
            // The same delete twice changes nothing; with a rename pending, a second one
            // at a path removes what the rename brought there.
            if state.byPath[node.pathLower] != nil && order.barrier == .max && ifContent.isEmpty { return false }
            let record = QueuedDelete(id: order.take(), pathLower: node.pathLower, name: node.name,
                                      rev: node.isFolder ? nil : node.rev, isFolder: node.isFolder, ifContent: ifContent,
                                      hiddenTag: node.isFolder ? TreeCalls.randomTag() : "")
            if durable { try queue.saveDelete(record) }
            state.append(record)
            state.lastAdded = .now
            return state.byPath.count == 1
        }
        // The sender wakes for the first; later ones it finds when its quiet wait ends (woken
        // for each, it cost a task switch per unlink of an `rm -r`).
        if first { signal.notify() }
    }

    /// The delete of a file's own commits that may be on Dropbox unheard of (`hashes`, from
    /// `WriteBack.ownCommitsUnheardOf`) where the store has no file: nothing when there are none.
    func addOwnCommits(_ hashes: [String], at pathLower: String, name: String) throws {
        guard !hashes.isEmpty else { return }
        try add(Node(pathLower: pathLower, name: name, isFolder: false), ifContent: hashes)
    }

    /// Whether a delete that may be sent now (older than every pending rename), and numbered
    /// `upTo` or before, is pending at, above or below any of `paths`.
    func touches(_ paths: [String], upTo newest: Int64 = .max) -> Bool {
        let below = min(order.barrier, newest == .max ? .max : newest + 1)
        return state.withLock { state in
            if below == .max { return Node.anyTouches(paths, pending: state.byPath) }
            return Node.anyTouches(paths, pending: state.byPath.filter { $0.value.contains { $0.id < below } })
        }
    }

    /// Whether any delete numbered `upTo` or before is pending at, above or below any of
    /// `paths`, also one that waits behind a rename.
    func touchesAny(_ paths: [String], upTo newest: Int64 = .max) -> Bool {
        state.withLock { state in
            if newest == .max { return Node.anyTouches(paths, pending: state.byPath) }
            return Node.anyTouches(paths, pending: state.byPath.filter { $0.value.contains { $0.id <= newest } })
        }
    }

    /// Every pending delete that may be sent now (older than every pending rename), oldest first.
    var all: [QueuedDelete] {
        let barrier = order.barrier
        return state.withLock { $0.byPath.values.flatMap { $0 }.filter { $0.id < barrier }.sorted { $0.id < $1.id } }
    }

    /// Deletes that may be sent now.
    public var count: Int {
        let barrier = order.barrier
        return state.withLock { state in
            barrier == .max ? state.byPath.count : state.byPath.values.reduce(0) { $0 + $1.filter { $0.id < barrier }.count }
        }
    }

    /// The oldest delete that waits behind a rename (`Int64.max` when none).
    var oldestWaiting: Int64 {
        let barrier = order.barrier
        return state.withLock { $0.byPath.values.joined().map(\.id).filter { $0 > barrier }.min() ?? .max }
    }

    /// Every pending delete, also those waiting behind a rename.
    public var total: Int { state.withLock { $0.byPath.values.reduce(0) { $0 + $1.count } } }

    /// When the newest delete was added.
    var lastAdded: ContinuousClock.Instant { state.withLock { $0.lastAdded } }

    /// Deletes Dropbox has done, or refused for good: they leave the queue and the view.
    func finished(_ records: [QueuedDelete]) throws {
        guard !records.isEmpty else { return }
        try queue.removeDeletes(records.map(\.id))
        let ids = Set(records.map(\.id))
        handoffs.handingOff()
        state.withLock { state in
            for path in Set(records.map(\.pathLower)) {
                state.setRecords(state.byPath[path]?.filter { !ids.contains($0.id) } ?? [], at: path)
            }
            for record in records {
                for key in record.hiddenStepKeys { state.setAside(key, false) }
            }
        }
        signal.notify()
    }

    /// A file renamed on Dropbox got a new revision: deletes made of the old one name the new.
    func rebase(from old: String, to new: String) throws {
        let changed: [QueuedDelete] = state.withLock { state in
            var changed: [QueuedDelete] = []
            for (path, records) in state.byPath {
                state.setRecords(records.map { record in
                    guard record.rev == old else { return record }
                    var record = record
                    record.rev = new
                    changed.append(record)
                    return record
                }, at: path)
            }
            return changed
        }
        for record in changed { try queue.saveDelete(record) }
    }

    /// A folder's hidden name while its delete is checked there, hidden from the view.
    func setAside(_ pathLower: String, _ hidden: Bool) {
        state.withLock { state in
            state.setAside(pathLower, hidden)
        }
    }
}
