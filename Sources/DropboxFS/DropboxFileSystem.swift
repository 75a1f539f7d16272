import DropboxAPI
import Foundation
import Synchronization

/// The filesystem core, independent of FUSE (testable without a kernel): it answers lookups,
/// attributes, listings, reads, statfs and extended attributes from the metadata store and
/// the block cache, going to Dropbox only for what they do not hold.
///
/// Data flow: lookup/getattr/readdir → `MetadataStore` (a folder is listed from Dropbox the
/// first time it is needed, then served from SQLite, across mounts too); read → `Reader` →
/// `BlockCache`; remote changes → `ChangeWatcher` → store + kernel invalidation.
public final class DropboxFileSystem: Sendable {
    public struct Options: Sendable {
        public var uid: UInt32 = getuid()
        public var gid: UInt32 = getgid()
        public var umask: UInt32 = 0o022
        /// `-o ro`: refuse every change.
        public var readOnly = false
        /// `-o noxattr`: no extended attributes at all (no `user.dropbox.*`). The kernel then
        /// stops asking for them, and `ls -l` no longer costs a request per file for
        /// `security.selinux`.
        public var noExtendedAttributes = false
        /// `-o max_inodes=N`: inodes the kernel may hold before the mount asks it to drop
        /// the longest-known files' (about 200 bytes of the daemon's memory each).
        public var inodeLimit = 100_000
        /// Mounted at a team space's root, where members may not add, remove or rename
        /// anything: changes of the top folder's entries are EACCES (its folders are writable).
        public var protectedTop = false
        public init() {}
    }

    public let client: DropboxClient
    public let store: MetadataStore
    public let reader: Reader
    public let inodes = InodeTable()
    /// Follows the account's changes into the store; the mount's own changes go through it too.
    public let watcher: ChangeWatcher
    /// Local versions of written files, and their way to Dropbox.
    public let writeBack: WriteBack
    public let uploader: Uploader
    /// unlinks and rmdirs answered here, and their way to Dropbox.
    public let deletes: PendingDeletes
    let deleteSender: DeleteSender
    /// Counts the new folders and removals that leave their queues for the store: a look at
    /// both that straddled one is made again.
    let handoffs = Handoffs()
    /// mkdirs answered here, and their way to Dropbox.
    public let folders: PendingFolders
    let folderSender: FolderSender
    /// renames answered here, and their way to Dropbox.
    public let moves: PendingMoves
    let moveSender: MoveSender
    /// Sends the namespace changes something is about to need on Dropbox, in their order.
    let namespace: NamespaceSender
    let tree: TreeCalls
    public let options: Options
    /// Permission bits set here (Dropbox keeps none).
    let modes: FileModes
    /// Another client's moves of what has a mode, between pages of the change feed.
    let modesOnTheWay = Mutex(ModesOnTheWay())
    /// Status and folder change times Dropbox does not keep, while the kernel holds the inode.
    let changeTimes = ChangeTimes()
    /// Folders' modification times kept once the kernel forgets them or the mount ends.
    let folderTimes: FolderTimes
    private let listings = Mutex<[String: Task<Void, any Error>]>([:])
    /// Wakes the loop that keeps pinned files downloaded (`DropboxFileSystem+Pins`).
    let pinSignal = ChangeSignal()
    let pinState = Mutex(PinProgress())
    /// Every open file handle (one table: the write-back moves handles between versions in it).
    let openFiles = OpenFiles()
    /// Files unlinked or renamed over while the kernel held their inode.
    let heldDetached = HeldDetachedFiles()
    /// Held while a call finds the path of an inode it was given and acts there (open,
    /// truncate, a time or mode set, a lookup, create, mkdir, unlink, rmdir), and while a
    /// rename or unlink changes what a path holds. The kernel resolves a path, then sends the
    /// call for the inode it found, and it holds no lock on a folder being renamed: a rename
    /// in another thread may land in between, and the call must then act where the name went
    /// (`RaceTests`: an open for writing made a new file at the old name; files made in a
    /// folder while it was renamed went to its old path, out of sight). Calls that must wait
    /// for Dropbox first check, once they hold it, that their folders are where they were,
    /// and start again if not (`startingAgain`). Only synchronous work runs under it;
    /// recursive, as those calls use one another.
    let pathChanges = NSRecursiveLock()
    /// The read-only history views (`HistoryPath`): what they last fetched.
    let history = HistoryViews()
    /// Folders open through opendir, with how many times: their node outlives their name.
    private let openFolders = Mutex<[UInt64: (node: Node, count: Int)]>([:])
    let pages: KernelPages
    /// Folders have no modification time on Dropbox: they show the time of the mount, unless
    /// one is kept here (`changeTimes`, `folderTimes`).
    private let mountedAt = Int(Date().timeIntervalSince1970)
    private let space = Mutex(SpaceUsage())

