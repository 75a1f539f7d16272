import DropboxAPI
import Foundation
import SQLiteStore

/// The mount's metadata cache in SQLite (WAL): every node seen, which folders are fully
/// listed, and the account-wide change cursor. It survives remounts, so an unchanged tree
/// is served without listing Dropbox again.
///
/// Lock: `lock` guards the connection; every method takes it for its whole duration and
/// none does network I/O.
public final class MetadataStore: @unchecked Sendable {
    private let lock = NSLock()
    private let db: SQLiteDatabase
    /// Nodes and listed folders read from SQLite, kept in memory: `ls -l` asks for every
    /// entry's attributes. Emptied by every write.
    /// Keyed by bytes (`ExactKey`): Dropbox keeps NFC and NFD spellings of a name apart.
    private var nodeCache: [ExactKey: Node?] = [:]
    /// Transactions that changed kept modes (`replaceModes`), for tests to count.
    private var modeWrites = 0
    var modeWritesMade: Int { lock.withLock { modeWrites } }
    private var listedCache: [ExactKey: Bool] = [:]
    /// Folders this mount's mkdir made and Dropbox may not have yet (a count per path): such
    /// a folder is empty when made, so when its entry comes through the change feed it counts
    /// as listed at once, and the children put there right after (uploads from here, another
    /// client's files) are kept. Dropped as children of a folder not yet listed, they were
    /// missing from it until they changed again.
    private var foldersBeingMade: [String: Int] = [:]
    /// Where folders listed here land while this mount's move of them is under way (a count
    /// per path): the change feed may bring the move before the call returns, a delete of
    /// the source and the moved entries at their new paths; such a folder counts as listed
    /// when its entry comes, so the entries below it are kept (dropped as children of a
    /// folder not listed, a file the kernel held in it was "not found"). A key of a landing
    /// for a move that may never have been made (begun ahead of the first catch-up,
    /// `landAhead`, or left by a call whose answer was lost) holds only for a folder that
    /// comes with the id it had at the source: another client may have put a folder of its
    /// own at the path meanwhile, which the store never listed.
    private var landingFolders: [LandingKey: Int] = [:]
    /// The moves under way, by ticket (`Landing`).
    private var landings: [Int: Landing] = [:]
    private var landingsBegun = 0
    /// Moves whose entries were taken along before the change feed brought them.
    private var movesAhead = MovesAhead()
    /// Landings of moves that may have been made without the mount hearing so: begun before
    /// the first catch-up (`landAhead`), or left by a call whose answer was lost
    /// (`endLanding(_:answerLost:)`). Each ends once a catch-up begun after it was left has
    /// read the change feed to its end (`feedPassed`), by the number it was left with.
    private var landingsUntilFeedEnd: [(ticket: LandingTicket, number: Int)] = []
    private var landingsLeft = 0
    /// Listings carried across another client's moves, within one catch-up.
    private var movedElsewhere = ListingsMovedElsewhere()

    public init(path: String) throws {
        db = try SQLiteDatabase(path: path, exclusive: true)
        // The log is copied into the database every 10,000 pages (40 MB), not every 1,000: the
        // first listing of a folder of 100,000 files rewrote the same pages at each copy and
        // waited for 21 disk flushes (a tenth of the daemon's CPU in the listing, 15 % of its
        // time). With the exclusive lock the log's index is in memory: 80 KB at most.
        try db.execute("PRAGMA wal_autocheckpoint=10000")
        try db.execute("""
            CREATE TABLE IF NOT EXISTS nodes (
                path_lower TEXT PRIMARY KEY,
                parent_lower TEXT NOT NULL,
                name TEXT NOT NULL,
                is_folder INTEGER NOT NULL,
                size INTEGER NOT NULL,
                rev TEXT,
                content_hash TEXT,
                modified INTEGER NOT NULL,
                id TEXT NOT NULL
            ) WITHOUT ROWID;
            -- A folder's children, and one child by its exact name (a lookup): without the
            -- name, each lookup read every child (3.4 ms each in a folder of 10,000). It
            -- holds what `stat` shows too (`attributeColumns`), so a listing reads the index
            -- alone: looking each child up in the table was a third of a `find` over a
            -- listed tree of 1,000,000 entries (the cache grows by a third for it).
            CREATE INDEX IF NOT EXISTS nodes_children ON nodes(parent_lower, name, is_folder, size, modified, rev);
            DROP INDEX IF EXISTS nodes_parent_name;
            DROP INDEX IF EXISTS nodes_parent;
            -- Folders by id: a folder the change feed brings at a new path may be one this
            -- mount listed elsewhere, moved by another client (`ListingsMovedElsewhere`).
            CREATE INDEX IF NOT EXISTS nodes_folder_ids ON nodes(id) WHERE is_folder = 1;
            CREATE TABLE IF NOT EXISTS listed (path_lower TEXT PRIMARY KEY) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS times (rev TEXT PRIMARY KEY, sec INTEGER, nsec INTEGER NOT NULL) WITHOUT ROWID;
            -- Permission bits, the owner and group a chown gave (NULL: the mount's), and user.*
            -- extended attributes (`UserAttributes.encoded`; NULL: none), set here
            -- (`FileModes`): Dropbox keeps none. Not cleared with the nodes: they are this
            -- machine's, not a copy of Dropbox's.
            CREATE TABLE IF NOT EXISTS modes (path_lower TEXT PRIMARY KEY, mode INTEGER NOT NULL, uid INTEGER, gid INTEGER,
                                              xattrs BLOB) WITHOUT ROWID;
            -- Folders' modification times kept here (`FolderTimes`), by Dropbox folder id, which
            -- follows the folder wherever it is moved, with the path it was last seen at (or by
            -- "waiting:" and the path, between mounts, for a folder whose mkdir is still queued).
            -- This machine's too.
            CREATE TABLE IF NOT EXISTS folder_times (id TEXT PRIMARY KEY, path_lower TEXT NOT NULL, sec INTEGER NOT NULL,
                                                     nsec INTEGER NOT NULL) WITHOUT ROWID;
            """)
        // A cache from before `times` kept nanoseconds alone: carried over once.
        if try db.first("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'nanos'", map: { _ in true }) == true {
            try db.execute("""
                INSERT OR IGNORE INTO times (rev, sec, nsec) SELECT rev, NULL, nsec FROM nanos;
                DROP TABLE nanos;
                """)
        }
        // A cache from before owners were kept: its modes table gains their columns, empty.
        if try db.first("SELECT 1 FROM pragma_table_info('modes') WHERE name = 'uid'", map: { _ in true }) != true {
            try db.execute("ALTER TABLE modes ADD COLUMN uid INTEGER; ALTER TABLE modes ADD COLUMN gid INTEGER;")
        }
        // One from before extended attributes were kept: the column is added, empty.
        if try db.first("SELECT 1 FROM pragma_table_info('modes') WHERE name = 'xattrs'", map: { _ in true }) != true {
            try db.execute("ALTER TABLE modes ADD COLUMN xattrs BLOB;")
        }
    }

