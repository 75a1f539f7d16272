import Foundation

/// Where requests go. Dropbox uses four hosts; the emulator serves all of them on one base
/// URL (`--api-url` / `DROPBOXFS_API_URL`).
public struct Endpoints: Sendable, Equatable {
    public enum Host: Sendable { case api, content, notify }

    public var api: String
    public var content: String
    public var notify: String
    /// Where users approve an app (`/oauth2/authorize`).
    public var web: String

    public static let dropbox = Endpoints(api: "https://api.dropboxapi.com", content: "https://content.dropboxapi.com",
                                          notify: "https://notify.dropboxapi.com", web: "https://www.dropbox.com")

    public init(api: String, content: String, notify: String, web: String) {
        self.api = api
        self.content = content
        self.notify = notify
        self.web = web
    }

    /// One base URL for every host. Plain `http` is accepted only for a loopback address:
    /// tokens never cross a network unencrypted.
    public init(baseURL: String) throws {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        guard let url = URL(string: base), let scheme = url.scheme?.lowercased(), let host = url.host else {
            throw ClientError.local("invalid API URL '\(baseURL)'")
        }
        switch scheme {
        case "https": break
        case "http":
            guard Self.isLoopback(host) else {
                throw ClientError.local("refusing plain http to \(host): use https (http is only for a loopback emulator)")
            }
        default: throw ClientError.local("invalid API URL '\(baseURL)': scheme must be https (or http on loopback)")
        }
        self.init(api: base, content: base, notify: base, web: base)
    }

    /// From `DROPBOXFS_API_URL` if set, else Dropbox's hosts.
    public static func fromEnvironment(_ override: String? = nil) throws -> Endpoints {
        if let url = override ?? ProcessInfo.processInfo.environment["DROPBOXFS_API_URL"], !url.isEmpty {
            return try Endpoints(baseURL: url)
        }
        return .dropbox
    }

    /// True for the name `localhost` and for IP literals in 127.0.0.0/8 or `::1`, and only
    /// for those: a DNS name such as `127.evil.example` resolves wherever its owner likes.
    static func isLoopback(_ host: String) -> Bool {
        let bare = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        if bare.lowercased() == "localhost" { return true }
        var v4 = in_addr()
        if inet_pton(AF_INET, bare, &v4) == 1 { return UInt32(bigEndian: v4.s_addr) >> 24 == 127 }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, bare, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { bytes in bytes.dropLast().allSatisfy { $0 == 0 } && bytes.last == 1 }
        }
        return false
    }

    func url(_ host: Host, route: String) -> String {
        let base: String
        switch host {
        case .api: base = api
        case .content: base = content
        case .notify: base = notify
        }
        return base + "/2/" + route
    }
}
