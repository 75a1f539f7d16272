import Foundation

/// `Metadata`: a file, a folder, or the trace of a deleted entry (in listings and cursors).
public enum Metadata: Decodable, Sendable, Equatable {
    case file(FileMetadata)
    case folder(FolderMetadata)
    case deleted(DeletedMetadata)

    /// One keyed container for the tag and the fields (a listing page decodes 2,000 of
    /// these; each container costs a table of the object's keys).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: MetadataKeys.self)
        switch try c.decode(String.self, forKey: .tag) {
        case "file": self = .file(try FileMetadata(fields: c))
        case "folder": self = .folder(try FolderMetadata(fields: c))
        default: self = .deleted(try DeletedMetadata(fields: c))
        }
    }

    public var name: String {
        switch self {
        case .file(let m): return m.name
        case .folder(let m): return m.name
        case .deleted(let m): return m.name
        }
    }

    public var pathLower: String? {
        switch self {
        case .file(let m): return m.pathLower
        case .folder(let m): return m.pathLower
        case .deleted(let m): return m.pathLower
        }
    }

    public var id: String? {
        switch self {
        case .file(let m): return m.id
        case .folder(let m): return m.id
        case .deleted: return nil
        }
    }

    public var folderMetadata: FolderMetadata? { if case .folder(let folder) = self { return folder }; return nil }

    public var pathDisplay: String? {
        switch self {
        case .file(let m): return m.pathDisplay
        case .folder(let m): return m.pathDisplay
        case .deleted(let m): return m.pathDisplay
        }
    }
}

/// The keys of the three kinds of metadata and of their union's tag (as the decoder sees
/// them: `APIJSON` turns `path_lower` into `pathLower`).
enum MetadataKeys: String, CodingKey {
    case tag = ".tag"
    case name, id, pathLower, pathDisplay, clientModified, serverModified, rev, size, contentHash, isDownloadable
}

public struct FileMetadata: Decodable, Sendable, Equatable {
    public var name: String
    public var id: String
    public var pathLower: String?
    public var pathDisplay: String?
    public var clientModified: String
    public var serverModified: String
    public var rev: String
    public var size: Int64
    public var contentHash: String?
    public var isDownloadable: Bool?

    /// `server_modified` as a date (Dropbox writes whole seconds, UTC).
    public var serverModifiedDate: Date? { DropboxDate.parse(serverModified) }
    public var clientModifiedDate: Date? { DropboxDate.parse(clientModified) }

    /// Names, paths and the content hash are checked (`ServerChecks`): they become local paths.
    public init(from decoder: any Decoder) throws {
        try self.init(fields: try decoder.container(keyedBy: MetadataKeys.self))
    }

    init(name: String, id: String, pathLower: String?, pathDisplay: String?, clientModified: String, serverModified: String,
         rev: String, size: Int64) {
        self.name = name
        self.id = id
        self.pathLower = pathLower
        self.pathDisplay = pathDisplay
        self.clientModified = clientModified
        self.serverModified = serverModified
        self.rev = rev
        self.size = size
    }

    init(fields c: KeyedDecodingContainer<MetadataKeys>) throws {
        name = try c.checked(.name, ServerChecks.isName, "name")
        id = try c.decode(String.self, forKey: .id)
        pathLower = try c.checkedIfPresent(.pathLower, ServerChecks.isPath, "path_lower")
        pathDisplay = try c.checkedIfPresent(.pathDisplay, ServerChecks.isPath, "path_display")
        clientModified = try c.decode(String.self, forKey: .clientModified)
        serverModified = try c.decode(String.self, forKey: .serverModified)
        rev = try c.decode(String.self, forKey: .rev)
        size = try c.decode(Int64.self, forKey: .size)
        contentHash = try c.checkedIfPresent(.contentHash, ServerChecks.isContentHash, "content_hash")
        isDownloadable = try c.decodeIfPresent(Bool.self, forKey: .isDownloadable)
    }
}

public struct FolderMetadata: Decodable, Sendable, Equatable {
    public var name: String
    public var id: String
    public var pathLower: String?
    public var pathDisplay: String?

    public init(from decoder: any Decoder) throws {
        try self.init(fields: try decoder.container(keyedBy: MetadataKeys.self))
    }

    init(name: String, id: String, pathLower: String?, pathDisplay: String?) {
        self.name = name
        self.id = id
        self.pathLower = pathLower
        self.pathDisplay = pathDisplay
    }

    init(fields c: KeyedDecodingContainer<MetadataKeys>) throws {
        name = try c.checked(.name, ServerChecks.isName, "name")
        id = try c.decode(String.self, forKey: .id)
        pathLower = try c.checkedIfPresent(.pathLower, ServerChecks.isPath, "path_lower")
        pathDisplay = try c.checkedIfPresent(.pathDisplay, ServerChecks.isPath, "path_display")
    }
}

public struct DeletedMetadata: Decodable, Sendable, Equatable {
    public var name: String
    public var pathLower: String?
    public var pathDisplay: String?

    public init(name: String, pathLower: String?, pathDisplay: String?) {
        self.name = name
        self.pathLower = pathLower
        self.pathDisplay = pathDisplay
    }

    public init(from decoder: any Decoder) throws {
        try self.init(fields: try decoder.container(keyedBy: MetadataKeys.self))
    }

    init(fields c: KeyedDecodingContainer<MetadataKeys>) throws {
        name = try c.checked(.name, ServerChecks.isName, "name")
        pathLower = try c.checkedIfPresent(.pathLower, ServerChecks.isPath, "path_lower")
        pathDisplay = try c.checkedIfPresent(.pathDisplay, ServerChecks.isPath, "path_display")
    }
}

/// Dropbox's timestamp format, `2015-05-12T15:50:38Z` (UTC, whole seconds). Parsed and
/// made by hand: every listed file has two, and an `ISO8601DateFormatter` made for each
/// cost more than the rest of applying the change feed's entry.
public enum DropboxDate {
    public static func parse(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count == 20, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: "T"),
              bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"), bytes[19] == UInt8(ascii: "Z") else { return nil }
        func number(_ range: Range<Int>) -> Int32? {
            var value: Int32 = 0
            for index in range {
                let digit = bytes[index] &- UInt8(ascii: "0")
                guard digit < 10 else { return nil }
                value = value * 10 + Int32(digit)
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61 else { return nil }
        var parts = tm()
        parts.tm_year = year - 1900
        parts.tm_mon = month - 1
        parts.tm_mday = day
        parts.tm_hour = hour
        parts.tm_min = minute
        parts.tm_sec = second
        return Date(timeIntervalSince1970: TimeInterval(timegm(&parts)))
    }

    public static func format(_ date: Date) -> String {
        var time = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&time, &parts)
        func padded(_ value: Int32, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(padded(parts.tm_year + 1900, 4))-\(padded(parts.tm_mon + 1, 2))-\(padded(parts.tm_mday, 2))T"
            + "\(padded(parts.tm_hour, 2)):\(padded(parts.tm_min, 2)):\(padded(parts.tm_sec, 2))Z"
    }
}
