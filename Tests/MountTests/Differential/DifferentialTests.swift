import DropboxAPI
import Foundation
import PropertyBased
import Synchronization
import TestSupport
import Testing

/// The differential, model-based suite (mountpoint-s3's reftests, done against a local
/// folder): random sequences of system calls run side by side on the mount and on local
/// disk, with uploads finishing, another client writing, Dropbox going out of reach and
/// back, and the daemon killed (kill -9) and mounted again at random moments; every outcome
/// must match, and at the end Dropbox must hold what the local folder holds. A failing
/// sequence is shrunk by PropertyBased to the shortest one that still fails, and printed.
///
/// CI runs a fixed set of seeds (`DROPBOXFS_DIFF_SEQUENCES` sequences from seed 1, over
/// 10,000 operations). For a long run with new seeds:
///   DROPBOXFS_DIFF_SEED=random DROPBOXFS_DIFF_SEQUENCES=2000 swift test --filter Differential
/// (`DROPBOXFS_DIFF_SEED=N` replays the sequences from seed N; `DROPBOXFS_DIFF_FAULTS=` sets
/// emulator faults for the whole run, `latency:ms=20` or `latency:ms=20,answer=1` as a real
/// network delays calls, which widens the windows between a call's answer and the change
/// feed's (`;` between several); with
/// `DROPBOXFS_DIFF_SEQUENCES=1 DROPBOXFS_DIFF_DROP=3,17` it leaves steps 3 and 17 out: a
/// failure that depends on timing defeats the checker's shrinking: Scripts/shrink-differential;
/// `DROPBOXFS_DIFF_JITTER=MS` varies when outages and kills come; `DROPBOXFS_DIFF_KEEP_LOG=DIR`
/// keeps the daemon's log of a difference, `keepLog`.)
@Suite("mount: differential against local disk", .serialized)
struct DifferentialTests {
    /// A silent outage (`Step.network(silent:)`) lasts for the mount until two tries of a
    /// call went silent this long: seconds, not the default minute. Long enough that a
    /// loaded machine never takes a slow answer for silence.
    static let mountOptions = ["timeout=3"]

    /// The emulator's faults while Dropbox is reachable: those `DROPBOXFS_DIFF_FAULTS` names
    /// (a latency, say), else none.
    static let reachableFaults: [String] = (ProcessInfo.processInfo.environment["DROPBOXFS_DIFF_FAULTS"] ?? "")
        .split(separator: ";").map(String.init)

    /// Mounts with `mountOptions`. When every suite starts at once on a loaded machine, this
    /// process's emulator (it runs here, on its own event loops since it starved on Swift's
    /// shared pool) can still be slow to answer: with no cache yet, the mount then finds
    /// Dropbox out of reach and fails, and is tried again.
    static func mount(_ m: MountFixture) async throws {
        for attempt in 1... {
            do {
                return try await m.mount(options: mountOptions)
            } catch let failure as MountFailure where attempt < 5 && failure.message.contains("out of reach") {
                continue
            }
        }
    }

    /// `DROPBOXFS_DIFF_JITTER=MS`: a random pause of up to MS milliseconds before each
    /// outage, return and kill, so that replays of one seed catch the daemon at other points
    /// of its work (a failure CI met once, under load, that quiet replays never met).
    static let jitterMilliseconds = ProcessInfo.processInfo.environment["DROPBOXFS_DIFF_JITTER"].flatMap { UInt32($0) } ?? 0

    /// `DROPBOXFS_DIFF_KEEP_LOG=DIR`: the daemon's whole log is written to DIR/NAME.log at a
    /// difference (with `DROPBOXFS_TRACE=1`, every step the daemon took: a failure that
    /// depends on timing may never come back).
    static func keepLog(of m: MountFixture, as name: String) {
        guard let directory = ProcessInfo.processInfo.environment["DROPBOXFS_DIFF_KEEP_LOG"] else { return }
        try? m.log.write(toFile: directory + "/" + name + ".log", atomically: true, encoding: .utf8)
    }

    static func jitter() {
        if jitterMilliseconds > 0 { usleep(UInt32.random(in: 0...jitterMilliseconds) * 1000) }
    }

    /// `DROPBOXFS_DIFF_PAGE_SIZE=N`: the emulator's pages hold N entries, so that every
    /// catch-up of the change feed, and each move it tells of, spans pages.
    static let feedPageSize = ProcessInfo.processInfo.environment["DROPBOXFS_DIFF_PAGE_SIZE"].flatMap { Int($0) }

