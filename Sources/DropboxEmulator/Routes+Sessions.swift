import Foundation
import NIOCore
import Synchronization

/// `files/upload_session/*`: start, append_v2, finish, finish_batch_v2, finish_batch and
/// finish_batch/check.
extension Emulator {
    static let maximumBatchEntries = 1000

    func startSession(_ call: RouteCall) async throws -> JSON {
        let args = try call.args()
        let close = try args.bool("close")
        var concurrent = false
        if let (tag, member) = try args.union("session_type") {
            guard tag == "sequential" || tag == "concurrent" else { throw args.failure("'session_type': unknown tag '\(tag)'") }
            try member.finish()
            concurrent = tag == "concurrent"
        }
        let expectedHash = try args.optionalString("content_hash")
        try args.finish()
        try Self.refuseOversizedBody(call.exchange, error: .tagged("payload_too_large"))
        if concurrent {
            if close { throw APIFailure.route(.tagged("concurrent_session_close_not_allowed")) }
            if try await call.body.next() != nil { throw APIFailure.route(.tagged("concurrent_session_data_not_allowed")) }
            return .object([("session_id", .string(try namespace.startSession(concurrent: true).id))])
        }
        return .object([("session_id", .string(try await startSequentialSession(call, close: close, expectedHash: expectedHash)))])
    }

    /// A sequential session's first bytes go into its data file before the session is
    /// recorded, then one statement records it with its length, not an insert before the
    /// bytes and an update after them (a batch of small files starts a session for each).
    /// A start whose body failed records nothing.
    private func startSequentialSession(_ call: RouteCall, close: Bool, expectedHash: String?) async throws -> String {
        let id = UploadSession.newID()
        let file = namespace.sessionFile(id)
        let running = ContentHasher()
        do {
            let (count, _) = try await receivePiece(call, into: file, at: 0, first: nil, running: running, pieceDigestsNeeded: false,
                                                    expectedHash: expectedHash)
            do {
                try namespace.recordStartedSession(id, length: count, closed: close, runningHash: running)
            } catch let failure as SessionFailure {
                throw APIFailure.route(failure.lookupJSON ?? .tagged("other"))
            }
            return id
        } catch {
            unlink(file)
            throw error
        }
    }

    func appendSession(_ call: RouteCall) async throws -> JSON {
        let args = try call.args()
        let (id, offset) = try Self.cursorArguments(try args.requiredObject("cursor"))
        let close = try args.bool("close")
        let expectedHash = try args.optionalString("content_hash")
        try args.finish()
        try Self.refuseOversizedBody(call.exchange, error: .tagged("payload_too_large"))
        try await appendBody(call, session: id, offset: offset, close: close, expectedHash: expectedHash) { failure in
            failure.lookupJSON ?? .tagged("other")
        }
        return .null
    }

    func finishSession(_ call: RouteCall) async throws -> JSON {
        let args = try call.args()
        let (id, offset) = try Self.cursorArguments(try args.requiredObject("cursor"))
        let commit = try commitArguments(try args.requiredObject("commit"))
        let expectedHash = try args.optionalString("content_hash")
        try args.finish()
        try Self.refuseOversizedBody(call.exchange, error: .tagged("payload_too_large"))

        // Data sent with the finish is a last append at the cursor's offset; `content_hash`
        // covers that data only, as for an append.
        var end = offset
        let first = try await call.body.next()
        if first == nil, let expectedHash, expectedHash != ContentHasher().finishHex() {
            throw APIFailure.route(.tagged("content_hash_mismatch"))
        }
        if let first {
            let grant = try sessionGrant(id, offset: offset) { $0.finishJSON }
            if grant.session.concurrent {
                namespace.endAppendFailed(grant)
                throw APIFailure.route(SessionFailure.concurrentDataNotAllowed.finishJSON)
            }
            end += try await streamAppend(call, grant: grant, firstChunk: first, close: true, expectedHash: expectedHash) {
                $0.finishJSON
            }
        }
        let content: StagedContent
        do {
            content = try namespace.sessionContent(session: id, offset: end, requireClosed: false)
        } catch let failure as SessionFailure {
            throw APIFailure.route(failure.finishJSON)
        }
        let entry = try RouteErrors.write("path") { try namespace.commitFile(try commit(), content: content) }
        namespace.removeSession(id, keepingFile: entry.blob == Namespace.sessionBlobName(id))
        return entry.metadata(tagged: false)
    }

