import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// A local Dropbox API v2 server for tests, demos and offline use.
///
/// One port serves what Dropbox spreads over several hosts: `/2/<route>` (RPC, upload and
/// download routes, longpoll), `/oauth2/authorize` and `/oauth2/token`, plus `/_emulator/…`
/// for tests (fault injection, request statistics, forcing cursor resets). State lives in a
/// data directory (see `Namespace`) and survives restarts.
///
/// Layers: `HTTPServer` (connections) → `Emulator.respond` (routing, auth, faults, argument
/// styles) → route handlers in `Routes+*.swift` → `Namespace` (the tree, in SQLite).
public struct EmulatorConfiguration: Sendable {
    public var host = "127.0.0.1"
    /// 0 picks a free port.
    public var port = 0
    public var dataDirectory: URL
    /// Long-lived access tokens accepted as they are (for scripts and tests).
    public var tokens: [String] = []
    /// `--seed` specs, applied when the data directory is new (see `Seeder`).
    public var seeds: [String] = []
    /// Lifetime of OAuth-issued short-lived access tokens, in seconds.
    public var accessTokenLifetime: Int64 = 14_400
    /// Caps how long `list_folder/longpoll` really waits, whatever timeout it is given.
    public var longpollMaxWait: Double?
    /// Space allocation of the account.
    public var quota: Int64 = 2 << 40
    public var faults: [String] = []
    /// How many entries a `list_folder` page holds when the call gives no `limit` (Dropbox:
    /// 2,000). A test makes it small so that every catch-up of the change feed, and every
    /// move it tells of, spans pages.
    public var pageSize = Emulator.maximumPageSize
    public var eventLoopThreads = 2
    /// The account is a team member's, with a team space (`TeamSpace`): seeds go into the
    /// member's home folder, and `Dropbox-API-Path-Root` picks the home, the root or a folder.
    public var team = false
    /// Team-wide tokens: each request must name the member it acts for
    /// (`Dropbox-API-Select-User: TeamSpace.memberID`).
    public var teamTokens: [String] = []

    public init(dataDirectory: URL) { self.dataDirectory = dataDirectory }
}

public final class Emulator: Sendable {
    public let configuration: EmulatorConfiguration
    public var port: Int { listener.port }
    public var baseURL: String { "http://\(configuration.host):\(port)" }

    let namespace: Namespace
    let faults = FaultPlan()
    let stats = RouteStats()
    let batchJobs = BatchJobs()
    private let listener: Listener
    private let group: MultiThreadedEventLoopGroup

    private init(configuration: EmulatorConfiguration, namespace: Namespace, listener: Listener,
                 group: MultiThreadedEventLoopGroup) {
        self.configuration = configuration
        self.namespace = namespace
        self.listener = listener
        self.group = group
    }

    /// Opens the data directory, seeds it if new, and starts serving.
    public static func start(_ configuration: EmulatorConfiguration) async throws -> Emulator {
        let namespace = try Namespace(directory: configuration.dataDirectory, quota: configuration.quota)
        for token in configuration.tokens { try namespace.addLongLivedToken(token) }
        if namespace.currentSeq == 0 {
            var base = DropboxPath.root
            if configuration.team {
                for folder in [TeamSpace.homeFolder, TeamSpace.sharedFolder] { _ = try namespace.createFolder(folder, autorename: false) }
                base = TeamSpace.homeFolder
            }
            for spec in configuration.seeds { try Seeder(spec: spec).seed(namespace, under: base) }
        }
        // Members write inside the team folders only, never at the team space's top.
        if configuration.team { namespace.protectTopLevel() }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: configuration.eventLoopThreads)
        let box = EmulatorBox()
        let listener: Listener
        do {
            listener = try await Listener.open(host: configuration.host, port: configuration.port, group: group) { exchange in
                try await box.emulator?.respond(exchange)
            }
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        let emulator = Emulator(configuration: configuration, namespace: namespace, listener: listener, group: group)
        try emulator.faults.replace(with: configuration.faults)
        box.emulator = emulator
        return emulator
    }

    /// Stops listening, ends open connections (cancelling their tasks, which closes them and
    /// ends waits such as longpolls) and only then stops the event loops.
    public func shutdown() async {
        await listener.close()
        try? await group.shutdownGracefully()
    }

