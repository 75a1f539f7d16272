import Foundation
import TestSupport
import Testing

/// The sequences the differential suite found (`KeptSequences`), run through the mount.
@Suite("mount: differential regressions", .serialized, .timeLimit(.minutes(10)))
struct DifferentialRegressions {
    @Test func eachKeptSequenceMatchesLocalDisk() async throws {
        try await MountFixture.with(mount: false) { m in
            try await DifferentialTests.mount(m)
            let localBase = m.root.appendingPathComponent("local").path
            try FileManager.default.createDirectory(atPath: localBase, withIntermediateDirectories: true)
            _ = try await offPool { try Sys.mkdir(m.mountpoint + "/regressions").value("mkdir") }
            for (index, regression) in KeptSequences.all.enumerated() {
                let outcome = try await DifferentialRunner<Kernel>.run(regression.operations, named: "\(index)", base: "/regressions",
                                                               localBase: localBase, on: m)
                #expect(throws: Never.self, "\(regression.name)") { try outcome.get() }
            }
        }
    }
}
