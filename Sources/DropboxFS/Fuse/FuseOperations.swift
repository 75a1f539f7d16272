import CFuseShim
import Foundation

/// RENAME_NOREPLACE from <linux/fs.h> (not visible through libfuse's headers).
private let renameNoReplace: UInt32 = 1
/// FUSE_SET_ATTR_* bits of setattr's `to_set` (macros in fuse_lowlevel.h).
private let setAttrMode: Int32 = 1 << 0
private let setAttrUID: Int32 = 1 << 1  // FUSE_SET_ATTR_UID
private let setAttrGID: Int32 = 1 << 2  // FUSE_SET_ATTR_GID
private let setAttrSize: Int32 = 1 << 3
private let setAttrAtime: Int32 = 1 << 4
private let setAttrMtime: Int32 = 1 << 5
private let setAttrAtimeNow: Int32 = 1 << 7
private let setAttrMtimeNow: Int32 = 1 << 8
private let setAttrCtime: Int32 = 1 << 10

/// The low-level operation table. Each entry copies its borrowed arguments, then calls the
/// core; network-bound work continues in a task that replies when done.
enum FuseOperations {
    /// DROPBOXFS_TEST_UNANSWERED_FSYNCDIR=1: folder fsyncs are never answered and take no
    /// hold, so a test can make an invalidation wait in the kernel for a folder's lock.
    static let leavesFolderSyncsUnanswered = ProcessInfo.processInfo.environment["DROPBOXFS_TEST_UNANSWERED_FSYNCDIR"] == "1"

