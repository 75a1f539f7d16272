import Testing

/// The time limit of the CPU-heavy core suites: a guard against a hang, not a measure. Alone
/// each takes about 30 s; in the whole suite its CPU work waits for the mount tests' on two
/// cores (290 s seen, when 5 minutes was the limit).
enum HangGuard {
    static let cpuHeavySuite: TimeLimitTrait.Duration = .minutes(10)
}