    /// A node by key; `remember: false` for a one-off question that should not displace
    /// what `stat` keeps asking for.
    public func node(_ pathLower: String, remember: Bool = true) throws -> Node? {
        if pathLower.isEmpty { return .root }
        return try lock.withLock {
            if let cached = nodeCache[ExactKey(pathLower)] { return cached }
            let node = try db.first(Self.selectByPath, [.text(pathLower)], map: Self.node)
            guard remember else { return node }
            if nodeCache.count >= Self.nodesRemembered { nodeCache.removeAll(keepingCapacity: true) }
            nodeCache[ExactKey(pathLower)] = node
            return node
        }
    }

    /// Rows written so far: the same at two moments, every node read between them is as the
    /// store holds it still (`FuseMount`: a folder's snapshot hands its entries' attributes
    /// as taken only while this has not moved).
    public var writeCount: Int64 { lock.withLock { db.totalChanges } }

    /// Enough for `ls -l` of a folder of 10,000 (a node held here costs about 300 bytes:
    /// 200,000 held 60 MiB).
    static let nodesRemembered = 20_000

    /// A child by name: its exact name first, then case-insensitively (by lower-case path).
    /// The exact match also finds a name Dropbox folds unlike `CaseFolding` (its key is
    /// Dropbox's `path_lower`).
    public func child(of folderLower: String, named name: String) throws -> Node? {
        let exact = try lock.withLock {
            try db.first(Self.selectChildByName, [.text(folderLower), .text(name)], map: Self.node)
        }
        return try exact ?? node(Node.child(folderLower, name))
    }

    /// A folder's children with what `stat` shows of them (`Node.attributesOnly`), in the
    /// order of the index by name (no sort: `find` opens a million entries' folders);
    /// `complete` adds each one's revision, content hash and id.
    public func children(_ folderLower: String, complete: Bool = false) throws -> [Node] {
        try lock.withLock {
            var result: [Node] = []
            try db.query("\(complete ? Self.select : Self.selectAttributes) WHERE parent_lower = ? ORDER BY name", [.text(folderLower)]) {
                result.append(complete ? Self.node($0) : Self.attributes($0))
            }
            return result
        }
    }

    public func isListed(_ folderLower: String) throws -> Bool {
        try lock.withLock {
            if let cached = listedCache[ExactKey(folderLower)] { return cached }
            let listed = try db.first("SELECT 1 FROM listed WHERE path_lower = ?", [.text(folderLower)]) { _ in true } ?? false
            listedCache[ExactKey(folderLower)] = listed
            return listed
        }
    }

    /// The folder a listing is of, as the store had it when the listing began: its pages
    /// are stored only while the store still has that folder there.
    public struct ListedFolder: Sendable {
        public var pathLower: String
        /// The folder's Dropbox id then (nil: the root, or a folder the store did not have).
        var id: String?
        /// Whether the store had children of it then. If not, nothing there can be stale at
        /// the end: until the folder is listed the change feed stores nothing new in it (only
        /// changes to what the pages stored), and the mount's own moves into it are on
        /// Dropbox after the listing's start.
        var hadChildren: Bool
    }

    public func listingStarts(_ folderLower: String) throws -> ListedFolder {
        let id = folderLower.isEmpty ? nil : try node(folderLower, remember: false)?.id
        let hadChildren = try lock.withLock {
            try db.first("SELECT 1 FROM nodes WHERE parent_lower = ? LIMIT 1", [.text(folderLower)]) { _ in true } ?? false
        }
        return ListedFolder(pathLower: folderLower, id: id, hadChildren: hadChildren)
    }

    /// Stores a page of a folder's listing as it arrives. Children the store had already
    /// stay until the listing is finished (`finishListing`): a file the kernel knows never
    /// vanishes for the length of a listing. ENOENT once the folder has left its place: a
    /// rename or removal learnt meanwhile (the mount's own move, or the change feed) moved
    /// what the store had, and the page, which Dropbox answered before, speaks of the old
    /// place (stored there, a renamed folder's files were out of the view, and the old
    /// place counted as listed with them).
    public func storeListingPage(_ nodes: [Node], of folder: ListedFolder) throws {
        try lock.withLock {
            forgetCachedLocked()
            try requireInPlaceLocked(folder)
            try db.transaction {
                for node in nodes { try upsertLocked(node) }
            }
        }
    }

    private func requireInPlaceLocked(_ folder: ListedFolder) throws {
        guard let id = folder.id else { return }
        guard let now = try db.first(Self.selectByPath, [.text(folder.pathLower)], map: Self.node),
              now.id == id || now.id.isEmpty || id.isEmpty else { throw FSError.notFound }
    }

    /// The listing of a folder is complete: its children are exactly `children` (keys; a
    /// folder that had none stored has no others to lose: `ListedFolder.hadChildren`).
    /// ENOENT if the folder left its place meanwhile (`storeListingPage`); what its pages
    /// stored there goes.
    public func finishListing(_ folder: ListedFolder, children: [String]) throws {
        let folderLower = folder.pathLower
        try lock.withLock {
            forgetCachedLocked()
            do {
                try requireInPlaceLocked(folder)
            } catch {
                // The pages' entries went over whatever was there: a folder at that path now
                // is listed again when next needed.
                try db.transaction {
                    for key in children { try removeSubtreeLocked(key) }
                    try unlistLocked(folderLower)
                }
                throw error
            }
            try db.transaction {
                if folder.hadChildren {
                    // One set, made at its size (growing it page by page, and hashing 100,000
                    // keys twice, was a tenth of the first listing of such a folder).
                    let listed = Set(children)
                    var gone: [String] = []
                    try db.query("SELECT path_lower FROM nodes WHERE parent_lower = ?", [.text(folderLower)]) { row in
                        let key = row.text(0)
                        if !listed.contains(key) { gone.append(key) }
                    }
                    if !gone.isEmpty { FuseLog.trace("store: listed \(folderLower) again without \(gone.prefix(8))") }
                    for key in gone { try removeSubtreeLocked(key) }
                }
                try markListedLocked(folderLower)
                for (ticket, landing) in landings where Node.isAt(folderLower, orUnder: landing.source) {
                    try landLocked(folderLower, ticket: ticket)
                }
            }
        }
    }

