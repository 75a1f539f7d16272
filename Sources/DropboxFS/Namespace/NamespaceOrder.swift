import DropboxAPI
import Synchronization

/// The one order of the namespace changes answered here: new folders, removals and renames
/// are numbered from one sequence, in the order the user made them.
///
/// Renames are barriers. A rename changes what every later path means (after `mv A B`,
/// `B/x` is on Dropbox at `A/x` until the move is sent), so nothing numbered after the oldest
/// pending rename is sent before it; everything before it is sent first. Between two renames
/// new folders and removals go in rounds as they always did (they commute, or their senders
/// order them: removals before a new folder at the same name). Uploads, whose paths are the
/// newest ones, send every rename they touch first.
final class NamespaceOrder: Sendable {
    private let last: Atomic<Int64>
    private let firstMove = Atomic<Int64>(.max)
    /// The senders' signals: a rename done may let what waited behind it go.
    private let waiting: Mutex<[ChangeSignal]> = Mutex([])

    init(after largest: Int64) {
        last = Atomic(largest)
    }

    /// A new change's number.
    func take() -> Int64 { last.wrappingAdd(1, ordering: .relaxed).newValue }

    /// The number of the newest change made so far: one who waits for the changes made
    /// before it began waits for those numbered up to this, not for those made meanwhile.
    var newest: Int64 { last.load(ordering: .relaxed) }

    /// The oldest pending rename's number (`Int64.max` when none): changes numbered after it wait.
    var barrier: Int64 { firstMove.load(ordering: .acquiring) }

    func setBarrier(_ id: Int64) {
        let old = firstMove.exchange(id, ordering: .acquiringAndReleasing)
        if id > old { for signal in waiting.withLock({ $0 }) { signal.notify() } }
    }

    /// Wakes `signal` whenever the barrier moves on.
    func wakes(_ signal: ChangeSignal) { waiting.withLock { $0.append(signal) } }
}
