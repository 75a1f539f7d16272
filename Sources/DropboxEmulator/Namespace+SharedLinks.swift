import SQLiteStore
import Foundation

/// Shared links, as `sharing/create_shared_link_with_settings`, `list_shared_links` and
/// `revoke_shared_link` model them: at most one link per file or folder (asking again
/// answers `shared_link_already_exists` with the link), following the item when it moves,
/// gone with it when it is deleted, and past its `expires` time a link is gone too.
struct SharedLink {
    var url: String
    var entry: Entry
    var expires: Int64?
    var created: Int64

    func metadata() -> JSON {
        var fields: [(String, JSON)] = [
            ("url", .string(url)),
            ("id", .string(entry.id)),
            ("name", .string(entry.path.name)),
            ("path_lower", .string(entry.path.lower)),
            ("link_permissions", .object([
                ("resolved_visibility", .tagged("public")),
                ("can_revoke", .bool(true)),
                ("visibility_policies", .array([])),
                ("can_set_expiry", .bool(true)),
                ("can_remove_expiry", .bool(true)),
                ("allow_download", .bool(true)),
                ("can_allow_download", .bool(true)),
                ("can_disallow_download", .bool(true)),
                ("allow_comments", .bool(true)),
                ("team_restricts_comments", .bool(false)),
            ])),
            ("created_timestamp", .string(Timestamp.format(created))),
        ]
        if let expires { fields.append(("expires", .string(Timestamp.format(expires)))) }
        guard !entry.isFolder else { return .object([(".tag", .string("folder"))] + fields) }
        fields += [
            ("client_modified", .string(Timestamp.format(entry.clientModified))),
            ("server_modified", .string(Timestamp.format(entry.serverModified))),
            ("rev", .string(entry.rev ?? "")),
            ("size", .int(entry.size)),
        ]
        return .object([(".tag", .string("file"))] + fields)
    }
}

enum SharedLinkFailure: Error {
    case alreadyExists(SharedLink)
    case expiryInThePast
    case notFound
}

extension Namespace {
    /// A new link to the item at `path`.
    func createSharedLink(_ path: DropboxPath, expires: Int64?) throws -> SharedLink {
        try locked {
            guard let entry = try liveEntryLocked(path) else {
                try requireNoFileAncestor(path, failure: .lookup(.notFolder))
                throw NamespaceFailure.lookup(.notFound)
            }
            if let existing = try linksLocked(ofID: entry.id).first { throw SharedLinkFailure.alreadyExists(existing) }
            let now = Timestamp.now()
            if let expires, expires <= now { throw SharedLinkFailure.expiryInThePast }
            let kind = entry.isFolder ? "fo" : "fi"
            let name = entry.path.name.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? "item"
            let url = "https://www.dropbox.com/scl/\(kind)/\(Identifiers.random(21).lowercased())/\(name)?rlkey=\(Identifiers.random(25).lowercased())&dl=0"
            try database.run("INSERT INTO shared_links (url, id, expires, created) VALUES (?,?,?,?)",
                             [.text(url), .text(entry.id), expires.map { .int($0) } ?? .null, .int(now)])
            return SharedLink(url: url, entry: entry, expires: expires, created: now)
        }
    }

    /// Links of the item at `path` and, unless `directOnly`, of the folders above it; every
    /// link of the account when `path` is nil.
    func sharedLinks(of path: DropboxPath?, directOnly: Bool) throws -> [SharedLink] {
        try locked {
            guard let path else { return try linksLocked(ofID: nil) }
            guard let entry = try liveEntryLocked(path) else {
                try requireNoFileAncestor(path, failure: .lookup(.notFolder))
                throw NamespaceFailure.lookup(.notFound)
            }
            var links = try linksLocked(ofID: entry.id)
            if !directOnly {
                for folder in path.ancestors.reversed() {
                    if let above = try liveEntryLocked(folder) { links += try linksLocked(ofID: above.id) }
                }
            }
            return links
        }
    }

    func revokeSharedLink(_ url: String) throws {
        try locked {
            guard try database.first("SELECT 1 FROM shared_links WHERE url = ?", [.text(url)], map: { _ in true }) == true else {
                throw SharedLinkFailure.notFound
            }
            try database.run("DELETE FROM shared_links WHERE url = ?", [.text(url)])
        }
    }

    /// Live links (the item exists, the link has not expired) of one item, or of all.
    private func linksLocked(ofID id: String?) throws -> [SharedLink] {
        var rows: [(url: String, id: String, expires: Int64?, created: Int64)] = []
        let filter = id == nil ? "" : " WHERE id = ?"
        try database.query("SELECT url, id, expires, created FROM shared_links\(filter) ORDER BY created, url",
                           id.map { [.text($0)] } ?? []) { row in
            rows.append((row.text(0), row.text(1), row.isNull(2) ? nil : row.int(2), row.int(3)))
        }
        let now = Timestamp.now()
        return try rows.compactMap { row in
            if let expires = row.expires, expires <= now { return nil }
            guard let entry = try database.first("SELECT \(Entry.columns) FROM entries WHERE id = ? AND is_deleted = 0",
                                                 [.text(row.id)], map: Entry.init(row:)) else { return nil }
            return SharedLink(url: row.url, entry: entry, expires: row.expires, created: row.created)
        }
    }
}
