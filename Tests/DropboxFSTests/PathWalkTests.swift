@testable import DropboxFS
import Testing

/// The small path and name checks every create, unlink and rename goes through: rewritten
/// for speed (byte scans, a lazy walk), they must answer as before.
@Suite("core: path walks and name checks")
struct PathWalkTests {
    @Test func ancestorsAreNearestFirstWithoutTheRoot() {
        #expect(Node.selfAndAncestors("/a/b/c").map(String.init) == ["/a/b/c", "/a/b", "/a"])
        #expect(Node.selfAndAncestors("/a").map(String.init) == ["/a"])
        #expect(Node.selfAndAncestors("").map(String.init) == [])
        #expect(Node.selfAndAncestors("a/b").map(String.init) == ["a/b", "a"])
        #expect(Node.selfAndAncestors("/caf\u{E9}/\u{1F600}").map(String.init) == ["/caf\u{E9}/\u{1F600}", "/caf\u{E9}"])
        // As `PathTouches` walks them: the folders above a key alone.
        #expect(Node.selfAndAncestors("/a/b/c").dropFirst().map(String.init) == ["/a/b", "/a"])
        #expect(Node.selfAndAncestors("/a").dropFirst().map(String.init) == [])
        #expect(Node.selfAndAncestors("/a/b").contains { $0 == "/a" })
    }

    @Test func namesWithASlashOrOnlyDotsAreRefused() {
        for name in ["a/b", "/", "b/", "", ".", ".."] {
            #expect(throws: FSError.invalidName) { try DropboxFileSystem.checkName(name) }
        }
        #expect(throws: FSError.invalidName) { try DropboxFileSystem.checkName("Thumbs.DB") }
        #expect(throws: FSError.nameTooLong) { try DropboxFileSystem.checkName(String(repeating: "\u{E9}", count: 128)) }
        for name in ["...", "a\\b", "caf\u{E9}", "\u{2215}division-slash", String(repeating: "x", count: 255)] {
            #expect(throws: Never.self) { try DropboxFileSystem.checkName(name) }
        }
    }
}
