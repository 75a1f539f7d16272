import Foundation
import DropboxAPI
import SQLiteStore

/// File content on local disk in fixed-size blocks, keyed by the file's `content_hash` and
/// the block index: a changed file has a new hash, so stale blocks can never be served, and
/// identical files share blocks. An SQLite index tracks sizes and last use; past the size
/// limit the least recently used blocks are evicted. Blocks are written to a temporary name
/// and renamed into place, and checked for their expected length when read, so a block torn
/// by a crash is detected and fetched again. Kept across remounts.
///
/// A block of a small file (up to `inlineLimit`) is kept in the index itself (`data`), not
/// as a file: one file per uploaded small file took a new inode for each (the staging file
/// it was), and on ext4 without a journal each allocation reads past every inode deleted in
/// the last minutes; kept inline, the staging file goes back to the pool and the next new
/// file reuses it.
///
/// Lock: `lock` guards the index connection and the in-memory totals; block files are read
/// and written outside it.
public final class BlockCache: @unchecked Sendable {
    public let directory: URL
    /// `directory`'s `blocks` folder, as a path: block paths are joined as strings (a URL
    /// built per block was a tenth of the daemon's CPU while 1,000 uploaded files became
    /// cached blocks).
    private let blocksPath: String
    public let limit: Int64
    let lock = NSLock()
    let db: SQLiteDatabase
    private var total: Int64 = 0
    /// Paths pinned (`BlockCache+Pins`), under `lock`.
    var pinnedPaths: Set<String> = []
    /// True while pinned blocks alone fill more than the limit (said in the log once).
    private var overLimit = false
    private var lastTouch: [String: Int64] = [:]
    public private(set) var hits: Int64 = 0
    public private(set) var misses: Int64 = 0
    /// Contents this mount's uploads are handing over to the cache.
    let arrivals = BlockArrivals()

    /// The index's file in the cache directory (the mount names it when it is damaged).
    public static let storeFile = "blocks.sqlite"

