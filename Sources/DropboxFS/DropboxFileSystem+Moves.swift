import Foundation

/// The view while renames are pending (`PendingMoves`): the store holds what Dropbox holds,
/// so after `mv A B` the view's `B/x` is the store's `A/x` until the move is done there.
///
/// A path is resolved by walking the pending namespace changes from the newest back
/// (`origin`): in each range of the order between two renames, a new folder made at the path
/// shows, a removal at or above it hides it; then a rename whose destination holds the path
/// turns it into the source's path (older changes speak of that one), and a rename whose
/// source holds it means it was moved away. What is left at the end is a path of the store.
///
/// With no rename pending (nearly always) none of this runs: the view is the store, less
/// pending removals, plus new folders and local versions, as before.
extension DropboxFileSystem {
    /// Where a rename may have put what the view shows, should Dropbox have made it and the
    /// change feed have brought it into the store before the rename left the queue: while
    /// its call is under way, and after a call whose answer was lost (Dropbox out of reach
    /// for the look that settles it, a crash), until the next try.
    struct Landing: Equatable {
        var path: String
        /// For a rename not in flight: the destination must hold the rename's source (by its
        /// Dropbox id) for the store's entry there to be taken; what else it holds is not it.
        var proof: Proof?

        struct Proof: Equatable {
            var destination: String
            var sourceID: String
        }

        /// The same below: `suffix` after both ends.
        func below(_ suffix: Substring) -> Landing { Landing(path: path + suffix, proof: proof) }
    }

    enum Origin: Equatable {
        /// The store's entry at this path, or at `landing` (where a rename may have put it
        /// already); `name` is the name a rename gave it.
        case store(String, name: String?, landing: Landing? = nil)
        /// A new folder made here, not yet on Dropbox; `moved` when a rename brought it here.
        case newFolder(QueuedFolder, name: String?, moved: Bool)
        case nothing
    }

    /// The walk skips the renames with no end at the path or above it: the ranges of the
    /// order between the renames it meets are looked at as one (a new folder or a removal in
    /// any of them decides alike).
    func origin(of pathLower: String, in renames: RenamesSnapshot) -> Origin {
        var path = pathLower
        var upper = Int64.max
        var name: String?
        var landing: Landing?
        var carriedBelow: String?
        while let move = renames.newestTouching(path, below: upper) {
            if let shown = changeOrigin(path, ids: (move.id + 1)..<upper, name: name, moved: path != pathLower) { return shown }
            let toLower = move.toLower
            if Node.isAt(path, orUnder: toLower) {
                if name == nil && path == toLower { name = move.name }
                if let place = Self.landing(of: move, inFlight: renames.inFlight) { landing = place.below(path.dropFirst(toLower.count)) }
                path = move.fromLower + path.dropFirst(toLower.count)
                carriedBelow = move.fromLower
            } else {
                return .nothing  // moved away from here (its source holds the path)
            }
            upper = move.id
        }
        return changeOrigin(path, ids: Int64.min..<upper, name: name, moved: path != pathLower, carriedBelow: carriedBelow)
            ?? .store(path, name: name, landing: landing)
    }

    /// Where a pending rename may have put its source already: where its call in flight puts
    /// it, else its destination, if Dropbox gave the source an id to know it by there. (Only
    /// the oldest renames are ever sent; an older one's landing, met later in the walk,
    /// replaces a newer one's.)
    private static func landing(of move: QueuedMove, inFlight: [Int64: String]) -> Landing? {
        if let flight = inFlight[move.id] { return Landing(path: flight) }
        if move.sourceID.isEmpty || move.isCaseOnly { return nil }
        return Landing(path: move.toLower, proof: Landing.Proof(destination: move.toLower, sourceID: move.sourceID))
    }

    /// The landing's path, if the store has the rename's source there (see `Landing`).
    func landed(_ landing: Landing?) throws -> String? {
        var proven: [String: Bool] = [:]
        return try landed(landing, proven: &proven)
    }

    /// The same, for many paths: `proven` keeps what each destination was found to hold.
    private func landed(_ landing: Landing?, proven: inout [String: Bool]) throws -> String? {
        guard let landing else { return nil }
        guard let proof = landing.proof else { return landing.path }
        if let known = proven[proof.destination] { return known ? landing.path : nil }
        let holds = try store.node(proof.destination, remember: false)?.id == proof.sourceID
        proven[proof.destination] = holds
        return holds ? landing.path : nil
    }

