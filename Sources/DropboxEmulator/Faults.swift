import Foundation
import Synchronization

/// Injected faults, from `--fault SPEC` or `POST /_emulator/faults`. A spec is
/// `KIND[:key=value[,key=value]...]`:
///
/// - `403`, `429`, `500`, `503`, `too_many_write_operations`: fail the request (`every=N` for every
///   Nth matching request, `p=P` for a probability; `retry_after=S` for 429-style answers);
/// - `reset`: drop the connection after `after=BYTES` of the response body (default: half);
/// - `drop`: carry the request out, then close the connection without a byte of answer (a
///   server or proxy that fails after acting: to the client, like a connection that died
///   before the request arrived); `offline=1`: stop listening first, as `setReachable(false)`
///   does (the network gone with the answer: a client's fresh connection is refused);
/// - `latency`: delay each matching request by `ms=N`; `answer=1`: carry it out at once and
///   delay its answer instead (a slow way back: what the client learns is older than what
///   the server holds by then; RPC and upload routes);
/// - `silent`: take each matching request and never answer it while the rule is in force;
///   once the faults are replaced, its connection is dropped without it being served (a
///   network or server gone quiet: unlike `latency`, nothing held is ever done late);
/// - `bandwidth`: cap request and response bodies at `bps=N` bytes per second;
/// - `lie`: answer with a result a real server never gives (`what=…`; see `Lie`).
///
/// Every kind takes `routes=a+b` (route names like `files/download`); default: all `/2/` routes;
/// `skip=N` to pass the first N matching requests by, and `times=N` to act on N requests
/// only (after those skipped): `reset:times=1` then `silent:skip=1` loses one answer and
/// holds every later request.
struct FaultRule: Sendable, CustomStringConvertible {
    enum Kind: Sendable, Equatable {
        case status(Int)
        case tooManyWriteOperations
        case reset(after: Int64?)
        case drop(thenOffline: Bool)
        case latency(milliseconds: Int, ofAnswer: Bool)
        case silent
        case bandwidth(bytesPerSecond: Int64)
        case lie(Lie)
    }

    var kind: Kind
    var every: Int?
    var probability: Double?
    var retryAfter: Int = 1
    var skip = 0
    var times: Int?
    var routes: Set<String>?
    let description: String

    init(spec: String) throws {
        description = spec
        let (name, rest) = spec.firstIndex(of: ":").map { (String(spec[..<$0]), String(spec[spec.index(after: $0)...])) } ?? (spec, "")
        var options: [String: String] = [:]
        for pair in rest.split(separator: ",") {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw FaultSpecError(spec: spec, reason: "'\(pair)' is not key=value") }
            options[parts[0]] = parts[1]
        }
        func number<T: LosslessStringConvertible>(_ key: String) throws -> T? {
            guard let text = options.removeValue(forKey: key) else { return nil }
            guard let value = T(text) else { throw FaultSpecError(spec: spec, reason: "\(key)=\(text) is not a number") }
            return value
        }
        switch name {
        case "403", "429", "500", "503": kind = .status(Int(name)!)
        case "too_many_write_operations": kind = .tooManyWriteOperations
        case "reset": kind = .reset(after: try number("after"))
        case "drop": kind = .drop(thenOffline: (try number("offline") ?? 0) != 0)
        case "silent": kind = .silent
        case "latency":
            guard let ms: Int = try number("ms") else { throw FaultSpecError(spec: spec, reason: "latency needs ms=N") }
            kind = .latency(milliseconds: ms, ofAnswer: (try number("answer") ?? 0) != 0)
        case "bandwidth":
            guard let bps: Int64 = try number("bps"), bps > 0 else { throw FaultSpecError(spec: spec, reason: "bandwidth needs bps=N > 0") }
            kind = .bandwidth(bytesPerSecond: bps)
        case "lie":
            guard let what = options.removeValue(forKey: "what") else { throw FaultSpecError(spec: spec, reason: "lie needs what=KIND") }
            kind = .lie(try Lie(what: what, value: options.removeValue(forKey: "value"), spec: spec))
        default:
            throw FaultSpecError(spec: spec, reason: "unknown kind '\(name)' (403, 429, 500, 503, too_many_write_operations, reset, drop, latency, silent, bandwidth, lie)")
        }
        every = try number("every")
        probability = try number("p")
        retryAfter = try number("retry_after") ?? 1
        skip = try number("skip") ?? 0
        times = try number("times")
        if let list = options.removeValue(forKey: "routes") {
            routes = Set(list.split(separator: "+").map(String.init))
        }
        if let unknown = options.keys.first { throw FaultSpecError(spec: spec, reason: "unknown option '\(unknown)'") }
        if skip < 0 || (times ?? 0) < 0 { throw FaultSpecError(spec: spec, reason: "skip and times must not be negative") }
        if let every, every < 1 { throw FaultSpecError(spec: spec, reason: "every must be at least 1") }
        if let probability, !(0...1).contains(probability) { throw FaultSpecError(spec: spec, reason: "p must be within 0...1") }
    }

    func applies(to route: String) -> Bool { routes?.contains(route) ?? true }

    /// Whether the rule acts on the `seen`th request it matched (`skip`, `times`).
    func inWindow(seen: Int) -> Bool {
        seen > skip && times.map { seen <= skip + $0 } ?? true
    }
}

