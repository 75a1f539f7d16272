import Foundation

/// `files/get_metadata`, `files/list_folder` and its `continue`, `get_latest_cursor` and
/// `longpoll` companions.
extension Emulator {
    /// Dropbox's page size when `limit` is not given, and its maximum.
    public static let maximumPageSize = 2000

    func getMetadata(_ call: RouteCall) throws -> JSON {
        let args = try call.args()
        let raw = try args.string("path")
        let includeDeleted = try args.bool("include_deleted")
        args.ignore("include_media_info", "include_has_explicit_shared_members", "include_property_groups")
        try args.finish()
        let argument = try PathArgument.parse(raw, field: "path", allowRoot: false, allowRev: true)
        return try RouteErrors.lookup("path") {
            if case .rev(let rev) = argument {
                let (entry, fd) = try namespace.openRevision(rev)
                if let fd { close(fd) }
                return entry.metadata()
            }
            return try namespace.metadataEntry(try namespace.resolve(argument), includeDeleted: includeDeleted).metadata()
        }
    }

    func listFolder(_ call: RouteCall) throws -> JSON {
        let (folder, recursive, includeDeleted, limit) = try listingArguments(call)
        let page = try RouteErrors.lookup("path") {
            try namespace.startListing(folder, recursive: recursive, includeDeleted: includeDeleted, limit: limit)
        }
        return Self.json(page)
    }

    func getLatestCursor(_ call: RouteCall) throws -> JSON {
        let (folder, recursive, includeDeleted, limit) = try listingArguments(call)
        let cursor = try RouteErrors.lookup("path") {
            try namespace.latestCursor(folder, recursive: recursive, includeDeleted: includeDeleted, limit: limit)
        }
        return .object([("cursor", .string(cursor.encoded))])
    }

    func listFolderContinue(_ call: RouteCall) throws -> JSON {
        let args = try call.args()
        let cursor = try decodeCursor(try args.string("cursor"), args)
        try args.finish()
        do {
            return Self.json(try RouteErrors.lookup("path") { try namespace.continueListing(cursor) })
        } catch CursorFailure.reset {
            throw APIFailure.route(.tagged("reset"))
        }
    }

    /// Answers as soon as something changes under the cursor, or after the timeout.
    func longpoll(_ call: RouteCall) async throws -> JSON {
        let args = try call.args()
        let cursor = try decodeCursor(try args.string("cursor"), args)
        let timeout = try args.uint("timeout") ?? 30
        try args.finish()
        guard (30...480).contains(timeout) else {
            throw args.failure("'timeout': value must be between 30 and 480")
        }
        var wait = Double(timeout)
        if let cap = configuration.longpollMaxWait { wait = min(wait, cap) }
        do {
            let changed = try await namespace.changes.wait(timeout: .milliseconds(Int64(wait * 1000))) {
                try namespace.hasChanges(after: cursor)
            }
            return .object([("changes", .bool(changed))])
        } catch CursorFailure.reset {
            throw APIFailure.route(.tagged("reset"))
        }
    }

    private func listingArguments(_ call: RouteCall) throws -> (DropboxPath, Bool, Bool, Int) {
        let args = try call.args()
        let raw = try args.string("path")
        let recursive = try args.bool("recursive")
        let includeDeleted = try args.bool("include_deleted")
        let limit = try args.uint("limit")
        args.ignore("include_media_info", "include_has_explicit_shared_members", "include_mounted_folders",
                    "include_property_groups", "include_non_downloadable_files", "include_restorable_info", "shared_link")
        try args.finish()
        if let limit, !(1...2000).contains(limit) { throw args.failure("'limit': value must be between 1 and 2000") }
        let argument = try PathArgument.parse(raw, field: "path", allowRoot: true)
        let folder = try RouteErrors.lookup("path") { try namespace.resolve(argument) }
        return (folder, recursive, includeDeleted, limit.map { Int($0) } ?? configuration.pageSize)
    }

    private func decodeCursor(_ text: String, _ args: Args) throws -> ListCursor {
        guard let cursor = ListCursor.decode(text) else { throw args.failure("'cursor': invalid cursor") }
        return cursor
    }

    static func json(_ page: ListPage) -> JSON {
        .object([
            ("entries", .array(page.entries.map { $0.metadata() })),
            ("cursor", .string(page.cursor.encoded)),
            ("has_more", .bool(page.hasMore)),
        ])
    }
}
