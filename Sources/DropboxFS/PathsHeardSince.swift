import DropboxAPI
import Synchronization

/// Which paths of the mount's own changes the change feed has told of since each change was
/// answered (`ChangeWatcher.catchUp(after:)`). A page requested after the answer gives each
/// path it names as it is then, the change included and whatever another client did after
/// it: the store holds that, and the change must not be applied over it. (Applied after a
/// catch-up that failed on a later page, a folder made here and removed by another client
/// came back for good: the feed, already past the removal, never told of it again.)
final class PathsHeardSince: Sendable {
    private struct Watch {
        let since: ContinuousClock.Instant
        let paths: Set<String>
        var heard: Set<String> = []
    }

    private let watches = Mutex<(next: Int, open: [Int: Watch])>((0, [:]))

    /// Starts watching `paths` (lower-case), answered by now; `end` gives what was heard.
    func begin(_ paths: [String]) -> Int {
        let watch = Watch(since: .now, paths: Set(paths))
        return watches.withLock { state in
            state.next += 1
            state.open[state.next] = watch
            return state.next
        }
    }

    /// A page of the change feed requested at `requestedAt` was applied.
    func heard(_ page: [Metadata], requestedAt: ContinuousClock.Instant) {
        watches.withLock { state in
            guard !state.open.isEmpty else { return }
            let names = Set(page.compactMap(\.pathLower))
            for (number, watch) in state.open where watch.since <= requestedAt {
                state.open[number]?.heard.formUnion(watch.paths.intersection(names))
            }
        }
    }

    /// Stops watching: the paths the feed told of after the answer.
    func end(_ number: Int) -> Set<String> {
        watches.withLock { $0.open.removeValue(forKey: number)?.heard ?? [] }
    }
}
