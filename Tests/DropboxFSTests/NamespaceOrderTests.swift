@testable import DropboxFS
import Foundation
import Testing

/// The order of namespace changes on its own (no server): which round an fsync of a folder
/// sends next while the background sender finishes renames beside it.
@Suite("core: the order of namespace changes")
struct NamespaceOrderTests {
    /// A removal numbered between two renames waits behind the first and may go once it is
    /// done: whenever that happens, the removal stays something to send until it is sent.
    /// Checked the way an fsync checks (`NamespaceSender.next`) from one thread while another
    /// finishes the first rename; each check that ends the wait with the removal pending is a
    /// folder's fsync returning before Dropbox has its removal (four-at-once differential,
    /// tree mix: the "waits behind a rename?" check read the barrier once more, after the
    /// rename had moved it past the removal).
    @Test func aRemovalBetweenTwoRenamesIsSentWhateverTheFirstRenameDoesMeanwhile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("order-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let queue = try UploadQueue(path: directory.appendingPathComponent("queue.sqlite").path)
        let store = try MetadataStore(path: directory.appendingPathComponent("metadata.sqlite").path)
        let order = NamespaceOrder(after: 0)
        let deletes = try PendingDeletes(queue: queue, order: order, handoffs: Handoffs())
        let folders = try PendingFolders(queue: queue, store: store, order: order, handoffs: Handoffs())
        let moves = try PendingMoves(queue: queue, order: order, deletes: deletes)

        var endedEarly = 0
        for round in 0..<300 {
            // Elsewhere: a rename, then one after the removal; here: the removal of /here/gone.
            try moves.add(Node(pathLower: "/elsewhere/a\(round)", name: "a\(round)", isFolder: false), to: "/elsewhere/b\(round)")
            let removal = Node(pathLower: "/here/gone\(round)", name: "gone\(round)", isFolder: true)
            try deletes.add(removal)
            try moves.add(Node(pathLower: "/elsewhere/c\(round)", name: "c\(round)", isFolder: false), to: "/elsewhere/d\(round)")
            let first = try #require(moves.oldest)

            let finishing = Thread { try? moves.finished(first) {} }
            finishing.start()
            // Until the first rename is done and well after: the checks meet its finish.
            var checks = 0
            while !finishing.isFinished || checks < 50 {
                checks += 1
                if NamespaceSender.next(touching: ["/here"], folders: folders, deletes: deletes, moves: moves) == nil { endedEarly += 1 }
            }
            #expect(NamespaceSender.next(touching: ["/here"], folders: folders, deletes: deletes, moves: moves) == .removals)

            // Clean: the removal and the second rename leave.
            try deletes.finished(deletes.all)
            let second = try #require(moves.oldest)
            try moves.finished(second) {}
            moves.settled(first)
            moves.settled(second)
        }
        #expect(endedEarly == 0)
    }
}
