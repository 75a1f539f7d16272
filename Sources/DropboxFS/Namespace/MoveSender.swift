import DropboxAPI
import Foundation

/// Sends the pending renames (`PendingMoves`) to Dropbox, oldest first: in the background once
/// renames stop coming for a moment, and at once when something must reach Dropbox after one
/// (an upload into the renamed folder, an fsync, an unmount). Renames in a row that touch
/// nothing of one another's go together in one `move_batch_v2` (`mv dir/* elsewhere/`); the
/// others one `move_v2` each.
///
/// Before a rename, the new folders and removals numbered before it go (a removal of the
/// destination, say: `rename` over a file). When the move is done, the store learns it
/// (`MetadataStore.applyMove`) in the same step as the rename leaves the queue, so the view
/// never shows the file at neither name, and in the change feed's order (after a catch-up
/// under way, whose pages may be older than the move); the change feed then brings the same.
///
/// When Dropbox refuses:
/// - the destination is taken (another client put something there, or a removal before it
///   kept a version changed elsewhere): that entry moves aside as a conflicted copy and the
///   rename is made again: as `rename` over a changed file always did, nothing is lost;
/// - the source is gone (deleted or moved elsewhere meanwhile): the rename is dropped, and
///   the view shows what Dropbox holds; local versions that went with it upload at the new
///   name as new files;
/// - anything else Dropbox will never do (a name it refuses): dropped, logged.
final class MoveSender: Sendable {
    let pending: PendingMoves
    let folders: FolderSender
    let calls: TreeCalls
    let store: MetadataStore
    let writeBack: WriteBack
    private let rounds = QueuedRounds()

    var deletes: DeleteSender { folders.deletes }

    init(pending: PendingMoves, folders: FolderSender, calls: TreeCalls, store: MetadataStore, writeBack: WriteBack) {
        self.pending = pending
        self.folders = folders
        self.calls = calls
        self.store = store
        self.writeBack = writeBack
    }

    /// How long renames wait for the next one before they go.
    static let quiet: Duration = .milliseconds(100)

    /// Sends renames until cancelled; failures wait and try again (they stay queued). Each
    /// round sends the oldest few, and the next follows at once while any is pending: one
    /// who waits for a rename (`sendOldest`) has its round between two of these. A single
    /// round sending until none was pending went on as long as another process kept
    /// renaming, and an fsync's round waited behind it all that time.
    func run() async {
        await rounds.run(pending, quiet: Self.quiet, what: "renames", reachability: calls.client.reachability, drains: true) {
            try await self.sendNext()
        }
    }

    /// Sends the oldest pending renames (after those already being sent).
    func sendOldest() async throws {
        try await rounds.sendAll { try await self.sendNext() }
    }

    /// The oldest rename, with those after it that can go in the same `move_batch_v2`.
    private func sendNext() async throws {
        let before = min(folders.pending.oldestWaiting, deletes.pending.oldestWaiting)
        let batch = pending.batchFromOldest(before: before, limit: DropboxClient.moveBatchLimit)
        if batch.count > 1 { return try await sendBatch(batch) }
        if let move = pending.oldest { try await send(move) }
    }

