import DropboxAPI
import Foundation

/// Tree operations that need no file content: mkdir, rmdir, unlink, rename.
///
/// All four are answered here: the change is queued durably and shows in the view at once
/// (`PendingFolders`, `PendingDeletes`, `PendingMoves`), and goes to Dropbox in the
/// background, in the order the user made them (`NamespaceOrder`): new folders and removals
/// batched (`FolderSender`, `DeleteSender`), renames as moves, batched where they can be
/// (`MoveSender`).
///
/// Files with local versions not yet uploaded take part: a delete drops them, a rename takes
/// them along (a file that exists only here is renamed here alone). Both run `holding` the
/// paths, so no upload starts there meanwhile and none under way is overtaken.
extension DropboxFileSystem {
    /// mkdir, answered once the folder is queued: it shows at once, and reaches Dropbox when
    /// `FolderSender` sends it (after any removal pending at its name).
    /// `mode`: what mkdir(2) asked for, the process's umask applied (nil: the default);
    /// `creator`: who asked (`FileModes.created`; nil: the mount's owner).
    public func makeDirectory(parent: UInt64, name: String, mode: UInt32? = nil, creator: Caller? = nil) async throws -> (UInt64, Node) {
        if options.readOnly { throw FSError.readOnly }
        try refuseChanges(in: parent)
        try Self.checkName(name)
        return try await startingAgain {
            let parentPath = try await listedFolder(parent)
            if let existing = try collidingEntry(in: parentPath, named: name) {
                throw refusal(of: name, in: parentPath, takenFor: existing, by: "mkdir")
            }
            let pathLower = Node.child(parentPath, name)
            // A folder made here at this name and renamed away is still pending: it goes first
            // (the queue keeps one new folder a name).
            if folders.isPending(pathLower) { try await namespace.send(touching: [pathLower]) }
            return try pathChanges.withLock {
                try requireUnmoved([(parent, parentPath)])
                if folders.isPending(pathLower) { throw StartAgain() }  // another made and moved meanwhile: again
                try folders.add(path: parentPath + "/" + name)
                guard let node = folders.node(pathLower) else { throw FSError.io("mkdir \(pathLower): not queued") }
                modes.created(pathLower, isFolder: true, requested: mode, by: creator, in: (parentPath, parent))
                changeTimes.entriesChanged(parent)
                let inode = inodes.inode(forNew: pathLower)
                changeTimes.folderMade(inode)
                return (inode, node)
            }
        }
    }

    /// What an rmdir of a new folder (or a rename over it) that could not take it back from
    /// the queue waits for: the round sending it, or (a new folder or rename pending below
    /// it) its own sending.
    private enum NewFolderWait { case roundUnderWay, send }

    /// Waits as `wait` says for the new folder at `pathLower`, then starts the call again
    /// (`StartAgain`, always thrown): the folder is on Dropbox then, or back in the queue to
    /// take back.
    private func wait(_ wait: NewFolderWait, forNewFolder pathLower: String) async throws -> Never {
        switch wait {
        case .roundUnderWay:
            // No round of its own, which would fail in an outage (one under way as the outage
            // began made `rm -r` of new folders, and renames over them, fail with ENETUNREACH).
            await namespace.folders.roundsUnderWayEnd()
        case .send:
            try await namespace.send(touching: [pathLower])
        }
        throw StartAgain()
    }

