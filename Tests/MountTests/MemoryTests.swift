import Foundation
import TestSupport
import Testing

/// The daemon's memory over a long load: a mount runs for months, so what it holds must be
/// bounded by its settings, not grow with the operations it has served.
@Suite("mount: memory under a long load", .serialized, .timeLimit(.minutes(10)))
struct MemoryTests {
    /// Rounds of four processes creating, appending to, renaming, truncating and deleting
    /// files, each round's tree removed and its uploads done before the daemon's RSS is
    /// read: from the second round on (caches and pools warm) it levels off. (REPRODUCED:
    /// 37 MiB at the start, then 155, 159 and 166 MiB after rounds of a like workload, not
    /// coming down when the trees were gone and the queue empty.)
    @Test func memoryLevelsOffOverRoundsOfMixedWork() async throws {
        try await MountFixture.with(seeds: []) { m in
            let daemon = try #require(m.daemonPIDs().first)
            var resident: [Int] = []
            for round in 1...6 {
                let worked = try await m.python(Self.round(round), timeout: 300)
                #expect(worked.status == 0, "\(worked.stderr)")
                // A report written after the round counts its marker upload.
                try await eventually("round \(round)'s uploads to be done", timeout: 120) {
                    let status = try await m.status()
                    return status.contains("uploads     0 pending") && Self.uploadsDone(status) >= round
                }
                resident.append(try Self.residentKiB(daemon))
            }
            // Levelled off: the last two rounds within 8 MiB of each other (a leak grows every
            // round), and bounded: within 48 MiB of the second round. With the other suites
            // running beside it, one run read [49948, 48688, 60516, 67336, 77236, 77100] KiB
            // and another one reading 11.6 MiB high that the next round gave back; alone,
            // the growth is under 1 MiB.
            #expect(abs(resident[5] - resident[4]) < 8 << 10, "daemon RSS after each round (KiB): \(resident)")
            #expect(resident[5] - resident[1] < 48 << 10, "daemon RSS after each round (KiB): \(resident)")
        }
    }

    /// One round: four processes, 150 files each, made durable (uploaded), then the round's
    /// tree removed and a marker file made durable.
    static func round(_ round: Int) -> String {
        """
        import multiprocessing, os, shutil
        root = os.environ["M"] + "/round-\(round)"

        def work(folder):
            os.makedirs(folder)
            for i in range(1, 151):
                path = f"{folder}/f{i}"
                with open(path, "w") as f:
                    f.write(f"content {i} of {folder}\\n")
                with open(path, "ab") as f:
                    f.write(os.urandom(i * 37 % 9000))
                if i % 3 == 0:
                    os.rename(path, f"{folder}/g{i}")
                elif i % 5 == 0:
                    os.truncate(path, 100)
                if i % 7 == 0 and os.path.exists(f"{folder}/f{i - 1}"):
                    os.unlink(f"{folder}/f{i - 1}")

        workers = [multiprocessing.Process(target=work, args=(f"{root}/w{w}",)) for w in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
            assert worker.exitcode == 0, worker.exitcode
        os.fsync(os.open(root, os.O_RDONLY))  # on Dropbox, then removed there too
        shutil.rmtree(root)
        marker = os.open(os.environ["M"] + "/marker-\(round)", os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(marker, b"done")
        os.fsync(marker)
        os.close(marker)
        """
    }

    static func uploadsDone(_ status: String) -> Int {
        let line = status.split(separator: "\n").first { $0.contains("uploads") } ?? ""
        guard let range = line.range(of: #"(\d+) done"#, options: .regularExpression) else { return 0 }
        return Int(line[range].split(separator: " ").first ?? "") ?? 0
    }

    static func residentKiB(_ pid: Int32) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
    }
}
