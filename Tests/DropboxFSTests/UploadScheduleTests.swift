@testable import DropboxFS
import Testing

/// The upload scheduler's rules on their own: given what the queue holds and the time, which
/// uploads start now, together, and when to look again. (Time here is a fixed instant plus
/// offsets, not the machine's clock.)
@Suite("core: upload schedule")
struct UploadScheduleTests {
    typealias Schedule = UploadSchedule
    let now = ContinuousClock.now
    let small: Int64 = 10
    let large = Schedule.largeFile + 1

    func candidate(_ id: Int64, size: Int64 = 10, settled ago: Duration = .seconds(10)) -> Schedule.Candidate {
        Schedule.Candidate(id: id, size: size, settledAt: now - ago)
    }

    func decide(_ candidates: [Schedule.Candidate], draining: Bool = false, freeBatches: Int = 2, freeLarge: Int = 2) -> Schedule.Decision {
        Schedule.decide(candidates, draining: draining, freeBatches: freeBatches, freeLarge: freeLarge, now: now)
    }

    @Test func aFileJustClosedWaitsForItsQuietMomentUnlessSomeoneWaits() {
        let fresh = candidate(1, settled: .milliseconds(100))
        #expect(decide([fresh]) == Schedule.Decision(jobs: [], wake: Schedule.quietPeriod - .milliseconds(100)))
        var synced = fresh
        synced.urgent = true
        #expect(decide([synced]).jobs == [[1]])
        #expect(decide([fresh], draining: true).jobs == [[1]])
    }

    /// Quiet small files go in one batch; one that waits for fsync takes the others along.
    @Test func smallFilesGoTogether() {
        #expect(decide([candidate(1), candidate(2), candidate(3)]).jobs == [[1, 2, 3]])
        var synced = candidate(2)
        synced.urgent = true
        // 3 was written a moment ago: the batch waits for writing to pause, but not for fsync.
        let busy = [candidate(1, settled: .milliseconds(500)), candidate(3, settled: .milliseconds(10))]
        #expect(decide(busy).jobs.isEmpty)
        #expect(decide(busy + [synced]).jobs == [[1, 2]])
    }

    /// While files keep arriving (no pause), a batch still leaves once its oldest file has
    /// waited `batchDelay`, or once it is full.
    @Test func aStreamOfFilesLeavesInBatchesAtTheDelayOrTheLimit() {
        let arriving = (1...10).map { candidate(Int64($0), settled: .milliseconds(500)) } + [candidate(11, settled: .zero)]
        let waiting = decide(arriving)
        #expect(waiting.jobs.isEmpty && waiting.wake != nil && waiting.wake! <= Schedule.quietPeriod)
        let late = [candidate(1, settled: Schedule.batchDelay + Schedule.quietPeriod)] + arriving.dropFirst()
        #expect(decide(late).jobs == [Array(1...10)])
        let many = (1...Int64(Schedule.batchLimit + 500)).map { candidate($0, settled: .milliseconds(500)) } + [candidate(0, settled: .zero)]
        #expect(decide(many).jobs.map(\.count) == [Schedule.batchLimit])
        #expect(decide(many, freeBatches: 0).jobs.isEmpty)
    }

    @Test func largeFilesGoAloneAndNoMoreThanTheFreeSlots() {
        let files = [candidate(1, size: large), candidate(2, size: large), candidate(3), candidate(4, size: large)]
        #expect(decide(files).jobs == [[3], [1], [2]])
        #expect(decide(files, freeLarge: 0).jobs == [[3]])
    }

    @Test func aBlockedVersionNeverGoes() {
        var blocked = candidate(1)
        blocked.blocked = true
        blocked.urgent = true
        #expect(decide([blocked, candidate(2)]).jobs == [[2]])
        #expect(decide([blocked], draining: true) == Schedule.Decision())
    }

    /// A failed upload waits for its retry time; unmounting tries each failed one once more
    /// at once, then it waits again.
    @Test func aFailedUploadWaitsForItsRetryExceptOnceWhileUnmounting() {
        var failed = candidate(1)
        failed.retryAt = now + .seconds(5)
        #expect(decide([failed]) == Schedule.Decision(jobs: [], wake: .seconds(5)))
        #expect(decide([failed], draining: true).jobs == [[1]])
        failed.retriedInDrain = true
        #expect(decide([failed], draining: true).jobs.isEmpty)
    }

    @Test func retriesBackOffAndAFullAccountIsLookedAtEveryMinute() {
        let first = Schedule.retryDelay(after: .io("reset"), attempts: 1)
        let later = Schedule.retryDelay(after: .io("reset"), attempts: 6)
        #expect(first < later && later <= .seconds(300))
        #expect(Schedule.retryDelay(after: .noSpace, attempts: 1) == .seconds(60))
        #expect(Schedule.retryDelay(after: .noSpace, attempts: 9) == .seconds(60))
    }
}
