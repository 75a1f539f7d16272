import DropboxAPI
import DropboxEmulator
import Foundation
import Synchronization
import TestSupport
import Testing

@Suite("client: error classes, retries, tokens", .timeLimit(.minutes(2)))
struct ClientErrorTests {
    @Test func everyErrorClassIsDecoded() async throws {
        var quick = RetryPolicy()
        quick.maxAttempts = 2
        quick.baseDelay = 0.01
        try await withClient(retry: quick) { client, emulator in
            // 400: bad input, in Dropbox's words.
            await #expect { try await client.rpc(Routes.listFolder, ListFolderArgument(path: "/")) } throws: { error in
                guard case .badInput(let message, _)? = error as? CallError<PathLookupError> else { return false }
                return message.contains("empty string")
            }
            // 401: invalid token.
            let stranger = DropboxClient(endpoints: client.endpoints, tokens: StaticAccessToken("wrong"))
            await #expect { try await stranger.rpc(Routes.getSpaceUsage, NoArgument()) } throws: { error in
                guard case .auth(.invalidAccessToken, _, let id)? = error as? CallError<NoRouteError> else { return false }
                return id != nil
            }
            // 403, 429 after the retry budget, 5xx after retries.
            try await emulator.setFaults(["403:every=1,routes=users/get_space_usage"])
            await #expect { try await client.rpc(Routes.getSpaceUsage, NoArgument()) } throws: { error in
                if case .access? = error as? CallError<NoRouteError> { return true }
                return false
            }
            try await emulator.setFaults(["429:every=1,retry_after=0,routes=users/get_space_usage"])
            await #expect { try await client.rpc(Routes.getSpaceUsage, NoArgument()) } throws: { error in
                if case .rateLimited(.tooManyRequests, _, _)? = error as? CallError<NoRouteError> { return true }
                return false
            }
            try await emulator.setFaults(["500:every=1,routes=users/get_space_usage"])
            await #expect { try await client.rpc(Routes.getSpaceUsage, NoArgument()) } throws: { error in
                if case .server(500, _, _)? = error as? CallError<NoRouteError> { return true }
                return false
            }
            // 401 and 403 once each, 429 and 500 twice (the budget of 2 attempts).
            #expect(try await emulator.routeStats()["users/get_space_usage"]?["requests"] == 1 + 1 + 2 + 2)
            // A transient fault is healed by a retry, invisibly.
            try await emulator.setFaults(["503:every=2,routes=users/get_space_usage"])
            _ = try await client.rpc(Routes.getSpaceUsage, NoArgument())
            _ = try await client.rpc(Routes.getSpaceUsage, NoArgument())
            // Any other status, and no server at all.
            let unknown = Route<NoArgument, NoResult, NoRouteError>("files/no_such_route")
            try await emulator.setFaults([])
            await #expect { try await client.rpc(unknown, NoArgument()) } throws: { error in
                if case .http(404, _, _)? = error as? CallError<NoRouteError> { return true }
                return false
            }
            let nowhere = DropboxClient(endpoints: try Endpoints(baseURL: "http://127.0.0.1:9"), tokens: StaticAccessToken("x"), retry: quick)
            await #expect { try await nowhere.rpc(Routes.getSpaceUsage, NoArgument()) } throws: { error in
                guard case .client(.transport(let transport))? = error as? CallError<NoRouteError> else { return false }
                return transport.kind == .cannotConnect
            }
        }
    }

    @Test func plainHTTPOnlyOnLoopback() throws {
        #expect(throws: ClientError.self) { try Endpoints(baseURL: "http://example.com") }
        #expect(throws: ClientError.self) { try Endpoints(baseURL: "ftp://127.0.0.1") }
        #expect(try Endpoints(baseURL: "http://127.0.0.1:8765/").api == "http://127.0.0.1:8765")
        #expect(try Endpoints(baseURL: "https://api.example.com").content == "https://api.example.com")
    }

    @Test func pkceFlowAndOneRefreshForManyExpiredRequests() async throws {
        try await withClient({ $0.accessTokenLifetime = 600 }) { client, emulator in
            let transport = CurlTransport(userAgent: "test")
            let oauth = OAuthClient(endpoints: client.endpoints, transport: transport)
            let flow = oauth.startPKCE(appKey: "test-app")
            #expect(flow.authorizeURL.contains("code_challenge_method=S256"))
            var page = HTTPRequest(url: flow.authorizeURL)
            page.method = "GET"
            let html = String(decoding: try await transport.perform(page).body, as: UTF8.self)
            let code = try #require(html.components(separatedBy: "<code id=\"auth-code\">").last?.components(separatedBy: "<").first)
            let grant = try await oauth.finish(flow, code: code)
            let refresh = try #require(grant.refreshToken)
            #expect(grant.expiresIn == 600)

            // The provider believes its token is good for an hour; the server expires it early.
            let tokens = RefreshingAccessToken(
                state: .init(accessToken: grant.accessToken, expiresAt: Date().addingTimeInterval(3600), refreshToken: refresh, appKey: "test-app"),
                oauth: oauth)
            let authorized = DropboxClient(endpoints: client.endpoints, tokens: tokens)
            _ = try await authorized.rpc(Routes.getCurrentAccount, NoArgument())
            let stale = DropboxClient(endpoints: client.endpoints, tokens: StaticAccessToken(grant.accessToken))
            // Expired by the emulator's control: waiting out a short lifetime timed the machine.
            try await emulator.expireTokens()
            await #expect { try await stale.rpc(Routes.getSpaceUsage, NoArgument()) } throws: { error in
                if case .auth(.expiredAccessToken, _, _)? = error as? CallError<NoRouteError> { return true }
                return false
            }
            // Twenty requests see the expiry together: one refresh serves them all.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<20 { group.addTask { _ = try await authorized.rpc(Routes.getSpaceUsage, NoArgument()) } }
                try await group.waitForAll()
            }
            #expect(await tokens.refreshCount == 1)
        }
    }

    @Test func cancellationStopsATransferPromptly() async throws {
        try await withClient({ $0.seeds = ["big=64M"] }) { client, emulator in
            try await emulator.setFaults(["bandwidth:bps=1000000,routes=files/download"])  // 64 s at full length
            try await withScratch { scratch in
                let received = Mutex<Int64>(0)
                let task = Task {
                    try await client.downloadFile("/big.bin", to: scratch.appendingPathComponent("big").path) { done, _ in
                        received.withLock { $0 = max($0, done) }
                    }
                }
                // Cancelled once bytes flow (awaited, not slept for).
                while received.withLock({ $0 }) == 0 { try await Task.sleep(for: .milliseconds(20)) }
                task.cancel()
                await #expect { try await task.value } throws: { error in
                    if case .client(.cancelled)? = error as? CallError<PathLookupError> { return true }
                    return false
                }
                // It stopped the transfer: far from all 64 MiB had arrived when it ended (the
                // suite's time limit bounds a cancellation that never takes effect).
                #expect(received.withLock { $0 } < 64 << 20)
                #expect(!FileManager.default.fileExists(atPath: scratch.appendingPathComponent("big").path))
            }
        }
    }

    /// A small request waits on the transport's shared loop (`CurlMultiLoop`), not a thread of
    /// its own: cancelling it ends it while the server still holds it, and the loop goes on
    /// serving the requests after it.
    @Test func cancellationEndsASmallRequestTheServerHolds() async throws {
        try await withClient { client, emulator in
            try await emulator.setFaults(["latency:ms=600000,routes=files/get_metadata"])
            let task = Task { try await client.metadataIfExists("/held") }
            // Awaited, not slept for (the suite's time limit bounds it).
            while try await emulator.routeStats()["files/get_metadata"]?["delayed"] ?? 0 == 0 {
                try await Task.sleep(for: .milliseconds(20))
            }
            task.cancel()
            await #expect { try await task.value } throws: { error in
                if case .client(.cancelled)? = error as? CallError<PathLookupError> { return true }
                return false
            }
            try await emulator.setFaults([])
            #expect(try await client.metadataIfExists("/held") == nil)
        }
    }
}
