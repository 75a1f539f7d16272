import Foundation
import NIOCore
import NIOHTTP1

/// Writes one response: JSON, text, an error in Dropbox's shapes, or a file range streamed
/// from disk. Applies the request's `reset` and `bandwidth` faults to the body.
final class ResponseWriter {
    private let outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>
    private let channel: any Channel
    let requestID = Identifiers.random(32).lowercased()
    /// True once the connection was dropped on purpose (a `reset` fault).
    private(set) var closed = false
    private(set) var bodyBytesWritten: Int64 = 0
    /// True once the status line went out: an error after that can only drop the connection.
    private(set) var headSent = false
    var throttle: Throttle?
    /// `reset` fault: drop the connection after this many body bytes (nil inside: half).
    var resetAfter: Int64??
    /// `drop` fault: close the connection instead of answering.
    var dropAnswer = false
    /// Runs before a dropped answer's connection closes (`drop:offline=1`).
    var beforeDrop: (@Sendable () async -> Void)?

    static let chunkSize = 1 << 20

    init(outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>, channel: any Channel) {
        self.outbound = outbound
        self.channel = channel
    }

    func send(status: HTTPResponseStatus, contentType: String, body: [UInt8], headers extra: [(String, String)] = []) async throws {
        if dropAnswer { return await drop() }
        var buffer = channel.allocator.buffer(capacity: body.count)
        buffer.writeBytes(body)
        let headers = [("Content-Type", contentType)] + extra
        guard throttle == nil, resetAfter == nil else {
            try await writeHead(status: status, length: Int64(body.count), headers: headers)
            try await writeBody(buffer, total: Int64(body.count))
            if !closed { try await outbound.write(.end(nil)) }
            return
        }
        // Without faults, the whole response in one write: a write each for its head, body
        // and end went to the event loop and the socket three times, and woke the client
        // as often (a third of the emulator's CPU while 1,000 small uploads came in).
        let head = makeHead(status: status, length: Int64(body.count), headers: headers)
        headSent = true
        bodyBytesWritten += Int64(body.count)
        try await outbound.write(contentsOf: body.isEmpty ? [.head(head), .end(nil)] : [.head(head), .body(.byteBuffer(buffer)), .end(nil)])
    }

    func sendJSON(_ json: JSON, status: HTTPResponseStatus = .ok, headers: [(String, String)] = []) async throws {
        try await send(status: status, contentType: "application/json", body: json.bytes, headers: headers)
    }

    func sendText(_ text: String, status: HTTPResponseStatus, headers: [(String, String)] = []) async throws {
        try await send(status: status, contentType: "text/plain; charset=utf-8", body: Array(text.utf8), headers: headers)
    }

    func sendFailure(_ failure: APIFailure) async throws {
        switch failure {
        case .badInput(let message):
            try await sendText(message, status: .badRequest)
        case .unknownRoute(let path):
            try await sendText("Unknown API function: \"\(path)\"", status: .notFound)
        case .auth(let tag):
            let error = JSON.tagged(tag)
            try await sendJSON(.object([("error_summary", .string(APIFailure.summary(of: error))), ("error", error)]),
                               status: .unauthorized)
        case .accessDenied:
            let error = JSON.tagged("no_permission")
            try await sendJSON(.object([("error_summary", .string(APIFailure.summary(of: error))), ("error", error)]), status: .forbidden)
        case .route(let error, let userMessage):
            var fields: [(String, JSON)] = [("error_summary", .string(APIFailure.summary(of: error))), ("error", error)]
            if let userMessage {
                fields.append(("user_message", .object([("locale", .string("en")), ("text", .string(userMessage))])))
            }
            try await sendJSON(.object(fields), status: .conflict)
        case .rateLimited(let reason, let retryAfter):
            let body = JSON.object([
                ("error_summary", .string(reason + "/...")),
                ("error", .object([("reason", .tagged(reason)), ("retry_after", .int(Int64(retryAfter)))])),
            ])
            try await sendJSON(body, status: .tooManyRequests, headers: [("Retry-After", String(retryAfter))])
        case .pathRoot(let error):
            try await sendJSON(.object([("error_summary", .string(APIFailure.summary(of: error))), ("error", error)]),
                               status: HTTPResponseStatus(statusCode: 422))
        case .server(let status):
            try await sendText(status == 503 ? "Service unavailable (injected fault)" : "Internal server error (injected fault)",
                               status: HTTPResponseStatus(statusCode: status))
        }
    }

