import Foundation

/// A file's history, as `files/list_revisions` and `files/restore` see it: the revisions
/// `recordRevisionLocked` kept, newest first, and a restore that commits an old revision's
/// content as the file's newest one (sharing its blob: content is never copied).
extension Namespace {
    struct History {
        /// The file is gone: its tombstone is all that is left at the path.
        var isDeleted: Bool
        /// Newest first, each shown at the file's path now (or where it was deleted).
        var revisions: [Entry]
        var hasMore: Bool
    }

    /// The revisions of the file at `path` (live or deleted), or of the file with `id`.
    func history(path: DropboxPath?, id: String?, limit: Int) throws -> History {
        try locked {
            let current: Entry?
            if let id {
                current = try database.first("SELECT \(Entry.columns) FROM entries WHERE id = ? ORDER BY is_deleted LIMIT 1",
                                             [.text(id)], map: Entry.init(row:))
            } else if let path {
                try requireNoFileAncestor(path, failure: .lookup(.notFolder))
                current = try entryLocked(path)
            } else {
                current = nil
            }
            guard let current else { throw NamespaceFailure.lookup(.notFound) }
            guard !current.isFolder else { throw NamespaceFailure.lookup(.notFile) }
            var revisions: [Entry] = []
            try database.query("SELECT \(Self.revisionColumns) FROM revisions WHERE id = ? ORDER BY rowid DESC LIMIT ?",
                               [.text(current.id), .int(Int64(limit + 1))]) { row in
                var entry = Self.revisionEntry(row)
                entry.path = current.path
                revisions.append(entry)
            }
            let hasMore = revisions.count > limit
            return History(isDeleted: current.isDeleted, revisions: Array(revisions.prefix(limit)), hasMore: hasMore)
        }
    }

    /// Makes revision `rev`'s content the newest version of the file at `path`, which may be
    /// deleted or missing (a deleted file comes back) or hold newer content (which stays in
    /// the history). Restoring the content the file has already changes nothing.
    func restore(_ path: DropboxPath, rev: String) throws -> Entry {
        try locked {
            guard let old = try database.first("""
                SELECT size, content_hash, blob, client_modified FROM revisions WHERE rev = ?
                """, [.text(rev)], map: { row in (size: row.int(0), hash: row.optionalText(1), blob: row.optionalText(2), clientModified: row.int(3)) })
            else { throw RestoreFailure.invalidRevision }
            if path.hasDisallowedName(refusing: refusedNames) { throw NamespaceFailure.write(.disallowedName) }
            try requireNoFileAncestor(path, failure: .write(.conflict("file_ancestor")))
            let existing = try entryLocked(path)
            if let existing, !existing.isDeleted {
                if existing.isFolder { throw NamespaceFailure.write(.conflict("folder")) }
                if existing.contentHash == old.hash { return existing }
            }
            // A deleted file keeps its id: its history goes on where it stopped.
            var entry = Entry(path: path, id: existing.map { $0.isFolder ? Identifiers.fileID() : $0.id } ?? Identifiers.fileID(),
                              isFolder: false)
            entry.size = old.size
            entry.contentHash = old.hash
            return try commitRevisionLocked(entry, clientModified: old.clientModified,
                                            replacing: existing?.isDeleted == false ? existing : nil) { old.blob }
        }
    }
}

/// `RestoreError` members that are not lookups or writes.
enum RestoreFailure: Error {
    case invalidRevision
}
