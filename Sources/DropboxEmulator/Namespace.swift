import SQLiteStore
import Foundation

/// The emulated Dropbox namespace: one account's tree of files and folders, persisted in a
/// data directory (`meta.sqlite` for metadata, `blobs/` for content, `staging/` for uploads in
/// progress) so that it survives restarts with its cursors still valid.
///
/// Every path has exactly one row: live, or a tombstone once deleted. Each write takes the
/// next value of a namespace-wide change counter and stamps it on every row it touches, so a
/// cursor is just "changes after counter value N" and `list_folder/continue` is a range query.
///
/// Concurrency: the SQLite connection, the counter and `usedBytes` are guarded by `lock`;
/// every public method takes it for its whole duration. No method does network I/O.
final class Namespace: @unchecked Sendable {
    let directory: URL
    let quota: Int64
    /// Changes with every wipe of the data directory; cursors from another epoch get `reset`.
    private(set) var epoch: String = ""
    let changes = ChangeNotifier()

    private let lock = NSLock()
    // Guarded by `lock`:
    private let db: SQLiteDatabase
    private var seq: Int64 = 0
    private var usedBytes: Int64 = 0
    /// Running content hashers of sequential upload sessions, by session id.
    var sessionHashers: [String: ContentHasher] = [:]
    /// Sequential sessions with an append streaming right now.
    var busySessions: Set<String> = []
    /// Blobs of revisions forgotten in the current write, to collect once it commits.
    var droppedBlobs: [String] = []
    /// Names refused on top of `DropboxPath.disallowedNames` (lower case; a test control:
    /// Dropbox's rules grow, and a client must cope with a refusal it could not foresee).
    var refusedNames: Set<String> = []
    /// Revisions handed out in the current write.
    private var revisionsInSeq = 0
    /// Nothing may be written directly under the root (a team space's top: `TeamSpace`).
    private var topLevelProtected = false
    /// A batch of writes runs as one transaction (`inOneTransactionLocked`).
    private var batchOpen = false
    /// While a `finish_batch` commits: folders found live (their lower-case paths), which
    /// stay so until it ends, as a commit makes files and folders but never removes or moves
    /// one. A batch's files are mostly in a few folders, and looking their parent up twice
    /// for each was a fifth of the commit's time. Emptied when an entry fails (its
    /// savepoint may have undone folders it made).
    var foldersLiveInBatch: [String: Entry]?
    /// Lookups of a live entry by path since start: what a write costs the store, counted
    /// (tests check a deep write stays a few lookups, without timing it).
    private(set) var entryLookups = 0

    // Paths as strings, joined by hand: building a URL per file (several per upload) took
    // 4 % of the emulator's CPU in a batch of small uploads.
    let blobsPath: String
    let stagingPath: String
    func blobFile(_ name: String) -> String { blobsPath + "/" + name }

    init(directory: URL, quota: Int64) throws {
        self.directory = directory
        self.quota = quota
        blobsPath = directory.path + "/blobs"
        stagingPath = directory.path + "/staging"
        let fm = FileManager.default
        for sub in ["blobs", "staging"] {
            try fm.createDirectory(at: directory.appendingPathComponent(sub), withIntermediateDirectories: true)
        }
        db = try SQLiteDatabase(path: directory.appendingPathComponent("meta.sqlite").path, exclusive: true)
        // Each commit of a `finish_batch` is a savepoint, whose undo log SQLite keeps in a
        // temporary file (in /tmp, whatever disk the data is on) unless told to keep it in
        // memory: writing it took a quarter of the emulator's CPU while 1,000 commits ran.
        // These logs hold one commit's pages, so memory stays small.
        try db.execute("PRAGMA temp_store=MEMORY")
        try Schema.create(in: db)
        seq = Int64(try metaValue("seq") ?? "0") ?? 0
        if let existing = try metaValue("epoch") {
            epoch = existing
        } else {
            epoch = Identifiers.random(12)
            try setMeta("epoch", epoch)
        }
        usedBytes = try db.first("SELECT COALESCE(SUM(size), 0) FROM entries WHERE is_deleted = 0") { $0.int(0) } ?? 0
        try removeStaleStaging()
    }

