import Foundation
import Testing
@testable import DropboxEmulator

@Suite("cursors, longpoll, persistence", .timeLimit(.minutes(1)))
struct EmulatorChangeTests {
    @Test func cursorReportsAddsDeletesAndMoves() async throws {
        try await withEmulator { client in
            _ = try await client.put("/docs/a.txt", "a")
            _ = try await client.put("/docs/b.txt", "b")
            let list = try await client.rpc("files/list_folder", #"{"path":"","recursive":true}"#)
            #expect(list.json["entries"]?.arrayValue?.count == 3)
            let cursor = try #require(list.json["cursor"]?.stringValue)

            _ = try await client.rpc("files/delete_v2", #"{"path":"/docs/a.txt"}"#)
            _ = try await client.rpc("files/move_v2", #"{"from_path":"/docs","to_path":"/papers"}"#)
            let changes = try await client.rpc("files/list_folder/continue", #"{"cursor":"\#(cursor)"}"#)
            let entries = try #require(changes.json["entries"]?.arrayValue)
            let summary = Set(entries.map { "\($0[".tag"]?.stringValue ?? "") \($0["path_lower"]?.stringValue ?? "")" })
            #expect(summary == ["deleted /docs", "deleted /docs/a.txt", "deleted /docs/b.txt", "folder /papers", "file /papers/b.txt"])
            #expect(changes.json["has_more"] == .bool(false))
        }
    }

    @Test func pagesHonourLimit() async throws {
        try await withEmulator({ $0.seeds = ["files=25,dirs=2,depth=1"] }) { client in
            var cursor = ""
            var seen = 0
            var page = try await client.rpc("files/list_folder", #"{"path":"","recursive":true,"limit":10}"#)
            while true {
                let entries = try #require(page.json["entries"]?.arrayValue)
                #expect(entries.count <= 10)
                seen += entries.count
                cursor = try #require(page.json["cursor"]?.stringValue)
                if page.json["has_more"] != .bool(true) { break }
                page = try await client.rpc("files/list_folder/continue", #"{"cursor":"\#(cursor)"}"#)
            }
            #expect(seen == 27)  // 25 files and 2 folders
            let idle = try await client.rpc("files/list_folder/continue", #"{"cursor":"\#(cursor)"}"#)
            #expect(idle.json["entries"]?.arrayValue?.isEmpty == true)
        }
    }

    /// A call without `limit` gets the configured page size (a test's small pages), the
    /// change feed's cursor too.
    @Test func pagesWithoutLimitHoldTheConfiguredSize() async throws {
        try await withEmulator({ $0.seeds = ["files=7,dirs=1,depth=1"]; $0.pageSize = 3 }) { client in
            let first = try await client.rpc("files/list_folder", #"{"path":"","recursive":true}"#)
            #expect(first.json["entries"]?.arrayValue?.count == 3)
            #expect(first.json["has_more"] == .bool(true))
            let latest = try await client.rpc("files/list_folder/get_latest_cursor", #"{"path":"","recursive":true}"#)
            let cursor = try #require(latest.json["cursor"]?.stringValue)
            _ = try await client.rpc("files/move_v2", #"{"from_path":"/dir-000","to_path":"/moved"}"#)
            let changes = try await client.rpc("files/list_folder/continue", #"{"cursor":"\#(cursor)"}"#)
            #expect(changes.json["entries"]?.arrayValue?.count == 3)
            #expect(changes.json["has_more"] == .bool(true))
        }
    }

    /// The change feed's page is a range query from the cursor on: an account-wide cursor read
    /// every change ever made (its statement, prepared before the cursor's values are bound,
    /// used no range of the index), and after a long soak each catch-up of the mount took
    /// 0.26 s with nothing to bring. A deleted folder's 1,000 files share one change number:
    /// the cursor's place among them is part of the range.
    @Test func aCursorReadsOnlyWhatChangedAfterItWhateverCameBefore() async throws {
        try await withEmulator({ $0.seeds = ["files=3000,dirs=3,depth=1,size=10"] }) { client in
            for dir in ["/dir-000", "/dir-001", "/dir-002"] {
                _ = try await client.rpc("files/delete_v2", #"{"path":"\#(dir)"}"#)
            }
            let latest = try await client.rpc("files/list_folder/get_latest_cursor", #"{"path":"","recursive":true}"#)
            let cursor = try #require(latest.json["cursor"]?.stringValue)
            _ = try await client.put("/after.txt", "x")
            let namespace = client.emulator.namespace
            let before = namespace.locked { namespace.database.steps }
            let page = try await client.rpc("files/list_folder/continue", #"{"cursor":"\#(cursor)"}"#)
            let stepped = namespace.locked { namespace.database.steps } - before
            let entries = try #require(page.json["entries"]?.arrayValue)
            #expect(entries.map { $0["path_lower"]?.stringValue } == ["/after.txt"])
            // Reading past the 3,003 earlier changes took 22,571 steps (5,291 with the range
            // on the change number alone, read from the first of the folder's 1,000); the one
            // after the cursor, with the token's check, takes 53.
            #expect(stepped < 1_000, "list_folder/continue took \(stepped) SQLite steps")
        }
    }

    @Test func everyFileVersionHasItsOwnRevision() async throws {
        try await withEmulator({ $0.seeds = ["files=3000,dirs=3,depth=1,size=10"] }) { client in
            var revs: [String] = []
            var page = try await client.rpc("files/list_folder", #"{"path":"","recursive":true}"#)
            while true {
                revs += (page.json["entries"]?.arrayValue ?? []).compactMap { $0["rev"]?.stringValue }
                guard page.json["has_more"] == .bool(true), let cursor = page.json["cursor"]?.stringValue else { break }
                page = try await client.rpc("files/list_folder/continue", #"{"cursor":"\#(cursor)"}"#)
            }
            #expect(revs.count == 3000)
            #expect(Set(revs).count == 3000)
            // And `rev:` finds exactly that version.
            let sample = try #require(revs.last)
            let byRev = try await client.rpc("files/get_metadata", #"{"path":"rev:\#(sample)"}"#)
            #expect(byRev.json["rev"]?.stringValue == sample)
        }
    }

    @Test func longpollWakesOnChangeAndTimesOutWithout() async throws {
        try await withEmulator({ $0.longpollMaxWait = 0.5 }) { client in
            let latest = try await client.rpc("files/list_folder/get_latest_cursor", #"{"path":"","recursive":true}"#)
            let cursor = try #require(latest.json["cursor"]?.stringValue)

            // Ends at the emulator's 0.5 s cap with no change (a lost wake-up would hang here).
            let none = try await client.rpc("files/list_folder/longpoll", #"{"cursor":"\#(cursor)","timeout":30}"#, token: nil)
            #expect(none.json["changes"] == .bool(false))

            let badTimeout = try await client.rpc("files/list_folder/longpoll", #"{"cursor":"\#(cursor)","timeout":5}"#, token: nil)
            #expect(badTimeout.status == 400)
        }
        // No cap on the wait: a poll that answers `changes: true` was woken by the change.
        try await withEmulator({ $0.longpollMaxWait = 480 }) { client in
            let latest = try await client.rpc("files/list_folder/get_latest_cursor", #"{"path":"/watched","recursive":true}"#)
            #expect(latest.status == 409)  // the folder must exist
            _ = try await client.rpc("files/create_folder_v2", #"{"path":"/watched"}"#)
            let cursor = try #require(try await client.rpc("files/list_folder/get_latest_cursor",
                                                           #"{"path":"/watched","recursive":true}"#).json["cursor"]?.stringValue)
            async let poll = client.rpc("files/list_folder/longpoll", #"{"cursor":"\#(cursor)","timeout":480}"#, token: nil)
            // A change elsewhere must not wake it; a change inside must, long before the timeout.
            _ = try await client.put("/elsewhere.txt", "x")
            _ = try await client.put("/watched/new.txt", "x")
            let result = try await poll
            #expect(result.json["changes"] == .bool(true))
        }
    }

    @Test func stateAndCursorsSurviveRestart() async throws {
        try await withDataDirectory { directory in
            var cursor = ""
            var uploaded = JSON.null
            try await withEmulator(dataDirectory: directory) { client in
                uploaded = try await client.put("/keep/me.txt", "persistent").json
                cursor = try #require(try await client.rpc("files/list_folder/get_latest_cursor",
                                                           #"{"path":"","recursive":true}"#).json["cursor"]?.stringValue)
                _ = try await client.put("/keep/after-cursor.txt", "later")
            }
            try await withEmulator(dataDirectory: directory) { client in
                let meta = try await client.rpc("files/get_metadata", #"{"path":"/keep/me.txt"}"#)
                #expect(meta.json["id"] == uploaded["id"])
                #expect(meta.json["rev"] == uploaded["rev"])
                #expect(try await client.download("/keep/me.txt").text == "persistent")
                let changes = try await client.rpc("files/list_folder/continue", #"{"cursor":"\#(cursor)"}"#)
                #expect(changes.status == 200)
                #expect(changes.json["entries"]?.arrayValue?.map { $0["path_lower"]?.stringValue } == ["/keep/after-cursor.txt"])
                let byID = try await client.rpc("files/get_metadata", #"{"path":"\#(uploaded["id"]?.stringValue ?? "")"}"#)
                #expect(byID.json["path_display"]?.stringValue == "/keep/me.txt")
            }
        }
    }

    @Test func resetCursorsGivesResetError() async throws {
        try await withEmulator { client in
            let cursor = try #require(try await client.rpc("files/list_folder/get_latest_cursor", #"{"path":""}"#).json["cursor"]?.stringValue)
            _ = try await client.request("/_emulator/reset-cursors")
            let reply = try await client.rpc("files/list_folder/continue", #"{"cursor":"\#(cursor)"}"#)
            #expect(reply.status == 409)
            #expect(reply.json["error"]?[".tag"]?.stringValue == "reset")
        }
    }
}
