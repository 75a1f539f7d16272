import ArgumentParser
import DropboxAPI
import DropboxFS
import Foundation
import SQLiteStore
import Synchronization

/// The mounted filesystem's process: checks the account, opens the caches, catches up with
/// remote changes, mounts, then serves until unmounted or signalled (SIGTERM/SIGINT unmount
/// cleanly). In the background it reports "ready" (or why not) on its stdout, which the
/// `mount` command waits for, then writes its log to the cache directory.
struct MountDaemon {
    let command: MountCommand

    func run() async throws {
        let daemon = ProcessInfo.processInfo.environment["DROPBOXFS_DAEMON"] == "1"
        if daemon { setsid() }
        Heap.limitArenas()
        OpenFileLimit.raise()
        let mountpoint = command.mountpoint
        let prepared: Prepared
        do {
            prepared = try await prepare(mountpoint)
        } catch {
            let line = "mount \(mountpoint): \(describe(error))"
            if daemon { print(line) } else { FuseLog.write("dropboxfs: \(line)\n") }
            throw ExitCode(1)
        }
        // The status file is this daemon's before `mount` returns: a daemon killed at this
        // mountpoint left its own, and `status` (a test waiting for Dropbox to be back, say)
        // read that report of a mount online while this one was still offline.
        let status = StatusReporter(mountpoint: mountpoint, prepared: prepared)
        Self.reportReachability(prepared.client.reachability, prepared.fs, status)
        status.write()
        if daemon {
            print(prepared.offlineAtStart.map { "ready: " + $0 } ?? "ready")
            fflush(nil)
            // From now on stdout and stderr go to the log; never leave the readiness pipe open.
            var log = open(prepared.cacheRoot + "/dropboxfs.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
            if log < 0 { log = open("/dev/null", O_WRONLY | O_CLOEXEC) }
            if log >= 0 { dup2(log, STDOUT_FILENO); dup2(log, STDERR_FILENO); close(log) }
        }
        if !daemon, let note = prepared.offlineAtStart { FuseLog.write("dropboxfs: \(note)\n") }
        let stopNow = StopFlag()
        let signals = Self.stopOnSignals(prepared.mount, stopNow) { prepared.fs.keepFolderTimes() }
        defer { signals.forEach { $0.cancel() } }
        let watching = Task { await prepared.watcher.run() }
        let uploading = Task { await prepared.fs.uploader.run() }
        let pinning = Task { await prepared.fs.keepPinnedFilesDownloaded() }
        let reporting = Task { await status.run() }
        // Asked once now, the account's space answers `df`, and the `fstatfs` of each `rm -r`,
        // `find` or `du`, at once from then on, in an outage too (`DropboxFileSystem.spaceUsage`).
        Task { _ = try? await prepared.fs.spaceUsage() }
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
            let thread = Thread { continuation.resume(returning: prepared.mount.serve()) }
            thread.name = "dropboxfs-fuse"
            thread.start()
        }
        // Unmounted: what was written goes to Dropbox before the process ends, unless told
        // to stop now (SIGTERM, `unmount --no-wait`): the queue then waits for the next mount.
        var left: String?
        if !stopNow.isSet {
            status.write()  // `unmount` shows what is left from here: not a report up to 2 s old
            left = await prepared.fs.uploader.drain()
            if let left { FuseLog.write("dropboxfs: left for the next mount: \(left)\n") }
        }
        prepared.fs.keepFolderTimes()
        uploading.cancel()
        pinning.cancel()
        watching.cancel()
        reporting.cancel()
        await reporting.value
        // A waiting `unmount` reads the last report to say what is left, then removes it.
        if let left { status.write(leftForNextMount: left) } else { status.remove() }
        CacheOwner.forget(cacheRoot: prepared.cacheRoot)
        if result != 0 { throw ExitCode(1) }
    }

