import CCryptoShim
import Foundation

/// OAuth 2 for Dropbox: the authorization-code flow with PKCE (S256) and
/// `token_access_type=offline`, code exchange, refresh, and revocation.
public struct OAuthClient: Sendable {
    public struct Grant: Sendable, Decodable {
        public var accessToken: String
        public var tokenType: String?
        public var expiresIn: Int?
        public var refreshToken: String?
        public var scope: String?
        public var accountId: String?
        public var uid: String?
    }

    /// A started authorization: the URL to open and the secret to finish with.
    public struct PKCEFlow: Sendable {
        public var authorizeURL: String
        public var codeVerifier: String
        public var appKey: String
    }

    public let endpoints: Endpoints
    let transport: CurlTransport

    public init(endpoints: Endpoints, transport: CurlTransport) {
        self.endpoints = endpoints
        self.transport = transport
    }

    /// Starts the no-redirect flow: the user opens the URL, approves, and pastes the code.
    public func startPKCE(appKey: String, scopes: [String] = []) -> PKCEFlow {
        var random = [UInt8](repeating: 0, count: 48)
        for i in random.indices { random[i] = UInt8.random(in: .min ... .max) }
        let verifier = Self.base64URL(random)
        var query = [
            ("client_id", appKey), ("response_type", "code"), ("token_access_type", "offline"),
            ("code_challenge", Self.challenge(for: verifier)), ("code_challenge_method", "S256"),
        ]
        if !scopes.isEmpty { query.append(("scope", scopes.joined(separator: " "))) }
        return PKCEFlow(authorizeURL: endpoints.web + "/oauth2/authorize?" + FormBody.encode(query),
                        codeVerifier: verifier, appKey: appKey)
    }

    /// Exchanges the code the user was shown for tokens.
    public func finish(_ flow: PKCEFlow, code: String) async throws -> Grant {
        try await tokenRequest([
            ("grant_type", "authorization_code"), ("code", code.trimmingCharacters(in: .whitespacesAndNewlines)),
            ("client_id", flow.appKey), ("code_verifier", flow.codeVerifier),
        ])
    }

    public func refresh(refreshToken: String, appKey: String, appSecret: String? = nil) async throws -> Grant {
        var form = [("grant_type", "refresh_token"), ("refresh_token", refreshToken), ("client_id", appKey)]
        if let appSecret { form.append(("client_secret", appSecret)) }
        return try await tokenRequest(form)
    }

    /// Token requests: a few quick tries (0.5, 1, 2 s at most between them).
    static let tokenRetry = RetryPolicy(maxAttempts: 4, baseDelay: 0.25, maxDelay: 2)

    /// Posts to `/oauth2/token`; transient failures (no connection, 429, 5xx) are retried a
    /// few times, so a blip at refresh time does not look like being signed out.
    private func tokenRequest(_ form: [(String, String)]) async throws -> Grant {
        var request = HTTPRequest(url: endpoints.api + "/oauth2/token")
        request.headers = [("Content-Type", "application/x-www-form-urlencoded")]
        request.body = .bytes(Array(FormBody.encode(form).utf8))
        request.totalTimeout = 60
        var response: HTTPResponse?
        for attempt in 0..<Self.tokenRetry.maxAttempts {
            if attempt > 0 { try await Task.sleep(for: Self.tokenRetry.wait(attempt: attempt)) }
            do {
                let answer = try await transport.perform(request)
                response = answer
                if answer.status != 429 && answer.status < 500 { break }
            } catch let error as TransportError {
                if !error.isTransient || attempt == Self.tokenRetry.maxAttempts - 1 { throw CallError<NoRouteError>.client(.transport(error)) }
            }
        }
        guard let response else { throw CallError<NoRouteError>.client(.notAuthenticated("token endpoint unreachable")) }
        guard response.status == 200 else {
            let reply = try? APIJSON.decode([String: String].self, from: response.body)
            let reason = reply.map { "\($0["error"] ?? "error"): \($0["error_description"] ?? "")" }
                ?? String(decoding: response.body, as: UTF8.self)
            throw CallError<NoRouteError>.client(.notAuthenticated("token request refused (HTTP \(response.status)): \(reason)"))
        }
        do { return try APIJSON.decode(Grant.self, from: response.body) } catch {
            throw CallError<NoRouteError>.client(.undecodable("token response: \(error)"))
        }
    }

    /// BASE64URL(SHA256(verifier)), RFC 7636.
    static func challenge(for verifier: String) -> String {
        var digest = [UInt8](repeating: 0, count: 32)
        let bytes = Array(verifier.utf8)
        ccrypto_sha256_oneshot(bytes, bytes.count, &digest)
        return base64URL(digest)
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}

/// `application/x-www-form-urlencoded`.
enum FormBody {
    static func encode(_ pairs: [(String, String)]) -> String {
        // ASCII letters and digits only: `.alphanumerics` would let other scripts through unescaped.
        let allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        func escape(_ s: String) -> String { s.addingPercentEncoding(withAllowedCharacters: allowed) ?? s }
        return pairs.map { escape($0.0) + "=" + escape($0.1) }.joined(separator: "&")
    }
}
