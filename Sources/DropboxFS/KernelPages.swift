import Synchronization

/// What the kernel's page cache holds for each inode, when that is known: the bytes of one
/// content hash, or those of one chain of local versions (`LocalVersion.lineage`). It decides
/// `keep_cache` at open, and whether a change seen on Dropbox must drop the pages. Keeping
/// pages that hold the right bytes spares reading them again (for a gigabyte just written,
/// dropping them alone costs 0.2 s of CPU).
final class KernelPages: Sendable {
    private let held = Mutex<[UInt64: String]>([:])

    /// A handle reading Dropbox content `contentHash` opens; `othersCurrent` says no other
    /// open handle reads other bytes. True if the pages may be kept.
    func openedRemote(_ inode: UInt64, contentHash: String?, othersCurrent: Bool) -> Bool {
        held.withLock { held in
            defer { held[inode] = othersCurrent ? contentHash : nil }
            let keep = othersCurrent && contentHash != nil && held[inode] == contentHash
            FuseLog.trace("pages \(inode): open remote \(contentHash ?? "-") held \(held[inode] ?? "-") keep \(keep)")
            return keep
        }
    }

    /// A handle served from a local version opens: the pages are good if the last open was
    /// of the same chain (every byte written since went through the kernel's cache), nothing
    /// forgot them, and no handle reading a Dropbox revision is open (`onlyLocal`: its reads
    /// would fill pages with other bytes). A truncating open never keeps them.
    /// `uploadedAs`: the content hash Dropbox gave the version the handle reads, once its
    /// commit is answered and before it is finished (`LocalVersion.answered`): pages marked
    /// as that content since (`uploaded`) hold its bytes too, and stay marked so.
    func openedLocal(_ inode: UInt64, lineage: Int64, truncate: Bool, onlyLocal: Bool, uploadedAs: String? = nil) -> Bool {
        let mark = Self.mark(lineage)
        return held.withLock { held in
            let asUploaded = uploadedAs != nil && held[inode] == uploadedAs
            let keep = !truncate && onlyLocal && (held[inode] == mark || asUploaded)
            FuseLog.trace("pages \(inode): open \(mark) held \(held[inode] ?? "-") keep \(keep)")
            if !(keep && asUploaded) { held[inode] = mark }
            return keep
        }
    }

    /// A handle on Dropbox content closed: it may have filled pages with bytes other than
    /// what the inode was known to hold.
    func closedRemote(_ inode: UInt64, contentHash: String?) {
        held.withLock { held in
            if held[inode] != contentHash {
                FuseLog.trace("pages \(inode): closed remote \(contentHash ?? "-") over \(held[inode] ?? "-")")
                held.removeValue(forKey: inode)
            }
        }
    }

    /// The last local version of a chain is on Dropbox as `contentHash`: pages holding that
    /// chain's bytes now hold that content.
    func uploaded(_ inode: UInt64, lineage: Int64, contentHash: String) {
        held.withLock { held in
            FuseLog.trace("pages \(inode): uploaded \(Self.mark(lineage)) as \(contentHash), held \(held[inode] ?? "-")")
            if held[inode] == Self.mark(lineage) { held[inode] = contentHash }
        }
    }

    func holds(_ inode: UInt64, contentHash: String) -> Bool { held.withLock { $0[inode] == contentHash } }

    func forget(_ inode: UInt64) {
        FuseLog.trace("pages \(inode): forgotten")
        _ = held.withLock { $0.removeValue(forKey: inode) }
    }

    private static func mark(_ lineage: Int64) -> String { "local:\(lineage)" }
}
