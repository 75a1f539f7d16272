@testable import DropboxFS
import Foundation
import Testing
import TestSupport

/// Modes kept here (`FileModes`) for many paths at once: `tar x` of a tree of scripts,
/// `stress-ng --dir` (folders made with mode 0700).
@Suite("core: many kept modes", .serialized, .timeLimit(HangGuard.cpuHeavySuite))
struct KeptModeTests {
    /// Each `rmdir` looked at every kept mode to find those below the folder: 2,000 folders
    /// with mode 0700 (one renamed) removed one by one looked at 2,008,997 keys (`stress-ng --dir` ran at
    /// a tenth of a disk's rate). Counted, not timed.
    @Test func removingFoldersLooksAtTheModesBelowThemNotAtEveryMode() async throws {
        try await Scratch.with { scratch in
            let fs = try scratch.filesystem()
            try await fs.watcher.catchUp()
            let kernel = CoreKernel(fs: fs)
            let folders = (0..<2_000).map { "/d\($0)" }
            try await offPool {
                for folder in folders {
                    _ = try kernel.mkdir(folder).value("mkdir \(folder)")
                    _ = try kernel.chmod(folder, 0o700).value("chmod \(folder)")
                }
                // Kept modes below a folder, and beside it under a name it prefixes.
                _ = try kernel.mkdir("/d1/sub").value("mkdir /d1/sub")
                _ = try kernel.chmod("/d1/sub", 0o750).value("chmod /d1/sub")
                _ = try kernel.mkdir("/d1-b").value("mkdir /d1-b")
                _ = try kernel.chmod("/d1-b", 0o711).value("chmod /d1-b")
            }
            let before = fs.modes.keysExamined
            try await offPool {
                _ = try kernel.rename("/d1", "/moved").value("rename /d1")
                for folder in folders.dropFirst(2) { _ = try kernel.rmdir(folder).value("rmdir \(folder)") }
            }
            #expect(fs.modes.keysExamined - before < 10_000)
            try await offPool {
                #expect(try kernel.stat("/moved/sub").value("stat").permissions == 0o750)
                #expect(try kernel.stat("/moved").value("stat").permissions == 0o700)
                #expect(try kernel.stat("/d1-b").value("stat").permissions == 0o711)
                #expect(try kernel.stat("/d0").value("stat").permissions == 0o700)
                _ = try kernel.rmdir("/moved/sub").value("rmdir /moved/sub")
                _ = try kernel.rmdir("/moved").value("rmdir /moved")
                _ = try kernel.mkdir("/moved").value("mkdir /moved")
                #expect(try kernel.stat("/moved").value("stat").permissions == fs.modes.defaultMode(isFolder: true))
                _ = try kernel.mkdir("/moved/sub").value("mkdir /moved/sub")
                #expect(try kernel.stat("/moved/sub").value("stat").permissions == fs.modes.defaultMode(isFolder: true))
            }
        }
    }
}
