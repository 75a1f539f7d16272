import CCryptoShim
import Foundation

/// Dropbox's `content_hash`, computed as bytes stream: SHA-256 of each 4 MiB block, then
/// SHA-256 of the concatenated block digests, in hex. (The emulator has its own
/// implementation on purpose: the two check each other.)
public final class ContentHasher: @unchecked Sendable {
    public static let blockSize = 4 * 1024 * 1024

    private let block: OpaquePointer
    private var inBlock = 0
    private var digests: [UInt8] = []

    public init() { block = ccrypto_sha256_new() }
    deinit { ccrypto_sha256_free(block) }

    public func update(_ bytes: UnsafeRawBufferPointer) {
        var offset = 0
        while offset < bytes.count {
            let take = min(bytes.count - offset, Self.blockSize - inBlock)
            ccrypto_sha256_update(block, bytes.baseAddress! + offset, take)
            inBlock += take
            offset += take
            if inBlock == Self.blockSize { closeBlock() }
        }
    }

    /// The block digests so far, closing a partial block: for hashing pieces separately
    /// (each a multiple of 4 MiB but the last) and combining them with `combine`.
    public func finishBlockDigests() -> [UInt8] {
        if inBlock > 0 { closeBlock() }
        return digests
    }

    public func finish() -> String { Self.combine(finishBlockDigests()) }

    public static func combine(_ blockDigests: [UInt8]) -> String {
        var digest = [UInt8](repeating: 0, count: 32)
        ccrypto_sha256_oneshot(blockDigests, blockDigests.count, &digest)
        return hex(digest)
    }

    /// Lower-case hex digits (`String(format:)` per byte cost more than the hashing in a
    /// batch of small files).
    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(unsafeUninitializedCapacity: bytes.count * 2) { buffer in
            for (index, byte) in bytes.enumerated() {
                buffer[2 * index] = digits[Int(byte >> 4)]
                buffer[2 * index + 1] = digits[Int(byte & 0xf)]
            }
            return bytes.count * 2
        }
    }

    public static func hash(_ bytes: [UInt8]) -> String {
        let hasher = ContentHasher()
        bytes.withUnsafeBytes { hasher.update($0) }
        return hasher.finish()
    }

    /// The content hash of a local file.
    public static func hash(file path: String) throws -> String {
        let (fd, size) = try FileIO.openForReading(path)
        defer { close(fd) }
        let hasher = ContentHasher()
        try FileIO.feed(fd, length: size, into: hasher)
        return hasher.finish()
    }

    private func closeBlock() {
        var digest = [UInt8](repeating: 0, count: 32)
        ccrypto_sha256_finish(block, &digest)
        digests += digest
        inBlock = 0
    }
}
