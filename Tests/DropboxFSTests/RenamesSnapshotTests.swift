@testable import DropboxFS
import Testing

/// The view's walk through pending renames goes straight to those with an end at the path or
/// above it: with every rename looked at for every lookup, 1,500 renames in a row took 8.9 s
/// (Scripts/bench-metadata times 2,000 now).
@Suite("core: the pending renames a path is resolved through")
struct RenamesSnapshotTests {
    static func rename(_ id: Int64, _ from: String, _ to: String, folder: Bool = false) -> QueuedMove {
        QueuedMove(id: id, fromLower: from, toPath: to, isFolder: folder, sourceID: "id:\(id)")
    }

    /// 1,000 files renamed, then a folder, then a file out of that folder.
    static let moves = (0..<1000).map { rename(Int64($0), "/f\($0)", "/g\($0)") }
        + [rename(1000, "/d", "/e", folder: true), rename(1001, "/e/x", "/y")]

    @Test func theWalkMeetsOnlyTheRenamesOfThePathAndTheFoldersAboveIt() {
        let renames = RenamesSnapshot(moves: Self.moves, inFlight: [:], generation: 0, ends: RenameEnds(Self.moves))
        #expect(renames.newestTouching("/g500", below: .max)?.fromLower == "/f500")
        #expect(renames.newestTouching("/f500", below: .max)?.toLower == "/g500")  // moved away
        #expect(renames.newestTouching("/g500", below: 500) == nil)
        #expect(renames.newestTouching("/e/x/z", below: .max)?.id == 1001)
        #expect(renames.newestTouching("/e/x/z", below: 1001)?.id == 1000)
        #expect(renames.newestTouching("/e/w", below: .max)?.id == 1000)
        #expect(renames.newestTouching("/g5000", below: .max) == nil)
        #expect(renames.newestTouching("/elsewhere/g500", below: .max) == nil)
    }

    @Test func theEndsFollowTheRenamesChangesAndRemovals() {
        var ends = RenameEnds(Self.moves)
        var changed = Self.moves[1001]
        ends.remove(changed)
        changed.fromLower = "/hidden"
        ends.insert(changed)
        ends.remove(Self.moves[500])
        #expect(ends.newest(at: "/g500", below: .max) == nil)
        #expect(ends.newest(at: "/e/x", below: .max) == nil)
        #expect(ends.newest(at: "/hidden", below: .max) == 1001)
        #expect(ends.newest(at: "/y", below: .max) == 1001)
        #expect(ends.newest(at: "/e", below: .max) == 1000)
    }

    /// What a rename batch checks each rename against (the others taken), and what an upload
    /// or removal asks of the pending renames: a key at, above or below the path.
    @Test func pathTouchesAnswersAtAboveAndBelow() {
        var touches = PathTouches()
        #expect(!touches.touches("/a"))
        touches.insert("/a/b/c")
        touches.insert("/a/b/c")
        touches.insert("/x")
        for path in ["/a/b/c", "/a/b/c/d", "/a/b", "/a", "", "/x", "/x/y"] { #expect(touches.touches(path), "\(path)") }
        for path in ["/a/b/cd", "/a/c", "/b", "/xy"] { #expect(!touches.touches(path), "\(path)") }
        touches.remove("/a/b/c")
        #expect(touches.touches("/a"))  // inserted twice
        touches.remove("/a/b/c")
        #expect(!touches.touches("/a") && !touches.touches("/a/b/c/d") && touches.touches("/x"))
    }
}