    /// Runs `body` with the lock held.
    func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    // MARK: Reads

    var spaceUsed: Int64 { locked { usedBytes } }
    var currentSeq: Int64 { locked { seq } }
    var currentSeqLocked: Int64 { seq }

    /// Resolves a path argument (`/a/b` or `id:…[/rest]`) to a path.
    func resolve(_ argument: PathArgument) throws -> DropboxPath {
        switch argument {
        case .path(let raw): return raw.isEmpty ? .root : try PathArgument.validated(raw)
        case .rev: throw NamespaceFailure.lookup(.notFound)  // see `resolveRevision`
        case .id(let id, let rest):
            let found = try locked {
                try db.first("SELECT path_display FROM entries WHERE id = ? AND is_deleted = 0", [.text("id:" + id)]) {
                    $0.text(0)
                }
            }
            guard let display = found else { throw NamespaceFailure.lookup(.notFound) }
            return rest.isEmpty ? DropboxPath(display: display) : try PathArgument.validated(display + rest)
        }
    }

    /// The entry at `path` for `get_metadata`: live, or its tombstone when `includeDeleted`.
    func metadataEntry(_ path: DropboxPath, includeDeleted: Bool) throws -> Entry {
        try locked {
            if let live = try liveEntryLocked(path) { return live }
            try requireNoFileAncestor(path, failure: .lookup(.notFolder))
            if includeDeleted, let tombstone = try entryLocked(path), tombstone.isDeleted { return tombstone }
            throw NamespaceFailure.lookup(.notFound)
        }
    }

    /// A live file for download, with its content opened (nil for an empty file). Opening
    /// under the lock means a concurrent overwrite cannot delete the bytes from under us.
    func openForDownload(_ path: DropboxPath) throws -> (Entry, Int32?) {
        try locked {
            guard let entry = try liveEntryLocked(path) else {
                try requireNoFileAncestor(path, failure: .lookup(.notFolder))
                throw NamespaceFailure.lookup(.notFound)
            }
            guard !entry.isFolder else { throw NamespaceFailure.lookup(.notFile) }
            return (entry, try openBlobLocked(entry.blob))
        }
    }

    // MARK: Helpers for the write and listing extensions (lock held by the caller)

