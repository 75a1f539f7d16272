import DropboxAPI
import Foundation
import Synchronization

/// Renames answered here, waiting to be done on Dropbox (`MoveSender` sends them, one at a
/// time, oldest first). Each is in the durable queue before the call returns. Until Dropbox
/// has done it and the store has learnt so, the view shows the source at its new name
/// (`DropboxFileSystem+Moves` resolves every path through them), while the store goes on
/// holding what Dropbox holds.
public final class PendingMoves: RoundQueue {
    let queue: UploadQueue
    let order: NamespaceOrder
    /// Hides the hidden names renames pass through (as removals hide theirs).
    let deletes: PendingDeletes
    let signal = ChangeSignal()
    private let state: Mutex<State>
    /// How many are pending, read without the lock: every lookup asks whether any is.
    private let pendingCount = Atomic<Int>(0)

    private struct State {
        /// Oldest first.
        var moves: [QueuedMove] = []
        /// Done on Dropbox and in the store, while the change feed is caught up past them:
        /// until then they still touch their paths (an fsync waits for them, so a change
        /// another client makes there after it returns is never taken for the mount's own).
        var settling: [QueuedMove] = []
        /// The renames whose calls are under way, each with where its source lands if the
        /// change feed brings the move before the call returns (the store then has it there).
        var inFlight: [Int64: String] = [:]
        /// Counts every change to `moves`: a resolution made while one happened is made again.
        var generation: UInt64 = 0
        var lastAdded = ContinuousClock.now
        /// `moves` by their ends, for the view's walk (`RenamesSnapshot`).
        var ends: RenameEnds
        /// The case-only renames parked at their hidden names (id: the hidden name's key).
        var parked: [Int64: String]

        init(moves: [QueuedMove]) {
            self.moves = moves
            ends = RenameEnds(moves)
            parked = Dictionary(uniqueKeysWithValues: moves.filter(\.isParked).map { ($0.id, Node.key(of: $0.parkedAt)) })
        }
    }

    /// Takes up the renames a previous mount left.
    init(queue: UploadQueue, order: NamespaceOrder, deletes: PendingDeletes) throws {
        self.queue = queue
        self.order = order
        self.deletes = deletes
        let moves = try queue.allMoves()
        self.state = Mutex(State(moves: moves))
        pendingCount.store(moves.count, ordering: .releasing)
        order.setBarrier(moves.first?.id ?? .max)
        // The previous daemon may have stopped after a case-only rename's step to its hidden
        // name was made, and the change feed may bring that entry in before the next try: from
        // the start, the name is hidden and the view shows the entry at the rename's name.
        for move in moves where move.isParked { deletes.setAside(Node.key(of: move.parkedAt), true) }
    }

    /// The renames a previous daemon may have made on Dropbox without hearing so, each with
    /// where its source went then: a case-only rename whose first step may be done to its
    /// hidden name, any other to its destination. Only those whose source's id is known: the
    /// change feed tells the move by it.
    var mayBeDone: [(move: QueuedMove, landedAt: String)] {
        state.withLock { state in
            state.moves.compactMap { move in
                guard !move.sourceID.isEmpty else { return nil }
                if move.isParked { return (move, Node.key(of: move.parkedAt)) }
                return move.isCaseOnly ? nil : (move, move.toLower)
            }
        }
    }

    /// The pending renames, oldest first, those in flight (id: landing), and the generation
    /// they belong to. A case-only rename whose first step may be done counts as in flight
    /// to its hidden name: the change feed may bring the hidden entry in first; the view then
    /// shows it at the rename's name, and hides the hidden name.
    var snapshot: RenamesSnapshot {
        state.withLock { state in
            let flights = state.inFlight.merging(state.parked) { flight, _ in flight }
            return RenamesSnapshot(moves: state.moves, inFlight: flights, generation: state.generation, ends: state.ends)
        }
    }

    /// A case-only rename's first step, to a hidden name, is about to be sent: from now until
    /// it is known done (`advance`) or the rename leaves the queue, its source may be there.
    /// The name is chosen at the first try (`fresh`) and kept with the rename, durably: every
    /// later try looks there, also after a crash. Returns the rename with its name.
    func park(_ record: QueuedMove, at fresh: String) throws -> QueuedMove {
        if record.isParked { return record }
        guard let parked = try update(record, { $0.parkedAt = fresh })?.now else { return record }
        deletes.setAside(Node.key(of: parked.parkedAt), true)
        return parked
    }

