import DropboxAPI
import Foundation
import Synchronization

/// mkdir answered here, waiting to be made on Dropbox (`FolderSender` sends them through
/// `create_folder_batch`). Each is in the durable queue before mkdir returns. Until Dropbox
/// has it and the store has learnt so, the folder shows from here, empty but for what is made
/// in it here: the store, which holds what Dropbox holds, does not have it yet.
///
/// An rmdir before the folder was sent takes it back: it costs no request. One that may have
/// reached Dropbox already (a round sent it and learnt nothing, or a previous mount left it)
/// is taken back with a delete queued in its place: that finds it on Dropbox or nothing.
/// Whatever else reaches Dropbox in it or at it (an upload, a copy, a move, an fsync of it)
/// sends it first: an upload would make it too, but with its name in lower case (the parent
/// part of a local version's path is a key).
///
/// The store counts each as listed while it is pending (`MetadataStore.beginMakingFolder`).
public final class PendingFolders: RoundQueue {
    let queue: UploadQueue
    let store: MetadataStore
    let order: NamespaceOrder
    let handoffs: Handoffs
    let signal = ChangeSignal()
    private let state: Mutex<State>

    private struct State {
        var byPath: [String: QueuedFolder] = [:]
        /// The new folders in each folder (keys by parent key): a listing asks for them.
        var byParent: [String: Set<String>] = [:]
        /// Folders a round is sending: an rmdir no longer takes them back.
        var sending: Set<String> = []
        /// Folders a round sent, or a previous mount left (it may have sent them before it
        /// stopped): Dropbox may have made them without this mount hearing of it.
        var maybeMade: Set<String> = []
        var lastAdded = ContinuousClock.now
        /// The keys of `byPath`, for "is one below this folder?" without a scan.
        var paths = PathTouches()

        mutating func insert(_ record: QueuedFolder) {
            if byPath.updateValue(record, forKey: record.pathLower) == nil { paths.insert(record.pathLower) }
            byParent[Node.parent(of: record.pathLower), default: []].insert(record.pathLower)
        }

        /// A new folder's path as Dropbox is to show it: `path` (the parent's key and the
        /// name as typed), with the parent's path as typed when that is a new folder too.
        func typed(_ path: String, key pathLower: String) -> String {
            byPath[Node.parent(of: pathLower)].map { $0.path + path[path.lastIndex(of: "/")!...] } ?? path
        }

        mutating func remove(_ pathLower: String) {
            if byPath.removeValue(forKey: pathLower) != nil { paths.remove(pathLower) }
            let parent = Node.parent(of: pathLower)
            byParent[parent]?.remove(pathLower)
            if byParent[parent]?.isEmpty == true { byParent.removeValue(forKey: parent) }
            sending.remove(pathLower)
            maybeMade.remove(pathLower)
        }
    }

    /// Takes up the folders a previous mount left.
    init(queue: UploadQueue, store: MetadataStore, order: NamespaceOrder, handoffs: Handoffs) throws {
        self.queue = queue
        self.store = store
        self.order = order
        self.handoffs = handoffs
        let records = try queue.allFolders()
        var state = State()
        for record in records where state.byPath[record.pathLower] == nil {
            state.insert(record)
            state.maybeMade.insert(record.pathLower)
            try store.beginMakingFolder(record.pathLower)
        }
        self.state = Mutex(state)
        order.wakes(signal)
    }

    /// The folder as the mount shows it while it is not on Dropbox.
    func node(_ pathLower: String) -> Node? {
        state.withLock { $0.byPath[pathLower].map(Self.node) }
    }

    /// The pending folder at a path, with its place in the order (`record.id`).
    func record(_ pathLower: String) -> QueuedFolder? { state.withLock { $0.byPath[pathLower] } }

    /// The pending folders directly in a folder, with their places in the order.
    func childRecords(of folderLower: String) -> [QueuedFolder] {
        state.withLock { state in (state.byParent[folderLower] ?? []).compactMap { state.byPath[$0] } }
    }

    /// The new folders directly in a folder.
    func children(of folderLower: String) -> [Node] {
        state.withLock { state in
            guard let keys = state.byParent[folderLower] else { return [] }
            return keys.compactMap { state.byPath[$0].map(Self.node) }
        }
    }

