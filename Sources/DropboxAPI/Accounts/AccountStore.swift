import Foundation

/// Saved accounts: `$DROPBOXFS_CONFIG_DIR` or `$XDG_CONFIG_HOME/dropboxfs` (default
/// `~/.config/dropboxfs`), file `accounts.json`, mode 0600 in a 0700 directory, written
/// atomically. Tokens are stored here and nowhere else; nothing prints them.
public struct AccountStore: Sendable {
    public struct Account: Codable, Sendable, Equatable {
        public var apiURL: String?
        public var accessToken: String?
        public var refreshToken: String?
        public var appKey: String?
        public var appSecret: String?
        public var expiresAt: Date?
        public var email: String?
        /// For a team-wide (team admin) token: the member it acts for (`dbmid:…`), sent as
        /// `Dropbox-API-Select-User` with every request.
        public var member: String?

        public init(apiURL: String? = nil, accessToken: String? = nil, refreshToken: String? = nil, appKey: String? = nil,
                    appSecret: String? = nil, expiresAt: Date? = nil, email: String? = nil, member: String? = nil) {
            self.apiURL = apiURL
            self.accessToken = accessToken
            self.refreshToken = refreshToken
            self.appKey = appKey
            self.appSecret = appSecret
            self.expiresAt = expiresAt
            self.email = email
            self.member = member
        }

        public var kind: String {
            (refreshToken != nil ? "refresh token" : "access token") + (member.map { " (team token, member \($0))" } ?? "")
        }
    }

    struct File: Codable {
        var defaultAccount: String?
        var accounts: [String: Account] = [:]
    }

    public let directory: URL
    var file: URL { directory.appendingPathComponent("accounts.json") }

    public init(directory: URL? = nil) {
        let environment = ProcessInfo.processInfo.environment
        if let directory { self.directory = directory }
        else if let dir = environment["DROPBOXFS_CONFIG_DIR"], !dir.isEmpty { self.directory = URL(fileURLWithPath: dir) }
        else if let xdg = environment["XDG_CONFIG_HOME"], !xdg.isEmpty { self.directory = URL(fileURLWithPath: xdg).appendingPathComponent("dropboxfs") }
        else { self.directory = FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".config/dropboxfs") }
    }

    public func list() throws -> (defaultAccount: String?, accounts: [String: Account]) {
        let contents = try load()
        return (contents.defaultAccount, contents.accounts)
    }

    /// The named account, or the default one.
    public func account(_ name: String?) throws -> (String, Account) {
        let contents = try load()
        guard let chosen = name ?? contents.defaultAccount ?? (contents.accounts.count == 1 ? contents.accounts.keys.first : nil) else {
            throw ClientError.notAuthenticated(contents.accounts.isEmpty
                ? "no account yet: run 'dropboxfs auth login' or 'dropboxfs auth add-token', or set DROPBOXFS_ACCESS_TOKEN"
                : "several accounts: choose one with --account (\(contents.accounts.keys.sorted().joined(separator: ", ")))")
        }
        guard let account = contents.accounts[chosen] else { throw ClientError.notAuthenticated("no account named '\(chosen)'") }
        return (chosen, account)
    }

    public func save(_ name: String, _ account: Account, makeDefault: Bool = false) throws {
        try update { contents in
            contents.accounts[name] = account
            if makeDefault || contents.defaultAccount == nil { contents.defaultAccount = name }
        }
    }

    /// Changes a saved account in place (nothing if it is gone).
    public func patch(_ name: String, _ change: (inout Account) -> Void) throws {
        try update { contents in
            guard var account = contents.accounts[name] else { return }
            change(&account)
            contents.accounts[name] = account
        }
    }

    public func remove(_ name: String) throws {
        try update { contents in
            contents.accounts.removeValue(forKey: name)
            if contents.defaultAccount == name { contents.defaultAccount = contents.accounts.keys.sorted().first }
        }
    }

    private func load() throws -> File {
        guard let data = FileManager.default.contents(atPath: file.path) else { return File() }
        do { return try JSONDecoder().decode(File.self, from: data) } catch {
            throw ClientError.local("\(file.path) is damaged (\(error)); remove it and sign in again")
        }
    }

    /// Read-modify-write under an exclusive lock on `accounts.lock`, so a mount saving a
    /// refreshed token and a login in another process never lose each other's changes.
    private func update(_ change: (inout File) -> Void) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        chmod(directory.path, 0o700)  // also when it existed before
        let lockFD = open(directory.appendingPathComponent("accounts.lock").path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard lockFD >= 0 else { throw ClientError.local("cannot lock \(directory.path): \(String(cString: strerror(errno)))") }
        defer { close(lockFD) }
        guard flock(lockFD, LOCK_EX) == 0 else { throw ClientError.local("cannot lock \(directory.path)") }
        defer { flock(lockFD, LOCK_UN) }
        var contents = try load()
        change(&contents)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data = try encoder.encode(contents)
        let temporary = directory.appendingPathComponent(".accounts.json.\(getpid()).\(UInt32.random(in: 0 ... .max))")
        guard FileManager.default.createFile(atPath: temporary.path, contents: data, attributes: [.posixPermissions: 0o600]),
              rename(temporary.path, file.path) == 0 else {
            unlink(temporary.path)
            throw ClientError.local("cannot write \(file.path): \(String(cString: strerror(errno)))")
        }
    }
}

