import Foundation
import Synchronization

/// Wakes waiters when something changes: the namespace (`list_folder/longpoll`), the fault
/// rules (a request a `silent` rule holds). A generation number closes the gap between
/// "checked, nothing new" and "started waiting": a change in between is seen.
final class ChangeNotifier: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var waiters: [UUID: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = Mutex(State())

    func notify() {
        let woken = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.generation &+= 1
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for continuation in woken { continuation.resume() }
    }

    /// Waits until `condition` holds (true) or `timeout` passes (false). Cancellation ends
    /// the wait with `CancellationError`.
    func wait(timeout: Duration, until condition: () throws -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while true {
            try Task.checkCancellation()
            let generation = state.withLock { $0.generation }
            if try condition() { return true }
            if ContinuousClock.now >= deadline { return false }
            let id = UUID()
            let timer = Task {
                try? await Task.sleep(until: deadline, clock: .continuous)
                self.resume(id)
            }
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    // Checked under the lock the timer's resume takes: a timer that fired
                    // before this waiter was registered (and so woke nobody) is seen here.
                    let stale = state.withLock { state -> Bool in
                        if state.generation != generation || Task.isCancelled || ContinuousClock.now >= deadline { return true }
                        state.waiters[id] = continuation
                        return false
                    }
                    if stale { continuation.resume() }
                }
            } onCancel: {
                self.resume(id)
            }
            timer.cancel()
        }
    }

    private func resume(_ id: UUID) {
        state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
    }
}
