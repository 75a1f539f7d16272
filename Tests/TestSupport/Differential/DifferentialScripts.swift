import Foundation
import PropertyBased
import Synchronization

/// A generated sequence of operations and the seed it came from (kept through shrinking,
/// for the report).
public struct DifferentialScript: Sendable, CustomStringConvertible {
    public var seed: UInt64
    public var operations: [Step]
    public var description: String {
        "seed \(seed), \(operations.count) steps:\n" + operations.enumerated().map { "  \($0.offset): \($0.element)" }.joined(separator: "\n")
    }

    /// How many sequences a run checks: `DROPBOXFS_DIFF_SEQUENCES`, else `fixed`.
    public static func count(default fixed: Int) -> Int {
        Int(ProcessInfo.processInfo.environment["DROPBOXFS_DIFF_SEQUENCES"] ?? "") ?? fixed
    }

    /// A seed's steps less those `DROPBOXFS_DIFF_DROP` numbers ("3,17,40"): for shrinking by
    /// hand (or by a script) a failure that depends on timing, which the property checker's
    /// shrinking loses, replaying the seed with steps left out.
    static func keptSteps(_ steps: [Step]) -> [Step] {
        if droppedSteps.isEmpty { return steps }
        return steps.enumerated().filter { !droppedSteps.contains($0.offset) }.map(\.element)
    }

    private static let droppedSteps = Set((ProcessInfo.processInfo.environment["DROPBOXFS_DIFF_DROP"] ?? "").split(separator: ",").compactMap { Int($0) })

    /// Scripts from consecutive seeds (`DROPBOXFS_DIFF_SEED`, from 1 by default: what CI
    /// runs) or, with `DROPBOXFS_DIFF_SEED=random`, from the property checker's random
    /// numbers; shrunk by dropping steps.
    /// `seedOffset` shifts the fixed seeds: sequences run at once draw from streams of their own.
    /// `firstSeed` starts the stream at that seed whatever the setting (to replay a round of
    /// the four-at-once suite, whose streams each printed their own).
    /// `mix`: what the sequences are made of (`DROPBOXFS_DIFF_MIX` by default), and how long.
    public static func generator(seedOffset: UInt64 = 0, firstSeed: UInt64? = nil,
                                 mix: SequenceGenerator.Mix = .fromEnvironment) -> Generator<DifferentialScript, AnySequence<DifferentialScript>> {
        let seeds = Seeds(offset: seedOffset, first: firstSeed)
        return Generator(
            run: { rng in
                let seed = seeds.take(&rng)
                var random = SequenceGenerator(seed: seed, mix: mix)
                return DifferentialScript(seed: seed, operations: Self.keptSteps(random.sequence(length: mix.lengths)))
            },
            shrink: { script in
                AnySequence(Shrink.shrinkArray(script.operations, shrinker: { _ in EmptyCollection<Step>() }, lowerBound: 1)
                    .lazy.map { DifferentialScript(seed: script.seed, operations: $0) })
            })
    }

    /// Where seeds come from: consecutive fixed ones, or the property checker's random.
    private final class Seeds: Sendable {
        private let next: Mutex<UInt64?>
        init(offset: UInt64, first: UInt64?) {
            let setting = ProcessInfo.processInfo.environment["DROPBOXFS_DIFF_SEED"] ?? "1"
            next = Mutex(first ?? (setting == "random" ? nil : (UInt64(setting) ?? 1) + offset))
        }
        func take(_ rng: inout any SeededRandomNumberGenerator) -> UInt64 {
            next.withLock { next in
                guard let seed = next else { return rng.next() }
                next = seed + 1
                return seed
            }
        }
    }
}
