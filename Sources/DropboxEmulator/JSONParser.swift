/// Reads a JSON document (RFC 8259) into `JSON`, byte by byte.
///
/// Every API call's argument goes through here, so it is written for speed: Foundation's
/// `JSONDecoder` through a `Decodable` bridge cost the emulator 12 % of its CPU while it took
/// 1,000 small uploads and their batch commit. Numbers keep the bridge's rule: an integer
/// (also `1.0` or `1e3`) that fits in Int64 is `.int`, any other number `.double`. Members
/// keep the order they were sent in. Nesting deeper than `maximumDepth` is refused rather
/// than allowed to exhaust the stack.
struct JSONParser {
    struct Invalid: Error {
        var offset: Int
        var reason: String
    }

    static let maximumDepth = 512

    private let bytes: [UInt8]
    private var index = 0
    private var depth = 0

    static func parse(_ bytes: [UInt8]) throws -> JSON {
        var parser = JSONParser(bytes: bytes)
        parser.skipWhitespace()
        let value = try parser.value()
        parser.skipWhitespace()
        guard parser.index == bytes.count else { throw parser.invalid("unexpected text after the value") }
        return value
    }

    private init(bytes: [UInt8]) { self.bytes = bytes }

    private func invalid(_ reason: String) -> Invalid { Invalid(offset: index, reason: reason) }

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipWhitespace() {
        while let byte = current, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
    }

    private mutating func expect(_ byte: UInt8) throws {
        guard current == byte else { throw invalid("expected '\(Character(Unicode.Scalar(byte)))'") }
        index += 1
    }

    private mutating func value() throws -> JSON {
        switch current {
        case UInt8(ascii: "{"): return try nested { try $0.object() }
        case UInt8(ascii: "["): return try nested { try $0.array() }
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case let byte? where byte == UInt8(ascii: "-") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte): return try number()
        case nil: throw invalid("unexpected end of input")
        default: throw invalid("unexpected character")
        }
    }

    private mutating func nested(_ body: (inout JSONParser) throws -> JSON) throws -> JSON {
        depth += 1
        defer { depth -= 1 }
        guard depth <= Self.maximumDepth else { throw invalid("nested too deeply") }
        return try body(&self)
    }

    private mutating func literal(_ word: String) throws {
        for byte in word.utf8 {
            guard current == byte else { throw invalid("unknown literal") }
            index += 1
        }
    }

    private mutating func object() throws -> JSON {
        index += 1  // {
        var members: [(String, JSON)] = []
        skipWhitespace()
        if current == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard current == UInt8(ascii: "\"") else { throw invalid("expected a member name") }
            let key = try string()
            skipWhitespace()
            try expect(UInt8(ascii: ":"))
            skipWhitespace()
            members.append((key, try value()))
            skipWhitespace()
            if current == UInt8(ascii: ",") {
                index += 1
                continue
            }
            try expect(UInt8(ascii: "}"))
            return .object(members)
        }
    }

    private mutating func array() throws -> JSON {
        index += 1  // [
        var items: [JSON] = []
        skipWhitespace()
        if current == UInt8(ascii: "]") {
            index += 1
            return .array(items)
        }
        while true {
            skipWhitespace()
            items.append(try value())
            skipWhitespace()
            if current == UInt8(ascii: ",") {
                index += 1
                continue
            }
            try expect(UInt8(ascii: "]"))
            return .array(items)
        }
    }

    private mutating func string() throws -> String {
        index += 1  // opening quote
        var utf8: [UInt8] = []
        // Runs of plain bytes are copied whole, escapes between them decoded one by one; the
        // whole is validated as UTF-8 once.
        while true {
            let run = index
            while let byte = current, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\") {
                guard byte >= 0x20 else { throw invalid("control character in a string") }
                index += 1
            }
            guard current != nil else { throw invalid("unterminated string") }
            utf8 += bytes[run..<index]
            guard current == UInt8(ascii: "\\") else { break }
            index += 1
            try escape(into: &utf8)
        }
        index += 1  // closing quote
        guard let text = String(validating: utf8, as: UTF8.self) else { throw invalid("invalid UTF-8 in a string") }
        return text
    }

    /// One escape, after its backslash, appended as UTF-8.
    private mutating func escape(into utf8: inout [UInt8]) throws {
        guard let byte = current else { throw invalid("unterminated string") }
        index += 1
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(byte)
        case UInt8(ascii: "b"): utf8.append(0x08)
        case UInt8(ascii: "f"): utf8.append(0x0C)
        case UInt8(ascii: "n"): utf8.append(0x0A)
        case UInt8(ascii: "r"): utf8.append(0x0D)
        case UInt8(ascii: "t"): utf8.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try hex4()
            if (0xD800...0xDBFF).contains(scalar) {
                guard current == UInt8(ascii: "\\"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "u") else {
                    throw invalid("unpaired surrogate")
                }
                index += 2
                let low = try hex4()
                guard (0xDC00...0xDFFF).contains(low) else { throw invalid("unpaired surrogate") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00...0xDFFF).contains(scalar) {
                throw invalid("unpaired surrogate")
            }
            utf8.append(contentsOf: String(Character(Unicode.Scalar(scalar)!)).utf8)
        default:
            throw invalid("unknown escape")
        }
    }

    private mutating func hex4() throws -> UInt32 {
        guard index + 4 <= bytes.count else { throw invalid("unterminated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw invalid("bad \\u escape")
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    private mutating func number() throws -> JSON {
        let start = index
        var integral = true
        if current == UInt8(ascii: "-") { index += 1 }
        guard let first = current, isDigit(first) else { throw invalid("bad number") }
        index += 1
        if first != UInt8(ascii: "0") { skipDigits() }
        if current == UInt8(ascii: ".") {
            integral = false
            index += 1
            guard let digit = current, isDigit(digit) else { throw invalid("bad number") }
            skipDigits()
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            integral = false
            index += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
            guard let digit = current, isDigit(digit) else { throw invalid("bad number") }
            skipDigits()
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if integral, let int = Int64(text) { return .int(int) }
        guard let double = Double(text) else { throw invalid("bad number") }
        if let int = Int64(exactly: double) { return .int(int) }
        return .double(double)
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private mutating func skipDigits() {
        while let byte = current, isDigit(byte) { index += 1 }
    }
}