    static func table() -> fuse_lowlevel_ops {
        var ops = fuse_lowlevel_ops()
        ops.`init` = { _, conn in cfuse_conn_configure(conn, 1 << 20) }
        ops.lookup = { req, parent, name in
            let mount = FuseMount.from(req)
            let request = Request(raw: req!)
            guard let name = FuseOperations.name(name!) else { return mount.answerLookup(request, in: parent, .failure(FSError.notFound)) }
            do {
                // Answered at once when the parent folder is in the store.
                if let found = try mount.fs.cachedLookup(parent: UInt64(parent), name: name) {
                    return mount.answerLookup(request, in: parent, .success(found))
                }
            } catch {
                return mount.answerLookup(request, in: parent, .failure(error))
            }
            mount.answerLater(request, holding: [.folder(UInt64(parent))]) {
                do {
                    mount.answerLookup(request, in: parent, .success(try await mount.fs.lookup(parent: UInt64(parent), name: name)))
                } catch {
                    mount.answerLookup(request, in: parent, .failure(error))
                }
            }
        }
        ops.forget = { req, ino, count in
            FuseMount.from(req).fs.forget(UInt64(ino), count: UInt64(count))
            fuse_reply_none(req)
        }
        ops.forget_multi = { req, count, forgets in
            let fs = FuseMount.from(req).fs
            for item in UnsafeBufferPointer(start: forgets, count: count) {
                fs.forget(UInt64(item.ino), count: UInt64(item.nlookup))
            }
            fuse_reply_none(req)
        }
        ops.getattr = { req, ino, _ in
            let mount = FuseMount.from(req)
            let request = Request(raw: req!)
            do {
                var attributes = mount.fs.attributes(UInt64(ino), try mount.fs.node(UInt64(ino)))
                fuse_reply_attr(request.raw, &attributes, mount.cacheTimeout)
            } catch FSError.notFound {
                guard var attributes = mount.fs.removedFolderAttributes(UInt64(ino)) else { return request.fail(FSError.notFound) }
                fuse_reply_attr(request.raw, &attributes, mount.cacheTimeout)
            } catch {
                request.fail(error)
            }
        }
        ops.access = { req, ino, mask in
            let mount = FuseMount.from(req)
            let request = Request(raw: req!)
            do {
                let uid = fuse_req_ctx(req)?.pointee.uid ?? 0
                try mount.fs.checkAccess(UInt64(ino), mask: mask, uid: uid, inGroup: { FuseOperations.callerIn(group: $0, req) })
                request.ok()
            } catch {
                request.fail(error)
            }
        }
        ops.opendir = { req, ino, fi in
            let mount = FuseMount.from(req)
            let request = Request(raw: req!)
            let info = FileInfo(fi!.pointee)
            let marks = mount.snapshotMarks(of: UInt64(ino))  // before the snapshot: a change meanwhile counts
            do {
                if let children = try mount.fs.openDirectoryWithoutWaiting(UInt64(ino)) {
                    return mount.answerOpenDirectory(request, info, children, taken: marks)
                }
            } catch {
                return request.fail(error)
            }
            mount.answerLater(request) {
                mount.answerOpenDirectory(request, info, try await mount.fs.openDirectory(UInt64(ino)), taken: marks)
            }
        }
        ops.readdir = { req, ino, size, offset, fi in
            FuseMount.from(req).readDirectory(Request(raw: req!), ino: UInt64(ino), size: size, offset: Int(offset), handle: fi!.pointee.fh, plus: false)
        }
        ops.readdirplus = { req, ino, size, offset, fi in
            FuseMount.from(req).readDirectory(Request(raw: req!), ino: UInt64(ino), size: size, offset: Int(offset), handle: fi!.pointee.fh, plus: true)
        }
        ops.releasedir = { req, ino, fi in
            let mount = FuseMount.from(req)
            let snapshot = mount.directories.withLock { $0.open.removeValue(forKey: fi!.pointee.fh) }
            mount.fs.releaseDirectory(UInt64(ino), entries: snapshot?.children.count ?? 0)
            fuse_reply_err(req, 0)
        }
        ops.open = { req, ino, fi in
            let mount = FuseMount.from(req)
            let request = Request(raw: req!)
            let flags = fi!.pointee.flags
            let writable = (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC) != 0
            do {
                if try FuseOperations.clearSetIDBitsIfMarked(req, mount, ino) { mount.attributesChanged(UInt64(ino)) }
                let (handle, keep, direct) = try mount.fs.open(UInt64(ino), writable: writable, truncate: writable && flags & O_TRUNC != 0)
                fi!.pointee.fh = handle
                cfuse_file_info_set_keep_cache(fi, keep ? 1 : 0)
                cfuse_file_info_set_direct_io(fi, direct ? 1 : 0)
                // A reader's close has nothing to seal: no FLUSH request, one round trip less
                // for every file `grep -r` or `tar c` reads (the RELEASE still comes).
                cfuse_file_info_set_noflush(fi, writable ? 0 : 1)
                fuse_reply_open(request.raw, fi)
            } catch {
                request.fail(error)
            }
        }
        ops.create = { req, parent, name, mode, fi in
            let mount = FuseMount.from(req)
            let request = Request(raw: req!)
            guard let name = FuseOperations.name(name!) else { return request.fail(FSError.nameNotUnicode) }
            let info = FileInfo(fi!.pointee)
            let exclusive = info.value.flags & O_EXCL != 0
            let reply = { @Sendable (created: (inode: UInt64, node: Node, handle: UInt64)) in
                var entry = mount.entryParam(created.inode, created.node, in: parent)
                var copy = info.value
                copy.fh = created.handle
                fuse_reply_create(request.raw, &entry, &copy)
            }
            let creator = FuseOperations.caller(req)
            // Answered at once when the folder is listed (the usual case: tar x, cp -r).
            do {
                if let created = try mount.fs.createWithoutWaiting(parent: UInt64(parent), name: name, exclusive: exclusive, mode: UInt32(mode),
                                                                   creator: creator) {
                    return reply(created)
                }
            } catch {
                return request.fail(error)
            }
            mount.answerLater(request, holding: [.folder(UInt64(parent))]) {
                reply(try await mount.fs.create(parent: UInt64(parent), name: name, exclusive: exclusive, mode: UInt32(mode), creator: creator))
            }
        }
        ops.mknod = { req, parent, name, mode, _ in
            let mount = FuseMount.from(req)
            let request = Request(raw: req!)
            guard let name = FuseOperations.name(name!) else { return request.fail(FSError.nameNotUnicode) }
            guard mode & S_IFMT == S_IFREG else { return request.fail(FSError.notPermitted) }  // no devices, fifos or sockets
            let creator = FuseOperations.caller(req)
            mount.answerLater(request, holding: [.folder(UInt64(parent))]) {
                let (inode, node) = try await mount.fs.makeFile(parent: UInt64(parent), name: name, mode: UInt32(mode), creator: creator)
                var entry = mount.entryParam(inode, node, in: parent)
                fuse_reply_entry(request.raw, &entry)
            }
        }
        ops.write = { req, ino, buffer, size, offset, fi in
            let mount = FuseMount.from(req)
            let request = Request(raw: req!)
            let handle = fi!.pointee.fh
            let bytes = UnsafeRawBufferPointer(start: buffer, count: size)
            do {
                if try FuseOperations.clearSetIDBitsIfMarked(req, mount, ino) { mount.attributesChanged(UInt64(ino)) }
                // Straight to the staging file when no byte must come from Dropbox first.
                if let written = try mount.fs.tryWrite(handle: handle, bytes, at: Int64(offset)) {
                    fuse_reply_write(request.raw, written)
                    return
                }
            } catch {
                return request.fail(error)
            }
            let copy = Array(bytes)
            mount.answerLater(request, holding: [.pages(UInt64(ino))]) {
                fuse_reply_write(request.raw, try await mount.fs.write(handle: handle, copy, at: Int64(offset)))
            }
        }
        ops.setattr = { req, ino, attr, toSet, fi in
            let mount = FuseMount.from(req)
            let request = Request(raw: req!)
            let handle = fi?.pointee.fh
            let size: Int64? = toSet & setAttrSize != 0 ? Int64(attr!.pointee.st_size) : nil
            let modified: timespec? = toSet & setAttrMtimeNow != 0 ? LocalVersion.now() : toSet & setAttrMtime != 0 ? attr!.pointee.st_mtim : nil
            let accessed: timespec? = toSet & setAttrAtimeNow != 0 ? LocalVersion.now() : toSet & setAttrAtime != 0 ? attr!.pointee.st_atim : nil
            let mode: UInt32? = toSet & setAttrMode != 0 ? UInt32(attr!.pointee.st_mode) : nil
            let uid: UInt32? = toSet & setAttrUID != 0 ? attr!.pointee.st_uid : nil
            let gid: UInt32? = toSet & setAttrGID != 0 ? attr!.pointee.st_gid : nil
            // A chown, or a truncate by a caller without CAP_FSETID (a mode set with it wins).
            // The answer carries the mode: the kernel needs no word of it. A chown that keeps
            // owner and group (`chown : f`, fchown(fd, -1, -1)) clears them on a disk too, but
            // the kernel marks only chowns that name an owner or a group: it comes asking to
            // set nothing (its ctime, without writeback caching, is not passed on). So does the
            // kernel's own clearing before a write by another user than root, which a disk
            // clears by the same rules.
            if mode == nil {
                let chownKeepingOwners = toSet & ~setAttrCtime == 0
                do {
                    _ = chownKeepingOwners ? try mount.fs.clearSetIDBits(UInt64(ino), callerInGroup: { FuseOperations.callerIn(group: $0, req) })
                                           : try FuseOperations.clearSetIDBitsIfMarked(req, mount, ino)
                } catch {
                    return request.fail(error)
                }
            }
            if size == nil {
                do {
                    let node = try mount.fs.setAttributesWithoutWaiting(UInt64(ino), modified: modified, mode: mode, accessed: accessed,
                                                                        uid: uid, gid: gid)
                    var attributes = mount.fs.attributes(UInt64(ino), node)
                    fuse_reply_attr(request.raw, &attributes, mount.cacheTimeout)
                } catch {
                    request.fail(error)
                }
                return
            }
            mount.answerLater(request) {
                let node = try await mount.fs.setAttributes(UInt64(ino), handle: handle, size: size, modified: modified, mode: mode, accessed: accessed,
                                                            uid: uid, gid: gid)
                var attributes = mount.fs.attributes(UInt64(ino), node)
                fuse_reply_attr(request.raw, &attributes, mount.cacheTimeout)
            }
        }
        ops.read = { req, ino, size, offset, fi in
            let mount = FuseMount.from(req)
            let request = Request(raw: req!)
            let handle = fi!.pointee.fh
            // Cached: the kernel splices the bytes from the block file, on this thread.
            if let span = mount.fs.cachedSpan(handle: handle, offset: Int64(offset), size: size),
               withExtendedLifetime(span.holder, { request.replySpliced(from: span.file, offset: span.offset, length: span.length) }) {
                return
            }
            mount.answerLater(request, holding: [.pages(UInt64(ino))]) {
                switch try await mount.fs.answerRead(handle: handle, offset: Int64(offset), size: size) {
                case .span(let file, let spanOffset, let length):
                    if !request.replySpliced(from: file, offset: spanOffset, length: length) {
                        request.reply(try await mount.fs.read(handle: handle, offset: Int64(offset), size: size))
                    }
                case .bytes(let bytes):
                    request.reply(bytes)
                }
            }
        }
        ops.release = { req, _, fi in
            let mount = FuseMount.from(req)
            let request = Request(raw: req!)
            let handle = fi!.pointee.fh
            mount.answerDone(request, now: { try mount.fs.releaseWithoutWaiting(handle: handle) }) {
                try await mount.fs.release(handle: handle)
            }
        }
        // close(2): a written file is sealed into the upload queue before close returns.
        ops.flush = { req, _, fi in
            let mount = FuseMount.from(req)
            let request = Request(raw: req!)
            let handle = fi!.pointee.fh
            mount.answerDone(request, now: { try mount.fs.flushWithoutWaiting(handle: handle) }) {
                try await mount.fs.flush(handle: handle)
            }
        }
        // fsync: returns once Dropbox has the file.
        ops.fsync = { req, ino, _, fi in
            let mount = FuseMount.from(req)
            let request = Request(raw: req!)
            let handle = fi?.pointee.fh
            mount.answerDone(request) {
                try await mount.fs.sync(UInt64(ino), handle: handle)
            }
        }
        ops.fsyncdir = { req, ino, _, _ in
            let mount = FuseMount.from(req)
            let request = Request(raw: req!)
            // Tests only: the kernel keeps the folder locked for the caller, as in the moment
            // before a request reaches the daemon (`KernelLockHolds`' window).
            if FuseOperations.leavesFolderSyncsUnanswered { return }
            mount.answerDone(request, holding: [.folder(UInt64(ino))]) { try await mount.fs.syncFolder(UInt64(ino)) }
        }
        ops.copy_file_range = { req, _, inOffset, inInfo, _, outOffset, outInfo, length, _ in
            let mount = FuseMount.from(req)
            let request = Request(raw: req!)
            let (source, target) = (inInfo!.pointee.fh, outInfo!.pointee.fh)
            mount.answerLater(request) {
                let copied = try await mount.fs.copyWholeFile(from: source, offset: Int64(inOffset), to: target, offset: Int64(outOffset),
                                                              length: Int64(length))
                fuse_reply_write(request.raw, Int(copied))
            }
        }
        ops.fallocate = { req, ino, mode, offset, length, fi in
            let mount = FuseMount.from(req)
            let request = Request(raw: req!)
            let handle = fi!.pointee.fh
            mount.answerDone(request) {
                try await mount.fs.allocate(UInt64(ino), handle: handle, mode: mode, offset: Int64(offset), length: Int64(length))
            }
        }
        ops.statfs = { req, _ in
            let mount = FuseMount.from(req)
            let request = Request(raw: req!)
            mount.answerLater(request) {
                let (used, allocated) = try await mount.fs.spaceUsage()
                var info = statvfs()
                let block: UInt = 4096
                info.f_bsize = block
                info.f_frsize = block
                info.f_blocks = UInt(allocated) / block
                info.f_bfree = UInt(max(0, allocated - used)) / block
                info.f_bavail = info.f_bfree
                info.f_files = 1 << 32
                info.f_ffree = 1 << 31
                info.f_favail = info.f_ffree
                info.f_namemax = 255
                fuse_reply_statfs(request.raw, &info)
            }
        }
        ops.getxattr = { req, ino, name, size in
            let mount = FuseMount.from(req)
            let request = Request(raw: req!)
            let name = String(cString: name!)
            if name == DropboxFileSystem.sharedLinkAttribute {
                return mount.answerLater(request) { mount.replyXattr(request, try await mount.fs.sharedLink(UInt64(ino)), size: size) }
            }
            do {
                let value = try mount.fs.extendedAttribute(UInt64(ino), name: name)
                mount.replyXattr(request, value, size: size)
            } catch {
                request.fail(error)
            }
        }
        ops.listxattr = { req, ino, size in
            let mount = FuseMount.from(req)
            let request = Request(raw: req!)
            do {
                let names: [UInt8] = try mount.fs.extendedAttributeNames(UInt64(ino)).flatMap { Array($0.utf8) + [UInt8(0)] }
                mount.replyXattr(request, names, size: size)
            } catch {
                request.fail(error)
            }
        }
        ops.mkdir = { req, parent, name, mode in
            let mount = FuseMount.from(req)
            let request = Request(raw: req!)
            guard let name = FuseOperations.name(name!) else { return request.fail(FSError.nameNotUnicode) }
            let creator = FuseOperations.caller(req)
            mount.answerLater(request, holding: [.folder(UInt64(parent))]) {
                let (inode, node) = try await mount.fs.makeDirectory(parent: UInt64(parent), name: name, mode: UInt32(mode), creator: creator)
                var entry = mount.entryParam(inode, node, in: parent)
                fuse_reply_entry(request.raw, &entry)
            }
        }
        ops.unlink = { req, parent, name in FuseOperations.remove(req, parent, name, folder: false) }
        ops.rmdir = { req, parent, name in FuseOperations.remove(req, parent, name, folder: true) }
        ops.rename = { req, parent, name, newParent, newName, flags in
            let mount = FuseMount.from(req)
            let request = Request(raw: req!)
            guard let from = FuseOperations.name(name!) else { return request.fail(FSError.notFound) }
            guard let to = FuseOperations.name(newName!) else { return request.fail(FSError.nameNotUnicode) }
            guard flags & ~renameNoReplace == 0 else { return request.fail(FSError.invalidArgument) }  // no RENAME_EXCHANGE
            mount.answerDone(request, holding: [.folder(UInt64(parent)), .folder(UInt64(newParent))]) {
                try await mount.fs.rename(parent: UInt64(parent), name: from, newParent: UInt64(newParent), newName: to,
                                          noReplace: flags & renameNoReplace != 0)
            }
        }
        // user.* attributes are kept here; of user.dropbox.* only `pinned` is set.
        ops.setxattr = { req, ino, name, value, size, flags in
            let mount = FuseMount.from(req)
            let request = Request(raw: req!)
            let bytes = value.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) } ?? []
            do {
                try mount.fs.setExtendedAttribute(UInt64(ino), name: String(cString: name!), value: bytes, flags: flags)
                fuse_reply_err(request.raw, 0)
            } catch {
                request.fail(error)
            }
        }
        ops.removexattr = { req, ino, name in
            let mount = FuseMount.from(req)
            let request = Request(raw: req!)
            do {
                try mount.fs.removeExtendedAttribute(UInt64(ino), name: String(cString: name!))
                fuse_reply_err(request.raw, 0)
            } catch {
                request.fail(error)
            }
        }
        ops.symlink = { req, _, _, _ in Request(raw: req!).fail(FSError.notPermitted) }
        ops.link = { req, _, _, _ in Request(raw: req!).fail(FSError.notPermitted) }
        return ops
    }
}

