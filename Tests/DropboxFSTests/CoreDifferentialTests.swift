import Foundation
import PropertyBased
import Synchronization
import TestSupport
import Testing

/// The differential suite of the mount (`MountTests/Differential`) run on the core alone:
/// the same random sequences and the same kept ones, with the kernel's part modelled by
/// `CoreKernel`, side by side with local disk. Without a kernel in the way it runs many
/// more sequences in the same time, and a difference it finds is the core's own.
///
/// `DROPBOXFS_DIFF_SEED` and `DROPBOXFS_DIFF_SEQUENCES` work as for the mount's suite:
///   DROPBOXFS_DIFF_SEED=random DROPBOXFS_DIFF_SEQUENCES=5000 swift test --filter CoreDifferential
@Suite("core: differential against local disk", .serialized)
struct CoreDifferentialTests {
    @Test(.timeLimit(.minutes(30)))
    func randomSequencesMatchLocalDisk() async throws {
        try await randomSequences(count: DifferentialScript.count(default: 400))
    }

    /// The same with three entries a page of the change feed (`DROPBOXFS_DIFF_PAGE_SIZE`
    /// sets it for the test above): every catch-up, and each move the feed tells of, spans
    /// pages, and the store must show a whole tree between any two of them (a folder renamed
    /// here was missing its files between the pages of its own move: `OwnMoveInPagesTests`).
    @Test(.timeLimit(.minutes(30)))
    func randomSequencesMatchLocalDiskWithSmallFeedPages() async throws {
        try await randomSequences(count: DifferentialScript.count(default: 400) / 2, feedPageSize: 3)
    }

    /// Sequences of the large-file mix (`SequenceGenerator.Mix.large`): files past the size
    /// that uploads alone, written in streams and changed while they upload, which the mixes
    /// above never make (their files stay under 9 MiB).
    @Test(.timeLimit(.minutes(30)))
    func largeFileSequencesMatchLocalDisk() async throws {
        try await randomSequences(count: DifferentialScript.count(default: 40), mix: .large)
    }

    /// Sequences of the many-files mix (`SequenceGenerator.Mix.many`): bursts of up to
    /// thousands of small files (more than a batch commit takes, more than the staging pool
    /// keeps) and `rm -r` of them, with their folders renamed and removed, outages and kills
    /// while their uploads wait, which the mixes above never make (ten files at most).
    @Test(.timeLimit(.minutes(30)))
    func manyFileSequencesMatchLocalDisk() async throws {
        try await randomSequences(count: DifferentialScript.count(default: 12), mix: .many)
    }

    private func randomSequences(count: Int, feedPageSize: Int? = nil, mix: SequenceGenerator.Mix = .fromEnvironment) async throws {
        try await CoreFixture.with(feedPageSize: feedPageSize) { core in
            let counters = Mutex((runs: 0, operations: 0))
            let firstDifference = FirstDifference()
            await propertyCheck(count: count, input: DifferentialScript.generator(mix: mix)) { script in
                let run = counters.withLock { $0.runs += 1; $0.operations += script.operations.count; return $0.runs }
                if case .failure(let difference) = try await core.differential(script.operations, named: "seq-\(run)", base: "/diff") {
                    print("core differential: difference in seq-\(run): \(difference)\nin \(script)")
                    Issue.record("\(difference)\nin \(script)")
                    firstDifference.keep("seq-\(run): \(difference)")
                }
            }
            if let seen = firstDifference.seen { Issue.record("\(seen)") }
            let (runs, operations) = counters.withLock { ($0.runs, $0.operations) }
            print("core differential: \(runs) sequences, \(operations) operations against local disk")
            #expect(runs > 0)
        }
    }

    @Test(.timeLimit(.minutes(10)))
    func eachKeptSequenceMatchesLocalDisk() async throws {
        try await CoreFixture.with { core in
            for (index, kept) in KeptSequences.all.enumerated() {
                let outcome = try await core.differential(kept.operations, named: "\(index)", base: "/kept")
                #expect(throws: Never.self, "\(kept.name)") { try outcome.get() }
            }
        }
    }
}
