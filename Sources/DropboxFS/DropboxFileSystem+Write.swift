import DropboxAPI
import Foundation

/// File content changes: create, write, truncate, times, flush, fsync and server-side copies.
/// Bytes go to the write-back's local version of the file (see `WriteBack`); nothing here
/// waits for Dropbox except `fsync` (and a copy, which Dropbox makes itself).
extension DropboxFileSystem {
    /// create(2) / open with O_CREAT of a new name: an empty local version, open for writing.
    /// `mode`: what open(2) asked for, the process's umask applied (nil: the default);
    /// `creator`: who asked (`FileModes.created`; nil: the mount's owner).
    public func create(parent: UInt64, name: String, exclusive: Bool, mode: UInt32? = nil,
                       creator: Caller? = nil) async throws -> (inode: UInt64, node: Node, handle: UInt64) {
        if options.readOnly { throw FSError.readOnly }
        try refuseChanges(in: parent)
        return try await startingAgain {
            let folder = try folderInPlace(parent)
            try await ensureListed(folder.pathLower)
            return try pathChanges.withLock {
                try requireUnmoved([(parent, folder.pathLower)])
                return try create(in: folder, parent: parent, name: name, exclusive: exclusive, mode: mode, creator: creator)
            }
        }
    }

    /// `create` when the folder is listed already (nothing to ask Dropbox); nil otherwise.
    public func createWithoutWaiting(parent: UInt64, name: String, exclusive: Bool, mode: UInt32? = nil,
                                     creator: Caller? = nil) throws -> (inode: UInt64, node: Node, handle: UInt64)? {
        if options.readOnly { throw FSError.readOnly }
        try refuseChanges(in: parent)
        return try pathChanges.withLock {
            let folder = try node(parent)
            guard folder.isFolder else { throw FSError.notDirectory }
            guard try isListed(folder.pathLower) else { return nil }
            return try create(in: folder, parent: parent, name: name, exclusive: exclusive, mode: mode, creator: creator)
        }
    }

    private func create(in folder: Node, parent: UInt64, name: String, exclusive: Bool, mode: UInt32?,
                        creator: Caller?) throws -> (inode: UInt64, node: Node, handle: UInt64) {
        try Self.checkName(name)
        if let existing = try collidingEntry(in: folder.pathLower, named: name) {
            if exclusive || !ExactKey.same(existing.name, name) { throw refusal(of: name, in: folder.pathLower, takenFor: existing, by: "create") }
            if existing.isFolder { throw FSError.isDirectory }
            let inode = inodes.inode(for: existing.pathLower)
            let (handle, _, _) = try open(inode, writable: true, truncate: true)
            return (inode, try node(inode), handle)
        }
        let pathLower = Node.child(folder.pathLower, name)
        let inode = inodes.inode(forNew: pathLower)
        let handle = openFiles.open(inode: inode, node: Node(pathLower: pathLower, name: name, isFolder: false))
        do {
            let lineage = try writeBack.attach(handle: handle, path: folder.pathLower + "/" + name, base: { nil }, writable: true, truncate: true)
            if let lineage { _ = openedLocal(inode, lineage: lineage, truncate: true) }
        } catch {
            _ = openFiles.remove(handle)
            throw error
        }
        modes.created(pathLower, isFolder: false, requested: mode, by: creator, in: (folder.pathLower, parent))
        changeTimes.entriesChanged(parent)
        return (inode, try node(inode), handle)
    }

    /// mknod(2) of a regular file: created and closed at once (an empty file to upload).
    public func makeFile(parent: UInt64, name: String, mode: UInt32? = nil, creator: Caller? = nil) async throws -> (UInt64, Node) {
        let (inode, node, handle) = try await create(parent: parent, name: name, exclusive: true, mode: mode, creator: creator)
        try await release(handle: handle)
        return (inode, node)
    }

    /// Writes at once when the bytes can go straight to the local version; nil means the
    /// write needs Dropbox first (call `write`).
    public func tryWrite(handle: UInt64, _ bytes: UnsafeRawBufferPointer, at offset: Int64) throws -> Int? {
        try writeBack.tryWrite(handle: try localHandle(handle), bytes, at: offset)
    }

    public func write(handle: UInt64, _ bytes: [UInt8], at offset: Int64) async throws -> Int {
        try await writeBack.write(handle: try localHandle(handle), bytes, at: offset)
    }

