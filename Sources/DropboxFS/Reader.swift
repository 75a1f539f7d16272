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
    private let inflight = Mutex<[String: Task<Void, any Error>]>([:])
    private let prefetching = Atomic<Int>(0)
    private let downloaded = Atomic<Int64>(0)
    private let verifier = BlockVerifier()

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
        if let stream { stream.readAhead(through: prefetch(node, hash: hash, rev: rev, after: index, window: stream.advance(offset: offset, end: end))) }
        return (file, offset - index * Self.blockSize, Int(end - offset))
    }

    /// Reads up to `size` bytes at `offset` of `node`: missing blocks are fetched into the
    /// cache, then the bytes are read from the block files.
    public func read(_ node: Node, offset: Int64, size: Int, stream: ReadStream?) async throws -> [UInt8] {
        guard offset < node.size, size > 0 else { return [] }
        guard let hash = node.contentHash else { throw FSError.io("\(node.pathLower): no content hash") }
        let end = min(node.size, offset + Int64(size))
        try await ensureCached(node, offset: offset, size: size, stream: stream)
        var result = [UInt8](repeating: 0, count: Int(end - offset))
        for index in (offset / Self.blockSize)...((end - 1) / Self.blockSize) {
            let blockStart = index * Self.blockSize
            let blockLength = Int(min(Self.blockSize, node.size - blockStart))
            let from = max(offset, blockStart)
            let to = min(end, blockStart + Int64(blockLength))
            let key = BlockCache.key(contentHash: hash, index: index)
            let target = Int(from - offset)..<Int(to - offset)
            let copied = result.withUnsafeMutableBytes { buffer in
                cache.read(key, expected: blockLength, offset: Int(from - blockStart), length: Int(to - from),
                           into: UnsafeMutableRawBufferPointer(rebasing: buffer[target]))
            }
            if copied { continue }
            // Evicted between fetch and read (a cache smaller than the read-ahead): ask again.
            result.replaceSubrange(target, with: try await readDirect(node, offset: from, size: Int(to - from)))
        }
        return result
    }

    /// Makes sure the blocks covering [offset, offset+size) are in the cache (fetching what
    /// is missing, in parallel) and keeps the stream's read-ahead going.
    public func ensureCached(_ node: Node, offset: Int64, size: Int, stream: ReadStream?) async throws {
        guard offset < node.size, size > 0 else { return }
        guard let hash = node.contentHash, let rev = node.rev else { throw FSError.io("\(node.pathLower): no content hash or revision") }
        let end = min(node.size, offset + Int64(size))
        let first = offset / Self.blockSize
        let last = (end - 1) / Self.blockSize
        if let stream { stream.readAhead(through: prefetch(node, hash: hash, rev: rev, after: last, window: stream.advance(offset: offset, end: end))) }
        FuseLog.trace("read \(node.pathLower) [\(offset), \(end)) of rev \(rev): blocks \(first)...\(last)")
        // Content this mount just uploaded: its blocks are on their way into the cache.
        await cache.arrivals.awaitArrival(of: hash)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in first...last {
                let key = BlockCache.key(contentHash: hash, index: index)
                if cache.contains(key) { continue }
                let start = index * Self.blockSize
                let length = Int(min(Self.blockSize, node.size - start))
                group.addTask { try await self.fetch(key: key, rev: rev, expectedHash: hash, start: start, length: length, of: node.size) }
            }
            try await group.waitForAll()
        }
    }

    /// Fetches one block into the cache (or joins the request already fetching it): the
    /// bytes stream from the network straight into the block's file.
    func fetch(key: String, rev: String, expectedHash: String, start: Int64, length: Int, of size: Int64) async throws {
        let task: Task<Void, any Error> = inflight.withLock { running in
            if let existing = running[key] { return existing }
            let task = Task { [self] in
                if verifier.isRefused(expectedHash) { throw Self.refused(rev, expectedHash) }
                guard let (temporary, fd) = cache.temporaryFile(for: key) else { throw CacheUnavailable() }
                var adopted = false
                defer {
                    close(fd)
                    if !adopted { unlink(temporary) }
                }
                let written = BlockWriter(fd: fd)
                let got = try await client.download(Routes.download, DownloadArgument(path: "rev:" + rev), range: start..<(start + Int64(length)),
                                                    restart: { written.reset() }, consume: { try written.append($0) })
                // Blocks are cached under the content hash: never under the wrong one.
                guard got.result.contentHash == expectedHash else {
                    throw FSError.io("rev:\(rev) served content \(got.result.contentHash ?? "?"), expected \(expectedHash)")
                }
                guard written.count == length else { throw FSError.io("short block: \(written.count) of \(length) bytes") }
                self.downloaded.add(Int64(length), ordering: .relaxed)
                let count = (size + Self.blockSize - 1) / Self.blockSize
                let index = start / Self.blockSize
                switch verifier.arrived(contentHash: expectedHash, index: index, of: count, digest: written.digest()) {
                case .wrong(let expected, let actual):
                    for other in 0..<count where other != index { cache.drop(BlockCache.key(contentHash: expectedHash, index: other)) }
                    throw FSError.io("rev:\(rev): the bytes served hash to \(actual), not \(expected): none of them kept, "
                                     + "and this content is refused until the next mount")
                case .refused:
                    throw Self.refused(rev, expectedHash)
                case .verified, .waiting:
                    cache.adopt(key, temporary: temporary, size: length)
                    adopted = true
                }
            }
            running[key] = task
            return task
        }
        defer { inflight.withLock { if $0[key] == task { $0.removeValue(forKey: key) } } }
        try await task.value
    }

    static func refused(_ rev: String, _ contentHash: String) -> FSError {
        .io("rev:\(rev): content \(contentHash) was served wrong before; refused until the next mount")
    }

    /// Starts fetching up to `window` blocks after `index`, not already cached or in flight.
    /// Returns the last block it dealt with, so the stream knows where read-ahead stands.
    @discardableResult
    private func prefetch(_ node: Node, hash: String, rev: String, after index: Int64, window: (size: Int64, from: Int64)) -> Int64 {
        // Blocks being handed over from an upload here are not fetched: considered next time.
        guard window.size > 0, !cache.arrivals.isExpected(hash) else { return index }
        let lastBlock = (node.size - 1) / Self.blockSize
        var next = max(index + 1, window.from)
        while next <= min(lastBlock, index + window.size) {
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
                return blockIndex - 1  // full: this block and later ones are considered next time
            }
            let start = blockIndex * Self.blockSize
            let length = Int(min(Self.blockSize, node.size - start))
            Task {
                defer { prefetching.subtract(1, ordering: .relaxed) }
                try? await fetch(key: key, rev: rev, expectedHash: hash, start: start, length: length, of: node.size)
            }
        }
        return min(lastBlock, index + window.size)
    }
}