    /// `queue` and `stagingDirectory` hold files written through the mount until Dropbox
    /// has them (see `WriteBack`).
    public init(client: DropboxClient, store: MetadataStore, cache: BlockCache, queue: UploadQueue, stagingDirectory: String,
                options: Options = Options()) throws {
        self.client = client
        self.store = store
        self.reader = Reader(client: client, cache: cache)
        self.watcher = ChangeWatcher(client: client, store: store)
        let modes = try FileModes(store: store, umask: options.umask, uid: options.uid, gid: options.gid)
        self.modes = modes
        self.folderTimes = try FolderTimes(store: store)
        self.writeBack = try WriteBack(queue: queue, stagingDirectory: stagingDirectory, reader: reader, openFiles: openFiles,
                                       beforeSeal: { modes.persist($0) })
        let pages = KernelPages(), inodes = inodes
        self.pages = pages
        let tree = TreeCalls(client: client, watcher: watcher)
        self.tree = tree
        let order = NamespaceOrder(after: try queue.largestNamespaceID())
        self.deletes = try PendingDeletes(queue: queue, order: order, handoffs: handoffs)
        self.deleteSender = DeleteSender(pending: deletes, calls: tree, store: store)
        self.folders = try PendingFolders(queue: queue, store: store, order: order, handoffs: handoffs)
        self.folderSender = FolderSender(pending: folders, deletes: deleteSender, calls: tree) { [folderTimes] in folderTimes.made($0) }
        self.moves = try PendingMoves(queue: queue, order: order, deletes: deletes)
        // A killed daemon may have made a rename (or a case-only rename's step to its hidden
        // name) without learning so: the first catch-up then brings the folder's removal and
        // its arrival at the new name before the rename is tried again. Landed ahead, the store
        // takes what it knew there along (unlisted, an empty folder made here failed `ls` with
        // ENETUNREACH offline).
        for (move, landedAt) in moves.mayBeDone {
            try store.landAhead(from: move.fromLower, to: landedAt, id: move.sourceID)
        }
        self.moveSender = MoveSender(pending: moves, folders: folderSender, calls: tree, store: store, writeBack: writeBack)
        self.namespace = NamespaceSender(folders: folderSender, moves: moveSender)
        let pinSignal = pinSignal
        self.uploader = Uploader(writeBack: writeBack, client: client, watcher: watcher, store: store, namespace: namespace) { pathLower, lineage, contentHash in
            if let inode = inodes.existing(pathLower) { pages.uploaded(inode, lineage: lineage, contentHash: contentHash) }
            if cache.isPinned(pathLower) { pinSignal.notify() }  // its bytes now live in the cache by their hash
        }
        self.options = options
        watcher.setCoreListener { [weak self] changes, page, last in self?.modesFollow(changes, page: page, last: last) }
    }

    /// Dropbox is back after an outage: uploads, removals and new folders queued meanwhile go
    /// now, not when their backoff ends.
    public func sendQueuedNow() {
        writeBack.retryUnreachable()
        deletes.signal.notify()
        folders.signal.notify()
        moves.signal.notify()
        pinSignal.notify()
    }

    // MARK: Metadata

    /// A path's node: its local version if it has one (what was written here shows at once),
    /// else what the store knows of Dropbox.
    /// An inode whose name is gone (unlinked, replaced by a rename, deleted on Dropbox) but
    /// which a descriptor still holds open is served from that descriptor until the last
    /// close, as on any POSIX filesystem.
    ///
    /// What the path holds now is not the inode's file if it is of the other kind (another
    /// client replaced a folder by a file, or the reverse, and the change feed has not yet
    /// detached the inode): answered with it, the kernel marked the inode bad, and calls
    /// through it in other threads failed with EIO.
    public func node(_ inode: UInt64) throws -> Node {
        try pathChanges.withLock {
            if let (path, kind) = inodes.pathAndKind(of: inode), let node = try node(at: path), kind.map({ $0 == node.isFolder }) ?? true {
                return node
            }
            if let node = openNode(inode) { return node }
            FuseLog.trace("inode \(inode) not found (path \(inodes.path(of: inode) ?? "detached or unknown"))")
            throw FSError.notFound
        }
    }

    /// opendir: the folder's children; its node stays known while it is open.
    public func openDirectory(_ inode: UInt64) async throws -> [Node] {
        if listsNothing(inode) { return [] }
        let folder = try node(inode)
        guard folder.isFolder else { throw FSError.notDirectory }
        if history.inUse, HistoryPath.isInView(folder.pathLower) {
            let children = try await historyChildren(folder.pathLower).map(\.attributesOnly)
            keepOpen(inode, folder)
            return children
        }
        try await ensureListed(folder.pathLower)
        let children = try visibleChildren(folder.pathLower)
        keepOpen(inode, folder)
        return children
    }

    /// A folder whose name went while the kernel holds it (a shell's working directory after
    /// `rm -r` elsewhere): nil for any other inode. As on a disk, it has no link and nothing
    /// in it, and `stat` and `opendir` of it work (a disk's `readdir` then lists nothing);
    /// everything that would make an entry in it still fails with `ENOENT` (`node` finds no
    /// such folder).
    public func removedFolderAttributes(_ inode: UInt64) -> stat? {
        guard inodes.isDetachedFolder(inode) else { return nil }
        var attributes = self.attributes(inode, Node(pathLower: InodeTable.detachedPath, name: "", isFolder: true))
        attributes.st_nlink = 0
        attributes.st_size = 0
        return attributes
    }

    /// opendir of a folder already listed (nil, having changed nothing, when it must be
    /// listed from Dropbox first). Answered on the FUSE thread: `find` opens every folder,
    /// and the hop to a task and back was a tenth of a walk over a listed tree.
    public func openDirectoryWithoutWaiting(_ inode: UInt64) throws -> [Node]? {
        if listsNothing(inode) { return [] }
        let folder = try node(inode)
        guard folder.isFolder else { throw FSError.notDirectory }
        guard let children = try listedChildren(folder) else { return nil }
        keepOpen(inode, folder)
        return children
    }

    /// A folder removed while the kernel holds it (a working directory, a descriptor open on
    /// it) lists nothing when opened, as on a disk: it has no path to list (with a handle
    /// open, `node` gives that handle's node, whose old path Dropbox no longer has: ENOENT).
    /// Counted open with that node, if a handle keeps one, for its release.
    private func listsNothing(_ inode: UInt64) -> Bool {
        guard inodes.isDetachedFolder(inode) else { return false }
        if let held = openNode(inode) { keepOpen(inode, held) }
        return true
    }

    /// An open folder's node stays known until its last handle is closed.
    private func keepOpen(_ inode: UInt64, _ folder: Node) {
        openFolders.withLock { $0[inode] = (folder, ($0[inode]?.count ?? 0) + 1) }
    }

    /// The snapshot an open folder's handle keeps until it is closed: only what readdirplus
    /// answers with (`visibleChildren`; a revision, content hash and id are three heap
    /// strings an entry: 100,000 of them held 30 MiB). Nil when it needs Dropbox: a folder
    /// not listed yet, or a history view (asked of Dropbox).
    private func listedChildren(_ folder: Node) throws -> [Node]? {
        if history.inUse, HistoryPath.isInView(folder.pathLower) { return nil }
        guard try isListed(folder.pathLower) else { return nil }
        return try visibleChildren(folder.pathLower)
    }

