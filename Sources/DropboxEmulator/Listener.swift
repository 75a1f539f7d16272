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

    static func open(host: String, port: Int, group: MultiThreadedEventLoopGroup,
                     respond: @escaping @Sendable (Exchange) async throws -> Void) async throws -> Listener {
        let server = try await HTTPServer.bind(host: host, port: port, group: group)
        return Listener(host: host, server: server, group: group, respond: respond)
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
