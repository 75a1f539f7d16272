@testable import DropboxFS
import DropboxAPI
import Foundation
import Testing
import TestSupport

/// A new entry at a name whose inode the kernel still holds for what was there before (the
/// view lost it without the inode being detached: here the core has no FUSE adapter to
/// detach it, in the mount a race with the change feed did the same) gets an inode of its
/// own, of its own kind.
@Suite("core: new entries at a name the kernel holds", .serialized, .timeLimit(.minutes(5)))
struct NewEntryInodeTests {
    /// A file made where a folder the kernel holds (open, as `ls` holds it) was removed
    /// elsewhere: it took the folder's inode and was answered as the folder, which the
    /// kernel refuses for a create (EIO; two mounts stressing one tree).
    @Test func aFileMadeWhereAHeldFolderWasRemovedGetsAnInodeOfItsOwn() async throws {
        try await Scratch.with { scratch in
            let fs = try scratch.filesystem()
            try await fs.watcher.catchUp()
            let made = try await fs.makeDirectory(parent: InodeTable.root, name: "d")
            let folder = fs.handOut(made.0, made.1, in: InodeTable.root).inode
            _ = try await fs.openDirectory(folder)
            try await fs.namespace.sendAll()
            _ = try await scratch.client.rpc(Routes.delete, DeleteArgument(path: "/d"))
            try await fs.watcher.catchUp()
            let created = try await fs.create(parent: InodeTable.root, name: "d", exclusive: true)
            let handed = fs.handOut(created.inode, created.node, in: InodeTable.root)
            #expect(handed.inode != folder)
            #expect(!handed.node.isFolder)
            #expect(try !fs.node(handed.inode).isFolder)
        }
    }

    /// The same for a folder made there.
    @Test func aFolderMadeWhereAHeldFileWasRemovedGetsAnInodeOfItsOwn() async throws {
        try await Scratch.with { scratch in
            let fs = try scratch.filesystem()
            try await fs.watcher.catchUp()
            let created = try await fs.create(parent: InodeTable.root, name: "d", exclusive: true)
            let file = fs.handOut(created.inode, created.node, in: InodeTable.root).inode
            try await fs.release(handle: created.handle)
            scratch.startUploader(fs)
            #expect(await fs.uploader.drain() == nil)
            _ = try await scratch.client.rpc(Routes.delete, DeleteArgument(path: "/d"))
            try await fs.watcher.catchUp()
            let made = try await fs.makeDirectory(parent: InodeTable.root, name: "d")
            let handed = fs.handOut(made.0, made.1, in: InodeTable.root)
            #expect(handed.inode != file)
            #expect(handed.node.isFolder)
            #expect(try fs.node(handed.inode).isFolder)
        }
    }
}
