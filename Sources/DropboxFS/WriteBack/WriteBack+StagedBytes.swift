import DropboxAPI

/// Small files' bytes kept in their sessions across tries. A batch sends each file's bytes
/// into a closed session of its own, then commits them all in one call; when that commit
/// fails (a 5xx, a 429, a lost connection), the sessions stay good (Dropbox keeps an
/// unfinished session a week), so the retry commits them and sends no byte again: each retry
/// sent every file of the batch anew.
///
/// Safety: a sealed version's bytes never change (a write starts a new version), so its
/// session stays right for it whatever its path becomes. A session Dropbox no longer knows
/// (finished by a commit whose answer was lost, or expired) is forgotten, and the next try
/// sends the bytes again.
extension WriteBack {
    /// A batch's upload put the version's bytes in this session: a retry takes it. Kept only
    /// for a version still to be committed, holding as many bytes as were sent.
    func recordStaged(_ version: LocalVersion, _ bytes: DropboxClient.StagedBytes) {
        state.withLock { _ in recordStagedLocked(version, bytes) }
    }

    func recordStagedLocked(_ version: LocalVersion, _ bytes: DropboxClient.StagedBytes) {
        guard version.isInQueue, !version.detached, bytes.size == version.file.size else { return }
        version.stagedBytes = bytes
    }

    func forgetStaged(_ version: LocalVersion) {
        state.withLock { _ in version.stagedBytes = nil }
    }

    /// The versions' sessions from earlier tries, one per version (nil: its bytes are to be sent).
    func stagedBytes(_ versions: [LocalVersion]) -> [DropboxClient.StagedBytes?] {
        state.withLock { _ in versions.map(\.stagedBytes) }
    }
}
