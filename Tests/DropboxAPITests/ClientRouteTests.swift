import DropboxAPI
import DropboxEmulator
import Foundation
import TestSupport
import Testing

@Suite("client: routes and request styles", .timeLimit(.minutes(2)))
struct ClientRouteTests {
    @Test func accountAndSpace() async throws {
        try await withClient({ $0.quota = 1 << 30 }) { client, _ in
            let account = try await client.rpc(Routes.getCurrentAccount, NoArgument())
            #expect(account.accountId.hasPrefix("dbid:"))
            #expect(account.email.contains("@"))
            let usage = try await client.rpc(Routes.getSpaceUsage, NoArgument())
            #expect(usage.allocation.allocated == 1 << 30)
        }
    }

    @Test func uploadDownloadRangeAndNonASCIIPaths() async throws {
        try await withClient { client, _ in
            let path = "/Ünïcødé 文件/naïve 😀.txt"
            let bytes = Array("hello, wörld — 0123456789".utf8)
            let uploaded = try await client.upload(Routes.upload, UploadArgument(CommitInfo(path: path), contentHash: ContentHasher.hash(bytes)),
                                                   body: .bytes(bytes))
            #expect(uploaded.name == "naïve 😀.txt")
            #expect(uploaded.contentHash == ContentHasher.hash(bytes))
            let all = try await client.downloadRange(path, range: 0..<Int64(bytes.count))
            #expect(all == bytes)
            let middle = try await client.downloadRange(path.lowercased(), range: 7..<13)
            #expect(middle == Array(bytes[7..<13]))
            let metadata = try await client.rpc(Routes.getMetadata, GetMetadataArgument(path: path))
            #expect(metadata.pathDisplay == path)
            #expect(metadata.fileMetadata?.rev == uploaded.rev)
        }
    }

    /// The client folds names as the server does (the emulator models Dropbox's folding):
    /// `CaseFolding.fold` of a path is the `path_lower` Dropbox gives it, also for letters
    /// where Swift's `lowercased()` makes something else ("İ").
    /// Nothing is at a path one of whose folders is a file: Dropbox says `not_folder`, and
    /// `metadataIfExists` says nil, as for `not_found` (it threw, and the mount's senders, which
    /// look a name up after a refusal, failed over and over while another client had put a
    /// file where a folder was).
    @Test func nothingIsBelowAFile() async throws {
        try await withClient { client, _ in
            let bytes = Array("a file".utf8)
            _ = try await client.upload(Routes.upload, UploadArgument(CommitInfo(path: "/f"), contentHash: ContentHasher.hash(bytes)), body: .bytes(bytes))
            #expect(try await client.metadataIfExists("/f")?.name == "f")
            #expect(try await client.metadataIfExists("/f/x") == nil)
            #expect(try await client.metadataIfExists("/f/x/y") == nil)
            #expect(try await client.metadataIfExists("/g") == nil)
        }
    }

    @Test func caseFoldingAgreesWithPathLower() async throws {
        try await withClient { client, _ in
            for path in ["/İzmir.TXT", "/ΟΔΟΣ σ ς", "/Straße ẞ", "/ǅungla Ǉ", "/KELVIN K Å", "/ÀÉÎ ÕÜ"] {
                let file = try await client.upload(Routes.upload, UploadArgument(CommitInfo(path: path), contentHash: ContentHasher.hash([])),
                                                   body: .bytes([]))
                #expect(file.pathLower == CaseFolding.fold(path), "\(path)")
                #expect(try await client.metadataIfExists(CaseFolding.fold(path))?.name == String(path.dropFirst()))
            }
            #expect(CaseFolding.fold("/İzmir") != "/İzmir".lowercased())
        }
    }

    @Test func listingCursorsAndLongpoll() async throws {
        try await withClient({ $0.seeds = ["files=2500,dirs=3,depth=1,size=10"] }) { client, _ in
            let all = try await client.listAll("", recursive: true)
            #expect(all.count == 2503)  // more than one page of 2,000
            let cursor = try await client.rpc(Routes.getLatestCursor, ListFolderArgument(path: "", recursive: true)).cursor
            async let poll = client.rpc(Routes.longpoll, LongpollArgument(cursor: cursor, timeout: 30), timeout: 60)
            _ = try await client.rpc(Routes.createFolder, CreateFolderArgument(path: "/fresh"))
            #expect(try await poll.changes)
            let changes = try await client.rpc(Routes.listFolderContinue, CursorArgument(cursor: cursor))
            #expect(changes.entries.map(\.pathLower) == ["/fresh"])
        }
    }

