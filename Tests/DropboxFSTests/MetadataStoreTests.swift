import DropboxAPI
import DropboxFS
import Foundation
import Testing
import TestSupport

/// The metadata store's own file, as SQLite plans its queries.
@Suite("core: metadata store")
struct MetadataStoreTests {
    /// A lookup finds one child by name through an index on (folder, name): before, it
    /// read every child of the folder, so `stat` of each of 10,000 names in one folder took
    /// 33 s instead of 0.85 s (measured through a mount).
    @Test func aLookupByNameSearchesAnIndexInsteadOfReadingTheFolder() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("store-\(UUID().uuidString).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) } }
        _ = try MetadataStore(path: path)
        let plan = try await ProcessRunner.run("/usr/bin/sqlite3", [path, "EXPLAIN QUERY PLAN SELECT * FROM nodes WHERE parent_lower = '/photos' AND name = 'a.jpg'"])
        #expect(plan.stdout.contains("(parent_lower=? AND name=?)"), "\(plan)")
    }

    /// A folder listed while this mount's move of it is under way: the change feed may bring
    /// the move before its answer, and the folder counts as listed where it lands, so what
    /// the feed brings below it is kept. Only folders listed before the move began counted:
    /// one listed meanwhile lost its entries at the new place until the answer came (failed
    /// before).
    @Test func aFolderListedWhileAMoveOfItIsUnderWayLandsWithIt() throws {
        try Self.withStore { store in
            _ = try store.apply(Self.entries(.folder("/a"), .folder("/b")))
            try store.markListed("/b")
            let ticket = try store.beginLanding(from: "/a", to: "/b/a", id: "id:a")
            defer { store.endLanding(ticket) }
            let listing = try store.listingStarts("/a")
            try store.storeListingPage([Node(pathLower: "/a/x", name: "x", isFolder: false)], of: listing)
            try store.finishListing(listing, children: ["/a/x"])
            _ = try store.apply(Self.entries(.folder("/b/a"), .file("/b/a/x"), .deleted("/a")))
            #expect(try store.node("/b/a/x") != nil)
            #expect(try store.isListed("/b/a"))
        }
    }

    /// Another client moves a folder this mount listed, with a folder listed below it: the
    /// change feed brings the source's removal and every entry of the moved tree at its new
    /// path, the removal first or last, over pages. The listed folders count as listed at
    /// their new paths, and the entries below them are kept (they were dropped, the new
    /// paths never listed: failed before). A folder that was not listed stays so.
    @Test func aFolderMovedElsewhereKeepsItsListingsWhereItLands() throws {
        for removalFirst in [true, false] {
            try Self.withStore { store in
                try Self.listedTree(store)
                let catchUp = store.catchUpMarker
                let moved = try Self.entries(.folder("/m", id: "id:a"), .folder("/m/s", id: "id:s"), .file("/m/s/y"),
                                             .folder("/m/u", id: "id:u"), .file("/m/x"))
                let removal = try Self.entries(.deleted("/a"))
                let pages = removalFirst ? [removal, Array(moved[..<2]), Array(moved[2...])] : [Array(moved[..<2]), Array(moved[2...]), removal]
                for page in pages { _ = try store.apply(page, fromChangeFeed: true) }
                _ = try store.feedPassed(catchUp)
                let order = removalFirst ? "removal first" : "removal last"
                #expect(try store.isListed("/m"), "\(order)")
                #expect(try store.isListed("/m/s"), "\(order)")
                #expect(try !store.isListed("/m/u"), "\(order)")
                #expect(try store.children("/m").map(\.name).sorted() == ["s", "u", "x"], "\(order)")
                #expect(try store.children("/m/s").map(\.name) == ["y"], "\(order)")
                #expect(try store.node("/a") == nil, "\(order)")
            }
        }
    }

