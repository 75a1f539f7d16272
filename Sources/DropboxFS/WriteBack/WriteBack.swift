import DropboxAPI
import Foundation
import Synchronization

/// Write-back of file content: every file written through the mount gets a local version
/// (a staging file in the cache directory); `close` seals it into the durable upload queue
/// and returns; the `Uploader` sends it to Dropbox. Until then the local version is what the
/// mount shows for that path (read-your-writes), over whatever the metadata store holds.
///
/// A file's life (doc/SEMANTICS.md, "A file's life"):
/// - A path's versions form a chain: at most one being edited (shared by every writer), then
///   sealed ones waiting, the one uploading; the path shows the newest (`current`), and when
///   one is dropped the newest left, else the store. An open that writes nothing makes nothing:
///   a writer shares a sealed version until its first change copies the path's newest bytes.
/// - Every descriptor of a file is on its newest version: when a newer one appears (copy,
///   truncating open, seal, upload) the others move to it (`catchUpHandlesLocked`).
/// - An upload that commits revision R rebases every newer version onto R, and versions made
///   later from the uploaded one replace R too (`committedRev`): our own commit is never a
///   conflict.
/// - Uploads of a path go oldest first, one at a time; a version still waiting when a newer
///   one is sealed is dropped (the newer one carries its bytes). Renames and deletes wait for
///   uploads under way there (`WriteBack+Renames`).
///
/// Locks, in the order they are taken: `state` guards every version's mutable fields (but
/// `path`, which has its own) and the maps below; it is never held across I/O except quick
/// SQLite writes to the queue (a copy of a file to edit is made outside it). Handles move
/// between versions under it, in the mount's one handle table (`OpenFiles`, whose lock comes
/// next); then a version's `path` lock, then the queue's SQLite connection.
public final class WriteBack: Sendable {
    let queue: UploadQueue
    let stagingDirectory: String
    /// Done staging files, reused (see `StagingPool`).
    let pool: StagingPool
    let reader: Reader
    /// Wakes whoever waits for a version to change phase (an upload done, a seal).
    let signal = ChangeSignal()
    /// Wakes the uploader's loop: `changed()` unless the change cannot make an upload due
    /// sooner than its next planned pass (`State.nextPass`).
    let uploaderSignal = ChangeSignal()
    /// Someone now waits for an upload (fsync): the uploader's loop stops resting between
    /// passes, which it does after a close (the pause that keeps a burst of creates from
    /// costing a pass each) but must not do while an fsync waits.
    let urgentSignal = ChangeSignal()
    let state: Mutex<State>
    /// Every open handle, and the version serving each (changed under `state`).
    let openFiles: OpenFiles

    struct State {
        var nextID: Int64
        /// Every version not yet finished, by id.
        var versions: [Int64: LocalVersion] = [:]
        /// The newest version of each path: what the mount shows there.
        var current = CurrentVersions()
        /// Paths (and everything below) a rename or delete is changing: not uploaded meanwhile.
        var held: [String: Int] = [:]
        /// Paths of the versions being committed (uploading, `committing`), counted: a rename
        /// or delete there waits for them (`holding`). Kept here so that check does not look
        /// through every unfinished version for each unlink, nor through every path being
        /// committed (a batch has 1,000) for one below a folder. A committing version's path
        /// cannot change.
        var committingAt = PathTouches()
        /// `versions` by path key: what is at a path (older queued ones it replaces, those to
        /// detach at an unlink, the newest to show once one finishes) without looking through
        /// every version. Kept by `addLocked`, `finishLocked` and `move`.
        var atPath: [String: [Int64: LocalVersion]] = [:]
        /// The version a path showed when its versions were last detached (`takeDetached`).
        var lastDetached: (pathLower: String, version: LocalVersion)?
        /// Set while unmounting: no upload waits for its quiet moment.
        var draining = false
        /// fsyncs waiting for uploads now (`uploadNow`).
        var syncsWaiting = 0
        /// When the uploader looks at the queue next (set by its pass, `takeEligible`): now
        /// while it has jobs to start; nil when nothing queued waits for a time.
        var nextPass: ContinuousClock.Instant?
        var drainStartedAttempts: [Int64: Int] = [:]
        /// Files uploaded since the mount began.
        var uploaded = 0
        /// Revisions this mount committed, with the revisions each descends from (the newest
        /// `ownCommitLimit` at least): a descriptor on an older revision of the file follows to them.
        var ownCommits: [String: [String]] = [:]
        var ownCommitOrder: [String] = []
        /// Queued files the mount found but will not upload (`WriteBack+Durability`), for the status.
        var setAside: [String] = []
        /// `versionsExamined`.
        var examined = 0
        /// No early staging before then: the last one failed (`WriteBack+EarlyStaging`).
        var earlyStagePausedUntil: ContinuousClock.Instant?
    }

