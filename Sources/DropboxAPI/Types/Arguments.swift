/// Route arguments and results, named as in the API (`ListFolderArg` → `ListFolderArgument`).
/// Keys are written in snake_case by `APIJSON`; nil optionals are left out.

public struct PathArgument: Encodable, Sendable {
    public var path: String
    public init(path: String) { self.path = path }
}

public struct GetMetadataArgument: Encodable, Sendable {
    public var path: String
    public var includeDeleted = false
    public init(path: String, includeDeleted: Bool = false) {
        self.path = path
        self.includeDeleted = includeDeleted
    }
}

public struct ListFolderArgument: Encodable, Sendable {
    public var path: String
    public var recursive = false
    public var includeDeleted = false
    public var limit: Int?
    public init(path: String, recursive: Bool = false, includeDeleted: Bool = false, limit: Int? = nil) {
        self.path = path
        self.recursive = recursive
        self.includeDeleted = includeDeleted
        self.limit = limit
    }
}

public struct CursorArgument: Encodable, Sendable {
    public var cursor: String
    public init(cursor: String) { self.cursor = cursor }
}

public struct LongpollArgument: Encodable, Sendable {
    public var cursor: String
    public var timeout: Int
    public init(cursor: String, timeout: Int = 30) {
        self.cursor = cursor
        self.timeout = timeout
    }
}

public struct ListFolderResult: Decodable, Sendable {
    public var entries: [Metadata]
    public var cursor: String
    public var hasMore: Bool
}

public struct CursorResult: Decodable, Sendable {
    public var cursor: String
}

public struct LongpollResult: Decodable, Sendable {
    public var changes: Bool
    /// Seconds to wait before the next longpoll.
    public var backoff: Int?
}

public struct DownloadArgument: Encodable, Sendable {
    public var path: String
    public init(path: String) { self.path = path }
}

/// `WriteMode`: what to do when a file already exists at the path.
public enum WriteMode: Encodable, Sendable, Equatable {
    case add
    case overwrite
    /// Overwrite only if the file is still at this revision.
    case update(String)

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: UnionKey.self)
        switch self {
        case .add: try container.encode("add", forKey: .tag)
        case .overwrite: try container.encode("overwrite", forKey: .tag)
        case .update(let rev):
            try container.encode("update", forKey: .tag)
            try container.encode(rev, forKey: UnionKey("update"))
        }
    }
}

/// `CommitInfo`: where and how an upload lands.
public struct CommitInfo: Encodable, Sendable {
    public var path: String
    public var mode: WriteMode = .add
    public var autorename = false
    public var clientModified: String?
    public var mute = false
    public var strictConflict = false

    public init(path: String, mode: WriteMode = .add, autorename: Bool = false, clientModified: String? = nil,
                mute: Bool = false, strictConflict: Bool = false) {
        self.path = path
        self.mode = mode
        self.autorename = autorename
        self.clientModified = clientModified
        self.mute = mute
        self.strictConflict = strictConflict
    }
}

public struct UploadArgument: Encodable, Sendable {
    public var path: String
    public var mode: WriteMode
    public var autorename: Bool
    public var clientModified: String?
    public var mute: Bool
    public var strictConflict: Bool
    public var contentHash: String?

    public init(_ commit: CommitInfo, contentHash: String?) {
        path = commit.path
        mode = commit.mode
        autorename = commit.autorename
        clientModified = commit.clientModified
        mute = commit.mute
        strictConflict = commit.strictConflict
        self.contentHash = contentHash
    }
}

public enum UploadSessionType: String, Encodable, Sendable {
    case sequential, concurrent

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: UnionKey.self)
        try container.encode(rawValue, forKey: .tag)
    }
}

public struct UploadSessionStartArgument: Encodable, Sendable {
    public var close = false
    public var sessionType: UploadSessionType?
    public var contentHash: String?
    public init(close: Bool = false, sessionType: UploadSessionType? = nil, contentHash: String? = nil) {
        self.close = close
        self.sessionType = sessionType
        self.contentHash = contentHash
    }
}