    /// What an open folder lists now, for its handle read again from the start
    /// (`rewinddir`); nil when that needs Dropbox: the handle's snapshot stays.
    public func childrenNow(_ inode: UInt64) -> [Node]? {
        // Removed since (`listsNothing`): nothing, as on a disk, not the snapshot.
        if inodes.isDetachedFolder(inode) { return [] }
        guard let folder = try? node(inode), folder.isFolder else { return nil }
        return (try? listedChildren(folder)) ?? nil
    }

    /// The entry the view shows at a snapshot entry's path now, if of the same kind; nil
    /// when it is gone (removed or renamed after the snapshot was taken).
    public func shownNow(_ listed: Node) -> Node? {
        guard let shown = try? node(at: listed.pathLower, remember: false), shown.isFolder == listed.isFolder else { return nil }
        return shown
    }

    /// A folder is closed: `entries` is the size of the snapshot its handle held.
    public func releaseDirectory(_ inode: UInt64, entries: Int = 0) {
        if entries > Heap.largeCount { Heap.giveBack() }
        openFolders.withLock { folders in
            guard let entry = folders[inode] else { return }
            folders[inode] = entry.count > 1 ? (entry.node, entry.count - 1) : nil
        }
    }

    /// The file (or folder) an open descriptor of `inode` has, if one is open.
    func openNode(_ inode: UInt64) -> Node? {
        if let folder = openFolders.withLock({ $0[inode]?.node }) { return folder }
        // A descriptor served by a local version answers first, the newest one: a reader of
        // an older Dropbox revision may be open beside the writer, and a descriptor being
        // released as this runs has no version any more (its node is the file as it was
        // opened: new and empty, for one that created it).
        let handles = openFiles.handles(of: inode).sorted { $0.handle > $1.handle }
        for (handle, file) in handles where file.local {
            if let node = writeBack.node(handle: handle) { return node }
        }
        return handles.first { !$0.entry.local }?.entry.node ?? heldDetached.node(of: inode)
    }

    /// `remember: false` for a one-off question (see `MetadataStore.node`).
    func node(at pathLower: String, remember: Bool = true) throws -> Node? {
        if history.inUse, HistoryPath.isInView(pathLower) { return history.node(pathLower) }
        return try handoffs.settled {
            if let local = writeBack.overlay(pathLower) { return local }
            if !moves.isEmpty { return try resolvedNode(pathLower, remember: remember) }
            return try remoteNode(pathLower, remember: remember) ?? folders.node(pathLower)
        }
    }

    /// What Dropbox holds at a path as the mount shows it: the store's node, unless a delete
    /// of it (or of a folder above) is pending. While renames are pending, through them (a
    /// new folder a rename brought here counts: it is made on Dropbox before the rename).
    func remoteNode(_ pathLower: String, remember: Bool = true) throws -> Node? {
        if !moves.isEmpty { return try resolvedNode(pathLower, remember: remember, remoteOnly: true) }
        return deletes.hides(pathLower) ? nil : try store.node(pathLower, remember: remember)
    }

    /// Whether a folder of the view has all its children in the store.
    func isListed(_ folderLower: String) throws -> Bool {
        if moves.isEmpty { return try store.isListed(folderLower) }
        guard let stored = try storeFolder(folderLower) else { return true }  // made here: empty on Dropbox
        return try store.isListed(stored)
    }

    /// A child by its exact name, local versions first. Names are case-sensitive in the
    /// mount's view, as on every Linux filesystem: a lookup of `README.TXT` does not find
    /// `README.txt` (were it the same inode, the kernel would take `mv a A` for a no-op).
    func child(of folderLower: String, named name: String) throws -> Node? {
        // Not `collidingEntry`: what other spellings of the name find never has these bytes.
        guard let found = try entryDropboxMatches(in: folderLower, named: name), ExactKey.same(found.name, name) else { return nil }
        return found
    }

    /// What a new name collides with: the entry Dropbox would take `name` for (it folds
    /// case), or one whose name is canonically equivalent to it (`café` in NFC and in NFD).
    /// Dropbox keeps those two apart, but the mount's tables, keyed by `String`, would take
    /// one for the other: a create of one opened and truncated the other.
    func collidingEntry(in folderLower: String, named name: String) throws -> Node? {
        if let found = try entryDropboxMatches(in: folderLower, named: name) { return found }
        for form in ExactKey.equivalents(of: name) {
            if let found = try entryDropboxMatches(in: folderLower, named: form) { return found }
        }
        return nil
    }

    /// EEXIST for a new name Dropbox would take for `existing`. When their names differ (in
    /// case or Unicode form) the log says why: the caller sees "File exists" for a name that
    /// `ls` does not show (`tar x` of a tree with both `Makefile` and `makefile` fails on
    /// the second and on everything below it).
    func refusal(of name: String, in folderLower: String, takenFor existing: Node, by call: String) -> FSError {
        if !ExactKey.same(existing.name, name) {
            FuseLog.error("\(call) \(folderLower)/\(name): refused (File exists): Dropbox takes the name for the existing '\(existing.name)', names that differ only in case or Unicode form being one there (doc/SEMANTICS.md)")
        }
        return .exists
    }

    /// The entry Dropbox would take `name` for (it folds case), local versions first.
    private func entryDropboxMatches(in folderLower: String, named name: String) throws -> Node? {
        let key = Node.child(folderLower, name)
        return try handoffs.settled {
            if let local = writeBack.overlay(key) { return local }
            if !moves.isEmpty { return try resolvedNode(key) }
            return try store.child(of: folderLower, named: name).flatMap { deletes.hides($0.pathLower) ? nil : $0 } ?? folders.node(key)
        }
    }

