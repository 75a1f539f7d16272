import DropboxAPI
import Foundation

/// Keeps the metadata store current with one account-wide cursor (recursive, from the root),
/// kept in the store across mounts: `list_folder/longpoll` waits for a change, then
/// `list_folder/continue` pages are applied and reported for kernel invalidation. A cursor
/// `reset` clears the store (folders are listed again when next needed).
public final class ChangeWatcher: Sendable {
    public typealias Listener = @Sendable ([StoreChange], _ everything: Bool) -> Void

    let client: DropboxClient
    let store: MetadataStore
    let listener: Listener

    public init(client: DropboxClient, store: MetadataStore, listener: @escaping Listener) {
        self.client = client
        self.store = store
        self.listener = listener
    }

    /// Applies every change since the stored cursor (or takes a cursor at "now" on a first
    /// mount). Run before the mount is offered, so a remount never shows stale entries.
    public func catchUp() async throws {
        guard var cursor = try store.value("cursor") else {
            let latest = try await client.rpc(Routes.getLatestCursor, ListFolderArgument(path: "", recursive: true))
            try store.setValue("cursor", latest.cursor)
            return
        }
        do {
            while true {
                let page = try await client.rpc(Routes.listFolderContinue, CursorArgument(cursor: cursor))
                let changes = try store.apply(page.entries)
                cursor = page.cursor
                try store.setValue("cursor", cursor)
                if !changes.isEmpty { listener(changes, false) }
                if !page.hasMore { return }
            }
        } catch let error as CallError<PathLookupError> {
            guard case .route(.reset, _, _, _) = error else { throw error }
            // New cursor first, then forget: nothing changed in between can be missed.
            let latest = try await client.rpc(Routes.getLatestCursor, ListFolderArgument(path: "", recursive: true))
            try store.clear()
            try store.setValue("cursor", latest.cursor)
            listener([], true)
        }
    }

    /// Waits for changes and applies them until cancelled. Failures back off and go on:
    /// a flaky network delays updates, it never stops them.
    public func run() async {
        var failures = 0
        while !Task.isCancelled {
            do {
                guard let cursor = try store.value("cursor") else { try await catchUp(); continue }
                let poll = try await client.rpc(Routes.longpoll, LongpollArgument(cursor: cursor, timeout: 30), timeout: 600)
                if poll.changes { try await catchUp() }
                failures = 0
                if let backoff = poll.backoff { try await Task.sleep(for: .seconds(backoff)) }
            } catch let error as CallError<PathLookupError> where Self.isReset(error) {
                try? await catchUp()
            } catch {
                if Task.isCancelled { return }
                failures += 1
                try? await Task.sleep(for: .milliseconds(min(30_000, 250 << min(failures, 7))))
            }
        }
    }

    static func isReset(_ error: CallError<PathLookupError>) -> Bool {
        if case .route(.reset, _, _, _) = error { return true }
        return false
    }
}
