/// The pending renames of one generation, as the view resolves a path through them
/// (`DropboxFileSystem+Moves`): the walk from the newest rename back goes straight to the
/// renames with an end at the path or at a folder above it (`RenameEnds`), not through all
/// of them. Through all of them, every lookup cost time in proportion to the renames pending,
/// and 1,500 renames of uploaded files in a row took 8.9 s (0.16 s for 200).
struct RenamesSnapshot {
    /// Oldest first (their ids ascending).
    let moves: [QueuedMove]
    /// The renames whose calls are under way (id: where the source lands), case-only ones
    /// parked at their hidden names too.
    let inFlight: [Int64: String]
    let generation: UInt64
    let ends: RenameEnds

    /// The newest rename numbered below `upper` with its source or destination at `pathLower`
    /// or at a folder above it.
    func newestTouching(_ pathLower: String, below upper: Int64) -> QueuedMove? {
        var newest: Int64?
        for key in Node.selfAndAncestors(pathLower) {
            if let id = ends.newest(at: String(key), below: upper), id > newest ?? .min { newest = id }
        }
        return newest.flatMap(move)
    }

    /// The rename numbered `id`, found by bisection.
    func move(_ id: Int64) -> QueuedMove? {
        var (low, high) = (0, moves.count)
        while low < high {
            let middle = (low + high) / 2
            if moves[middle].id < id { low = middle + 1 } else { high = middle }
        }
        return low < moves.count && moves[low].id == id ? moves[low] : nil
    }
}

/// Each end (source and destination key) of the pending renames, with the ids of the renames
/// that have it, ascending. Kept by `PendingMoves` with its renames.
struct RenameEnds {
    private var ids: [String: [Int64]] = [:]
    /// The same ends, for "is a rename at, above or below this path?".
    private var paths = PathTouches()

    init(_ moves: [QueuedMove] = []) {
        for move in moves { insert(move) }
    }

    mutating func insert(_ move: QueuedMove) {
        for key in Set([move.fromLower, move.toLower]) {
            paths.insert(key)
            ids[key, default: []].append(move.id)
            // A new rename has the largest id; a changed one is put back in its place.
            if let list = ids[key], list.count > 1, list[list.count - 2] > move.id { ids[key]?.sort() }
        }
    }

    mutating func remove(_ move: QueuedMove) {
        for key in Set([move.fromLower, move.toLower]) {
            paths.remove(key)
            ids[key]?.removeAll { $0 == move.id }
            if ids[key]?.isEmpty == true { ids[key] = nil }
        }
    }

    /// Whether a rename has an end at, above or below `path`.
    func touches(_ path: String) -> Bool { paths.touches(path) }
    func hasBelow(_ path: String) -> Bool { paths.hasBelow(path) }

    /// The largest id below `upper` of a rename with an end at `key`.
    func newest(at key: String, below upper: Int64) -> Int64? {
        ids[key]?.last { $0 < upper }
    }
}
