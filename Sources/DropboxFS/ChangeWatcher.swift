import DropboxAPI
import Foundation
import Synchronization

/// Keeps the metadata store current with one account-wide cursor (recursive, from the root),
/// kept in the store across mounts: `list_folder/longpoll` waits for a change, then
/// `list_folder/continue` pages are applied and reported for kernel invalidation. A cursor
/// `reset` clears the store (folders are listed again when next needed).
///
/// Catch-ups run one at a time, in order (`catchUp`): changes are applied in the order Dropbox
/// made them, so an older change never lands after a newer one — also for the mount's own
/// changes, which are applied by catching up right after they are made.
public final class ChangeWatcher: Sendable {
    public typealias Listener = @Sendable ([StoreChange], _ everything: Bool) -> Void

    let client: DropboxClient
    let store: MetadataStore
    private let listener = Mutex<Listener>({ _, _ in })
    /// The core's own bookkeeping of Dropbox's changes (permission modes follow moves):
    /// another client's changes the store applied, with the whole page they came in (which
    /// holds arrivals in folders the store does not keep). Heard before `listener`, so the
    /// kernel, told of a change, asks again and finds it done; not told of a reset. Told of
    /// every page of a catch-up, with or without changes (`last`: the feed is read to its
    /// end): what another client moved may leave in one page and arrive in another.
    public typealias CoreListener = @Sendable (_ changes: [StoreChange], _ page: [Metadata], _ last: Bool) -> Void
    private let coreListener = Mutex<CoreListener>({ _, _, _ in })
    /// The last catch-up (or own store change, `inFeedOrder`) started; the next waits for it.
    private let lastCatchUp = Mutex<Task<Void, Never>?>(nil)
    /// The mount's own changes: applied to the store like any other, never sent to the kernel.
    let own = OwnChanges()
    /// The paths of own changes the feed told of since they were made (`catchUp(after:)`).
    private let heardSince = PathsHeardSince()

    public init(client: DropboxClient, store: MetadataStore) {
        self.client = client
        self.store = store
    }

    /// Who hears about applied changes (the FUSE adapter, to invalidate the kernel's caches).
    public func setListener(_ newListener: @escaping Listener) {
        listener.withLock { $0 = newListener }
    }

    func setCoreListener(_ newListener: @escaping CoreListener) {
        coreListener.withLock { $0 = newListener }
    }

    private func notify(_ changes: [StoreChange], page: [Metadata] = [], last: Bool = true, everything: Bool) {
        let foreign = everything ? changes : changes.isEmpty ? [] : own.foreign(changes)
        if !everything { coreListener.withLock { $0 }(foreign, page, last) }
        guard everything || !foreign.isEmpty else { return }
        let current = listener.withLock { $0 }
        current(foreign, everything)
    }

    /// Tells the kernel of entries it was told were gone and that show again (a delete
    /// answered here that Dropbox then refused: the file had changed elsewhere).
    func announce(_ changes: [StoreChange]) {
        let current = listener.withLock { $0 }
        current(changes, false)
    }

    /// Dropbox answered the mount's commit at a path: `OwnChanges.committed`.
    public func committedOwn(_ pathLower: String, rev: String) {
        own.committed(pathLower, rev: rev)
    }

    /// Records a change the mount just made on Dropbox (call after the call returned, before
    /// catching up): the catch-up applies it to the store without telling the kernel.
    public func expectOwn(_ pathLower: String, _ expectation: OwnChanges.Expectation) {
        own.expect(pathLower, expectation)
    }

    /// Runs a call that changes paths known beforehand (mkdir, move, delete, upload), its changes
    /// expected as the mount's own from before it starts: the change feed may bring them
    /// back before the call returns, and taken for another client's they would make the
    /// kernel drop names and inodes the mount is moving itself.
    ///
    /// A call Dropbox refuses because its tree is not what the store says (the name is taken,
    /// or gone) changed nothing; the store catches up before the refusal is answered, with
    /// the kernel told as of another client's change, so what the caller looks at next
    /// agrees with the refusal (a mkdir answered EEXIST for a folder the mount had not heard
    /// of yet, then a lookup answered ENOENT, broke `tar x`).
    public func changingOwn<T>(_ expectations: [(String, OwnChanges.Expectation)], _ call: () async throws -> T) async rethrows -> T {
        let pending = own.expectPending(expectations)
        do {
            let result = try await call()
            own.callEnded(pending)
            return result
        } catch where Self.isStaleViewRefusal(error) {
            own.callRefused(pending)
            try? await catchUp()
            throw error
        } catch {
            own.callEnded(pending)
            throw error
        }
    }

    /// Catches up after a change the mount made, so the store learns it in Dropbox's order.
    /// If that fails, the store takes `made` as it is (a later catch-up replays it in order):
    /// the change happened, and the caller answers that it did; but not at a path the feed
    /// told of since the change was made (`PathsHeardSince`): the store has it as it is now.
    /// False when the catch-up failed: what the call found already there, and did not
    /// return, is not in the store.
    @discardableResult
    public func catchUp(after made: [Metadata]) async -> Bool {
        let watch = heardSince.begin(made.compactMap(\.pathLower))
        do {
            try await catchUp()
            _ = heardSince.end(watch)
            return true
        } catch {
            let heard = heardSince.end(watch)
            _ = try? store.apply(made.filter { !heard.contains($0.pathLower ?? "") })
            return false
        }
    }

