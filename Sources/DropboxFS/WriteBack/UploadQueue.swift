import Foundation
import SQLiteStore

/// One closed file waiting to reach Dropbox, as kept on disk.
public struct QueuedUpload: Sendable, Equatable {
    public var id: Int64
    /// The Dropbox path it goes to (display casing).
    public var path: String
    /// Its bytes: a sealed staging file in the cache directory.
    public var staging: String
    public var size: Int64
    /// The file's modification time (`client_modified` takes the seconds).
    public var modified: timespec
    /// The revision it replaces (`WriteMode.update`), or nil for a new file (`add`).
    public var baseRev: String?
    /// A concurrent upload session already under way, and the chunks the server has.
    public var sessionID: String?
    public var sentChunks: Set<Int64> = []

    public static func == (a: QueuedUpload, b: QueuedUpload) -> Bool {
        a.id == b.id && a.path == b.path && a.staging == b.staging && a.size == b.size && a.modified.tv_sec == b.modified.tv_sec
            && a.modified.tv_nsec == b.modified.tv_nsec && a.baseRev == b.baseRev && a.sessionID == b.sessionID && a.sentChunks == b.sentChunks
    }
}

/// The durable upload queue (SQLite, its own file beside the metadata): a closed file is
/// recorded here before `close` returns, and removed only once Dropbox has it. A crash or a
/// `kill -9` loses nothing that was recorded; the next mount carries on from here, reusing
/// an upload session's chunks the server already has.
///
/// Lock: `lock` guards the connection; no method does network I/O.
public final class UploadQueue: @unchecked Sendable {
    private let lock = NSLock()
    private let db: SQLiteDatabase

    public init(path: String) throws {
        db = try SQLiteDatabase(path: path)
        try db.execute("""
            CREATE TABLE IF NOT EXISTS uploads (
                id INTEGER PRIMARY KEY,
                path TEXT NOT NULL,
                staging TEXT NOT NULL,
                size INTEGER NOT NULL,
                modified INTEGER NOT NULL,
                modified_nsec INTEGER NOT NULL,
                base_rev TEXT,
                session_id TEXT,
                sent_chunks TEXT NOT NULL DEFAULT ''
            );
            """)
    }

    public func all() throws -> [QueuedUpload] {
        try lock.withLock {
            var result: [QueuedUpload] = []
            try db.query("SELECT id, path, staging, size, modified, modified_nsec, base_rev, session_id, sent_chunks FROM uploads ORDER BY id") { row in
                result.append(QueuedUpload(
                    id: row.int(0), path: row.text(1), staging: row.text(2), size: row.int(3),
                    modified: timespec(tv_sec: Int(row.int(4)), tv_nsec: Int(row.int(5))), baseRev: row.optionalText(6),
                    sessionID: row.optionalText(7), sentChunks: Set(row.text(8).split(separator: ",").compactMap { Int64($0) })))
            }
            return result
        }
    }

    /// Records (or rewrites) an upload, and in the same transaction drops the ones it replaces.
    public func save(_ upload: QueuedUpload, replacing: [Int64] = []) throws {
        try durable {
            try db.transaction {
                try db.run("INSERT OR REPLACE INTO uploads (id, path, staging, size, modified, modified_nsec, base_rev, session_id, sent_chunks) VALUES (?,?,?,?,?,?,?,?,?)",
                           [.int(upload.id), .text(upload.path), .text(upload.staging), .int(upload.size), .int(Int64(upload.modified.tv_sec)),
                            .int(Int64(upload.modified.tv_nsec)), .optional(upload.baseRev), .optional(upload.sessionID),
                            .text(upload.sentChunks.sorted().map(String.init).joined(separator: ","))])
                for id in replacing { try db.run("DELETE FROM uploads WHERE id = ?", [.int(id)]) }
            }
        }
    }

    public func remove(_ ids: [Int64]) throws {
        try durable { try db.transaction { for id in ids { try db.run("DELETE FROM uploads WHERE id = ?", [.int(id)]) } } }
    }

    /// The largest id recorded (0 when empty): new versions are numbered after it.
    public var maxID: Int64 {
        let found = try? lock.withLock { try db.first("SELECT COALESCE(MAX(id), 0) FROM uploads") { $0.int(0) } }
        return (found ?? nil) ?? 0
    }

    /// Runs a change; a full disk is ENOSPC for whoever is closing a file.
    private func durable(_ body: () throws -> Void) throws {
        try lock.withLock {
            do { try body() } catch let failure as SQLiteDatabase.Failure where failure.code == 13 /* SQLITE_FULL */ {
                throw FSError.noSpace
            }
        }
    }
}
