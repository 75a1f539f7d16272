import DropboxAPI
import Foundation
import Synchronization

/// One local version of a file: its bytes (a `StagedFile`) and where it stands on the way to
/// Dropbox. A path has at most one version being edited; once sealed (at close or fsync) a
/// version waits in the upload queue, and writing the file again starts a new version from a
/// copy. Every field but `id`, `file` and `path` is guarded by the owning `WriteBack`'s lock.
final class LocalVersion: @unchecked Sendable {
    /// Where a version stands. Every change happens in `WriteBack`, under its lock:
    ///
    ///     editing ──seal (close, fsync, unmount)──▶ queued ──UploadSchedule picks it──▶ uploading
    ///        │                                      ▲   │                                  │
    ///        │ last writer closes, nothing changed   │   └─ replaced by a newer seal ─┐     │
    ///        ▼                                      └──── upload failed (retry) ◀────┼─────┤
    ///     finished ◀──────────────────────────────────────────────────────────────────┴─────┘
    ///                                                           committed (or a conflicted copy)
    ///
    /// Beside the phase, `detached` (unlink or a rename over it while descriptors are open):
    /// a detached version is never queued or shown at a path and finishes at once; its
    /// descriptors keep reading and writing it until they close.
    enum Phase: Equatable {
        /// Open for writing; not yet in the queue.
        case editing
        /// Sealed and recorded in the upload queue; its path may still change (a rename).
        case queued
        /// Being sent to Dropbox. Its path is fixed while it is `committing`; before that (a
        /// large file's bytes going into its session) a rename re-addresses it and a delete
        /// abandons it, instead of waiting for gigabytes to go.
        case uploading
        /// On Dropbox, replaced by a newer version before it went, or deleted.
        case finished
    }

    let id: Int64
    /// The id of the first version in the chain this one continues (each newer version of a
    /// path starts as a copy of the one before, while it lasts): the kernel's cached pages of
    /// the file came through writes to this chain, so they stay good across its versions.
    let lineage: Int64
    let file: StagedFile
    /// The Dropbox path: the parent's lower-case path and the file's own name (Dropbox keeps
    /// folders' casing; the last component is what the user typed). A rename changes it
    /// under WriteBack's lock while uploads and logs read it outside: it has a lock of its own.
    var path: String {
        get { pathBox.withLock { $0.path } }
        set { pathBox.withLock { $0 = (newValue, Node.key(of: newValue)) } }
    }
    /// The path's key, kept with it: the scheduler and the view compare every version's key
    /// on each pass, and folding it anew each time cost more than the rest of a create.
    var pathLower: String { pathBox.withLock { $0.key } }
    private let pathBox: Mutex<(path: String, key: String)>
    var modified: timespec
    /// The revision this version replaces (`WriteMode.update`); nil for a new file.
    var baseRev: String?
    /// The Dropbox id of the file it came from (for `user.dropbox.id`), if any.
    var baseID: String
    var phase: Phase = .editing
    /// Sealed and not yet on Dropbox (queued or uploading): it has a record in the upload
    /// queue, and counts as pending.
    var isInQueue: Bool { phase == .queued || phase == .uploading }
    /// Writable handles open on it.
    var writers = 0
    /// When it was sealed or last touched: uploads wait a moment for a following rename or
    /// utimens (rsync, editors) unless someone waits for them (`urgent`).
    var settledAt = ContinuousClock.now
    var urgent = false
    /// Why the last upload attempt failed, and when to try again.
    var failure: FSError?
    var failureText: String?
    /// The failure is a server error or a rate limit, which the next try may well not meet:
    /// an fsync waits for that try rather than fail (a run of server errors takes the mount
    /// offline, and the fsync then keeps the bytes on the local disk).
    var failureMayPass = false
    var retryAt: ContinuousClock.Instant?
    var attempts = 0
    /// Content hashes of this path's versions (this one, or older ones it replaced) whose
    /// commit may have happened without the mount hearing of it: the answer was lost and
    /// Dropbox was out of reach to ask, or a previous mount was killed with it in its queue.
    /// Finding one of them on Dropbox is finding our own commit, not another client's change
    /// (`Uploader.saveConflictedCopy`); a removal or rename of the path deletes it there
    /// (`WriteBack.ownCommitsUnheardOf`). Kept in the queue's record.
    var maybeCommitted: [String] = []
    /// Taken up from a previous mount's queue with no content hash recorded: that mount may
    /// have committed these bytes before it stopped. Once they are hashed (their first flush,
    /// or `WriteBack.hashRecovered`) the hash joins `maybeCommitted`.
    var recoveredUnhashed = false
    /// A concurrent upload session under way (large files), to resume after a crash.
    var sessionID: String?
    var sentChunks: Set<Int64> = []
    /// The staging file's bytes are on disk (`WriteBack+Durability`): they survive a power loss.
    var flushed = false
    /// The staging file's content hash when it was flushed (kept in the queue record).
    var flushedHash: String?
    var sentBytes: Int64 = 0
    /// Block digests of chunks sent before close, so the upload at seal need not read them
    /// again to hash them.
    var chunkDigests: [Int64: [UInt8]] = [:]
    /// Its commit is under way (a small file's whole upload, a large file's finish): renames
    /// and deletes there wait for it to end (`WriteBack.holding`).
    var committing = false
    /// Stops the sending of a large file's bytes; called when the version is detached (a
    /// delete or a rename over it) while they go.
    var abandonSending: (@Sendable () -> Void)?
    /// Early sends under way (`WriteBack+EarlyUploads`): the upload waits for them.
    var earlySends = 0
    /// A small file's bytes in a closed session, sent by a try whose commit failed: the next
    /// try commits them and sends no byte again (`WriteBack+StagedBytes`). In memory only: a
    /// restarted mount sends them anew.
    var stagedBytes: DropboxClient.StagedBytes?
    /// Where its early staging stands (`WriteBack+EarlyStaging`).
    var earlyStage = EarlyStage.never
    enum EarlyStage {
        /// Not to be staged early (`UploadSchedule.stagesEarly`), recovered, or done.
        case never
        /// To be staged once it has settled (`UploadSchedule.stageAfter`).
        case waiting
        /// Its bytes are going: its batch waits for them rather than send them again.
        case sending
    }
    /// The version that took its place before it was uploaded, if one did.
    var replacedBy: LocalVersion?
    /// The revision Dropbox gave this version's bytes at its path, once uploaded: a version
    /// made from this one later replaces that revision, not this one's base (our own commit
    /// is never a conflict).
    var committedRev: String?
    /// What Dropbox answered for its commit at its path: until it is finished, the file's
    /// attributes show that id, revision and content hash (`getfattr` while the catch-up runs; its
    /// node does not carry them: a revision there would make an open take it for a download
    /// and drop the kernel's pages). And the time then kept for that revision: a time set
    /// later, before the version is finished, is kept for it at `finished`.
    var answered: (id: String, rev: String, contentHash: String?, modified: timespec)?
    /// The Dropbox revisions this version's bytes descend from (its base, and our own commits
    /// along its chain; the newest few): a descriptor reading one of them reads this file.
    private(set) var ancestry: [String] = []
    static let ancestryLimit = 32

