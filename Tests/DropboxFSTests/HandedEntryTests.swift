@testable import DropboxFS
import Foundation
import Testing
import TestSupport

/// An entry a call found or made in a folder is handed to the kernel after the call has
/// answered (`DropboxFileSystem.handOut`, `listedEntries`). The kernel keeps renames in that
/// folder out meanwhile, but not a rename of the folder itself: here each folder is renamed
/// in that gap, as a thread renaming it does in the mount's race test. The entry handed must
/// be the file at the folder's new path. (Handed at the old path, the kernel got an inode of
/// a path that was no more: in the CI, a file just made in a folder being renamed, shown by
/// `ls`, was ENOENT for a second; with 3 ms slept before each create's answer, every read
/// back of a new file in that test failed.)
@Suite("core: entries handed to the kernel after their folder moved", .serialized, .timeLimit(.minutes(5)))
struct HandedEntryTests {
    @Test func aFileMadeInAFolderRenamedBeforeTheAnswerIsTheFileAtItsNewPath() async throws {
        try await withNewFolder { fs, kernel, folder in
            let created = try #require(try fs.createWithoutWaiting(parent: folder, name: "New.txt", exclusive: true))
            _ = try await fs.write(handle: created.handle, Array("new".utf8), at: 0)
            try await fs.release(handle: created.handle)
            _ = try await offPool { try kernel.rename("/a", "/b").value("rename a to b") }
            try expectHanded(fs, fs.handOut(created.inode, created.node, in: folder), as: created.inode, at: "/b/new.txt")
        }
    }

    @Test func aFileLookedUpInAFolderRenamedBeforeTheAnswerIsTheFileAtItsNewPath() async throws {
        try await withNewFolder { fs, kernel, folder in
            _ = try await offPool { try kernel.mkdir("/a/sub").value("mkdir a/sub") }
            let found = try #require(try fs.cachedLookup(parent: folder, name: "sub"))
            _ = try await offPool { try kernel.rename("/a", "/b").value("rename a to b") }
            try expectHanded(fs, fs.handOut(found.0, found.1, in: folder), as: found.0, at: "/b/sub")
        }
    }

