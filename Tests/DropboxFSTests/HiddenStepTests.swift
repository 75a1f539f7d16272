import DropboxAPI
import DropboxEmulator
@testable import DropboxFS
import Foundation
import Testing
import TestSupport

/// A case-only rename and a folder's removal pass through a hidden name on Dropbox
/// (`.dropboxfs-rename-…`, `.dropboxfs-rmdir-…`). Whenever the step there may be done, the
/// change feed can bring the hidden entry into the store before the mount learns the outcome:
/// the view must never show that name. The senders are not run here until the view has been
/// looked at, so nothing they do while they run can hide what the view shows by itself.
@Suite("core: the hidden names of renames and removals under way", .serialized, .timeLimit(.minutes(5)))
struct HiddenStepTests {
    /// The daemon was killed after the step to the hidden name was made on Dropbox (its
    /// answer lost), and the change feed brought the hidden entry into the store: after the
    /// restart the folder showed at the hidden name, and not at its new one, until the rename
    /// was tried again (the differential suites: seeds 4877544361988228077, core, and
    /// 23706071319923442, mount, each once in a long run).
    @Test func aCaseOnlyRenameStoppedAfterItsHiddenStepShowsOnlyAtItsNewNameAfterARestart() async throws {
        try await Scratch.with { scratch in
            try await scratch.upload("x", to: "/music/song.txt")
            do {  // the daemon killed: its filesystem is dropped, what it wrote to its cache kept
                let first = try scratch.filesystem()
                try await first.watcher.catchUp()
                _ = try await offPool { try CoreKernel(fs: first).rename("/music", "/Music").value("mv music Music") }
                // Its sender's first try: the hidden name chosen, the step made, the answer lost.
                var move = try #require(first.moves.oldest)
                move = try first.moves.park(move, at: move.freshHiddenStep(sourceID: move.sourceID))
                _ = try await scratch.client.rpc(Routes.move, RelocationArgument(from: "/music", to: move.parkedAt))
                try await first.watcher.catchUp()
            }

            let second = try scratch.filesystem()
            try await second.watcher.catchUp()
            let kernel = CoreKernel(fs: second)
            #expect(try await offPool { try kernel.list("/").value("ls /") } == ["Music"])
            #expect(try await offPool { try kernel.list("/Music").value("ls /Music") } == ["song.txt"])

            try await second.namespace.sendAll()
            #expect(try await scratch.client.listAll("").map(\.name) == ["Music"])
            #expect(try await offPool { try kernel.list("/").value("ls /") } == ["Music"])
        }
    }

    /// A rename sent to Dropbox, its answer lost, and Dropbox out of reach for the look that
    /// would settle it (or the daemon killed): the change feed brings the move in before the
    /// next try (which waits up to 30 s after failures). The store has the file at its new name
    /// then, and the view looked for it at the old one: the file and the folder were gone from
    /// the view until that try.
    @Test func aRenameMadeOnDropboxWhoseAnswerWasLostShowsAtItsNewNameMeanwhile() async throws {
        try await Scratch.with { scratch in
            try await scratch.upload("a", to: "/a.txt")
            try await scratch.upload("d", to: "/dir/inside.txt")
            let fs = try scratch.filesystem()
            try await fs.watcher.catchUp()
            let kernel = CoreKernel(fs: fs)
            try await offPool {
                _ = try kernel.rename("/a.txt", "/b.txt").value("mv a.txt b.txt")
                _ = try kernel.rename("/dir", "/moved").value("mv dir moved")
            }
            // The sender's calls: made on Dropbox, their answers lost.
            _ = try await scratch.client.rpc(Routes.move, RelocationArgument(from: "/a.txt", to: "/b.txt"))
            _ = try await scratch.client.rpc(Routes.move, RelocationArgument(from: "/dir", to: "/moved"))
            try await fs.watcher.catchUp()
            #expect(try await offPool { try kernel.list("/").value("ls /") } == ["b.txt", "moved"])
            #expect(try await offPool { try kernel.list("/moved").value("ls /moved") } == ["inside.txt"])
            #expect(try await offPool { try kernel.stat("/b.txt").value("stat b.txt").size } == 1)

            try await fs.namespace.sendAll()
            #expect(try await scratch.client.listAll("").map(\.name).sorted() == ["b.txt", "moved"])
            #expect(try await offPool { try kernel.list("/").value("ls /") } == ["b.txt", "moved"])
        }
    }