    func isPending(_ pathLower: String) -> Bool { state.withLock { $0.byPath[pathLower] != nil } }

    /// Whether a new folder is pending strictly below `folder`.
    func hasRecordBelow(_ folder: String) -> Bool { state.withLock { $0.paths.hasBelow(folder) } }

    /// Whether a new folder made while `ids` were handed out (`NamespaceOrder`) is pending
    /// strictly below `folder`.
    func hasRecord(below folder: String, madeIn ids: Range<Int64>) -> Bool {
        state.withLock { state in
            state.paths.hasBelow(folder) && state.byPath.values.contains { ids.contains($0.id) && $0.pathLower.hasPrefix(folder + "/") }
        }
    }

    static func node(_ record: QueuedFolder) -> Node {
        Node(pathLower: record.pathLower, name: record.name, isFolder: true)
    }

    /// Records a new folder durably; returns once it would survive a crash of the daemon.
    /// `path` is the parent's key and the name as typed.
    func add(path: String) throws {
        let pathLower = Node.key(of: path)
        let first: Bool = try state.withLock { state in
            if state.byPath[pathLower] != nil { return false }
            // In a new folder: its path as typed too (Dropbox shows what it was sent).
            let record = QueuedFolder(id: order.take(), pathLower: pathLower, path: state.typed(path, key: pathLower))
            try queue.saveFolder(record)
            try store.beginMakingFolder(pathLower)
            state.insert(record)
            state.lastAdded = .now
            return state.byPath.count == 1
        }
        if first { signal.notify() }  // later ones the sender finds when its quiet wait ends
    }

    /// A rename of a folder not sent yet: it is made at its new name instead (`path`: the
    /// parent's key and the name as typed), with a new place in the order, after whatever the
    /// rename comes after; no move for Dropbox to make, and nothing left behind at the old
    /// name. One a round may have made (its answer lost, or Dropbox out of reach as it went)
    /// has its delete at the old name queued first (`removeFromDropbox`), as a take-back does
    /// (Dropbox deletes a folder it finds there only if empty). Kept as a rename instead, it
    /// had to be made on Dropbox before anything could be removed around it, and in an outage
    /// an rmdir there failed with ENETUNREACH, where a disk's succeeds. False, changing
    /// nothing, if a round is sending it or a new folder is pending at the new name.
    func remake(_ fromLower: String, at path: String, removeFromDropbox: (Node) throws -> Void) throws -> Bool {
        let pathLower = Node.key(of: path)
        let remade: Bool = try state.withLock { state in
            guard let old = state.byPath[fromLower], !state.sending.contains(fromLower), state.byPath[pathLower] == nil else { return false }
            // Under the lock, so that no look finds the folder at neither name; the removals'
            // queue takes no lock of ours.
            if state.maybeMade.contains(fromLower) { try removeFromDropbox(Self.node(old)) }
            let record = QueuedFolder(id: order.take(), pathLower: pathLower, path: state.typed(path, key: pathLower))
            try queue.replaceFolder(old.id, with: record)
            try store.endMakingFolder(fromLower, takenBack: true)
            try store.beginMakingFolder(pathLower)
            state.remove(fromLower)
            state.insert(record)
            state.lastAdded = .now
            return true
        }
        if remade { signal.notify() }
        return remade
    }

    /// rmdir of a folder not sent yet: it leaves the queue, no request made, and so do the
    /// renames that moved it (`takeBackRenames`, false if one is under way). One that may be
    /// on Dropbox all the same has its delete queued first (`removeFromDropbox`), before it
    /// leaves the queue (a crash in between makes it and then deletes it), and keeps its
    /// renames, which may have been made too. Changes nothing if a round is sending it (the
    /// caller waits for that round, and removes it from Dropbox), or one of its renames is
    /// under way; which of those it was is said here, as it was seen (the caller, asking
    /// `isSending` afterwards, found the round ended meanwhile, took it for renames to send
    /// first, and in an outage failed an rmdir with ENETUNREACH: four-at-once differential).
    func takeBack(_ pathLower: String, removeFromDropbox: (Node) throws -> Void,
                  takeBackRenames: () throws -> Bool) throws -> TakeBack {
        let taken: (record: QueuedFolder, maybeMade: Bool)? = state.withLock { state in
            guard let record = state.byPath[pathLower], !state.sending.contains(pathLower) else { return nil }
            let maybeMade = state.maybeMade.contains(pathLower)
            state.remove(pathLower)
            return (record, maybeMade)
        }
        guard let (record, maybeMade) = taken else { return .beingSent }
        func putBack() {
            state.withLock { state in
                state.insert(record)
                if maybeMade { state.maybeMade.insert(pathLower) }
            }
        }
        do {
            if maybeMade {
                try removeFromDropbox(Self.node(record))
            } else if try !takeBackRenames() {
                putBack()
                return .renamesUnderWay
            }
        } catch {
            putBack()
            throw error
        }
        try store.endMakingFolder(pathLower, takenBack: true)
        try queue.removeFolders([record.id])
        signal.notify()
        return .taken
    }

