import DropboxAPI
import Foundation

/// Tree operations that need no file content: mkdir, rmdir, unlink, rename. Each is one
/// Dropbox call (`create_folder_v2`, `delete_v2`, `move_v2`); then the store catches up with
/// the account's changes before the kernel is answered, so the next lookup sees the result
/// and changes are applied in Dropbox's order (applying our result directly could be undone
/// by an older change the watcher had not applied yet).
///
/// Files with local versions not yet uploaded take part: a delete drops them, a rename takes
/// them along (a file that exists only here is renamed here alone). Both run `holding` the
/// paths, so no upload starts there meanwhile and none under way is overtaken.
extension DropboxFileSystem {
    public func makeDirectory(parent: UInt64, name: String) async throws -> (UInt64, Node) {
        if options.readOnly { throw FSError.readOnly }
        let parentPath = try await listedFolder(parent)
        try Self.checkName(name)
        if try childIgnoringCase(of: parentPath, named: name) != nil { throw FSError.exists }
        let path = parentPath + "/" + name, pathLower = Node.child(parentPath, name)
        let (node, madeHere) = try await store.makingFolder(pathLower) {
            let (created, madeHere) = try await watcher.changingOwn([(pathLower, .subtree)]) {
                try await client.settle(check: { try await self.client.metadataIfExists(path).flatMap(\.folderMetadata).map { ($0, true) } }) {
                    try await createFolder(path, name: name)
                }
            }
            guard let node = Node(.folder(created)) else { throw FSError.io("create_folder_v2 returned no folder") }
            // Expected under our lower-casing already; Dropbox's may differ (non-ASCII letters).
            if node.pathLower != pathLower { watcher.expectOwn(node.pathLower, .subtree) }
            await watcher.catchUp(after: [.folder(created)])
            return (node, madeHere)
        }
        // Made here: known to be empty. Found made: listed when first needed.
        try store.insert(node, listedEmpty: madeHere)
        return (inodes.inode(for: node.pathLower), node)
    }

    /// create_folder_v2; true with the folder if this call made it. A folder of exactly this
    /// name that another client made since the store last heard from Dropbox (an upload into
    /// it makes it too) is taken as made by this mkdir, which ran at the same moment: the
    /// name is there at once for what comes next, as it is after a mkdir that succeeds. (The
    /// kernel keeps the negative entry of a mkdir answered EEXIST, so `tar x` creating files
    /// in it right after got ENOENT until the change feed told the kernel otherwise.)
    private func createFolder(_ path: String, name: String) async throws -> (FolderMetadata, Bool) {
        do {
            return (try await client.rpc(Routes.createFolder, CreateFolderArgument(path: path)).metadata, true)
        } catch let error as CallError<PathWriteError> {
            guard case .route(.path(.conflict(.folder)), _, _, _) = error,
                  let there = try await client.metadataIfExists(path)?.folderMetadata, there.name == name else { throw error }
            return (there, false)
        }
    }

    /// unlink (a file) or rmdir (an empty folder). Dropbox deletes folders recursively, so
    /// emptiness is checked first, with Dropbox itself (`list_folder`, one entry).
    public func remove(parent: UInt64, name: String, folder: Bool) async throws {
        if options.readOnly { throw FSError.readOnly }
        if name.utf8.count > Self.nameMax { throw FSError.nameTooLong }
        let parentPath = try await listedFolder(parent)
        guard let node = try child(of: parentPath, named: name) else { throw FSError.notFound }
        if folder {
            guard node.isFolder else { throw FSError.notDirectory }
            if writeBack.hasVersions(under: node.pathLower) { throw FSError.notEmpty }
            try await requireEmpty(node)  // a quick refusal; `deleteEmptyFolder` makes sure
        } else if node.isFolder {
            throw FSError.isDirectory
        }
        try await writeBack.holding([node.pathLower]) {
            adoptRemoteHandles(at: node.pathLower)
            try writeBack.discard(node.pathLower)
            if let remote = try store.node(node.pathLower) {
                if remote.isFolder { try await deleteEmptyFolder(remote) } else { try await delete(node.pathLower, unlessChangedSince: remote.rev) }
            }
        }
        inodes.detach(node.pathLower, folder: node.isFolder)
        await watcher.catchUp(after: [Self.deletion(of: node)])  // the name never shows again after a successful unlink
    }

    /// The change-feed entry of `node`'s deletion.
    private static func deletion(of node: Node) -> Metadata {
        .deleted(DeletedMetadata(name: node.name, pathLower: node.pathLower, pathDisplay: nil))
    }