    /// The folder's children as stored may be incomplete: it is listed again when needed.
    public func unlist(_ folderLower: String) throws {
        try lock.withLock { try unlistLocked(folderLower) }
    }

    private func unlistLocked(_ folderLower: String) throws {
        forgetCachedLocked()
        try db.run("DELETE FROM listed WHERE path_lower = ?", [.text(folderLower)])
    }

    /// Applies a page of changes from the cursor; returns what changed, for invalidation.
    /// `fromChangeFeed`: a page of the account's change feed, which tells the moves under way
    /// whether it has brought them (`Landing.arrived`).
    public func apply(_ changes: [Metadata], fromChangeFeed: Bool = false) throws -> [StoreChange] {
        try lock.withLock {
            forgetCachedLocked()
            if fromChangeFeed && !landings.isEmpty { noteArrivalsLocked(changes) }
            let followMoves = fromChangeFeed && !movesAhead.isEmpty
            return try db.transaction {
                var applied: [StoreChange] = []
                for change in changes {
                    guard let lower = change.pathLower, !lower.isEmpty else { continue }
                    let old = try db.first(Self.selectByPath, [.text(lower)], map: Self.node)
                    if let node = Node(change) {
                        if followMoves && !node.id.isEmpty { movesAhead.seen(lower, id: node.id) }
                        // Only keep what a listed folder would show, or what we already knew.
                        let parentListed = try db.first("SELECT 1 FROM listed WHERE path_lower = ?", [.text(node.parentLower)]) { _ in true } ?? false
                        let parentKnown = node.parentLower.isEmpty || parentListed
                        if parentKnown || old != nil {
                            // The feed gives each path's latest entry only: a folder removed
                            // (or moved away) and another entry put at its path comes as that
                            // entry alone. What the store had below the old folder is not the
                            // new entry's, nor is its listing.
                            if let old, old.isFolder, Self.isAnotherEntry(node, than: old) {
                                FuseLog.trace("store: \(lower) replaced by another entry, what was below it goes")
                                if fromChangeFeed { try noteRemovalLocked(old) }
                                try removeSubtreeLocked(lower)
                            }
                            try upsertLocked(node)
                            // A folder being made here is listed and empty when it comes, not
                            // when the store knew it before unlisted (`beginMakingFolder`).
                            let newHere = old.map { Self.isAnotherEntry(node, than: $0) } ?? true
                            if node.isFolder, (foldersBeingMade[lower] != nil && newHere) || landsLocked(lower, id: node.id) {
                                try markListedLocked(lower)
                            } else if node.isFolder, fromChangeFeed, newHere, try landsMovedElsewhereLocked(node) {
                                try markListedLocked(lower)
                            }
                            applied.append(StoreChange(pathLower: lower, name: node.name, old: old, new: node))
                        } else if fromChangeFeed {
                            movedElsewhere.dropped(in: node.parentLower)
                        }
                    } else if let old {
                        if fromChangeFeed, let ticket = try landingTakingAlongLocked(old) {
                            try takeAlongLocked(old, landing: ticket)
                        } else {
                            if fromChangeFeed { try noteRemovalLocked(old) }
                            try removeSubtreeLocked(lower)
                        }
                        applied.append(StoreChange(pathLower: lower, name: old.name, old: old, new: nil))
                    } else if followMoves {
                        movesAhead.removal(lower)
                    }
                }
                return applied
            }
        }
    }

    /// What a catch-up of the change feed begun now will be past once it has read the feed
    /// to its end (`feedPassed`): the moves taken along ahead of the feed so far, and the
    /// landings left until the feed's end so far.
    public struct CatchUpMarker: Sendable {
        fileprivate let movesAhead: Int
        fileprivate let landingsLeft: Int
    }

    public var catchUpMarker: CatchUpMarker {
        lock.withLock { CatchUpMarker(movesAhead: movesAhead.marker, landingsLeft: landingsLeft) }
    }

    /// A catch-up begun at `marker` has read the change feed to its end: the moves counted
    /// then are past, and the entries they took along that had been removed elsewhere before
    /// them go from where they were taken (`MovesAhead`), and the landings left until then
    /// end (`landingsUntilFeedEnd`), and what was taken along for a move whose entry the
    /// feed never brought at the target goes again (`dropUnconfirmedTakeAlongsLocked`).
    /// Returns what went, for the kernel.
    public func feedPassed(_ marker: CatchUpMarker) throws -> [StoreChange] {
        try lock.withLock {
            movedElsewhere.forget()
            let unconfirmed = dropUnconfirmedTakeAlongsLocked()
            let ending = landingsUntilFeedEnd.filter { $0.number <= marker.landingsLeft }
            landingsUntilFeedEnd.removeAll { $0.number <= marker.landingsLeft }
            for (ticket, _) in ending { endLandingLocked(ticket) }
            // The records go once their removals are written: a write that fails (a full
            // cache disk) leaves them for the next catch-up's end.
            var after = movesAhead
            let left = after.passed(marker.movesAhead)
            guard !left.isEmpty else {
                movesAhead = after
                return unconfirmed
            }
            forgetCachedLocked()
            let removed = try db.transaction {
                var removed: [StoreChange] = []
                for (path, id) in left {
                    guard let node = try db.first(Self.selectByPath, [.text(path)], map: Self.node), node.id == id else { continue }
                    FuseLog.trace("store: \(path) was removed elsewhere before this mount's move took it there")
                    try removeSubtreeLocked(path)
                    removed.append(StoreChange(pathLower: path, name: node.name, old: node, new: nil))
                }
                return removed
            }
            movesAhead = after
            return unconfirmed + removed
        }
    }

    /// The feed, read to its end, brought a move's source removal (and what the store had
    /// below went to the target, `takeAlongLocked`) but never the moved entry at the target:
    /// the removal was not the move landing (another client moved the folder back after it
    /// and on, or removed it), or the move was never made. Everything that happened before
    /// the removal was read is in the feed by its end, so the target's entry would have come.
    /// Kept, the stale folder stayed for good once the move was answered (two mounts moving
    /// one folder by turns).
    private func dropUnconfirmedTakeAlongsLocked() -> [StoreChange] {
        var dropped: [StoreChange] = []
        for (ticket, landing) in landings where landing.tookAlong && !landing.targetSeen {
            landings[ticket]?.tookAlong = false
            if let gone = dropTakenAlongLocked(landing, because: "the feed never brought the move of \(landing.source) there") { dropped.append(gone) }
        }
        return dropped
    }

