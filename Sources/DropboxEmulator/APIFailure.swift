/// Every way a request can fail, in the shapes Dropbox answers with. Route handlers throw
/// these; `Responder` turns them into HTTP responses.
enum APIFailure: Error {
    /// 400, plain text: the request itself is malformed (bad JSON, unknown field, bad header).
    case badInput(String)
    /// 401 with an `AuthError` tag such as `invalid_access_token` or `expired_access_token`.
    case auth(String)
    /// 409: the route's own error union, e.g. `{".tag": "path", "path": {".tag": "not_found"}}`.
    case route(JSON, userMessage: String? = nil)
    /// 403: the app may not do this (`AccessError`; only injected, the emulator has no
    /// team or scope restrictions of its own).
    case accessDenied
    /// 429 with `Retry-After`; reason `too_many_requests` or `too_many_write_operations`.
    case rateLimited(reason: String, retryAfter: Int)
    /// 500 or 503.
    case server(status: Int)
    /// 404 for a path that is not a route.
    case unknownRoute(String)
    /// 422: the `Dropbox-API-Path-Root` header names a root the account cannot use
    /// (`PathRootError`: `invalid_root` with the account's root info, or `no_permission`).
    case pathRoot(JSON)

    /// `error_summary` as Dropbox writes it: the chain of tags, then `/...`.
    static func summary(of value: JSON) -> String {
        var tags: [String] = []
        var current: JSON? = value
        while let node = current, let tag = node[".tag"]?.stringValue {
            tags.append(tag)
            // A member whose type is a union nests it under its own name; a struct member
            // (like UploadWriteFailed) inlines its fields, of which `reason` is the union.
            current = node[tag] ?? node["reason"]
        }
        return tags.joined(separator: "/") + "/..."
    }
}

/// `LookupError` members.
enum LookupFailure: String, Error {
    case malformedPath = "malformed_path"
    case notFound = "not_found"
    case notFile = "not_file"
    case notFolder = "not_folder"

    var json: JSON {
        self == .malformedPath ? .tagged(rawValue, [(rawValue, .null)]) : .tagged(rawValue)
    }
}

/// `WriteError` members.
enum WriteFailure: Error, Equatable {
    case malformedPath
    /// `WriteConflictError`: `file`, `folder` or `file_ancestor`.
    case conflict(String)
    case disallowedName
    case insufficientSpace
    case noWritePermission
    case tooManyWriteOperations

    var json: JSON {
        switch self {
        case .malformedPath: return .tagged("malformed_path", [("malformed_path", .null)])
        case .conflict(let kind): return .tagged("conflict", [("conflict", .tagged(kind))])
        case .disallowedName: return .tagged("disallowed_name")
        case .insufficientSpace: return .tagged("insufficient_space")
        case .noWritePermission: return .tagged("no_write_permission")
        case .tooManyWriteOperations: return .tagged("too_many_write_operations")
        }
    }
}

/// A failure of the namespace, before a route wraps it in its own union.
enum NamespaceFailure: Error {
    case lookup(LookupFailure)
    case write(WriteFailure)
    /// Moving or copying a folder into itself.
    case folderIntoItself
}
