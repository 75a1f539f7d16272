/// A Dropbox API route: its name, host, request style and how safely it can be retried.
public struct Route<Argument: Encodable & Sendable, Result: Decodable & Sendable, Failure: Decodable & Sendable>: Sendable {
    public enum Style: Sendable { case rpc, upload, download }

    /// What a retry may risk.
    public enum Retry: Sendable {
        /// Reads, and writes whose repetition changes nothing (an upload of the same bytes).
        case idempotent
        /// Only when the server cannot have acted: 429, or no connection made.
        case notProcessed
    }

    public let name: String
    public let host: Endpoints.Host
    public let style: Style
    public let retry: Retry
    public let authenticated: Bool

    public init(_ name: String, host: Endpoints.Host = .api, style: Style = .rpc, retry: Retry = .idempotent, authenticated: Bool = true) {
        self.name = name
        self.host = host
        self.style = style
        self.retry = retry
        self.authenticated = authenticated
    }
}
