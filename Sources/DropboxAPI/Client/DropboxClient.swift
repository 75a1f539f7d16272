import Foundation

/// The Dropbox API v2 client: the three request styles (RPC, upload, download) over
/// `CurlTransport`, errors decoded into `CallError`, transient failures retried, access
/// tokens supplied (and renewed on `expired_access_token`) by an `AccessTokenProvider`.
///
/// Layers: typed route methods (`Files.swift`, `Users.swift`) → `call` here (styles, auth,
/// retries, error decoding) → `CurlTransport` (libcurl). Higher-level transfers (sessions,
/// batches, whole-file get/put with content hashes) live in `Transfers/`.
public final class DropboxClient: Sendable {
    public let endpoints: Endpoints
    public let transport: CurlTransport
    public let tokens: (any AccessTokenProvider)?
    public let retry: RetryPolicy
    /// Whether Dropbox answers, as this client's calls find it.
    public let reachability: Reachability
    /// Sent as `Dropbox-API-Path-Root` with every authenticated request (nil: none, which is
    /// the home namespace).
    public let pathRoot: PathRoot?
    /// Sent as `Dropbox-API-Select-User`: the team member a team-wide token acts for.
    public let selectUser: String?

    public static let version = "0.1.0"
    public static let userAgent = "dropboxfs/\(version) (Swift; libcurl)"

    public init(endpoints: Endpoints, tokens: (any AccessTokenProvider)?, retry: RetryPolicy = RetryPolicy(),
                transport: CurlTransport = CurlTransport(userAgent: DropboxClient.userAgent),
                reachability: Reachability = Reachability(), pathRoot: PathRoot? = nil, selectUser: String? = nil) {
        self.endpoints = endpoints
        self.tokens = tokens
        self.retry = retry
        self.transport = transport
        self.reachability = reachability
        self.pathRoot = pathRoot
        self.selectUser = selectUser
    }

    /// The same account, credentials, connections and reachability, with paths relative to
    /// `root` (the SDK's `withPathRoot`).
    public func withPathRoot(_ root: PathRoot?) -> DropboxClient {
        DropboxClient(endpoints: endpoints, tokens: tokens, retry: retry, transport: transport, reachability: reachability,
                      pathRoot: root, selectUser: selectUser)
    }

    /// What a download route returned: its result and the response headers.
    public struct Downloaded<Result: Sendable>: Sendable {
        public var result: Result
        public var status: Int
    }

    /// An RPC call. `timeout`, for calls the server may answer only after a while (a
    /// longpoll, a large batch commit): how long it may stay silent, and last in all;
    /// otherwise the policy's `stallTimeout`, and two minutes in all at least.
    public func rpc<A, R, E>(_ route: Route<A, R, E>, _ argument: A, timeout: Int? = nil) async throws -> R {
        var request = makeRequest(route)
        let body = try APIJSON.encode(argument)
        if argument is NoArgument {
            request.body = .none
        } else {
            request.headers.append(("Content-Type", "application/json"))
            request.body = .bytes(body)
        }
        if let timeout {
            request.stallTimeout = timeout
            request.totalTimeout = timeout
        } else {
            request.totalTimeout = max(120, retry.stallTimeout)
        }
        return try await call(route, request).0
    }

    /// A request to a route, with the policy's stall timeout.
    private func makeRequest<A, R, E>(_ route: Route<A, R, E>) -> HTTPRequest {
        var request = HTTPRequest(url: endpoints.url(route.host, route: route.name))
        request.stallTimeout = retry.stallTimeout
        request.resendable = route.retry == .idempotent
        return request
    }

    public func upload<A, R, E>(_ route: Route<A, R, E>, _ argument: A, body: RequestBody,
                                progress: (@Sendable (Int64) -> Void)? = nil, background: Bool = false) async throws -> R {
        var request = makeRequest(route)
        request.background = background
        request.headers = [("Content-Type", "application/octet-stream"), ("Dropbox-API-Arg", try APIJSON.headerValue(argument))]
        request.body = body
        if let progress { request.progress = { sent, _ in progress(sent) } }
        return try await call(route, request).0
    }

    /// A download, its bytes streamed to `consume`. `range` asks for part of the content.
    /// `restart` is called before each retry, so the consumer can drop what a broken attempt
    /// delivered.
    public func download<A, R, E>(_ route: Route<A, R, E>, _ argument: A, range: Range<Int64>? = nil,
                                  restart: @Sendable () throws -> Void = {},
                                  progress: (@Sendable (Int64) -> Void)? = nil,
                                  consume: @escaping @Sendable (UnsafeRawBufferPointer) throws -> Void) async throws -> Downloaded<R> {
        var request = makeRequest(route)
        request.headers = [("Dropbox-API-Arg", try APIJSON.headerValue(argument))]
        if let range {
            request.headers.append(("Range", "bytes=\(range.lowerBound)-\(range.upperBound - 1)"))
            request.partialRange = range
        }
        request.sink = .stream(consume)
        if let progress { request.progress = { _, received in progress(received) } }
        let (result, response) = try await call(route, request, beforeRetry: restart)
        return Downloaded(result: result, status: response.status)
    }