    /// What was taken along to a landing's target goes again (if the store still holds the
    /// moved entry there): the removal for the kernel, nil if nothing went.
    private func dropTakenAlongLocked(_ landing: Landing, because reason: String) -> StoreChange? {
        forgetCachedLocked()
        do {
            return try db.transaction {
                guard let node = try db.first(Self.selectByPath, [.text(landing.target)], map: Self.node), node.id == landing.id else { return nil }
                FuseLog.trace("store: what was taken along to \(landing.target) goes again (\(reason))")
                try removeSubtreeLocked(landing.target)
                return StoreChange(pathLower: landing.target, name: node.name, old: node, new: nil)
            }
        } catch {
            // Kept: the next listing of the folder drops it (a write to the cache failed).
            FuseLog.error("store: could not drop what was taken along to \(landing.target): \(error)")
            try? unlistLocked(Node.parent(of: landing.target))
            return nil
        }
    }

    /// Where the store has the folder of this id other than at `path`: where another
    /// client moved a folder whose removal at `path` the change feed brings now, its arrival
    /// heard pages before (nil: not heard, or into a folder not listed here).
    func folderPath(withID id: String, otherThan path: String) throws -> String? {
        try lock.withLock { try folderPathLocked(withID: id, otherThan: path) }
    }

    private func folderPathLocked(withID id: String, otherThan path: String) throws -> String? {
        try db.first("SELECT path_lower FROM nodes WHERE id = ? AND is_folder = 1 AND path_lower != ?", [.text(id), .text(path)]) { $0.text(0) }
    }

    /// Whether `node` is another entry than `old` at the same path: another kind, or another
    /// id (an entry not yet given one, a folder made here, is the same).
    static func isAnotherEntry(_ node: Node, than old: Node) -> Bool {
        node.isFolder != old.isFolder || (!node.id.isEmpty && !old.id.isEmpty && node.id != old.id)
    }

    /// Whether a folder the change feed brings at a path new to it lands there from a move
    /// by another client of a folder listed here (`ListingsMovedElsewhere`): listed below
    /// the source, or the source itself, still at its old path or removed in this catch-up.
    private func landsMovedElsewhereLocked(_ folder: Node) throws -> Bool {
        guard !folder.id.isEmpty else { return false }
        if movedElsewhere.lands(folder.pathLower, id: folder.id) { return true }
        let source = try folderPathLocked(withID: folder.id, otherThan: folder.pathLower)
        let folders = try source.map { try listedFoldersLocked(atOrBelow: $0) } ?? movedElsewhere.removedFolders(id: folder.id)
        guard let folders, folders.contains(where: { $0.relative.isEmpty }) else { return false }
        FuseLog.trace("store: \(folder.pathLower) is a listed folder moved elsewhere, \(folders.count) listing(s) carried")
        return movedElsewhere.carry(to: folder.pathLower, folders: folders)
    }

    /// The change feed removes a folder (or puts another entry in its place): if it was
    /// listed, its listings may come back at the place another client moved it to.
    private func noteRemovalLocked(_ old: Node) throws {
        guard old.isFolder, !old.id.isEmpty else { return }
        let folders = try listedFoldersLocked(atOrBelow: old.pathLower)
        if folders.contains(where: { $0.relative.isEmpty }) { movedElsewhere.removedListed(id: old.id, folders: folders) }
    }

    /// The folders listed at and below `folder`, each by its path below it ("" for the
    /// folder itself) with its id (empty if the store has no node there): for a move's
    /// landing and for a listing carried across another client's move.
    private func listedFoldersLocked(atOrBelow folder: String) throws -> [ListingsMovedElsewhere.ListedFolder] {
        var listed: [ListingsMovedElsewhere.ListedFolder] = []
        try db.query("""
            SELECT listed.path_lower, COALESCE(nodes.id, '') FROM listed LEFT JOIN nodes ON nodes.path_lower = listed.path_lower
            WHERE listed.path_lower = ? OR (listed.path_lower > ? AND listed.path_lower < ?)
            """, [.text(folder), .text(folder + "/"), .text(folder + "0")]) { row in
            listed.append((String(row.text(0).dropFirst(folder.count)), row.text(1)))
        }
        return listed
    }

    /// Applies what a folder's own cursor brought after its listing: the changes the change
    /// feed may have passed while the folder was not yet listed. Those at or below a folder
    /// this mount is moving are left to the change feed, and the folder is listed again
    /// when next needed: Dropbox made the move, and this cursor tells of it as removals at
    /// the old place only; the feed brings the same removals with the entries at the new
    /// place. (Applied alone, the files of a folder renamed here were at neither place
    /// until the feed came.)
    public func applyListingReplay(_ changes: [Metadata], of folderLower: String) throws {
        let (moving, rest) = lock.withLock {
            let sources = landings.values.map(\.source)
            let moving = { (change: Metadata) in
                change.pathLower.map { path in sources.contains { Node.isAt(path, orUnder: $0) } } ?? false
            }
            return (changes.filter(moving), changes.filter { !moving($0) })
        }
        _ = try apply(rest)
        if !moving.isEmpty { try unlist(folderLower) }
    }

    /// A folder mkdir made here, not yet on Dropbox or being made there: it counts as listed
    /// and empty now (`markMadeFolderListedLocked`), and again when its entry comes through
    /// the change feed (a removal of the name before it unlists it), so what lands in it
    /// meanwhile is kept.
    public func beginMakingFolder(_ pathLower: String) throws {
        try lock.withLock {
            foldersBeingMade[pathLower, default: 0] += 1
            forgetCachedLocked()
            _ = try markMadeFolderListedLocked(pathLower)
        }
    }

    /// A move of `source` (the entry `id`) to `target` starts: the folders listed at or
    /// below the source count as listed where they land, should the change feed bring them
    /// first, and so do those listed there until `endLanding`. Begun before the call is made.
    public func beginLanding(from source: String, to target: String, id: String) throws -> LandingTicket {
        try lock.withLock { try beginLandingLocked(from: source, to: target, id: id) }
    }

    /// A move a killed daemon may have made without learning so: a landing that lasts until a
    /// catch-up has read the change feed to its end (`feedPassed`), so that the feed's removal
    /// of the source and the entry at the target, met before the rename's next try, carry what
    /// the store knew of the source there (which folders are listed). Call before the first
    /// catch-up. A folder arriving at such a landing's paths counts as listed only if it comes
    /// with the id it had at the source: the move may never have been made, and another
    /// client may have put a folder there while this mount was down.
    public func landAhead(from source: String, to target: String, id: String) throws {
        try lock.withLock { leaveUntilFeedEndLocked(try beginLandingLocked(from: source, to: target, id: id, checkingIDs: true)) }
    }