    /// A lookup answered from the store alone, when the parent folder is listed there; nil
    /// when Dropbox must be asked.
    public func cachedLookup(parent: UInt64, name: String) throws -> (UInt64, Node)? {
        if name.utf8.count > Self.nameMax { throw FSError.nameTooLong }
        return try pathChanges.withLock {
            guard let parentPath = inodes.path(of: parent), !isHistoryLookup(parentLower: parentPath, name: name),
                  try isListed(parentPath) else { return nil }
            guard let node = try child(of: parentPath, named: name) else { throw FSError.notFound }
            return (inodes.inode(for: node.pathLower), node)
        }
    }

    public func lookup(parent: UInt64, name: String) async throws -> (UInt64, Node) {
        if name.utf8.count > Self.nameMax { throw FSError.nameTooLong }
        return try await startingAgain {
            guard let parentPath = inodes.path(of: parent) else { throw FSError.notFound }
            if isHistoryLookup(parentLower: parentPath, name: name) {
                let node = try await historyLookup(parentLower: parentPath, name: name)
                return (inodes.inode(for: node.pathLower), node)
            }
            try await ensureListed(parentPath)
            return try pathChanges.withLock {
                try requireUnmoved([(parent, parentPath)])
                guard let node = try child(of: parentPath, named: name) else { throw FSError.notFound }
                return (inodes.inode(for: node.pathLower), node)
            }
        }
    }

    /// Runs a call again, from the start, each time it throws `StartAgain` having changed
    /// nothing: a folder it found the path of was renamed before it could act there
    /// (`requireUnmoved`), or it had to wait for Dropbox first. Bounded: a call that never
    /// settles would be a bug, better an error than a hang.
    func startingAgain<T>(_ call: () async throws -> T) async throws -> T {
        for _ in 0..<Self.startsAtMost {
            do { return try await call() } catch is StartAgain { continue }
        }
        FuseLog.error("a call gave up after starting again \(Self.startsAtMost) times (its folders kept moving)")
        throw FSError.tryAgain
    }

    static let startsAtMost = 10_000

    /// Throws `StartAgain` unless each inode still has the path the call found for it (with
    /// `pathChanges` held, before the call changes anything); ENOENT for one whose name went.
    func requireUnmoved(_ expected: [(inode: UInt64, path: String)]) throws {
        for (inode, path) in expected {
            guard let now = inodes.path(of: inode) else { throw FSError.notFound }
            if now != path { throw StartAgain() }
        }
    }

    /// A listed folder's children as the mount shows them: Dropbox's, less pending deletes,
    /// with new folders beside them and local versions over them; only what `stat` shows of
    /// each (`Node.attributesOnly`).
    func visibleChildren(_ folderLower: String) throws -> [Node] {
        try handoffs.settled { try childrenAsShown(folderLower) }
    }

    private func childrenAsShown(_ folderLower: String) throws -> [Node] {
        if !moves.isEmpty { return try resolvedChildren(folderLower) }
        // Local versions before the store: they leave once the store has their uploads.
        let local = writeBack.overlayChildren(folderLower)
        let remote = deletes.visible(try store.children(folderLower))
        let made = folders.children(of: folderLower)
        if local.isEmpty && made.isEmpty { return remote }
        var byPath = Dictionary(remote.map { ($0.pathLower, $0) }) { first, _ in first }
        for node in made where byPath[node.pathLower] == nil { byPath[node.pathLower] = node.attributesOnly }
        for node in local { byPath[node.pathLower] = node.attributesOnly }
        return byPath.values.sorted { $0.pathLower < $1.pathLower }
    }

    /// Lists a folder from Dropbox unless the store already has it complete. Concurrent
    /// callers for one folder share one listing.
    func ensureListed(_ viewFolder: String) async throws {
        var retries = 0
        while true {
            // While renames are pending, the folder is listed where Dropbox has it now.
            if moves.isEmpty { return try await ensureStoreListed(viewFolder) }
            guard let stored = try storeFolder(viewFolder) else { return }  // made here: empty on Dropbox
            do {
                return try await ensureStoreListed(stored)
            } catch where ErrnoMapping.fsError(error) == .notFound && retries < Self.listingRetries {
                // The rename of it (or of a folder above) reached Dropbox while it was being
                // listed at its old place: once the store has heard, it is where it is now.
                // (Answered ENOENT, a file in a renamed folder vanished for a moment.)
                retries += 1
                try await watcher.catchUp()
            }
        }
    }

    /// How often a listing is asked again where a rename sent meanwhile put its folder.
    static let listingRetries = 3

    /// `ensureListed` of a path of the store (what Dropbox holds now).
    func ensureStoreListed(_ folderLower: String) async throws {
        if try store.isListed(folderLower) { return }
        // Made here, not on Dropbox yet: empty there. (Listed when made; a removal of the
        // name before it, reaching the store, unlisted it.) Unless the store holds another
        // client's folder there: that one is listed from Dropbox.
        if folders.isPending(folderLower), try store.markMadeFolderListed(folderLower) { return }
        let task: Task<Void, any Error> = listings.withLock { running in
            if let existing = running[folderLower] { return existing }
            let task = Task { [client, store] in
                var listed: [String] = []
                FuseLog.trace("listing \(folderLower.isEmpty ? "/" : folderLower)")
                let folder = try store.listingStarts(folderLower)
                let cursor = try await client.listPages(folderLower) { entries in
                    let nodes = try Self.children(of: folderLower, in: entries)
                    try store.storeListingPage(nodes, of: folder)
                    listed += nodes.lazy.map(\.pathLower)
                }
                try store.finishListing(folder, children: listed)
                FuseLog.trace("listed \(folderLower.isEmpty ? "/" : folderLower): \(listed.count) entries")
                if listed.count > Heap.largeCount { Heap.giveBack() }
                // The change watcher may have passed changes in this folder while it was being
                // listed (and not yet marked listed): replay them from the listing's own cursor.
                do {
                    var page = try await client.rpc(Routes.listFolderContinue, CursorArgument(cursor: cursor))
                    try store.applyListingReplay(page.entries, of: folderLower)
                    while page.hasMore {
                        page = try await client.rpc(Routes.listFolderContinue, CursorArgument(cursor: page.cursor))
                        try store.applyListingReplay(page.entries, of: folderLower)
                    }
                } catch {
                    // The change feed fails: the listing is served as Dropbox gave it, but the
                    // folder does not count as listed (a change passed meanwhile may be
                    // missing), so it is listed again when next needed.
                    FuseLog.error("listing of \(folderLower.isEmpty ? "/" : folderLower) not brought up to date (\(error)); listed again when next needed")
                    try store.unlist(folderLower)
                }
            }
            running[folderLower] = task
            return task
        }
        defer { listings.withLock { if $0[folderLower] == task { $0.removeValue(forKey: folderLower) } } }
        try await task.value
    }

