import DropboxEmulator
import Foundation
import Testing
import TestSupport

/// The `dropboxfs` binary as a user runs it: a child process against a real emulator.
@Suite("dropboxfs CLI", .timeLimit(.minutes(2)))
struct CLITests {
    @Test(arguments: [["auth"], ["auth", "login"], ["auth", "add-token"], ["auth", "list"], ["auth", "logout"],
                      ["account"], ["ls"], ["get"], ["put"]])
    func everyCommandExplainsItself(_ command: [String]) async throws {
        let result = try await CLI.run(command + ["--help"])
        #expect(result.status == 0)
        #expect(result.stdout.contains("OVERVIEW:"))
        #expect(result.stdout.contains("USAGE:"))
    }

    @Test func failuresAreOneClearLine() async throws {
        try await withCLIEmulator { url, _ in
            let badToken = try await CLI.run(["account", "--api-url", url], environment: ["DROPBOXFS_ACCESS_TOKEN": "wrong"])
            #expect(badToken.status == 1)
            #expect(badToken.stderrLines == ["dropboxfs: account: not authorized: invalid_access_token/... (request id \(badToken.requestID ?? "?"))"])
            #expect(badToken.stdout.isEmpty)

            let dead = try await CLI.run(["ls", "/", "--api-url", "http://127.0.0.1:9"], environment: ["DROPBOXFS_ACCESS_TOKEN": "t"])
            #expect(dead.status == 1)
            #expect(dead.stderrLines.count == 1)
            #expect(dead.stderr.contains("Couldn't connect to server: http://127.0.0.1:9"))

            let missing = try await CLI.run(["get", "/no/such/file", "/tmp/x", "--api-url", url], environment: ["DROPBOXFS_ACCESS_TOKEN": "cli-token"])
            #expect(missing.status == 1)
            #expect(missing.stderrLines.count == 1)
            #expect(missing.stderr.contains("path/not_found"))

            let cleartext = try await CLI.run(["ls", "--api-url", "http://example.com"], environment: ["DROPBOXFS_ACCESS_TOKEN": "t"])
            #expect(cleartext.status == 1)
            #expect(cleartext.stderr.contains("refusing plain http"))

            let noAccount = try await CLI.run(["account"], environment: ["DROPBOXFS_CONFIG_DIR": "/nonexistent/dropboxfs-test"])
            #expect(noAccount.status == 1)
            #expect(noAccount.stderr.contains("dropboxfs auth login"))
        }
    }

    /// A failure with nobody to read about it (stderr closed, or a pipe whose reader is gone
    /// while SIGPIPE is ignored, as under libfuse, systemd or nohup) is still exit status 1:
    /// Foundation's FileHandle.write trapped on the failed write (status 132, and a crash
    /// report from every mount command whose test process had died).
    @Test func aFailureWithStandardErrorClosedIsStillExitStatusOne() async throws {
        let closed = try await ProcessRunner.shell("'\(CLI.binary)' unmount /nonexistent 2>&-; echo $?")
        #expect(closed.stdout == "1\n")
    }