    /// unlink (a file) or rmdir (an empty folder), answered once the delete is queued: the
    /// name is gone from the view at once, and from Dropbox when `DeleteSender` sends it.
    public func remove(parent: UInt64, name: String, folder: Bool) async throws {
        if options.readOnly { throw FSError.readOnly }
        try refuseChanges(in: parent)
        if name.utf8.count > Self.nameMax { throw FSError.nameTooLong }
        try await startingAgain {
            let parentPath = try await listedFolder(parent)
            guard let node = try child(of: parentPath, named: name) else { throw FSError.notFound }
            try checkRemovable(node, folder: folder)
            if folder { try await requireEmpty(node) }  // a quick refusal; `DeleteSender` makes sure on Dropbox
            let waitFor = try await writeBack.holding([node.pathLower]) { () async throws -> NewFolderWait? in
                // A new folder to wait for; else removed, or (`unqueued`) what Dropbox holds
                // there, to remove at once (no room to queue its delete).
                let held = try pathChanges.withLock { () throws -> (wait: NewFolderWait?, unqueued: Node?) in
                    try requireUnmoved([(parent, parentPath)])
                    // A new folder not sent yet is taken back (no request); one being sent is
                    // removed from Dropbox once it is there.
                    if folder, try showsNewFolderMadeHere(node.pathLower), let wait = try takeBackNewFolder(node.pathLower) {
                        return (wait, nil)
                    }
                    return (nil, try removeHeldAndName(node))
                }
                if let wait = held.wait { return wait }
                if let unqueued = held.unqueued {
                    try await removeNow(unqueued)
                    try pathChanges.withLock {
                        try writeBack.discard(node.pathLower)
                        nameRemoved(node.pathLower, showing: node)
                    }
                }
                return nil
            }
            if let waitFor { try await wait(waitFor, forNewFolder: node.pathLower) }
        }
        changeTimes.entriesChanged(parent)
    }

    /// unlink (a file) or rmdir (an empty folder), when it needs nothing from Dropbox: the
    /// parent listed, for rmdir the folder listed too (its emptiness is known here) and not
    /// being sent as a new folder, no commit under way at the name, room to queue the delete.
    /// False, having changed nothing, otherwise. Answered on the FUSE thread, as
    /// `createWithoutWaiting` is (`rm -r` is an unlink or rmdir per entry).
    public func removeWithoutWaiting(parent: UInt64, name: String, folder isFolder: Bool) throws -> Bool {
        if options.readOnly { throw FSError.readOnly }
        try refuseChanges(in: parent)
        if name.utf8.count > Self.nameMax { throw FSError.nameTooLong }
        return try pathChanges.withLock { try removeHeldWithoutWaiting(parent: parent, name: name, folder: isFolder) }
    }

    /// `removeWithoutWaiting` with `pathChanges` held.
    private func removeHeldWithoutWaiting(parent: UInt64, name: String, folder isFolder: Bool) throws -> Bool {
        let folder = try node(parent)
        guard folder.isFolder else { throw FSError.notDirectory }
        guard try isListed(folder.pathLower) else { return false }
        guard let node = try child(of: folder.pathLower, named: name) else { throw FSError.notFound }
        try checkRemovable(node, folder: isFolder)
        if isFolder {
            guard try isListed(node.pathLower) else { return false }
            if try !visibleChildren(node.pathLower).isEmpty { throw FSError.notEmpty }
        }
        // Nothing changed yet when this is not true: a commit under way there, a new folder
        // being sent, or no room to queue the delete (`remove` makes it on Dropbox at once).
        let done = try writeBack.holdingWithoutWaiting([node.pathLower]) { () throws -> Bool in
            if isFolder, try showsNewFolderMadeHere(node.pathLower), try takeBackNewFolder(node.pathLower) != nil { return false }
            return try removeHeldAndName(node) == nil
        }
        guard done == true else { return false }
        changeTimes.entriesChanged(parent)
        return true
    }

    /// A name is gone from the view (unlink, rmdir, a rename over it): its mode goes with it,
    /// kept for the inode while the kernel holds it, as is the file (`HeldDetachedFiles`),
    /// and the inode loses its path.
    /// `node` is what the view showed there (a Dropbox file's has its revision): no store look.
    private func nameRemoved(_ pathLower: String, showing node: Node) {
        let folder = node.isFolder
        let inode = inodes.existing(pathLower)
        modes.detach(pathLower, inode: inode, isFolder: folder)
        modes.remove(pathLower, isFolder: folder)
        if folder { folderTimes.removed(pathLower) }
        let shown = writeBack.takeDetached(at: pathLower)
        if !folder, let inode {
            if let shown {
                heldDetached.keep(shown, for: inode)
            } else if node.rev != nil {
                heldDetached.keep(remote: node, for: inode)
            }
        }
        inodes.detach(pathLower, folder: folder)
    }