    /// rename, POSIX style: an existing target is replaced (a file by a file, an empty folder
    /// by a folder); `noReplace` refuses instead. Dropbox's move cannot replace, so the target
    /// is deleted first: for a moment neither name holds the target (documented in SEMANTICS).
    public func rename(parent: UInt64, name: String, newParent: UInt64, newName: String, noReplace: Bool) async throws {
        if options.readOnly { throw FSError.readOnly }
        if name.utf8.count > Self.nameMax { throw FSError.nameTooLong }
        let fromParent = try await listedFolder(parent)
        let toParent = try await listedFolder(newParent)
        try Self.checkName(newName)
        guard let source = try child(of: fromParent, named: name) else { throw FSError.notFound }
        let targetLower = Node.child(toParent, newName)
        if source.isFolder && (targetLower == source.pathLower || targetLower.hasPrefix(source.pathLower + "/")) && targetLower != source.pathLower {
            throw FSError.invalidName  // into itself
        }
        let target = try child(of: toParent, named: newName).flatMap { $0.pathLower == source.pathLower ? nil : $0 }
        // Another entry whose name differs only in case: Dropbox would take it for the same.
        if target == nil, let other = try childIgnoringCase(of: toParent, named: newName), other.pathLower != source.pathLower {
            throw FSError.exists
        }
        if let target {
            if noReplace { throw FSError.exists }
            if source.isFolder && !target.isFolder { throw FSError.notDirectory }
            if !source.isFolder && target.isFolder { throw FSError.isDirectory }
            if target.isFolder && writeBack.hasVersions(under: target.pathLower) { throw FSError.notEmpty }
        } else if source.name == newName && fromParent == toParent {
            return  // the same name: nothing to do
        }
        try await writeBack.holding([source.pathLower, targetLower]) {
            if target != nil { adoptRemoteHandles(at: targetLower) }
            let remoteSource = try store.node(source.pathLower)
            let remoteTarget = try store.node(targetLower).flatMap { $0.pathLower == source.pathLower ? nil : $0 }
            if let remoteTarget {
                if remoteTarget.isFolder { try await requireEmpty(remoteTarget) }
                // A file only here replaces the target by uploading over it, later (a target
                // changed on Dropbox meanwhile then keeps its name, the upload goes beside).
                if remoteSource != nil || remoteTarget.isFolder {
                    let deleted = try await delete(remoteTarget.pathLower, unlessChangedSince: remoteTarget.isFolder ? nil : remoteTarget.rev)
                    if !deleted { try await moveAside(remoteTarget) }
                }
            }
            guard remoteSource != nil else {
                // The file exists only here: it is renamed here, and its upload goes to the
                // new name, replacing what Dropbox holds there.
                try writeBack.move(from: source.pathLower, to: targetLower, toName: newName, rebase: .target(remoteTarget?.rev))
                if let target { inodes.detach(targetLower, folder: target.isFolder) }
                inodes.rename(from: source.pathLower, to: targetLower)
                return
            }
            let entry = try await moveOnDropbox(source, to: toParent + "/" + newName)
            guard let moved = Node(entry) else { throw FSError.io("move_v2 returned a deleted entry") }
            await watcher.catchUp(after: [Self.deletion(of: source), entry])
            // The store keeps what the change feed brings for a folder only once it has listed
            // it: a moved folder is listed again at once. Unlisted, a file the kernel still held
            // in it (one uploading into it, say) was "not found" once its upload was done.
            if moved.isFolder { try await ensureListed(moved.pathLower) }
            try writeBack.move(from: source.pathLower, to: moved.pathLower, toName: moved.name,
                               rebase: moved.isFolder ? .none : .moved(from: remoteSource?.rev, to: moved.rev))
            if let target { inodes.detach(targetLower, folder: target.isFolder) }
            inodes.rename(from: source.pathLower, to: moved.pathLower)
        }
    }

    /// move_v2, settled by looking when its outcome is unknown. A case-only rename goes
    /// through a temporary name in two moves (Dropbox refuses a move onto the same path);
    /// the store learns only the end result, so readers of the mount never see the
    /// temporary name.
    private func moveOnDropbox(_ source: Node, to destination: String) async throws -> Metadata {
        guard Node.key(of: destination) == source.pathLower else { return try await moveOnce(source, to: destination) }
        let temporary = Self.hiddenName(beside: destination, for: "rename")
        guard let step = Node(try await moveOnce(source, to: temporary)) else { throw FSError.io("move_v2 returned a deleted entry") }
        return try await moveOnce(step, to: destination)
    }

    /// One move_v2; returns the moved entry.
    private func moveOnce(_ source: Node, to destination: String) async throws -> Metadata {
        let moved = try await watcher.changingOwn([(source.pathLower, .absent), (Node.key(of: destination), .subtree)]) {
            try await client.settle(check: { () -> Metadata? in
                // Done if the source is gone and the destination holds the same entry.
                guard try await self.client.metadataIfExists(source.pathLower) == nil,
                      let there = try await self.client.metadataIfExists(destination), there.id == source.id else { return nil }
                return there
            }) {
                try await self.client.rpc(Routes.move, RelocationArgument(from: source.pathLower, to: destination)).metadata
            }
        }
        if let lower = moved.pathLower, lower != Node.key(of: destination) { watcher.expectOwn(lower, .subtree) }
        return moved
    }

