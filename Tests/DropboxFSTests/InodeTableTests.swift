@testable import DropboxFS
import PropertyBased
import Testing

/// The inode table finds what lies below a path (for an rmdir, a rename, a remote delete)
/// through counts kept per path, and scans its entries only when something is there.
@Suite("core: inode table")
struct InodeTableTests {
    /// After a `find` over a large tree the table holds up to `inodeLimit` entries; an
    /// `rm -r` elsewhere then detached each of its folders with a scan of all of them, and
    /// every rename of a file scanned them too.
    @Test func emptyFoldersAndFilesGoWithoutAScanWhateverTheTableHolds() {
        let table = InodeTable()
        for folder in 0..<100 {
            for file in 0..<1_000 { table.retain(table.inode(for: "/big/d\(folder)/f\(file)"), path: "/big/d\(folder)/f\(file)") }
        }
        for folder in 0..<50 {
            let files = (0..<20).map { "/tree/d\(folder)/f\($0)" }
            for file in files { table.retain(table.inode(for: file), path: file) }
            for file in files.prefix(10) { table.detach(file) }  // unlink
            for file in files.suffix(10) { table.rename(from: file, to: file + ".moved") }
            for file in files.suffix(10) { table.detach(file + ".moved") }
            table.detach("/tree/d\(folder)", folder: true)  // rmdir
        }
        #expect(table.subtreeScans == 0)
        #expect(table.entries.count == 100_000 + 1_000)
        // A folder something is held below still takes its held entries along.
        let held = table.inode(for: "/big/d7/f3")
        table.rename(from: "/big/d7", to: "/moved")
        #expect(table.path(of: held) == "/moved/f3")
        table.detach("/moved", folder: true)
        #expect(table.path(of: held) == nil)
        #expect(table.subtreeScans == 2)
    }

    /// A folder the kernel holds, detached as a file (the change feed's removal of a file
    /// renamed away from its path, before a folder was renamed there): what lies below goes
    /// too, or a lookup below the path's next inode hands a folder's inode the kernel holds
    /// under the old one (ESTALE).
    @Test func aFolderDetachedAsAFileTakesWhatLiesBelowAlong() {
        let table = InodeTable()
        let folder = table.retain(table.inode(for: "/r/a"), path: "/r/a", isFolder: true)
        let below = table.retain(table.inode(for: "/r/a/sub"), path: "/r/a/sub", isFolder: true)
        table.detach("/r/a", folder: false)
        #expect(table.path(of: folder) == nil)
        #expect(table.path(of: below) == nil)
        #expect(table.inode(for: "/r/a/sub") != below)
    }

    /// Random operations on a table with the counts and on one that always scans (the
    /// reference): every path leads to the same inode and every inode has the same path.
    /// Another client replaced a folder the kernel holds by a file (or a file by a folder),
    /// and a lookup answers with the new kind before the change feed has detached the old
    /// inode: the path gets a number of its own. With the held number the kernel would mark
    /// its inode bad, and calls through it in other threads would fail with EIO.
    @Test func aPathHandedOutAsTheOtherKindGetsANumberOfItsOwn() {
        let table = InodeTable()
        let folder = table.retain(table.inode(for: "/a"), path: "/a", isFolder: true)
        let below = table.retain(table.inode(for: "/a/x"), path: "/a/x", isFolder: false)
        #expect(table.retain(folder, path: "/a", isFolder: true) == folder)  // the same kind: the same number
        let file = table.retain(table.inode(for: "/a"), path: "/a", isFolder: false)
        #expect(file != folder)
        #expect(table.path(of: file) == "/a" && table.path(of: folder) == nil && table.path(of: below) == nil)
        #expect(table.existing("/a") == file)
        // readdirplus hands its entries out the same way.
        let again = table.numbers(for: [(path: "/a", isFolder: true)], handed: true)
        #expect(again.count == 1 && again[0] != file && again[0] != folder)
        #expect(table.path(of: again[0]) == "/a" && table.path(of: file) == nil)
    }

    /// A rename onto a path the table held for another inode (a stale readdirplus entry, a
    /// name the view no longer showed): that inode loses the path. Both were left there, and
    /// a rename of the folder above moved both, the path then leading to the stale one: the
    /// kernel, handed a folder it held under another parent, failed an `mkdir` with ESTALE.
    @Test func aRenameOntoAHeldPathTakesThePathFromTheInodeThere() {
        let table = InodeTable()
        let stale = table.retain(table.inode(for: "/a/x"), path: "/a/x", isFolder: true)
        let moved = table.retain(table.inode(for: "/b"), path: "/b", isFolder: true)
        table.rename(from: "/b", to: "/a/x")
        #expect(table.existing("/a/x") == moved && table.path(of: stale) == nil)
        table.rename(from: "/a", to: "/c")
        #expect(table.existing("/c/x") == moved && table.path(of: moved) == "/c/x" && table.path(of: stale) == nil)
    }

