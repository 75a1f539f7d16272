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
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = defaultEnvironment.merging(environment) { _, new in new }
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        let exited = AsyncStream<Void> { continuation in
            process.terminationHandler = { _ in continuation.yield(); continuation.finish() }
        }
        try await spawnWithNoSignalsBlocked(process)
        let watchdog = DispatchWorkItem { if process.isRunning { process.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: watchdog)
        async let stdout = readAll(out.fileHandleForReading)
        async let stderr = readAll(err.fileHandleForReading)
        for await _ in exited {}
        watchdog.cancel()
        // Cancelled (a test's time limit) while the process runs: it is stopped, and its
        // status is not read (Foundation traps on a running process's status, which took the
        // whole test run down with it).
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        return Result(status: process.isRunning ? -1 : process.terminationStatus, stdout: String(decoding: await stdout, as: UTF8.self),
                      stderr: String(decoding: await stderr, as: UTF8.self))
    }

    /// Runs a shell command line (for pipelines such as `ls -lR | wc -l`).
    public static func shell(_ command: String, environment: [String: String] = [:], timeout: Double = 120) async throws -> Result {
        try await run("/bin/sh", ["-c", command], environment: environment, timeout: timeout)
    }

    /// Starts `process` from a thread that blocks no signal, since a child inherits the mask
    /// of the thread that spawns it: Dispatch's worker threads block SIGCHLD and SIGTERM, so a
    /// shell started from one hung in `wait` (it never learnt its children ended) and
    /// ignored the watchdog's SIGTERM.
    private static func spawnWithNoSignalsBlocked(_ process: Process) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            Thread {
                var none = sigset_t()
                sigemptyset(&none)
                pthread_sigmask(SIG_SETMASK, &none, nil)
                do {
                    try process.run()
                    continuation.resume()
                } catch {
                    continuation.resume(throwing: error)
                }
            }.start()
        }
    }

    private static func readAll(_ handle: FileHandle) async -> Data {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: handle.readDataToEndOfFile()) }.start()
        }
    }
}
