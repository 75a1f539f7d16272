import Foundation
import NIOCore
import NIOHTTP1

/// The body of one request, read part by part from the connection. It can be collected (small
/// JSON arguments), streamed into a file (uploads) or drained (anything left unread, so the
/// next request on the connection starts in the right place).
final class RequestBody {
    typealias Iterator = NIOAsyncChannelInboundStream<HTTPServerRequestPart>.AsyncIterator

    struct Truncated: Error {}

    private var iterator: Iterator
    private(set) var isFinished = false
    private(set) var bytesRead: Int64 = 0
    /// Set by a `bandwidth` fault.
    var throttle: Throttle?

    init(_ iterator: Iterator) { self.iterator = iterator }

    /// The next chunk, or nil at the end of the body. Throws `Truncated` if the connection
    /// ended before the body did.
    func next() async throws -> ByteBuffer? {
        while !isFinished {
            guard let part = try await iterator.next() else { throw Truncated() }
            switch part {
            case .body(let buffer):
                bytesRead += Int64(buffer.readableBytes)
                await throttle?.pace(buffer.readableBytes)
                return buffer
            case .end:
                isFinished = true
            case .head:
                throw Truncated()
            }
        }
        return nil
    }

    /// The whole body, refusing more than `limit` bytes.
    func collect(limit: Int) async throws -> [UInt8] {
        var bytes: [UInt8] = []
        while let chunk = try await next() {
            guard bytes.count + chunk.readableBytes <= limit else {
                throw APIFailure.badInput("Request body is too large (limit \(limit) bytes).")
            }
            bytes += chunk.readableBytesView
        }
        return bytes
    }

    /// Streams `first` (a chunk already read) and the rest of the body into the file at `path`
    /// from `offset`, feeding `hashers`; returns the count. The file is opened (made if
    /// missing) at the first byte: an empty body touches no file, so an empty upload leaves
    /// no inode to delete on the disk the tests share with the mount's cache.
    func write(toFile path: String, at offset: Int64, hashers: [ContentHasher], first: ByteBuffer? = nil,
               truncate: Bool = false) async throws -> Int64 {
        var fd: Int32 = -1
        defer { if fd >= 0 { close(fd) } }
        var position = offset
        var chunk = first
        if chunk == nil { chunk = try await next() }
        while let current = chunk {
            if current.readableBytes > 0 {
                if fd < 0 {
                    fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (truncate ? O_TRUNC : 0), 0o600)
                    guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
                }
                position += try Self.write(current, to: fd, at: position, hashers: hashers)
            }
            chunk = try await next()
        }
        return position - offset
    }

    /// Writes one chunk to `fd` at `offset` and feeds it to `hashers`.
    static func write(_ chunk: ByteBuffer, to fd: Int32, at offset: Int64, hashers: [ContentHasher]) throws -> Int64 {
        try chunk.withUnsafeReadableBytes { bytes in
            var done = 0
            while done < bytes.count {
                let n = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
                if n < 0 {
                    if errno == EINTR { continue }
                    throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
                }
                done += n
            }
            for hasher in hashers { hasher.update(bytes) }
            return Int64(bytes.count)
        }
    }

    /// Reads and discards what is left, returning the connection's iterator.
    func drained() async throws -> Iterator {
        while try await next() != nil {}
        return iterator
    }
}

/// Paces a byte stream to a rate (the `bandwidth` fault).
actor Throttle {
    private let bytesPerSecond: Double
    private let start = ContinuousClock.now
    private var bytes: Int64 = 0

    init(bytesPerSecond: Int64) { self.bytesPerSecond = Double(bytesPerSecond) }

    func pace(_ count: Int) async {
        bytes += Int64(count)
        let due = start + .seconds(Double(bytes) / bytesPerSecond)
        if due > .now { try? await Task.sleep(until: due, clock: .continuous) }
    }

    /// A chunk size that keeps paced writes smooth (about 20 per second).
    nonisolated func chunkSize(atMost limit: Int) -> Int { max(1024, min(limit, Int(bytesPerSecond / 20))) }
}
