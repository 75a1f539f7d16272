@testable import DropboxFS
import Foundation
import Testing
import TestSupport

/// Thousands of files made here and not yet on Dropbox (`tar x`, then `ls` or `rm -r` before
/// the uploads are done).
@Suite("core: many files not yet uploaded", .serialized, .timeLimit(HangGuard.cpuHeavySuite))
struct ManyPendingFilesTests {
    /// Listing a folder looked through every local version for those in it, and `rmdir`
    /// through every one for any below it: `rm -r` of a tree just extracted cost each
    /// folder a pass over all the tree's files. 2,000 files in 100 folders, each folder
    /// listed, emptied and removed, looked at 306,886 versions; now one lookup a folder and
    /// its own files. Counted, not timed.
    @Test func listingAndRemovingFoldersLooksAtTheirOwnFilesNotAtEveryFile() async throws {
        try await Scratch.with { scratch in
            let fs = try scratch.filesystem()
            try await fs.watcher.catchUp()
            let kernel = CoreKernel(fs: fs)
            let folders = (0..<100).map { "/pkg-\($0)" }
            try await offPool {
                for folder in folders {
                    _ = try kernel.mkdir(folder).value("mkdir \(folder)")
                    for file in 0..<20 {
                        let fd = try kernel.open("\(folder)/f\(file).c", O_CREAT | O_WRONLY).value("create")
                        _ = try kernel.pwrite(fd, Array("\(folder) \(file)".utf8), at: 0).value("write")
                        _ = try kernel.close(fd).value("close")
                    }
                }
                // A folder inside one (/pkg-1, whose name prefixes /pkg-10 to /pkg-19).
                _ = try kernel.mkdir("/pkg-1/sub").value("mkdir /pkg-1/sub")
                let fd = try kernel.open("/pkg-1/sub/deep.c", O_CREAT | O_WRONLY).value("create")
                _ = try kernel.close(fd).value("close")
            }
            let before = fs.writeBack.versionsExamined
            try await offPool {
                for folder in folders {
                    let names = try kernel.list(folder).value("list \(folder)")
                    #expect(names.count == (folder == "/pkg-1" ? 21 : 20), "\(folder): \(names.count) entries")
                    if folder == "/pkg-1" {
                        // A folder with a file below it is not empty, whatever else is gone.
                        #expect(kernel.rmdir("/pkg-1/sub") == .failure(Sys.Errno(code: ENOTEMPTY)))
                        #expect(try kernel.list("/pkg-1/sub").value("list /pkg-1/sub") == ["deep.c"])
                        _ = try kernel.unlink("/pkg-1/sub/deep.c").value("unlink deep.c")
                    }
                    for name in names {
                        let path = "\(folder)/\(name)"
                        if name == "sub" { _ = try kernel.rmdir(path).value("rmdir \(path)") } else { _ = try kernel.unlink(path).value("unlink \(path)") }
                    }
                    _ = try kernel.rmdir(folder).value("rmdir \(folder)")
                }
                #expect(try kernel.list("/").value("list /").filter { $0.hasPrefix("pkg-") }.isEmpty)
            }
            #expect(fs.writeBack.versionsExamined - before < 10_000)
        }
    }
}