    /// The name a rename's first step was parked at is known not to hold it any more.
    private func unpark(_ record: QueuedMove) {
        if record.isParked { deletes.setAside(Node.key(of: record.parkedAt), false) }
    }

    /// Move calls start (each rename's id with its destination's key), or end (empty).
    func setInFlight(_ flights: [Int64: String]) {
        state.withLock { state in
            state.inFlight = flights
            state.generation += 1
        }
    }

    /// The oldest renames that can go in one `move_batch_v2`: in order, each numbered before
    /// `before` (the oldest new folder or removal that waits behind a rename), none touching
    /// another's paths, none case-only (those go through a hidden name, alone).
    func batchFromOldest(before: Int64, limit: Int) -> [QueuedMove] {
        state.withLock { state in
            var batch: [QueuedMove] = []
            var ends = PathTouches()
            for move in state.moves {
                let (from, to) = (move.fromLower, move.toLower)
                guard batch.count < limit, move.id < before, from != to, !ends.touches(from), !ends.touches(to) else { break }
                batch.append(move)
                ends.insert(from)
                ends.insert(to)
            }
            return batch
        }
    }

    /// A case-only rename's first step is done (the source is at a hidden name now, and the
    /// store has learnt it through `apply`): the rename goes on from there.
    func advance(_ record: QueuedMove, from newSource: String, apply: () throws -> Void) throws -> QueuedMove {
        let changed = try update(record) { move in
            try apply()
            move.fromLower = newSource
            move.parkedAt = ""
        }
        guard let changed else {
            var advanced = record
            advanced.fromLower = newSource
            return advanced
        }
        unpark(changed.was)
        return changed.now
    }

    /// The rename's source has this Dropbox id (it had none when the rename was queued: a
    /// folder made here): kept with the rename, durably.
    func knowSourceID(of record: QueuedMove, _ id: String) throws -> QueuedMove {
        if let changed = try update(record, { $0.sourceID = id }) { return changed.now }
        var known = record
        known.sourceID = id
        return known
    }

    /// Changes a queued rename in memory and on disk, as no call of it is under way; returns
    /// it as it was and as it is now, nil when it left the queue (never saved again then).
    private func update(_ record: QueuedMove, _ change: (inout QueuedMove) throws -> Void) throws -> (was: QueuedMove, now: QueuedMove)? {
        let changed: (was: QueuedMove, now: QueuedMove)? = try state.withLock { state in
            guard let index = state.moves.firstIndex(where: { $0.id == record.id }) else { return nil }
            let was = state.moves[index]
            try change(&state.moves[index])
            let now = state.moves[index]
            state.ends.remove(was)
            state.ends.insert(now)
            state.parked[now.id] = now.isParked ? Node.key(of: now.parkedAt) : nil
            state.inFlight[record.id] = nil
            state.generation += 1
            return (was, now)
        }
        if let changed { try queue.saveMove(changed.now) }
        return changed
    }

    var generation: UInt64 { state.withLock { $0.generation } }

    var isEmpty: Bool { pendingCount.load(ordering: .acquiring) == 0 }

    var oldest: QueuedMove? { state.withLock { $0.moves.first } }

    public var count: Int { state.withLock { $0.moves.count } }

    var lastAdded: ContinuousClock.Instant { state.withLock { $0.lastAdded } }

    /// Records a rename of `source` (a node of the view) to `toPath` (the parent's key and the
    /// name as typed) durably; returns once it would survive a crash of the daemon.
    func add(_ source: Node, to toPath: String) throws {
        let first: Bool = try state.withLock { state in
            let record = QueuedMove(id: order.take(), fromLower: source.pathLower, toPath: toPath,
                                    isFolder: source.isFolder, sourceID: source.id)
            try queue.saveMove(record)
            state.moves.append(record)
            state.ends.insert(record)
            pendingCount.store(state.moves.count, ordering: .releasing)
            state.generation += 1
            state.lastAdded = .now
            Self.moveBarrier(order, state)
            return state.moves.count == 1
        }
        if first { signal.notify() }
    }

    /// The order's barrier follows the oldest rename, set under the lock with the change to
    /// `moves`: set after it, a rename finishing as another was added could set it past the
    /// new one (read no rename pending, set `.max` after the add had set the new one's
    /// number), and what was numbered after the new rename went to Dropbox before it.
    private static func moveBarrier(_ order: NamespaceOrder, _ state: State) {
        order.setBarrier(state.moves.first?.id ?? .max)
    }

