import DropboxAPI

/// When each sealed version goes to Dropbox, and with which others: the upload scheduler's
/// rules and every constant they use. The rules are a pure function of what the queue holds
/// (`Candidate`s) and the time, so they can be read, and tested, without an upload.
///
/// - A small file waits a moment after its last change (`quietPeriod`) for the rename or
///   utimens that usually follows (rsync, editors), unless someone waits for it (fsync,
///   unmount). Small files then go together: a batch leaves when writing pauses, when its
///   oldest file has waited `batchDelay`, or when it is full (`batchLimit`). Dropbox
///   serialises commits per namespace, so one commit for many files is far faster than one
///   each (cp -r, tar x).
/// - A small file's bytes are staged early (`stagesEarly`):
///   `stageAfter` its seal they go into a closed session of their own (at most
///   `earlyStageLimit` files a job, one job at a time), while the writer goes on, and its
///   batch's commit later takes that session and sends no byte (`WriteBack+EarlyStaging`).
/// - A large file goes alone, through a concurrent session, at most `largeAtOnce` at a time.
/// - A failed upload waits before its next try (`retryDelay`); unmounting gives every
///   failed upload one more try at once.
/// - A version never goes while an older one of its path is uploading, while its early
///   chunks are in flight, or while a rename or delete holds its path (`blocked`).
struct UploadSchedule {
    /// Above this a file gets its own session with parallel appends.
    static let largeFile: Int64 = 16 << 20
    /// Session chunk size (a multiple of 4 MiB), also for chunks sent before close.
    static let chunkSize: Int64 = 32 << 20
    static let quietPeriod: Duration = .milliseconds(400)
    static let batchDelay: Duration = .seconds(2)
    /// `upload_session/finish_batch_v2` takes at most 1,000 entries.
    static let batchLimit = 1000
    static let batchesAtOnce = 2
    /// Files of a batch whose bytes go at once, each into its own session. A small file's
    /// upload is one round trip, so over a real network this, not the machine, sets the pace:
    /// with 30 ms added to every request, 1,000 files of 4 KiB took 4.4 s after the copy with
    /// 8 at once and 1.5 s with 32; on this machine without the delay, 0.61-0.63 s either way.
    static let batchParallelism = 32
    static let largeAtOnce = 2
    /// Early staging (see above). A file deleted within `stageAfter` of its close costs no
    /// request; one rewritten in its quiet period costs its first version's staging only.
    /// Short, because an fsync after a burst waits for every file not staged by then: with
    /// 100 ms, `cp -r` of 1,000 files of 4 KiB left 41 % of them (those of the copy's last
    /// 100 ms) for its fsync, with 20 ms 8 %; `Scripts/bench-ab`, 12 rounds each: medians 430
    /// -> 391 ms. Not shorter: with 3 ms the medians were 427 against 390 ms. On two cores the
    /// thousand uploads cost about the same wherever they fall (none staged before the fsync,
    /// in /dev/shm: the copy took 229 ms and the fsync 158, against 312 and 76), so staging
    /// early buys only the overlap with the copy's idle moments, and waiting less adds none.
    static let stageAfter: Duration = .milliseconds(20)
    static let earlyStageLimit = 256
    static let earlyStageParallelism = 16
    /// After an early staging failed (Dropbox out of reach, 429, 5xx), none for this long:
    /// batches send the bytes, with their own retries.
    static let earlyStagePause: Duration = .seconds(30)
    /// Chunks of files still being written sent at once, over all files.
    static let earlyChunksAtOnce = 4
    /// Retries: seconds after a blip, every 5 minutes at most while the failure lasts.
    static let retry = RetryPolicy(baseDelay: 2, maxDelay: 300)
    /// The least time between two passes of the uploader. A pass looks at every queued
    /// version and every close wakes it: in a burst of creates (tar x, cp -r) a pass per
    /// file took more CPU than the creates themselves (5,000 empty files: 14 s). 15 ms
    /// measured the same as 5 in a cp -r of 1,000 files of 4 KiB + fsync (`Scripts/bench-ab`,
    /// 16 rounds each: wall-time medians 402 and 401 ms, daemon CPU 290 and 285 ms).
    static let passInterval: Duration = .milliseconds(5)
    /// A pass costs in proportion to the queue: with thousands of files queued (5,000 empty
    /// files created while uploads lag) passes every 5 ms took 10 % of the daemon's CPU.
    /// Passes are spaced to at least `passCostFactor` times what the last one took, so their
    /// share stays near 5 % of a core whatever the queue holds; batches wait seconds anyway.
    /// At most `passGapLimit` (a pass measured on a loaded machine may have been preempted):
    /// an fsync waits for the next pass.
    static let passCostFactor = 20
    static let passGapLimit: Duration = .milliseconds(250)
    static func gap(afterPassOf cost: Duration) -> Duration { min(passGapLimit, max(passInterval, cost * passCostFactor)) }
    /// How often the uploader, idle while Dropbox is out of reach, looks whether it is back.
    static let offlineLook: Duration = .seconds(1)
    /// Tries of a version an fsync waits for while they fail with errors that may pass
    /// (server errors, rate limits): 2 + 4 + 8 s of waits between them; then the fsync fails.
    static let passingFailuresWaitedOut = 4
    /// A full account is not a blip: look again every minute.
    static let fullAccountRetry: Duration = .seconds(60)

