import Foundation

/// The `user.*` extended attributes of a file or folder, set here: kept with its mode
/// (`KeptAttributes.user`, `FileModes`), so they follow renames and moves and go with
/// removals as modes do, and are this machine's alone. Dropbox keeps no custom attributes,
/// and refusing them made `rsync -X`, `cp --preserve=xattr` and `tar --xattrs` of files that
/// have some fail where a disk takes them. `user.dropbox.*` are the mount's own
/// (`DropboxFileSystem.ownPrefix`) and never kept here.
enum UserAttributes {
    /// Names and values a path may keep in all: as much as one value may hold
    /// (XATTR_SIZE_MAX). Kept in memory with the modes, so bounded per path; a disk whose
    /// attribute space is full answers ENOSPC too.
    static let limit = 64 * 1024

    static let prefix = "user."

    /// Throws unless setxattr and removexattr of `name` change what is kept here: the mount's
    /// own attributes describe Dropbox's copy (EPERM), other namespaces are not kept
    /// (EOPNOTSUPP), and `user.` alone names nothing (EINVAL, as on a disk).
    static func checkKept(_ name: String) throws {
        guard name.hasPrefix(prefix) else { throw FSError.notSupported }
        if name.hasPrefix(DropboxFileSystem.ownPrefix) { throw FSError.notPermitted }
        if name == prefix { throw FSError.invalidArgument }
    }

    /// setxattr(2): `flags` XATTR_CREATE fails on an existing name (EEXIST), XATTR_REPLACE on
    /// a missing one (ENODATA).
    static func set(_ name: String, to value: [UInt8], flags: Int32, in attributes: inout [String: [UInt8]]) throws {
        let existing = attributes[name]
        if flags & createOnly != 0, existing != nil { throw FSError.exists }
        if flags & replaceOnly != 0, existing == nil { throw FSError.noAttribute }
        let total = size(of: attributes) - (existing.map { name.utf8.count + $0.count } ?? 0) + name.utf8.count + value.count
        if total > limit { throw FSError.noSpace }
        attributes[name] = value
    }

    /// removexattr(2): ENODATA for a name not kept.
    static func remove(_ name: String, from attributes: inout [String: [UInt8]]) throws {
        guard attributes.removeValue(forKey: name) != nil else { throw FSError.noAttribute }
    }

    private static let createOnly: Int32 = 1  // XATTR_CREATE
    private static let replaceOnly: Int32 = 2  // XATTR_REPLACE

    private static func size(of attributes: [String: [UInt8]]) -> Int {
        attributes.reduce(0) { $0 + $1.key.utf8.count + $1.value.count }
    }

    // MARK: In the store

    /// The attributes as one blob for the store: each name and value after its length (four
    /// bytes, little-endian), in name order.
    static func encoded(_ attributes: [String: [UInt8]]) -> [UInt8] {
        var bytes: [UInt8] = []
        for (name, value) in attributes.sorted(by: { $0.key < $1.key }) {
            for field in [Array(name.utf8), value] {
                withUnsafeBytes(of: UInt32(field.count).littleEndian) { bytes += $0 }
                bytes += field
            }
        }
        return bytes
    }

    /// What `encoded` made; a blob cut short yields the attributes before the cut.
    static func decoded(_ bytes: [UInt8]) -> [String: [UInt8]] {
        var attributes: [String: [UInt8]] = [:]
        var at = 0
        func field() -> [UInt8]? {
            guard at + 4 <= bytes.count else { return nil }
            let count = bytes[at..<at + 4].reversed().reduce(0) { $0 << 8 | Int($1) }
            guard at + 4 + count <= bytes.count else { return nil }
            defer { at += 4 + count }
            return Array(bytes[at + 4..<at + 4 + count])
        }
        while let name = field(), let value = field() { attributes[String(decoding: name, as: UTF8.self)] = value }
        return attributes
    }
}
