@testable import DropboxAPI
import Foundation
import Testing

/// The pure parts of reading a reply: key conversion and the path check, on their own
/// (each listed entry goes through both).
@Suite("client: reply keys and paths")
struct ResponseKeyTests {
    /// The keys as Foundation's `convertFromSnakeCase` would see them.
    struct SeenKeys: Decodable {
        struct AnyKey: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }
        let keys: Set<String>
        init(from decoder: any Decoder) throws { keys = Set(try decoder.container(keyedBy: AnyKey.self).allKeys.map(\.stringValue)) }
    }

    @Test func rememberedKeyConversionAgreesWithFoundations() throws {
        let keys = ["path_lower", "content_hash", "_leading", "trailing_", "__both__", "a__b", "UPPER_CASE", "mixed_Case_key",
                    "already", ".tag", "x_1_y", "_", "__", "é_ü"]
        let document = "{" + keys.map { "\"\($0)\": 1" }.joined(separator: ", ") + "}"
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        let foundation = try decoder.decode(SeenKeys.self, from: Data(document.utf8)).keys
        let ours = try APIJSON.decode(SeenKeys.self, from: Array(document.utf8)).keys
        #expect(ours == foundation)
        #expect(ours.contains("pathLower") && ours.contains(".tag"))
    }

    @Test func pathsAreSlashSeparatedNames() {
        for good in ["", "/a", "/a/b.txt", "/...", "/a/.hidden", "/..a", "/a./b", "/ü/文件"] {
            #expect(ServerChecks.isPath(good), Comment(rawValue: good))
        }
        for bad in ["a", "/", "//", "/a/", "/a//b", "/.", "/..", "/a/./b", "/a/../b", "/a/..", "/a\u{0}b", "a/b"] {
            #expect(!ServerChecks.isPath(bad), Comment(rawValue: bad.debugDescription))
        }
    }
}
