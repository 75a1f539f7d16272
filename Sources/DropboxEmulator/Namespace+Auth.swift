import Foundation

/// OAuth 2 state: authorization codes (PKCE), access and refresh tokens. Kept in the same
/// database as the namespace so that tokens survive a restart, like the files they open.
enum TokenCheck: Equatable {
    case valid
    case invalid
    case expired
}

struct TokenGrant {
    var accessToken: String
    var expiresIn: Int64
    var refreshToken: String?
    var scope: String
}

/// An OAuth error: `/oauth2/token` answers 400 with `{"error": code, "error_description": …}`.
struct OAuthFailure: Error {
    var code: String
    var description: String
}

extension Namespace {
    /// Issues a one-time code for an approved authorization request (valid ten minutes).
    /// `accessType` is `offline` (refresh token + short-lived access tokens), `online`
    /// (short-lived access token only) or `legacy` (long-lived access token).
    func issueAuthorizationCode(clientID: String, challenge: String?, accessType: String, redirectURI: String?,
                                scope: String) throws -> String {
        let code = Identifiers.secret(43)
        try locked {
            try database.run("INSERT INTO auth_codes (code, client_id, challenge, access_type, redirect_uri, scope, expires) VALUES (?,?,?,?,?,?,?)",
                             [.text(code), .text(clientID), .optional(challenge), .int(accessType == "offline" ? 1 : accessType == "online" ? 0 : 2),
                              .optional(redirectURI), .text(scope), .int(Timestamp.now() + 600)])
        }
        return code
    }

    /// `grant_type=authorization_code`: checks the code (once only), the client and the PKCE
    /// verifier, then issues tokens.
    func exchangeCode(_ code: String, clientID: String, verifier: String?, redirectURI: String?,
                      clientSecret: String?, lifetime: Int64) throws -> TokenGrant {
        try locked {
            let row = try database.first("SELECT client_id, challenge, access_type, redirect_uri, scope, expires FROM auth_codes WHERE code = ?",
                                         [.text(code)]) { ($0.text(0), $0.optionalText(1), $0.int(2), $0.optionalText(3), $0.text(4), $0.int(5)) }
            try database.run("DELETE FROM auth_codes WHERE code = ?", [.text(code)])
            guard let (codeClient, challenge, accessType, codeRedirect, scope, expires) = row, expires > Timestamp.now() else {
                throw OAuthFailure(code: "invalid_grant", description: "code doesn't exist or has expired")
            }
            guard codeClient == clientID else { throw OAuthFailure(code: "invalid_grant", description: "code was issued to another client") }
            guard codeRedirect == redirectURI else { throw OAuthFailure(code: "invalid_grant", description: "redirect_uri mismatch") }
            if let challenge {
                guard let verifier else { throw OAuthFailure(code: "invalid_grant", description: "code_verifier is required") }
                guard Self.pkceChallenge(verifier) == challenge else {
                    throw OAuthFailure(code: "invalid_grant", description: "invalid code verifier")
                }
            } else if clientSecret == nil {
                throw OAuthFailure(code: "invalid_client", description: "client_secret or PKCE is required")
            }
            let offline = accessType == 1
            let shortLived = accessType != 2
            var refresh: String?
            if offline {
                refresh = "emu-refresh." + Identifiers.secret(48)
                try storeTokenLocked(refresh!, kind: "refresh", expires: nil, family: refresh, scope: scope)
            }
            let access = "emu-access." + Identifiers.secret(48)
            try storeTokenLocked(access, kind: "access", expires: shortLived ? Self.nowMillis() + lifetime * 1000 : nil, family: refresh, scope: scope)
            return TokenGrant(accessToken: access, expiresIn: shortLived ? lifetime : 0, refreshToken: refresh, scope: scope)
        }
    }

    /// `grant_type=refresh_token`: a new short-lived access token of the same family.
    func refreshAccessToken(_ refresh: String, lifetime: Int64) throws -> TokenGrant {
        try locked {
            let scope = try database.first("SELECT scope FROM tokens WHERE token = ? AND kind = 'refresh'", [.text(refresh)]) { $0.text(0) }
            guard let scope else { throw OAuthFailure(code: "invalid_grant", description: "refresh token is malformed or revoked") }
            let access = "emu-access." + Identifiers.secret(48)
            try storeTokenLocked(access, kind: "access", expires: Self.nowMillis() + lifetime * 1000, family: refresh, scope: scope)
            return TokenGrant(accessToken: access, expiresIn: lifetime, refreshToken: nil, scope: scope)
        }
    }

    func checkAccessToken(_ token: String) -> TokenCheck {
        locked {
            let expires = try? database.first("SELECT expires FROM tokens WHERE token = ? AND kind = 'access'", [.text(token)]) {
                $0.isNull(0) ? Int64.max : $0.int(0)
            }
            guard let expires else { return .invalid }
            return expires > Self.nowMillis() ? .valid : .expired
        }
    }

    /// Every short-lived access token expires now (a test control: waiting out a lifetime
    /// would time the machine).
    func expireAccessTokens() throws {
        try locked {
            try database.run("UPDATE tokens SET expires = ? WHERE kind = 'access' AND expires IS NOT NULL", [.int(Self.nowMillis() - 1)])
        }
    }

    /// Refuses these names (besides Dropbox's own list) as `disallowed_name` from now on.
    func refuseNames(_ names: [String]) {
        locked { refusedNames.formUnion(names.map(DropboxPath.fold)) }
    }

    /// Registers a long-lived token given on the command line.
    func addLongLivedToken(_ token: String) throws {
        try locked { try storeTokenLocked(token, kind: "access", expires: nil, family: nil, scope: Self.allScopes) }
    }

    /// `auth/token/revoke`: the token, and with it its refresh token and that token's other
    /// access tokens, stop working.
    func revoke(_ token: String) throws {
        try locked {
            let family = try database.first("SELECT family FROM tokens WHERE token = ?", [.text(token)]) { $0.optionalText(0) } ?? nil
            try database.run("DELETE FROM tokens WHERE token = ?", [.text(token)])
            if let family { try database.run("DELETE FROM tokens WHERE family = ?", [.text(family)]) }
        }
    }

    /// Token expiry is kept in milliseconds: a lifetime of one second is one second, not
    /// "until the clock's next whole second".
    static func nowMillis() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    static let allScopes = "account_info.read files.content.read files.content.write files.metadata.read files.metadata.write"

    /// BASE64URL(SHA256(verifier)) without padding (RFC 7636, S256).
    static func pkceChallenge(_ verifier: String) -> String {
        Data(SHA256.digest(Array(verifier.utf8))).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    private func storeTokenLocked(_ token: String, kind: String, expires: Int64?, family: String?, scope: String) throws {
        try database.run("INSERT OR REPLACE INTO tokens (token, kind, expires, family, scope) VALUES (?,?,?,?,?)",
                         [.text(token), .text(kind), expires.map { .int($0) } ?? .null, .optional(family), .text(scope)])
    }
}