    /// The nodes of a folder's listing, refused whole when an entry is not a child of the
    /// folder (a server that leaves `path_lower` out, or lists elsewhere): stored, it would
    /// replace another part of the tree.
    static func children(of folderLower: String, in entries: [Metadata]) throws -> [Node] {
        try entries.compactMap { entry in
            if case .deleted = entry { return nil }
            guard let node = Node(entry), node.parentLower == folderLower else {
                throw FSError.io("listing of \(folderLower.isEmpty ? "/" : folderLower) refused: entry \(entry.name.debugDescription) "
                                 + "has path_lower \(entry.pathLower?.debugDescription ?? "missing")")
            }
            return node
        }
    }

    /// Whether an inode has a path, and the path shows an entry.
    func showsEntry(_ inode: UInt64) -> Bool {
        guard let path = inodes.path(of: inode) else { return false }
        return ((try? node(at: path, remember: false)) ?? nil) != nil
    }

    /// The attributes shown for `inode`, found as `node`. What is kept by path (mode, owner,
    /// a folder's time) is looked up at the path the inode has now, under `pathChanges`,
    /// which every rename made here holds while it moves those and the inodes: `node`'s path
    /// was found before, and a rename of its folder since (by another process: a listing
    /// running while a folder was renamed away and back) had the file show the default mode,
    /// which the kernel then kept: `chmod 600` undone for whoever looked next.
    public func attributes(_ inode: UInt64, _ node: Node) -> stat {
        var attributes = stat()
        attributes.st_ino = UInt(inode)
        // No write bits where nothing can be changed: the history views, a team space's top.
        let readOnly = (history.inUse && HistoryPath.isInView(node.pathLower)) || (options.protectedTop && node.pathLower.isEmpty)
        let (attached, shown, folderTime) = pathChanges.withLock {
            let path = inodes.path(of: inode)
            var now = node
            if let path { now.pathLower = path }
            // Asked only of an inode with a mode of its own (its name went): whether its path
            // shows an entry still. One whose name another client removed keeps its path in the
            // inode table until the kernel is told (`FuseMount`), or for good in the core alone.
            let shown = modes.shown(of: now.pathLower, inode: inode, attached: self.showsEntry(inode), isFolder: node.isFolder)
            return (path != nil, shown, node.isFolder ? keptTime(ofFolder: now) : nil)
        }
        attributes.st_uid = shown.uid
        attributes.st_gid = shown.gid
        let permissions = shown.mode & (readOnly ? ~0o222 : ~0)
        if node.isFolder {
            attributes.st_mode = S_IFDIR | permissions
            attributes.st_nlink = 2
            attributes.st_size = 4096
        } else {
            attributes.st_mode = S_IFREG | permissions
            // A file whose name went (unlinked, or renamed over) while a descriptor holds it:
            // no link left, as `fstat` shows on a disk.
            attributes.st_nlink = attached ? 1 : 0
            attributes.st_size = Int(node.size)
            attributes.st_blocks = Int((node.size + 511) / 512)
        }
        attributes.st_blksize = Int(Reader.blockSize)
        attributes.st_mtim = node.isFolder ? folderTime ?? timespec(tv_sec: mountedAt, tv_nsec: 0)
            : timespec(tv_sec: Int(node.modified), tv_nsec: Int(node.modifiedNanos))
        attributes.st_ctim = attributes.st_mtim
        attributes.st_atim = attributes.st_mtim
        changeTimes.apply(to: &attributes, inode: inode, isFolder: node.isFolder)
        return attributes
    }

    // MARK: Content

