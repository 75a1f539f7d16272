@testable import DropboxFS
import DropboxAPI
import Foundation
import Testing
import TestSupport

/// A folder held open (opendir) that another client removes after it was renamed here, and
/// puts a folder of theirs at its old name: the core knows it only as it was opened, at its
/// old path, while its inode has the new one.
@Suite("core: an open folder removed elsewhere", .serialized, .timeLimit(.minutes(5)))
struct OpenFolderGoneTests {
    /// mkdir and create in it answer ENOENT, as in a removed folder still open on a disk.
    /// They started again on the path mismatch until they gave up with EAGAIN after 10,000
    /// starts (two mounts stressing one tree), failed before.
    @Test func entriesMadeInAnOpenFolderRemovedElsewhereAreRefusedWithENOENT() async throws {
        try await Scratch.with { scratch in
            let fs = try scratch.filesystem()
            try await fs.watcher.catchUp()
            let (folder, _) = try await fs.makeDirectory(parent: InodeTable.root, name: "d")
            _ = try await fs.openDirectory(folder)
            try await fs.rename(parent: InodeTable.root, name: "d", newParent: InodeTable.root, newName: "e", noReplace: false)
            try await fs.namespace.sendAll()
            // Removed, and a folder of theirs at its old name.
            _ = try await scratch.client.rpc(Routes.delete, DeleteArgument(path: "/e"))
            _ = try await scratch.client.rpc(Routes.createFolder, CreateFolderArgument(path: "/d"))
            try await fs.watcher.catchUp()
            await #expect(throws: FSError.notFound) { try await fs.makeDirectory(parent: folder, name: "x") }
            await #expect(throws: FSError.notFound) { try await fs.create(parent: folder, name: "y", exclusive: true) }
        }
    }
}
