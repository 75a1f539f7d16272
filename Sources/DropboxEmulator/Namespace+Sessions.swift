import Foundation

/// Upload sessions, as `upload_session/start`, `append_v2` and `finish` define them.
///
/// A sequential session grows its data file append by append; its running content hasher
/// lives in memory (after a restart the hash is recomputed from the file). A concurrent
/// session takes 4 MiB-aligned pieces in any order into a sparse data file; each piece's block
/// digests are stored with it, so the content hash needs no second pass over the bytes.
struct UploadSession {
    static let alignment: Int64 = 4 * 1024 * 1024
    /// Dropbox's limit on a session's total size.
    static let maximumSize: Int64 = 350 * 1024 * 1024 * 1024

    var id: String
    var concurrent: Bool
    var closed: Bool
    var length: Int64

    static func newID() -> String { "pid_upload_session:" + Identifiers.random(40) }
}

/// `UploadSessionLookupError` members.
enum SessionFailure: Error {
    case notFound
    case incorrectOffset(correct: Int64)
    case closed
    case notClosed
    case tooLarge
    case invalidConcurrentOffset
    case invalidConcurrentDataSize
    /// `UploadSessionFinishError` members that are not lookups.
    case concurrentNotClosed
    case concurrentMissingData
    case concurrentDataNotAllowed

    var lookupJSON: JSON? {
        switch self {
        case .notFound: return .tagged("not_found")
        case .incorrectOffset(let correct): return .tagged("incorrect_offset", [("correct_offset", .int(correct))])
        case .closed: return .tagged("closed")
        case .notClosed: return .tagged("not_closed")
        case .tooLarge: return .tagged("too_large")
        case .invalidConcurrentOffset: return .tagged("concurrent_session_invalid_offset")
        case .invalidConcurrentDataSize: return .tagged("concurrent_session_invalid_data_size")
        default: return nil
        }
    }

    /// The failure as a member of `UploadSessionFinishError`.
    var finishJSON: JSON {
        if let lookup = lookupJSON { return .tagged("lookup_failed", [("lookup_failed", lookup)]) }
        switch self {
        case .concurrentNotClosed: return .tagged("concurrent_session_not_closed")
        case .concurrentMissingData: return .tagged("concurrent_session_missing_data")
        default: return .tagged("concurrent_session_data_not_allowed")
        }
    }
}

/// What an append is allowed to write, granted by `beginAppend` and settled by `endAppend`.
struct AppendGrant {
    var session: UploadSession
    var offset: Int64
    var file: String
    /// The session's running hasher (sequential sessions only; nil after a restart).
    var runningHash: ContentHasher?
}

extension Namespace {
    /// A session's data file is made in `blobs/`, under the blob name its commit gives it
    /// (`sessionBlobName`): committing a small file then moves nothing. A rename into `blobs/`
    /// per file was a third of the time a `finish_batch` of 1,000 small files took.
    func sessionFile(_ id: String) -> String { blobFile(Self.sessionBlobName(id)) }
    static func sessionBlobName(_ id: String) -> String { "session-" + id }

    func startSession(concurrent: Bool) throws -> UploadSession {
        let session = UploadSession(id: UploadSession.newID(), concurrent: concurrent, closed: false, length: 0)
        try locked {
            try database.run("INSERT INTO upload_sessions (id, concurrent, closed, length, created) VALUES (?, ?, 0, 0, ?)",
                             [.text(session.id), .int(concurrent ? 1 : 0), .int(Timestamp.now())])
            // The data file is made by the first append: a session finished empty never has
            // one (an empty file's upload makes no file to delete, on the disk the mount's
            // cache shares in tests and benchmarks).
            if !concurrent { sessionHashers[session.id] = ContentHasher() }
        }
        return session
    }

    /// Records a sequential session whose first `length` bytes are in its data file already
    /// (`upload_session/start` with a body), `runningHash` having seen them.
    func recordStartedSession(_ id: String, length: Int64, closed: Bool, runningHash: ContentHasher) throws {
        if length > UploadSession.maximumSize { throw SessionFailure.tooLarge }
        try locked {
            try database.run("INSERT INTO upload_sessions (id, concurrent, closed, length, created) VALUES (?, 0, ?, ?, ?)",
                             [.text(id), .int(closed ? 1 : 0), .int(length), .int(Timestamp.now())])
            sessionHashers[id] = runningHash
        }
    }

