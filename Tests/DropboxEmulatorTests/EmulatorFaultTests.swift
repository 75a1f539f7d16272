import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import DropboxEmulator
import TestSupport

@Suite("fault injection and stats", .timeLimit(.minutes(1)))
struct EmulatorFaultTests {
    @Test func every429CarriesRetryAfter() async throws {
        try await withEmulator { client in
            try await client.setFaults(["429:every=2,retry_after=3,routes=files/get_metadata"])
            _ = try await client.put("/x.txt", "x")
            var statuses: [Int] = []
            for _ in 0..<4 { statuses.append(try await client.rpc("files/get_metadata", #"{"path":"/x.txt"}"#).status) }
            #expect(statuses == [200, 429, 200, 429])
            let limited = try await client.rpc("files/get_metadata", #"{"path":"/x.txt"}"#)
            let again = try await client.rpc("files/get_metadata", #"{"path":"/x.txt"}"#)
            let reply = limited.status == 429 ? limited : again
            #expect(reply.header("Retry-After") == "3")
            #expect(reply.json["error"]?["reason"]?[".tag"]?.stringValue == "too_many_requests")
            // Other routes are untouched.
            #expect(try await client.download("/x.txt").status == 200)
        }
    }

    /// An outage: connections refused (an open one cut, a longpoll's included) until the
    /// emulator is reachable again, on the same port, with its state kept; written to
    /// directly meanwhile, as Dropbox changes while a client's uplink is down.
    @Test func unreachableRefusesConnectionsAndComesBackOnTheSamePort() async throws {
        try await withEmulator({ $0.longpollMaxWait = 480 }) { client in
            _ = try await client.put("/kept.txt", "kept")
            let cursor = try #require(try await client.rpc("files/list_folder/get_latest_cursor",
                                                           #"{"path":"","recursive":true}"#).json["cursor"]?.stringValue)
            let poll = Task { try await client.rpc("files/list_folder/longpoll", #"{"cursor":"\#(cursor)","timeout":480}"#, token: nil) }
            try await client.emulator.setReachable(false)
            #expect(!client.emulator.isReachable)
            await #expect(throws: (any Error).self) { try await poll.value }
            await #expect(throws: (any Error).self) { try await client.download("/kept.txt") }
            try client.emulator.writeFileDirectly("/meanwhile.txt", contents: Array("meanwhile".utf8))
            try await client.emulator.setReachable(true)
            #expect(client.emulator.isReachable)
            #expect(try await client.download("/kept.txt").text == "kept")
            #expect(try await client.download("/meanwhile.txt").text == "meanwhile")
        }
    }

    @Test func serverErrorsAndWriteContention() async throws {
        try await withEmulator({ $0.faults = ["503:p=1,routes=files/download", "too_many_write_operations:every=1,routes=files/upload"] }) { client in
            #expect(try await client.download("/anything").status == 503)
            let write = try await client.put("/w.txt", "w")
            #expect(write.status == 429)
            #expect(write.json["error"]?["reason"]?[".tag"]?.stringValue == "too_many_write_operations")
            // The body of a refused upload is drained: the connection serves the next request.
            try await client.setFaults([])
            #expect(try await client.put("/w.txt", "w").status == 200)
        }
    }

    @Test func resetDropsTheConnectionMidBody() async throws {
        try await withEmulator { client in
            let content = Data(repeating: 7, count: 1 << 20)
            _ = try await client.upload("files/upload", #"{"path":"/big.bin"}"#, content)
            try await client.setFaults(["reset:every=1,after=4096,routes=files/download"])
            await #expect(throws: (any Error).self) { _ = try await client.download("/big.bin") }
            try await client.setFaults([])
            #expect(try await client.download("/big.bin").body == content)
        }
    }

    @Test func latencyAndBandwidthSlowRequestsDown() async throws {
        try await withEmulator { client in
            _ = try await client.upload("files/upload", #"{"path":"/slow.bin"}"#, Data(repeating: 1, count: 200_000))
            try await client.setFaults(["latency:ms=300,routes=files/get_metadata", "bandwidth:bps=400000,routes=files/download"])
            _ = try await client.rpc("files/get_metadata", #"{"path":"/slow.bin"}"#)
            let body = try await client.download("/slow.bin").body
            #expect(body.count == 200_000)
            // The emulator says what each fault did; how long that took is the bench's business.
            let routes = try await client.stats()["routes"]
            #expect(routes?["files/get_metadata"]?["delayed"]?.intValue == 1)
            #expect(routes?["files/download"]?["delayed"]?.intValue == 0)
            #expect(routes?["files/download"]?["throttled_bytes_out"]?.intValue == 200_000)
            #expect(routes?["files/upload"]?["throttled_bytes_out"]?.intValue == 0)
        }
    }

    /// `silent` holds a request unanswered while it is in force and then drops it unserved:
    /// an upload held so never lands, late or otherwise. (The client gives up first, as a
    /// real one times out: URLSession, handed the reset of a kept connection, sends the
    /// request again without its body and waits for a minute.)
    @Test func aSilentRequestIsNeverServed() async throws {
        try await withEmulator { client in
            try await client.setFaults(["silent:routes=files/upload"])
            let upload = Task { try await client.upload("files/upload", #"{"path":"/held.txt"}"#, Data("held".utf8)) }
            var held: Int64 = 0
            for _ in 0..<1_000 where held == 0 {  // until the emulator has it (a bound, not a timing)
                held = try await client.stats()["routes"]?["files/upload"]?["delayed"]?.intValue ?? 0
                if held == 0 { try await Task.sleep(for: .milliseconds(10)) }
            }
            #expect(held == 1)
            #expect(try await client.rpc("files/get_metadata", #"{"path":"/held.txt"}"#).status == 409)
            upload.cancel()
            await #expect(throws: (any Error).self) { _ = try await upload.value }
            try await client.setFaults([])
            #expect(try await client.rpc("files/get_metadata", #"{"path":"/held.txt"}"#).status == 409)
            #expect(try await client.upload("files/upload", #"{"path":"/held.txt"}"#, Data("sent".utf8)).status == 200)
        }
    }

    @Test func badFaultSpecsAreRefused() async throws {
        try await withEmulator { client in
            let reply = try await client.request("/_emulator/faults", body: Data(#"{"faults":["418:p=1"]}"#.utf8))
            #expect(reply.status == 400)
            #expect(reply.text.contains("unknown kind"))
            #expect(throws: FaultSpecError.self) { try FaultRule(spec: "500:p=2") }
            #expect(throws: FaultSpecError.self) { try FaultRule(spec: "latency") }
        }
    }

    @Test func statsCountRequestsAndBytes() async throws {
        try await withEmulator { client in
            _ = try await client.put("/s.txt", "12345")
            _ = try await client.download("/s.txt")
            _ = try await client.download("/s.txt")
            let stats = try await client.stats()
            #expect(stats["routes"]?["files/download"]?["requests"]?.intValue == 2)
            #expect(stats["routes"]?["files/download"]?["bytes_out"]?.intValue == 10)
            #expect(stats["routes"]?["files/upload"]?["bytes_in"]?.intValue == 5)
            try await client.emulatorStatsReset()
            #expect(try await client.stats()["requests"]?.intValue == 0)
        }
    }

    /// Expiry comes from the emulator's control, not from waiting out a short lifetime: with
    /// a lifetime of 1 s, a loaded machine took longer than that between issuing a token and
    /// its first use (a full run beside a build failed here).
    @Test func expiredTokensAnswerExpiredAccessToken() async throws {
        try await withEmulator { client in
            let verifier = String(repeating: "v", count: 50)
            let challenge = Namespace.pkceChallenge(verifier)
            let page = try await client.request(
                "/oauth2/authorize?client_id=app&response_type=code&token_access_type=offline&code_challenge=\(challenge)&code_challenge_method=S256",
                method: "GET")
            let code = try #require(page.text.split(separator: ">").first { $0.hasSuffix("</code") }?.dropLast(6))
            let tokens = try await client.request("/oauth2/token", headers: ["Content-Type": "application/x-www-form-urlencoded"],
                body: Data("grant_type=authorization_code&code=\(code)&client_id=app&code_verifier=\(verifier)".utf8))
            let access = try #require(tokens.json["access_token"]?.stringValue)
            let refresh = try #require(tokens.json["refresh_token"]?.stringValue)
            #expect(try await client.rpc("users/get_current_account", nil, token: access).status == 200)
            _ = try await client.request("/_emulator/expire-tokens")
            let reply = try await client.rpc("users/get_current_account", nil, token: access)
            #expect(reply.status == 401)
            #expect(reply.json["error"]?[".tag"]?.stringValue == "expired_access_token")
            let renewed = try await client.request("/oauth2/token", body: Data("grant_type=refresh_token&refresh_token=\(refresh)&client_id=app".utf8))
            let fresh = try #require(renewed.json["access_token"]?.stringValue)
            #expect(try await client.rpc("users/get_current_account", nil, token: fresh).status == 200)
            // The code was single-use.
            let reuse = try await client.request("/oauth2/token",
                body: Data("grant_type=authorization_code&code=\(code)&client_id=app&code_verifier=\(verifier)".utf8))
            #expect(reuse.json["error"]?.stringValue == "invalid_grant")
        }
    }
}

/// The listener closing (an outage) while clients connect. A suite of its own, bounded more
/// loosely than the fault suite: beside the whole suite each round took seconds.
@Suite("emulator: listener", .timeLimit(.minutes(3)))
struct EmulatorListenerTests {
    /// An emulator given any port takes one below the kernel's ephemeral range: while it was
    /// unreachable, a client's connect could take its port as a local one, and it could not
    /// come back (EADDRINUSE, beside the CLI tests).
    @Test func anyPortIsOneThatNoConnectTakes() async throws {
        try await withEmulator { client in
            let port = try #require(URL(string: client.baseURL)?.port)
            #expect(port < Listener.firstEphemeralPort)
            try await client.emulator.setReachable(false)
            try await client.emulator.setReachable(true)
            #expect(URL(string: client.baseURL)?.port == port)
            _ = try await client.put("/back.txt", "back")
        }
    }

    /// Connections the listener accepted but had not begun to serve when it closed are
    /// closed with it. Dropped unserved, each one stopped the whole process ("Deinited
    /// NIOAsyncWriter without calling finish()"): an outage that began while a client
    /// connected could end a test run.
    @Test func connectionsArrivingAsTheListenerClosesAreClosed() async throws {
        try await withEmulator { client in
            let port = try #require(URL(string: client.baseURL)?.port)
            for _ in 0..<16 {
                let connecting = Task { await Self.connectAndLeaveOpen(port: port, count: 16) }
                try await client.emulator.setReachable(false)
                for socket in await connecting.value { close(socket) }
                try await client.emulator.setReachable(true)
            }
            _ = try await client.put("/after.txt", "after")
            #expect(try await client.download("/after.txt").text == "after")
        }
    }

    /// Every thread of Swift's shared pool blocked (as tests that `stat` a mount block them):
    /// the emulator still answers. Its connections were served on that pool, so a mount
    /// test whose two pool threads waited in system calls on mounts starved the emulator
    /// those mounts waited for, and their daemons gave up after two 60 s stalls.
    @Test func answersWhileEveryThreadOfTheSharedPoolIsBlocked() async throws {
        try await withEmulator { client in
            let put = try await client.put("/a.txt", "a")
            #expect(put.status == 200)
            let width = ProcessInfo.processInfo.activeProcessorCount
            let started = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            for _ in 0..<width {
                Task.detached {
                    started.signal()
                    release.wait()
                }
            }
            let url = client.baseURL + "/2/files/get_metadata"
            let answer: String = await withCheckedContinuation { done in
                Thread {
                    for _ in 0..<width { started.wait() }
                    let curl = try? ChildProcess("/usr/bin/curl", [
                        "-s", "--max-time", "30", "-X", "POST", url,
                        "-H", "Authorization: Bearer \(TestClient.token)",
                        "-H", "Content-Type: application/json", "-d", #"{"path": "/a.txt"}"#,
                    ], environment: ProcessRunner.defaultEnvironment)
                    let answer = curl.map {
                        let bytes = $0.readOutput().stdout
                        _ = $0.waitForExit()
                        return String(decoding: bytes, as: UTF8.self)
                    } ?? "curl did not start"
                    for _ in 0..<width { release.signal() }
                    done.resume(returning: answer)
                }.start()
            }
            #expect(answer.contains(#""name": "a.txt""#) || answer.contains(#""name":"a.txt""#), "\(answer)")
        }
    }

    /// Opens `count` TCP connections to the port (those refused are skipped), on a thread of
    /// its own: connect(2) blocks, and Swift's cooperative threads are few.
    static func connectAndLeaveOpen(port: Int, count: Int) async -> [Int32] {
        await withCheckedContinuation { done in
            Thread {
                done.resume(returning: (0..<count).compactMap { _ in
                    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                    var address = sockaddr_in()
                    address.sin_family = sa_family_t(AF_INET)
                    address.sin_port = in_port_t(UInt16(port).bigEndian)
                    address.sin_addr.s_addr = inet_addr("127.0.0.1")
                    let connected = withUnsafePointer(to: &address) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                    }
                    if connected == 0 { return fd }
                    close(fd)
                    return nil
                })
            }.start()
        }
    }
}
