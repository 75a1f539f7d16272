import ArgumentParser
import DropboxAPI
import DropboxFS
import Foundation

struct MountCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mount",
        abstract: "Mount a Dropbox account at a directory.",
        discussion: """
            Returns once the mount is ready, or fails with one line saying why (bad token, \
            unreachable server, unusable mountpoint). The filesystem keeps running in the \
            background until 'dropboxfs unmount MOUNTPOINT'.

            -o takes FUSE options (allow_other, ro, …) and ours: account=NAME, api_url=URL, \
            cache_dir=DIR, cache_size=SIZE, uid=, gid=, umask=, noxattr, max_inodes=N, \
            timeout=SECONDS (a request silent this long is given up; default 60), \
            root=home|team|ns:ID (default: a team member's team space, else the home). fstab:
              work  /mnt/dropbox  fuse.dropboxfs  _netdev,x-systemd.automount,allow_other  0 0
            """
    )

    @Argument(help: "[ACCOUNT] MOUNTPOINT: the saved account (default: the default one) and the directory.")
    var targets: [String]

    @Option(name: .short, help: "Mount options, comma-separated (repeatable).")
    var options: [String] = []

    @Flag(help: "Stay in the foreground (logs to stderr) instead of returning once mounted.")
    var foreground = false

    @Option(help: "API base URL (default: Dropbox, or $DROPBOXFS_API_URL).")
    var apiURL: String?

    @Option(help: "Cache directory (default: $XDG_CACHE_HOME/dropboxfs or ~/.cache/dropboxfs).")
    var cacheDir: String?

    @Option(help: "Block cache size limit, e.g. 10G (default 10G).")
    var cacheSize: String?

    func validate() throws {
        guard (1...2).contains(targets.count) else { throw ValidationError("give MOUNTPOINT, or ACCOUNT MOUNTPOINT") }
    }

    func run() async throws {
        if foreground || ProcessInfo.processInfo.environment["DROPBOXFS_DAEMON"] == "1" {
            try await MountDaemon(command: self).run()
        } else {
            try await reportingErrors("mount") { try Self.startInBackground() }
        }
    }

    /// The mountpoint as /proc/mounts shows it: symlinks resolved (also when the directory
    /// itself is a dead mount, which cannot be resolved: then its parent is).
    var mountpoint: String { MountTable.canonical(targets.last!) }
    var accountArgument: String? { targets.count == 2 ? targets[0] : nil }

    /// Runs this same command again as a detached daemon and waits for its first line:
    /// "ready", or the reason it could not mount.
    static func startInBackground() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        process.arguments = Array(CommandLine.arguments.dropFirst())
        var environment = ProcessInfo.processInfo.environment
        environment["DROPBOXFS_DAEMON"] = "1"
        process.environment = environment
        let readiness = Pipe()
        process.standardOutput = readiness
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let line = firstLine(readiness.fileHandleForReading).trimmingCharacters(in: .whitespacesAndNewlines)
        if line == "ready" { return }
        if line.hasPrefix("ready: ") {  // mounted, with a note (started offline)
            FuseLog.write("dropboxfs: " + line.dropFirst("ready: ".count) + "\n")
            return
        }
        if !process.isRunning { process.waitUntilExit() }
        throw ClientError.local(line.isEmpty ? "the filesystem process exited (status \(process.terminationStatus))" : line)
    }
}

/// Reads up to the first newline (the daemon keeps running, so end-of-file may never come).
private func firstLine(_ handle: FileHandle) -> String {
    var bytes: [UInt8] = []
    while let byte = try? handle.read(upToCount: 1), let first = byte.first, first != UInt8(ascii: "\n") {
        bytes.append(first)
    }
    return String(decoding: bytes, as: UTF8.self)
}

