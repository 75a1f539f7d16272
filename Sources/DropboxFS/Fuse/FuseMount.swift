import CFuseShim
import Foundation
import Synchronization

/// The FUSE adapter: a thin layer that turns kernel requests into calls on
/// `DropboxFileSystem` and answers each request exactly once. Operations that may need the
/// network run in a task and answer when it completes, from whatever thread that is (libfuse
/// allows it); borrowed arguments (names, `fuse_file_info`) are copied before the callback
/// returns. Kernel cache invalidation is only ever sent from the change watcher's task,
/// never from an operation's path or under a lock.
public final class FuseMount: @unchecked Sendable {
    public let fs: DropboxFileSystem
    /// How long the kernel may trust an entry or attributes before asking again. Remote
    /// changes are also pushed by invalidation; this bounds what invalidation misses
    /// (e.g. a differently cased name the kernel cached).
    let cacheTimeout = 1.0
    private var session: OpaquePointer?
    let directories = Mutex<(next: UInt64, open: [UInt64: [(UInt64, Node)]])>((1, [:]))

    public init(fs: DropboxFileSystem) { self.fs = fs }

    /// Creates the session and mounts it (fails if the mountpoint cannot be used).
    public func mount(at mountpoint: String, options: [String]) throws {
        var ops = FuseOperations.table()
        let arguments = ["dropboxfs"] + (options.isEmpty ? [] : ["-o", options.joined(separator: ",")])
        var argv = arguments.map { strdup($0) }
        defer { argv.forEach { free($0) } }
        let userdata = Unmanaged.passUnretained(self).toOpaque()
        guard let created = cfuse_session_new(Int32(argv.count), &argv, &ops, userdata) else {
            throw FSError.io("cannot create the FUSE session (bad mount options: \(options.joined(separator: ",")))")
        }
        guard fuse_session_mount(created, mountpoint) == 0 else {
            fuse_session_destroy(created)
            throw FSError.io("cannot mount on \(mountpoint) (is it an existing, empty, unused directory? is /dev/fuse usable?)")
        }
        _ = fuse_set_signal_handlers(created)
        session = created
    }

    /// Serves requests until unmounted or signalled (blocks: run it on its own thread), then
    /// unmounts and frees the session.
    public func serve(threads: UInt32 = 16) -> Int32 {
        guard let session else { return -1 }
        let result = cfuse_session_loop(session, threads)
        fuse_remove_signal_handlers(session)
        fuse_session_unmount(session)
        fuse_session_destroy(session)
        self.session = nil
        return result
    }

    /// Asks the loop to stop (as SIGTERM does).
    public func stop() {
        if let session { fuse_session_exit(session) }
    }

    // MARK: Invalidation (change watcher only)

    public func invalidate(_ changes: [StoreChange], everything: Bool) {
        guard let session else { return }
        if everything {
            _ = fuse_lowlevel_notify_inval_inode(session, fuse_ino_t(InodeTable.root), 0, 0)
            return
        }
        for change in changes {
            let parent = change.pathLower.isEmpty ? nil : fs.inodes.existing(Node.parent(of: change.pathLower))
            if let parent, change.old == nil || change.new == nil || change.old?.name != change.new?.name {
                for name in Set([change.old?.name, change.new?.name].compactMap { $0 }) {
                    _ = name.withCString { fuse_lowlevel_notify_inval_entry(session, fuse_ino_t(parent), $0, strlen($0)) }
                }
            }
            if let inode = fs.inodes.existing(change.pathLower) {
                if change.old?.contentHash != change.new?.contentHash { fs.forgetKeptPages(inode) }
                _ = fuse_lowlevel_notify_inval_inode(session, fuse_ino_t(inode), 0, 0)
            }
        }
    }

    static func from(_ request: fuse_req_t?) -> FuseMount {
        Unmanaged<FuseMount>.fromOpaque(fuse_req_userdata(request)!).takeUnretainedValue()
    }
}

/// A request handle that may be answered from another thread.
struct Request: @unchecked Sendable {
    let raw: fuse_req_t

    func fail(_ error: any Error) {
        let fsError = ErrnoMapping.fsError(error)
        if case .io(let detail) = fsError { FuseLog.error(detail) }
        fuse_reply_err(raw, ErrnoMapping.errno(fsError))
    }

    func ok() { fuse_reply_err(raw, 0) }
    func fail(_ errno: Int32) { fuse_reply_err(raw, errno) }
}

/// Errors that had to become EIO: logged once each, with their request id, on stderr (the
/// daemon's log file).
enum FuseLog {
    static func error(_ message: String) {
        FileHandle.standardError.write(Data("dropboxfs: error: \(message)\n".utf8))
    }
}