    /// The same move, with an entry of the moved folder brought before the folder itself
    /// (Dropbox does not promise parents first): that entry was dropped, so the folder's
    /// listing would lack it, and it does not count as listed. Nor does a folder listed
    /// before a catch-up that read the feed to its end came between the removal and the
    /// arrival (Dropbox brings a move's entries within one catch-up).
    @Test func aMovedFolderIsNotCountedListedWhenTheFeedMayHaveLeftOutPartOfIt() throws {
        try Self.withStore { store in
            try Self.listedTree(store)
            let catchUp = store.catchUpMarker
            _ = try store.apply(Self.entries(.deleted("/a"), .file("/m/x"), .folder("/m", id: "id:a"), .folder("/m/s", id: "id:s"), .file("/m/s/y")),
                                fromChangeFeed: true)
            _ = try store.feedPassed(catchUp)
            #expect(try !store.isListed("/m"))
            #expect(try !store.isListed("/m/s"))
        }
        try Self.withStore { store in
            try Self.listedTree(store)
            let first = store.catchUpMarker
            _ = try store.apply(Self.entries(.deleted("/a")), fromChangeFeed: true)
            _ = try store.feedPassed(first)
            let second = store.catchUpMarker
            _ = try store.apply(Self.entries(.folder("/m", id: "id:a"), .file("/m/x")), fromChangeFeed: true)
            _ = try store.feedPassed(second)
            #expect(try !store.isListed("/m"))
        }
    }

    /// /a (listed: x, s, u), /a/s (listed: y), /a/u not listed.
    private static func listedTree(_ store: MetadataStore) throws {
        _ = try store.apply(entries(.folder("/a", id: "id:a")))
        try store.markListed("/a")
        _ = try store.apply(entries(.folder("/a/s", id: "id:s"), .folder("/a/u", id: "id:u"), .file("/a/x")))
        try store.markListed("/a/s")
        _ = try store.apply(entries(.file("/a/s/y")))
    }

    /// A rename a killed daemon may have made, landed ahead of the first catch-up: the folders
    /// listed at its source count as listed at its destination when they come with their ids,
    /// and only then. A folder another client put there while the mount was down is not the
    /// renamed one, and the store never listed it (it counted as listed before: failed).
    @Test func aRenameLandedAheadListsOnlyTheFoldersThatComeWithTheirIDs() throws {
        for (arrivingID, listed) in [("id:a", true), ("id:theirs", false)] {
            try Self.withStore { store in
                _ = try store.apply(Self.entries(.folder("/a", id: "id:a")))
                try store.markListed("/a")
                _ = try store.apply(Self.entries(.folder("/a/s", id: "id:s")))
                try store.markListed("/a/s")
                let catchUp = store.catchUpMarker
                try store.landAhead(from: "/a", to: "/c", id: "id:a")
                let subfolderID = arrivingID == "id:a" ? "id:s" : "id:theirs-s"
                _ = try store.apply(Self.entries(.folder("/c", id: arrivingID), .folder("/c/s", id: subfolderID)), fromChangeFeed: true)
                _ = try store.feedPassed(catchUp)
                #expect(try store.isListed("/c") == listed, "arriving as \(arrivingID)")
                #expect(try store.isListed("/c/s") == listed, "arriving as \(arrivingID)")
            }
        }
    }

    /// A move whose call failed with its answer lost may have been made: its landing lasts
    /// until a catch-up begun after the failure has read the change feed to its end. The feed
    /// brought the move after the failure, the entry at the new path before the removal at the
    /// old one (it sorts first): ended at the failure, the landing no longer made the moved
    /// folders count as listed where they came, and their listings were lost (offline, rmdir
    /// of an empty folder in one failed with ENETUNREACH; the mount's differential with
    /// faults). Such a landing holds only for folders that come with the ids they had at the
    /// source: if the move was not made, a folder another client puts there is not the moved
    /// one.
    @Test func aMoveWhoseAnswerWasLostLandsUntilTheFeedIsReadPastIt() throws {
        for (arrivingID, listed) in [("id:x", true), ("id:theirs", false)] {
            try Self.withStore { store in
                _ = try store.apply(Self.entries(.folder("/x", id: "id:x")))
                try store.markListed("")
                try store.markListed("/x")
                _ = try store.apply(Self.entries(.folder("/x/a", id: "id:a")))
                try store.markListed("/x/a")
                let before = store.catchUpMarker
                let landing = try store.beginLanding(from: "/x", to: "/b", id: "id:x")
                store.endLanding(landing, answerLost: true)
                _ = try store.feedPassed(before)  // a catch-up under way at the failure: the landing stays
                let catchUp = store.catchUpMarker
                let subfolderID = arrivingID == "id:x" ? "id:a" : "id:theirs-a"
                _ = try store.apply(Self.entries(.folder("/b", id: arrivingID), .folder("/b/a", id: subfolderID)), fromChangeFeed: true)
                if arrivingID == "id:x" { _ = try store.apply(Self.entries(.deleted("/x"), .deleted("/x/a")), fromChangeFeed: true) }
                _ = try store.feedPassed(catchUp)
                #expect(try store.isListed("/b") == listed, "arriving as \(arrivingID)")
                #expect(try store.isListed("/b/a") == listed, "arriving as \(arrivingID)")
                // Ended: a folder coming there now is not counted as listed (one with an id
                // the store knows listed elsewhere would be: another client moved it there).
                _ = try store.apply(Self.entries(.deleted("/b"), .folder("/b", id: "id:new"), .folder("/b/a", id: "id:new-a")), fromChangeFeed: true)
                #expect(try !store.isListed("/b") && !store.isListed("/b/a"))
            }
        }
    }

