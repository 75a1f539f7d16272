import DropboxAPI
import Foundation

/// Modes and owners kept here (`FileModes`) follow what other clients do to the files.
extension DropboxFileSystem {
    /// Clears a file's set-user-ID and set-group-ID bits, which the kernel leaves to the mount
    /// (`cfuse_take_setid_clearing`): on a write or truncate by a caller without CAP_FSETID,
    /// on a chown and on an open with O_TRUNC. As the VFS does, set-group-ID goes only with
    /// group execute or when the caller is not in the file's group (`callerInGroup`, asked
    /// only then). Returns whether the mode changed.
    public func clearSetIDBits(_ inode: UInt64, callerInGroup: (_ group: UInt32) -> Bool) throws -> Bool {
        guard modes.keepsSetIDBits else { return false }  // asked at every write by a user other than root
        let node = try node(inode)
        if node.isFolder { return false }
        // At the path the inode has now, under `pathChanges`, as `attributes` reads it: a rename
        // of a folder above since `node` was read moves the modes, and the old path's would be
        // the default's (no set-ID bit to clear).
        let shown = pathChanges.withLock {
            modes.shown(of: inodes.path(of: inode) ?? node.pathLower, inode: inode, attached: showsEntry(inode), isFolder: false)
        }
        let mode = shown.mode
        var cleared = mode & ~UInt32(S_ISUID)
        if mode & UInt32(S_ISGID) != 0 && (mode & UInt32(S_IXGRP) != 0 || !callerInGroup(shown.gid)) { cleared &= ~UInt32(S_ISGID) }
        if cleared == mode { return false }
        _ = try setAttributesWithoutWaiting(inode, modified: nil, mode: cleared)
        return true
    }

    /// `access(2)` of `mask` (R_OK, W_OK, X_OK bits; none: existence) by a caller, judged by
    /// the shown mode as the kernel's own check does. Asked only where the mount runs without
    /// `default_permissions` (`MountOptions`: root's mount that only root can reach); the kernel
    /// sends `access` and `chdir` here, and answers `open`, `exec` and the rest itself. Root
    /// may read and write anything, and execute what has an execute bit or is a folder.
    public func checkAccess(_ inode: UInt64, mask: Int32, uid: UInt32, inGroup: (_ group: UInt32) -> Bool) throws {
        let node = try node(inode)
        let wanted = UInt32(mask & (R_OK | W_OK | X_OK))
        guard wanted != 0 else { return }
        let shown = attributes(inode, node)
        let mode = shown.st_mode
        if uid == 0 {
            if wanted & UInt32(X_OK) == 0 || node.isFolder || mode & (S_IXUSR | S_IXGRP | S_IXOTH) != 0 { return }
            throw FSError.accessDenied
        }
        // The owner's bits for the owner, else the group's for a member, else the others'.
        let shift: UInt32 = uid == shown.st_uid ? 6 : (inGroup(shown.st_gid) ? 3 : 0)
        if (mode >> shift) & wanted != wanted { throw FSError.accessDenied }
    }

