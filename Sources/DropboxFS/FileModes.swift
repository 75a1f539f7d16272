import Foundation

/// What a path keeps here that Dropbox does not: its permission bits, the owner and group
/// a chown gave it (nil: the mount's, `uid=` and `gid=`), and its `user.*` extended
/// attributes (`UserAttributes`).
struct KeptAttributes: Equatable, Sendable {
    var mode: UInt32
    var uid: UInt32? = nil
    var gid: UInt32? = nil
    var user: [String: [UInt8]] = [:]
}

/// What a path kept, taken while the path is away (`FileModes.removeElsewhere`): `below` is
/// the rest of its key under the path taken ("" for the path itself).
struct TakenMode: Sendable {
    var below: String
    var kept: KeptAttributes
}

/// Who made a call: the uid and gid the kernel passed with it.
public typealias Caller = (uid: UInt32, gid: UInt32)

/// Permission bits this mount was asked for: by chmod, or by a create or mkdir whose mode
/// differs from the default; and owners given by chown. Dropbox keeps no modes, so without
/// them `chmod +x script` followed by `./script` failed (`default_permissions` has the kernel
/// check the shown mode), and `chmod 600` made nothing private; nor owners, so `chown`,
/// `cp -a`, `rsync -a` and `tar xp` as root changed nothing that `stat` showed, where a disk
/// shows the owners they set.
///
/// They are this machine's: kept in the cache store by path key, moved by the renames made
/// here and dropped by the removals made here; another client's move takes them along, its
/// removal drops them (`DropboxFileSystem.modesFollow`). Other clients never see them. An entry
/// exists only where the mode differs from the default (`0o666` or `0o777` minus the
/// mount's `umask=`) or the owner or group from the mount's, so `cp -a` and `tar x` of
/// ordinary trees by the mounting user add none.
///
/// Lock: `lock` guards `modes` and is held across the store's write, so the store and the
/// memory never disagree about an order of changes. The store never calls back here.
final class FileModes: @unchecked Sendable {
    private let lock = NSLock()
    private var modes: [String: KeptAttributes]
    /// The keys of `modes` in order, so that the ones below a folder are found alone.
    private var ordered: SortedPaths
    /// Keys looked at to find those below a folder (`keysExamined`).
    private var examined = 0
    /// Paths of new files not sealed yet whose kept mode is in memory alone, each with what
    /// the store holds for it: `persist` writes it when the file's first version is sealed.
    /// Until then a crash of the daemon loses the file (nothing of it is queued), so its mode
    /// need not outlive one; `tar x` as root creates each file 0600 and sets 0644 before
    /// closing it, and wrote the store twice a file for that (6 % of the daemon's CPU in a profile).
    private var unsaved: [String: KeptAttributes?] = [:]
    /// Modes and owners of files whose name went (unlinked, or replaced by a rename) while
    /// the kernel holds them still, by inode: fstat of a descriptor open on one shows them,
    /// fchmod and fchown change them. In memory alone: such a file does not outlive the mount.
    private var detached: [UInt64: KeptAttributes] = [:]
    private let store: MetadataStore
    private let umask: UInt32
    /// The owner and group shown where a chown gave none (`uid=`, `gid=`).
    private let owner: (uid: UInt32, gid: UInt32)
    /// How many of `modes` have a set-user-ID or set-group-ID bit: every write by a user
    /// other than root asks (`keepsSetIDBits`), and nearly always none has.
    private var setIDModes = 0

    static let permissionBits: UInt32 = 0o7777
    /// Who runs the mount.
    static let mountingUser = getuid()
    static let setIDBits: UInt32 = 0o6000

    init(store: MetadataStore, umask: UInt32, uid: UInt32, gid: UInt32) throws {
        self.store = store
        self.umask = umask
        self.owner = (uid, gid)
        self.modes = try store.keptAttributes()
        self.ordered = SortedPaths(modes.keys)
        self.setIDModes = modes.values.filter { $0.mode & Self.setIDBits != 0 }.count
    }

