import Foundation

/// Work at the lowest CPU priority (nice 19), for work done ahead of need: it gets a core
/// when the foreground leaves one idle. On Linux the nice value is per thread, and
/// `setpriority` with `who` 0 changes the calling thread's only.
public enum LowPriority {
    public static func lowerCurrentThread() {
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19)
    }

    /// Runs `body` on a thread of its own at the lowest priority.
    public static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                lowerCurrentThread()
                continuation.resume(with: Result { try body() })
            }
            thread.name = "dropboxfs-background"
            thread.start()
        }
    }
}