    // MARK: The call loop

    private func call<A, R, E>(_ route: Route<A, R, E>, _ base: HTTPRequest,
                               beforeRetry: () throws -> Void = {}) async throws -> (R, HTTPResponse) {
        var renewedToken = false
        var attempt = 0
        // An upload retried after a try whose outcome is unknown (its answer lost, or none
        // before the stall timeout): should the call fail in the end (the retry refused
        // offline, or never connecting), that try may have committed the file (`files/upload`),
        // and the error must say so, not the last try's "never sent".
        var unknownOutcome: CallError<E>?
        while true {
            do { try refuseWhileOffline(E.self) } catch { throw unknownOutcome ?? error }
            var request = base
            var token: String?
            if route.authenticated {
                guard let tokens else { throw CallError<E>.client(.notAuthenticated("no access token configured")) }
                do { token = try await tokens.accessToken() } catch { throw Self.asCallError(error, E.self) }
                request.headers.append(("Authorization", "Bearer \(token!)"))
                if let pathRoot { request.headers.append(("Dropbox-API-Path-Root", try APIJSON.headerValue(pathRoot))) }
                if let selectUser { request.headers.append(("Dropbox-API-Select-User", selectUser)) }
            }
            let outcome: Outcome<R, E>
            do {
                let response = try await perform(request)
                if (500...599).contains(response.status) {
                    reachability.serverFailed("HTTP \(response.status) from \(route.name)")
                } else {
                    reachability.answered()
                }
                outcome = try decode(route, response)
            } catch let error as TransportError {
                outcome = .failed(.client(.transport(error)),
                                  retryable: error.kind == .cannotConnect || (error.isTransient && route.retry == .idempotent), after: nil)
            } catch is CancellationError {
                throw CallError<E>.client(.cancelled)
            }
            switch outcome {
            case .success(let result, let response):
                return (result, response)
            case .expiredToken(let failure):
                guard !renewedToken, let token, let tokens else { throw failure }
                let renewed: String?
                do { renewed = try await tokens.renew(after: token) } catch { throw Self.asCallError(error, E.self) }
                guard renewed != nil else { throw failure }
                renewedToken = true
            case .failed(let failure, let retryable, let retryAfter):
                attempt += 1
                if route.style == .upload, unknownOutcome == nil, failure.outcomeUnknown { unknownOutcome = failure }
                var limit = retry.maxAttempts
                var unreachable = false
                if case .client(.transport(let error)) = failure {
                    if error.kind == .cannotConnect { limit = retry.maxConnectAttempts }
                    if error.kind == .timedOut { limit = min(limit, retry.maxStallAttempts) }
                    unreachable = error.kind == .cannotConnect || error.kind == .timedOut
                }
                guard retryable, attempt < limit else {
                    if unreachable { reachability.unreachable(failure.description) }
                    // Only a last try never sent hides the first's outcome: a server's answer
                    // to the retry (a forgotten session, a conflict) says what happened.
                    if let unknownOutcome, case .client(.transport(let last)) = failure, last.kind == .cannotConnect { throw unknownOutcome }
                    throw failure
                }
                do { try refuseWhileOffline(E.self) } catch { throw unknownOutcome ?? error }
                let wait = retryAfter.map { min($0, retry.maxRetryAfter) } ?? retry.backoff(attempt: attempt - 1)
                if let retryAfter, retryAfter > retry.maxRetryAfter { throw failure }
                do { try await Task.sleep(for: .milliseconds(Int(wait * 1000))) } catch { throw CallError<E>.client(.cancelled) }
                try beforeRetry()
            }
        }
    }

    /// Sends a request. One that may stay silent longer than the policy's `stallTimeout` (a
    /// longpoll, a large batch commit) is given up, as timed out, once other calls find
    /// Dropbox out of reach: a silent server may hold it for ten minutes, and with it whoever
    /// waits for it (the change feed's longpoll kept the probe that ends the outage waiting).
    private func perform(_ request: HTTPRequest) async throws -> HTTPResponse {
        guard request.stallTimeout > retry.stallTimeout, !Reachability.isProbing else { return try await transport.perform(request) }
        return try await withThrowingTaskGroup(of: HTTPResponse?.self) { group in
            group.addTask { try await self.transport.perform(request) }
            group.addTask {
                await self.reachability.untilOffline()
                return nil
            }
            defer { group.cancelAll() }
            guard let response = try await group.next()! else {
                throw TransportError(kind: .timedOut, message: "given up: Dropbox is out of reach")
            }
            return response
        }
    }

