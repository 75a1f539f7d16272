import Foundation
import Synchronization

/// Staging files whose versions are done, kept empty for the next version instead of being
/// deleted. ext4 keeps a deleted inode from reuse for a while and, allocating a new one,
/// reads past every inode deleted recently: with uploads finishing behind a stream of
/// creates (each removing its staging file), every create got slower. Measured with
/// `perf`, 5,000 empty creates spent 38 % of the daemon's CPU in ext4's `open`, 31 % of it
/// in `recently_deleted`. Reusing an existing file allocates nothing.
///
/// Files of the pool are named `free-N` in the staging directory, and keep that name while
/// a version uses one (`take`); a mount that stops leaves them, and the next one takes those
/// no queued upload names into its pool (`adopt`): deleting them at start-up would make the
/// very deletions the pool avoids.
final class StagingPool: Sendable {
    let directory: String
    private let state = Mutex<(free: [String], next: Int)>(([], 0))
    /// Kept at most: beyond, a done staging file is deleted as before.
    static let limit = 4096

    init(directory: String) { self.directory = directory }

    /// An empty file of the pool, taken out of it (the caller opens it), or nil if none is free.
    /// The file keeps its pool name while a version uses it: a rename into the version's name
    /// was a tenth of the daemon's CPU in a `cp -r` of 1,000 small files (ext4 edits two
    /// entries of a folder holding thousands). The queue's record names the file it uses, so
    /// a recovery finds it all the same, and a free one is told from a used one by the queue.
    func take() -> String? { state.withLock { $0.free.popLast() } }

    /// Whether `path` is named as the pool's files are.
    private static func isPoolName(_ path: String) -> Bool { poolNumber(path) != nil }

    /// N of a path named `free-N`.
    private static func poolNumber(_ path: String) -> Int? {
        let name = path[path.index(after: path.lastIndex(of: "/") ?? path.startIndex)...]
        return name.hasPrefix("free-") ? Int(name.dropFirst("free-".count)) : nil
    }

    /// A file a previous mount left at `path`, named as the pool's: joins the pool emptied
    /// unless a queued upload still uses it (`inUse`). Every such name counts toward the next
    /// new one, so a rename into the pool never lands on a file in use. False if the file is
    /// not the pool's now (the caller deletes it unless it is in use), or the pool is full.
    func adopt(_ path: String, inUse: Bool) -> Bool {
        guard let number = Self.poolNumber(path) else { return false }
        state.withLock { $0.next = max($0.next, number) }
        guard !inUse, truncate(path, 0) == 0 else { return false }
        return state.withLock { state in
            guard state.free.count < Self.limit else { return false }
            state.free.append(path)
            return true
        }
    }

    /// Emptying files, in order, on a queue of their own.
    private let emptying = DispatchQueue(label: "dropboxfs-staging-pool", qos: .utility)

    /// Returns once every file handed to `keepLater` so far is kept (a test removing the
    /// directory waits for this: a rename into the pool after the removal left it behind).
    func settle() { emptying.sync {} }

    /// `keep`, then closes `fd`, later: emptying a file waits for the disk (a discard per
    /// file on a disk mounted so: 6 % of the daemon's CPU while 1,000 small uploads finished),
    /// and the caller's thread is often one of Swift's two cooperative ones, which answer
    /// FUSE requests meanwhile. The file is found by path (`identity`) when its descriptor
    /// is closed (nil), or when `heldLimit` files wait with theirs: a batch of a thousand
    /// uploads ends at once, and the daemon must not run out of descriptors.
    func keepLater(_ path: String, fd: Int32?, identity: FileIdentity, renaming: Bool) {
        var kept = fd
        if let fd, heldCount.add(1, ordering: .relaxed).newValue > Self.heldLimit {
            heldCount.subtract(1, ordering: .relaxed)
            close(fd)
            kept = nil
        }
        let held = kept
        emptying.async {
            let fd = held ?? identity.open(path)
            if fd >= 0 {  // else set aside, or gone
                self.keep(path, fd: fd, renaming: renaming)
                close(fd)
            }
            if held != nil { self.heldCount.subtract(1, ordering: .relaxed) }
        }
    }

    /// Files waiting in `keepLater` with their descriptor open, and at most how many.
    private let heldCount = Atomic<Int>(0)
    static let heldLimit = 64

    /// A done staging file, still open as `fd` (nobody reads it any more), joins the pool
    /// emptied; deleted when the pool is full. A file no longer at `path` (set aside to
    /// `recovered/`: the same inode, another name) is left alone. It gets a new pool name when
    /// it has none yet, or when `renaming` (a record of the queue may still name it).
    func keep(_ path: String, fd: Int32, renaming: Bool) {
        guard let atPath = FileIdentity(path: path), atPath == FileIdentity(fd: fd) else { return }
        var name = path
        if renaming || !Self.isPoolName(path) {
            let fresh: String? = state.withLock { state in
                guard state.free.count < Self.limit else { return nil }
                state.next += 1
                return directory + "/free-\(state.next)"
            }
            guard let fresh else { return _ = unlink(path) }
            guard rename(path, fresh) == 0 else { return }
            name = fresh
        }
        guard ftruncate(fd, 0) == 0 else { return _ = unlink(name) }
        let kept = state.withLock { state in
            guard state.free.count < Self.limit else { return false }
            state.free.append(name)
            return true
        }
        if !kept { unlink(name) }
    }
}
