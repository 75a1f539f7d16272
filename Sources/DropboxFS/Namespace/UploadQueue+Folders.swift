import Foundation
import SQLiteStore

/// A mkdir answered here and not yet done on Dropbox, as kept on disk.
public struct QueuedFolder: Sendable, Equatable {
    /// Its order among new folders.
    public var id: Int64
    public var pathLower: String
    /// The path as the user typed its last name (the parent part as the mount knows it).
    public var path: String

    public var name: String { String(path[path.index(after: path.lastIndex(of: "/") ?? path.startIndex)...]) }
}

/// New folders in the durable queue, beside the uploads: a mkdir's record is written before
/// it returns, so a `kill -9` of the daemon never loses a folder it made.
extension UploadQueue {
    func createFoldersTable() throws {
        try db.execute("""
            CREATE TABLE IF NOT EXISTS folders (
                id INTEGER PRIMARY KEY,
                path_lower TEXT NOT NULL,
                path TEXT NOT NULL
            );
            """)
    }

    public func allFolders() throws -> [QueuedFolder] {
        try lock.withLock {
            var result: [QueuedFolder] = []
            try db.query("SELECT id, path_lower, path FROM folders ORDER BY id") { row in
                result.append(QueuedFolder(id: row.int(0), pathLower: row.text(1), path: row.text(2)))
            }
            return result
        }
    }

    public func saveFolder(_ folder: QueuedFolder) throws {
        try durable {
            try db.run("INSERT OR REPLACE INTO folders (id, path_lower, path) VALUES (?,?,?)",
                       [.int(folder.id), .text(folder.pathLower), .text(folder.path)])
        }
    }

    /// A new folder renamed before it was sent, made at its new name instead: one statement,
    /// so that a crash leaves it at one name or the other.
    public func replaceFolder(_ id: Int64, with folder: QueuedFolder) throws {
        try durable {
            try db.run("UPDATE folders SET id = ?, path_lower = ?, path = ? WHERE id = ?",
                       [.int(folder.id), .text(folder.pathLower), .text(folder.path), .int(id)])
        }
    }

    public func removeFolders(_ ids: [Int64]) throws { try removeRows(ids, from: "folders") }
}
