import SQLiteStore
import Foundation

/// Earlier versions of files, for `rev:` paths and `files/download`'s `rev`. Each commit
/// records its revision; the newest `revisionsKept` of each file are kept (Dropbox keeps
/// history for 30 days; a bounded count keeps the emulator's disk use bounded instead).
extension Namespace {
    static let revisionsKept = 10

    /// Records `entry`'s revision and forgets the oldest beyond the limit (lock held).
    func recordRevisionLocked(_ entry: Entry) throws {
        try database.run("""
            INSERT OR REPLACE INTO revisions (rev, id, path_display, size, content_hash, blob, client_modified, server_modified)
            VALUES (?,?,?,?,?,?,?,?)
            """, [.optional(entry.rev), .text(entry.id), .text(entry.path.display), .int(entry.size), .optional(entry.contentHash),
                  .optional(entry.blob), .int(entry.clientModified), .int(entry.serverModified)])
        var dropped: [String] = []
        try database.query("""
            SELECT rev, blob FROM revisions WHERE id = ? ORDER BY rowid DESC LIMIT -1 OFFSET \(Self.revisionsKept)
            """, [.text(entry.id)]) { row in
            dropped.append(row.text(0))
            if let blob = row.optionalText(1) { droppedBlobs.append(blob) }
        }
        for rev in dropped { try database.run("DELETE FROM revisions WHERE rev = ?", [.text(rev)]) }
    }

    static let revisionColumns = "rev, id, path_display, size, content_hash, blob, client_modified, server_modified"

    /// A row of `revisionColumns` as the file was then, where it was then.
    static func revisionEntry(_ row: SQLiteRow) -> Entry {
        var entry = Entry(path: DropboxPath(display: row.text(2)), id: row.text(1), isFolder: false)
        entry.rev = row.text(0)
        entry.size = row.int(3)
        entry.contentHash = row.optionalText(4)
        entry.blob = row.optionalText(5)
        entry.clientModified = row.int(6)
        entry.serverModified = row.int(7)
        return entry
    }

    /// The file as it was at `rev`, with its content opened (nil for empty content).
    func openRevision(_ rev: String, expectedPath: DropboxPath? = nil) throws -> (Entry, Int32?) {
        try locked {
            let found = try database.first("SELECT \(Self.revisionColumns) FROM revisions WHERE rev = ?", [.text(rev)],
                                           map: Self.revisionEntry)
            guard var entry = found else { throw NamespaceFailure.lookup(.notFound) }
            // The file may have moved since: show it where it is now.
            if let current = try database.first("SELECT path_display FROM entries WHERE id = ? AND is_deleted = 0",
                                                [.text(entry.id)], map: { $0.text(0) }) {
                entry.path = DropboxPath(display: current)
            }
            if let expectedPath, expectedPath.lower != entry.path.lower { throw NamespaceFailure.lookup(.notFound) }
            return (entry, try openBlobLocked(entry.blob))
        }
    }
}
