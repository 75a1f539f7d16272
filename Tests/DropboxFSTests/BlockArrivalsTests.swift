@testable import DropboxFS
import Synchronization
import Testing

/// `BlockArrivals`: a read of content being handed to the block cache waits until every
/// hand-over of it has ended, and no longer.
@Suite("core: block arrivals")
struct BlockArrivalsTests {
    @Test func aWaitEndsWithTheLastHandOverOfItsContent() async {
        let arrivals = BlockArrivals()
        await arrivals.awaitArrival(of: "h")  // nothing under way: returns at once
        arrivals.expect(["h", "h", "other"])  // the same bytes in two files, and another
        let released = Mutex(false)
        let waiting = Task {
            await arrivals.awaitArrival(of: "h")
            let afterTheLast = released.withLock { $0 }
            #expect(afterTheLast, "returned before the last hand-over ended")
        }
        arrivals.ended(["h"])
        arrivals.ended(["other"])
        #expect(arrivals.isExpected("h"))
        #expect(!arrivals.isExpected("other"))
        released.withLock { $0 = true }
        arrivals.ended(["h"])
        await waiting.value
        #expect(!arrivals.isExpected("h"))
        arrivals.ended(["never expected"])  // ignored
        await arrivals.awaitArrival(of: "h")
    }
}
