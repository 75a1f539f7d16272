import ArgumentParser
import DropboxAPI
import DropboxFS
import Foundation

/// `dropboxfs`: a Dropbox account from the command line (and, soon, mounted).
@main
struct DropboxFSCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dropboxfs",
        abstract: "Use a Dropbox account from Linux: sign in, list, copy files in and out.",
        discussion: """
            Accounts live in $DROPBOXFS_CONFIG_DIR or $XDG_CONFIG_HOME/dropboxfs (mode 0600). \
            DROPBOXFS_ACCESS_TOKEN, when set, is used without storing anything. \
            DROPBOXFS_API_URL (or --api-url) points at another server, such as the bundled emulator.
            """,
        version: DropboxClient.version,
        subcommands: [AuthCommand.self, AccountCommand.self, ListCommand.self, GetCommand.self, PutCommand.self,
                      MountCommand.self, UnmountCommand.self, StatusCommand.self, PinCommand.self, UnpinCommand.self,
                      RevisionsCommand.self, RestoreCommand.self, ShareCommand.self, UnshareCommand.self, SearchCommand.self]
    )

    /// Also serves as the mount helper: mount.fuse3 runs `dropboxfs SOURCE MOUNTPOINT -o OPTIONS`
    /// for an fstab line of type fuse.dropboxfs, which is `dropboxfs mount SOURCE MOUNTPOINT -o …`.
    static func main() async {
        var arguments = Array(CommandLine.arguments.dropFirst())
        let names = Set(configuration.subcommands.map { $0._commandName } + ["help"])
        if let first = arguments.first, !first.hasPrefix("-"), !names.contains(first) {
            arguments.insert("mount", at: 0)
        }
        do {
            var command = try parseAsRoot(arguments)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }
}

/// Options every command that talks to Dropbox takes.
struct ConnectionOptions: ParsableArguments {
    @Option(help: "Saved account to use (default: the default account).")
    var account: String?

    @Option(help: "API base URL, e.g. http://127.0.0.1:8765 for the emulator (default: Dropbox, or $DROPBOXFS_API_URL).")
    var apiURL: String?

    func client() throws -> DropboxClient {
        try AccountStore().client(account: account, apiURL: apiURL)
    }
}

/// Runs a command body, turning any failure into one clear line on stderr and exit code 1.
func reportingErrors(_ what: String, _ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let exit as ExitCode {
        throw exit
    } catch {
        FuseLog.write("dropboxfs: \(what): \(describe(error))\n")
        throw ExitCode(1)
    }
}

/// CallError, ClientError and TransportError describe themselves in one line.
func describe(_ error: any Error) -> String { String(describing: error) }

/// A Dropbox path from what a user typed: "/" and "" are the root, a leading slash is added.
func remotePath(_ text: String) -> String {
    if text.isEmpty || text == "/" { return "" }
    var path = text.hasPrefix("/") ? text : "/" + text
    while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
    return path
}
