import Synchronization

/// Inode numbers for paths. A path's number is a hash of its key (`number(_:)`), so a plain
/// `readdir` can name a million entries without this table learning any of them, and the
/// number a later lookup gives is the one `readdir` showed (and the one the previous mount
/// gave: `git` keeps inode numbers in its index). The table holds the inodes the kernel
/// holds: each entry the kernel is given (lookup, readdirplus, create) counts once, `forget`
/// takes counts away, and at zero the entry goes. A held inode keeps its number when its
/// file is renamed, and when it is unlinked while open (detached); a new file at its old
/// path, or a path whose hash is taken by another held inode, gets a number from a counter
/// below 2^32 instead. The kernel keeps what it was given until it is short of memory, so
/// the mount asks it to drop the longest-held files beyond a limit (`oldest`): memory stays
/// bounded however many files a `find` walks. The root is 1.
public final class InodeTable: Sendable {
    public static let root: UInt64 = 1

    private struct Entry {
        var path: String
        var lookups: UInt64
        /// Its place in `order` (older entries of `order` for this inode are stale); set by
        /// `queueLocked`.
        var serial: UInt64 = 0
        /// Handed out by `oldest` and not yet forgotten.
        var asked = false
        /// Whether the kernel was given it as a folder (nil: not given yet).
        var isFolder: Bool?
    }

    private struct State {
        /// Change only through `setPath` and `removePath`, which keep `renumbered`.
        var byPath: [PathKey: UInt64] = [:]
        /// The paths of `byPath` whose inode's number is not their own hash (a spare, or a
        /// file renamed since it was numbered): usually none, and then a plain readdir's
        /// numbers need no look into `byPath` (a `find` over 200,000 listed entries: 0.73 s
        /// with the look, 0.70 s without).
        var renumbered: [PathKey: UInt64] = [:]
        /// Entries come, go and change paths only through `addEntry`, `removeEntry` and
        /// `setEntryPath`, which keep `heldWithin`.
        var byInode: [UInt64: Entry] = [:]
        /// How many entries of `byInode` are at each path or below it, by the path's hash:
        /// an rmdir or a rename looks for what lies below only when something does. (It
        /// scanned every entry, up to `Options.inodeLimit`: after a `find` over a large tree,
        /// every rmdir of an `rm -r` read 100,000 paths.) Hashes alone: a collision makes a
        /// count too high, which costs a scan, never a miss.
        var heldWithin: [UInt64: Int] = [:]
        /// Numbers for paths whose hash is taken (see the type's comment).
        var nextSpare: UInt64 = 2
        /// Inodes in the order they were held, oldest first (from `head`), each with the
        /// serial it had then: `oldest` takes from the front.
        var order: [(inode: UInt64, serial: UInt64)] = []
        var head = 0
        var nextSerial: UInt64 = 0
        /// Entries handed out by `oldest` and not yet forgotten: their `forget` comes after
        /// the kernel has dropped them, and they must not be asked for twice meanwhile.
        var asked = 0

        /// An entry another inode held at `key` loses its path: every entry's path leads back
        /// to it (a rename onto a path a stale entry held left two entries there, and a rename
        /// of a folder above then moved both, one of them to a name the kernel held elsewhere).
        mutating func setPath(_ key: PathKey, _ inode: UInt64) {
            if let previous = byPath.updateValue(inode, forKey: key), previous != inode, byInode[previous]?.path == key.path {
                setEntryPath(previous, InodeTable.detachedPath)
            }
            if inode != InodeTable.number(key) { renumbered[key] = inode } else if !renumbered.isEmpty { renumbered.removeValue(forKey: key) }
        }

        @discardableResult
        mutating func removePath(_ key: PathKey) -> UInt64? {
            if !renumbered.isEmpty { renumbered.removeValue(forKey: key) }
            return byPath.removeValue(forKey: key)
        }