    /// The mode, owner and group shown for a node; `attached`: whether its inode still has its path.
    func shown(of pathLower: String, inode: UInt64, attached: @autoclosure () -> Bool, isFolder: Bool) -> (mode: UInt32, uid: UInt32, gid: UInt32) {
        let kept = kept(of: pathLower, inode: inode, attached: attached(), isFolder: isFolder)
        return (kept.mode, kept.uid ?? owner.uid, kept.gid ?? owner.gid)
    }

    /// The `user.*` extended attributes of a node (`shown`'s arguments).
    func userAttributes(of pathLower: String, inode: UInt64, attached: @autoclosure () -> Bool) -> [String: [UInt8]] {
        kept(of: pathLower, inode: inode, attached: attached(), isFolder: false).user
    }

    /// What a node keeps: its inode's while it is detached, else its path's.
    private func kept(of pathLower: String, inode: UInt64, attached: @autoclosure () -> Bool, isFolder: Bool) -> KeptAttributes {
        let (ofInode, atPath) = lock.withLock { (detached.isEmpty ? nil : detached[inode], modes.isEmpty ? nil : modes[pathLower]) }
        return ofInode.flatMap { attached() ? nil : $0 } ?? atPath ?? defaults(isFolder: isFolder)
    }

    /// setxattr or removexattr of a `user.*` attribute (`change` edits them, throwing what
    /// the call fails with, having changed nothing). Kept as a mode is: by path, in the store
    /// before this returns (a new file's once it is sealed, `persist`); a detached node's
    /// (`attached` false) by inode, in memory.
    func editUserAttributes(_ pathLower: String, inode: UInt64, attached: Bool, isFolder: Bool,
                            _ change: (inout [String: [UInt8]]) throws -> Void) throws {
        guard attached else {
            return try lock.withLock {
                var kept = detached[inode] ?? modes[pathLower] ?? defaults(isFolder: isFolder)
                try change(&kept.user)
                detached[inode] = kept
            }
        }
        try edit(pathLower, isFolder: isFolder, untilSealed: false) { try change(&$0.user) }
    }

    /// The name of `inode` is going (unlink, or a rename over it): it keeps the mode it
    /// showed for as long as the kernel holds it. Call before the name's mode is dropped.
    /// (The default too: another file may take the path and its mode.)
    func detach(_ pathLower: String, inode: UInt64?, isFolder: Bool) {
        guard let inode else { return }
        lock.withLock { detached[inode] = modes[pathLower] ?? defaults(isFolder: isFolder) }
    }

    /// Another client removed a path: whatever at or below it keeps a mode and is still held
    /// by the kernel (`inodeOf` finds its inode) keeps that mode for its inode, as `detach`
    /// does for a removal here, and the path's kept modes go. An open folder deleted elsewhere
    /// showed the default mode in fstat. Returns what went, by path below `pathLower`, for
    /// `restore` where the entry arrives, should the removal be half of a move.
    @discardableResult
    func removeElsewhere(_ pathLower: String, isFolder: Bool, inodeOf: (String) -> UInt64?) -> [TakenMode] {
        let kept = keepHeld(atOrUnder: pathLower, isFolder: isFolder, inodeOf: inodeOf)
        remove(pathLower, isFolder: isFolder)
        return kept.map { key, attributes in TakenMode(below: String(key.dropFirst(pathLower.count)), kept: attributes) }
    }

    /// Another client moved a path: its kept modes, and those below it, go to `target`,
    /// and whatever of them the kernel still holds at the old path (`inodeOf`) keeps its mode
    /// for its inode, as for `removeElsewhere`: the mount gives the entry a new inode at its
    /// new name, and the one held (a descriptor open on a folder moved elsewhere) showed the
    /// default mode and owner in fstat.
    func moveElsewhere(from source: String, to target: String, isFolder: Bool, inodeOf: (String) -> UInt64?) {
        keepHeld(atOrUnder: source, isFolder: isFolder, inodeOf: inodeOf)
        move(from: source, to: target, isFolder: isFolder)
    }

