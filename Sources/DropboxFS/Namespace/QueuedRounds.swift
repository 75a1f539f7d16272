import DropboxAPI
import Foundation
import Synchronization

/// What a queue of namespace changes answered here (removals, new folders) tells the loop
/// that sends it: how much is pending, and when the last one came.
protocol RoundQueue: Sendable {
    var signal: ChangeSignal { get }
    var count: Int { get }
    var lastAdded: ContinuousClock.Instant { get }
}

/// Sends a queue's changes to Dropbox in rounds, one at a time and in order: in the
/// background once changes stop coming for `quiet` (or `QueuedRounds.burst` are pending),
/// and at once when something waits for them (`sendAll`: an unmount, an fsync of a folder).
/// A round takes everything pending when it starts (renames: the oldest few, see `drains`),
/// so changes queued together cost a request or a few, not one each.
///
/// `round` sends what is pending; it throws if some of it must be tried again.
final class QueuedRounds: Sendable {
    private let lastRound = Mutex<Task<Void, any Error>?>(nil)

    static let retry = RetryPolicy(baseDelay: 0.5, maxDelay: 30)

    /// Pending changes that go without waiting for quiet. High: a round sent while `rm -r`
    /// or `tar x` runs competes with it for the CPU (it lists, decodes, catches up), and
    /// one sent after it costs the same requests (a round sends everything, in batches of
    /// what a call takes). Measured: `rm -r` of 3,000 entries took 0.75 s with a round
    /// every 1,000 removals.
    static let burst = 20_000

    /// Sends rounds until cancelled; a failed round waits and is tried again (its changes
    /// stay queued). `what` names the changes in the log. While Dropbox is out of reach
    /// (`reachability`), no round starts: the return signals the queue (`sendQueuedNow`).
    /// `drains`: a round sends part of what is pending (renames: the oldest few), and the
    /// next starts at once after one that went through, quiet or not, while any is pending.
    func run(_ queue: some RoundQueue, quiet: Duration, what: String, reachability: Reachability, drains: Bool = false,
             round: @escaping @Sendable () async throws -> Void) async {
        var failures = 0
        var draining = false
        while !Task.isCancelled {
            let seen = queue.signal.generation
            let count = queue.count
            if count == 0 {
                draining = false  // the next change waits for quiet again
                await queue.signal.wait(after: seen)
                continue
            }
            // A round tried in an outage fails at once, but holds its changes while it runs,
            // and every change queued wakes this loop: an `rm -r` of new folders offline had
            // each rmdir's take-back wake a round, and the next rmdir, finding its folder held
            // by that round, had to send it first and failed with ENETUNREACH.
            if reachability.offlineSince != nil { await queue.signal.wait(after: seen); continue }
            let waited = ContinuousClock.now - queue.lastAdded
            if !draining && waited < quiet && count < Self.burst {
                await queue.signal.wait(after: seen, timeout: quiet - waited)
                continue
            }
            do {
                try await sendAll(round)
                failures = 0
                draining = drains
            } catch {
                if Task.isCancelled { return }
                failures += 1
                draining = false
                // Out of reach, the reachability log says it once, not every round.
                if ErrnoMapping.fsError(error) != .networkUnreachable {
                    FuseLog.error("\(what) not sent to Dropbox yet (\(error)); they stay queued and are tried again")
                }
                await queue.signal.wait(after: queue.signal.generation, timeout: Self.retry.wait(attempt: failures))
            }
        }
    }

    /// Returns once the rounds started so far have ended, whatever their outcome.
    func underWayEnd() async {
        let last = lastRound.withLock { $0 }
        _ = try? await last?.value
    }

    /// One round, after those already running.
    func sendAll(_ round: @escaping @Sendable () async throws -> Void) async throws {
        let next: Task<Void, any Error> = lastRound.withLock { last in
            let previous = last
            let next = Task {
                _ = try? await previous?.value
                try await round()
            }
            last = next
            return next
        }
        try await next.value
    }
}