extension FuseOperations {
    /// Clears the file's set-ID bits if the kernel marked the request being answered so
    /// (`cfuse_request_clears_setid`: ask before any other work on this thread). Returns
    /// whether the mode changed.
    static func clearSetIDBitsIfMarked(_ req: fuse_req_t?, _ mount: FuseMount, _ ino: fuse_ino_t) throws -> Bool {
        guard cfuse_request_clears_setid() != 0 else { return false }
        return try mount.fs.clearSetIDBits(UInt64(ino), callerInGroup: { callerIn(group: $0, req) })
    }

    /// Who made a request (nil when libfuse says nothing).
    static func caller(_ req: fuse_req_t?) -> Caller? {
        fuse_req_ctx(req).map { (uid: $0.pointee.uid, gid: $0.pointee.gid) }
    }

    /// Whether the caller of a request may keep a set-group-ID bit on a file of `group` (the
    /// VFS's `in_group_or_capable`), or is judged by its group bits: root, or a member.
    static func callerIn(group: UInt32, _ req: fuse_req_t?) -> Bool {
        guard let caller = caller(req) else { return true }
        if caller.uid == 0 || caller.gid == group { return true }
        var groups = [gid_t](repeating: 0, count: 256)
        let count = fuse_req_getgroups(req, Int32(groups.count), &groups)
        return count > 0 && groups.prefix(Int(min(count, 256))).contains(group)
    }