    /// SIGTERM, SIGINT and SIGHUP unmount and end the process cleanly (libfuse's own handlers
    /// only wake the loop's thread, and ours runs elsewhere), leaving queued uploads for the
    /// next mount. A signal during the final uploads (`unmount --no-wait` unmounts first, then
    /// signals) ends them: the queue is durable, and what `keep` keeps (the folders' times,
    /// held in memory) is kept first; a second signal ends the process at once.
    static func stopOnSignals(_ mount: FuseMount, _ stopNow: StopFlag, keep: @escaping @Sendable () -> Void) -> [any DispatchSourceSignal] {
        [SIGTERM, SIGINT, SIGHUP].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                if stopNow.isSet { exit(0) }
                stopNow.set()
                guard mount.isServing else {
                    keep()
                    exit(0)
                }
                mount.stop()
            }
            source.resume()
            return source
        }
    }

    /// The mountpoint is a directory, not mounted already; one a dead daemon left mounted is
    /// unmounted (recovered).
    static func checkMountpoint(_ mountpoint: String) throws {
        if MountTable.isMounted(mountpoint, type: "fuse.dropboxfs") {
            // A connection its dead daemon left open would keep the `stat` below waiting.
            OrphanedConnection.abortIfDaemonGone(mountpoint)
            var info = stat()
            guard stat(mountpoint, &info) != 0, errno == ENOTCONN else { throw ClientError.local("already mounted") }
            try Unmounter.unmount(mountpoint)  // left by a process that died: recover
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: mountpoint, isDirectory: &isDirectory) else { throw ClientError.local("no such directory") }
        guard isDirectory.boolValue else { throw ClientError.local("not a directory") }
    }

    struct Prepared: Sendable {
        let client: DropboxClient
        let account: KnownAccounts.Known
        /// The saved account's name the mount was given (nil: the default one, or the token in
        /// the environment): commands given a path inside the mount use the same credentials.
        let accountName: String?
        /// `MountRoot.Resolved.name`: which namespace the mount shows.
        let root: String
        let cacheRoot: String
        let cache: BlockCache
        let fs: DropboxFileSystem
        let mount: FuseMount
        let watcher: ChangeWatcher
        /// Why the mount started without Dropbox, said on the readiness line.
        let offlineAtStart: String?
    }

    /// The log says each switch between online and offline once, and the status file says it
    /// at once (not up to 2 s later); back online, what waited in the queues goes at once.
    static func reportReachability(_ reachability: Reachability, _ fs: DropboxFileSystem, _ status: StatusReporter) {
        reachability.onChange { state in
            defer { status.write() }
            switch state {
            case .offline(_, let reason):
                FuseLog.error("Dropbox is out of reach (\(reason)): serving from the cache; changes wait in the queue")
            case .online:
                FuseLog.error("Dropbox is reachable again: sending the \(fs.writeBack.pendingCount + fs.deletes.total + fs.folders.total + fs.moves.count) change(s) queued meanwhile")
                fs.sendQueuedNow()
            }
        }
    }

    private func prepare(_ mountpoint: String) async throws -> Prepared {
        let options = try MountOptions(command.options)
        // What is wrong here is said before Dropbox is tried (out of reach, it would be all
        // that was said).
        try FuseMount.checkOptions(options.fuse)
        try Self.checkMountpoint(mountpoint)
        let accountName = command.accountArgument ?? options.account
        var retry = RetryPolicy()
        if let seconds = options.requestTimeout { retry.stallTimeout = seconds }
        let accountClient = try AccountStore().client(account: accountName, apiURL: command.apiURL ?? options.apiURL, retry: retry)
        let base = command.cacheDir ?? options.cacheDir ?? Self.defaultCacheDirectory()
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let known = KnownAccounts(cacheBase: base)
        let key = KnownAccounts.key(api: accountClient.endpoints.api, accountName: accountName)
        // Fails here, before anything is mounted, on a bad token; out of reach, the account
        // is the one these credentials had last time, if its cache is there to serve.
        let account: KnownAccounts.Known
        var offline: String?
        do {
            let full = try await accountClient.rpc(Routes.getCurrentAccount, NoArgument())
            account = KnownAccounts.Known(accountID: full.accountId, email: full.email, rootInfo: full.rootInfo)
            try? known.record(key, account)
        } catch where ErrnoMapping.fsError(error) == .networkUnreachable {
            guard let remembered = known.lookup(key) else {
                throw ClientError.local("Dropbox is out of reach (\(error)), and there is no cache of this account to serve from an earlier mount")
            }
            account = remembered
            offline = "Dropbox is out of reach (\(error)): serving the cached view; changes wait in the queue until it is back"
        }

        // Which namespace the mount shows: every request carries it, and each has its own cache.
        let root = try MountRoot.resolve(options.root, info: account.rootInfo)
        let client = accountClient.withPathRoot(root.pathRoot)
        var fsOptions = options.fs
        fsOptions.protectedTop = root.protectsTop
        let cacheRoot = base + "/" + Self.sanitize(account.accountID) + root.cacheSuffix
        try FileManager.default.createDirectory(atPath: cacheRoot, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let limit = try command.cacheSize.map {
            guard let size = ByteSize.parse($0) else { throw ClientError.local("--cache-size \($0): not a size") }
            return size
        } ?? options.cacheSize ?? 10 << 30
        let store = try await CacheStoreFile.opening(.metadata, in: cacheRoot) { try await Self.openStore(cacheRoot) }
        let cache = try await CacheStoreFile.opening(.blocks, in: cacheRoot) { try BlockCache(directory: URL(fileURLWithPath: cacheRoot), limit: limit) }
        let queue = try await CacheStoreFile.opening(.uploads, in: cacheRoot) { try UploadQueue(path: cacheRoot + "/" + CacheStoreFile.uploads.file) }
        let fs = try DropboxFileSystem(client: client, store: store, cache: cache, queue: queue, stagingDirectory: cacheRoot + "/staging",
                                       options: fsOptions)
        if offline != nil, try store.value("cursor") == nil {
            throw ClientError.local("Dropbox is out of reach, and there is no cache of this account to serve from an earlier mount (\(cacheRoot))")
        }
        try fs.writeBack.recover()
        let mount = FuseMount(fs: fs)
        let watcher = fs.watcher
        watcher.setListener { changes, everything in
            mount.invalidate(changes, everything: everything)
            fs.pinnedChanged(changes, everything: everything)
        }
        do {
            try await watcher.catchUp()
        } catch where ErrnoMapping.fsError(error) == .networkUnreachable {
            offline = offline ?? "Dropbox is out of reach (\(error)): serving the cached view; changes wait in the queue until it is back"
        }
        try mount.mount(at: mountpoint, options: options.fuse)
        CacheOwner.record(cacheRoot: cacheRoot, mountpoint: mountpoint)
        return Prepared(client: client, account: account, accountName: accountName, root: root.name, cacheRoot: cacheRoot, cache: cache, fs: fs, mount: mount, watcher: watcher,
                        offlineAtStart: offline)
    }

    /// The cache's metadata store, which one mount at a time opens. Held by a daemon killed
    /// while stuck in the kernel (`CacheOwner`), it is free once that daemon's connection is
    /// aborted and its last thread has ended: waited for, 10 s at most.
    static func openStore(_ cacheRoot: String) async throws -> MetadataStore {
        var tries = 0
        while true {
            do {
                return try MetadataStore(path: cacheRoot + "/" + CacheStoreFile.metadata.file)
            } catch let failure as SQLiteDatabase.Failure where failure.code == 5 {  // SQLITE_BUSY: held by its owner
                tries += 1
                guard tries < 100, CacheOwner.freeIfZombie(cacheRoot: cacheRoot) else {
                    throw ClientError.local("the cache directory \(cacheRoot) is in use by another dropboxfs mount; give this one its own --cache-dir")
                }
                try await Task.sleep(for: .milliseconds(100))  // the zombie's threads ending
            }
        }
    }

    static func defaultCacheDirectory() -> String {
        let environment = ProcessInfo.processInfo.environment
        if let xdg = environment["XDG_CACHE_HOME"], !xdg.isEmpty { return xdg + "/dropboxfs" }
        return FileManager.default.homeDirectoryForCurrentUser.path + "/.cache/dropboxfs"
    }

    static func sanitize(_ text: String) -> String {
        String(text.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" ? $0 : "_" })
    }
}

/// Set once the daemon is told to stop at once rather than finish its uploads.
final class StopFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    var isSet: Bool { flag.load(ordering: .relaxed) }
    func set() { flag.store(true, ordering: .relaxed) }
}