    /// A number given to a path, whose entry went (never handed to the kernel) before it was
    /// handed: the path has another number by then, and that is the one handed, not a second
    /// inode at one path.
    @Test func aStaleNumberIsHandedAsThePathsNumberNow() {
        let table = InodeTable()
        table.retain(table.inode(for: "/p"), path: "/p")
        table.rename(from: "/p", to: "/q")  // held, keeping the number of "/p"
        let early = table.inode(for: "/p")  // a spare, not handed yet
        _ = table.oldest(over: 0)  // drops what the kernel does not hold
        let current = table.inode(for: "/p")
        #expect(current != early)
        #expect(table.retain(early, path: "/p") == current)
        #expect(table.path(of: early) == nil && table.existing("/p") == current)
    }

    /// A number taken for a path whose inode then moved to another path, or was detached,
    /// while the kernel held it (a lookup that waited while another call renamed or removed
    /// it): handed for the old path, the kernel would find one folder under two parents and
    /// answer ESTALE (seen in SharedTreeStressTests, rename and read of b/x against a/x).
    @Test func aNumberWhoseInodeMovedIsNotHandedForItsOldPath() {
        let table = InodeTable()
        let folder = table.retain(table.inode(for: "/b/x"), path: "/b/x", isFolder: true)
        let taken = table.inode(for: "/b/x")  // a lookup of b/x takes its number, then waits
        table.rename(from: "/b/x", to: "/a/x")
        let handed = table.retain(taken, path: "/b/x", isFolder: true)
        #expect(handed != folder)
        #expect(table.path(of: folder) == "/a/x" && table.path(of: handed) == "/b/x")
        #expect(table.existing("/a/x") == folder && table.existing("/b/x") == handed)
        // Detached meanwhile (another client removed it): the path's own number as well.
        let again = table.inode(for: "/a/x")
        table.detach("/a/x", folder: true)
        let after = table.retain(again, path: "/a/x", isFolder: true)
        #expect(after != folder && table.existing("/a/x") == after && table.path(of: folder) == nil)
    }

    @Test func theCountsFindWhatAScanFinds() async {
        // Two trees of the same shape, so that a rename between them stays in the universe;
        // "/a/bb" and "/a/b" share a prefix that is not a folder.
        let shape = ["", "/b", "/bb", "/b/c", "/f", "/b/f", "/bb/f", "/b/c/f"]
        let paths = ["/a", "/d"].flatMap { top in shape.map { top + $0 } }
        let isFolder = { (path: String) in !path.hasSuffix("/f") }
        let step = zip(Gen.int(in: 0...5), Gen.int(in: 0..<paths.count), Gen.int(in: 0..<shape.count))
        await propertyCheck(count: 300, input: step.array(of: 1...60)) { steps in
            let tables = [InodeTable(), InodeTable(alwaysScans: true)]
            for (kind, first, second) in steps {
                let path = paths[first]
                let numbers = tables.map { table -> UInt64? in
                    switch kind {
                    case 0: return table.inode(for: path)
                    case 1:
                        let inode = table.inode(for: path)
                        table.retain(inode, path: path)
                        return inode
                    case 2:
                        guard let inode = table.existing(path) else { return nil }
                        table.forget(inode, count: 1)
                        return inode
                    case 3:
                        return table.detach(path, folder: isFolder(path)).inode
                    case 4:
                        // Into the other tree, at the same place of its shape; the target's
                        // inode detached first, or not (a path the view no longer showed).
                        let top = path.hasPrefix("/a") ? "/d" : "/a"
                        let target = top + path.dropFirst(2)
                        if second % 2 == 0 { table.detach(target, folder: isFolder(target)) }
                        table.rename(from: path, to: target)
                        return nil
                    default:
                        return UInt64(table.oldest(over: second).count)
                    }
                }
                #expect(numbers[0] == numbers[1], "step \(kind) on \(path)")
                #expect(tables[0].entries == tables[1].entries, "after step \(kind) on \(path)")
                #expect(paths.map { tables[0].existing($0) } == paths.map { tables[1].existing($0) })
                // Every entry's path leads back to it.
                for (inode, path) in tables[0].entries where path != InodeTable.detachedPath {
                    #expect(tables[0].existing(path) == inode, "after step \(kind): \(path) leads to another inode")
                }
            }
        }
    }
}