    private func beginLandingLocked(from source: String, to target: String, id: String, checkingIDs: Bool = false) throws -> LandingTicket {
        landingsBegun += 1
        landings[landingsBegun] = Landing(source: source, target: target, id: id, keysCheckIDs: checkingIDs)
        for folder in try listedFoldersLocked(atOrBelow: source) {
            try landLocked(source + folder.relative, id: folder.id, ticket: landingsBegun)
        }
        return LandingTicket(number: landingsBegun)
    }

    public struct LandingTicket: Sendable { fileprivate let number: Int }

    /// `applyMove` needs to know where Dropbox has the moved entry now (`seenAtTarget`).
    public struct DropboxWordNeeded: Error {}

    /// A move under way: the keys it counted in `landingFolders` (a folder whose listing
    /// finishes below the source meanwhile lands as well: the listing began before the move;
    /// `finishListing`), and whether the change feed has brought the move.
    private struct Landing {
        let source: String
        let target: String
        /// The moved entry's id (empty when not known yet: a folder made here).
        let id: String
        /// Its keys name the ids their folders had at the source: the move may never have
        /// been made (`landAhead`, `endLanding(_:answerLost:)`).
        var keysCheckIDs: Bool
        /// Where its folders land, each with the id it had at the source (empty: none yet, a
        /// folder made here); each counts in `landingFolders` by `counted`.
        var keys: [(path: String, sourceID: String)] = []
        /// Left until a catch-up has read the change feed to its end (`landingsUntilFeedEnd`):
        /// `endLanding` leaves it be.
        var untilFeedEnd = false

        /// The change feed brought the source's removal, or the entry at its new path: the
        /// store has the move, and maybe changes made after it (`applyMove`).
        var arrived = false
        /// The change feed brought the moved entry at the source: from before the move (the
        /// feed behind), or moved back there by another client after it, which a page tells
        /// as the new path's removal and the entry at its old one, never as the move itself.
        var sourceSeenAgain = false
        /// The change feed brought the moved entry at the target (by its id).
        var targetSeen = false
        /// The feed brought the source's removal before the entries at the target, and the
        /// store took what it had at the source there (`takeAlongLocked`).
        var tookAlong = false
        /// The move's call returned it done (`applyMove`).
        var answered = false

        /// The key a landing folder counts by: with the id it must come with when the keys
        /// check ids (none for a folder that had no id, which then does not count).
        func counted(_ key: (path: String, sourceID: String)) -> LandingKey? {
            guard keysCheckIDs else { return LandingKey(path: key.path, id: nil) }
            return key.sourceID.isEmpty ? nil : LandingKey(path: key.path, id: key.sourceID)
        }
    }

    /// Marks the moves under way that a page of the change feed brings (`Landing.arrived`).
    private func noteArrivalsLocked(_ changes: [Metadata]) {
        let bySource = Dictionary(grouping: landings.keys) { landings[$0]!.source }
        let byTarget = Dictionary(grouping: landings.keys) { landings[$0]!.target }
        for change in changes {
            guard let lower = change.pathLower else { continue }
            if case .deleted = change {
                for ticket in bySource[lower] ?? [] { landings[ticket]!.arrived = true }
            } else if let id = Node(change)?.id, !id.isEmpty {
                for ticket in byTarget[lower] ?? [] where landings[ticket]!.id == id {
                    landings[ticket]!.arrived = true
                    landings[ticket]!.targetSeen = true
                }
                for ticket in bySource[lower] ?? [] where landings[ticket]!.id == id { landings[ticket]!.sourceSeenAgain = true }
            }
        }
    }

    /// A folder listed at or below a moving source (with its id there, looked up if not
    /// given) counts as listed where it lands.
    private func landLocked(_ listed: String, id knownID: String? = nil, ticket: Int) throws {
        guard let landing = landings[ticket] else { return }
        let key = (path: landing.target + listed.dropFirst(landing.source.count),
                   sourceID: try knownID ?? db.first(Self.selectByPath, [.text(listed)], map: Self.node)?.id ?? "")
        landings[ticket]?.keys.append(key)
        if let counted = landing.counted(key) { landingFolders[counted, default: 0] += 1 }
    }

    private func uncountKeysLocked(of landing: Landing) {
        for case let counted? in landing.keys.map(landing.counted) {
            let left = landingFolders[counted, default: 1] - 1
            landingFolders[counted] = left > 0 ? left : nil
        }
    }

    /// A path where a folder lands for a move under way, with the id it must come with (nil:
    /// any, for a move whose call is being made).
    private struct LandingKey: Hashable {
        let path: String
        let id: String?
    }

    /// Whether a folder coming from the change feed at `path` with `id` lands there for a
    /// move under way, and so counts as listed.
    private func landsLocked(_ path: String, id: String) -> Bool {
        landingFolders[LandingKey(path: path, id: nil)] != nil || landingFolders[LandingKey(path: path, id: id)] != nil
    }

    /// Whether the change feed brought the moved entry at the move's source while the move
    /// was under way (`Landing.sourceSeenAgain`): then only Dropbox can say whether the feed
    /// is past the move.
    public func sourceSeenAgain(_ ticket: LandingTicket) -> Bool {
        lock.withLock { landings[ticket.number]?.sourceSeenAgain ?? false }
    }

    /// The move is over (done, and the store has learnt it, or failed). What the store took
    /// along to the target for it goes again unless the move is known made there (its call
    /// answered, or the feed brought the entry there): the source's removal was another
    /// client's.
    ///
    /// With its answer lost (`answerLost`: the connection died, or Dropbox failed, after the
    /// call went out) the move may have been made, and the change feed may bring it yet: the
    /// landing lasts until a catch-up begun now has read the feed to its end
    /// (`landingsUntilFeedEnd`), for folders that come with the ids they had at the source
    /// (if the move was not made, a folder another client puts there is not the moved one),
    /// and what the feed took along stays until then. Ended at the failure, the feed's
    /// entries at the target, sorting before the source's removal, came to a folder not
    /// listed and were dropped, and so were the listings of the moved folders.
    public func endLanding(_ ticket: LandingTicket, answerLost: Bool = false) {
        lock.withLock {
            guard let landing = landings[ticket.number], !landing.untilFeedEnd else { return }
            if answerLost { leaveUntilFeedEndLocked(ticket) } else { endLandingLocked(ticket) }
        }
    }

