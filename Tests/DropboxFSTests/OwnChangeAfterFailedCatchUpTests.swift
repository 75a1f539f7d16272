import DropboxAPI
@testable import DropboxFS
import Foundation
import Testing
import TestSupport

/// A change the mount made is applied to the store by the catch-up after it, or, that
/// catch-up failing, as the call returned it (`ChangeWatcher.catchUp(after:)`). A catch-up
/// that read a page before failing may have brought the path as it is now, another client's
/// later change included: the change must not be applied over it.
@Suite("core: an own change after a catch-up that failed half-way", .serialized, .timeLimit(.minutes(5)))
struct OwnChangeAfterFailedCatchUpTests {
    /// A folder made here and removed by another client at once; the catch-up after the
    /// mkdir reads the page with the removal (pages of 2), then fails on the next. Applied as
    /// the call returned it, the folder came back, and stayed for good: the feed, already
    /// past the removal, never told of it again.
    @Test func aFolderRemovedElsewhereStaysRemovedWhenTheCatchUpFailsAfterThePageThatSaidSo() async throws {
        try await Scratch.with { scratch in
            let fs = try scratch.filesystem()
            try await fs.watcher.catchUp()
            #expect(try await offPool { try CoreKernel(fs: fs).list("/").value("ls /") } == [])
            let cursor = try await scratch.client.rpc(Routes.getLatestCursor, ListFolderArgument(path: "", recursive: true, limit: 2)).cursor
            try fs.store.setValue("cursor", cursor)

            let made = try await scratch.client.rpc(Routes.createFolder, CreateFolderArgument(path: "/a")).metadata
            _ = try await scratch.client.rpc(Routes.delete, DeleteArgument(path: "/a"))
            for name in ["z1", "z2", "z3"] { try await scratch.upload(name, to: "/\(name)") }
            // The first page (/a removed, /z1) comes; the second fails, and is not retried.
            try scratch.emulator.replaceFaults(["403:skip=1,routes=files/list_folder/continue"])
            let caughtUp = await fs.watcher.catchUp(after: [.folder(made)])
            #expect(!caughtUp)
            #expect(try fs.store.node("/z1") != nil)  // the first page was applied
            #expect(try fs.store.node("/a") == nil)

            try scratch.emulator.replaceFaults([])
            try await fs.watcher.catchUp()
            #expect(try fs.store.node("/a") == nil)
            #expect(try await offPool { try CoreKernel(fs: fs).list("/").value("ls /") } == ["z1", "z2", "z3"])
        }
    }
}
