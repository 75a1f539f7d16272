import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// The emulator's port, which a test can take away and give back at runtime (an outage, as
/// clients see one: connections refused, open ones cut), always on the same port number.
final class Listener: Sendable {
    let host: String
    let port: Int
    private let group: MultiThreadedEventLoopGroup
    private let respond: @Sendable (Exchange) async throws -> Void
    /// The server and its accept loop while listening; nil while unreachable.
    private let current: Mutex<(server: HTTPServer, loop: Task<Void, Never>)?>
    /// One switch at a time: a close must end before a bind on the same port begins.
    private let switching = Mutex<Task<Void, Never>?>(nil)

    private init(host: String, server: HTTPServer, group: MultiThreadedEventLoopGroup,
                 respond: @escaping @Sendable (Exchange) async throws -> Void) {
        self.host = host
        self.port = server.port
        self.group = group
        self.respond = respond
        current = Mutex((server, Self.acceptLoop(server, group: group, respond)))
    }

    /// Port 0 asks for any free port, but not one the kernel hands out as the local port of an
    /// outgoing connection: while the emulator was unreachable, a client's connect took such a
    /// port and the emulator could not come back on it (EADDRINUSE, seen in a test beside
    /// others). So it is chosen below the kernel's ephemeral range, where connects never go.
    static func open(host: String, port: Int, group: MultiThreadedEventLoopGroup,
                     respond: @escaping @Sendable (Exchange) async throws -> Void) async throws -> Listener {
        // Any port at all only once those tried are all taken.
        let candidates = port == 0 ? portsBelowEphemeralRange() + [0] : [port]
        for candidate in candidates {
            do {
                let server = try await HTTPServer.bind(host: host, port: candidate, group: group)
                return Listener(host: host, server: server, group: group, respond: respond)
            } catch let error as IOError where error.errnoCode == EADDRINUSE && candidate != candidates.last {
                continue
            }
        }
        preconditionFailure("the last candidate returns or throws")
    }

    /// The first port the kernel hands out to outgoing connections (32,768 unless the machine
    /// says otherwise).
    static var firstEphemeralPort: Int {
        let range = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
        return range.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } ?? 32768
    }

    /// Random ports from 10,000 up to the first ephemeral port: a few tries, as other
    /// emulators of a test run pick theirs at once.
    static func portsBelowEphemeralRange() -> [Int] {
        let firstEphemeral = firstEphemeralPort
        guard firstEphemeral > 10_001 else { return [] }
        return (0..<64).map { _ in Int.random(in: 10_000..<firstEphemeral) }
    }

    /// Accepts on one of the emulator's event loops, not on the shared pool (`EventLoopExecutor`).
    private static func acceptLoop(_ server: HTTPServer, group: MultiThreadedEventLoopGroup,
                                   _ respond: @escaping @Sendable (Exchange) async throws -> Void) -> Task<Void, Never> {
        Task(executorPreference: EventLoopExecutor(group.next())) { _ = try? await server.run(respond) }
    }

    var isListening: Bool { current.withLock { $0 != nil } }

    /// Closes the listening socket at once (a `close` follows): connects are refused from now on.
    func stopAccepting() async {
        await current.withLock { $0?.server }?.stopAccepting()
    }

    /// Stops listening and ends open connections (cancelling their tasks closes them and
    /// ends waits such as longpolls): a client's next connect is refused.
    func close() async {
        await switched { [self] in
            guard let (server, loop) = current.withLock({ state in defer { state = nil }; return state }) else { return }
            await server.close()
            loop.cancel()
            await loop.value
        }
    }

    /// Listens again on the same port. Throws if the port was taken meanwhile.
    func reopen() async throws {
        let failure = Mutex<(any Error)?>(nil)
        await switched { [self] in
            guard !isListening else { return }
            do {
                let server = try await HTTPServer.bind(host: host, port: port, group: group)
                current.withLock { $0 = (server, Self.acceptLoop(server, group: group, respond)) }
            } catch {
                failure.withLock { $0 = error }
            }
        }
        if let error = failure.withLock({ $0 }) { throw error }
    }

    private func switched(_ body: @escaping @Sendable () async -> Void) async {
        let run = switching.withLock { last in
            let previous = last
            let run = Task { await previous?.value; await body() }
            last = run
            return run
        }
        await run.value
    }
}