    static let ownCommitLimit = 10_000

    /// True while Dropbox is out of reach (`Reachability`).
    let isOffline: @Sendable () -> Bool

    /// Called with a version's path before its seal is queued (`FileModes.persist`).
    let beforeSeal: @Sendable (String) -> Void

    init(queue: UploadQueue, stagingDirectory: String, reader: Reader, openFiles: OpenFiles,
         beforeSeal: @escaping @Sendable (String) -> Void = { _ in }) throws {
        self.queue = queue
        self.beforeSeal = beforeSeal
        let reachability = reader.client.reachability
        isOffline = { reachability.offlineSince != nil }
        self.openFiles = openFiles
        self.stagingDirectory = stagingDirectory
        self.pool = StagingPool(directory: stagingDirectory)
        self.reader = reader
        try FileManager.default.createDirectory(atPath: stagingDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        state = Mutex(State(nextID: queue.maxID + 1))
    }

    /// Takes up the queue a previous mount left (after a crash, `--no-wait` or a failure),
    /// takes its free staging files into the pool, and removes the files nothing refers to.
    public func recover() throws {
        let records = try queue.all()
        let changed = Set(records.filter(Self.changedSinceFlushed).map(\.id))
        // A staging file is one version's: a record naming it after a newer one did was left
        // behind (`unqueueLocked`).
        let newestNaming = Dictionary(records.map { ($0.staging, $0.id) }, uniquingKeysWith: max)
        var kept = Set<String>()
        state.withLock { state in
            for record in records {
                guard record.isTrusted else {
                    setAsideLocked(&state, record, because: "after a power loss or reboot (its bytes may not have reached the disk)")
                    continue
                }
                guard !changed.contains(record.id) else {
                    setAsideLocked(&state, record, because: "after a reboot: its bytes no longer match the content hash they had on disk")
                    continue
                }
                guard newestNaming[record.staging] == record.id,
                      let file = try? StagedFile(sealedAt: record.staging, size: record.size, pool: pool), file.size == record.size else {
                    FuseLog.error("queued upload of \(record.path) lost its staging file; dropped")
                    // Left behind, the record must not find its file's name used again.
                    if (try? queue.remove([record.id])) == nil { kept.insert(record.staging) }
                    continue
                }
                kept.insert(record.staging)
                let version = LocalVersion(id: record.id, file: file, path: record.path, modified: record.modified,
                                           baseRev: record.baseRev, baseID: "")
                version.phase = .queued
                version.sessionID = record.sessionID
                version.sentChunks = record.sentChunks
                version.flushed = record.flushed
                version.flushedHash = record.contentHash
                version.settledAt = .now - .seconds(60)
                // The killed mount may have committed these bytes, unheard of.
                version.maybeCommitted = record.ownCommits
                if let hash = record.contentHash { version.mayHaveCommitted([hash]) } else { version.recoveredUnhashed = true }
                addLocked(&state, version)
                if let older = state.current[version.pathLower], older.id > version.id { continue }
                state.current[version.pathLower] = version
            }
        }
        for name in (try? FileManager.default.contentsOfDirectory(atPath: stagingDirectory)) ?? [] {
            let path = stagingDirectory + "/" + name
            let inUse = kept.contains(path)
            if !pool.adopt(path, inUse: inUse) && !inUse { unlink(path) }
        }
    }

    /// After a reboot, whether a flushed file's bytes are no longer those it had on disk
    /// (only then: within one boot the page cache holds what was written, and a remount
    /// need not read every queued byte).
    private static func changedSinceFlushed(_ record: QueuedUpload) -> Bool {
        guard record.isFromEarlierBoot, record.flushed, record.size > 0, let hash = record.contentHash else { return false }
        return (try? ContentHasher.hash(file: record.staging)) != hash
    }

    // MARK: What the mount shows

    /// The local version's node at a path, if the path has one.
    public func overlay(_ pathLower: String) -> Node? {
        state.withLock { $0.current[pathLower]?.node }
    }

    /// Dropbox's answer to the commit of the version a path shows, while it waits for the
    /// catch-up that finishes it (`LocalVersion.answered`).
    public func answered(_ pathLower: String) -> (id: String, rev: String, contentHash: String?)? {
        state.withLock { $0.current[pathLower]?.answered.map { ($0.id, $0.rev, $0.contentHash) } }
    }

    /// The content hash Dropbox gave the version a handle reads, if its commit is answered
    /// and it is not finished yet (no newer version: nothing written since).
    func answeredContentHash(handle: UInt64) -> String? {
        state.withLock { readableLocked($0, handle)?.answered?.contentHash }
    }

    /// Local versions directly inside a folder.
    public func overlayChildren(_ folderLower: String) -> [Node] {
        state.withLock { state in
            let children = state.current.children(of: folderLower)
            state.examined += children.count
            return children.map(\.node)
        }
    }

    /// Whether any local version lies below a folder (rmdir must refuse).
    public func hasVersions(under folderLower: String) -> Bool {
        state.withLock { state in
            state.examined += 1
            return state.current.hasAny(below: folderLower)
        }
    }

    /// Versions looked at so far to answer `overlayChildren` and `hasVersions`, for tests to count.
    var versionsExamined: Int { state.withLock { $0.examined } }

    // MARK: Opening, writing, closing

    /// Serves a handle from the path's local version, making one for writers that have none
    /// to share: `base` reads the Dropbox file it starts from (nil for a new file), `truncate`
    /// starts it empty. A writer opening a sealed version shares it until its first change
    /// (an open that writes nothing makes nothing: no copy, no upload, no change to the view).
    /// Readers are served locally only when the path has a local version. Returns the
    /// version's lineage (nil: not served locally).
    ///
    /// The base is read (from the store) only when no version is current, outside the state,
    /// and read again if a version left a path meanwhile: one whose upload finished in
    /// between had its commit put in the store after the look, and a version started from
    /// that look began from the revision before it. (Three sqlite3 processes on one WAL
    /// database lost committed rows that way: an open `O_RDWR` as the checkpoint's upload
    /// finished read the database as it was before the checkpoint; `OpenDuringCommitTests`.)
    public func attach(handle: UInt64, path: String, base readBase: () throws -> Node?, writable: Bool, truncate: Bool) throws -> Int64? {
        var base: ReadBase?
        while true {
            switch try state.withLock({ try attachLocked(&$0, handle, path: path, base: base, writable: writable, truncate: truncate) }) {
            case .served(let lineage):
                return lineage
            case .needsBase(let removalsSeen):
                let node = try readBase()
                pauseAfterBaseRead.withLock { $0 }?(Node.key(of: path))
                base = ReadBase(node: node, removalsSeen: removalsSeen)
            }
        }
    }

    /// A base read outside the state, and how many paths had lost their version before.
    private struct ReadBase {
        var node: Node?
        var removalsSeen: UInt64
    }

    /// What `attachLocked` did: served the handle (a lineage, or nil when not served locally),
    /// or nothing, a base being needed (read after `removalsSeen` paths lost their version).
    private enum Attachment {
        case served(Int64?)
        case needsBase(removalsSeen: UInt64)
    }

    /// One look of `attach`: the current version serves the handle; without one, a writer gets
    /// a new version from `base`, unless none was read or it may be stale.
    private func attachLocked(_ state: inout State, _ handle: UInt64, path: String, base: ReadBase?, writable: Bool, truncate: Bool) throws -> Attachment {
        let pathLower = Node.key(of: path)
        if let current = state.current[pathLower] {
            return .served(try serveLocked(&state, handle, from: current, writable: writable, truncate: truncate))
        }
        guard writable else { return .served(nil) }
        guard let base, base.removalsSeen == state.current.removals else { return .needsBase(removalsSeen: state.current.removals) }
        let modified = truncate || base.node == nil ? LocalVersion.now()
            : timespec(tv_sec: Int(base.node!.modified), tv_nsec: Int(base.node!.modifiedNanos))
        let version = try startVersionLocked(&state, path: path, base: base.node, truncate: truncate || base.node == nil, modified: modified)
        version.writers = 1
        openFiles.serve(handle, from: version, writable: true)
        return .served(version.lineage)
    }

    /// Tests only: called with the path between `attach`'s read of a base and its look at the
    /// state, where a version finishing makes that base stale.
    let pauseAfterBaseRead = Mutex<(@Sendable (String) -> Void)?>(nil)

    /// A new version to edit, the newest at `path`, starting from `base` (the Dropbox file
    /// whose blocks it fetches as they are needed) unless `truncate` starts it empty.
    func startVersionLocked(_ state: inout State, path: String, base: Node?, truncate: Bool, modified: timespec) throws -> LocalVersion {
        let version = try makeVersionLocked(&state, path: path, base: base, truncate: truncate, modified: modified)
        addLocked(&state, version)
        state.current[version.pathLower] = version
        return version
    }

    /// A new version, not yet in the maps (`startVersionLocked` adds it; a detached one stays out).
    func makeVersionLocked(_ state: inout State, path: String, base: Node?, truncate: Bool, modified: timespec) throws -> LocalVersion {
        let id = state.nextID
        state.nextID += 1
        let file = try StagedFile(path: stagingPath(id), base: base.map { StagedFile.Base(node: $0, reader: reader) }, truncate: truncate, pool: pool)
        let version = LocalVersion(id: id, file: file, path: path, modified: modified, baseRev: base?.rev, baseID: base?.id ?? "")
        // Based on a commit of ours: a descriptor still on a revision that commit was made
        // from reads these bytes too (every descriptor of one file sees the others' writes).
        if let rev = base?.rev, let ancestry = state.ownCommits[rev] { version.descends(fromAncestry: ancestry) }
        return version
    }

    /// Serves a handle from the version another descriptor of the same file is served from:
    /// an open of a file whose name went (unlinked, or replaced by a rename) after the kernel
    /// looked it up, which a descriptor still holds. Nil when `sibling` is not served locally.
    public func attach(handle: UInt64, alongside sibling: UInt64, writable: Bool, truncate: Bool) throws -> Int64? {
        try state.withLock { state in
            guard let version = openFiles.version(of: sibling) else { return nil }
            return try serveLocked(&state, handle, from: version, writable: writable, truncate: truncate)
        }
    }

    /// Serves a handle from `current`, the file's newest version: a writer shares it while it
    /// is being edited; one that truncates a sealed version starts a new empty one after it.
    func serveLocked(_ state: inout State, _ handle: UInt64, from current: LocalVersion, writable: Bool, truncate: Bool) throws -> Int64 {
        var version = current
        if writable {
            if current.phase == .editing {
                if truncate { try truncateLocked(current, to: 0) }
                current.writers += 1
            } else if truncate {
                version = try newEmptyVersionLocked(&state, after: current)
                version.writers = 1
            }
        }
        openFiles.serve(handle, from: version, writable: writable)
        return version.lineage
    }

    /// An empty version to edit after `previous` (sealed), replacing what `previous` replaces.
    private func newEmptyVersionLocked(_ state: inout State, after previous: LocalVersion) throws -> LocalVersion {
        let id = state.nextID
        state.nextID += 1
        let file = try StagedFile(path: stagingPath(id), base: nil, truncate: true, pool: pool)
        let version = previous.successor(id: id, file: file, modified: LocalVersion.now())
        if !version.detached {
            addLocked(&state, version)
            state.current[version.pathLower] = version
            catchUpHandlesLocked(&state, to: version)
        }
        return version
    }

    private func stagingPath(_ id: Int64) -> String { stagingDirectory + "/\(id)" }

    /// Writes through a handle at once when no bytes must come from Dropbox first; nil means
    /// "call `write` (async)".
    public func tryWrite(handle: UInt64, _ bytes: UnsafeRawBufferPointer, at offset: Int64) throws -> Int? {
        try Self.checkSize(offset + Int64(bytes.count))
        while true {
            guard let version = openFiles.version(of: handle) else { throw FSError.io("write on an unknown handle") }
            switch try version.file.tryWrite(bytes, at: offset) {
            case .written(let count):
                touch(version, wrote: offset, count)
                return count
            case .needsFill:
                return nil
            case .sealed:
                try moveToNewVersion(handle: handle, from: version)
            }
        }
    }

    public func write(handle: UInt64, _ bytes: [UInt8], at offset: Int64) async throws -> Int {
        try Self.checkSize(offset + Int64(bytes.count))
        while true {
            guard let version = openFiles.version(of: handle) else { throw FSError.io("write on an unknown handle") }
            switch try await version.file.write(bytes, at: offset) {
            case .written(let count):
                touch(version, wrote: offset, count)
                return count
            case .needsFill:
                continue
            case .sealed:
                try moveToNewVersion(handle: handle, from: version)
            }
        }
    }

    /// The largest file Dropbox takes through an upload session (350 GB): beyond it a write
    /// or truncation fails with EFBIG, as on a local disk past its limit.
    static let maxFileSize: Int64 = 350_000_000_000

    static func checkSize(_ size: Int64) throws {
        if size > maxFileSize || size < 0 { throw FSError.fileTooLarge }
    }

    /// A handle's version is sealed (closed by another descriptor, or fsynced) and it changes
    /// the file: it goes on in the path's version being edited, or in a new copy of the
    /// path's newest bytes. The copy is made outside the lock (it may be a gigabyte).
    private func moveToNewVersion(handle: UInt64, from sealed: LocalVersion) throws {
        while true {
            enum Step { case done, copy(LocalVersion, Int64) }
            let step: Step = state.withLock { state in
                guard openFiles.version(of: handle) === sealed else { return .done }
                let newest = Self.newestLocked(state, of: sealed)
                if newest.phase == .editing && newest !== sealed {
                    openFiles.serve(handle, from: newest)
                    newest.writers += 1
                    return .done
                }
                let id = state.nextID
                state.nextID += 1
                return .copy(newest, id)
            }
            guard case .copy(let source, let id) = step else { return }
            let file = try source.file.copy(to: stagingPath(id))
            let installed: Bool = state.withLock { state in
                // Still the newest, and nobody made a version to edit meanwhile?
                guard openFiles.version(of: handle) === sealed else { return false }
                let newest = Self.newestLocked(state, of: sealed)
                guard newest === source else { return false }
                let version = source.successor(id: id, file: file, modified: source.modified)
                version.writers = 1
                if version.detached {
                    // No path to meet at: every descriptor of the unlinked file moves along.
                    _ = openFiles.move(to: version) { $0 === sealed }
                } else {
                    addLocked(&state, version)
                    state.current[version.pathLower] = version
                }
                openFiles.serve(handle, from: version)
                if !version.detached { catchUpHandlesLocked(&state, to: version) }
                return true
            }
            if installed { return }
            file.remove()
        }
    }

    private func touch(_ version: LocalVersion) {
        state.withLock { _ in
            version.settledAt = .now
            version.modified = LocalVersion.now()  // a change advances mtime, as on any disk
        }
    }

    /// After a write: the uploader hears when a file being written from empty may have a
    /// chunk ready to send before close: when the write takes it past a chunk's end (a chunk
    /// goes once the writer has moved past it, `StagedFile.freezeNextChunk`). Woken when a
    /// write merely reached the end, as `cp`'s aligned writes do, the uploader found no
    /// chunk ready, and heard nothing more until the next chunk's end: each chunk went one
    /// chunk late, and a file of 33 to 64 MiB sent none before its close.
    private func touch(_ version: LocalVersion, wrote offset: Int64, _ count: Int) {
        touch(version)
        guard count > 0 else { return }
        let chunk = UploadSchedule.chunkSize
        let (first, last) = (offset / chunk, (offset + Int64(count) - 1) / chunk)  // the chunks the write's bytes are in
        let passesAnEnd = last > first || (offset % chunk == 0 && offset > 0)
        if passesAnEnd && version.file.offersEarlyChunks { changed() }
    }

    private func truncateLocked(_ version: LocalVersion, to size: Int64) throws {
        _ = try version.file.truncate(to: size)
        version.modified = LocalVersion.now()
    }

    /// truncate(2) of a path, first step: `handle` is a short-lived writer's, just opened
    /// (`OpenFiles`), served like any other; the caller releases it, whatever this throws.
    /// A size other than 0 is set through the handle (`truncate(handle:to:)`) once the part
    /// it keeps is here (`fillBase`).
    func attachForTruncate(path: String, base: () throws -> Node?, to size: Int64, through handle: UInt64) throws {
        try Self.checkSize(size)
        _ = try attach(handle: handle, path: path, base: base, writable: true, truncate: size == 0)
    }

    /// Fetches the blocks below `end` of the handle's version that are still on Dropbox
    /// alone: the part a truncation keeps, asked before it changes anything (`setAttributes`).
    func fillBase(handle: UInt64, below end: Int64) async throws {
        try await openFiles.version(of: handle)?.file.fill(below: end)
    }

    /// ftruncate through a handle served locally.
    func truncate(handle: UInt64, to size: Int64) throws {
        try Self.checkSize(size)
        try change(handle: handle, doing: "truncate") { try $0.truncate(to: size) }
    }

    /// A change through a handle that leaves the bytes as they are (fallocate): the version
    /// counts as changed, and its mtime advances.
    func touch(handle: UInt64) throws {
        try change(handle: handle, doing: "fallocate") { $0.markChanged() }
    }

    /// Makes a change to the handle's version (`change` answers false, having done nothing,
    /// when the version is sealed: the handle goes on in a newer one), then advances its mtime.
    private func change(handle: UInt64, doing call: String, _ change: (StagedFile) throws -> Bool) throws {
        while true {
            guard let version = openFiles.version(of: handle) else { throw FSError.io("\(call) on an unknown handle") }
            if try change(version.file) { return touch(version) }
            try moveToNewVersion(handle: handle, from: version)
        }
    }

    /// Sets the modification time of the path's local versions (sent as `client_modified`;
    /// an uploading one records it for the revision its upload makes, `Uploader.complete`).
    /// Every one gets it: a version opened for writing and closed unchanged is dropped, and
    /// the one before it is the file again. Returns whether one of them has bytes of its own;
    /// if none has (no version, or only one opened for writing and unchanged so far), the
    /// caller keeps the time for the revision the path shows: that is the file's content.
    func setModified(_ pathLower: String, to time: timespec) throws -> Bool {
        try state.withLock { state in
            var ownBytes = false
            for version in Self.versionsLocked(state, at: pathLower) where !version.detached && version.phase != .finished {
                version.modified = time
                version.settledAt = .now
                if version.phase == .queued { try queue.save(version.record) }
                ownBytes = ownBytes || version.phase != .editing || version.file.hasChanges
            }
            return ownBytes
        }
    }

    /// A time set through the path of a file whose local version is done (uploaded): the
    /// versions still serving `handles` (what fstat of them shows, also once the name is
    /// gone) get it too.
    func setModified(servingHandles handles: [UInt64], to time: timespec) {
        state.withLock { state in
            for handle in handles {
                guard let own = openFiles.version(of: handle) else { continue }
                let version = Self.newestLocked(state, of: own)
                if version.phase == .finished && !version.detached { version.modified = time }
            }
        }
    }

    /// close(2) of a writable descriptor: seals the version into the queue if it changed.
    /// (A reader closing never seals a version someone is still writing.)
    public func flush(handle: UInt64) async throws {
        guard let version = openFiles.writingVersion(of: handle) else { return }
        try await seal(version)
    }

    /// `flush` when it needs nothing from Dropbox; false, having done nothing, when it does.
    public func flushWithoutWaiting(handle: UInt64) throws -> Bool {
        guard let version = openFiles.writingVersion(of: handle) else { return true }
        return try sealWithoutWaiting(version)
    }

    /// The last descriptor of a handle is gone: it leaves the table, and the version it was
    /// the last to write is sealed (or, never changed, dropped). Returns what the handle was.
    @discardableResult
    func release(handle: UInt64) async throws -> OpenFiles.Entry? {
        guard let entry = openFiles.remove(handle) else { return nil }
        guard let version = entry.version, entry.writable else { return entry }
        try await writerClosed(version)
        return entry
    }

    /// `release` when it needs nothing from Dropbox (no block of the file's version is still
    /// there only); nil, having done nothing, when it does. That holds once checked: blocks
    /// only ever become local.
    func releaseWithoutWaiting(handle: UInt64) throws -> OpenFiles.Entry?? {
        if let version = openFiles.writingVersion(of: handle), !version.file.isComplete { return nil }
        guard let entry = openFiles.remove(handle) else { return .some(nil) }
        guard let version = entry.version, entry.writable else { return entry }
        guard writerClosing(version) else { return entry }
        if try !sealWithoutWaiting(version) {
            Task { try await seal(version) }  // not expected: see above
        }
        finishIfUnchanged(version)
        return entry
    }

    private func writerClosed(_ version: LocalVersion) async throws {
        guard writerClosing(version) else { return }
        try await seal(version)
        finishIfUnchanged(version)
    }

    /// Counts a writer out; true if it was the last.
    private func writerClosing(_ version: LocalVersion) -> Bool {
        state.withLock { _ in
            guard version.phase == .editing, version.writers > 0 else { return false }
            version.writers -= 1
            return version.writers == 0
        }
    }

    /// Opened for writing but never changed: nothing to upload, nothing to show.
    private func finishIfUnchanged(_ version: LocalVersion) {
        state.withLock { state in
            guard version.phase == .editing, version.writers == 0, !version.file.hasChanges else { return }
            finishLocked(&state, version)
        }
    }

    /// Seals a changed version into the durable queue. A version of the same path still
    /// waiting in the queue is replaced by it, in the same transaction. If the queue cannot
    /// record it (a full cache disk), the version stays open for changes and the error goes
    /// to the caller: nothing is lost, and the next close or the drain tries again.
    func seal(_ version: LocalVersion) async throws {
        if try sealWithoutWaiting(version) { return }
        guard try await version.file.seal() else { return }
        try recordSeal(version)
    }

    /// `seal` when no byte must come from Dropbox first (a new file, or one whose blocks are
    /// all here); false, having changed nothing, when one must (call `seal`).
    func sealWithoutWaiting(_ version: LocalVersion) throws -> Bool {
        if state.withLock({ _ in version.detached || version.phase != .editing }) { return true }
        guard let sealed = version.file.sealIfLocal() else { return false }
        if sealed { try recordSeal(version) }
        return true
    }

    /// Records a version whose file was just sealed in the queue (see `seal`).
    private func recordSeal(_ version: LocalVersion) throws {
        beforeSeal(version.pathLower)
        hashRecovered(at: version.pathLower)
        let wakesUploader: Bool
        do {
            wakesUploader = try state.withLock { state in
                guard version.phase == .editing, !version.detached else { return true }
                dropBrokenEarlySessionLocked(version)
                let replaced = Self.versionsLocked(state, at: version.pathLower).filter { $0.phase == .queued && $0.id < version.id }
                if !version.file.hasLocalFile {
                    // Empty and never written: no byte can be lost to a power cut.
                    version.flushed = true
                    version.flushedHash = Self.emptyContentHash
                }
                // Their commits unheard of are the path's still: this version takes them on.
                version.mayHaveCommitted(replaced.flatMap(\.maybeCommitted))
                try queue.save(version.record, replacing: replaced.map(\.id))
                FuseLog.trace("seal #\(version.id) \(version.pathLower) on \(version.baseRev ?? "none"), \(version.file.size) bytes, replacing \(replaced.map(\.id))")
                version.phase = .queued
                version.settledAt = .now
                version.earlyStage = UploadSchedule.stagesEarly(size: version.file.size, replacing: replaced.map(\.file.size)) ? .waiting : .never
                for old in replaced {
                    old.replacedBy = version
                    finishLocked(&state, old)
                }
                catchUpHandlesLocked(&state, to: version)
                // It is due after its quiet moment (or, to stage its bytes, `stageAfter`) at the
                // earliest: a pass planned before then finds it. (Woken by every close, the
                // uploader looked at the whole queue for each file of a burst of creates.)
                let due = version.settledAt + (version.earlyStage == .waiting ? UploadSchedule.stageAfter : UploadSchedule.quietPeriod)
                return version.urgent || state.nextPass.map { $0 > due } ?? true
            }
        } catch {
            version.file.unseal()
            throw error
        }
        changed(wakesUploader: wakesUploader)
    }

    /// Something changed: wakes those waiting on `signal` and, unless told it cannot matter
    /// to it, the uploader; `urgent`: someone waits for uploads now (`urgentSignal`).
    func changed(wakesUploader: Bool = true, urgent: Bool = false) {
        signal.notify()
        if urgent { urgentSignal.notify() }
        if wakesUploader { uploaderSignal.notify() }
    }

    /// Descriptors on older versions of `version`'s file now use it: they are one file, and
    /// `version` holds its newest bytes. Called whenever a newer version appears (a copy to
    /// edit, a truncating open, a seal, an upload), so no descriptor is left on old bytes it
    /// would copy at its next write, or keep when the name goes.
    func catchUpHandlesLocked(_ state: inout State, to version: LocalVersion) {
        let writers = openFiles.move(to: version) { held in !held.detached && held.id < version.id && held.pathLower == version.pathLower }
        if version.phase == .editing { version.writers += writers }
    }

    /// Drops a version from the maps (and its staging file; open handles keep its bytes
    /// through their descriptor). The path then shows its newest version left, if any, else
    /// what the store holds: a name never vanishes while an older version still waits.
    ///
    /// Only a version still being edited (opened for writing, closed unchanged) can have
    /// older ones waiting behind it: an uploaded one had none (uploads go oldest first, and a
    /// seal replaces older queued ones), and a detach empties the path. So only then is the
    /// path searched for the newest left; a batch of 1,000 uploads searches nothing.
    func finishLocked(_ state: inout State, _ version: LocalVersion) {
        setCommittingLocked(&state, version, false)
        let wasEditing = version.phase == .editing
        version.phase = .finished
        let pathLower = version.pathLower
        if state.versions.removeValue(forKey: version.id) != nil { Self.unindexLocked(&state, version, at: pathLower) }
        if state.current[pathLower] === version {
            let newest = wasEditing ? Self.versionsLocked(state, at: pathLower).max(by: { $0.id < $1.id }) : nil
            state.current[pathLower] = newest
        }
        version.file.remove()
    }

    /// Takes versions' records out of the queue. If the queue cannot be written (a full cache
    /// disk), a record is left behind: its staging file gets a new name before it is used
    /// again (`StagedFile.outlivedByItsRecord`), so the next mount finds the record's file
    /// gone and drops it, rather than taking another version's bytes for its own.
    func unqueueLocked(_ versions: [LocalVersion]) {
        guard !versions.isEmpty else { return }
        do {
            try queue.remove(versions.map(\.id))
        } catch {
            for version in versions { version.file.outlivedByItsRecord() }
            FuseLog.error("removing \(versions.count) file(s) from the upload queue failed (\(error)); the next mount drops them")
        }
    }

    /// A new unfinished version, in `versions` and `atPath`.
    func addLocked(_ state: inout State, _ version: LocalVersion) {
        state.versions[version.id] = version
        state.atPath[version.pathLower, default: [:]][version.id] = version
    }

    /// Takes a version out of `atPath` under `key` (its key when it was put there).
    static func unindexLocked(_ state: inout State, _ version: LocalVersion, at key: String) {
        state.atPath[key]?.removeValue(forKey: version.id)
        if state.atPath[key]?.isEmpty == true { state.atPath.removeValue(forKey: key) }
    }

    /// The unfinished versions at a path key.
    static func versionsLocked(_ state: State, at key: String) -> [LocalVersion] {
        state.atPath[key].map { Array($0.values) } ?? []
    }

    /// Marks a version as being committed, or no longer, keeping `committingAt` in step.
    func setCommittingLocked(_ state: inout State, _ version: LocalVersion, _ committing: Bool) {
        guard version.committing != committing else { return }
        version.committing = committing
        let key = version.pathLower
        if committing { state.committingAt.insert(key) } else { state.committingAt.remove(key) }
    }

    // MARK: Reads of local versions

    /// For a read a handle serves locally: the staging file's span when every byte is local,
    /// with the staging file itself, to be kept while the span is read: once released, a
    /// done staging file is emptied for reuse (`StagingPool`).
    public func localSpan(handle: UInt64, offset: Int64, size: Int) -> (file: String, offset: Int64, length: Int, holder: StagedFile)? {
        guard let version = readable(handle) else { return nil }
        let length = max(0, min(Int64(size), version.file.size - offset))
        guard length > 0, version.file.isLocal(at: offset, size: Int(length)) else { return nil }
        return (version.file.path, offset, Int(length), version.file)
    }

    public func read(handle: UInt64, offset: Int64, size: Int) async throws -> [UInt8] {
        guard let version = readable(handle) else { throw FSError.io("read on an unknown handle") }
        return try await version.file.read(at: offset, size: size)
    }

    /// The newest version of `version`'s file: the path's, or its own once detached.
    static func newestLocked(_ state: State, of version: LocalVersion) -> LocalVersion {
        version.detached ? version : (state.current[version.pathLower] ?? version)
    }

    /// What a handle reads: the newest version of its file (another descriptor may have
    /// written since this one opened, as on any disk), or its own once detached or gone.
    func readable(_ handle: UInt64) -> LocalVersion? {
        state.withLock { readableLocked($0, handle) }
    }

    private func readableLocked(_ state: State, _ handle: UInt64) -> LocalVersion? {
        openFiles.version(of: handle).map { Self.newestLocked(state, of: $0) }
    }

    /// A descriptor opened on Dropbox revision `rev` of a file that now has a local version
    /// descending from that revision (written through another descriptor since): from now on
    /// it reads the local bytes, as every descriptor of one file sees the others' writes. A
    /// descriptor on a revision since replaced on Dropbox keeps reading that revision.
    public func adopt(handle: UInt64, pathLower: String, revision rev: String) -> Bool {
        state.withLock { state in
            // The path's newest version, or (once uploaded) the newest one a descriptor holds.
            let candidates = [state.current[pathLower]].compactMap { $0 }
                + openFiles.servingVersions.filter { !$0.detached && $0.pathLower == pathLower }
            guard let newest = candidates.filter({ $0.ancestry.contains(rev) }).max(by: { $0.id < $1.id }) else { return false }
            return openFiles.serve(handle, from: newest)
        }
    }

    /// Whether `rev` is our own commit of bytes descending from revision `older`.
    public func isOwnCommit(_ rev: String, madeFrom older: String) -> Bool {
        state.withLock { $0.ownCommits[rev]?.contains(older) ?? false }
    }

    func recordOwnCommitLocked(_ state: inout State, _ rev: String, ancestry: [String]) {
        if state.ownCommits.updateValue(ancestry, forKey: rev) == nil { state.ownCommitOrder.append(rev) }
        // Forgets the oldest tenth at once: removing one at a time from the front of the
        // array would move 10,000 entries on every upload.
        if state.ownCommitOrder.count > Self.ownCommitLimit + Self.ownCommitLimit / 10 {
            let forgotten = state.ownCommitOrder.count - Self.ownCommitLimit
            for rev in state.ownCommitOrder[..<forgotten] { state.ownCommits.removeValue(forKey: rev) }
            state.ownCommitOrder.removeFirst(forgotten)
        }
    }

    /// The node a handle's file has now (fstat of a descriptor whose name is gone).
    public func node(handle: UInt64) -> Node? { readable(handle)?.node }

    /// The Dropbox revision whose bytes a locally served handle reads: set once its version
    /// is uploaded at its path and no newer one exists (nil before, and for a version still
    /// changing or left as a conflicted copy).
    func uploadedRevision(handle: UInt64) -> String? {
        state.withLock { state in
            guard let own = openFiles.version(of: handle) else { return nil }
            let version = Self.newestLocked(state, of: own)
            return version.phase == .finished ? version.committedRev : nil
        }
    }
}
