/// `files/create_folder_v2`, `files/create_folder_batch`, `files/delete_v2`,
/// `files/delete_batch`, `files/move_v2`, `files/move_batch_v2` and `files/copy_v2`.
extension Emulator {
    func createFolder(_ call: RouteCall) throws -> JSON {
        let args = try call.args()
        let raw = try args.string("path")
        let autorename = try args.bool("autorename")
        try args.finish()
        let argument = try PathArgument.parse(raw, field: "path", allowRoot: false, allowID: false)
        let folder = try RouteErrors.write("path") {
            try namespace.createFolder(try namespace.resolve(argument), autorename: autorename)
        }
        return .object([("metadata", folder.metadata(tagged: false))])
    }

    /// `files/create_folder_batch`: up to 10,000 folders, each made or failing on its own.
    /// Answered `complete` at once, or as a job for `create_folder_batch/check` with
    /// `force_async`.
    func createFolderBatch(_ call: RouteCall) throws -> JSON {
        let args = try call.args()
        let rawPaths = try args.list("paths")
        let autorename = try args.bool("autorename")
        let forceAsync = try args.bool("force_async")
        try args.finish()
        guard rawPaths.count <= Self.maximumFolderBatchEntries else { throw args.failure("'paths': at most 10000 paths") }
        let paths = try rawPaths.map { raw -> PathArgument in
            guard let text = raw.stringValue else { throw args.failure("'paths': expected strings") }
            return try PathArgument.parse(text, field: "paths", allowRoot: false, allowID: false)
        }
        let results = Self.eachOnItsOwn(paths, failure: { .tagged("path", [("path", RouteErrors.writeJSON($0))]) }) { path in
            try namespace.createFolder(try namespace.resolve(path), autorename: autorename).metadata(tagged: false)
        }
        if forceAsync { return .tagged("async_job_id", [("async_job_id", .string(batchJobs.store(results)))]) }
        return .tagged("complete", [("entries", .array(results))])
    }

    static let maximumFolderBatchEntries = 10_000

    func delete(_ call: RouteCall) throws -> JSON {
        let args = try call.args()
        let raw = try args.string("path")
        let parentRev = try args.optionalString("parent_rev")
        try args.finish()
        let argument = try PathArgument.parse(raw, field: "path", allowRoot: false)
        do {
            let entry = try namespace.delete(try namespace.resolve(argument), parentRev: parentRev)
            return .object([("metadata", entry.metadata())])
        } catch let failure as NamespaceFailure {
            throw APIFailure.route(Self.deleteErrorJSON(failure))
        }
    }

    /// `DeleteError` of a namespace failure.
    private static func deleteErrorJSON(_ failure: NamespaceFailure) -> JSON {
        switch failure {
        case .lookup(let lookup): return .tagged("path_lookup", [("path_lookup", lookup.json)])
        case .write(let write): return .tagged("path_write", [("path_write", write.json)])
        case .folderIntoItself: return .tagged("other")
        }
    }

    /// `files/delete_batch`: up to 1,000 deletes, each succeeding or failing on its own. Done
    /// at once; answered as a job for `delete_batch/check` (`checkBatchJob`), as Dropbox does.
    func deleteBatch(_ call: RouteCall) throws -> JSON {
        let args = try call.args()
        let items = try args.list("entries")
        try args.finish()
        guard items.count <= Self.maximumBatchEntries else { throw args.failure("'entries': at most 1000 entries") }
        let requests = try items.map { item -> (PathArgument, String?) in
            let entry = try Args(item, route: call.route, context: "request body: 'entries'")
            let path = try PathArgument.parse(try entry.string("path"), field: "path", allowRoot: false)
            let parentRev = try entry.optionalString("parent_rev")
            try entry.finish()
            return (path, parentRev)
        }
        let results = Self.eachOnItsOwn(requests, failure: Self.deleteErrorJSON) { path, parentRev in
            try namespace.delete(try namespace.resolve(path), parentRev: parentRev).metadata()
        }
        return .tagged("async_job_id", [("async_job_id", .string(batchJobs.store(results)))])
    }

    /// A batch route's result entries, one per item, each succeeding or failing on its own:
    /// `success` with the metadata `each` returns, or `failure` with the error `failure`
    /// makes of a namespace failure (`other` for anything else).
    private static func eachOnItsOwn<Item>(_ items: [Item], failure: (NamespaceFailure) -> JSON,
                                           _ each: (Item) throws -> JSON) -> [JSON] {
        items.map { item in
            do {
                return .tagged("success", [("metadata", try each(item))])
            } catch let namespaceFailure as NamespaceFailure {
                return .tagged("failure", [("failure", failure(namespaceFailure))])
            } catch {
                return .tagged("failure", [("failure", .tagged("other"))])
            }
        }
    }