struct FaultSpecError: Error, CustomStringConvertible {
    var spec: String
    var reason: String
    var description: String { "bad fault spec '\(spec)': \(reason)" }
}

/// What the active faults decided for one request.
struct FaultDecision: Sendable {
    var delay: Duration?
    /// `latency:answer=1`: how long the answer waits once the request was carried out.
    var answerDelay: Duration?
    var failure: APIFailure?
    var resetAfter: Int64??
    /// `drop`: the answer is never sent, the connection closed instead.
    var dropAnswer = false
    /// `drop:offline=1`: and the emulator stops listening before it closes the connection.
    var offlineAfterDrop = false
    var bytesPerSecond: Int64?
    var lie: Lie?
    /// A `silent` rule holds the request until the rules made at `generation` are replaced.
    var silent = false
    var generation = 0
}


/// The active fault rules, with their per-rule request counters.
final class FaultPlan: Sendable {
    private struct Armed {
        var rule: FaultRule
        var seen = 0
    }

    /// The rules, and how many times they were replaced (`FaultDecision.generation`).
    private let rules = Mutex<(armed: [Armed], generation: Int)>(([], 0))
    private let replaced = ChangeNotifier()

    func replace(with specs: [String]) throws {
        let parsed = try specs.map { Armed(rule: try FaultRule(spec: $0)) }
        rules.withLock { $0 = (parsed, $0.generation + 1) }
        replaced.notify()
    }

    /// Returns once the rules of `generation` were replaced, or once the task is cancelled
    /// (the emulator shutting down).
    func untilReplaced(after generation: Int) async {
        while !Task.isCancelled {
            let changed = try? await replaced.wait(timeout: .seconds(3600)) { rules.withLock { $0.generation } != generation }
            if changed == true { return }
        }
    }

    var active: [String] { rules.withLock { $0.armed.map(\.rule.description) } }

    func decide(for route: String) -> FaultDecision {
        rules.withLock { state in
            var decision = FaultDecision()
            decision.generation = state.generation
            for i in state.armed.indices where state.armed[i].rule.applies(to: route) {
                let rule = state.armed[i].rule
                state.armed[i].seen += 1
                guard rule.inWindow(seen: state.armed[i].seen) else { continue }
                switch rule.kind {
                case .latency(let ms, false): decision.delay = .milliseconds(ms)
                case .latency(let ms, true): decision.answerDelay = .milliseconds(ms)
                case .silent: decision.silent = true
                case .bandwidth(let bps): decision.bytesPerSecond = bps
                default:
                    guard Self.fires(rule, seen: state.armed[i].seen) else { continue }
                    switch rule.kind {
                    case .status(429):
                        decision.failure = decision.failure ?? .rateLimited(reason: "too_many_requests", retryAfter: rule.retryAfter)
                    case .status(403): decision.failure = decision.failure ?? .accessDenied
                    case .status(let code): decision.failure = decision.failure ?? .server(status: code)
                    case .tooManyWriteOperations:
                        decision.failure = decision.failure ?? .rateLimited(reason: "too_many_write_operations", retryAfter: rule.retryAfter)
                    case .reset(let after): decision.resetAfter = .some(after)
                    case .drop(let thenOffline):
                        decision.dropAnswer = true
                        decision.offlineAfterDrop = thenOffline
                    case .lie(let lie): decision.lie = lie
                    default: break
                    }
                }
            }
            return decision
        }
    }

    private static func fires(_ rule: FaultRule, seen: Int) -> Bool {
        if let every = rule.every { return (seen - rule.skip) % every == 0 }
        if let p = rule.probability { return Double.random(in: 0..<1) < p }
        return true
    }
}

/// Requests and body bytes per route, for tests that count what a client did, and what the
/// `latency` and `bandwidth` faults did to them (so a test asserts that a fault acted, not
/// how long it took).
final class RouteStats: Sendable {
    struct Counter: Sendable {
        var requests: Int64 = 0
        var bytesIn: Int64 = 0
        var bytesOut: Int64 = 0
        /// Requests held back by a `latency` or `silent` fault.
        var delayed: Int64 = 0
        /// Response body bytes paced by a `bandwidth` fault.
        var throttledOut: Int64 = 0
    }

    private let counters = Mutex<[String: Counter]>([:])

    func record(_ route: String, requests: Int64 = 0, bytesIn: Int64 = 0, bytesOut: Int64 = 0, delayed: Int64 = 0,
                throttledOut: Int64 = 0) {
        counters.withLock {
            $0[route, default: Counter()].requests += requests
            $0[route, default: Counter()].bytesIn += bytesIn
            $0[route, default: Counter()].bytesOut += bytesOut
            $0[route, default: Counter()].delayed += delayed
            $0[route, default: Counter()].throttledOut += throttledOut
        }
    }

    func reset() { counters.withLock { $0.removeAll() } }

    var json: JSON {
        let snapshot = counters.withLock { $0 }
        let routes = snapshot.keys.sorted().map { key -> (String, JSON) in
            let c = snapshot[key]!
            return (key, .object([("requests", .int(c.requests)), ("bytes_in", .int(c.bytesIn)), ("bytes_out", .int(c.bytesOut)),
                                  ("delayed", .int(c.delayed)), ("throttled_bytes_out", .int(c.throttledOut))]))
        }
        let total = snapshot.values.reduce(Int64(0)) { $0 + $1.requests }
        return .object([("requests", .int(total)), ("routes", .object(routes))])
    }
}
