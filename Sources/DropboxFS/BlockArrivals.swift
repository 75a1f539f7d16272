import Synchronization

/// Contents whose blocks are on their way into the block cache from this mount's own
/// uploads. Once a file is committed its local version stops serving reads, and its bytes
/// are handed to the cache after that (`StagedFile.offerBlocks`: a copy of up to 64 MiB). A
/// read meanwhile found no block and asked Dropbox: a download of bytes this machine holds,
/// and ENETUNREACH for a file written here if Dropbox went out of reach just then (CI met it
/// as a truncate(2) failing in the differential suite, seed 112). Such a read waits for the
/// hand-over instead (`Reader.ensureCached`).
final class BlockArrivals: Sendable {
    private struct Expected {
        /// Hand-overs of the content under way (two files with the same bytes, say).
        var handOvers = 0
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let expected = Mutex<[String: Expected]>([:])

    /// The blocks of these contents are about to be handed over: call before the local
    /// versions stop serving them, and `ended` once the hand-over is done.
    func expect(_ contentHashes: [String]) {
        guard !contentHashes.isEmpty else { return }
        expected.withLock { expected in
            for hash in contentHashes { expected[hash, default: Expected()].handOvers += 1 }
        }
    }

    /// The hand-over of these contents is over: their blocks are in the cache, or the cache
    /// did not take them (too large, a full disk), and reads may go to Dropbox.
    func ended(_ contentHashes: [String]) {
        guard !contentHashes.isEmpty else { return }
        let released = expected.withLock { expected in
            var released: [CheckedContinuation<Void, Never>] = []
            for hash in contentHashes {
                guard var entry = expected[hash] else { continue }
                entry.handOvers -= 1
                if entry.handOvers > 0 {
                    expected[hash] = entry
                } else {
                    expected[hash] = nil
                    released += entry.waiters
                }
            }
            return released
        }
        for waiter in released { waiter.resume() }
    }

    /// Whether a hand-over of the content is under way.
    func isExpected(_ contentHash: String) -> Bool {
        expected.withLock { $0[contentHash] != nil }
    }

    /// Returns once no hand-over of the content is under way (at once, nearly always).
    func awaitArrival(of contentHash: String) async {
        guard isExpected(contentHash) else { return }
        await withCheckedContinuation { waiter in
            let waiting = expected.withLock { expected in
                guard expected[contentHash] != nil else { return false }
                expected[contentHash]!.waiters.append(waiter)
                return true
            }
            if !waiting { waiter.resume() }
        }
    }
}
