/// `Dropbox-API-Path-Root`: which namespace the paths of a request are relative to, as the
/// official SDK's `withPathRoot` sends it. A team member's paths are relative to their home
/// folder unless a request names the team space's root (or a shared folder's namespace).
public enum PathRoot: Sendable, Equatable, Encodable, CustomStringConvertible {
    /// The member's home namespace (Dropbox's default).
    case home
    /// The account's root namespace: for a team member, the team space with its folders.
    case root(String)
    /// A namespace the account can reach (a shared or team folder).
    case namespace(String)

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: UnionKey.self)
        switch self {
        case .home:
            try container.encode("home", forKey: .tag)
        case .root(let id):
            try container.encode("root", forKey: .tag)
            try container.encode(id, forKey: UnionKey("root"))
        case .namespace(let id):
            try container.encode("namespace_id", forKey: .tag)
            try container.encode(id, forKey: UnionKey("namespace_id"))
        }
    }

    public var description: String {
        switch self {
        case .home: return "home"
        case .root(let id): return "root \(id)"
        case .namespace(let id): return "namespace \(id)"
        }
    }
}

/// `RootInfo` of `users/get_current_account`: the account's root and home namespaces; a
/// team member's differ (their home is a folder of the team space, at `homePath`).
public struct RootInfo: Codable, Sendable, Equatable {
    public var tag: String
    public var rootNamespaceId: String
    public var homeNamespaceId: String
    public var homePath: String?

    enum Keys: String, CodingKey { case tag = ".tag", rootNamespaceId, homeNamespaceId, homePath }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        tag = try c.decodeIfPresent(String.self, forKey: .tag) ?? "user"
        rootNamespaceId = try c.decode(String.self, forKey: .rootNamespaceId)
        homeNamespaceId = try c.decode(String.self, forKey: .homeNamespaceId)
        homePath = try c.decodeIfPresent(String.self, forKey: .homePath)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(tag, forKey: .tag)
        try c.encode(rootNamespaceId, forKey: .rootNamespaceId)
        try c.encode(homeNamespaceId, forKey: .homeNamespaceId)
        try c.encodeIfPresent(homePath, forKey: .homePath)
    }

    public init(tag: String, rootNamespaceId: String, homeNamespaceId: String, homePath: String? = nil) {
        self.tag = tag
        self.rootNamespaceId = rootNamespaceId
        self.homeNamespaceId = homeNamespaceId
        self.homePath = homePath
    }

    /// A team space: the root holds more than the member's home.
    public var hasTeamSpace: Bool { rootNamespaceId != homeNamespaceId }
}

/// `PathRootError` (HTTP 422): the path root names a namespace the account cannot use.
public enum PathRootError: Decodable, Sendable, Equatable {
    /// Not the account's root: Dropbox says what the root is.
    case invalidRoot(RootInfo?)
    case noPermission
    case other(String)

    public init(from decoder: any Decoder) throws {
        let union = try UnionReader(from: decoder)
        switch union.tag {
        case "invalid_root": self = .invalidRoot(union.optionalField("invalid_root", RootInfo.self))
        case "no_permission": self = .noPermission
        case let tag: self = .other(tag)
        }
    }
}
