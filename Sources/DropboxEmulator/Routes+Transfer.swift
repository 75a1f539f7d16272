import Foundation
import NIOHTTP1

/// `files/download` and `files/upload`.
extension Emulator {
    /// One `files/upload` or append request carries at most 150 MiB.
    static let maximumRequestPayload: Int64 = 150 * 1024 * 1024

    func download(_ call: RouteCall) throws -> Download {
        let args = try call.args()
        let raw = try args.string("path")
        let rev = try args.optionalString("rev")
        try args.finish()
        let argument = try PathArgument.parse(raw, field: "path", allowRoot: false, allowRev: true)
        let (entry, fd) = try RouteErrors.lookup("path") {
            if case .rev(let rev) = argument { return try namespace.openRevision(rev) }
            let path = try namespace.resolve(argument)
            if let rev { return try namespace.openRevision(rev, expectedPath: path) }
            return try namespace.openForDownload(path)
        }
        return Download(result: entry.metadata(tagged: false), fd: fd, size: entry.size)
    }

    /// Sends a download, honouring a single `Range: bytes=…` (206, or 416 when unsatisfiable).
    func sendDownload(_ download: Download, lie: Lie? = nil, _ exchange: Exchange) async throws {
        defer { if let fd = download.fd { close(fd) } }
        var headers = [
            ("Content-Type", "application/octet-stream"),
            ("Dropbox-API-Result", download.result.serialized(asciiOnly: true)),
            ("Accept-Ranges", "bytes"),
        ]
        var status = HTTPResponseStatus.ok
        var range = Int64(0)..<download.size
        if let header = exchange.head.headers.first(name: "Range"), let requested = ByteRange(header) {
            guard let resolved = requested.resolve(size: download.size) else {
                try await exchange.writer.send(status: .rangeNotSatisfiable, contentType: "text/plain", body: [],
                                               headers: [("Content-Range", "bytes */\(download.size)")])
                return
            }
            let (start, named) = lie?.served(resolved, size: download.size) ?? (resolved.lowerBound, resolved)
            range = start..<(start + Int64(resolved.count))
            status = .partialContent
            headers.append(("Content-Range", "bytes \(named.lowerBound)-\(named.upperBound - 1)/\(download.size)"))
        }
        try await exchange.writer.sendFile(status: status, headers: headers, fd: download.fd,
                                           offset: range.lowerBound, length: Int64(range.count))
    }

    func upload(_ call: RouteCall) async throws -> JSON {
        let args = try call.args()
        let commit = try commitArguments(args)
        let expectedHash = try args.optionalString("content_hash")
        try args.finish()
        let sessionID = UploadSession.newID()
        func failed(_ member: JSON) -> APIFailure { .route(member) }
        try Self.refuseOversizedBody(call.exchange, error: .tagged("payload_too_large"))

        let staged = call.namespace.newStagingFile()
        let hasher = ContentHasher()
        let count = try await call.body.write(toFile: staged, at: 0, hashers: [hasher], truncate: true)
        defer { unlink(staged) }
        if count > Self.maximumRequestPayload { throw failed(.tagged("payload_too_large")) }
        let hash = hasher.finishHex()
        if let expectedHash, expectedHash != hash { throw failed(.tagged("content_hash_mismatch")) }
        do {
            let request = try commit()
            let entry = try namespace.commitFile(request, content: StagedContent(file: staged, size: count, contentHash: hash))
            return entry.metadata(tagged: false)
        } catch let failure as NamespaceFailure {
            throw failed(.tagged("path", [("reason", RouteErrors.writeJSON(failure)), ("upload_session_id", .string(sessionID))]))
        }
    }

    /// Reads `CommitInfo` fields. Path resolution is deferred (returned as a closure) so that
    /// its failures land in the calling route's own error union.
    func commitArguments(_ args: Args) throws -> () throws -> CommitRequest {
        let raw = try args.string("path")
        var mode = WriteMode.add
        if let (tag, member) = try args.union("mode") {
            switch tag {
            case "add": mode = .add
            case "overwrite": mode = .overwrite
            case "update": mode = .update(rev: try member.string("update"))
            default: throw args.failure("'mode': unknown tag '\(tag)'")
            }
            try member.finish()
        }
        let autorename = try args.bool("autorename")
        let strict = try args.bool("strict_conflict")
        var clientModified: Int64?
        if let text = try args.optionalString("client_modified") {
            guard let parsed = Timestamp.parse(text) else { throw args.failure("'client_modified': bad timestamp '\(text)'") }
            clientModified = parsed
        }
        _ = try args.bool("mute")
        args.ignore("property_groups")
        let argument = try PathArgument.parse(raw, field: "path", allowRoot: false)
        return { [namespace] in
            CommitRequest(path: try namespace.resolve(argument), mode: mode, autorename: autorename,
                          strictConflict: strict, clientModified: clientModified)
        }
    }

    /// Refuses a body whose declared length is over the per-request limit before reading it.
    static func refuseOversizedBody(_ exchange: Exchange, error: JSON) throws {
        if let length = exchange.head.headers.first(name: "Content-Length").flatMap(Int64.init), length > maximumRequestPayload {
            throw APIFailure.route(error)
        }
    }
}

/// A single `Range: bytes=…` request header.
struct ByteRange {
    enum Form { case from(Int64, through: Int64?), suffix(Int64) }
    let form: Form

    init?(_ header: String) {
        guard header.hasPrefix("bytes="), !header.contains(",") else { return nil }
        let spec = header.dropFirst(6).trimmingCharacters(in: .whitespaces)
        let parts = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 2 else { return nil }
        if parts[0].isEmpty {
            guard let n = Int64(parts[1]), n > 0 else { return nil }
            form = .suffix(n)
        } else {
            guard let start = Int64(parts[0]) else { return nil }
            if parts[1].isEmpty { form = .from(start, through: nil) }
            else {
                guard let end = Int64(parts[1]), end >= start else { return nil }
                form = .from(start, through: end)
            }
        }
    }

    /// The byte range within a file of `size`, or nil when unsatisfiable.
    func resolve(size: Int64) -> Range<Int64>? {
        switch form {
        case .suffix(let n):
            return size == 0 ? nil : max(0, size - n)..<size
        case .from(let start, let end):
            guard start < size else { return nil }
            return start..<(min(end ?? size - 1, size - 1) + 1)
        }
    }
}