    /// Commits up to 1,000 closed sessions; each entry succeeds or fails on its own.
    func finishBatch(_ call: RouteCall, async: Bool) throws -> JSON {
        let args = try call.args()
        let items = try args.list("entries")
        try args.finish()
        guard items.count <= Self.maximumBatchEntries else { throw args.failure("'entries': at most 1000 entries") }
        let requests = try items.map { item -> (String, Int64, () throws -> CommitRequest) in
            let entry = try Args(item, route: call.route, context: "request body: 'entries'")
            let (id, offset) = try Self.cursorArguments(try entry.requiredObject("cursor"))
            let commit = try commitArguments(try entry.requiredObject("commit"))
            try entry.finish()
            return (id, offset, commit)
        }
        let results = try namespace.commitSessions(requests.map { ($0.0, $0.1, $0.2) }).map { result -> JSON in
            switch result {
            case .success(let entry):
                guard case .object(let fields) = entry.metadata(tagged: false) else { return .null }
                return .object([(".tag", .string("success"))] + fields)
            case .failure(let failure as SessionFailure):
                return .tagged("failure", [("failure", failure.finishJSON)])
            case .failure(let failure as NamespaceFailure):
                return .tagged("failure", [("failure", .tagged("path", [("path", RouteErrors.writeJSON(failure))]))])
            case .failure:
                return .tagged("failure", [("failure", .tagged("other"))])
            }
        }
        guard async else { return .object([("entries", .array(results))]) }
        let job = batchJobs.store(results)
        return .tagged("async_job_id", [("async_job_id", .string(job))])
    }

    /// `finish_batch/check`, `delete_batch/check` and `create_folder_batch/check`: the
    /// results of a job (every job is done by the time it is answered).
    func checkBatchJob(_ call: RouteCall) throws -> JSON {
        let args = try call.args()
        let job = try args.string("async_job_id")
        try args.finish()
        guard let results = batchJobs.results(job) else { throw APIFailure.route(.tagged("invalid_async_job_id")) }
        return .tagged("complete", [("entries", .array(results))])
    }

    // MARK: Appending

    static func cursorArguments(_ cursor: Args) throws -> (String, Int64) {
        let id = try cursor.string("session_id")
        guard let offset = try cursor.uint("offset") else { throw cursor.failure("missing required field 'offset'") }
        try cursor.finish()
        return (id, offset)
    }

    private func sessionGrant(_ id: String, offset: Int64, _ errorJSON: (SessionFailure) -> JSON) throws -> AppendGrant {
        do { return try namespace.beginAppend(session: id, offset: offset) } catch let failure as SessionFailure {
            throw APIFailure.route(errorJSON(failure))
        }
    }

    private func appendBody(_ call: RouteCall, session id: String, offset: Int64, close: Bool, expectedHash: String?,
                            _ errorJSON: @escaping (SessionFailure) -> JSON) async throws {
        let grant = try sessionGrant(id, offset: offset, errorJSON)
        _ = try await streamAppend(call, grant: grant, firstChunk: nil, close: close, expectedHash: expectedHash, errorJSON)
    }

    /// Streams an append's body into the session's data file and records it. On any failure
    /// the session's length stays where it was, so the client can retry from the same offset.
    private func streamAppend(_ call: RouteCall, grant: AppendGrant, firstChunk: ByteBuffer?, close: Bool,
                              expectedHash: String?, _ errorJSON: (SessionFailure) -> JSON) async throws -> Int64 {
        let count: Int64, pieceDigests: [UInt8]
        do {
            (count, pieceDigests) = try await receivePiece(call, into: grant.file, at: grant.offset, first: firstChunk,
                                                           running: grant.runningHash, pieceDigestsNeeded: grant.session.concurrent,
                                                           expectedHash: expectedHash)
        } catch {
            namespace.endAppendFailed(grant)
            throw error
        }
        do {
            try namespace.endAppend(grant, count: count, close: close, pieceDigests: pieceDigests)
        } catch let failure as SessionFailure {
            throw APIFailure.route(errorJSON(failure))
        }
        return count
    }
}

extension Emulator {
    /// Streams a request's body into a session's data file at `offset`, fed to the session's
    /// `running` hasher, and checks its size and `content_hash`; returns its length and, for
    /// a concurrent session or a hash to check, its block digests. The caller undoes its
    /// reservation on a throw.
    fileprivate func receivePiece(_ call: RouteCall, into file: String, at offset: Int64, first: ByteBuffer?, running: ContentHasher?,
                                  pieceDigestsNeeded: Bool, expectedHash: String?) async throws -> (Int64, [UInt8]) {
        // A piece's own hash is needed for concurrent sessions (their block digests) and to
        // check a `content_hash` argument; otherwise the running hash is enough.
        let piece = ContentHasher()
        var hashers: [ContentHasher] = []
        if pieceDigestsNeeded || expectedHash != nil { hashers.append(piece) }
        if let running { hashers.append(running) }
        let count = try await call.body.write(toFile: file, at: offset, hashers: hashers, first: first)
        let pieceDigests = piece.finishBlocks()
        if count > Self.maximumRequestPayload { throw APIFailure.route(.tagged("payload_too_large")) }
        if let expectedHash, expectedHash != ContentHasher.hex(fromBlockDigests: pieceDigests) {
            throw APIFailure.route(.tagged("content_hash_mismatch"))
        }
        return (count, pieceDigests)
    }
}

/// Results of `finish_batch` (v1), `delete_batch` and `create_folder_batch` jobs, kept in
/// memory for their checks.
final class BatchJobs: Sendable {
    private let jobs = Mutex<[String: [JSON]]>([:])

    func store(_ results: [JSON]) -> String {
        let id = "dbjid:" + Identifiers.random(40)
        jobs.withLock { $0[id] = results }
        return id
    }

    func results(_ id: String) -> [JSON]? { jobs.withLock { $0[id] } }
}