    /// A rename of a new folder not sent yet, with nothing made, written or renamed in it:
    /// the folder is made at the new name instead (`PendingFolders.remake`). Moved on
    /// Dropbox, it would have to be made at its old name first, so a removal or a rename over
    /// that name later had to send it first, and failed with ENETUNREACH in an outage
    /// (`mkdir -p a/b; mv a/b c; rmdir a`, and renames over `a` likewise: differential, tree
    /// mix with outages). A rename pending above it does not matter: the folder's record,
    /// queued after that rename, names it where that rename put its parent (one queued before
    /// is found at neither name, and moves). Kept as a move below a renamed folder, a mkdir
    /// at its old name had to send it, and failed so (`mv -T a d; mkdir d/b; mv -T d/b c;
    /// mkdir d/b` in an outage, `a`'s making under way as it began: the same suite).
    /// False, having changed nothing, otherwise.
    private func remakeNewFolder(_ source: Node, at path: String) throws -> Bool {
        guard source.isFolder, try remoteNode(source.pathLower) == nil, try showsNewFolderMadeHere(source.pathLower),
              !folders.hasRecordBelow(source.pathLower), !writeBack.hasVersions(under: source.pathLower),
              moves.isEmpty || !moves.hasEnd(atOrBelow: source.pathLower) else { return false }
        return try folders.remake(source.pathLower, at: path, removeFromDropbox: { try deletes.add($0) })
    }

    /// A new folder leaves the queue (nil) unless a round is sending it (`.roundUnderWay`: wait
    /// for it); one that may be on Dropbox already (sent before, its outcome unknown) is
    /// deleted there in its place. Nor while a new folder or a rename is pending below it, or
    /// one of its renames is under way (`.send`): those make it on
    /// Dropbox when they are sent (`mkdir e; mkdir e/f; mv e/f a; rmdir e` left `e` there,
    /// core differential, `DROPBOXFS_DIFF_MIX=tree`); the caller sends them first, and
    /// removes it from Dropbox then. The same below every name it had before renames brought
    /// it back here: `mkdir d; mv d e; mkdir e/y; mv e/y z; mv e d; rmdir d` made `e` on
    /// Dropbox with `e/y`, and the rename of `e` to `d` left `d` there. Only what was made
    /// below a name while it was there counts: `mkdir e e/f a; mv e b; mv a e; mv e a` then
    /// `mkdir c; mv c a` in an outage had to send `a` for `e/f`, made in the other `e`, and
    /// failed with ENETUNREACH (differential, tree mix with outages). The renames that moved
    /// it go with it: they would fail on Dropbox, where it never was.
    private func takeBackNewFolder(_ pathLower: String) throws -> NewFolderWait? {
        let past = moves.isEmpty ? (spans: [NewFolderSpan(path: pathLower, ids: .min ..< .max)], ownRenames: [])
            : try pastOfNewFolder(at: pathLower)
        if past.spans.contains(where: { folders.hasRecord(below: $0.path, madeIn: $0.ids) || moves.hasEnd(below: $0.path, madeIn: $0.ids) }) {
            return .send
        }
        switch try folders.takeBack(pathLower, removeFromDropbox: { try deletes.add($0) },
                                    takeBackRenames: { try moves.takeBack(past.ownRenames) }) {
        case .taken: return nil
        case .beingSent: return .roundUnderWay
        case .renamesUnderWay: return .send
        }
    }

    /// The refusals of unlink and rmdir that need nothing but the node: rmdir of a file,
    /// unlink of a folder, rmdir of a folder with files written below it not yet uploaded.
    private func checkRemovable(_ node: Node, folder: Bool) throws {
        if folder {
            guard node.isFolder else { throw FSError.notDirectory }
            if writeBack.hasVersions(under: node.pathLower) { throw FSError.notEmpty }
        } else if node.isFolder {
            throw FSError.isDirectory
        }
    }

