import Foundation

/// What the cache keeps whatever its limit: pinned paths (`dropboxfs pin`; a folder pins
/// everything below it), kept across mounts, and the content hashes of the files they cover
/// now, whose blocks eviction skips. `DropboxFileSystem+Pins` keeps the hashes current and
/// the blocks downloaded.
extension BlockCache {
    public var pins: [String] { lock.withLock { pinnedPaths.sorted() } }

    /// True if the path or a folder above it is pinned.
    public func isPinned(_ pathLower: String) -> Bool {
        lock.withLock {
            if pinnedPaths.isEmpty { return false }
            if pinnedPaths.contains(pathLower) || pinnedPaths.contains("") { return true }
            var path = Substring(pathLower)
            while let slash = path.lastIndex(of: "/") {
                path = path[..<slash]
                if pinnedPaths.contains(String(path)) { return true }
            }
            return false
        }
    }

    public func addPin(_ pathLower: String) throws {
        try lock.withLock {
            try db.run("INSERT OR IGNORE INTO pins (path_lower) VALUES (?)", [.text(pathLower)])
            pinnedPaths.insert(pathLower)
        }
    }

    /// False if the path was not pinned itself.
    public func removePin(_ pathLower: String) throws -> Bool {
        try lock.withLock {
            guard pinnedPaths.remove(pathLower) != nil else { return false }
            try db.run("DELETE FROM pins WHERE path_lower = ?", [.text(pathLower)])
            return true
        }
    }

    /// The content hashes of the pinned files now: their blocks stay, those of files no
    /// longer pinned (or changed since) become evictable again.
    func setPinnedHashes(_ hashes: Set<String>) throws {
        try lock.withLock {
            try db.transaction {
                try db.run("DELETE FROM pinned_hashes")
                for hash in hashes { try db.run("INSERT INTO pinned_hashes (hash) VALUES (?)", [.text(hash)]) }
            }
        }
        evictIfNeeded()
    }
}
