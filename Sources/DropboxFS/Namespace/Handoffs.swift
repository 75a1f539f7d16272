import Synchronization

/// A new folder or a removal answered here shows from its pending queue until Dropbox has
/// done it; then the store learns it (a catch-up), and only after that does the entry leave
/// the queue. A look at a path reads the store and the queue one after the other, without a
/// lock over both (the store's change waits for Dropbox): a reader preempted between its two
/// reads across a handoff found neither the queue's entry nor the store's (a folder `cp -r`
/// was filling was ENOENT for a moment, in the CI; a removed file showed again). Each
/// handoff is counted after the store's change and before the queue's, and a look that
/// straddled one is made again (`settled`). Renames have their own count
/// (`PendingMoves`'s generation); local versions are looked at before the store, which is
/// their order of handoff, and need none.
final class Handoffs: Sendable {
    private let count = Atomic<UInt64>(0)

    /// Called once the store has what a pending entry showed, before the entry leaves.
    func handingOff() {
        count.add(1, ordering: .sequentiallyConsistent)
    }

    /// `look`'s answer, made again while a handoff happened during it.
    func settled<T>(_ look: () throws -> T) rethrows -> T {
        while true {
            let before = count.load(ordering: .sequentiallyConsistent)
            let answer = try look()
            if count.load(ordering: .sequentiallyConsistent) == before { return answer }
        }
    }
}
