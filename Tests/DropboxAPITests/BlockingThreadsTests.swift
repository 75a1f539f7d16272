@testable import DropboxAPI
import Foundation
import Synchronization
import Testing

@Suite("client: threads for blocking work", .timeLimit(.minutes(1)))
struct BlockingThreadsTests {
    /// Jobs never wait for each other: six jobs that each block until all six have begun
    /// all finish (a pool of fewer threads would hang here).
    @Test func blockingJobsRunAtOnce() async throws {
        let threads = BlockingThreads(name: "test-blocking", lowestPriority: false)
        let started = Counter()
        try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<6 {
                group.addTask {
                    try await threads.run {
                        started.value.add(1, ordering: .relaxed)
                        while started.value.load(ordering: .relaxed) < 6 { usleep(1000) }
                        return 1
                    }
                }
            }
            var finished = 0
            for try await one in group { finished += one }
            #expect(finished == 6)
        }
    }

    /// A job finds the thread the last one left idle: one thread for jobs one after another
    /// (a thread each cost a `clone` and an exit per HTTP request).
    @Test func anIdleThreadTakesTheNextJob() async throws {
        let threads = BlockingThreads(name: "test-reuse", lowestPriority: false)
        var seen = Set<UInt>()
        for _ in 0..<20 {
            let thread = try await threads.run { UInt(pthread_self()) }
            seen.insert(thread)
            while threads.idleThreads == 0 { try await Task.sleep(for: .milliseconds(1)) }
        }
        #expect(seen.count == 1)
    }
}

private final class Counter: Sendable {
    let value = Atomic<Int>(0)
}
