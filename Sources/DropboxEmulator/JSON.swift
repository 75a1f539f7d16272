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
        String(decoding: utf8(asciiOnly: asciiOnly), as: UTF8.self)
    }

    public var bytes: [UInt8] { utf8(asciiOnly: false) }

    /// Written as UTF-8 bytes, runs of plain characters copied at once: the emulator writes
    /// a result for every call (1,000 entries for a batch commit), and appending to a String
    /// one scalar at a time took 6 % of its CPU.
    private func utf8(asciiOnly: Bool) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(128)
        write(into: &out, asciiOnly: asciiOnly)
        return out
    }

    private func write(into out: inout [UInt8], asciiOnly: Bool) {
        switch self {
        case .null: out += "null".utf8
        case .bool(let b): out += (b ? "true" : "false").utf8
        case .int(let i): out += String(i).utf8
        case .double(let d): out += (d.isFinite ? String(d) : "null").utf8
        case .string(let s): JSON.writeString(s, into: &out, asciiOnly: asciiOnly)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                item.write(into: &out, asciiOnly: asciiOnly)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (i, (key, value)) in members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSON.writeString(key, into: &out, asciiOnly: asciiOnly)
                out.append(UInt8(ascii: ":"))
                value.write(into: &out, asciiOnly: asciiOnly)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static func writeString(_ s: String, into out: inout [UInt8], asciiOnly: Bool) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { utf8 in
            var run = 0  // start of the bytes not yet copied
            var index = 0
            while index < utf8.count {
                let byte = utf8[index]
                if byte >= 0x20 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\") && (byte < 0x7F || !asciiOnly) {
                    index += 1
                    continue
                }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run..<index]))
                switch byte {
                case UInt8(ascii: "\""): out += #"\""#.utf8
                case UInt8(ascii: "\\"): out += #"\\"#.utf8
                case UInt8(ascii: "\n"): out += #"\n"#.utf8
                case UInt8(ascii: "\r"): out += #"\r"#.utf8
                case UInt8(ascii: "\t"): out += #"\t"#.utf8
                case ..<0x20, 0x7F:
                    out += hex4(UInt32(byte)).utf8
                default:
                    // A non-ASCII scalar in a header: its UTF-8 sequence, read whole.
                    let length = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : 2
                    var scalar = UInt32(byte) & (0xFF >> (length + 1))
                    for offset in 1..<length { scalar = scalar << 6 | UInt32(utf8[index + offset] & 0x3F) }
                    if scalar > 0xFFFF {
                        let v = scalar - 0x10000
                        out += (hex4(0xD800 + (v >> 10)) + hex4(0xDC00 + (v & 0x3FF))).utf8
                    } else {
                        out += hex4(scalar).utf8
                    }
                    index += length - 1
                }
                index += 1
                run = index
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run..<utf8.count]))
        }
        out.append(UInt8(ascii: "\""))
    }

    private static func hex4(_ v: UInt32) -> String {
        let digits = String(v, radix: 16)
        return "\\u" + String(repeating: "0", count: 4 - digits.count) + digits
    }
}
