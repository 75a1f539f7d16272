import ArgumentParser
import CFuseShim
import DropboxAPI
import DropboxFS
import Foundation

/// `dropboxfs revisions PATH`: a file's versions, newest first (doc/SEMANTICS.md, "History").
struct RevisionsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revisions", abstract: "List the versions Dropbox keeps of a file, newest first.")

    @Argument(help: "A file inside a dropboxfs mount, or a Dropbox path (/Docs/a.txt); a deleted file too.")
    var path: String

    @Flag(help: "One JSON object per line (rev, size, server_modified, content_hash).")
    var json = false

    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        try await reportingErrors("revisions \(path)") {
            let target = try TargetPath.resolve(path)
            let client = try target.client(connection)
            let history = try await client.rpc(Routes.listRevisions, ListRevisionsArgument(path: target.remote))
            if history.isDeleted && !json { print("(deleted: 'dropboxfs restore \(path)' brings back the newest version)") }
            for entry in history.entries {
                if json {
                    printJSON(["rev": entry.rev, "size": entry.size, "server_modified": entry.serverModified,
                               "content_hash": entry.contentHash ?? "", "deleted": history.isDeleted])
                } else {
                    print(entry.serverModified + "  " + ListCommand.column(String(entry.size), 12) + "  " + entry.rev)
                }
            }
        }
    }
}

/// `dropboxfs restore PATH [--rev REV]`: brings back a version, or a deleted file.
struct RestoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore", abstract: "Bring back an earlier version of a file, or a deleted file.",
        discussion: """
            Without --rev: a deleted file comes back as it was last; a file that exists goes back \
            to the version before its newest. The version replaced stays in the history \
            ('dropboxfs revisions PATH'), so a restore can be undone the same way.
            """)

    @Argument(help: "A file inside a dropboxfs mount, or a Dropbox path (/Docs/a.txt).")
    var path: String

    @Option(help: "The revision to restore (from 'dropboxfs revisions PATH').")
    var rev: String?

    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        try await reportingErrors("restore \(path)") {
            let target = try TargetPath.resolve(path)
            let client = try target.client(connection)
            var chosen = rev
            if chosen == nil {
                let history = try await client.rpc(Routes.listRevisions, ListRevisionsArgument(path: target.remote, limit: 2))
                let index = history.isDeleted ? 0 : 1
                guard history.entries.count > index else {
                    throw ClientError.local(history.isDeleted ? "Dropbox keeps no version of it" : "it has no earlier version")
                }
                chosen = history.entries[index].rev
            }
            let restored = try await client.rpc(Routes.restore, RestoreArgument(path: target.remote, rev: chosen!))
            if target.mount != nil { await MountedRevision.awaitShown(restored.rev, at: path) }
            print("restored \(target.shown(restored.pathDisplay ?? target.remote)) to the version of \(restored.clientModified) "
                  + "(\(restored.size) bytes), now rev \(restored.rev)")
        }
    }
}

/// Writes one JSON object on a line of its own (keys sorted, for scripts and tests).
func printJSON(_ object: [String: Any]) {
    guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else { return }
    print(String(decoding: data, as: UTF8.self))
}

/// Waits until a mount shows a revision Dropbox just made (its change feed brings it within
/// a second or two), so what the user reads next is the restored file. Gives up quietly after
/// `patience`, or at once on a mount without extended attributes (-o noxattr).
enum MountedRevision {
    static let patience: Duration = .seconds(30)

    static func awaitShown(_ rev: String, at path: String) async {
        let deadline = ContinuousClock.now + patience
        while ContinuousClock.now < deadline {
            var buffer = [UInt8](repeating: 0, count: 64)
            let length = getxattr(path, "user.dropbox.rev", &buffer, buffer.count)
            if length < 0 && errno == ENOTSUP { return }
            if length > 0 && String(decoding: buffer[..<length], as: UTF8.self) == rev { return }
            try? await Task.sleep(for: .milliseconds(50))
        }
        FuseLog.write("dropboxfs restore: the mount does not show the restored version yet; it will shortly\n")
    }
}
