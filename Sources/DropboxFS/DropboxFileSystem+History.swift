import DropboxAPI
import Foundation

/// The history views (`HistoryPath`): looked up, listed and read like folders and files of
/// the mount, answered from `files/list_revisions` and `list_folder` with deleted entries,
/// and never written: every change in them is EROFS, except `mv` of a deleted file out of
/// `deleted/`, which restores it (`files/restore`).
extension DropboxFileSystem {
    /// EROFS for an inode of a view (what the write paths ask first).
    func refuseInHistory(_ inode: UInt64) throws {
        guard history.inUse else { return }
        if let path = inodes.path(of: inode), HistoryPath.isInView(path) { throw FSError.readOnly }
    }

    /// What adds, removes or renames an entry of `folder` asks first: EROFS in a view,
    /// EACCES at the top of a team space (`Options.protectedTop`).
    func refuseChanges(in folder: UInt64) throws {
        try refuseInHistory(folder)
        if options.protectedTop && folder == InodeTable.root { throw FSError.accessDenied }
    }

    /// Whether a lookup must go to the views (answered in a task: it may ask Dropbox).
    func isHistoryLookup(parentLower: String, name: String) -> Bool {
        name == HistoryPath.marker || (history.inUse && HistoryPath.isInView(parentLower))
    }

    func historyLookup(parentLower: String, name: String) async throws -> Node {
        history.remember(try await findInHistory(parentLower: parentLower, name: name))
    }

    private func findInHistory(parentLower: String, name: String) async throws -> Node {
        if name == HistoryPath.marker {
            guard HistoryPath.parse(parentLower) == nil, let folder = try node(at: parentLower), folder.isFolder else { throw FSError.notFound }
            history.markUsed()
            return HistoryViews.folder(parentLower + "/" + HistoryPath.marker)
        }
        switch HistoryPath.parse(parentLower) {
        case .top:
            guard name == HistoryPath.revisions || name == HistoryPath.deleted else { throw FSError.notFound }
            return HistoryViews.folder(parentLower + "/" + name)
        case .revisionFolders(let folder):
            // A file of the folder, or one deleted from it that Dropbox keeps versions of.
            let key = Node.child(parentLower, name)
            if let file = try child(of: folder, named: name), !file.isFolder {
                return Node(pathLower: key, name: name, isFolder: true)
            }
            do {
                guard try await !historyChildren(key).isEmpty else { throw FSError.notFound }
            } catch where ErrnoMapping.fsError(error) == .isDirectory {
                throw FSError.notFound  // a folder: it has no versions
            }
            return Node(pathLower: key, name: name, isFolder: true)
        case .versions, .deletedFiles:
            let children = try await listing(parentLower)
            guard let found = children.first(where: { $0.name == name }) else { throw FSError.notFound }
            return found
        default:
            throw FSError.notFound
        }
    }

    /// A view folder's entries, fetched now (`opendir` always asks: `ls` shows what is).
    func historyChildren(_ folderLower: String) async throws -> [Node] {
        let children: [Node]
        switch HistoryPath.parse(folderLower) {
        case .top:
            children = [HistoryViews.folder(folderLower + "/" + HistoryPath.deleted),
                        HistoryViews.folder(folderLower + "/" + HistoryPath.revisions)]
        case .revisionFolders(let folder):
            try await ensureListed(folder)
            children = try visibleChildren(folder).filter { !$0.isFolder }.map {
                Node(pathLower: Node.child(folderLower, $0.name), name: $0.name, isFolder: true)
            }
        case .versions(let folder, let file):
            // What was done to the file here is in its history once Dropbox has it.
            let path = folder + "/" + file
            try await namespace.send(touching: [path])
            try await writeBack.sync(folder: path)
            let name = try displayName(in: folder, key: file, viewFolder: folderLower)
            children = try await versions(of: try dropboxPath(folder) + "/" + file, named: name, into: folderLower)
        case .deletedFiles(let folder):
            try await namespace.send(touching: [folder])  // what was deleted here is deleted there
            children = try await deletedFiles(of: folder, into: folderLower)
        case .version, .deletedFile:
            throw FSError.notDirectory
        case nil:
            throw FSError.notFound
        }
        history.remember(folderLower, children: children)
        return children
    }

