/// The entries the kernel is handed (a lookup's, create's, mkdir's or mknod's answer, and
/// readdirplus's), counted as held in the inode table at the path their folder has *now*.
///
/// The kernel attaches an answer under the folder's inode by name. It locks that folder
/// against renames in it while it waits, not against a rename of the folder itself or of
/// one above it: such a rename can come between the call's answer and the answer's hand-over.
/// Handed at the path the call found, the entry was numbered for a path that no longer
/// was (`InodeTable.retain`): the kernel got an inode whose file the mount could not find, and
/// for a second (until its entry expired) a file just made in a folder being renamed, listed
/// by `ls`, could not be opened (ENOENT; the race test in the CI, twice). Under
/// `pathChanges`, taken by every rename, the entry is put under its folder's path of now.
extension DropboxFileSystem {
    /// An entry a call found or made in the folder `parent`, handed to the kernel: its
    /// number (the one given, unless `InodeTable.retain` numbers it anew) and its node at
    /// the folder's path now.
    public func handOut(_ inode: UInt64, _ node: Node, in parent: UInt64) -> (inode: UInt64, node: Node) {
        pathChanges.withLock {
            let node = Self.rebased(node, under: inodes.path(of: parent))
            return (inodes.retain(inode, path: node.pathLower, isFolder: node.isFolder, parent: parent), node)
        }
    }

    /// A readdir answer's entries, from the snapshot an open folder's handle took: each one's
    /// number and, for readdirplus, the node handed to the kernel with it (nil: sent plain,
    /// with its number and type only). A plain readdir, which `find` asks for a million
    /// entries at a time, gets numbers alone (`handed` empty). Of a snapshot taken before
    /// names went, only entries the view still shows are handed (`ls` begun before an `rm`
    /// made the removed file exist again for a second). Each is handed as it is now: the
    /// kernel takes a readdirplus answer's attributes for the file's current ones, and a
    /// file's size as the snapshot had it cut what was written since off for its readers.
    public func listedEntries(_ listed: ArraySlice<Node>, in folder: UInt64, plus: Bool, since: SnapshotChanges) -> (numbers: [UInt64], handed: [Node?]) {
        pathChanges.withLock {
            // All or none moved: a snapshot is of one folder.
            let folderPath = inodes.path(of: folder)
            // Its name went (removed, or replaced elsewhere): its entries are named and
            // numbered, none handed. Their paths may be another folder's entries now, which
            // the kernel would then hold under two parents (ESTALE).
            if folderPath == nil && plus {
                return (inodes.numbers(for: listed.lazy.map { ($0.pathLower, $0.isFolder) }, handed: false), listed.map { _ in nil })
            }
            guard let first = listed.first, Self.rebased(first, under: folderPath).pathLower != first.pathLower else {
                return numberedLocked(listed, plus: plus, since: since)
            }
            return numberedLocked(listed.map { Self.rebased($0, under: folderPath) }, plus: plus, since: since)
        }
    }

    /// `listedEntries` of nodes at their folder's path now, `pathChanges` held.
    private func numberedLocked(_ nodes: some Collection<Node>, plus: Bool, since: SnapshotChanges) -> (numbers: [UInt64], handed: [Node?]) {
        let entry = { (node: Node) in (path: node.pathLower, isFolder: node.isFolder) }
        guard plus else { return (inodes.numbers(for: nodes.lazy.map(entry), handed: false), []) }
        let now: [Node?] = nodes.map { current($0, since: since) }
        var handed = inodes.numbers(for: now.compactMap { $0.map(entry) }, handed: true).makeIterator()
        let numbers = zip(nodes, now).map { node, current in
            current == nil ? inodes.numbers(for: [entry(node)], handed: false)[0] : handed.next()!
        }
        return (numbers, now)
    }

    /// A snapshot's entry as the view shows it now (nil: gone, or of the other kind). Looked
    /// up again only if names went or the store was written since the snapshot (`ls -l` of
    /// 10,000 files, each looked up, took a third longer). A file with a local version now
    /// is that version, whose size each write moves without a mark. One the snapshot took
    /// from a local version that is gone now went with a store write (its upload's), or
    /// with its name.
    private func current(_ listed: Node, since: SnapshotChanges) -> Node? {
        if since.namesWent || since.storeWritten { return shownNow(listed) }
        if let local = writeBack.overlay(listed.pathLower) { return local.isFolder == listed.isFolder ? local : nil }
        return listed
    }

    /// The node under its folder's path now; as found when the folder has none (unknown,
    /// or detached).
    private static func rebased(_ node: Node, under folderPath: String?) -> Node {
        guard let folderPath, let slash = Node.lastSlash(node.pathLower),
              !node.pathLower[..<slash].utf8.elementsEqual(folderPath.utf8) else { return node }
        var moved = node
        moved.pathLower = folderPath + node.pathLower[slash...]
        return moved
    }
}

/// What may have changed since a folder's snapshot was taken, for the entries readdirplus
/// hands from it (`DropboxFileSystem.listedEntries`).
public struct SnapshotChanges: Sendable {
    /// Names went (removed, renamed, replaced elsewhere): an entry may be gone.
    public var namesWent: Bool
    /// The store was written (`MetadataStore.writeCount`): an entry from Dropbox may have
    /// other attributes now.
    public var storeWritten: Bool

    public init(namesWent: Bool, storeWritten: Bool) {
        self.namesWent = namesWent
        self.storeWritten = storeWritten
    }

    /// Nothing assumed: every entry looked up again.
    public static let anything = SnapshotChanges(namesWent: true, storeWritten: true)
}
