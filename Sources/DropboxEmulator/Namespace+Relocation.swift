import Foundation

/// Which side of a move or copy failed: `RelocationError.from_lookup`, `from_write` or `to`.
enum RelocationFailure: Error {
    case fromLookup(LookupFailure)
    case fromWrite(WriteFailure)
    case to(WriteFailure)
    case intoItself
    case insufficientQuota
}

extension Namespace {
    /// Moves a file or a folder with its contents. Ids survive; the old paths become tombstones
    /// so that cursors see a delete there and an add at the new place. A case-only rename
    /// updates the rows in place.
    func move(from: DropboxPath, to: DropboxPath, autorename: Bool) throws -> Entry {
        try locked {
            let (source, target) = try relocationTargetLocked(from: from, to: to, autorename: autorename)
            return try writeTransactionLocked {
                let seq = nextSeqLocked()
                try ensureAncestorsLocked(of: target, seq: seq)
                var moved: Entry?
                let rows = [source] + (source.isFolder ? try liveDescendantsLocked(source.path) : [])
                for row in rows {
                    var live = row
                    live.path = row.path.rebased(from: source.path, to: target)
                    live.changeSeq = seq
                    if live.path.lower != row.path.lower {
                        var tombstone = row
                        tombstone.isDeleted = true
                        tombstone.blob = nil
                        tombstone.changeSeq = seq
                        try upsertLocked(tombstone)
                    }
                    try upsertLocked(live)
                    if moved == nil { moved = live }
                }
                return moved!
            }
        }
    }

    /// Copies a file or a folder tree. Copies get new ids and revs and share content blobs.
    func copy(from: DropboxPath, to: DropboxPath, autorename: Bool) throws -> Entry {
        try locked {
            let (source, target) = try relocationTargetLocked(from: from, to: to, autorename: autorename)
            let rows = [source] + (source.isFolder ? try liveDescendantsLocked(source.path) : [])
            let bytes = rows.reduce(Int64(0)) { $0 + $1.size }
            if usedBytesLocked + bytes > quota { throw RelocationFailure.insufficientQuota }
            return try writeTransactionLocked {
                let seq = nextSeqLocked()
                try ensureAncestorsLocked(of: target, seq: seq)
                var first: Entry?
                for row in rows {
                    var copy = row
                    copy.path = row.path.rebased(from: source.path, to: target)
                    copy.id = Identifiers.fileID()
                    copy.changeSeq = seq
                    if !copy.isFolder {
                        copy.rev = nextRevLocked(seq: seq)
                        copy.serverModified = Timestamp.now()
                    }
                    try upsertLocked(copy)
                    if !copy.isFolder { try recordRevisionLocked(copy) }
                    if first == nil { first = copy }
                }
                adjustUsedLocked(by: bytes)
                try collectBlobsLocked(droppedBlobs)
                droppedBlobs.removeAll()
                return first!
            }
        }
    }

    /// Validates a move/copy and picks the final target path (autorenamed if asked).
    private func relocationTargetLocked(from: DropboxPath, to: DropboxPath, autorename: Bool) throws -> (Entry, DropboxPath) {
        guard let source = try liveEntryLocked(from) else {
            throw RelocationFailure.fromLookup(.notFound)
        }
        if to.hasDisallowedName(refusing: refusedNames) { throw RelocationFailure.to(.disallowedName) }
        if to.isInside(from) { throw RelocationFailure.intoItself }
        do {
            try requireNoFileAncestor(to, failure: .write(.conflict("file_ancestor")))
        } catch {
            throw RelocationFailure.to(.conflict("file_ancestor"))
        }
        // Compared with the stored name, whatever casing the request used for `from`.
        let caseOnlyRename = to.lower == from.lower && to.display != source.path.display
        if !caseOnlyRename, let existing = try liveEntryLocked(to) {
            guard autorename else { throw RelocationFailure.to(.conflict(existing.isFolder ? "folder" : "file")) }
            return (source, try freeNameLocked(for: to, isFolder: source.isFolder))
        }
        return (source, to)
    }
}