        mutating func addEntry(_ inode: UInt64, _ entry: Entry) {
            if let old = byInode[inode] { count(old.path, -1) }
            byInode[inode] = entry
            count(entry.path, 1)
        }

        @discardableResult
        mutating func removeEntry(_ inode: UInt64) -> Entry? {
            guard let entry = byInode.removeValue(forKey: inode) else { return nil }
            count(entry.path, -1)
            return entry
        }

        mutating func setEntryPath(_ inode: UInt64, _ path: String) {
            guard let old = byInode[inode]?.path else { return }
            count(old, -1)
            byInode[inode]!.path = path
            count(path, 1)
        }

        /// Scans of every entry for what lies below a path, so far (tests count them).
        var subtreeScans = 0
        /// Set by tests: scan for what lies below a path every time, as the reference the
        /// index is compared with.
        var alwaysScans = false

        /// True when no entry lies at `key` or below it but the one `byPath` gives it; else
        /// the caller scans, and this counts it.
        mutating func nothingElseWithin(_ key: PathKey) -> Bool {
            if !alwaysScans && heldWithin[key.hash, default: 0] == (byPath[key] == nil ? 0 : 1) { return true }
            subtreeScans += 1
            return false
        }

        private mutating func count(_ path: String, _ delta: Int) {
            guard path != InodeTable.detachedPath else { return }
            PathKey.forEachHashWithin(path) { hash in
                let held = heldWithin[hash, default: 0] + delta
                if held == 0 { heldWithin.removeValue(forKey: hash) } else { heldWithin[hash] = held }
            }
        }
    }

    private let state = Mutex(State())
    /// Entries not yet handed out by `oldest` (`byInode.count - asked`), readable without
    /// the lock: checked after every entry given to the kernel.
    private let unasked = Atomic<Int>(0)

    /// How many times a name went or moved (`detach`, `rename`, `nameWent`): a folder's
    /// snapshot taken before may list names that are gone (`FuseMount.readDirectory`).
    private let namesGone = Atomic<UInt64>(0)

    public init() {}

    /// `namesGone` now.
    public var namesGoneCount: UInt64 { namesGone.load(ordering: .acquiring) }

    /// A name went without the table's knowing (another client's change, say).
    public func nameWent() { namesGone.add(1, ordering: .releasing) }

    /// For tests: a table that scans for what lies below a path every time (`alwaysScans`).
    init(alwaysScans: Bool) {
        state.withLock { $0.alwaysScans = alwaysScans }
    }

    /// For tests: how many times an operation scanned every entry.
    var subtreeScans: Int { state.withLock { $0.subtreeScans } }

    /// For tests: every entry's inode and path.
    var entries: [UInt64: String] { state.withLock { $0.byInode.mapValues(\.path) } }

    /// The number a path gets when nothing else holds it: a hash of its key between 2^32
    /// and 2^52 (above the spare numbers; below 2^53, which JavaScript's numbers hold
    /// exactly: Node.js tools compare `st_ino`).
    fileprivate static func number(_ key: PathKey) -> UInt64 { (1 << 32) + key.hash % ((1 << 52) - (1 << 32)) }