    /// How long a version waits after its `attempts`-th failed upload.
    static func retryDelay(after failure: FSError, attempts: Int) -> Duration {
        failure == .noSpace ? fullAccountRetry : retry.wait(attempt: attempts)
    }

    static func isLarge(size: Int64) -> Bool { size > largeFile }

    /// Whether a version just sealed, of `size` bytes, replacing queued versions of
    /// `replacedSizes`, has its bytes staged early. Not an empty file: it has no bytes to
    /// send, and a create seals an empty version that the file's first close replaces at once
    /// (staged, on a slow machine, it would be a request for nothing). Not a version that
    /// replaced one with bytes: a log appended to every few hundred milliseconds would send its
    /// whole content at each append. Not a large file: it has sessions of its own.
    static func stagesEarly(size: Int64, replacing replacedSizes: [Int64]) -> Bool {
        size > 0 && !isLarge(size: size) && !replacedSizes.contains { $0 > 0 }
    }

    /// What the rules need to know of one sealed version waiting in the queue.
    struct Candidate {
        var id: Int64
        var size: Int64
        /// Sealed, or last renamed or given a time.
        var settledAt: ContinuousClock.Instant
        /// fsync waits for it.
        var urgent = false
        var retryAt: ContinuousClock.Instant?
        /// It failed again since the unmount's drain began (its one immediate retry is used).
        var retriedInDrain = false
        /// An older version of its path is uploading, its early chunks are in flight, or a
        /// rename or delete holds its path.
        var blocked = false
        /// Its bytes may be staged early (`stagesEarly` said so at its seal; not staged yet).
        var stageable = false
    }

    /// Jobs to start now (ids: one batch of small files, or one large file each), files whose
    /// bytes to stage early, and how long until the rules may start another if some wait.
    struct Decision: Equatable {
        var jobs: [[Int64]] = []
        var stage: [Int64] = []
        var wake: Duration?
    }

    /// `candidates` oldest first; `freeBatches` and `freeLarge` are the slots not in use;
    /// `mayStage`: no early staging job runs, nor is it paused.
    static func decide(_ candidates: [Candidate], draining: Bool, freeBatches: Int, freeLarge: Int, mayStage: Bool = false,
                       now: ContinuousClock.Instant) -> Decision {
        var small: [(id: Int64, readyAt: ContinuousClock.Instant)] = []
        var large: [Int64] = []
        var wake: ContinuousClock.Instant?
        var lastActivity: ContinuousClock.Instant?
        var urgent = draining
        var stage: [Int64] = []
        for candidate in candidates {
            if !isLarge(size: candidate.size) { lastActivity = max(lastActivity ?? candidate.settledAt, candidate.settledAt) }
            // Bytes do not depend on the path: a blocked file's may go too.
            if mayStage && !draining && !candidate.urgent && candidate.stageable && !isLarge(size: candidate.size) {
                let stageAt = candidate.settledAt + stageAfter
                if stageAt > now {
                    wake = min(wake ?? stageAt, stageAt)
                } else if stage.count < earlyStageLimit {
                    stage.append(candidate.id)
                }
            }
            if candidate.blocked { continue }
            var readyAt = draining || candidate.urgent ? now : candidate.settledAt + quietPeriod
            if let retry = candidate.retryAt, !draining || candidate.retriedInDrain { readyAt = max(readyAt, retry) }
            if readyAt > now {
                wake = min(wake ?? readyAt, readyAt)
                continue
            }
            if isLarge(size: candidate.size) {
                large.append(candidate.id)
            } else {
                small.append((candidate.id, readyAt))
                urgent = urgent || candidate.urgent
            }
        }
        var decision = Decision()
        if freeBatches > 0, let oldest = small.map(\.readyAt).min() {
            let due = oldest + batchDelay
            let paused = (lastActivity ?? now) + quietPeriod
            if urgent || small.count >= batchLimit || paused <= now || due <= now {
                decision.jobs.append(small.prefix(batchLimit).map(\.id))
            } else {
                wake = min(wake ?? due, min(due, paused))
            }
        }
        for id in large.prefix(max(0, freeLarge)) { decision.jobs.append([id]) }
        // A batch leaving now sends its files' bytes itself.
        let leaving = Set(decision.jobs.joined())
        decision.stage = stage.filter { !leaving.contains($0) }
        decision.wake = wake.map { $0 - now }
        return decision
    }
}