    /// Takes the emulator off the network (`false`: connections refused, open ones cut, as
    /// in an outage) or brings it back on the same port (`true`). Its state is kept.
    public func setReachable(_ reachable: Bool) async throws {
        if reachable { try await listener.reopen() } else { await listener.close() }
    }

    public var isReachable: Bool { listener.isListening }

    /// Replaces the active faults without a request (`POST /_emulator/faults` needs the
    /// emulator reachable).
    public func replaceFaults(_ specs: [String]) throws { try faults.replace(with: specs) }

    // MARK: Dispatch

    func respond(_ exchange: Exchange) async throws {
        let (path, query) = Self.splitURI(exchange.head.uri)
        do {
            if path.hasPrefix("/2/") {
                try await serveAPI(route: String(path.dropFirst(3)), query: query, exchange)
            } else if path == "/oauth2/authorize" {
                try await serveAuthorize(query: query, exchange)
            } else if path == "/oauth2/token" {
                try await serveToken(query: query, exchange)
            } else if path.hasPrefix("/_emulator/") {
                try await serveControl(String(path.dropFirst("/_emulator/".count)), exchange)
            } else {
                throw APIFailure.unknownRoute(path)
            }
        } catch let failure as APIFailure {
            if exchange.writer.closed { return }
            if exchange.writer.headSent { throw failure }
            _ = try await exchange.body.drained()
            try await exchange.writer.sendFailure(failure)
        } catch let error where error is RequestBody.Truncated || error is HTTPParserError || error is CancellationError {
            // The connection just ends: the client went away mid-request (or sent garbage,
            // answered 400 by NIO), or the emulator is shutting down.
            throw error
        } catch {
            if exchange.writer.closed { return }
            if exchange.writer.headSent { throw error }
            log("internal error on \(path) (request \(exchange.writer.requestID)): \(error)")
            _ = try await exchange.body.drained()
            try await exchange.writer.sendText("Internal server error: \(error)", status: .internalServerError)
        }
    }

    private func serveAPI(route: String, query: [String: String], _ exchange: Exchange) async throws {
        guard let spec = Routes.table[route] else { throw APIFailure.unknownRoute(route) }
        let head = exchange.head
        stats.record(route, requests: 1)
        defer {
            let written = exchange.writer.bodyBytesWritten
            stats.record(route, bytesIn: exchange.body.bytesRead, bytesOut: written, throttledOut: exchange.writer.throttle == nil ? 0 : written)
        }

        let decision = faults.decide(for: route)
        if decision.silent {
            stats.record(route, delayed: 1)
            await faults.untilReplaced(after: decision.generation)
            return await exchange.writer.abortConnection()
        }
        if let delay = decision.delay {
            stats.record(route, delayed: 1)
            try await Task.sleep(for: delay)
        }
        if let bps = decision.bytesPerSecond {
            exchange.body.throttle = Throttle(bytesPerSecond: bps)
            exchange.writer.throttle = Throttle(bytesPerSecond: bps)
        }
        exchange.writer.resetAfter = decision.resetAfter
        exchange.writer.dropAnswer = decision.dropAnswer
        if decision.offlineAfterDrop {
            exchange.writer.beforeDrop = { [listener] in
                await listener.stopAccepting()
                Task { await listener.close() }  // the rest of the outage, which waits for this exchange to end
            }
        }
        if let failure = decision.failure { throw failure }

        guard head.method == .POST || (head.method == .GET && spec.style.isDownload) else {
            throw APIFailure.badInput("Error in call to API function \"\(route)\": Method \(head.method) is not allowed; use POST.")
        }
        let token = spec.needsAuth ? try authenticate(head, query: query, route: route) : nil
        let call = RouteCall(emulator: self, route: route, token: token, exchange: exchange)
        let scope = spec.needsAuth
            ? try PathRootScope.of(header: head.headers.first(name: "Dropbox-API-Path-Root"), team: configuration.team, route: route)
            : .none

        switch spec.style {
        case .rpc(let handler):
            let bytes = try await exchange.body.collect(limit: 8 << 20)
            if !bytes.isEmpty || head.headers.first(name: "Content-Type") != nil {
                try Self.requireContentType(head, oneOf: ["application/json", "text/plain; charset=dropbox-cors-hack"], route: route)
            }
            call.argument = scope.inbound(try Self.parseArgument(bytes.isEmpty ? [] : bytes, route: route), route: route)
            let result = try await handler(call)
            try await Self.holdAnswer(decision, route: route, stats: stats)
            try await exchange.writer.sendJSON(told(scope.outbound(result), by: decision.lie))
        case .upload(let handler):
            try Self.requireContentType(head, oneOf: ["application/octet-stream"], route: route)
            call.argument = scope.inbound(try Self.headerArgument(head, query: query, route: route), route: route)
            let result = try await handler(call)
            try await Self.holdAnswer(decision, route: route, stats: stats)
            try await exchange.writer.sendJSON(told(scope.outbound(result), by: decision.lie))
        case .download(let handler):
            // Dropbox refuses a Content-Type here, e.g. the form type some HTTP libraries add.
            if let type = head.headers.first(name: "Content-Type"), !type.isEmpty, !type.lowercased().hasPrefix("text/plain") {
                try Self.requireContentType(head, oneOf: ["text/plain"], route: route)
            }
            call.argument = scope.inbound(try Self.headerArgument(head, query: query, route: route), route: route)
            _ = try await exchange.body.drained()
            var download = try await handler(call)
            download.result = told(scope.outbound(download.result), by: decision.lie)
            try await sendDownload(download, lie: decision.lie, exchange)
        }
    }