struct UnmountCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unmount", abstract: "Unmount a dropboxfs mount (also one whose process died).",
        discussion: """
            Waits until every file written through the mount is on Dropbox, showing what is \
            left; with --no-wait the uploads are left in the queue for the next mount. Uploads \
            and changes that keep failing are left there too, and named.
            """)

    @Argument(help: "The mountpoint.")
    var mountpoint: String

    @Flag(help: "Return at once; pending uploads resume at the next mount.")
    var noWait = false

    func run() async throws {
        try await reportingErrors("unmount \(mountpoint)") {
            let path = MountTable.canonical(mountpoint)
            guard MountTable.isMounted(path, type: "fuse.dropboxfs") else { throw ClientError.local("not a dropboxfs mount") }
            let daemon = StatusReport.read(path)?.pid
            try Unmounter.unmount(path)
            guard let daemon else { return }
            if noWait {
                kill(daemon, SIGTERM)  // ends the process; the queue is on disk
                return
            }
            try await Self.waitForUploads(daemon, path)
        }
    }

    /// The daemon finishes its uploads once unmounted, then exits: waits for that, showing
    /// what is left.
    static func waitForUploads(_ daemon: pid_t, _ path: String) async throws {
        var shown = ""
        var shownAt = ContinuousClock.now - .seconds(10)
        while kill(daemon, 0) == 0 {
            // A report written before the unmount may name uploads done since.
            if let report = StatusReport.read(path), !report.serving, report.uploads > 0, ContinuousClock.now - shownAt >= .seconds(1) {
                let line = "unmount: uploading \(report.uploads) file(s), \(ByteFormat.string(report.bytesLeft)) left"
                if line != shown {
                    FuseLog.write(line + "\n")
                    shown = line
                    shownAt = .now
                }
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        // A daemon that sent everything removes its report. What kept failing stays queued,
        // and its last report says what and why; a report without that is one of a daemon
        // killed during its uploads.
        guard let report = StatusReport.read(path), report.pid == daemon else { return }
        unlink(report.file)
        let line = report.leftForNextMount.map { "could not send, left in the queue for the next mount: \($0)" }
            ?? "the filesystem process ended before its uploads were done; what is left waits in the queue for the next mount"
        FuseLog.write("unmount: \(line)\n")
    }
}

/// The daemon's status file, as `status` and `unmount` read it.
struct StatusReport {
    /// Where it was read from.
    var file: String
    var pid: pid_t
    /// Written while the kernel's requests were still served (not yet unmounted).
    var serving: Bool
    /// Files pending, and their bytes not yet sent.
    var uploads: Int
    var bytesLeft: Int64
    /// The last report of a daemon whose final uploads kept failing: what it left queued, and why.
    var leftForNextMount: String?
    /// The saved account the mount was given (nil: the default, or a token in the environment).
    var accountName: String?
    /// The API server's base URL.
    var api: String?
    /// `MountRoot.Resolved.name`: which namespace the mount shows.
    var root: String?

    static func read(_ mountpoint: String) -> StatusReport? {
        guard let file = StatusDirectory.existingFile(for: mountpoint), let data = FileManager.default.contents(atPath: file),
              let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let pid = (json["pid"] as? NSNumber)?.int32Value else { return nil }
        return StatusReport(file: file, pid: pid, serving: json["serving"] as? Bool ?? true, uploads: (json["uploads_pending"] as? NSNumber)?.intValue ?? 0,
                            bytesLeft: (json["uploads_pending_left"] as? NSNumber)?.int64Value ?? 0,
                            leftForNextMount: json["left_for_next_mount"] as? String,
                            accountName: (json["account_name"] as? String).flatMap { $0.isEmpty ? nil : $0 },
                            api: json["api"] as? String, root: json["root"] as? String)
    }
}

/// Mounts listed by the kernel.
enum MountTable {
    static func entries() -> [(source: String, mountpoint: String, type: String)] {
        guard let text = KernelText.read("/proc/self/mounts") else { return [] }
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ").map { KernelText.unescapeMountField(String($0)) }
            return fields.count >= 3 ? (fields[0], fields[1], fields[2]) : nil
        }
    }

    static func isMounted(_ path: String, type: String) -> Bool { entries().contains { $0.mountpoint == path && $0.type == type } }

    /// An absolute path with symlinks resolved through its parent. The last component is
    /// never looked at: it may be a dead mount, which realpath cannot enter, or one whose
    /// connection outlived its daemon, where a `stat` waits for good (Foundation's
    /// `URL(fileURLWithPath:)` makes one, to learn whether the path is a directory).
    static func canonical(_ path: String) -> String {
        var absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        while absolute.count > 1 && absolute.hasSuffix("/") { absolute.removeLast() }
        guard let slash = absolute.lastIndex(of: "/") else { return absolute }
        let last = String(absolute[absolute.index(after: slash)...])
        if last.isEmpty || last == "." || last == ".." { return resolved(absolute) ?? absolute }
        let parent = slash == absolute.startIndex ? "/" : String(absolute[..<slash])
        guard let base = resolved(parent) else { return absolute }
        return (base == "/" ? "" : base) + "/" + last
    }

    private static func resolved(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}

enum Unmounter {
    /// `fusermount3 -u`; if the filesystem's process is gone (or busy), a lazy unmount.
    static func unmount(_ path: String) throws {
        OrphanedConnection.abortIfDaemonGone(path)  // else calls waiting on it stay hung
        if run(["fusermount3", "-u", path]) == 0 { return }
        if run(["fusermount3", "-u", "-z", path]) == 0 { return }
        if umount2(path, Int32(MNT_DETACH)) == 0 { return }
        throw ClientError.local("cannot unmount: \(String(cString: strerror(errno)))")
    }

    @discardableResult
    static func run(_ arguments: [String]) -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return -1 }
        process.waitUntilExit()
        return process.terminationStatus
    }
}