    /// Renames that touch nothing of one another's, with nothing numbered between them that
    /// waits, in one `move_batch_v2`. One Dropbox refuses goes again on its own (`send`),
    /// where its refusal is handled.
    private func sendBatch(_ batch: [QueuedMove]) async throws {
        try await sendOlderChanges(touching: batch.flatMap { [$0.fromLower, $0.toLower] })
        let stored = try batch.map { move in try store.node(move.fromLower) }
        // A folder made here and renamed before it had an id keeps the id from this first try
        // on, as `send` does: should this batch be made with its answer lost, the change feed
        // takes the source from the store, and `send` then finds the rename made by that id.
        let batch = try zip(batch, stored).map { move, node in
            guard move.sourceID.isEmpty, let id = node?.id, !id.isEmpty else { return move }
            return try pending.knowSourceID(of: move, id)
        }
        // One whose source another client replaced, or the store no longer has at its name,
        // goes on its own: `send` drops it or asks Dropbox where its source is (by its path,
        // a batch would move whatever holds the name now).
        let alone = zip(batch, stored).filter { Self.isReplaced($0, $1) || ($1 == nil && !$0.sourceID.isEmpty) }.map(\.0)
        if !alone.isEmpty {
            for move in alone { try await send(move) }
            return
        }
        let sources = zip(batch, stored).map { move, node in node.map { Self.renamed(move, $0) } }
        let landings = try zip(batch, sources).map { move, source in
            try store.beginLanding(from: move.fromLower, to: move.toLower, id: source?.id ?? move.sourceID)
        }
        defer { for landing in landings { store.endLanding(landing) } }
        pending.setInFlight(Dictionary(uniqueKeysWithValues: batch.map { ($0.id, $0.toLower) }))
        defer { pending.setInFlight([:]) }
        let expected = batch.flatMap { [($0.fromLower, OwnChanges.Expectation.absent), ($0.toLower, .subtree)] }
        let results = try await calling(landing: landings) {
            try await calls.watcher.changingOwn(expected) {
                try await calls.client.moveBatch(zip(batch, sources).map { move, source in
                    MoveBatchArgument.Entry(from: source.map(TreeCalls.name(of:)) ?? move.fromLower, to: move.toPath)
                })
            }
        }
        var made: [(QueuedMove, Metadata)] = [], again: [QueuedMove] = []
        for (index, (move, result)) in zip(batch, results).enumerated() {
            guard case .success(let entry) = result, Node(entry) != nil else { again.append(move); continue }
            if let lower = entry.pathLower, lower != move.toLower { calls.watcher.expectOwn(lower, .subtree) }
            try await finish(move, entry, sourceRev: sources[index]?.rev, landing: landings[index])
            made.append((move, entry))
        }
        defer { for (move, _) in made { pending.settled(move) } }
        await calls.watcher.catchUp(after: made.flatMap { move, entry in [Node.deletion(name: entry.name, pathLower: move.fromLower), entry] })
        for move in again { try await send(move) }
    }

    /// The new folders and removals older than the oldest renames that touch their paths:
    /// every such change may be sent now (none waits behind a rename, these being the oldest).
    private func sendOlderChanges(touching ends: [String]) async throws {
        while folders.pending.touches(ends) { try await folders.sendAll() }
        while deletes.pending.touches(ends) { try await deletes.sendAll() }
    }

