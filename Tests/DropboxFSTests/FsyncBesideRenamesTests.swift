@testable import DropboxFS
import Foundation
import Synchronization
import Testing
import TestSupport

/// An fsync while another process renames a folder above the file again and again, keeping
/// renames pending all the while. The fsync sends the renames made before it began, then the
/// file, and returns; those made after it are not its to wait for. It waited for every rename
/// touching the file's path, those made after it began too, and went on as long as they came
/// (`Scripts/lib/dirfd_workers.py` with no pause between renames: fsyncs that never returned).
@Suite("core: an fsync beside renames that keep coming", .serialized, .timeLimit(HangGuard.cpuHeavySuite))
struct FsyncBesideRenamesTests {
    /// Renames the renamer makes at most: it stops once the fsync returns, or here.
    static let renameCap = 300
    /// Renames the renamer keeps pending: enough that none of its gaps leaves none.
    static let keptPending = 3

    @Test func anFsyncReturnsWhileRenamesOfAFolderAboveItsFileGoOn() async throws {
        try await CoreFixture.with { core in
            let (kernel, fs) = (core.kernel, core.fs)
            let fd = try await offPool {
                _ = try kernel.mkdir("/a").value("mkdir a")
                _ = try kernel.mkdir("/a/sub").value("mkdir a/sub")
                let fd = try kernel.open("/a/sub/f", O_RDWR | O_CREAT, 0o644).value("create f")
                for (from, to) in [("/a", "/b"), ("/b", "/a"), ("/a", "/b")] {
                    _ = try kernel.rename(from, to).value("rename \(from) to \(to)")  // pending as the fsync begins
                }
                return fd
            }
            let fsyncReturned = Flag()
            let renamer = Task {
                var (at, renames) = ("/b", 3)
                while !fsyncReturned.isSet, renames < Self.renameCap {
                    let seen = fs.moves.signal.generation
                    if fs.moves.count >= Self.keptPending {
                        await fs.moves.signal.wait(after: seen)
                        continue
                    }
                    let to = at == "/a" ? "/b" : "/a"
                    _ = try await offPool { [at] in try kernel.rename(at, to).value("rename \(at) to \(to)") }
                    (at, renames) = (to, renames + 1)
                }
                return (at, renames)
            }
            let content = Array("written beside renames".utf8)
            try await offPool {
                _ = try kernel.pwrite(fd, content, at: 0).value("write f")
                _ = try kernel.fsync(fd).value("fsync f")
            }
            fsyncReturned.set()
            let (folder, renames) = try await renamer.value
            #expect(renames < Self.renameCap, "the fsync returned only once the renames stopped")
            _ = try await offPool { try kernel.close(fd).value("close f") }
            let left = await fs.uploader.drain()
            #expect(left == nil, "left: \(left ?? "")")
            let onDropbox = try await core.client.downloadRange(folder + "/sub/f", range: 0..<Int64(content.count))
            #expect(onDropbox == content)
        }
    }

    private final class Flag: Sendable {
        private let value = Atomic<Bool>(false)
        var isSet: Bool { value.load(ordering: .acquiring) }
        func set() { value.store(true, ordering: .releasing) }
    }
}
