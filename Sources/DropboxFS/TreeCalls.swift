import DropboxAPI
import Foundation

/// The Dropbox calls that change the tree (move, delete, the careful delete of an empty
/// folder), each settled by looking when its outcome is unknown, and each with its changes
/// expected as the mount's own (`ChangeWatcher.changingOwn`). Shared by the namespace
/// operations that wait for Dropbox (rename) and by the deletes sent in the background.
struct TreeCalls: Sendable {
    let client: DropboxClient
    let watcher: ChangeWatcher

    /// One move_v2; returns the moved entry. The source goes by its id when it has one:
    /// whatever else holds its path by then is never moved (a rename sent by path carried
    /// the folder another client had put in place of the renamed file). `byPath`: by its
    /// path all the same (a case-only rename's first step, whose retry after a lost answer
    /// must find nothing there, not move the entry on from where the lost step put it).
    func moveOnce(_ source: Node, to destination: String, byPath: Bool = false) async throws -> Metadata {
        FuseLog.trace("move \(source.pathLower) (\(byPath ? "by path" : Self.name(of: source))) to \(destination)")
        let moved = try await watcher.changingOwn([(source.pathLower, .absent), (Node.key(of: destination), .subtree)]) {
            try await client.settle(check: { () -> Metadata? in
                // Done if the source is gone and the destination holds the same entry.
                guard try await self.client.metadataIfExists(source.pathLower) == nil,
                      let there = try await self.client.metadataIfExists(destination), there.id == source.id else { return nil }
                return there
            }) {
                try await self.client.rpc(Routes.move, RelocationArgument(from: byPath ? source.pathLower : Self.name(of: source), to: destination)).metadata
            }
        }
        if let lower = moved.pathLower, lower != Node.key(of: destination) { watcher.expectOwn(lower, .subtree) }
        return moved
    }

    /// What a call names an entry by: its id, or its path when it has none yet.
    static func name(of entry: Node) -> String { entry.id.isEmpty ? entry.pathLower : entry.id }

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

    func isEmptyOnDropbox(_ folderLower: String) async throws -> Bool {
        try await client.rpc(Routes.listFolder, ListFolderArgument(path: folderLower, limit: 1)).entries.isEmpty
    }

    /// rmdir on Dropbox, whose folder delete is recursive and unconditional: a file another
    /// client put in the folder after it was last seen empty would go with it. So the folder
    /// first moves to a hidden name that nobody else addresses (`hidden`), is seen empty
    /// there, and only then is deleted; if something arrived, it moves back to `name`
    /// (beside, should it have been taken meanwhile) and false is returned. A folder another
    /// client deleted first, or moved away with its parent (which a file replaced), is not at
    /// its name any more: its removal is done (true), as on a disk where theirs came first.
    /// `folder`: the folder at the name, as the store (or else Dropbox) has it; nil when no
    /// folder is there (a stopped round may have left it at `hidden`).
    func deleteEmptyFolder(_ folder: Node?, named name: String, via hidden: String) async throws -> Bool {
        guard let aside = try await setAside(folder, at: hidden) else { return true }
        return try await whereSetAside(aside) { aside in
            if try await isEmptyOnDropbox(aside.pathLower) {
                try await delete(aside.pathLower)
                return true
            }
            FuseLog.error("\(Node.parent(of: aside.pathLower))/\(name) got entries on Dropbox while it was being removed; kept")
            // Back to its name beside the hidden one: where its folder is now.
            try await moveNumbered(aside.pathLower, to: Node.parent(of: aside.pathLower) + "/" + name, sourceIsOwn: true)
            return false
        } ?? true
    }

    /// Moves a folder being removed to its hidden name and returns it there. A round (or a
    /// mount) that stopped after that move left it there, or at one of `earlier` (the hidden
    /// names of other steps of the same removal): then the folder is not at its name (or, the
    /// store not yet told of the move, the move there is refused as taken), and it is taken
    /// where it waits. Nil: nothing of it is left to remove.
    func setAside(_ folder: Node?, at hidden: String, orLeftAt earlier: [String] = []) async throws -> Node? {
        if let folder {
            do {
                guard let moved = Node(try await moveOnce(folder, to: hidden)) else { throw FSError.io("move_v2 returned a deleted entry") }
                return moved
            } catch let error as CallError<RelocationError> {
                if Self.isUnderAFile(error) { return nil }
                guard Self.isNotFound(error) || Self.isTaken(error) else { throw error }
                if Self.isTaken(error) {
                    // Taken by another entry than this folder: not ours to delete.
                    guard let waiting = try await waitingFolder(at: [hidden]), folder.id.isEmpty || waiting.id == folder.id else { throw error }
                    return waiting
                }
            }
        }
        return try await waitingFolder(at: [hidden] + earlier)
    }

