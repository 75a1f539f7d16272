import SQLiteStore
import Foundation

/// `files/search_v2` over names: every word of the query must occur in an entry's name,
/// ignoring case (Dropbox also searches content and ranks by relevance; a client can count
/// on neither, so the emulator matches names only and ranks exact names first, then by path).
struct SearchQuery: OpaqueCursor {
    var query: String
    /// Folder searched, with everything below it ("" for the root).
    var scope: String
    var maxResults: Int
    var deleted: Bool
    /// Lower-case extensions without the dot; empty means any.
    var extensions: [String]
    var offset: Int

    var words: [String] {
        DropboxPath.fold(query).split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
    }
}

extension Namespace {
    /// One page of matches and whether more follow.
    func search(_ query: SearchQuery) throws -> (matches: [Entry], hasMore: Bool) {
        try locked {
            let scope = query.scope.isEmpty ? DropboxPath.root : DropboxPath(display: query.scope)
            if !scope.isRoot {
                guard let folder = try liveEntryLocked(scope) else {
                    try requireNoFileAncestor(scope, failure: .lookup(.notFolder))
                    throw NamespaceFailure.lookup(.notFound)
                }
                guard folder.isFolder else { throw NamespaceFailure.lookup(.notFolder) }
            }
            let words = query.words
            var found: [Entry] = []
            var sql = "SELECT \(Entry.columns) FROM entries WHERE is_deleted = ?"
            var values: [SQLValue] = [.int(query.deleted ? 1 : 0)]
            if !scope.isRoot {
                let (low, high) = Self.subtreeBounds(scope)
                sql += " AND path_lower > ? AND path_lower < ?"
                values += [.text(low), .text(high)]
            }
            try database.query(sql, values) { row in
                let entry = Entry(row: row)
                let name = DropboxPath.fold(entry.path.name)
                guard words.allSatisfy({ name.contains($0) }) else { return }
                if !query.extensions.isEmpty {
                    guard !entry.isFolder, let dot = name.lastIndex(of: "."),
                          query.extensions.contains(String(name[name.index(after: dot)...])) else { return }
                }
                found.append(entry)
            }
            let exact = DropboxPath.fold(query.query)
            found.sort { a, b in
                let aExact = DropboxPath.fold(a.path.name) == exact, bExact = DropboxPath.fold(b.path.name) == exact
                return aExact != bExact ? aExact : a.path.lower < b.path.lower
            }
            let page = found.dropFirst(query.offset).prefix(query.maxResults)
            return (Array(page), query.offset + page.count < found.count)
        }
    }
}