    private static func isStaleViewRefusal(_ error: any Error) -> Bool {
        switch ErrnoMapping.fsError(error) {
        case .exists, .notFound, .notDirectory, .isDirectory: return true
        default: return false
        }
    }

    /// Applies every change since the stored cursor (or takes a cursor at "now" on a first
    /// mount), after any catch-up already running. Run before the mount is offered, so a
    /// remount never shows stale entries, and after each change the mount makes itself.
    public func catchUp() async throws {
        try await inOrder { try await self.catchUpInOrder() }
    }

    /// Runs `body`, which applies a change the mount made to the store itself, between two
    /// catch-ups: after the one under way, before any started later. The pages of the one
    /// under way may have been read before the change was made: applied after it, they
    /// undid it until the next page (a case-only rename's first step, read from the feed
    /// and applied after its second: the folder vanished and its hidden name showed).
    func inFeedOrder<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await inOrder { try body() }
    }

    /// Runs `body` once everything queued before it here has ended (catch-ups and the
    /// mount's own store changes take turns in this one line).
    private func inOrder<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let run: Task<T, any Error> = lastCatchUp.withLock { last in
            let previous = last
            let run = Task {
                await previous?.value
                return try await body()
            }
            last = Task { _ = try? await run.value }
            return run
        }
        return try await run.value
    }

    private func catchUpInOrder() async throws {
        let number = own.catchUpStarted()
        defer { own.catchUpEnded(number) }
        guard var cursor = try store.value("cursor") else {
            let latest = try await client.rpc(Routes.getLatestCursor, ListFolderArgument(path: "", recursive: true))
            try store.setValue("cursor", latest.cursor)
            return
        }
        let passing = store.catchUpMarker
        do {
            while true {
                let requestedAt = ContinuousClock.now
                let page = try await client.rpc(Routes.listFolderContinue, CursorArgument(cursor: cursor))
                FuseLog.trace("change feed: \(page.entries.count) entries\(page.entries.prefix(64).map { " " + ($0.pathLower ?? "?") + (Node($0) == nil ? " deleted" : "") }.joined())")
                let changes = try store.apply(page.entries, fromChangeFeed: true)
                cursor = page.cursor
                try store.setValue("cursor", cursor)
                heardSince.heard(page.entries, requestedAt: requestedAt)
                notify(changes, page: page.entries, last: !page.hasMore, everything: false)
                if !page.hasMore {
                    let leftBehind = try store.feedPassed(passing)
                    if !leftBehind.isEmpty { announce(leftBehind) }
                    return
                }
            }
        } catch let error as CallError<PathLookupError> {
            guard case .route(.reset, _, _, _) = error else { throw error }
            // New cursor first, then forget: nothing changed in between can be missed.
            let latest = try await client.rpc(Routes.getLatestCursor, ListFolderArgument(path: "", recursive: true))
            try store.clear()
            try store.setValue("cursor", latest.cursor)
            notify([], everything: true)
        }
    }

    /// Waits for changes and applies them until cancelled. Failures back off and go on:
    /// a flaky network delays updates, it never stops them.
    public func run() async {
        var failures = 0
        while !Task.isCancelled {
            do {
                if client.reachability.offlineSince != nil {
                    // The probe: a catch-up is quick, where a longpoll would answer only
                    // once something changed, and it brings what changed meanwhile.
                    try await Reachability.probing { try await catchUp() }
                    failures = 0
                    continue
                }
                guard let cursor = try store.value("cursor") else { try await catchUp(); continue }
                let poll = try await client.rpc(Routes.longpoll, LongpollArgument(cursor: cursor, timeout: 30), timeout: 600)
                if poll.changes {
                    await ownCallsEnd()
                    try await catchUp()
                }
                failures = 0
                if let backoff = poll.backoff { try await Task.sleep(for: .seconds(backoff)) }
            } catch let error as CallError<PathLookupError> where Self.isReset(error) {
                try? await catchUp()
            } catch {
                if Task.isCancelled { return }
                failures += 1
                let offline = client.reachability.offlineSince != nil
                try? await Task.sleep(for: (offline ? Self.probeRetry : Self.pollRetry).wait(attempt: failures))
            }
        }
    }

    /// Waits (a second at most) for the mount's own calls under way: the changes a batch
    /// commits come through the feed while it runs, and each call catches up when it
    /// returns. Fetched as they came, 1,000 small files copied in cost 27 catch-ups.
    private func ownCallsEnd() async {
        for _ in 0..<50 where own.callUnderWay {
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    /// The change feed's retries: soon after a blip, every 30 s at most while it lasts.
    static let pollRetry = RetryPolicy(baseDelay: 0.25, maxDelay: 30)
    /// While Dropbox is out of reach, how often it is looked for: a refused connection costs
    /// nothing, and users wait for their queue to drain.
    static let probeRetry = RetryPolicy(baseDelay: 0.25, maxDelay: 3)

    static func isReset(_ error: CallError<PathLookupError>) -> Bool {
        if case .route(.reset, _, _, _) = error { return true }
        return false
    }
}
