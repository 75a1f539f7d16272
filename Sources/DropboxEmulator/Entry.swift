import SQLiteStore
import Foundation
import Synchronization

/// One row of the namespace: a live file or folder, or the tombstone of a deleted one
/// (tombstones feed `include_deleted` listings and cursors).
struct Entry: Sendable {
    var path: DropboxPath
    var id: String
    var isFolder: Bool
    var isDeleted: Bool = false
    var size: Int64 = 0
    var rev: String?
    var contentHash: String?
    var clientModified: Int64 = 0
    var serverModified: Int64 = 0
    /// Name of the content file under `blobs/`; nil for folders, tombstones and empty files.
    var blob: String?
    var changeSeq: Int64 = 0

    static let columns =
        "path_display, id, is_folder, is_deleted, size, rev, content_hash, client_modified, server_modified, blob, change_seq"

    init(path: DropboxPath, id: String, isFolder: Bool) {
        self.path = path
        self.id = id
        self.isFolder = isFolder
    }

    init(row: SQLiteRow) {
        path = DropboxPath(display: row.text(0))
        id = row.text(1)
        isFolder = row.bool(2)
        isDeleted = row.bool(3)
        size = row.int(4)
        rev = row.optionalText(5)
        contentHash = row.optionalText(6)
        clientModified = row.int(7)
        serverModified = row.int(8)
        blob = row.optionalText(9)
        changeSeq = row.int(10)
    }

    var sqlValues: [SQLValue] {
        [
            .text(path.lower), .text(path.parent.lower), .text(path.display), .text(id),
            .int(isFolder ? 1 : 0), .int(isDeleted ? 1 : 0), .int(size), .optional(rev),
            .optional(contentHash), .int(clientModified), .int(serverModified), .optional(blob),
            .int(changeSeq),
        ]
    }

    /// The API's metadata object. `tagged` adds `.tag`, as where the declared type is the
    /// `Metadata` union rather than `FileMetadata`/`FolderMetadata` itself.
    func metadata(tagged: Bool = true) -> JSON {
        var fields: [(String, JSON)] = [
            ("name", .string(path.name)),
            ("path_lower", .string(path.lower)),
            ("path_display", .string(path.display)),
        ]
        if isDeleted {
            return .object((tagged ? [(".tag", .string("deleted"))] : []) + fields)
        }
        fields.append(("id", .string(id)))
        if !isFolder {
            fields += [
                ("client_modified", .string(Timestamp.format(clientModified))),
                ("server_modified", .string(Timestamp.format(serverModified))),
                ("rev", .string(rev ?? "")),
                ("size", .int(size)),
                ("is_downloadable", .bool(true)),
                ("content_hash", .string(contentHash ?? "")),
            ]
        }
        let tag = isFolder ? "folder" : "file"
        return .object((tagged ? [(".tag", .string(tag))] : []) + fields)
    }
}

/// Dropbox timestamps: `2015-05-12T15:50:38Z`, whole seconds, UTC.
enum Timestamp {
    static func now() -> Int64 { Int64(Date().timeIntervalSince1970) }

    static func format(_ seconds: Int64) -> String {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T"
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
    }

    /// Parses the one format Dropbox accepts; nil for anything else.
    static func parse(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard bytes.count == 20, bytes[4] == 45, bytes[7] == 45, bytes[10] == 84, bytes[13] == 58,
              bytes[16] == 58, bytes[19] == 90 else { return nil }
        func number(_ range: Range<Int>) -> Int32? {
            var value: Int32 = 0
            for b in bytes[range] {
                guard b >= 48, b <= 57 else { return nil }
                value = value * 10 + Int32(b - 48)
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var parts = tm()
        parts.tm_year = year - 1900
        parts.tm_mon = month - 1
        parts.tm_mday = day
        parts.tm_hour = hour
        parts.tm_min = minute
        parts.tm_sec = second
        return Int64(timegm(&parts))
    }
}

/// Random identifiers in the shapes Dropbox uses.
enum Identifiers {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)
    /// Random bits for ids, seeded once from the system: the system generator asks the
    /// kernel for every 64 bits, 14 `getrandom` calls for each small file uploaded and
    /// committed (a session id, a file id, a blob name). Ids need to be unique, not secret.
    private static let generator = Mutex(SplitMix64(seed: UInt64.random(in: .min ... .max)))

    /// An id of `length` characters.
    static func random(_ length: Int) -> String {
        generator.withLock { characters(length, from: &$0) }
    }

    /// A code or token of `length` characters, which must not be guessable from ids seen.
    static func secret(_ length: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return characters(length, from: &generator)
    }

    /// Six random bits a character, ten characters from each 64-bit draw; 62 of the 64
    /// values are used, so each character is equally likely.
    private static func characters(_ length: Int, from generator: inout some RandomNumberGenerator) -> String {
        var characters: [UInt8] = []
        characters.reserveCapacity(length)
        var bits: UInt64 = 0
        var left = 0
        while characters.count < length {
            if left == 0 { (bits, left) = (generator.next(), 10) }
            let index = Int(bits & 63)
            bits >>= 6
            left -= 1
            if index < alphabet.count { characters.append(alphabet[index]) }
        }
        return String(decoding: characters, as: UTF8.self)
    }

    /// `id:` followed by 22 characters.
    static func fileID() -> String { "id:" + random(22) }

    /// A hex revision: the change counter of the write, then the position of this file
    /// among the files that write touched, so revisions are unique (a revision names one
    /// version of one file) and grow over time.
    /// (Written digit by digit: `String(format:)` was a seventh of a batch commit's time.)
    static func rev(seq: Int64, index: Int) -> String {
        guard (0..<(1 << 40)).contains(seq), (0..<(1 << 24)).contains(index) else { return String(format: "%010llx%06x", seq, index) }
        return String(unsafeUninitializedCapacity: 16) { out in
            for position in 0..<10 { out[position] = hexDigit(UInt8(truncatingIfNeeded: UInt64(bitPattern: seq) >> (4 * (9 - position))) & 0xF) }
            for position in 0..<6 { out[10 + position] = hexDigit(UInt8(truncatingIfNeeded: index >> (4 * (5 - position))) & 0xF) }
            return 16
        }
    }
}

/// Steele, Lea and Flood's SplitMix64: a full-period 64-bit generator, one add and a few
/// multiplies a draw.
struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var mixed = state
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }
}
