import NIOCore

/// Runs a task's jobs on a NIO event loop instead of Swift's shared cooperative pool.
///
/// The emulator lives in the test process beside code that blocks pool threads in system
/// calls on a mount (`FileManager`, `stat`): with the pool's two threads (two cores) both
/// blocked on a mount whose daemon waits for this emulator, nothing was left to answer it,
/// and the daemon's calls gave up after two 60 s stalls (ENETUNREACH in a test that had
/// done nothing wrong). On its own event loops the emulator answers whatever the pool does.
/// It also spares each request a hop from NIO's thread to the pool and back.
final class EventLoopExecutor: TaskExecutor {
    private let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
