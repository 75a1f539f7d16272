import ArgumentParser
import DropboxEmulator
import Foundation

/// `dropbox-emulator`: a local Dropbox API v2 server (see DropboxEmulator/Emulator.swift).
@main
struct DropboxEmulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dropbox-emulator",
        abstract: "Serve a local Dropbox API v2 emulator on 127.0.0.1.",
        discussion: """
            One port serves the API (/2/...), OAuth (/oauth2/authorize, /oauth2/token) and the test \
            controls (/_emulator/stats, /_emulator/faults, /_emulator/reset-cursors). State persists in \
            the data directory. Once listening, the first line on stdout is
              dropbox-emulator listening on http://127.0.0.1:PORT

            Fault specs (--fault, or POST /_emulator/faults {"faults": [...]}):
              429:every=10            every 10th request answers 429 (retry_after=S sets Retry-After)
              500:p=0.1  503:p=0.05   server errors with a probability (403 too)
              reset:p=0.02,after=4096 drop the connection after 4096 bytes of the response body
              latency:ms=50           delay every request
              bandwidth:bps=10000000  cap body transfer rates (bytes per second)
              too_many_write_operations:p=0.05
            Each takes routes=a+b to select routes, e.g. 500:p=0.1,routes=files/download.

            An outage at runtime: SIGUSR1 takes the emulator off the network (connections \
            refused, open ones cut), SIGUSR2 brings it back on the same port; its state is kept. \
            For a server that answers but fails, POST /_emulator/faults {"faults": ["503"]}.
            """
    )

    @Option(help: "Port to listen on; 0 picks a free one.")
    var port = 8765

    @Option(help: "Address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "Data directory (created if missing): content files and SQLite metadata.")
    var data: String

    @Option(name: .customLong("token"), help: "A long-lived access token to accept as is (repeatable).")
    var tokens: [String] = []

    @Option(name: .customLong("seed"), help: "Sample files for a new data directory: 'demo', or e.g. 'files=1000,dirs=10,depth=2,size=4K,unicode,big=1G' (repeatable).")
    var seeds: [String] = []

    @Option(help: "Lifetime in seconds of access tokens issued by the OAuth flow.")
    var accessTokenLifetime: Int64 = 14_400

    @Option(help: "Longest time in seconds list_folder/longpoll really waits, whatever timeout it is given.")
    var longpollMaxWait: Double?

    @Option(help: "Space allocation of the account (e.g. 2T, 500M).", transform: { text in
        guard let bytes = ByteCount.parse(text) else { throw ValidationError("--quota: '\(text)' is not a size") }
        return bytes
    })
    var quota: Int64 = 2 << 40

    @Option(name: .customLong("fault"), help: "A fault to inject (repeatable); see the spec list above.")
    var faults: [String] = []

    @Option(help: "Entries a list_folder page holds when the call gives no limit (Dropbox: 2000); a small one makes every change feed catch-up span pages.")
    var pageSize = Emulator.maximumPageSize

    @Flag(help: "A team member's account: a team space with the member's home folder ('/Emma Ulator', where seeds go) and a shared team folder ('/Team Shared'); Dropbox-API-Path-Root picks the root.")
    var team = false

    @Option(name: .customLong("team-token"), help: "A team-wide token (repeatable): requests must name the member with Dropbox-API-Select-User: \(TeamSpace.memberID).")
    var teamTokens: [String] = []

    func run() async throws {
        var configuration = EmulatorConfiguration(dataDirectory: URL(fileURLWithPath: data, isDirectory: true))
        configuration.host = host
        configuration.port = port
        configuration.tokens = tokens
        configuration.seeds = seeds
        configuration.accessTokenLifetime = accessTokenLifetime
        configuration.longpollMaxWait = longpollMaxWait
        configuration.quota = quota
        configuration.faults = faults
        guard (1...Emulator.maximumPageSize).contains(pageSize) else { throw ValidationError("--page-size: between 1 and \(Emulator.maximumPageSize)") }
        configuration.pageSize = pageSize
        configuration.team = team
        configuration.teamTokens = teamTokens

        let emulator: Emulator
        do {
            emulator = try await Emulator.start(configuration)
        } catch {
            throw ValidationError("cannot start: \(error)")
        }
        try? FileHandle.standardOutput.write(contentsOf: Data("dropbox-emulator listening on \(emulator.baseURL)\n".utf8))
        switchReachability(of: emulator)

        await waitForTerminationSignal()
        await emulator.shutdown()
    }

    /// SIGUSR1: unreachable; SIGUSR2: reachable again. Each switch is said on stdout.
    private func switchReachability(of emulator: Emulator) {
        var sources: [any DispatchSourceSignal] = []
        for (sig, reachable) in [(SIGUSR1, false), (SIGUSR2, true)] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler {
                Task {
                    do {
                        try await emulator.setReachable(reachable)
                        try? FileHandle.standardOutput.write(contentsOf: Data("dropbox-emulator \(reachable ? "reachable again" : "unreachable")\n".utf8))
                    } catch {
                        emulator.log("cannot listen again: \(error)")
                    }
                }
            }
            source.resume()
            sources.append(source)
        }
        SignalSources.keep(sources)
    }

    /// Returns on SIGINT or SIGTERM, so that shutdown closes the database cleanly.
    private func waitForTerminationSignal() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let once = OnceFlag()
            var sources: [any DispatchSourceSignal] = []
            for sig in [SIGINT, SIGTERM] {
                signal(sig, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
                source.setEventHandler { if once.claim() { continuation.resume() } }
                source.resume()
                sources.append(source)
            }
            SignalSources.keep(sources)
        }
    }
}

/// True for the first caller only.
private final class OnceFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var claimed = false
    func claim() -> Bool { lock.withLock { defer { claimed = true }; return !claimed } }
}

/// Keeps signal sources alive for the life of the process.
private enum SignalSources {
    nonisolated(unsafe) static var retained: [any DispatchSourceSignal] = []
    static func keep(_ sources: [any DispatchSourceSignal]) { retained += sources }
}
