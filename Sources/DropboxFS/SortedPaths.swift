import Foundation

/// A set of path keys kept in order, so that every key below a folder is found without
/// looking at the others: `rmdir` of one of 8,192 folders each with a kept mode looked at all
/// 8,192 keys (`stress-ng --dir` ran at a tenth of a disk's rate).
///
/// Keys are compared as `String ==` compares them (canonically equivalent names are one key),
/// and ordered by the UTF-8 bytes of their composed form (NFC). Not by Swift's `<`: for names
/// in mixed forms it is no order at all (`"/é/a0"` composed and `"/e\u{301}/a"` are neither
/// before the other). Every key starting with `folder + "/"` then lies in the byte range
/// `[folder + "/", folder + "0")`: `0` follows `/`.
///
/// Keys are held in sorted chunks of at most `chunkLimit`, so an insert moves a chunk's worth
/// of entries, not the whole set's (a flat array of 100,000 keys moved megabytes an insert).
struct SortedPaths {
    private struct Entry {
        /// The key's composed form in UTF-8: the order.
        let order: [UInt8]
        let key: String
    }

    private var chunks: [[Entry]] = []
    private let chunkLimit: Int

    init(chunkLimit: Int = 512) {
        precondition(chunkLimit >= 2)
        self.chunkLimit = chunkLimit
    }

    init<S: Sequence>(_ keys: S) where S.Element == String {
        self.init()
        let entries = keys.map { Entry(order: Self.order(of: $0), key: $0) }
            .sorted { $0.order.lexicographicallyPrecedes($1.order) }
        for entry in entries where chunks.last?.last?.order != entry.order {
            if chunks.isEmpty || chunks[chunks.count - 1].count == chunkLimit { chunks.append([]) }
            chunks[chunks.count - 1].append(entry)
        }
    }

    var count: Int { chunks.reduce(0) { $0 + $1.count } }

    /// Adds a key; one canonically equivalent to a key already there is not added.
    mutating func insert(_ key: String) {
        let entry = Entry(order: Self.order(of: key), key: key)
        guard !chunks.isEmpty else { chunks = [[entry]]; return }
        let chunk = min(firstChunk(endingAtOrAfter: entry.order), chunks.count - 1)
        let index = Self.firstIndex(atOrAfter: entry.order, in: chunks[chunk])
        if index < chunks[chunk].count, chunks[chunk][index].order == entry.order { return }
        chunks[chunk].insert(entry, at: index)
        if chunks[chunk].count > chunkLimit {
            let upper = Array(chunks[chunk][(chunkLimit / 2)...])
            chunks[chunk].removeSubrange((chunkLimit / 2)...)
            chunks.insert(upper, at: chunk + 1)
        }
    }

    /// Removes the key, or the one there canonically equivalent to it.
    mutating func remove(_ key: String) {
        let order = Self.order(of: key)
        let chunk = firstChunk(endingAtOrAfter: order)
        guard chunk < chunks.count else { return }
        let index = Self.firstIndex(atOrAfter: order, in: chunks[chunk])
        guard index < chunks[chunk].count, chunks[chunk][index].order == order else { return }
        chunks[chunk].remove(at: index)
        if chunks[chunk].isEmpty { chunks.remove(at: chunk) }
    }

    /// Every key that starts with `folder + "/"` (as `hasPrefix` says), in order, and how many
    /// keys were looked at to find them.
    func keys(below folder: String) -> (keys: [String], examined: Int) {
        let prefix = folder + "/"
        let lower = Self.order(of: prefix)
        let upper = Self.order(of: folder + "0")
        var found: [String] = []
        var examined = 0
        var chunk = firstChunk(endingAtOrAfter: lower)
        var index = chunk < chunks.count ? Self.firstIndex(atOrAfter: lower, in: chunks[chunk]) : 0
        while chunk < chunks.count {
            while index < chunks[chunk].count {
                let entry = chunks[chunk][index]
                examined += 1
                guard entry.order.lexicographicallyPrecedes(upper) else { return (found, examined) }
                // The range holds every key `hasPrefix` counts, and also one whose name after
                // the slash begins with a combining mark (the slash and the mark are one
                // character, so `hasPrefix` does not count it).
                if entry.key.hasPrefix(prefix) { found.append(entry.key) }
                index += 1
            }
            chunk += 1
            index = 0
        }
        return (found, examined)
    }

    /// An ASCII key is its own composed form (Foundation's composition cost 1.6 µs a path).
    private static func order(of key: String) -> [UInt8] {
        let bytes = Array(key.utf8)
        return bytes.allSatisfy({ $0 < 0x80 }) ? bytes : Array(key.precomposedStringWithCanonicalMapping.utf8)
    }

    /// The first chunk whose last key is not before `order` (`chunks.count` if none).
    private func firstChunk(endingAtOrAfter order: [UInt8]) -> Int {
        var low = 0
        var high = chunks.count
        while low < high {
            let middle = (low + high) / 2
            if chunks[middle][chunks[middle].count - 1].order.lexicographicallyPrecedes(order) { low = middle + 1 } else { high = middle }
        }
        return low
    }

    private static func firstIndex(atOrAfter order: [UInt8], in chunk: [Entry]) -> Int {
        var low = 0
        var high = chunk.count
        while low < high {
            let middle = (low + high) / 2
            if chunk[middle].order.lexicographicallyPrecedes(order) { low = middle + 1 } else { high = middle }
        }
        return low
    }
}
