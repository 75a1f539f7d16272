import Synchronization

/// What the mount tells the kernel to forget.
enum Invalidation {
    case entry(parent: UInt64, name: String)
    /// Attributes always; cached pages too when `pages`.
    case inode(UInt64, pages: Bool)

    /// The kernel lock that telling it takes: a folder's for an entry (the kernel locks the
    /// parent), a file's cached pages for pages; none for attributes only.
    var lock: KernelLockHolds.Lock? {
        switch self {
        case .entry(let parent, _): .folder(parent)
        case .inode(let inode, let pages): pages ? .pages(inode) : nil
        }
    }
}

/// Kernel locks held for requests this daemon is answering from tasks, and the
/// invalidations that wait for them.
///
/// The kernel holds a folder's lock for a lookup, create, mkdir, unlink, rmdir or rename
/// in it and for an fsync of it, and a file's cached pages locked for a read or write of
/// them, until the daemon answers; an invalidation needing that lock waits in the kernel,
/// and every later one behind it on the one invalidation queue. Killed (-9) then, the
/// daemon never ended (the queue's thread in D state): the kernel never dropped its
/// connection, and the waiting call and every call in that folder hung for good. So an
/// invalidation whose lock is held here waits in the daemon and is sent once the last
/// request holding it is answered.
///
/// One window stays open: between the kernel taking a lock and the request reaching the
/// daemon, an invalidation is sent and waits in the kernel, as before, until the request
/// is answered.
final class KernelLockHolds: @unchecked Sendable {
    enum Lock: Hashable {
        case folder(UInt64)
        case pages(UInt64)
    }

    private let holders = Mutex<[Lock: Int]>([:])
    /// Touched on the invalidation queue only.
    private var waiting: [Lock: [Invalidation]] = [:]
    private let waitingCount = Atomic<Int>(0)

    /// How many invalidations wait for a lock (the status report's).
    var invalidationsWaiting: Int { waitingCount.load(ordering: .relaxed) }
    /// How many locks are held for requests being answered (the status report's).
    var locksHeld: Int { holders.withLock { $0.count } }

    /// A request holding `locks` is being answered.
    func take(_ locks: [Lock]) {
        holders.withLock { held in for lock in locks { held[lock, default: 0] += 1 } }
    }

    /// That request was answered; returns the locks no request holds any more.
    func release(_ locks: [Lock]) -> [Lock] {
        holders.withLock { held in
            locks.filter { lock in
                let left = held[lock, default: 1] - 1
                held[lock] = left > 0 ? left : nil
                return left <= 0
            }
        }
    }

    /// On the invalidation queue: keeps `invalidation` if a request holds its lock (true),
    /// to be sent once it is released.
    func keep(_ invalidation: Invalidation) -> Bool {
        guard let lock = invalidation.lock, holders.withLock({ $0[lock] != nil }) else { return false }
        waiting[lock, default: []].append(invalidation)
        waitingCount.add(1, ordering: .relaxed)
        return true
    }

    /// On the invalidation queue: the invalidations kept for `lock`, now that no request
    /// holds it (none if one took it again meanwhile).
    func takeWaiting(for lock: Lock) -> [Invalidation] {
        guard holders.withLock({ $0[lock] == nil }), let kept = waiting.removeValue(forKey: lock) else { return [] }
        waitingCount.subtract(kept.count, ordering: .relaxed)
        return kept
    }
}
