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

    func decide(_ candidates: [Schedule.Candidate], draining: Bool = false, freeBatches: Int = 2, freeLarge: Int = 2,
                mayStage: Bool = false) -> Schedule.Decision {
        Schedule.decide(candidates, draining: draining, freeBatches: freeBatches, freeLarge: freeLarge, mayStage: mayStage, now: now)
    }

    func stageable(_ id: Int64, size: Int64 = 10, settled ago: Duration) -> Schedule.Candidate {
        var candidate = candidate(id, size: size, settled: ago)
        candidate.stageable = true
        return candidate
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

    /// A small file's bytes are staged `stageAfter` its close, long before its batch leaves;
    /// blocked or in retry they may go too (bytes do not depend on the path). Not a large
    /// file, not one whose batch leaves now, not while a staging job runs or is paused.
    @Test func aSmallFilesBytesAreStagedEarlyWhileItsBatchWaits() {
        let fresh = stageable(1, settled: Schedule.stageAfter / 4)
        #expect(decide([fresh], mayStage: true) == Schedule.Decision(jobs: [], wake: Schedule.stageAfter - Schedule.stageAfter / 4))
        let settled = stageable(2, settled: Schedule.stageAfter)
        var blocked = stageable(3, settled: .milliseconds(300))
        blocked.blocked = true
        var failed = stageable(4, settled: .seconds(5))
        failed.retryAt = now + .seconds(5)
        let busy = [settled, blocked, failed, fresh]
        #expect(decide(busy, mayStage: true).stage == [2, 3, 4])
        #expect(decide(busy, mayStage: true).jobs.isEmpty)
        #expect(decide(busy).stage.isEmpty)
        #expect(decide([stageable(5, size: large, settled: .seconds(1))], mayStage: true).stage.isEmpty)
        var synced = settled
        synced.urgent = true
        #expect(decide([synced, blocked], mayStage: true) == Schedule.Decision(jobs: [[2]], stage: [3]))
        #expect(decide(busy, draining: true, mayStage: true).stage.isEmpty)
        let many = (1...Int64(Schedule.earlyStageLimit + 10)).map { stageable($0, settled: .milliseconds(200)) } + [fresh]
        #expect(decide(many, mayStage: true).stage == Array(1...Int64(Schedule.earlyStageLimit)))
    }

    /// Which versions are staged early at all: small ones with bytes, not a rewrite of bytes
    /// still waiting (a file's create seals an empty version its first close replaces).
    @Test func onlySmallFilesWithNewBytesAreStagedEarly() {
        #expect(Schedule.stagesEarly(size: 4096, replacing: []))
        #expect(Schedule.stagesEarly(size: 4096, replacing: [0]))
        #expect(!Schedule.stagesEarly(size: 4096, replacing: [0, 10]))
        #expect(!Schedule.stagesEarly(size: 0, replacing: []))
        #expect(!Schedule.stagesEarly(size: large, replacing: []))
    }

    @Test func retriesBackOffAndAFullAccountIsLookedAtEveryMinute() {
        let first = Schedule.retryDelay(after: .io("reset"), attempts: 1)
        let later = Schedule.retryDelay(after: .io("reset"), attempts: 6)
        #expect(first < later && later <= .seconds(300))
        #expect(Schedule.retryDelay(after: .noSpace, attempts: 1) == .seconds(60))
        #expect(Schedule.retryDelay(after: .noSpace, attempts: 9) == .seconds(60))
    }
}
