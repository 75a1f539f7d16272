import Synchronization

/// Wakes everyone waiting for "something changed" (an upload finished, a file was sealed,
/// Dropbox went out of reach). Waiters read `generation` before checking their condition and
/// wait for a later one, so a change between the check and the wait is never missed.
public final class ChangeSignal: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter: UInt64 = 0
        /// Waiters whose timeout fired before they started waiting.
        var expired: Set<UInt64> = []
    }

    private let state = Mutex(State())

    public init() {}

    public var generation: UInt64 { state.withLock { $0.generation } }

    public func notify() {
        let woken = state.withLock { state in
            state.generation += 1
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in woken { waiter.resume() }
    }

    /// Returns once the generation is past `seen`, after `timeout`, or when the task is
    /// cancelled (the uploader's loop ends then, even with nothing to upload).
    public func wait(after seen: UInt64, timeout: Duration? = nil) async {
        let id = state.withLock { state -> UInt64 in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        let timer = timeout.map { timeout in
            Task {
                try await Task.sleep(for: timeout)
                self.wake(id)
            }
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state in
                    if state.generation != seen || state.expired.remove(id) != nil { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            wake(id)
        }
        timer?.cancel()
        state.withLock { _ = $0.expired.remove(id) }
    }

    /// Ends one wait (its timeout, or its task's cancellation), whether or not it has begun.
    private func wake(_ id: UInt64) {
        let waiter = state.withLock { state in
            guard let waiter = state.waiters.removeValue(forKey: id) else {
                state.expired.insert(id)
                return nil as CheckedContinuation<Void, Never>?
            }
            return waiter
        }
        waiter?.resume()
    }
}
