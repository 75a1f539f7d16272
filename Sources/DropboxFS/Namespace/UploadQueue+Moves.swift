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
    public var toPath: String
    public var isFolder: Bool
    /// The source's Dropbox id (empty for a folder made here): a move found done after a
    /// crash is known by it.
    public var sourceID: String

    public var toLower: String { Node.key(of: toPath) }
    public var name: String { String(toPath[toPath.index(after: Node.lastSlash(toPath) ?? toPath.startIndex)...]) }
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
    }

    public func allMoves() throws -> [QueuedMove] {
        try lock.withLock {
            var result: [QueuedMove] = []
            try db.query("SELECT id, from_lower, to_path, is_folder, source_id FROM moves ORDER BY id") { row in
                result.append(QueuedMove(id: row.int(0), fromLower: row.text(1), toPath: row.text(2), isFolder: row.bool(3), sourceID: row.text(4)))
            }
            return result
        }
    }

    public func saveMove(_ move: QueuedMove) throws {
        try durable {
            try db.run("INSERT OR REPLACE INTO moves (id, from_lower, to_path, is_folder, source_id) VALUES (?,?,?,?,?)",
                       [.int(move.id), .text(move.fromLower), .text(move.toPath), .int(move.isFolder ? 1 : 0), .text(move.sourceID)])
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
