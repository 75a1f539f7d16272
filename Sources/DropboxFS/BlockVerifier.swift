import DropboxAPI
import Synchronization

/// Checks fetched blocks against the file's content hash, which no `Content-Range` header can
/// vouch for: a server (or proxy) may send other bytes under the right header. Dropbox's
/// hash is SHA-256 over the SHA-256 of each 4 MiB block, so a file of one block is checked
/// as soon as it arrives, and a longer one once all its blocks have been fetched (each
/// block's digest waits here until then). A mismatch drops every block of that hash from
/// the cache and fails the read; the hash stays refused until the next mount (which block
/// was wrong cannot be told, so no block of it is trusted again): wrong bytes are never kept.
final class BlockVerifier: Sendable {
    /// Digests of the blocks fetched so far, per content hash.
    private let digests = Mutex<[String: [Int64: [UInt8]]]>([:])
    /// Hashes whose bytes were caught wrong.
    private let refused = Mutex<Set<String>>([])
    /// Files whose blocks are waiting for the rest, at most: reading the first block of many
    /// large files must not grow memory without bound (an unchecked file is checked again
    /// when its blocks are next fetched).
    static let maxFilesPending = 4096

    enum Verdict {
        case verified
        /// More blocks are needed to tell.
        case waiting
        case wrong(expected: String, actual: String)
        /// Caught wrong before: not fetched again.
        case refused
    }

    func isRefused(_ contentHash: String) -> Bool { refused.withLock { $0.contains(contentHash) } }

    /// Records block `index` (of `count`) of the file with `contentHash`, fetched with `digest`.
    func arrived(contentHash: String, index: Int64, of count: Int64, digest: [UInt8]) -> Verdict {
        if isRefused(contentHash) { return .refused }
        let verdict: Verdict = digests.withLock { pending in
            var blocks = pending[contentHash] ?? [:]
            blocks[index] = digest
            guard blocks.count == Int(count) else {
                if pending[contentHash] == nil && pending.count >= Self.maxFilesPending { pending.removeValue(forKey: pending.keys.first!) }
                pending[contentHash] = blocks
                return .waiting
            }
            pending.removeValue(forKey: contentHash)
            let actual = ContentHasher.combine((0..<count).flatMap { blocks[$0]! })
            return actual == contentHash ? .verified : .wrong(expected: contentHash, actual: actual)
        }
        if case .wrong = verdict { _ = refused.withLock { $0.insert(contentHash) } }
        return verdict
    }
}
