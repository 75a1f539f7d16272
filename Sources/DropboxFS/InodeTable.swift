import Synchronization

/// Inode numbers for paths. A path keeps its number while the kernel knows it: each entry
/// the kernel is given (lookup, readdirplus) counts once, `forget` takes counts away, and at
/// zero the mapping is dropped — memory stays bounded however many files a `find` walks.
/// Numbers are never reused within a mount; the root is 1.
public final class InodeTable: Sendable {
    public static let root: UInt64 = 1

    private struct State {
        var byPath: [String: UInt64] = [:]
        var byInode: [UInt64: (path: String, lookups: UInt64)] = [:]
        var next: UInt64 = 2
    }

    private let state = Mutex(State())

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
            return ino
        }
    }

    /// The kernel was handed this inode once more (a lookup or readdirplus entry).
    public func retain(_ inode: UInt64) {
        guard inode != Self.root else { return }
        state.withLock { $0.byInode[inode]?.lookups += 1 }
    }

    /// `forget`: the kernel dropped `count` references. True when the inode is gone.
    @discardableResult
    public func forget(_ inode: UInt64, count: UInt64) -> Bool {
        guard inode != Self.root else { return false }
        return state.withLock { state in
            guard var entry = state.byInode[inode] else { return false }
            entry.lookups = entry.lookups > count ? entry.lookups - count : 0
            if entry.lookups == 0 {
                state.byInode.removeValue(forKey: inode)
                if state.byPath[entry.path] == inode { state.byPath.removeValue(forKey: entry.path) }
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
}