    /// The folder at the first of `names` that holds one.
    private func waitingFolder(at names: [String]) async throws -> Node? {
        for name in names {
            if let waiting = try await client.metadataIfExists(name).flatMap(Node.init), waiting.isFolder { return waiting }
        }
        return nil
    }

    /// Runs `body` on a folder set aside for its delete, where it is now. Nobody else
    /// addresses its hidden name, but another client may delete or move a folder above it
    /// meanwhile: a call finding nothing at the hidden name looks the folder up by its id,
    /// and `body` runs again where it went (a removed tree was left on Dropbox under its
    /// hidden name, shown by the mount). Nil: the folder is gone, its removal done.
    func whereSetAside<T>(_ aside: Node, _ body: (Node) async throws -> T) async throws -> T? {
        var aside = aside
        var moves = 0  // bounded: another client could move it forever
        while true {
            do {
                return try await body(aside)
            } catch where moves < 4 && Self.isNotFound(error) {
                guard let now = try await client.metadataIfExists(aside.id).flatMap(Node.init) else { return nil }
                guard now.isFolder else { return nil }  // an id names one entry: never a file
                aside = now
                moves += 1
            }
        }
    }

    /// A move refused because a folder of its destination is a file on Dropbox.
    static func isUnderAFile(_ error: CallError<RelocationError>) -> Bool {
        if case .route(.to(.conflict(.fileAncestor)), _, _, _) = error { return true }
        return false
    }

    /// A move refused because its destination holds a folder.
    static func isTaken(_ error: CallError<RelocationError>) -> Bool {
        if case .route(.to(.conflict(.folder)), _, _, _) = error { return true }
        return false
    }

    /// Whether a call failed because nothing was at the path it named.
    static func isNotFound(_ error: any Error) -> Bool {
        switch error {
        case let error as CallError<PathLookupError>:
            if case .route(.path(.notFound), _, _, _) = error { return true }
        case let error as CallError<DeleteError>:
            if case .route(.pathLookup(.notFound), _, _, _) = error { return true }
        case let error as CallError<RelocationError>:
            if case .route(.fromLookup(.notFound), _, _, _) = error { return true }
        default:
            break
        }
        return false
    }

    /// move_v2 that keeps both when the name is taken (Dropbox numbers the new one,
    /// "name (1)"), settled by the source being gone. A folder set aside for its delete goes
    /// back to its name this way (`sourceIsOwn`: its going is the mount's own change); so
    /// does a rename's target another client changed (the kernel hears of that as of
    /// another client's change).
    func moveNumbered(_ pathLower: String, to path: String, sourceIsOwn: Bool) async throws {
        FuseLog.trace("move \(pathLower) to \(path) or a numbered name beside")
        let move = {
            try await client.settle(check: { try await self.client.metadataIfExists(pathLower) == nil ? () : nil }) {
                _ = try await self.client.rpc(Routes.move, RelocationArgument(from: pathLower, to: path, autorename: true))
            }
        }
        if sourceIsOwn { try await watcher.changingOwn([(pathLower, .absent)]) { try await move() } } else { try await move() }
    }

    /// A fresh name in the same folder for a step the user never sees (a case-only rename's
    /// middle, a folder checked before its delete).
    static func hiddenName(beside path: String, for purpose: String, tag: String = randomTag()) -> String {
        Node.parent(of: path) + "/.dropboxfs-\(purpose)-" + tag
    }

    /// Whether a path's last name is one `hiddenName` gives for `purpose`.
    static func isHiddenName(_ pathLower: String, for purpose: String) -> Bool {
        pathLower[(Node.lastSlash(pathLower).map(pathLower.index(after:)) ?? pathLower.startIndex)...].hasPrefix(".dropboxfs-\(purpose)-")
    }

    /// Eight random hex digits: a hidden name's own among every client's.
    static func randomTag() -> String { String(UUID().uuidString.prefix(8)).lowercased() }
}
