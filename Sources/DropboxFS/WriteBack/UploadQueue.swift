import Foundation
import SQLiteStore

/// One closed file waiting to reach Dropbox, as kept on disk.
public struct QueuedUpload: Sendable, Equatable {
    public var id: Int64
    /// The Dropbox path it goes to (display casing).
    public var path: String
    /// Its bytes: a sealed staging file in the cache directory.
    public var staging: String
    public var size: Int64
    /// The file's modification time (`client_modified` takes the seconds).
    public var modified: timespec
    /// The revision it replaces (`WriteMode.update`), or nil for a new file (`add`).
    public var baseRev: String?
    /// A concurrent upload session already under way, and the chunks the server has.
    public var sessionID: String?
    public var sentChunks: Set<Int64> = []
    /// The machine's boot the record was written in (`UploadQueue.bootID`).
    public var bootID = UploadQueue.bootID
    /// The staging file's bytes reached the disk before this was recorded as true: they
    /// survive a power loss. Until then only the same boot may trust them.
    public var flushed = false
    /// The staging file's content hash, taken when it was flushed: after a reboot, bytes
    /// that no longer match it are not uploaded (nil: not flushed yet, flushed by an fsync,
    /// which waits for Dropbox instead, or an older record).
    public var contentHash: String?
    /// Content hashes of commits of ours at this path that may have happened unheard of
    /// (`LocalVersion.maybeCommitted`): kept so that a mount killed again still knows them.
    public var ownCommits: [String] = []

    public static func == (a: QueuedUpload, b: QueuedUpload) -> Bool {
        a.id == b.id && a.path == b.path && a.staging == b.staging && a.size == b.size && a.modified.tv_sec == b.modified.tv_sec
            && a.modified.tv_nsec == b.modified.tv_nsec && a.baseRev == b.baseRev && a.sessionID == b.sessionID && a.sentChunks == b.sentChunks
            && a.bootID == b.bootID && a.flushed == b.flushed && a.contentHash == b.contentHash && a.ownCommits == b.ownCommits
    }

    /// Written in an earlier boot of the machine (a power loss or a reboot since).
    public var isFromEarlierBoot: Bool { !bootID.isEmpty && bootID != UploadQueue.bootID }

    /// Whether the staging file can be trusted to hold what was written: flushed, or written
    /// in this boot (a crash or kill -9 leaves the kernel's page cache intact; a power loss
    /// or a reboot may have lost bytes not yet on disk, leaving zeros or a short file). A
    /// record of a dropboxfs from before boots were recorded is trusted, as it was then.
    public var isTrusted: Bool { flushed || !isFromEarlierBoot }
}

/// The durable upload queue (SQLite, its own file beside the metadata): a closed file is
/// recorded here before `close` returns, and removed only once Dropbox has it. A crash or a
/// `kill -9` loses nothing that was recorded; the next mount carries on from here, reusing
/// an upload session's chunks the server already has. A power loss may lose what had not
/// reached the disk yet: records say whether their staging file had (`flushed`), and one
/// that had not, from an earlier boot, is never uploaded (doc/SEMANTICS.md, power loss).
///
/// Lock: `lock` guards the connection; no method does network I/O.
public final class UploadQueue: @unchecked Sendable {
    let lock = NSLock()
    let db: SQLiteDatabase

    public init(path: String) throws {
        // Held exclusively, as the store's file is: no fcntl lock pair per transaction (a
        // close, an unlink and a mkdir write one each; 5 % of an `rm -r`'s time). Read it
        // with `sqlite3` once unmounted; `dropboxfs status` tells what it holds meanwhile.
        db = try SQLiteDatabase(path: path, exclusive: true)
        try db.execute("""
            CREATE TABLE IF NOT EXISTS uploads (
                id INTEGER PRIMARY KEY,
                path TEXT NOT NULL,
                staging TEXT NOT NULL,
                size INTEGER NOT NULL,
                modified INTEGER NOT NULL,
                modified_nsec INTEGER NOT NULL,
                base_rev TEXT,
                session_id TEXT,
                sent_chunks TEXT NOT NULL DEFAULT ''
            );
            """)
        // Queues written before records knew their boot (`isTrusted` trusts those records).
        var columns: Set<String> = []
        try db.query("PRAGMA table_info(uploads)") { columns.insert($0.text(1)) }
        if !columns.contains("boot_id") { try db.execute("ALTER TABLE uploads ADD COLUMN boot_id TEXT NOT NULL DEFAULT ''") }
        if !columns.contains("flushed") { try db.execute("ALTER TABLE uploads ADD COLUMN flushed INTEGER NOT NULL DEFAULT 0") }
        if !columns.contains("content_hash") { try db.execute("ALTER TABLE uploads ADD COLUMN content_hash TEXT") }
        if !columns.contains("own_commits") { try db.execute("ALTER TABLE uploads ADD COLUMN own_commits TEXT NOT NULL DEFAULT ''") }
        try createDeletesTable()
        try createFoldersTable()
        try createMovesTable()
    }

