import Foundation

/// Runs programs as a user would, for tests: a clean environment, output captured, a time
/// limit. It waits without blocking Swift's cooperative threads, because the emulator the
/// program talks to runs in the test process and needs them to answer.
public enum ProcessRunner {
    public struct Result: Sendable {
        public var status: Int32
        public var stdout: String
        public var stderr: String
        public var stderrLines: [String] { stderr.split(separator: "\n").map(String.init) }
        public var requestID: String? {
            stderr.components(separatedBy: "request id ").dropFirst().first?.components(separatedBy: ")").first
        }
    }

    /// Products built by `swift build` sit beside the test bundle.
    public static func builtProduct(_ name: String) -> String {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        if directory.lastPathComponent.hasSuffix(".xctest") { directory = directory.deletingLastPathComponent() }
        for candidate in [directory, directory.deletingLastPathComponent()] {
            let path = candidate.appendingPathComponent(name).path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return ".build/debug/" + name
    }

    public static let defaultEnvironment = [
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": FileManager.default.temporaryDirectory.path,
        "LC_ALL": "C.UTF-8",
    ]

    public static func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                           timeout: Double = 60) async throws -> Result {
        let child = try ChildProcess(executable, arguments, environment: defaultEnvironment.merging(environment) { _, new in new })
        let watchdog = DispatchWorkItem { child.signal(SIGTERM) }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: watchdog)
        defer { watchdog.cancel() }
        // Cancelled (a test's time limit) while the program runs: it is killed, with what it
        // started, and its output so far is the answer.
        return try await withTaskCancellationHandler {
            try await offPool {
                let (stdout, stderr) = child.readOutput()
                return Result(status: child.waitForExit(), stdout: String(decoding: stdout, as: UTF8.self),
                              stderr: String(decoding: stderr, as: UTF8.self))
            }
        } onCancel: {
            child.signal(SIGKILL)
        }
    }

    /// Runs a shell command line (for pipelines such as `ls -lR | wc -l`).
    public static func shell(_ command: String, environment: [String: String] = [:], timeout: Double = 120) async throws -> Result {
        try await run("/bin/sh", ["-c", command], environment: environment, timeout: timeout)
    }
}
