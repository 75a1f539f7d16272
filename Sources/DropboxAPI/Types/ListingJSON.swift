/// `list_folder` and `list_folder/continue` pages decoded by hand. Foundation's `JSONDecoder`
/// took 45 % of the daemon's CPU in a first listing of a folder of 100,000 files (each of the
/// 2,000 objects of a page costs it a table of its keys, each key a call to the snake-case
/// conversion): the mount listed at 0.38 of the rate of curl fetching the same pages.
/// This reads a page in one pass and keeps every check of the `Decodable` path
/// (`ServerChecks`, required fields, types); `ListingJSONTests` holds the two to the same
/// answers.
extension ListFolderResult {
    init(json bytes: [UInt8]) throws {
        var entries: [Metadata]?, cursor: String?, hasMore: Bool?
        try JSONScanner.scan(bytes) { scanner in
            try scanner.object { key, scanner in
                switch key {
                case "entries":
                    var list: [Metadata] = []
                    try scanner.array { scanner in list.append(try Metadata(scanning: &scanner)) }
                    entries = list
                case "cursor": cursor = try scanner.string()
                case "has_more": hasMore = try scanner.bool()
                default: try scanner.skipValue()
                }
            }
        }
        guard let entries, let cursor, let hasMore else { throw JSONScanner.failure("a list_folder result lacks entries, cursor or has_more") }
        self.init(entries: entries, cursor: cursor, hasMore: hasMore)
    }
}

extension Metadata {
    /// One entry of a page. As in the `Decodable` path, only the fields its tag uses are
    /// checked (a deleted entry's `size` may be anything); the others are skipped.
    /// `fileTag`: the tag that marks a file (a batch commit's entries say `success`).
    init(scanning scanner: inout JSONScanner, fileTag: String = "file") throws {
        // Locals, not a dictionary of fields: a dictionary per entry cost a quarter of a page's decoding.
        typealias Scalar = JSONScanner.Scalar
        var tag: Scalar?, nameField: Scalar?, id: Scalar?, lower: Scalar?, display: Scalar?, clientModified: Scalar?
        var serverModified: Scalar?, rev: Scalar?, size: Scalar?, contentHash: Scalar?, isDownloadable: Scalar?
        try scanner.object { key, scanner in
            switch key {
            case ".tag": tag = try scanner.scalar()
            case "name": nameField = try scanner.scalar()
            case "id": id = try scanner.scalar()
            case "path_lower": lower = try scanner.scalar()
            case "path_display": display = try scanner.scalar()
            case "client_modified": clientModified = try scanner.scalar()
            case "server_modified": serverModified = try scanner.scalar()
            case "rev": rev = try scanner.scalar()
            case "size": size = try scanner.scalar()
            case "content_hash": contentHash = try scanner.scalar()
            case "is_downloadable": isDownloadable = try scanner.scalar()
            default: try scanner.skipValue()
            }
        }
        func string(_ field: Scalar?, _ key: String) throws -> String {
            guard case .string(let text)? = field else { throw JSONScanner.failure("metadata: \(key) is not a string") }
            return text
        }
        func optional(_ field: Scalar?, _ key: String) throws -> String? {
            if field == nil || field == .null { return nil }
            return try string(field, key)
        }
        func checked(_ text: String?, _ valid: (String) -> Bool, _ key: String) throws -> String? {
            guard let text else { return nil }
            guard valid(text) else { throw JSONScanner.failure("\(key) \(text.debugDescription) refused") }
            return text
        }
        let kind = try string(tag, ".tag")
        let name = try checked(try string(nameField, "name"), ServerChecks.isName, "name")!
        let pathLower = try checked(try optional(lower, "path_lower"), ServerChecks.isPath, "path_lower")
        let pathDisplay = try checked(try optional(display, "path_display"), ServerChecks.isPath, "path_display")
        switch kind {
        case fileTag:
            guard case .integer(let bytes)? = size else { throw JSONScanner.failure("metadata: size is not a whole number") }
            var file = FileMetadata(name: name, id: try string(id, "id"), pathLower: pathLower, pathDisplay: pathDisplay,
                                    clientModified: try string(clientModified, "client_modified"),
                                    serverModified: try string(serverModified, "server_modified"), rev: try string(rev, "rev"), size: bytes)
            file.contentHash = try checked(try optional(contentHash, "content_hash"), ServerChecks.isContentHash, "content_hash")
            switch isDownloadable {
            case nil, .null?: break
            case .bool(let value)?: file.isDownloadable = value
            default: throw JSONScanner.failure("metadata: is_downloadable is not a boolean")
            }
            self = .file(file)
        case "folder":
            self = .folder(FolderMetadata(name: name, id: try string(id, "id"), pathLower: pathLower, pathDisplay: pathDisplay))
        default:
            self = .deleted(DeletedMetadata(name: name, pathLower: pathLower, pathDisplay: pathDisplay))
        }
    }
}
