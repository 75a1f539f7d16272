/// A reader of JSON text, one value after another, for hand decoders (`ListingJSON`). It
/// accepts what RFC 8259 allows (strings must be valid UTF-8 without raw control characters)
/// and throws on anything else.
struct JSONScanner {
    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0

    init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    /// Reads the one value of `text` with `body`; throws if anything but white space follows.
    static func scan(_ text: [UInt8], _ body: (inout JSONScanner) throws -> Void) throws {
        try text.withUnsafeBufferPointer { buffer in
            var scanner = JSONScanner(buffer)
            try body(&scanner)
            try scanner.end()
        }
    }

    static func failure(_ what: String) -> DecodingError {
        DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: what))
    }

    private func failure(_ what: String) -> DecodingError { Self.failure("\(what) at byte \(index)") }

    private mutating func skipSpace() {
        while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 { index += 1 }
    }

    /// The next byte that is not white space, not consumed.
    private mutating func peek() throws -> UInt8 {
        skipSpace()
        guard index < bytes.count else { throw failure("unexpected end") }
        return bytes[index]
    }

    private mutating func consume(_ byte: UInt8) throws {
        guard try peek() == byte else { throw failure("expected \(Character(Unicode.Scalar(byte)))") }
        index += 1
    }

    private mutating func consume(word: StaticString) throws {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count,
              (0..<count).allSatisfy({ bytes[index + $0] == word.utf8Start[$0] }) else { throw failure("expected \(word)") }
        index += count
    }

    /// Only white space is left.
    mutating func end() throws {
        skipSpace()
        guard index == bytes.count else { throw failure("text after the value") }
    }

    /// Calls `body` with each key of an object; `body` must read or skip the key's value.
    mutating func object(_ body: (String, inout JSONScanner) throws -> Void) throws {
        try consume(0x7B)
        if try peek() == 0x7D { index += 1; return }
        while true {
            let key = try string()
            try consume(0x3A)
            try body(key, &self)
            if try peek() == 0x2C { index += 1; continue }
            try consume(0x7D)
            return
        }
    }

    /// Calls `body` for each element of an array; `body` must read or skip it.
    mutating func array(_ body: (inout JSONScanner) throws -> Void) throws {
        try consume(0x5B)
        if try peek() == 0x5D { index += 1; return }
        while true {
            try body(&self)
            if try peek() == 0x2C { index += 1; continue }
            try consume(0x5D)
            return
        }
    }

    mutating func bool() throws -> Bool {
        switch try peek() {
        case 0x74: try consume(word: "true"); return true
        case 0x66: try consume(word: "false"); return false
        default: throw failure("expected a boolean")
        }
    }

    /// A value as far as a field's check needs it: anything else is `other`.
    enum Scalar: Equatable {
        case string(String), integer(Int64), bool(Bool), null, other
    }

    /// One value of any kind: strings, booleans, null and whole numbers that fit in 64 bits
    /// as they are; objects, arrays and other numbers skipped (checked, not kept).
    mutating func scalar() throws -> Scalar {
        switch try peek() {
        case 0x22: return .string(try string())
        case 0x74, 0x66: return .bool(try bool())
        case 0x6E: try consume(word: "null"); return .null
        case 0x7B: try object { _, scanner in try scanner.skipValue() }; return .other
        case 0x5B: try array { scanner in try scanner.skipValue() }; return .other
        default:
            let (text, whole) = try number()
            return whole ? Int64(String(decoding: text, as: UTF8.self)).map(Scalar.integer) ?? .other : .other
        }
    }

    /// Skips one value of any kind (fields this client does not read).
    mutating func skipValue() throws { _ = try scalar() }

    mutating func string() throws -> String {
        try consume(0x22)
        let start = index
        // The usual case: no escape, one copy; ASCII needs no check of its encoding.
        var ascii = true
        while index < bytes.count, bytes[index] != 0x22, bytes[index] != 0x5C, bytes[index] >= 0x20 {
            ascii = ascii && bytes[index] < 0x80
            index += 1
        }
        guard index < bytes.count else { throw failure("unterminated string") }
        if bytes[index] == 0x22 {
            defer { index += 1 }
            let utf8 = UnsafeBufferPointer(rebasing: bytes[start..<index])
            return ascii ? String(decoding: utf8, as: UTF8.self) : try validated(utf8)
        }
        var text = Array(bytes[start..<index])
        while true {
            guard index < bytes.count else { throw failure("unterminated string") }
            let byte = bytes[index]
            index += 1
            switch byte {
            case 0x22: return try text.withUnsafeBufferPointer { try validated($0) }
            case 0x5C: try unescape(into: &text)
            case ..<0x20: throw failure("control character in a string")
            default: text.append(byte)
            }
        }
    }

    private func validated(_ utf8: UnsafeBufferPointer<UInt8>) throws -> String {
        guard let text = String(validating: utf8, as: UTF8.self) else { throw failure("invalid UTF-8 in a string") }
        return text
    }

    /// After a backslash: one escape, appended as UTF-8.
    private mutating func unescape(into text: inout [UInt8]) throws {
        guard index < bytes.count else { throw failure("unterminated string") }
        let byte = bytes[index]
        index += 1
        switch byte {
        case 0x22, 0x5C, 0x2F: text.append(byte)
        case 0x62: text.append(0x08)
        case 0x66: text.append(0x0C)
        case 0x6E: text.append(0x0A)
        case 0x72: text.append(0x0D)
        case 0x74: text.append(0x09)
        case 0x75:
            var scalar = try hexUnit()
            if (0xD800..<0xDC00).contains(scalar) {
                // A high surrogate must be followed by `\u` and a low one.
                guard index + 1 < bytes.count, bytes[index] == 0x5C, bytes[index + 1] == 0x75 else { throw failure("lone surrogate") }
                index += 2
                let low = try hexUnit()
                guard (0xDC00..<0xE000).contains(low) else { throw failure("lone surrogate") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00..<0xE000).contains(scalar) {
                throw failure("lone surrogate")
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw failure("bad \\u escape") }
            UTF8.encode(unicode) { text.append($0) }
        default: throw failure("bad escape")
        }
    }

    private mutating func hexUnit() throws -> UInt32 {
        guard index + 4 <= bytes.count else { throw failure("bad \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case 0x30...0x39: digit = byte - 0x30
            case 0x41...0x46: digit = byte - 0x41 + 10
            case 0x61...0x66: digit = byte - 0x61 + 10
            default: throw failure("bad \\u escape")
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    /// A JSON number's text, and whether it is whole (no fraction, no exponent).
    private mutating func number() throws -> (text: UnsafeBufferPointer<UInt8>, whole: Bool) {
        let start = index
        if index < bytes.count, bytes[index] == 0x2D { index += 1 }
        let digits = index
        while index < bytes.count, bytes[index] &- 0x30 < 10 { index += 1 }
        guard index > digits else { throw failure("unexpected character") }
        guard index == digits + 1 || bytes[digits] != 0x30 else { throw failure("a number with a leading zero") }
        var whole = true
        if index < bytes.count, bytes[index] == 0x2E {
            index += 1
            whole = false
            let fraction = index
            while index < bytes.count, bytes[index] &- 0x30 < 10 { index += 1 }
            guard index > fraction else { throw failure("bad number") }
        }
        if index < bytes.count, bytes[index] == 0x65 || bytes[index] == 0x45 {
            index += 1
            whole = false
            if index < bytes.count, bytes[index] == 0x2B || bytes[index] == 0x2D { index += 1 }
            let exponent = index
            while index < bytes.count, bytes[index] &- 0x30 < 10 { index += 1 }
            guard index > exponent else { throw failure("bad number") }
        }
        return (UnsafeBufferPointer(rebasing: bytes[start..<index]), whole)
    }
}