    func relocate(_ call: RouteCall, copy: Bool) throws -> JSON {
        let args = try call.args()
        let rawFrom = try args.string("from_path")
        let rawTo = try args.string("to_path")
        let autorename = try args.bool("autorename")
        _ = try args.bool("allow_shared_folder")
        _ = try args.bool("allow_ownership_transfer")
        try args.finish()
        let fromArgument = try PathArgument.parse(rawFrom, field: "from_path", allowRoot: false)
        let toArgument = try PathArgument.parse(rawTo, field: "to_path", allowRoot: false, allowID: false)
        do {
            let (from, to) = try relocationPaths(fromArgument, toArgument)
            let entry = copy ? try namespace.copy(from: from, to: to, autorename: autorename)
                             : try namespace.move(from: from, to: to, autorename: autorename)
            return .object([("metadata", entry.metadata())])
        } catch let failure as RelocationFailure {
            throw APIFailure.route(failure.json)
        }
    }

    /// A move's or copy's paths, a failure to find either answered on its side.
    private func relocationPaths(_ fromArgument: PathArgument, _ toArgument: PathArgument) throws -> (DropboxPath, DropboxPath) {
        let from: DropboxPath
        do { from = try namespace.resolve(fromArgument) } catch let failure as NamespaceFailure {
            throw RelocationFailure.fromLookup(failure.asLookup)
        }
        do { return (from, try namespace.resolve(toArgument)) } catch let failure as NamespaceFailure {
            throw RelocationFailure.to(failure.asWrite)
        }
    }

    /// `files/move_batch_v2`: up to 1,000 moves, each made or failing on its own, in order.
    /// Done at once; answered as a job for `move_batch/check_v2` (`checkBatchJob`), as
    /// Dropbox does for all but the smallest batches.
    func moveBatch(_ call: RouteCall) throws -> JSON {
        let args = try call.args()
        let items = try args.list("entries")
        let autorename = try args.bool("autorename")
        _ = try args.bool("allow_ownership_transfer")
        try args.finish()
        guard !items.isEmpty, items.count <= Self.maximumBatchEntries else { throw args.failure("'entries': 1 to 1000 entries") }
        let requests = try items.map { item -> (PathArgument, PathArgument) in
            let entry = try Args(item, route: call.route, context: "request body: 'entries'")
            let from = try PathArgument.parse(try entry.string("from_path"), field: "from_path", allowRoot: false)
            let to = try PathArgument.parse(try entry.string("to_path"), field: "to_path", allowRoot: false, allowID: false)
            try entry.finish()
            return (from, to)
        }
        let results: [JSON] = requests.map { fromArgument, toArgument in
            do {
                let (from, to) = try relocationPaths(fromArgument, toArgument)
                let entry = try namespace.move(from: from, to: to, autorename: autorename)
                return .tagged("success", [("success", entry.metadata())])
            } catch let failure as RelocationFailure {
                return .tagged("failure", [("failure", .tagged("relocation_error", [("relocation_error", failure.json)]))])
            } catch {
                return .tagged("failure", [("failure", .tagged("internal_error"))])
            }
        }
        return .tagged("async_job_id", [("async_job_id", .string(batchJobs.store(results)))])
    }
}

extension RelocationFailure {
    /// The `RelocationError` Dropbox answers.
    var json: JSON {
        switch self {
        case .fromLookup(let lookup): return .tagged("from_lookup", [("from_lookup", lookup.json)])
        case .fromWrite(let write): return .tagged("from_write", [("from_write", write.json)])
        case .to(let write): return .tagged("to", [("to", write.json)])
        case .intoItself: return .tagged("cant_move_folder_into_itself")
        case .insufficientQuota: return .tagged("insufficient_quota")
        }
    }
}

extension NamespaceFailure {
    var asLookup: LookupFailure {
        switch self {
        case .lookup(let lookup): return lookup
        case .write(.malformedPath): return .malformedPath
        default: return .notFound
        }
    }

    var asWrite: WriteFailure {
        switch self {
        case .write(let write): return write
        case .lookup(.notFolder): return .conflict("file_ancestor")
        default: return .malformedPath
        }
    }
}
