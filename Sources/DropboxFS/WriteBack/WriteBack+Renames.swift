import DropboxAPI
import Foundation

/// Renames and deletes of files with local versions: they wait for commits under way there
/// (`holding`), then re-address, rebase or detach the versions, so no upload lands on a name
/// the user has since moved away from, and descriptors open on a file whose name goes keep
/// its bytes (detached versions are never uploaded). A large file whose bytes are still
/// going is not waited for: its commit waits for the rename or delete instead.
extension WriteBack {
    /// Runs `body` while nothing at or below `paths` is committed, after commits under way
    /// there have ended.
    public func holding<T>(_ paths: [String], _ body: () async throws -> T) async throws -> T {
        state.withLock { state in for path in paths { state.held[path, default: 0] += 1 } }
        defer { letGo(paths) }
        while true {
            let seen = signal.generation
            if !state.withLock({ Self.isCommitting(at: paths, $0) }) { break }
            await signal.wait(after: seen)
        }
        return try await body()
    }

    /// `holding` when no commit is under way there; nil, having run nothing, when one is.
    public func holdingWithoutWaiting<T>(_ paths: [String], _ body: () throws -> T) throws -> T? {
        let busy = state.withLock { state in
            let busy = Self.isCommitting(at: paths, state)
            if !busy { for path in paths { state.held[path, default: 0] += 1 } }
            return busy
        }
        if busy { return nil }
        defer { letGo(paths) }
        return try body()
    }

    private static func isCommitting(at paths: [String], _ state: State) -> Bool {
        if state.committingAt.isEmpty { return false }
        return paths.contains { state.committingAt.isAtOrBelow($0) }
    }

    private func letGo(_ paths: [String]) {
        state.withLock { state in
            for path in paths {
                state.held[path]! -= 1
                if state.held[path] == 0 { state.held.removeValue(forKey: path) }
            }
        }
        changed()
    }

    /// Whether a path has a local version (call within `holding`).
    public func hasVersion(_ pathLower: String) -> Bool { state.withLock { $0.current[pathLower] != nil } }

    /// unlink: drops every version at a path. Descriptors still open on them keep reading and
    /// writing their bytes (detached: never uploaded) until the last one closes.
    public func discard(_ pathLower: String) throws {
        try state.withLock { state in
            try detachAllLocked(&state, at: pathLower)
        }
        changed()
    }

    /// Dropbox made a copy at a path (`copyWholeFile`): the versions there go, as by an
    /// unlink, but the descriptors open on them (the copying one among them) go on with the
    /// copy, in a new version based on it: what they read is the copied bytes, and what they
    /// write lands on them. Left on the versions unlinked, `cat a b > c` (one copy_file_range
    /// for `a` made by Dropbox, then b's bytes written through the same descriptor) lost b.
    /// The new version is uploaded only if written.
    func replaceByCopy(at pathLower: String, path: String, copied: Node, modified: timespec) throws {
        try state.withLock { state in
            let onPath = Self.versionsLocked(state, at: pathLower) + openFiles.servingVersions.filter { !$0.detached && $0.pathLower == pathLower }
            let held = Set(onPath.map(ObjectIdentifier.init))
            try detachAllLocked(&state, at: pathLower)
            state.lastDetached = nil  // the name stays, showing the copy
            let version = try startVersionLocked(&state, path: path, base: copied, truncate: false, modified: modified)
            version.writers = openFiles.move(to: version) { held.contains(ObjectIdentifier($0)) }
        }
        changed()
    }

    /// Content hashes our own commits at a path may have left on Dropbox unheard of
    /// (`LocalVersion.maybeCommitted`): those of its versions whose commit's answer was lost,
    /// and the bytes of versions a previous mount left (it may have committed them before it
    /// stopped). A removal or rename of the path deletes such a file there too
    /// (`QueuedDelete.ifContent`).
    func ownCommitsUnheardOf(at pathLower: String) -> [String] {
        hashRecovered(at: pathLower)
        return state.withLock { state in
            var hashes: [String] = []
            for version in Self.versionsLocked(state, at: pathLower) where !version.detached {
                hashes += version.maybeCommitted.filter { !hashes.contains($0) }
            }
            return hashes
        }
    }

