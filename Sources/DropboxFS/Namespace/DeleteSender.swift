import DropboxAPI
import Foundation
import Synchronization

/// Sends the pending deletes (`PendingDeletes`) to Dropbox: in the background once unlinks
/// stop coming for a moment, and at once when something must reach Dropbox after them.
///
/// One round sends every delete pending when it starts:
/// - a removed folder tree (`rm -r`) goes whole: the folder moves to a hidden name, its
///   listing there must hold nothing but what was removed here (each file at the revision
///   removed), and it is deleted in one call. Three requests, however many files it held.
///   Anything else there (a file added or changed elsewhere) and it moves back, and its
///   deletes go one by one below;
/// - other files go through `delete_batch` (1,000 a call), each with its revision: a file
///   changed elsewhere since is kept, and shows again. One where a commit of ours may be
///   unheard of (`QueuedDelete.ifContent`) is looked at first, and deleted if it is ours;
/// - folders whose tree could not go whole are deleted deepest first, each only if empty.
///
/// Rounds run one at a time, in order.
final class DeleteSender: Sendable {
    let pending: PendingDeletes
    let calls: TreeCalls
    let store: MetadataStore
    private let rounds = QueuedRounds()

    init(pending: PendingDeletes, calls: TreeCalls, store: MetadataStore) {
        self.pending = pending
        self.calls = calls
        self.store = store
    }

    /// How long deletes wait for the next one before they go (`rm -r` removes a folder's
    /// files, then the folder: sent together, the files cost no request of their own).
    static let quiet: Duration = .milliseconds(200)

    /// Sends deletes until cancelled; failures wait and try again (the deletes stay queued).
    func run() async {
        await rounds.run(pending, quiet: Self.quiet, what: "deletes", reachability: calls.client.reachability) { try await self.sendRound() }
    }

    /// Sends the deletes at, above or below `paths` pending when this began (and every
    /// other pending one with them) before something else reaches Dropbox there.
    func send(touching paths: [String]) async throws {
        let newest = pending.order.newest
        while pending.touches(paths, upTo: newest) { try await sendAll() }
    }

    /// One round after those already running.
    func sendAll() async throws { try await rounds.sendAll { try await self.sendRound() } }

    private struct Outcome {
        var done: [QueuedDelete] = []
        /// Refused because Dropbox holds something else there now: that shows again.
        var kept: [QueuedDelete] = []
        var failures: [String] = []
    }

