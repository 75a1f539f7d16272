@testable import DropboxFS
import PropertyBased
import Testing

/// `SortedPaths` against a plain set filtered with `hasPrefix` (the reference, what
/// `FileModes` did before): every folder finds the same keys below it.
@Suite("core: sorted paths")
struct SortedPathsTests {
    /// Names chosen to sit at the edges of the order: a sibling that shares the folder's
    /// name as a prefix (`a-b`, `a0`, `a.`), a composed and a decomposed `é` (one key), a
    /// name beginning with a combining mark.
    static let names = ["a", "a-b", "a0", "a.", "b", "\u{E9}", "e\u{301}", "\u{301}x", "z"]

    static let paths: [String] = {
        var paths: [String] = []
        for first in names {
            paths.append("/" + first)
            for second in names {
                paths.append("/" + first + "/" + second)
                for third in names.prefix(3) { paths.append("/" + first + "/" + second + "/" + third) }
            }
        }
        return paths
    }()

    @Test func findsWhatAFilteredSetFinds() async {
        // A chunk limit of 2 splits and empties chunks at every other step.
        let step = zip(Gen.bool, Gen.int(in: 0..<Self.paths.count))
        await propertyCheck(count: 300, input: step.array(of: 1...120)) { steps in
            var sorted = SortedPaths(chunkLimit: 2)
            var reference = Set<String>()
            for (insert, index) in steps {
                let path = Self.paths[index]
                if insert {
                    sorted.insert(path)
                    reference.insert(path)
                } else {
                    sorted.remove(path)
                    reference.remove(path)
                }
            }
            #expect(sorted.count == reference.count)
            for folder in Self.paths.prefix(40) + [""] {
                let expected = reference.filter { $0.hasPrefix(folder + "/") }
                let found = sorted.keys(below: folder).keys
                #expect(found.count == expected.count && Set(found) == expected, "below \(folder)")
            }
            let rebuilt = SortedPaths(reference)
            #expect(rebuilt.count == reference.count)
            #expect(Set(rebuilt.keys(below: "").keys) == reference.filter { $0.hasPrefix("/") })
        }
    }

    @Test func looksAtTheKeysBelowAndOneMore() {
        var sorted = SortedPaths(chunkLimit: 8)
        for folder in 0..<1_000 { sorted.insert("/f\(folder)") }
        for file in 0..<5 { sorted.insert("/f500/x\(file)") }
        let below = sorted.keys(below: "/f500")
        #expect(below.keys == (0..<5).map { "/f500/x\($0)" })
        #expect(below.examined == 6)
        #expect(sorted.keys(below: "/f501").examined <= 1)
    }
}
