/// `sharing/create_shared_link_with_settings`, `list_shared_links`, `revoke_shared_link`.

public struct SharedLinkSettings: Encodable, Sendable {
    /// `2026-12-31T00:00:00Z`: the link stops working then.
    public var expires: String?
    public init(expires: String? = nil) { self.expires = expires }
}

public struct CreateSharedLinkArgument: Encodable, Sendable {
    public var path: String
    public var settings: SharedLinkSettings?
    public init(path: String, settings: SharedLinkSettings? = nil) {
        self.path = path
        self.settings = settings
    }
}

/// `SharedLinkMetadata` (a file's or a folder's): what a shell user needs of it.
public struct SharedLink: Decodable, Sendable, Equatable {
    public var url: String
    public var name: String
    public var id: String?
    public var pathLower: String?
    public var expires: String?
    public var isFolder: Bool

    enum Keys: String, CodingKey { case tag = ".tag", url, name, id, pathLower, expires }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        url = try c.decode(String.self, forKey: .url)
        name = try c.decode(String.self, forKey: .name)
        id = try c.decodeIfPresent(String.self, forKey: .id)
        pathLower = try c.decodeIfPresent(String.self, forKey: .pathLower)
        expires = try c.decodeIfPresent(String.self, forKey: .expires)
        isFolder = try c.decodeIfPresent(String.self, forKey: .tag) == "folder"
    }
}

/// `CreateSharedLinkWithSettingsError`. A link that exists already comes back with it.
public enum CreateSharedLinkError: Decodable, Sendable, Equatable {
    case path(LookupError)
    case sharedLinkAlreadyExists(SharedLink?)
    case settingsError
    case accessDenied
    case other(String)

    public init(from decoder: any Decoder) throws {
        let union = try UnionReader(from: decoder)
        switch union.tag {
        case "path": self = .path(try union.nested(LookupError.self))
        case "shared_link_already_exists":
            self = .sharedLinkAlreadyExists(union.optionalField("shared_link_already_exists", ExistingLink.self)?.link)
        case "settings_error": self = .settingsError
        case "access_denied": self = .accessDenied
        case let tag: self = .other(tag)
        }
    }

    /// `SharedLinkAlreadyExistsMetadata`: a union whose `metadata` member is the link.
    struct ExistingLink: Decodable {
        let link: SharedLink?
        init(from decoder: any Decoder) throws {
            let union = try UnionReader(from: decoder)
            link = union.tag == "metadata" ? try union.nested(SharedLink.self) : nil
        }
    }
}

public struct ListSharedLinksArgument: Encodable, Sendable {
    public var path: String?
    public var cursor: String?
    public var directOnly: Bool?
    public init(path: String? = nil, cursor: String? = nil, directOnly: Bool? = nil) {
        self.path = path
        self.cursor = cursor
        self.directOnly = directOnly
    }
}

public struct ListSharedLinksResult: Decodable, Sendable {
    public var links: [SharedLink]
    public var hasMore: Bool
    public var cursor: String?
}

/// `ListSharedLinksError`.
public enum ListSharedLinksError: Decodable, Sendable, Equatable {
    case path(LookupError)
    case reset
    case other(String)

    public init(from decoder: any Decoder) throws {
        let union = try UnionReader(from: decoder)
        switch union.tag {
        case "path": self = .path(try union.nested(LookupError.self))
        case "reset": self = .reset
        case let tag: self = .other(tag)
        }
    }
}

public struct RevokeSharedLinkArgument: Encodable, Sendable {
    public var url: String
    public init(url: String) { self.url = url }
}

/// `RevokeSharedLinkError`.
public enum RevokeSharedLinkError: Decodable, Sendable, Equatable {
    case sharedLinkNotFound
    case sharedLinkAccessDenied
    case sharedLinkMalformed
    case other(String)

    public init(from decoder: any Decoder) throws {
        switch try UnionReader(from: decoder).tag {
        case "shared_link_not_found": self = .sharedLinkNotFound
        case "shared_link_access_denied": self = .sharedLinkAccessDenied
        case "shared_link_malformed": self = .sharedLinkMalformed
        case let tag: self = .other(tag)
        }
    }
}
