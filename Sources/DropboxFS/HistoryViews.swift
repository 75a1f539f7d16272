import DropboxAPI
import Foundation
import Synchronization

/// Where a path lies in the read-only history views (doc/SEMANTICS.md, "History"). Every
/// folder F of the mount has, opened by name only, `F/.dropbox/` with:
///   - `revisions/NAME/`: one file per version Dropbox keeps of F's file NAME, named
///     `YYYY-MM-DD_HHMMSS_REV.EXT` (the version's UTC time, then its rev), readable;
///   - `deleted/`: the files deleted from F that Dropbox can still restore, each readable as
///     it was last, and brought back by `mv F/.dropbox/deleted/NAME F/`.
/// `.dropbox` is a name Dropbox refuses to store, so no real file can hide behind a view.
enum HistoryPath: Equatable {
    static let marker = ".dropbox"
    static let revisions = "revisions"
    static let deleted = "deleted"

    /// `F/.dropbox`.
    case top(folder: String)
    /// `F/.dropbox/revisions`.
    case revisionFolders(folder: String)
    /// `F/.dropbox/revisions/NAME`: the versions of F's file NAME.
    case versions(folder: String, file: String)
    /// `F/.dropbox/revisions/NAME/VERSION`.
    case version(folder: String, file: String, version: String)
    /// `F/.dropbox/deleted`.
    case deletedFiles(folder: String)
    /// `F/.dropbox/deleted/NAME`.
    case deletedFile(folder: String, file: String)

    /// The view a key names, or nil for a path of the real tree (or a name no view has).
    static func parse(_ pathLower: String) -> HistoryPath? {
        // The first component that is `.dropbox` itself (`.dropboxrc` is a real name).
        var searched = pathLower.startIndex..<pathLower.endIndex
        var found: Range<String.Index>?
        while let range = pathLower.range(of: "/" + marker, range: searched) {
            if range.upperBound == pathLower.endIndex || pathLower[range.upperBound] == "/" {
                found = range
                break
            }
            searched = range.upperBound..<pathLower.endIndex
        }
        guard let range = found else { return nil }
        let after = pathLower[range.upperBound...]
        let folder = String(pathLower[..<range.lowerBound])
        let parts = after.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        switch (parts.first, parts.count) {
        case (nil, _): return .top(folder: folder)
        case (revisions?, 1): return .revisionFolders(folder: folder)
        case (revisions?, 2): return .versions(folder: folder, file: parts[1])
        case (revisions?, 3): return .version(folder: folder, file: parts[1], version: parts[2])
        case (deleted?, 1): return .deletedFiles(folder: folder)
        case (deleted?, 2): return .deletedFile(folder: folder, file: parts[1])
        default: return nil
        }
    }

    /// Whether a key lies in a view.
    static func isInView(_ pathLower: String) -> Bool { parse(pathLower) != nil }

    /// A version's file name: its UTC time, its rev, and the file's extension (so tools
    /// open it by type); names sort oldest first.
    static func versionName(of file: FileMetadata, fileName: String) -> String {
        let seconds = Int(file.serverModifiedDate?.timeIntervalSince1970 ?? 0)
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        let stamp = String(format: "%04d-%02d-%02d_%02d%02d%02d", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                           parts.tm_hour, parts.tm_min, parts.tm_sec)
        let ext = (fileName as NSString).pathExtension
        return stamp + "_" + file.rev + (ext.isEmpty ? "" : "." + ext)
    }
}

/// What the history views last fetched: every node handed to the kernel stays answerable
/// (`stat` of it needs no request), and a listing younger than `fresh` answers lookups.
/// Bounded: past `limit` nodes the oldest half goes (the kernel then looks them up again).
final class HistoryViews: Sendable {
    static let fresh: Duration = .seconds(5)
    static let limit = 20_000
    /// Revisions listed per file (`files/list_revisions` gives at most 100).
    static let versionsListed = 100
    /// Deleted files listed per folder, each needing its last version looked up.
    static let deletedListed = 1000

    private struct State {
        var nodes: [String: (node: Node, serial: UInt64)] = [:]
        var listings: [String: (children: [Node], at: ContinuousClock.Instant)] = [:]
        var serial: UInt64 = 0
    }

    private let state = Mutex(State())
    /// Set once a view was looked up: until then no path needs the check.
    private let used = Atomic<Bool>(false)

    var inUse: Bool { used.load(ordering: .relaxed) }

    func markUsed() { used.store(true, ordering: .relaxed) }

    /// A node handed out before, or one of the fixed folders.
    func node(_ pathLower: String) -> Node? {
        if let known = state.withLock({ $0.nodes[pathLower]?.node }) { return known }
        switch HistoryPath.parse(pathLower) {
        case .top, .revisionFolders, .deletedFiles: return Self.folder(pathLower)
        default: return nil
        }
    }

    /// A listing fetched within `fresh`.
    func recentListing(_ folderLower: String) -> [Node]? {
        state.withLock { state in
            guard let listing = state.listings[folderLower], ContinuousClock.now - listing.at < Self.fresh else { return nil }
            return listing.children
        }
    }

    /// Remembers a listing and its nodes.
    func remember(_ folderLower: String, children: [Node]) {
        state.withLock { state in
            state.listings[folderLower] = (children, .now)
            Self.rememberLocked(&state, children)
        }
    }

    /// Remembers a node handed to the kernel by a lookup.
    func remember(_ node: Node) -> Node {
        state.withLock { Self.rememberLocked(&$0, [node]) }
        return node
    }

    private static func rememberLocked(_ state: inout State, _ nodes: [Node]) {
        for node in nodes {
            state.serial += 1
            state.nodes[node.pathLower] = (node, state.serial)
        }
        guard state.nodes.count > Self.limit else { return }
        let keep = state.nodes.sorted { $0.value.serial > $1.value.serial }.prefix(Self.limit / 2)
        state.nodes = Dictionary(uniqueKeysWithValues: keep.map { ($0.key, $0.value) })
        state.listings = state.listings.filter { ContinuousClock.now - $0.value.at < Self.fresh }
    }

    /// Forgets what was listed of a view (after a restore out of it).
    func forget(_ folderLower: String) {
        state.withLock { state in
            state.listings[folderLower] = nil
            let prefix = folderLower + "/"
            state.nodes = state.nodes.filter { !$0.key.hasPrefix(prefix) }
        }
    }

    static func folder(_ pathLower: String) -> Node {
        let name = pathLower.split(separator: "/").last.map(String.init) ?? HistoryPath.marker
        return Node(pathLower: pathLower, name: name, isFolder: true)
    }
}