    public init(directory: URL, limit: Int64) throws {
        self.directory = directory
        blocksPath = directory.appendingPathComponent("blocks").path
        self.limit = limit
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("blocks"), withIntermediateDirectories: true)
        db = try SQLiteDatabase(path: directory.appendingPathComponent(Self.storeFile).path, exclusive: true)
        try db.execute("""
            CREATE TABLE IF NOT EXISTS blocks (key TEXT PRIMARY KEY, size INTEGER NOT NULL, last_used INTEGER NOT NULL, data BLOB) WITHOUT ROWID;
            CREATE INDEX IF NOT EXISTS blocks_lru ON blocks(last_used);
            CREATE TABLE IF NOT EXISTS pins (path_lower TEXT PRIMARY KEY) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS pinned_hashes (hash TEXT PRIMARY KEY) WITHOUT ROWID;
            """)
        // A cache made before blocks were kept inline gains the column.
        var columns: [String] = []
        try db.query("PRAGMA table_info(blocks)") { columns.append($0.text(1)) }
        if !columns.contains("data") { try db.execute("ALTER TABLE blocks ADD COLUMN data BLOB") }
        try db.query("SELECT path_lower FROM pins") { pinnedPaths.insert($0.text(0)) }
        total = try db.first("SELECT COALESCE(SUM(size), 0) FROM blocks") { $0.int(0) } ?? 0
        removeLeftoverTemporaries()
    }

    /// Downloads cut short by a crash leave temporary files: remove them, so they never
    /// count against nothing and fill the disk.
    private func removeLeftoverTemporaries() {
        let blocks = blocksPath
        for folder in (try? FileManager.default.contentsOfDirectory(atPath: blocks)) ?? [] {
            let path = blocks + "/" + folder
            for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] where name.contains(".tmp.") {
                unlink(path + "/" + name)
            }
        }
    }

    public var size: Int64 { lock.withLock { total } }

    /// True while pinned files alone fill more than the limit.
    public var pinnedOverLimit: Bool { lock.withLock { overLimit } }

    public static func key(contentHash: String, index: Int64) -> String { "\(contentHash)-\(index)" }

    func file(_ key: String) -> String {
        blocksPath + "/" + key.prefix(2) + "/" + key
    }

    /// Copies `length` bytes at `offset` within a cached block into `buffer`; false if the
    /// block is missing or not of its `expected` length (torn: it is dropped).
    public func read(_ key: String, expected: Int, offset: Int, length: Int, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
        let path = file(key)
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return expected <= Self.inlineLimit ? readInline(key, expected: expected, offset: offset, length: length, into: buffer) : miss() }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, Int(info.st_size) == expected else {
            drop(key)
            return miss()
        }
        var done = 0
        while done < length {
            let n = pread(fd, buffer.baseAddress! + done, length - done, off_t(offset + done))
            guard n > 0 else { return miss() }
            done += n
        }
        touch(key)
        return true
    }

    /// Blocks up to this size may be kept in the index (`storeInline`).
    public static let inlineLimit = 64 * 1024

    private func readInline(_ key: String, expected: Int, offset: Int, length: Int, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
        let found: Bool = lock.withLock {
            (try? db.first("SELECT data FROM blocks WHERE key = ? AND data IS NOT NULL", [.text(key)]) { row -> Bool in
                let data = row.blob(0)
                guard data.count == expected, offset + length <= data.count else { return false }
                data.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress! + offset, byteCount: length) }
                return true
            }) ?? false
        }
        guard found else { return miss() }
        touch(key)
        return true
    }

    /// Keeps each block the cache does not hold yet in the index (a small file's one block),
    /// and evicts past the limit. All in one transaction: one a block wrote its pages to the
    /// log and checkpointed it every few hundred, on the disk the next `cp -r` was writing to
    /// (1,000 small files uploaded: 12 MB of log).
    public func storeInline(_ blocks: [(key: String, bytes: [UInt8])]) {
        let kept = blocks.filter { Self.isKey($0.key) && $0.bytes.count <= Self.inlineLimit }
        guard !kept.isEmpty else { return }
        lock.withLock {
            try? db.transaction {
                for (key, bytes) in kept {
                    try db.run("INSERT OR IGNORE INTO blocks (key, size, last_used, data) VALUES (?, ?, ?, ?)",
                               [.text(key), .int(Int64(bytes.count)), .int(Self.now()), .blob(bytes)])
                    if db.changes > 0 { total += Int64(bytes.count) }
                }
            }
        }
        evictIfNeeded()
    }

    /// Whether the block is kept in the index.
    private func isInline(_ key: String) -> Bool {
        lock.withLock { (try? db.first("SELECT 1 FROM blocks WHERE key = ? AND data IS NOT NULL", [.text(key)]) { _ in true }) ?? nil } ?? false
    }

    /// A new temporary file in the cache directory to download a block into.
    public func temporaryFile(for key: String) -> (path: String, fd: Int32)? {
        guard Self.isKey(key) else { return nil }
        let temporary = file(key) + ".tmp.\(UInt32.random(in: 0 ... .max))"
        let fd = inShard(of: temporary) { open(temporary, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600) }
        return fd >= 0 ? (temporary, fd) : nil
    }

    /// Keys come from content hashes, which the API client checks already; a key that is
    /// anything else must still never become a path outside the cache.
    private static func isKey(_ key: String) -> Bool {
        guard let dash = key.lastIndex(of: "-") else { return false }
        return ServerChecks.isContentHash(String(key[..<dash])) && Int64(key[key.index(after: dash)...]) != nil
    }

    /// Runs a call that makes an entry in a block's shard folder (`blocks/xx`), making the
    /// folder first if the call found none (a `createDirectory` before each block was a
    /// tenth of an upload of small files).
    private func inShard(of path: String, _ call: () -> Int32) -> Int32 {
        let result = call()
        guard result < 0, errno == ENOENT else { return result }
        mkdir((path as NSString).deletingLastPathComponent, 0o700)
        return call()
    }

    /// Makes a file the block `key` by renaming it into place (a done upload's staging file,
    /// on the same disk); false, having changed nothing, if it cannot.
    public func adopt(_ key: String, moving path: String, size: Int) -> Bool {
        let target = file(key)
        guard Self.isKey(key), inShard(of: target, { rename(path, target) }) == 0 else { return false }
        recordAdopted(key, size: size)
        return true
    }

    /// Makes a downloaded temporary file the block `key` (atomically, by rename) and evicts
    /// past the limit. A block that cannot be stored (full disk) only costs a refetch.
    public func adopt(_ key: String, temporary: String, size: Int) {
        guard rename(temporary, file(key)) == 0 else {
            unlink(temporary)
            return
        }
        recordAdopted(key, size: size)
    }

    /// A block just put in place is counted and evicts past the limit.
    private func recordAdopted(_ key: String, size: Int) {
        lock.withLock {
            let previous = (try? db.first("SELECT size FROM blocks WHERE key = ?", [.text(key)]) { $0.int(0) }) ?? nil
            try? db.run("INSERT OR REPLACE INTO blocks (key, size, last_used) VALUES (?, ?, ?)",
                        [.text(key), .int(Int64(size)), .int(Self.now())])
            total += Int64(size) - (previous ?? 0)
        }
        evictIfNeeded()
    }

    public var hitRate: Double {
        lock.withLock { hits + misses == 0 ? 0 : Double(hits) / Double(hits + misses) }
    }

    private func miss() -> Bool {
        lock.withLock { misses += 1 }
        return false
    }

    /// Marks a block used (in SQLite at most once a minute per block: reads stay cheap).
    func touch(_ key: String) {
        let now = Self.now()
        lock.withLock {
            hits += 1
            if let last = lastTouch[key], now - last < 60 { return }
            lastTouch[key] = now
            try? db.run("UPDATE blocks SET last_used = ? WHERE key = ?", [.int(now), .text(key)])
        }
    }

    func drop(_ key: String) {
        unlink(file(key))
        lock.withLock {
            if let size = (try? db.first("SELECT size FROM blocks WHERE key = ?", [.text(key)]) { $0.int(0) }) ?? nil {
                total -= size
            }
            try? db.run("DELETE FROM blocks WHERE key = ?", [.text(key)])
        }
    }

    /// Evicts least recently used blocks down to 90 % of the limit, never a pinned file's.
    func evictIfNeeded() {
        var overLimitNow = false
        let victims: [(String, Int64)] = lock.withLock {
            guard total > limit else { overLimit = false; return [] }
            var chosen: [(String, Int64)] = []
            var freed: Int64 = 0
            var looked = 0
            try? db.query("""
                SELECT key, size FROM blocks WHERE substr(key, 1, 64) NOT IN (SELECT hash FROM pinned_hashes)
                ORDER BY last_used LIMIT 256
                """) { row in
                looked += 1
                if total - freed > limit * 9 / 10 {
                    chosen.append((row.text(0), row.int(1)))
                    freed += row.int(1)
                }
            }
            // Nothing left to evict and still over: pinned blocks alone fill the cache.
            let over = looked < 256 && total - freed > limit
            overLimitNow = over && !overLimit
            overLimit = over
            for (key, size) in chosen {
                try? db.run("DELETE FROM blocks WHERE key = ?", [.text(key)])
                total -= size
                lastTouch.removeValue(forKey: key)
            }
            return chosen
        }
        for (key, _) in victims { unlink(file(key)) }
        if overLimitNow {
            FuseLog.error("pinned files fill more than the cache limit (\(limit) bytes): they are all kept, over the limit, until some are unpinned")
        }
    }

    private static func now() -> Int64 { Int64(Date().timeIntervalSince1970) }
}

extension BlockCache {
    /// The block's file if it is present with its expected length (counted as a hit), for
    /// answering a read by splicing from it. A torn block is dropped.
    public func verifiedFile(_ key: String, expected: Int) -> String? {
        let path = file(key)
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        guard Int(info.st_size) == expected else {
            drop(key)
            return nil
        }
        touch(key)
        return path
    }

    /// Asks the kernel to read a cached block into the page cache ahead of use.
    public func willNeed(_ key: String) {
        let fd = open(file(key), O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = posix_fadvise(fd, 0, 0, Int32(POSIX_FADV_WILLNEED))
        close(fd)
    }

    /// True if the block is present (without counting a hit or checking it).
    public func contains(_ key: String) -> Bool {
        access(file(key), F_OK) == 0 || isInline(key)
    }
}