    /// A path as a key of `byPath`, with its hash computed once: it serves for the number
    /// too, and a probe compares hashes before paths (a `String` key compared the long
    /// shared prefixes of a folder's paths at every probe: a third of a `find`'s time here).
    fileprivate struct PathKey: Hashable {
        let path: String
        let hash: UInt64

        /// FNV-1a, then a finalizer that spreads FNV's weak high bits.
        init(_ path: String) {
            self.path = path
            self.hash = Self.finalized(Self.bytes(of: path) { $0.reduce(Self.fnvStart, Self.fnv) })
        }

        /// The hashes of the keys of `path` and of each folder above it but the root
        /// ("/a/b": "/a", "/a/b"), in one pass: FNV-1a reads a path's bytes in order, so
        /// each folder's hash is a step of the path's.
        static func forEachHashWithin(_ path: String, _ body: (UInt64) -> Void) {
            let hash = bytes(of: path) { bytes in
                var hash = fnvStart
                var first = true
                for byte in bytes {
                    if byte == UInt8(ascii: "/") && !first { body(finalized(hash)) }
                    hash = fnv(hash, byte)
                    first = false
                }
                return hash
            }
            body(finalized(hash))
        }

        /// `body` over the path's UTF-8 bytes, read from its storage: stepping through
        /// `String.utf8` took twice as long (the hashing was 5.5 % of the daemon's time in a
        /// `find` over a listed tree of 300,000 entries, 2.7 % this way), and a `find`
        /// hashes every path it lists.
        private static func bytes(of path: String, _ body: (UnsafeBufferPointer<UInt8>) -> UInt64) -> UInt64 {
            if let hash = path.utf8.withContiguousStorageIfAvailable(body) { return hash }
            var copy = path
            return copy.withUTF8(body)
        }

        private static let fnvStart: UInt64 = 0xcbf2_9ce4_8422_2325
        private static func fnv(_ hash: UInt64, _ byte: UInt8) -> UInt64 { (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        private static func finalized(_ fnv: UInt64) -> UInt64 {
            var hash = fnv
            hash ^= hash >> 33
            hash &*= 0xff51_afd7_ed55_8ccd
            hash ^= hash >> 33
            return hash
        }

        func hash(into hasher: inout Hasher) { hasher.combine(hash) }
        static func == (a: PathKey, b: PathKey) -> Bool { a.hash == b.hash && a.path == b.path }
    }

    /// The inode of a path, given one if it has none.
    public func inode(for pathLower: String) -> UInt64 {
        if pathLower.isEmpty { return Self.root }
        return state.withLock { state in
            let ino = Self.numberLocked(&state, pathLower)
            publishLocked(state)
            return ino
        }
    }

    /// The number for an entry just made at `pathLower` (create, mkdir), where the view
    /// showed nothing. An inode still at that path is what was there before, which the view
    /// lost without it being detached (a race with the change feed): it is detached now,
    /// with what lies below it. Numbered the old inode, a file made where a folder the
    /// kernel held had been was answered as that folder, and the kernel failed the create
    /// with EIO (two mounts stressing one tree).
    public func inode(forNew pathLower: String) -> UInt64 {
        state.withLock { state in
            if let old = state.byPath[PathKey(pathLower)], let entry = state.byInode[old] {
                // Never handed to the kernel (a number readdir showed): simply forgotten.
                if entry.lookups > 0 { Self.detachLocked(&state, pathLower, folder: false) } else { Self.removeLocked(&state, old, pathLower) }
            }
            let ino = Self.numberLocked(&state, pathLower)
            publishLocked(state)
            return ino
        }
    }

    private static func numberLocked(_ state: inout State, _ pathLower: String) -> UInt64 {
        let key = PathKey(pathLower)
        if let existing = state.byPath[key] { return existing }
        var ino = number(key)
        if state.byInode[ino] != nil {
            ino = state.nextSpare
            state.nextSpare += 1
        }
        state.setPath(key, ino)
        addLocked(&state, ino, Entry(path: pathLower, lookups: 0))
        return ino
    }

    /// The numbers of a `readdir` answer's entries (paths, and whether each is a folder),
    /// under one lock. Plain: the number each path's inode has if held, else the one a lookup
    /// would give it (the table learns nothing). `handed`: the kernel receives each entry
    /// (readdirplus), as by `retain`.
    public func numbers(for entries: some Collection<(path: String, isFolder: Bool)>, handed: Bool) -> [UInt64] {
        state.withLock { state in
            var numbers: [UInt64] = []
            numbers.reserveCapacity(entries.count)
            if handed {
                for (path, isFolder) in entries {
                    numbers.append(Self.retainLocked(&state, Self.numberLocked(&state, path), path: path, isFolder: isFolder))
                }
                publishLocked(state)
            } else {
                for (path, _) in entries {
                    let key = PathKey(path)
                    numbers.append(state.renumbered.isEmpty ? Self.number(key) : state.renumbered[key] ?? Self.number(key))
                }
            }
            return numbers
        }
    }

    /// Puts an entry in the table, at the back of `order`.
    private static func addLocked(_ state: inout State, _ inode: UInt64, _ entry: Entry) {
        state.addEntry(inode, entry)
        queueLocked(&state, inode)
        compactLocked(&state)
    }

    /// The kernel is handed this inode once more (a lookup or readdirplus entry) for `path`,
    /// as a folder or a file; returns the number to hand it with. An entry no one held may
    /// have been dropped since its number was given (`oldest`): it comes back with the same
    /// number. One the kernel holds as the other kind (another client replaced a folder by a
    /// file, or the reverse, and the change feed has not brought it yet) is detached, and the
    /// path gets a number of its own: given a number it holds with another type, the kernel
    /// marks its inode bad, and a call through it in another thread fails with EIO (seen
    /// with a `rename` and a `create` racing another client's changes). `parent`: the
    /// folder inode the kernel attaches it under, for the trace only.
    @discardableResult
    public func retain(_ inode: UInt64, path: String, isFolder: Bool? = nil, parent: UInt64? = nil) -> UInt64 {
        guard inode != Self.root else { return inode }
        return state.withLock { state in
            let ino = Self.retainLocked(&state, inode, path: path, isFolder: isFolder, parent: parent)
            publishLocked(state)
            return ino
        }
    }

    private static func retainLocked(_ state: inout State, _ inode: UInt64, path: String, isFolder: Bool?, parent: UInt64? = nil) -> UInt64 {
        var inode = inode
        if let entry = state.byInode[inode], entry.path != path {
            // Numbered for this path before it moved away or was detached (a lookup that
            // waited while another call renamed or removed it): handed here too, one inode
            // would have two names, and the kernel answers ESTALE when it finds a folder's
            // inode under a second parent. The path's own number instead.
            inode = numberLocked(&state, path)
        }
        if let entry = state.byInode[inode], let held = entry.isFolder, let isFolder, held != isFolder, entry.lookups > 0, entry.path == path {
            detachLocked(&state, path, folder: held)
            inode = numberLocked(&state, path)
        }
        let key = PathKey(path)
        if state.byInode[inode] == nil, let current = state.byPath[key] {
            // Its entry went (not held) and the path was numbered again meanwhile: the
            // path's number now, not a second inode at one path.
            inode = current
        }
        if state.byInode[inode] != nil {
            state.byInode[inode]!.lookups += 1
        } else {
            addLocked(&state, inode, Entry(path: path, lookups: 1))
            state.setPath(key, inode)
        }
        if let isFolder { state.byInode[inode]!.isFolder = isFolder }
        FuseLog.trace("handed \(inode) \(path) \(isFolder.map { $0 ? "folder" : "file" } ?? "?") lookups \(state.byInode[inode]!.lookups)\(parent.map { " under \($0)" } ?? "")")
        return inode
    }

    /// `forget`: the kernel dropped `count` references. True when the inode is gone.
    @discardableResult
    public func forget(_ inode: UInt64, count: UInt64) -> Bool {
        guard inode != Self.root else { return false }
        return state.withLock { state in
            guard var entry = state.byInode[inode] else { return false }
            entry.lookups = entry.lookups > count ? entry.lookups - count : 0
            FuseLog.trace("forget \(inode) \(entry.path) by \(count): \(entry.lookups)")
            if entry.lookups == 0 {
                Self.removeLocked(&state, inode, entry.path)
                if entry.asked { state.asked -= 1 }
                publishLocked(state)
                return true
            }
            state.byInode[inode] = entry
            return false
        }
    }

    /// A path's file went away (unlink, rename-over, a remote delete) while the kernel may
    /// still hold its inode through open descriptors: the inode keeps its number but no
    /// longer has a path, and a new file at that name gets a new inode. Returns the inode, and
    /// those held below a folder: everything below a detached folder is detached with it (a
    /// scan: files need none).
    @discardableResult
    public func detach(_ pathLower: String, folder: Bool = false) -> (inode: UInt64?, below: [UInt64]) {
        guard !pathLower.isEmpty else { return (nil, []) }
        nameWent()
        return state.withLock { state in Self.detachLocked(&state, pathLower, folder: folder) }
    }

    @discardableResult
    private static func detachLocked(_ state: inout State, _ pathLower: String, folder: Bool) -> (inode: UInt64?, below: [UInt64]) {
        let key = PathKey(pathLower)
        var below: [PathKey] = []
        // What the kernel was given as a folder takes what lies below along, whatever the
        // caller took the path for: left at their paths, entries below a detached folder the
        // kernel still holds were handed again under the folder's next inode, and the kernel
        // answered ESTALE finding a folder's inode under a second parent.
        let heldAsFolder = state.byPath[key].flatMap { state.byInode[$0]?.isFolder } ?? false
        if (folder || heldAsFolder) && !state.nothingElseWithin(key) {  // compared as bytes, the prefix made once
            let prefix = Array((pathLower + "/").utf8)
            below = state.byPath.keys.filter { $0.path.utf8.starts(with: prefix) }
        }
        let detachedBelow = below.compactMap { key in
            state.removePath(key).map { ino in
                state.setEntryPath(ino, Self.detachedPath)
                return ino
            }
        }
        guard let ino = state.removePath(key) else { return (nil, detachedBelow) }
        FuseLog.trace("detached \(ino) \(pathLower) and \(below.count) below")
        state.setEntryPath(ino, Self.detachedPath)
        // A folder numbered without its kind (by a readdir, or by the core without a kernel)
        // is one all the same: removed, it lists nothing (`isDetachedFolder`).
        if folder, state.byInode[ino]?.isFolder == nil { state.byInode[ino]!.isFolder = true }
        return (ino, detachedBelow)
    }

    /// The path of an inode whose file was detached: never a real path (Dropbox paths start
    /// with "/").
    static let detachedPath = "\u{0}detached"

    /// A path moved (by a rename through the mount): its inode and those of everything below
    /// it keep their numbers and follow it.
    public func rename(from old: String, to new: String) {
        FuseLog.trace("rename \(old) -> \(new)")
        nameWent()
        state.withLock { state in
            let oldKey = PathKey(old)
            if state.nothingElseWithin(oldKey) {  // a file, or a folder nothing below is held of
                guard let ino = state.removePath(oldKey) else { return }
                state.setPath(PathKey(new), ino)
                state.setEntryPath(ino, new)
                return
            }
            let prefix = Array((old + "/").utf8)
            for (ino, entry) in state.byInode where entry.path == old || entry.path.utf8.starts(with: prefix) {
                let moved = new + entry.path.dropFirst(old.count)
                let key = PathKey(entry.path)
                if state.byPath[key] == ino { state.removePath(key) }
                state.setPath(PathKey(moved), ino)
                state.setEntryPath(ino, moved)
            }
        }
    }

    /// The path of an inode; nil if unknown or detached.
    public func path(of inode: UInt64) -> String? { pathAndKind(of: inode)?.path }

    /// The path of an inode (nil if unknown or detached), and whether the kernel was given
    /// it as a folder (nil: not given yet).
    public func pathAndKind(of inode: UInt64) -> (path: String, isFolder: Bool?)? {
        if inode == Self.root { return ("", true) }
        return state.withLock { state in
            state.byInode[inode].flatMap { $0.path == Self.detachedPath ? nil : ($0.path, $0.isFolder) }
        }
    }

    /// Whether the inode is a folder whose name went (removed here or elsewhere) while the
    /// kernel still holds it: a process's working directory, say.
    public func isDetachedFolder(_ inode: UInt64) -> Bool {
        state.withLock { state in state.byInode[inode].map { $0.path == Self.detachedPath && $0.isFolder == true } ?? false }
    }

    /// Whether the inode is a file whose name went (unlinked, replaced by a rename, removed
    /// elsewhere) while the kernel still holds it.
    public func isDetachedFile(_ inode: UInt64) -> Bool {
        state.withLock { state in state.byInode[inode].map { $0.path == Self.detachedPath && $0.isFolder != true } ?? false }
    }

    /// The inode already given to a path, without creating one.
    public func existing(_ pathLower: String) -> UInt64? {
        if pathLower.isEmpty { return Self.root }
        return state.withLock { $0.byPath[PathKey(pathLower)] }
    }

    public var count: Int { state.withLock { $0.byInode.count } }

    /// Whether `oldest(over: limit)` has anything to do.
    public func isOver(_ limit: Int) -> Bool { unasked.load(ordering: .relaxed) > limit }

    /// Brings the entries beyond `limit` down, the longest held first. Entries the kernel
    /// does not hold (numbers given and never handed over) are dropped here; those it holds
    /// are returned with their paths: the mount asks the kernel to drop them, and each
    /// `forget` then frees its entry. A `find` over a million entries otherwise left 200,000
    /// here (readdirplus hands over a folder's first entries; the kernel drops inodes only
    /// when short of memory). A tenth of `limit` more than the excess goes, so that this runs
    /// once per batch, not once per entry. The caller skips what must stay (folders, open
    /// files): those go to the back, and are asked for again once all before them were.
    public func oldest(over limit: Int) -> [(inode: UInt64, path: String)] {
        state.withLock { state in
            var excess = state.byInode.count - state.asked - limit
            guard excess > 0 else { return [] }
            excess += limit / 10
            var held: [(inode: UInt64, path: String)] = []
            var left = state.order.count - state.head
            while excess > 0 && left > 0 {
                let (ino, serial) = state.order[state.head]
                state.head += 1
                left -= 1
                guard var entry = state.byInode[ino], entry.serial == serial, entry.path != Self.detachedPath else { continue }
                if entry.asked {  // asked for before and still held: asked for again
                    entry.asked = false
                    state.asked -= 1
                }
                excess -= 1
                if entry.lookups == 0 {
                    Self.removeLocked(&state, ino, entry.path)
                    continue
                }
                held.append((ino, entry.path))
                entry.asked = true
                state.asked += 1
                state.byInode[ino] = entry
                Self.queueLocked(&state, ino)
            }
            Self.compactLocked(&state)
            publishLocked(state)
            return held
        }
    }

    /// Puts an entry at the back of `order` (its older place there goes stale).
    private static func queueLocked(_ state: inout State, _ inode: UInt64) {
        state.byInode[inode]!.serial = state.nextSerial
        state.order.append((inode, state.nextSerial))
        state.nextSerial += 1
    }

    /// Drops what `oldest` has passed, and the stale places of inodes forgotten or moved
    /// back, once they outweigh the live ones.
    private static func compactLocked(_ state: inout State) {
        guard state.order.count > 2 * state.byInode.count + 1_024 else { return }
        let live = state.order[state.head...].filter { state.byInode[$0.inode]?.serial == $0.serial }
        state.order = Array(live)
        state.head = 0
    }

    /// Takes an inode's entry out, and its path's if the path still leads to it.
    private static func removeLocked(_ state: inout State, _ inode: UInt64, _ path: String) {
        state.removeEntry(inode)
        let key = PathKey(path)
        if state.byPath[key] == inode { state.removePath(key) }
    }

    /// Makes the entries not yet asked for readable without the lock (`isOver`).
    private func publishLocked(_ state: State) {
        unasked.store(state.byInode.count - state.asked, ordering: .relaxed)
    }
}
