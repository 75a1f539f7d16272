import DropboxAPI
import DropboxEmulator
@testable import DropboxFS
import Foundation
import Synchronization
import Testing
import TestSupport

/// A new folder or a removal shows from its pending queue until Dropbox has done it and the
/// store has caught up; then it leaves the queue (`Handoffs`). A look at a path reads both,
/// one after the other: one that read the store just before it caught up and the queue just
/// after the entry left found neither. In the CI, a `cp -r` into the mount failed with ENOENT
/// on the 48th file of a folder it had just made, as the folder's round ended (the machine
/// loaded, the reading thread preempted between its two reads). Here threads look without
/// pause, on a machine kept busy, while each change is handed over; not one look may see it
/// wrong. (Before the fix, 8 to 23 lookups of 150 rounds went wrong in each test.)
@Suite("core: what a path shows while its change reaches Dropbox", .serialized, .timeLimit(HangGuard.cpuHeavySuite))
struct HandoffTests {
    /// Rounds, each one change sent while it is looked at.
    static let rounds = 150

    @Test func aNewFolderShowsThroughoutItsMaking() async throws {
        try await Scratch.with { scratch in
            let fs = try scratch.filesystem()
            try await fs.watcher.catchUp()
            let kernel = CoreKernel(fs: fs)
            let looks = Looks()
            for round in 0..<Self.rounds {
                let name = "new-\(round)"
                _ = try await offPool { try kernel.mkdir("/" + name).value("mkdir \(name)") }
                try await looks.during({ try await fs.namespace.sendAll() },
                                       lookup: { (try? fs.cachedLookup(parent: InodeTable.root, name: name)) != nil },
                                       listing: { (try? fs.visibleChildren(""))?.contains { $0.name == name } == true })
            }
            #expect(try await scratch.client.listAll("").count == Self.rounds)
            #expect(looks.wrong.load(ordering: .relaxed) == 0, "\(looks.summary) missed a folder being made")
        }
    }

    @Test func aRemovedFileStaysGoneThroughoutItsRemoval() async throws {
        try await Scratch.with { scratch in
            for round in 0..<Self.rounds { try await scratch.upload("\(round)", to: "/old-\(round).txt") }
            let fs = try scratch.filesystem()
            try await fs.watcher.catchUp()
            let kernel = CoreKernel(fs: fs)
            let looks = Looks()
            for round in 0..<Self.rounds {
                let name = "old-\(round).txt"
                _ = try await offPool { try kernel.unlink("/" + name).value("rm \(name)") }
                try await looks.during({ try await fs.namespace.sendAll() },
                                       lookup: { (try? fs.cachedLookup(parent: InodeTable.root, name: name)) == nil },
                                       listing: { (try? fs.visibleChildren(""))?.contains { $0.name == name } == false })
            }
            #expect(try await scratch.client.listAll("").isEmpty)
            #expect(looks.wrong.load(ordering: .relaxed) == 0, "\(looks.summary) saw a removed file")
        }
    }

    /// A new file shows from its local version until its upload is in the store; a listing
    /// read the store first and the local versions after, and missed the file when its upload
    /// ended in between (a lookup looks at local versions first: it never did). Each file is
    /// alone in a folder of its own: short listings, many of them. (Before the fix, it failed
    /// in each of four runs.)
    @Test func aNewFileIsListedThroughoutItsUpload() async throws {
        try await Scratch.with { scratch in
            let fs = try scratch.filesystem()
            try await fs.watcher.catchUp()
            let kernel = CoreKernel(fs: fs)
            scratch.startUploader(fs)
            let looks = Looks()
            for round in 0..<Self.rounds {
                let (folder, name) = ("/folder-\(round)", "file.txt")
                _ = try await offPool {
                    _ = try kernel.mkdir(folder).value("mkdir \(folder)")
                    let fd = try kernel.open(folder + "/" + name, O_CREAT | O_WRONLY).value("create \(name)")
                    _ = try kernel.pwrite(fd, Array("\(round)".utf8), at: 0).value("write \(name)")
                    _ = try kernel.close(fd).value("close \(name)")
                }
                try await fs.namespace.sendAll()
                let parent = fs.inodes.inode(for: folder)
                // The fsync of a closed file returns once its upload is in the store.
                try await looks.during({ _ = try await offPool {
                                           let fd = try kernel.open(folder + "/" + name, O_RDONLY).value("open \(name)")
                                           _ = try kernel.fsync(fd).value("fsync \(name)")
                                           _ = try kernel.close(fd).value("close \(name)")
                                       } },
                                       lookup: { (try? fs.cachedLookup(parent: parent, name: name)) != nil },
                                       listing: { (try? fs.visibleChildren(folder))?.map(\.name) == [name] })
            }
            #expect(try await scratch.client.listAll("", recursive: true).filter { $0.name == "file.txt" }.count == Self.rounds)
            #expect(looks.wrong.load(ordering: .relaxed) == 0, "\(looks.summary) missed a file being uploaded")
        }
    }