extension AccountStore {
    /// A client for an account: `DROPBOXFS_ACCESS_TOKEN` if set (nothing stored), else the
    /// saved account, whose refreshed tokens are written back.
    /// `savedOnly` ignores `DROPBOXFS_ACCESS_TOKEN` (logout revokes the saved token).
    public func client(account name: String?, apiURL: String?, retry: RetryPolicy = RetryPolicy(), savedOnly: Bool = false) throws -> DropboxClient {
        let environment = ProcessInfo.processInfo.environment
        let transport = CurlTransport(userAgent: DropboxClient.userAgent)
        if !savedOnly, let token = Self.environmentToken {
            return DropboxClient(endpoints: try Endpoints.fromEnvironment(apiURL), tokens: StaticAccessToken(token), retry: retry, transport: transport)
        }
        let (chosen, account) = try self.account(name)
        let endpoints = try Self.server(of: account, named: chosen, asked: apiURL ?? environment["DROPBOXFS_API_URL"])
        let tokens: any AccessTokenProvider
        if let refresh = account.refreshToken, let appKey = account.appKey {
            let state = RefreshingAccessToken.State(accessToken: account.accessToken, expiresAt: account.expiresAt,
                                                    refreshToken: refresh, appKey: appKey, appSecret: account.appSecret)
            let store = self
            tokens = RefreshingAccessToken(state: state, oauth: OAuthClient(endpoints: endpoints, transport: transport)) { renewed in
                // Patch the saved account as it is now, and only if it still holds this
                // refresh token: a login made meanwhile is never overwritten.
                try? store.patch(chosen) { saved in
                    guard saved.refreshToken == renewed.refreshToken else { return }
                    saved.accessToken = renewed.accessToken
                    saved.expiresAt = renewed.expiresAt
                }
            }
        } else if let token = account.accessToken {
            tokens = StaticAccessToken(token)
        } else {
            throw ClientError.notAuthenticated("account '\(chosen)' has no token")
        }
        return DropboxClient(endpoints: endpoints, tokens: tokens, retry: retry, transport: transport, selectUser: account.member)
    }

    /// Which credentials `client(account:)` uses, as a name that never holds the token: the
    /// saved account's name, or a SHA-256 fingerprint of `DROPBOXFS_ACCESS_TOKEN`.
    public func credentialsName(account name: String?) -> String {
        if let token = Self.environmentToken { return "token " + ContentHasher.hash(Array(token.utf8)).prefix(24) }
        return "account " + ((try? account(name).0) ?? name ?? "")
    }

    private static var environmentToken: String? {
        ProcessInfo.processInfo.environment["DROPBOXFS_ACCESS_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
    }
}

extension AccountStore {
    /// Where a saved account's requests go: the server it was saved for, and only there. Its
    /// refresh token and app secret must never reach another server because a flag or
    /// `DROPBOXFS_API_URL` said so (a mistyped URL, a proxy): another server needs an account
    /// of its own (`login --api-url`).
    static func server(of account: Account, named name: String, asked: String?) throws -> Endpoints {
        func normal(_ url: String?) -> String? {
            guard var url, !url.isEmpty else { return nil }
            while url.hasSuffix("/") { url.removeLast() }
            return url
        }
        let saved = normal(account.apiURL)
        if let asked = normal(asked), asked != saved {
            throw ClientError.local("account '\(name)' was saved for \(saved ?? "Dropbox") and is not sent to \(asked); "
                                    + "log in to that server as an account of its own (dropboxfs login --api-url \(asked) --account NAME)")
        }
        return try saved.map { try Endpoints(baseURL: $0) } ?? .dropbox
    }

    /// A token as given by a person: trimmed, and refused if it holds characters no token has
    /// (a stray newline would otherwise end up inside an HTTP header).
    public static func cleanToken(_ raw: String) throws -> String {
        let token = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !token.isEmpty, token.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            throw ClientError.local("that does not look like a token (empty, or with spaces or control characters)")
        }
        return token
    }
}