    /// The part of a removal done while holding its path: the delete is queued, then the
    /// local versions go. Returns, having changed nothing, what Dropbox holds there when a
    /// full disk cannot queue its delete (the caller deletes it on Dropbox at once).
    private func removeHeld(_ node: Node) throws -> Node? {
        adoptRemoteHandles(at: node.pathLower)
        // Queued before the local versions go: a crash in between uploads them again (the
        // delete first), it never loses the unlink. A commit of ours there whose answer was
        // lost is deleted too.
        let ownCommits = node.isFolder ? [] : writeBack.ownCommitsUnheardOf(at: node.pathLower)
        if let remote = try remoteNode(node.pathLower) {
            do { try deletes.add(remote, ifContent: ownCommits) } catch FSError.noSpace { return remote }
        } else {
            try deletes.addOwnCommits(ownCommits, at: node.pathLower, name: node.name)
        }
        try writeBack.discard(node.pathLower)
        return nil
    }

    /// `removeHeld`, then the name goes from the inode table as it goes from the view, with
    /// `pathChanges` held (an open of the inode finds the file, or nothing, never its name
    /// without it).
    private func removeHeldAndName(_ node: Node) throws -> Node? {
        guard let unqueued = try removeHeld(node) else {
            nameRemoved(node.pathLower, showing: node)
            return nil
        }
        return unqueued
    }

    /// A removal the full cache disk cannot queue is made on Dropbox at once, which needs no
    /// local space: `rm` is how a user frees space, and must work on a full disk. The store
    /// may not be able to record it either: the name stays hidden (in memory) until it has.
    private func removeNow(_ remote: Node) async throws {
        // Removals queued below go first. Their round may end in failure only because the
        // store cannot record it: Dropbox has them then, which the empty check below sees.
        try? await deleteSender.send(touching: [remote.pathLower])
        if remote.isFolder {
            // The hidden name stays hidden: the store may not learn that it went either.
            let hidden = TreeCalls.hiddenName(beside: remote.pathLower, for: "rmdir")
            deletes.setAside(Node.key(of: hidden), true)
            if try await !tree.deleteEmptyFolder(remote, named: remote.name, via: hidden) {
                await watcher.catchUp(after: [])
                throw FSError.notEmpty
            }
        } else {
            try await tree.delete(remote.pathLower, unlessChangedSince: remote.rev)
        }
        await watcher.catchUp(after: [Node.deletion(name: remote.name, pathLower: remote.pathLower)])
        try deletes.add(remote, durable: false)
    }

    /// rename, POSIX style: an existing target is replaced (a file by a file, an empty folder
    /// by a folder); `noReplace` refuses instead. Dropbox's move cannot replace, so the target
    /// is deleted first: for a moment neither name holds the target (documented in SEMANTICS).
    public func rename(parent: UInt64, name: String, newParent: UInt64, newName: String, noReplace: Bool) async throws {
        if options.readOnly { throw FSError.readOnly }
        // Out of a view's `deleted/` is a restore; anything else touching a view is refused.
        if history.inUse, let from = inodes.path(of: parent), HistoryPath.isInView(from), let to = inodes.path(of: newParent) {
            return try await restoreDeleted(fromLower: from, name: name, toParent: to, newName: newName)
        }
        try refuseChanges(in: parent)
        try refuseChanges(in: newParent)
        if name.utf8.count > Self.nameMax { throw FSError.nameTooLong }
        try Self.checkName(newName)
        try await startingAgain {
            try await renameOnce(parent: parent, name: name, newParent: newParent, newName: newName, noReplace: noReplace)
        }
    }

