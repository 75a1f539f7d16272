import Foundation

/// Threads kept for blocking work awaited from async code (a transfer in `curl_easy_perform`,
/// hashing a large file), so it never holds one of Swift's few cooperative threads. A job
/// takes an idle thread, or starts one when none is idle: jobs never queue behind each other
/// (a transfer blocks for its whole length). A thread idle for `idleTimeout` ends, so a quiet
/// mount keeps none.
///
/// A thread each job cost a `clone` and an exit per HTTP request: seen with strace, 1,000
/// small uploads started and ended about 1,000 threads, and perf put 4 % of the daemon's CPU
/// in `clone3` alone.
public final class BlockingThreads: @unchecked Sendable {
    /// For work the user waits for.
    public static let normal = BlockingThreads(name: "dropboxfs-blocking", lowestPriority: false)
    /// For work done ahead of need, at the lowest CPU priority (nice 19): it gets a core when
    /// the foreground leaves one idle. A thread's nice value cannot be raised again without
    /// privilege, so these threads are kept apart from the others.
    public static let background = BlockingThreads(name: "dropboxfs-background", lowestPriority: true)

    static let idleTimeout: TimeInterval = 30

    private let name: String
    private let lowestPriority: Bool
    /// Guards `jobs` and `idle`.
    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []
    private var idle = 0

    /// Threads waiting for a job now.
    var idleThreads: Int {
        condition.lock()
        defer { condition.unlock() }
        return idle
    }

    init(name: String, lowestPriority: Bool) {
        self.name = name
        self.lowestPriority = lowestPriority
    }

    /// Runs `job` on one of the pool's threads.
    public func run(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        jobs.append(job)
        let startThread = idle < jobs.count
        if !startThread { condition.signal() }
        condition.unlock()
        guard startThread else { return }
        let thread = Thread { [self] in work() }
        thread.name = name
        thread.start()
    }

    /// Runs `body` on one of the pool's threads and returns what it returned.
    public func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            run { continuation.resume(with: Result { try body() }) }
        }
    }

    private func work() {
        if lowestPriority { LowPriority.lowerCurrentThread() }
        condition.lock()
        while true {
            while jobs.isEmpty {
                idle += 1
                let signalled = condition.wait(until: Date(timeIntervalSinceNow: Self.idleTimeout))
                idle -= 1
                if !signalled && jobs.isEmpty {
                    condition.unlock()
                    return
                }
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job()
            condition.lock()
        }
    }
}