    @Test func accountsLifecycleKeepsTokensPrivate() async throws {
        try await withCLIEmulator { url, config in
            let env = ["DROPBOXFS_CONFIG_DIR": config]
            let add = try await CLI.run(["auth", "add-token", "--account", "work", "--access-token", "cli-token", "--api-url", url], environment: env)
            #expect(add.status == 0, "\(add.stderr)")
            let file = config + "/accounts.json"
            let mode = try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int
            #expect(mode == 0o600)
            let list = try await CLI.run(["auth", "list"], environment: env)
            #expect(list.stdout.contains("work"))
            #expect(!list.stdout.contains("cli-token"))
            let account = try await CLI.run(["account"], environment: env)
            #expect(account.stdout.contains("@"))
            #expect(!account.stdout.contains("cli-token") && !account.stderr.contains("cli-token"))
            // The saved account talks to its own server only: neither a flag nor the
            // environment sends its tokens elsewhere.
            let elsewhere = try await CLI.run(["account", "--api-url", "http://127.0.0.1:9"], environment: env)
            #expect(elsewhere.status != 0 && elsewhere.stderr.contains("was saved for \(url)"), "\(elsewhere.stderr)")
            var redirected = env
            redirected["DROPBOXFS_API_URL"] = "http://127.0.0.1:9"
            let viaEnvironment = try await CLI.run(["account"], environment: redirected)
            #expect(viaEnvironment.status != 0 && viaEnvironment.stderr.contains("is not sent to http://127.0.0.1:9"), "\(viaEnvironment.stderr)")
            #expect(try await CLI.run(["account", "--api-url", url + "/"], environment: env).status == 0)

            let bad = try await CLI.run(["auth", "add-token", "--account", "bad", "--access-token", "wrong", "--api-url", url], environment: env)
            #expect(bad.status == 1)
            #expect(!(try await CLI.run(["auth", "list"], environment: env).stdout.contains("bad")))

            let logout = try await CLI.run(["auth", "logout", "--account", "work"], environment: env)
            #expect(logout.status == 0)
            #expect(!(try await CLI.run(["auth", "list"], environment: env).stdout.contains("work")))
            // The token was revoked on the server, not just forgotten here.
            let revoked = try await CLI.run(["account", "--api-url", url], environment: ["DROPBOXFS_ACCESS_TOKEN": "cli-token"])
            #expect(revoked.stderr.contains("invalid_access_token"))
        }
    }

    @Test func putAndGetTreesRoundTrip() async throws {
        try await withCLIEmulator { url, config in
            let env = ["DROPBOXFS_ACCESS_TOKEN": "cli-token", "DROPBOXFS_API_URL": url]
            let local = config + "/src"
            for i in 0..<30 {
                let dir = local + "/sub\(i % 3)"
                try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
                try Data("file \(i) — ünïcødé\n".utf8).write(to: URL(fileURLWithPath: dir + "/f\(i).txt"))
            }
            try FileManager.default.createDirectory(atPath: local + "/empty", withIntermediateDirectories: true)
            let put = try await CLI.run(["put", local, "/backup"], environment: env)
            #expect(put.status == 0, "\(put.stderr)")
            #expect(put.stdout.contains("30 files"))
            let ls = try await CLI.run(["ls", "-R", "/backup"], environment: env)
            #expect(ls.stdout.split(separator: "\n").count == 30 + 4)  // 30 files, 3 subfolders, 1 empty folder
            let get = try await CLI.run(["get", "/backup", config + "/copy"], environment: env)
            #expect(get.status == 0, "\(get.stderr)")
            for i in 0..<30 {
                let name = "/sub\(i % 3)/f\(i).txt"
                #expect(FileManager.default.contents(atPath: config + "/copy" + name) == FileManager.default.contents(atPath: local + name))
            }
            #expect(FileManager.default.fileExists(atPath: config + "/copy/empty"))
        }
    }

    /// A file of a tree refused in the commit batch is named with Dropbox's error, as other
    /// failures are ("path/conflict/file_ancestor/..."), not with the Swift value's dump
    /// ("path(DropboxAPI.WriteError.conflict(…))").
    @Test func aTreeFileRefusedInTheBatchIsNamedWithDropboxsError() async throws {
        try await withCLIEmulator { url, config in
            let env = ["DROPBOXFS_ACCESS_TOKEN": "cli-token", "DROPBOXFS_API_URL": url]
            try FileManager.default.createDirectory(atPath: config + "/tree", withIntermediateDirectories: true)
            try Data("b\n".utf8).write(to: URL(fileURLWithPath: config + "/tree/b.txt"))
            try Data("a\n".utf8).write(to: URL(fileURLWithPath: config + "/a.txt"))
            #expect(try await CLI.run(["put", config + "/a.txt", "/a"], environment: env).status == 0)
            let put = try await CLI.run(["put", config + "/tree", "/a"], environment: env)
            #expect(put.status == 1)
            #expect(put.stderr.contains("dropboxfs: /a/b.txt: path/conflict/file_ancestor/...\n") && !put.stderr.contains("DropboxAPI."), "\(put.stderr)")
        }
    }

