@testable import DropboxFS
import Foundation
import Testing
import TestSupport

/// A file unlinked while several descriptors hold it: fstat asks the core by inode, and the
/// core answers from the descriptors open on it.
@Suite("core: unlinked files held by several descriptors", .serialized, .timeLimit(.minutes(5)))
struct UnlinkedOpenFileTests {
    /// fstat of a descriptor written here, beside one still reading an older Dropbox revision
    /// of the same file: it shows the written bytes. The core took whichever descriptor its
    /// table listed first, and half the time answered with the reader's old revision. (The
    /// mount's differential suite met a variant, seed 7720827204982159187: a descriptor being
    /// released as fstat ran gave the size and mtime of the file as created, 0 and 0.)
    @Test func fstatOfAWrittenDescriptorShowsItsBytesBesideAReaderOfAnOlderRevision() async throws {
        try await Scratch.with { scratch in
            let fs = try scratch.filesystem()
            let kernel = CoreKernel(fs: fs)
            let files = (0..<12).map { "/f\($0)" }
            for file in files { try await scratch.upload("old", to: file) }
            try await fs.watcher.catchUp()
            let readers = try await offPool { try files.map { try kernel.open($0, O_RDONLY).value("open \($0) to read") } }
            for file in files { try await scratch.upload("newer on Dropbox", to: file) }
            try await fs.watcher.catchUp()
            try await offPool {
                for (file, reader) in zip(files, readers) {
                    let writer = try kernel.open(file, O_RDWR).value("open \(file) to write")
                    _ = try kernel.pwrite(writer, Array("written here, longer than both".utf8), at: 0).value("pwrite \(file)")
                    _ = try kernel.unlink(file).value("unlink \(file)")
                    #expect(try kernel.fstat(writer).value("fstat \(file)").size == 30, "\(file)")
                    _ = try kernel.close(writer).value("close \(file)")
                    _ = try kernel.close(reader).value("close \(file) reader")
                }
            }
        }
    }
}
