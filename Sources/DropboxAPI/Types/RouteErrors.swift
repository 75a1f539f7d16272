/// The route error unions the client decodes. Unknown members become `other(tag)`.

/// `LookupError`.
public enum LookupError: Decodable, Sendable, Equatable {
    case malformedPath
    case notFound
    case notFile
    case notFolder
    case restrictedContent
    case locked
    case other(String)

    public init(from decoder: any Decoder) throws {
        switch try UnionReader(from: decoder).tag {
        case "malformed_path": self = .malformedPath
        case "not_found": self = .notFound
        case "not_file": self = .notFile
        case "not_folder": self = .notFolder
        case "restricted_content": self = .restrictedContent
        case "locked": self = .locked
        case let tag: self = .other(tag)
        }
    }
}

/// `WriteError`.
public enum WriteError: Decodable, Sendable, Equatable {
    public enum Conflict: String, Sendable, Equatable { case file, folder, fileAncestor = "file_ancestor", other }

    case malformedPath
    case conflict(Conflict)
    case noWritePermission
    case insufficientSpace
    case disallowedName
    case teamFolder
    case tooManyWriteOperations
    case other(String)

    public init(from decoder: any Decoder) throws {
        let union = try UnionReader(from: decoder)
        switch union.tag {
        case "malformed_path": self = .malformedPath
        case "conflict":
            let kind = (try? union.nested(TagOnly.self).tag) ?? "other"
            self = .conflict(Conflict(rawValue: kind) ?? .other)
        case "no_write_permission": self = .noWritePermission
        case "insufficient_space", "team_folder_insufficient_space", "member_folder_insufficient_space": self = .insufficientSpace
        case "disallowed_name": self = .disallowedName
        case "team_folder": self = .teamFolder
        case "too_many_write_operations": self = .tooManyWriteOperations
        case let tag: self = .other(tag)
        }
    }
}

/// A union read only for its tag.
struct TagOnly: Decodable {
    let tag: String
    init(from decoder: any Decoder) throws { tag = try UnionReader(from: decoder).tag }
}

/// Errors of routes whose only documented member is `path` wrapping a `LookupError`
/// (`get_metadata`, `list_folder`, `download`, …) or `reset` for cursors.
public enum PathLookupError: Decodable, Sendable, Equatable {
    case path(LookupError)
    /// The cursor is no longer valid: list again.
    case reset
    case unsupportedFile
    case other(String)

    public init(from decoder: any Decoder) throws {
        let union = try UnionReader(from: decoder)
        switch union.tag {
        case "path": self = .path(try union.nested(LookupError.self))
        case "reset": self = .reset
        case "unsupported_file": self = .unsupportedFile
        case let tag: self = .other(tag)
        }
    }
}

/// Errors of routes that write at one path (`create_folder_v2`, and `files/upload`, whose
/// `path` member carries the `WriteError` under `reason`).
public enum PathWriteError: Decodable, Sendable, Equatable {
    case path(WriteError)
    case payloadTooLarge
    case contentHashMismatch
    case other(String)

    public init(from decoder: any Decoder) throws {
        let union = try UnionReader(from: decoder)
        switch union.tag {
        case "path":
            if let reason = union.optionalField("reason", WriteError.self) { self = .path(reason) }
            else { self = .path(try union.nested(WriteError.self)) }
        case "payload_too_large": self = .payloadTooLarge
        case "content_hash_mismatch": self = .contentHashMismatch
        case let tag: self = .other(tag)
        }
    }
}

/// `DeleteError`.
public enum DeleteError: Decodable, Sendable, Equatable {
    case pathLookup(LookupError)
    case pathWrite(WriteError)
    case tooManyWriteOperations
    case tooManyFiles
    case other(String)

    public init(from decoder: any Decoder) throws {
        let union = try UnionReader(from: decoder)
        switch union.tag {
        case "path_lookup": self = .pathLookup(try union.nested(LookupError.self))
        case "path_write": self = .pathWrite(try union.nested(WriteError.self))
        case "too_many_write_operations": self = .tooManyWriteOperations
        case "too_many_files": self = .tooManyFiles
        case let tag: self = .other(tag)
        }
    }
}

/// `RelocationError` (move and copy).
public enum RelocationError: Decodable, Sendable, Equatable {
    case fromLookup(LookupError)
    case fromWrite(WriteError)
    case to(WriteError)
    case cantMoveFolderIntoItself
    case insufficientQuota
    case tooManyFiles
    case other(String)

