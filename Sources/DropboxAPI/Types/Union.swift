import Foundation
import Synchronization

/// Dropbox serialises unions as `{".tag": "member", ...}` (void members may also be a bare
/// string). These helpers read that shape; unknown tags decode as `other`, as the SDKs do,
/// so a new member on Dropbox's side never breaks decoding.
struct UnionKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ string: String) { stringValue = string }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }

    static let tag = UnionKey(".tag")

    /// The key as the decoder sees it: `APIJSON` turns `correct_offset` in the document into
    /// `correctOffset`, so the member is looked up that way.
    static func member(_ name: String) -> UnionKey { UnionKey(SnakeCaseKeys.camelCase(name)) }
}

struct UnionReader {
    let tag: String
    let container: KeyedDecodingContainer<UnionKey>?

    /// An object first: most unions in a reply are (a failed attempt builds an error).
    init(from decoder: any Decoder) throws {
        if let keyed = try? decoder.container(keyedBy: UnionKey.self) {
            tag = try keyed.decode(String.self, forKey: .tag)
            container = keyed
            return
        }
        tag = try decoder.singleValueContainer().decode(String.self)
        container = nil
    }

    /// The member's value nested under its own name (a union- or primitive-typed member).
    func nested<T: Decodable>(_ type: T.Type) throws -> T {
        guard let container else { throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "\(tag) has no value")) }
        return try container.decode(T.self, forKey: .member(tag))
    }

    /// A field inlined beside `.tag` (a struct-typed member).
    func field<T: Decodable>(_ name: String, _ type: T.Type) throws -> T {
        guard let container else { throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "\(tag) has no fields")) }
        return try container.decode(T.self, forKey: .member(name))
    }

    func optionalField<T: Decodable>(_ name: String, _ type: T.Type) -> T? {
        try? container?.decodeIfPresent(T.self, forKey: .member(name))
    }
}

/// JSON coding as the API wants it: snake_case keys; the `Dropbox-API-Arg` header variant
/// escapes every non-ASCII character as `\uXXXX`.
enum APIJSON {
    static func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        if let hand = value as? any HandEncodedJSON {  // UploadJSON
            var json = JSONWriter()
            hand.write(to: &json)
            return json.bytes
        }
        return try encodeWithFoundation(value)
    }

    /// What `encode` writes without the hand encoders (their reference in tests).
    static func encodeWithFoundation<T: Encodable>(_ value: T) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return Array(try encoder.encode(value))
    }

    static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        if let hand = T.self as? any HandDecodedJSON.Type, let value = hand.init(handDecoding: bytes) {  // UploadJSON
            return value as! T
        }
        return try decodeWithFoundation(type, from: bytes)
    }

    /// What `decode` reads without the hand decoders (their reference in tests).
    static func decodeWithFoundation<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .custom { path in SnakeCaseKeys.camelCase(path[path.count - 1]) }
        return try decoder.decode(T.self, from: Data(bytes))
    }

    /// Encodes for an HTTP header: ASCII only, other characters as `\uXXXX` (UTF-16 units).
    static func headerValue<T: Encodable>(_ value: T) throws -> String {
        let text = String(decoding: try encode(value), as: UTF8.self)
        if text.utf8.allSatisfy({ $0 < 0x80 }) { return text }  // the usual case, as it is
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for unit in text.utf16 {
            if unit < 0x80 {
                out.unicodeScalars.append(Unicode.Scalar(unit)!)
            } else {
                let hex = String(unit, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            }
        }
        return out
    }
}

/// `convertFromSnakeCase`, remembered: Foundation's converts every key of every object it
/// decodes (split, capitalise, join), and a listing page of 2,000 entries has 20,000 keys
/// but a dozen distinct ones (the conversion took most of the time of listing a folder of
/// 100,000 files). Keys without `_` are the same in both cases and skip the table.
enum SnakeCaseKeys {
    private static let converted = Mutex<[String: String]>([:])

    static func camelCase(_ key: any CodingKey) -> any CodingKey {
        let name = key.stringValue
        guard name.utf8.contains(UInt8(ascii: "_")) else { return key }
        return UnionKey(camelCase(name))
    }

    static func camelCase(_ name: String) -> String {
        guard name.utf8.contains(UInt8(ascii: "_")) else { return name }
        if let known = converted.withLock({ $0[name] }) { return known }
        let camel = convert(name)
        converted.withLock { table in if table.count < 4096 { table[name] = camel } }
        return camel
    }

    /// Foundation's rule: leading and trailing underscores stay, each inner `_x` becomes `X`.
    static func convert(_ name: String) -> String {
        guard let first = name.firstIndex(where: { $0 != "_" }) else { return name }
        let last = name.lastIndex(where: { $0 != "_" })!
        let words = name[first...last].split(separator: "_")
        guard words.count > 1 else { return name }
        let joined = words[0].lowercased() + words.dropFirst().map { $0.prefix(1).uppercased() + $0.dropFirst().lowercased() }.joined()
        return String(name[..<first]) + joined + String(name[name.index(after: last)...])
    }
}

/// The argument of routes that take none: serialised as `null`.
public struct NoArgument: Encodable, Sendable {
    public init() {}
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encodeNil()
    }
}

/// The result of routes that return nothing (`null`).
public struct NoResult: Decodable, Sendable {
    public init(from decoder: any Decoder) throws {}
    public init() {}
}

/// A route error union with no members Dropbox documents beyond `other`.
public struct NoRouteError: Decodable, Sendable, Equatable {
    public let tag: String
    public init(from decoder: any Decoder) throws { tag = (try? UnionReader(from: decoder).tag) ?? "other" }
}
