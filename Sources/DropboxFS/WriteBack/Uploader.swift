import DropboxAPI
import Foundation
import Synchronization

/// Sends sealed local versions to Dropbox when `UploadSchedule` says, oldest first per path:
/// - many small files: each into a closed upload session, committed together by
///   `upload_session/finish_batch_v2` (Dropbox serialises commits per namespace: one commit
///   for many files is far faster than one each); a lone small file goes by `files/upload`.
///   A commit that fails keeps the sessions for its retry (`WriteBack+StagedBytes`);
/// - a large file: a concurrent upload session with parallel 4 MiB-aligned appends, its
///   session and sent chunks recorded in the queue so a restarted mount resumes it. A large
///   file written sequentially from empty starts that session before close
///   (`WriteBack+EarlyUploads`), so its upload overlaps the writing.
///
/// Every commit says `WriteMode.update(rev)` (or `add` for a new file), so a change made
/// elsewhere meanwhile is never overwritten: the local bytes then go to a conflicted copy
/// beside it, named as Dropbox names them. Every upload carries its content hash.
public final class Uploader: Sendable {
    let writeBack: WriteBack
    let client: DropboxClient
    let watcher: ChangeWatcher
    let store: MetadataStore
    /// New folders, removals and renames pending where a file is committed go first (mkdir,
    /// an unlink, or a rename of the folder, then a new file there).
    let namespace: NamespaceSender
    let tuning: UploadTuning
    /// Hears (path, lineage, content hash) when the newest local version of a path is on
    /// Dropbox, before the change is seen (the kernel's pages of it may then stay).
    let uploaded: @Sendable (String, Int64, String) -> Void
    private let running = Mutex<(batches: Int, large: Int, early: Int, staging: Int)>((0, 0, 0, 0))

    init(writeBack: WriteBack, client: DropboxClient, watcher: ChangeWatcher, store: MetadataStore, namespace: NamespaceSender,
         uploaded: @escaping @Sendable (String, Int64, String) -> Void = { _, _, _ in }) {
        self.writeBack = writeBack
        self.namespace = namespace
        self.uploaded = uploaded
        self.client = client
        self.watcher = watcher
        self.store = store
        var tuning = UploadTuning()
        tuning.chunkSize = UploadSchedule.chunkSize
        tuning.parallelism = 4
        self.tuning = tuning
    }

