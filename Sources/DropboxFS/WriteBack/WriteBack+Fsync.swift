import Foundation

/// fsync of a file or a folder: returns once Dropbox has what it covers (offline, once the
/// local disk has it: `WriteBack+Durability`).
extension WriteBack {
    /// fsync: seals the file's newest version (whichever descriptor wrote it) and returns
    /// once it is on Dropbox.
    public func sync(handle: UInt64?, pathLower: String) async throws {
        let version = state.withLock { state -> LocalVersion? in
            guard let own = handle.flatMap({ openFiles.version(of: $0) }) else { return state.current[pathLower] }
            return Self.newestLocked(state, of: own)
        }
        guard let version else { return }
        try await seal(version)
        try await uploadNow([version])
    }

    /// fsync of a folder: returns once every closed file at or below it is on Dropbox (with
    /// one batch for the small ones: they all go at once). Files still open for writing are
    /// not waited for, as a disk's fsync of a folder does not sync its files' contents.
    public func sync(folder pathLower: String) async throws {
        // Closed in an outage with blocks only Dropbox had (the close said ENETUNREACH) and not
        // sealed yet: sealed now, so that the fsync covers them. `retryUnreachable` seals them
        // too once Dropbox is back, but an fsync right after returned before that seal was
        // done, without them (CI, OfflineTests). Still out of reach, the close said it already.
        for version in state.withLock({ Self.closedUnsealedLocked($0, under: pathLower) }) { try? await seal(version) }
        let sealed = state.withLock { state in
            state.current.values.filter { $0.isInQueue && $0.isAt(orUnder: pathLower) }
        }
        try await uploadNow(sealed)
    }

    /// Sealed versions go without waiting for quiet (small ones together), and this returns
    /// once Dropbox has them all. Those not on Dropbox after `syncFlushDelay` are flushed to
    /// the disk meanwhile (until Dropbox has them, the disk must): most small files are there
    /// by then, and flushing each at once was an eighth of the daemon's CPU in an fsync of
    /// 1,000 new files.
    private func uploadNow(_ sealed: [LocalVersion]) async throws {
        FuseLog.trace("fsync: waits for \(sealed.count) file(s)")
        defer { FuseLog.trace("fsync: returns") }
        state.withLock { state in
            for version in sealed { version.urgent = true }
            state.syncsWaiting += 1
        }
        defer { state.withLock { $0.syncsWaiting -= 1 } }
        changed(urgent: true)
        let flushing = Task {
            try await Task.sleep(for: Self.syncFlushDelay)
            await flush(sealed, hashing: false)
        }
        defer { flushing.cancel() }
        var keptOffline: [LocalVersion] = []
        for version in sealed {
            if let offline = try await awaitUpload(of: version) { keptOffline.append(offline) }
        }
        // Offline, fsync means what it means on a local disk (doc/SEMANTICS.md): one flush
        // for all of them.
        if !keptOffline.isEmpty { try await keepOnDisk(keptOffline) }
    }

    /// Waits until a sealed version (or the newer one that replaced it) is on Dropbox, and
    /// throws the failure that keeps it from going; one that may pass (a server error, a
    /// rate limit) is waited out for a few tries (`UploadSchedule.passingFailuresWaitedOut`:
    /// a route that keeps failing while others work must not hold the fsync for ever).
    /// Returns the version instead while Dropbox is out of reach: it is to be kept on the
    /// local disk.
    ///
    /// It waits for the version to be finished, after the store's catch-up, not only for
    /// Dropbox's answer to its commit (`LocalVersion.answered`): returning at the answer
    /// saves that catch-up (about 20 ms after a commit of 1,000 files), which
    /// `Scripts/bench-ab` could not tell from the noise (16 rounds each: medians 419 ms as
    /// it is, 414 returning at the answer), and would let the caller act on the file before
    /// the store has its revision.
    private func awaitUpload(of sealed: LocalVersion) async throws -> LocalVersion? {
        var version = sealed
        while true {
            let seen = signal.generation
            var madeUrgent = false
            let outcome: Result<Bool, FSError> = state.withLock { _ in
                while let newer = version.replacedBy {
                    version = newer
                    if !version.urgent { version.urgent = true; madeUrgent = true }
                }
                if version.phase == .finished { return version.setAside ? .failure(version.failure ?? .invalidName) : .success(true) }
                if version.phase == .editing { return .success(true) }  // nothing sealed to wait for
                if let failure = version.failure, version.phase == .queued,
                   !version.failureMayPass || version.attempts >= UploadSchedule.passingFailuresWaitedOut {
                    return .failure(failure)
                }
                return .success(false)
            }
            if madeUrgent {
                urgentSignal.notify()
                uploaderSignal.notify()
            }
            switch outcome {
            case .success(true): return nil
            case .success(false): await signal.wait(after: seen)
            case .failure(.networkUnreachable) where isOffline(): return version
            case .failure(.networkUnreachable): await signal.wait(after: seen)  // back: retried now
            case .failure(let error): throw error
            }
        }
    }
}
