import Synchronization

/// Changes the mount made itself, recognised when they come back through the change feed so
/// that the kernel hears only of what it did not do (it already knows our own creates,
/// deletes, renames and writes; invalidating them costs round trips and takes directory
/// locks a pending request may hold).
///
/// An expectation is registered after the Dropbox call that makes the change returns, and
/// lasts until a catch-up that started after it has ended: that catch-up saw the change.
public final class OwnChanges: Sendable {
    public enum Expectation: Sendable {
        /// The path is gone (delete, or the old side of a move).
        case absent
        /// The path and everything below it are ours (mkdir, the new side of a move).
        case subtree
        /// A file revision we committed (upload or copy).
        case revision(String)
    }

    private struct State {
        var expected: [String: (Expectation, registeredAt: Int)] = [:]
        /// Catch-ups started so far.
        var started = 0
    }

    private let state = Mutex(State())

    func expect(_ pathLower: String, _ expectation: Expectation) {
        state.withLock { $0.expected[pathLower] = (expectation, $0.started) }
    }

    /// A catch-up begins; returns its number.
    func catchUpStarted() -> Int {
        state.withLock { state in
            state.started += 1
            return state.started
        }
    }

    /// A catch-up ended: what was registered before it started has been seen.
    func catchUpEnded(_ number: Int) {
        state.withLock { state in state.expected = state.expected.filter { $0.value.registeredAt >= number } }
    }

    /// The changes the kernel must hear of: all but our own.
    func foreign(_ changes: [StoreChange]) -> [StoreChange] {
        state.withLock { state in
            guard !state.expected.isEmpty else { return changes }
            return changes.filter { change in !Self.isOwn(change, state.expected) }
        }
    }

    private static func isOwn(_ change: StoreChange, _ expected: [String: (Expectation, registeredAt: Int)]) -> Bool {
        switch expected[change.pathLower]?.0 {
        case .absent?: if change.new == nil { return true }
        case .revision(let rev)?: if change.new?.rev == rev { return true }
        case .subtree?: return true
        case nil: break
        }
        // Below a folder we made or moved here.
        var parent = change.pathLower
        while let slash = parent.lastIndex(of: "/"), slash != parent.startIndex {
            parent = String(parent[..<slash])
            if case .subtree? = expected[parent]?.0 { return true }
        }
        return false
    }
}
