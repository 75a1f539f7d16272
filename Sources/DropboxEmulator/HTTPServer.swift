import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// The emulator's HTTP/1.1 listener on SwiftNIO. Each connection is served by one task that
/// reads a request, lets `Emulator` answer it, and goes on to the next (keep-alive). Bodies
/// are async sequences in both directions, so they stream with backpressure and a large
/// upload or download never sits in memory.
final class HTTPServer: Sendable {
    typealias Connection = NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>

    let port: Int
    /// Yields each accepted connection as a plain channel, wrapped for async use only by the
    /// task that serves it. Wrapped at accept, one accepted as the listener closes could be
    /// dropped unserved inside NIO, and its unfinished writer stopped the process ("Deinited
    /// NIOAsyncWriter without calling finish()").
    private let serverChannel: NIOAsyncChannel<any Channel, Never>
    private let connections: OpenChannels

    private init(port: Int, serverChannel: NIOAsyncChannel<any Channel, Never>, connections: OpenChannels) {
        self.port = port
        self.serverChannel = serverChannel
        self.connections = connections
    }

    static func bind(host: String, port: Int, group: MultiThreadedEventLoopGroup) async throws -> HTTPServer {
        let connections = OpenChannels()
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            // Nothing is read before the serving task has its handlers in place.
            .childChannelOption(.autoRead, value: false)
            // Large reads for upload bodies: fewer hops between the event loop and the task.
            .childChannelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 4096, initial: 65536, maximum: 256 << 10))
            .bind(host: host, port: port) { child in
                child.eventLoop.makeCompletedFuture {
                    try child.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    connections.add(child)
                    return child
                }
            }
        return HTTPServer(port: channel.channel.localAddress?.port ?? port, serverChannel: channel, connections: connections)
    }

    /// Accepts connections until the listener is closed.
    func run(_ respond: @escaping @Sendable (Exchange) async throws -> Void) async throws {
        try await serverChannel.executeThenClose { accepted in
            try await withThrowingDiscardingTaskGroup { group in
                for try await channel in accepted {
                    group.addTask(executorPreference: EventLoopExecutor(channel.eventLoop)) { await Self.serve(channel, respond) }
                }
            }
        }
    }

    /// Stops listening: connects are refused from now on; open connections go on.
    func stopAccepting() async {
        try? await serverChannel.channel.close()
    }

    /// Stops listening and closes every connection, also one accepted but never served.
    func close() async {
        await stopAccepting()
        for channel in connections.all { channel.close(promise: nil) }  // the serving tasks end with them
    }

    private static func serve(_ channel: any Channel, _ respond: @Sendable (Exchange) async throws -> Void) async {
        let wrapped = try? await channel.eventLoop.submit {
            let connection = try Connection(wrappingChannelSynchronously: channel,
                                            configuration: .init(backPressureStrategy: .init(lowWatermark: 2, highWatermark: 8)))
            try channel.syncOptions?.setOption(.autoRead, value: true)
            return connection
        }.get()
        guard let connection = wrapped else {
            _ = try? await channel.close()  // closed meanwhile, as the listener closed
            return
        }
        try? await connection.executeThenClose { inbound, outbound in
            var parts = inbound.makeAsyncIterator()
            while let part = try await parts.next() {
                guard case .head(let head) = part else { continue }
                let body = RequestBody(parts)
                let exchange = Exchange(head: head, body: body, writer: ResponseWriter(outbound: outbound, channel: channel))
                try await respond(exchange)
                if exchange.writer.closed { return }
                parts = try await body.drained()
                if !head.isKeepAlive { return }
            }
        }
    }
}

/// The server's open connections, each forgotten once closed.
private final class OpenChannels: Sendable {
    private let channels = Mutex<[ObjectIdentifier: any Channel]>([:])

    func add(_ channel: any Channel) {
        let key = ObjectIdentifier(channel)
        channels.withLock { $0[key] = channel }
        channel.closeFuture.whenComplete { [self] _ in _ = channels.withLock { $0.removeValue(forKey: key) } }
    }

    var all: [any Channel] { channels.withLock { Array($0.values) } }
}

/// One request and the means to answer it.
final class Exchange: @unchecked Sendable {
    let head: HTTPRequestHead
    let body: RequestBody
    let writer: ResponseWriter

    init(head: HTTPRequestHead, body: RequestBody, writer: ResponseWriter) {
        self.head = head
        self.body = body
        self.writer = writer
    }
}
