import DropboxAPI
@testable import DropboxFS
import Foundation
import Testing
import TestSupport

/// A folder's time set here and the kernel forgetting the folder while it looks it up again
/// (`touch -d … dir; echo 2 > /proc/sys/vm/drop_caches; stat dir`: the FORGET and the next
/// LOOKUP are answered on two threads at once).
@Suite("core: a folder's time across the kernel forgetting it", .serialized, .timeLimit(HangGuard.cpuHeavySuite))
struct ForgottenFolderTimeTests {
    /// The forget dropped the time held by inode before it was kept by the folder's id, with a
    /// store write between: a lookup in that gap showed the time kept before (CI saw a folder
    /// `touch`ed to 1200000000.5 show 1000000000.123456789 again). Each round sets a new time,
    /// then forgets the folder while a lookup runs beside; the lookup shows that time.
    @Test func aLookupBesideTheForgetShowsTheTimeLastSet() async throws {
        try await Scratch.with { scratch in
            let fs = try scratch.filesystem()
            try await fs.watcher.catchUp()
            let kernel = CoreKernel(fs: fs)
            _ = try await offPool { try kernel.mkdir("/d").value("mkdir /d") }
            try await fs.namespace.sendAll()  // on Dropbox: an id to keep its time by
            var stale: [String] = []
            for round in 0..<300 {
                let set = timespec(tv_sec: 1_000_000_000 + round, tv_nsec: round)
                let (inode, _) = try await fs.lookup(parent: InodeTable.root, name: "d")
                _ = try fs.setAttributesWithoutWaiting(inode, modified: set)
                let forgetting = Task.detached { fs.forget(inode, count: 1) }
                let (seenInode, node) = try await Task.detached { try await fs.lookup(parent: InodeTable.root, name: "d") }.value
                let seen = fs.attributes(seenInode, node).st_mtim
                await forgetting.value
                fs.forget(seenInode, count: 1)
                if seen.tv_sec != set.tv_sec || seen.tv_nsec != set.tv_nsec {
                    stale.append("round \(round): \(seen.tv_sec).\(seen.tv_nsec)")
                }
            }
            #expect(stale.isEmpty, "\(stale.count) of 300 lookups showed an older time: \(stale.prefix(5))")
        }
    }
}
