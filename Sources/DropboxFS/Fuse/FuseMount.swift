import CFuseShim
import DropboxAPI
import Foundation
import Synchronization

/// The FUSE adapter: a thin layer that turns kernel requests into calls on
/// `DropboxFileSystem` and answers each request exactly once. Operations that may need the
/// network run in a task and answer when it completes, from whatever thread that is (libfuse
/// allows it); borrowed arguments (names, `fuse_file_info`) are copied before the callback
/// returns. Kernel cache invalidation is only ever sent from the invalidation queue (the
/// change watcher's, and the drop of old inodes), never from an operation's path or under
/// a lock.
///
/// Lifecycle: `mount` → `serve` (the loop, on its own thread) → the loop ends on unmount or
/// `stop` → the kernel mount goes, answers still pending are awaited, the invalidation queue
/// drains, and only then is the session freed.
public final class FuseMount: @unchecked Sendable {
    public let fs: DropboxFileSystem
    /// How long the kernel may trust an entry or attributes before asking again. Remote
    /// changes are also pushed by invalidation; this bounds what invalidation misses
    /// (e.g. a differently cased name the kernel cached).
    let cacheTimeout = 1.0
    /// Guards `session` against teardown while an invalidation uses it.
    private let lock = NSLock()
    private var session: OpaquePointer?
    private var mountpoint = ""
    /// Requests being answered from tasks: teardown waits for them.
    private let pending = Atomic<Int>(0)
    /// Invalidations run here, on a thread of their own: they may wait for the kernel, which
    /// may wait for a request only a task can answer — never block Swift's task threads, and
    /// never hold a lock (a request's path may need it: libfuse's rule for notify_*).
    private let invalidations = DispatchQueue(label: "dropboxfs.invalidate")
    /// False once teardown begins: queued invalidations are dropped from then on, and
    /// teardown drains the queue before the session is freed.
    private let notifying = Atomic<Bool>(true)
    /// A drop of old inodes is queued or running (`dropOldInodes`).
    private let dropping = Atomic<Bool>(false)
    /// Kernel locks held for requests answered from tasks; invalidations needing one wait
    /// in `holds` until it is released (see `KernelLockHolds`).
    private let holds = KernelLockHolds()
    /// How many invalidations wait for a kernel lock (the status report's).
    public var invalidationsHeld: Int { holds.invalidationsWaiting }
    /// How many kernel locks requests being answered hold (the status report's).
    public var kernelLocksHeld: Int { holds.locksHeld }
    let directories = Mutex<(next: UInt64, open: [UInt64: OpenDirectory])>((1, [:]))

    public init(fs: DropboxFileSystem) { self.fs = fs }

    /// Throws, in libfuse's words, if it does not take these options (an unknown `-o` word):
    /// checked before anything else is tried, nothing mounted.
    public static func checkOptions(_ options: [String]) throws {
        var argv = arguments(options).map { strdup($0) }
        defer { argv.forEach { free($0) } }
        var message = [CChar](repeating: 0, count: 1024)
        guard cfuse_check_options(Int32(argv.count), &argv, &message, message.count) != 0 else { return }
        let said = String(cString: message).trimmingCharacters(in: .whitespacesAndNewlines)
        let reason = said.hasPrefix("fuse: ") ? String(said.dropFirst("fuse: ".count)) : said
        throw ClientError.local(reason.isEmpty ? "bad mount options: \(options.joined(separator: ","))" : reason)
    }

    private static func arguments(_ options: [String]) -> [String] {
        ["dropboxfs"] + (options.isEmpty ? [] : ["-o", options.joined(separator: ",")])
    }

    /// Creates the session and mounts it (fails if the mountpoint cannot be used).
    public func mount(at mountpoint: String, options: [String]) throws {
        var ops = FuseOperations.table()
        if fs.options.noExtendedAttributes {
            // Unimplemented (ENOSYS): the kernel remembers that and asks no more.
            ops.getxattr = nil
            ops.listxattr = nil
            ops.setxattr = nil
            ops.removexattr = nil
        }
        var argv = Self.arguments(options).map { strdup($0) }
        defer { argv.forEach { free($0) } }
        let userdata = Unmanaged.passUnretained(self).toOpaque()
        guard let created = cfuse_session_new(Int32(argv.count), &argv, &ops, userdata) else {
            throw ClientError.local("bad mount options: \(options.joined(separator: ","))")
        }
        guard fuse_session_mount(created, mountpoint) == 0 else {
            fuse_session_destroy(created)
            throw ClientError.local("cannot mount on \(mountpoint) (is it an existing, unused directory? is /dev/fuse usable?)")
        }
        // Without it the kernel clears set-ID bits itself, asking first before every write.
        if cfuse_take_setid_clearing(created) != 0 { FuseLog.error("the kernel keeps clearing set-ID bits itself (custom I/O refused)") }
        lock.withLock {
            session = created
            self.mountpoint = mountpoint
        }
    }