    /// A descriptor opened on a file's revision follows what this mount writes to the file
    /// through another, before, during and after the upload. (Its first read after the write
    /// looked at the store's revision, then asked whether the path had a local version: an
    /// upload ending in between would have read the old bytes once. That look now asks in the
    /// handoff's order; this test did not catch the old one, whose window is one read wide.)
    @Test func anOpenFileFollowsAnotherDescriptorsWritesThroughoutTheirUpload() async throws {
        try await Scratch.with { scratch in
            for round in 0..<Self.rounds { try await scratch.upload("old \(round)", to: "/edited-\(round).txt") }
            let fs = try scratch.filesystem()
            try await fs.watcher.catchUp()
            let kernel = CoreKernel(fs: fs)
            scratch.startUploader(fs)
            let looks = Looks()
            for round in 0..<Self.rounds {
                let path = "/edited-\(round).txt"
                let new = Array("new \(round)".utf8)
                let reader = try await offPool { () throws -> Int32 in
                    let reader = try kernel.open(path, O_RDONLY).value("open \(path)")
                    #expect(try kernel.pread(reader, count: 100, at: 0).value("read \(path)") == Array("old \(round)".utf8))
                    let writer = try kernel.open(path, O_WRONLY | O_TRUNC).value("open \(path) to write")
                    _ = try kernel.pwrite(writer, new, at: 0).value("write \(path)")
                    _ = try kernel.close(writer).value("close \(path)")
                    return reader
                }
                let read: @Sendable () -> Bool = { (try? kernel.pread(reader, count: 100, at: 0).value("read \(path)")) == new }
                try await looks.during({ _ = try await offPool {
                                           let fd = try kernel.open(path, O_RDONLY).value("open \(path)")
                                           _ = try kernel.fsync(fd).value("fsync \(path)")
                                           _ = try kernel.close(fd).value("close \(path)")
                                       } },
                                       lookup: read, listing: read)
                _ = try await offPool { try kernel.close(reader).value("close \(path)") }
            }
            #expect(looks.wrong.load(ordering: .relaxed) == 0, "\(looks.summary) read the old bytes")
        }
    }

    /// A mkdir of a name another client took meanwhile: Dropbox answers that the folder is
    /// there, and the store has it once a catch-up brings it. With the change feed failing,
    /// the folder left its queue all the same, and was gone from the mount until a catch-up
    /// worked (ENOENT for it and everything made in it).
    @Test func aFolderFoundOnDropboxStaysUntilTheStoreHasIt() async throws {
        try await Scratch.with { scratch in
            let fs = try scratch.filesystem()
            try await fs.watcher.catchUp()
            let kernel = CoreKernel(fs: fs)
            #expect(try await offPool { try kernel.list("/").value("ls /") } == [])
            _ = try await scratch.client.rpc(Routes.createFolder, CreateFolderArgument(path: "/Taken"))
            _ = try await offPool { try kernel.mkdir("/taken").value("mkdir taken") }
            try scratch.emulator.replaceFaults(["503:p=1,routes=files/list_folder/continue"])
            try await fs.folderSender.sendAll()  // one round
            #expect(try await offPool { try kernel.stat("/taken").value("stat taken") }.isDirectory)
            try scratch.emulator.replaceFaults([])
            try await Reachability.probing { try await fs.watcher.catchUp() }  // as the watcher finds Dropbox back
            try await fs.namespace.sendAll()
            #expect(try await offPool { try kernel.list("/").value("ls /") } == ["Taken"])
            #expect(fs.folders.total == 0)
        }
    }

    /// Looks counted by whether they saw what they should.
    final class Looks: Sendable {
        let wrong = Atomic<Int>(0)
        private let lookups = Atomic<Int>(0)
        private let listings = Atomic<Int>(0)
        private let looking = Atomic<Bool>(false)

        var summary: String {
            "\(wrong.load(ordering: .relaxed)) of \(lookups.load(ordering: .relaxed)) lookups and \(listings.load(ordering: .relaxed)) listings"
        }

        /// Runs `change` while threads look (each look true when it saw what it should):
        /// a lookup thread, a listing thread and a spinning thread a core, which keep the
        /// scheduler preempting the readers mid-look as a loaded machine does.
        func during(_ change: () async throws -> Void, lookup: @escaping @Sendable () -> Bool,
                    listing: @escaping @Sendable () -> Bool) async throws {
            looking.store(true, ordering: .relaxed)
            let cores = ProcessInfo.processInfo.activeProcessorCount
            let threads = (0..<cores).map { _ in spin { } }
                + (0..<cores).map { _ in spin { self.count(lookup(), listing: false) } }
                + (0..<cores).map { _ in spin { self.count(listing(), listing: true) } }
            var failure: (any Error)?
            do { try await change() } catch { failure = error }
            looking.store(false, ordering: .relaxed)
            for thread in threads { await thread.value }
            if let failure { throw failure }
        }

        private func count(_ right: Bool, listing: Bool) {
            if !right { wrong.add(1, ordering: .relaxed) }
            if listing { listings.add(1, ordering: .relaxed) } else { lookups.add(1, ordering: .relaxed) }
        }

        /// `body` again and again on a thread of its own (`offPool`), until `change` has ended.
        private func spin(_ body: @escaping @Sendable () -> Void) -> Task<Void, Never> {
            Task.detached { try? await offPool { while self.looking.load(ordering: .relaxed) { body() } } }
        }
    }
}
