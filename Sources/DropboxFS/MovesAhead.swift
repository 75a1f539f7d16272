/// Folder moves this mount made whose entries the store took along before the change feed
/// brought the move (`MetadataStore.applyMove`). An entry another client removed from the
/// source just before the move was taken along too: the feed brings that removal at the old
/// path, where nothing is any more, and the entry showed at the new path for good (two
/// mounts stressing one tree).
///
/// The feed tells of the move itself the same way (removals at every old path, the entries
/// at the new ones), in an order of its own, so a removal at an old path cannot be told
/// apart when it comes. Each move keeps instead the id of every entry it took along, by its
/// path below the source, and drops those the feed shows at their new paths (they went
/// along); the removals at old paths are noted. Once a catch-up begun after the move has
/// read the feed to its end, an entry noted removed and never shown at its new path did not
/// go along: it goes from where the move took it (`passed`).
/// A move taking more than `idsAtMost` entries keeps none, and is not followed.
struct MovesAhead {
    struct Move {
        let number: Int
        let source: String
        let target: String
        /// The entries taken along and not yet shown at their new paths: id by path below
        /// the source ("/a/b").
        var ids: [String: String]
        /// Paths below the source ("/a/b") the feed said were removed.
        var removed: [String] = []
    }

    static let idsAtMost = 50_000

    private var moves: [Move] = []
    private var recorded = 0

    var isEmpty: Bool { moves.isEmpty }

    /// Counts the moves recorded so far: a catch-up begun now passes them all (`passed`).
    var marker: Int { recorded }

    mutating func record(source: String, target: String, ids: [String: String]) {
        recorded += 1
        moves.append(Move(number: recorded, source: source, target: target, ids: ids))
    }

    mutating func removeAll() { moves.removeAll() }

    /// The feed shows `id` at `pathLower`: an entry a move took there went along.
    mutating func seen(_ pathLower: String, id: String) {
        for index in moves.indices {
            guard let below = Self.below(pathLower, moves[index].target), moves[index].ids[below] == id else { continue }
            moves[index].ids[below] = nil
        }
    }

    /// The feed says `pathLower` was removed, where the store holds nothing.
    mutating func removal(_ pathLower: String) {
        for index in moves.indices {
            guard let below = Self.below(pathLower, moves[index].source), moves[index].ids[below] != nil else { continue }
            moves[index].removed.append(below)
            return
        }
    }

    /// A catch-up begun at `marker` has read the feed to its end: the moves counted then are
    /// past. Returns where their entries that did not go along are now, with their ids.
    mutating func passed(_ marker: Int) -> [(pathLower: String, id: String)] {
        var left: [(pathLower: String, id: String)] = []
        for (index, move) in moves.enumerated() where move.number <= marker {
            for below in move.removed {
                if let place = whereTaken(below, from: index) { left.append(place) }
            }
        }
        moves.removeAll { $0.number <= marker }
        return left
    }

    /// Where the moves from `first` on took the entry at `below` the first's source, if it
    /// never showed at a new path on the way.
    private func whereTaken(_ below: String, from first: Int) -> (pathLower: String, id: String)? {
        guard let id = moves[first].ids[below] else { return nil }
        var path = moves[first].target + below
        for move in moves[(first + 1)...] {
            guard let next = Self.below(path, move.source) else { continue }
            guard move.ids[next] == id else { return nil }
            path = move.target + next
        }
        return (path, id)
    }

    /// `pathLower`'s path below `folder` ("/a/b"), if it is below it.
    private static func below(_ pathLower: String, _ folder: String) -> String? {
        guard Node.isAt(pathLower, orUnder: folder), pathLower != folder else { return nil }
        return String(pathLower.dropFirst(folder.count))
    }
}