/// Writes the mount's figures for `dropboxfs status` every two seconds.
struct StatusReporter: Sendable {
    let mountpoint: String
    let prepared: MountDaemon.Prepared

    /// The file this daemon writes (`StatusDirectory`); nil when no trusted directory could be
    /// made, and then the mount runs without a status file.
    let file: String?

    init(mountpoint: String, prepared: MountDaemon.Prepared) {
        self.mountpoint = mountpoint
        self.prepared = prepared
        do {
            file = try StatusDirectory.forWriting() + "/" + StatusDirectory.name(for: mountpoint)
        } catch {
            FuseLog.error("no status file: \(error)")
            file = nil
        }
    }

    /// Pending uploads named one by one in the status (the rest are counted).
    static let uploadsListed = 100

    func run() async {
        while !Task.isCancelled {
            write()
            try? await Task.sleep(for: .seconds(2))
        }
    }

    /// `leftForNextMount`: the last report, of a daemon whose final uploads left these for
    /// the next mount.
    func write(leftForNextMount: String? = nil) {
        let cache = prepared.cache
        let pending = prepared.fs.writeBack.pendingSummary(listing: Self.uploadsListed)
        var report: [String: Any] = [
            "mountpoint": mountpoint, "pid": Int(getpid()), "account": prepared.account.email,
            "account_id": prepared.account.accountID, "account_name": prepared.accountName ?? "", "root": prepared.root,
            "api": prepared.client.endpoints.api, "cache_dir": prepared.cacheRoot,
            "cache_bytes": cache.size, "cache_limit": cache.limit, "cache_hit_rate": cache.hitRate,
            "downloaded_bytes": prepared.fs.reader.bytesDownloaded, "requests": prepared.client.transport.requestCount,
            "inodes": prepared.fs.inodes.count,
            "invalidations_held": prepared.mount.invalidationsHeld, "kernel_locks_held": prepared.mount.kernelLocksHeld,
            "serving": prepared.mount.isServing,
            "uploads_pending": pending.count, "uploads_pending_bytes": pending.bytes, "uploads_pending_left": pending.left,
            "uploads": pending.listed.map { upload -> [String: Any] in
                var item: [String: Any] = ["path": upload.path, "size": upload.size, "sent": upload.sent, "state": upload.state,
                                            "on_disk": upload.onDisk]
                if let failure = upload.failure { item["failure"] = failure }
                return item
            },
            "uploaded_files": prepared.fs.writeBack.uploadedFiles,
            "deletes_queued": prepared.fs.deletes.total,
            "folders_queued": prepared.fs.folders.total,
            "renames_queued": prepared.fs.moves.count,
            "set_aside": prepared.fs.writeBack.setAside,
        ]
        let pins = prepared.fs.pinProgress
        report["pins"] = cache.pins.map { $0.isEmpty ? "/" : $0 }
        report["pinned_files"] = pins.files
        report["pinned_bytes"] = pins.bytes
        report["pinned_missing_bytes"] = pins.missing
        report["pinned_over_limit"] = cache.pinnedOverLimit
        if let leftForNextMount { report["left_for_next_mount"] = leftForNextMount }
        if let since = prepared.client.reachability.offlineSince { report["offline_since"] = since.formatted(.iso8601) }
        guard let path = file, let data = try? JSONSerialization.data(withJSONObject: report, options: [.sortedKeys]) else { return }
        let temporary = path + ".tmp"
        if FileManager.default.createFile(atPath: temporary, contents: data, attributes: [.posixPermissions: 0o600]) {
            rename(temporary, path)
        }
    }

    func remove() { if let file { unlink(file) } }
}