    /// `get` of a folder where a local file is in the way (at the destination, or at one of
    /// the folder's subfolders) says so in one line; it printed Foundation's NSError dump.
    @Test func getOfAFolderOntoALocalFileSaysWhatIsInTheWay() async throws {
        try await withCLIEmulator { url, config in
            let env = ["DROPBOXFS_ACCESS_TOKEN": "cli-token", "DROPBOXFS_API_URL": url]
            try FileManager.default.createDirectory(atPath: config + "/tree/sub", withIntermediateDirectories: true)
            try Data("b\n".utf8).write(to: URL(fileURLWithPath: config + "/tree/sub/b.txt"))
            #expect(try await CLI.run(["put", config + "/tree", "/tree"], environment: env).status == 0)
            try Data("mine\n".utf8).write(to: URL(fileURLWithPath: config + "/file"))
            let onto = try await CLI.run(["get", "/tree", config + "/file"], environment: env)
            #expect(onto.status == 1 && onto.stderr == "dropboxfs: get /tree: cannot create folder \(config)/file: File exists\n", "\(onto.stderr)")
            try FileManager.default.createDirectory(atPath: config + "/copy/tree", withIntermediateDirectories: true)
            try Data("mine\n".utf8).write(to: URL(fileURLWithPath: config + "/copy/tree/sub"))
            let below = try await CLI.run(["get", "/tree", config + "/copy"], environment: env)
            #expect(below.status == 1 && below.stderr == "dropboxfs: get /tree: cannot create folder \(config)/copy/tree/sub: File exists\n", "\(below.stderr)")
            #expect(FileManager.default.contents(atPath: config + "/file") == Data("mine\n".utf8))
            #expect(FileManager.default.contents(atPath: config + "/copy/tree/sub") == Data("mine\n".utf8))
        }
    }

    /// `get` of a file into a local folder that does not exist names the destination the user
    /// gave, in the system's words; it named the download's temporary file
    /// ("cannot create DEST.dropboxfs-partial").
    @Test func getIntoAMissingLocalFolderNamesTheDestination() async throws {
        try await withCLIEmulator { url, config in
            let env = ["DROPBOXFS_ACCESS_TOKEN": "cli-token", "DROPBOXFS_API_URL": url]
            try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
            try Data("a\n".utf8).write(to: URL(fileURLWithPath: config + "/a.txt"))
            #expect(try await CLI.run(["put", config + "/a.txt", "/a.txt"], environment: env).status == 0)
            let got = try await CLI.run(["get", "/a.txt", config + "/missing/a.txt"], environment: env)
            #expect(got.status == 1 && got.stderr == "dropboxfs: get /a.txt: cannot create \(config)/missing/a.txt: No such file or directory\n", "\(got.stderr)")
            #expect(!FileManager.default.fileExists(atPath: config + "/missing"))
        }
    }

    /// A tree of one file is reported as "1 file", not "1 files".
    @Test func aTreeOfOneFileIsCountedInTheSingular() async throws {
        try await withCLIEmulator { url, config in
            let env = ["DROPBOXFS_ACCESS_TOKEN": "cli-token", "DROPBOXFS_API_URL": url]
            try FileManager.default.createDirectory(atPath: config + "/tree", withIntermediateDirectories: true)
            try Data("a\n".utf8).write(to: URL(fileURLWithPath: config + "/tree/a.txt"))
            let put = try await CLI.run(["put", config + "/tree", "/tree"], environment: env)
            #expect(put.status == 0 && put.stdout.hasPrefix("1 file (") && put.stdout.hasSuffix(" uploaded: /tree\n"), "\(put.stdout)\(put.stderr)")
            let get = try await CLI.run(["get", "/tree", config + "/copy"], environment: env)
            #expect(get.status == 0 && get.stdout.hasPrefix("1 file (") && get.stdout.hasSuffix(" downloaded: \(config)/copy\n"), "\(get.stdout)\(get.stderr)")
        }
    }

