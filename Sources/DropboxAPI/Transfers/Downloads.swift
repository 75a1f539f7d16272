import Foundation
import Synchronization

extension DropboxClient {
    /// Downloads a whole file into `destination` (written under a temporary name and renamed
    /// into place once complete and verified against the content hash). A connection that
    /// breaks mid-body, or a server error, resumes with a `Range` request for the same
    /// revision from the last byte written: a 1 GiB file survives resets without starting over.
    @discardableResult
    public func downloadFile(_ path: String, to destination: String,
                             progress: (@Sendable (Int64, Int64) -> Void)? = nil) async throws -> FileMetadata {
        typealias Failure = CallError<PathLookupError>
        let temporary = destination + ".dropboxfs-partial"
        let fd = open(temporary, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        // The user named the destination, not its temporary name: a missing folder is said of it.
        guard fd >= 0 else { throw Failure.client(.local("cannot create \(destination): \(String(cString: strerror(errno)))")) }
        var complete = false
        let sink = DownloadSink(fd: fd)
        defer {
            sink.abandon()
            close(fd)
            if !complete { unlink(temporary) }
        }
        var metadata: FileMetadata?
        var source = path
        var failures = 0
        while metadata == nil || sink.written < metadata!.size {
            let start = sink.written
            let total = metadata?.size ?? 0
            do {
                let got = try await download(Routes.downloadResumable, DownloadArgument(path: source),
                                             range: metadata == nil ? nil : start..<total,
                                             restart: { try sink.rewind(to: start) },
                                             progress: { received in progress?(start + received, total) },
                                             consume: { try sink.append($0) })
                if metadata == nil { metadata = got.result }
            } catch let error as Failure {
                guard Self.resumable(error), failures + 1 < retry.maxAttempts else { throw error }
                failures += 1
                try await Task.sleep(for: .milliseconds(Int(retry.backoff(attempt: failures - 1) * 1000)))
                if metadata == nil, sink.written > 0 {
                    // The first attempt broke mid-body: pin the revision it was serving.
                    metadata = try await rpc(Routes.getMetadata, GetMetadataArgument(path: path)).fileMetadata
                    guard metadata != nil else { throw error }
                }
                if let rev = metadata?.rev { source = "rev:" + rev }
                if metadata == nil { try sink.rewind(to: 0) }
            }
        }
        guard let metadata else { throw Failure.client(.undecodable("no metadata")) }
        let actual = try sink.contentHash()
        guard let expected = metadata.contentHash else { throw Failure.client(.undecodable("no content_hash for \(path)")) }
        if expected != actual {
            throw Failure.client(.contentHashMismatch(expected: expected, actual: actual))
        }
        guard rename(temporary, destination) == 0 else {
            throw Failure.client(.local("cannot move download into \(destination): \(String(cString: strerror(errno)))"))
        }
        complete = true
        return metadata
    }

    /// Downloads `range` of a file into memory (for small reads).
    public func downloadRange(_ path: String, range: Range<Int64>) async throws -> [UInt8] {
        try await downloadRangeWithMetadata(path, range: range).bytes
    }

    /// Downloads `range` of a file into memory, with the metadata of the file it came from
    /// (so a caller can check the bytes belong to the version it expects). The answer must
    /// be exactly the range asked for.
    public func downloadRangeWithMetadata(_ path: String, range: Range<Int64>) async throws -> (bytes: [UInt8], metadata: FileMetadata) {
        let buffer = Mutex<[UInt8]>([])
        let got = try await download(Routes.download, DownloadArgument(path: path), range: range,
                                     restart: { buffer.withLock { $0.removeAll() } }) { bytes in
            buffer.withLock { $0 += bytes }
        }
        let bytes = buffer.withLock { $0 }
        guard bytes.count == range.count else {
            throw CallError<PathLookupError>.client(.undecodable("range \(range) of \(path): got \(bytes.count) bytes"))
        }
        return (bytes, got.result)
    }

    /// Failures after which a download can go on from where it stopped.
    static func resumable<E>(_ error: CallError<E>) -> Bool {
        switch error {
        case .client(.transport(let transport)): return transport.isTransient
        case .server, .rateLimited: return true
        default: return false
        }
    }
}

extension Routes {
    /// `files/download` without retries inside the call: `downloadFile` resumes by range.
    static let downloadResumable = Route<DownloadArgument, FileMetadata, PathLookupError>(
        "files/download", host: .content, style: .download, retry: .notProcessed)
}

extension Metadata {
    public var fileMetadata: FileMetadata? { if case .file(let file) = self { return file }; return nil }
}

/// Writes downloaded bytes at the running offset; a `FollowingHasher` hashes them on another
/// thread. Only curl's worker thread appends; `rewind` runs between attempts.
private final class DownloadSink: @unchecked Sendable {
    let fd: Int32
    private let lock = NSLock()
    private var count: Int64 = 0
    private let hasher: FollowingHasher

    init(fd: Int32) {
        self.fd = fd
        hasher = FollowingHasher(fd: fd)
    }

    var written: Int64 { lock.withLock { count } }

    func append(_ bytes: UnsafeRawBufferPointer) throws {
        try lock.withLock {
            try FileIO.writeAll(fd, bytes, at: count)
            count += Int64(bytes.count)
            hasher.advance(to: count)
        }
    }

    /// Forgets bytes past `offset`.
    func rewind(to offset: Int64) throws {
        lock.withLock {
            guard count != offset else { return }
            count = offset
            ftruncate(fd, off_t(offset))
            hasher.rewind(to: offset)
        }
    }

    func contentHash() throws -> String { try hasher.finish() }
    func abandon() { hasher.abandon() }
}
