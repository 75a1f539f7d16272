import DropboxAPI

/// Early staging: a small file's bytes go into a closed upload session of their own soon
/// after its close (`UploadSchedule.stageAfter`), while the writer goes on (`cp -r`, `tar x`,
/// an unpacked download), rather than when its batch leaves. The batch's commit then takes
/// that session and sends no byte: an fsync after a copy waits for one commit, not for a
/// thousand uploads begun only when it asked, and the copying and the sending share the time.
///
/// Safety is that of `WriteBack+StagedBytes`: a sealed version's bytes never change, so its
/// session is right for it whatever its path becomes, and a session Dropbox no longer knows
/// is forgotten and the bytes go again. A version a batch took is not staged early (if that
/// try fails before sending its bytes, it may be while it waits for the next); a batch waits
/// for the stagings of its files already under way (`earlyStagesEnded`) rather than send
/// their bytes twice.
extension WriteBack {
    /// Marks the version's early staging as under way; false when it is no longer wanted (its
    /// batch took it, a newer version replaced it, it was deleted, or staging is paused).
    func beginEarlyStage(_ version: LocalVersion) -> Bool {
        state.withLock { state in
            guard version.phase == .queued, !version.detached, version.earlyStage == .waiting, version.stagedBytes == nil,
                  state.earlyStagePausedUntil.map({ $0 <= .now }) ?? true else { return false }
            version.earlyStage = .sending
            return true
        }
    }

    /// The staging ended: with its session, kept for the commit; or failed (Dropbox out of
    /// reach, a 429, a 5xx), and then batches send the bytes, with their own retries, and no
    /// file is staged early for a while.
    func endEarlyStage(_ version: LocalVersion, _ bytes: DropboxClient.StagedBytes?) {
        state.withLock { state in
            version.earlyStage = .never
            if let bytes {
                recordStagedLocked(version, bytes)
            } else if version.phase != .finished && !version.detached {
                // (A file deleted meanwhile fails as its staging file goes: no reason to pause.)
                state.earlyStagePausedUntil = .now + UploadSchedule.earlyStagePause
            }
        }
        changed(wakesUploader: false)  // a batch may wait for it (`earlyStagesEnded`)
    }

    /// Waits until none of `versions` is being staged early.
    func earlyStagesEnded(_ versions: [LocalVersion]) async {
        while true {
            let seen = signal.generation
            if state.withLock({ _ in !versions.contains { $0.earlyStage == .sending } }) { return }
            await signal.wait(after: seen)
        }
    }
}
