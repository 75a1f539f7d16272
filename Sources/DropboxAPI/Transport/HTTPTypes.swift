import Foundation

/// What a request sends as its body.
public enum RequestBody: Sendable {
    case none
    case bytes([UInt8])
    /// `length` bytes of an open file from `offset`; read as the upload goes (never all in memory).
    case file(descriptor: Int32, offset: Int64, length: Int64)

    var length: Int64 {
        switch self {
        case .none: return 0
        case .bytes(let bytes): return Int64(bytes.count)
        case .file(_, _, let length): return length
        }
    }
}

/// Where a successful response's body goes. Error responses (status ≥ 300) are always
/// collected in memory, so that an error document never lands in a caller's file.
public enum ResponseSink: Sendable {
    /// Collect in memory, refusing more than `limit` bytes.
    case memory(limit: Int)
    /// Hand each chunk to a consumer as it arrives; throwing aborts the transfer.
    case stream(@Sendable (UnsafeRawBufferPointer) throws -> Void)
}

public struct HTTPRequest: Sendable {
    public var url: String
    public var method = "POST"
    public var headers: [(String, String)] = []
    public var body = RequestBody.none
    public var sink = ResponseSink.memory(limit: 64 << 20)
    /// Called with (bytes sent, bytes received) as the transfer goes.
    public var progress: (@Sendable (Int64, Int64) -> Void)?
    /// Give up when less than 1 byte/s flows for this long (stall detection; no cap on size).
    public var stallTimeout: Int = 60
    /// Upper bound for the whole request, for requests that should be quick (0 = none).
    public var totalTimeout: Int = 0
    /// For a ranged download, the bytes asked for: anything but a 206 whose `Content-Range`
    /// starts there (and ends inside it) is refused before a byte reaches the sink.
    public var partialRange: Range<Int64>?
    /// The transfer's thread runs at the lowest CPU priority (`LowPriority`): work ahead of
    /// need, such as an upload started before the file is closed, must not slow the writer
    /// feeding it.
    public var background = false
    /// Whether the transport may send the request again by itself. curl does, on a fresh
    /// connection, when a reused one dies before a byte of answer: right for a request the
    /// server never got (it had closed the idle connection), wrong for one it carried out
    /// before failing, where a second commit of the same upload sessions answers `not_found`
    /// and hides the first. A request that must not be repeated blindly fails instead, its
    /// outcome unknown (`connectionLost`), and its caller looks at what happened.
    public var resendable = true

    public init(url: String) { self.url = url }
}

public struct HTTPResponse: Sendable {
    public var status: Int
    /// Header names in lower case.
    public var headers: [String: String]
    /// The body, for a memory sink or an error status.
    public var body: [UInt8]

    public func header(_ name: String) -> String? { headers[name.lowercased()] }
}

/// A failure below HTTP: nothing usable came back.
public struct TransportError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable {
        case cancelled
        case timedOut
        case cannotConnect
        /// The connection broke mid-exchange (reset, partial body): safe to retry when the
        /// request is idempotent.
        case connectionLost
        case consumerFailed
        /// The server answered something it must not (a byte range other than the one asked
        /// for): refused, and tried again like a broken connection.
        case badResponse
        case other
    }

    public var kind: Kind
    public var message: String

    public var description: String { message }
    public var isTransient: Bool { kind == .timedOut || kind == .cannotConnect || kind == .connectionLost || kind == .badResponse }
}

/// A `Content-Range: bytes FIRST-LAST/SIZE` header (SIZE may be `*`).
struct ContentRange: Equatable {
    var first: Int64
    var last: Int64

    init?(_ header: String) {
        guard header.hasPrefix("bytes ") else { return nil }
        let span = header.dropFirst("bytes ".count).split(separator: "/", maxSplits: 1).first ?? ""
        let ends = span.split(separator: "-", maxSplits: 1)
        guard ends.count == 2, let first = Int64(ends[0]), let last = Int64(ends[1]), first <= last else { return nil }
        self.first = first
        self.last = last
    }
}