    private func told(_ result: JSON, by lie: Lie?) -> JSON { lie?.apply(result) ?? result }

    /// `latency:answer=1`: the request is carried out; its answer waits.
    private static func holdAnswer(_ decision: FaultDecision, route: String, stats: RouteStats) async throws {
        guard let delay = decision.answerDelay else { return }
        stats.record(route, delayed: 1)
        try await Task.sleep(for: delay)
    }

    /// Checks `Authorization: Bearer …` (or `?authorization=` on GET) and returns the token.
    private func authenticate(_ head: HTTPRequestHead, query: [String: String], route: String) throws -> String {
        let header = head.headers.first(name: "Authorization") ?? query["authorization"]
        guard let header else {
            throw APIFailure.badInput("Error in call to API function \"\(route)\": Must provide HTTP header \"Authorization\" or URL parameter \"authorization\".")
        }
        let parts = header.split(separator: " ", maxSplits: 1).map(String.init)
        guard parts.count == 2, parts[0].lowercased() == "bearer", !parts[1].isEmpty else {
            throw APIFailure.badInput("Error in call to API function \"\(route)\": Invalid authorization value in HTTP header \"Authorization\": \"\(parts.first ?? "")…\". Expecting \"Bearer <oauth2-access-token>\".")
        }
        if configuration.teamTokens.contains(parts[1]) {
            // A team-wide token acts for one member, named in every request.
            guard head.headers.first(name: "Dropbox-API-Select-User") == TeamSpace.memberID else {
                throw APIFailure.badInput("Error in call to API function \"\(route)\": This API function operates on a single Dropbox account, but the OAuth 2 access token you provided is for an entire Dropbox Business team. Since your API app key has team member file access permissions, you can operate on a team member's Dropbox by providing the \"Dropbox-API-Select-User\" HTTP header or \"select_user\" URL parameter to specify the exact user <https://www.dropbox.com/developers/documentation/http/teams>.")
            }
            return parts[1]
        }
        switch namespace.checkAccessToken(parts[1]) {
        case .valid: return parts[1]
        case .expired: throw APIFailure.auth("expired_access_token")
        case .invalid: throw APIFailure.auth("invalid_access_token")
        }
    }

    // MARK: Request parsing

    static func parseArgument(_ bytes: [UInt8], route: String) throws -> JSON {
        if bytes.isEmpty { return .null }
        do { return try JSON.parse(bytes) } catch {
            throw APIFailure.badInput("Error in call to API function \"\(route)\": request body: could not decode input as JSON")
        }
    }

