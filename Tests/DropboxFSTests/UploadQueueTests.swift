import DropboxFS
import Foundation
import Testing
import TestSupport

/// The durable upload queue on its own (no server): its records across versions of its schema.
@Suite("core: upload queue")
struct UploadQueueTests {
    /// A queue an earlier dropboxfs wrote (no boot or flush columns) opens, keeps its records
    /// and trusts them, as that dropboxfs did; a record saved again says its boot and flush.
    @Test func aQueueFromBeforeBootIDsOpensAndKeepsItsRecords() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("queue-\(UUID().uuidString).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) } }
        let create = try await ProcessRunner.run("/usr/bin/sqlite3", [path, """
            CREATE TABLE uploads (id INTEGER PRIMARY KEY, path TEXT NOT NULL, staging TEXT NOT NULL, size INTEGER NOT NULL,
                modified INTEGER NOT NULL, modified_nsec INTEGER NOT NULL, base_rev TEXT, session_id TEXT,
                sent_chunks TEXT NOT NULL DEFAULT '');
            INSERT INTO uploads VALUES (7, '/a.txt', '/staging/7', 3, 1000, 0, NULL, NULL, '');
            """])
        #expect(create.status == 0, "\(create)")

        let queue = try UploadQueue(path: path)
        let old = try #require(try queue.all().first)
        #expect(old.id == 7 && old.path == "/a.txt" && !old.flushed && old.bootID == "")
        #expect(old.isTrusted)

        var upload = old
        upload.bootID = "an-earlier-boot"
        try queue.save(upload)
        #expect(try queue.all().first?.isTrusted == false)
        #expect(old.contentHash == nil)
        try queue.markFlushed([(7, "abc123")])
        let saved = try #require(try queue.all().first)
        #expect(saved.flushed && saved.bootID == "an-earlier-boot" && saved.isTrusted && saved.isFromEarlierBoot)
        #expect(saved.contentHash == "abc123")
    }
}
