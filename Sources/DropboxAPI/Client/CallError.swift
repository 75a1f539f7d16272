import Foundation

/// How a Dropbox call fails, as the official Swift SDK models it (`CallError`).
public enum CallError<RouteError: Sendable>: Error, Sendable, CustomStringConvertible {
    /// 409: the route's own error union.
    case route(RouteError, summary: String, userMessage: String?, requestID: String?)
    /// 400: the request was malformed (Dropbox explains in plain text).
    case badInput(String, requestID: String?)
    /// 401: the token is invalid or expired (after a refresh was tried).
    case auth(AuthError, summary: String, requestID: String?)
    /// 403: the token may not do this.
    case access(String, requestID: String?)
    /// 429, after the retry budget was spent.
    case rateLimited(RateLimitReason, retryAfter: Double, requestID: String?)
    /// 5xx, after retries.
    case server(status: Int, message: String, requestID: String?)
    /// 422: the `Dropbox-API-Path-Root` names a namespace this account cannot use.
    case pathRoot(PathRootError, summary: String, requestID: String?)
    /// Any other HTTP status.
    case http(status: Int, message: String, requestID: String?)
    /// Below HTTP or on this side: transport failure, undecodable reply, no credentials,
    /// a content hash that does not match.
    case client(ClientError)

    public var requestID: String? {
        switch self {
        case .route(_, _, _, let id), .badInput(_, let id), .auth(_, _, let id), .access(_, let id),
             .rateLimited(_, _, let id), .server(_, _, let id), .pathRoot(_, _, let id), .http(_, _, let id):
            return id
        case .client: return nil
        }
    }

    /// One line: Dropbox's user message or summary, and the request id.
    public var description: String {
        let text: String
        switch self {
        case .route(_, let summary, let userMessage, _): text = userMessage ?? summary
        case .badInput(let message, _): text = "bad request: \(message)"
        case .auth(_, let summary, _): text = "not authorized: \(summary)"
        case .access(let summary, _): text = "access denied: \(summary)"
        case .rateLimited(_, let retryAfter, _): text = "rate limited by Dropbox (retry after \(Int(retryAfter)) s)"
        case .server(let status, let message, _): text = "Dropbox server error \(status)\(message.isEmpty ? "" : ": \(message)")"
        case .pathRoot(_, let summary, _): text = "this account has no such root (Dropbox-API-Path-Root): \(summary)"
        case .http(let status, let message, _): text = "HTTP \(status)\(message.isEmpty ? "" : ": \(message)")"
        case .client(let error): text = error.description
        }
        return requestID.map { "\(text) (request id \($0))" } ?? text
    }
}

public enum ClientError: Error, Sendable, CustomStringConvertible {
    case transport(TransportError)
    case cancelled
    case undecodable(String)
    case notAuthenticated(String)
    case contentHashMismatch(expected: String, actual: String)
    case local(String)
    /// Not sent: Dropbox has been out of reach since then (see `Reachability`).
    case offline(since: Date, reason: String)

    public var description: String {
        switch self {
        case .transport(let error): return "network error: \(error.message)"
        case .cancelled: return "cancelled"
        case .undecodable(let what): return "unexpected reply from Dropbox: \(what)"
        case .notAuthenticated(let why): return "not signed in: \(why)"
        case .contentHashMismatch(let expected, let actual):
            return "content hash mismatch (expected \(expected.prefix(12))…, got \(actual.prefix(12))…)"
        case .local(let message): return message
        case .offline(let since, let reason):
            return "Dropbox out of reach since \(since.formatted(.iso8601)) (\(reason))"
        }
    }
}

/// The route error, when a call failed with one.
extension Error {
    public func routeError<E: Sendable>(_ type: E.Type) -> E? {
        if case .route(let error, _, _, _)? = self as? CallError<E> { return error }
        return nil
    }
}
