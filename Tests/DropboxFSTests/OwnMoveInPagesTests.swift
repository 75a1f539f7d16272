import DropboxAPI
@testable import DropboxFS
import Foundation
import Testing
import TestSupport

/// A folder's move made here is told by the change feed as one row per entry at each end:
/// each entry's removal at the old path and its entry at the new one, in path order. A move
/// of a folder of 1,200 entries is 2,400 rows, more than a page holds (2,000), and a catch-up
/// running while the move's call is under way (an upload's, say) applies it page by page.
/// Between two pages the store must never show less of the folder than it had: the mount's
/// race test found a file of the folder ENOENT for a moment, and listed the next moment.
@Suite("core: the change feed brings a move made here in several pages", .serialized, .timeLimit(.minutes(5)))
struct OwnMoveInPagesTests {
    static let names = (0..<12).map { String(format: "f%02d", $0) }

    /// The move under way as the sender makes it (its landing begun, the call in flight),
    /// Dropbox made it, and the feed read five rows a page: after every page, each entry of
    /// the folder shows at its new name, and the listing has them all. `source` sorts before
    /// the target (its removals come first: they took the folder's entries from the store,
    /// and the entries at the new name came pages later) or after it.
    @Test(arguments: ["/big", "/zz"])
    func aFolderMovedHereShowsWholeBetweenThePagesThatBringItsMove(source: String) async throws {
        try await Scratch.with { scratch in
            for name in Self.names { try await scratch.upload(name, to: "\(source)/\(name)") }
            let fs = try scratch.filesystem()
            try await fs.watcher.catchUp()
            let kernel = CoreKernel(fs: fs)
            #expect(try await offPool { try kernel.list(source).value("ls") } == Self.names)
            var cursor = try await scratch.client.rpc(Routes.getLatestCursor, ListFolderArgument(path: "", recursive: true, limit: 5)).cursor
            try fs.store.setValue("cursor", cursor)

            _ = try await offPool { try kernel.rename(source, "/moved").value("mv") }
            let move = try #require(fs.moves.oldest)
            let id = try #require(try fs.store.node(source)?.id)
            let landing = try fs.store.beginLanding(from: source, to: "/moved", id: id)
            fs.moves.setInFlight([move.id: "/moved"])
            _ = try await scratch.client.rpc(Routes.move, RelocationArgument(from: source, to: "/moved"))

            var pages = 0, wrong: [String] = []
            while true {
                let page = try await scratch.client.rpc(Routes.listFolderContinue, CursorArgument(cursor: cursor))
                _ = try fs.store.apply(page.entries, fromChangeFeed: true)
                cursor = page.cursor
                try fs.store.setValue("cursor", cursor)
                pages += 1
                for name in Self.names where try fs.node(at: "/moved/" + name) == nil { wrong.append("page \(pages): /moved/\(name) not found") }
                let listed = try fs.visibleChildren("/moved").map(\.name)
                if listed != Self.names { wrong.append("page \(pages): /moved lists \(listed)") }
                if !page.hasMore { break }
            }
            #expect(pages > 2)
            #expect(wrong.isEmpty, "\(wrong)")

            fs.moves.setInFlight([:])
            fs.store.endLanding(landing)
            // The sender finds the move made (by the folder's id) and the rename leaves the queue.
            try await fs.namespace.sendAll()
            #expect(fs.moves.isEmpty)
            #expect(try await offPool { try kernel.list("/moved").value("ls") } == Self.names)
            #expect(try await offPool { try kernel.list("/").value("ls") } == ["moved"])
            #expect(try await scratch.client.listAll("/moved").map(\.name).sorted() == Self.names)
        }
    }