    /// Keeps, by inode, the modes at and below a path that the kernel holds there still;
    /// returns every mode kept at and below it, by path.
    @discardableResult
    private func keepHeld(atOrUnder pathLower: String, isFolder: Bool, inodeOf: (String) -> UInt64?) -> [(String, KeptAttributes)] {
        let kept = lock.withLock { keys(atOrUnder: pathLower, isFolder: isFolder).map { ($0, modes[$0]!) } }
        // Inodes looked up with no lock of ours held: the inode table has its own.
        let held = kept.compactMap { key, attributes in inodeOf(key).map { ($0, attributes) } }
        if !held.isEmpty { lock.withLock { for (inode, attributes) in held { detached[inode] = attributes } } }
        return kept
    }

    /// What `removeElsewhere` took, kept at and below `target`, where it arrived: what was kept
    /// there goes, as for a move.
    func restore(_ taken: [TakenMode], at target: String, isFolder: Bool) {
        guard !taken.isEmpty else { return }
        lock.withLock {
            saveUnsavedLocked()
            let replaced = modes.isEmpty ? [] : keys(atOrUnder: target, isFolder: isFolder)
            applyLocked(removing: replaced, setting: taken.map { (path: target + $0.below, kept: $0.kept) })
        }
    }

    /// fchmod of a detached file.
    func setDetached(_ inode: UInt64, isFolder: Bool, to mode: UInt32) {
        lock.withLock { detached[inode, default: defaults(isFolder: isFolder)].mode = mode & Self.permissionBits }
    }

    /// fchown of a detached file (nil: unchanged).
    func setDetachedOwner(_ inode: UInt64, isFolder: Bool, uid: UInt32?, gid: UInt32?) {
        lock.withLock {
            if let uid { detached[inode, default: defaults(isFolder: isFolder)].uid = uid }
            if let gid { detached[inode, default: defaults(isFolder: isFolder)].gid = gid }
        }
    }

    /// The kernel let go of an inode.
    func forget(_ inode: UInt64) {
        lock.withLock { if !detached.isEmpty { detached[inode] = nil } }
    }

    /// Keys looked at so far to find those below a folder, for tests to count.
    var keysExamined: Int { lock.withLock { examined } }

    var keepsAny: Bool { lock.withLock { !modes.isEmpty } }

    /// Whether any file may show a set-user-ID or set-group-ID bit (the default modes have
    /// none): one kept by name, or by the inode of a file whose name went.
    var keepsSetIDBits: Bool {
        lock.withLock { setIDModes > 0 || detached.values.contains { $0.mode & Self.setIDBits != 0 } }
    }

    /// Whether a mode is kept at a path, or below it for a folder.
    func keeps(atOrUnder pathLower: String, isFolder: Bool) -> Bool {
        lock.withLock { !modes.isEmpty && !keys(atOrUnder: pathLower, isFolder: isFolder).isEmpty }
    }

    func defaultMode(isFolder: Bool) -> UInt32 { (isFolder ? 0o777 : 0o666) & ~umask }

    /// What a path shows when nothing is kept for it.
    private func defaults(isFolder: Bool) -> KeptAttributes { KeptAttributes(mode: defaultMode(isFolder: isFolder)) }

    /// chmod. Fails, having changed nothing, when the store cannot keep it (a full disk). The
    /// mode of a new file not sealed yet is kept in memory until it is (`unsaved`).
    func set(_ pathLower: String, isFolder: Bool, to mode: UInt32) throws {
        try edit(pathLower, isFolder: isFolder, untilSealed: false) { $0.mode = mode & Self.permissionBits }
    }

    /// chown (nil: unchanged, as `chown -1`). Fails, having changed nothing, when the store
    /// cannot keep it.
    func setOwner(_ pathLower: String, isFolder: Bool, uid: UInt32?, gid: UInt32?) throws {
        try edit(pathLower, isFolder: isFolder, untilSealed: false) { kept in
            if let uid { kept.uid = uid }
            if let gid { kept.gid = gid }
        }
    }

