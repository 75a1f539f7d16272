import DropboxAPI
import Foundation
import Synchronization

/// Reads file content through the block cache. A missing block is fetched with one ranged
/// `files/download` of that block, addressed by revision (`rev:…`) so its bytes always match
/// the content hash it is cached under; concurrent readers of one block share one request.
/// Sequential reading grows a read-ahead window whose blocks are fetched in parallel over
/// the client's reused connections, never past the end of the file.
public final class Reader: Sendable {
    /// 4 MiB, as Dropbox's content hash blocks: few requests per file, one file per block.
    public static let blockSize: Int64 = 4 << 20
    static let maxWindow: Int64 = 16
    static let maxPrefetches = 6

    let client: DropboxClient
    let cache: BlockCache
    private let inflight = Mutex<[String: Task<[UInt8], any Error>]>([:])
    private let prefetching = Atomic<Int>(0)
    private let downloaded = Atomic<Int64>(0)

    public init(client: DropboxClient, cache: BlockCache) {
        self.client = client
        self.cache = cache
    }

    /// Bytes fetched from Dropbox so far.
    public var bytesDownloaded: Int64 { downloaded.load(ordering: .relaxed) }

    /// For a read that lies within one cached block: that block's file and the offset in it,
    /// so the caller can have the kernel splice the bytes straight from disk. Also keeps the
    /// read-ahead going (fetching what is missing, hinting the page cache for what is not).
    public func cachedSpan(_ node: Node, offset: Int64, size: Int, stream: ReadStream?) -> (file: String, offset: Int64, length: Int)? {
        guard offset < node.size, size > 0, let hash = node.contentHash, let rev = node.rev else { return nil }
        let end = min(node.size, offset + Int64(size))
        let index = offset / Self.blockSize
        guard (end - 1) / Self.blockSize == index else { return nil }
        let blockLength = Int(min(Self.blockSize, node.size - index * Self.blockSize))
        let key = BlockCache.key(contentHash: hash, index: index)
        guard let file = cache.verifiedFile(key, expected: blockLength) else { return nil }
        if let stream { prefetch(node, hash: hash, rev: rev, after: index, window: stream.advance(offset: offset, end: end)) }
        return (file, offset - index * Self.blockSize, Int(end - offset))
    }

    /// Reads up to `size` bytes at `offset` of `node`.
    public func read(_ node: Node, offset: Int64, size: Int, stream: ReadStream?) async throws -> [UInt8] {
        guard offset < node.size, size > 0, let hash = node.contentHash, let rev = node.rev else { return [] }
        let end = min(node.size, offset + Int64(size))
        var result = [UInt8](repeating: 0, count: Int(end - offset))
        let first = offset / Self.blockSize
        let last = (end - 1) / Self.blockSize
        if let stream { prefetch(node, hash: hash, rev: rev, after: last, window: stream.advance(offset: offset, end: end)) }
        for index in first...last {
            let blockStart = index * Self.blockSize
            let blockLength = Int(min(Self.blockSize, node.size - blockStart))
            let from = max(offset, blockStart)
            let to = min(end, blockStart + Int64(blockLength))
            let key = BlockCache.key(contentHash: hash, index: index)
            let copied = result.withUnsafeMutableBytes { buffer in
                cache.read(key, expected: blockLength, offset: Int(from - blockStart), length: Int(to - from),
                           into: UnsafeMutableRawBufferPointer(rebasing: buffer[Int(from - offset)..<Int(to - offset)]))
            }
            if copied { continue }
            let block = try await fetch(key: key, rev: rev, expectedHash: hash, start: blockStart, length: blockLength)
            result.withUnsafeMutableBytes { buffer in
                block.withUnsafeBytes { source in
                    let slice = UnsafeRawBufferPointer(rebasing: source[Int(from - blockStart)..<Int(to - blockStart)])
                    UnsafeMutableRawBufferPointer(rebasing: buffer[Int(from - offset)..<Int(to - offset)]).copyMemory(from: slice)
                }
            }
        }
        return result
    }

    /// Fetches one block (or joins the request already fetching it) and caches it.
    func fetch(key: String, rev: String, expectedHash: String, start: Int64, length: Int) async throws -> [UInt8] {
        let task: Task<[UInt8], any Error> = inflight.withLock { running in
            if let existing = running[key] { return existing }
            let task = Task { [self] in
                let (bytes, metadata) = try await client.downloadRangeWithMetadata("rev:" + rev, range: start..<(start + Int64(length)))
                // Blocks are cached under the content hash: never under the wrong one.
                guard metadata.contentHash == expectedHash else {
                    throw FSError.io("rev:\(rev) served content \(metadata.contentHash ?? "?"), expected \(expectedHash)")
                }
                self.downloaded.add(Int64(length), ordering: .relaxed)
                cache.store(key, bytes)
                return bytes
            }
            running[key] = task
            return task
        }
        defer { _ = inflight.withLock { $0.removeValue(forKey: key) } }
        return try await task.value
    }

    /// Starts fetching up to `window` blocks after `index`, not already cached or in flight.
    private func prefetch(_ node: Node, hash: String, rev: String, after index: Int64, window: Int64) {
        guard window > 0 else { return }
        let lastBlock = (node.size - 1) / Self.blockSize
        var next = index + 1
        while next <= min(lastBlock, index + window) {
            let blockIndex = next
            next += 1
            let key = BlockCache.key(contentHash: hash, index: blockIndex)
            if inflight.withLock({ $0[key] != nil }) { continue }
            if cache.contains(key) {
                cache.willNeed(key)  // on disk already: start reading it into the page cache
                continue
            }
            guard prefetching.add(1, ordering: .relaxed).newValue <= Self.maxPrefetches else {
                prefetching.subtract(1, ordering: .relaxed)
                return
            }
            let start = blockIndex * Self.blockSize
            let length = Int(min(Self.blockSize, node.size - start))
            Task {
                defer { prefetching.subtract(1, ordering: .relaxed) }
                _ = try? await fetch(key: key, rev: rev, expectedHash: hash, start: start, length: length)
            }
        }
    }
}

/// Per open file: detects sequential reading and sizes the read-ahead window (in blocks).
public final class ReadStream: Sendable {
    private let state = Mutex<(next: Int64, window: Int64)>((0, 0))

    public init() {}

    /// Records a read of [offset, end); returns the read-ahead window to use.
    func advance(offset: Int64, end: Int64) -> Int64 {
        state.withLock { state in
            if offset == state.next || (offset < state.next && offset >= state.next - Reader.blockSize) {
                state.window = max(2, min(Reader.maxWindow, state.window * 2))
            } else {
                state.window = 0  // random access: no read-ahead
            }
            state.next = end
            return state.window
        }
    }
}
