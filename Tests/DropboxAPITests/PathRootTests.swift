import DropboxAPI
import DropboxEmulator
import Foundation
import Testing

/// The client's path root (`withPathRoot`), root info, the 422 `PathRootError`, the team
/// member a team-wide token acts for, and the history, search and link routes.
@Suite("DropboxAPI: path roots, teams, history, links", .timeLimit(.minutes(2)))
struct PathRootTests {
    @Test func aTeamMembersPathsFollowThePathRoot() async throws {
        try await withClient({ $0.team = true }) { client, _ in
            let info = try #require(try await client.rpc(Routes.getCurrentAccount, NoArgument()).rootInfo)
            #expect(info.hasTeamSpace && info.homePath == "/Emma Ulator")
            let root = client.withPathRoot(.root(info.rootNamespaceId))
            #expect(try await root.listAll("").map(\.name).sorted() == ["Emma Ulator", "Team Shared"])
            _ = try await root.upload(Routes.upload, UploadArgument(CommitInfo(path: "/Team Shared/a.txt"), contentHash: nil), body: .bytes([1, 2]))
            let shared = client.withPathRoot(.namespace(TeamSpace.sharedNamespaceID))
            #expect(try await shared.listAll("").map(\.pathDisplay) == ["/a.txt"])
            await #expect(throws: CallError<PathWriteError>.self) {
                _ = try await root.upload(Routes.upload, UploadArgument(CommitInfo(path: "/top.txt"), contentHash: nil), body: .bytes([1]))
            }
            do {
                _ = try await client.withPathRoot(.root("42")).listAll("")
                Issue.record("a foreign root was accepted")
            } catch let error as CallError<PathLookupError> {
                guard case .pathRoot(.invalidRoot(let told), _, _) = error else { throw error }
                #expect(told?.rootNamespaceId == info.rootNamespaceId)
            }
        }
    }

    @Test func aTeamWideTokenNamesItsMember() async throws {
        try await withClient({ (configuration: inout EmulatorConfiguration) in
            configuration.team = true
            configuration.teamTokens = ["team"]
        }) { client, _ in
            let tokens = StaticAccessToken("team")
            let member = DropboxClient(endpoints: client.endpoints, tokens: tokens, selectUser: TeamSpace.memberID)
            let email = try await member.rpc(Routes.getCurrentAccount, NoArgument()).email
            #expect(email.contains("@"))
            let nobody = DropboxClient(endpoints: client.endpoints, tokens: tokens)
            await #expect(throws: CallError<NoRouteError>.self) { _ = try await nobody.rpc(Routes.getCurrentAccount, NoArgument()) }
        }
    }

    @Test func revisionsRestoreSearchAndLinks() async throws {
        try await withClient { client, _ in
            for text in ["one", "two"] {
                _ = try await client.upload(Routes.upload, UploadArgument(CommitInfo(path: "/h/f.txt", mode: .overwrite), contentHash: nil),
                                            body: .bytes(Array(text.utf8)))
            }
            let history = try await client.rpc(Routes.listRevisions, ListRevisionsArgument(path: "/h/f.txt"))
            #expect(history.entries.map(\.size) == [3, 3] && !history.isDeleted)
            let restored = try await client.rpc(Routes.restore, RestoreArgument(path: "/h/f.txt", rev: history.entries[1].rev))
            #expect(restored.contentHash == history.entries[1].contentHash)
            #expect(try await client.searchAll("f.txt").compactMap(\.pathDisplay) == ["/h/f.txt"])
            let (link, created) = try await client.sharedLink(for: "/h/f.txt")
            let (again, createdAgain) = try await client.sharedLink(for: "/h/f.txt")
            #expect(created && !createdAgain && again.url == link.url && !link.isFolder)
            #expect(try await client.existingSharedLink(for: "/h") == nil)
        }
    }
}
