import Foundation

/// OAuth 2: `/oauth2/authorize` approves at once (there is no user to ask) and hands out a
/// code, by redirect or on a page; `/oauth2/token` exchanges codes (PKCE S256 or plain) and
/// refresh tokens. `token_access_type=offline` yields a refresh token; access tokens from the
/// code flow are short-lived (`accessTokenLifetime`), except with `token_access_type=legacy`.
extension Emulator {
    func serveAuthorize(query: [String: String], _ exchange: Exchange) async throws {
        guard exchange.head.method == .GET else { throw APIFailure.badInput("Use GET for /oauth2/authorize.") }
        guard let clientID = query["client_id"], !clientID.isEmpty else {
            throw APIFailure.badInput("Invalid client_id: the \"client_id\" parameter is required.")
        }
        guard query["response_type"] == "code" else {
            throw APIFailure.badInput("Invalid response_type: only \"code\" is supported.")
        }
        var challenge = query["code_challenge"]
        switch query["code_challenge_method"] ?? (challenge == nil ? nil : "plain") {
        case nil: break
        case "S256": break
        case "plain": challenge = challenge.map(Namespace.pkceChallenge)
        case let other?: throw APIFailure.badInput("Invalid code_challenge_method \"\(other)\": use S256 or plain.")
        }
        if let challenge, challenge.count < 43 { throw APIFailure.badInput("Invalid code_challenge: too short.") }
        let accessType = query["token_access_type"] ?? "legacy"
        guard ["offline", "online", "legacy"].contains(accessType) else {
            throw APIFailure.badInput("Invalid token_access_type \"\(accessType)\".")
        }
        let code = try namespace.issueAuthorizationCode(
            clientID: clientID, challenge: challenge, accessType: accessType, redirectURI: query["redirect_uri"],
            scope: query["scope"] ?? Namespace.allScopes)
        if let redirect = query["redirect_uri"] {
            var location = redirect + (redirect.contains("?") ? "&" : "?") + "code=" + FormEncoding.escape(code)
            if let state = query["state"] { location += "&state=" + FormEncoding.escape(state) }
            try await exchange.writer.send(status: .found, contentType: "text/plain", body: [], headers: [("Location", location)])
            return
        }
        let page = """
            <!doctype html><html><head><title>dropbox-emulator: authorized</title></head><body>
            <p>The emulated account approved app <b>\(clientID.htmlEscaped)</b>. Enter this code in the app:</p>
            <code id="auth-code">\(code)</code>
            </body></html>
            """
        try await exchange.writer.send(status: .ok, contentType: "text/html; charset=utf-8", body: Array(page.utf8))
    }

    func serveToken(query: [String: String], _ exchange: Exchange) async throws {
        guard exchange.head.method == .POST else { throw APIFailure.badInput("Use POST for /oauth2/token.") }
        var form = query
        let body = try await exchange.body.collect(limit: 64 << 10)
        form.merge(FormEncoding.decode(String(decoding: body, as: UTF8.self))) { _, new in new }
        // Client credentials may come as HTTP Basic instead of form fields.
        if let basic = exchange.head.headers.first(name: "Authorization"), basic.lowercased().hasPrefix("basic "),
           let decoded = Data(base64Encoded: String(basic.dropFirst(6))).map({ String(decoding: $0, as: UTF8.self) }),
           let colon = decoded.firstIndex(of: ":") {
            form["client_id"] = form["client_id"] ?? String(decoded[..<colon])
            form["client_secret"] = form["client_secret"] ?? String(decoded[decoded.index(after: colon)...])
        }
        do {
            let grant: TokenGrant
            switch form["grant_type"] {
            case "authorization_code":
                guard let code = form["code"], let clientID = form["client_id"] else {
                    throw OAuthFailure(code: "invalid_request", description: "code and client_id are required")
                }
                grant = try namespace.exchangeCode(code, clientID: clientID, verifier: form["code_verifier"],
                                                   redirectURI: form["redirect_uri"], clientSecret: form["client_secret"],
                                                   lifetime: configuration.accessTokenLifetime)
            case "refresh_token":
                guard let refresh = form["refresh_token"] else {
                    throw OAuthFailure(code: "invalid_request", description: "refresh_token is required")
                }
                grant = try namespace.refreshAccessToken(refresh, lifetime: configuration.accessTokenLifetime)
            case let other:
                throw OAuthFailure(code: "unsupported_grant_type", description: "grant_type \"\(other ?? "")\" is not supported")
            }
            var fields: [(String, JSON)] = [("access_token", .string(grant.accessToken)), ("token_type", .string("bearer"))]
            if grant.expiresIn > 0 { fields.append(("expires_in", .int(grant.expiresIn))) }
            if let refresh = grant.refreshToken { fields.append(("refresh_token", .string(refresh))) }
            fields.append(("scope", .string(grant.scope)))
            if form["grant_type"] == "authorization_code" {
                fields += [("uid", .string("1000")), ("account_id", .string(Self.accountID))]
            }
            try await exchange.writer.sendJSON(.object(fields))
        } catch let failure as OAuthFailure {
            try await exchange.writer.sendJSON(.object([("error", .string(failure.code)), ("error_description", .string(failure.description))]),
                                               status: .badRequest)
        }
    }
}

extension String {
    var htmlEscaped: String {
        replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}
