import DropboxAPI
@testable import DropboxFS
import Foundation
import Testing
import TestSupport

/// A daemon killed right after it committed a file, before it heard the answer: the next one
/// takes the file up from the queue, not knowing whether it is on Dropbox. Removed there before
/// the change feed shows it, the file must go from Dropbox too, whatever its size.
@Suite("core: removing a file a killed daemon may have committed", .serialized, .timeLimit(.minutes(5)))
struct RecoveredRemovalTests {
    /// Up to 8 MiB a recovered file was hashed at its removal, to recognise the killed daemon's
    /// commit; a larger one was left on Dropbox, and came back at the next listing.
    @Test(arguments: [4 << 10, 9 << 20])
    func aRecoveredFileRemovedBeforeTheChangeFeedShowsItGoesFromDropbox(size: Int) async throws {
        try await Scratch.with { scratch in
            let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) }
            do {  // the daemon killed after its commit: its filesystem is dropped, its queue kept
                let first = try scratch.filesystem()
                try await first.watcher.catchUp()
                let kernel = CoreKernel(fs: first)
                try await offPool {
                    let fd = try kernel.open("/big.bin", O_CREAT | O_WRONLY).value("open")
                    #expect(try kernel.pwrite(fd, bytes, at: 0).value("write") == size)
                    _ = try kernel.close(fd).value("close")
                }
                try await scratch.upload(bytes, to: "/big.bin")  // its commit, the answer lost
            }

            let second = try scratch.filesystem()
            let kernel = CoreKernel(fs: second)
            try await offPool { _ = try kernel.unlink("/big.bin").value("rm big.bin") }
            try await second.namespace.sendAll()
            #expect(try await scratch.client.listAll("").map(\.name) == [])
            try await second.watcher.catchUp()
            #expect(try await offPool { try kernel.list("/").value("ls /") } == [])
        }
    }
}