    /// Another client's changes, applied to the store (`page`: every entry they came with;
    /// `last`: the change feed is read to its end). A mode belongs to the file, which Dropbox
    /// names by id: a file or folder moved elsewhere takes its mode to where it went (the
    /// feed brings the removal and the arrival, an arrival the store may not keep: its
    /// folder is not listed); one removed, or replaced by another file (a new id), loses it.
    /// A file written here and not yet uploaded keeps it: the name shows that file.
    /// The removal and the arrival may come in different pages, either first (a page ending
    /// between them lost the mode: the concurrent differential suite, three entries a page).
    /// Each page's arrivals are kept for the next one; a folder's arrival further back is
    /// found in the store by its id (a folder's move is one change whose entries, sorted by
    /// path, may span many pages; its removal carries the modes below it). A file's is not:
    /// moved alone, its two entries come together (the feed lists a change's entries
    /// together); the store indexes folders' ids only, and an index of every id made the
    /// first listing of a folder of 100,000 files 28 % slower and a first `find` over 100,000
    /// entries 55 % (measured 6 December, `Scripts/bench-large-tree --entries 100000`).
    /// A removal whose arrival has not come takes the modes away at once, and gives them back
    /// where the entry arrives, in any page before the feed's end: while the removal waited
    /// with the modes left at the name, a file made here under that name between the pages
    /// lost its own (`open(e, O_CREAT|O_EXCL, 0600)` showed 644: the same suite).
    func modesFollow(_ changes: [StoreChange], page: [Metadata], last: Bool) {
        let keeps = modes.keepsAny
        // A removal's `id`: the entry whose arrival may come in a later page (nil: none can).
        typealias Work = (moves: [(from: String, to: String, isFolder: Bool)], restores: [(ModesOnTheWay.Away, to: String)],
                          removals: [(path: String, isFolder: Bool, id: String?)])
        let work = modesOnTheWay.withLock { state -> Work? in
            let previous = state
            state = ModesOnTheWay()
            guard keeps || !previous.away.isEmpty else { return nil }
            // Entries that left with a mode kept: most pages have none.
            let gone = keeps ? viewChanges(changes).compactMap { change -> (change: StoreChange, old: Node)? in
                guard let old = change.old, old.id != change.new?.id, modes.keeps(atOrUnder: change.pathLower, isFolder: old.isFolder),
                      !writeBack.hasVersion(change.pathLower) else { return nil }
                // Removed, and no folder made here since.
                if change.new == nil, (try? node(at: change.pathLower, remember: false)) ?? nil != nil { return nil }
                return (change, old)
            } : []
            var arrivals: [String: String] = [:]
            for entry in page {
                if let id = entry.id, !id.isEmpty, let lower = entry.pathLower, !lower.isEmpty { arrivals[id] = lower }
            }
            if keeps && !last { state.arrivals = arrivals }
            var work: Work = ([], [], [])
            for (id, away) in previous.away {
                if let arrived = arrivals[id] { work.restores.append((away, arrived)) } else if !last { state.away[id] = away }
            }
            for (change, old) in gone {
                let movedAway = change.new == nil && !old.id.isEmpty
                // A folder's arrival may have come pages before its removal (its whole tree
                // between them, when its new name sorts first): the store has it there.
                if movedAway, let arrived = arrivals[old.id] ?? previous.arrivals[old.id]
                    ?? (old.isFolder ? (try? store.folderPath(withID: old.id, otherThan: change.pathLower)) ?? nil : nil) {
                    work.moves.append((change.pathLower, arrived, old.isFolder))
                } else {
                    work.removals.append((change.pathLower, old.isFolder, movedAway && !last ? old.id : nil))
                }
            }
            return work
        }
        guard let work, !(work.moves.isEmpty && work.restores.isEmpty && work.removals.isEmpty) else { return }
        let pending = work.moves.isEmpty && work.restores.isEmpty ? [] : self.moves.snapshot.moves
        for move in work.moves {
            let destination = viewPath(ofStorePath: move.to, moves: pending).path
            if destination != move.from { modes.moveElsewhere(from: move.from, to: destination, isFolder: move.isFolder) { inodes.existing($0) } }
        }
        for (away, arrived) in work.restores {
            modes.restore(away.taken, at: viewPath(ofStorePath: arrived, moves: pending).path, isFolder: away.isFolder)
        }
        var away: [String: ModesOnTheWay.Away] = [:]
        for removal in work.removals {
            let taken = modes.removeElsewhere(removal.path, isFolder: removal.isFolder) { inodes.existing($0) }
            if let id = removal.id, !taken.isEmpty { away[id] = ModesOnTheWay.Away(taken: taken, isFolder: removal.isFolder) }
        }
        // Pages are heard one at a time (`ChangeWatcher`'s catch-ups run in turn): the next
        // one finds these.
        if !away.isEmpty { modesOnTheWay.withLock { $0.away.merge(away) { _, new in new } } }
    }
}

/// Another client's moves of what has a mode kept, between pages of the change feed
/// (`modesFollow`): the last page's arrivals (id: store path), and the modes of entries
/// removed whose arrival has not come yet (by id), until the feed's end.
struct ModesOnTheWay {
    struct Away {
        var taken: [TakenMode]
        var isFolder: Bool
    }
    var arrivals: [String: String] = [:]
    var away: [String: Away] = [:]
}
