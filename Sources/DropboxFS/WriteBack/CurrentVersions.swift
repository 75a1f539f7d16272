/// The newest local version of each path (`WriteBack.State.current`), indexed by folder too:
/// a listing asks for the versions directly in a folder, and an `rmdir` whether any lies below
/// it. Looking through every version for those made each folder of `rm -r` (or each `ls`)
/// of a tree just extracted cost a pass over all the tree's pending files.
struct CurrentVersions {
    private var byPath: [String: LocalVersion] = [:]
    /// The keys of `byPath` in each folder, by the folder's key.
    private var byFolder: [String: Set<String>] = [:]
    /// The keys of `byPath`, for "is one below this folder?" without a scan.
    private var paths = PathTouches()
    /// How many paths have lost their version so far (finished, moved, dropped): a look at
    /// the store made while a version was current is stale once this moves (`WriteBack.attach`).
    private(set) var removals: UInt64 = 0

    var values: Dictionary<String, LocalVersion>.Values { byPath.values }

    subscript(pathLower: String) -> LocalVersion? {
        get { byPath[pathLower] }
        set {
            guard let newValue else { return removeValue(forKey: pathLower) }
            if byPath.updateValue(newValue, forKey: pathLower) == nil {
                byFolder[Node.parent(of: pathLower), default: []].insert(pathLower)
                paths.insert(pathLower)
            }
        }
    }

    mutating func removeValue(forKey pathLower: String) {
        guard byPath.removeValue(forKey: pathLower) != nil else { return }
        removals &+= 1
        let folder = Node.parent(of: pathLower)
        byFolder[folder]?.remove(pathLower)
        if byFolder[folder]?.isEmpty == true { byFolder.removeValue(forKey: folder) }
        paths.remove(pathLower)
    }

    /// The versions directly in a folder.
    func children(of folderLower: String) -> [LocalVersion] {
        (byFolder[folderLower] ?? []).compactMap { byPath[$0] }
    }

    /// Whether a version lies anywhere below a folder ("" is the root).
    func hasAny(below folderLower: String) -> Bool { paths.hasBelow(folderLower) }
}
