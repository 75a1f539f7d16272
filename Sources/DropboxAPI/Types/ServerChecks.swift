/// Checks of values a server sends that end up in local paths or keys: a broken or hostile
/// server (or a mistyped `api_url`) must not be able to name files outside the places the
/// client writes to. A response that fails one is refused whole, as undecodable.
public enum ServerChecks {
    /// Dropbox's content hash: SHA-256 of block hashes, 64 hexadecimal digits.
    public static func isContentHash(_ text: String) -> Bool {
        func isHex(_ byte: UInt8) -> Bool { (48...57).contains(byte) || (97...102).contains(byte) || (65...70).contains(byte) }
        guard text.utf8.count == 64 else { return false }
        // Over the bytes in place (a decoded string is contiguous): through the view's
        // iterator it was 1.5 % of a large folder's first listing.
        return text.utf8.withContiguousStorageIfAvailable { $0.allSatisfy(isHex) } ?? text.utf8.allSatisfy(isHex)
    }

    /// One path component: not empty, not `.` or `..`, without `/` or NUL.
    public static func isName(_ text: String) -> Bool {
        !text.isEmpty && text != "." && text != ".." && !text.utf8.contains(where: { $0 == 0x2F || $0 == 0 })
    }

    /// A Dropbox path: `/` followed by names joined with `/` (the root is the empty path).
    /// One pass over the bytes (every listed entry has two paths).
    public static func isPath(_ text: String) -> Bool {
        text.utf8.withContiguousStorageIfAvailable { isPath(bytes: $0) } ?? isPath(bytes: text.utf8)
    }

    private static func isPath<Bytes: Sequence<UInt8>>(bytes: Bytes) -> Bool {
        var utf8 = bytes.makeIterator()
        guard let first = utf8.next() else { return true }
        guard first == 0x2F else { return false }
        // The current component's length, and whether it is all dots so far.
        var length = 0, dots = true
        while let byte = utf8.next() {
            if byte == 0 { return false }
            if byte == 0x2F {
                if length == 0 || (dots && length <= 2) { return false }
                length = 0; dots = true
            } else {
                length += 1; dots = dots && byte == 0x2E
            }
        }
        return !(length == 0 || (dots && length <= 2))
    }
}

extension KeyedDecodingContainer {
    /// Decodes a string and refuses it unless `valid` holds, naming the field and the value.
    func checked(_ key: Key, _ valid: (String) -> Bool, _ what: String) throws -> String {
        let text = try decode(String.self, forKey: key)
        guard valid(text) else { throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "\(what) \(text.debugDescription) refused") }
        return text
    }

    func checkedIfPresent(_ key: Key, _ valid: (String) -> Bool, _ what: String) throws -> String? {
        try contains(key) && !decodeNil(forKey: key) ? checked(key, valid, what) : nil
    }
}
