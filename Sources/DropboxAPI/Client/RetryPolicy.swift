import Foundation

/// When and how long to wait before trying a failed call again: exponential backoff with
/// full jitter, `Retry-After` honoured, a cap per wait and a budget of attempts.
public struct RetryPolicy: Sendable {
    public var maxAttempts = 8
    /// Attempts when no connection can be made at all: a dead server should fail fast.
    public var maxConnectAttempts = 3
    public var baseDelay = 0.25
    public var maxDelay = 10.0
    /// The longest `Retry-After` obeyed; beyond it the error is surfaced.
    public var maxRetryAfter = 120.0

    public init() {}

    /// The delay before attempt `attempt + 1` (attempt counts from 0).
    func backoff(attempt: Int) -> Double {
        let ceiling = min(maxDelay, baseDelay * pow(2, Double(attempt)))
        return Double.random(in: ceiling / 2 ... ceiling)
    }
}