    /// `mv F/.dropbox/deleted/NAME G/NEW`: brings the deleted file back at G/NEW through
    /// `files/restore`; the name must be free (EEXIST otherwise, whatever `mv` asked).
    func restoreDeleted(fromLower: String, name: String, toParent: String, newName: String) async throws {
        guard case .deletedFiles = HistoryPath.parse(fromLower) else { throw FSError.readOnly }
        guard HistoryPath.parse(toParent) == nil, let target = try node(at: toParent), target.isFolder else { throw FSError.readOnly }
        try Self.checkName(newName)
        guard let deleted = try await listing(fromLower).first(where: { $0.name == name }), let rev = deleted.rev else { throw FSError.notFound }
        if try collidingEntry(in: toParent, named: newName) != nil { throw FSError.exists }
        let targetLower = Node.child(toParent, newName)
        let restored = try await watcher.changingOwn([(targetLower, .subtree)]) {
            try await client.rpc(Routes.restore, RestoreArgument(path: try dropboxPath(toParent) + "/" + newName, rev: rev))
        }
        await watcher.catchUp(after: [.file(restored)])
        history.forget(fromLower)
        inodes.rename(from: deleted.pathLower, to: targetLower)
    }

    /// A view folder's entries as fetched within `HistoryViews.fresh`, else fetched now.
    private func listing(_ folderLower: String) async throws -> [Node] {
        if let recent = history.recentListing(folderLower) { return recent }
        return try await historyChildren(folderLower)
    }

    /// Where a folder of the view is on Dropbox now (elsewhere while a rename of it waits).
    func dropboxPath(_ folderLower: String) throws -> String {
        moves.isEmpty ? folderLower : try storeFolder(folderLower) ?? folderLower
    }

    /// A file's name as the view shows it (the key is folded), else as the view folder's.
    private func displayName(in folder: String, key: String, viewFolder: String) throws -> String {
        if let file = try store.node(folder + "/" + key) { return file.name }
        return history.node(viewFolder)?.name ?? key
    }

    private func versions(of path: String, named name: String, into folderLower: String) async throws -> [Node] {
        let listed = try await client.rpc(Routes.listRevisions, ListRevisionsArgument(path: path, limit: HistoryViews.versionsListed))
        return listed.entries.map { version(of: $0, named: HistoryPath.versionName(of: $0, fileName: name), in: folderLower) }
    }

    /// Deleted files of a folder with their last version, at most `deletedListed`, eight
    /// looked up at a time.
    private func deletedFiles(of folder: String, into folderLower: String) async throws -> [Node] {
        try await ensureListed(folder)
        let path = try dropboxPath(folder)
        var names: [String] = []
        var page = try await client.rpc(Routes.listFolder, ListFolderArgument(path: path, includeDeleted: true))
        while true {
            for case .deleted(let entry) in page.entries where names.count < HistoryViews.deletedListed {
                if try collidingEntry(in: folder, named: entry.name) == nil { names.append(entry.name) }
            }
            guard page.hasMore, names.count < HistoryViews.deletedListed else { break }
            page = try await client.rpc(Routes.listFolderContinue, CursorArgument(cursor: page.cursor))
        }
        var found: [Node] = []
        try await withThrowingTaskGroup(of: Node?.self) { group in
            var next = 0
            func launch() {
                let name = names[next]
                next += 1
                group.addTask {
                    do {
                        let last = try await self.client.rpc(Routes.listRevisions, ListRevisionsArgument(path: path + "/" + name, limit: 1))
                        return last.entries.first.map { self.version(of: $0, named: name, in: folderLower) }
                    } catch let error as CallError<ListRevisionsError> {
                        // A deleted folder (not_file), or gone for good meanwhile: not listed.
                        if case .route(.path, _, _, _) = error { return nil }
                        throw error
                    }
                }
            }
            for _ in 0..<min(8, names.count) { launch() }
            while let node = try await group.next() {
                if let node { found.append(node) }
                if next < names.count { launch() }
            }
        }
        return found.sorted { $0.pathLower < $1.pathLower }
    }

    private func version(of file: FileMetadata, named name: String, in folderLower: String) -> Node {
        var node = Node(pathLower: Node.child(folderLower, name), name: name, isFolder: false)
        node.size = file.size
        node.rev = file.rev
        node.contentHash = file.contentHash
        node.modified = Int64(file.serverModifiedDate?.timeIntervalSince1970 ?? 0)
        node.id = file.id
        return node
    }
}