    /// `rename`, once: `StartAgain` when a folder of it was renamed in the meantime.
    private func renameOnce(parent: UInt64, name: String, newParent: UInt64, newName: String, noReplace: Bool) async throws {
        let fromParent = try await listedFolder(parent)
        let toParent = try await listedFolder(newParent)
        let parents = [(parent, fromParent), (newParent, toParent)]
        guard let source = try child(of: fromParent, named: name) else { throw FSError.notFound }
        let targetLower = Node.child(toParent, newName)
        if source.isFolder && (targetLower == source.pathLower || targetLower.hasPrefix(source.pathLower + "/")) && targetLower != source.pathLower {
            throw FSError.invalidName  // into itself
        }
        let target = try child(of: toParent, named: newName).flatMap { $0.pathLower == source.pathLower ? nil : $0 }
        // Another entry whose name differs only in case: Dropbox would take it for the same.
        if target == nil, let other = try collidingEntry(in: toParent, named: newName), other.pathLower != source.pathLower {
            throw refusal(of: newName, in: toParent, takenFor: other, by: "rename to")
        }
        if let target {
            if noReplace { throw FSError.exists }
            if source.isFolder && !target.isFolder { throw FSError.notDirectory }
            if !source.isFolder && target.isFolder { throw FSError.isDirectory }
            if target.isFolder && writeBack.hasVersions(under: target.pathLower) { throw FSError.notEmpty }
            if target.isFolder { try await requireEmpty(target) }  // a new folder too, before it is taken back
        } else if source.name == newName && fromParent == toParent {
            return  // the same name: nothing to do
        }
        let waitFor = try await writeBack.holding([source.pathLower, targetLower]) { try pathChanges.withLock { () throws -> NewFolderWait? in
            try requireUnmoved(parents)
            // The change feed may have changed either name while the rename waited (for the
            // target's listing, for a commit there): it starts again on what the view shows
            // now. Gone, the source was moved all the same (taken for a folder made here), to
            // a name the view then lacked: the kernel's copy of the removal, planned at the
            // old name, missed the inode the rename moved, and a file made at the new name
            // got that folder's inode (EIO).
            guard Self.sameEntry(try child(of: fromParent, named: name), source),
                  Self.sameEntry(try child(of: toParent, named: newName).flatMap { $0.pathLower == source.pathLower ? nil : $0 }, target)
            else { throw StartAgain() }
            // A new folder at the target not sent yet is taken back (no request): the rename
            // replaces it. One being sent is on Dropbox next, and removed before the move.
            if target?.isFolder == true, try showsNewFolderMadeHere(targetLower), let wait = try takeBackNewFolder(targetLower) {
                return wait
            }
            // A new folder a round is sending: whether Dropbox will have it to move is known
            // when the round ends, which is waited for (no round of its own), and the rename
            // starts again: made, the folder moves; not, it is made at the new name. Moved
            // while the round ran, it stayed queued at its old name (a move needs it made
            // there first), and in an outage that began as the round went a mkdir at that name
            // had to send it, and failed with ENETUNREACH (differential, tree mix with outages).
            if source.isFolder, folders.isSending(source.pathLower) { return .roundUnderWay }
            if target != nil { adoptRemoteHandles(at: targetLower) }
            // What goes to Dropbox as a move: what it holds, or a folder made here (made
            // there before the move: the order of namespace changes says so).
            let movedOnDropbox = try remoteNode(source.pathLower) ?? (source.isFolder ? source : nil)
            let remoteTarget = try remoteNode(targetLower).flatMap { $0.pathLower == source.pathLower ? nil : $0 }
            // Commits of ours at either name whose answers were lost: the rename removes them
            // from Dropbox as it removes the names here.
            let targetCommits = target == nil || target?.isFolder == true ? [] : writeBack.ownCommitsUnheardOf(at: targetLower)
            if let remoteTarget {
                // A file only here replaces the target by uploading over it, later (a target
                // changed on Dropbox meanwhile then keeps its name, the upload goes beside).
                // Otherwise the target's removal is queued before the move: if Dropbox keeps
                // it (changed elsewhere), the move finds it there and sets it aside.
                if movedOnDropbox != nil || remoteTarget.isFolder { try deletes.add(remoteTarget, ifContent: targetCommits) }
            } else {
                try deletes.addOwnCommits(targetCommits, at: targetLower, name: newName)
            }
            if movedOnDropbox != nil, try remakeNewFolder(source, at: toParent + "/" + newName) {
                // A new folder not sent yet, empty: made at the new name instead of moved there.
            } else if let movedOnDropbox {
                // Queued: the view shows the rename at once, Dropbox gets it in order.
                try moves.add(movedOnDropbox, to: toParent + "/" + newName)
                try writeBack.move(from: source.pathLower, to: targetLower, toName: newName, rebase: .none)
            } else {
                // The file exists only here: it is renamed here, and its upload goes to the
                // new name, replacing what Dropbox holds there.
                try deletes.addOwnCommits(writeBack.ownCommitsUnheardOf(at: source.pathLower), at: source.pathLower, name: source.name)
                try writeBack.move(from: source.pathLower, to: targetLower, toName: newName, rebase: .target(remoteTarget?.rev))
                if remoteTarget != nil { writeBack.inheritOwnCommits(targetCommits, at: targetLower) }
            }
            if let target { nameRemoved(targetLower, showing: target) }
            modes.move(from: source.pathLower, to: targetLower, isFolder: source.isFolder)
            if source.isFolder { folderTimes.moved(from: source.pathLower, to: targetLower) }
            inodes.rename(from: source.pathLower, to: targetLower)
            return nil
        } }
        if let waitFor { try await wait(waitFor, forNewFolder: targetLower) }
        changeTimes.entriesChanged(parent)
        changeTimes.entriesChanged(newParent)
        if let moved = inodes.existing(targetLower) { changeTimes.statusChanged(moved) }
    }