    /// Serves requests until unmounted or signalled (blocks: run it on its own thread), then
    /// unmounts and frees the session.
    public func serve(threads: UInt32 = 16) -> Int32 {
        guard let session = lock.withLock({ self.session }) else { return -1 }
        let result = cfuse_session_loop(session, threads)
        fuse_session_unmount(session)
        let deadline = Date().addingTimeInterval(10)
        while pending.load(ordering: .relaxed) > 0 && Date() < deadline { usleep(10_000) }
        notifying.store(false, ordering: .sequentiallyConsistent)
        invalidations.sync {}  // an invalidation under way ends (the kernel mount is gone)
        lock.withLock { self.session = nil }
        fuse_session_destroy(session)
        return result
    }

    /// True from `mount` until the session is torn down.
    public var isServing: Bool { lock.withLock { session != nil } }

    /// Ends the loop (for SIGTERM/SIGINT): marks the session done and detaches the mount, so
    /// workers blocked reading /dev/fuse wake up.
    public func stop() {
        let (session, mountpoint) = lock.withLock { (self.session, self.mountpoint) }
        guard let session else { return }
        fuse_session_exit(session)
        if umount2(mountpoint, Int32(MNT_DETACH)) != 0 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["fusermount3", "-u", "-z", mountpoint]
            try? process.run()
            process.waitUntilExit()
        }
    }

    /// Runs an operation's network-bound part in a task that answers `request` (a thrown
    /// error becomes its errno); teardown waits for it. `locks`: the kernel locks the
    /// request's call holds until it is answered (`KernelLockHolds`).
    func answerLater(_ request: Request, holding locks: [KernelLockHolds.Lock] = [], _ body: @escaping @Sendable () async throws -> Void) {
        pending.add(1, ordering: .relaxed)
        if !locks.isEmpty { holds.take(locks) }
        Task {
            do { try await body() } catch { request.fail(error) }
            if !locks.isEmpty { released(locks) }
            pending.subtract(1, ordering: .relaxed)
        }
    }

    /// Sends the invalidations that waited for `locks`, once no request holds them.
    private func released(_ locks: [KernelLockHolds.Lock]) {
        let free = holds.release(locks)
        guard !free.isEmpty, let session = lock.withLock({ self.session }).map(SessionPointer.init) else { return }
        invalidations.async { [self] in
            guard notifying.load(ordering: .sequentiallyConsistent) else { return }
            for lock in free {
                for invalidation in holds.takeWaiting(for: lock) { send(invalidation, to: session.raw) }
            }
        }
    }

    /// Sends an invalidation now, or keeps it while a request holds the kernel lock it needs
    /// (on the invalidation queue only). A file's attributes go at once even then: they take
    /// no lock, and reads overlapping one another may hold its pages for as long as a long
    /// read of the file lasts.
    private func deliver(_ invalidation: Invalidation, to session: OpaquePointer) {
        guard holds.keep(invalidation) else { return send(invalidation, to: session) }
        if case .inode(let inode, pages: true) = invalidation { send(.inode(inode, pages: false), to: session) }
    }

    /// `answerLater` for operations whose only answer is "done".
    func answerDone(_ request: Request, holding locks: [KernelLockHolds.Lock] = [], _ body: @escaping @Sendable () async throws -> Void) {
        answerLater(request, holding: locks) {
            try await body()
            request.ok()
        }
    }

    /// "Done" at once, on this thread, when `now` did the whole operation (it returns false,
    /// having changed nothing, when the operation needs Dropbox); else `later` in a task.
    /// The hop to Swift's threads and back cost about as much as a create's flush itself.
    func answerDone(_ request: Request, holding locks: [KernelLockHolds.Lock] = [], now: () throws -> Bool,
                    later: @escaping @Sendable () async throws -> Void) {
        do {
            if try now() { return request.ok() }
        } catch {
            return request.fail(error)
        }
        answerDone(request, holding: locks, later)
    }

    // MARK: Invalidation (from the invalidation queue only)

    /// Queues invalidations for changes made elsewhere (the change watcher leaves out the
    /// mount's own): the core decides now, in the watcher's order, what they do to its inodes
    /// and what the kernel must forget (`inodesAfterForeignChanges`); the kernel is told later,
    /// from the notifier's queue. The session is valid while `notifying` holds: teardown
    /// clears it, then waits for the queue, and only then frees the session.
    public func invalidate(_ changes: [StoreChange], everything: Bool) {
        let plan = fs.inodesAfterForeignChanges(changes, everything: everything)
        guard !plan.isEmpty, let session = lock.withLock({ self.session }).map(SessionPointer.init) else { return }
        invalidations.async { [self] in
            guard notifying.load(ordering: .sequentiallyConsistent) else { return }
            for invalidation in plan { deliver(invalidation, to: session.raw) }
        }
    }

    private struct SessionPointer: @unchecked Sendable { let raw: OpaquePointer }

    /// Called after entries were handed to the kernel: beyond `Options.inodeLimit` known
    /// inodes, asks the kernel to drop the longest-known files' entries (from the
    /// invalidation queue, as the watcher's invalidations). It forgets those inodes once
    /// unused, and their entries here go: a later lookup gives the file a new number.
    func dropOldInodesIfOver() {
        let limit = fs.options.inodeLimit
        guard fs.inodes.isOver(limit), !dropping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        guard let session = lock.withLock({ self.session }).map(SessionPointer.init) else {
            return dropping.store(false, ordering: .releasing)
        }
        invalidations.async { [self] in
            // Until nothing is over: entries keep coming while the kernel is told.
            while notifying.load(ordering: .sequentiallyConsistent) {
                let oldest = fs.inodes.oldest(over: limit)
                if oldest.isEmpty { break }
                var asked = 0
                for (inode, path) in oldest {
                    guard let entry = fs.droppableEntry(inode, path: path) else { continue }
                    deliver(.entry(parent: entry.parent, name: entry.name), to: session.raw)
                    asked += 1
                }
                FuseLog.trace("inodes: \(fs.inodes.count) known, the kernel asked to drop \(asked) of the \(oldest.count) oldest it holds")
            }
            dropping.store(false, ordering: .releasing)
            // Entries handed out after the last look, whose own check found this running.
            dropOldInodesIfOver()
        }
    }

    private func send(_ invalidation: Invalidation, to session: OpaquePointer) {
        switch invalidation {
        case .entry(let parent, let name):
            _ = name.withCString { fuse_lowlevel_notify_inval_entry(session, fuse_ino_t(parent), $0, strlen($0)) }
        case .inode(let inode, let pages):
            _ = fuse_lowlevel_notify_inval_inode(session, fuse_ino_t(inode), pages ? 0 : -1, 0)
        }
    }

    /// Tells the kernel at once that an inode's attributes changed, from the thread answering
    /// one of its requests: attributes only (no pages), which takes no lock the kernel may
    /// hold for that request. For set-ID bits cleared by a write or an open: the kernel keeps
    /// the mode it had cached until it times out, and a `stat` just after showed them still.
    func attributesChanged(_ inode: UInt64) {
        guard let session = lock.withLock({ self.session }) else { return }
        send(.inode(inode, pages: false), to: session)
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

    /// Answers a read with part of a file, spliced by the kernel; false if the file is gone
    /// (evicted in between), and nothing was answered.
    func replySpliced(from file: String, offset: Int64, length: Int) -> Bool {
        let fd = open(file, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        cfuse_reply_fd(raw, fd, off_t(offset), length)
        return true
    }

    func reply(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { fuse_reply_buf(raw, $0.baseAddress?.assumingMemoryBound(to: CChar.self), $0.count) }
    }
}

/// An open folder's handle: the snapshot its readdirs answer from (offsets are positions
/// in it), and what had changed when it was taken.
struct OpenDirectory {
    var children: [Node]
    var taken: SnapshotMarks
    /// Whether a readdir has answered from it: one from the start again is a `rewinddir`.
    var read = false
}

/// What had changed when a folder's snapshot was taken: the inode table's `namesGoneCount`,
/// when the folder's entries last changed here (`ChangeTimes.lastStatusChange`), and the
/// store's `writeCount`.
struct SnapshotMarks {
    let namesGone: UInt64
    let folderChanged: timespec?
    let storeWrites: Int64

    /// What changed between these marks and `now`'s.
    func changes(until now: SnapshotMarks) -> SnapshotChanges {
        SnapshotChanges(namesWent: namesGone != now.namesGone, storeWritten: storeWrites != now.storeWrites)
    }
}
