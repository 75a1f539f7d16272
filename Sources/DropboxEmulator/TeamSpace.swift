import Foundation

/// The team space of an account started with `--team` (`EmulatorConfiguration.team`), shaped
/// as Dropbox shapes a team member's view:
///
///     /                  the team space root (namespace `rootNamespaceID`): members may not
///                        write here (no files or folders of their own at the top)
///     /Emma Ulator       the member's home folder (namespace `homeNamespaceID`)
///     /Team Shared       a shared team folder (namespace `sharedNamespaceID`)
///
/// The emulator keeps one tree for all of it; a request's `Dropbox-API-Path-Root` header
/// (`PathRootScope`) picks the folder its paths are relative to. Without the header a team
/// member's paths are relative to the home folder, as on Dropbox.
public enum TeamSpace {
    public static let rootNamespaceID = "3000"
    public static let homeNamespaceID = "1000"
    public static let sharedNamespaceID = "4000"
    static let homeFolder = DropboxPath(display: "/Emma Ulator")
    static let sharedFolder = DropboxPath(display: "/Team Shared")
    /// The member a team-wide token acts for (`Dropbox-API-Select-User`).
    public static let memberID = "dbmid:AAHemmaUlatorEmulatedMember0001"

    /// The folder a namespace id names in the team tree (nil: not one this member may use).
    static func folder(ofNamespace id: String) -> DropboxPath? {
        switch id {
        case rootNamespaceID: return .root
        case homeNamespaceID: return homeFolder
        case sharedNamespaceID: return sharedFolder
        default: return nil
        }
    }

    /// `users/get_current_account`'s `root_info`.
    static func rootInfo(team: Bool) -> JSON {
        guard team else {
            return .tagged("user", [("root_namespace_id", .string(homeNamespaceID)), ("home_namespace_id", .string(homeNamespaceID))])
        }
        return .tagged("team", [("root_namespace_id", .string(rootNamespaceID)), ("home_namespace_id", .string(homeNamespaceID)),
                                ("home_path", .string(homeFolder.display))])
    }
}

/// The folder a request's paths are relative to, from its `Dropbox-API-Path-Root` header
/// (`{".tag": "home"}`, `{".tag": "root", "root": ID}`, `{".tag": "namespace_id",
/// "namespace_id": ID}`). Paths in the argument get the folder put in front; paths in the
/// result (`path_lower`, `path_display`) have it taken off.
struct PathRootScope {
    /// nil: the paths are the tree's own.
    let folder: DropboxPath?

    static let none = PathRootScope(folder: nil)

    /// The scope of a request. A root or namespace the account cannot use is refused as
    /// Dropbox refuses it: HTTP 422 with a `PathRootError`.
    static func of(header: String?, team: Bool, route: String) throws -> PathRootScope {
        let home = team ? TeamSpace.homeFolder : nil
        guard let header else { return PathRootScope(folder: home) }
        let json: JSON
        do { json = try JSON.parse(header) } catch {
            throw APIFailure.badInput("Error in call to API function \"\(route)\": HTTP header \"Dropbox-API-Path-Root\": could not decode input as JSON")
        }
        let args = try Args(json, route: route, context: "HTTP header \"Dropbox-API-Path-Root\"")
        let tag = try args.string(".tag")
        switch tag {
        case "home":
            try args.finish()
            return PathRootScope(folder: home)
        case "root":
            let id = try args.string("root")
            try args.finish()
            let root = team ? TeamSpace.rootNamespaceID : TeamSpace.homeNamespaceID
            guard id == root else {
                throw APIFailure.pathRoot(.tagged("invalid_root", [("invalid_root", TeamSpace.rootInfo(team: team))]))
            }
            return .none
        case "namespace_id":
            let id = try args.string("namespace_id")
            try args.finish()
            guard let folder = team ? TeamSpace.folder(ofNamespace: id) : (id == TeamSpace.homeNamespaceID ? DropboxPath.root : nil) else {
                throw APIFailure.pathRoot(.tagged("no_permission"))
            }
            return PathRootScope(folder: folder.isRoot ? nil : folder)
        default:
            throw args.failure("unknown tag '\(tag)'")
        }
    }

    // MARK: Arguments in, results out

    /// Fields of route arguments that hold a path (alone, or a list of them).
    private static let pathFields: Set<String> = ["path", "from_path", "to_path"]

    /// The argument with every path under the scope's folder. `files/search_v2` without a
    /// folder searches the scope's folder, not the whole tree.
    func inbound(_ argument: JSON, route: String) -> JSON {
        guard let folder else { return argument }
        var scoped = rewrite(argument, folder)
        if route == "files/search_v2", case .object(var members) = scoped {
            var options = members.first { $0.0 == "options" }?.1 ?? .object([])
            if case .object(var fields) = options, !fields.contains(where: { $0.0 == "path" && $0.1 != .null }) {
                fields.removeAll { $0.0 == "path" }
                fields.append(("path", .string(folder.display)))
                options = .object(fields)
            }
            members.removeAll { $0.0 == "options" }
            members.append(("options", options))
            scoped = .object(members)
        }
        return scoped
    }

    private func rewrite(_ value: JSON, _ folder: DropboxPath) -> JSON {
        switch value {
        case .object(let members):
            return .object(members.map { key, member in
                if Self.pathFields.contains(key), let path = member.stringValue { return (key, .string(Self.under(folder, path))) }
                if key == "paths", let items = member.arrayValue {
                    return (key, .array(items.map { $0.stringValue.map { .string(Self.under(folder, $0)) } ?? $0 }))
                }
                return (key, rewrite(member, folder))
            })
        case .array(let items):
            return .array(items.map { rewrite($0, folder) })
        default:
            return value
        }
    }

    /// `/a` → `/Folder/a`, `` → `/Folder`; ids and revisions are the tree's own.
    private static func under(_ folder: DropboxPath, _ path: String) -> String {
        if path.hasPrefix("id:") || path.hasPrefix("rev:") || path.hasPrefix("ns:") { return path }
        return path.isEmpty ? folder.display : folder.display + path
    }

    /// The result with the scope's folder taken off every path inside it.
    func outbound(_ result: JSON) -> JSON {
        guard let folder else { return result }
        switch result {
        case .object(let members):
            return .object(members.map { key, member in
                if key == "path_lower", let path = member.stringValue { return (key, .string(Self.strip(path, folder.lower))) }
                if key == "path_display", let path = member.stringValue { return (key, .string(Self.strip(path, folder.display))) }
                return (key, outbound(member))
            })
        case .array(let items):
            // The scope's folder itself is its root: a recursive listing does not show it.
            return .array(items.filter { $0["path_lower"]?.stringValue != folder.lower }.map(outbound))
        default:
            return result
        }
    }

    private static func strip(_ path: String, _ prefix: String) -> String {
        guard path.count > prefix.count, DropboxPath.fold(String(path.prefix(prefix.count))) == DropboxPath.fold(prefix),
              path.dropFirst(prefix.count).hasPrefix("/") else { return path }
        return String(path.dropFirst(prefix.count))
    }
}
