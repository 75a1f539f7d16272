import DropboxAPI
import DropboxEmulator
import Foundation
import TestSupport

/// Runs `body` with a fresh emulator (real HTTP on 127.0.0.1, own data directory) and a
/// client pointed at it; always shuts the emulator down and removes its data.
func withClient(
    _ configure: (inout EmulatorConfiguration) -> Void = { _ in },
    retry: RetryPolicy = RetryPolicy(),
    _ body: (DropboxClient, Emulator) async throws -> Void
) async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("api-test-" + UUID().uuidString)
    defer { try? FileManager.default.removeItem(at: directory) }
    var configuration = EmulatorConfiguration(dataDirectory: directory)
    configuration.tokens = ["api-test-token"]
    configure(&configuration)
    let emulator = try await Emulator.start(configuration)
    do {
        let client = DropboxClient(endpoints: try Endpoints(baseURL: emulator.baseURL), tokens: StaticAccessToken("api-test-token"),
                                   retry: retry)
        try await body(client, emulator)
    } catch {
        await emulator.shutdown()
        throw error
    }
    await emulator.shutdown()
}

/// A temporary directory for local files, removed afterwards.
func withScratch(_ body: (URL) async throws -> Void) async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("api-scratch-" + UUID().uuidString)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    try await body(directory)
}

/// Deterministic pseudo-random bytes written to a file in 1 MiB steps (never all in memory).
func writePattern(_ url: URL, size: Int64, seed: UInt64 = 1) throws {
    _ = FileManager.default.createFile(atPath: url.path, contents: nil)
    let handle = try FileHandle(forWritingTo: url)
    defer { try? handle.close() }
    var state = seed | 1
    var remaining = size
    var words = [UInt64](repeating: 0, count: 1 << 17)
    while remaining > 0 {
        for i in words.indices {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            words[i] = state
        }
        let take = Int(min(Int64(words.count * 8), remaining))
        words.withUnsafeBytes { handle.write(Data($0.prefix(take))) }
        remaining -= Int64(take)
    }
}

/// The content hash of a local file, computed independently of the client's transfer code.
func localContentHash(_ url: URL) throws -> String {
    let handle = try FileHandle(forReadingFrom: url)
    defer { try? handle.close() }
    let hasher = ContentHasher()
    while let chunk = try handle.read(upToCount: 4 << 20), !chunk.isEmpty {
        chunk.withUnsafeBytes { hasher.update($0) }
    }
    return hasher.finish()
}
