import PropertyBased
import Testing
@testable import DropboxEmulator

/// The emulator's own JSON reader: every argument of every call goes through it.
@Suite("JSON parser", .timeLimit(.minutes(1)))
struct JSONParserTests {
    @Test func readsWhatTheAPISends() throws {
        let cases: [(String, JSON)] = [
            (#"{"path":"/a b","mode":{".tag":"update","update":"015f"},"autorename":false,"mute":true,"x":null}"#,
             .object([("path", .string("/a b")), ("mode", .object([(".tag", .string("update")), ("update", .string("015f"))])),
                      ("autorename", .bool(false)), ("mute", .bool(true)), ("x", .null)])),
            (" \t\r\n[ 1 , -2 ,0 ] \n", .array([.int(1), .int(-2), .int(0)])),
            ("[]", .array([])),
            ("{}", .object([])),
            (#""caf\u00e9 \ud83d\ude00 \"q\" \\ \/ \b\f\n\r\t""#, .string("café 😀 \"q\" \\ / \u{8}\u{C}\n\r\t")),
            ("\"café 😀\"", .string("café 😀")),
            ("1.0", .int(1)),
            ("1e3", .int(1000)),
            ("1.5", .double(1.5)),
            ("-0.25e-2", .double(-0.0025)),
            ("9223372036854775807", .int(Int64.max)),
            ("-9223372036854775808", .int(Int64.min)),
            ("18446744073709551616", .double(18446744073709551616)),
            ("true", .bool(true)),
        ]
        for (text, expected) in cases {
            #expect(try JSON.parse(text) == expected, "\(text)")
        }
    }

    @Test func refusesWhatIsNotJSON() {
        let cases = ["", " ", "{", "[1,]", #"{"a":1,}"#, #"{"a" 1}"#, #"{a:1}"#, "01", "1.", ".5", "+1", "-", "1e", "--1",
                     #""\x""#, "\"a\u{1}b\"", #""\ud800""#, #""\udc00x""#, #""\ud800\u0041""#, #""\u12""#, "\"abc", "tru", "nul",
                     "1 2", "[1] x", "{\"a\":1}}", "'a'", "NaN", "Infinity"]
        for text in cases {
            #expect(throws: (any Error).self, "\(text)") { try JSON.parse(text) }
        }
        #expect(throws: (any Error).self) { try JSON.parse([0x22, 0xFF, 0x22]) }  // not UTF-8
        #expect(throws: (any Error).self) { try JSON.parse([0x22, 0xC3, 0x22]) }  // cut short
    }

    @Test func nestingIsBoundedNotACrash() throws {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(throws: (any Error).self) { try JSON.parse(deep) }
        let allowed = String(repeating: "[", count: JSONParser.maximumDepth) + String(repeating: "]", count: JSONParser.maximumDepth)
        #expect(try JSON.parse(allowed) != .null)
    }

    /// Whatever the emulator writes, in a body or (ASCII only) in a header, it reads back.
    @Test func readsBackWhatItWrites() async {
        // Any scalar: the values above the surrogates' range are shifted past it.
        let scalar = Gen.uint32(in: 0...(0x10FFFF - 0x800)).map { Unicode.Scalar($0 < 0xD800 ? $0 : $0 + 0x800)! }
        let text = scalar.array(of: 0...12).map { String(String.UnicodeScalarView($0)) }
        let step = zip(Gen.int(in: 0...7), Gen.int64(in: .min ... .max), text)
        await propertyCheck(count: 300, input: step.array(of: 1...40)) { steps in
            let document = Self.build(steps[...])
            for asciiOnly in [false, true] {
                let written = document.serialized(asciiOnly: asciiOnly)
                #expect(!asciiOnly || written.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F }, "\(written)")
                #expect((try? JSON.parse(written)) == document, "\(written)")
            }
        }
    }

    /// A document from a list of steps: containers take the steps after them as members.
    private static func build(_ steps: ArraySlice<(Int, Int64, String)>) -> JSON {
        var rest = steps
        return next(&rest, depth: 0)
    }

    private static func next(_ steps: inout ArraySlice<(Int, Int64, String)>, depth: Int) -> JSON {
        guard let (kind, number, text) = steps.popFirst() else { return .null }
        switch kind {
        case 0: return .null
        case 1: return .bool(number % 2 == 0)
        case 2: return .int(number)
        case 3: return .double(Double(number % 1_000_000_000) + 0.1)  // never integral: that reads as .int
        case 4, 5: return .string(text)
        default:
            guard depth < 6 else { return .string(text) }
            let count = Int(number.magnitude % 4)
            if kind == 6 { return .array((0..<count).map { _ in next(&steps, depth: depth + 1) }) }
            return .object((0..<count).map { index in ("\(text)\(index)", next(&steps, depth: depth + 1)) })
        }
    }
}
