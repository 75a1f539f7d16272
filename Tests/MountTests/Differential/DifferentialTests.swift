import DropboxAPI
import Foundation
import PropertyBased
import Synchronization
import Testing

/// The differential, model-based suite (mountpoint-s3's reftests, done against a local
/// folder): random sequences of system calls run side by side on the mount and on local
/// disk, with uploads finishing and another client writing at random moments; every outcome
/// must match, and at the end Dropbox must hold what the local folder holds. A failing
/// sequence is shrunk by PropertyBased to the shortest one that still fails, and printed.
///
/// CI runs a fixed set of seeds (`DROPBOXFS_DIFF_SEQUENCES` sequences from seed 1, over
/// 10,000 operations). For a long run with new seeds:
///   DROPBOXFS_DIFF_SEED=random DROPBOXFS_DIFF_SEQUENCES=2000 swift test --filter Differential
/// (`DROPBOXFS_DIFF_SEED=N` replays the sequences from seed N.)
@Suite("mount: differential against local disk", .serialized)
struct DifferentialTests {
    /// A generated sequence of operations and the seed it came from (kept through shrinking, for the report).
    struct Script: Sendable, CustomStringConvertible {
        var seed: UInt64
        var operations: [Operation]
        var description: String {
            "seed \(seed), \(operations.count) steps:\n" + operations.enumerated().map { "  \($0.offset): \($0.element)" }.joined(separator: "\n")
        }
    }

    /// Where seeds come from: consecutive fixed ones (CI), or the property checker's random.
    final class Seeds: Sendable {
        private let next: Mutex<UInt64?>
        init() {
            let setting = ProcessInfo.processInfo.environment["DROPBOXFS_DIFF_SEED"] ?? "1"
            next = Mutex(setting == "random" ? nil : UInt64(setting) ?? 1)
        }
        func take(_ rng: inout any SeededRandomNumberGenerator) -> UInt64 {
            next.withLock { next in
                guard let seed = next else { return rng.next() }
                next = seed + 1
                return seed
            }
        }
    }

    static var sequenceCount: Int { Int(ProcessInfo.processInfo.environment["DROPBOXFS_DIFF_SEQUENCES"] ?? "") ?? 160 }

    static func generator(_ seeds: Seeds) -> Generator<Script, AnySequence<Script>> {
        Generator(
            run: { rng in
                let seed = seeds.take(&rng)
                var random = SequenceGenerator(seed: seed)
                return Script(seed: seed, operations: random.sequence(length: 40...90))
            },
            shrink: { script in
                AnySequence(Shrink.shrinkArray(script.operations, shrinker: { _ in EmptyCollection<Operation>() }, lowerBound: 1)
                    .lazy.map { Script(seed: script.seed, operations: $0) })
            })
    }

    @Test(.timeLimit(.minutes(40)))
    func randomSequencesMatchLocalDisk() async throws {
        try await MountFixture.with { m in
            let localBase = m.root.appendingPathComponent("local").path
            try FileManager.default.createDirectory(atPath: localBase, withIntermediateDirectories: true)
            _ = try await offPool { try Sys.mkdir(m.mountpoint + "/diff").value("mkdir diff") }
            let counters = Mutex((runs: 0, operations: 0))
            await propertyCheck(count: Self.sequenceCount, input: Self.generator(Seeds())) { sequence in
                let run = counters.withLock { $0.runs += 1; $0.operations += sequence.operations.count; return $0.runs }
                let outcome = try await DifferentialRunner.run(sequence.operations, named: "seq-\(run)", base: "/diff",
                                                               localBase: localBase, on: m)
                if case .failure(let difference) = outcome {
                    // Printed at once as well: a difference that depends on timing may not come
                    // back while the sequence is shrunk, and then only this line tells what it was.
                    let logged = m.log.split(separator: "\n").filter { $0.contains("/seq-\(run)/") }.suffix(60)
                    print("differential: difference in seq-\(run): \(difference)\nin \(sequence)\ndaemon log:\n\(logged.joined(separator: "\n"))")
                    Issue.record("\(difference)\nin \(sequence)")
                }
            }
            let (runs, operations) = counters.withLock { ($0.runs, $0.operations) }
            print("differential: \(runs) sequences, \(operations) operations against local disk")
            #expect(runs > 0)
        }
    }
}
