import Foundation
import PropertyBased
import Synchronization
import TestSupport
import Testing

/// The differential suite with four sequences running at once on one mount, each in a folder
/// of its own and compared with a local folder of its own. The folders share nothing on the
/// mount's side but what the daemon shares: its FUSE threads, the inode table, the queue,
/// the upload batches (one batch commits files of several folders), the namespace rounds
/// and the change feed (another client's writes in one folder arrive while the others'
/// calls run). Each sequence alone has one right outcome per step, whatever the others do,
/// so every outcome is still compared. In rounds whose first sequence has an even seed,
/// `network` steps take Dropbox out of reach for all four (`SharedNetwork`): each sequence
/// then takes ENETUNREACH for an answer where it would alone after an outage of its own,
/// and skips another client's changes from there on; the checks at a sequence's start and
/// end, and another client's changes, hold the network up. Kills of the daemon are left out
/// (they would fall in the middle of the other sequences' calls, which no local disk models).
///
/// CI runs fixed seeds (`DROPBOXFS_DIFF_SEQUENCES` rounds of four, from seed 1 plus each
/// stream's offset); `DROPBOXFS_DIFF_SEED=random` and the other `DROPBOXFS_DIFF_*` settings
/// work as in `DifferentialTests`. A failure prints the four sequences of its round: the
/// checker shrinks them, but what the others did at that moment may not come back.
/// `DROPBOXFS_DIFF_SEEDS=a,b,c,d` replays a round from its four printed seeds (with
/// `DROPBOXFS_DIFF_SEQUENCES=1`; a difference of timing may need several runs).
@Suite("mount: differential, four sequences at once", .serialized)
struct ConcurrentDifferentialTests {
    /// Far apart, so that the four streams' fixed seeds never meet.
    static let seedStreams: [UInt64] = [0, 1_000_003, 2_000_006, 3_000_009]

    @Test(.timeLimit(.minutes(30)))
    func sequencesRunningAtOnceInFoldersOfTheirOwnEachMatchLocalDisk() async throws {
        try await MountFixture.with(mount: false, feedPageSize: DifferentialTests.feedPageSize) { m in
            try m.emulator.replaceFaults(DifferentialTests.reachableFaults)
            try await DifferentialTests.mount(m)
            let localBase = m.root.appendingPathComponent("local").path
            try FileManager.default.createDirectory(atPath: localBase, withIntermediateDirectories: true)
            _ = try await offPool { try Sys.mkdir(m.mountpoint + "/at-once").value("mkdir at-once") }
            let network = DifferentialRunner<Kernel>.sharedNetwork(on: m)
            let counters = Mutex((rounds: 0, operations: 0))
            let firstDifference = FirstDifference()
            let replayed = (ProcessInfo.processInfo.environment["DROPBOXFS_DIFF_SEEDS"] ?? "").split(separator: ",").compactMap { UInt64($0) }
            let streams = Self.seedStreams.enumerated().map { index, offset in
                DifferentialScript.generator(seedOffset: offset, firstSeed: index < replayed.count ? replayed[index] : nil)
            }
            await propertyCheck(count: DifferentialScript.count(default: 40), input: streams[0], streams[1], streams[2], streams[3]) { a, b, c, d in
                let scripts = [a, b, c, d]
                let round = counters.withLock { $0.rounds += 1; $0.operations += scripts.map(\.operations.count).reduce(0, +); return $0.rounds }
                let names = scripts.indices.map { "seq-\(round)-\($0)" }
                let outages = a.seed % 2 == 0 ? network : nil
                let outcomes: [Result<Void, any Error>]
                do {
                    // A round that failed may have left Dropbox out of reach.
                    try await offPool { try network.holdingUp {} }
                    outcomes = try await withThrowingTaskGroup(of: (Int, Result<Void, any Error>).self) { group in
                        for (index, script) in scripts.enumerated() {
                            group.addTask {
                                (index, try await DifferentialRunner<Kernel>.run(script.operations, named: names[index], base: "/at-once",
                                                                                 localBase: localBase, on: m, outagesAndKills: false,
                                                                                 sharedNetwork: outages))
                            }
                        }
                        var outcomes = [Result<Void, any Error>](repeating: .success(()), count: scripts.count)
                        for try await (index, outcome) in group { outcomes[index] = outcome }
                        return outcomes
                    }
                } catch {
                    // A call that failed where it must not (a sequence's folder made with EIO
                    // once in about 640 rounds of a run with jitter): what the daemon said.
                    DifferentialTests.keepLog(of: m, as: "round-\(round)")
                    firstDifference.keep("round \(round), thrown: \(error)\ndaemon log:\n\(m.log.split(separator: "\n").suffix(40).joined(separator: "\n"))")
                    throw error
                }
                // A round that matched goes, on both sides: thousands of sequences' files
                // (up to 8 MiB each) filled the disk of a long run. The removals are the
                // mount's work too, beside the next round's calls.
                if outcomes.allSatisfy({ (try? $0.get()) != nil }) {
                    try await offPool {
                        for name in names {
                            try? FileManager.default.removeItem(atPath: m.mountpoint + "/at-once/" + name)
                            try? FileManager.default.removeItem(atPath: localBase + "/" + name)
                        }
                    }
                }
                for (index, outcome) in outcomes.enumerated() {
                    guard case .failure(let difference) = outcome else { continue }
                    let lines = m.log.split(separator: "\n")
                    let logged = lines.filter { $0.contains("/\(names[index])/") }.suffix(60) + ["-- last lines:"] + lines.suffix(30)
                    let others = scripts.indices.filter { $0 != index }.map { "\(names[$0]): \(scripts[$0])" }.joined(separator: "\n")
                    print("differential: difference in \(names[index]): \(difference)\nin \(scripts[index])\nbeside\n\(others)\ndaemon log:\n\(logged.joined(separator: "\n"))")
                    DifferentialTests.keepLog(of: m, as: names[index])
                    Issue.record("\(names[index]): \(difference)\nin \(scripts[index])")
                    firstDifference.keep("\(names[index]): \(difference)\ndaemon log:\n\(logged.suffix(40).joined(separator: "\n"))")
                }
            }
            if let seen = firstDifference.seen { Issue.record("\(seen)") }
            let (rounds, operations) = counters.withLock { ($0.rounds, $0.operations) }
            print("differential at once: \(rounds) rounds of four sequences, \(operations) operations against local disk")
            #expect(rounds > 0)
        }
    }
}
