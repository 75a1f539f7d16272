import DropboxAPI

/// Small files' bytes sent before their commit. In a burst of new files (cp -r, tar x) the
/// commit waits for the burst to end (one `finish_batch_v2` for up to 1,000 files), and an
/// fsync after a copy waited for every file's bytes to go, one request each: 1,000 files of
/// 4 KiB were a third of `cp -r` + fsync. Sent while the copy runs, on the lowest CPU
/// priority (`UploadSchedule.prestageable` says which and when), they leave the commit alone
/// at the end.
///
/// Safety: a sealed version's bytes never change (a write starts a new version), so a
/// session holding them stays right for it whatever its path becomes. Bytes sent for a
/// version deleted or replaced meanwhile (its staging file may be reused) are dropped
/// unused. A batch whose commit fails keeps its sessions: the retry sends no byte again,
/// unless Dropbox no longer knows the session.
extension WriteBack {
    /// Queued versions whose bytes go now (each marked as sending), and how long until
    /// another may.
    func takePrestageable(limit: Int) -> (versions: [LocalVersion], wake: Duration?) {
        state.withLock { state in
            let queued = state.versions.values.filter { $0.phase == .queued }.sorted { $0.id < $1.id }
            let candidates = queued.map { version in
                UploadSchedule.Candidate(id: version.id, size: version.file.size, settledAt: version.settledAt, urgent: version.urgent,
                                         retryAt: version.retryAt, prestaged: version.prestage != .notTried || version.stagedBytes != nil)
            }
            let (ids, wake) = UploadSchedule.prestageable(candidates, limit: limit, now: .now)
            let versions = ids.compactMap { state.versions[$0] }
            for version in versions { version.prestage = .sending }
            return (versions, wake)
        }
    }

    /// A send ahead of the commit ended, with the bytes' session if it went: kept only for a
    /// version still to be committed, holding as many bytes as were sent.
    func prestageEnded(_ version: LocalVersion, _ bytes: DropboxClient.StagedBytes?) {
        state.withLock { _ in
            version.prestage = .ended
            if let bytes { keepStagedLocked(version, bytes) }
        }
        changed(wakesUploader: false)  // a batch waiting for it goes on
    }

    /// A batch's upload put the version's bytes in this session: a retry of its commit takes it.
    func recordStaged(_ version: LocalVersion, _ bytes: DropboxClient.StagedBytes) {
        state.withLock { _ in keepStagedLocked(version, bytes) }
    }

    private func keepStagedLocked(_ version: LocalVersion, _ bytes: DropboxClient.StagedBytes) {
        guard version.phase == .queued || version.phase == .uploading, !version.detached, bytes.size == version.file.size else { return }
        version.stagedBytes = bytes
    }

    /// Dropbox no longer knows the session (committed by an answer that was lost, or a week
    /// old): the next try sends the bytes again.
    func forgetStaged(_ version: LocalVersion) {
        state.withLock { _ in version.stagedBytes = nil }
    }

    /// Waits for the sends ahead of these versions' commit still under way (one request each),
    /// then returns their sessions, one per version (nil: its bytes are to be sent).
    func stagedBytes(_ versions: [LocalVersion]) async -> [DropboxClient.StagedBytes?] {
        while true {
            let seen = signal.generation
            let staged: [DropboxClient.StagedBytes?]? = state.withLock { _ in
                versions.contains { $0.prestage == .sending } ? nil : versions.map(\.stagedBytes)
            }
            if let staged { return staged }
            await signal.wait(after: seen)
        }
    }
}