    private func leaveUntilFeedEndLocked(_ ticket: LandingTicket) {
        guard var landing = landings[ticket.number] else { return }
        if !landing.keysCheckIDs {
            uncountKeysLocked(of: landing)
            landing.keysCheckIDs = true
            for case let counted? in landing.keys.map(landing.counted) { landingFolders[counted, default: 0] += 1 }
        }
        landing.untilFeedEnd = true
        landings[ticket.number] = landing
        landingsLeft += 1
        landingsUntilFeedEnd.append((ticket, landingsLeft))
    }

    private func endLandingLocked(_ ticket: LandingTicket) {
        guard let landing = landings.removeValue(forKey: ticket.number) else { return }
        uncountKeysLocked(of: landing)
        guard landing.tookAlong, !landing.answered, !landing.targetSeen else { return }
        _ = dropTakenAlongLocked(landing, because: "the move of \(landing.source) is not known made")
    }

    /// The move under way whose source the change feed removes now, if the store holds the
    /// moved entry there (by its id) and nothing at the target yet: the feed tells a move as
    /// each entry's removal at the old path and its entry at the new one, in path order, and
    /// a page may end between the two. Removed at once, the folder's entries were at neither
    /// place until the next page (ENOENT for a file just made in it, seen in the mount's race
    /// test). A target the feed brought first (it sorts before the source) is left as the
    /// feed made it: the source stays until its removal, and nothing is taken along.
    private func landingTakingAlongLocked(_ old: Node) throws -> Int? {
        guard !old.id.isEmpty else { return nil }
        for (ticket, landing) in landings where landing.source == old.pathLower && landing.id == old.id {
            // The feed brought the folder elsewhere already (another client moved it on after
            // the move, and the source's removal is that later move's): Dropbox holds it there.
            if old.isFolder, try folderPathLocked(withID: old.id, otherThan: old.pathLower) != nil { return nil }
            // Only where the store shows the target's folder whole (the feed's entries there
            // are kept then; under a folder not listed, they would be dropped).
            let parent = Node.parent(of: landing.target)
            let parentListed = try db.first("SELECT 1 FROM listed WHERE path_lower = ?", [.text(parent)]) { _ in true } ?? false
            guard parent.isEmpty || parentListed else { return nil }
            let atTarget = try db.first("SELECT 1 FROM nodes WHERE path_lower = ?", [.text(landing.target)]) { _ in true } ?? false
            return atTarget ? nil : ticket
        }
        return nil
    }

    /// The feed removes a moving source (`landingTakingAlongLocked`): what the store has
    /// below it goes to the target, as the move put it there; the feed's entries there then
    /// replace them one by one.
    private func takeAlongLocked(_ source: Node, landing ticket: Int) throws {
        guard let target = landings[ticket]?.target else { return }
        FuseLog.trace("store: \(source.pathLower) removed by the change feed as it moves to \(target): what was below it is taken along")
        let wasListed = try moveRowsLocked(from: source.pathLower, to: target)
        var moved = source
        moved.pathLower = target
        moved.name = String(target[(Node.lastSlash(target).map(target.index(after:)) ?? target.startIndex)...])
        try upsertLocked(moved)
        if wasListed && source.isFolder { try markListedLocked(target) }
        landings[ticket]?.tookAlong = true
    }

    /// Counts a folder as listed with the children the store has.
    public func markListed(_ folderLower: String) throws {
        try lock.withLock {
            forgetCachedLocked()
            try markListedLocked(folderLower)
        }
    }

    /// Counts a folder made here (not on Dropbox yet) as listed, with the children the store
    /// has; true if it is. Not so a folder the store holds at the name already (another
    /// client's, hidden behind a removal pending here): it keeps its own listing state. What
    /// the change feed brought into it was dropped, it not being listed, and marked listed
    /// it showed empty for good (two mounts stressing one tree).
    public func markMadeFolderListed(_ folderLower: String) throws -> Bool {
        try lock.withLock {
            forgetCachedLocked()
            return try markMadeFolderListedLocked(folderLower)
        }
    }

    private func markMadeFolderListedLocked(_ folderLower: String) throws -> Bool {
        if try db.first(Self.selectByPath, [.text(folderLower)], map: Self.node)?.isFolder == true { return false }
        try markListedLocked(folderLower)
        return true
    }

    /// The folder is on Dropbox and the store has caught up (or it was taken back: then it
    /// is no longer listed either, unless the store holds a folder at its path: the listing
    /// is that folder's, which a pending rename is moving away, `markMadeFolderListedLocked`
    /// having left it as it was. Unlisted, an rmdir of the renamed folder had to list it
    /// again, and failed with ENETUNREACH in an outage: `mv b x; mkdir b; rmdir b; rmdir x`).
    public func endMakingFolder(_ pathLower: String, takenBack: Bool) throws {
        try lock.withLock {
            let left = foldersBeingMade[pathLower, default: 1] - 1
            foldersBeingMade[pathLower] = left > 0 ? left : nil
            if takenBack, try db.first(Self.selectByPath, [.text(pathLower)], map: Self.node)?.isFolder != true {
                try unlistLocked(pathLower)
            }
        }
    }