    /// What the feed took along for a move whose answer was lost stays while the landing
    /// lasts, and goes once the feed is read past the failure without the moved entry at the
    /// new path (the source's removal was another client's, not the move's).
    @Test func whatWasTakenAlongForAMoveWhoseAnswerWasLostGoesIfTheFeedNeverBringsTheMove() throws {
        try Self.withStore { store in
            _ = try store.apply(Self.entries(.folder("/x", id: "id:x")))
            try store.markListed("")
            try store.markListed("/x")
            _ = try store.apply(Self.entries(.file("/x/f")))
            let landing = try store.beginLanding(from: "/x", to: "/b", id: "id:x")
            _ = try store.apply(Self.entries(.deleted("/x")), fromChangeFeed: true)
            #expect(try store.node("/b/f") != nil)
            store.endLanding(landing, answerLost: true)
            #expect(try store.node("/b/f") != nil)
            _ = try store.feedPassed(store.catchUpMarker)
            #expect(try store.node("/b") == nil && store.node("/b/f") == nil)
        }
    }

    /// A listing read after the store learnt that its folder moved (Dropbox answered it
    /// before the move): refused, and nothing of it stays at the old place, listed or not.
    @Test func aListingOfAFolderThatMovedMeanwhileIsRefusedAndLeavesNothing() throws {
        try Self.withStore { store in
            _ = try store.apply(Self.entries(.folder("/a"), .folder("/b")))
            let listing = try store.listingStarts("/a")
            try store.storeListingPage([Node(pathLower: "/a/x", name: "x", isFolder: false)], of: listing)
            try store.applyMove(from: "/a", to: Node(pathLower: "/b/a", name: "a", isFolder: true), landing: nil)
            #expect(throws: FSError.notFound) { try store.storeListingPage([Node(pathLower: "/a/y", name: "y", isFolder: false)], of: listing) }
            #expect(throws: FSError.notFound) { try store.finishListing(listing, children: ["/a/x", "/a/y"]) }
            #expect(try store.node("/a/x") == nil && store.node("/a/y") == nil && !store.isListed("/a"))
            #expect(try store.node("/b/a/x") != nil)  // stored before the move: it went along
        }
    }

    /// A folder's own cursor, read after its listing, tells of a move this mount is making
    /// as removals at the old place only: left to the change feed (which brings them with
    /// the entries at the new place), and the folder is listed again when next needed.
    @Test func aListingsReplayLeavesAMoveUnderWayToTheChangeFeed() throws {
        try Self.withStore { store in
            _ = try store.apply(Self.entries(.folder("/a"), .folder("/c")))
            try store.markListed("/c")
            let listing = try store.listingStarts("/a")
            try store.storeListingPage([Node(pathLower: "/a/x", name: "x", isFolder: false)], of: listing)
            try store.finishListing(listing, children: ["/a/x"])
            let ticket = try store.beginLanding(from: "/a", to: "/b", id: "id:a")
            defer { store.endLanding(ticket) }
            try store.applyListingReplay(Self.entries(.deleted("/a/x"), .file("/c/y")), of: "/a")
            #expect(try store.node("/a/x") != nil)
            #expect(try !store.isListed("/a"))
            #expect(try store.node("/c/y") != nil)  // the rest applied
        }
    }

