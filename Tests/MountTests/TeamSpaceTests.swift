import DropboxAPI
import DropboxEmulator
import Foundation
import Testing
import TestSupport

/// A team member's account (`--team` in the emulator): the mount shows the team space's
/// root by default, `-o root=` picks another namespace, and the top of the team space takes
/// no changes (doc/SEMANTICS.md, "Team spaces").
@Suite("mount: team spaces", .serialized, .timeLimit(.minutes(5)))
struct TeamSpaceTests {
    @Test func theTeamRootListsTheTeamFoldersAndTheHomeAndWritesLandInTheirNamespace() async throws {
        try await MountFixture.with(team: true) { m in
            #expect(try await m.sh("ls \"$M\"").stdout == "Emma Ulator\nTeam Shared\n")
            #expect(try await m.sh("cat \"$M/Emma Ulator/Documents/notes.md\"").stdout.hasPrefix("# Notes"))

            let wrote = try await m.sh("printf 'for everyone\\n' > \"$M/Team Shared/plan.txt\" && printf 'mine\\n' > \"$M/Emma Ulator/mine.txt\"")
            #expect(wrote.status == 0, "\(wrote.stderr)")
            #expect(try await m.syncFolder("\"$M\"").status == 0)
            // Seen from the shared folder's own namespace, and from the member's home.
            let shared = m.client.withPathRoot(.namespace(TeamSpace.sharedNamespaceID))
            #expect(try await shared.rpc(Routes.getMetadata, GetMetadataArgument(path: "/plan.txt")).fileMetadata?.size == 13)
            #expect(try await m.remoteText("/mine.txt") == "mine\n")  // no path root: the home
            #expect(try await m.client.metadataIfExists("/plan.txt") == nil)

            // The top of the team space is the team's: nothing added, removed or renamed there.
            for attempt in ["mkdir \"$M/Mine\"", "touch \"$M/loose.txt\"", "rmdir \"$M/Team Shared\"",
                            "mv \"$M/Team Shared\" \"$M/Renamed\"", "mv \"$M/Emma Ulator/mine.txt\" \"$M/\""] {
                let result = try await m.sh(attempt)
                #expect(result.status != 0 && result.stderr.contains("Permission denied"), "\(attempt): \(result.stderr)")
            }
            #expect(try await m.sh("stat -c %A \"$M\"").stdout == "dr-xr-xr-x\n")
            #expect(try await m.sh("ls \"$M\"").stdout == "Emma Ulator\nTeam Shared\n")
            let both = try await m.sh("cat \"$M/Team Shared/plan.txt\" \"$M/Emma Ulator/mine.txt\"")
            #expect(both.stdout == "for everyone\nmine\n", "\(both.stderr)")
            #expect(try await m.statusReport()["root"] as? String == "root:" + TeamSpace.rootNamespaceID)
        }
    }

    @Test func rootOptionPicksTheHomeOrOneNamespace() async throws {
        try await MountFixture.with(mount: false, team: true) { m in
            try await m.mount(options: ["root=home"])
            #expect(try await m.sh("ls \"$M\"").stdout.contains("Documents"))
            #expect(try await m.sh("mkdir \"$M/mine\"").status == 0)  // the home's top is the member's
            try await m.unmount()

            try await m.mount(options: ["root=ns:" + TeamSpace.sharedNamespaceID])
            #expect(try await m.sh("printf s > \"$M/in-shared.txt\" && ls \"$M\"").stdout == "in-shared.txt\n")
            #expect(try await m.syncFolder("\"$M\"").status == 0)
            let root = m.client.withPathRoot(.root(TeamSpace.rootNamespaceID))
            #expect(try await root.metadataIfExists("/Team Shared/in-shared.txt") != nil)
            try await m.unmount()

            // Each root keeps its own cache: back at the team root, nothing is mixed up.
            try await m.mount()
            #expect(try await m.sh("ls \"$M\" \"$M/Team Shared\"").stdout == "\(m.mountpoint):\nEmma Ulator\nTeam Shared\n\n\(m.mountpoint)/Team Shared:\nin-shared.txt\n")
        }
    }

    @Test func commandsGivenATeamMountPathUseItsRoot() async throws {
        try await MountFixture.with(team: true) { m in
            _ = try await m.sh("printf v1 > \"$M/Team Shared/doc.txt\"")
            #expect(try await m.syncFolder("\"$M/Team Shared\"").status == 0)
            let shared = try await m.sh("'\(MountFixture.binary)' share \"$M/Team Shared/doc.txt\"")
            #expect(shared.status == 0 && shared.stdout.hasPrefix("https://"), "\(shared.stderr)")
            let found = try await m.sh("cd \"$M\" && '\(MountFixture.binary)' search doc.txt")
            #expect(found.stdout.hasSuffix("\(m.mountpoint)/Team Shared/doc.txt\n"), "\(found.stdout) \(found.stderr)")
            #expect(try await m.sh("ls \"$M/Team Shared/.dropbox/revisions/doc.txt\" | wc -l").stdout == "1\n")
        }
    }

    @Test func anAccountWithoutATeamSpaceRefusesRootTeam() async throws {
        try await MountFixture.with(mount: false) { m in
            let result = try await ProcessRunner.run(MountFixture.binary, ["mount", m.mountpoint, "--cache-dir", m.cacheDirectory, "-o", "root=team"],
                                                     environment: m.environment)
            #expect(result.status != 0 && result.stderr.contains("no team space"), "\(result.stderr)")
            let bad = try await ProcessRunner.run(MountFixture.binary, ["mount", m.mountpoint, "--cache-dir", m.cacheDirectory, "-o", "root=everything"],
                                                  environment: m.environment)
            #expect(bad.status != 0 && bad.stderr.contains("root=everything"), "\(bad.stderr)")
            #expect(!m.isMounted)
        }
    }
}