    /// Changes what a path keeps (starting from the defaults); nothing is kept where the
    /// result is the defaults.
    private func edit(_ pathLower: String, isFolder: Bool, untilSealed: Bool, _ apply: (inout KeptAttributes) throws -> Void) throws {
        try lock.withLock {
            var attributes = modes[pathLower] ?? defaults(isFolder: isFolder)
            try apply(&attributes)
            if attributes.uid == owner.uid { attributes.uid = nil }
            if attributes.gid == owner.gid { attributes.gid = nil }
            let kept = attributes == defaults(isFolder: isFolder) ? nil : attributes
            guard modes[pathLower] != kept else { return }
            FuseLog.trace("modes: \(pathLower) \(kept.map { String($0.mode, radix: 8) } ?? "default")\(untilSealed ? " until sealed" : "")")
            if unsaved.index(forKey: pathLower) == nil {  // else it stays in memory until its seal
                if untilSealed { unsaved[pathLower] = .some(modes[pathLower]) } else { try write([(pathLower, kept)]) }
            }
            keep(pathLower, kept)
        }
    }

    /// A file or folder made here with `requested` (umask applied by the kernel): the mount's
    /// `umask=` applies on top, as a second umask. Whatever the path kept before is replaced.
    /// A folder's goes to the store now (it is queued to Dropbox at once); a file's when the
    /// file is sealed (`persist`). Made by another user than root and than the one running
    /// the mount (`allow_other`), it is theirs, with their group, as on a disk: shown as the
    /// mount's, a file `nobody` wrote in a shared folder could not be written by it again.
    /// Root's and the mount user's show the mount's owner, `uid=` and `gid=` (that is what
    /// those options are for). In a set-group-ID `folder` (its path and inode), what is made
    /// takes the folder's group, and a folder the bit too, as on a disk (the kernel leaves
    /// both to the filesystem: a shared project folder's group was lost on what was made in it).
    func created(_ pathLower: String, isFolder: Bool, requested: UInt32?, by creator: Caller? = nil, in folder: (path: String, inode: UInt64)? = nil) {
        let mode = requested.map { $0 & Self.permissionBits & ~umask } ?? defaultMode(isFolder: isFolder)
        var made = KeptAttributes(mode: mode)
        if let creator, creator.uid != 0, creator.uid != Self.mountingUser {
            made.uid = creator.uid
            made.gid = creator.gid
        }
        if let folder {
            let shown = shown(of: folder.path, inode: folder.inode, attached: true, isFolder: true)
            if shown.mode & UInt32(S_ISGID) != 0 {
                made.gid = shown.gid
                if isFolder { made.mode |= UInt32(S_ISGID) }
            }
        }
        do {
            try edit(pathLower, isFolder: isFolder, untilSealed: !isFolder) { $0 = made }
        } catch {
            FuseLog.error("mode of \(pathLower) not kept: \(error)")
        }
    }

    /// The file at `pathLower` is being sealed (its close, fsync): its mode, if kept in memory
    /// alone, goes to the store first, so that a queued file never comes back from a crash
    /// without it (`chmod 600` before the close of a secret).
    func persist(_ pathLower: String) {
        lock.withLock {
            guard !unsaved.isEmpty, let stored = unsaved.removeValue(forKey: pathLower) else { return }
            let kept = modes[pathLower]
            guard kept != stored else { return }
            do { try write([(pathLower, kept)]) } catch { FuseLog.error("mode of \(pathLower) not kept: \(error)") }
        }
    }