    func descends(from rev: String?) {
        guard let rev, !ancestry.contains(rev) else { return }
        ancestry.append(rev)
        if ancestry.count > Self.ancestryLimit { ancestry.removeFirst() }
    }

    /// Descends from the revisions `older` descends from too, which come before its own.
    func descends(fromAncestry older: [String]) {
        ancestry = Array((older.filter { !ancestry.contains($0) } + ancestry).suffix(Self.ancestryLimit))
    }

    /// Cut off from its name by unlink or rename-over while descriptors were open: still
    /// read and written through them, never queued, never uploaded, never shown at a path.
    var detached = false
    /// Dropbox refused it for good (its name): out of the queue, its bytes kept aside
    /// (`WriteBack.failed`); an fsync waiting for it fails with `failure`.
    var setAside = false

    init(id: Int64, lineage: Int64? = nil, file: StagedFile, path: String, modified: timespec, baseRev: String?, baseID: String) {
        self.id = id
        self.lineage = lineage ?? id
        self.file = file
        self.pathBox = Mutex((path, Node.key(of: path)))
        self.modified = modified
        self.baseRev = baseRev
        self.baseID = baseID
        descends(from: baseRev)
    }

    /// A version made from `source`: the same ancestry, and whatever `source` was committed as.
    func inherit(from source: LocalVersion) {
        for rev in source.ancestry { descends(from: rev) }
        descends(from: source.committedRev)
    }

    /// The next version of this file (a copy to edit, or an empty one for a truncating open):
    /// same chain, path and detachment, based on what this one will be committed as.
    func successor(id: Int64, file: StagedFile, modified: timespec) -> LocalVersion {
        let next = LocalVersion(id: id, lineage: lineage, file: file, path: path, modified: modified,
                                baseRev: revisionForNext, baseID: baseID)
        next.inherit(from: self)
        next.detached = detached
        return next
    }

    var name: String { String(path[path.index(after: Node.lastSlash(path)!)...]) }

    /// Whether this version sits at `pathLower` or anywhere below it.
    func isAt(orUnder prefix: String) -> Bool { Node.isAt(pathLower, orUnder: prefix) }

    /// The revision a version made from this one replaces.
    var revisionForNext: String? { committedRev ?? baseRev }

    var node: Node {
        var node = Node(pathLower: pathLower, name: name, isFolder: false)
        node.size = file.size
        node.modified = Int64(modified.tv_sec)
        node.modifiedNanos = Int32(modified.tv_nsec)
        node.id = baseID
        return node
    }

    /// Adds to `maybeCommitted` the hashes it lacks.
    func mayHaveCommitted(_ hashes: [String]) {
        for hash in hashes where !maybeCommitted.contains(hash) { maybeCommitted.append(hash) }
    }

    var record: QueuedUpload {
        QueuedUpload(id: id, path: path, staging: file.path, size: file.size, modified: modified, baseRev: baseRev,
                     sessionID: sessionID, sentChunks: sentChunks, flushed: flushed, contentHash: flushedHash, ownCommits: maybeCommitted)
    }

    static func now() -> timespec {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return time
    }
}
