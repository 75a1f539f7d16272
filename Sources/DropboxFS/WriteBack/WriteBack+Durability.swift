import CFuseShim
import DropboxAPI
import Foundation

/// Power loss. `close` records a file in the upload queue without waiting for its bytes to
/// reach the disk (as a local filesystem returns from `close`); they get there within
/// `flushInterval` (`syncFlushDelay` while an `fsync` waits for them), and the record then
/// says so (`flushed`). After a
/// crash or a `kill -9` the kernel still has every byte written, so the next mount uploads
/// everything queued. After a power loss or a reboot, a staging file not known to be on disk
/// may hold zeros or end short, and uploading it would replace the good copy on Dropbox: it
/// is set aside in the cache's `recovered/` folder instead, named in the log and in
/// `dropboxfs status`, never uploaded (doc/SEMANTICS.md, "Power loss"). A flushed file's
/// record keeps its content hash: after a reboot, bytes that no longer match it (the disk
/// lost or changed them) are set aside the same way. Only then is it checked: within one
/// boot the kernel's page cache holds what was written.
extension WriteBack {
    /// How long a closed file's bytes may stay in memory only (ext4 commits every 5 s).
    static let flushInterval: Duration = .seconds(5)
    /// How long `fsync` lets an upload run before it flushes the file to the disk too.
    static let syncFlushDelay: Duration = .seconds(1)
    /// Above this many files a flush is one `syncfs` of the cache's disk, not an `fdatasync`
    /// each: every one of those waits for the disk on its own (1,000 files of 4 KiB: 1,000
    /// disk flushes, seen with strace and perf in the middle of a `cp -r`).
    static let fileByFileFlushLimit = 16
    /// The content hash of no bytes, recorded for an empty file that never had a staging file.
    static let emptyContentHash = ContentHasher().finish()

    /// Flushes every sealed version whose bytes are not known to be on disk yet, at once (those
    /// a killed mount left get their content hashes, `LocalVersion.recoveredUnhashed`), then every
    /// `flushInterval` until cancelled (run by the uploader).
    func flushPeriodically() async {
        while !Task.isCancelled {
            let waiting = state.withLock { state in state.versions.values.filter { $0.phase != .editing && !$0.flushed } }
            await flush(waiting)
            try? await Task.sleep(for: Self.flushInterval)
        }
    }

    /// Makes sealed versions' staging files durable (their bytes, then the folder's entries),
    /// then records that they are, with their content hashes when `hashing` (fsync does not
    /// wait for a hash: it returns only once Dropbox has the file, and then the record is
    /// gone). The disk's wait happens on a thread of its own, not on one of Swift's few
    /// cooperative ones.
    func flush(_ versions: [LocalVersion], hashing: Bool = true) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.global(qos: .utility).async {
                self.flushNow(versions, hashing: hashing)
                done.resume()
            }
        }
    }

    private func flushNow(_ versions: [LocalVersion], hashing: Bool) {
        let sealed = state.withLock { _ in versions.filter { $0.phase != .editing && $0.phase != .finished && !$0.flushed } }
        guard !sealed.isEmpty else { return }
        let folder = open(stagingDirectory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard folder >= 0 else { return }
        defer { close(folder) }
        var done: [(version: LocalVersion, hash: String?)] = []
        if sealed.count > Self.fileByFileFlushLimit {
            // One flush of the cache's disk for all of them (a file finished and removed
            // meanwhile is dropped below, by its phase).
            guard cfuse_syncfs(folder) == 0 else { return }
            done = sealed.map { ($0, hashing ? try? ContentHasher.hash(file: $0.file.bytesPath) : nil) }
        } else {
            for version in sealed {
                let fd = open(version.file.path, O_RDONLY | O_CLOEXEC)
                guard fd >= 0 else { continue }  // finished (and removed) meanwhile
                defer { close(fd) }
                guard fdatasync(fd) == 0 else { continue }
                done.append((version, hashing ? try? ContentHasher.hash(file: version.file.path) : nil))
            }
            guard fsync(folder) == 0 else { return }
        }
        state.withLock { _ in
            let recorded = done.filter { $0.version.phase != .finished }
            for (version, hash) in recorded {
                version.flushed = true
                version.flushedHash = hash
                if version.recoveredUnhashed, let hash {
                    version.recoveredUnhashed = false
                    version.mayHaveCommitted([hash])
                }
            }
            try? queue.markFlushed(recorded.map { ($0.version.id, $0.hash) })
        }
    }

    /// fsync while Dropbox is out of reach: the versions' bytes and their queue records are
    /// made durable on the local disk (a power loss keeps them), and they go to Dropbox when
    /// it is back.
    func keepOnDisk(_ versions: [LocalVersion]) async throws {
        await flush(versions)
        let unflushed = state.withLock { _ in versions.contains { $0.phase != .finished && $0.phase != .editing && !$0.flushed } }
        if unflushed { throw FSError.io("fsync: the cache disk did not take the file") }
        try queue.syncToDisk()
    }

    /// A queued file the mount will not upload (`reason` says why): its bytes move to
    /// `recovered/` (beside the staging folder), its record leaves the queue, and the status
    /// and the log say where it went.
    func setAsideLocked(_ state: inout State, _ record: QueuedUpload, because reason: String) {
        let folder = (stagingDirectory as NSString).deletingLastPathComponent + "/recovered"
        let name = record.path.split(separator: "/").last.map(String.init) ?? "file"
        let target = folder + "/\(record.id)-\(name)"
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let kept = rename(record.staging, target) == 0
        let line = "\(record.path): not uploaded \(reason); " + (kept ? "kept in \(target)" : "its staging file is gone")
        FuseLog.error(line)
        state.setAside.append(line)
        // The status names the latest; the log keeps them all.
        if state.setAside.count > Self.setAsideShown { state.setAside.removeFirst(state.setAside.count - Self.setAsideShown) }
        try? queue.remove([record.id])
    }

    /// What was set aside (the latest `setAsideShown`), for the status.
    public var setAside: [String] { state.withLock { $0.setAside } }
    static let setAsideShown = 100
}