    @Test(.timeLimit(.minutes(40)))
    func randomSequencesMatchLocalDisk() async throws {
        try await randomSequences(count: DifferentialScript.count(default: 160))
    }

    /// Sequences of the large-file mix (`SequenceGenerator.Mix.large`): streams of tens of
    /// MiB through the kernel, uploads in sessions of their own (begun before the close for
    /// a file written from empty), and renames, removals, kills and outages meeting them.
    @Test(.timeLimit(.minutes(30)))
    func largeFileSequencesMatchLocalDisk() async throws {
        try await randomSequences(count: DifferentialScript.count(default: 12), mix: .large)
    }

    /// Sequences of the many-files mix (`SequenceGenerator.Mix.many`): bursts of up to
    /// thousands of small files through the kernel, `rm -r` of them, and renames, removals,
    /// kills and outages while their uploads wait or run.
    @Test(.timeLimit(.minutes(30)))
    func manyFileSequencesMatchLocalDisk() async throws {
        try await randomSequences(count: DifferentialScript.count(default: 4), mix: .many)
    }

    private func randomSequences(count: Int, mix: SequenceGenerator.Mix = .fromEnvironment) async throws {
        try await MountFixture.with(mount: false, feedPageSize: Self.feedPageSize) { m in
            try m.emulator.replaceFaults(Self.reachableFaults)
            try await Self.mount(m)
            let localBase = m.root.appendingPathComponent("local").path
            try FileManager.default.createDirectory(atPath: localBase, withIntermediateDirectories: true)
            _ = try await offPool { try Sys.mkdir(m.mountpoint + "/diff").value("mkdir diff") }
            let counters = Mutex((runs: 0, operations: 0))
            // Recorded once more after the check, with the daemon's last lines.
            let firstDifference = FirstDifference()
            await propertyCheck(count: count, input: DifferentialScript.generator(mix: mix)) { sequence in
                let run = counters.withLock { $0.runs += 1; $0.operations += sequence.operations.count; return $0.runs }
                let outcome: Result<Void, any Error>
                do {
                    outcome = try await DifferentialRunner<Kernel>.run(sequence.operations, named: "seq-\(run)", base: "/diff",
                                                                       localBase: localBase, on: m)
                } catch {
                    // The harness's own failure (a mount that never came back, say): as the
                    // checker suppresses it while shrinking, kept to be recorded after it too.
                    firstDifference.keep("seq-\(run), thrown: \(error)")
                    throw error
                }
                if case .failure(let difference) = outcome {
                    // Printed at once as well: a difference that depends on timing may not come
                    // back while the sequence is shrunk, and then only this line tells what it was.
                    // Its paths' lines, and the last lines of all: an EIO's detail names no path.
                    let lines = m.log.split(separator: "\n")
                    let logged = lines.filter { $0.contains("/seq-\(run)/") }.suffix(60) + ["-- last lines:"] + lines.suffix(30)
                    print("differential: difference in seq-\(run): \(difference)\nin \(sequence)\ndaemon log:\n\(logged.joined(separator: "\n"))")
                    Self.keepLog(of: m, as: "seq-\(run)")
                    Issue.record("\(difference)\nin \(sequence)")
                    firstDifference.keep("seq-\(run): \(difference)\ndaemon log:\n\(logged.suffix(40).joined(separator: "\n"))")
                }
            }
            if let seen = firstDifference.seen { Issue.record("\(seen)") }
            let (runs, operations) = counters.withLock { ($0.runs, $0.operations) }
            print("differential: \(runs) sequences, \(operations) operations against local disk")
            #expect(runs > 0)
        }
    }
}

extension DifferentialRunner where Tested == Kernel {
    /// Runs `operations` in a new folder `name` of the mount's `base` and of `localBase`,
    /// off Swift's cooperative threads; the difference, if any, is the failure. Without
    /// `outagesAndKills` the sequence's crash steps do nothing (other sequences running at
    /// once on the mount would meet them), and its network steps go to `sharedNetwork`, or
    /// without one do nothing too.
    static func run(_ operations: [Step], named name: String, base: String, localBase: String,
                    on m: MountFixture, outagesAndKills: Bool = true, sharedNetwork: SharedNetwork? = nil) async throws -> Result<Void, any Error> {
        let (tested, local) = (m.mountpoint + base + "/" + name, localBase + "/" + name)
        var configured = DifferentialRunner(tested: Kernel(), testedRoot: tested, localRoot: local, remoteRoot: base + "/" + name, client: m.client)
        if outagesAndKills { configure(&configured, on: m) }
        // Forget steps drop the kernel's caches of names and inodes: harmless to sequences
        // running at once, they run in every one.
        configured.forget = {
            DifferentialTests.jitter()
            try "2".write(toFile: "/proc/sys/vm/drop_caches", atomically: false, encoding: .utf8)
        }
        configured.sharedNetwork = sharedNetwork
        return try await run(operations, with: configured, in: (tested, local), named: name, base: base, on: m)
    }