    /// What `takeBack` did.
    enum TakeBack { case taken, beingSent, renamesUnderWay }

    /// Whether a new folder that may be sent now (older than every pending rename), and
    /// numbered `upTo` or before, is pending at, above or below any of `paths`.
    func touches(_ paths: [String], upTo newest: Int64 = .max) -> Bool {
        let below = min(order.barrier, newest == .max ? .max : newest + 1)
        return state.withLock { state in
            if below == .max { return Node.anyTouches(paths, pending: state.byPath) }
            return Node.anyTouches(paths, pending: state.byPath.filter { $0.value.id < below })
        }
    }

    /// Whether any new folder numbered `upTo` or before is pending at, above or below any of
    /// `paths`, also one that waits behind a rename.
    func touchesAny(_ paths: [String], upTo newest: Int64 = .max) -> Bool {
        state.withLock { state in
            if newest == .max { return Node.anyTouches(paths, pending: state.byPath) }
            return Node.anyTouches(paths, pending: state.byPath.filter { $0.value.id <= newest })
        }
    }

    /// Whether a round is sending the new folder at this path.
    func isSending(_ pathLower: String) -> Bool { state.withLock { $0.sending.contains(pathLower) } }

    /// Every pending folder that may be sent now (older than every pending rename), oldest
    /// first, now marked as being sent.
    func startSending() -> [QueuedFolder] {
        let barrier = order.barrier
        return state.withLock { state in
            let records = state.byPath.values.filter { $0.id < barrier }.sorted { $0.id < $1.id }
            state.sending.formUnion(records.map(\.pathLower))
            state.maybeMade.formUnion(records.map(\.pathLower))
            return records
        }
    }

    /// A round that did not make `records` (they wait for the next).
    func stopSending(_ records: [QueuedFolder]) {
        state.withLock { state in for record in records { state.sending.remove(record.pathLower) } }
    }

    /// New folders that may be sent now.
    public var count: Int {
        let barrier = order.barrier
        return state.withLock { state in barrier == .max ? state.byPath.count : state.byPath.values.filter { $0.id < barrier }.count }
    }

    /// The oldest new folder that waits behind a rename (`Int64.max` when none).
    var oldestWaiting: Int64 {
        let barrier = order.barrier
        return state.withLock { $0.byPath.values.map(\.id).filter { $0 > barrier }.min() ?? .max }
    }

    /// Every pending new folder, also those waiting behind a rename.
    public var total: Int { state.withLock { $0.byPath.count } }
    var lastAdded: ContinuousClock.Instant { state.withLock { $0.lastAdded } }

    /// Folders Dropbox has made (the store has them now), or refused for good: they leave
    /// the queue and the view.
    func finished(made: [QueuedFolder], refused: [QueuedFolder]) throws {
        let records = made + refused
        guard !records.isEmpty else { return }
        let refusedPaths = Set(refused.map(\.pathLower))
        try queue.removeFolders(records.map(\.id))
        handoffs.handingOff()
        let left: [String] = state.withLock { state in
            let left = records.filter { state.byPath[$0.pathLower]?.id == $0.id }.map(\.pathLower)
            for pathLower in left { state.remove(pathLower) }
            return left
        }
        for pathLower in left { try? store.endMakingFolder(pathLower, takenBack: refusedPaths.contains(pathLower)) }
        signal.notify()
    }
}
