import Foundation

/// A JSON document as the Dropbox API sees it. Arguments are parsed into this type (so a
/// number sent where a boolean belongs is rejected, as Dropbox does) and results are written
/// from it by hand, which lets upload/download results go into the `Dropbox-API-Result` header
/// with non-ASCII characters escaped as `\uXXXX`.
public enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    public static func == (lhs: JSON, rhs: JSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.int(a), .int(b)): return a == b
        case let (.double(a), .double(b)): return a == b
        case let (.string(a), .string(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    public subscript(key: String) -> JSON? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.0 == key }?.1
    }

    public var stringValue: String? { if case .string(let s) = self { return s }; return nil }
    public var boolValue: Bool? { if case .bool(let b) = self { return b }; return nil }
    public var intValue: Int64? { if case .int(let i) = self { return i }; return nil }
    public var arrayValue: [JSON]? { if case .array(let a) = self { return a }; return nil }

    /// A union member `{".tag": tag, ...fields}`.
    public static func tagged(_ tag: String, _ fields: [(String, JSON)] = []) -> JSON {
        .object([(".tag", .string(tag))] + fields)
    }

    public static func parse(_ bytes: some Collection<UInt8>) throws -> JSON {
        try JSONParser.parse(Array(bytes))
    }

    public static func parse(_ text: String) throws -> JSON { try parse(Array(text.utf8)) }

    /// Serialises compactly. With `asciiOnly`, every non-ASCII scalar is written `\uXXXX`
    /// (surrogate pairs beyond the BMP), as HTTP headers require.
    public func serialized(asciiOnly: Bool = false) -> String {
        var out = ""
        out.reserveCapacity(64)
        write(into: &out, asciiOnly: asciiOnly)
        return out
    }

    public var bytes: [UInt8] { Array(serialized().utf8) }

    private func write(into out: inout String, asciiOnly: Bool) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .int(let i): out += String(i)
        case .double(let d): out += d.isFinite ? String(d) : "null"
        case .string(let s): JSON.writeString(s, into: &out, asciiOnly: asciiOnly)
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                item.write(into: &out, asciiOnly: asciiOnly)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (i, (key, value)) in members.enumerated() {
                if i > 0 { out += "," }
                JSON.writeString(key, into: &out, asciiOnly: asciiOnly)
                out += ":"
                value.write(into: &out, asciiOnly: asciiOnly)
            }
            out += "}"
        }
    }

    private static func writeString(_ s: String, into out: inout String, asciiOnly: Bool) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 || (asciiOnly && scalar.value > 0x7E) {
                    if scalar.value > 0xFFFF {
                        let v = scalar.value - 0x10000
                        out += hex4(0xD800 + (v >> 10)) + hex4(0xDC00 + (v & 0x3FF))
                    } else {
                        out += hex4(scalar.value)
                    }
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }

    private static func hex4(_ v: UInt32) -> String {
        let digits = String(v, radix: 16)
        return "\\u" + String(repeating: "0", count: 4 - digits.count) + digits
    }
}