    /// fallocate(2). Dropbox keeps no preallocation, so what the call promises is kept in
    /// the bytes: mode 0 (`fallocate -l`) grows the file to the range's end, zeros fill a
    /// punched or zeroed range (`FALLOC_FL_PUNCH_HOLE`, `FALLOC_FL_ZERO_RANGE`), and
    /// `FALLOC_FL_KEEP_SIZE` alone changes no byte. Each advances mtime, as on a local disk
    /// (the file is uploaded again with it at close). The kernel refuses the other modes
    /// (collapse, insert) before they reach a FUSE filesystem.
    public func allocate(_ inode: UInt64, handle: UInt64, mode: Int32, offset: Int64, length: Int64) async throws {
        if options.readOnly { throw FSError.readOnly }
        guard offset >= 0, length > 0 else { throw FSError.invalidArgument }
        let keepSize = mode & Self.fallocKeepSize != 0
        let zeroing = mode & (Self.fallocPunchHole | Self.fallocZeroRange) != 0
        guard mode & ~(Self.fallocKeepSize | Self.fallocPunchHole | Self.fallocZeroRange) == 0 else { throw FSError.notSupported }
        let (end, overflow) = offset.addingReportingOverflow(length)
        if overflow { throw FSError.fileTooLarge }
        let size = try node(inode).size
        if zeroing {
            // Only bytes the file has are written: growing it (below) reads as zeros already.
            let zeroedEnd = min(end, size)
            var at = offset
            let zeros = [UInt8](repeating: 0, count: Self.zeroChunk)
            while at < zeroedEnd {
                let count = Int(min(Int64(Self.zeroChunk), zeroedEnd - at))
                at += Int64(try await write(handle: handle, count == zeros.count ? zeros : Array(zeros.prefix(count)), at: at))
            }
        }
        if !keepSize && end > size {
            _ = try await setAttributes(inode, handle: handle, size: end, modified: nil)
        }
        // Every fallocate advances mtime, as on ext4, also one that changes no byte.
        try writeBack.touch(handle: try localHandle(handle))
    }

    static let fallocKeepSize: Int32 = 0x01
    static let fallocPunchHole: Int32 = 0x02
    static let fallocZeroRange: Int32 = 0x10
    /// Zeros of a punched range go down in writes of this size (memory stays bounded).
    static let zeroChunk = 1 << 20

    /// setattr: size truncates or extends (through the handle, or as truncate(2) would);
    /// a modification time goes with the next upload as `client_modified`; a mode and an
    /// owner or group (`uid`, `gid`: a chown) are kept here (`FileModes`); an access time in
    /// `changeTimes` (Dropbox has no such things; doc/SEMANTICS.md).
    /// A time set on a file whose content is already on Dropbox is kept in the store for
    /// that revision (Dropbox changes `client_modified` only with new content): this mount
    /// shows it across remounts; other clients see the upload's time (doc/SEMANTICS.md).
    public func setAttributes(_ inode: UInt64, handle: UInt64?, size: Int64?, modified: timespec?, mode: UInt32? = nil,
                              accessed: timespec? = nil, uid: UInt32? = nil, gid: UInt32? = nil) async throws -> Node {
        try refuseInHistory(inode)
        guard let size else {
            return try setAttributesWithoutWaiting(inode, modified: modified, mode: mode, accessed: accessed, uid: uid, gid: gid)
        }
        if options.readOnly { throw FSError.readOnly }
        // The truncation goes through a writer's handle: the descriptor's (ftruncate), or for
        // truncate(2) of the path a short-lived one, released before the time and mode are set.
        var pathWriter: UInt64?
        do {
            let writer: UInt64 = try pathChanges.withLock {
                let current = try node(inode)
                if current.isFolder { throw FSError.isDirectory }
                if let handle, openFiles[handle]?.local == true { return handle }
                // A detached file (its name is gone) changes only through its open descriptor.
                guard inodes.path(of: inode) != nil else { throw FSError.notFound }
                let writer = openFiles.open(inode: inode, node: current)
                pathWriter = writer
                try writeBack.attachForTruncate(path: Node.parent(of: current.pathLower) + "/" + current.name,
                                                base: { try remoteNode(current.pathLower).flatMap { $0.isFolder ? nil : $0 } }, to: size, through: writer)
                return writer
            }
            // The part kept comes first: the call fails, changing nothing, if it cannot (Dropbox
            // out of reach). Truncated first, the file stayed so in the view while the call (or,
            // for ftruncate, the `close`) said ENETUNREACH, and went to Dropbox so later.
            if size != 0 { try await writeBack.fillBase(handle: writer, below: size) }
            // A path's truncation to 0 was done as its writer attached.
            if pathWriter == nil || size != 0 {
                try pathChanges.withLock { try writeBack.truncate(handle: writer, to: size) }
            }
        } catch {
            if let pathWriter { _ = try? await writeBack.release(handle: pathWriter) }
            throw error
        }
        if let pathWriter { _ = try await writeBack.release(handle: pathWriter) }
        return try setAttributesWithoutWaiting(inode, modified: modified, mode: mode, accessed: accessed, uid: uid, gid: gid)
    }

