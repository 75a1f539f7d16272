import Foundation
import Synchronization

/// The descriptor of one staging file, open only while the file is written or read. A
/// sealed version waits in the upload queue untouched, for as long as Dropbox takes: out of
/// reach, or with a stream of files ahead of it, thousands wait. Each kept its file open, and
/// a CI run whose uploads fell behind ran out of descriptors (`Too many open files`), its
/// writes failed with EIO and its uploads stopped (no socket either). So a sealed file's
/// descriptor closes once nobody uses it, and opens again by path when somebody does.
///
/// The path holds the same file for as long as it is needed (a staging file is renamed only
/// by `pin`'s callers, after pinning); a reopen checks that it found the same inode all the
/// same, and fails rather than read another file's bytes.
///
/// Lock: a leaf. `StagedFile` takes it under its own, never the other way round.
final class StagingDescriptor: Sendable {
    private struct State {
        var fd: Int32 = -1
        /// The file, once made (or found): `fd`, when closed, can be opened again.
        var identity: FileIdentity?
        /// Callers inside `use` now: the descriptor stays open until the last leaves.
        var users = 0
        /// The bytes no longer change (sealed): close when nobody uses the descriptor.
        var closesWhenIdle = false
        /// The file is leaving, or left, its path: open until the end.
        var pinned = false
    }

    private let state = Mutex(State())

    /// Whether the staging file was made.
    var exists: Bool { state.withLock { $0.identity != nil } }

    /// Takes `fd`, the staging file just made or opened, as the file's descriptor.
    func adopt(_ fd: Int32) {
        let identity = FileIdentity(fd: fd) ?? FileIdentity(device: 0, inode: 0)
        state.withLock { state in
            state.fd = fd
            state.identity = identity
            closeIfIdle(&state)
        }
    }

    /// Runs `body` with the file's descriptor, open at least until it returns.
    func use<T>(_ path: String, _ body: (Int32) throws -> T) throws -> T {
        let fd = try state.withLock { state in
            if state.fd < 0 { state.fd = try reopen(path, state) }
            state.users += 1
            return state.fd
        }
        defer {
            state.withLock { state in
                state.users -= 1
                closeIfIdle(&state)
            }
        }
        return try body(fd)
    }

    /// Sealed (true): the descriptor closes whenever nobody uses it. Unsealed (false): it
    /// stays open once opened, as writes come.
    func closeWhenIdle(_ closes: Bool) {
        state.withLock { state in
            state.closesWhenIdle = closes
            closeIfIdle(&state)
        }
    }

    /// Opens the descriptor for good, before the file leaves its path (set aside, given to
    /// the cache, deleted): readers go on through it.
    func pin(_ path: String) throws {
        try state.withLock { state in
            guard state.identity != nil else { return }
            if state.fd < 0 { state.fd = try reopen(path, state) }
            state.pinned = true
        }
    }

    /// The file at the end of its life: its descriptor if open (the caller closes it), and
    /// what it is, to be found again by path; nil if it was never made.
    func last() -> (fd: Int32?, identity: FileIdentity)? {
        state.withLock { state in
            guard let identity = state.identity else { return nil }
            return (state.fd >= 0 ? state.fd : nil, identity)
        }
    }

    private func closeIfIdle(_ state: inout State) {
        guard state.closesWhenIdle, !state.pinned, state.users == 0, state.fd >= 0 else { return }
        close(state.fd)
        state.fd = -1
    }

    private func reopen(_ path: String, _ state: State) throws -> Int32 {
        guard let identity = state.identity else { throw FSError.io("staging file \(path): never made") }
        let fd = identity.open(path)
        guard fd >= 0 else { throw StagedFile.error("reopen", path) }
        return fd
    }
}

/// Which file a path names (device and inode): the same one, found again by path.
struct FileIdentity: Sendable, Equatable {
    var device: UInt64
    var inode: UInt64

    init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }

    init?(fd: Int32) {
        var info = stat()
        guard fstat(fd, &info) == 0 else { return nil }
        self.init(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        self.init(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// Opens `path` for reading and writing if it still names this file; -1 otherwise
    /// (errno: ENOENT, or ESTALE when another file is there).
    func open(_ path: String) -> Int32 {
        let fd = Glibc.open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { return -1 }
        guard FileIdentity(fd: fd) == self else {
            close(fd)
            errno = ESTALE
            return -1
        }
        return fd
    }
}
