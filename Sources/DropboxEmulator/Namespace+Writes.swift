import Foundation

/// Bytes ready to become a file's content: a staged file (moved into `blobs/` on commit, or
/// there already: a session's) and what was measured while it streamed in.
struct StagedContent {
    var file: String?
    var size: Int64
    var contentHash: String
    /// The content of a concurrent upload session (whose pieces are recorded apart).
    var concurrentSession = false
}

/// `WriteMode`: how a commit treats a file already at the path.
enum WriteMode: Equatable {
    case add
    case overwrite
    case update(rev: String)
}

struct CommitRequest {
    var path: DropboxPath
    var mode: WriteMode = .add
    var autorename = false
    var strictConflict = false
    var clientModified: Int64?
}

extension Namespace {
    func createFolder(_ path: DropboxPath, autorename: Bool) throws -> Entry {
        try locked {
            if path.hasDisallowedName(refusing: refusedNames) { throw NamespaceFailure.write(.disallowedName) }
            try requireNoFileAncestor(path, failure: .write(.conflict("file_ancestor")))
            var target = path
            if let existing = try liveEntryLocked(path) {
                guard autorename else { throw NamespaceFailure.write(.conflict(existing.isFolder ? "folder" : "file")) }
                target = try freeNameLocked(for: path, isFolder: true)
            }
            return try writeTransactionLocked {
                let seq = nextSeqLocked()
                try ensureAncestorsLocked(of: target, seq: seq)
                return try insertFolderLocked(target, seq: seq)
            }
        }
    }

    /// Commits staged content to a file, applying the write mode's conflict rules as Dropbox
    /// does: identical content is no conflict unless `strict_conflict`; a conflict either fails
    /// or, with `autorename`, lands beside the original.
    func commitFile(_ request: CommitRequest, content: StagedContent) throws -> Entry {
        try locked { try commitFileLocked(request, content: content) }
    }

    func commitFileLocked(_ request: CommitRequest, content: StagedContent) throws -> Entry {
        let path = request.path
        if path.hasDisallowedName(refusing: refusedNames) { throw NamespaceFailure.write(.disallowedName) }
        try requireNoFileAncestor(path, failure: .write(.conflict("file_ancestor")))
        let existing = try liveEntryLocked(path)
        let sameContent = existing.map { !$0.isFolder && $0.contentHash == content.contentHash } ?? false
        var target = path
        var replacing: Entry?

        func conflict(_ kind: String, renamed: () throws -> DropboxPath) throws {
            guard request.autorename else { throw NamespaceFailure.write(.conflict(kind)) }
            target = try renamed()
        }

        switch request.mode {
        case .add:
            if let existing {
                if sameContent && !request.strictConflict { return existing }
                try conflict(existing.isFolder ? "folder" : "file") { try freeNameLocked(for: path, isFolder: false) }
            }
        case .overwrite:
            if let existing {
                if existing.isFolder {
                    try conflict("folder") { try freeNameLocked(for: path, isFolder: false) }
                } else if sameContent && !request.strictConflict {
                    return existing
                } else {
                    replacing = existing
                }
            }
        case .update(let rev):
            if let existing, !existing.isFolder, existing.rev == rev {
                if sameContent { return existing }
                replacing = existing
            } else if existing == nil && !request.strictConflict {
                break
            } else if sameContent && !request.strictConflict, let existing {
                return existing
            } else {
                try conflict(existing?.isFolder == true ? "folder" : "file") { try conflictedCopyNameLocked(for: path) }
            }
        }

        var entry = Entry(path: target, id: replacing?.id ?? Identifiers.fileID(), isFolder: false)
        entry.size = content.size
        entry.contentHash = content.contentHash
        return try commitRevisionLocked(entry, clientModified: request.clientModified, replacing: replacing) {
            guard let file = content.file, content.size > 0 else { return nil }
            if file.hasPrefix(blobsPath + "/") { return String(file.dropFirst(blobsPath.count + 1)) }  // a session's data file
            let name = "b" + Identifiers.random(20)
            guard rename(file, blobFile(name)) == 0 else {
                throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            }
            return name
        }
    }