    /// A name the kernel passed, or nil if it is not UTF-8. Dropbox names are Unicode, so no
    /// entry has such a name; decoded with replacement characters (`String(cString:)`),
    /// `caf\xe9` and `caf\xea` would both be `caf\u{FFFD}`, one file for two names.
    static func name(_ raw: UnsafePointer<CChar>) -> String? { String(validatingCString: raw) }

    static func remove(_ req: fuse_req_t?, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>?, folder: Bool) {
        let mount = FuseMount.from(req)
        let request = Request(raw: req!)
        guard let name = FuseOperations.name(name!) else { return request.fail(FSError.notFound) }
        mount.answerDone(request, holding: [.folder(UInt64(parent))], now: { try mount.fs.removeWithoutWaiting(parent: UInt64(parent), name: name, folder: folder) }) {
            try await mount.fs.remove(parent: UInt64(parent), name: name, folder: folder)
        }
    }
}

/// A copy of a `fuse_file_info`, sendable to the task that replies.
struct FileInfo: @unchecked Sendable {
    let value: fuse_file_info
    init(_ value: fuse_file_info) { self.value = value }
}

extension FuseMount {
    /// The most a readdirplus answer holds (about 24 entries; see `readDirectory`): each
    /// entry in it is an inode the kernel makes and this mount's table holds until forgotten,
    /// a cost `find` pays for nothing.
    static let plusBytes = 4 << 10