    private func send(_ move: QueuedMove) async throws {
        try await sendOlderChanges(touching: [move.fromLower, move.toLower])

        var move = move
        var stored = try store.node(move.fromLower)
        if Self.isReplaced(move, stored) {
            FuseLog.error("rename of \(move.fromLower) to \(move.toPath) not made: another client replaced it on Dropbox")
            return try await dropped(move)
        }
        if stored == nil, !move.sourceID.isEmpty, !move.isCaseOnly {
            // Not in the store at its name: deleted or moved by another client, or moved by
            // this very rename (its answer lost). Dropbox says which, by the source's id; by
            // its path the move would take whatever is there now (the folder another client
            // made at the name, seen under load).
            let there = try await calls.client.metadataIfExists(move.sourceID)
            if let there, there.pathLower == move.toLower { return try await done(move, there, sourceRev: nil, landing: nil) }
            // A case-only rename's hidden step made, the store not having learnt it (left to
            // the change feed), the next step's try failed: the rename goes on from the hidden
            // name. Dropped, it left the entry there for good. (Any source the store lacks
            // going on, not only these, broke removals under way: 18ff258, reverted.)
            guard let there, there.pathLower == move.fromLower, TreeCalls.isHiddenName(move.fromLower, for: "rename"), let found = Node(there) else {
                FuseLog.error("rename of \(move.fromLower) to \(move.toPath) not made: it is gone from Dropbox")
                return try await dropped(move)
            }
            stored = found
        }
        var source = Self.renamed(move, stored
            ?? Node(pathLower: move.fromLower, name: String(move.fromLower.split(separator: "/").last ?? ""), isFolder: move.isFolder))
        // A folder made here was renamed before Dropbox gave it an id: the rename keeps the
        // id from its first try on, durably, to find its source by should the source leave
        // the store (a case-only rename's hidden step made, its answer lost).
        if move.sourceID.isEmpty && !source.id.isEmpty { move = try pending.knowSourceID(of: move, source.id) }
        let sourceRev = source.rev
        defer { pending.setInFlight([:]) }
        var movedAside = false
        while true {
            do {
                if move.isCaseOnly {
                    // A case-only rename: Dropbox refuses a move onto the same path, so the
                    // source first goes to a hidden name, which the view never shows; the
                    // rename then goes on from there (also after a crash).
                    move = try pending.park(move, at: move.freshHiddenStep(sourceID: move.sourceID))
                    let temporary = move.parkedAt
                    pending.setInFlight([move.id: Node.key(of: temporary)])
                    let landing = try store.beginLanding(from: move.fromLower, to: Node.key(of: temporary), id: source.id)
                    defer { store.endLanding(landing) }
                    let made = try await calling(landing: [landing]) { try await calls.moveOnce(source, to: temporary, byPath: true) }
                    guard let step = Node(made) else { throw FSError.io("move_v2 returned a deleted entry") }
                    move = try await advance(move, to: step, landing: landing)
                    source = step
                }
                pending.setInFlight([move.id: move.toLower])
                let landing = try store.beginLanding(from: move.fromLower, to: move.toLower, id: source.id)
                defer { store.endLanding(landing) }
                let entry = try await calling(landing: [landing]) { try await calls.moveOnce(source, to: move.toPath) }
                return try await done(move, entry, sourceRev: sourceRev, landing: landing)
            } catch let error as CallError<RelocationError> {
                pending.setInFlight([:])
                guard case .route(let refusal, _, _, _) = error else { throw error }
                switch refusal {
                case .to(.conflict(.fileAncestor)):
                    // A folder of the destination is a file on Dropbox (another client put it
                    // there): the source stays where Dropbox has it. Looking the destination
                    // up, as below, failed (`not_folder`), and the rename was tried forever.
                    FuseLog.error("rename of \(move.fromLower) to \(move.toPath) not made: a folder of the new name is a file on Dropbox")
                    return try await dropped(move)
                case .to(.conflict) where !movedAside:
                    // Something else holds the name: it goes beside, as a conflicted copy.
                    if let occupant = try await calls.client.metadataIfExists(move.toPath).flatMap(Node.init) {
                        let aside = Node.parent(of: occupant.pathLower) + "/" + Uploader.conflictedName(occupant.name, on: Date())
                        do {
                            try await calls.moveNumbered(occupant.pathLower, to: aside, sourceIsOwn: false)
                            FuseLog.error("rename to \(move.toPath): Dropbox held another version there; it is kept as a conflicted copy")
                        } catch where TreeCalls.isNotFound(error) {
                            // Gone since it was looked at (another client moved or removed it):
                            // the name is free. The refusal failed the round, and a waiting
                            // fsync got EIO.
                        }
                    }
                    movedAside = true
                case .fromLookup(.notFound):
                    // Done already (the daemon stopped before it learnt so)?
                    if !source.id.isEmpty, let there = try await calls.client.metadataIfExists(move.toPath), there.id == source.id {
                        return try await done(move, there, sourceRev: sourceRev, landing: nil)
                    }
                    // A case-only rename whose step to its hidden name was made, the answer
                    // lost with Dropbox out of reach before the mount could look: on from there
                    // (given up, it left the folder at the hidden name for good).
                    if move.isParked, !source.id.isEmpty,
                       let parked = try await calls.client.metadataIfExists(move.parkedAt).flatMap(Node.init),
                       parked.id == source.id {
                        move = try await advance(move, to: parked, landing: nil)
                        source = parked
                        continue
                    }
                    FuseLog.error("rename of \(move.fromLower) to \(move.toPath) not made: it is gone from Dropbox")
                    return try await dropped(move)
                default:
                    if refusal.isTransient || refusal == .insufficientQuota { throw error }
                    FuseLog.error("rename of \(move.fromLower) to \(move.toPath) refused by Dropbox (\(error)); dropped")
                    return try await dropped(move)
                }
            }
        }
    }

    /// Makes a move's call with its landings begun. One that may have been made (its answer
    /// lost, or Dropbox failing once it went out) leaves them until the change feed is read
    /// past it (`MetadataStore.endLanding(_:answerLost:)`): the feed may bring the move yet.
    private func calling<T>(landing tickets: [MetadataStore.LandingTicket], _ call: () async throws -> T) async throws -> T {
        do {
            return try await call()
        } catch {
            if let failure = error as? any OutcomeUnknownError, failure.outcomeUnknown || failure.answerLost {
                for ticket in tickets { store.endLanding(ticket, answerLost: true) }
            }
            throw error
        }
    }

    /// Whether the store holds another entry than the renamed one at the source's path (a
    /// new id: another client replaced it).
    static func isReplaced(_ move: QueuedMove, _ stored: Node?) -> Bool {
        guard let stored, !stored.id.isEmpty, !move.sourceID.isEmpty else { return false }
        return stored.id != move.sourceID
    }