    /// Opens a file. Writers (and readers of a file with a local version) are served from
    /// the write-back; other readers from Dropbox through the block cache, where `keepCache`
    /// tells the kernel its cached pages are still good (the content hash is the one it saw
    /// at the last open).
    public func open(_ inode: UInt64, writable: Bool, truncate: Bool = false) throws -> (handle: UInt64, keepCache: Bool, directIO: Bool) {
        if writable && options.readOnly { throw FSError.readOnly }
        if writable { try refuseInHistory(inode) }
        let (handle, file, lineage) = try pathChanges.withLock { () throws -> (UInt64, Node, Int64?) in
            var file = try openableNode(inode)
            if file.isFolder { throw FSError.isDirectory }
            let handle = openFiles.open(inode: inode, node: file)
            let lineage: Int64?
            do {
                if inodes.path(of: inode) == nil {
                    // Its name went after the kernel looked it up, and a descriptor still holds
                    // it (else `node` found nothing): this one reads and writes what that one
                    // does, or what the name showed when it went (`HeldDetachedFiles`). Its
                    // old path may name another file by now.
                    let sibling = openFiles.handles(of: inode).first { $0.handle != handle && $0.entry.local }
                    var served = try sibling.flatMap { try writeBack.attach(handle: handle, alongside: $0.handle, writable: writable, truncate: truncate) }
                        ?? heldDetached.version(of: inode).map { try writeBack.attach(handle: handle, detached: $0, writable: writable, truncate: truncate) }
                    // A writer of a Dropbox file whose name went writes a copy of its own, as
                    // to an unlinked file on a disk (never uploaded).
                    if served == nil, writable, file.rev != nil {
                        served = try writeBack.attachDetached(handle: handle, base: file, truncate: truncate)
                    }
                    if served == nil && file.rev == nil { throw FSError.stale }
                    lineage = served
                } else {
                    // The Dropbox file a new local version starts from (writers only: a reader
                    // is served locally only if a local version exists already).
                    lineage = try writeBack.attach(handle: handle, path: Node.parent(of: file.pathLower) + "/" + file.name,
                                                 base: { try remoteNode(file.pathLower).flatMap { $0.isFolder ? nil : $0 } },
                                                 writable: writable, truncate: truncate)
                }
            } catch {
                _ = openFiles.remove(handle)
                throw error
            }
            // Read from Dropbox: by the revision the store has. The node came from a local
            // version if that version's upload finished between the look and the attach (it
            // has no revision to read by: such a read failed with EIO, seen twice in 1,000s of
            // random sequences with outages).
            if lineage == nil, file.rev == nil || file.contentHash == nil {
                // No file there on Dropbox (the version went beside as a conflicted copy,
                // another client's folder holds the name): the file looked up is gone from
                // its name, as after an unlink between the look and the open. (Its reads
                // failed with EIO, seen with another client racing the mount.)
                guard let stored = try remoteNode(file.pathLower), !stored.isFolder else {
                    _ = openFiles.remove(handle)
                    throw FSError.notFound
                }
                file = stored
                _ = openFiles.follow(handle, to: stored)
            }
            return (handle, file, lineage)
        }
        if let lineage {
            return (handle, openedLocal(inode, lineage: lineage, truncate: truncate, handle: handle), false)
        }
        // The page cache belongs to the inode, while each handle reads the revision it opened:
        // keep the cache only if it can hold nothing but this content. If another handle still
        // reads other bytes (a revision since replaced on Dropbox), this one reads around the
        // cache (direct I/O): otherwise each would fill pages the other then reads, and one
        // file's pages would mix two revisions. A handle served locally reads this content
        // once its version is uploaded as this very revision (a descriptor opened before the
        // upload, or released by the kernel after its `close` returned).
        let others = openFiles.handles(of: inode).filter { $0.handle != handle }
        let othersCurrent = others.allSatisfy { other, open in
            open.local ? file.rev != nil && writeBack.uploadedRevision(handle: other) == file.rev : open.node.contentHash == file.contentHash
        }
        return (handle, pages.openedRemote(inode, contentHash: file.contentHash, othersCurrent: othersCurrent), !othersCurrent)
    }

    /// The file an open is for. The kernel looks a name up, then opens the inode it found: a
    /// rename over the name or an unlink in between detaches it. A descriptor, or what
    /// `heldDetached` kept, still gives the file; should nothing (a file only here whose
    /// kernel inode was not known by its path), ESTALE makes the kernel walk the path again
    /// and open what the name holds now (as after NFS's stale handles), where ENOENT would
    /// fail an open that a disk lets through.
    private func openableNode(_ inode: UInt64) throws -> Node {
        do {
            return try node(inode)
        } catch FSError.notFound where inodes.isDetachedFile(inode) {
            throw FSError.stale
        }
    }

    /// Whether a handle served from a local version keeps the kernel's pages.
    func openedLocal(_ inode: UInt64, lineage: Int64, truncate: Bool, handle: UInt64? = nil) -> Bool {
        let onlyLocal = openFiles.handles(of: inode).allSatisfy { $0.entry.local }
        let uploadedAs = handle.flatMap { writeBack.answeredContentHash(handle: $0) }
        return pages.openedLocal(inode, lineage: lineage, truncate: truncate, onlyLocal: onlyLocal, uploadedAs: uploadedAs)
    }

    /// A read that can be answered straight from a file: a cached block's (see
    /// `Reader.cachedSpan`), or a local version's staging file, which `holder` keeps (hold
    /// it until the span is read).
    public func cachedSpan(handle: UInt64, offset: Int64, size: Int) -> (file: String, offset: Int64, length: Int, holder: AnyObject?)? {
        guard let file = following(handle) else { return nil }
        if file.local {
            return writeBack.localSpan(handle: handle, offset: offset, size: size).map { ($0.file, $0.offset, $0.length, $0.holder) }
        }
        return reader.cachedSpan(file.node, offset: offset, size: size, stream: file.stream).map { ($0.file, $0.offset, $0.length, nil) }
    }

    /// What a read is answered with: a span of a cached block's file (spliced by the kernel)
    /// or bytes.
    public enum ReadAnswer: Sendable {
        case span(file: String, offset: Int64, length: Int)
        case bytes([UInt8])
    }

    /// Fetches what a read needs into the cache, then answers from it.
    public func answerRead(handle: UInt64, offset: Int64, size: Int) async throws -> ReadAnswer {
        guard let file = following(handle) else { throw FSError.io("unknown file handle") }
        if file.local { return .bytes(try await writeBack.read(handle: handle, offset: offset, size: size)) }
        do {
            try await reader.ensureCached(file.node, offset: offset, size: size, stream: file.stream)
        } catch is CacheUnavailable {
            return .bytes(try await reader.readDirect(file.node, offset: offset, size: size))
        }
        if let span = reader.cachedSpan(file.node, offset: offset, size: size, stream: nil) {
            return .span(file: span.file, offset: span.offset, length: span.length)
        }
        return .bytes(try await reader.read(file.node, offset: offset, size: size, stream: nil))
    }

    public func read(handle: UInt64, offset: Int64, size: Int) async throws -> [UInt8] {
        guard let file = following(handle) else { throw FSError.io("unknown file handle") }
        if file.local { return try await writeBack.read(handle: handle, offset: offset, size: size) }
        return try await reader.read(file.node, offset: offset, size: size, stream: file.stream)
    }

    /// Before a path's file is detached (unlink, rename over it): descriptors that read its
    /// Dropbox revision but follow local writes to it take the local version now, while the
    /// path still leads to it.
    func adoptRemoteHandles(at pathLower: String) {
        guard let inode = inodes.existing(pathLower) else { return }
        let remote = openFiles.handles(of: inode).filter { !$0.entry.local }
        for (handle, _) in remote { _ = following(handle, beforeDetach: true) }
    }

