import DropboxAPI
import DropboxEmulator
import Foundation

/// The emulator's test controls, reached over HTTP like any client would.
extension Emulator {
    /// Replaces the active faults (`POST /_emulator/faults`).
    public func setFaults(_ specs: [String]) async throws {
        var request = HTTPRequest(url: baseURL + "/_emulator/faults")
        request.headers = [("Content-Type", "application/json")]
        request.body = .bytes(Array(try JSONSerialization.data(withJSONObject: ["faults": specs])))
        let response = try await CurlTransport(userAgent: "test").perform(request)
        guard response.status == 200 else { throw ControlFailure(message: String(decoding: response.body, as: UTF8.self)) }
    }

    /// Requests and body bytes per route (`GET /_emulator/stats`).
    public func routeStats() async throws -> [String: [String: Int]] {
        var request = HTTPRequest(url: baseURL + "/_emulator/stats")
        request.method = "GET"
        let response = try await CurlTransport(userAgent: "test").perform(request)
        let json = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
        return (json?["routes"] as? [String: [String: Int]]) ?? [:]
    }

    public func resetStats() async throws {
        _ = try await CurlTransport(userAgent: "test").perform(HTTPRequest(url: baseURL + "/_emulator/stats/reset"))
    }

    /// Every cursor handed out so far gets `reset` (`POST /_emulator/reset-cursors`).
    public func resetCursors() async throws {
        _ = try await CurlTransport(userAgent: "test").perform(HTTPRequest(url: baseURL + "/_emulator/reset-cursors"))
    }

    /// Writes to these names fail with `disallowed_name` (`POST /_emulator/refuse-names`).
    public func refuseNames(_ names: [String]) async throws {
        var request = HTTPRequest(url: baseURL + "/_emulator/refuse-names")
        request.headers = [("Content-Type", "application/json")]
        request.body = .bytes(Array(try JSONSerialization.data(withJSONObject: ["names": names])))
        let response = try await CurlTransport(userAgent: "test").perform(request)
        guard response.status == 200 else { throw ControlFailure(message: String(decoding: response.body, as: UTF8.self)) }
    }

    /// Every upload session not finished yet is forgotten (`POST /_emulator/expire-sessions`).
    public func expireSessions() async throws {
        _ = try await CurlTransport(userAgent: "test").perform(HTTPRequest(url: baseURL + "/_emulator/expire-sessions"))
    }

    /// Every short-lived access token expires now (`POST /_emulator/expire-tokens`).
    public func expireTokens() async throws {
        _ = try await CurlTransport(userAgent: "test").perform(HTTPRequest(url: baseURL + "/_emulator/expire-tokens"))
    }
}

public struct ControlFailure: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