    /// Listed again, a folder loses what its new listing no longer has.
    @Test func aFolderListedAgainLosesWhatItsListingNoLongerHas() throws {
        try Self.withStore { store in
            _ = try store.apply(Self.entries(.folder("/a")))
            let first = try store.listingStarts("/a")
            try store.storeListingPage([Node(pathLower: "/a/x", name: "x", isFolder: false), Node(pathLower: "/a/y", name: "y", isFolder: false)], of: first)
            try store.finishListing(first, children: ["/a/x", "/a/y"])
            try store.unlist("/a")
            let again = try store.listingStarts("/a")
            try store.storeListingPage([Node(pathLower: "/a/x", name: "x", isFolder: false)], of: again)
            try store.finishListing(again, children: ["/a/x"])
            #expect(try store.node("/a/x") != nil && store.node("/a/y") == nil && store.isListed("/a"))
        }
    }

    /// A file this mount moves into a folder during the folder's first listing (which
    /// Dropbox answered before the move) stays: it is there on Dropbox. It was taken out at
    /// the listing's end, as stale, and shown again only once the folder's cursor brought
    /// the move (failed before).
    @Test func aFileMovedInDuringAFirstListingStays() throws {
        try Self.withStore { store in
            _ = try store.apply(Self.entries(.folder("/a"), .folder("/c"), .file("/c/m")))
            try store.markListed("/c")
            let listing = try store.listingStarts("/a")
            try store.storeListingPage([Node(pathLower: "/a/x", name: "x", isFolder: false)], of: listing)
            try store.applyMove(from: "/c/m", to: Node(pathLower: "/a/m", name: "m", isFolder: false), landing: nil)
            try store.finishListing(listing, children: ["/a/x"])
            #expect(try store.node("/a/m") != nil && store.node("/a/x") != nil)
        }
    }

    /// A move of this mount's whose call the change feed answered first, with what other
    /// clients did after it: the store keeps what the feed brought when the move's answer is
    /// applied. It moved again whatever held the source's name by then (another client's new
    /// folder), over what had been made in the target (both mounts of one account were
    /// stressing one tree: one of them never showed a folder Dropbox had), brought back a
    /// target deleted since, and took an edited file back to its older revision (failed
    /// before).
    @Test func aMoveTheChangeFeedBroughtDuringItsCallKeepsWhatCameAfter() throws {
        try Self.withStore { store in
            _ = try store.apply(Self.entries(.folder("/a", id: "id:moved"), .file("/f", id: "id:file"), .folder("/d", id: "id:gone")))
            try store.markListed("/a")
            let folder = try store.beginLanding(from: "/a", to: "/n5", id: "id:moved")
            let file = try store.beginLanding(from: "/f", to: "/g", id: "id:file")
            let gone = try store.beginLanding(from: "/d", to: "/e", id: "id:gone")
            defer { for landing in [folder, file, gone] { store.endLanding(landing) } }
            _ = try store.apply(Self.entries(
                .deleted("/a"), .folder("/n5", id: "id:moved"), .deleted("/f"), .file("/g", id: "id:file"), .deleted("/d"), .folder("/e", id: "id:gone"),
                // Then another client: a new folder at the old name, one in the moved folder,
                // an edit of the moved file, the other moved folder deleted.
                .folder("/a", id: "id:new"), .folder("/n5/n8", id: "id:inside"), .file("/g", id: "id:file", rev: "0123456790", size: 5), .deleted("/e")),
                fromChangeFeed: true)

            var moved = Node(pathLower: "/n5", name: "n5", isFolder: true)
            moved.id = "id:moved"
            try store.applyMove(from: "/a", to: moved, landing: folder)
            var movedFile = Node(pathLower: "/g", name: "g", isFolder: false)
            (movedFile.id, movedFile.rev, movedFile.size) = ("id:file", "0123456789", 1)
            try store.applyMove(from: "/f", to: movedFile, landing: file)
            var movedGone = Node(pathLower: "/e", name: "e", isFolder: true)
            movedGone.id = "id:gone"
            try store.applyMove(from: "/d", to: movedGone, landing: gone)

            #expect(try store.node("/a")?.id == "id:new")
            #expect(try store.node("/n5")?.id == "id:moved")
            #expect(try store.node("/n5/n8") != nil)
            #expect(try store.node("/g")?.rev == "0123456790" && store.node("/g")?.size == 5)
            #expect(try store.node("/e") == nil && store.node("/d") == nil)
        }
    }

