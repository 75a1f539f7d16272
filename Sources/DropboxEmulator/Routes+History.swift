import Foundation

/// `files/list_revisions`, `files/restore`, `files/search_v2` and its `continue_v2`.
extension Emulator {
    func listRevisions(_ call: RouteCall) throws -> JSON {
        let args = try call.args()
        let raw = try args.string("path")
        let mode = try args.union("mode")?.0 ?? "path"
        let limit = try args.uint("limit") ?? 10
        args.ignore("include_restorable_info")
        if try args.optionalString("before_rev") != nil {
            throw APIFailure.route(.tagged("before_rev_not_supported"))
        }
        try args.finish()
        guard (1...100).contains(limit) else { throw args.failure("'limit': value must be between 1 and 100") }
        guard mode == "path" || mode == "id" else { throw args.failure("'mode': unknown tag '\(mode)'") }
        let argument = try PathArgument.parse(raw, field: "path", allowRoot: false)
        let history = try RouteErrors.lookup("path") { () -> Namespace.History in
            if case .id(let id, let rest) = argument, rest.isEmpty {
                return try namespace.history(path: nil, id: "id:" + id, limit: Int(limit))
            }
            if mode == "id" { throw NamespaceFailure.lookup(.notFound) }  // id mode takes an id
            return try namespace.history(path: try namespace.resolve(argument), id: nil, limit: Int(limit))
        }
        return .object([
            ("is_deleted", .bool(history.isDeleted)),
            ("entries", .array(history.revisions.map { $0.metadata(tagged: false) })),
            ("has_more", .bool(history.hasMore)),
        ])
    }

    func restore(_ call: RouteCall) throws -> JSON {
        let args = try call.args()
        let raw = try args.string("path")
        let rev = try args.string("rev")
        try args.finish()
        guard rev.count >= 9, rev.allSatisfy(\.isHexDigit) else { throw args.failure("'rev': '\(rev)' is not a valid revision") }
        let argument = try PathArgument.parse(raw, field: "path", allowRoot: false, allowID: false)
        do {
            return try namespace.restore(try namespace.resolve(argument), rev: rev).metadata(tagged: false)
        } catch RestoreFailure.invalidRevision {
            throw APIFailure.route(.tagged("invalid_revision"))
        } catch let failure as NamespaceFailure {
            switch failure {
            case .lookup(let lookup): throw APIFailure.route(.tagged("path_lookup", [("path_lookup", lookup.json)]))
            default: throw APIFailure.route(.tagged("path_write", [("path_write", RouteErrors.writeJSON(failure))]))
            }
        }
    }

    func searchV2(_ call: RouteCall) throws -> JSON {
        let args = try call.args()
        let text = try args.string("query")
        let options = try args.object("options")
        args.ignore("match_field_options", "include_highlights")
        try args.finish()
        guard text.count <= 1000 else { throw args.failure("'query': longer than 1000") }
        var query = SearchQuery(query: text, scope: "", maxResults: 100, deleted: false, extensions: [], offset: 0)
        if let options {
            let rawScope = try options.optionalString("path")
            query.maxResults = Int(try options.uint("max_results") ?? 100)
            query.deleted = try options.union("file_status")?.0 == "deleted"
            query.extensions = try (options.optionalList("file_extensions") ?? []).map { item in
                guard let text = item.stringValue else { throw options.failure("'file_extensions': expected strings") }
                return DropboxPath.fold(text.hasPrefix(".") ? String(text.dropFirst()) : text)
            }
            options.ignore("order_by", "filename_only", "file_categories", "account_id")
            try options.finish()
            guard (1...1000).contains(query.maxResults) else { throw options.failure("'max_results': value must be between 1 and 1000") }
            if let rawScope, !rawScope.isEmpty {
                let argument = try PathArgument.parse(rawScope, field: "options.path", allowRoot: true)
                query.scope = try RouteErrors.lookup("path") { try namespace.resolve(argument) }.display
            }
        }
        guard !query.words.isEmpty else { throw APIFailure.route(.tagged("invalid_argument", [("invalid_argument", .string("empty query"))])) }
        return try searchPage(query)
    }

    func searchContinueV2(_ call: RouteCall) throws -> JSON {
        let args = try call.args()
        let text = try args.string("cursor")
        try args.finish()
        guard let query = SearchQuery.decode(text) else { throw args.failure("'cursor': invalid cursor") }
        return try searchPage(query)
    }

    private func searchPage(_ query: SearchQuery) throws -> JSON {
        let (matches, hasMore) = try RouteErrors.lookup("path") { try namespace.search(query) }
        var fields: [(String, JSON)] = [
            ("matches", .array(matches.map { entry in
                .object([
                    ("metadata", .tagged("metadata", [("metadata", entry.metadata())])),
                    ("match_type", .tagged("filename")),
                ])
            })),
            ("has_more", .bool(hasMore)),
        ]
        if hasMore {
            var next = query
            next.offset += matches.count
            fields.append(("cursor", .string(next.encoded)))
        }
        return .object(fields)
    }
}