    /// The reply for an entry found or made in the folder `parent`: the kernel now holds
    /// one more reference (`DropboxFileSystem.handOut`).
    func entryParam(_ inode: UInt64, _ node: Node, in parent: fuse_ino_t) -> fuse_entry_param {
        let (inode, node) = fs.handOut(inode, node, in: UInt64(parent))
        return attributesOnly(inode, node)
    }

    func attributesOnly(_ inode: UInt64, _ node: Node) -> fuse_entry_param {
        var entry = fuse_entry_param()
        entry.ino = fuse_ino_t(inode)
        entry.attr = fs.attributes(inode, node)
        entry.attr_timeout = cacheTimeout
        entry.entry_timeout = cacheTimeout
        return entry
    }

    /// Fills one readdir or readdirplus buffer from the directory's snapshot taken at
    /// opendir. Offsets are positions in the snapshot ("." and ".." first).
    ///
    /// The kernel asks with readdirplus for a folder's first entries, and for the rest only
    /// if something looked at its entries (`ls -l`); else with plain readdir (`find`), for
    /// names and inode numbers only: it then makes no inode for each file, nor the inode
    /// table an entry (the number shown is the one a lookup would give). A readdirplus
    /// answer holds at most `plusBytes`, however large the buffer: `find`'s 1 MiB reads
    /// otherwise had every file of a folder of 900 made an inode, in the kernel and here.
    /// `seekdir` may ask for any offset: one past the end reads nothing.
    func readDirectory(_ request: Request, ino: UInt64, size asked: Int, offset askedOffset: Int, handle: UInt64, plus: Bool) {
        let offset = max(askedOffset, 0)
        guard let (children, since) = snapshot(handle, of: ino, fromStart: offset == 0) else { return request.fail(FSError.badHandle) }
        let size = plus ? min(asked, Self.plusBytes) : asked
        // The entries that fit ("." and ".." are positions 0 and 1), then their numbers
        // under one lock of the inode table.
        let first = min(max(offset, 2) - 2, children.count)
        var fitting = 0
        var room = size - (offset == 0 ? 2 : offset == 1 ? 1 : 0) * Self.dotEntryBytes(plus)
        while first + fitting < children.count {
            let needed = plus ? fuse_add_direntry_plus(request.raw, nil, 0, children[first + fitting].name, nil, 0)
                              : fuse_add_direntry(request.raw, nil, 0, children[first + fitting].name, nil, 0)
            if needed > room { break }
            room -= needed
            fitting += 1
        }
        // readdirplus makes each entry it hands exist in the kernel (`listedEntries`).
        let entries = fs.listedEntries(children[first ..< first + fitting], in: ino, plus: plus, since: since)
        // As large as what fits needs, not as the kernel's buffer: zeroing `find`'s or `rm`'s
        // buffer for each answer was 2 % of an `rm -r`. Only what is filled is sent.
        let capacity = size - max(room, 0)
        var buffer = [CChar](unsafeUninitializedCapacity: capacity) { _, count in count = capacity }
        var used = 0
        var position = offset
        while position < 2 + first + fitting {
            var entry = fuse_entry_param()
            let name: String
            if position < 2 {
                entry.attr.st_ino = UInt(position == 0 ? ino : parentNumber(of: ino))
                entry.attr.st_mode = S_IFDIR
                name = position == 0 ? "." : ".."
            } else {
                let node = children[position - 2]
                name = node.name
                let number = entries.numbers[position - 2 - first]
                if plus, let handed = entries.handed[position - 2 - first] {
                    entry = attributesOnly(number, handed)
                } else {  // the number and the type are all a plain entry shows
                    entry.attr.st_ino = UInt(number)
                    entry.attr.st_mode = node.isFolder ? S_IFDIR : S_IFREG
                }
            }
            let needed = buffer.withUnsafeMutableBufferPointer { raw in
                plus ? fuse_add_direntry_plus(request.raw, raw.baseAddress! + used, capacity - used, name, &entry, off_t(position + 1))
                     : fuse_add_direntry(request.raw, raw.baseAddress! + used, capacity - used, name, &entry.attr, off_t(position + 1))
            }
            if needed > capacity - used { break }  // only "." or ".." in a buffer too small for them
            used += needed
            position += 1
        }
        fuse_reply_buf(request.raw, buffer, used)
        dropOldInodesIfOver()
    }

