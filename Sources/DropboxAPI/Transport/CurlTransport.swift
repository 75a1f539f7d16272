import CCurlShim
import Dispatch
import Foundation
import Synchronization

/// HTTP over libcurl. Handles are pooled and reused, so connections stay alive between
/// requests (keep-alive; HTTP/2 over TLS where the server offers it). A small request (most
/// RPCs, a small file's upload) goes on the shared loop of curl's multi interface
/// (`CurlMultiLoop`); any other runs `curl_easy_perform` on a thread of `BlockingThreads`.
/// Either way its caller awaits the result, and bodies stream through curl's read and write
/// callbacks in both directions.
///
/// Cancelling the awaiting task aborts the transfer: on the loop at once, on a thread at
/// curl's next progress callback.
public final class CurlTransport: Sendable {
    public let userAgent: String
    private let pool = Mutex<[HandleBox]>([])
    private let performed = Atomic<Int64>(0)

    /// HTTP requests made so far (for `dropboxfs status`).
    public var requestCount: Int64 { performed.load(ordering: .relaxed) }

    private static let globalInit: Void = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

    public init(userAgent: String) {
        _ = Self.globalInit
        self.userAgent = userAgent
    }

    deinit {
        for box in pool.withLock({ $0 }) { curl_easy_cleanup(box.handle) }
    }

    public func perform(_ request: HTTPRequest) async throws -> HTTPResponse {
        let transfer = Transfer(request: request)
        performed.add(1, ordering: .relaxed)
        if Self.runsOnLoop(request) {
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<HTTPResponse, any Error>) in
                    CurlMultiLoop.shared.start(transfer, userAgent: userAgent) { continuation.resume(with: $0) }
                }
            } onCancel: {
                transfer.cancel()
                CurlMultiLoop.shared.wake()
            }
        }
        let box = checkout()
        defer { checkin(box) }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<HTTPResponse, any Error>) in
                // A thread of its own: a transfer blocks for its whole length, and Dispatch's
                // global pool (one thread per core) would make parallel transfers queue.
                let threads = transfer.request.background ? BlockingThreads.background : BlockingThreads.normal
                threads.run {
                    continuation.resume(with: Result { try transfer.run(on: box.handle, userAgent: self.userAgent) })
                }
            }
        } onCancel: {
            transfer.cancel()
        }
    }

    /// Whether `request` goes on the shared loop (`CurlMultiLoop`) rather than a thread of its
    /// own: a small body and an answer kept in memory, so that no callback of it waits for a
    /// disk; and not background work, whose thread runs at the lowest priority.
    static func runsOnLoop(_ request: HTTPRequest) -> Bool {
        guard !request.background, case .memory = request.sink else { return false }
        return request.body.length <= smallBody
    }

    /// The largest body sent from the loop: a few pages read from the page cache.
    static let smallBody: Int64 = 64 * 1024

    private func checkout() -> HandleBox {
        if let box = pool.withLock({ $0.popLast() }) { return box }
        return HandleBox(handle: curl_easy_init())
    }

    private func checkin(_ box: HandleBox) {
        curl_easy_reset(box.handle)  // keeps live connections and caches
        pool.withLock { $0.append(box) }
    }
}

/// A curl easy handle, owned by the pool or by the one request using it.
struct HandleBox: @unchecked Sendable {
    let handle: UnsafeMutableRawPointer
}

/// The state of one transfer, reached from curl's C callbacks through an unmanaged pointer.
/// Only the thread running the transfer touches it, except `cancelled`.
final class Transfer: @unchecked Sendable {
    let request: HTTPRequest
    private let cancelled = Atomic<Bool>(false)
    private var status = 0
    private var headers: [String: String] = [:]
    private var body: [UInt8] = []
    private var uploaded: Int64 = 0
    private var consumerError: (any Error)?
    private var overLimit = false
    /// The response's Content-Range was compared with `request.partialRange`.
    private var rangeChecked = false

    /// The largest body sent in one piece with the headers: curl does so up to its
    /// `MAX_INITIAL_POST_SIZE` (64 KiB) for headers and body together; 4 KiB is left for these.
    static let bodyWithHeadersLimit = 60 * 1024

    init(request: HTTPRequest) { self.request = request }