    /// Hashes the bytes of versions at a path that a previous mount left unhashed, so that
    /// their hashes are among the path's own commits unheard of before anything replaces,
    /// renames or removes them (the flush the uploader starts with hashes the rest). On the
    /// caller's thread, whatever their size: once per recovered file, at most.
    func hashRecovered(at pathLower: String) {
        let unhashed = state.withLock { state in Self.versionsLocked(state, at: pathLower).filter(\.recoveredUnhashed) }
        guard !unhashed.isEmpty else { return }
        let hashed = unhashed.map { ($0, try? ContentHasher.hash(file: $0.file.bytesPath)) }
        state.withLock { _ in
            for case let (version, hash?) in hashed where version.recoveredUnhashed {
                version.recoveredUnhashed = false
                version.mayHaveCommitted([hash])
            }
        }
    }

    /// A rename brought the versions at `pathLower` over a file our own commits may be at
    /// unheard of (`ownCommitsUnheardOf` of the target): finding one of those there is
    /// finding our own commit, which the upload replaces, not another client's change.
    func inheritOwnCommits(_ hashes: [String], at pathLower: String) {
        guard !hashes.isEmpty else { return }
        state.withLock { state in
            let versions = Self.versionsLocked(state, at: pathLower).filter { !$0.detached }
            for version in versions { version.mayHaveCommitted(hashes) }
            // Kept across a kill too.
            try? queue.save(versions.filter { $0.isInQueue }.map(\.record))
        }
    }

    /// Every version at a path leaves the queue and the view; those that descriptors hold
    /// (also ones already uploaded) live on detached.
    /// The newest is kept as `lastDetached`, the file the kernel's inode of the name showed.
    func detachAllLocked(_ state: inout State, at pathLower: String) throws {
        let held = openFiles.servingVersions.filter { !$0.detached && $0.pathLower == pathLower }
        let newest = state.current[pathLower] ?? held.max(by: { $0.id < $1.id })
        if let newest { catchUpHandlesLocked(&state, to: newest) }
        state.lastDetached = newest.map { (pathLower, $0) }
        let doomed = Self.versionsLocked(state, at: pathLower)
        // Only sealed versions are in the queue. A queue that cannot be written (a full cache
        // disk) must not keep the file: its row, left behind, is dropped at the next mount
        // when the staging file is found gone (`unqueueLocked`); the space is needed now.
        unqueueLocked(doomed.filter { $0.isInQueue })
        for version in doomed + openFiles.servingVersions.filter({ $0.pathLower == pathLower }) {
            if version.phase == .uploading { version.abandonSending?() }
            version.detached = true
            if version.phase != .finished { finishLocked(&state, version) }
        }
    }

    /// The version the path showed when its versions were last detached (by an unlink or a
    /// rename over it), taken once: the caller keeps it for the inode the kernel still holds.
    func takeDetached(at pathLower: String) -> LocalVersion? {
        state.withLock { state in
            defer { state.lastDetached = nil }
            return state.lastDetached.flatMap { $0.pathLower == pathLower ? $0.version : nil }
        }
    }

    /// Serves a handle from a detached version the kernel's inode still shows (`takeDetached`):
    /// an open of that inode looked up before its name went. Never uploaded.
    func attach(handle: UInt64, detached version: LocalVersion, writable: Bool, truncate: Bool) throws -> Int64 {
        try state.withLock { try serveLocked(&$0, handle, from: version, writable: writable, truncate: truncate) }
    }