    /// Whether a pending rename's source or destination lies strictly below `folder`.
    func hasEndBelow(_ folder: String) -> Bool {
        state.withLock { state in
            let prefix = folder + "/"
            return state.ends.hasBelow(folder) || state.settling.contains { Self.hasEnd($0, under: prefix) }
        }
    }

    /// `hasEndBelow`, for the renames made while `ids` were handed out (`NamespaceOrder`);
    /// one under way counts whenever it was made.
    func hasEnd(below folder: String, madeIn ids: Range<Int64>) -> Bool {
        state.withLock { state in
            let prefix = folder + "/"
            if state.settling.contains(where: { Self.hasEnd($0, under: prefix) }) { return true }
            return state.ends.hasBelow(folder) && state.moves.contains { ids.contains($0.id) && Self.hasEnd($0, under: prefix) }
        }
    }

    private static func hasEnd(_ move: QueuedMove, under prefix: String) -> Bool {
        move.fromLower.hasPrefix(prefix) || move.toLower.hasPrefix(prefix)
    }

    /// Whether a pending rename's source or destination is `path` or lies below it.
    func hasEnd(atOrBelow path: String) -> Bool {
        hasEndBelow(path) || state.withLock { state in
            state.ends.newest(at: path, below: .max) != nil || state.settling.contains { $0.fromLower == path || $0.toLower == path }
        }
    }

    /// Whether a pending rename's source or destination lies at, above or below any of
    /// `paths`; with `upTo`, only one numbered then or before.
    func touches(_ paths: [String], upTo newest: Int64 = .max) -> Bool {
        state.withLock { state in
            if paths.contains(where: state.ends.touches) {
                // Oldest first: those numbered up to `newest` lead.
                if newest == .max || Self.anyEnd(of: state.moves.prefix { $0.id <= newest }, touches: paths) { return true }
            }
            return Self.anyEnd(of: state.settling.filter { $0.id <= newest }, touches: paths)
        }
    }

    private static func anyEnd(of moves: some Collection<QueuedMove>, touches paths: [String]) -> Bool {
        if moves.isEmpty { return false }
        var ends: [String: Bool] = [:]
        for move in moves {
            ends[move.fromLower] = true
            ends[move.toLower] = true
        }
        return Node.anyTouches(paths, pending: ends)
    }

    /// The oldest rename is done on Dropbox (or refused for good): `apply` brings the store
    /// to what Dropbox now holds, while no path is resolved through the rename (a resolution
    /// running meanwhile sees the generation change and is made again). It touches its paths
    /// until `settled`.
    func finished(_ record: QueuedMove, apply: () throws -> Void) throws {
        let queued: QueuedMove? = try state.withLock { state in
            guard let index = state.moves.firstIndex(where: { $0.id == record.id }) else { return nil }
            try apply()
            let queued = state.moves.remove(at: index)
            state.ends.remove(queued)
            state.parked[queued.id] = nil
            state.settling.append(record)
            state.inFlight[record.id] = nil
            Self.moveBarrier(order, state)  // before the count: none seen, the barrier is past them
            pendingCount.store(state.moves.count, ordering: .releasing)
            state.generation += 1
            return queued
        }
        try queue.removeMoves([record.id])
        if let queued { unpark(queued) }
        signal.notify()
    }

    /// The renames of a new folder taken back before it was sent leave the queue with it:
    /// they wait behind it, so none was sent, and none could be made on Dropbox. False,
    /// changing nothing, if one is under way all the same.
    func takeBack(_ ids: Set<Int64>) throws -> Bool {
        if ids.isEmpty { return true }
        let taken: Bool = state.withLock { state in
            guard ids.allSatisfy({ state.inFlight[$0] == nil && state.parked[$0] == nil }) else { return false }
            for move in state.moves where ids.contains(move.id) { state.ends.remove(move) }
            state.moves.removeAll { ids.contains($0.id) }
            Self.moveBarrier(order, state)
            pendingCount.store(state.moves.count, ordering: .releasing)
            state.generation += 1
            return true
        }
        guard taken else { return false }
        try queue.removeMoves(Array(ids))
        signal.notify()
        return true
    }

    /// The change feed is caught up past a finished rename.
    func settled(_ record: QueuedMove) {
        state.withLock { $0.settling.removeAll { $0.id == record.id } }
    }
}