    /// A move whose entry the change feed brought at its source during the call: moved back
    /// there by another client after the move (a page tells the new path's removal and the
    /// entry at its old path, never the move), the store keeps it where the feed put it; from
    /// before the move (the feed behind), and Dropbox, asked since, has it at the target,
    /// the store learns the move (`seenAtTarget`). The first took the folder from where
    /// Dropbox had it, for good (two mounts under faults; failed before). Dropbox not asked
    /// (the feed brought the entry after the caller looked), the store says it needs its
    /// word and changes nothing: it left the move to the feed, and a case-only rename's
    /// hidden name showed (four differential sequences at once; failed before).
    @Test(arguments: [false, true, nil])
    func aMoveWhoseEntryTheFeedBroughtAtItsSourceIsLearntOnlyIfDropboxHasItAtTheTarget(seenAtTarget: Bool?) throws {
        try Self.withStore { store in
            _ = try store.apply(Self.entries(.folder("/a", id: "id:moved"), .folder("/b", id: "id:b")))
            let landing = try store.beginLanding(from: "/a", to: "/b/a", id: "id:moved")
            defer { store.endLanding(landing) }
            _ = try store.apply(Self.entries(.deleted("/b/a"), .folder("/a", id: "id:moved")), fromChangeFeed: true)
            #expect(store.sourceSeenAgain(landing))
            var moved = Node(pathLower: "/b/a", name: "a", isFolder: true)
            moved.id = "id:moved"
            guard let seenAtTarget else {
                #expect(throws: MetadataStore.DropboxWordNeeded.self) { try store.applyMove(from: "/a", to: moved, landing: landing) }
                #expect(try store.node("/a")?.id == "id:moved" && store.node("/b/a") == nil)
                return
            }
            try store.applyMove(from: "/a", to: moved, landing: landing, seenAtTarget: seenAtTarget)
            #expect(try store.node("/a") == nil ? seenAtTarget : !seenAtTarget)
            #expect(try store.node("/b/a") == nil ? !seenAtTarget : seenAtTarget)
        }
    }

    /// The change feed gives each path's latest entry only: a listed folder removed and
    /// another entry put at its path comes as that entry alone. What the store had below the
    /// old folder goes, and the new folder is not taken as listed: the old children stayed,
    /// and a listing marked meanwhile kept the new folder's own children from the store for
    /// good (two mounts stressing one tree: one never showed a folder's entries Dropbox had).
    @Test func aFolderReplacedAtItsPathLeavesNothingOfItsOwnBelow() throws {
        try Self.withStore { store in
            _ = try store.apply(Self.entries(.folder("/p", id: "id:old"), .folder("/q")))
            try store.markListed("/p")
            try store.markListed("/q")
            _ = try store.apply(Self.entries(.file("/p/c"), .folder("/q/c")))
            _ = try store.apply(Self.entries(.folder("/p", id: "id:new"), .file("/q")), fromChangeFeed: true)
            #expect(try store.node("/p")?.id == "id:new" && store.node("/q")?.isFolder == false)
            #expect(try store.node("/p/c") == nil && store.node("/q/c") == nil)
            #expect(try !store.isListed("/p") && !store.isListed("/q"))
            // The same folder (its id), changed or not, keeps what it has.
            try store.markListed("/p")
            _ = try store.apply(Self.entries(.file("/p/d")))
            _ = try store.apply(Self.entries(.folder("/p", id: "id:new")), fromChangeFeed: true)
            #expect(try store.node("/p/d") != nil && store.isListed("/p"))
        }
    }

