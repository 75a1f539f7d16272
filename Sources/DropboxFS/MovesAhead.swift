/// Folder moves this mount made whose entries the store took along before the change feed
/// brought the move (`MetadataStore.applyMove`). An entry another client removed from the
/// source just before the move was taken along too: the feed brings that removal at the old
/// path, where nothing is any more, and the entry showed at the new path for good (two
/// mounts stressing one tree). Such a removal is followed here to where the entry went.
///
/// Each move keeps the id of every entry it took along, by its path below the source, until
/// the feed shows the entry at its new path (it went along: a later removal at the old path
/// is of another entry) or a catch-up begun after the move has ended (the feed is past it).
struct MovesAhead {
    struct Move {
        let number: Int
        let source: String
        let target: String
        /// The entries taken along and not yet seen at their new paths: id by path below the
        /// source ("/a/b"). Nil when there were more than `idsAtMost` (not kept).
        var ids: [String: String]?
    }

    /// A larger tree keeps no ids: a removal below its source unlists the folder instead.
    static let idsAtMost = 10_000

    private(set) var moves: [Move] = []
    private var recorded = 0

    var isEmpty: Bool { moves.isEmpty }

    /// Counts the moves recorded so far: a catch-up begun now passes them all (`passed`).
    var marker: Int { recorded }

    mutating func record(source: String, target: String, ids: [String: String]?) {
        recorded += 1
        moves.append(Move(number: recorded, source: source, target: target, ids: ids))
    }

    /// A catch-up begun at `marker` has read the feed to its end.
    mutating func passed(_ marker: Int) { moves.removeAll { $0.number <= marker } }

    mutating func removeAll() { moves.removeAll() }

    /// The feed shows `id` at `pathLower`: an entry a move took there went along indeed.
    mutating func seen(_ pathLower: String, id: String) {
        for index in moves.indices where Node.isAt(pathLower, orUnder: moves[index].target) && pathLower != moves[index].target {
            let below = String(pathLower.dropFirst(moves[index].target.count))
            if moves[index].ids?[below] == id { moves[index].ids![below] = nil }
        }
    }

    /// Where a move took the entry the feed says was removed at `pathLower`, with its id;
    /// the id is nil when a move on the way kept none. Nil when no move took it along.
    func whereTaken(_ pathLower: String) -> (pathLower: String, id: String?)? {
        var path = pathLower
        var id: String?
        var taken = false, unknown = false
        for move in moves where Node.isAt(path, orUnder: move.source) && path != move.source {
            let below = String(path.dropFirst(move.source.count))
            if let ids = move.ids {
                guard let known = ids[below], id == nil || id == known else { return nil }
                id = known
            } else {
                unknown = true
            }
            path = move.target + below
            taken = true
        }
        guard taken else { return nil }
        return (path, unknown ? nil : id)
    }
}
