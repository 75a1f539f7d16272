import DropboxAPI
import Foundation
import Synchronization

/// The local bytes of one version of a file being written: a sparse staging file in the
/// cache directory, plus which 4 MiB blocks of it hold the truth. A block nobody has written
/// still holds the base revision's bytes on Dropbox; it is fetched (through the block cache)
/// only when a partial write or a read needs it, or when the version is sealed for upload —
/// so a small change to a large file never waits for the whole file.
///
/// Lock: `state` guards the bookkeeping and is held across each write's `pwrite`, so a block
/// being filled from Dropbox can never overwrite bytes a writer put there meanwhile.
public final class StagedFile: Sendable {
    public static let blockSize = Reader.blockSize
    static let offerLimit: Int64 = 64 << 20

    /// Where unwritten bytes come from: a revision on Dropbox, read through `reader`.
    public struct Base: Sendable {
        public var node: Node
        public var reader: Reader
    }

    /// Where the file is: the name it was made with, or the pool's file it took when it got
    /// its first byte (`materializeLocked`: set under `state`'s lock, before the descriptor).
    private let location: Mutex<String>
    public var path: String { location.withLock { $0 } }
    /// The staging file's descriptor, open while the file is written or read (`StagingDescriptor`).
    /// No file until it holds a byte or a size: an empty file (create, O_TRUNC) gets no local
    /// file unless it is written (`materializeLocked`). Measured with `perf`, the staging
    /// file's create was 14 % of the daemon's CPU in 5,000 empty creates (ext4's inode
    /// allocation), and its flush and hash another 8 %. Made under `state`'s lock; a size
    /// above zero means there is a file.
    private let descriptor = StagingDescriptor()
    private let base: Base?
    private let state: Mutex<State>
    /// Where the file goes once removed and no longer read (`remove`); nil: deleted at once.
    private let pool: StagingPool?
    private let removed = Atomic<Bool>(false)
    /// The file itself became a cache block (`offerBlocks`): no longer at `path`, and never
    /// the pool's.
    private let givenToCache = Atomic<Bool>(false)
    /// The queue may still hold a record naming the file after its version is done (its
    /// removal failed): the pool renames it before another version uses it, or a recovery
    /// would take that version's bytes for the record's.
    private let namedByALeftRecord = Atomic<Bool>(false)

    private struct State {
        var size: Int64
        /// Bytes below this (and in blocks not local) are still the base revision's.
        var baseLength: Int64
        var localBlocks: Set<Int64>
        var fills: [Int64: Task<Void, any Error>] = [:]
        /// Changed since it was made (written, truncated, or new): something to upload.
        var changed = false
        /// Sealed for upload: its bytes may no longer change (writers get a copy).
        var sealed = false
        /// Upload before close: only a file that began empty (new, or opened with O_TRUNC)
        /// offers its chunks early. Bytes below `frozenEnd` went, or are going, to an upload
        /// session; a write or truncation there breaks it for good, and the upload at seal
        /// starts afresh.
        var offersEarlyChunks = false
        var frozenEnd: Int64 = 0
        var earlyBroken = false
    }

    /// A new staging file at `path` (from `pool` when it has one): empty, or standing for
    /// `base` (nothing fetched yet).
    init(path: String, base: Base?, truncate: Bool, pool: StagingPool? = nil) throws {
        let size = truncate ? 0 : base?.node.size ?? 0
        location = Mutex(path)
        self.base = base
        self.pool = pool
        state = Mutex(State(size: size, baseLength: size, localBlocks: [], changed: truncate, offersEarlyChunks: size == 0))
        guard size > 0 else { return }
        try state.withLock { state in
            try materializeLocked()
            guard try withDescriptor({ ftruncate($0, off_t(size)) }) == 0 else {
                let error = StagedFile.error("size", path)
                unlink(path)
                throw error
            }
        }
    }

    /// Reopens a staging file a crashed or stopped mount left sealed in the upload queue
    /// (`size` bytes long; an empty one may never have had a file).
    init(sealedAt path: String, size: Int64, pool: StagingPool? = nil) throws {
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 || (errno == ENOENT && size == 0) else { throw StagedFile.error("open", path) }
        var info = stat()
        if fd >= 0 { fstat(fd, &info) }
        location = Mutex(path)
        base = nil
        self.pool = pool
        state = Mutex(State(size: Int64(info.st_size), baseLength: 0, localBlocks: [], sealed: true))
        // Sealed: the descriptor closes at once (a queue of thousands keeps none open).
        descriptor.closeWhenIdle(true)
        if fd >= 0 { descriptor.adopt(fd) }
    }

