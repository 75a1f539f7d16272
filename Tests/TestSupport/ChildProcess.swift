import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A program started with posix_spawn for a test, with blocking calls only (callers put them
/// on threads of their own): read its output, wait for it, signal it.
///
/// Not Foundation's `Process`, which the runner used before: it never closed the read ends of
/// its pipes (2,400 descriptors open by the middle of a full run), listed /proc/self/fd at
/// every start to close them in the child, and its `readDataToEndOfFile` traps (`try!`) on a
/// read that a signal interrupts. A CI run died inside `Process.run`, with that trap's message.
public final class ChildProcess: @unchecked Sendable {
    public let pid: pid_t
    private var output: Int32
    private var errors: Int32
    private let lock = NSLock()
    /// Set once the program has ended, before it is reaped: from then on its pid (and process
    /// group) may belong to another process, so nothing is sent to it.
    private var ended = false

    /// Starts `executable` with exactly `environment`, stdin from /dev/null, stdout and stderr
    /// to pipes, no descriptor of this process but those, every signal at its default and
    /// none blocked (a Dispatch thread blocks SIGCHLD and SIGTERM, and a shell that inherited
    /// that hung in `wait`), in a process group of its own so that a time limit stops the
    /// programs it started too.
    public init(_ executable: String, _ arguments: [String], environment: [String: String]) throws {
        var outputPipe: [Int32] = [-1, -1]
        var errorPipe: [Int32] = [-1, -1]
        guard pipe(&outputPipe) == 0 else { throw POSIXError.current }
        guard pipe(&errorPipe) == 0 else {
            let error = POSIXError.current
            outputPipe.forEach { close($0) }
            throw error
        }
        (outputPipe + errorPipe).forEach { _ = fcntl($0, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, outputPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errorPipe[1], 2)
        _ = closeFrom(&actions, 3)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var everySignal = sigset_t()
        sigfillset(&everySignal)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &everySignal)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid = pid_t()
        let failure = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        close(outputPipe[1])
        close(errorPipe[1])
        guard failure == 0 else {
            close(outputPipe[0])
            close(errorPipe[0])
            throw POSIXError(POSIXErrorCode(rawValue: failure) ?? .EIO)
        }
        self.pid = pid
        output = outputPipe[0]
        errors = errorPipe[0]
    }

    deinit {
        if output >= 0 { close(output) }
        if errors >= 0 { close(errors) }
    }

    /// Reads stdout and stderr until both end (the program and whatever it started that kept
    /// them have closed them), then closes them. Call once.
    public func readOutput() -> (stdout: Data, stderr: Data) {
        var collected = [Data(), Data()]
        var descriptors = [pollfd(fd: output, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: errors, events: Int16(POLLIN), revents: 0)]
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        // A process the program started in a session of its own (a daemon) may hold the
        // pipes past the program's end, and for good if it hangs: once the program has
        // ended, its output is what came within `afterEnd`.
        let afterEnd = 10.0
        var endedAt: Date?
        while descriptors.contains(where: { $0.fd >= 0 }) {
            let ready = poll(&descriptors, nfds_t(descriptors.count), 500)
            if ready < 0 {
                if errno == EINTR { continue }
                break
            }
            if ready == 0 {
                if endedAt == nil && hasEnded() { endedAt = Date() }
                if let endedAt, Date().timeIntervalSince(endedAt) > afterEnd { break }
                continue
            }
            for index in descriptors.indices where descriptors[index].fd >= 0 && descriptors[index].revents != 0 {
                let count = buffer.withUnsafeMutableBytes { read(descriptors[index].fd, $0.baseAddress, $0.count) }
                if count > 0 {
                    collected[index].append(contentsOf: buffer[0..<count])
                } else if count == 0 || errno != EINTR {
                    close(descriptors[index].fd)
                    descriptors[index].fd = -1
                }
            }
        }
        descriptors.filter { $0.fd >= 0 }.forEach { close($0.fd) }
        output = -1
        errors = -1
        return (collected[0], collected[1])
    }

    /// Whether the program has ended, without reaping it (`waitForExit` does).
    private func hasEnded() -> Bool {
        var info = siginfo_t()
        return waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info._sifields._sigchld.si_pid != 0
    }

    /// Waits for the program to end and reaps it: its exit status, or the number of the signal
    /// that ended it (as Foundation's `terminationStatus` says).
    public func waitForExit() -> Int32 {
        // Waits without reaping first, so that `signal` never reaches a reused pid.
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR {}
        lock.withLock { ended = true }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            if errno != EINTR { return -1 }
        }
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : signal
    }

    /// Sends `number` to the program's process group, unless the program has ended.
    public func signal(_ number: Int32) {
        lock.withLock {
            if !ended { _ = kill(-pid, number) }
        }
    }
}

/// posix_spawn_file_actions_addclosefrom_np (glibc 2.34), which Swift's Glibc module does not
/// show: without it a program would inherit every descriptor a test holds, files on a mount
/// among them.
private let closeFrom: @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32 = {
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else {
        fatalError("glibc 2.34 or later is needed: posix_spawn_file_actions_addclosefrom_np is missing")
    }
    return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
}()

extension POSIXError {
    /// The error errno names now.
    static var current: POSIXError { POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
}
