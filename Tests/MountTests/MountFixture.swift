import DropboxAPI
import DropboxEmulator
import Foundation
import TestSupport

/// A real mount of a real emulator: `dropboxfs mount` run as a child process, as a user runs
/// it. `with` always unmounts (lazily if the daemon is gone), waits for the mount to vanish,
/// stops the emulator and removes every file it made, even when the test fails.
final class MountFixture: @unchecked Sendable {
    static let token = "mount-token"

    /// A script of the repository's Scripts/lib, which tests run as the scripts do.
    static func libraryScript(_ name: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Scripts/lib/" + name).path
    }

    let root: URL
    let emulator: Emulator
    let mountpoint: String
    let cacheDirectory: String
    /// `XDG_RUNTIME_DIR` of the daemon and of the commands the test runs.
    let runtimeDirectory: String
    let client: DropboxClient
    /// tmpfs mounts made for the test (detached at cleanup, after the dropboxfs mount).
    private var scratchDisks: [String] = []
    /// Mountpoints of other mounts of the account (`mountAnother`), unmounted at cleanup.
    private var otherMounts: [String] = []

    /// Set by a test before it mounts: more variables for the daemons it starts.
    var daemonEnvironment: [String: String] = [:]

    var environment: [String: String] {
        daemonEnvironment.merging(["DROPBOXFS_ACCESS_TOKEN": Self.token, "DROPBOXFS_API_URL": emulator.baseURL,
         "DROPBOXFS_CONFIG_DIR": root.appendingPathComponent("config").path,
         // The status file goes here (`StatusDirectory`), inside the test's own folder.
         "XDG_RUNTIME_DIR": runtimeDirectory,
         // A crashing daemon's backtrace, kept outside the test's folders (which go at
         // cleanup) and off its cache disk (which a test may fill).
         "SWIFT_BACKTRACE": "enable=yes,interactive=no,output-to=/tmp/dropboxfs-backtraces",
         // Passed on, so a run of the tests can log the daemons' decisions (`FuseLog.trace`).
         "DROPBOXFS_TRACE": ProcessInfo.processInfo.environment["DROPBOXFS_TRACE"] ?? ""]) { _, fixed in fixed }
    }

    static var binary: String { ProcessRunner.builtProduct("dropboxfs") }

    private init(root: URL, emulator: Emulator) throws {
        self.root = root
        self.emulator = emulator
        mountpoint = root.appendingPathComponent("mnt").path
        cacheDirectory = root.appendingPathComponent("cache").path
        runtimeDirectory = root.appendingPathComponent("run").path
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: runtimeDirectory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        client = DropboxClient(endpoints: try Endpoints(baseURL: emulator.baseURL), tokens: StaticAccessToken(Self.token))
    }