    func cancel() { cancelled.store(true, ordering: .relaxed) }

    /// The whole transfer on this thread, with curl's easy interface.
    func run(on handle: UnsafeMutableRawPointer, userAgent: String) throws -> HTTPResponse {
        let headerList = prepare(handle, userAgent: userAgent)
        defer { curl_slist_free_all(headerList) }
        return try outcome(curl_easy_perform(handle), handle: handle)
    }

    var isCancelled: Bool { cancelled.load(ordering: .relaxed) }

    /// Sets `handle`'s options for this transfer; the header list returned must outlive it.
    func prepare(_ handle: UnsafeMutableRawPointer, userAgent: String) -> UnsafeMutablePointer<curl_slist>? {
        var headerList: UnsafeMutablePointer<curl_slist>?
        // Never wait for "100 Continue" (Dropbox does not send it), and never let curl add its
        // form Content-Type to a bodiless POST (Dropbox refuses it): "Name:" with nothing
        // after the colon removes a header curl would add.
        var outgoing = request.headers + [("Expect", "")]
        if !outgoing.contains(where: { $0.0.lowercased() == "content-type" }) { outgoing.append(("Content-Type", "")) }
        for (name, value) in outgoing {
            headerList = curl_slist_append(headerList, value.isEmpty ? "\(name):" : "\(name): \(value)")
        }

        let context = Unmanaged.passUnretained(self).toOpaque()
        ccurl_setopt_string(handle, CURLOPT_URL, request.url)
        ccurl_setopt_string(handle, CURLOPT_USERAGENT, userAgent)
        ccurl_setopt_slist(handle, CURLOPT_HTTPHEADER, headerList)
        ccurl_setopt_long(handle, CURLOPT_NOSIGNAL, 1)
        // curl sends a bodiless request again on a fresh connection when a reused one dies
        // before a byte of answer, with no rewind to refuse (`seek`): one that must not be
        // repeated blindly takes a new connection, which curl never retries.
        if !request.resendable && request.body.length == 0 { ccurl_setopt_long(handle, CURLOPT_FRESH_CONNECT, 1) }
        ccurl_setopt_long(handle, CURLOPT_TCP_NODELAY, 1)
        ccurl_setopt_long(handle, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
        ccurl_setopt_long(handle, CURLOPT_SSL_VERIFYPEER, 1)
        ccurl_setopt_long(handle, CURLOPT_SSL_VERIFYHOST, 2)
        ccurl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, min(15_000, request.stallTimeout * 1000))
        ccurl_setopt_long(handle, CURLOPT_LOW_SPEED_LIMIT, 1)
        ccurl_setopt_long(handle, CURLOPT_LOW_SPEED_TIME, request.stallTimeout)
        if request.totalTimeout > 0 { ccurl_setopt_long(handle, CURLOPT_TIMEOUT, request.totalTimeout) }
        ccurl_setopt_long(handle, CURLOPT_BUFFERSIZE, 512 * 1024)
        ccurl_setopt_long(handle, CURLOPT_UPLOAD_BUFFERSIZE, 2 * 1024 * 1024)
        ccurl_setopt_pointer(handle, CURLOPT_WRITEDATA, context)
        ccurl_setopt_data_callback(handle, CURLOPT_WRITEFUNCTION, { buffer, size, count, context in
            Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue().received(buffer!, size * count)
        })
        ccurl_setopt_pointer(handle, CURLOPT_HEADERDATA, context)
        ccurl_setopt_data_callback(handle, CURLOPT_HEADERFUNCTION, { buffer, size, count, context in
            Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue().headerLine(buffer!, size * count)
        })
        ccurl_setopt_long(handle, CURLOPT_NOPROGRESS, 0)
        ccurl_setopt_pointer(handle, CURLOPT_XFERINFODATA, context)
        ccurl_setopt_progress_callback(handle, { context, _, downloaded, _, uploaded in
            Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue().progressed(sent: uploaded, received: downloaded)
        })
        switch request.method {
        case "GET": ccurl_setopt_long(handle, CURLOPT_HTTPGET, 1)
        default:
            ccurl_setopt_long(handle, CURLOPT_POST, 1)
            ccurl_setopt_off(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(request.body.length))
            // A small body in memory goes in the same send as the headers (curl copies it and
            // appends it to them): from a read callback it took a send, and a segment for the
            // server to read, of its own (1,000 uploads of 4 KiB: 1,000 sends fewer). Only
            // for a request that may go twice: curl resends copied fields without asking.
            if case .bytes(let bytes) = request.body, bytes.count <= Self.bodyWithHeadersLimit, request.resendable {
                bytes.withUnsafeBytes { _ = ccurl_setopt_pointer(handle, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: $0.baseAddress)) }
                return headerList
            }
            ccurl_setopt_pointer(handle, CURLOPT_READDATA, context)
            ccurl_setopt_data_callback(handle, CURLOPT_READFUNCTION, { buffer, size, count, context in
                Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue().send(into: buffer!, size * count)
            })
            // Lets curl rewind the body to resend it (a reused connection that had died).
            ccurl_setopt_pointer(handle, CURLOPT_SEEKDATA, context)
            ccurl_setopt_seek_callback(handle, { context, offset, origin in
                Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue().seek(to: Int64(offset), origin: origin)
            })
        }
        return headerList
    }

    /// What the transfer came to, once curl has finished it with `code`.
    func outcome(_ code: CURLcode, handle: UnsafeMutableRawPointer) throws -> HTTPResponse {
        if code != CURLE_OK { throw failure(code, handle: handle) }
        return HTTPResponse(status: status, headers: headers, body: body)
    }

    // MARK: Callbacks (worker thread)

    private func received(_ buffer: UnsafeMutablePointer<CChar>, _ count: Int) -> Int {
        let bytes = UnsafeRawBufferPointer(start: buffer, count: count)
        if status >= 300 || status == 0 {
            if body.count < 1 << 20 { body += bytes }
            return count
        }
        if let range = request.partialRange, !rangeChecked {
            // Bytes of another range than the one asked for must never reach the sink (they
            // would be cached under the file's hash): a 200 ignored the Range header, a 206
            // must say, in Content-Range, that it starts where asked and ends inside.
            guard status == 206 else {
                consumerError = TransportError(kind: .other, message: "server ignored the byte range (HTTP \(status))")
                return 0
            }
            let served = headers["content-range"].flatMap(ContentRange.init)
            guard let served, served.first == range.lowerBound, served.last < range.upperBound else {
                consumerError = TransportError(kind: .badResponse, message: "asked for bytes \(range.lowerBound)-\(range.upperBound - 1), "
                                               + "server sent Content-Range \(headers["content-range"] ?? "(none)")")
                return 0
            }
            rangeChecked = true
        }
        switch request.sink {
        case .memory(let limit):
            guard body.count + count <= limit else { overLimit = true; return 0 }
            // Room for the whole answer at once: grown as the pieces came, a listing page's
            // body was copied again and again into fresh memory (7 % of the daemon's CPU in
            // the first listing of a folder of 100,000 files, page faults included).
            if body.isEmpty, let length = headers["content-length"].flatMap(Int.init), length > count, length <= limit {
                body.reserveCapacity(length)
            }
            body += bytes
        case .stream(let consume):
            do { try consume(bytes) } catch {
                consumerError = error
                return 0
            }
        }
        return count
    }

    private func headerLine(_ buffer: UnsafeMutablePointer<CChar>, _ count: Int) -> Int {
        let bytes = Self.trimmingHTTPSpace(UnsafeRawBufferPointer(start: buffer, count: count)[...])
        if bytes.starts(with: "HTTP/".utf8) {
            // A new response (after an interim one): start over.
            let parts = bytes.split(separator: UInt8(ascii: " "))
            status = parts.count > 1 ? Int(String(decoding: parts[1], as: UTF8.self)) ?? 0 : 0
            headers = [:]
            rangeChecked = false
        } else if let colon = bytes.firstIndex(of: UInt8(ascii: ":")) {
            let name = String(decoding: bytes[..<colon], as: UTF8.self).lowercased()
            headers[name] = String(decoding: Self.trimmingHTTPSpace(bytes[(colon + 1)...]), as: UTF8.self)
        }
        return count
    }

    /// `bytes` without the spaces, tabs and line ends around them (the only white space an
    /// HTTP header line has). Foundation's `trimmingCharacters` took 2.4 % of the daemon's CPU
    /// while 1,000 small files uploaded: a header line each call, a dozen lines a response.
    static func trimmingHTTPSpace(_ bytes: Slice<UnsafeRawBufferPointer>) -> Slice<UnsafeRawBufferPointer> {
        let isSpace = { (byte: UInt8) in byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A }
        guard let first = bytes.firstIndex(where: { !isSpace($0) }), let last = bytes.lastIndex(where: { !isSpace($0) }) else {
            return bytes[bytes.startIndex..<bytes.startIndex]
        }
        return bytes[first...last]
    }

    private func send(into buffer: UnsafeMutablePointer<CChar>, _ capacity: Int) -> Int {
        let remaining = request.body.length - uploaded
        let count = Int(min(Int64(capacity), remaining))
        guard count > 0 else { return 0 }
        switch request.body {
        case .none: return 0
        case .bytes(let bytes):
            bytes.withUnsafeBytes { source in
                UnsafeMutableRawPointer(buffer).copyMemory(from: source.baseAddress! + Int(uploaded), byteCount: count)
            }
        case .file(let fd, let offset, _):
            let n = pread(fd, buffer, count, off_t(offset + uploaded))
            guard n > 0 else {
                consumerError = POSIXError(POSIXErrorCode(rawValue: n < 0 ? errno : EIO) ?? .EIO)
                return Int(CURL_READFUNC_ABORT)
            }
            uploaded += Int64(n)
            return n
        }
        uploaded += Int64(count)
        return count
    }

    /// curl rewinds the body to send the request again (`HTTPRequest.resendable`).
    private func seek(to offset: Int64, origin: Int32) -> Int32 {
        guard origin == SEEK_SET, offset >= 0, offset <= request.body.length else { return Int32(CURL_SEEKFUNC_CANTSEEK) }
        guard request.resendable || uploaded == 0 else { return Int32(CURL_SEEKFUNC_CANTSEEK) }
        uploaded = offset
        return Int32(CURL_SEEKFUNC_OK)
    }

    private func progressed(sent: curl_off_t, received: curl_off_t) -> Int32 {
        if cancelled.load(ordering: .relaxed) { return 1 }
        request.progress?(Int64(sent), Int64(received))
        return 0
    }

    private func failure(_ code: CURLcode, handle: UnsafeMutableRawPointer) -> any Error {
        if let consumerError { return consumerError }
        if overLimit { return TransportError(kind: .consumerFailed, message: "response body larger than expected") }
        let message = String(cString: curl_easy_strerror(code))
        switch code {
        case CURLE_ABORTED_BY_CALLBACK:
            return cancelled.load(ordering: .relaxed) ? CancellationError() : TransportError(kind: .other, message: message)
        case CURLE_OPERATION_TIMEDOUT:
            return TransportError(kind: .timedOut, message: message)
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            let server = URL(string: request.url).map { "\($0.scheme ?? "")://\($0.host ?? "")\($0.port.map { ":\($0)" } ?? "")" } ?? ""
            // The request went out on a reused connection that died before a byte of answer,
            // and curl's fresh connection for its second try was refused (the network went
            // with the answer): the server may have carried out the first, so its outcome is
            // unknown, not "never sent". (Resendable or not: a lone file's `files/upload` may
            // be sent again, but a first try that committed it must not be taken for none.)
            // curl counts the request bytes it sent, headers too: an empty file's upload has
            // no body byte to show it went.
            var requestBytes = 0
            if uploaded > 0 || (ccurl_getinfo_long(handle, CURLINFO_REQUEST_SIZE, &requestBytes) == CURLE_OK && requestBytes > 0) {
                return TransportError(kind: .connectionLost, message: "connection lost after the request was sent (\(message) again: \(server))")
            }
            return TransportError(kind: .cannotConnect, message: "\(message): \(server)")
        case CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_PARTIAL_FILE, CURLE_GOT_NOTHING, CURLE_HTTP2, CURLE_HTTP2_STREAM,
             CURLE_SEND_FAIL_REWIND:
            return TransportError(kind: .connectionLost, message: message)
        default:
            return TransportError(kind: .other, message: message)
        }
    }
}
