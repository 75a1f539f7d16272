/// Dropbox's `error_summary` form ("path/conflict/file/...") of route errors that arrive
/// without one: a failed entry of `upload_session/finish_batch_v2`'s result carries only the
/// union. Messages then read as those of any other call, not as a dump of the Swift value.
public protocol SummarizedRouteError {
    /// The union's tags, outermost first.
    var tags: [String] { get }
}

extension SummarizedRouteError {
    public var summary: String { (tags + ["..."]).joined(separator: "/") }
}

extension WriteError: SummarizedRouteError {
    public var tags: [String] {
        switch self {
        case .malformedPath: return ["malformed_path"]
        case .conflict(let kind): return ["conflict", kind.rawValue]
        case .noWritePermission: return ["no_write_permission"]
        case .insufficientSpace: return ["insufficient_space"]
        case .disallowedName: return ["disallowed_name"]
        case .teamFolder: return ["team_folder"]
        case .tooManyWriteOperations: return ["too_many_write_operations"]
        case .other(let tag): return [tag]
        }
    }
}

extension UploadSessionLookupError: SummarizedRouteError {
    public var tags: [String] {
        switch self {
        case .notFound: return ["not_found"]
        case .incorrectOffset: return ["incorrect_offset"]
        case .closed: return ["closed"]
        case .notClosed: return ["not_closed"]
        case .tooLarge: return ["too_large"]
        case .concurrentSessionInvalidOffset: return ["concurrent_session_invalid_offset"]
        case .concurrentSessionInvalidDataSize: return ["concurrent_session_invalid_data_size"]
        case .payloadTooLarge: return ["payload_too_large"]
        case .contentHashMismatch: return ["content_hash_mismatch"]
        case .other(let tag): return [tag]
        }
    }
}

extension UploadSessionFinishError: SummarizedRouteError {
    public var tags: [String] {
        switch self {
        case .lookupFailed(let lookup): return ["lookup_failed"] + lookup.tags
        case .path(let write): return ["path"] + write.tags
        case .tooManyWriteOperations: return ["too_many_write_operations"]
        case .concurrentSessionNotClosed: return ["concurrent_session_not_closed"]
        case .concurrentSessionMissingData: return ["concurrent_session_missing_data"]
        case .contentHashMismatch: return ["content_hash_mismatch"]
        case .payloadTooLarge: return ["payload_too_large"]
        case .other(let tag): return [tag]
        }
    }
}