    /// delete_v2, settled by looking when its outcome is unknown: gone means done. With
    /// `rev`, Dropbox deletes only that revision: a file changed elsewhere since this mount
    /// saw it is kept (false is returned), and comes back through the change feed (an unlink
    /// or rename-over here never deletes an edit made elsewhere).
    @discardableResult
    func delete(_ pathLower: String, unlessChangedSince rev: String? = nil) async throws -> Bool {
        do {
            _ = try await watcher.changingOwn([(pathLower, .absent)]) {
                try await client.settle(check: { try await self.client.metadataIfExists(pathLower) == nil ? true : nil }) {
                    _ = try await self.client.rpc(Routes.delete, DeleteArgument(path: pathLower, parentRev: rev))
                    return true
                }
            }
            return true
        } catch let error as CallError<DeleteError> {
            guard case .route(.pathWrite(.conflict), _, _, _) = error, rev != nil else { throw error }
            FuseLog.error("\(pathLower) changed on Dropbox since this mount saw it; that version is kept")
            return false
        }
    }

    /// A rename's target changed on Dropbox since this mount saw it: that version moves aside
    /// as a conflicted copy (Dropbox numbers it if the name is taken), and the rename goes
    /// on. A rename over it must not lose an edit the user never saw. The change feed tells
    /// the kernel of the new name, as of another client's change.
    private func moveAside(_ target: Node) async throws {
        let parent = Node.parent(of: target.pathLower)
        let aside = parent + "/" + Uploader.conflictedName(target.name, on: Date())
        try await client.settle(check: { try await self.client.metadataIfExists(target.pathLower) == nil ? () : nil }) {
            _ = try await self.client.rpc(Routes.move, RelocationArgument(from: target.pathLower, to: aside, autorename: true))
        }
        FuseLog.error("rename: \(target.pathLower) changed on Dropbox since this mount saw it; that version is kept as a conflicted copy")
    }

    /// The path of a folder inode, listed in the store.
    private func listedFolder(_ inode: UInt64) async throws -> String {
        let folder = try node(inode)
        guard folder.isFolder else { throw FSError.notDirectory }
        try await ensureListed(folder.pathLower)
        return folder.pathLower
    }

    /// ENOTEMPTY unless the folder is empty: from the store when it holds the folder's
    /// listing, else from Dropbox.
    private func requireEmpty(_ folder: Node) async throws {
        if try store.isListed(folder.pathLower) {
            if try !store.children(folder.pathLower).isEmpty { throw FSError.notEmpty }
            return
        }
        if try await !isEmptyOnDropbox(folder.pathLower) { throw FSError.notEmpty }
    }

    private func isEmptyOnDropbox(_ folderLower: String) async throws -> Bool {
        try await client.rpc(Routes.listFolder, ListFolderArgument(path: folderLower, limit: 1)).entries.isEmpty
    }

    /// rmdir on Dropbox, whose folder delete is recursive and unconditional: a file another
    /// client put in the folder after it was last seen empty would go with it. So the folder
    /// first moves to a hidden name that nobody else addresses, is seen empty there, and only
    /// then is deleted; if something arrived, it moves back and rmdir says ENOTEMPTY.
    private func deleteEmptyFolder(_ folder: Node) async throws {
        let hidden = Self.hiddenName(beside: folder.pathLower, for: "rmdir")
        guard let moved = Node(try await moveOnce(folder, to: hidden)) else { throw FSError.io("move_v2 returned a deleted entry") }
        if try await isEmptyOnDropbox(moved.pathLower) {
            try await delete(moved.pathLower)
            return
        }
        FuseLog.error("\(folder.pathLower) got entries on Dropbox while it was being removed; kept")
        _ = try await moveOnce(moved, to: Node.parent(of: folder.pathLower) + "/" + folder.name)
        await watcher.catchUp(after: [])
        throw FSError.notEmpty
    }

    /// A fresh name in the same folder for a step the user never sees (a case-only rename's
    /// middle, a folder checked before its delete).
    private static func hiddenName(beside path: String, for purpose: String) -> String {
        Node.parent(of: path) + "/.dropboxfs-\(purpose)-" + UUID().uuidString.prefix(8).lowercased()
    }

    /// Names Dropbox cannot hold are refused before any request (files of these names
    /// could never be uploaded).
    static func checkName(_ name: String) throws {
        if name.utf8.count > nameMax { throw FSError.nameTooLong }
        if name.isEmpty || name == "." || name == ".." || name.contains("/") { throw FSError.invalidName }
        if disallowedNames.contains(CaseFolding.fold(name)) { throw FSError.invalidName }
    }

    /// NAME_MAX: the longest name in bytes, as on Linux's local filesystems (Dropbox's own
    /// limit, 255 characters, is never the smaller one).
    static let nameMax = 255

    /// Names Dropbox refuses to store (its desktop clients ignore them too).
    static let disallowedNames: Set<String> = ["desktop.ini", "thumbs.db", ".ds_store", "icon\r", ".dropbox", ".dropbox.attr"]
}
