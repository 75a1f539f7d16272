import Foundation
import Synchronization

/// Folders' modification times that outlive the kernel's inode and the mount. Dropbox keeps
/// no time for a folder, so a folder shows the mount's start unless it was made here, a time
/// was set on it here (`touch`, `tar x`, `rsync -a`) or an entry was made, removed or renamed
/// in it here (`ChangeTimes`, by inode, while the kernel holds it). When the kernel forgets
/// such a folder, and when the mount ends, its time is kept here, in the cache's store, by the
/// folder's Dropbox id: the id follows the folder through renames, here and elsewhere. A folder
/// removed leaves its row behind (one a folder made or changed here, at most).
///
/// Written at those two moments only, never at each change (`tar x` changes its folders at
/// every file): a daemon killed loses the times changed since the folder was last forgotten
/// or the last mount ended, and the folder shows an older one (or the mount's start).
/// A folder not on Dropbox yet (no id: its mkdir queued) when its time is to be kept keeps it
/// by path, in memory, until it is made there (`made`): then by its id, as any other. A mount
/// that ends with such folders still queued (offline) keeps their times in the store by path
/// (`waitingKey`), and the next mount takes them back into memory. `unmount --no-wait` and
/// SIGTERM keep them too (`MountDaemon.stopOnSignals`).
///
/// A listing's nodes carry no id (`Node.attributesOnly`: the store's index has none, and
/// reading it was a third of a `find` over a million entries), so each kept time also has the
/// path it was last seen at: only a listed folder at such a path is asked for its id. A rename
/// here moves the paths (`moved`); a folder another client moved shows the mount's start in a
/// listing until it is looked up by its path, which finds its id and its new path.
final class FolderTimes: Sendable {
    private struct Kept {
        var byID: [String: (time: timespec, path: String)] = [:]
        /// The id kept for each path in `byID`.
        var idAt: [String: String] = [:]
        /// Ids seen at a new path since the store had them: written with the next `keep`.
        var pathsUnsaved: Set<String> = []
        /// Times of folders kept before they were on Dropbox (their mkdir still queued: `cp
        /// -a`, `tar x`), by path, in memory alone: each goes under the folder's id once it has
        /// one (a lookup, or the mount's end, after its new folders were sent).
        var waiting: [String: timespec] = [:]

        /// The waiting times at or below `path`, taken out.
        mutating func takeWaiting(atOrUnder path: String) -> [(path: String, time: timespec)] {
            guard !waiting.isEmpty else { return [] }
            let taken = waiting.filter { $0.key == path || $0.key.hasPrefix(path + "/") }
            for (path, _) in taken { waiting[path] = nil }
            return taken.map { ($0.key, $0.value) }
        }

        mutating func set(_ id: String, path: String, time: timespec) {
            if let old = byID[id]?.path, idAt[old] == id { idAt[old] = nil }
            byID[id] = (time, path)
            idAt[path] = id
        }

        /// `set`, for the store to learn with the next `keep` (a time taken under an id, or
        /// seen at a new path).
        mutating func setUnsaved(_ id: String, path: String, time: timespec) {
            set(id, path: path, time: time)
            pathsUnsaved.insert(id)
        }
    }

    private let kept: Mutex<Kept>
    private let store: MetadataStore

    init(store: MetadataStore) throws {
        self.store = store
        var loaded = Kept()
        var waiting: [String] = []
        for (id, path, time) in try store.folderTimes() {
            if id.hasPrefix(Self.waitingKey) {
                loaded.waiting[path] = time
                waiting.append(id)
            } else {
                loaded.set(id, path: path, time: time)
            }
        }
        kept = Mutex(loaded)
        // In memory again: kept by path in the store only while no mount runs, so that none
        // is left there for a folder made, removed or renamed meanwhile.
        try store.forgetFolderTimes(waiting)
    }

    /// The store's key of a time waiting for its folder's mkdir (`keepWaiting`), before the path.
    static let waitingKey = "waiting:"