    /// A move the mount made on Dropbox, learnt at once: the source's rows (with everything
    /// below, and which folders are listed) move to `moved`'s path, and `moved` replaces the
    /// top one. The change feed brings the same later; until then, older changes it brings
    /// for the source's paths find nothing listed there and are dropped (the move's own
    /// entries at the new paths carry what they changed), but for removals, which are
    /// followed to the new paths once the feed is past the move (`MovesAhead`). Nothing is
    /// done when the feed brought the move during the call (`landing`; nil for a move found
    /// made already), nor when it brought the entry at the source again, unless Dropbox,
    /// asked since, had it where the move put it (`seenAtTarget`; nil: not asked, and then
    /// `DropboxWordNeeded` is thrown if the feed brought it, the store left as it was).
    public func applyMove(from sourceLower: String, to moved: Node, landing: LandingTicket?, seenAtTarget: Bool? = nil) throws {
        try lock.withLock {
            // Every try of the move is answered: one whose answer was lost, left until the
            // feed's end, takes nothing back at its end (`endLandingLocked`).
            for (number, other) in landings where other.source == sourceLower && other.target == moved.pathLower {
                landings[number]?.answered = true
            }
            // The change feed brought the move already, and perhaps what changed after it:
            // the store is past the move. (Moved again here, the source's name taken by a new
            // folder of another client's meanwhile took that folder to the target, wiping
            // what had been put there since; a target deleted since came back.)
            if let landing, let known = landings[landing.number] {
                if known.arrived {
                    // Only the source's removal came (a catch-up stopped between the pages):
                    // what was taken along has the answer's entry on top, its name and all.
                    if known.tookAlong && !known.targetSeen && moved.pathLower == known.target {
                        forgetCachedLocked()
                        try upsertLocked(moved)
                    }
                    return FuseLog.trace("store: move of \(sourceLower) to \(moved.pathLower) came through the change feed already")
                }
            }
            // Moved back by another client, the feed past both: learnt now, the move took the
            // entry (a folder with all below it) from where Dropbox has it, for good: the
            // feed says no more of it.
            if let landing, landings[landing.number]?.sourceSeenAgain == true, seenAtTarget != true {
                // The feed may have brought it since the caller looked whether to ask (a
                // catch-up runs beside the call). Left to the feed unasked, the move was out
                // of the queue and not in the store: the view showed the entry where it was
                // before, a case-only rename's hidden name in place of the renamed folder,
                // until the feed brought the move (four differential sequences at once).
                guard seenAtTarget != nil else { throw DropboxWordNeeded() }
                return FuseLog.trace("store: move of \(sourceLower) to \(moved.pathLower) left to the change feed (it brought the source again)")
            }
            forgetCachedLocked()
            try db.transaction {
                let target = moved.pathLower
                // Another entry at the source's name (the feed gave that name's latest entry
                // alone, not the move's removal there): the moved one is not there to take
                // along, and the feed brings it where it went. Moved all the same, that
                // other folder's entries went to the target and were lost from their own.
                let atSource = try db.first(Self.selectByPath, [.text(sourceLower)], map: Self.node)
                if let atSource, Self.isAnotherEntry(moved, than: atSource) {
                    return FuseLog.trace("store: move of \(sourceLower) to \(target) left to the change feed (another entry holds the name)")
                }
                FuseLog.trace("store: move of \(sourceLower) to \(target) learnt")
                // The change feed brought the move already: the store has it where it went.
                if atSource == nil, try db.first("SELECT 1 FROM nodes WHERE path_lower = ?", [.text(target)], map: { _ in true }) == true {
                    return try upsertLocked(moved)
                }
                if target != sourceLower { try removeSubtreeLocked(target) }
                let below: [SQLValue] = [.text(sourceLower + "/"), .text(sourceLower + "0")]
                // A file has nothing below it to take along: no look on a file rename's path.
                if moved.isFolder { try recordTakenAlongLocked(from: sourceLower, to: target, below: below) }
                let wasListed = try moveRowsLocked(from: sourceLower, to: target)
                try upsertLocked(moved)
                if wasListed && moved.isFolder { try markListedLocked(target) }
            }
        }
    }

    /// Moves the rows below `source` (entries and listings) to the same places below
    /// `target`, then drops the source's own; returns whether the source was listed. A row
    /// the store has at a new place already stays, and the source's for it goes.
    private func moveRowsLocked(from source: String, to target: String) throws -> Bool {
        let below: [SQLValue] = [.text(source + "/"), .text(source + "0")]
        let rebase: [SQLValue] = [.text(target), .text(source)]
        // Character counts, as SQLite's substr counts: keys may hold any letter.
        try db.run("""
            UPDATE OR IGNORE nodes SET path_lower = ? || substr(path_lower, length(?) + 1),
                                       parent_lower = ? || substr(parent_lower, length(?) + 1)
            WHERE path_lower > ? AND path_lower < ?
            """, rebase + rebase + below)
        try db.run("UPDATE OR IGNORE listed SET path_lower = ? || substr(path_lower, length(?) + 1) WHERE path_lower > ? AND path_lower < ?",
                   rebase + below)
        let wasListed = try db.first("SELECT 1 FROM listed WHERE path_lower = ?", [.text(source)]) { _ in true } ?? false
        if source == target {
            try db.run("DELETE FROM nodes WHERE path_lower = ?", [.text(source)])
            try db.run("DELETE FROM listed WHERE path_lower = ?", [.text(source)])
        } else {
            try removeSubtreeLocked(source)
        }
        return wasListed
    }

    /// Keeps the ids of the entries a move takes along below `source` (`MovesAhead`).
    private func recordTakenAlongLocked(from source: String, to target: String, below: [SQLValue]) throws {
        var ids: [String: String] = [:]
        var tooMany = false
        try db.query("SELECT path_lower, id FROM nodes WHERE path_lower > ? AND path_lower < ?", below) { row in
            guard ids.count < MovesAhead.idsAtMost else { tooMany = true; return }
            ids[String(row.text(0).dropFirst(source.count))] = row.text(1)
        }
        if !tooMany && !ids.isEmpty { movesAhead.record(source: source, target: target, ids: ids) }
    }

    /// Deletes a path and everything below it ("/a/" < key < "/a0": '0' follows '/').
    private func removeSubtreeLocked(_ pathLower: String) throws {
        let subtree: [SQLValue] = [.text(pathLower), .text(pathLower + "/"), .text(pathLower + "0")]
        try db.run("DELETE FROM nodes WHERE path_lower = ? OR (path_lower > ? AND path_lower < ?)", subtree)
        try db.run("DELETE FROM listed WHERE path_lower = ? OR (path_lower > ? AND path_lower < ?)", subtree)
    }

    /// Forgets everything (after a cursor `reset`): folders are listed again when needed.
    public func clear() throws {
        try lock.withLock {
            forgetCachedLocked()
            try db.execute("DELETE FROM nodes; DELETE FROM listed; DELETE FROM state;")
            movesAhead.removeAll()
            movedElsewhere.forget()
        }
    }

    /// Every mode, owner and extended attribute kept (`FileModes` loads them once).
    func keptAttributes() throws -> [String: KeptAttributes] {
        try lock.withLock {
            var kept: [String: KeptAttributes] = [:]
            try db.query("SELECT path_lower, mode, uid, gid, xattrs FROM modes", []) { row in
                let id = { (column: Int32) in row.isNull(column) ? nil : UInt32(truncatingIfNeeded: row.int(column)) }
                kept[row.text(0)] = KeptAttributes(mode: UInt32(truncatingIfNeeded: row.int(1)), uid: id(2), gid: id(3),
                                                   user: row.isNull(4) ? [:] : UserAttributes.decoded(row.blob(4)))
            }
            return kept
        }
    }

    /// Every permission mode kept, by path (for tests).
    func modes() throws -> [String: UInt32] { try keptAttributes().mapValues(\.mode) }

