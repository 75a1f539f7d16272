import Synchronization

/// Inode numbers for paths, stable for the life of a mount: a path keeps its number once
/// given (the root is 1). Numbers are never reused while mounted.
public final class InodeTable: Sendable {
    public static let root: UInt64 = 1
    private let state = Mutex<(byPath: [String: UInt64], byInode: [UInt64: String], next: UInt64)>(([:], [:], 2))

    public init() {}

    public func inode(for pathLower: String) -> UInt64 {
        if pathLower.isEmpty { return Self.root }
        return state.withLock { state in
            if let existing = state.byPath[pathLower] { return existing }
            let ino = state.next
            state.next += 1
            state.byPath[pathLower] = ino
            state.byInode[ino] = pathLower
            return ino
        }
    }

    public func path(of inode: UInt64) -> String? {
        if inode == Self.root { return "" }
        return state.withLock { $0.byInode[inode] }
    }

    /// The inode already given to a path, without creating one.
    public func existing(_ pathLower: String) -> UInt64? {
        if pathLower.isEmpty { return Self.root }
        return state.withLock { $0.byPath[pathLower] }
    }
}
