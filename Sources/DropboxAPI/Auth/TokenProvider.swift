import Foundation

/// Supplies access tokens to the client and renews them when Dropbox says they expired.
public protocol AccessTokenProvider: Sendable {
    /// A token to send now (refreshed first when it is about to expire).
    func accessToken() async throws -> String
    /// Called after a 401 `expired_access_token` for `rejected`: returns a fresh token, or nil
    /// when this provider cannot renew (a long-lived token).
    func renew(after rejected: String) async throws -> String?
}

/// A long-lived token, from the App Console or `DROPBOXFS_ACCESS_TOKEN`.
public struct StaticAccessToken: AccessTokenProvider {
    let token: String
    public init(_ token: String) { self.token = token }
    public func accessToken() async throws -> String { token }
    public func renew(after rejected: String) async throws -> String? { nil }
}

/// Short-lived access tokens renewed from a refresh token. Refreshes happen before expiry
/// and on `expired_access_token`; many requests that notice the expiry together share one
/// refresh (single flight). `onRefresh` lets the owner persist the new token.
public actor RefreshingAccessToken: AccessTokenProvider {
    public struct State: Sendable, Codable, Equatable {
        public var accessToken: String?
        public var expiresAt: Date?
        public var refreshToken: String
        public var appKey: String
        public var appSecret: String?

        public init(accessToken: String?, expiresAt: Date?, refreshToken: String, appKey: String, appSecret: String? = nil) {
            self.accessToken = accessToken
            self.expiresAt = expiresAt
            self.refreshToken = refreshToken
            self.appKey = appKey
            self.appSecret = appSecret
        }
    }

    /// Refresh this long before the stated expiry, or a quarter of the token's lifetime if
    /// that is shorter.
    static let margin: TimeInterval = 300

    private var state: State
    private let oauth: OAuthClient
    private let onRefresh: @Sendable (State) -> Void
    private var inFlight: Task<OAuthClient.Grant, any Error>?
    private var margin = RefreshingAccessToken.margin
    public private(set) var refreshCount = 0

    public init(state: State, oauth: OAuthClient, onRefresh: @escaping @Sendable (State) -> Void = { _ in }) {
        self.state = state
        self.oauth = oauth
        self.onRefresh = onRefresh
    }

    public func accessToken() async throws -> String {
        if let token = state.accessToken, let expiry = state.expiresAt, expiry.timeIntervalSinceNow > margin {
            return token
        }
        return try await refresh()
    }

    public func renew(after rejected: String) async throws -> String? {
        if let current = state.accessToken, current != rejected, inFlight == nil { return current }
        return try await refresh()
    }

    private func refresh() async throws -> String {
        if let inFlight { return try await inFlight.value.accessToken }
        let (oauth, refreshToken, appKey, appSecret) = (self.oauth, state.refreshToken, state.appKey, state.appSecret)
        // The task records the new token itself, so that every waiter, resumed in any order,
        // finds the state already updated.
        let task = Task {
            let grant = try await oauth.refresh(refreshToken: refreshToken, appKey: appKey, appSecret: appSecret)
            self.apply(grant)
            return grant
        }
        inFlight = task
        defer { inFlight = nil }
        return try await task.value.accessToken
    }

    private func apply(_ grant: OAuthClient.Grant) {
        refreshCount += 1
        state.accessToken = grant.accessToken
        state.expiresAt = grant.expiresIn.map { Date().addingTimeInterval(TimeInterval($0)) }
        margin = min(Self.margin, TimeInterval(grant.expiresIn ?? 0) / 4)
        onRefresh(state)
    }
}
