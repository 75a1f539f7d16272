import Synchronization

/// Inode numbers for paths. A path keeps its number while the kernel knows it: each entry
/// the kernel is given (lookup, readdirplus) counts once, `forget` takes counts away, and at
/// zero the mapping is dropped. The kernel keeps what it was given until it is short of
/// memory, so the mount asks it to drop the longest-known files beyond a limit (`oldest`):
/// memory stays bounded however many files a `find` walks.
/// Numbers are never reused within a mount; the root is 1.
public final class InodeTable: Sendable {
    public static let root: UInt64 = 1

    private struct State {
        var byPath: [String: UInt64] = [:]
        var byInode: [UInt64: (path: String, lookups: UInt64)] = [:]
        var next: UInt64 = 2
        /// Where the search for inodes the kernel may drop goes on (`oldest`).
        var cursor: UInt64 = 2
        /// Inodes handed out by `oldest` since the search last wrapped: their `forget` comes
        /// after the kernel has dropped them, and they must not be asked for twice meanwhile.
        var asked = 0
    }

    private let state = Mutex(State())
    /// Entries not yet handed out by `oldest` (`byInode.count - asked`), readable without
    /// the lock: checked after every entry given to the kernel.
    private let unasked = Atomic<Int>(0)

    public init() {}

    /// The inode of a path, given one if it has none.
    public func inode(for pathLower: String) -> UInt64 {
        if pathLower.isEmpty { return Self.root }
        return state.withLock { state in
            if let existing = state.byPath[pathLower] { return existing }
            let ino = state.next
            state.next += 1
            state.byPath[pathLower] = ino
            state.byInode[ino] = (pathLower, 0)
            publishLocked(state)
            return ino
        }
    }

    /// The kernel was handed this inode once more (a lookup or readdirplus entry) for `path`.
    /// An entry no one held may have been dropped since its number was given (`oldest`):
    /// it comes back with the same number.
    public func retain(_ inode: UInt64, path: String) {
        guard inode != Self.root else { return }
        state.withLock { state in
            if state.byInode[inode] != nil {
                state.byInode[inode]!.lookups += 1
                return
            }
            state.byInode[inode] = (path, 1)
            if state.byPath[path] == nil { state.byPath[path] = inode }
            publishLocked(state)
        }
    }

    /// `forget`: the kernel dropped `count` references. True when the inode is gone.
    @discardableResult
    public func forget(_ inode: UInt64, count: UInt64) -> Bool {
        guard inode != Self.root else { return false }
        return state.withLock { state in
            guard var entry = state.byInode[inode] else { return false }
            entry.lookups = entry.lookups > count ? entry.lookups - count : 0
            if entry.lookups == 0 {
                Self.removeLocked(&state, inode, entry.path)
                if inode < state.cursor && state.asked > 0 { state.asked -= 1 }
                publishLocked(state)
                return true
            }
            state.byInode[inode] = entry
            return false
        }
    }

    /// A path's file went away (unlink, rename-over, a remote delete) while the kernel may
    /// still hold its inode through open descriptors: the inode keeps its number but no
    /// longer has a path, and a new file at that name gets a new inode. Returns the inode.
    /// Everything below a detached folder is detached with it (a scan: files need none).
    @discardableResult
    public func detach(_ pathLower: String, folder: Bool = false) -> UInt64? {
        guard !pathLower.isEmpty else { return nil }
        return state.withLock { state in
            let below = folder ? state.byPath.keys.filter { $0.hasPrefix(pathLower + "/") } : []
            for path in below {
                if let ino = state.byPath.removeValue(forKey: path) { state.byInode[ino]?.path = Self.detachedPath }
            }
            guard let ino = state.byPath.removeValue(forKey: pathLower) else { return nil }
            state.byInode[ino]?.path = Self.detachedPath
            return ino
        }
    }

    /// The path of an inode whose file was detached: never a real path (Dropbox paths start
    /// with "/").
    static let detachedPath = "\u{0}detached"

    /// A path moved (by a rename through the mount): its inode and those of everything below
    /// it keep their numbers and follow it.
    public func rename(from old: String, to new: String) {
        state.withLock { state in
            for (ino, entry) in state.byInode where entry.path == old || entry.path.hasPrefix(old + "/") {
                let moved = new + entry.path.dropFirst(old.count)
                if state.byPath[entry.path] == ino { state.byPath.removeValue(forKey: entry.path) }
                state.byPath[moved] = ino
                state.byInode[ino] = (moved, entry.lookups)
            }
        }
    }

    /// The path of an inode; nil if unknown or detached.
    public func path(of inode: UInt64) -> String? {
        if inode == Self.root { return "" }
        return state.withLock { state in state.byInode[inode].flatMap { $0.path == Self.detachedPath ? nil : $0.path } }
    }

    /// The inode already given to a path, without creating one.
    public func existing(_ pathLower: String) -> UInt64? {
        if pathLower.isEmpty { return Self.root }
        return state.withLock { $0.byPath[pathLower] }
    }

    public var count: Int { state.withLock { $0.byInode.count } }

    /// Whether `oldest(over: limit)` has anything to do.
    public func isOver(_ limit: Int) -> Bool { unasked.load(ordering: .relaxed) > limit }

    /// Brings the entries beyond `limit` down, lowest numbers (the longest known) first.
    /// Entries the kernel does not hold (numbers a plain readdir showed) are dropped here;
    /// those it holds are returned with their paths: the mount asks the kernel to drop
    /// them, and each `forget` then frees its entry. A `find` over a million entries
    /// otherwise left a million here (the kernel drops inodes only when short of memory). A
    /// tenth of `limit` more than the excess goes, so that this runs once per batch, not
    /// once per entry. The caller skips what must stay (folders, open files); those come
    /// again after a wrap.
    public func oldest(over limit: Int) -> [(inode: UInt64, path: String)] {
        state.withLock { state in
            var excess = state.byInode.count - state.asked - limit
            guard excess > 0 else { return [] }
            excess += limit / 10
            var held: [(inode: UInt64, path: String)] = []
            var scanned: UInt64 = 0
            while excess > 0 && scanned < state.next {
                if state.cursor >= state.next {
                    state.cursor = 2
                    state.asked = 0
                }
                let ino = state.cursor
                state.cursor += 1
                scanned += 1
                guard let entry = state.byInode[ino], entry.path != Self.detachedPath else { continue }
                excess -= 1
                if entry.lookups > 0 {
                    held.append((ino, entry.path))
                } else {
                    Self.removeLocked(&state, ino, entry.path)
                }
            }
            state.asked += held.count
            publishLocked(state)
            return held
        }
    }

    /// Takes an inode's entry out, and its path's if the path still leads to it.
    private static func removeLocked(_ state: inout State, _ inode: UInt64, _ path: String) {
        state.byInode.removeValue(forKey: inode)
        if state.byPath[path] == inode { state.byPath.removeValue(forKey: path) }
    }

    /// Makes the entries not yet asked for readable without the lock (`isOver`).
    private func publishLocked(_ state: State) {
        unasked.store(state.byInode.count - state.asked, ordering: .relaxed)
    }
}