    /// The source of a rename as the move names it: by the id the rename was queued with
    /// (the one the store has, for a folder made here and renamed before it had one).
    static func renamed(_ move: QueuedMove, _ stored: Node) -> Node {
        var source = stored
        if !move.sourceID.isEmpty { source.id = move.sourceID }
        return source
    }

    /// A case-only rename's first step is done: the rename goes on from the hidden name,
    /// which the store learns in the change feed's order (`ChangeWatcher.inFeedOrder`).
    private func advance(_ move: QueuedMove, to step: Node, landing: MetadataStore.LandingTicket?) async throws -> QueuedMove {
        try await learning(step, after: landing) { [calls, pending, store] seenAtTarget in
            try await calls.watcher.inFeedOrder {
                try pending.advance(move, from: step.pathLower) {
                    try store.applyMove(from: move.fromLower, to: step, landing: landing, seenAtTarget: seenAtTarget)
                }
            }
        }
    }

    /// Runs `learn` (the store learning a move) with whether Dropbox has the moved entry
    /// where the move put it still (`isStill`), asked again if the change feed brought the
    /// entry at the move's source while `learn` waited its turn.
    private func learning<T: Sendable>(_ moved: Node, after landing: MetadataStore.LandingTicket?,
                                       _ learn: @escaping @Sendable (Bool?) async throws -> T) async throws -> T {
        do {
            return try await learn(await isStill(moved, after: landing))
        } catch is MetadataStore.DropboxWordNeeded {
            return try await learn(await isStill(moved, after: landing, asking: true) ?? false)
        }
    }

    /// Whether Dropbox has the moved entry where the move put it still, asked only when the
    /// change feed brought it at the move's source during the move (`MetadataStore.sourceSeenAgain`),
    /// or `asking`: from before the move, the feed being behind, the store learns the move;
    /// moved back by another client since, it does not (the feed has that already). Nil when
    /// not asked.
    private func isStill(_ moved: Node, after landing: MetadataStore.LandingTicket?, asking: Bool = false) async -> Bool? {
        guard let landing, asking || store.sourceSeenAgain(landing), !moved.id.isEmpty else { return nil }
        let now = try? await calls.client.metadataIfExists(moved.id)
        return now?.pathLower == moved.pathLower
    }

    /// The move is done on Dropbox: the store learns it as the rename leaves the queue, and
    /// the change feed is caught up past it.
    private func done(_ move: QueuedMove, _ entry: Metadata, sourceRev: String?, landing: MetadataStore.LandingTicket?) async throws {
        defer { pending.settled(move) }
        try await finish(move, entry, sourceRev: sourceRev, landing: landing)
        await calls.watcher.catchUp(after: [Node.deletion(name: entry.name, pathLower: move.fromLower), entry])
    }

    /// The store learns a move done on Dropbox as the rename leaves the queue (it settles
    /// once the caller has caught up with the change feed), in the feed's order: after the
    /// pages a catch-up under way may have read before the move was made. Until then the
    /// rename, in flight, shows its source wherever the store has it.
    private func finish(_ move: QueuedMove, _ entry: Metadata, sourceRev: String?, landing: MetadataStore.LandingTicket?) async throws {
        guard let moved = Node(entry) else { throw FSError.io("move_v2 returned a deleted entry") }
        try await learning(moved, after: landing) { [calls, pending, store] seenAtTarget in
            try await calls.watcher.inFeedOrder {
                try pending.finished(move) { try store.applyMove(from: move.fromLower, to: moved, landing: landing, seenAtTarget: seenAtTarget) }
            }
        }
        FuseLog.trace("moved \(move.fromLower) to \(moved.pathLower) on Dropbox")
        // A revision Dropbox renumbered: what was based on the old one is based on the new.
        if let old = sourceRev, let new = moved.rev, old != new {
            writeBack.rebase(from: old, to: new)
            try deletes.pending.rebase(from: old, to: new)
        }
    }

    /// A rename Dropbox will not make leaves the queue: the view shows what Dropbox holds at
    /// both names again, and the kernel hears so.
    private func dropped(_ move: QueuedMove) async throws {
        try pending.finished(move) {}
        defer { pending.settled(move) }
        try? await calls.watcher.catchUp()
        let shown = [move.fromLower, move.toLower].map { path in
            let node: Node? = (try? store.node(path)) ?? nil
            return StoreChange(pathLower: path, name: node?.name ?? move.name, old: nil, new: node)
        }
        calls.watcher.announce(shown)
    }
}
