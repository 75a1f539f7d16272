import Foundation

extension DropboxClient {
    /// Appends `length` bytes of `fd` (from `offset` in the file, which is also the session
    /// offset) to a sequential upload session, in `chunkSize` appends. When an append's
    /// outcome is unknown and the retry is refused with `incorrect_offset`, the server's
    /// `correct_offset` says how much it has: the upload goes on from there instead of
    /// failing — the way an upload session resumes after a dropped connection or a restart.
    /// Returns the session offset reached.
    public func appendSequential(session: String, fd: Int32, from offset: Int64, length: Int64,
                                 chunkSize: Int64 = 32 << 20, close: Bool = false) async throws -> Int64 {
        let end = offset + length
        var position = offset
        repeat {
            let count = min(chunkSize, end - position)
            let closing = close && position + count == end
            do {
                _ = try await upload(Routes.uploadSessionAppend,
                                     UploadSessionAppendArgument(cursor: UploadSessionCursor(sessionId: session, offset: position), close: closing),
                                     body: .file(descriptor: fd, offset: position, length: count))
                position += count
            } catch let error as CallError<UploadSessionLookupError> {
                switch error {
                case .route(.incorrectOffset(let correct), _, _, _) where correct >= offset && correct <= end:
                    position = correct
                case .route(.closed, _, _, _) where closing:
                    position += count  // our own earlier attempt closed it; its answer was lost
                default:
                    throw error
                }
            }
        } while position < end
        return position
    }
}