    /// A move of this mount's whose source name another entry holds in the store by the time
    /// its answer is applied (the change feed gave that name's latest entry alone, not the
    /// move's removal there): that entry stays with what is below it. It went to the
    /// move's target, and its own name showed nothing of it for good (two mounts stressing
    /// one tree; failed before).
    @Test func aMoveWhoseSourceNameAnotherEntryHoldsLeavesThatEntryAlone() throws {
        try Self.withStore { store in
            _ = try store.apply(Self.entries(.folder("/a", id: "id:theirs")))
            try store.markListed("/a")
            _ = try store.apply(Self.entries(.file("/a/c")))
            let landing = try store.beginLanding(from: "/a", to: "/b", id: "id:moved")
            defer { store.endLanding(landing) }
            var moved = Node(pathLower: "/b", name: "b", isFolder: true)
            moved.id = "id:moved"
            try store.applyMove(from: "/a", to: moved, landing: landing)
            #expect(try store.node("/a")?.id == "id:theirs" && store.node("/a/c") != nil && store.isListed("/a"))
            #expect(try store.node("/b/c") == nil)
        }
    }

    /// A move whose call ends before the change feed brings it is learnt at once, as before.
    @Test func aMoveAnsweredBeforeTheChangeFeedIsLearntAtOnce() throws {
        try Self.withStore { store in
            _ = try store.apply(Self.entries(.folder("/a", id: "id:moved"), .folder("/other")))
            try store.markListed("/a")
            _ = try store.apply(Self.entries(.file("/a/x")))
            let landing = try store.beginLanding(from: "/a", to: "/b", id: "id:moved")
            defer { store.endLanding(landing) }
            _ = try store.apply(Self.entries(.folder("/other/y")), fromChangeFeed: true)  // older changes only
            var moved = Node(pathLower: "/b", name: "b", isFolder: true)
            moved.id = "id:moved"
            try store.applyMove(from: "/a", to: moved, landing: landing)
            #expect(try store.node("/a") == nil && store.node("/b")?.id == "id:moved")
            #expect(try store.node("/b/x") != nil && store.isListed("/b"))
        }
    }

    /// A folder move learnt before the change feed brought it takes the folder's entries
    /// along, one another client had removed just before among them. The feed brings that
    /// removal at the old path, and the move itself as removals at every old path and the
    /// entries at the new ones, in an order of its own: nothing goes until the feed is past
    /// the move, then what was removed and never shown at its new path goes from there.
    /// (Following each removal at once took files of a folder renamed here away until the
    /// move's entries came: a file just made in it was ENOENT, `RaceTests`.)
    @Test func anEntryRemovedElsewhereBeforeAMoveTookItAlongGoesOnceTheFeedIsPastTheMove() throws {
        try Self.withStore { store in
            _ = try store.apply(Self.entries(.folder("/a", id: "id:moved")))
            try store.markListed("")
            try store.markListed("/a")
            _ = try store.apply(Self.entries(.file("/a/gone"), .file("/a/went")))
            let landing = try store.beginLanding(from: "/a", to: "/b", id: "id:moved")
            var moved = Node(pathLower: "/b", name: "b", isFolder: true)
            moved.id = "id:moved"
            try store.applyMove(from: "/a", to: moved, landing: landing)
            store.endLanding(landing)
            let catchUp = store.catchUpMarker
            _ = try store.apply(Self.entries(.deleted("/a/gone")), fromChangeFeed: true)  // theirs, older
            _ = try store.apply(Self.entries(.deleted("/a"), .deleted("/a/went"), .folder("/b", id: "id:moved"), .file("/b/went")),
                                fromChangeFeed: true)
            #expect(try store.node("/b/gone") != nil && store.node("/b/went") != nil)
            let removed = try store.feedPassed(catchUp)
            #expect(removed.map(\.pathLower) == ["/b/gone"] && removed.first?.new == nil)
            #expect(try store.node("/b/gone") == nil && store.node("/b/went") != nil)
            // Past the move, a removal at an old path is of an entry made there since.
            _ = try store.apply(Self.entries(.file("/b/kept")), fromChangeFeed: true)
            _ = try store.apply(Self.entries(.deleted("/a/kept")), fromChangeFeed: true)
            #expect(try store.feedPassed(store.catchUpMarker).isEmpty && store.node("/b/kept") != nil)
        }
    }