public struct UploadSessionStartResult: Decodable, Sendable {
    public var sessionId: String
}

public struct UploadSessionCursor: Encodable, Sendable {
    public var sessionId: String
    public var offset: Int64
    public init(sessionId: String, offset: Int64) {
        self.sessionId = sessionId
        self.offset = offset
    }
}

public struct UploadSessionAppendArgument: Encodable, Sendable {
    public var cursor: UploadSessionCursor
    public var close = false
    public var contentHash: String?
    public init(cursor: UploadSessionCursor, close: Bool = false, contentHash: String? = nil) {
        self.cursor = cursor
        self.close = close
        self.contentHash = contentHash
    }
}

public struct UploadSessionFinishArgument: Encodable, Sendable {
    public var cursor: UploadSessionCursor
    public var commit: CommitInfo
    public var contentHash: String?
    public init(cursor: UploadSessionCursor, commit: CommitInfo, contentHash: String? = nil) {
        self.cursor = cursor
        self.commit = commit
        self.contentHash = contentHash
    }
}

public struct UploadSessionFinishBatchArgument: Encodable, Sendable {
    public var entries: [UploadSessionFinishArgument]
    public init(entries: [UploadSessionFinishArgument]) { self.entries = entries }
}

/// One entry of `finish_batch_v2`'s result: the file, or why it failed.
public enum UploadSessionFinishBatchResultEntry: Decodable, Sendable {
    case success(FileMetadata)
    case failure(UploadSessionFinishError)

    public init(from decoder: any Decoder) throws {
        let union = try UnionReader(from: decoder)
        if union.tag == "success" { self = .success(try FileMetadata(from: decoder)) }
        else { self = .failure(try union.nested(UploadSessionFinishError.self)) }
    }
}

public struct UploadSessionFinishBatchResult: Decodable, Sendable {
    public var entries: [UploadSessionFinishBatchResultEntry]
}

public struct CreateFolderArgument: Encodable, Sendable {
    public var path: String
    public var autorename = false
    public init(path: String, autorename: Bool = false) {
        self.path = path
        self.autorename = autorename
    }
}

public struct FolderResult: Decodable, Sendable {
    public var metadata: FolderMetadata
}

public struct DeleteArgument: Encodable, Sendable {
    public var path: String
    public var parentRev: String?
    public init(path: String, parentRev: String? = nil) {
        self.path = path
        self.parentRev = parentRev
    }
}

public struct RelocationArgument: Encodable, Sendable {
    public var fromPath: String
    public var toPath: String
    public var autorename = false
    public init(from: String, to: String, autorename: Bool = false) {
        fromPath = from
        toPath = to
        self.autorename = autorename
    }
}

public struct MetadataResult: Decodable, Sendable {
    public var metadata: Metadata
}

public struct SpaceUsage: Decodable, Sendable {
    public struct Allocation: Decodable, Sendable {
        public var allocated: Int64?
        public init(from decoder: any Decoder) throws {
            let union = try UnionReader(from: decoder)
            allocated = union.optionalField("allocated", Int64.self)
        }
    }

    public var used: Int64
    public var allocation: Allocation
}

public struct FullAccount: Decodable, Sendable {
    public struct Name: Decodable, Sendable {
        public var displayName: String
    }

    public var accountId: String
    public var name: Name
    public var email: String
    public var country: String?
    /// Absent from old servers' answers: then the account has no team space.
    public var rootInfo: RootInfo?
}

/// `finish_batch` (v1): either done at once or an async job to poll.
public typealias UploadSessionFinishBatchLaunch = BatchJobLaunch<UploadSessionFinishBatchResultEntry>

public struct AsyncJobArgument: Encodable, Sendable {
    public var asyncJobId: String
    public init(asyncJobId: String) { self.asyncJobId = asyncJobId }
}

/// `finish_batch/check`: still running, or the entries.
public typealias UploadSessionFinishBatchJobStatus = BatchJobStatus<UploadSessionFinishBatchResultEntry>