    /// A handle's snapshot, and what changed since it was taken. It is taken again (the
    /// folder as it is now) when the handle is read from the start again (`rewinddir`: POSIX
    /// asks for the folder's current state; taken again only after names went, it never
    /// showed names added since), and at its first read if an entry was made, removed or
    /// renamed in the folder here since the open (unspecified by POSIX, but a disk shows it:
    /// `mkdirat` on a folder's descriptor, then `fdopendir` of it, found nothing it made), or
    /// if the folder was removed since (a disk's lists nothing then).
    private func snapshot(_ handle: UInt64, of folder: UInt64, fromStart: Bool) -> (nodes: [Node], since: SnapshotChanges)? {
        let now = snapshotMarks(of: folder)
        let removed = fromStart && fs.inodes.isDetachedFolder(folder)
        let (open, again) = directories.withLock { state -> (OpenDirectory?, Bool) in
            guard var open = state.open[handle] else { return (nil, false) }
            let again = fromStart && (open.read || removed || !ChangeTimes.same(open.taken.folderChanged, now.folderChanged))
            open.read = true
            state.open[handle] = open
            return (open, again)
        }
        guard let open else { return nil }
        if again, let fresh = fs.childrenNow(folder) {
            directories.withLock { $0.open[handle] = OpenDirectory(children: fresh, taken: now, read: true) }
            // What changed while it was taken may be in it or not.
            return (fresh, now.changes(until: snapshotMarks(of: folder)))
        }
        return (open.children, open.taken.changes(until: now))
    }