    /// The removal a move's record calls for, failing to reach the store (a full cache
    /// disk), is tried again at the next catch-up's end: the record was dropped before the
    /// write, and the entry stayed at the new path for good (failed before).
    @Test func aRemovalAfterAMoveThatAFullDiskStoppedIsMadeAtTheNextCatchUp() throws {
        let disk = FileManager.default.temporaryDirectory.appendingPathComponent("small-disk-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: disk, withIntermediateDirectories: true)
        defer { rmdir(disk) }
        try #require(mount("tmpfs", disk, "tmpfs", 0, "size=4m") == 0, "cannot mount a tmpfs: errno \(errno)")
        defer { umount2(disk, Int32(MNT_DETACH)) }
        let store = try MetadataStore(path: disk + "/metadata.sqlite")
        _ = try store.apply(Self.entries(.folder("/a", id: "id:moved")))
        try store.markListed("")
        try store.markListed("/a")
        _ = try store.apply(Self.entries(.file("/a/gone")))
        let landing = try store.beginLanding(from: "/a", to: "/b", id: "id:moved")
        var moved = Node(pathLower: "/b", name: "b", isFolder: true)
        moved.id = "id:moved"
        try store.applyMove(from: "/a", to: moved, landing: landing)
        store.endLanding(landing)
        let catchUp = store.catchUpMarker
        _ = try store.apply(Self.entries(.deleted("/a/gone")), fromChangeFeed: true)
        _ = try store.apply(Self.entries(.deleted("/a"), .folder("/b", id: "id:moved")), fromChangeFeed: true)

        let filler = disk + "/filler"
        // Close-on-exec: a process another test spawns meanwhile inherited the descriptor
        // and kept the filler's space after its unlink (failed once in a whole run).
        let fd = open(filler, O_CREAT | O_WRONLY | O_CLOEXEC, 0o600)
        try #require(fd >= 0)
        let block = [UInt8](repeating: 1, count: 64 * 1024)
        while write(fd, block, block.count) > 0 {}
        close(fd)
        #expect(throws: (any Error).self) { try store.feedPassed(catchUp) }
        unlink(filler)
        let removed = try store.feedPassed(store.catchUpMarker)
        #expect(removed.map(\.pathLower) == ["/b/gone"])
        #expect(try store.node("/b/gone") == nil)
    }

    private static func withStore(_ body: (MetadataStore) throws -> Void) throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("store-\(UUID().uuidString).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) } }
        try body(try MetadataStore(path: path))
    }

    private enum Entry {
        case folder(String, id: String? = nil)
        case file(String, id: String? = nil, rev: String = "0123456789", size: Int = 1)
        case deleted(String)
    }

    /// Entries as Dropbox's JSON gives them (ids from the names unless given: a moved entry
    /// keeps its id only in tests that say so).
    private static func entries(_ list: Entry...) throws -> [Metadata] {
        try list.map { entry in
            let (tag, path, id, rev, size): (String, String, String?, String, Int) = switch entry {
            case .folder(let path, let id): ("folder", path, id, "", 0)
            case .file(let path, let id, let rev, let size): ("file", path, id, rev, size)
            case .deleted(let path): ("deleted", path, nil, "", 0)
            }
            let name = String(path.split(separator: "/").last ?? "")
            var json: [String: Any] = [".tag": tag, "name": name, "path_lower": path, "path_display": path]
            if tag != "deleted" { json["id"] = id ?? "id:\(name)" }
            if tag == "file" {
                json.merge(["rev": rev, "size": size, "client_modified": "2026-01-01T00:00:00Z",
                            "server_modified": "2026-01-01T00:00:00Z", "content_hash": String(repeating: "0", count: 64)]) { $1 }
            }
            let decoder = JSONDecoder()
            decoder.keyDecodingStrategy = .convertFromSnakeCase
            return try decoder.decode(Metadata.self, from: JSONSerialization.data(withJSONObject: json))
        }
    }
}
