import NIOCore
import NIOHTTP1
import NIOPosix

/// The emulator's HTTP/1.1 listener on SwiftNIO. Each connection is served by one task that
/// reads a request, lets `Emulator` answer it, and goes on to the next (keep-alive). Bodies
/// are async sequences in both directions, so they stream with backpressure and a large
/// upload or download never sits in memory.
final class HTTPServer: Sendable {
    typealias Connection = NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>

    let port: Int
    private let serverChannel: NIOAsyncChannel<Connection, Never>

    private init(port: Int, serverChannel: NIOAsyncChannel<Connection, Never>) {
        self.port = port
        self.serverChannel = serverChannel
    }

    static func bind(host: String, port: Int, group: MultiThreadedEventLoopGroup) async throws -> HTTPServer {
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            // Large reads for upload bodies: fewer hops between the event loop and the task.
            .childChannelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 4096, initial: 65536, maximum: 256 << 10))
            .bind(host: host, port: port) { child in
                child.eventLoop.makeCompletedFuture {
                    try child.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    return try Connection(
                        wrappingChannelSynchronously: child,
                        configuration: .init(backPressureStrategy: .init(lowWatermark: 2, highWatermark: 8))
                    )
                }
            }
        return HTTPServer(port: channel.channel.localAddress?.port ?? port, serverChannel: channel)
    }

    /// Accepts connections until the listener is closed.
    func run(_ respond: @escaping @Sendable (Exchange) async throws -> Void) async throws {
        try await serverChannel.executeThenClose { connections in
            try await withThrowingDiscardingTaskGroup { group in
                for try await connection in connections {
                    group.addTask { await Self.serve(connection, respond) }
                }
            }
        }
    }

    func close() async {
        try? await serverChannel.channel.close()
    }

    private static func serve(_ connection: Connection, _ respond: @Sendable (Exchange) async throws -> Void) async {
        let channel = connection.channel
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