    /// What a new folder or a removal numbered in `ids` makes of a path, if anything. The
    /// hidden names of removals and renames under way hide a path of the store as itself;
    /// for a path a rename resolved the view's to (`moved`), only below that rename's source
    /// (`carriedBelow`), not the source or above, which the rename passes through (a
    /// case-only rename's first step). Counting none for such a path, the view listed the
    /// hidden name of an rmdir under way in a folder renamed since (four differential
    /// sequences at once).
    private func changeOrigin(_ path: String, ids: Range<Int64>, name: String?, moved: Bool, carriedBelow: String? = nil) -> Origin? {
        if let folder = folders.record(path), ids.contains(folder.id) { return .newFolder(folder, name: name, moved: moved) }
        let aside: PendingDeletes.AsideNames = ids.lowerBound != .min ? .none : !moved ? .all : carriedBelow.map { .below($0) } ?? .none
        if deletes.hides(path, ids: ids, aside: aside) { return .nothing }
        return nil
    }

    /// Resolves a path against one generation of the pending renames, made again if a rename
    /// finished meanwhile (the store then changed under it).
    func resolving<T>(_ body: (RenamesSnapshot) throws -> T) throws -> T {
        while true {
            let renames = moves.snapshot
            let result = try body(renames)
            if moves.generation == renames.generation { return result }
        }
    }

    /// Whether the view shows, at `pathLower`, the new folder made there and not yet sent:
    /// what an rmdir, or a rename over it, may take back. Not one a pending rename brought
    /// here, nor anything else shown at the name a pending rename took such a folder from
    /// (its record keeps that name until the rename is sent: taking it back there removed
    /// the renamed folder).
    func showsNewFolderMadeHere(_ pathLower: String) throws -> Bool {
        guard folders.isPending(pathLower) else { return false }
        if moves.isEmpty { return true }
        return try resolving { renames in
            // Not moved: the walk came back to this very path, whose record it found.
            guard case .newFolder(_, _, let moved) = origin(of: pathLower, in: renames) else { return false }
            return !moved
        }
    }

    /// Where a new folder the view shows at its own record's path (`showsNewFolderMadeHere`)
    /// has been since it was made: every path the view showed it at, this one too, each with
    /// the places in the order of the changes made while it was there; and the pending
    /// renames that moved it alone (those of a folder above it moved it along, and are that
    /// folder's). Both from the walk `origin` makes.
    func pastOfNewFolder(at pathLower: String) throws -> (spans: [NewFolderSpan], ownRenames: Set<Int64>) {
        let made = folders.record(pathLower)?.id ?? .min
        return try resolving { renames in
            var path = pathLower
            var upper = Int64.max
            var past: (spans: [NewFolderSpan], ownRenames: Set<Int64>) = ([], [])
            while let move = renames.newestTouching(path, below: upper),
                  changeOrigin(path, ids: (move.id + 1)..<upper, name: nil, moved: path != pathLower) == nil,
                  Node.isAt(path, orUnder: move.toLower) {
                if path == move.toLower { past.ownRenames.insert(move.id) }
                past.spans.append(NewFolderSpan(path: path, ids: (move.id + 1)..<upper))
                path = move.fromLower + path.dropFirst(move.toLower.count)
                upper = move.id
            }
            past.spans.append(NewFolderSpan(path: path, ids: min(made, upper)..<upper))
            return past
        }
    }

    /// The node the view shows at a path with no local version while renames are pending;
    /// `remoteOnly` leaves out new folders made at the path itself (not brought by a rename).
    func resolvedNode(_ pathLower: String, remember: Bool = true, remoteOnly: Bool = false) throws -> Node? {
        try resolving { renames in
            try node(at: pathLower, from: origin(of: pathLower, in: renames), remember: remember, remoteOnly: remoteOnly)
        }
    }

    private func node(at pathLower: String, from origin: Origin, remember: Bool, remoteOnly: Bool = false) throws -> Node? {
        switch origin {
        case .nothing:
            return nil
        case .newFolder(let record, let name, let moved):
            if remoteOnly && !moved { return nil }
            return Self.shown(PendingFolders.node(record), at: pathLower, name: name)
        case .store(let path, let name, let landing):
            let stored = try store.node(path, remember: remember) ?? landed(landing).flatMap { try store.node($0, remember: remember) }
            return stored.map { Self.shown($0, at: pathLower, name: name) }
        }
    }

    private static func shown(_ node: Node, at pathLower: String, name: String?) -> Node {
        var node = node
        node.pathLower = pathLower
        if let name { node.name = name }
        return node
    }