    /// Opens a content file for reading (nil for empty content, which has none). Done under
    /// the lock, so a concurrent overwrite cannot delete the bytes before they are opened.
    func openBlobLocked(_ blob: String?) throws -> Int32? {
        guard let blob else { return nil }
        let fd = open(blobFile(blob), O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        return fd
    }

    func liveEntryLocked(_ path: DropboxPath) throws -> Entry? {
        if path.isRoot { return nil }
        entryLookups += 1
        return try db.first("SELECT \(Entry.columns) FROM entries WHERE path_lower = ? AND is_deleted = 0",
                            [.text(path.lower)], map: Entry.init(row:))
    }

    func entryLocked(_ path: DropboxPath) throws -> Entry? {
        try db.first("SELECT \(Entry.columns) FROM entries WHERE path_lower = ?", [.text(path.lower)],
                     map: Entry.init(row:))
    }

    /// Live entries strictly inside `folder`, parents before children.
    func liveDescendantsLocked(_ folder: DropboxPath) throws -> [Entry] {
        var result: [Entry] = []
        let (low, high) = Self.subtreeBounds(folder)
        try db.query("SELECT \(Entry.columns) FROM entries WHERE path_lower > ? AND path_lower < ? AND is_deleted = 0 ORDER BY path_lower",
                     [.text(low), .text(high)]) { result.append(Entry(row: $0)) }
        return result
    }

    /// Exclusive bounds of the keys strictly inside `folder`: "/a/" < key < "/a0" ('0' follows '/').
    static func subtreeBounds(_ folder: DropboxPath) -> (String, String) {
        (folder.lower + "/", folder.lower + "0")
    }

    /// Throws `failure` when some ancestor of `path` is a file.
    func requireNoFileAncestor(_ path: DropboxPath, failure: NamespaceFailure) throws {
        if let nearest = try nearestAncestorLocked(of: path).entry, !nearest.isFolder { throw failure }
    }

    /// Walks up from `path`'s parent to the first ancestor there (nil: none below the root),
    /// passing the `missing` ones (innermost first). A live entry's ancestors are all live
    /// folders, so what lies above the first one found needs no lookup: asking every level
    /// cost a write in a chain 1,000 folders deep a million characters folded.
    func nearestAncestorLocked(of path: DropboxPath) throws -> (entry: Entry?, missing: [DropboxPath]) {
        var missing: [DropboxPath] = []
        var current = path.parent
        if let folder = foldersLiveInBatch?[current.lower] { return (folder, missing) }
        while !current.isRoot {
            if let entry = try liveEntryLocked(current) {
                if entry.isFolder, missing.isEmpty { foldersLiveInBatch?[current.lower] = entry }
                return (entry, missing)
            }
            missing.append(current)
            current = current.parent
        }
        return (nil, missing)
    }

    func nextSeqLocked() -> Int64 {
        seq += 1
        revisionsInSeq = 0
        return seq
    }

    /// A revision for one file written by the write `seq`.
    func nextRevLocked(seq: Int64) -> String {
        revisionsInSeq += 1
        return Identifiers.rev(seq: seq, index: revisionsInSeq)
    }

    /// Runs a write in one transaction, persisting the counter and space used; on failure the
    /// in-memory copies are reloaded so they never drift from the database. Inside a batch
    /// (`inOneTransactionLocked`) it is a savepoint: its failure undoes this write alone.
    func writeTransactionLocked<T>(_ body: () throws -> T) throws -> T {
        let write = {
            let value = try body()
            try self.setMeta("seq", String(self.seq))
            return value
        }
        do {
            // The batch writes the counter once, as it commits.
            if batchOpen { return try db.savepoint(body) }
            let result = try db.transaction(write)
            changes.notify()
            return result
        } catch {
            reloadUsedBytesLocked()
            throw error
        }
    }

    /// Runs many writes (a `finish_batch`'s commits) as one transaction: each write's pages
    /// go to the log once for all, not once per write (1,000 commits of 4 KiB files spent
    /// more than half their time writing the log). If the transaction itself fails, the
    /// writes it held are undone together (their sessions open again, each data file still
    /// where it was).
    func inOneTransactionLocked<T>(_ body: () throws -> T) throws -> T {
        try db.run("BEGIN IMMEDIATE")
        batchOpen = true
        do {
            let result = try body()
            batchOpen = false
            try setMeta("seq", String(seq))
            try db.run("COMMIT")
            changes.notify()
            return result
        } catch {
            batchOpen = false
            try? db.run("ROLLBACK")
            reloadUsedBytesLocked()
            throw error
        }
    }

    private func reloadUsedBytesLocked() {
        usedBytes = (try? db.first("SELECT COALESCE(SUM(size), 0) FROM entries WHERE is_deleted = 0") { $0.int(0) }) ?? usedBytes
    }

    /// From now on a write that would add, change or remove an entry of the root itself
    /// fails with `no_write_permission`, and its transaction changes nothing.
    func protectTopLevel() { locked { topLevelProtected = true } }

    func upsertLocked(_ entry: Entry) throws {
        if topLevelProtected && entry.path.parent.isRoot { throw NamespaceFailure.write(.noWritePermission) }
        try db.run("INSERT OR REPLACE INTO entries (path_lower, parent_lower, \(Entry.columns)) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                   entry.sqlValues)
    }

    func adjustUsedLocked(by delta: Int64) { usedBytes += delta }
    var usedBytesLocked: Int64 { usedBytes }
    var database: SQLiteDatabase { db }

    /// Deletes blob files no live entry refers to any more.
    func collectBlobsLocked(_ names: [String]) throws {
        for name in Set(names) {
            let referenced = try db.first("""
                SELECT 1 FROM entries WHERE blob = ?1 AND is_deleted = 0
                UNION ALL SELECT 1 FROM revisions WHERE blob = ?1 LIMIT 1
                """, [.text(name)]) { _ in true } ?? false
            if !referenced { unlink(blobFile(name)) }
        }
    }

    /// A new file name in `staging/` for an upload in progress.
    func newStagingFile() -> String {
        stagingPath + "/upload-" + Identifiers.random(16)
    }

    private func metaValue(_ key: String) throws -> String? {
        try db.first("SELECT value FROM meta WHERE key = ?", [.text(key)]) { $0.text(0) }
    }

    private func setMeta(_ key: String, _ value: String) throws {
        try db.run("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", [.text(key), .text(value)])
    }

    /// Single-request uploads interrupted by a restart leave files in staging. Session data
    /// files are kept, since their sessions outlive a restart as they do on Dropbox (an
    /// emulator before 2026-11 kept them in staging: they move to `blobs/`, where they are now).
    private func removeStaleStaging() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: stagingPath)
        for name in names where name.hasPrefix("upload-") {
            unlink(stagingPath + "/" + name)
        }
        for name in names where name.hasPrefix("session-") {
            rename(stagingPath + "/" + name, blobFile(name))
        }
    }