    /// The time kept for a folder, if any. `withID` finds the id of a node that has none (a
    /// listing's), asked only where a kept folder was last seen.
    func time(of folder: Node, withID: (String) -> String?) -> timespec? {
        if !folder.id.isEmpty {
            return kept.withLock { kept in
                guard let found = kept.byID[folder.id] else {
                    // On Dropbox now: its waiting time goes under its id.
                    guard !kept.waiting.isEmpty, let time = kept.waiting.removeValue(forKey: folder.pathLower) else { return nil }
                    kept.setUnsaved(folder.id, path: folder.pathLower, time: time)
                    return time
                }
                if found.path != folder.pathLower {  // moved
                    kept.setUnsaved(folder.id, path: folder.pathLower, time: found.time)
                }
                return found.time
            }
        }
        if let waiting = kept.withLock({ $0.waiting.isEmpty ? nil : $0.waiting[folder.pathLower] }) { return waiting }
        guard let id = kept.withLock({ $0.idAt[folder.pathLower] }), withID(folder.pathLower) == id else { return nil }
        return kept.withLock { $0.byID[id]?.time }
    }

    /// Keeps these folders' times, in memory first (a lookup answered while the store writes
    /// shows them), then, for those with an id (on Dropbox), in the store: a store that cannot
    /// (a full disk) is logged, and the times are kept in memory alone, until the mount ends.
    /// One without an id waits by path (`Kept.waiting`).
    func keep(_ all: [(id: String, path: String, time: timespec)]) {
        let times = all.filter { !$0.id.isEmpty }
        let saving = kept.withLock { kept in
            defer { kept.pathsUnsaved.removeAll() }
            for (id, path, time) in all {
                if id.isEmpty { kept.waiting[path] = time } else if !kept.waiting.isEmpty { kept.waiting[path] = nil }
            }
            for (id, path, time) in times { kept.set(id, path: path, time: time) }
            let rehomed = kept.pathsUnsaved.subtracting(times.map(\.id))
            return rehomed.compactMap { id in kept.byID[id].map { (id: id, path: $0.path, time: $0.time) } } + times
        }
        guard !saving.isEmpty else { return }
        do {
            try store.keepFolderTimes(saving)
        } catch {
            FuseLog.error("times of \(saving.count) folder(s) not kept: \(error)")
        }
    }

    /// Folders made on Dropbox: a time waiting for one goes under its id, into the store.
    func made(_ folders: [(path: String, id: String)]) {
        let found = kept.withLock { kept in
            kept.waiting.isEmpty ? [] : folders.compactMap { path, id in
                kept.waiting.removeValue(forKey: path).map { (id: id, path: path, time: $0) }
            }
        }
        if !found.isEmpty { keep(found) }
    }

    /// The mount ends, its new folders sent: the waiting times of those on Dropbox now go
    /// under their ids, into the store; those of folders still queued (offline) by path, for
    /// the next mount to take back (lost before: the folder showed the mount's start once made).
    func keepWaiting(withID: (String) -> String?) {
        let waiting = kept.withLock { $0.takeWaiting(atOrUnder: "") }
        let found = waiting.map { (id: withID($0.path) ?? "", path: $0.path, time: $0.time) }
        keep(found.filter { !$0.id.isEmpty })
        let queued = found.filter(\.id.isEmpty).map { (id: Self.waitingKey + $0.path, path: $0.path, time: $0.time) }
        guard !queued.isEmpty else { return }
        do {
            try store.keepFolderTimes(queued)
        } catch {
            FuseLog.error("times of \(queued.count) folder(s) not made yet not kept: \(error)")
        }
    }

    /// A folder removed here: a waiting time at or below it is no folder's any more (another
    /// client's folder made at that path later must not show it).
    func removed(_ path: String) {
        _ = kept.withLock { $0.takeWaiting(atOrUnder: path) }
    }

    /// A rename made here: the folders kept at or below `source` are seen below `target` now.
    func moved(from source: String, to target: String) {
        kept.withLock { kept in
            if !kept.waiting.isEmpty {
                _ = kept.takeWaiting(atOrUnder: target)  // replaced
                for (path, time) in kept.takeWaiting(atOrUnder: source) { kept.waiting[target + path.dropFirst(source.count)] = time }
            }
            guard !kept.idAt.isEmpty else { return }
            let moving = kept.idAt.filter { path, _ in path == source || path.hasPrefix(source + "/") }
            for (path, id) in moving {
                guard let time = kept.byID[id]?.time else { continue }
                kept.setUnsaved(id, path: target + path.dropFirst(source.count), time: time)
            }
        }
    }
}