    /// `pin` of a path outside every dropboxfs mount is refused, and leaves no attribute
    /// there: on a local disk that takes user attributes (ext4, tmpfs), it set
    /// `user.dropbox.pinned` on the user's own folder and said it had pinned it.
    @Test func pinOutsideAMountIsRefusedAndWritesNothing() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pin-outside-" + UUID().uuidString).path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        for command in ["pin", "unpin"] {
            let refused = try await CLI.run([command, folder], environment: [:])
            #expect(refused.status == 1 && refused.stderr == "dropboxfs: \(command) \(folder): not inside a dropboxfs mount\n", "\(refused.stderr)")
        }
        let attributes = try await ProcessRunner.run("/usr/bin/python3", ["-c", "import os, sys; print(os.listxattr(sys.argv[1]))", folder], environment: [:])
        #expect(attributes.status == 0 && attributes.stdout == "[]\n", "\(attributes.stdout)\(attributes.stderr)")
    }

    /// `ls FILE` shows the file, as ls does, in both formats; it printed nothing and said
    /// nothing was wrong (the folder's own entry, left out of a listing, was the file itself).
    @Test func lsOfAFileShowsTheFile() async throws {
        try await withCLIEmulator { url, config in
            let env = ["DROPBOXFS_ACCESS_TOKEN": "cli-token", "DROPBOXFS_API_URL": url]
            try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
            try Data("hello\n".utf8).write(to: URL(fileURLWithPath: config + "/Notes.txt"))
            #expect(try await CLI.run(["put", config + "/Notes.txt", "/d/Notes.txt"], environment: env).status == 0)
            let short = try await CLI.run(["ls", "/d/notes.txt"], environment: env)
            #expect(short.status == 0 && short.stdout == "Notes.txt\n", "\(short.stdout)\(short.stderr)")
            let long = try await CLI.run(["ls", "-l", "/d/Notes.txt"], environment: env)
            #expect(long.status == 0 && long.stdout.hasPrefix("           6  ") && long.stdout.hasSuffix("  Notes.txt\n"), "\(long.stdout)\(long.stderr)")
            let recursive = try await CLI.run(["ls", "-R", "/d/Notes.txt"], environment: env)
            #expect(recursive.stdout == "/d/Notes.txt\n", "\(recursive.stdout)\(recursive.stderr)")
            let folder = try await CLI.run(["ls", "-R", "/d"], environment: env)
            #expect(folder.stdout == "/d/Notes.txt\n", "\(folder.stdout)\(folder.stderr)")
        }
    }
}

/// Starts an emulator (token `cli-token`) and a scratch config directory for one test. With
/// `team`, the account is a team member's, seeded with the demo tree in its home, and
/// `team-token` is a team-wide token.
func withCLIEmulator(team: Bool = false, _ body: (String, String) async throws -> Void) async throws {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("cli-test-" + UUID().uuidString)
    defer { try? FileManager.default.removeItem(at: root) }
    var configuration = EmulatorConfiguration(dataDirectory: root.appendingPathComponent("data"))
    configuration.tokens = ["cli-token"]
    if team {
        configuration.team = true
        configuration.teamTokens = ["team-token"]
        configuration.seeds = ["demo"]
    }
    let emulator = try await Emulator.start(configuration)
    do {
        try await body(emulator.baseURL, root.appendingPathComponent("config").path)
    } catch {
        await emulator.shutdown()
        throw error
    }
    await emulator.shutdown()
}

enum CLI {
    typealias Result = ProcessRunner.Result

    static var binary: String { ProcessInfo.processInfo.environment["DROPBOXFS_BIN"] ?? ProcessRunner.builtProduct("dropboxfs") }

    /// Runs the CLI with a clean environment (no saved accounts) plus `environment`.
    static func run(_ arguments: [String], environment: [String: String] = [:]) async throws -> Result {
        var env = ["DROPBOXFS_CONFIG_DIR": FileManager.default.temporaryDirectory.appendingPathComponent("cli-unused-config").path]
        env.merge(environment) { _, new in new }
        return try await ProcessRunner.run(binary, arguments, environment: env)
    }
}
