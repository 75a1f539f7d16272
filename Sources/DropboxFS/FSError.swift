import DropboxAPI
import Foundation

/// What a filesystem operation can fail with, before it becomes an errno.
public enum FSError: Error, Equatable {
    case notFound
    case exists
    case notDirectory
    case isDirectory
    case notEmpty
    case noSpace
    case invalidName
    /// A name over 255 bytes (NAME_MAX).
    case nameTooLong
    /// A size past what Dropbox (or the cache disk) can hold.
    case fileTooLarge
    case accessDenied
    case readOnly
    case tryAgain
    case interrupted
    case notSupported
    case noAttribute
    /// Something that cannot be expressed better; logged once with its request id.
    case io(String)
}

/// THE place where Dropbox's errors become errnos (gcsfuse / mountpoint-s3 style): one
/// exhaustive switch per error union, no `default`, so a new member is a compile error.
public enum ErrnoMapping {
    public static func errno(_ error: FSError) -> Int32 {
        switch error {
        case .notFound: return ENOENT
        case .exists: return EEXIST
        case .notDirectory: return ENOTDIR
        case .isDirectory: return EISDIR
        case .notEmpty: return ENOTEMPTY
        case .noSpace: return ENOSPC
        case .invalidName: return EINVAL
        case .nameTooLong: return ENAMETOOLONG
        case .fileTooLarge: return EFBIG
        case .accessDenied: return EACCES
        case .readOnly: return EROFS
        case .tryAgain: return EAGAIN
        case .interrupted: return EINTR
        case .notSupported: return EOPNOTSUPP
        case .noAttribute: return ENODATA
        case .io: return EIO
        }
    }

    /// Any error from below (client, store, cache) as an `FSError`.
    public static func fsError(_ error: any Error) -> FSError {
        if let fs = error as? FSError { return fs }
        if let call = error as? CallError<PathLookupError> { return map(call) { pathLookup($0) } }
        if let call = error as? CallError<NoRouteError> { return map(call) { .io("route error \($0.tag)") } }
        if let call = error as? CallError<PathWriteError> { return map(call) { pathWrite($0) } }
        if let call = error as? CallError<DeleteError> { return map(call) { delete($0) } }
        if let call = error as? CallError<RelocationError> { return map(call) { relocation($0) } }
        if error is CancellationError { return .interrupted }
        return .io(String(describing: error))
    }

    static func map<E>(_ error: CallError<E>, route: (E) -> FSError) -> FSError {
        switch error {
        case .route(let failure, let summary, _, let id):
            let mapped = route(failure)
            if case .io = mapped { return .io("\(summary) (request id \(id ?? "?"))") }
            return mapped
        case .badInput(let message, let id): return .io("bad request: \(message) (request id \(id ?? "?"))")
        case .auth, .access: return .accessDenied
        case .rateLimited: return .tryAgain
        case .server, .http: return .io(error.description)
        case .client(.cancelled): return .interrupted
        case .client: return .io(error.description)
        }
    }

    static func lookup(_ error: LookupError) -> FSError {
        switch error {
        case .notFound: return .notFound
        case .notFolder: return .notDirectory
        case .notFile: return .isDirectory
        case .malformedPath: return .invalidName
        case .restrictedContent: return .accessDenied
        case .locked: return .tryAgain
        case .other(let tag): return .io("lookup/\(tag)")
        }
    }

    static func write(_ error: WriteError) -> FSError {
        switch error {
        case .conflict(.fileAncestor): return .notDirectory
        case .conflict: return .exists
        case .insufficientSpace: return .noSpace
        case .disallowedName, .malformedPath: return .invalidName
        case .noWritePermission, .teamFolder: return .accessDenied
        case .tooManyWriteOperations: return .tryAgain
        case .other(let tag): return .io("write/\(tag)")
        }
    }

    static func pathLookup(_ error: PathLookupError) -> FSError {
        switch error {
        case .path(let lookupError): return lookup(lookupError)
        case .reset: return .io("cursor reset")
        case .unsupportedFile: return .notSupported
        case .other(let tag): return .io(tag)
        }
    }

    static func pathWrite(_ error: PathWriteError) -> FSError {
        switch error {
        case .path(let writeError): return write(writeError)
        case .payloadTooLarge: return .io("payload too large")
        case .contentHashMismatch: return .io("content hash mismatch")
        case .other(let tag): return .io(tag)
        }
    }

    static func delete(_ error: DeleteError) -> FSError {
        switch error {
        case .pathLookup(let lookupError): return lookup(lookupError)
        case .pathWrite(let writeError): return write(writeError)
        case .tooManyWriteOperations: return .tryAgain
        case .tooManyFiles: return .noSpace
        case .other(let tag): return .io(tag)
        }
    }

    static func relocation(_ error: RelocationError) -> FSError {
        switch error {
        case .fromLookup(let lookupError): return lookup(lookupError)
        case .fromWrite(let writeError), .to(let writeError): return write(writeError)
        case .cantMoveFolderIntoItself: return .invalidName
        case .insufficientQuota: return .noSpace
        case .tooManyFiles: return .noSpace
        case .other(let tag): return .io(tag)
        }
    }
}