    /// The argument of an upload or download route: the `Dropbox-API-Arg` header (ASCII only,
    /// other characters escaped as `\uXXXX`) or the `arg` URL parameter.
    static func headerArgument(_ head: HTTPRequestHead, query: [String: String], route: String) throws -> JSON {
        guard let text = head.headers.first(name: "Dropbox-API-Arg") ?? query["arg"] else {
            throw APIFailure.badInput("Error in call to API function \"\(route)\": Must provide HTTP header \"Dropbox-API-Arg\" or URL parameter \"arg\".")
        }
        guard text.utf8.allSatisfy({ $0 < 0x80 }) else {
            throw APIFailure.badInput("Error in call to API function \"\(route)\": HTTP header \"Dropbox-API-Arg\": must be ASCII; escape other characters as \\uXXXX.")
        }
        do { return try JSON.parse(text) } catch {
            throw APIFailure.badInput("Error in call to API function \"\(route)\": HTTP header \"Dropbox-API-Arg\": could not decode input as JSON")
        }
    }

    static func requireContentType(_ head: HTTPRequestHead, oneOf accepted: [String], route: String) throws {
        let given = head.headers.first(name: "Content-Type") ?? ""
        // The usual case first: folding case and spaces with Foundation took 3 % of the
        // emulator's CPU in an fsync of 1,000 small files, every request paying it.
        if accepted.contains(given) { return }
        let normalized = given.lowercased().replacingOccurrences(of: " ", with: "")
        let ok = accepted.contains { normalized == $0.replacingOccurrences(of: " ", with: "") }
            || (accepted.contains("application/json") && normalized == "application/json;charset=utf-8")
        if !ok {
            let list = accepted.map { "\"\($0)\"" }.joined(separator: ", ")
            throw APIFailure.badInput("Error in call to API function \"\(route)\": Bad HTTP \"Content-Type\" header: \"\(given)\".  Expecting one of \(list).")
        }
    }

    static func splitURI(_ uri: String) -> (String, [String: String]) {
        guard let mark = uri.firstIndex(of: "?") else { return (uri, [:]) }
        return (String(uri[..<mark]), FormEncoding.decode(String(uri[uri.index(after: mark)...])))
    }

    /// A line on standard error, prefixed with the program's name; a failed write is dropped.
    public func log(_ message: String) {
        try? FileHandle.standardError.write(contentsOf: Data("dropbox-emulator: \(message)\n".utf8))
    }
}

/// Lets the accept loop reach the emulator, which is created after the loop starts. Weak:
/// the listener keeps its handler for as long as it lives (to listen again after an outage),
/// and the emulator owns the listener; a strong reference here kept both, and the data
/// directory's database open, after shutdown.
private final class EmulatorBox: @unchecked Sendable {
    private let lock = NSLock()
    private weak var value: Emulator?
    var emulator: Emulator? {
        get { lock.withLock { value } }
        set { lock.withLock { value = newValue } }
    }
}

/// `application/x-www-form-urlencoded`, for query strings and the OAuth token endpoint.
enum FormEncoding {
    static func decode(_ text: String) -> [String: String] {
        var result: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            let key = unescape(parts[0])
            result[key] = parts.count > 1 ? unescape(parts[1]) : ""
        }
        return result
    }

    static func unescape(_ s: String) -> String {
        s.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? s
    }

    static func escape(_ s: String) -> String {
        // ASCII letters and digits only: `.alphanumerics` would let other scripts through unescaped.
        let allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        return s.addingPercentEncoding(withAllowedCharacters: allowed) ?? s
    }
}

extension Emulator {
    /// Writes a file as another client would (overwriting what is there), through no
    /// network: Dropbox goes on changing while the emulator is unreachable for its clients
    /// (`setReachable(false)`), as in an outage of one machine's uplink. Returns the new rev.
    @discardableResult
    public func writeFileDirectly(_ path: String, contents: [UInt8]) throws -> String {
        let staged = namespace.newStagingFile()
        defer { unlink(staged) }
        guard FileManager.default.createFile(atPath: staged, contents: Data(contents)) else {
            throw APIFailure.badInput("cannot stage \(path)")
        }
        let hasher = ContentHasher()
        contents.withUnsafeBytes { hasher.update($0) }
        let entry = try namespace.commitFile(CommitRequest(path: DropboxPath(display: path), mode: .overwrite),
                                             content: StagedContent(file: staged, size: Int64(contents.count), contentHash: hasher.finishHex()))
        return entry.rev ?? ""
    }
}
