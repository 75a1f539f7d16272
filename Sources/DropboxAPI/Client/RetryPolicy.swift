import Foundation

/// When and how long to wait before trying a failed call again: exponential backoff with
/// jitter, `Retry-After` honoured, a cap per wait and a budget of attempts. The one policy
/// for every retry in the project: calls (`DropboxClient`), token refreshes, and the mount's
/// longer-lived loops (the change feed, queued uploads), each with its own numbers.
public struct RetryPolicy: Sendable {
    public var maxAttempts = 8
    /// Attempts when no connection can be made at all: a dead server should fail fast.
    public var maxConnectAttempts = 3
    /// Seconds a request may go without a byte either way before its attempt is given up
    /// (`-o timeout=SECONDS` of the mount); calls that wait by design (a longpoll, a large
    /// batch commit) set their own. Also the longest a connection may take to open.
    public var stallTimeout = 60
    /// Attempts of a call whose attempts went silent: one more, on a fresh connection (a
    /// kept one may have died quietly), then Dropbox counts as out of reach. A server that
    /// takes connections and never answers held a listing for eight tries of two minutes.
    public var maxStallAttempts = 2
    public var baseDelay = 0.25
    public var maxDelay = 10.0
    /// The longest `Retry-After` obeyed; beyond it the error is surfaced.
    public var maxRetryAfter = 120.0

    public init() {}

    public init(maxAttempts: Int = 8, baseDelay: Double, maxDelay: Double) {
        self.maxAttempts = maxAttempts
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
    }

    /// The delay in seconds before attempt `attempt + 1` (attempt counts from 0): between
    /// half and all of `baseDelay * 2^attempt`, capped at `maxDelay`.
    public func backoff(attempt: Int) -> Double {
        let ceiling = min(maxDelay, baseDelay * pow(2, Double(min(attempt, 62))))
        return Double.random(in: ceiling / 2 ... ceiling)
    }

    /// `backoff(attempt:)` as a duration to sleep.
    public func wait(attempt: Int) -> Duration { .milliseconds(Int(backoff(attempt: attempt) * 1000)) }
}