    /// readdirplus hands the entries of the snapshot taken at opendir: after a rename of the
    /// folder, at its new path; and a new folder made at the old path is not what it hands.
    @Test func aListingReadAfterItsFolderWasRenamedHandsTheFilesAtTheirNewPaths() async throws {
        try await withNewFolder { fs, kernel, folder in
            let fd = try await offPool { try kernel.open("/a/f", O_CREAT | O_WRONLY, 0o644).value("create a/f") }
            _ = try await offPool { try kernel.close(fd).value("close a/f") }
            let snapshot = try #require(try fs.openDirectoryWithoutWaiting(folder))
            _ = try await offPool { try kernel.rename("/a", "/b").value("rename a to b") }
            _ = try await offPool { try kernel.mkdir("/a").value("mkdir a again") }
            let again = try await offPool { try kernel.open("/a/f", O_CREAT | O_WRONLY, 0o644).value("create another a/f") }
            _ = try await offPool { try kernel.close(again).value("close the other a/f") }
            let entries = fs.listedEntries(snapshot[...], in: folder, plus: true, since: .anything)
            #expect(entries.numbers.count == 1 && entries.handed.count == 1)
            let (number, handed) = (try #require(entries.numbers.first), try #require(entries.handed.first))
            try expectHanded(fs, (number, try #require(handed)), as: fs.inodes.inode(for: "/b/f"), at: "/b/f")
            #expect(number != fs.inodes.inode(for: "/a/f"))
        }
    }

    /// readdirplus of a folder removed after it was opened (its inode detached), where a new
    /// folder with entries of the same names is made: it hands none of them, as a removed
    /// folder on a disk shows nothing. Handed, they were the new folder's entries, held by
    /// the kernel under the removed folder's inode: the new folder's own lookups then gave
    /// the kernel the same inode under a second parent, and it answered ESTALE (two mounts
    /// stressing one tree).
    @Test func aListingReadAfterItsFolderWasRemovedHandsNothing() async throws {
        try await withNewFolder { fs, kernel, folder in
            _ = try await offPool { try kernel.mkdir("/a/sub").value("mkdir a/sub") }
            let snapshot = try #require(try fs.openDirectoryWithoutWaiting(folder))
            _ = try await offPool { try kernel.rmdir("/a/sub").value("rmdir a/sub") }
            _ = try await offPool { try kernel.rmdir("/a").value("rmdir a") }
            _ = try await offPool { try kernel.mkdir("/a").value("mkdir a again") }
            _ = try await offPool { try kernel.mkdir("/a/sub").value("mkdir another a/sub") }
            let entries = fs.listedEntries(snapshot[...], in: folder, plus: true, since: SnapshotChanges(namesWent: false, storeWritten: false))
            #expect(entries.numbers.count == 1 && entries.handed == [nil], "\(entries.handed)")
        }
    }

    /// readdirplus hands each entry as the view shows it now, not as the folder's snapshot
    /// took it: a file written after the folder was opened is handed at its new size, both
    /// while its local version shows (no mark moves as it is written) and once its upload is
    /// in the store (whose write count moved). Handed at the snapshot's size, the kernel
    /// took that for the file's: a reader of a file just written got none of its new bytes.
    @Test func aListingReadAfterAFileWasWrittenHandsItsSizeNow() async throws {
        try await withNewFolder(uploading: true) { fs, kernel, folder in
            let fd = try await offPool { try kernel.open("/a/f", O_CREAT | O_WRONLY, 0o644).value("create a/f") }
            _ = try await offPool { try kernel.pwrite(fd, Array("12345".utf8), at: 0).value("write a/f") }
            _ = try await offPool { try kernel.fsync(fd).value("fsync a/f") }
            let marked = fs.store.writeCount
            let snapshot = try #require(try fs.openDirectoryWithoutWaiting(folder))
            #expect(snapshot.map(\.size) == [5])
            _ = try await offPool { try kernel.pwrite(fd, Array(" and more".utf8), at: 5).value("write a/f again") }
            let written = SnapshotChanges(namesWent: false, storeWritten: fs.store.writeCount != marked)
            #expect(fs.listedEntries(snapshot[...], in: folder, plus: true, since: written).handed.map { $0?.size } == [14])
            _ = try await offPool { try kernel.fsync(fd).value("fsync a/f again") }
            _ = try await offPool { try kernel.close(fd).value("close a/f") }
            #expect(fs.writeBack.overlay("/a/f") == nil, "uploaded: the store shows the file")
            let uploaded = SnapshotChanges(namesWent: false, storeWritten: fs.store.writeCount != marked)
            #expect(uploaded.storeWritten)
            #expect(fs.listedEntries(snapshot[...], in: folder, plus: true, since: uploaded).handed.map { $0?.size } == [14])
        }
    }

    /// The attributes of an entry handed are worked out after the entry: a rename of its
    /// folder may come between (another process renamed the folder away, while a listing
    /// and a lookup ran). The mode kept for the file (chmod 600) is the one shown, at the
    /// folder's new path and back at the old one. Looked up at the path the entry was found
    /// at, the mode was the default, 644, and the kernel kept that: a stress of processes
    /// renaming their folders while others list the tree saw its chmods undone.
    @Test func aFileListedOrLookedUpInAFolderRenamedMeanwhileShowsItsMode() async throws {
        try await withNewFolder { fs, kernel, folder in
            let fd = try await offPool { try kernel.open("/a/f", O_CREAT | O_WRONLY, 0o644).value("create a/f") }
            _ = try await offPool { try kernel.close(fd).value("close a/f") }
            _ = try await offPool { try kernel.chmod("/a/f", 0o600).value("chmod a/f") }
            let snapshot = try #require(try fs.openDirectoryWithoutWaiting(folder))
            let listed = fs.listedEntries(snapshot[...], in: folder, plus: true, since: .anything)
            let (number, handed) = (try #require(listed.numbers.first), try #require(listed.handed.first ?? nil))
            let found = try #require(try fs.cachedLookup(parent: folder, name: "f"))
            _ = try await offPool { try kernel.rename("/a", "/b").value("rename a to b") }
            #expect(fs.attributes(number, handed).st_mode & 0o777 == 0o600, "listed, then the folder renamed")
            #expect(fs.attributes(found.0, found.1).st_mode & 0o777 == 0o600, "looked up, then the folder renamed")
            let again = try #require(try fs.cachedLookup(parent: folder, name: "f"))
            _ = try await offPool { try kernel.rename("/b", "/a").value("rename b back to a") }
            #expect(fs.attributes(again.0, again.1).st_mode & 0o777 == 0o600, "looked up, then the folder renamed back")
        }
    }

    /// A folder `/a` made here and listed, its inode, and a kernel to rename it with; with the
    /// uploader running when `uploading` (an fsync waits for it).
    private func withNewFolder(uploading: Bool = false,
                               _ body: @escaping @Sendable (DropboxFileSystem, CoreKernel, UInt64) async throws -> Void) async throws {
        try await Scratch.with { scratch in
            let fs = try scratch.filesystem()
            if uploading { scratch.startUploader(fs) }
            try await fs.watcher.catchUp()
            let kernel = CoreKernel(fs: fs)
            _ = try await offPool { try kernel.mkdir("/a").value("mkdir a") }
            try await body(fs, kernel, fs.inodes.inode(for: "/a"))
        }
    }

    /// The entry handed is the inode given, at the path given, and the core finds its file
    /// by that inode (as the kernel's next open of it asks).
    private func expectHanded(_ fs: DropboxFileSystem, _ handed: (inode: UInt64, node: Node), as inode: UInt64, at path: String) throws {
        #expect(handed.inode == inode)
        #expect(handed.node.pathLower == path)
        #expect(try fs.node(handed.inode).pathLower == path)
    }
}
