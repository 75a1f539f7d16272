/// `lie` faults make the emulator answer like a broken or hostile server, so that tests can
/// show the clients check what they are told. `lie:what=KIND[,value=TEXT]`, KIND one of:
///
/// - `content_hash`: every `content_hash` in a result becomes TEXT (default `../../../../tmp/pwned`);
/// - `name`: every entry's `name` gets TEXT in front (default `../../../../tmp/`);
/// - `path_lower`: metadata leaves `path_lower` out;
/// - `content_range`: a ranged download sends the bytes one further on than asked, and says
///   so in its `Content-Range`;
/// - `shifted_bytes`: the same bytes, under the `Content-Range` that was asked for;
/// - `huge`: a JSON result gets a member of TEXT megabytes (default 100) beside its own.
enum Lie: Sendable, Equatable {
    case contentHash(String)
    case namePrefix(String)
    case noPathLower
    case contentRange
    case shiftedBytes
    case huge(megabytes: Int)

    init(what: String, value: String?, spec: String) throws {
        switch what {
        case "content_hash": self = .contentHash(value ?? "../../../../tmp/pwned")
        case "name": self = .namePrefix(value ?? "../../../../tmp/")
        case "path_lower": self = .noPathLower
        case "content_range": self = .contentRange
        case "shifted_bytes": self = .shiftedBytes
        case "huge":
            guard let megabytes = Int(value ?? "100"), megabytes > 0 else { throw FaultSpecError(spec: spec, reason: "huge needs value=MEGABYTES") }
            self = .huge(megabytes: megabytes)
        default: throw FaultSpecError(spec: spec, reason: "unknown lie '\(what)' (content_hash, name, path_lower, content_range, shifted_bytes, huge)")
        }
    }

    /// A result as this lie tells it (every metadata object in it, however deep).
    func apply(_ json: JSON) -> JSON {
        if case .huge(let megabytes) = self, case .object(let members) = json {
            return .object(members + [("padding", .string(String(repeating: "x", count: megabytes << 20)))])
        }
        switch json {
        case .array(let items): return .array(items.map(apply))
        case .object(let members):
            var told: [(String, JSON)] = []
            for (key, value) in members {
                switch (self, key, value) {
                case (.contentHash(let text), "content_hash", .string): told.append((key, .string(text)))
                case (.namePrefix(let prefix), "name", .string(let name)): told.append((key, .string(prefix + name)))
                case (.noPathLower, "path_lower", _): continue
                default: told.append((key, apply(value)))
                }
            }
            return .object(told)
        default: return json
        }
    }

    /// What a ranged download of `range` (of a file of `size` bytes) sends: where its bytes
    /// start, and the range its `Content-Range` names.
    func served(_ range: Range<Int64>, size: Int64) -> (start: Int64, named: Range<Int64>) {
        guard self == .contentRange || self == .shiftedBytes else { return (range.lowerBound, range) }
        let shift: Int64 = range.upperBound < size ? 1 : (range.lowerBound > 0 ? -1 : 0)
        let start = range.lowerBound + shift
        return (start, self == .contentRange ? start..<(range.upperBound + shift) : range)
    }
}