    @Test func treeOperationsAndTheirRouteErrors() async throws {
        try await withClient { client, _ in
            _ = try await client.rpc(Routes.createFolder, CreateFolderArgument(path: "/a"))
            _ = try await client.upload(Routes.upload, UploadArgument(CommitInfo(path: "/a/f.txt"), contentHash: nil), body: .bytes([1, 2, 3]))
            let copied = try await client.rpc(Routes.copy, RelocationArgument(from: "/a", to: "/b")).metadata
            #expect(copied.pathDisplay == "/b")
            let moved = try await client.rpc(Routes.move, RelocationArgument(from: "/b/f.txt", to: "/c.txt")).metadata
            #expect(moved.name == "c.txt")
            _ = try await client.rpc(Routes.delete, DeleteArgument(path: "/a"))

            await #expect { try await client.rpc(Routes.getMetadata, GetMetadataArgument(path: "/a/f.txt")) } throws: {
                $0.routeError(PathLookupError.self) == .path(.notFound)
            }
            await #expect { try await client.rpc(Routes.createFolder, CreateFolderArgument(path: "/b")) } throws: {
                $0.routeError(PathWriteError.self) == .path(.conflict(.folder))
            }
            await #expect { try await client.upload(Routes.upload, UploadArgument(CommitInfo(path: "/c.txt"), contentHash: nil), body: .bytes([9])) } throws: {
                $0.routeError(PathWriteError.self) == .path(.conflict(.file))
            }
            await #expect { try await client.rpc(Routes.move, RelocationArgument(from: "/nope", to: "/x")) } throws: {
                $0.routeError(RelocationError.self) == .fromLookup(.notFound)
            }
            await #expect { try await client.rpc(Routes.move, RelocationArgument(from: "/b", to: "/b/inner")) } throws: {
                $0.routeError(RelocationError.self) == .cantMoveFolderIntoItself
            }
            await #expect { try await client.rpc(Routes.delete, DeleteArgument(path: "/a")) } throws: {
                $0.routeError(DeleteError.self) == .pathLookup(.notFound)
            }
            await #expect { try await client.rpc(Routes.listFolder, ListFolderArgument(path: "/c.txt")) } throws: {
                $0.routeError(PathLookupError.self) == .path(.notFolder)
            }
            await #expect { try await client.upload(Routes.upload, UploadArgument(CommitInfo(path: "/desktop.ini"), contentHash: nil), body: .bytes([1])) } throws: {
                $0.routeError(PathWriteError.self) == .path(.disallowedName)
            }
            await #expect { try await client.upload(Routes.upload, UploadArgument(CommitInfo(path: "/h.txt"), contentHash: "00"), body: .bytes([1])) } throws: {
                $0.routeError(PathWriteError.self) == .contentHashMismatch
            }
        }
    }

    @Test func uploadSessionErrorsCarryTheCorrectOffset() async throws {
        try await withClient { client, _ in
            let start = try await client.upload(Routes.uploadSessionStart, UploadSessionStartArgument(), body: .bytes([1, 2, 3]))
            await #expect {
                try await client.upload(Routes.uploadSessionAppend,
                                        UploadSessionAppendArgument(cursor: UploadSessionCursor(sessionId: start.sessionId, offset: 1)), body: .bytes([4]))
            } throws: { $0.routeError(UploadSessionLookupError.self) == .incorrectOffset(correctOffset: 3) }
            let file = try await client.upload(Routes.uploadSessionFinish,
                UploadSessionFinishArgument(cursor: UploadSessionCursor(sessionId: start.sessionId, offset: 3), commit: CommitInfo(path: "/s.bin")),
                body: .bytes([4]))
            #expect(file.size == 4)
        }
    }
}

@Suite("client: sessions and batches", .timeLimit(.minutes(2)))
struct ClientSessionTests {
    @Test func sequentialSessionResumesFromCorrectOffset() async throws {
        try await withClient { client, emulator in
            try await withScratch { scratch in
                let local = scratch.appendingPathComponent("seq.bin")
                try writePattern(local, size: 10 << 20)
                let fd = open(local.path, O_RDONLY)
                defer { close(fd) }
                let start = try await client.upload(Routes.uploadSessionStart, UploadSessionStartArgument(), body: .none)
                // The server already has the first 3 MiB (as after a lost answer): the client
                // is told so by incorrect_offset and goes on from there.
                _ = try await client.appendSequential(session: start.sessionId, fd: fd, from: 0, length: 3 << 20, chunkSize: 3 << 20)
                let reached = try await client.appendSequential(session: start.sessionId, fd: fd, from: 1 << 20, length: 9 << 20, chunkSize: 2 << 20)
                #expect(reached == 10 << 20)
                let file = try await client.upload(Routes.uploadSessionFinish,
                    UploadSessionFinishArgument(cursor: UploadSessionCursor(sessionId: start.sessionId, offset: reached), commit: CommitInfo(path: "/seq.bin")),
                    body: .none)
                #expect(file.contentHash == (try localContentHash(local)))
                #expect(try await emulator.routeStats()["files/upload_session/append_v2"]?["requests"] == 1 + 1 + 4)
            }
        }
    }

