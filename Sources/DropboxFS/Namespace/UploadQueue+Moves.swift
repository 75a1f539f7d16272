import Foundation
import SQLiteStore

/// A rename of what Dropbox holds (or will hold: a folder made here, a file moved here by an
/// earlier rename), answered here and not yet done on Dropbox, as kept on disk.
public struct QueuedMove: Sendable, Equatable {
    /// Its place in the order of namespace changes (`NamespaceOrder`).
    public var id: Int64
    /// The source's key when the rename was made (after every older change).
    public var fromLower: String
    /// The destination: the parent's key and the name as typed (what Dropbox is sent).
    public let toPath: String
    /// Its key, kept: a lookup resolves its path through every rename not yet on Dropbox,
    /// and folding the case at each look was 13 % of the daemon's CPU while a folder was
    /// renamed back and forth with hundreds of renames pending.
    public let toLower: String
    public var isFolder: Bool
    /// The source's Dropbox id (empty for a folder made here): a move found done after a
    /// crash is known by it.
    public var sourceID: String

    public init(id: Int64, fromLower: String, toPath: String, isFolder: Bool, sourceID: String, parkedAt: String = "") {
        self.id = id
        self.fromLower = fromLower
        self.toPath = toPath
        toLower = Node.key(of: toPath)
        self.isFolder = isFolder
        self.sourceID = sourceID
        self.parkedAt = parkedAt
    }

    public var name: String { String(toPath[toPath.index(after: Node.lastSlash(toPath) ?? toPath.startIndex)...]) }

    /// Where a case-only rename's first step takes its source (Dropbox refuses a move onto
    /// the same path): chosen before that step is first sent, and kept with the rename, so
    /// every later try, also the daemon's started after a crash, looks there; empty until then.
    public var parkedAt: String = ""

    var isCaseOnly: Bool { toLower == fromLower }

    /// A case-only rename whose first step may be done: its source may be at `parkedAt`.
    var isParked: Bool { isCaseOnly && !parkedAt.isEmpty }

    /// A hidden name for the first step, beside the destination: named after the rename's
    /// place in the order and the source's Dropbox id, so another machine's rename (whose
    /// queue numbers its moves alike) never parks at the same name.
    func freshHiddenStep(sourceID: String) -> String {
        let id = sourceID.hasPrefix("id:") ? String(sourceID.dropFirst(3)) : sourceID
        return TreeCalls.hiddenName(beside: toPath, for: "rename", tag: id.isEmpty ? "\(self.id)" : "\(self.id)-\(id)")
    }
}

/// Renames in the durable queue, beside the uploads: a rename's record is written before it
/// returns, so a `kill -9` of the daemon never undoes it.
extension UploadQueue {
    func createMovesTable() throws {
        try db.execute("""
            CREATE TABLE IF NOT EXISTS moves (
                id INTEGER PRIMARY KEY,
                from_lower TEXT NOT NULL,
                to_path TEXT NOT NULL,
                is_folder INTEGER NOT NULL,
                source_id TEXT NOT NULL
            );
            """)
        var columns: Set<String> = []
        try db.query("PRAGMA table_info(moves)") { columns.insert($0.text(1)) }
        if !columns.contains("parked_at") { try db.execute("ALTER TABLE moves ADD COLUMN parked_at TEXT NOT NULL DEFAULT ''") }
    }

    public func allMoves() throws -> [QueuedMove] {
        try lock.withLock {
            var result: [QueuedMove] = []
            try db.query("SELECT id, from_lower, to_path, is_folder, source_id, parked_at FROM moves ORDER BY id") { row in
                result.append(QueuedMove(id: row.int(0), fromLower: row.text(1), toPath: row.text(2), isFolder: row.bool(3),
                                         sourceID: row.text(4), parkedAt: row.text(5)))
            }
            return result
        }
    }

    public func saveMove(_ move: QueuedMove) throws {
        try durable {
            try db.run("INSERT OR REPLACE INTO moves (id, from_lower, to_path, is_folder, source_id, parked_at) VALUES (?,?,?,?,?,?)",
                       [.int(move.id), .text(move.fromLower), .text(move.toPath), .int(move.isFolder ? 1 : 0), .text(move.sourceID),
                        .text(move.parkedAt)])
        }
    }

    public func removeMoves(_ ids: [Int64]) throws { try removeRows(ids, from: "moves") }

    /// The largest id any namespace change holds (0 when none): new ones are numbered after it.
    func largestNamespaceID() throws -> Int64 {
        try lock.withLock {
            try db.first("SELECT MAX(COALESCE((SELECT MAX(id) FROM deletes), 0), COALESCE((SELECT MAX(id) FROM folders), 0), COALESCE((SELECT MAX(id) FROM moves), 0))") { $0.int(0) } ?? 0
        }
    }
}
