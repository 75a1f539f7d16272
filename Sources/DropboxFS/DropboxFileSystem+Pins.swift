import DropboxAPI
import Foundation

/// Pinned files and folders (`dropboxfs pin`, the `user.dropbox.pinned` attribute): fully
/// downloaded, never evicted (`BlockCache+Pins`), and kept current: a pinned file changed
/// on Dropbox is downloaded again without waiting for a read, so it can be read offline.
///
/// One loop (`keepPinnedFilesDownloaded`) walks the pins through the metadata store (listing
/// folders not listed yet), records the files' content hashes as pinned, and fetches the
/// blocks missing. It runs when a pin is added, when a change under a pin arrives or is
/// uploaded from here, when Dropbox is back after an outage, and every `pinRecheck`.
extension DropboxFileSystem {
    /// What the pins cover, as last walked (for `dropboxfs status`).
    public struct PinProgress: Sendable {
        public var files = 0
        public var bytes: Int64 = 0
        /// Bytes not downloaded yet at the end of the last walk (0: all there).
        public var missing: Int64 = 0
    }

    /// The walk also runs this often: the mount's own renames and copies into a pinned
    /// folder are not announced as changes (only other clients' are).
    static let pinRecheck: Duration = .seconds(30)
    static let pinRetry = RetryPolicy(baseDelay: 1, maxDelay: 60)
    /// Blocks of one file fetched per request group: bounded parallelism for a large file.
    static let pinChunk = 4 * Reader.blockSize

    /// `setxattr user.dropbox.pinned` (`1` pins, `0` unpins) and `removexattr` (unpins).
    /// Answered at once; the download follows in the background.
    public func setPinned(_ inode: UInt64, _ pinned: Bool) throws {
        let node = try node(inode)
        if pinned {
            try reader.cache.addPin(node.pathLower)
        } else if try !reader.cache.removePin(node.pathLower) {
            throw FSError.noAttribute  // not pinned itself (maybe through a folder above)
        }
        pinSignal.notify()
    }

    /// Called with every change applied to the store: pinned files changed elsewhere are
    /// downloaded again.
    public func pinnedChanged(_ changes: [StoreChange], everything: Bool) {
        if everything || changes.contains(where: { reader.cache.isPinned($0.pathLower) }) { pinSignal.notify() }
    }

    public var pinProgress: PinProgress { pinState.withLock { $0 } }

    /// Keeps pinned files downloaded until cancelled.
    public func keepPinnedFilesDownloaded() async {
        var failures = 0
        while !Task.isCancelled {
            let seen = pinSignal.generation
            do {
                try await downloadPinned()
                failures = 0
                await pinSignal.wait(after: seen, timeout: Self.pinRecheck)
            } catch {
                if Task.isCancelled { return }
                failures += 1
                if ErrnoMapping.fsError(error) != .networkUnreachable {
                    FuseLog.error("pinned files not all downloaded yet (\(error)); trying again")
                }
                await pinSignal.wait(after: seen, timeout: Self.pinRetry.wait(attempt: failures))
            }
        }
    }

    private func downloadPinned() async throws {
        var files: [Node] = []
        for pin in reader.cache.pins { try await collectFiles(under: pin, into: &files) }
        try reader.cache.setPinnedHashes(Set(files.compactMap(\.contentHash)))
        let missing = files.map { (file: $0, bytes: missingBytes(of: $0)) }.filter { $0.bytes > 0 }
        pinState.withLock {
            $0 = PinProgress(files: files.count, bytes: files.reduce(0) { $0 + $1.size }, missing: missing.reduce(0) { $0 + $1.bytes })
        }
        for (file, bytes) in missing {
            var offset: Int64 = 0
            while offset < file.size {
                try await reader.ensureCached(file, offset: offset, size: Int(Self.pinChunk), stream: nil)
                offset += Self.pinChunk
            }
            pinState.withLock { $0.missing = max(0, $0.missing - bytes) }
        }
    }

    /// The files at or below a pinned path that Dropbox holds (with a content hash), listing
    /// folders the store has not listed. Files written here and not uploaded yet are local
    /// already; they are fetched once uploaded, if the upload replaced their bytes' home.
    private func collectFiles(under pin: String, into files: inout [Node]) async throws {
        if !pin.isEmpty {  // "" is the root: everything
            guard let top = try remoteNode(pin, remember: false) else { return }  // gone: the pin waits for the name to come back
            guard top.isFolder else { files.append(top); return }
        }
        // Walked where Dropbox has it now (a rename of it may be pending).
        guard let stored = moves.isEmpty ? pin : try storeFolder(pin) else { return }
        var folders = [stored]
        while let folder = folders.popLast() {
            try await ensureStoreListed(folder)
            for child in try handoffs.settled({ deletes.visible(try store.children(folder, complete: true)) }) {
                if child.isFolder { folders.append(child.pathLower) } else if child.contentHash != nil { files.append(child) }
            }
        }
    }

    private func missingBytes(of file: Node) -> Int64 {
        guard let hash = file.contentHash, file.size > 0 else { return 0 }
        var missing: Int64 = 0
        for index in 0...((file.size - 1) / Reader.blockSize) where !reader.cache.contains(BlockCache.key(contentHash: hash, index: index)) {
            missing += min(Reader.blockSize, file.size - index * Reader.blockSize)
        }
        return missing
    }
}
