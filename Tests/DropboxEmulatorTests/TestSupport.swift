import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import DropboxEmulator

/// Runs `body` against a fresh emulator on 127.0.0.1 (a real HTTP server in this process,
/// with its own data directory), and always shuts it down and removes the directory.
func withEmulator(
    dataDirectory: URL? = nil,
    _ configure: (inout EmulatorConfiguration) -> Void = { _ in },
    _ body: (TestClient) async throws -> Void
) async throws {
    let directory = dataDirectory ?? FileManager.default.temporaryDirectory
        .appendingPathComponent("emulator-test-" + UUID().uuidString)
    var configuration = EmulatorConfiguration(dataDirectory: directory)
    configuration.tokens = [TestClient.token]
    configure(&configuration)
    let emulator = try await Emulator.start(configuration)
    do {
        try await body(TestClient(baseURL: emulator.baseURL, emulator: emulator))
    } catch {
        await emulator.shutdown()
        if dataDirectory == nil { try? FileManager.default.removeItem(at: directory) }
        throw error
    }
    await emulator.shutdown()
    if dataDirectory == nil { try? FileManager.default.removeItem(at: directory) }
}

/// A throwaway data directory that outlives one emulator (for restart tests).
func withDataDirectory(_ body: (URL) async throws -> Void) async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("emulator-data-" + UUID().uuidString)
    defer { try? FileManager.default.removeItem(at: directory) }
    try await body(directory)
}

struct Reply {
    var status: Int
    var body: Data
    var headers: [String: String]

    var json: JSON { (try? JSON.parse(Array(body))) ?? .null }
    var text: String { String(decoding: body, as: UTF8.self) }
    func header(_ name: String) -> String? {
        headers.first { $0.key.lowercased() == name.lowercased() }?.value
    }
}

/// Plain HTTP calls in the three Dropbox request styles, through URLSession: a client that
/// is not ours, so the emulator is checked from outside.
struct TestClient {
    static let token = "test-token"
    let baseURL: String
    let emulator: Emulator
    let session: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 60
        return URLSession(configuration: configuration)
    }()

    func request(_ path: String, method: String = "POST", headers: [String: String] = [:], body: Data? = nil) async throws -> Reply {
        var request = URLRequest(url: URL(string: baseURL + path)!)
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        request.httpBody = body
        let (data, response) = try await session.data(for: request)
        let http = response as! HTTPURLResponse
        var fields: [String: String] = [:]
        for (key, value) in http.allHeaderFields { fields["\(key)"] = "\(value)" }
        return Reply(status: http.statusCode, body: data, headers: fields)
    }

    func rpc(_ route: String, _ argument: String?, token: String? = TestClient.token) async throws -> Reply {
        var headers: [String: String] = [:]
        if let token { headers["Authorization"] = "Bearer \(token)" }
        if argument != nil { headers["Content-Type"] = "application/json" }
        return try await request("/2/" + route, headers: headers, body: argument.map { Data($0.utf8) })
    }

    func upload(_ route: String, _ argument: String, _ content: Data) async throws -> Reply {
        try await request("/2/" + route, headers: [
            "Authorization": "Bearer \(TestClient.token)",
            "Content-Type": "application/octet-stream",
            "Dropbox-API-Arg": argument,
        ], body: content)
    }

    func download(_ path: String, range: String? = nil) async throws -> Reply {
        var headers = ["Authorization": "Bearer \(TestClient.token)", "Dropbox-API-Arg": "{\"path\":\"\(path)\"}"]
        if let range { headers["Range"] = range }
        return try await request("/2/files/download", headers: headers)
    }

    func put(_ path: String, _ text: String, mode: String = "\"add\"") async throws -> Reply {
        try await upload("files/upload", "{\"path\":\"\(path)\",\"mode\":\(mode)}", Data(text.utf8))
    }

    func setFaults(_ specs: [String]) async throws {
        let body = try JSONSerialization.data(withJSONObject: ["faults": specs])
        let reply = try await request("/_emulator/faults", body: body)
        precondition(reply.status == 200, "setting faults failed: \(reply.text)")
    }

    func stats() async throws -> JSON { try await request("/_emulator/stats", method: "GET").json }
}

/// Dropbox's content hash computed the slow, obvious way, to check the streaming one.
func referenceContentHash(_ data: Data) -> String {
    let blockSize = 4 * 1024 * 1024
    var digests: [UInt8] = []
    var start = 0
    while start < data.count {
        let end = min(start + blockSize, data.count)
        digests += SHA256.digest(Array(data[start..<end]))
        start = end
    }
    return hexString(SHA256.digest(digests))
}