    /// Fails a call at once while Dropbox is out of reach (unless it is a probe): no
    /// connection attempts, no backoff.
    private func refuseWhileOffline<E: Sendable>(_ type: E.Type) throws {
        guard reachability.refusesCalls, case .offline(let since, let reason) = reachability.state else { return }
        throw CallError<E>.client(.offline(since: since, reason: reason))
    }

    /// A token refresh failure, in the error type of the call that needed it.
    static func asCallError<E>(_ error: any Error, _ type: E.Type) -> CallError<E> {
        if let same = error as? CallError<E> { return same }
        if case .client(let client)? = error as? CallError<NoRouteError> { return .client(client) }
        if error is CancellationError { return .client(.cancelled) }
        return .client(.notAuthenticated(String(describing: error)))
    }

    private enum Outcome<R, E: Sendable> {
        case success(R, HTTPResponse)
        case expiredToken(CallError<E>)
        case failed(CallError<E>, retryable: Bool, after: Double?)
    }

    /// Classifies a response by status and decodes its result or error.
    private func decode<A, R, E>(_ route: Route<A, R, E>, _ response: HTTPResponse) throws -> Outcome<R, E> {
        let requestID = response.header("x-dropbox-request-id")
        // Only failures quote the body (a batch commit's answer is hundreds of KiB).
        var text: String { String(decoding: response.body.prefix(2000), as: UTF8.self) }
        switch response.status {
        case 200, 206:
            do {
                let bytes = route.style == .download ? Array((response.header("dropbox-api-result") ?? "null").utf8) : response.body
                let result: R
                if R.self == NoResult.self {
                    result = NoResult() as! R
                } else if R.self == ListFolderResult.self {
                    result = try ListFolderResult(json: bytes) as! R  // pages of thousands of entries (ListingJSON)
                } else {
                    result = try APIJSON.decode(R.self, from: bytes.isEmpty ? Array("null".utf8) : bytes)
                }
                return .success(result, response)
            } catch {
                throw CallError<E>.client(.undecodable("\(route.name): \(error)"))
            }
        case 400:
            return .failed(.badInput(text, requestID: requestID), retryable: false, after: nil)
        case 401:
            let envelope = try? APIJSON.decode(ErrorEnvelope<AuthError>.self, from: response.body)
            let error = envelope?.error ?? .other("unknown")
            let failure = CallError<E>.auth(error, summary: envelope?.errorSummary ?? text, requestID: requestID)
            return error == .expiredAccessToken ? .expiredToken(failure) : .failed(failure, retryable: false, after: nil)
        case 403:
            return .failed(.access((try? APIJSON.decode(ErrorEnvelope<NoRouteError>.self, from: response.body))?.errorSummary ?? text,
                                   requestID: requestID), retryable: false, after: nil)
        case 409:
            guard let envelope = try? APIJSON.decode(ErrorEnvelope<E>.self, from: response.body) else {
                throw CallError<E>.client(.undecodable("\(route.name): error body \(text)"))
            }
            let failure = CallError<E>.route(envelope.error, summary: envelope.errorSummary ?? "",
                                             userMessage: envelope.userMessage?.text, requestID: requestID)
            let transient = (envelope.error as? any TransientRouteError)?.isTransient ?? false
            return .failed(failure, retryable: transient, after: transient ? 1 : nil)
        case 429:
            let envelope = try? APIJSON.decode(ErrorEnvelope<RateLimitBody>.self, from: response.body)
            let retryAfter = response.header("retry-after").flatMap(Double.init) ?? envelope?.error.retryAfter ?? 1
            return .failed(.rateLimited(envelope?.error.reason ?? .tooManyRequests, retryAfter: retryAfter, requestID: requestID),
                           retryable: true, after: retryAfter)
        case 500...599:
            // 503 means the request was not served; after another 5xx it may have been.
            return .failed(.server(status: response.status, message: text, requestID: requestID),
                           retryable: route.retry == .idempotent || response.status == 503,
                           after: response.header("retry-after").flatMap(Double.init))
        case 422:
            let envelope = try? APIJSON.decode(ErrorEnvelope<PathRootError>.self, from: response.body)
            return .failed(.pathRoot(envelope?.error ?? .other("unknown"), summary: envelope?.errorSummary ?? text, requestID: requestID),
                           retryable: false, after: nil)
        default:
            return .failed(.http(status: response.status, message: text, requestID: requestID), retryable: false, after: nil)
        }
    }
}

/// The JSON body of 401/403/409/429 answers.
struct ErrorEnvelope<E: Decodable>: Decodable {
    struct UserMessage: Decodable {
        var text: String
        var locale: String?
    }

    var error: E
    var errorSummary: String?
    var userMessage: UserMessage?
}

struct RateLimitBody: Decodable {
    var reason: RateLimitReason
    var retryAfter: Double?
}
