import ArgumentParser
import DropboxAPI
import DropboxFS
import Foundation

/// `dropboxfs share PATH`: the item's shared link, made once and the same ever after.
struct ShareCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "share", abstract: "Print a shared link to a file or folder, making it the first time.",
        discussion: """
            Anyone with the link can view and download the item. Asking again prints the same \
            link; 'dropboxfs unshare PATH' revokes it. Inside a mount, the attribute \
            user.dropbox.shared_link shows an existing link without making one.
            """)

    @Argument(help: "A file or folder inside a dropboxfs mount, or a Dropbox path (/Docs/a.txt).")
    var path: String

    @Option(help: "When a new link stops working: 2026-12-31, 2026-12-31T18:00:00Z, or 7d / 12h from now.")
    var expires: String?

    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        try await reportingErrors("share \(path)") {
            let target = try TargetPath.resolve(path)
            guard !target.remote.isEmpty else { throw ClientError.local("the root folder cannot be shared by link") }
            let expiry = try expires.map(LinkExpiry.parse)
            let client = try target.client(connection)
            let (link, created) = try await client.sharedLink(for: target.remote, expires: expiry)
            print(link.url)
            if !created, expiry != nil, link.expires != expiry {
                FuseLog.write("dropboxfs share: the link existed already; its expiry is unchanged (\(link.expires ?? "none"))\n")
            }
        }
    }
}

struct UnshareCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unshare", abstract: "Revoke the shared link of a file or folder.")

    @Argument(help: "A file or folder inside a dropboxfs mount, or a Dropbox path (/Docs/a.txt).")
    var path: String

    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        try await reportingErrors("unshare \(path)") {
            let target = try TargetPath.resolve(path)
            let client = try target.client(connection)
            let links = try await client.rpc(Routes.listSharedLinks, ListSharedLinksArgument(path: target.remote, directOnly: true)).links
            guard !links.isEmpty else { throw ClientError.local("it has no shared link") }
            for link in links {
                do {
                    _ = try await client.rpc(Routes.revokeSharedLink, RevokeSharedLinkArgument(url: link.url))
                } catch let error as CallError<RevokeSharedLinkError> {
                    // Revoked meanwhile (by an earlier try whose answer was lost): done all the same.
                    guard case .route(.sharedLinkNotFound, _, _, _) = error else { throw error }
                }
                print("revoked \(link.url)")
            }
        }
    }
}

/// `--expires` as typed, to a Dropbox timestamp.
enum LinkExpiry {
    static func parse(_ text: String) throws -> String {
        let now = Int64(Date().timeIntervalSince1970)
        if let unit = text.last, "dh".contains(unit), let count = Int64(text.dropLast()), count > 0 {
            return format(now + count * (unit == "d" ? 86_400 : 3_600))
        }
        if let date = DropboxDate.parse(text) ?? DropboxDate.parse(text + "T00:00:00Z") {
            return format(Int64(date.timeIntervalSince1970))
        }
        throw ClientError.local("--expires \(text): give a date (2026-12-31), a time (2026-12-31T18:00:00Z), or 7d / 12h")
    }

    static func format(_ seconds: Int64) -> String {
        DropboxDate.format(Date(timeIntervalSince1970: TimeInterval(seconds)))
    }
}