    /// An open file as its next read must see it. A handle opened on Dropbox revision R of a
    /// file this mount has written since (through other descriptors) follows those writes:
    /// it reads the local version descending from R (`WriteBack.adopt`), or, once that is
    /// uploaded and closed, the revision our own commits made from R. A handle on a revision
    /// replaced by another client keeps reading it.
    ///
    /// Every read asks, so the common answer is cheap: while the store still holds the
    /// handle's revision and the path has no local version, the bytes to read are the same.
    /// Just before a detach the full answer is needed even then: another descriptor may hold
    /// an uploaded version whose later writes this handle must follow after the name goes.
    func following(_ handle: UInt64, beforeDetach: Bool = false) -> OpenFiles.Entry? {
        guard let file = openFiles[handle] else { return nil }
        guard !file.local, let rev = file.node.rev, let path = inodes.path(of: file.inode) else { return file }
        // Local versions before the store (they leave once the store has their uploads): a
        // version uploaded between the two looks would be in neither.
        let hasVersion = writeBack.hasVersion(path)
        let latest = moves.isEmpty ? try? store.node(path) : try? resolvedNode(path, remoteOnly: true)
        if !beforeDetach && latest?.rev == rev && !hasVersion { return file }
        if writeBack.adopt(handle: handle, pathLower: path, revision: rev) { return openFiles[handle] }
        guard let latest, let latestRev = latest.rev, latestRev != rev, writeBack.isOwnCommit(latestRev, madeFrom: rev) else { return file }
        return openFiles.follow(handle, to: latest)
    }

    /// The last descriptor of a handle closed: a written file not yet sealed is sealed now.
    public func release(handle: UInt64) async throws {
        guard let file = try await writeBack.release(handle: handle), !file.local else { return }
        pages.closedRemote(file.inode, contentHash: file.node.contentHash)
    }

    /// `release` when it needs nothing from Dropbox; false, having done nothing, when it does.
    public func releaseWithoutWaiting(handle: UInt64) throws -> Bool {
        guard let released = try writeBack.releaseWithoutWaiting(handle: handle) else { return false }
        if let file = released, !file.local { pages.closedRemote(file.inode, contentHash: file.node.contentHash) }
        return true
    }

    /// The kernel forgot `count` references to an inode; its state goes with the last one,
    /// but for a folder's modification time changed here, which is kept (`folderTimes`).
    public func forget(_ inode: UInt64, count: UInt64) {
        let path = changeTimes.folderModified(inode) == nil ? nil : inodes.path(of: inode)
        if inodes.forget(inode, count: count) {
            heldDetached.forget(inode)
            pages.forget(inode)
            modes.forget(inode)
            changeTimes.forget(inode) { time in if let path { keepFolderTimes([(path, time)]) } }
        }
    }

    /// The mount ended (its uploads and new folders sent, unless told to stop at once): the
    /// folder times changed here go to the store, to be shown by the next mount.
    public func keepFolderTimes() {
        keepFolderTimes(changeTimes.foldersModified().compactMap { inode, time in inodes.path(of: inode).map { ($0, time) } })
        folderTimes.keepWaiting { path in (try? node(at: path, remember: false))??.id }
    }

    private func keepFolderTimes(_ changed: [(path: String, time: timespec)]) {
        folderTimes.keep(changed.compactMap { path, time in
            guard let node = try? node(at: path, remember: false), node.isFolder else { return nil }
            return (node.id, path, time)
        })
    }

    /// Another client moved or removed a folder the kernel holds: its inode loses its path,
    /// and a time changed here goes under the folder's id now, so that the folder shows it
    /// where it went (forgotten later, the inode has no path to keep it by).
    func folderLeftItsInode(_ inode: UInt64, id: String, path: String) {
        guard !id.isEmpty, let time = changeTimes.folderModified(inode) else { return }
        folderTimes.keep([(id, path, time)])
    }

    /// A folder's modification time kept from an earlier mount or inode, if any.
    private func keptTime(ofFolder node: Node) -> timespec? {
        folderTimes.time(of: node) { path in (try? self.node(at: path, remember: false))??.id }
    }

    /// The kernel's entry (parent inode, name) of a file it may drop to keep the inode table
    /// bounded; nil for what must stay: folders (a shell's working directory would lose its
    /// path) and files open here.
    func droppableEntry(_ inode: UInt64, path: String) -> (parent: UInt64, name: String)? {
        guard openFiles.handles(of: inode).isEmpty, let node = try? node(at: path, remember: false), !node.isFolder,
              let parent = inodes.existing(Node.parent(of: path)) else { return nil }
        return (parent, node.name)
    }

    // MARK: statfs, xattrs

    /// Space used and allocated, from `users/get_space_usage`. Only the first call waits for
    /// Dropbox; later ones answer the last answer at once, and one that finds it older than
    /// 30 s asks again in the background. `df`, and the `fstatfs` that `rm -r`, `find` and
    /// `du` make once a tree, waited a round trip after each 30 s (a third of an `rm -r` of
    /// 500 files with 30 ms of network latency), and failed with ENETUNREACH in an outage.
    public func spaceUsage() async throws -> (used: Int64, allocated: Int64) {
        let (known, askAgain) = space.withLock { space in
            let askAgain = space.value != nil && !space.asking && ContinuousClock.now - space.at >= .seconds(30)
            if askAgain { space.asking = true }
            return (space.value, askAgain)
        }
        guard let known else { return try await askSpaceUsage() }
        if askAgain {
            Task {
                _ = try? await askSpaceUsage()  // out of reach: the last answer stands
                space.withLock { $0.asking = false }
            }
        }
        return known
    }