/// Per open file: detects sequential reading and sizes the read-ahead window (in blocks),
/// remembering how far read-ahead already went so each block is considered once.
/// The block cache cannot take a block (its disk is full or unwritable): reads then go
/// straight to Dropbox instead of failing.
struct CacheUnavailable: Error {}

extension Reader {
    /// Reads a range from Dropbox without the cache (the cache's disk is full).
    func readDirect(_ node: Node, offset: Int64, size: Int) async throws -> [UInt8] {
        guard offset < node.size, size > 0 else { return [] }
        guard let hash = node.contentHash, let rev = node.rev else { throw FSError.io("\(node.pathLower): no content hash or revision") }
        let end = min(node.size, offset + Int64(size))
        let (bytes, metadata) = try await client.downloadRangeWithMetadata("rev:" + rev, range: offset..<end)
        guard metadata.contentHash == hash else { throw FSError.io("rev:\(rev) no longer holds content \(hash)") }
        return bytes
    }
}

/// Writes a block's bytes at the running offset of its temporary file, hashing them as they
/// pass (on curl's thread) for `BlockVerifier`.
final class BlockWriter: @unchecked Sendable {
    let fd: Int32
    private let lock = NSLock()
    private var written = 0
    private var hasher = ContentHasher()

    init(fd: Int32) { self.fd = fd }

    var count: Int { lock.withLock { written } }

    func append(_ bytes: UnsafeRawBufferPointer) throws {
        try lock.withLock {
            guard PositionalWrite.all(fd, bytes, at: Int64(written)) == 0 else { throw CacheUnavailable() }
            written += bytes.count
            hasher.update(bytes)
        }
    }

    func reset() {
        lock.withLock {
            written = 0
            hasher = ContentHasher()
            ftruncate(fd, 0)
        }
    }

    /// SHA-256 of the block (one 4 MiB block at most: its only block digest).
    func digest() -> [UInt8] { lock.withLock { hasher.finishBlockDigests() } }
}

public final class ReadStream: Sendable {
    private let state = Mutex<(next: Int64, window: Int64, aheadThrough: Int64)>((0, 0, -1))

    public init() {}

    /// Records a read of [offset, end); returns the read-ahead window to use and the first
    /// block not yet handled by read-ahead.
    func advance(offset: Int64, end: Int64) -> (size: Int64, from: Int64) {
        state.withLock { state in
            let sequential = offset == state.next || (offset < state.next && offset >= state.next - Reader.blockSize)
            state.window = sequential ? max(2, min(Reader.maxWindow, state.window * 2)) : 0  // random: none
            state.next = end
            let block = (end - 1) / Reader.blockSize
            return (state.window, max(block + 1, state.aheadThrough + 1))
        }
    }

    /// Read-ahead has dealt with every block up to `block`.
    func readAhead(through block: Int64) {
        state.withLock { $0.aheadThrough = max($0.aheadThrough, block) }
    }
}