    private func sendRound() async throws {
        let records = pending.all
        guard !records.isEmpty else { return }
        FuseLog.trace("deletes: round of \(records.count):\(records.prefix(32).map { " #\($0.id) \($0.pathLower)\($0.isFolder ? "/" : "")" }.joined())")
        var outcome = Outcome()

        let (trees, loose) = Self.trees(of: records)
        var folders: [QueuedDelete] = []
        var files = loose.filter { !$0.isFolder }
        for (top, inside) in trees {
            switch try await deleteWhole(top, inside, via: top.hiddenStep(alone: false)) {
            case .gone:
                outcome.done += inside
            case .kept(let goneBelow):
                var rest = inside
                for folder in goneBelow {
                    let gone = rest.filter { Self.lies($0, inside: folder) }
                    outcome.done += gone
                    let ids = Set(gone.map(\.id))
                    rest.removeAll { ids.contains($0.id) }
                }
                files += rest.filter { !$0.isFolder }
                folders += rest.filter(\.isFolder)
            }
        }
        try await deleteFiles(files, into: &outcome)
        if !folders.isEmpty {
            try await calls.watcher.catchUp()  // folders moved back are in the store again
            try await deleteFolders(folders, into: &outcome)
        }

        // The names stay hidden until the store has learnt they are gone (a full cache disk
        // may keep it from writing): the round then fails, and is tried again.
        // The hidden names go too: the change feed may have brought a folder's in as it was
        // set aside, and the view shows it once its record leaves (it did, until the feed
        // came back after an outage that began as the round ended).
        do { try await calls.watcher.catchUp() } catch {
            FuseLog.trace("deletes: catch-up failed (\(error)); the store learns the \(outcome.done.count) removals here")
            _ = try store.apply(outcome.done.flatMap(Self.namesGone))
        }
        FuseLog.trace("deletes: done\(outcome.done.map { " #\($0.id)" }.joined()), kept\(outcome.kept.map { " #\($0.id)" }.joined()), \(outcome.failures.count) failed")
        try pending.finished(outcome.done + outcome.kept)
        let shownAgain = outcome.kept.compactMap { record in (try? store.node(record.pathLower)).flatMap { $0 } }
        if !shownAgain.isEmpty {
            calls.watcher.announce(shownAgain.map { StoreChange(pathLower: $0.pathLower, name: $0.name, old: nil, new: $0) })
        }
        if !outcome.failures.isEmpty {
            throw FSError.io("\(outcome.failures.count) deletes not done: \(outcome.failures.prefix(3).joined(separator: "; "))")
        }
    }

    /// What a done delete removed from Dropbox: its name, and for a folder the hidden names
    /// it may have waited at.
    static func namesGone(_ record: QueuedDelete) -> [Metadata] {
        [Node.deletion(name: record.name, pathLower: record.pathLower)]
            + record.hiddenStepKeys.map { Node.deletion(name: String($0.split(separator: "/").last ?? ""), pathLower: $0) }
    }

    /// Removed folders not inside another removed folder, each with every delete at or
    /// below it; and the deletes in no removed folder.
    static func trees(of records: [QueuedDelete]) -> (trees: [(QueuedDelete, [QueuedDelete])], loose: [QueuedDelete]) {
        let folders = Dictionary(records.filter(\.isFolder).map { ($0.pathLower, $0) }) { first, _ in first }
        var inside: [String: [QueuedDelete]] = [:]
        var loose: [QueuedDelete] = []
        for record in records {
            // The top-most removed folder at or above it (ancestors come nearest first). A
            // file's delete at a removed folder's own path is not inside it: that folder's
            // delete goes when a new folder there may have been made, and finds the file at
            // its name ("something else holds it: done"), which would count the file's done
            // unsent (`rm b; mkdir b; mv b c` in an outage, the daemon killed in between).
            let above = Node.selfAndAncestors(record.pathLower).dropFirst(record.isFolder ? 0 : 1)
            let top = above.map(String.init).last { folders[$0] != nil }
            if let top { inside[top, default: []].append(record) } else { loose.append(record) }
        }
        let trees = inside.keys.sorted().map { (folders[$0]!, inside[$0]!) }
        return (trees, loose)
    }

    /// What became of a removed tree sent whole.
    private enum WholeDelete {
        /// Gone from Dropbox (or gone already).
        case gone
        /// Still there, something else in it: its deletes go one by one, but for those at or
        /// below `goneBelow`, removed folders found in it at their hidden names (where a round
        /// that stopped left them) and deleted there with all they held.
        case kept(goneBelow: [String])
    }

    /// Whether a delete is at or below a removed folder's path, as `trees(of:)` groups them:
    /// a file's delete at the folder's own path is not inside it.
    static func lies(_ record: QueuedDelete, inside folder: String) -> Bool {
        Node.isAt(record.pathLower, orUnder: folder) && (record.isFolder || record.pathLower != folder)
    }

    /// A removed folder tree in one delete (see the type's comment).
    private func deleteWhole(_ top: QueuedDelete, _ inside: [QueuedDelete], via hidden: String) async throws -> WholeDelete {
        // Not in the store: a new folder taken back after it may have been made (a round or
        // a previous mount sent it, and learnt nothing), or one gone since.
        let atName = try await entry(at: top.pathLower)
        // Something else holds the name now (replaced elsewhere): the folder is gone.
        if let folder = atName, !folder.isFolder { return .gone }
        // Its folder a file on Dropbox now (another client moved it away, the folder with
        // it), nothing of the folder is at its name: done. (The refusal failed the round, and
        // an fsync waiting for it got EIO.) An earlier round may have set it aside already,
        // for this step or for its delete alone (a round that stopped then left it there for
        // good, their files in it).
        guard let aside = try await calls.setAside(atName, at: hidden, orLeftAt: [top.hiddenStep(alone: true)]) else { return .gone }

        let removedFiles = Dictionary(inside.filter { !$0.isFolder }.map { ($0.pathLower, $0) }) { first, _ in first }
        let removedFolders = inside.filter(\.isFolder)
        return try await calls.whereSetAside(aside) { aside in
            try await deleteSetAside(top, aside, removedFiles: removedFiles, removedFolders: removedFolders)
        } ?? .gone
    }

    /// `deleteWhole`'s tree, set aside at `aside`: deleted if it holds only what was removed
    /// here, else moved back to its name.
    private func deleteSetAside(_ top: QueuedDelete, _ aside: Node, removedFiles: [String: QueuedDelete],
                                removedFolders records: [QueuedDelete]) async throws -> WholeDelete {
        let entries = try await calls.client.listAll(aside.pathLower, recursive: true)
        let removedFolders = Set(records.map(\.pathLower))
        // A folder removed below the top may wait at one of its hidden names, where a round
        // that stopped left it: what is there was removed at the folder's name. (Taken for
        // another client's, it moved the tree back, with an error in the log.) Each hidden
        // name with the folder's own path; looked up only when the listing holds such a name.
        var setAsideBelow: [String: String] = [:]
        if entries.contains(where: { entry in
            entry.pathLower.map { $0 != aside.pathLower && TreeCalls.isHiddenName($0, for: "rmdir") } == true
        }) {
            for record in records where record.pathLower != top.pathLower {
                for key in record.hiddenStepKeys { setAsideBelow[key] = record.pathLower }
            }
        }
        var onlyRemoved = true
        // The hidden names found holding a folder, each with whether all it holds was removed here.
        var waiting: [String: Bool] = [:]
        for entry in entries {
            guard let lower = entry.pathLower, lower != aside.pathLower else { continue }
            let atTop = top.pathLower + lower.dropFirst(aside.pathLower.count)
            let original = Self.removedPath(of: atTop, setAsideBelow: setAsideBelow)
            let removed: Bool
            switch entry {
            case .file(let file): removed = removedFiles[original].map { Self.isRemoved(file, by: $0) } ?? false
            case .folder:
                removed = removedFolders.contains(original)
                if setAsideBelow[atTop] != nil, waiting[atTop] == nil { waiting[atTop] = true }
            case .deleted: removed = true
            }
            guard !removed else { continue }
            onlyRemoved = false
            for ancestor in Node.selfAndAncestors(atTop) where setAsideBelow[String(ancestor)] != nil { waiting[String(ancestor)] = false }
        }
        if onlyRemoved {
            try await calls.delete(aside.pathLower)
            return .gone
        }
        // A removed folder waiting at its hidden name in it (a round that stopped left it
        // there), all it holds removed here, goes from there before the tree moves back (one
        // inside another goes with it). Moved back with the tree, one by one its deletes and
        // its files' looked for it at its name, counted it done, and it showed again, hidden
        // name and all; and the tree may come back at a numbered name.
        var goneBelow: [String] = []
        for (key, onlyRemovedThere) in waiting where onlyRemovedThere
            && !Node.selfAndAncestors(key).dropFirst().contains(where: { waiting[String($0)] == true }) {
            try await calls.delete(aside.pathLower + key.dropFirst(top.pathLower.count))
            goneBelow.append(setAsideBelow[key]!)
        }
        FuseLog.error("\(top.pathLower) changed on Dropbox while it was being removed; what changed is kept")
        // Back to its name beside the hidden one: where its folder is now.
        try await calls.moveNumbered(aside.pathLower, to: Node.parent(of: aside.pathLower) + "/" + top.name, sourceIsOwn: true)
        return .kept(goneBelow: goneBelow)
    }

    /// The path an entry at `path` had when it was removed here: below a removed folder's
    /// hidden name (`setAsideBelow`), the same below the folder's own path.
    static func removedPath(of path: String, setAsideBelow: [String: String]) -> String {
        guard !setAsideBelow.isEmpty else { return path }
        for ancestor in Node.selfAndAncestors(path) {
            if let folder = setAsideBelow[String(ancestor)] { return folder + path.dropFirst(ancestor.count) }
        }
        return path
    }

    /// Whether Dropbox's file is the one a delete removed: at its revision, or one of our own
    /// commits whose answer was lost (`QueuedDelete.ifContent`).
    static func isRemoved(_ file: FileMetadata, by record: QueuedDelete) -> Bool {
        file.rev == record.rev || file.contentHash.map(record.ifContent.contains) == true
    }

    /// Deletes of files our own commit may be at (`QueuedDelete.ifContent`) look first: such
    /// a file is deleted at the revision it has; anything else there is another client's
    /// (kept, as a file changed elsewhere is); nothing there is done. The looks go 16 at a
    /// time: after a remount, every file the previous mount left queued is such a delete.
    private func resolvingOwnCommits(_ files: [QueuedDelete], into outcome: inout Outcome) async throws -> [QueuedDelete] {
        let looking = files.filter { !$0.ifContent.isEmpty }
        guard !looking.isEmpty else { return files }
        var found: [Int64: FileMetadata?] = [:]
        for start in stride(from: 0, to: looking.count, by: 16) {
            try await withThrowingTaskGroup(of: (Int64, FileMetadata?).self) { group in
                for record in looking[start..<min(start + 16, looking.count)] {
                    group.addTask { (record.id, try await self.calls.client.metadataIfExists(record.pathLower)?.fileMetadata) }
                }
                for try await (id, file) in group { found[id] = file }
            }
        }
        var ready: [QueuedDelete] = []
        for var record in files {
            guard !record.ifContent.isEmpty else { ready.append(record); continue }
            guard let file = found[record.id] ?? nil else {
                outcome.done.append(record)  // nothing there, or a folder: nothing of ours
                continue
            }
            if Self.isRemoved(file, by: record) {
                record.rev = file.rev
                ready.append(record)
            } else if record.rev == nil {
                outcome.done.append(record)  // a new file's name, taken by another client's file
            } else {
                ready.append(record)  // changed elsewhere: its revision check keeps it
            }
        }
        return ready
    }

    private func deleteFiles(_ files: [QueuedDelete], into outcome: inout Outcome) async throws {
        let files = try await resolvingOwnCommits(files, into: &outcome)
        guard !files.isEmpty else { return }
        let results = try await calls.watcher.changingOwn(files.map { ($0.pathLower, .absent) }) {
            try await calls.client.deleteBatch(files.map { DeleteArgument(path: $0.pathLower, parentRev: $0.rev) })
        }
        for (record, result) in zip(files, results) {
            switch result {
            case .success, .failure(.pathLookup(.notFound)):
                outcome.done.append(record)
            case .failure(.pathWrite(.conflict)), .failure(.pathLookup(.notFile)), .failure(.pathLookup(.notFolder)):
                FuseLog.error("\(record.pathLower) changed on Dropbox since this mount saw it; that version is kept")
                outcome.kept.append(record)
            case .failure(let error):
                outcome.failures.append("\(record.pathLower): \(error)")
            }
        }
    }

    /// What holds a removed name now: the store's entry, or Dropbox's where the store has
    /// none (Dropbox says whether it is gone).
    private func entry(at pathLower: String) async throws -> Node? {
        if let known = try store.node(pathLower) { return known }
        return try await calls.client.metadataIfExists(pathLower).flatMap(Node.init)
    }

    /// Folders whose tree did not go whole, deepest first, each deleted only if empty.
    private func deleteFolders(_ folders: [QueuedDelete], into outcome: inout Outcome) async throws {
        let deepestFirst = folders.sorted { $0.pathLower.utf8.count > $1.pathLower.utf8.count }
        for record in deepestFirst {
            // Not in the store: gone, or in a folder the store has not listed since the tree
            // moved back (it keeps no entries there). Nothing at its name (or something else
            // there now) is done, unless a round that stopped left it at its hidden name.
            // (Counted done whenever the store had nothing, such a folder stayed on Dropbox,
            // and showed again.)
            let folder = try await entry(at: record.pathLower).flatMap { $0.isFolder ? $0 : nil }
            if try await calls.deleteEmptyFolder(folder, named: record.name, via: record.hiddenStep(alone: true)) {
                outcome.done.append(record)
            } else {
                outcome.kept.append(record)
            }
        }
    }
}