    /// Starts cursors over: every cursor handed out before now gets `reset`.
    func resetCursors() throws {
        try locked {
            epoch = Identifiers.random(12)
            try setMeta("epoch", epoch)
        }
        changes.notify()
    }
}

enum Schema {
    static func create(in db: SQLiteDatabase) throws {
        try db.execute("""
            CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS entries (
                path_lower TEXT PRIMARY KEY,
                parent_lower TEXT NOT NULL,
                path_display TEXT NOT NULL,
                id TEXT NOT NULL,
                is_folder INTEGER NOT NULL,
                is_deleted INTEGER NOT NULL,
                size INTEGER NOT NULL,
                rev TEXT,
                content_hash TEXT,
                client_modified INTEGER NOT NULL,
                server_modified INTEGER NOT NULL,
                blob TEXT,
                change_seq INTEGER NOT NULL
            ) WITHOUT ROWID;
            CREATE INDEX IF NOT EXISTS entries_parent ON entries(parent_lower, path_lower);
            CREATE INDEX IF NOT EXISTS entries_id ON entries(id);
            CREATE INDEX IF NOT EXISTS entries_change ON entries(change_seq, path_lower);
            CREATE INDEX IF NOT EXISTS entries_blob ON entries(blob) WHERE blob IS NOT NULL;
            CREATE TABLE IF NOT EXISTS tokens (
                token TEXT PRIMARY KEY,
                kind TEXT NOT NULL,
                expires INTEGER,
                family TEXT,
                scope TEXT
            );
            CREATE TABLE IF NOT EXISTS auth_codes (
                code TEXT PRIMARY KEY,
                client_id TEXT NOT NULL,
                challenge TEXT,
                access_type INTEGER NOT NULL,  -- 1 offline, 0 online, 2 legacy
                redirect_uri TEXT,
                scope TEXT,
                expires INTEGER NOT NULL
            );
            CREATE TABLE IF NOT EXISTS revisions (
                rev TEXT PRIMARY KEY,
                id TEXT NOT NULL,
                path_display TEXT NOT NULL,
                size INTEGER NOT NULL,
                content_hash TEXT,
                blob TEXT,
                client_modified INTEGER NOT NULL,
                server_modified INTEGER NOT NULL
            );
            CREATE INDEX IF NOT EXISTS revisions_id ON revisions(id);
            CREATE INDEX IF NOT EXISTS revisions_blob ON revisions(blob) WHERE blob IS NOT NULL;
            CREATE TABLE IF NOT EXISTS shared_links (
                url TEXT PRIMARY KEY,
                id TEXT NOT NULL,
                expires INTEGER,
                created INTEGER NOT NULL
            );
            CREATE INDEX IF NOT EXISTS shared_links_id ON shared_links(id);
            CREATE TABLE IF NOT EXISTS upload_sessions (
                id TEXT PRIMARY KEY,
                concurrent INTEGER NOT NULL,
                closed INTEGER NOT NULL,
                length INTEGER NOT NULL,
                block_digests BLOB,
                created INTEGER NOT NULL
            );
            CREATE TABLE IF NOT EXISTS session_pieces (
                session_id TEXT NOT NULL,
                offset INTEGER NOT NULL,
                length INTEGER NOT NULL,
                block_digests BLOB NOT NULL,
                PRIMARY KEY (session_id, offset)
            );
            """)
    }
}
