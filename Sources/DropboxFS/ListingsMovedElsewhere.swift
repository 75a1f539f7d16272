/// Listings carried across another client's move of a folder this mount has listed.
///
/// The change feed tells of a folder move as the source's removal and every entry of the
/// moved tree at its new path (the mount's own moves have `Landing`s instead). Entries whose
/// parent folder is not listed are dropped, and the new path was never listed: without this,
/// the whole moved tree lost its listings, and `ls` there failed with ENETUNREACH in an
/// outage. So a folder that comes at a new path with the id of a folder listed at another
/// path (still there, or removed earlier in this catch-up) counts as listed where it comes,
/// and so does each folder listed below the source when it comes at its place below the
/// target with its id; the entries that follow them are kept.
///
/// Not if an entry below such a folder was dropped in this catch-up before the folder came
/// (its parent was not listed yet): the listing would lack it. The feed brings parents first
/// in practice, but Dropbox does not promise it. Everything here is forgotten once a catch-up
/// has read the feed to its end: a move's entries all come before that.
struct ListingsMovedElsewhere {
    /// A folder listed at or below a source: its path below the source ("" for the source
    /// itself, else "/b") and its id there.
    typealias ListedFolder = (relative: String, id: String)

    /// Listed folders the feed removed in this catch-up, by the removed folder's id: the
    /// folders listed at and below it then.
    private var removed: [String: [ListedFolder]] = [:]
    /// Where folders listed below a moved source land: the id each must come with, by path.
    private var landing: [String: String] = [:]
    /// Folders below which the feed brought an entry in this catch-up that the store dropped
    /// (they were not listed then). At most `droppedLimit`; past it nothing is carried
    /// until the feed's end.
    private var droppedUnder: Set<String> = []
    private var tooManyDropped = false
    static let droppedLimit = 100_000

    /// The feed brought an entry in `parent`, not listed, and the store dropped it.
    mutating func dropped(in parent: String) {
        guard !tooManyDropped else { return }
        droppedUnder.insert(parent)
        if droppedUnder.count > Self.droppedLimit {
            tooManyDropped = true
            droppedUnder = []
            landing = [:]
        }
    }

    /// The feed removed a folder (`id`) with these folders listed at and below it.
    mutating func removedListed(id: String, folders: [ListedFolder]) {
        guard !id.isEmpty, !folders.isEmpty else { return }
        removed[id] = folders
    }

    /// The folders listed at and below a folder the feed removed in this catch-up.
    func removedFolders(id: String) -> [ListedFolder]? { removed[id] }

    /// The folder with `folders` listed at and below its old place came at `target`:
    /// whether `target` counts as listed, its listed subfolders to count when they come.
    mutating func carry(to target: String, folders: [ListedFolder]) -> Bool {
        guard !tooManyDropped, !droppedUnder.contains(target) else { return false }
        for folder in folders where !folder.relative.isEmpty && !folder.id.isEmpty {
            landing[target + folder.relative] = folder.id
        }
        return true
    }

    /// Whether a folder coming at `path` with `id` lands there for a move seen in this
    /// catch-up, and so counts as listed.
    func lands(_ path: String, id: String) -> Bool {
        !id.isEmpty && landing[path] == id && !droppedUnder.contains(path)
    }

    /// A catch-up has read the feed to its end (or the store was cleared).
    mutating func forget() {
        self = ListingsMovedElsewhere()
    }
}