    /// Where a folder of the view is in the store (nil for a new folder, which the store does
    /// not have: listed and empty), while renames are pending.
    func storeFolder(_ folderLower: String) throws -> String? {
        try resolving { renames in
            switch origin(of: folderLower, in: renames) {
            case .store(let path, _, let landing):
                // Where the store has it: the feed may have brought the rename in.
                if try store.node(path) == nil, let landed = try landed(landing), try store.node(landed) != nil { return landed }
                return path
            case .newFolder, .nothing: return nil
            }
        }
    }

    /// A listed folder's children while renames are pending: every name that could be there
    /// (the store's children of each path the folder had in the order, new folders made and
    /// renames made into it), each resolved on its own.
    func resolvedChildren(_ folderLower: String) throws -> [Node] {
        try resolving { renames in
            // Local versions before the store: they leave once the store has their uploads.
            let local = writeBack.overlayChildren(folderLower)
            let pending = renames.moves
            var candidates = Set<String>()
            var fromStore: [String: Node] = [:]
            var path = folderLower
            var upper = Int64.max
            var landing: Landing?
            var reachesStore = true
            func collect(_ ids: Range<Int64>) {
                for record in folders.childRecords(of: path) where ids.contains(record.id) {
                    candidates.insert(folderLower + record.pathLower.dropFirst(path.count))
                }
                for move in pending where ids.contains(move.id) && Node.parent(of: move.toLower) == path {
                    candidates.insert(folderLower + move.toLower.dropFirst(path.count))
                }
            }
            for move in pending.reversed() {
                collect(move.id..<upper)  // a rename's destination is a path of the range after it
                if changeOrigin(path, ids: (move.id + 1)..<upper, name: nil, moved: path != folderLower) != nil { reachesStore = false; break }
                let toLower = move.toLower  // folded anew at each use
                if Node.isAt(path, orUnder: toLower) {
                    if let place = Self.landing(of: move, inFlight: renames.inFlight) { landing = place.below(path.dropFirst(toLower.count)) }
                    path = move.fromLower + path.dropFirst(toLower.count)
                } else if Node.isAt(path, orUnder: move.fromLower) {
                    reachesStore = false
                    break
                }
                upper = move.id
            }
            if reachesStore {
                collect(Int64.min..<upper)
                if changeOrigin(path, ids: Int64.min..<upper, name: nil, moved: path != folderLower) == nil {
                    // The folder's own rename, brought in by the change feed before it left the
                    // queue: the store has its children at the landing.
                    let stored = try store.node(path) == nil ? try landed(landing) ?? path : path
                    for child in try store.children(stored) {
                        candidates.insert(folderLower + child.pathLower.dropFirst(stored.count))
                        fromStore[child.pathLower] = child
                    }
                }
            }
            var shown: [String: Node] = [:]
            var proven: [String: Bool] = [:]
            for key in candidates {
                let origin = origin(of: key, in: renames)
                if case .store(let storePath, let name, let landing) = origin,
                   let child = try fromStore[storePath] ?? landed(landing, proven: &proven).flatMap({ fromStore[$0] }) {
                    shown[key] = Self.shown(child, at: key, name: name)
                } else if let child = try node(at: key, from: origin, remember: false) {
                    shown[key] = child.attributesOnly
                }
            }
            for node in local { shown[node.pathLower] = node.attributesOnly }
            return shown.values.sorted { $0.pathLower < $1.pathLower }
        }
    }

    /// The path the view shows a store path at (for the kernel's invalidations): renamed by
    /// every pending rename of it or of a folder above it, oldest first.
    func viewPath(ofStorePath pathLower: String, moves pending: [QueuedMove]) -> (path: String, name: String?) {
        var path = pathLower
        var name: String?
        for move in pending where Node.isAt(path, orUnder: move.fromLower) {
            if path == move.fromLower { name = move.name }
            path = move.toLower + path.dropFirst(move.fromLower.count)
        }
        return (path, name)
    }

    /// Changes of the store as the view shows them (paths and names renamed by pending renames).
    func viewChanges(_ changes: [StoreChange]) -> [StoreChange] {
        if moves.isEmpty { return changes }
        let pending = moves.snapshot.moves
        return changes.map { change in
            let (path, name) = viewPath(ofStorePath: change.pathLower, moves: pending)
            guard path != change.pathLower || name != nil else { return change }
            var shown = change
            shown.pathLower = path
            if let name {
                shown.name = name
                shown.old?.name = name
                shown.new?.name = name
            }
            shown.old?.pathLower = path
            shown.new?.pathLower = path
            return shown
        }
    }
}

/// A path a new folder was shown at, and the places in the order (`NamespaceOrder`) of the
/// changes made while it was there: a new folder or a rename below that path made then was
/// made in it; one made before or after was in another folder shown there at another time.
struct NewFolderSpan {
    let path: String
    let ids: Range<Int64>
}
