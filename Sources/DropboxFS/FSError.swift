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
    /// A name that is not UTF-8: Dropbox names are Unicode (EILSEQ).
    case nameNotUnicode
    /// A size past what Dropbox (or the cache disk) can hold.
    case fileTooLarge
    case accessDenied
    case readOnly
    case tryAgain
    case interrupted
    case notSupported
    /// What Dropbox cannot hold at all: symlinks, hard links, devices, FIFOs, sockets.
    case notPermitted
    /// A flag or argument this filesystem does not take (RENAME_EXCHANGE).
    case invalidArgument
    /// A handle the kernel should not have (a directory handle already released).
    case badHandle
    /// A buffer too small for the answer (getxattr/listxattr sizes).
    case bufferTooSmall
    case noAttribute
    /// Dropbox is out of reach and the answer needs it (content not cached, a folder never
    /// listed): ENETUNREACH, at once, rather than EIO after retries.
    case networkUnreachable
    /// A file the kernel looked up whose name went before it could be opened, and whose
    /// bytes went with it: ESTALE, on which the kernel walks the path again (`LOOKUP_REVAL`).
    case stale
    /// Something that cannot be expressed better; logged once with its request id.
    case io(String)
}

/// THE place where Dropbox's errors become errnos (gcsfuse / mountpoint-s3 style). Each
/// route's error union carries its own mapping (`RouteErrorMapping`, one exhaustive switch
/// per union, no `default`, so a new member is a compile error), and `CallError` maps through
/// it, so every route the client calls — upload sessions and batches included — reaches the
/// same errnos (a full account during a large upload is ENOSPC, not EIO).
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
        case .nameNotUnicode: return EILSEQ
        case .fileTooLarge: return EFBIG
        case .accessDenied: return EACCES
        case .readOnly: return EROFS
        case .tryAgain: return EAGAIN
        case .interrupted: return EINTR
        case .notSupported: return EOPNOTSUPP
        case .notPermitted: return EPERM
        case .invalidArgument: return EINVAL
        case .badHandle: return EBADF
        case .bufferTooSmall: return ERANGE
        case .noAttribute: return ENODATA
        case .networkUnreachable: return ENETUNREACH
        case .stale: return ESTALE
        case .io: return EIO
        }
    }

    /// Any error from below (client, store, cache) as an `FSError`.
    public static func fsError(_ error: any Error) -> FSError {
        if let fs = error as? FSError { return fs }
        if let mapped = error as? any FSErrorConvertible { return mapped.fsError }
        if error is CancellationError { return .interrupted }
        return .io(String(describing: error))
    }
}

/// An error that knows its `FSError`.
public protocol FSErrorConvertible: Error {
    var fsError: FSError { get }
}

/// A route's error union (the `E` of `CallError<E>`) and what each member means here.
public protocol RouteErrorMapping {
    var fsError: FSError { get }
}

extension CallError: FSErrorConvertible where RouteError: RouteErrorMapping {
    public var fsError: FSError {
        switch self {
        case .route(let failure, let summary, _, let id):
            let mapped = failure.fsError
            if case .io = mapped { return .io("\(summary) (request id \(id ?? "?"))") }
            return mapped
        case .badInput(let message, let id): return .io("bad request: \(message) (request id \(id ?? "?"))")
        case .auth, .access, .pathRoot: return .accessDenied
        case .rateLimited: return .tryAgain
        case .server, .http: return .io(description)
        case .client(.cancelled): return .interrupted
        case .client(.offline): return .networkUnreachable
        case .client(.transport(let error)) where error.kind == .cannotConnect || error.kind == .timedOut: return .networkUnreachable
        case .client: return .io(description)
        }
    }
}

extension NoRouteError: RouteErrorMapping {
    public var fsError: FSError { .io("route error \(tag)") }
}

extension LookupError: RouteErrorMapping {
    public var fsError: FSError {
        switch self {
        case .notFound: return .notFound
        case .notFolder: return .notDirectory
        case .notFile: return .isDirectory
        case .malformedPath: return .invalidName
        case .restrictedContent: return .accessDenied
        case .locked: return .tryAgain
        case .other(let tag): return .io("lookup/\(tag)")
        }
    }
}