    /// `team`: the emulated account is a team member's (`TeamSpace`: seeds go into the home).
    /// `feedPageSize`: the entries of a `list_folder` page (Dropbox's 2,000 when nil).
    static func with(seeds: [String] = ["demo"], faults: [String] = [], options: [String] = [], mount: Bool = true, quota: Int64? = nil,
                     team: Bool = false, feedPageSize: Int? = nil, _ body: (MountFixture) async throws -> Void) async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("mount-test-" + UUID().uuidString.prefix(8))
        try? FileManager.default.createDirectory(atPath: "/tmp/dropboxfs-backtraces", withIntermediateDirectories: true)
        var configuration = EmulatorConfiguration(dataDirectory: root.appendingPathComponent("data"))
        configuration.tokens = [token]
        configuration.seeds = seeds
        configuration.team = team
        if let quota { configuration.quota = quota }
        if let feedPageSize { configuration.pageSize = feedPageSize }
        let emulator = try await Emulator.start(configuration)
        var failure: (any Error)?
        do {
            let fixture = try MountFixture(root: root, emulator: emulator)
            do {
                try await emulator.setFaults(faults)
                if mount { try await fixture.mount(options: options) }
                try await body(fixture)
            } catch {
                failure = error
            }
            await fixture.cleanUp()
        } catch {
            failure = failure ?? error
        }
        await emulator.shutdown()
        if failure != nil { keepLogs(of: root) }
        try? FileManager.default.removeItem(at: root)
        if let failure { throw failure }
    }

    /// DROPBOXFS_TEST_KEEP_LOGS=DIR: a failed test's daemon logs (every mount's, traces
    /// included with DROPBOXFS_TRACE) are copied to DIR/<the test's folder>/ before its folder goes.
    private static func keepLogs(of root: URL) {
        guard let keep = ProcessInfo.processInfo.environment["DROPBOXFS_TEST_KEEP_LOGS"], !keep.isEmpty else { return }
        let target = URL(fileURLWithPath: keep).appendingPathComponent(root.lastPathComponent)
        try? FileManager.default.createDirectory(at: target, withIntermediateDirectories: true)
        let files = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil)
        while let file = files?.nextObject() as? URL {
            guard file.lastPathComponent == "dropboxfs.log" else { continue }
            let name = file.path.dropFirst(root.path.count + 1).replacingOccurrences(of: "/", with: "_")
            try? FileManager.default.copyItem(at: file, to: target.appendingPathComponent(name))
        }
    }

    /// `dropboxfs mount`: returns once mounted (or throws with what the command said).
    func mount(options: [String] = []) async throws {
        var arguments = ["mount", mountpoint, "--cache-dir", cacheDirectory]
        for option in options { arguments += ["-o", option] }
        let result = try await ProcessRunner.run(Self.binary, arguments, environment: environment)
        guard result.status == 0 else { throw MountFailure(message: "mount failed (\(result.status)): \(result.stderr)") }
        guard isMounted else { throw MountFailure(message: "mount returned 0 but \(mountpoint) is not mounted") }
    }

    /// `dropboxfs unmount`, which waits for the uploads; returns what it said.
    @discardableResult
    func unmount() async throws -> ProcessRunner.Result {
        let result = try await ProcessRunner.run(Self.binary, ["unmount", mountpoint], environment: environment)
        guard result.status == 0 else { throw MountFailure(message: "unmount failed: \(result.stderr)") }
        try await eventually("the mount to go away") { !self.isMounted }
        try await eventually("the daemon to exit") { self.daemonPIDs().isEmpty }
        return result
    }

    /// `dropboxfs mount` with its cache on a tmpfs of `size` (e.g. "2m"): a small disk that
    /// fills up. Returns what the mount command said.
    func mountWithCacheOnSmallDisk(size: String) async throws -> ProcessRunner.Result {
        let disk = try await scratchDisk("small-disk", size: size)
        return try await ProcessRunner.run(Self.binary, ["mount", mountpoint, "--cache-dir", disk], environment: environment)
    }

    /// A tmpfs of `size` mounted at `name` in the test's folder, detached at cleanup.
    @discardableResult
    func scratchDisk(_ name: String, size: String) async throws -> String {
        let disk = root.appendingPathComponent(name).path
        try FileManager.default.createDirectory(atPath: disk, withIntermediateDirectories: true)
        let made = try await sh("mount -t tmpfs -o size=\(size) tmpfs '\(disk)'")
        guard made.status == 0 else { throw MountFailure(message: "cannot mount a tmpfs: \(made.stderr)") }
        scratchDisks.append(disk)
        return disk
    }

    /// kill -9 of the daemon; returns once the kernel has let go of it (the mount answers
    /// ENOTCONN), which can come a moment after the process vanishes from /proc.
    func killDaemon() async throws {
        for pid in daemonPIDs() { kill(pid, SIGKILL) }
        try await eventually("the mount to lose its daemon") {
            var info = stat()
            return stat(self.mountpoint, &info) != 0 && errno == ENOTCONN
        }
    }

    var isMounted: Bool {
        (KernelText.read("/proc/self/mounts") ?? "")
            .split(separator: "\n").contains { $0.split(separator: " ").dropFirst().first.map(String.init) == mountpoint }
    }

    /// Processes serving this mountpoint.
    func daemonPIDs(of mountpoint: String? = nil) -> [Int32] {
        let mountpoint = mountpoint ?? self.mountpoint
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(Int32.init).filter { pid in
            guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return false }
            let arguments = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            return arguments.contains("mount") && arguments.contains(mountpoint)
        }
    }

    /// Another mount of the same account with its own mountpoint and cache directory, as on
    /// another machine. Returns its mountpoint.
    func mountAnother(_ name: String = "other") async throws -> String {
        let point = root.appendingPathComponent("mnt-\(name)").path
        try FileManager.default.createDirectory(atPath: point, withIntermediateDirectories: true)
        otherMounts.append(point)
        let result = try await ProcessRunner.run(Self.binary, ["mount", point, "--cache-dir", root.appendingPathComponent("cache-\(name)").path],
                                                 environment: environment)
        guard result.status == 0 else { throw MountFailure(message: "mount of \(point) failed (\(result.status)): \(result.stderr)") }
        return point
    }

    private func cleanUp() async {
        for point in otherMounts {
            _ = try? await ProcessRunner.run(Self.binary, ["unmount", point], environment: environment)
            _ = try? await ProcessRunner.run("/usr/bin/env", ["fusermount3", "-u", "-z", point])
            for pid in daemonPIDs(of: point) { kill(pid, SIGKILL) }
        }
        if isMounted {
            _ = try? await ProcessRunner.run(Self.binary, ["unmount", mountpoint], environment: environment)
            if isMounted { _ = try? await ProcessRunner.run("/usr/bin/env", ["fusermount3", "-u", "-z", mountpoint]) }
        }
        for pid in daemonPIDs() { kill(pid, SIGKILL) }
        try? await eventually("cleanup", timeout: 10) { !self.isMounted }
        for disk in scratchDisks { _ = umount2(disk, Int32(MNT_DETACH)) }
    }

    func sh(_ command: String, timeout: Double = 120) async throws -> ProcessRunner.Result {
        try await ProcessRunner.shell(command, environment: environment.merging(["M": mountpoint]) { _, new in new }, timeout: timeout)
    }

    /// fsync of a folder of the mount (a shell path, `$M` allowed): returns once Dropbox has
    /// every closed file and every removal at or below it.
    func syncFolder(_ path: String) async throws -> ProcessRunner.Result {
        try await sh("python3 -c 'import os, sys; os.fsync(os.open(sys.argv[1], os.O_RDONLY))' \(path)")
    }

    /// Runs a Python script (with `M` set to the mountpoint).
    func python(_ script: String, timeout: Double = 120) async throws -> ProcessRunner.Result {
        let file = root.appendingPathComponent("script-\(UUID().uuidString.prefix(8)).py")
        try script.write(to: file, atomically: true, encoding: .utf8)
        return try await sh("python3 '\(file.path)'", timeout: timeout)
    }

    func routeStats() async throws -> [String: [String: Int]] { try await emulator.routeStats() }

    /// What `dropboxfs status` prints for this mount (its report is rewritten every 2 s).
    func status() async throws -> String {
        try await ProcessRunner.run(Self.binary, ["status", mountpoint], environment: environment).stdout
    }

    /// The file of the daemon's status report (rewritten every 2 s): the one mount of the test.
    func statusFile() throws -> String {
        let folder = runtimeDirectory + "/dropboxfs"
        guard let name = try FileManager.default.contentsOfDirectory(atPath: folder).first(where: { $0.hasSuffix(".json") }) else {
            throw MountFailure(message: "no status report in \(folder)")
        }
        return folder + "/" + name
    }

    /// The daemon's status report, as JSON.
    func statusReport() throws -> [String: Any] {
        let file = try statusFile()
        guard let data = FileManager.default.contents(atPath: file),
              let report = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw MountFailure(message: "no status report in \(file)")
        }
        return report
    }

    /// The requests `routes` took together, in stats from `routeStats`.
    static func requests(_ stats: [String: [String: Int]], _ routes: [String]) -> Int {
        routes.reduce(0) { $0 + (stats[$1]?["requests"] ?? 0) }
    }

    /// Another client uploads `contents` to `path` on Dropbox (`clientModified`: the time it
    /// gives the file, as Dropbox writes it).
    func uploadElsewhere(_ contents: String, to path: String, mode: WriteMode = .overwrite, clientModified: String? = nil) async throws {
        let file = root.appendingPathComponent("elsewhere-\(UUID().uuidString.prefix(8))").path
        try Data(contents.utf8).write(to: URL(fileURLWithPath: file))
        defer { unlink(file) }
        _ = try await client.uploadFile(file, to: CommitInfo(path: path, mode: mode, clientModified: clientModified))
    }

    /// A file's content on Dropbox, as text.
    func remoteText(_ path: String) async throws -> String {
        guard let file = try await client.metadataIfExists(path)?.fileMetadata else { throw MountFailure(message: "\(path): no file on Dropbox") }
        guard file.size > 0 else { return "" }
        return String(decoding: try await client.downloadRange(path, range: 0..<file.size), as: UTF8.self)
    }

    /// Stops the change feed: every longpoll fails from now on, so the mount hears of another
    /// client's change only at its own next catch-up. The longpoll under way is ended by a
    /// change made for it (`trigger`, uploaded elsewhere); once a longpoll counted after the
    /// fault was set has failed, the feed is known to be stalled.
    func stallChangeFeed(trigger: String) async throws {
        try await emulator.setFaults(["500:p=1,routes=files/list_folder/longpoll"])
        try await emulator.resetStats()
        try await uploadElsewhere("trigger\n", to: trigger, mode: .add)
        try await eventually("a longpoll to fail") { try await self.routeStats()["files/list_folder/longpoll"]?["requests"] ?? 0 > 0 }
    }

    /// Every file under `local` is on Dropbox under `remote` with the same content hash, and
    /// Dropbox holds no other file there. Returns how many files were compared.
    @discardableResult
    func expectOnDropbox(_ local: String, at remote: String) async throws -> Int {
        let entries = try await client.listAll(remote, recursive: true)
        var remoteHashes: [String: String] = [:]
        for case .file(let file) in entries { remoteHashes[String(file.pathLower!.dropFirst(remote.count))] = file.contentHash }
        var localHashes: [String: String] = [:]
        let base = URL(fileURLWithPath: local).standardizedFileURL.path
        for case let path as String in FileManager.default.enumerator(atPath: base)! {
            var isDirectory: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: base + "/" + path, isDirectory: &isDirectory)
            if !isDirectory.boolValue { localHashes["/" + path.lowercased()] = try ContentHasher.hash(file: base + "/" + path) }
        }
        guard remoteHashes == localHashes else {
            let missing = Set(localHashes.keys).subtracting(remoteHashes.keys).sorted().prefix(5)
            let differing = localHashes.keys.filter { remoteHashes[$0] != nil && remoteHashes[$0] != localHashes[$0] }.prefix(5)
            let extra = Set(remoteHashes.keys).subtracting(localHashes.keys).sorted().prefix(5)
            throw MountFailure(message: "Dropbox differs under \(remote): missing \(Array(missing)), differing \(Array(differing)), extra \(Array(extra))")
        }
        return localHashes.count
    }

    /// The log of a daemon whose cache is on the small disk (for failure messages).
    var logOnSmallDisk: String {
        let disk = root.appendingPathComponent("small-disk").path
        let directories = (try? FileManager.default.contentsOfDirectory(atPath: disk)) ?? []
        return directories.compactMap { try? String(contentsOfFile: disk + "/" + $0 + "/dropboxfs.log", encoding: .utf8) }.joined()
    }

    /// The daemon's log (for failure messages).
    var log: String {
        let directories = (try? FileManager.default.contentsOfDirectory(atPath: cacheDirectory)) ?? []
        return directories.compactMap { try? String(contentsOfFile: cacheDirectory + "/" + $0 + "/dropboxfs.log", encoding: .utf8) }.joined()
    }
}

struct MountFailure: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// Awaits a condition (checked every 50 ms) up to a deadline; throws if it never holds, with
/// what `lastSeen` says then (what the condition saw last, for the failure's reader).
func eventually(_ what: String, timeout: Double = 20, lastSeen: () -> String = { "" },
                _ condition: @escaping () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(50))
    }
    let seen = lastSeen()
    throw MountFailure(message: "timed out after \(timeout) s waiting for \(what)" + (seen.isEmpty ? "" : "; last seen:\n\(seen)"))
}
