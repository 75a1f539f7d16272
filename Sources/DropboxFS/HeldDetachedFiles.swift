import Synchronization

/// Files whose name went here (an unlink, a rename over them) while the kernel still held
/// their inode: the kernel may open that inode still, having looked the name up just before,
/// and on a disk such an open reaches the file. What the name showed is kept here until the
/// kernel forgets the inode: its last local version (never uploaded: its name is gone), or
/// the Dropbox file, whose revision stays readable. Dropped at once, a file only here had
/// its bytes gone for such an open, and a quarter of the opens of a file another thread kept
/// replacing by rename (an atomic save) failed.
final class HeldDetachedFiles: Sendable {
    private enum Kept {
        case version(LocalVersion)
        case remote(Node)
    }

    private let kept = Mutex<[UInt64: Kept]>([:])

    func keep(_ version: LocalVersion, for inode: UInt64) { kept.withLock { $0[inode] = .version(version) } }

    func keep(remote node: Node, for inode: UInt64) { kept.withLock { $0[inode] = .remote(node) } }

    /// The local version kept for the inode, if that is what its name showed.
    func version(of inode: UInt64) -> LocalVersion? {
        kept.withLock { if case .version(let version) = $0[inode] { version } else { nil } }
    }

    /// What the inode's file is now: its kept version's node, or the Dropbox file's.
    func node(of inode: UInt64) -> Node? {
        switch kept.withLock({ $0[inode] }) {
        case .version(let version): version.node
        case .remote(let node): node
        case nil: nil
        }
    }

    func forget(_ inode: UInt64) { _ = kept.withLock { $0.removeValue(forKey: inode) } }
}