extension WriteError: RouteErrorMapping {
    public var fsError: FSError {
        switch self {
        case .conflict(.fileAncestor): return .notDirectory
        case .conflict: return .exists
        case .insufficientSpace: return .noSpace
        case .disallowedName, .malformedPath: return .invalidName
        case .noWritePermission, .teamFolder: return .accessDenied
        case .tooManyWriteOperations: return .tryAgain
        case .other(let tag): return .io("write/\(tag)")
        }
    }
}

extension PathLookupError: RouteErrorMapping {
    public var fsError: FSError {
        switch self {
        case .path(let lookupError): return lookupError.fsError
        case .reset: return .io("cursor reset")
        case .unsupportedFile: return .notSupported
        case .other(let tag): return .io(tag)
        }
    }
}

extension PathWriteError: RouteErrorMapping {
    public var fsError: FSError {
        switch self {
        case .path(let writeError): return writeError.fsError
        case .payloadTooLarge: return .io("payload too large")
        case .contentHashMismatch: return .io("content hash mismatch")
        case .other(let tag): return .io(tag)
        }
    }
}

extension DeleteError: RouteErrorMapping {
    public var fsError: FSError {
        switch self {
        case .pathLookup(let lookupError): return lookupError.fsError
        case .pathWrite(let writeError): return writeError.fsError
        case .tooManyWriteOperations: return .tryAgain
        case .tooManyFiles: return .noSpace
        case .other(let tag): return .io(tag)
        }
    }
}

extension RelocationError: RouteErrorMapping {
    public var fsError: FSError {
        switch self {
        case .fromLookup(let lookupError): return lookupError.fsError
        case .fromWrite(let writeError), .to(let writeError): return writeError.fsError
        case .cantMoveFolderIntoItself: return .invalidName
        case .insufficientQuota: return .noSpace
        case .tooManyFiles: return .noSpace
        case .other(let tag): return .io(tag)
        }
    }
}

extension UploadSessionLookupError: RouteErrorMapping {
    public var fsError: FSError {
        switch self {
        case .notFound: return .io("upload session not found")
        case .incorrectOffset(let offset): return .io("upload session offset (server has \(offset))")
        case .closed, .notClosed: return .io("upload session state")
        case .tooLarge: return .fileTooLarge
        case .concurrentSessionInvalidOffset, .concurrentSessionInvalidDataSize: return .io("concurrent upload session chunk")
        case .payloadTooLarge: return .io("payload too large")
        case .contentHashMismatch: return .io("content hash mismatch")
        case .other(let tag): return .io(tag)
        }
    }
}

extension UploadSessionFinishError: RouteErrorMapping {
    public var fsError: FSError {
        switch self {
        case .lookupFailed(let lookupError): return lookupError.fsError
        case .path(let writeError): return writeError.fsError
        case .tooManyWriteOperations: return .tryAgain
        case .concurrentSessionNotClosed, .concurrentSessionMissingData: return .io("concurrent upload session incomplete")
        case .contentHashMismatch: return .io("content hash mismatch")
        case .payloadTooLarge: return .io("payload too large")
        case .other(let tag): return .io(tag)
        }
    }
}

extension ListRevisionsError: RouteErrorMapping {
    public var fsError: FSError {
        switch self {
        case .path(let lookupError): return lookupError.fsError
        case .other(let tag): return .io(tag)
        }
    }
}

extension RestoreError: RouteErrorMapping {
    public var fsError: FSError {
        switch self {
        case .pathLookup(let lookupError): return lookupError.fsError
        case .pathWrite(let writeError): return writeError.fsError
        case .invalidRevision: return .notFound
        case .inProgress: return .tryAgain
        case .other(let tag): return .io(tag)
        }
    }
}

extension ListSharedLinksError: RouteErrorMapping {
    public var fsError: FSError {
        switch self {
        case .path(let lookupError): return lookupError.fsError
        case .reset: return .io("shared links cursor reset")
        case .other(let tag): return .io(tag)
        }
    }
}
