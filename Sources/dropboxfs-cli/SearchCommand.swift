import ArgumentParser
import DropboxAPI
import Foundation

/// `dropboxfs search QUERY`: files and folders whose names hold every word of the query.
struct SearchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "search", abstract: "Find files and folders by name, with Dropbox's search.",
        discussion: """
            Prints one match a line: size, modification time, path. Run inside a mount (or with \
            --path inside one) it prints the mount's paths; otherwise Dropbox paths. Dropbox \
            indexes changes within seconds to minutes: a file just written may not be found yet.
            """)

    @Argument(help: "Words to find in names (all of them, any case).")
    var query: String

    @Option(help: "Search only this folder: inside a mount, or a Dropbox path (default: the mount or the working directory's, else everything).")
    var path: String?

    @Option(help: "Print at most this many matches.")
    var limit = 1000

    @Flag(help: "Find deleted files instead (see 'dropboxfs restore').")
    var deleted = false

    @Flag(help: "One JSON object per line (path, dropbox_path, kind, size, server_modified, rev).")
    var json = false

    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        try await reportingErrors("search \(query)") {
            guard limit > 0 else { throw ClientError.local("--limit must be at least 1") }
            // Dropbox answers an empty query with a bare invalid_argument.
            guard !query.allSatisfy(\.isWhitespace) else {
                throw ClientError.local("the query is empty: give at least one word of the names to find")
            }
            let scope = try searchScope()
            let client = try scope.client(connection)
            let found = try await client.searchAll(query, under: scope.remote.isEmpty ? nil : scope.remote, deleted: deleted, limit: limit)
            for entry in found {
                let remote = entry.pathDisplay ?? "/" + entry.name
                let shown = scope.shown(remote)
                var size: Int64?
                var modified: String?
                var rev: String?
                let kind: String
                switch entry {
                case .file(let file): (kind, size, modified, rev) = ("file", file.size, file.serverModified, file.rev)
                case .folder: kind = "folder"
                case .deleted: kind = "deleted"
                }
                if json {
                    var object: [String: Any] = ["path": shown, "dropbox_path": remote, "kind": kind]
                    if let size { object["size"] = size }
                    if let modified { object["server_modified"] = modified }
                    if let rev { object["rev"] = rev }
                    printJSON(object)
                } else {
                    let sizeColumn = size.map { String($0) } ?? (kind == "folder" ? "-" : "")
                    print(ListCommand.column(sizeColumn, 12) + "  " + (modified ?? String(repeating: " ", count: 20)) + "  "
                          + shown + (kind == "folder" ? "/" : ""))
                }
            }
        }
    }

    /// --path as given; without it, the mount holding the working directory (all of it), or
    /// the whole account.
    private func searchScope() throws -> TargetPath {
        if let path { return try TargetPath.resolve(path) }
        if let here = try? TargetPath.resolve("."), let mount = here.mount {
            return TargetPath(remote: "", mount: mount)
        }
        return TargetPath(remote: "", mount: nil)
    }
}