    /// A rename made here: the modes at and below `source` go to `target`, replacing those
    /// at and below it (a replaced target's mode goes with it).
    func move(from source: String, to target: String, isFolder: Bool) {
        guard source != target else { return }
        change {
            let replaced = keys(atOrUnder: target, isFolder: isFolder)
            let moved = keys(atOrUnder: source, isFolder: isFolder)
            guard !replaced.isEmpty || !moved.isEmpty else { return nil }
            let setting = moved.map { (path: target + $0.dropFirst(source.count), kept: modes[$0]!) }
            return (removing: replaced + moved, setting: setting)
        }
    }

    /// An unlink or rmdir made here: the path's mode, and any kept below it, go.
    func remove(_ pathLower: String, isFolder: Bool) {
        change {
            let removed = keys(atOrUnder: pathLower, isFolder: isFolder)
            return removed.isEmpty ? nil : (removing: removed, setting: [])
        }
    }

    /// The kept keys at a path, and below it for a folder: found without walking every kept
    /// mode (`rm -r` removes each file and folder, and each removal asks). Call with `lock` held.
    private func keys(atOrUnder pathLower: String, isFolder: Bool) -> [String] {
        // The key as kept: a canonically equivalent name finds it, and the store has its bytes.
        let at = modes.index(forKey: pathLower).map { [modes.keys[$0]] } ?? []
        guard isFolder else { return at }
        let below = ordered.keys(below: pathLower)
        examined += below.examined
        return at + below.keys
    }

    /// Sets or drops what a path keeps in memory. Call with `lock` held.
    private func keep(_ pathLower: String, _ kept: KeptAttributes?) {
        let old = modes[pathLower]
        switch (old, kept) {
        case (nil, .some): ordered.insert(pathLower)
        case (.some, nil): ordered.remove(pathLower)
        default: break
        }
        if let old, old.mode & Self.setIDBits != 0 { setIDModes -= 1 }
        if let kept, kept.mode & Self.setIDBits != 0 { setIDModes += 1 }
        modes[pathLower] = kept
    }

    /// Applies a change worked out from the kept modes (nil: nothing to change) to the
    /// store, then to memory. A store that cannot keep it (a full disk) is logged, and the
    /// memory follows the rename or removal anyway, as it has happened: until the next
    /// mount, which shows what the store kept. The change is worked out from memory, so the
    /// modes kept in memory alone (`unsaved`) go to the store first.
    private func change(_ work: () -> (removing: [String], setting: [(path: String, kept: KeptAttributes)])?) {
        lock.withLock {
            saveUnsavedLocked()
            guard !modes.isEmpty, let (removing, setting) = work() else { return }
            applyLocked(removing: removing, setting: setting)
        }
    }

    /// Drops `removing`, then keeps `setting`, in the store and in memory. Call with `lock` held.
    private func applyLocked(removing: [String], setting: [(path: String, kept: KeptAttributes)]) {
        FuseLog.trace("modes: removing \(removing), setting \(setting.map { "\($0.path) \(String($0.kept.mode, radix: 8))" })")
        do {
            try store.replaceKept(removing: removing, setting: setting)
        } catch {
            FuseLog.error("modes of \(removing.first ?? setting.first?.path ?? "") not kept: \(error)")
        }
        for path in removing { keep(path, nil) }
        for (path, kept) in setting { keep(path, kept) }
    }

    /// Writes every mode kept in memory alone to the store. Call with `lock` held.
    private func saveUnsavedLocked() {
        guard !unsaved.isEmpty else { return }
        let saving = unsaved.filter { path, stored in modes[path] != stored }.map { path, _ in (path: path, kept: modes[path]) }
        unsaved.removeAll()
        guard !saving.isEmpty else { return }
        do { try write(saving) } catch { FuseLog.error("modes of \(saving[0].path) not kept: \(error)") }
    }

    /// Gives each path what it keeps in the store (nil: nothing), in one transaction.
    private func write(_ values: [(path: String, kept: KeptAttributes?)]) throws {
        try store.replaceKept(removing: values.filter { $0.kept == nil }.map(\.path),
                              setting: values.compactMap { value in value.kept.map { (path: value.path, kept: $0) } })
    }
}