    public init(from decoder: any Decoder) throws {
        let union = try UnionReader(from: decoder)
        switch union.tag {
        case "from_lookup": self = .fromLookup(try union.nested(LookupError.self))
        case "from_write": self = .fromWrite(try union.nested(WriteError.self))
        case "to": self = .to(try union.nested(WriteError.self))
        case "cant_move_folder_into_itself": self = .cantMoveFolderIntoItself
        case "insufficient_quota": self = .insufficientQuota
        case "too_many_files": self = .tooManyFiles
        case let tag: self = .other(tag)
        }
    }
}

/// `UploadSessionLookupError`, also the shape of `append_v2` and `start` errors.
public enum UploadSessionLookupError: Decodable, Sendable, Equatable {
    case notFound
    case incorrectOffset(correctOffset: Int64)
    case closed
    case notClosed
    case tooLarge
    case concurrentSessionInvalidOffset
    case concurrentSessionInvalidDataSize
    case payloadTooLarge
    case contentHashMismatch
    case other(String)

    public init(from decoder: any Decoder) throws {
        let union = try UnionReader(from: decoder)
        switch union.tag {
        case "not_found": self = .notFound
        case "incorrect_offset": self = .incorrectOffset(correctOffset: try union.field("correct_offset", Int64.self))
        case "closed": self = .closed
        case "not_closed": self = .notClosed
        case "too_large": self = .tooLarge
        case "concurrent_session_invalid_offset": self = .concurrentSessionInvalidOffset
        case "concurrent_session_invalid_data_size": self = .concurrentSessionInvalidDataSize
        case "payload_too_large": self = .payloadTooLarge
        case "content_hash_mismatch": self = .contentHashMismatch
        case let tag: self = .other(tag)
        }
    }
}

/// `UploadSessionFinishError`.
public enum UploadSessionFinishError: Decodable, Sendable, Equatable {
    case lookupFailed(UploadSessionLookupError)
    case path(WriteError)
    case tooManyWriteOperations
    case concurrentSessionNotClosed
    case concurrentSessionMissingData
    case contentHashMismatch
    case payloadTooLarge
    case other(String)

    public init(from decoder: any Decoder) throws {
        let union = try UnionReader(from: decoder)
        switch union.tag {
        case "lookup_failed": self = .lookupFailed(try union.nested(UploadSessionLookupError.self))
        case "path": self = .path(try union.nested(WriteError.self))
        case "too_many_write_operations": self = .tooManyWriteOperations
        case "concurrent_session_not_closed": self = .concurrentSessionNotClosed
        case "concurrent_session_missing_data": self = .concurrentSessionMissingData
        case "content_hash_mismatch": self = .contentHashMismatch
        case "payload_too_large": self = .payloadTooLarge
        case let tag: self = .other(tag)
        }
    }
}

/// `AuthError` (HTTP 401).
public enum AuthError: Decodable, Sendable, Equatable {
    case invalidAccessToken
    case expiredAccessToken
    case missingScope
    case userSuspended
    case other(String)

    public init(from decoder: any Decoder) throws {
        switch try UnionReader(from: decoder).tag {
        case "invalid_access_token": self = .invalidAccessToken
        case "expired_access_token": self = .expiredAccessToken
        case "missing_scope": self = .missingScope
        case "user_suspended": self = .userSuspended
        case let tag: self = .other(tag)
        }
    }
}

/// `RateLimitReason` (HTTP 429).
public enum RateLimitReason: Decodable, Sendable, Equatable {
    case tooManyRequests
    case tooManyWriteOperations
    case other(String)

    public init(from decoder: any Decoder) throws {
        switch try UnionReader(from: decoder).tag {
        case "too_many_requests": self = .tooManyRequests
        case "too_many_write_operations": self = .tooManyWriteOperations
        case let tag: self = .other(tag)
        }
    }
}

/// Route errors that mean "try again later" rather than "this cannot be done".
public protocol TransientRouteError {
    var isTransient: Bool { get }
}

extension WriteError: TransientRouteError { public var isTransient: Bool { self == .tooManyWriteOperations } }
extension PathWriteError: TransientRouteError { public var isTransient: Bool { self == .path(.tooManyWriteOperations) } }
extension DeleteError: TransientRouteError {
    public var isTransient: Bool { self == .tooManyWriteOperations || self == .pathWrite(.tooManyWriteOperations) }
}
extension RelocationError: TransientRouteError {
    public var isTransient: Bool { self == .to(.tooManyWriteOperations) || self == .fromWrite(.tooManyWriteOperations) }
}
extension UploadSessionFinishError: TransientRouteError {
    public var isTransient: Bool { self == .tooManyWriteOperations || self == .path(.tooManyWriteOperations) }
}