    /// delete_batch through its job: one result per entry, in order; an entry whose
    /// `parent_rev` is not the file's revision any more leaves the file.
    @Test func deleteBatchAnswersEachEntry() async throws {
        try await withClient { client, _ in
            let file = NSTemporaryDirectory() + "delete-batch-\(UUID().uuidString)"
            defer { unlink(file) }
            var revs: [String] = []
            for i in 0..<3 {
                try Data("file \(i)".utf8).write(to: URL(fileURLWithPath: file))
                revs.append(try await client.uploadFile(file, to: CommitInfo(path: "/batch/f\(i).txt")).rev)
            }
            let results = try await client.deleteBatch([
                DeleteArgument(path: "/batch/f0.txt", parentRev: revs[0]),
                DeleteArgument(path: "/batch/F1.TXT"),
                DeleteArgument(path: "/batch/f2.txt", parentRev: revs[0]),
                DeleteArgument(path: "/batch/none.txt"),
            ])
            #expect(results.count == 4)
            if case .success(let gone) = results[0] { #expect(gone.pathLower == "/batch/f0.txt") } else { Issue.record("\(results[0])") }
            if case .success = results[1] {} else { Issue.record("\(results[1])") }
            if case .failure(.pathWrite(.conflict)) = results[2] {} else { Issue.record("\(results[2])") }
            if case .failure(.pathLookup(.notFound)) = results[3] {} else { Issue.record("\(results[3])") }
            #expect(try await client.listAll("/batch").map(\.name) == ["f2.txt"])
        }
    }

    @Test func createFolderBatchAnswersEachPath() async throws {
        try await withClient { client, _ in
            let file = NSTemporaryDirectory() + "folder-batch-\(UUID().uuidString)"
            defer { unlink(file) }
            try Data("a file".utf8).write(to: URL(fileURLWithPath: file))
            _ = try await client.uploadFile(file, to: CommitInfo(path: "/made/taken"))
            let results = try await client.createFolderBatch(["/made/New", "/made/deep/Er", "/made/taken", "/made/new"])
            #expect(results.count == 4)
            if case .success(let folder) = results[0] { #expect(folder.name == "New") } else { Issue.record("\(results[0])") }
            if case .success(let folder) = results[1] { #expect(folder.pathLower == "/made/deep/er") } else { Issue.record("\(results[1])") }
            if case .failure(.path(.conflict(.file))) = results[2] {} else { Issue.record("\(results[2])") }
            if case .failure(.path(.conflict(.folder))) = results[3] {} else { Issue.record("\(results[3])") }
            #expect(try await client.listAll("/made").map(\.name).sorted() == ["New", "deep", "taken"])
        }
    }

    @Test func finishBatchV1AndCheck() async throws {
        try await withClient { client, _ in
            var entries: [UploadSessionFinishArgument] = []
            for i in 0..<3 {
                let bytes = Array("v1 file \(i)".utf8)
                let start = try await client.upload(Routes.uploadSessionStart, UploadSessionStartArgument(close: true), body: .bytes(bytes))
                entries.append(UploadSessionFinishArgument(cursor: UploadSessionCursor(sessionId: start.sessionId, offset: Int64(bytes.count)),
                                                           commit: CommitInfo(path: "/v1/f\(i).txt")))
            }
            let launch = try await client.rpc(Routes.uploadSessionFinishBatchV1, UploadSessionFinishBatchArgument(entries: entries))
            var results: [UploadSessionFinishBatchResultEntry] = []
            switch launch {
            case .complete(let done): results = done
            case .asyncJobID(let job):
                let deadline = ContinuousClock.now + .seconds(20)
                while results.isEmpty && ContinuousClock.now < deadline {
                    if case .complete(let done) = try await client.rpc(Routes.uploadSessionFinishBatchCheck, AsyncJobArgument(asyncJobId: job)) {
                        results = done
                    }
                }
            case .other(let tag): Issue.record("unexpected launch \(tag)")
            }
            #expect(results.count == 3)
            #expect(results.allSatisfy { if case .success = $0 { return true }; return false })
        }
    }
}
