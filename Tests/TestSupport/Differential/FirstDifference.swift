import Synchronization

/// The first difference (or harness failure) a differential property check met. The checker
/// records a failure while it shrinks with issues suppressed, and when no replay fails again
/// (a failure that depends on timing) only its own line, "Failure occured with input…", reaches
/// CI's excerpt: the suites record this text once more after the check (CI failed so once, at
/// the mount's seed 112, and did not say what differed).
public final class FirstDifference: Sendable {
    private let first = Mutex<String?>(nil)

    public init() {}

    /// Keeps `text` unless a difference was kept already.
    public func keep(_ text: String) {
        first.withLock { if $0 == nil { $0 = text } }
    }

    /// What to record after the check: nil if nothing differed.
    public var seen: String? { first.withLock { $0.map { "the first difference seen, in \($0)" } } }
}