    /// Serves a writer opening a Dropbox file whose name went (looked up before an unlink or a
    /// rename over it) from a version of its own, detached from the start (never uploaded),
    /// starting from that revision unless `truncate` empties it.
    func attachDetached(handle: UInt64, base: Node, truncate: Bool) throws -> Int64 {
        try state.withLock { state in
            let modified = truncate ? LocalVersion.now() : timespec(tv_sec: Int(base.modified), tv_nsec: Int(base.modifiedNanos))
            let version = try makeVersionLocked(&state, path: Node.parent(of: base.pathLower) + "/" + base.name, base: base,
                                                truncate: truncate, modified: modified)
            version.detached = true
            version.writers = 1
            openFiles.serve(handle, from: version, writable: true)
            return version.lineage
        }
    }

    /// rename: versions at or below `from` go to `to`, also those only open descriptors still
    /// hold (uploaded already): a later write through them belongs at the new name. Versions
    /// already at `to` are replaced by the rename (detached, like an unlink).
    /// `rebase` is what the moved file's versions now replace: `.target(rev)` (a file only
    /// here replaces whatever is at the new name) or `.moved(from: old, to: new)` (Dropbox
    /// moved revision `old`, now `new`: only versions based on `old` follow; one based on
    /// anything else meets a change made elsewhere, and its upload makes a conflicted copy).
    public enum Rebase: Sendable { case none, target(String?), moved(from: String?, to: String?) }

    public func move(from: String, to: String, toName: String, rebase: Rebase) throws {
        try state.withLock { state in
            if from != to { try detachAllLocked(&state, at: to) }
            var moving: [ObjectIdentifier: LocalVersion] = [:]
            for version in Array(state.versions.values) + openFiles.servingVersions where !version.detached && version.isAt(orUnder: from) {
                moving[ObjectIdentifier(version)] = version
            }
            var moved: [QueuedUpload] = []
            for version in moving.values {
                let oldKey = version.pathLower
                let wasCurrent = state.current[oldKey] === version
                if wasCurrent { state.current.removeValue(forKey: oldKey) }
                if version.pathLower == from {
                    version.path = Node.parent(of: to) + "/" + toName
                    switch rebase {
                    case .none: break
                    case .target(let rev):
                        version.baseRev = rev
                        // Commits of ours the old name may hold unheard of stay there: the
                        // rename queued their removal (`ownCommitsUnheardOf`). Found at the
                        // new name, those bytes are someone else's.
                        version.maybeCommitted = []
                    case .moved(let old, let new):
                        if version.baseRev == old { version.baseRev = new }
                        if version.committedRev != nil && version.committedRev == old { version.committedRev = new }
                        if let old, version.ancestry.contains(old) { version.descends(from: new) }
                    }
                } else {
                    version.path = to + version.path.dropFirst(from.count)
                }
                version.settledAt = .now
                if state.versions[version.id] === version {  // not one only a descriptor holds
                    Self.unindexLocked(&state, version, at: oldKey)
                    state.atPath[version.pathLower, default: [:]][version.id] = version
                }
                if wasCurrent { state.current[version.pathLower] = version }
                if version.phase == .queued { moved.append(version.record) }
            }
            try queue.save(moved)
        }
        changed()
    }

    /// A queued rename reached Dropbox and the file got a new revision: versions based on
    /// the old one (wherever they are now: they went with the rename when it was made) are
    /// based on the new one, as `move(rebase: .moved)` does for a rename made at once.
    public func rebase(from old: String, to new: String) {
        let saved: Void? = try? state.withLock { state in
            var rebased: [QueuedUpload] = []
            for version in Array(state.versions.values) + openFiles.servingVersions where !version.detached {
                var changed = false
                if version.baseRev == old { version.baseRev = new; changed = true }
                if version.committedRev == old { version.committedRev = new; changed = true }
                if version.ancestry.contains(old) { version.descends(from: new); changed = true }
                if changed && version.phase == .queued { rebased.append(version.record) }
            }
            try queue.save(rebased)
        }
        if saved == nil { FuseLog.error("a renamed file's new revision \(new) not recorded in the upload queue; its upload may go beside as a conflicted copy") }
        changed()
    }
}
