import Foundation
import Testing
import TestSupport

/// The runner every CLI and mount test starts programs with: what a program gets and what
/// the test process keeps once it has ended.
@Suite("test process runner", .timeLimit(.minutes(2)))
struct ProcessRunnerTests {
    @Test func statusAndBothOutputsComeBack() async throws {
        let result = try await ProcessRunner.shell("echo out; echo err >&2; exit 3")
        #expect(result.status == 3)
        #expect(result.stdout == "out\n")
        #expect(result.stderr == "err\n")
        let killed = try await ProcessRunner.shell("kill -9 $$")
        #expect(killed.status == SIGKILL)
    }

    /// A program starts clean: only stdin, stdout and stderr open, no signal
    /// blocked or ignored (the test process ignores SIGPIPE, and Dispatch's threads block
    /// SIGCHLD and SIGTERM).
    @Test func aProgramInheritsNoDescriptorAndNoSignalState() async throws {
        let held = open("/dev/null", O_RDONLY)
        defer { close(held) }
        let result = try await ProcessRunner.shell("ls /proc/self/fd; grep -E '^Sig(Blk|Ign)' /proc/self/status")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        // `ls` itself holds one more: the listed directory.
        #expect(lines.filter { Int($0) != nil }.count == 4, "\(lines)")
        #expect(lines.contains("SigBlk:\t0000000000000000"), "\(lines)")
        // glibc keeps its own two signals (32 and 33) ignored in a spawned program.
        let ignored = try #require(lines.first { $0.hasPrefix("SigIgn:") }.flatMap { UInt64($0.dropFirst(8), radix: 16) })
        #expect(ignored & 0x7fff_ffff == 0, "\(lines)")
    }

    /// The read ends of a finished program's pipes are closed: Foundation's Process kept them,
    /// and a full run held 2,400 of them.
    @Test func aFinishedProgramLeavesNoDescriptorOpen() async throws {
        func pipesOpen() throws -> Int {
            try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").filter {
                ((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0)) ?? "").hasPrefix("pipe:")
            }.count
        }
        let before = try pipesOpen()
        for _ in 0..<100 { _ = try await ProcessRunner.run("/bin/true", []) }
        // Other tests run beside this one, each with a few pipes open for a moment.
        #expect(try pipesOpen() - before < 60)
    }

    /// A time limit ends the program and what it started: a shell waiting on a child that
    /// holds its stdout would otherwise keep the test waiting for the end of that output.
    @Test func aTimeLimitStopsWhatTheProgramStarted() async throws {
        let result = try await ProcessRunner.shell("sleep 600 & wait", timeout: 1)
        #expect(result.status == SIGTERM)
    }
}
