/// What changes made elsewhere do to the view's inodes, and what the kernel must then forget.
///
/// Decided in the change watcher's order, as each page is applied (the watcher leaves out the
/// mount's own changes): a path deleted, or replaced by another kind of entry, gives up its
/// inode here, so that open descriptors keep the old file or folder (a folder removed
/// elsewhere lists nothing through them, as on a disk) and a new entry there gets a new
/// inode. This is the core's, not the FUSE adapter's: the core's differential tests, which
/// run without a kernel, must see the same inodes the mount does (a folder held open and
/// deleted elsewhere listed ENOENT there while the detaching lived in `FuseMount`).
extension DropboxFileSystem {
    /// Settles the inodes after `changes` made elsewhere (`everything`: the whole view may
    /// have changed, a reset of the change feed) and returns what the kernel must forget, for
    /// the FUSE adapter to tell it later, from its own queue.
    func inodesAfterForeignChanges(_ changes: [StoreChange], everything: Bool) -> [Invalidation] {
        // A folder's snapshot may list what another client removed, or replaced by the other kind.
        if everything || changes.contains(where: \.tookNameAwayOrChangedKind) { inodes.nameWent() }
        if everything { return [.inode(InodeTable.root, pages: true)] }
        // Under `pathChanges`, which renames hold while they move names and inodes: a rename
        // between the changes' view paths and the inode table's look would leave the inode it
        // moved out of the plan.
        return pathChanges.withLock { plan(viewChanges(changes)) }
    }

    /// `inodesAfterForeignChanges` where no kernel is told (the core's tests).
    public func settleInodes(afterForeign changes: [StoreChange], everything: Bool) {
        _ = inodesAfterForeignChanges(changes, everything: everything)
    }

    private func plan(_ changes: [StoreChange]) -> [Invalidation] {
        var plan: [Invalidation] = []
        for change in changes {
            plan += entryInvalidations(change)
            guard let inode = inodes.existing(change.pathLower) else { continue }
            if openReadersKeepTheOldRevision(inode, change) {
                plan += replaced(inode, change)
                continue
            }
            let keepPages = pagesStay(inode, change)
            if !keepPages { pages.forget(inode) }
            plan.append(.inode(inode, pages: !keepPages))
            // A folder made here and not yet sent, which another client has just made too,
            // was shown already: the same folder to the user (a `tar x` creating files in it
            // got ENOENT when its inode was detached).
            let shownBefore = change.old ?? folders.node(change.pathLower)
            let wasFolder = shownBefore?.isFolder ?? false
            if let new = change.new, new.isFolder == wasFolder, shownBefore != nil { continue }
            // The view may show the same entry still, whatever the store learnt: a local
            // version, a folder made here, or where a rename Dropbox refused left things (a
            // file made offline at a name whose queued renames were then refused went ENOENT
            // for seconds when its inode was detached).
            if let shown = try? node(at: change.pathLower, remember: false), shown.isFolder == (shownBefore?.isFolder ?? shown.isFolder) { continue }
            FuseLog.trace("detach \(inode) \(change.pathLower): \(Self.traced(change.old)) -> \(Self.traced(change.new))")
            if wasFolder, let id = shownBefore?.id { folderLeftItsInode(inode, id: id, path: change.pathLower) }
            // What the kernel holds below a removed folder (a file open in it) has no name
            // left either: fstat must say so now, not once its attributes time out.
            for below in inodes.detach(change.pathLower, folder: wasFolder).below { plan.append(.inode(below, pages: false)) }
        }
        return plan
    }

    /// Whether another client's new revision of a file replaces it under descriptors that read
    /// the old one (all of them: a writer here keeps its inode, its bytes going beside as a
    /// conflicted copy if need be; so does a file whose name shows a version written here,
    /// which the kernel's pages and size are). Those must keep the whole revision they opened,
    /// its size too, and the kernel has one size and one set of pages per inode.
    private func openReadersKeepTheOldRevision(_ inode: UInt64, _ change: StoreChange) -> Bool {
        guard let old = change.old, let new = change.new, !old.isFolder, !new.isFolder,
              let newHash = new.contentHash, old.contentHash != newHash,
              writeBack.overlay(change.pathLower) == nil else { return false }
        // A reader served by a version written here (opened before its upload) keeps that
        // version's bytes, which are the old revision's.
        let handles = openFiles.handles(of: inode)
        return !handles.isEmpty && handles.allSatisfy { !$0.entry.writable }
    }

    /// A file replaced under open readers leaves its inode to them, as a disk's file that a
    /// rename replaced (`mv new f`) stays with its descriptors: its pages and size stay the
    /// old revision's, fstat says it has no name, and the name's next lookup gives the new
    /// revision another inode, which is how `tail -F` tells a file replaced (it went on
    /// reading the old revision, which never grows). The kernel forgets the name now, not
    /// when its entry times out.
    private func replaced(_ inode: UInt64, _ change: StoreChange) -> [Invalidation] {
        FuseLog.trace("detach \(inode) \(change.pathLower): replaced under open readers by \(Self.traced(change.new))")
        inodes.detach(change.pathLower)
        var plan: [Invalidation] = [.inode(inode, pages: false)]
        if let parent = inodes.existing(Node.parent(of: change.pathLower)), let name = change.new?.name {
            plan.append(.entry(parent: parent, name: name))
        }
        return plan
    }

    private static func traced(_ node: Node?) -> String {
        guard let node else { return "none" }
        return node.isFolder ? "folder" : "file \(node.rev ?? "?")"
    }

    /// Pages stay when the content did not change, or when they hold the new content already
    /// (a file this mount wrote and uploaded): attributes only.
    private func pagesStay(_ inode: UInt64, _ change: StoreChange) -> Bool {
        guard let hash = change.new?.contentHash else { return false }
        if let old = change.old?.contentHash, old == hash { return true }
        return pages.holds(inode, contentHash: hash)
    }

    /// The names a change adds, removes or renames in its folder. (A separate function: the
    /// Swift 6.3 optimizer crashed compiling this inside `plan`.)
    private func entryInvalidations(_ change: StoreChange) -> [Invalidation] {
        guard !change.pathLower.isEmpty, let parent = inodes.existing(Node.parent(of: change.pathLower)) else { return [] }
        let oldName = change.old?.name, newName = change.new?.name
        guard oldName == nil || newName == nil || oldName != newName else { return [] }
        var names: [String] = []
        if let oldName { names.append(oldName) }
        if let newName, newName != oldName { names.append(newName) }
        return names.map { .entry(parent: parent, name: $0) }
    }
}
