import Foundation
import SQLiteStore

/// An unlink or rmdir answered here and not yet done on Dropbox, as kept on disk.
public struct QueuedDelete: Sendable, Equatable {
    /// Its order among deletes (and the stable part of the hidden name a folder takes).
    public var id: Int64
    public var pathLower: String
    /// The name as the mount showed it.
    public var name: String
    /// A file: the revision deleted (`parent_rev`: a file changed elsewhere since is kept).
    /// nil for a folder.
    public var rev: String?
    public var isFolder: Bool
    /// A file whose local version's commit may have reached Dropbox unheard of (its answer
    /// lost, or the daemon killed meanwhile): the content hashes such a commit left. Dropbox's
    /// file at the path is deleted too if it holds one of them (it is ours, not another
    /// client's). Empty for every other delete.
    public var ifContent: [String] = []
    /// A folder's: random, kept with the record, so that its hidden names (`hiddenStep`) are
    /// its own among every client's. Another mount of the account numbers its removals
    /// alike: named after the number alone, a removal found the other's folder at its hidden
    /// name, Dropbox refused the move there, and an fsync waiting for it got EIO. Empty in
    /// records queued before it was kept (named after the number alone, as they were).
    public var hiddenTag: String = ""

    /// Where a removed folder waits on Dropbox while `DeleteSender` checks that nothing
    /// arrived in it: the hidden name of its whole tree's delete, or of its own alone. Named
    /// after the record, so the view hides them for as long as it is queued, also when a round
    /// stopped after the move there (Dropbox out of reach, a crash) and the change feed
    /// brought the entry in.
    func hiddenStep(alone: Bool) -> String {
        let tag = hiddenTag.isEmpty ? "\(id)" : "\(id)-\(hiddenTag)"
        return TreeCalls.hiddenName(beside: pathLower, for: "rmdir", tag: alone ? tag + "-one" : tag)
    }

    var hiddenStepKeys: [String] { isFolder ? [false, true].map { Node.key(of: hiddenStep(alone: $0)) } : [] }
}

/// Deletes in the durable queue, beside the uploads: an unlink's record is written before
/// it returns, so a `kill -9` of the daemon never brings a removed name back.
extension UploadQueue {
    func createDeletesTable() throws {
        try db.execute("""
            CREATE TABLE IF NOT EXISTS deletes (
                id INTEGER PRIMARY KEY,
                path_lower TEXT NOT NULL,
                name TEXT NOT NULL,
                rev TEXT,
                is_folder INTEGER NOT NULL
            );
            """)
        var columns: Set<String> = []
        try db.query("PRAGMA table_info(deletes)") { columns.insert($0.text(1)) }
        if !columns.contains("if_content") { try db.execute("ALTER TABLE deletes ADD COLUMN if_content TEXT NOT NULL DEFAULT ''") }
        if !columns.contains("hidden_tag") { try db.execute("ALTER TABLE deletes ADD COLUMN hidden_tag TEXT NOT NULL DEFAULT ''") }
    }

    public func allDeletes() throws -> [QueuedDelete] {
        try lock.withLock {
            var result: [QueuedDelete] = []
            try db.query("SELECT id, path_lower, name, rev, is_folder, if_content, hidden_tag FROM deletes ORDER BY id") { row in
                result.append(QueuedDelete(id: row.int(0), pathLower: row.text(1), name: row.text(2), rev: row.optionalText(3), isFolder: row.bool(4),
                                           ifContent: row.text(5).split(separator: ",").map(String.init), hiddenTag: row.text(6)))
            }
            return result
        }
    }

    public func saveDelete(_ delete: QueuedDelete) throws {
        try durable {
            try db.run("INSERT OR REPLACE INTO deletes (id, path_lower, name, rev, is_folder, if_content, hidden_tag) VALUES (?,?,?,?,?,?,?)",
                       [.int(delete.id), .text(delete.pathLower), .text(delete.name), .optional(delete.rev), .int(delete.isFolder ? 1 : 0),
                        .text(delete.ifContent.joined(separator: ",")), .text(delete.hiddenTag)])
        }
    }

    public func removeDeletes(_ ids: [Int64]) throws { try removeRows(ids, from: "deletes") }

    /// Removes records by id from one of the namespace queues' tables, in one transaction.
    func removeRows(_ ids: [Int64], from table: String) throws {
        try durable { try db.transaction { for id in ids { try db.run("DELETE FROM \(table) WHERE id = ?", [.int(id)]) } } }
    }
}
