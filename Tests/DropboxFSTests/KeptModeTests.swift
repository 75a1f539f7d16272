import DropboxAPI
@testable import DropboxFS
import Foundation
import Synchronization
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

    /// Another client's move comes as the removal at the old path and the entry at the new
    /// one, which pages of the change feed may split (here one row a page; `source` sorts
    /// before the new path, so its removal comes first, or after it): the mode kept here goes
    /// along all the same. Before, the page that ended after the removal dropped the mode
    /// (the concurrent differential suite, three rows a page: a file of mode 600 moved by
    /// another client showed 644 at its new name).
    @Test(arguments: ["/b.txt", "/z.txt"])
    func aModeFollowsAnotherClientsMoveThatPagesOfTheFeedSplit(source: String) async throws {
        try await Scratch.with { scratch in
            _ = try await scratch.client.rpc(Routes.createFolder, CreateFolderArgument(path: "/d"))
            try await scratch.upload("x", to: source)
            let fs = try scratch.filesystem()
            try await fs.watcher.catchUp()
            let kernel = CoreKernel(fs: fs)
            _ = try await offPool { try kernel.chmod(source, 0o600).value("chmod") }
            let cursor = try await scratch.client.rpc(Routes.getLatestCursor, ListFolderArgument(path: "", recursive: true, limit: 1)).cursor
            try fs.store.setValue("cursor", cursor)
            _ = try await scratch.client.rpc(Routes.move, RelocationArgument(from: source, to: "/d/moved.txt"))
            try await fs.watcher.catchUp()
            #expect(try await offPool { try kernel.stat("/d/moved.txt").value("stat").permissions } == 0o600)
            #expect(try await offPool { kernel.stat(source) }.map { _ in true } != .success(true))
        }
    }

    /// Another client removed a file with a mode kept here, in a page of the change feed that
    /// was not the last: whether it moved the file (its arrival in the next page) was not
    /// known yet, and the removal waited for that page, and then dropped whatever was kept at
    /// the name by then: the mode of a file made here between the two pages, with the same
    /// name (concurrent differential, three rows a page: `open(e, O_CREAT|O_EXCL, 0600)`
    /// after `e` went elsewhere showed 644). The mode here is set between the pages.
    @Test func aRemovalByAnotherClientLeavesTheModeOfAFileMadeHereSinceUnderItsName() async throws {
        try await Scratch.with { scratch in
            try await scratch.upload("x", to: "/e")
            let fs = try scratch.filesystem()
            try await fs.watcher.catchUp()
            let kernel = CoreKernel(fs: fs)
            _ = try await offPool { try kernel.chmod("/e", 0o755).value("chmod") }
            let cursor = try await scratch.client.rpc(Routes.getLatestCursor, ListFolderArgument(path: "", recursive: true, limit: 1)).cursor
            try fs.store.setValue("cursor", cursor)
            _ = try await scratch.client.rpc(Routes.delete, DeleteArgument(path: "/e"))
            try await scratch.upload("y", to: "/z")  // a page after the removal's
            let madeBetween = Mutex(false)
            fs.watcher.setCoreListener { [weak fs] changes, page, last in
                guard let fs else { return }
                fs.modesFollow(changes, page: page, last: last)
                guard !last, changes.contains(where: { $0.pathLower == "/e" && $0.new == nil }) else { return }
                // As a FUSE thread does it, while the feed's next page is on its way (nothing
                // here waits: the root is listed).
                let made = try? fs.createWithoutWaiting(parent: InodeTable.root, name: "e", exclusive: true, mode: 0o600)
                let closed = made.map { (try? fs.releaseWithoutWaiting(handle: $0.handle)) == true } ?? false
                madeBetween.withLock { $0 = closed }
            }
            try await fs.watcher.catchUp()
            #expect(madeBetween.withLock { $0 })
            #expect(try await offPool { try kernel.stat("/e").value("stat").permissions } == 0o600)
        }
    }

    /// Every write by a user other than root asks whether the file has set-ID bits to clear
    /// (`clearSetIDBits`): answered from a count unless some kept mode has one, by name or by
    /// the inode of an open file whose name went. The count follows chmod, rename and unlink.
    @Test func writesLookForSetIDBitsOnlyWhileSomeFileHasThem() async throws {
        try await Scratch.with { scratch in
            let fs = try scratch.filesystem()
            try await fs.watcher.catchUp()
            let kernel = CoreKernel(fs: fs)
            let held: UInt64 = try await offPool {
                for name in ["a", "b"] { _ = try kernel.close(try kernel.open("/\(name)", O_CREAT | O_WRONLY, 0o644).value("create")).value("close") }
                _ = try kernel.chmod("/a", 0o700).value("chmod")
                #expect(!fs.modes.keepsSetIDBits, "modes kept, none with a set-ID bit")
                _ = try kernel.chmod("/a", 0o4755).value("chmod")
                _ = try kernel.chmod("/b", 0o2775).value("chmod")
                #expect(fs.modes.keepsSetIDBits)
                _ = try kernel.chmod("/b", 0o775).value("chmod")
                _ = try kernel.rename("/a", "/c").value("rename")
                #expect(fs.modes.keepsSetIDBits, "moved with its file")
                let descriptor = try kernel.open("/c", O_RDONLY, 0).value("open")
                _ = try kernel.unlink("/c").value("unlink")
                #expect(fs.modes.keepsSetIDBits, "kept by the inode of the open file")
                let status = try kernel.fstat(descriptor).value("fstat")
                #expect(status.permissions == 0o4755)
                _ = try kernel.close(descriptor).value("close")
                return status.inode
            }
            fs.modes.forget(held)  // the kernel let go of it
            #expect(!fs.modes.keepsSetIDBits)
        }
    }

    /// `tar x` as root creates each file 0600 and sets its mode (0644 here) before closing it:
    /// the store was written twice a file, for a mode that ends as the default. A new file's
    /// mode now goes to the store once, when the file is sealed (before its queue record, so
    /// that a queued file never comes back from a crash without it); one renamed or removed
    /// before its close goes with the rename or removal. Counted, not timed.
    @Test func aNewFilesModeGoesToTheStoreOnceWhenTheFileIsSealed() async throws {
        try await Scratch.with { scratch in
            let fs = try scratch.filesystem()
            try await fs.watcher.catchUp()
            let root = InodeTable.root
            let writes = { fs.store.modeWritesMade }
            let shown = { (path: String, inode: UInt64) in fs.modes.shown(of: path, inode: inode, attached: true, isFolder: false).mode }

            // As tar x: created 0600, set to the default before the close.
            let before = writes()
            let tarred = try await fs.create(parent: root, name: "tarred.c", exclusive: true, mode: 0o600)
            _ = try fs.setAttributesWithoutWaiting(tarred.inode, modified: nil, mode: 0o644)
            try await fs.release(handle: tarred.handle)
            #expect(writes() == before)
            #expect(try fs.store.modes()["/tarred.c"] == nil)
            #expect(shown("/tarred.c", tarred.inode) == 0o644)

            // A secret: 0600 in the store by the time its close returns.
            let secret = try await fs.create(parent: root, name: "secret.txt", exclusive: true, mode: 0o600)
            #expect(shown("/secret.txt", secret.inode) == 0o600)
            try await fs.release(handle: secret.handle)
            #expect(writes() == before + 1)
            #expect(try fs.store.modes()["/secret.txt"] == 0o600)
            // A chmod of a sealed file goes to the store at once, as before.
            _ = try fs.setAttributesWithoutWaiting(secret.inode, modified: nil, mode: 0o640)
            #expect(try fs.store.modes()["/secret.txt"] == 0o640)

            // Renamed while still open: the store holds the mode at the new name, not the old.
            let renamed = try await fs.create(parent: root, name: "draft.txt", exclusive: true, mode: 0o700)
            try await fs.rename(parent: root, name: "draft.txt", newParent: root, newName: "final.txt", noReplace: false)
            #expect(try fs.store.modes()["/final.txt"] == 0o700)
            #expect(try fs.store.modes()["/draft.txt"] == nil)
            try await fs.release(handle: renamed.handle)
            #expect(try fs.store.modes()["/final.txt"] == 0o700)
            #expect(shown("/final.txt", renamed.inode) == 0o700)

            // Removed while still open: nothing of it stays in the store.
            let removed = try await fs.create(parent: root, name: "gone.txt", exclusive: true, mode: 0o600)
            try await fs.remove(parent: root, name: "gone.txt", folder: false)
            try await fs.release(handle: removed.handle)
            #expect(try fs.store.modes()["/gone.txt"] == nil)
        }
    }

    /// A chown is kept as a mode is: `stat` shows it, a rename takes it along (below a folder
    /// too), a descriptor open on a removed file keeps it, and a chown back to the mount's
    /// owner keeps nothing (a remount: `ModeTests`). Before, a chown changed nothing that
    /// `stat` showed (`cp -a`, `rsync -a` and `tar xp` as root lost owners).
    @Test func chownIsKeptAsAModeIs() async throws {
        try await Scratch.with { scratch in
            let fs = try scratch.filesystem()
            try await fs.watcher.catchUp()
            let root = InodeTable.root
            let owners = { (inode: UInt64) throws -> [UInt32] in
                let shown = fs.attributes(inode, try fs.node(inode))
                return [shown.st_uid, shown.st_gid]
            }
            let mine = [getuid(), getgid()]
            let file = try await fs.create(parent: root, name: "owned.txt", exclusive: true, mode: 0o644)
            try await fs.release(handle: file.handle)
            #expect(try owners(file.inode) == mine)
            _ = try fs.setAttributesWithoutWaiting(file.inode, modified: nil, uid: 1234, gid: 5678)
            #expect(try owners(file.inode) == [1234, 5678])
            // chown -1: the other id stays.
            _ = try fs.setAttributesWithoutWaiting(file.inode, modified: nil, gid: 42)
            #expect(try owners(file.inode) == [1234, 42])
            #expect(try fs.store.keptAttributes()["/owned.txt"] == KeptAttributes(mode: 0o644, uid: 1234, gid: 42))

            // A folder's and a file's below it go along with the folder's rename.
            let folder = try await fs.makeDirectory(parent: root, name: "dir", mode: 0o755).0
            let inside = try await fs.create(parent: folder, name: "in.txt", exclusive: true, mode: 0o644)
            try await fs.release(handle: inside.handle)
            _ = try fs.setAttributesWithoutWaiting(folder, modified: nil, uid: 7)
            _ = try fs.setAttributesWithoutWaiting(inside.inode, modified: nil, uid: 8, gid: 9)
            try await fs.rename(parent: root, name: "dir", newParent: root, newName: "moved", noReplace: false)
            let kept = try fs.store.keptAttributes()
            #expect(kept["/moved"]?.uid == 7 && kept["/moved/in.txt"] == KeptAttributes(mode: 0o644, uid: 8, gid: 9))
            #expect(kept["/dir"] == nil && kept["/dir/in.txt"] == nil)
            #expect(try owners(folder) == [7, mine[1]])

            // Removed while open: the descriptor's file keeps its owner, the name keeps nothing.
            let held = try fs.open(file.inode, writable: false)
            try await fs.remove(parent: root, name: "owned.txt", folder: false)
            #expect(try owners(file.inode) == [1234, 42])
            #expect(try fs.store.keptAttributes()["/owned.txt"] == nil)
            try await fs.release(handle: held.handle)

            // Back to the mount's owner and group: nothing kept.
            let back = try await fs.lookup(parent: folder, name: "in.txt")
            _ = try fs.setAttributesWithoutWaiting(back.0, modified: nil, uid: mine[0], gid: mine[1])
            #expect(try fs.store.keptAttributes()["/moved/in.txt"] == nil)
            #expect(try owners(back.0) == mine)
        }
    }

    /// A cache from before owners were kept (its modes table without their columns): its
    /// modes stay, and owners are kept from then on.
    @Test func aCacheFromBeforeOwnersKeepsItsModesAndGainsOwners() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("store-\(UUID().uuidString).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) } }
        let old = try await ProcessRunner.run("/usr/bin/sqlite3", [path, """
            CREATE TABLE modes (path_lower TEXT PRIMARY KEY, mode INTEGER NOT NULL) WITHOUT ROWID;
            INSERT INTO modes VALUES ('/run.sh', 493);
            """])
        #expect(old.status == 0, "\(old)")
        let store = try MetadataStore(path: path)
        #expect(try store.keptAttributes() == ["/run.sh": KeptAttributes(mode: 0o755)])
        try store.replaceKept(removing: [], setting: [(path: "/given", kept: KeptAttributes(mode: 0o644, uid: 7))])
        #expect(try store.keptAttributes()["/given"] == KeptAttributes(mode: 0o644, uid: 7))
    }

    /// A cache from before extended attributes were kept (modes and owners, no attribute
    /// column): what it kept stays, and attributes are kept from then on, bytes as given,
    /// across a reopening of the store.
    @Test func aCacheFromBeforeExtendedAttributesGainsThem() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("store-\(UUID().uuidString).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) } }
        let old = try await ProcessRunner.run("/usr/bin/sqlite3", [path, """
            CREATE TABLE modes (path_lower TEXT PRIMARY KEY, mode INTEGER NOT NULL, uid INTEGER, gid INTEGER) WITHOUT ROWID;
            INSERT INTO modes VALUES ('/run.sh', 493, 7, NULL);
            """])
        #expect(old.status == 0, "\(old)")
        let attributes: [String: [UInt8]] = ["user.a": [0, 255, 10], "user.empty": [], "user.\u{E9}": Array(repeating: 7, count: 3000)]
        do {
            let store = try MetadataStore(path: path)
            #expect(try store.keptAttributes() == ["/run.sh": KeptAttributes(mode: 0o755, uid: 7)])
            try store.replaceKept(removing: [], setting: [(path: "/tagged", kept: KeptAttributes(mode: 0o644, user: attributes))])
        }
        let reopened = try MetadataStore(path: path)
        #expect(try reopened.keptAttributes()["/tagged"] == KeptAttributes(mode: 0o644, user: attributes))
        #expect(UserAttributes.decoded(Array(UserAttributes.encoded(attributes).dropLast(5))) == ["user.a": [0, 255, 10], "user.empty": []])
    }
}