    /// Drops what `removing` kept, then keeps `setting`'s, in one transaction.
    func replaceKept(removing: [String], setting: [(path: String, kept: KeptAttributes)]) throws {
        try lock.withLock {
            modeWrites += 1
            try db.transaction {
                for path in removing { try db.run("DELETE FROM modes WHERE path_lower = ?", [.text(path)]) }
                for (path, kept) in setting {
                    try db.run("INSERT OR REPLACE INTO modes (path_lower, mode, uid, gid, xattrs) VALUES (?, ?, ?, ?, ?)",
                               [.text(path), .int(Int64(kept.mode)), kept.uid.map { .int(Int64($0)) } ?? .null, kept.gid.map { .int(Int64($0)) } ?? .null,
                                kept.user.isEmpty ? .null : .blob(UserAttributes.encoded(kept.user))])
                }
            }
        }
    }

    /// Every folder time kept (`FolderTimes` loads them once).
    func folderTimes() throws -> [(id: String, path: String, time: timespec)] {
        try lock.withLock {
            var times: [(id: String, path: String, time: timespec)] = []
            try db.query("SELECT id, path_lower, sec, nsec FROM folder_times", []) { row in
                times.append((row.text(0), row.text(1), timespec(tv_sec: Int(row.int(2)), tv_nsec: Int(row.int(3)))))
            }
            return times
        }
    }

    /// Drops the folder times kept under these keys.
    func forgetFolderTimes(_ ids: [String]) throws {
        guard !ids.isEmpty else { return }
        try lock.withLock {
            try db.transaction {
                for id in ids { try db.run("DELETE FROM folder_times WHERE id = ?", [.text(id)]) }
            }
        }
    }

    /// Keeps these folders' times, replacing what was kept for them, in one transaction.
    func keepFolderTimes(_ times: [(id: String, path: String, time: timespec)]) throws {
        try lock.withLock {
            try db.transaction {
                for (id, path, time) in times {
                    try db.run("INSERT OR REPLACE INTO folder_times (id, path_lower, sec, nsec) VALUES (?, ?, ?, ?)",
                               [.text(id), .text(path), .int(Int64(time.tv_sec)), .int(Int64(time.tv_nsec))])
                }
            }
        }
    }

    public func value(_ key: String) throws -> String? {
        try lock.withLock { try db.first("SELECT value FROM state WHERE key = ?", [.text(key)]) { $0.text(0) } }
    }

    public func setValue(_ key: String, _ value: String) throws {
        try lock.withLock { try db.run("INSERT OR REPLACE INTO state (key, value) VALUES (?, ?)", [.text(key), .text(value)]) }
    }

    private func forgetCachedLocked() {
        nodeCache.removeAll(keepingCapacity: true)
        listedCache.removeAll(keepingCapacity: true)
    }

    /// The folder's children in the store are all it has.
    private func markListedLocked(_ folderLower: String) throws {
        try db.run("INSERT OR REPLACE INTO listed (path_lower) VALUES (?)", [.text(folderLower)])
    }

    private func upsertLocked(_ node: Node) throws {
        try db.run("INSERT OR REPLACE INTO nodes (path_lower, parent_lower, name, is_folder, size, rev, content_hash, modified, id) VALUES (?,?,?,?,?,?,?,?,?)",
                   [.text(node.pathLower), .text(node.parentLower), .text(node.name), .int(node.isFolder ? 1 : 0), .int(node.size),
                    .optional(node.rev), .optional(node.contentHash), .int(node.modified), .text(node.id)])
    }

    /// Nodes with the modification time this mount knows for their revision, where it knows
    /// one: the nanoseconds of revisions it uploaded (Dropbox keeps seconds), and times set
    /// with utimens after the upload (Dropbox keeps the upload's).
    /// What `stat` shows of a node (`attributes`), then the rest of it (`node`).
    private static let attributeColumns = "path_lower, name, is_folder, size, COALESCE(times.sec, modified), COALESCE(times.nsec, 0)"
    private static let nodesWithTimes = "FROM nodes LEFT JOIN times ON times.rev = nodes.rev"
    private static let select = "SELECT \(attributeColumns), nodes.rev, content_hash, id \(nodesWithTimes)"
    private static let selectAttributes = "SELECT \(attributeColumns) \(nodesWithTimes)"
    /// The two queries of every lookup and create, their text built once: each call
    /// interpolated it anew (an allocation and a 200-byte copy) before finding its statement.
    private static let selectByPath = "\(select) WHERE path_lower = ?"
    private static let selectChildByName = "\(select) WHERE parent_lower = ? AND name = ?"

    /// Remembers the modification times of revisions, whole, replacing what was kept for
    /// them: Dropbox keeps seconds only, and for an upload of the bytes it holds already it
    /// gives back the revision it had, with that revision's time. One transaction for a whole
    /// batch of uploads (one each was a tenth of the work that follows a batch commit of
    /// 1,000 files).
    public func setModified(_ revisions: [(rev: String, time: timespec)]) throws {
        guard !revisions.isEmpty else { return }
        try lock.withLock {
            forgetCachedLocked()
            try db.transaction {
                for (rev, time) in revisions {
                    try db.run("INSERT OR REPLACE INTO times (rev, sec, nsec) VALUES (?, ?, ?)",
                               [.text(rev), .int(Int64(time.tv_sec)), .int(Int64(time.tv_nsec))])
                }
            }
        }
    }

    /// Remembers a modification time set for a revision (utimens of a file already on Dropbox).
    public func setModified(rev: String, to time: timespec) throws {
        try setModified([(rev, time)])
    }

    /// A row of `selectAttributes` (`Node.attributesOnly`: no revision, hash or id).
    private static func attributes(_ row: SQLiteRow) -> Node {
        var node = Node(pathLower: row.text(0), name: row.text(1), isFolder: row.bool(2))
        node.size = row.int(3)
        node.modified = row.int(4)
        node.modifiedNanos = Int32(row.int(5))
        return node
    }

    /// A row of `select`.
    private static func node(_ row: SQLiteRow) -> Node {
        var node = attributes(row)
        node.rev = row.optionalText(6)
        node.contentHash = row.optionalText(7)
        node.id = row.text(8)
        return node
    }
}

/// One change the store applied: the node before and after (nil when absent).
public struct StoreChange: Sendable {
    public var pathLower: String
    public var name: String
    public var old: Node?
    public var new: Node?

    /// The entry that was at the path is gone, or an entry of the other kind took its place.
    var tookNameAwayOrChangedKind: Bool {
        guard let old else { return false }
        guard let new else { return true }
        return new.isFolder != old.isFolder
    }
}
