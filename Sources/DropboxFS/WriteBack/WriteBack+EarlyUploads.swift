import DropboxAPI
import Foundation

/// Upload before close: a large file written sequentially from empty (`cp`, `rsync`, a
/// download) sends its finished chunks into a concurrent upload session while the writer
/// goes on, so at close only the tail is left to send. The session and the chunks sent are
/// the version's, exactly as if its sealed upload had sent them and been interrupted: the
/// upload at seal resumes the session (`SessionResume`) and sends only the rest.
///
/// Safety: a chunk is taken only once the writer has moved past it, and is frozen in the
/// `StagedFile`; a later write or truncation there marks the early upload broken, and the
/// seal then forgets its session, so the server can only ever commit the bytes as sealed.
/// The queue records the session only once the version is sealed: an unsealed file is not
/// the user's yet, and a crash leaves nothing of it to resume.
struct EarlyChunk {
    let version: LocalVersion
    let offset: Int64
    /// The version's session, or nil when this send must start it.
    let session: String?
}

extension WriteBack {
    /// Chunks of files being written that are ready to go before close, at most `limit`,
    /// each now counted as under way. A version's first chunk starts its session: no other
    /// chunk of it is taken until the session exists.
    func takeEarlyChunks(limit: Int, chunkSize: Int64) -> [EarlyChunk] {
        guard limit > 0 else { return [] }
        return state.withLock { state in
            var chunks: [EarlyChunk] = []
            for version in state.versions.values.filter({ $0.phase == .editing }).sorted(by: { $0.id < $1.id }) {
                while chunks.count < limit {
                    if version.sessionID == nil && version.earlySends > 0 { break }  // its session is starting
                    guard let offset = version.file.freezeNextChunk(chunkSize) else { break }
                    version.earlySends += 1
                    chunks.append(EarlyChunk(version: version, offset: offset, session: version.sessionID))
                    if version.sessionID == nil { break }
                }
            }
            return chunks
        }
    }

    func earlySessionStarted(_ version: LocalVersion, _ session: String) {
        state.withLock { _ in
            guard version.phase != .finished, version.file.keepsEarlyChunks else { return }
            setSessionLocked(version, session)
        }
        changed()
    }

    /// A chunk is on the server. It counts only for the session the version still has, and
    /// only while nothing broke the early upload.
    func earlyChunkSent(_ version: LocalVersion, session: String, offset: Int64, digests: [UInt8]) {
        state.withLock { _ in
            version.earlySends -= 1
            guard version.phase != .finished, version.sessionID == session, version.file.keepsEarlyChunks else { return }
            addChunkLocked(version, offset, digests: digests)
        }
        changed()
    }

    /// An early send failed: the upload at seal sends whatever did not go.
    func earlyChunkFailed(_ version: LocalVersion) {
        version.file.stopEarlyChunks()
        state.withLock { _ in version.earlySends -= 1 }
        changed()
    }

    /// At seal: a session whose chunks no longer match the bytes is forgotten.
    func dropBrokenEarlySessionLocked(_ version: LocalVersion) {
        guard !version.file.keepsEarlyChunks, version.sessionID != nil else { return }
        setSessionLocked(version, nil)
    }
}