    /// Checks an append before its body is read and reserves the session: a second append to
    /// a sequential session while one is streaming is refused with `incorrect_offset`.
    func beginAppend(session id: String, offset: Int64) throws -> AppendGrant {
        try locked {
            guard let session = try sessionLocked(id) else { throw SessionFailure.notFound }
            if session.closed { throw SessionFailure.closed }
            if session.concurrent {
                if offset % UploadSession.alignment != 0 { throw SessionFailure.invalidConcurrentOffset }
                return AppendGrant(session: session, offset: offset, file: sessionFile(id), runningHash: nil)
            }
            if offset != session.length || busySessions.contains(id) {
                throw SessionFailure.incorrectOffset(correct: session.length)
            }
            busySessions.insert(id)
            return AppendGrant(session: session, offset: offset, file: sessionFile(id),
                               runningHash: sessionHashers.removeValue(forKey: id))
        }
    }

    /// Records a completed append. For concurrent sessions `pieceDigests` are the block
    /// digests of this piece. A failed append (`count == nil`) releases the reservation only.
    func endAppend(_ grant: AppendGrant, count: Int64?, close: Bool, pieceDigests: [UInt8]) throws {
        try locked {
            let id = grant.session.id
            busySessions.remove(id)
            guard let count else { return }  // the hasher saw partial bytes: it is dropped
            if grant.session.concurrent {
                if !close && count % UploadSession.alignment != 0 { throw SessionFailure.invalidConcurrentDataSize }
                try database.run("INSERT OR REPLACE INTO session_pieces (session_id, offset, length, block_digests) VALUES (?, ?, ?, ?)",
                                 [.text(id), .int(grant.offset), .int(count), .blob(pieceDigests)])
                try database.run("UPDATE upload_sessions SET closed = ?, length = MAX(length, ?) WHERE id = ?",
                                 [.int(close ? 1 : 0), .int(grant.offset + count), .text(id)])
            } else {
                let newLength = grant.offset + count
                if newLength > UploadSession.maximumSize { throw SessionFailure.tooLarge }
                try database.run("UPDATE upload_sessions SET closed = ?, length = ? WHERE id = ?",
                                 [.int(close ? 1 : 0), .int(newLength), .text(id)])
                if let hasher = grant.runningHash { sessionHashers[id] = hasher }
            }
        }
    }

    /// Releases an append that failed or was refused after its grant.
    func endAppendFailed(_ grant: AppendGrant) {
        try? endAppend(grant, count: nil, close: false, pieceDigests: [])
    }

    /// Checks that a session can be finished at `offset` and hands over its content.
    /// With `requireClosed` (batch finishes) a sequential session must have been closed too.
    func sessionContent(session id: String, offset: Int64, requireClosed: Bool) throws -> StagedContent {
        try locked { try sessionContentLocked(session: id, offset: offset, requireClosed: requireClosed) }
    }

    func sessionContentLocked(session id: String, offset: Int64, requireClosed: Bool) throws -> StagedContent {
        guard let session = try sessionLocked(id) else { throw SessionFailure.notFound }
        if session.concurrent {
            if !session.closed { throw SessionFailure.concurrentNotClosed }
            var digests: [UInt8] = []
            var expected: Int64 = 0
            try database.query("SELECT offset, length, block_digests FROM session_pieces WHERE session_id = ? ORDER BY offset",
                               [.text(id)]) { row in
                if row.int(0) == expected {
                    expected += row.int(1)
                    digests += row.blob(2)
                }
            }
            guard expected == offset, expected == session.length else { throw SessionFailure.concurrentMissingData }
            return StagedContent(file: sessionFile(id), size: offset, contentHash: ContentHasher.hex(fromBlockDigests: digests),
                                 concurrentSession: true)
        }
        if requireClosed && !session.closed { throw SessionFailure.notClosed }
        if offset != session.length || busySessions.contains(id) { throw SessionFailure.incorrectOffset(correct: session.length) }
        let hash: String
        // A finish consumes the running hasher; a finish retried after a failed commit
        // rehashes the file instead.
        if let hasher = sessionHashers.removeValue(forKey: id) {
            hash = hasher.finishHex()
        } else {
            hash = try ContentHasher.hashFile(sessionFile(id), length: session.length)
            // A failed last append (which drops the running hasher) may have left bytes past
            // the session's length.
            truncate(sessionFile(id), off_t(session.length))
        }
        return StagedContent(file: sessionFile(id), size: session.length, contentHash: hash)
    }

