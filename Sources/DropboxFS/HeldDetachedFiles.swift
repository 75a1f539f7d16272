import Synchronization

/// Files whose name went here (an unlink, a rename over them) while the kernel still held
/// their inode and no descriptor was open: the kernel may open that inode still, having
/// looked the name up just before, and on a disk such an open reaches the file. The version
/// the name showed is kept here until the kernel forgets the inode (never uploaded: its name
/// is gone). Dropped at once, its bytes were gone for such an open, and a quarter of the opens
/// of a file another thread kept replacing by rename (an atomic save) failed.
final class HeldDetachedFiles: Sendable {
    private let versions = Mutex<[UInt64: LocalVersion]>([:])

    func keep(_ version: LocalVersion, for inode: UInt64) { versions.withLock { $0[inode] = version } }

    func version(of inode: UInt64) -> LocalVersion? { versions.withLock { $0[inode] } }

    func forget(_ inode: UInt64) { _ = versions.withLock { $0.removeValue(forKey: inode) } }
}