    /// setattr without a size (times, mode, owner): nothing to wait for, so answered on the
    /// FUSE thread (`tar x` sets every file's time and mode after writing it).
    /// `accessed`: an access time set (`touch -a`, `utimensat`), kept in `changeTimes` only.
    /// `uid`, `gid`: a chown's (nil: unchanged), kept here (`FileModes`).
    public func setAttributesWithoutWaiting(_ inode: UInt64, modified: timespec?, mode: UInt32? = nil,
                                            accessed: timespec? = nil, uid: UInt32? = nil, gid: UInt32? = nil) throws -> Node {
        try refuseInHistory(inode)
        if (modified != nil || mode != nil || accessed != nil || uid != nil || gid != nil) && options.readOnly { throw FSError.readOnly }
        try pathChanges.withLock {
            try setAttributesLocked(inode, current: try node(inode), attached: inodes.path(of: inode) != nil, modified: modified, mode: mode,
                                    uid: uid, gid: gid)
            if let accessed { changeTimes.setAccessed(inode, to: accessed) }
        }
        return try node(inode)
    }

    /// A time, a mode and an owner set on the file `current` at the inode's path (`pathChanges` held).
    private func setAttributesLocked(_ inode: UInt64, current: Node, attached: Bool, modified: timespec?, mode: UInt32?,
                                     uid: UInt32?, gid: UInt32?) throws {
        try setModified(current, inode: inode, attached: attached, to: modified)
        try setMode(current, inode: inode, attached: attached, to: mode)
        try setOwner(current, inode: inode, attached: attached, uid: uid, gid: gid)
        statusChanged(current, inode: inode, modified: modified, mode: mode, owner: uid != nil || gid != nil)
    }

    /// A time, a mode or an owner set: the status changed now (a folder's time is kept here,
    /// with it).
    private func statusChanged(_ current: Node, inode: UInt64, modified: timespec?, mode: UInt32?, owner: Bool) {
        if current.isFolder, let modified {
            changeTimes.setFolderModified(inode, to: modified)
        } else if modified != nil || mode != nil || owner {
            changeTimes.statusChanged(inode)
        }
    }

    /// A detached file's (unlinked, still open) is kept by inode: its path may name another
    /// file by now.
    private func setMode(_ current: Node, inode: UInt64, attached: Bool, to mode: UInt32?) throws {
        guard let mode else { return }
        if attached {
            try modes.set(current.pathLower, isFolder: current.isFolder, to: mode)
        } else {
            modes.setDetached(inode, isFolder: current.isFolder, to: mode)
        }
    }

    /// A chown, kept as a mode is (`setMode`).
    private func setOwner(_ current: Node, inode: UInt64, attached: Bool, uid: UInt32?, gid: UInt32?) throws {
        guard uid != nil || gid != nil else { return }
        if attached {
            try modes.setOwner(current.pathLower, isFolder: current.isFolder, uid: uid, gid: gid)
        } else {
            modes.setDetachedOwner(inode, isFolder: current.isFolder, uid: uid, gid: gid)
        }
    }

    private func setModified(_ current: Node, inode: UInt64, attached: Bool, to modified: timespec?) throws {
        guard let modified, !current.isFolder, attached else { return }
        if try !writeBack.setModified(current.pathLower, to: modified), let rev = try remoteNode(current.pathLower)?.rev {
            try store.setModified(rev: rev, to: modified)
            // Descriptors open on it keep their own copy of the file's node (or of its done
            // local version): fstat of them, after an unlink too, shows the new time.
            openFiles.setModified(of: inode, to: modified)
            writeBack.setModified(servingHandles: openFiles.handles(of: inode).map(\.handle), to: modified)
        }
    }

    /// close(2) of a descriptor: a written file is sealed into the upload queue.
    public func flush(handle: UInt64) async throws {
        try await writeBack.flush(handle: handle)  // nothing to do unless it writes
    }

    /// `flush` when it needs nothing from Dropbox; false, having done nothing, when it does.
    public func flushWithoutWaiting(handle: UInt64) throws -> Bool {
        try writeBack.flushWithoutWaiting(handle: handle)
    }

    /// fsync: returns once the file's content is on Dropbox, or, while Dropbox is out of
    /// reach, once it is durable on the local disk.
    public func sync(_ inode: UInt64, handle: UInt64?) async throws {
        guard let path = inodes.path(of: inode) else { return }
        // A rename of the file (or of a folder above) still queued goes first: the file is
        // on Dropbox at the name the user sees once fsync returns.
        if moves.touches([path]) { try await sendNamespaceOrKeepOnDisk(touching: path) }
        try await writeBack.sync(handle: handle, pathLower: path)
    }

    /// Sends the namespace changes at, above or below `path`; offline, makes sure they are
    /// on the local disk instead (as `sync` makes the file's bytes).
    private func sendNamespaceOrKeepOnDisk(touching path: String) async throws {
        do {
            try await namespace.send(touching: [path])
        } catch where ErrnoMapping.fsError(error) == .networkUnreachable && writeBack.isOffline() {
            try writeBack.queue.syncToDisk()  // the queued mkdirs, removals and renames
        }
    }

