/// JSON text written by hand, for the few arguments sent often enough that Foundation's
/// `JSONEncoder` shows in a profile (`UploadJSON`). Strings are escaped as RFC 8259 requires
/// (`"`, `\` and control characters) and otherwise written as their UTF-8, `/` as it is:
/// what `APIJSON.encode` writes.
struct JSONWriter {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int = 256) { bytes.reserveCapacity(capacity) }

    /// Text known to be JSON already (punctuation, keys without escapes).
    mutating func raw(_ text: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    mutating func string(_ text: String) {
        bytes.append(0x22)
        for byte in text.utf8 {
            switch byte {
            case 0x22: raw("\\\"")
            case 0x5C: raw("\\\\")
            case 0x0A: raw("\\n")
            case 0x0D: raw("\\r")
            case 0x09: raw("\\t")
            case 0x08: raw("\\b")
            case 0x0C: raw("\\f")
            case ..<0x20:
                raw("\\u00")
                bytes.append(Self.hexDigit(byte >> 4))
                bytes.append(Self.hexDigit(byte & 0xF))
            default: bytes.append(byte)
            }
        }
        bytes.append(0x22)
    }

    mutating func integer(_ value: Int64) { bytes.append(contentsOf: String(value).utf8) }

    mutating func bool(_ value: Bool) { value ? raw("true") : raw("false") }

    private static func hexDigit(_ value: UInt8) -> UInt8 { value < 10 ? 0x30 + value : 0x61 + value - 10 }
}