    /// Outages for sequences running at once on `m`, each in a folder of its own: Dropbox out
    /// of reach (or silent) for all of them, and back once the mount has seen it.
    static func sharedNetwork(on m: MountFixture) -> SharedNetwork {
        SharedNetwork(switchTo: switchNetwork(on: m))
    }

    /// Returns once the mount has seen Dropbox back (its status says so at the switch).
    private static func awaitOnline(_ m: MountFixture) async throws {
        try await eventually("the mount to see Dropbox again", timeout: 60) { try m.statusReport()["offline_since"] == nil }
    }

    /// Takes Dropbox out of reach (`silent`: requests held unanswered) or brings it back and
    /// returns once the mount has seen it.
    private static func switchNetwork(on m: MountFixture) -> @Sendable (_ up: Bool, _ silent: Bool) throws -> Void {
        let emulator = m.emulator
        return { up, silent in
            try blocking {
                if up {
                    try await emulator.setReachable(true)
                    try emulator.replaceFaults(DifferentialTests.reachableFaults)  // a silent server's held requests are dropped unserved
                    try await awaitOnline(m)
                } else if silent {
                    try emulator.replaceFaults(["silent"])
                } else {
                    try await emulator.setReachable(false)
                }
            }
        }
    }

    /// Takes Dropbox out of reach and brings it back for the runner's network steps, and
    /// kills and mounts the daemon again for its crash steps.
    private static func configure(_ configured: inout DifferentialRunner<Kernel>, on m: MountFixture) {
        let switchNetwork = switchNetwork(on: m)
        configured.network = { up, silent in
            DifferentialTests.jitter()
            try switchNetwork(up, silent)
        }
        configured.crash = { networkUp in
            DifferentialTests.jitter()
            try blocking {
                try await m.killDaemon()
                try await DifferentialTests.mount(m)
                // A busy moment may have sent the new mount offline at its start. Its own
                // status says so: until it writes one, the killed daemon's is there, online.
                let daemons = Set(m.daemonPIDs().map(Int.init))
                try await eventually("the new daemon's status", timeout: 60) {
                    (try? m.statusReport()["pid"] as? Int).map { daemons.contains($0) } ?? false
                }
                if networkUp { try await awaitOnline(m) }
            }
        }
    }

    private static func run(_ operations: [Step], with runner: DifferentialRunner<Kernel>, in roots: (tested: String, local: String), named name: String,
                            base: String, on m: MountFixture) async throws -> Result<Void, any Error> {
        let (tested, local) = roots
        // The sequence starts with the mount online: an outage the last one ended may still
        // be ending (a request Dropbox held is dropped when it comes back, and the mount
        // finds it gone only then), and a mount that takes Dropbox for out of reach answers
        // fsync from the local disk, leaving Dropbox without the files the end compares.
        // Its folder made on Dropbox through the mount is the proof (no outage of a
        // sequence running at once beginning meanwhile).
        let madeOnDropbox: @Sendable () async throws -> Void = {
            _ = try await offPool { try Sys.mkdir(tested).value("mkdir \(name) on the mount") }
            try await eventually("the mount to make \(name) on Dropbox", timeout: 60) {
                _ = try await offPool {
                    Sys.open(tested, O_RDONLY).map { fd in
                        defer { _ = Sys.close(fd) }
                        return Sys.fsync(fd)
                    }
                }
                return try await m.client.metadataIfExists(base + "/" + name) != nil
            }
        }
        if let shared = runner.sharedNetwork {
            try await offPool { try shared.holdingUp { try blocking { try await madeOnDropbox() } } }
        } else {
            try await madeOnDropbox()
        }
        return try await offPool {
            _ = try Sys.mkdir(local).value("mkdir \(name) locally")
            var running = runner
            return Result { try running.run(operations) }
        }
    }
}
