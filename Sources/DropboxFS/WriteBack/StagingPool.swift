import Foundation
import Synchronization

/// Staging files whose versions are done, kept empty for the next version instead of being
/// deleted. ext4 keeps a deleted inode from reuse for a while and, allocating a new one,
/// reads past every inode deleted recently: with uploads finishing behind a stream of
/// creates (each removing its staging file), every create got slower. Measured with
/// `perf`, 5,000 empty creates spent 38 % of the daemon's CPU in ext4's `open`, 31 % of it
/// in `recently_deleted`. A rename of an existing file allocates nothing.
///
/// Files in the pool are named `free-N` in the staging directory; a mount that stops
/// leaves them, and the next one takes them into its pool (`adopt`): deleting them at
/// start-up would make the very deletions the pool avoids.
final class StagingPool: Sendable {
    let directory: String
    private let state = Mutex<(free: [String], next: Int)>(([], 0))
    /// Kept at most: beyond, a done staging file is deleted as before.
    static let limit = 4096

    init(directory: String) { self.directory = directory }

    /// Gives `path` an empty file from the pool, if one is free (the caller opens it with
    /// O_CREAT either way).
    func take(to path: String) {
        while let free = state.withLock({ $0.free.popLast() }) {
            if rename(free, path) == 0 { return }
            unlink(free)
        }
    }

    /// A free file a previous mount left at `path` joins the pool, emptied; false if it is
    /// not one, or the pool is full (the caller deletes it).
    func adopt(_ path: String) -> Bool {
        let name = path[path.index(after: path.lastIndex(of: "/") ?? path.startIndex)...]
        guard name.hasPrefix("free-"), let number = Int(name.dropFirst("free-".count)), truncate(path, 0) == 0 else { return false }
        return state.withLock { state in
            guard state.free.count < Self.limit else { return false }
            state.free.append(path)
            state.next = max(state.next, number)
            return true
        }
    }

    /// Emptying files, in order, on a queue of their own.
    private let emptying = DispatchQueue(label: "dropboxfs-staging-pool", qos: .utility)

    /// `keep`, then closes `fd`, later: emptying a file waits for the disk (a discard per
    /// file on a disk mounted so: 6 % of the daemon's CPU while 1,000 small uploads finished),
    /// and the caller's thread is often one of Swift's two cooperative ones, which answer
    /// FUSE requests meanwhile.
    func keepLater(_ path: String, fd: Int32) {
        emptying.async {
            self.keep(path, fd: fd)
            close(fd)
        }
    }

    /// A done staging file, still open as `fd` (nobody reads it any more), joins the pool
    /// emptied; deleted when the pool is full. A file no longer at `path` (set aside to
    /// `recovered/`: the same inode) is left alone.
    func keep(_ path: String, fd: Int32) {
        let name: String? = state.withLock { state in
            guard state.free.count < Self.limit else { return nil }
            state.next += 1
            return directory + "/free-\(state.next)"
        }
        guard let name else { return _ = unlink(path) }
        guard rename(path, name) == 0 else { return }
        guard ftruncate(fd, 0) == 0 else { return _ = unlink(name) }
        state.withLock { $0.free.append(name) }
    }
}