    /// This boot of the machine (Linux's random boot id; empty where there is none, which
    /// makes every record count as written in this boot).
    public static let bootID: String = {
        let text = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)
        return text?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
    }()

    public func all() throws -> [QueuedUpload] {
        try lock.withLock {
            var result: [QueuedUpload] = []
            try db.query("SELECT id, path, staging, size, modified, modified_nsec, base_rev, session_id, sent_chunks, boot_id, flushed, content_hash, own_commits FROM uploads ORDER BY id") { row in
                result.append(QueuedUpload(
                    id: row.int(0), path: row.text(1), staging: row.text(2), size: row.int(3),
                    modified: timespec(tv_sec: Int(row.int(4)), tv_nsec: Int(row.int(5))), baseRev: row.optionalText(6),
                    sessionID: row.optionalText(7), sentChunks: Set(row.text(8).split(separator: ",").compactMap { Int64($0) }),
                    bootID: row.text(9), flushed: row.int(10) != 0, contentHash: row.optionalText(11),
                    ownCommits: row.text(12).split(separator: ",").map(String.init)))
            }
            return result
        }
    }

    /// Records (or rewrites) an upload, and in the same transaction drops the ones it replaces.
    public func save(_ upload: QueuedUpload, replacing: [Int64] = []) throws {
        try durable {
            try db.transaction {
                try insert(upload)
                for id in replacing { try db.run("DELETE FROM uploads WHERE id = ?", [.int(id)]) }
            }
        }
    }

    /// Saves each of `uploads`, all in one transaction: a folder renamed with hundreds of
    /// queued files below it saved each in a transaction of its own, a sixth of the daemon's
    /// CPU while a folder was renamed back and forth as files were made in it.
    public func save(_ uploads: [QueuedUpload]) throws {
        guard !uploads.isEmpty else { return }
        try durable { try db.transaction { for upload in uploads { try insert(upload) } } }
    }

    private func insert(_ upload: QueuedUpload) throws {
        try db.run("INSERT OR REPLACE INTO uploads (id, path, staging, size, modified, modified_nsec, base_rev, session_id, sent_chunks, boot_id, flushed, content_hash, own_commits) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                   [.int(upload.id), .text(upload.path), .text(upload.staging), .int(upload.size), .int(Int64(upload.modified.tv_sec)),
                    .int(Int64(upload.modified.tv_nsec)), .optional(upload.baseRev), .optional(upload.sessionID),
                    .text(upload.sentChunks.sorted().map(String.init).joined(separator: ",")), .text(upload.bootID),
                    .int(upload.flushed ? 1 : 0), .optional(upload.contentHash), .text(upload.ownCommits.joined(separator: ","))])
    }

    /// Records that these uploads' staging files reached the disk, holding bytes of this hash.
    public func markFlushed(_ uploads: [(id: Int64, contentHash: String?)]) throws {
        try durable {
            try db.transaction {
                for upload in uploads {
                    try db.run("UPDATE uploads SET flushed = 1, content_hash = ? WHERE id = ?", [.optional(upload.contentHash), .int(upload.id)])
                }
            }
        }
    }

    /// Makes every record written so far durable on disk (they are written with
    /// `synchronous=NORMAL`: a crash of the process keeps them, a power loss may not).
    public func syncToDisk() throws {
        try durable { try db.execute("PRAGMA wal_checkpoint(FULL)") }
    }

    public func remove(_ ids: [Int64]) throws {
        try durable { try db.transaction { for id in ids { try db.run("DELETE FROM uploads WHERE id = ?", [.int(id)]) } } }
    }

    /// The largest id recorded (0 when empty): new versions are numbered after it.
    public var maxID: Int64 {
        let found = try? lock.withLock { try db.first("SELECT COALESCE(MAX(id), 0) FROM uploads") { $0.int(0) } }
        return (found ?? nil) ?? 0
    }

    /// Runs a change; a full disk is ENOSPC for whoever is closing a file.
    func durable(_ body: () throws -> Void) throws {
        try lock.withLock {
            do { try body() } catch let failure as SQLiteDatabase.Failure where failure.code == 13 /* SQLITE_FULL */ {
                throw FSError.noSpace
            }
        }
    }
}
