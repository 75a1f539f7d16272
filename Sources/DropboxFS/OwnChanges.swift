import Synchronization

/// Changes the mount made itself, recognised when they come back through the change feed so
/// that the kernel hears only of what it did not do (it already knows our own creates,
/// deletes, renames and writes; invalidating them costs round trips and takes directory
/// locks a pending request may hold).
///
/// An expectation is registered *before* the Dropbox call that makes the change starts
/// (`pending`): a catch-up already running, woken by an earlier change, may fetch the change
/// before the call returns, and must not take it for another client's. Once the call ends,
/// the expectation lasts until a catch-up that started after that has ended: that catch-up
/// saw the change. Several expectations may wait on one path (delete it, then move another
/// file there).
public final class OwnChanges: Sendable {
    public enum Expectation: Sendable {
        /// The path is gone (delete, or the old side of a move).
        case absent
        /// The path and everything below it are ours (mkdir, the new side of a move).
        case subtree
        /// A file revision we committed (upload or copy).
        case revision(String)
        /// A file revision being committed: which one is known only once the call returns.
        case commit
    }

    private struct Entry {
        var expectation: Expectation
        /// Catch-ups started when the call ended; nil while it is under way.
        var endedAt: Int?
        var call: Int
    }

    private struct State {
        var expected: [String: [Entry]] = [:]
        /// Catch-ups started so far.
        var started = 0
        var calls = 0
    }

    private let state = Mutex(State())

    /// Expects changes of a call that has already returned.
    func expect(_ pathLower: String, _ expectation: Expectation) {
        state.withLock { $0.expected[pathLower, default: []].append(Entry(expectation: expectation, endedAt: $0.started, call: 0)) }
    }

    /// A call under way, for `callEnded` or `callRefused`: its number and the paths it
    /// expects changes at (only those are visited when it ends: an upload batch commits up
    /// to 1,000 files while others wait).
    struct PendingCall {
        fileprivate let number: Int
        fileprivate let paths: [String]
    }

    /// Expects the changes of a call about to start.
    func expectPending(_ expectations: [(String, Expectation)]) -> PendingCall {
        state.withLock { state in
            state.calls += 1
            for (path, expectation) in expectations {
                state.expected[path, default: []].append(Entry(expectation: expectation, endedAt: nil, call: state.calls))
            }
            return PendingCall(number: state.calls, paths: expectations.map(\.0))
        }
    }

    /// Whether a call the mount makes is under way (`expectPending`, not yet ended).
    var callUnderWay: Bool {
        state.withLock { state in state.expected.values.contains { $0.contains { $0.endedAt == nil } } }
    }

    /// The call is over (whether it succeeded or not: its outcome may be unknown).
    func callEnded(_ call: PendingCall) {
        state.withLock { state in
            for path in call.paths {
                guard var entries = state.expected[path] else { continue }
                for i in entries.indices where entries[i].call == call.number { entries[i].endedAt = state.started }
                state.expected[path] = entries
            }
        }
    }

    /// Dropbox answered a commit at `pathLower` with revision `rev`: the path's `.commit`
    /// expectations take only that revision from now on. Matching any file there until the
    /// next catch-up ended, they took another client's revision arriving in the meantime
    /// for the mount's own, and the kernel never heard of it (a descriptor reading the file
    /// kept its inode, the new revision's size cutting its reads). Told of a change of its
    /// own, the kernel loses only a round trip.
    func committed(_ pathLower: String, rev: String) {
        state.withLock { state in
            guard var entries = state.expected[pathLower] else { return }
            for i in entries.indices {
                if case .commit = entries[i].expectation { entries[i].expectation = .revision(rev) }
            }
            state.expected[pathLower] = entries
        }
    }

    /// The call was refused: it changed nothing, so nothing of it is expected.
    func callRefused(_ call: PendingCall) {
        state.withLock { state in Self.drop(&state, at: call.paths) { $0.call == call.number } }
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
        state.withLock { state in Self.drop(&state, at: Array(state.expected.keys)) { ($0.endedAt ?? .max) < number } }
    }

    /// Removes the entries at `paths` that `doomed` picks, and paths left without any.
    private static func drop(_ state: inout State, at paths: [String], where doomed: (Entry) -> Bool) {
        for path in paths {
            guard let entries = state.expected[path] else { continue }
            let left = entries.filter { !doomed($0) }
            state.expected[path] = left.isEmpty ? nil : left
        }
    }

    /// The changes the kernel must hear of: all but our own.
    func foreign(_ changes: [StoreChange]) -> [StoreChange] {
        state.withLock { state in
            guard !state.expected.isEmpty else { return changes }
            return changes.filter { change in !Self.isOwn(change, state.expected) }
        }
    }

    private static func isOwn(_ change: StoreChange, _ expected: [String: [Entry]]) -> Bool {
        for entry in expected[change.pathLower] ?? [] {
            switch entry.expectation {
            case .absent: if change.new == nil { return true }
            case .revision(let rev): if change.new?.rev == rev { return true }
            case .commit: if change.new?.isFolder == false { return true }
            case .subtree: return true
            }
        }
        // Below a folder we made or moved here.
        return Node.selfAndAncestors(change.pathLower).dropFirst().contains { parent in
            expected[String(parent)]?.contains(where: { if case .subtree = $0.expectation { return true }; return false }) == true
        }
    }
}
