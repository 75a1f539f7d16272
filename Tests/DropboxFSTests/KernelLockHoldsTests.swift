@testable import DropboxFS
import Testing

/// Invalidations wait while a request being answered holds the kernel lock they need, and
/// go once the last such request is answered (the mount tests kill a daemon then; these
/// check the bookkeeping's edges).
@Suite("core: kernel lock holds")
struct KernelLockHoldsTests {
    @Test func anInvalidationWaitsUntilTheLastRequestHoldingItsLockIsAnswered() {
        let holds = KernelLockHolds()
        holds.take([.folder(1)])
        holds.take([.folder(1), .folder(2)])  // a rename between folders 1 and 2
        #expect(holds.keep(.entry(parent: 1, name: "a")))
        #expect(holds.keep(.entry(parent: 2, name: "b")))
        #expect(!holds.keep(.entry(parent: 3, name: "c")), "no request holds folder 3")
        #expect(holds.invalidationsWaiting == 2)

        #expect(holds.release([.folder(1), .folder(2)]) == [.folder(2)])
        #expect(holds.takeWaiting(for: .folder(2)).count == 1)
        #expect(holds.takeWaiting(for: .folder(1)).isEmpty, "the first request holds folder 1 still")
        #expect(holds.release([.folder(1)]) == [.folder(1)])
        #expect(holds.takeWaiting(for: .folder(1)).count == 1)
        #expect(holds.invalidationsWaiting == 0 && holds.locksHeld == 0)
    }

    /// A rename within one folder names it twice: it is free only after both releases.
    @Test func aLockNamedTwiceByOneRequestIsFreeOnceItIsAnswered() {
        let holds = KernelLockHolds()
        holds.take([.folder(7), .folder(7)])
        #expect(holds.keep(.entry(parent: 7, name: "x")))
        #expect(holds.release([.folder(7), .folder(7)]) == [.folder(7)])
        #expect(holds.takeWaiting(for: .folder(7)).count == 1)
    }

    /// Taken again before the waiting invalidations were sent: they wait for that request too.
    @Test func aLockTakenAgainBeforeTheSendKeepsItsInvalidations() {
        let holds = KernelLockHolds()
        holds.take([.pages(5)])
        #expect(holds.keep(.inode(5, pages: true)))
        #expect(!holds.keep(.inode(5, pages: false)), "attributes take no lock")
        #expect(holds.release([.pages(5)]) == [.pages(5)])
        holds.take([.pages(5)])
        #expect(holds.takeWaiting(for: .pages(5)).isEmpty)
        #expect(holds.release([.pages(5)]) == [.pages(5)])
        #expect(holds.takeWaiting(for: .pages(5)).count == 1)
    }
}
