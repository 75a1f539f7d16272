import DropboxAPI
import DropboxEmulator
import Foundation
import Testing
import TestSupport

/// `revisions`, `restore`, `share`, `unshare` and `search` given Dropbox paths (their use
/// with paths inside a mount is in MountTests/HistoryTests).
@Suite("dropboxfs CLI: history, links, search", .timeLimit(.minutes(2)))
struct HistoryCLITests {
    @Test(arguments: [["revisions"], ["restore"], ["share"], ["unshare"], ["search"]])
    func everyCommandExplainsItself(_ command: [String]) async throws {
        let result = try await CLI.run(command + ["--help"])
        #expect(result.status == 0)
        #expect(result.stdout.contains("OVERVIEW:") && result.stdout.contains("USAGE:"))
    }

    @Test func revisionsListAndRestoreBringBackTheBytes() async throws {
        try await withCLIEmulator { url, scratch in
            let env = ["DROPBOXFS_ACCESS_TOKEN": "cli-token", "DROPBOXFS_API_URL": url]
            try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
            for version in 1...3 {
                try Data("version \(version)\n".utf8).write(to: URL(fileURLWithPath: scratch + "/report.txt"))
                #expect(try await CLI.run(["put", scratch + "/report.txt", "/Docs/report.txt", "--overwrite"], environment: env).status == 0)
            }
            let listed = try await CLI.run(["revisions", "/Docs/report.txt", "--json"], environment: env)
            #expect(listed.status == 0, "\(listed.stderr)")
            let revisions = try listed.stdout.split(separator: "\n").map {
                try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any]
            }
            #expect(revisions.count == 3)
            let oldest = try #require(revisions.last?["rev"] as? String)

            // Without --rev: the version before the newest.
            #expect(try await CLI.run(["restore", "/Docs/report.txt"], environment: env).status == 0)
            #expect(try await content("/Docs/report.txt", env, scratch) == "version 2\n")
            let restored = try await CLI.run(["restore", "/Docs/report.txt", "--rev", oldest], environment: env)
            #expect(restored.status == 0, "\(restored.stderr)")
            #expect(restored.stdout.contains("restored /Docs/report.txt"))
            #expect(try await content("/Docs/report.txt", env, scratch) == "version 1\n")

            let bad = try await CLI.run(["restore", "/Docs/report.txt", "--rev", "0123456789abcdef"], environment: env)
            #expect(bad.status == 1 && bad.stderrLines.count == 1 && bad.stderr.contains("invalid_revision"), "\(bad.stderr)")
            let relative = try await CLI.run(["restore", "report.txt"], environment: env)
            #expect(relative.status == 1 && relative.stderr.contains("not inside a dropboxfs mount"))
        }
    }

    @Test func aDeletedFileComesBack() async throws {
        try await withCLIEmulator { url, scratch in
            let env = ["DROPBOXFS_ACCESS_TOKEN": "cli-token", "DROPBOXFS_API_URL": url]
            try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
            try Data("precious\n".utf8).write(to: URL(fileURLWithPath: scratch + "/p.txt"))
            #expect(try await CLI.run(["put", scratch + "/p.txt", "/p.txt"], environment: env).status == 0)
            try await deleteElsewhere(url, "/p.txt")
            let found = try await CLI.run(["search", "precious", "--deleted"], environment: env)
            #expect(found.stdout.isEmpty)
            let deleted = try await CLI.run(["search", "p.txt", "--deleted", "--json"], environment: env)
            #expect(deleted.stdout.contains(#""kind":"deleted""#) && deleted.stdout.contains(#""path":"/p.txt""#), "\(deleted.stdout)")
            let history = try await CLI.run(["revisions", "/p.txt"], environment: env)
            #expect(history.stdout.contains("deleted"))
            #expect(try await CLI.run(["restore", "/p.txt"], environment: env).status == 0)
            #expect(try await content("/p.txt", env, scratch) == "precious\n")
        }
    }

    @Test func shareTwicePrintsOneLinkAndUnshareRevokesIt() async throws {
        try await withCLIEmulator { url, scratch in
            let env = ["DROPBOXFS_ACCESS_TOKEN": "cli-token", "DROPBOXFS_API_URL": url]
            try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
            try Data("look\n".utf8).write(to: URL(fileURLWithPath: scratch + "/l.txt"))
            #expect(try await CLI.run(["put", scratch + "/l.txt", "/Public/l.txt"], environment: env).status == 0)
            let first = try await CLI.run(["share", "/Public/l.txt", "--expires", "30d"], environment: env)
            #expect(first.status == 0, "\(first.stderr)")
            let link = first.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(link.hasPrefix("https://"))
            let second = try await CLI.run(["share", "/Public/l.txt"], environment: env)
            #expect(second.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == link)
            let folder = try await CLI.run(["share", "/Public"], environment: env)
            #expect(folder.status == 0 && folder.stdout.trimmingCharacters(in: .whitespacesAndNewlines) != link)

            let revoked = try await CLI.run(["unshare", "/Public/l.txt"], environment: env)
            #expect(revoked.status == 0 && revoked.stdout.contains(link))
            let again = try await CLI.run(["unshare", "/Public/l.txt"], environment: env)
            #expect(again.status == 1 && again.stderr.contains("no shared link"))
            let fresh = try await CLI.run(["share", "/Public/l.txt"], environment: env)
            #expect(fresh.status == 0 && fresh.stdout.trimmingCharacters(in: .whitespacesAndNewlines) != link)

            let badExpiry = try await CLI.run(["share", "/Public/l.txt", "--expires", "soon"], environment: env)
            #expect(badExpiry.status == 1 && badExpiry.stderr.contains("--expires soon"))
            let missing = try await CLI.run(["share", "/nothing"], environment: env)
            #expect(missing.status == 1 && missing.stderr.contains("path/not_found"))
        }
    }

    @Test func searchFindsByNameWithSizesAndDates() async throws {
        try await withCLIEmulator { url, scratch in
            let env = ["DROPBOXFS_ACCESS_TOKEN": "cli-token", "DROPBOXFS_API_URL": url]
            let tree = scratch + "/tree"
            for (name, size) in [("a/Budget 2026.xlsx", 10), ("a/b/budget-notes.txt", 20), ("c/other.txt", 5)] {
                try FileManager.default.createDirectory(atPath: (tree + "/" + name as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                try Data(repeating: 65, count: size).write(to: URL(fileURLWithPath: tree + "/" + name))
            }
            #expect(try await CLI.run(["put", tree, "/t"], environment: env).status == 0)
            let plain = try await CLI.run(["search", "budget"], environment: env)
            #expect(plain.status == 0, "\(plain.stderr)")
            let lines = plain.stdout.split(separator: "\n").map(String.init)
            #expect(lines.count == 2)
            #expect(lines.contains { $0.hasSuffix("/t/a/Budget 2026.xlsx") && $0.contains(" 10  ") && $0.contains("T") })
            let scoped = try await CLI.run(["search", "BUDGET notes", "--path", "/t/a/b", "--json"], environment: env)
            let match = try JSONSerialization.jsonObject(with: Data(scoped.stdout.utf8)) as? [String: Any]
            #expect(match?["path"] as? String == "/t/a/b/budget-notes.txt")
            #expect(match?["size"] as? Int == 20)
            let limited = try await CLI.run(["search", "t", "--limit", "1"], environment: env)
            #expect(limited.stdout.split(separator: "\n").count == 1)
            let nowhere = try await CLI.run(["search", "x", "--path", "/missing"], environment: env)
            #expect(nowhere.status == 1 && nowhere.stderr.contains("not_found"))
        }
    }

    /// An empty query (or one of spaces) is refused before Dropbox is asked, in words: it
    /// printed Dropbox's bare `invalid_argument/...`.
    @Test func anEmptySearchIsRefusedInWords() async throws {
        try await withCLIEmulator { url, _ in
            let env = ["DROPBOXFS_ACCESS_TOKEN": "cli-token", "DROPBOXFS_API_URL": url]
            for query in ["", "   "] {
                let refused = try await CLI.run(["search", query], environment: env)
                #expect(refused.status == 1 && refused.stderr == "dropboxfs: search \(query): the query is empty: give at least one word of the names to find\n", "\(refused.stderr)")
            }
        }
    }
}

/// A Dropbox file's content, fetched with `get`.
private func content(_ remote: String, _ env: [String: String], _ scratch: String) async throws -> String {
    let local = scratch + "/fetched-" + UUID().uuidString
    let get = try await CLI.run(["get", remote, local], environment: env)
    #expect(get.status == 0, "\(get.stderr)")
    return String(decoding: FileManager.default.contents(atPath: local) ?? Data(), as: UTF8.self)
}

/// Deletes as another Dropbox client would.
private func deleteElsewhere(_ url: String, _ path: String) async throws {
    let client = DropboxClient(endpoints: try Endpoints(baseURL: url), tokens: StaticAccessToken("cli-token"))
    _ = try await client.rpc(Routes.delete, DeleteArgument(path: path))
}

@Suite("dropboxfs CLI: team accounts", .timeLimit(.minutes(2)))
struct TeamCLITests {
    @Test func aTeamWideTokenIsSavedWithTheMemberItActsFor() async throws {
        try await withCLIEmulator(team: true) { url, config in
            let env = ["DROPBOXFS_CONFIG_DIR": config]
            let without = try await CLI.run(["auth", "add-token", "--account", "team", "--access-token", "team-token", "--api-url", url], environment: env)
            #expect(without.status == 1 && without.stderr.contains("--member"), "\(without.stderr)")
            let saved = try await CLI.run(["auth", "add-token", "--account", "team", "--access-token", "team-token", "--api-url", url,
                                           "--member", TeamSpace.memberID], environment: env)
            #expect(saved.status == 0, "\(saved.stderr)")
            #expect(try await CLI.run(["auth", "list"], environment: env).stdout.contains("member \(TeamSpace.memberID)"))
            let listed = try await CLI.run(["ls", "/", "--account", "team"], environment: env)
            #expect(listed.status == 0 && listed.stdout.contains("Documents"), "\(listed.stderr)")  // the member's home
        }
    }
}
