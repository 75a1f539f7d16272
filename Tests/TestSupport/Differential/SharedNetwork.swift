import Foundation
import Synchronization

/// Outages of one mount's Dropbox shared by sequences that run at once on it (the four-at-once
/// differential suite): a sequence's `network` steps take Dropbox out of reach for all of
/// them, so each runner asks here whether an outage began since its sequence started (its
/// `wentOffline`: ENETUNREACH may then answer a step that needs Dropbox, and another client's
/// changes are skipped, as in a sequence alone).
///
/// Some moments need Dropbox in reach whatever the others do: another client's change (its
/// API calls, then the mount showing it), a sequence's start (its folder made on Dropbox) and
/// its end (the uploads compared with the local folder). They run `holdingUp`: the network is
/// brought back for them, and a `network down` step of another sequence meanwhile does
/// nothing (as if it had come just before the next `network up`).
public final class SharedNetwork: Sendable {
    /// Takes Dropbox out of reach (`up` false; `silent`: connections held unanswered) or brings
    /// it back and returns once the mount has seen it back.
    private let switchTo: @Sendable (_ up: Bool, _ silent: Bool) throws -> Void
    /// Held across a switch, the wait for the mount included: one switch at a time.
    private let switching = Mutex<Void>(())
    private let state = Mutex<(down: Bool, outages: Int, holds: Int)>((false, 0, 0))

    public init(switchTo: @escaping @Sendable (_ up: Bool, _ silent: Bool) throws -> Void) {
        self.switchTo = switchTo
    }

    /// Outages begun so far; counted before Dropbox goes out of reach, so a step that met
    /// the outage sees it counted once it returns.
    public var outagesBegun: Int { state.withLock { $0.outages } }

    /// Dropbox is out of reach now (an outage begun and not ended).
    public var isDown: Bool { state.withLock { $0.down } }

    /// A sequence's `network` step. A down while some sequence holds the network up does
    /// nothing.
    public func set(up: Bool, silent: Bool) throws {
        try switching.withLock { _ in
            if up {
                try bringBack()
            } else {
                let begins = state.withLock { state -> Bool in
                    guard state.holds == 0, !state.down else { return false }
                    state.outages += 1
                    state.down = true
                    return true
                }
                if begins { try switchTo(false, silent) }
            }
        }
    }

    /// Runs `body` with Dropbox in reach: brought back first if it is out of reach, and no
    /// outage begins until `body` returns.
    public func holdingUp<T>(_ body: () throws -> T) throws -> T {
        try switching.withLock { _ in
            state.withLock { $0.holds += 1 }
            do { try bringBack() } catch {
                state.withLock { $0.holds -= 1 }
                throw error
            }
        }
        defer { state.withLock { $0.holds -= 1 } }
        return try body()
    }

    /// Ends the outage under way, if any. Call with `switching` held.
    private func bringBack() throws {
        guard state.withLock({ $0.down }) else { return }
        try switchTo(true, false)
        state.withLock { $0.down = false }
    }
}
