import DropboxAPI

/// A file or folder as the mount knows it. Identity is the lower-case path (Dropbox's
/// case-insensitive key); `name` keeps the entry's own casing.
public struct Node: Sendable, Equatable {
    public var pathLower: String
    public var name: String
    public var isFolder: Bool
    public var size: Int64 = 0
    public var rev: String?
    public var contentHash: String?
    /// Seconds since 1970 (the file's `client_modified`: what the user's program set).
    public var modified: Int64 = 0
    /// Nanoseconds of `modified`, which Dropbox does not keep: known for revisions this
    /// mount uploaded (rsync compares them), else 0.
    public var modifiedNanos: Int32 = 0
    public var id: String = ""

    public static let root = Node(pathLower: "", name: "", isFolder: true)

    public var parentLower: String { Node.parent(of: pathLower) }

    /// The node without what `stat` does not show (revision, content hash, id).
    var attributesOnly: Node {
        var node = self
        node.rev = nil
        node.contentHash = nil
        node.id = ""
        return node
    }

    static func parent(of pathLower: String) -> String {
        guard let slash = lastSlash(pathLower) else { return "" }
        return String(pathLower[..<slash])
    }

    /// Where the last "/" is, found in the UTF-8 bytes: `lastIndex(of:)` on the characters
    /// walks grapheme clusters, and path walks ran on every unlink (8 % of `rm -r`'s CPU).
    static func lastSlash(_ path: Substring) -> String.Index? { path.utf8.lastIndex(of: UInt8(ascii: "/")) }
    static func lastSlash(_ path: String) -> String.Index? { path.utf8.lastIndex(of: UInt8(ascii: "/")) }

    /// Whether a key is `folder`'s or lies anywhere below it (every key lies below the root, "").
    static func isAt(_ pathLower: String, orUnder folder: String) -> Bool {
        pathLower == folder || pathLower.hasPrefix(folder + "/")
    }

    /// A key and the keys of the folders above it, nearest first, without the root. A walk
    /// of its own, not an array: every create and unlink walks a path's ancestors
    /// (`PathTouches`). (`sequence(state:)` returned as `some Sequence` crashed, SIGSEGV in
    /// `dropFirst()`'s copy of it, in the debug build with Swift 6.3.1: in every run of the
    /// core differential test, never in the unit test.)
    static func selfAndAncestors(_ pathLower: String) -> AncestorWalk { AncestorWalk(pathLower) }

    /// `selfAndAncestors`: the key, then each prefix before a "/", down to the root (excluded).
    struct AncestorWalk: Sequence, IteratorProtocol {
        private var remaining: Substring?

        init(_ pathLower: String) { remaining = pathLower.isEmpty ? nil : Substring(pathLower) }

        mutating func next() -> Substring? {
            guard let path = remaining else { return nil }
            let parent = Node.lastSlash(path).map { path[..<$0] }
            remaining = parent?.isEmpty == false ? parent : nil
            return path
        }
    }

    /// Whether any of `pending` (keys of queued changes) lies at, above or below any of
    /// `paths`. Asked before every upload batch (up to 1,000 paths) with up to thousands
    /// pending: each side walks its own ancestors, instead of every pair being compared.
    static func anyTouches(_ paths: [String], pending: [String: some Any]) -> Bool {
        if pending.isEmpty { return false }
        let asked = Set(paths)
        if asked.contains("") { return true }  // everything is below the root
        let atOrBelow = paths.contains { path in selfAndAncestors(path).contains { pending[String($0)] != nil } }
        return atOrBelow || pending.keys.contains { key in selfAndAncestors(key).contains { asked.contains(String($0)) } }
    }

    /// The change-feed entry of a deletion, for the store to apply when it cannot hear it
    /// from the feed (see `ChangeWatcher.catchUp(after:)`).
    static func deletion(name: String, pathLower: String) -> Metadata {
        .deleted(DeletedMetadata(name: name, pathLower: pathLower, pathDisplay: nil))
    }

    /// A child's key: the parent's key and the name folded as Dropbox folds it.
    static func child(_ parentLower: String, _ name: String) -> String { parentLower + "/" + CaseFolding.fold(name) }

    /// The key of a path whose parent part is a key already and whose last component is a
    /// name as the user typed it (a local version's `path`, a move's destination).
    static func key(of path: String) -> String {
        guard let slash = lastSlash(path) else { return CaseFolding.fold(path) }
        return child(String(path[..<slash]), String(path[path.index(after: slash)...]))
    }

    /// From API metadata (nil for deleted entries, and for entries without a path: Dropbox
    /// leaves `path_lower` out only for what is not in this account's tree, and such an
    /// entry must never stand in for the root).
    /// (One look into the enum: each look copied the whole entry, a few percent of a large
    /// folder's first listing in retains and releases.)
    init?(_ metadata: Metadata) {
        switch metadata {
        case .file(let file):
            guard let pathLower = file.pathLower, !pathLower.isEmpty else { return nil }
            self.init(pathLower: pathLower, name: file.name, isFolder: false)
            size = file.size
            rev = file.rev
            contentHash = file.contentHash
            modified = Int64((file.clientModifiedDate ?? file.serverModifiedDate)?.timeIntervalSince1970 ?? 0)
            id = file.id
        case .folder(let folder):
            guard let pathLower = folder.pathLower, !pathLower.isEmpty else { return nil }
            self.init(pathLower: pathLower, name: folder.name, isFolder: true)
            id = folder.id
        case .deleted:
            return nil
        }
    }

    public init(pathLower: String, name: String, isFolder: Bool) {
        self.pathLower = pathLower
        self.name = name
        self.isFolder = isFolder
    }
}