    /// Creates the staging file (takes one from the pool when it has one), if it has none yet.
    ///
    /// Not by `O_TRUNC`: ext4 takes a file truncated to nothing for one being replaced and
    /// writes its bytes out at its last close; every staging file then cost a disk write at
    /// close (seen with strace: 2,000 closes took 0.11 s in 1,000 small uploads). Pool files
    /// are empty already, and a new path holds nothing; anything else found there is cut.
    private func materializeLocked() throws {
        guard !descriptor.exists else { return }
        var fd: Int32 = -1
        while fd < 0, let free = pool?.take() {
            fd = open(free, O_RDWR | O_CLOEXEC)
            if fd >= 0 { location.withLock { $0 = free } } else { unlink(free) }
        }
        if fd < 0 {
            let path = self.path
            fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw StagedFile.error("create", path) }
        }
        if Self.length(of: fd) != 0 && ftruncate(fd, 0) != 0 {
            let error = StagedFile.error("empty", path)
            close(fd)
            throw error
        }
        descriptor.adopt(fd)
    }

    /// Runs `body` with the staging file's descriptor (opened again if it was closed).
    private func withDescriptor<T>(_ body: (Int32) throws -> T) throws -> T { try descriptor.use(path, body) }

    /// Where the bytes can be read by path (an upload, a hash): the staging file, or
    /// /dev/null for an empty file that never needed one.
    public var bytesPath: String { descriptor.exists ? path : "/dev/null" }

    /// Whether the bytes are in a staging file (an empty file may have none).
    public var hasLocalFile: Bool { descriptor.exists }

    /// A copy of a sealed file's bytes (complete: sealing filled them), to go on writing while
    /// the sealed one uploads.
    public func copy(to newPath: String) throws -> StagedFile {
        let copy = try StagedFile(path: newPath, base: nil, truncate: true, pool: pool)
        let size = self.size
        try copy.state.withLock { state in
            if size > 0 {
                try copy.materializeLocked()
                let copied = try withDescriptor { source in
                    try copy.withDescriptor { target in
                        send(source, to: target, from: 0, length: size) && ftruncate(target, off_t(size)) == 0
                    }
                }
                guard copied else { throw StagedFile.error("copy to", newPath) }
            }
            state.size = size
            state.changed = false
            state.offersEarlyChunks = false
        }
        return copy
    }

    deinit {
        // Removed, and now nobody reads it (a descriptor of an unlinked file did until now).
        guard let (fd, identity) = descriptor.last() else { return }
        if removed.load(ordering: .acquiring), !givenToCache.load(ordering: .acquiring), let pool {
            return pool.keepLater(path, fd: fd, identity: identity, renaming: namedByALeftRecord.load(ordering: .acquiring))
        }
        if let fd { close(fd) }
    }

    public var size: Int64 { state.withLock { $0.size } }
    public var isSealed: Bool { state.withLock { $0.sealed } }
    /// Holds changes not yet sealed.
    public var hasChanges: Bool { state.withLock { $0.changed && !$0.sealed } }

    public enum WriteOutcome: Sendable {
        case written(Int)
        /// These blocks must be filled from the base revision first (`fill`).
        case needsFill([Int64])
        /// The version is sealed: write to a copy.
        case sealed
    }

    /// Writes at once when no block needs the base revision's bytes first.
    public func tryWrite(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws -> WriteOutcome {
        try state.withLock { state in
            if state.sealed { return .sealed }
            let end = offset + Int64(bytes.count)
            guard bytes.count > 0 else { return .written(0) }
            let first = offset / Self.blockSize, last = (end - 1) / Self.blockSize
            var missing: [Int64] = []
            for block in first...last where needsFill(block, state) {
                let covered = offset <= block * Self.blockSize && end >= min((block + 1) * Self.blockSize, state.baseLength)
                if !covered { missing.append(block) }
            }
            if !missing.isEmpty { return .needsFill(missing) }
            if offset < state.frozenEnd { state.earlyBroken = true }
            try materializeLocked()
            let path = self.path
            try withDescriptor { try Self.writeAll($0, bytes, at: offset, path: path) }
            for block in first...last { state.localBlocks.insert(block) }
            state.size = max(state.size, end)
            state.changed = true
            return .written(bytes.count)
        }
    }

    /// Writes, filling blocks from the base revision first where the write covers them only
    /// in part.
    public func write(_ bytes: [UInt8], at offset: Int64) async throws -> WriteOutcome {
        while true {
            let outcome = try bytes.withUnsafeBytes { try tryWrite($0, at: offset) }
            guard case .needsFill(let blocks) = outcome else { return outcome }
            for block in blocks { try await fill(block) }
        }
    }

    /// Sets the size. Bytes cut off are gone for good, also from the base: growing again
    /// shows zeros there, as on a local disk.
    public func truncate(to newSize: Int64) throws -> Bool {
        try state.withLock { state in
            if state.sealed { return false }
            if newSize > 0 { try materializeLocked() }
            guard try !descriptor.exists || withDescriptor({ ftruncate($0, off_t(newSize)) }) == 0 else {
                throw StagedFile.error("truncate", path)
            }
            state.size = newSize
            state.baseLength = min(state.baseLength, newSize)
            state.changed = true
            // A chunk sent early must not become the closing one, nor lose bytes.
            if state.frozenEnd > 0 && newSize <= state.frozenEnd { state.earlyBroken = true }
            return true
        }
    }

    /// Counts as changed with its bytes as they are (fallocate, which changes no byte and
    /// still advances mtime, as on a disk); false once sealed.
    public func markChanged() -> Bool {
        state.withLock { state in
            if state.sealed { return false }
            state.changed = true
            return true
        }
    }

    /// Reads local bytes, filling what is still on Dropbox first.
    public func read(at offset: Int64, size: Int) async throws -> [UInt8] {
        let end = min(offset + Int64(size), self.size)
        guard end > offset else { return [] }
        for block in (offset / Self.blockSize)...((end - 1) / Self.blockSize) { try await fill(block) }
        var buffer = [UInt8](repeating: 0, count: Int(end - offset))
        let done = try withDescriptor { fd in
            var done = 0
            while done < buffer.count {
                let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, $0.count - done, off_t(offset) + off_t(done)) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { break }
                done += n
            }
            return done
        }
        return Array(buffer[..<done])
    }

    /// True when [offset, offset+size) needs nothing from Dropbox (a read can be spliced from
    /// the staging file).
    public func isLocal(at offset: Int64, size: Int) -> Bool {
        state.withLock { state in
            let end = min(offset + Int64(size), state.size)
            guard end > offset else { return true }
            return ((offset / Self.blockSize)...((end - 1) / Self.blockSize)).allSatisfy { !needsFill($0, state) }
        }
    }

    /// Fetches every block still on Dropbox, so the file is complete locally.
    public func fillComplete() async throws {
        try await fill(state.withLock { missingBlocks($0) })
    }

    /// Fetches the blocks below `end` still on Dropbox: the part a truncation keeps.
    public func fill(below end: Int64) async throws {
        try await fill(state.withLock { missingBlocks($0) }.filter { $0 * Self.blockSize < end })
    }

    /// Fetches `blocks`, four at a time.
    private func fill(_ blocks: [Int64]) async throws {
        if blocks.isEmpty { return }  // every ftruncate asks, mostly of a file all here
        try await withThrowingTaskGroup(of: Void.self) { group in
            var next = 0
            for _ in 0..<min(4, blocks.count) {
                let block = blocks[next]
                next += 1
                group.addTask { try await self.fill(block) }
            }
            while try await group.next() != nil, next < blocks.count {
                let block = blocks[next]
                next += 1
                group.addTask { try await self.fill(block) }
            }
        }
    }

    /// Seals the file for upload, complete locally; false if it was sealed already or holds
    /// no change.
    public func seal() async throws -> Bool {
        guard hasChanges else { return false }
        try await fillComplete()
        return state.withLock { state in
            if state.sealed || !state.changed { return false }
            state.sealed = true
            descriptor.closeWhenIdle(true)
            return true
        }
    }

    /// Whether every byte is here (nothing left to fetch from the base revision).
    public var isComplete: Bool { state.withLock { missingBlocks($0).isEmpty } }

    /// `seal` without waiting: nil when blocks must come from Dropbox first (call `seal`).
    public func sealIfLocal() -> Bool? {
        state.withLock { state in
            if !state.changed || state.sealed { return false }
            if !missingBlocks(state).isEmpty { return nil }
            state.sealed = true
            descriptor.closeWhenIdle(true)
            return true
        }
    }

    /// Takes back a seal the queue could not record: the version is still being edited.
    public func unseal() {
        state.withLock { state in
            state.sealed = false
            descriptor.closeWhenIdle(false)
        }
    }

    /// Offers a sealed file's blocks to the block cache under the content hash Dropbox now
    /// has for them, so reading the file back after its upload costs no download. Only for
    /// files up to `offerLimit` (and a quarter of the cache): copying a large file again
    /// right after its upload competes with the writes that follow (measured: a second
    /// `cp` of 1 GiB + sync took 3.2 s instead of 2.1 s).
    /// A small file's block is added to `inline` instead, for the caller to store with others
    /// (`BlockCache.storeInline`).
    public func offerBlocks(to cache: BlockCache, contentHash: String, inline: inout [(key: String, bytes: [UInt8])]) {
        let size = self.size
        guard isSealed, size > 0, size <= min(Self.offerLimit, cache.limit / 4) else { return }
        // A small file's bytes are kept in the cache's index, and the staging file goes back
        // to the pool: the next new file needs no inode (`BlockCache.inlineLimit`).
        // (`storeInline` leaves a block the cache holds already: no look here first.)
        if size <= BlockCache.inlineLimit {
            if let bytes = try? withDescriptor({ try FileIO.read($0, length: Int(size)) }) {
                inline.append((BlockCache.key(contentHash: contentHash, index: 0), bytes))
            }
            return
        }
        // A done file of one block becomes that block itself, by a rename: a copy made ext4
        // allocate an inode per file, and with files deleted nearby (staging files, an
        // `rm -r`) each allocation read past them: 35 % of all CPU while 1,000 files of
        // 4 KiB were uploaded. The pool never gets the file back (the cache owns it now);
        // its readers go on through their descriptors.
        let path = self.path
        if size <= Self.blockSize, removed.load(ordering: .acquiring), pool != nil, (try? withDescriptor(Self.length(of:))) == size {
            let key = BlockCache.key(contentHash: contentHash, index: 0)
            if cache.contains(key) { return }
            // Readers go on through the descriptor once the file has left its path.
            if (try? descriptor.pin(path)) != nil, cache.adopt(key, moving: path, size: Int(size)) {
                return givenToCache.store(true, ordering: .releasing)
            }
        }
        for index in stride(from: Int64(0), to: (size + Self.blockSize - 1) / Self.blockSize, by: 1) {
            let key = BlockCache.key(contentHash: contentHash, index: index)
            guard !cache.contains(key), let (temporary, target) = cache.temporaryFile(for: key) else { continue }
            let length = min(Self.blockSize, size - index * Self.blockSize)
            let sent = (try? withDescriptor { send($0, to: target, from: index * Self.blockSize, length: length) }) ?? false
            close(target)
            if sent { cache.adopt(key, temporary: temporary, size: Int(length)) } else { unlink(temporary) }
        }
    }

    /// The length of the file open as `fd` (-1 if there is none).
    private static func length(of fd: Int32) -> Int64 {
        var info = stat()
        return fd >= 0 && fstat(fd, &info) == 0 ? Int64(info.st_size) : -1
    }

    /// The version is done: its file is deleted, or, with a pool, goes there once the last
    /// reader lets go of it (until then it keeps its bytes for them).
    public func remove() {
        if pool == nil {
            keepReadable()
            unlink(path)
        } else {
            removed.store(true, ordering: .releasing)
        }
    }

    /// The file is about to leave its path (set aside, deleted): its descriptor stays open
    /// until the end, so that readers go on reading it.
    public func keepReadable() { try? descriptor.pin(path) }

    /// The queue's record of the version could not be removed: see `namedByALeftRecord`.
    public func outlivedByItsRecord() { namedByALeftRecord.store(true, ordering: .releasing) }

    // MARK: Upload before close

    /// Whether writes may still make chunks ready to go before close.
    public var offersEarlyChunks: Bool { state.withLock { Self.offersEarly($0) } }

    /// False once a change touched bytes already given to an early upload: its session is
    /// then worthless.
    public var keepsEarlyChunks: Bool { state.withLock { !$0.earlyBroken } }

    /// The next `chunkSize` bytes to send before close, now frozen, if the writer has moved
    /// past them (a sequential writer does not come back; one that does breaks the early
    /// upload, never the file). A chunk is taken only with bytes after it, so it is never
    /// the session's closing chunk.
    public func freezeNextChunk(_ chunkSize: Int64) -> Int64? {
        state.withLock { state in
            guard Self.offersEarly(state), state.frozenEnd + chunkSize < state.size else { return nil }
            defer { state.frozenEnd += chunkSize }
            return state.frozenEnd
        }
    }

    private static func offersEarly(_ state: State) -> Bool { state.offersEarlyChunks && !state.earlyBroken && !state.sealed }

    /// Gives up uploading before close (an early send failed): the upload at seal does it all.
    public func stopEarlyChunks() { state.withLock { $0.offersEarlyChunks = false } }

    // MARK: Filling from the base revision

    private func needsFill(_ block: Int64, _ state: State) -> Bool {
        !state.localBlocks.contains(block) && block * Self.blockSize < state.baseLength
    }

    /// The blocks still only on Dropbox.
    private func missingBlocks(_ state: State) -> [Int64] {
        stride(from: Int64(0), to: (state.baseLength + Self.blockSize - 1) / Self.blockSize, by: 1).filter { needsFill($0, state) }
    }

    /// Copies one block's base bytes into the staging file (one fetch shared by all callers).
    private func fill(_ block: Int64) async throws {
        let task: Task<Void, any Error>? = state.withLock { state in
            guard needsFill(block, state) else { return nil }
            if let running = state.fills[block] { return running }
            let task = Task { try await self.fetchAndStore(block) }
            state.fills[block] = task
            return task
        }
        guard let task else { return }
        defer { state.withLock { if $0.fills[block] == task { $0.fills.removeValue(forKey: block) } } }
        try await task.value
    }

    private func fetchAndStore(_ block: Int64) async throws {
        guard let base else { return }
        let start = block * Self.blockSize
        let length = state.withLock { min(Self.blockSize, $0.baseLength - start) }
        guard length > 0 else { return }
        let bytes = try await base.reader.read(base.node, offset: start, size: Int(length), stream: nil)
        try state.withLock { state in
            guard needsFill(block, state) else { return }  // written whole, or cut off, meanwhile
            let keep = Int(min(Int64(bytes.count), state.baseLength - start))
            try materializeLocked()
            let path = self.path
            try withDescriptor { fd in
                try bytes.withUnsafeBytes { try Self.writeAll(fd, UnsafeRawBufferPointer(rebasing: $0[..<keep]), at: start, path: path) }
            }
            state.localBlocks.insert(block)
        }
    }

    private static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int64, path: String) throws {
        let failure = PositionalWrite.all(fd, bytes, at: offset)
        if failure != 0 { throw error("write", path, errno: failure) }
    }

    /// Copies `length` bytes of the file open as `fd` from `offset` to `target`'s current
    /// position, in the kernel (sendfile); false if it stopped short.
    private func send(_ fd: Int32, to target: Int32, from offset: Int64, length: Int64) -> Bool {
        var from = off_t(offset)
        var done: Int64 = 0
        while done < length {
            let n = sendfile(target, fd, &from, Int(min(length - done, 1 << 30)))
            if n <= 0 { return false }
            done += Int64(n)
        }
        return true
    }

    /// A failed local file operation: ENOSPC and EDQUOT become `noSpace` (the writer sees
    /// ENOSPC), anything else an I/O error naming the file.
    static func error(_ what: String, _ path: String, errno code: Int32 = errno) -> FSError {
        if code == ENOSPC || code == EDQUOT { return .noSpace }
        if code == EFBIG { return .fileTooLarge }
        return .io("\(what) \(path): \(String(cString: strerror(code)))")
    }
}