    /// Streams `length` bytes of `fd` from `offset` as the body.
    func sendFile(status: HTTPResponseStatus, headers: [(String, String)], fd: Int32?, offset: Int64, length: Int64) async throws {
        if dropAnswer { return await drop() }
        try await writeHead(status: status, length: length, headers: headers)
        if let fd, length > 0, throttle == nil, resetAfter == nil {
            try await sendZeroCopy(fd: fd, offset: offset, length: length)
            return
        }
        var position = offset
        var remaining = length
        let chunkLimit = throttle?.chunkSize(atMost: Self.chunkSize) ?? Self.chunkSize
        while remaining > 0, let fd, !closed {
            let want = Int(min(Int64(chunkLimit), remaining))
            var buffer = channel.allocator.buffer(capacity: want)
            let n = try buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: want) { raw -> Int in
                let got = pread(fd, raw.baseAddress, want, off_t(position))
                if got < 0 { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
                return got
            }
            guard n > 0 else { throw POSIXError(.EIO) }
            try await writeBody(buffer, total: length)
            position += Int64(n)
            remaining -= Int64(n)
        }
        if !closed { try await outbound.write(.end(nil)) }
    }

    /// The fast path without faults: the kernel copies file to socket (sendfile). These writes
    /// bypass the async writer so that their completion is known and the descriptor can be
    /// closed; event-loop ordering keeps them behind the head written just before.
    private func sendZeroCopy(fd: Int32, offset: Int64, length: Int64) async throws {
        let handle = NIOFileHandle(_deprecatedTakingOwnershipOfDescriptor: dup(fd))
        defer { try? handle.close() }
        let region = FileRegion(fileHandle: handle, readerIndex: Int(offset), endIndex: Int(offset + length))
        try await channel.writeAndFlush(HTTPServerResponsePart.body(.fileRegion(region))).get()
        bodyBytesWritten += length
        try await channel.writeAndFlush(HTTPServerResponsePart.end(nil)).get()
    }

    private func writeHead(status: HTTPResponseStatus, length: Int64, headers: [(String, String)]) async throws {
        headSent = true
        try await outbound.write(.head(makeHead(status: status, length: length, headers: headers)))
    }

    private func makeHead(status: HTTPResponseStatus, length: Int64, headers: [(String, String)]) -> HTTPResponseHead {
        var head = HTTPHeaders(headers)
        head.add(name: "Content-Length", value: String(length))
        head.add(name: "X-Dropbox-Request-Id", value: requestID)
        return HTTPResponseHead(version: .http1_1, status: status, headers: head)
    }

    private func writeBody(_ buffer: ByteBuffer, total: Int64) async throws {
        var buffer = buffer
        if let resetAfter {
            let limit = resetAfter ?? total / 2
            if bodyBytesWritten + Int64(buffer.readableBytes) > limit {
                let keep = Int(max(0, limit - bodyBytesWritten))
                if keep > 0, let slice = buffer.readSlice(length: keep) {
                    try await outbound.write(.body(.byteBuffer(slice)))
                }
                await abortConnection()
                return
            }
        }
        if buffer.readableBytes == 0 { return }
        bodyBytesWritten += Int64(buffer.readableBytes)
        await throttle?.pace(buffer.readableBytes)
        try await outbound.write(.body(.byteBuffer(buffer)))
    }

    /// A `drop` fault's end: the connection closed instead of an answer.
    private func drop() async {
        await beforeDrop?()
        await abortConnection()
    }

    /// Drops the connection with a TCP reset, as a failing network would.
    func abortConnection() async {
        closed = true
        try? await (channel as? any SocketOptionProvider)?.setSoLinger(linger(l_onoff: 1, l_linger: 0)).get()
        try? await channel.close()
    }
}