    private func askSpaceUsage() async throws -> (used: Int64, allocated: Int64) {
        let usage = try await client.rpc(Routes.getSpaceUsage, NoArgument())
        let value = (used: usage.used, allocated: usage.allocation.allocated ?? max(usage.used, 1 << 40))
        space.withLock { $0.value = value; $0.at = .now }
        return value
    }

    /// The account's space as Dropbox last told it, and whether it is being asked again.
    struct SpaceUsage {
        var value: (used: Int64, allocated: Int64)?
        var at = ContinuousClock.now
        var asking = false
    }

    /// The attributes the mount answers itself (`user.dropbox.id`, `.rev`, `.content_hash`,
    /// `pinnedAttribute`, `sharedLinkAttribute`): asked for by name, never listed, never kept.
    static let ownPrefix = "user.dropbox."

    public func extendedAttribute(_ inode: UInt64, name: String) throws -> [UInt8] {
        // `ls -l` asks every file for security and ACL attributes: answer without a lookup.
        guard name.hasPrefix(UserAttributes.prefix) else { throw FSError.noAttribute }
        let node = try node(inode)
        guard name.hasPrefix(Self.ownPrefix) else {
            guard let value = userAttributes(inode, node)[name] else { throw FSError.noAttribute }
            return value
        }
        guard let value = attributeValue(name, of: node, answered: answered(node)) else { throw FSError.noAttribute }
        return Array(value.utf8)
    }

    /// The names listxattr gives: the `user.*` attributes set here, not the mount's own
    /// `user.dropbox.*`, which describe Dropbox's copy. Listed, those went wherever tools copy
    /// attributes (`rsync -X`, `cp -a`, `tar --xattrs`), and a second `rsync -aX` into the
    /// mount exited 23, refused the removal of the `user.dropbox.id` its source lacked.
    public func extendedAttributeNames(_ inode: UInt64) throws -> [String] {
        userAttributes(inode, try node(inode)).keys.sorted()
    }

    /// The `user.*` attributes kept for `inode`, at the path it has now (as `attributes`).
    private func userAttributes(_ inode: UInt64, _ node: Node) -> [String: [UInt8]] {
        pathChanges.withLock {
            modes.userAttributes(of: inodes.path(of: inode) ?? node.pathLower, inode: inode, attached: showsEntry(inode))
        }
    }

    /// What Dropbox answered for a file written here once it has it, before its version is
    /// finished (the catch-up on the change feed): its attributes show that already.
    private func answered(_ node: Node) -> (id: String, rev: String, contentHash: String?)? {
        node.isFolder || node.rev != nil ? nil : writeBack.answered(node.pathLower)
    }

    private func attributeValue(_ name: String, of node: Node, answered: (id: String, rev: String, contentHash: String?)?) -> String? {
        switch name {
        case "user.dropbox.id": let id = answered?.id ?? node.id; return id.isEmpty ? nil : id
        case "user.dropbox.rev": return answered?.rev ?? node.rev
        case "user.dropbox.content_hash": return answered?.contentHash ?? node.contentHash
        case Self.pinnedAttribute: return reader.cache.isPinned(node.pathLower) ? "1" : nil
        default: return nil
        }
    }

    /// The shared link a file or folder has on Dropbox (`dropboxfs share` makes one); absent
    /// when it has none. Asked of Dropbox each time, so not listed by listxattr: `getfattr
    /// -d`, `cp -a` and `rsync -X` would otherwise ask for every file they walk.
    public static let sharedLinkAttribute = "user.dropbox.shared_link"

    public func sharedLink(_ inode: UInt64) async throws -> [UInt8] {
        let node = try node(inode)
        guard !node.pathLower.isEmpty, !HistoryPath.isInView(node.pathLower), try remoteNode(node.pathLower) != nil else {
            throw FSError.noAttribute  // the root, a view, or not on Dropbox yet: no link
        }
        let path = try dropboxPath(node.parentLower) + "/" + node.name
        guard let link = try await client.existingSharedLink(for: path) else { throw FSError.noAttribute }
        return Array(link.url.utf8)
    }

    /// `1` on a pinned file or folder (itself or through a folder above); absent otherwise.
    /// The one attribute that can be set: `1` pins, `0` or removing it unpins.
    public static let pinnedAttribute = "user.dropbox.pinned"

    /// setxattr: a `user.*` attribute, kept here (`UserAttributes`); of the mount's own,
    /// `user.dropbox.pinned` alone (`1` or `0`: pins or unpins), the others are Dropbox's
    /// (EPERM); other namespaces are not supported.
    public func setExtendedAttribute(_ inode: UInt64, name: String, value: [UInt8], flags: Int32 = 0) throws {
        try refuseInHistory(inode)
        if name == Self.pinnedAttribute {
            switch String(decoding: value, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) {
            case "1": return try setPinned(inode, true)
            case "0": return try setPinned(inode, false)
            default: throw FSError.invalidArgument
            }
        }
        try editUserAttributes(inode, name: name) { try UserAttributes.set(name, to: value, flags: flags, in: &$0) }
    }

    public func removeExtendedAttribute(_ inode: UInt64, name: String) throws {
        try refuseInHistory(inode)
        if name == Self.pinnedAttribute { return try setPinned(inode, false) }
        try editUserAttributes(inode, name: name) { try UserAttributes.remove(name, from: &$0) }
    }

    /// A change of a `user.*` attribute kept here, under `pathChanges` (a rename meanwhile
    /// takes them along, not half of them); the status changes, as a disk's ctime does.
    private func editUserAttributes(_ inode: UInt64, name: String, _ change: (inout [String: [UInt8]]) throws -> Void) throws {
        try UserAttributes.checkKept(name)
        if options.readOnly { throw FSError.readOnly }
        try pathChanges.withLock {
            let current = try node(inode)
            try modes.editUserAttributes(current.pathLower, inode: inode, attached: inodes.path(of: inode) != nil,
                                         isFolder: current.isFolder, change)
            changeTimes.statusChanged(inode)
        }
    }
}

/// A call must start again, having changed nothing (`DropboxFileSystem.startingAgain`).
struct StartAgain: Error {}
