import DropboxAPI
@testable import DropboxFS
import Foundation
import Testing
import TestSupport

/// A tree hundreds of folders deep (`stress-ng --dirdeep`, a runaway `mkdir -p`): work at
/// its bottom must not cost in proportion to the square of its depth.
@Suite("core: deep trees", .serialized, .timeLimit(HangGuard.cpuHeavySuite))
struct DeepTreeTests {
    /// `rm -r` of a chain 300 folders deep, deepest first: every lookup on the way asked the
    /// pending removals about each ancestor of its path, hashing the whole ancestor each
    /// time (an `rm -r` 1,000 deep took 2.4 s against 0.07 s on a disk). Only ancestors
    /// as long as some pending key are looked up now: counted, not timed.
    @Test func removingAChainThreeHundredDeepLooksUpFewAncestors() async throws {
        try await Scratch.with { scratch in
            let fs = try scratch.filesystem()
            try await fs.watcher.catchUp()
            let kernel = CoreKernel(fs: fs)
            let chain = (1...300).map { depth in "/deep" + String(repeating: "/d", count: depth - 1) }
            try await offPool {
                for path in chain { _ = try kernel.mkdir(path).value("mkdir \(path)") }
            }
            try await fs.namespace.sendAll()
            let before = fs.deletes.ancestorLookups
            try await offPool {
                for path in chain.reversed() { _ = try kernel.rmdir(path).value("rmdir \(path)") }
            }
            #expect(fs.deletes.ancestorLookups - before < 3_000)
            #expect(try await offPool { try kernel.list("/").value("ls /") } == [])
            try await fs.namespace.sendAll()
            #expect(try await scratch.client.listAll("").isEmpty)
        }
    }
}