    /// Whether a name shows the entry it showed before (or nothing still): the same path,
    /// kind and Dropbox id, whatever its content did meanwhile.
    private static func sameEntry(_ now: Node?, _ before: Node?) -> Bool {
        guard let now, let before else { return now == nil && before == nil }
        return now.pathLower == before.pathLower && now.isFolder == before.isFolder && now.id == before.id
    }

    /// The path of a folder inode, listed in the store.
    private func listedFolder(_ inode: UInt64) async throws -> String {
        let folder = try folderInPlace(inode)
        try await ensureListed(folder.pathLower)
        return folder.pathLower
    }

    /// The folder an inode names, where its inode is now. One known only as it was opened
    /// (`openNode`), whose inode's path shows something else now (removed or replaced there
    /// by another client), takes nothing new, as a removed folder still open takes nothing:
    /// ENOENT. (Its old path never matched the inode's: the call started again until it
    /// gave up with EAGAIN, two mounts stressing one tree.)
    func folderInPlace(_ inode: UInt64) throws -> Node {
        let (folder, path) = try pathChanges.withLock { (try node(inode), inodes.path(of: inode)) }
        guard folder.isFolder else { throw FSError.notDirectory }
        guard path == folder.pathLower else { throw FSError.notFound }
        return folder
    }

    /// ENOTEMPTY unless the folder shows no entries (listed first, if it was not). Another
    /// client may have put a file there that the store has not heard of: its delete then
    /// finds it, and keeps the folder (`DeleteSender`).
    private func requireEmpty(_ folder: Node) async throws {
        try await ensureListed(folder.pathLower)
        if try !visibleChildren(folder.pathLower).isEmpty { throw FSError.notEmpty }
    }

    /// Names Dropbox cannot hold are refused before any request (files of these names
    /// could never be uploaded).
    static func checkName(_ name: String) throws {
        if name.utf8.count > nameMax { throw FSError.nameTooLong }
        if name.isEmpty || name == "." || name == ".." || name.utf8.contains(UInt8(ascii: "/")) { throw FSError.invalidName }
        if disallowedNames.contains(CaseFolding.fold(name)) { throw FSError.invalidName }
    }

    /// NAME_MAX: the longest name in bytes, as on Linux's local filesystems (Dropbox's own
    /// limit, 255 characters, is never the smaller one).
    static let nameMax = 255

    /// Names Dropbox refuses to store (its desktop clients ignore them too).
    static let disallowedNames: Set<String> = ["desktop.ini", "thumbs.db", ".ds_store", "icon\r", ".dropbox", ".dropbox.attr"]
}
