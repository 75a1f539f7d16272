/// `/_emulator/…`: what tests need beyond the Dropbox API.
///
/// - `GET health` → `{"status": "ok"}`
/// - `GET stats` → requests and body bytes per route; `POST stats/reset`
/// - `GET faults`; `POST faults` with `{"faults": [SPEC, …]}` replaces them; `DELETE faults`
/// - `POST reset-cursors`: every cursor handed out so far gets `reset` (as after a Dropbox
///   namespace migration), so clients' relisting can be tested.
/// - `POST expire-tokens`: every short-lived access token expires now, so expiry and
///   refresh are tested without waiting for a lifetime to pass.
/// - `POST expire-sessions`: every upload session not finished yet is forgotten, as Dropbox
///   forgets one a week old, so clients' handling of a lost session can be tested.
/// - `POST refuse-names` with `{"names": [NAME, …]}`: writes to those names fail with
///   `disallowed_name` from now on, as for a rule of Dropbox's that a client cannot know.
extension Emulator {
    func serveControl(_ path: String, _ exchange: Exchange) async throws {
        let method = exchange.head.method
        let writer = exchange.writer
        switch (method, path) {
        case (.GET, "health"):
            try await writer.sendJSON(.object([("status", .string("ok"))]))
        case (.GET, "stats"):
            try await writer.sendJSON(stats.json)
        case (.POST, "stats/reset"):
            stats.reset()
            try await writer.sendJSON(.object([]))
        case (.GET, "faults"):
            try await writer.sendJSON(.object([("faults", .array(faults.active.map { .string($0) }))]))
        case (.POST, "faults"):
            let body = try await exchange.body.collect(limit: 64 << 10)
            guard let json = try? JSON.parse(body), let specs = json["faults"]?.arrayValue?.compactMap(\.stringValue) else {
                throw APIFailure.badInput("Expected {\"faults\": [\"SPEC\", …]}")
            }
            do { try faults.replace(with: specs) } catch let error as FaultSpecError {
                throw APIFailure.badInput(error.description)
            }
            try await writer.sendJSON(.object([("faults", .array(specs.map { .string($0) }))]))
        case (.DELETE, "faults"):
            try faults.replace(with: [])
            try await writer.sendJSON(.object([("faults", .array([]))]))
        case (.POST, "reset-cursors"):
            try namespace.resetCursors()
            try await writer.sendJSON(.object([]))
        case (.POST, "expire-tokens"):
            try namespace.expireAccessTokens()
            try await writer.sendJSON(.object([]))
        case (.POST, "expire-sessions"):
            try namespace.expireSessions()
            try await writer.sendJSON(.object([]))
        case (.POST, "refuse-names"):
            let body = try await exchange.body.collect(limit: 64 << 10)
            guard let json = try? JSON.parse(body), let names = json["names"]?.arrayValue?.compactMap(\.stringValue) else {
                throw APIFailure.badInput("Expected {\"names\": [\"NAME\", …]}")
            }
            namespace.refuseNames(names)
            try await writer.sendJSON(.object([]))
        default:
            throw APIFailure.unknownRoute("/_emulator/" + path)
        }
    }
}
