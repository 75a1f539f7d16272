@testable import DropboxAPI
import Foundation
import PropertyBased
import Testing

/// The upload routes' arguments and answers are coded by hand (`UploadJSON`) for speed;
/// Foundation's coders remain the reference: the same argument must read back as the same
/// JSON value, and the same answer decode to the same entries (or be refused by both).
@Suite("client: upload arguments and answers coded by hand")
struct UploadJSONTests {
    /// The two texts hold the same JSON value.
    static func sameJSON(_ hand: [UInt8], _ reference: [UInt8]) throws -> Bool {
        let a = try JSONSerialization.jsonObject(with: Data(hand), options: [.fragmentsAllowed]) as! NSObject
        let b = try JSONSerialization.jsonObject(with: Data(reference), options: [.fragmentsAllowed]) as! NSObject
        return a == b
    }

    static let strings = ["", "/a/b.txt", "/café/😀 smile", "/\"quoted\"", "/back\\slash", "/tab\there", "/new\nline",
                          "/ctl\u{01}\u{1F}\u{7F}", "/slash/", "/\u{2028}sep", "/日本語/ファイル", "/a\r\u{08}\u{0C}b"]

    @Test func finishBatchArgumentsReadAsFoundationWritesThem() async {
        await propertyCheck(count: 500, input: Gen.int(in: 0...1_000_000).array(of: 1...60)) { choices in
            var next = 0
            func pick(_ count: Int) -> Int { defer { next += 1 }; return choices[next % choices.count] % count }
            let entries = (0..<pick(5)).map { _ in
                let modes: [WriteMode] = [.add, .overwrite, .update(Self.strings[pick(Self.strings.count)]), .update("0123abc")]
                let commit = CommitInfo(path: Self.strings[pick(Self.strings.count)], mode: modes[pick(modes.count)],
                                        autorename: pick(2) == 0, clientModified: pick(3) == 0 ? nil : "2024-02-03T04:05:06Z",
                                        mute: pick(2) == 0, strictConflict: pick(2) == 0)
                let offsets: [Int64] = [0, 4096, Int64.max, 1 << 40]
                return UploadSessionFinishArgument(cursor: UploadSessionCursor(sessionId: Self.strings[pick(Self.strings.count)],
                                                                               offset: offsets[pick(offsets.count)]),
                                                   commit: commit, contentHash: pick(2) == 0 ? nil : String(repeating: "ab", count: 32))
            }
            let argument = UploadSessionFinishBatchArgument(entries: entries)
            let hand = try APIJSON.encode(argument), reference = try APIJSON.encodeWithFoundation(argument)
            #expect(try Self.sameJSON(hand, reference), "\(String(decoding: hand, as: UTF8.self)) against \(String(decoding: reference, as: UTF8.self))")
        }
    }

    @Test func startArgumentsAndTheirHeadersAreFoundations() throws {
        for close in [false, true] {
            for type in [nil, UploadSessionType.sequential, .concurrent] {
                for hash in [nil, String(repeating: "0f", count: 32)] {
                    let argument = UploadSessionStartArgument(close: close, sessionType: type, contentHash: hash)
                    #expect(try Self.sameJSON(try APIJSON.encode(argument), try APIJSON.encodeWithFoundation(argument)))
                    // The header is ASCII: written as it is.
                    #expect(try APIJSON.headerValue(argument) == String(decoding: try APIJSON.encode(argument), as: UTF8.self))
                }
            }
        }
    }

    /// What an entry decoded to, comparable.
    enum Decoded: Equatable {
        case success(FileMetadata), failure(UploadSessionFinishError)
        init(_ entry: UploadSessionFinishBatchResultEntry) {
            switch entry {
            case .success(let file): self = .success(file)
            case .failure(let failure): self = .failure(failure)
            }
        }
    }

    @Test func finishBatchAnswersDecodeAsFoundationDecodesThem() async {
        await propertyCheck(count: 1000, input: Gen.int(in: 0...1_000_000).array(of: 1...120)) { choices in
            var writer = PageWriter(choices)
            let text = Array(writer.batchResult().utf8)
            let hand = Result { try APIJSON.decode(UploadSessionFinishBatchResult.self, from: text) }
            let reference = Result { try APIJSON.decodeWithFoundation(UploadSessionFinishBatchResult.self, from: text) }
            switch (hand, reference) {
            case (.success(let a), .success(let b)):
                #expect(a.entries.map(Decoded.init) == b.entries.map(Decoded.init), "\(String(decoding: text, as: UTF8.self))")
            case (.failure, .failure): break
            default: Issue.record("the decoders disagree on \(String(decoding: text, as: UTF8.self)): \(hand) against \(reference)")
            }
        }
    }

    @Test func onlyAnswersOfSuccessesAreReadByHand() throws {
        let file = #"{".tag": "success", "name": "a.txt", "id": "id:1", "path_lower": "/a.txt", "path_display": "/a.txt", "#
            + #""client_modified": "2024-01-01T00:00:00Z", "server_modified": "2024-01-01T00:00:01Z", "rev": "015a", "size": 3}"#
        let failed = #"{".tag": "failure", "failure": {".tag": "too_many_write_operations"}}"#
        let successes = UploadSessionFinishBatchResult(handDecoding: Array(#"{"entries": [\#(file), \#(file)]}"#.utf8))
        #expect(successes?.entries.count == 2)
        let mixed = Array(#"{"entries": [\#(file), \#(failed)]}"#.utf8)
        #expect(UploadSessionFinishBatchResult(handDecoding: mixed) == nil)
        let decoded = try APIJSON.decode(UploadSessionFinishBatchResult.self, from: mixed).entries.map(Decoded.init)
        #expect(decoded.last == .failure(.tooManyWriteOperations))

        #expect(try APIJSON.decode(UploadSessionStartResult.self, from: Array(#"{"session_id": "s\u00e9"}"#.utf8)).sessionId == "sé")
        #expect(UploadSessionStartResult(handDecoding: Array(#"{"session_id": 1}"#.utf8)) == nil)
        #expect(throws: (any Error).self) { try APIJSON.decode(UploadSessionStartResult.self, from: Array(#"{"session_id": 1}"#.utf8)) }
    }
}
