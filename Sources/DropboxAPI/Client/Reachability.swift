import Foundation
import Synchronization

/// Whether Dropbox can be reached, as the client's own calls find it. Offline starts when a
/// call gives up because no connection could be made (refused, unresolved, timed out) or
/// after a run of server errors with no good answer between; it ends with the first answer
/// that is not a server error.
///
/// While offline, calls fail at once with `ClientError.offline` instead of retrying: a read
/// of content that is not cached must fail fast, not hang through a backoff. Only calls made
/// inside `probing` still go out; one of them succeeding brings the client back online (the
/// mount's change feed is its probe), and `onChange` hears of each switch once.
public final class Reachability: Sendable {
    public enum State: Sendable, Equatable {
        case online
        case offline(since: Date, reason: String)
    }

    /// Server errors in a row (each retry counts) that make Dropbox count as out of reach.
    public static let serverErrorsForOffline = 6

    private struct Tally {
        var state = State.online
        var serverErrorsInARow = 0
    }

    private let tally = Mutex(Tally())
    private let listener = Mutex<(@Sendable (State) -> Void)?>(nil)
    /// Notified at each switch between online and offline (`untilOffline`).
    private let switches = ChangeSignal()

    public init() {}

    public var state: State { tally.withLock { $0.state } }

    public var offlineSince: Date? {
        if case .offline(let since, _) = state { return since }
        return nil
    }

    /// Who hears each switch between online and offline (once per switch).
    public func onChange(_ newListener: @escaping @Sendable (State) -> Void) {
        listener.withLock { $0 = newListener }
    }

    /// Returns once Dropbox counts as out of reach (at once if it does now), or once the
    /// task is cancelled: a request that waits by design gives up through it
    /// (`DropboxClient.perform`).
    public func untilOffline() async {
        while !Task.isCancelled {
            let seen = switches.generation
            if offlineSince != nil { return }
            await switches.wait(after: seen)
        }
    }

    @TaskLocal static var isProbing = false

    /// Runs `body` with its calls going out even while offline: the probe that finds
    /// Dropbox back.
    public static func probing<T>(_ body: () async throws -> T) async rethrows -> T {
        try await $isProbing.withValue(true) { try await body() }
    }

    /// True when a call should not go out now.
    var refusesCalls: Bool { !Self.isProbing && offlineSince != nil }

    /// An answer came that was not a server error: Dropbox is there.
    func answered() {
        switchTo { tally in
            tally.serverErrorsInARow = 0
            return tally.state == .online ? nil : .online
        }
    }

    /// A server error (5xx) came.
    func serverFailed(_ description: String) {
        switchTo { tally in
            tally.serverErrorsInARow += 1
            guard tally.state == .online, tally.serverErrorsInARow >= Self.serverErrorsForOffline else { return nil }
            return .offline(since: Date(), reason: description)
        }
    }

    /// A call gave up because no connection could be made.
    func unreachable(_ description: String) {
        switchTo { tally in tally.state == .online ? .offline(since: Date(), reason: description) : nil }
    }

    private func switchTo(_ decide: (inout Tally) -> State?) {
        let switched: State? = tally.withLock { tally in
            guard let next = decide(&tally) else { return nil }
            tally.state = next
            return next
        }
        guard let switched else { return }
        switches.notify()
        listener.withLock({ $0 })?(switched)
    }
}