    /// Forgets a finished session; its data file is deleted unless `keepingFile` (it has
    /// become a revision's blob).
    func removeSession(_ id: String, keepingFile: Bool = false) {
        locked { removeSessionLocked(id, keepingFile: keepingFile) }
    }

    func removeSessionLocked(_ id: String, concurrent: Bool = true, keepingFile: Bool = false) {
        try? database.run("DELETE FROM upload_sessions WHERE id = ?", [.text(id)])
        if concurrent { try? database.run("DELETE FROM session_pieces WHERE session_id = ?", [.text(id)]) }
        sessionHashers.removeValue(forKey: id)
        if !keepingFile { unlink(sessionFile(id)) }
    }

    /// Commits closed sessions' content, one result each, in one transaction (a failure
    /// undoes its own commit only): `finish_batch`.
    func commitSessions(_ commits: [(session: String, offset: Int64, request: () throws -> CommitRequest)]) throws -> [Result<Entry, any Error>] {
        try locked {
            foldersLiveInBatch = [:]
            defer { foldersLiveInBatch = nil }
            return try inOneTransactionLocked {
                commits.map { commit in
                    Result {
                        // A failed commit's savepoint may have undone folders it made.
                        do { return try commitOneLocked(commit) } catch {
                            foldersLiveInBatch = [:]
                            throw error
                        }
                    }
                }
            }
        }
    }

    private func commitOneLocked(_ commit: (session: String, offset: Int64, request: () throws -> CommitRequest)) throws -> Entry {
        let content = try sessionContentLocked(session: commit.session, offset: commit.offset, requireClosed: true)
        let entry = try commitFileLocked(try commit.request(), content: content)
        // The data file is the new revision's blob, unless no revision was made (the path
        // held these bytes already) or the file is empty.
        removeSessionLocked(commit.session, concurrent: content.concurrentSession,
                            keepingFile: entry.blob == Self.sessionBlobName(commit.session))
        return entry
    }

    /// Forgets every session not finished yet, as Dropbox does once a session is a week old
    /// (`POST /_emulator/expire-sessions`): their ids then answer `not_found`.
    func expireSessions() throws {
        try locked {
            var ids: [String] = []
            try database.query("SELECT id FROM upload_sessions", []) { ids.append($0.text(0)) }
            try database.run("DELETE FROM upload_sessions", [])
            try database.run("DELETE FROM session_pieces", [])
            sessionHashers.removeAll()
            for id in ids { unlink(sessionFile(id)) }
        }
    }

    private func sessionLocked(_ id: String) throws -> UploadSession? {
        try database.first("SELECT concurrent, closed, length FROM upload_sessions WHERE id = ?", [.text(id)]) {
            UploadSession(id: id, concurrent: $0.bool(0), closed: $0.bool(1), length: $0.int(2))
        }
    }
}

extension ContentHasher {
    /// Hashes `length` bytes of a file, 1 MiB at a time.
    static func hashFile(_ file: String, length: Int64) throws -> String {
        if length == 0 { return ContentHasher().finishHex() }  // no data file: nothing appended
        let fd = open(file, O_RDONLY)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(fd) }
        let hasher = ContentHasher()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var remaining = length
        while remaining > 0 {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, Int(min(Int64($0.count), remaining))) }
            guard n > 0 else { throw POSIXError(.EIO) }
            buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
            remaining -= Int64(n)
        }
        return hasher.finishHex()
    }
}