    /// A removed folder's hidden step was made on Dropbox, and the round failed after it (Dropbox
    /// out of reach, or the daemon killed): the change feed brought the hidden entry in, and
    /// the view showed it until the next round set the name aside again.
    @Test func aRemovedFolderStoppedAfterItsHiddenStepNeverShows() async throws {
        try await Scratch.with { scratch in
            _ = try await scratch.client.rpc(Routes.createFolder, CreateFolderArgument(path: "/empty"))
            try await scratch.upload("k", to: "/keep.txt")
            do {
                let first = try scratch.filesystem()
                try await first.watcher.catchUp()
                _ = try await offPool { try CoreKernel(fs: first).rmdir("/empty").value("rmdir empty") }
                let removal = try #require(first.deletes.all.first)
                let hidden = removal.hiddenStep(alone: false)
                _ = try await scratch.client.rpc(Routes.move, RelocationArgument(from: "/empty", to: hidden))
                try await first.watcher.catchUp()
                #expect(try await offPool { try CoreKernel(fs: first).list("/").value("ls /") } == ["keep.txt"])
            }

            let second = try scratch.filesystem()
            try await second.watcher.catchUp()
            #expect(try await offPool { try CoreKernel(fs: second).list("/").value("ls /") } == ["keep.txt"])
            try await second.namespace.sendAll()
            #expect(try await scratch.client.listAll("").map(\.name) == ["keep.txt"])
        }
    }

    /// The same in a folder renamed after the removal, the rename not sent yet: the view
    /// reaches the folder through the rename, and showed the hidden name in it (listed,
    /// and found by its name) until the removal ended (four differential sequences at once:
    /// `.dropboxfs-rmdir-…` listed in `d`, renamed from `e` while `e/f`'s removal ran).
    @Test func aRemovedFolderInAFolderRenamedSinceNeverShowsItsHiddenStep() async throws {
        try await Scratch.with { scratch in
            _ = try await scratch.client.rpc(Routes.createFolder, CreateFolderArgument(path: "/e/f"))
            try await scratch.upload("k", to: "/e/keep.txt")
            let fs = try scratch.filesystem()
            try await fs.watcher.catchUp()
            let kernel = CoreKernel(fs: fs)
            try await offPool {
                _ = try kernel.list("/e").value("ls e")
                _ = try kernel.rmdir("/e/f").value("rmdir e/f")
                _ = try kernel.rename("/e", "/d").value("mv e d")
            }
            // The removal's sender: the step to the hidden name made, brought by the change feed.
            let removal = try #require(fs.deletes.all.first)
            let hidden = removal.hiddenStep(alone: false)
            _ = try await scratch.client.rpc(Routes.move, RelocationArgument(from: "/e/f", to: hidden))
            try await fs.watcher.catchUp()
            let hiddenName = String(hidden.split(separator: "/").last ?? "")
            #expect(try await offPool { try kernel.list("/d").value("ls d") } == ["keep.txt"])
            let found = try await offPool { kernel.stat("/d/" + hiddenName) }
            if case .failure(let error) = found { #expect(error.code == ENOENT) } else { Issue.record("stat d/\(hiddenName) found it") }

            try await fs.namespace.sendAll()
            #expect(try await scratch.client.listAll("/d").map(\.name) == ["keep.txt"])
            #expect(try await offPool { try kernel.list("/d").value("ls d") } == ["keep.txt"])
        }
    }

    /// A case-only rename's hidden step made, and learnt from the call's answer only, its
    /// entry left to the change feed (`MetadataStore.applyMove` does so when the feed brought
    /// the source again during the call and Dropbox could not be asked where it is); the next
    /// step failed (Dropbox out of reach). Its next try found the store without the hidden
    /// entry, and Dropbox holding it there, not at the new name: it dropped the rename as "gone
    /// from Dropbox", and the folder stayed at the hidden name, shown so once the feed brought
    /// it (the mount's differential suite, tree mix with outages: ".dropboxfs-rename-13-…"
    /// listed where `c` was).
    @Test func aCaseOnlyRenameWhoseHiddenStepTheStoreHasNotLearntGoesOn() async throws {
        try await Scratch.with { scratch in
            try await scratch.upload("x", to: "/music/song.txt")
            let fs = try scratch.filesystem()
            try await fs.watcher.catchUp()
            let kernel = CoreKernel(fs: fs)
            _ = try await offPool { try kernel.rename("/music", "/Music").value("mv music Music") }
            // The sender's first step: made on Dropbox, the rename advanced, the store left as it was.
            var move = try #require(fs.moves.oldest)
            move = try fs.moves.park(move, at: move.freshHiddenStep(sourceID: move.sourceID))
            let hidden = move.parkedAt
            _ = try await scratch.client.rpc(Routes.move, RelocationArgument(from: "/music", to: hidden))
            _ = try fs.moves.advance(move, from: Node.key(of: hidden)) {}

            try await fs.namespace.sendAll()
            #expect(try await scratch.client.listAll("").map(\.name) == ["Music"])
            #expect(try await scratch.client.listAll("/Music").map(\.name) == ["song.txt"])
            try await fs.watcher.catchUp()
            #expect(try await offPool { try kernel.list("/").value("ls /") } == ["Music"])
            #expect(try await offPool { try kernel.list("/Music").value("ls /Music") } == ["song.txt"])
        }
    }
}
