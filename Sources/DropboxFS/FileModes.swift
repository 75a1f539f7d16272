import Foundation

/// Permission bits this mount was asked for: by chmod, or by a create or mkdir whose mode
/// differs from the default. Dropbox keeps no modes, so without them `chmod +x script`
/// followed by `./script` failed (`default_permissions` has the kernel check the shown
/// mode), and `chmod 600` made nothing private.
///
/// They are this machine's: kept in the cache store by path key, moved by the renames made
/// here and dropped by the removals made here; another client's move takes them along, its
/// removal drops them (`DropboxFileSystem.modesFollow`). Other clients never see them. An entry
/// exists only where the mode differs from the default (`0o666` or `0o777` minus the
/// mount's `umask=`), so `cp -a` and `tar x` of ordinary trees add none.
///
/// Lock: `lock` guards `modes` and is held across the store's write, so the store and the
/// memory never disagree about an order of changes. The store never calls back here.
final class FileModes: @unchecked Sendable {
    private let lock = NSLock()
    private var modes: [String: UInt32]
    private let store: MetadataStore
    private let umask: UInt32

    static let permissionBits: UInt32 = 0o7777

    init(store: MetadataStore, umask: UInt32) throws {
        self.store = store
        self.umask = umask
        self.modes = try store.modes()
    }

    /// The mode shown for a node.
    func mode(of pathLower: String, isFolder: Bool) -> UInt32 {
        let kept = lock.withLock { modes.isEmpty ? nil : modes[pathLower] }
        return kept ?? defaultMode(isFolder: isFolder)
    }

    var keepsAny: Bool { lock.withLock { !modes.isEmpty } }

    /// Whether a mode is kept at or below a path.
    func keeps(atOrUnder pathLower: String) -> Bool {
        lock.withLock { !modes.isEmpty && modes.keys.contains { Node.isAt($0, orUnder: pathLower) } }
    }

    func defaultMode(isFolder: Bool) -> UInt32 { (isFolder ? 0o777 : 0o666) & ~umask }

    /// chmod. Fails, having changed nothing, when the store cannot keep it (a full disk).
    func set(_ pathLower: String, isFolder: Bool, to mode: UInt32) throws {
        let mode = mode & Self.permissionBits
        let kept: UInt32? = mode == defaultMode(isFolder: isFolder) ? nil : mode
        try lock.withLock {
            guard modes[pathLower] != kept else { return }
            try store.replaceModes(removing: kept == nil ? [pathLower] : [], setting: kept.map { [(pathLower, $0)] } ?? [])
            modes[pathLower] = kept
        }
    }

    /// A file or folder made here with `requested` (umask applied by the kernel): the mount's
    /// `umask=` applies on top, as a second umask. Whatever the path kept before is replaced.
    func created(_ pathLower: String, isFolder: Bool, requested: UInt32?) {
        let mode = requested.map { $0 & Self.permissionBits & ~umask } ?? defaultMode(isFolder: isFolder)
        do {
            try set(pathLower, isFolder: isFolder, to: mode)
        } catch {
            FuseLog.error("mode of \(pathLower) not kept: \(error)")
        }
    }

    /// A rename made here: the modes at and below `source` go to `target`, replacing those
    /// at and below it (a replaced target's mode goes with it).
    func move(from source: String, to target: String) {
        guard source != target else { return }
        change { modes in
            let replaced = modes.keys.filter { Node.isAt($0, orUnder: target) }
            let moved = modes.filter { Node.isAt($0.key, orUnder: source) }
            guard !replaced.isEmpty || !moved.isEmpty else { return nil }
            let setting = moved.map { (path: target + $0.key.dropFirst(source.count), mode: $0.value) }
            return (removing: replaced + moved.keys, setting: setting)
        }
    }

    /// An unlink or rmdir made here: the path's mode, and any kept below it, go.
    func remove(_ pathLower: String) {
        change { modes in
            let removed = modes.keys.filter { Node.isAt($0, orUnder: pathLower) }
            return removed.isEmpty ? nil : (removing: removed, setting: [])
        }
    }

    /// Applies a change worked out from the kept modes (nil: nothing to change) to the
    /// store, then to memory. A store that cannot keep it (a full disk) is logged, and the
    /// memory follows the rename or removal anyway, as it has happened: until the next
    /// mount, which shows what the store kept.
    private func change(_ work: ([String: UInt32]) -> (removing: [String], setting: [(path: String, mode: UInt32)])?) {
        lock.withLock {
            guard !modes.isEmpty, let (removing, setting) = work(modes) else { return }
            do {
                try store.replaceModes(removing: removing, setting: setting)
            } catch {
                FuseLog.error("modes of \(removing.first ?? "") not kept: \(error)")
            }
            for path in removing { modes[path] = nil }
            for (path, mode) in setting { modes[path] = mode }
        }
    }
}