    /// The number ".." lists in a folder: its parent's, as `stat ..` gives it (the kernel
    /// holds every open folder's parent). The root lists its own there, as a disk's root
    /// does, and so does a folder whose name went.
    private func parentNumber(of folder: UInt64) -> UInt64 {
        guard let path = fs.inodes.path(of: folder), !path.isEmpty else { return folder }
        return fs.inodes.existing(Node.parent(of: path)) ?? folder
    }

    /// What has changed so far, for a snapshot of `folder` taken now.
    func snapshotMarks(of folder: UInt64) -> SnapshotMarks {
        SnapshotMarks(namesGone: fs.inodes.namesGoneCount, folderChanged: fs.changeTimes.lastStatusChange(of: folder),
                      storeWrites: fs.store.writeCount)
    }

    /// Answers an opendir with a handle for the folder's snapshot.
    func answerOpenDirectory(_ request: Request, _ info: FileInfo, _ children: [Node], taken marks: SnapshotMarks) {
        var copy = info.value
        copy.fh = directories.withLock { state in
            let id = state.next
            state.next += 1
            state.open[id] = OpenDirectory(children: children, taken: marks)
            return id
        }
        fuse_reply_open(request.raw, &copy)
    }

    /// The room "." or ".." takes in a readdir (or readdirplus) answer.
    private static func dotEntryBytes(_ plus: Bool) -> Int {
        plus ? fuse_add_direntry_plus(nil, nil, 0, "..", nil, 0) : fuse_add_direntry(nil, nil, 0, "..", nil, 0)
    }

    /// Answers a lookup: the entry, a negative entry the kernel may cache briefly, or the error.
    func answerLookup(_ request: Request, in parent: fuse_ino_t, _ found: Result<(UInt64, Node), any Error>) {
        switch found {
        case .success(let (inode, node)):
            var entry = entryParam(inode, node, in: parent)
            fuse_reply_entry(request.raw, &entry)
            dropOldInodesIfOver()
        case .failure(FSError.notFound):
            var entry = fuse_entry_param()
            entry.entry_timeout = cacheTimeout
            fuse_reply_entry(request.raw, &entry)
        case .failure(let error):
            request.fail(error)
        }
    }

    func replyXattr(_ request: Request, _ value: [UInt8], size: Int) {
        if size == 0 { fuse_reply_xattr(request.raw, value.count); return }
        if size < value.count { return request.fail(FSError.bufferTooSmall) }
        request.reply(value)
    }
}
