/// A multiset of path keys that answers "is anything at, above or below this path?" by
/// walking the asked path's ancestors only: each key also counts in every folder above it.
/// `Node.anyTouches` compares every pending key instead, which is fine once a call and not
/// once for each of a thousand renames going into one batch (`PendingMoves.batchFromOldest`:
/// 2,000 renames pending cost more CPU in the sender than the renames themselves).
struct PathTouches {
    /// How many times each key was inserted.
    private var keys: [String: Int] = [:]
    /// For each folder strictly above some key, how many inserted keys lie below it.
    private var above: [String: Int] = [:]

    var isEmpty: Bool { keys.isEmpty }

    mutating func insert(_ key: String) {
        keys[key, default: 0] += 1
        for folder in Node.selfAndAncestors(key).dropFirst() { above[String(folder), default: 0] += 1 }
    }

    mutating func remove(_ key: String) {
        guard let count = keys[key] else { return }
        keys[key] = count > 1 ? count - 1 : nil
        for folder in Node.selfAndAncestors(key).dropFirst() {
            let folder = String(folder)
            if let below = above[folder] { above[folder] = below > 1 ? below - 1 : nil }
        }
    }

    /// Whether a key lies strictly below `path`.
    func hasBelow(_ path: String) -> Bool { path.isEmpty ? !keys.isEmpty : above[path] != nil }

    /// Whether a key lies at `path` or below it.
    func isAtOrBelow(_ path: String) -> Bool { keys[path] != nil || hasBelow(path) }

    /// Whether a key lies at `path`, in a folder above it, or below it.
    func touches(_ path: String) -> Bool {
        if keys.isEmpty { return false }
        if path.isEmpty || above[path] != nil { return true }  // everything is below the root
        return Node.selfAndAncestors(path).contains { keys[String($0)] != nil }
    }
}
