@testable import DropboxAPI
import Foundation
import PropertyBased
import Synchronization
import Testing

/// `list_folder` pages are decoded by hand (`ListingJSON`) for speed; the `Decodable` types
/// remain the reference. On the same text both must give the same entries, or both refuse it.
@Suite("client: list_folder pages decoded by hand")
struct ListingJSONTests {
    static func byHand(_ text: String) -> Result<ListFolderResult, any Error> {
        Result { try ListFolderResult(json: Array(text.utf8)) }
    }

    static func decodable(_ text: String) -> Result<ListFolderResult, any Error> {
        Result { try APIJSON.decode(ListFolderResult.self, from: Array(text.utf8)) }
    }

    /// Whether both decoded the page (true), or both refused it (false).
    @discardableResult
    static func expectAgreement(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
        switch (byHand(text), decodable(text)) {
        case (.success(let fast), .success(let reference)):
            #expect(fast.entries == reference.entries && fast.cursor == reference.cursor && fast.hasMore == reference.hasMore,
                    "\(text)", sourceLocation: sourceLocation)
            return true
        case (.failure, .failure):
            return false
        case (let fast, let reference):
            Issue.record("the decoders disagree on \(text): by hand \(fast), Decodable \(reference)", sourceLocation: sourceLocation)
            return false
        }
    }

    @Test func randomPagesDecodeAsTheDecodableTypesDo() async {
        let decoded = Mutex((accepted: 0, refused: 0))
        await propertyCheck(count: 1000, input: Gen.int(in: 0...1_000_000).array(of: 1...120)) { choices in
            var page = PageWriter(choices)
            let accepted = Self.expectAgreement(page.page())
            decoded.withLock { accepted ? ($0.accepted += 1) : ($0.refused += 1) }
        }
        // Both outcomes come up often enough to mean something.
        let counts = decoded.withLock { $0 }
        #expect(counts.accepted >= 200 && counts.refused >= 200, "\(counts)")
    }

    @Test func escapesAndUnicodeReadAsWritten() throws {
        let text = #"{"entries": [{".tag": "file", "name": "caf\u00e9 \ud83d\ude00 \"q\" b\\ \n\t", "id": "id:1", "#
            + #""path_lower": "\/x\/y", "client_modified": "2020-01-01T00:00:00Z", "server_modified": "2020-01-01T00:00:00Z", "#
            + #""rev": "0123456789", "size": 42, "sharing_info": {"read_only": false, "list": [1, 2.5e3, -0, null]}}], "#
            + #""cursor": "c", "has_more": false}"#
        let page = try ListFolderResult(json: Array(text.utf8))
        #expect(page.entries.first?.name == "café 😀 \"q\" b\\ \n\t")
        #expect(page.entries.first?.pathLower == "/x/y")
        Self.expectAgreement(text)
    }

    /// What a broken server may send is refused, naming the field when one was refused.
    @Test func brokenPagesAreRefused() {
        let entry = { (fields: String) in #"{"entries": [{".tag": "file", "id": "id:1", "client_modified": "a", "server_modified": "b", "rev": "r", "# + fields + #"}], "cursor": "c", "has_more": true}"# }
        let cases: [(String, String?)] = [
            (entry(#""name": "..", "size": 1"#), "name"),
            (entry(#""name": "a/b", "size": 1"#), "name"),
            (entry(#""name": "a", "path_lower": "/../x", "size": 1"#), "path_lower"),
            (entry(#""name": "a", "size": 1, "content_hash": "../../tmp/pwned""#), "content_hash"),
            (entry(#""name": "a", "size": 1.5"#), nil),
            (entry(#""name": "a", "size": "1""#), nil),
            (entry(#""name": "a""#), nil),
            (entry(#""name": "\ud800x", "size": 1"#), nil),
            (entry("\"name\": \"a\u{01}\", \"size\": 1"), nil),
            (entry(#""name": "a", "size": 012"#), nil),
            (#"{"entries": [], "cursor": "c"}"#, nil),
            (#"{"entries": [], "cursor": "c", "has_more": false} x"#, nil),
            (#"{"entries": [], "cursor": "c", "has_more": false"#, nil),
        ]
        for (text, field) in cases {
            if case .success = Self.byHand(text) { Issue.record("accepted: \(text)") }
            if let field, case .failure(let error) = Self.byHand(text) { #expect("\(error)".contains(field), "\(error)") }
        }
    }
}

/// Writes a `list_folder` page from a list of choices (so a failing page shrinks with its
/// choices): entries of each kind with fields present, absent, null or of the wrong type,
/// names and paths good and bad, strings escaped in different ways, and unknown fields
/// holding nested values.
struct PageWriter {
    private var choices: [Int]
    private var next = 0

    init(_ choices: [Int]) { self.choices = choices }

    private mutating func pick(_ count: Int) -> Int {
        defer { next += 1 }
        return choices.isEmpty ? 0 : choices[next % choices.count] % count
    }

    // Good values, then bad ones: one of `badEvery` picks is from the whole list.
    static let names = ["a", "file.txt", "café", "😀 smile", "\"quoted\"", "back\\slash", "tab\there", "...", "x\u{7F}", "..", ".", "", "a/b"]
    static let goodNames = 9
    static let paths = ["/a", "/dir/file.txt", "/café/😀", "", "/...", "/a/../b", "/", "a", "//a", "/a/"]
    static let goodPaths = 5
    static let hashes = [String(repeating: "ab", count: 32), String(repeating: "AB", count: 32), "../../tmp/pwned", "abc"]
    static let goodHashes = 2
    static let badEvery = 8

    private mutating func one(of list: [String], good: Int) -> String {
        list[pick(Self.badEvery) == 0 ? pick(list.count) : pick(good)]
    }

    mutating func page() -> String {
        let count = pick(6)
        let entries = (0..<count).map { _ in entry() }.joined(separator: ", ")
        return "{\"entries\": [\(entries)], \"cursor\": \(string("cursor-\(pick(100))")), \"has_more\": \(pick(2) == 0 ? "true" : "false")}"
    }

    /// `finish_batch_v2`'s answer: entries tagged `success` (a file's fields) or `failure`.
    mutating func batchResult() -> String {
        let count = pick(6)
        return "{\"entries\": [" + (0..<count).map { _ in entry(tags: ["success", "success", "success", "failure"]) }.joined(separator: ", ") + "]}"
    }

    private mutating func entry(tags: [String] = ["file", "folder", "deleted", "other"]) -> String {
        let tag = tags[pick(tags.count)]
        var fields = ["\".tag\": \(string(tag))"]
        func add(_ key: String, _ value: String?) { if let value { fields.append("\"\(key)\": \(value)") } }
        add("name", value(good: string(one(of: Self.names, good: Self.goodNames))))
        add("id", value(good: string("id:\(pick(1000))")))
        add("path_lower", value(good: string(one(of: Self.paths, good: Self.goodPaths))))
        add("path_display", value(good: string(one(of: Self.paths, good: Self.goodPaths))))
        add("client_modified", value(good: string("2021-03-04T05:06:07Z")))
        add("server_modified", value(good: string("2021-03-04T05:06:08Z")))
        add("rev", value(good: string("015\(pick(100))")))
        add("size", value(good: ["0", "4096", "-0", "9223372036854775807", "9223372036854775808"][pick(5)]))
        add("content_hash", value(good: string(one(of: Self.hashes, good: Self.goodHashes))))
        add("is_downloadable", value(good: pick(2) == 0 ? "true" : "false"))
        if pick(3) == 0 { fields.append("\"sharing_info\": {\"read_only\": true, \"modified_by\": [1, 2.5, -3e2, null, {}, []]}") }
        if tag == "failure" { fields.append(#""failure": {".tag": "lookup_failed", "lookup_failed": {".tag": "not_found"}}"#) }
        // The order of fields is the server's.
        for index in fields.indices.dropFirst() { fields.swapAt(index, fields.index(fields.startIndex, offsetBy: pick(index + 1))) }
        return "{" + fields.joined(separator: ", ") + "}"
    }

    /// The field's good value, or absent, null, or a value of another type.
    private mutating func value(good: String) -> String? {
        switch pick(40) {
        case 0: return nil
        case 1: return "null"
        case 2: return ["12", "true", "\"text\"", "[]", "{\"a\": 1}", "1.5"][pick(6)]
        default: return good
        }
    }

    /// A JSON string: plainly escaped, or every character escaped as `\uXXXX` (UTF-16 units).
    private mutating func string(_ text: String) -> String {
        if pick(3) == 0 {
            return "\"" + text.utf16.map { "\\u" + String(format: "%04x", $0) }.joined() + "\""
        }
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "/": out += pick(2) == 0 ? "\\/" : "/"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20: out += "\\u" + String(format: "%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