    /// fsync of a folder: returns once every closed file at or below it is on Dropbox (its
    /// entries there, as a disk's fsync of a folder makes its entries durable), and every
    /// folder made or removed there.
    /// Offline, it returns once they are durable on the local disk (as `sync` does).
    public func syncFolder(_ inode: UInt64) async throws {
        guard let path = inodes.path(of: inode) else { return }
        try await sendNamespaceOrKeepOnDisk(touching: path)
        try await writeBack.sync(folder: path)
    }

    /// copy_file_range of a whole file of more than one block (4 MiB) that Dropbox already
    /// holds into a file just created or truncated: Dropbox copies it (`copy_v2`), no byte
    /// travels. A smaller file is copied here, as any file written here, and goes up in the
    /// next batch: a copy by Dropbox is a round trip the caller waits for (with the change
    /// feed's catch-up after it), and `cp -r` of 300 small files took 2.8 s that way against
    /// 0.02 s on local disk, before any network delay. Anything else is
    /// `notSupported`, and the kernel copies through read and write instead: a copy while
    /// Dropbox is out of reach, into a file unlinked while open, or one Dropbox refused (a
    /// local disk's cp does not fail where the bytes can be read). The copy has the time it
    /// was made, as a disk's copy would (Dropbox's keeps the original's `client_modified`:
    /// `make` then took a target `cp` had just made for older than its source), kept for its
    /// revision as a time set here is.
    public func copyWholeFile(from sourceHandle: UInt64, offset inOffset: Int64, to targetHandle: UInt64, offset outOffset: Int64,
                              length: Int64) async throws -> Int64 {
        guard let source = openFiles[sourceHandle], let target = openFiles[targetHandle],
              !source.local, inOffset == 0, outOffset == 0, source.node.rev != nil,
              length >= source.node.size, source.node.size > Reader.blockSize, source.node.size < Int64(UInt32.max),
              let targetVersion = target.version, targetVersion.file.size == 0, targetVersion.pathLower != source.node.pathLower,
              try remoteNode(source.node.pathLower)?.rev == source.node.rev,
              !writeBack.hasVersion(source.node.pathLower),  // written here since it was opened: its reads follow those bytes
              !writeBack.isOffline() else {
            throw FSError.notSupported
        }
        let targetLower = targetVersion.pathLower
        let madeAt = LocalVersion.now()
        do {
            try await namespace.send(touching: [targetLower, source.node.pathLower])
        } catch where ErrnoMapping.fsError(error) == .networkUnreachable {
            throw FSError.notSupported  // went out of reach just now: nothing made yet
        }
        return try await writeBack.holding([targetLower]) {
            // A target unlinked, renamed, or renamed over while open: no copy to its name (it
            // made an unlinked file's name come back). Holding the path, none comes after this.
            guard targetVersion.pathLower == targetLower, writeBack.isNewest(targetVersion) else { throw FSError.notSupported }
            let targetPath = targetVersion.path
            let copied: Metadata
            do {
                // Dropbox's copy cannot replace: an older file at the target goes first.
                if let old = try remoteNode(targetLower), !old.isFolder { try await tree.delete(old.pathLower) }
                copied = try await client.settle(check: { () -> Metadata? in
                    guard let there = try await self.client.metadataIfExists(targetPath)?.fileMetadata,
                          there.contentHash == source.node.contentHash else { return nil }
                    return .file(there)
                }) {
                    try await self.client.rpc(Routes.copy, RelocationArgument(from: source.node.pathLower, to: targetPath)).metadata
                }
            } catch where !(error is CancellationError) {
                // The target's version is as it was: the kernel writes the bytes into it.
                FuseLog.error("\(targetPath): Dropbox did not copy \(source.node.pathLower) there (\(error)); copying its bytes")
                throw FSError.notSupported
            }
            guard case .file(let file) = copied, let copiedNode = Node(copied) else { throw FSError.io("copy_v2 returned no file") }
            if let lower = file.pathLower { watcher.expectOwn(lower, .revision(file.rev)) }
            try store.setModified(rev: file.rev, to: madeAt)
            await watcher.catchUp(after: [copied])
            // The copy replaces the target's local versions; its descriptors go on with it.
            try writeBack.replaceByCopy(at: targetLower, path: targetPath, copied: copiedNode, modified: madeAt)
            return file.size
        }
    }

    // MARK: Handles

    private func localHandle(_ handle: UInt64) throws -> UInt64 {
        guard let file = openFiles[handle] else { throw FSError.io("unknown file handle") }
        guard file.writable else { throw FSError.accessDenied }  // opened read-only
        return handle
    }
}
