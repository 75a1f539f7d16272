/// Changes that cannot be blindly repeated (`upload_session/finish`, `create_folder_v2`,
/// `delete_v2`, `move_v2`, …) and the failures that leave their outcome unknown.

/// Errors that can say whether the request may have been carried out.
public protocol OutcomeUnknownError {
    var outcomeUnknown: Bool { get }
    /// The request went out and its connection died before the answer (no server error).
    var answerLost: Bool { get }
}

extension CallError: OutcomeUnknownError {
    /// True after a 5xx or a connection lost mid-exchange: the server may have acted.
    public var outcomeUnknown: Bool {
        switch self {
        case .server: return true
        case .client(.transport(let transport)): return transport.kind == .connectionLost || transport.kind == .timedOut
        default: return false
        }
    }

    public var answerLost: Bool {
        if case .client(.transport(let transport)) = self { return transport.kind == .connectionLost }
        return false
    }
}

extension DropboxClient {
    /// Runs `change`. After a failure whose outcome is unknown, `check` looks at Dropbox: a
    /// result means the change happened; otherwise it is tried again, within the retry budget.
    public func settle<T>(check: () async throws -> T?, _ change: () async throws -> T) async throws -> T {
        var attempt = 0
        while true {
            do {
                return try await change()
            } catch where (error as? any OutcomeUnknownError)?.outcomeUnknown == true {
                if let done = try await checkAfter(error, check) { return done }
                attempt += 1
                guard attempt < retry.maxAttempts else { throw error }
                try await Task.sleep(for: .milliseconds(Int(retry.backoff(attempt: attempt - 1) * 1000)))
            }
        }
    }

    /// Looks whether a change whose outcome is unknown (`unknown`) happened. If the look
    /// fails too (Dropbox went out of reach meanwhile), the outcome is as unknown as before,
    /// and `unknown` is what is thrown: the caller must not take the change for not made.
    func checkAfter<T>(_ unknown: any Error, _ check: () async throws -> T?) async throws -> T? {
        do { return try await check() } catch { throw unknown }
    }

    /// The entry at a path now, or nil when there is none.
    public func metadataIfExists(_ path: String) async throws -> Metadata? {
        do {
            return try await rpc(Routes.getMetadata, GetMetadataArgument(path: path))
        } catch let error as CallError<PathLookupError> {
            // `not_folder`: a folder of the path is a file, so nothing is at the path either.
            if case .route(.path(.notFound), _, _, _) = error { return nil }
            if case .route(.path(.notFolder), _, _, _) = error { return nil }
            throw error
        }
    }
}