    /// A catch-up stopped after the page with the source's removal (Dropbox out of reach):
    /// the move's answer puts its entry, with the name it was given, on what was taken along.
    @Test func theMovesAnswerNamesWhatWasTakenAlong() async throws {
        try await Scratch.with { scratch in
            for name in Self.names { try await scratch.upload(name, to: "/big/\(name)") }
            let fs = try scratch.filesystem()
            try await fs.watcher.catchUp()
            #expect(try await offPool { try CoreKernel(fs: fs).list("/big").value("ls") } == Self.names)
            let cursor = try await scratch.client.rpc(Routes.getLatestCursor, ListFolderArgument(path: "", recursive: true, limit: 5)).cursor
            let landing = try fs.store.beginLanding(from: "/big", to: "/moved", id: try #require(try fs.store.node("/big")?.id))
            let entry = try await scratch.client.rpc(Routes.move, RelocationArgument(from: "/big", to: "/Moved")).metadata
            let page = try await scratch.client.rpc(Routes.listFolderContinue, CursorArgument(cursor: cursor))
            _ = try fs.store.apply(page.entries, fromChangeFeed: true)
            #expect(try fs.store.node("/moved/f11") != nil)
            try fs.store.applyMove(from: "/big", to: try #require(Node(entry)), landing: landing)
            fs.store.endLanding(landing)
            #expect(try fs.store.node("/moved")?.name == "Moved")
            #expect(try fs.store.children("/moved").map(\.name).sorted() == Self.names)
        }
    }

    /// The feed brought the source's removal while the move was under way, but the removal
    /// was another client's (the move then fails: its source is gone), and the catch-up
    /// stopped there (Dropbox out of reach): what the store took along to the target goes
    /// again when the move ends, and nothing shows there. (A catch-up that reads the feed to
    /// its end drops it then: `aMoveUndoneElsewhereBeforeTheFeedTellsItTakesNothingAlong`.)
    @Test func whatWasTakenAlongForAMoveNotMadeGoesAgain() async throws {
        try await Scratch.with { scratch in
            for name in Self.names { try await scratch.upload(name, to: "/big/\(name)") }
            let fs = try scratch.filesystem()
            try await fs.watcher.catchUp()
            let kernel = CoreKernel(fs: fs)
            #expect(try await offPool { try kernel.list("/big").value("ls") } == Self.names)

            _ = try await offPool { try kernel.rename("/big", "/moved").value("mv") }
            let move = try #require(fs.moves.oldest)
            let landing = try fs.store.beginLanding(from: "/big", to: "/moved", id: try #require(try fs.store.node("/big")?.id))
            fs.moves.setInFlight([move.id: "/moved"])
            let cursor = try await scratch.client.rpc(Routes.getLatestCursor, ListFolderArgument(path: "", recursive: true)).cursor
            _ = try await scratch.client.rpc(Routes.delete, DeleteArgument(path: "/big"))
            let page = try await scratch.client.rpc(Routes.listFolderContinue, CursorArgument(cursor: cursor))
            _ = try fs.store.apply(page.entries, fromChangeFeed: true)
            #expect(try fs.store.node("/moved/f00") != nil)  // taken along, as for the move
            fs.moves.setInFlight([:])
            fs.store.endLanding(landing)
            #expect(try fs.store.node("/moved") == nil)
            #expect(try fs.store.node("/moved/f00") == nil)

            try await fs.namespace.sendAll()
            #expect(fs.moves.isEmpty)
            #expect(try await offPool { try kernel.list("/").value("ls") } == [])
            #expect(try await scratch.client.listAll("").isEmpty)
        }
    }

    /// This mount's move of /n7 into /n0 is made, and before a catch-up reads it another
    /// client moves the folder back and on to a third name (or back, and removes it): the
    /// feed's one page has the target's removal, then the folder at the third name, then
    /// the source's removal last (each path by its last change). The source's removal is
    /// not the move landing: nothing is taken along to the target, which Dropbox no longer
    /// holds. (Taken along, the answered move kept the stale folder there for good: two
    /// mounts stressing one tree.)
    @Test(arguments: ["moved on", "removed"])
    func aMoveUndoneElsewhereBeforeTheFeedTellsItTakesNothingAlong(then: String) async throws {
        try await Scratch.with { scratch in
            for name in Self.names { try await scratch.upload(name, to: "/n7/\(name)") }
            try await scratch.upload("kept", to: "/n0/kept")
            let fs = try scratch.filesystem()
            try await fs.watcher.catchUp()
            let kernel = CoreKernel(fs: fs)
            #expect(try await offPool { try kernel.list("/n7").value("ls") } == Self.names)
            #expect(try await offPool { try kernel.list("/n0").value("ls") } == ["kept"])
            let cursor = try await scratch.client.rpc(Routes.getLatestCursor, ListFolderArgument(path: "", recursive: true)).cursor
            try fs.store.setValue("cursor", cursor)

            let landing = try fs.store.beginLanding(from: "/n7", to: "/n0/n2", id: try #require(try fs.store.node("/n7")?.id))
            let entry = try await scratch.client.rpc(Routes.move, RelocationArgument(from: "/n7", to: "/n0/n2")).metadata
            _ = try await scratch.client.rpc(Routes.move, RelocationArgument(from: "/n0/n2", to: "/n7"))
            if then == "moved on" {
                _ = try await scratch.client.rpc(Routes.move, RelocationArgument(from: "/n7", to: "/n0/n3"))
            } else {
                _ = try await scratch.client.rpc(Routes.delete, DeleteArgument(path: "/n7"))
            }
            // The page alone first: a folder the feed brought elsewhere is not taken along
            // (one removed is, until the feed's end below finds the move never landed).
            let page = try await scratch.client.rpc(Routes.listFolderContinue, CursorArgument(cursor: cursor))
            _ = try fs.store.apply(page.entries, fromChangeFeed: true)
            try fs.store.setValue("cursor", page.cursor)
            if then == "moved on" { #expect(try fs.store.node("/n0/n2") == nil) }
            try await fs.watcher.catchUp()
            try fs.store.applyMove(from: "/n7", to: try #require(Node(entry)), landing: landing)
            fs.store.endLanding(landing)

            let held = try await scratch.client.listAll("/n0").map(\.name).sorted()
            #expect(try fs.store.children("/n0").map(\.name).sorted() == held)
            #expect(try fs.store.node("/n0/n2") == nil)
            #expect(try fs.store.node("/n0/n2/f00") == nil)
            #expect(try fs.store.node("/n7") == nil)
            if then == "moved on" {
                #expect(try fs.store.children("/n0/n3").map(\.name).sorted() == Self.names)
            }
            #expect(try await offPool { try kernel.list("/n0").value("ls") } == held)
        }
    }
}
