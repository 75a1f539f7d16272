/// `files/list_revisions`, `files/restore` and `files/search_v2`: arguments, results, errors.

public struct ListRevisionsArgument: Encodable, Sendable {
    /// `path` (the default) lists what was at the path; `id` follows the file by its id.
    public enum Mode: String, Encodable, Sendable {
        case path, id
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: UnionKey.self)
            try container.encode(rawValue, forKey: .tag)
        }
    }

    public var path: String
    public var mode: Mode
    /// 1 to 100.
    public var limit: Int
    public init(path: String, mode: Mode = .path, limit: Int = 100) {
        self.path = path
        self.mode = mode
        self.limit = limit
    }
}

public struct ListRevisionsResult: Decodable, Sendable {
    public var isDeleted: Bool
    public var serverDeleted: String?
    /// Newest first.
    public var entries: [FileMetadata]
    public var hasMore: Bool?
}

/// `ListRevisionsError`.
public enum ListRevisionsError: Decodable, Sendable, Equatable {
    case path(LookupError)
    case other(String)

    public init(from decoder: any Decoder) throws {
        let union = try UnionReader(from: decoder)
        switch union.tag {
        case "path": self = .path(try union.nested(LookupError.self))
        case let tag: self = .other(tag)
        }
    }
}

public struct RestoreArgument: Encodable, Sendable {
    public var path: String
    public var rev: String
    public init(path: String, rev: String) {
        self.path = path
        self.rev = rev
    }
}

/// `RestoreError`.
public enum RestoreError: Decodable, Sendable, Equatable {
    case pathLookup(LookupError)
    case pathWrite(WriteError)
    case invalidRevision
    case inProgress
    case other(String)

    public init(from decoder: any Decoder) throws {
        let union = try UnionReader(from: decoder)
        switch union.tag {
        case "path_lookup": self = .pathLookup(try union.nested(LookupError.self))
        case "path_write": self = .pathWrite(try union.nested(WriteError.self))
        case "invalid_revision": self = .invalidRevision
        case "in_progress": self = .inProgress
        case let tag: self = .other(tag)
        }
    }
}

public struct SearchOptions: Encodable, Sendable {
    public enum FileStatus: String, Encodable, Sendable {
        case active, deleted
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: UnionKey.self)
            try container.encode(rawValue, forKey: .tag)
        }
    }

    /// Folder searched ("" or nil: everything).
    public var path: String?
    /// 1 to 1,000.
    public var maxResults: Int
    public var fileStatus: FileStatus
    public var filenameOnly: Bool
    public init(path: String? = nil, maxResults: Int = 100, fileStatus: FileStatus = .active, filenameOnly: Bool = false) {
        self.path = path
        self.maxResults = maxResults
        self.fileStatus = fileStatus
        self.filenameOnly = filenameOnly
    }
}

public struct SearchArgument: Encodable, Sendable {
    public var query: String
    public var options: SearchOptions?
    public init(query: String, options: SearchOptions? = nil) {
        self.query = query
        self.options = options
    }
}

public struct SearchResult: Decodable, Sendable {
    public struct Match: Decodable, Sendable {
        /// `MetadataV2`: only its `metadata` member carries an entry.
        public var metadata: Metadata?

        enum Keys: String, CodingKey { case metadata }
        public init(from decoder: any Decoder) throws {
            let wrapper = try decoder.container(keyedBy: Keys.self).superDecoder(forKey: .metadata)
            let union = try UnionReader(from: wrapper)
            metadata = union.tag == "metadata" ? try union.nested(Metadata.self) : nil
        }
    }

    public var matches: [Match]
    public var hasMore: Bool
    public var cursor: String?
}

/// `SearchError`.
public enum SearchError: Decodable, Sendable, Equatable {
    case path(LookupError)
    case invalidArgument(String?)
    case other(String)

    public init(from decoder: any Decoder) throws {
        let union = try UnionReader(from: decoder)
        switch union.tag {
        case "path": self = .path(try union.nested(LookupError.self))
        case "invalid_argument": self = .invalidArgument(union.optionalField("invalid_argument", String.self))
        case let tag: self = .other(tag)
        }
    }
}
