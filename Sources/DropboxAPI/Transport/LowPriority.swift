import Foundation

/// Work at the lowest CPU priority (nice 19), for work done ahead of need: it gets a core
/// when the foreground leaves one idle. On Linux the nice value is per thread, and
/// `setpriority` with `who` 0 changes the calling thread's only.
public enum LowPriority {
    public static func lowerCurrentThread() {
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19)
    }

    /// Runs `body` on a thread at the lowest priority (`BlockingThreads.background`).
    public static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await BlockingThreads.background.run(body)
    }
}

/// Blocking work (hashing, a large read) awaited from async code on a thread of its own
/// (`BlockingThreads.normal`), so it never holds one of Swift's cooperative threads (two on
/// a 2-core machine), which answer every FUSE request meanwhile.
public enum OwnThread {
    public static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await BlockingThreads.normal.run(body)
    }
}
