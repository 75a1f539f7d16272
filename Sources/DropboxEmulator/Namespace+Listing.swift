import SQLiteStore
import Foundation

/// A `list_folder` cursor. It is opaque to clients (base64 of this JSON) and carries all
/// state, so cursors stay valid across emulator restarts. While `listing`, pages walk the
/// folder in key order from `after`; afterwards they follow the change counter from
/// (`seq`, `after`).
struct ListCursor: OpaqueCursor {
    var epoch: String
    var root: String
    var recursive: Bool
    var includeDeleted: Bool
    var limit: Int
    var seq: Int64
    var listing: Bool
    var after: String?
}

/// A cursor opaque to clients that carries all its state (valid across restarts): the
/// base64url of its JSON.
protocol OpaqueCursor: Codable {}

extension OpaqueCursor {
    var encoded: String {
        let data = (try? JSONEncoder().encode(self)) ?? Data()
        return data.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func decode(_ text: String) -> Self? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard let data = Data(base64Encoded: base64) else { return nil }
        return try? JSONDecoder().decode(Self.self, from: data)
    }
}

struct ListPage {
    var entries: [Entry]
    var cursor: ListCursor
    var hasMore: Bool
}

enum CursorFailure: Error {
    /// The cursor is from another epoch of the data directory: relist.
    case reset
}

extension Namespace {
    /// Starts a listing. The folder must exist (the root always does).
    func startListing(_ folder: DropboxPath, recursive: Bool, includeDeleted: Bool, limit: Int) throws -> ListPage {
        try locked {
            try requireFolderLocked(folder)
            let cursor = ListCursor(epoch: epoch, root: folder.lower, recursive: recursive,
                                    includeDeleted: includeDeleted, limit: limit, seq: currentSeqLocked, listing: true, after: nil)
            return try pageLocked(cursor)
        }
    }

    /// A cursor at "now", for `get_latest_cursor`.
    func latestCursor(_ folder: DropboxPath, recursive: Bool, includeDeleted: Bool, limit: Int) throws -> ListCursor {
        try locked {
            try requireFolderLocked(folder)
            return ListCursor(epoch: epoch, root: folder.lower, recursive: recursive, includeDeleted: includeDeleted,
                              limit: limit, seq: currentSeqLocked, listing: false, after: nil)
        }
    }

    func continueListing(_ cursor: ListCursor) throws -> ListPage {
        try locked {
            guard cursor.epoch == epoch else { throw CursorFailure.reset }
            return try pageLocked(cursor)
        }
    }

    /// True when something under the cursor's folder changed after the cursor.
    func hasChanges(after cursor: ListCursor) throws -> Bool {
        try locked {
            guard cursor.epoch == epoch else { throw CursorFailure.reset }
            var sql = "SELECT 1 FROM entries WHERE change_seq > ?"
            var values: [SQLValue] = [.int(cursor.seq)]
            appendScope(cursor, to: &sql, values: &values)
            return try database.first(sql + " LIMIT 1", values) { _ in true } ?? false
        }
    }

        private func requireFolderLocked(_ folder: DropboxPath) throws {
        if folder.isRoot { return }
        guard let entry = try liveEntryLocked(folder) else {
            try requireNoFileAncestor(folder, failure: .lookup(.notFolder))
            throw NamespaceFailure.lookup(.notFound)
        }
        if !entry.isFolder { throw NamespaceFailure.lookup(.notFolder) }
    }

    private func pageLocked(_ start: ListCursor) throws -> ListPage {
        var cursor = start
        var entries: [Entry] = []
        let limit = cursor.limit
        if cursor.listing {
            if cursor.recursive && cursor.after == nil && !cursor.root.isEmpty,
               let folder = try liveEntryLocked(DropboxPath(display: cursor.root)) {
                entries.append(folder)
            }
            var sql = "SELECT \(Entry.columns) FROM entries WHERE "
            var values: [SQLValue] = []
            if cursor.recursive {
                let (low, high) = Namespace.subtreeBounds(DropboxPath(display: cursor.root))
                sql += "path_lower > ? AND path_lower < ?"
                values += [.text(max(low, cursor.after ?? "")), .text(high)]
            } else {
                sql += "parent_lower = ? AND path_lower > ?"
                values += [.text(cursor.root), .text(cursor.after ?? "")]
            }
            if !cursor.includeDeleted { sql += " AND is_deleted = 0" }
            sql += " ORDER BY path_lower LIMIT ?"
            values.append(.int(Int64(limit + 1)))
            var rows: [Entry] = []
            try database.query(sql, values) { rows.append(Entry(row: $0)) }
            let more = rows.count > limit
            entries += rows.prefix(limit)
            if more {
                cursor.after = rows[limit - 1].path.lower
            } else {
                cursor.listing = false
                cursor.after = nil
            }
            return ListPage(entries: entries, cursor: cursor, hasMore: more)
        }

        // One row value, which the index (change_seq, path_lower) seeks to: SQLite plans a
        // statement before its values are bound, and under `change_seq > ? OR (change_seq = ?
        // AND path_lower > ?)` it found no range, and read the whole feed from the oldest
        // change at every call.
        var sql = "SELECT \(Entry.columns) FROM entries WHERE (change_seq, path_lower) > (?, ?)"
        var values: [SQLValue] = [.int(cursor.seq), .text(cursor.after ?? "\u{10FFFF}")]
        appendScope(cursor, to: &sql, values: &values)
        sql += " ORDER BY change_seq, path_lower LIMIT ?"
        values.append(.int(Int64(limit + 1)))
        var overflow = false
        try database.query(sql, values) { row in
            if entries.count < limit { entries.append(Entry(row: row)) } else { overflow = true }
        }
        if let last = entries.last {
            cursor.seq = last.changeSeq
            cursor.after = last.path.lower
        }
        if !overflow {
            // Caught up: move to the newest counter value so an idle cursor stays short.
            cursor.seq = max(cursor.seq, currentSeqLocked)
            cursor.after = nil
        }
        return ListPage(entries: entries, cursor: cursor, hasMore: overflow)
    }

    /// Restricts a query to the rows a cursor watches.
    private func appendScope(_ cursor: ListCursor, to sql: inout String, values: inout [SQLValue]) {
        if !cursor.recursive {
            sql += " AND parent_lower = ?"
            values.append(.text(cursor.root))
        } else if !cursor.root.isEmpty {
            let (low, high) = Namespace.subtreeBounds(DropboxPath(display: cursor.root))
            sql += " AND (path_lower = ? OR (path_lower > ? AND path_lower < ?))"
            values += [.text(cursor.root), .text(low), .text(high)]
        }
    }
}
