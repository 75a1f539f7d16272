import Foundation
import Testing
@testable import DropboxEmulator

@Suite("upload sessions", .timeLimit(.minutes(1)))
struct EmulatorSessionTests {
    @Test func sequentialSessionChecksOffsets() async throws {
        try await withEmulator { client in
            let start = try await client.upload("files/upload_session/start", "{}", Data("hello".utf8))
            let id = try #require(start.json["session_id"]?.stringValue)

            let wrong = try await client.upload("files/upload_session/append_v2",
                                                #"{"cursor":{"session_id":"\#(id)","offset":3}}"#, Data(" world".utf8))
            #expect(wrong.status == 409)
            #expect(wrong.json["error"]?[".tag"]?.stringValue == "incorrect_offset")
            #expect(wrong.json["error"]?["correct_offset"]?.intValue == 5)

            let right = try await client.upload("files/upload_session/append_v2",
                                                #"{"cursor":{"session_id":"\#(id)","offset":5}}"#, Data(" world".utf8))
            #expect(right.status == 200)

            let badFinish = try await client.upload("files/upload_session/finish",
                #"{"cursor":{"session_id":"\#(id)","offset":5},"commit":{"path":"/s.txt"}}"#, Data())
            #expect(badFinish.json["error_summary"]?.stringValue?.hasPrefix("lookup_failed/incorrect_offset") == true)
            #expect(badFinish.json["error"]?["lookup_failed"]?["correct_offset"]?.intValue == 11)

            let finish = try await client.upload("files/upload_session/finish",
                #"{"cursor":{"session_id":"\#(id)","offset":11},"commit":{"path":"/s.txt"}}"#, Data("!".utf8))
            #expect(finish.status == 200)
            #expect(finish.json["size"]?.intValue == 12)
            #expect(finish.json["content_hash"]?.stringValue == referenceContentHash(Data("hello world!".utf8)))
            #expect(try await client.download("/s.txt").text == "hello world!")

            let gone = try await client.upload("files/upload_session/append_v2",
                                               #"{"cursor":{"session_id":"\#(id)","offset":12}}"#, Data("x".utf8))
            #expect(gone.json["error"]?[".tag"]?.stringValue == "not_found")
        }
    }

    /// A session's data file becomes its file's content at commit, where it is (nothing is
    /// moved): the content reads back after the commit and after a restart, and a finish that
    /// makes no revision (the path holds those bytes already) leaves no file behind.
    @Test func aCommittedSessionsFileIsItsContentAndNothingIsLeftBehind() async throws {
        func contentFiles(_ directory: URL) throws -> [String] {
            try FileManager.default.subpathsOfDirectory(atPath: directory.path).filter { path in
                var isFolder: ObjCBool = false
                return FileManager.default.fileExists(atPath: directory.appendingPathComponent(path).path, isDirectory: &isFolder)
                    && !isFolder.boolValue && !path.contains("meta.sqlite")
            }
        }
        try await withDataDirectory { directory in
            try await withEmulator(dataDirectory: directory) { client in
                let commits = [("files/upload_session/finish_batch_v2", "/kept.txt"), ("files/upload_session/finish_batch_v2", "/kept.txt"),
                               ("files/upload_session/finish", "/single.txt")]
                for (route, path) in commits {
                    let start = try await client.upload("files/upload_session/start", #"{"close":true}"#, Data("bytes for \(path)".utf8))
                    let id = try #require(start.json["session_id"]?.stringValue)
                    let length = "bytes for \(path)".utf8.count
                    let finish = #"{"cursor":{"session_id":"\#(id)","offset":\#(length)},"commit":{"path":"\#(path)","mode":"overwrite"}}"#
                    if route.hasSuffix("finish") {
                        let reply = try await client.upload(route, finish, Data())
                        #expect(reply.status == 200, "\(reply.text)")
                    } else {
                        let reply = try await client.rpc(route, #"{"entries":[\#(finish)]}"#)
                        #expect(reply.json["entries"]?.arrayValue?.first?[".tag"]?.stringValue == "success", "\(reply.text)")
                    }
                }
                #expect(try await client.download("/kept.txt").text == "bytes for /kept.txt")
                #expect(try await client.download("/single.txt").text == "bytes for /single.txt")
            }
            let files = try contentFiles(directory)
            #expect(files.count == 2, "\(files)")
            try await withEmulator(dataDirectory: directory) { client in
                let afterRestart = [try await client.download("/kept.txt").text, try await client.download("/single.txt").text]
                #expect(afterRestart == ["bytes for /kept.txt", "bytes for /single.txt"])
            }
        }
    }

    @Test func revisionsAreTheChangeCounterThenThePlaceInTheWriteInHex() {
        for (seq, index) in [(0, 0), (1, 2), (0xabcdef, 0x1234), (1 << 40 - 1, 1 << 24 - 1), (1 << 40, 0), (5, 1 << 24), (Int64.max, 7)] as [(Int64, Int)] {
            #expect(Identifiers.rev(seq: seq, index: index) == String(format: "%010llx%06x", seq, index))
        }
    }

    @Test func closedSessionRefusesAppends() async throws {
        try await withEmulator { client in
            let start = try await client.upload("files/upload_session/start", #"{"close":true}"#, Data("abc".utf8))
            let id = try #require(start.json["session_id"]?.stringValue)
            let append = try await client.upload("files/upload_session/append_v2",
                                                 #"{"cursor":{"session_id":"\#(id)","offset":3}}"#, Data("d".utf8))
            #expect(append.json["error"]?[".tag"]?.stringValue == "closed")
        }
    }

    /// Dropbox forgets a session after a week; `expire-sessions` does so at once, for tests of
    /// clients that keep sessions (a mount stages small files' bytes before their commit).
    @Test func anExpiredSessionIsNotFound() async throws {
        try await withEmulator { client in
            let start = try await client.upload("files/upload_session/start", #"{"close":true}"#, Data("abc".utf8))
            let id = try #require(start.json["session_id"]?.stringValue)
            #expect(try await client.request("/_emulator/expire-sessions").status == 200)
            let finish = try await client.upload("files/upload_session/finish",
                #"{"cursor":{"session_id":"\#(id)","offset":3},"commit":{"path":"/late.txt"}}"#, Data())
            #expect(finish.json["error_summary"]?.stringValue?.hasPrefix("lookup_failed/not_found") == true, "\(finish.text)")
            let again = try await client.upload("files/upload_session/start", #"{"close":true}"#, Data("abc".utf8))
            let fresh = try #require(again.json["session_id"]?.stringValue)
            let done = try await client.upload("files/upload_session/finish",
                #"{"cursor":{"session_id":"\#(fresh)","offset":3},"commit":{"path":"/late.txt"}}"#, Data())
            #expect(done.status == 200)
        }
    }

    @Test func concurrentSessionAssemblesPiecesInAnyOrder() async throws {
        try await withEmulator { client in
            let block = 4 * 1024 * 1024
            let content = Data((0..<(2 * block + 1000)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) })
            let start = try await client.upload("files/upload_session/start", #"{"session_type":{".tag":"concurrent"}}"#, Data())
            let id = try #require(start.json["session_id"]?.stringValue)

            let misaligned = try await client.upload("files/upload_session/append_v2",
                #"{"cursor":{"session_id":"\#(id)","offset":1000}}"#, content[0..<block])
            #expect(misaligned.json["error"]?[".tag"]?.stringValue == "concurrent_session_invalid_offset")
            let oddSize = try await client.upload("files/upload_session/append_v2",
                #"{"cursor":{"session_id":"\#(id)","offset":0}}"#, content[0..<1000])
            #expect(oddSize.json["error"]?[".tag"]?.stringValue == "concurrent_session_invalid_data_size")

            let notClosed = try await client.upload("files/upload_session/finish",
                #"{"cursor":{"session_id":"\#(id)","offset":0},"commit":{"path":"/c.bin"}}"#, Data())
            #expect(notClosed.json["error"]?[".tag"]?.stringValue == "concurrent_session_not_closed")

            // Pieces arrive out of order, in parallel; the last one closes the session.
            async let second = client.upload("files/upload_session/append_v2",
                #"{"cursor":{"session_id":"\#(id)","offset":\#(block)}}"#, content[block..<(2 * block)])
            async let first = client.upload("files/upload_session/append_v2",
                #"{"cursor":{"session_id":"\#(id)","offset":0}}"#, content[0..<block])
            #expect(try await second.status == 200)
            #expect(try await first.status == 200)
            let last = try await client.upload("files/upload_session/append_v2",
                #"{"cursor":{"session_id":"\#(id)","offset":\#(2 * block)},"close":true}"#, content[(2 * block)...])
            #expect(last.status == 200)

            let finish = try await client.upload("files/upload_session/finish",
                #"{"cursor":{"session_id":"\#(id)","offset":\#(content.count)},"commit":{"path":"/c.bin"}}"#, Data())
            #expect(finish.status == 200)
            #expect(finish.json["content_hash"]?.stringValue == referenceContentHash(content))
            #expect(try await client.download("/c.bin").body == content)
        }
    }

    @Test func finishBatchCommitsManyAndReportsEachFailure() async throws {
        try await withEmulator { client in
            var entries: [String] = []
            for i in 0..<5 {
                let start = try await client.upload("files/upload_session/start", #"{"close":true}"#, Data("file \(i)".utf8))
                let id = try #require(start.json["session_id"]?.stringValue)
                entries.append(#"{"cursor":{"session_id":"\#(id)","offset":6},"commit":{"path":"/batch/f\#(i).txt"}}"#)
            }
            entries.append(#"{"cursor":{"session_id":"pid_upload_session:missing","offset":0},"commit":{"path":"/batch/x.txt"}}"#)
            try await client.emulatorStatsReset()
            let batch = try await client.rpc("files/upload_session/finish_batch_v2", #"{"entries":[\#(entries.joined(separator: ","))]}"#)
            #expect(batch.status == 200)
            let results = try #require(batch.json["entries"]?.arrayValue)
            #expect(results.prefix(5).allSatisfy { $0[".tag"]?.stringValue == "success" })
            #expect(results[5]["failure"]?["lookup_failed"]?[".tag"]?.stringValue == "not_found")
            let list = try await client.rpc("files/list_folder", #"{"path":"/batch"}"#)
            #expect(list.json["entries"]?.arrayValue?.count == 5)
            #expect(try await client.stats()["routes"]?["files/upload_session/finish_batch_v2"]?["requests"]?.intValue == 1)
        }
    }
}

/// A batch whose files are in new folders, in folders made by its earlier entries, and below
/// files its earlier entries made: each entry answered as if committed alone, in order.
extension EmulatorSessionTests {
    @Test func aBatchSeesTheFoldersAndFilesItsEarlierEntriesMade() async throws {
        try await withEmulator { client in
            _ = try await client.put("/old/kept.txt", "kept")
            let paths = ["/old/a.txt", "/new/deep/b.txt", "/new/deep/c.txt", "/new/deep/b.txt/d.txt", "/old/kept.txt/e.txt",
                         "/new/f.txt", "/new/deep", "/new/deep/g.txt"]
            var entries: [String] = []
            for path in paths {
                let start = try await client.upload("files/upload_session/start", #"{"close":true}"#, Data(path.utf8))
                let id = try #require(start.json["session_id"]?.stringValue)
                entries.append(#"{"cursor":{"session_id":"\#(id)","offset":\#(path.utf8.count)},"commit":{"path":"\#(path)"}}"#)
            }
            let batch = try await client.rpc("files/upload_session/finish_batch_v2", #"{"entries":[\#(entries.joined(separator: ","))]}"#)
            let results = try #require(batch.json["entries"]?.arrayValue)
            let tags = results.map { $0[".tag"]?.stringValue ?? "?" }
            // A file below a file is refused; a file where a folder is, too (mode add, no autorename).
            #expect(tags == ["success", "success", "success", "failure", "failure", "success", "failure", "success"], "\(batch.text)")
            for (path, tag) in zip(paths, tags) where tag == "success" {
                #expect(try await client.download(path).text == path)
            }
            let listed = try await client.rpc("files/list_folder", #"{"path":"/new","recursive":true}"#)
            let names = Set(listed.json["entries"]?.arrayValue?.compactMap { $0["path_lower"]?.stringValue } ?? [])
            #expect(names == ["/new", "/new/deep", "/new/deep/b.txt", "/new/deep/c.txt", "/new/f.txt", "/new/deep/g.txt"])
        }
    }
}

extension TestClient {
    func emulatorStatsReset() async throws {
        _ = try await request("/_emulator/stats/reset")
    }
}
