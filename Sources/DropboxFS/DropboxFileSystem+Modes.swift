import DropboxAPI

/// Permission modes kept here (`FileModes`) follow what other clients do to the files.
extension DropboxFileSystem {
    /// Another client's changes, applied to the store (`page`: every entry they came with).
    /// A mode belongs to the file, which Dropbox names by id: a file or folder moved
    /// elsewhere takes its mode to where it went (the feed brings the removal and the
    /// arrival in one page, an arrival the store may not keep: its folder is not listed);
    /// one removed, or replaced by another file (a new id), loses it. A file written here
    /// and not yet uploaded keeps it: the name shows that file.
    func modesFollow(_ changes: [StoreChange], page: [Metadata]) {
        guard modes.keepsAny else { return }
        let shown = viewChanges(changes)
        let pending = moves.snapshot.moves
        var arrivals: [String: String] = [:]
        for entry in page {
            if let node = Node(entry), !node.id.isEmpty { arrivals[node.id] = viewPath(ofStorePath: node.pathLower, moves: pending).path }
        }
        for change in shown {
            guard let old = change.old, old.id != change.new?.id, modes.keeps(atOrUnder: change.pathLower, isFolder: old.isFolder) else { continue }
            if writeBack.hasVersion(change.pathLower) { continue }
            if change.new == nil {
                if (try? node(at: change.pathLower, remember: false)) ?? nil != nil { continue }  // a folder made here since
                if !old.id.isEmpty, let destination = arrivals[old.id], destination != change.pathLower {
                    modes.move(from: change.pathLower, to: destination, isFolder: old.isFolder)
                    continue
                }
            }
            modes.remove(change.pathLower, isFolder: old.isFolder)
        }
    }
}
