import DropboxAPI
import Foundation

/// `-o root=`: which of the account's namespaces the mount shows (doc/SEMANTICS.md, "Team
/// spaces"). By default a team member sees the team space's root, with the team folders
/// and their own home folder in it, as the Dropbox app shows it; anyone else sees their home.
enum MountRoot: Equatable {
    case home
    case team
    case namespace(String)

    static func parse(_ text: String) throws -> MountRoot {
        switch text {
        case "home": return .home
        case "team": return .team
        case _ where text.hasPrefix("ns:") && text.count > 3 && text.dropFirst(3).allSatisfy(\.isNumber):
            return .namespace(String(text.dropFirst(3)))
        default: throw ClientError.local("root=\(text): give home, team or ns:NAMESPACE_ID")
        }
    }

    /// What a mount of `asked` (nil: the default) of an account with `info` uses: the path
    /// root its requests carry, the suffix of its cache folder (cursors and metadata are per
    /// root), and whether its top folder is the team space's, where members may not write.
    struct Resolved: Equatable {
        var pathRoot: PathRoot?
        var cacheSuffix: String
        var protectsTop: Bool
        /// For the status file and commands given a path of the mount.
        var name: String
    }

    static func resolve(_ asked: MountRoot?, info: RootInfo?) throws -> Resolved {
        let team = info?.hasTeamSpace == true ? info : nil
        switch asked ?? (team != nil ? .team : .home) {
        case .home:
            return Resolved(pathRoot: team != nil ? .home : nil, cacheSuffix: "", protectsTop: false, name: "home")
        case .team:
            guard let team else { throw ClientError.local("root=team: this account has no team space (its root is its home)") }
            return Resolved(pathRoot: .root(team.rootNamespaceId), cacheSuffix: "-team-" + team.rootNamespaceId, protectsTop: true,
                            name: "root:" + team.rootNamespaceId)
        case .namespace(let id):
            if let team, id == team.rootNamespaceId { return try resolve(.team, info: info) }
            if id == info?.homeNamespaceId { return try resolve(.home, info: info) }
            return Resolved(pathRoot: .namespace(id), cacheSuffix: "-ns-" + id, protectsTop: false, name: "ns:" + id)
        }
    }
}

extension PathRoot {
    /// The status file's spelling back (`MountRoot.Resolved.name`); nil for the home.
    static func fromStatus(_ text: String?) -> PathRoot? {
        guard let text else { return nil }
        if text.hasPrefix("root:") { return .root(String(text.dropFirst(5))) }
        if text.hasPrefix("ns:") { return .namespace(String(text.dropFirst(3))) }
        return nil  // "home": Dropbox's default, no header
    }
}
