import Foundation
import Synchronization

/// The mount's one table of open file handles, keyed by the number FUSE hands back on every
/// read, write and release: for each, the inode it was opened on, the Dropbox file it reads
/// (node and read-ahead stream) and, once a local version serves it, that version and whether
/// the handle may write. truncate(2) without a descriptor takes a short-lived handle here too.
///
/// Lock order: `WriteBack.state`, then this table's lock. WriteBack moves handles from one
/// version to another under its own lock (a new version and the handles on it appear
/// together); code holding this table's lock takes no other lock but a version's path lock
/// (`move`'s test reads versions' keys), which comes after it in that order.
final class OpenFiles: Sendable {
    struct Entry: Sendable {
        let inode: UInt64
        /// The Dropbox file it reads while no local version serves it.
        var node: Node
        let stream: ReadStream
        /// The local version serving it: written here, or following writes made here.
        var version: LocalVersion?
        /// Opened for writing: its close may seal the version.
        var writable = false
        var local: Bool { version != nil }
    }

    private let table = Mutex<(next: UInt64, entries: [UInt64: Entry])>((1, [:]))

    /// A new handle, reading `node` from Dropbox until a local version serves it.
    func open(inode: UInt64, node: Node) -> UInt64 {
        table.withLock { table in
            let handle = table.next
            table.next += 1
            table.entries[handle] = Entry(inode: inode, node: node, stream: ReadStream())
            return handle
        }
    }

    func remove(_ handle: UInt64) -> Entry? { table.withLock { $0.entries.removeValue(forKey: handle) } }

    subscript(handle: UInt64) -> Entry? { table.withLock { $0.entries[handle] } }

    func version(of handle: UInt64) -> LocalVersion? { table.withLock { $0.entries[handle]?.version } }

    /// The version a handle opened for writing is on.
    func writingVersion(of handle: UInt64) -> LocalVersion? {
        table.withLock { table in table.entries[handle].flatMap { $0.writable ? $0.version : nil } }
    }

    /// The handles open on an inode.
    func handles(of inode: UInt64) -> [(handle: UInt64, entry: Entry)] {
        table.withLock { table in table.entries.filter { $0.value.inode == inode }.map { ($0.key, $0.value) } }
    }

    /// The Dropbox file the handles on `inode` read gets a new time (utimens through its
    /// path): fstat of them shows it, also once the name is gone.
    func setModified(of inode: UInt64, to time: timespec) {
        table.withLock { table in
            for (handle, entry) in table.entries where entry.inode == inode {
                table.entries[handle]!.node.modified = Int64(time.tv_sec)
                table.entries[handle]!.node.modifiedNanos = Int32(time.tv_nsec)
            }
        }
    }

    /// Every version a handle is on (with repeats).
    var servingVersions: [LocalVersion] { table.withLock { table in table.entries.values.compactMap(\.version) } }

    // MARK: Changes (WriteBack's, under its lock; `follow` from the core)

    /// A local version serves the handle from now on; false if it is closed.
    @discardableResult
    func serve(_ handle: UInt64, from version: LocalVersion, writable: Bool? = nil) -> Bool {
        table.withLock { table in
            guard table.entries[handle] != nil else { return false }
            table.entries[handle]!.version = version
            if let writable { table.entries[handle]!.writable = writable }
            return true
        }
    }

    /// Moves every handle whose version `moves` picks to `version`; returns how many of them
    /// may write.
    func move(to version: LocalVersion, where moves: (LocalVersion) -> Bool) -> Int {
        table.withLock { table in
            var writers = 0
            for (handle, entry) in table.entries {
                guard let held = entry.version, held !== version, moves(held) else { continue }
                table.entries[handle]!.version = version
                if entry.writable { writers += 1 }
            }
            return writers
        }
    }

    /// A handle read from Dropbox goes on with another revision (our own commit made from
    /// the one it read); returns the entry as it is now.
    func follow(_ handle: UInt64, to node: Node) -> Entry? {
        table.withLock { table in
            table.entries[handle]?.node = node
            return table.entries[handle]
        }
    }
}