    /// Uploads (and sends new folders and deletes) until cancelled.
    public func run() async {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.writeBack.flushPeriodically() }
            group.addTask { await self.namespace.run() }
            var lastPass = ContinuousClock.now - UploadSchedule.passInterval
            var gap = UploadSchedule.passInterval
            var urgentSeen = writeBack.urgentSignal.generation
            while !Task.isCancelled {
                // Out of reach, every try fails at once (calls are refused), yet each pass looks
                // at the whole queue, and each failure sets its own retry time, so a long queue
                // was passed over again and again: 30,000 files written in an outage kept a
                // fifth of a core busy while nothing happened. So no pass then while nobody
                // waits for uploads; while an fsync waits (to hear its files stay on the local
                // disk) or the mount drains, passes go on as usual, for as long as it waits
                // (its files may go only after an early send or an older version's upload ends,
                // or at their retry time). The loop looks each second whether Dropbox is back.
                // (The generation is read first: an fsync's wake-up after it is not missed.)
                let urgentNow = writeBack.urgentSignal.generation
                if writeBack.isOffline(), !writeBack.someoneWaits {
                    await writeBack.urgentSignal.wait(after: urgentNow, timeout: UploadSchedule.offlineLook)
                    continue
                }
                let sinceLastPass = ContinuousClock.now - lastPass
                if sinceLastPass < gap { await writeBack.urgentSignal.wait(after: urgentSeen, timeout: gap - sinceLastPass) }
                lastPass = .now
                urgentSeen = writeBack.urgentSignal.generation
                let seen = writeBack.uploaderSignal.generation
                // One early-staging job at a time: two at once, so that no job's tail left the
                // sending idle, measured no better (`Scripts/bench-ab`, two runs of 12 rounds:
                // medians 376 against 415 ms, then 434 against 397).
                let free = running.withLock { (UploadSchedule.batchesAtOnce - $0.batches, UploadSchedule.largeAtOnce - $0.large, $0.staging == 0) }
                let (jobs, stage, wake) = writeBack.takeEligible(freeBatches: free.0, freeLarge: free.1, mayStage: free.2)
                for job in jobs {
                    let kind: Slot = Self.isLarge(job) ? .large : .batches
                    occupy(kind, by: 1)
                    group.addTask {
                        await self.upload(job)
                        self.occupy(kind, by: -1)
                        self.writeBack.changed()
                    }
                }
                let early = writeBack.takeEarlyChunks(limit: UploadSchedule.earlyChunksAtOnce - running.withLock { $0.early },
                                                      chunkSize: UploadSchedule.chunkSize)
                for chunk in early {
                    occupy(.early, by: 1)
                    group.addTask {
                        await self.sendEarly(chunk)
                        self.occupy(.early, by: -1)
                        self.writeBack.changed()  // a slot is free for the next chunk
                    }
                }
                if !stage.isEmpty {
                    occupy(.staging, by: 1)
                    group.addTask {
                        await self.stageEarly(stage)
                        self.occupy(.staging, by: -1)
                        self.writeBack.changed()  // the next files may go
                    }
                }
                gap = UploadSchedule.gap(afterPassOf: .now - lastPass)
                if jobs.isEmpty && early.isEmpty && stage.isEmpty { await writeBack.uploaderSignal.wait(after: seen, timeout: wake) }
            }
        }
    }

    private enum Slot { case batches, large, early, staging }

    /// Counts a job in or out of its kind's slots.
    private func occupy(_ slot: Slot, by change: Int) {
        running.withLock {
            switch slot {
            case .batches: $0.batches += change
            case .large: $0.large += change
            case .early: $0.early += change
            case .staging: $0.staging += change
            }
        }
    }

    /// Uploads everything queued, without quiet periods (unmount). Returns nil once all is on
    /// Dropbox, or, if some uploads or namespace changes keep failing (they stay queued for
    /// the next mount), one line saying what is left and why.
    public func drain() async -> String? {
        await writeBack.sealAllForDrain()
        var namespaceLeft: String?
        do { try await namespace.sendAll() } catch {
            namespaceLeft = "\(namespace.total) new folder(s), removal(s) and rename(s) (\(error))"
        }
        while true {
            let seen = writeBack.signal.generation
            if writeBack.pendingCount == 0 { return namespaceLeft }
            if writeBack.allFailedSinceDrain {
                let pending = writeBack.pendingSummary(listing: .max)
                var uploads = "\(pending.count) file(s)"
                if let failed = pending.listed.first(where: { $0.failure != nil }), let why = failed.failure { uploads += " (\(failed.path): \(why))" }
                return [uploads, namespaceLeft].compactMap { $0 }.joined(separator: ", ")
            }
            await writeBack.signal.wait(after: seen, timeout: .seconds(1))  // uploads notify; the timeout is a safety net
        }
    }

    // MARK: One job

    /// A job is one large file, or a batch of small ones.
    static func isLarge(_ job: [LocalVersion]) -> Bool { job.count == 1 && UploadSchedule.isLarge(size: job[0].file.size) }

    /// Uploads a job, its commits expected as the mount's own from the start (a catch-up
    /// running meanwhile must not take them for another client's and drop the kernel's pages
    /// of what was just written).
    private func upload(_ job: [LocalVersion]) async {
        if Self.isLarge(job) { return await uploadLarge(job[0]) }  // expects its commit itself
        do { try await namespace.send(touching: job.map(\.pathLower)) } catch {
            for version in job { await failed(version, error) }
            return
        }
        await watcher.changingOwn(job.map { ($0.pathLower, .commit) }) { await send(job) }
    }

    private func send(_ job: [LocalVersion]) async {
        FuseLog.trace("upload: \(job.count) file(s) taken, waiting for their early stagings: "
                      + job.map { "#\($0.id) \($0.pathLower) on \($0.baseRev ?? "none")" }.joined(separator: ", "))
        await writeBack.earlyStagesEnded(job)
        let staged = writeBack.stagedBytes(job)
        FuseLog.trace("upload: \(job.count) file(s), \(staged.compactMap { $0 }.count) staged already")
        if job.count > 1 { return await uploadBatch(job, staged: staged) }
        let version = job[0]
        let commit = writeBack.commitInfo(version)
        do {
            let file: FileMetadata
            if let bytes = staged[0] {
                file = try await client.finishSession(bytes.session, size: bytes.size, hash: bytes.hash, commit: commit)
            } else {
                file = try await client.uploadFile(version.file.bytesPath, to: commit, tuning: tuning)
            }
            await complete(version, file)
        } catch {
            await failed(version, error)
        }
    }

    private func uploadBatch(_ job: [LocalVersion], staged: [DropboxClient.StagedBytes?]) async {
        let items = zip(job, staged).map { version, bytes in
            DropboxClient.BatchItem(localPath: version.file.bytesPath, commit: writeBack.commitInfo(version), staged: bytes)
        }
        do {
            let results = try await client.uploadBatch(items, tuning: tuning, parallelism: UploadSchedule.batchParallelism,
                                                       staged: { [writeBack] index, bytes in writeBack.recordStaged(job[index], bytes) })
            FuseLog.trace("upload: batch of \(job.count) answered")
            var done: [(LocalVersion, FileMetadata)] = []
            for (version, result) in zip(job, results) {
                switch result {
                case .success(let file): done.append((version, file))
                case .failure(let error): await failed(version, error)
                }
            }
            await complete(done)
            FuseLog.trace("upload: batch of \(job.count) complete (store caught up)")
        } catch {
            for version in job { await failed(version, error) }
        }
    }

    /// A large file through a concurrent session, resumed from the queue's record if an
    /// earlier run started it. Its bytes go first, while the file may still be renamed (the
    /// commit goes to the name it has then) or deleted (the sending stops, nothing is
    /// committed): `rm` of a file with gigabytes still to go waited for all of them.
    private func uploadLarge(_ version: LocalVersion) async {
        let fd = open(version.file.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return await failed(version, StagedFile.error("open", version.file.path)) }
        defer { close(fd) }
        var resume = writeBack.sessionResume(version)
        do {
            while true {
                do {
                    guard let file = try await sendLarge(version, fd: fd, resume: resume) else { return }
                    return await complete(version, file)
                } catch where resume != nil && Self.isSessionError(error) && !writeBack.isAbandoned(version) {
                    // The session this mount started in an earlier run is gone (Dropbox keeps
                    // one a week): the bytes go again in a new one now. As a failed attempt it
                    // would wait out a backoff, and an unmount would leave the file behind.
                    FuseLog.error("\(version.path): Dropbox no longer knows its upload session; sending it again")
                    writeBack.forgetSession(version)
                    resume = nil
                }
            }
        } catch where writeBack.isAbandoned(version) {
            return  // deleted while its bytes went: nothing to commit, nothing to retry
        } catch {
            // A session Dropbox no longer knows (finished by a lost answer) is started
            // afresh next time.
            if Self.isSessionError(error) { writeBack.forgetSession(version) }
            await failed(version, error)
        }
    }

    /// One try at a large file: its bytes (those `resume` does not name as sent), then the
    /// commit. Nil: the version was deleted before its commit.
    private func sendLarge(_ version: LocalVersion, fd: Int32, resume: SessionResume?) async throws -> FileMetadata? {
        let size = version.file.size
        let sending = Task { [client, tuning, writeBack] in
            try await client.sendConcurrentSession(
                fd: fd, size: size, tuning: tuning, resume: resume,
                started: { writeBack.recordSession(version, $0) },
                chunkSent: { writeBack.recordChunk(version, $0) },
                progress: { sent, _ in writeBack.recordProgress(version, sent) })
        }
        let (session, hash) = try await withTaskCancellationHandler {
            try await writeBack.sendingAbandonably(version, cancel: { sending.cancel() }) { try await sending.value }
        } onCancel: {
            sending.cancel()
        }
        guard let commit = await writeBack.beginCommit(version) else { return nil }
        try await namespace.send(touching: [version.pathLower])
        return try await watcher.changingOwn([(version.pathLower, .commit)]) {
            try await client.finishSession(session, size: size, hash: hash, commit: commit)
        }
    }

    /// One chunk of a file still being written, into the version's session (started here
    /// for its first chunk), at the lowest CPU priority, so it takes mostly CPU the writer
    /// leaves idle. Measured on two cores, `cp` of 1 GiB + `sync`: 1.88-1.98 s without early
    /// chunks, 1.66-2.08 s with them at normal priority, 1.49-1.64 s at the lowest.
    private func sendEarly(_ chunk: EarlyChunk) async {
        let version = chunk.version
        let fd = open(version.file.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return writeBack.earlyChunkFailed(version) }
        defer { close(fd) }
        do {
            let session: String
            if let known = chunk.session {
                session = known
            } else {
                session = try await client.startConcurrentSession()
                writeBack.earlySessionStarted(version, session)
            }
            let digests = try await client.appendConcurrentChunk(session: session, fd: fd, offset: chunk.offset, length: UploadSchedule.chunkSize,
                                                                 close: false, background: true)
            writeBack.earlyChunkSent(version, session: session, offset: chunk.offset, digests: digests)
        } catch {
            FuseLog.error("early upload of \(version.path) stopped (the upload at close sends the rest): \(error)")
            writeBack.earlyChunkFailed(version)
        }
    }

    static func isSessionError(_ error: any Error) -> Bool {
        if case .route? = error as? CallError<UploadSessionLookupError> { return true }
        if case .route(.lookupFailed, _, _, _)? = error as? CallError<UploadSessionFinishError> { return true }
        return false
    }

    // MARK: Outcomes

    private func complete(_ version: LocalVersion, _ file: FileMetadata, asConflictedCopy: Bool = false) async {
        await complete([(version, file)], asConflictedCopy: asConflictedCopy)
    }

    /// Versions now on Dropbox: one catch-up for all of them (a batch commits up to 1,000).
    /// Each is at its own path unless it went `asConflictedCopy` (told, not inferred from
    /// `path_lower`: Dropbox may fold a name unlike the mount, doc/SEMANTICS.md, "which names are the same").
    private func complete(_ done: [(LocalVersion, FileMetadata)], asConflictedCopy: Bool = false) async {
        guard !done.isEmpty else { return }
        FuseLog.trace("upload: committed " + done.map { "#\($0.0.id) as \($0.1.pathLower ?? "?") \($0.1.rev)" }.joined(separator: ", "))
        // The files' times as set here, kept for their revisions: Dropbox keeps no nanoseconds
        // (rsync compares them), misses a time set while the upload ran, and keeps its own
        // revision and time for an upload of the bytes it holds already (an O_TRUNC of an
        // empty file advances the time on a disk).
        try? store.setModified(writeBack.recordAnswers(done, atTheirPaths: !asConflictedCopy))
        for (version, file) in done {
            // Only this revision is the mount's at the path now (a conflicted copy's went
            // elsewhere: none there is).
            watcher.committedOwn(version.pathLower, rev: file.rev)
            if let lower = file.pathLower { watcher.expectOwn(lower, .revision(file.rev)) }
            if let hash = file.contentHash, !asConflictedCopy, writeBack.isNewest(version) {
                uploaded(version.pathLower, version.lineage, hash)
            }
        }
        // The store learns the new revisions before the local versions stop hiding the old
        // ones: the mount never shows the revision before its own write.
        await watcher.catchUp(after: done.map { .file($0.1) })
        // Reads of these files wait for their blocks from here on, not for Dropbox.
        let cache = writeBack.reader.cache, handedOver = done.compactMap(\.1.contentHash)
        cache.arrivals.expect(handedOver)
        defer { cache.arrivals.ended(handedOver) }
        writeBack.finished(done, atTheirPaths: !asConflictedCopy) { try? store.setModified($0) }
        var inline: [(key: String, bytes: [UInt8])] = []
        for (version, file) in done {
            if let hash = file.contentHash { version.file.offerBlocks(to: cache, contentHash: hash, inline: &inline) }
        }
        cache.storeInline(inline)
    }

    private func failed(_ version: LocalVersion, _ error: any Error) async {
        FuseLog.trace("upload: #\(version.id) \(version.pathLower) failed: \(error)")
        // A session Dropbox no longer knows: the next try sends the bytes again.
        if Self.isSessionError(error) { writeBack.forgetStaged(version) }
        var lastError = error
        // Settling a conflict may meet another (the tree changed again meanwhile: the file in
        // the way gone, a folder at the path itself): settled in turn, not left to the next
        // try, which failed an fsync waiting meanwhile with EIO.
        for _ in 0..<Self.conflictsSettledAtOnce where Self.isConflict(lastError) {
            do {
                let (file, isCopy) = Self.isFileInTheWay(lastError) ? try await saveBesideFileInTheWay(version) : try await saveConflictedCopy(version)
                return await complete(version, file, asConflictedCopy: isCopy)
            } catch {
                lastError = error
            }
        }
        writeBack.failed(version, lastError)
    }

    /// Conflicts one upload settles in a row before it waits for its next try (a tree another
    /// client keeps changing).
    static let conflictsSettledAtOnce = 5

    /// The path changed on Dropbox since the version's base revision (or a new file's name
    /// was taken): unless it already holds these very bytes, they go beside it as
    /// "name (conflicted copy YYYY-MM-DD).ext", and the path shows Dropbox's version.
    ///
    /// What Dropbox holds may be a commit of ours whose answer was lost while Dropbox was out
    /// of reach (an older version of the path, replaced since): then this version replaces
    /// it, as after any commit of ours, and goes to its path, not beside it.
    private func saveConflictedCopy(_ version: LocalVersion) async throws -> (FileMetadata, isCopy: Bool) {
        let path = version.path
        let hash = try ContentHasher.hash(file: version.file.bytesPath)
        let current = try await client.metadataIfExists(path)?.fileMetadata
        if let current, current.contentHash == hash { return (current, false) }
        if let current, let there = current.contentHash, writeBack.maybeCommitted(version).contains(there) {
            writeBack.rebase(version, onto: current.rev)
            FuseLog.error("\(path): Dropbox holds a commit of this mount whose answer was lost; the newer local version replaces it")
            return (try await uploadAtItsPath(version), false)
        }
        let file = try await uploadBeside(version, at: Node.parent(of: path) + "/" + Self.conflictedName(version.name, on: Date()))
        FuseLog.error("conflict: \(path) changed on Dropbox while it was edited here; the local version is saved as \(file.pathDisplay ?? file.name)")
        return (file, true)
    }

    /// The version's bytes committed at its own path after a refusal, expected as the
    /// mount's own commit.
    private func uploadAtItsPath(_ version: LocalVersion) async throws -> FileMetadata {
        try await watcher.changingOwn([(version.pathLower, .commit)]) {
            try await client.uploadFile(version.file.bytesPath, to: writeBack.commitInfo(version), tuning: tuning)
        }
    }

    /// The version's bytes uploaded as a new file at `path` (numbered by Dropbox if taken).
    private func uploadBeside(_ version: LocalVersion, at path: String) async throws -> FileMetadata {
        var commit = writeBack.commitInfo(version)
        commit.path = path
        commit.mode = .add
        commit.autorename = true
        return try await client.uploadFile(version.file.bytesPath, to: commit, tuning: tuning)
    }

    /// A folder of the path is a file on Dropbox now (another client replaced it, or it
    /// refused a folder made here because a file held the name): no upload can land there, so
    /// the bytes go into a folder named as a conflicted copy of that file, which the upload
    /// makes: `b/x` under a file `b` goes to `b (conflicted copy YYYY-MM-DD)/x`, numbered
    /// when a file holds that name too (a conflicted copy of `b` itself, say). If no file is
    /// in the way any more (another client removed it meanwhile), the bytes go to the path
    /// itself at once: waiting for the next try failed an fsync meanwhile with EIO.
    private func saveBesideFileInTheWay(_ version: LocalVersion) async throws -> (FileMetadata, isCopy: Bool) {
        let path = version.path
        let names = path.split(separator: "/").map(String.init)
        var target = ""
        var looking = true  // below a folder Dropbox does not have, nothing is in the way
        for name in names.dropLast() {
            var chosen = name
            if looking { (chosen, looking) = try await folderName(in: target, for: name) }
            target += "/" + chosen
        }
        target += "/" + names.last!
        if target == path { return (try await uploadAtItsPath(version), false) }
        let file = try await uploadBeside(version, at: target)
        FuseLog.error("conflict: a folder of \(path) is a file on Dropbox; the local version is saved as \(file.pathDisplay ?? file.name)")
        return (file, true)
    }

    /// `name` in `folder` if no file holds it there, else the first conflicted-copy name no
    /// file holds; and whether Dropbox has a folder of that name there.
    private func folderName(in folder: String, for name: String) async throws -> (name: String, exists: Bool) {
        for tries in 0..<100 {
            let chosen = tries == 0 ? name : Self.conflictedName(name, on: Date()) + (tries > 1 ? " (\(tries - 1))" : "")
            guard let there = try await client.metadataIfExists(folder + "/" + chosen) else { return (chosen, false) }
            if there.fileMetadata == nil { return (chosen, true) }
        }
        throw FSError.io("\(folder)/\(name): no free name beside the file in the way")
    }

    static func conflictedName(_ name: String, on date: Date) -> String {
        var time = time_t(date.timeIntervalSince1970)
        var parts = tm()
        localtime_r(&time, &parts)
        let day = String(format: "%04d-%02d-%02d", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday))
        if let dot = name.lastIndex(of: "."), dot != name.startIndex {
            return "\(name[..<dot]) (conflicted copy \(day))\(name[dot...])"
        }
        return "\(name) (conflicted copy \(day))"
    }

    /// Dropbox's `conflict/file_ancestor`: a folder of the path is a file there.
    static func isFileInTheWay(_ error: any Error) -> Bool {
        if case .route(.path(.conflict(.fileAncestor)), _, _, _)? = error as? CallError<PathWriteError> { return true }
        if case .route(.path(.conflict(.fileAncestor)), _, _, _)? = error as? CallError<UploadSessionFinishError> { return true }
        return false
    }

    static func isConflict(_ error: any Error) -> Bool {
        if case .route(.path(.conflict), _, _, _)? = error as? CallError<PathWriteError> { return true }
        if case .route(.path(.conflict), _, _, _)? = error as? CallError<UploadSessionFinishError> { return true }
        return false
    }
}