    /// Writes `file` (its path, id, size and hash) as the file's new revision, over `replacing`
    /// if the path holds a file: the quota checked, the revision recorded, blobs no longer
    /// referenced collected. `clientModified` nil is now; `blob` gives the content's blob name
    /// inside the transaction (moving a staged file into `blobs/`).
    func commitRevisionLocked(_ file: Entry, clientModified: Int64?, replacing: Entry?, blob: () throws -> String?) throws -> Entry {
        let growth = file.size - (replacing?.size ?? 0)
        if growth > 0 && usedBytesLocked + growth > quota { throw NamespaceFailure.write(.insufficientSpace) }
        return try writeTransactionLocked {
            let seq = nextSeqLocked()
            try ensureAncestorsLocked(of: file.path, seq: seq)
            var entry = file
            entry.rev = nextRevLocked(seq: seq)
            entry.serverModified = Timestamp.now()
            entry.clientModified = clientModified ?? entry.serverModified
            entry.changeSeq = seq
            entry.blob = try blob()
            try upsertLocked(entry)
            try recordRevisionLocked(entry)
            adjustUsedLocked(by: growth)
            try collectBlobsLocked([replacing?.blob].compactMap { $0 } + droppedBlobs)
            droppedBlobs.removeAll()
            return entry
        }
    }

    /// Deletes a file, or a folder with everything inside it (Dropbox's delete is recursive).
    func delete(_ path: DropboxPath, parentRev: String?) throws -> Entry {
        try locked {
            guard let entry = try liveEntryLocked(path) else {
                try requireNoFileAncestor(path, failure: .lookup(.notFolder))
                throw NamespaceFailure.lookup(.notFound)
            }
            if let parentRev, entry.isFolder || entry.rev != parentRev {
                throw NamespaceFailure.write(.conflict(entry.isFolder ? "folder" : "file"))
            }
            try writeTransactionLocked {
                let seq = nextSeqLocked()
                let doomed = [entry] + (entry.isFolder ? try liveDescendantsLocked(path) : [])
                for var row in doomed {
                    adjustUsedLocked(by: -row.size)
                    row.isDeleted = true
                    row.blob = nil
                    row.changeSeq = seq
                    try upsertLocked(row)
                }
                try collectBlobsLocked(doomed.compactMap(\.blob))
            }
            return entry
        }
    }

    // MARK: Helpers (lock held)

    /// Makes the folders of `path`'s ancestry that are not there, outermost first.
    func ensureAncestorsLocked(of path: DropboxPath, seq: Int64) throws {
        for folder in try nearestAncestorLocked(of: path).missing.reversed() {
            _ = try insertFolderLocked(folder, seq: seq)
        }
    }

    func insertFolderLocked(_ path: DropboxPath, seq: Int64) throws -> Entry {
        var folder = Entry(path: path, id: Identifiers.fileID(), isFolder: true)
        folder.changeSeq = seq
        try upsertLocked(folder)
        return folder
    }

    /// `name (1).ext`, `name (2).ext`, …: the first one not taken (autorename for add).
    func freeNameLocked(for path: DropboxPath, isFolder: Bool) throws -> DropboxPath {
        try firstFreeLocked(path, isFolder: isFolder) { n in "(\(n))" }
    }

    /// `name (conflicted copy).ext`, then numbered: autorename for a failed update.
    func conflictedCopyNameLocked(for path: DropboxPath) throws -> DropboxPath {
        try firstFreeLocked(path, isFolder: false) { n in n == 1 ? "(conflicted copy)" : "(conflicted copy \(n))" }
    }

    private func firstFreeLocked(_ path: DropboxPath, isFolder: Bool, suffix: (Int) -> String) throws -> DropboxPath {
        let name = path.name
        var base = name
        var ext = ""
        if !isFolder, let dot = name.lastIndex(of: "."), dot != name.startIndex {
            base = String(name[..<dot])
            ext = String(name[dot...])
        }
        for n in 1... {
            let candidate = path.parent.appending("\(base) \(suffix(n))\(ext)")
            if try liveEntryLocked(candidate) == nil { return candidate }
        }
        fatalError("unreachable")
    }
}
