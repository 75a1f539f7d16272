import DropboxFS
import Foundation
import Synchronization
import TestSupport

/// The kernel's part of each system call, modelled for running the core without a mount:
/// path walks through `lookup`, descriptors with their access modes, the checks the VFS
/// makes before a filesystem is asked (EBADF, EISDIR, ENOTDIR, EEXIST, a rename into itself)
/// and O_APPEND's offset; then the same core calls the FUSE adapter makes. What the kernel
/// caches (pages, attributes, names) is left out: every call asks the core, so a difference
/// found here is the core's own.
///
/// Blocking, like the system calls it stands for: call it off Swift's cooperative threads.
final class CoreKernel: SystemCalls, Sendable {
    let fs: DropboxFileSystem

    private struct Descriptor {
        var inode: UInt64
        /// The core's handle; nil for a folder.
        var handle: UInt64?
        var readable: Bool
        var writable: Bool
        var append: Bool
    }

    private let descriptors = Mutex<(next: Int32, open: [Int32: Descriptor])>((3, [:]))

    init(fs: DropboxFileSystem) { self.fs = fs }

    // MARK: Descriptors

    func open(_ path: String, _ flags: Int32, _ mode: mode_t) -> Sys.Outcome<Int32> {
        let access = flags & O_ACCMODE
        let writes = access != O_RDONLY || flags & O_TRUNC != 0
        let append = flags & O_APPEND != 0
        return outcome {
            let found: (UInt64, Node)?
            do {
                found = try await self.resolve(path)
            } catch where Self.code(of: error) == ENOENT && flags & O_CREAT != 0 {
                found = nil
            }
            guard let (inode, node) = found else {
                let (parent, name) = try await self.resolveParent(path)
                // The mode open(2) asks for (`Sys.open`'s), with the process's umask, as the kernel sends it.
                let created = try await self.fs.create(parent: parent, name: name, exclusive: flags & O_EXCL != 0,
                                                       mode: UInt32(mode & ~Sys.processUmask))
                return self.add(Descriptor(inode: created.inode, handle: created.handle, readable: access != O_WRONLY,
                                           writable: access != O_RDONLY, append: append))
            }
            if flags & O_CREAT != 0 && flags & O_EXCL != 0 { throw Sys.Errno(code: EEXIST) }
            if flags & O_DIRECTORY != 0 && !node.isFolder { throw Sys.Errno(code: ENOTDIR) }
            if node.isFolder {
                if writes { throw Sys.Errno(code: EISDIR) }
                _ = try await self.fs.openDirectory(inode)
                return self.add(Descriptor(inode: inode, handle: nil, readable: true, writable: false, append: false))
            }
            let handle = try self.fs.open(inode, writable: writes, truncate: writes && flags & O_TRUNC != 0).handle
            return self.add(Descriptor(inode: inode, handle: handle, readable: access != O_WRONLY, writable: access != O_RDONLY,
                                       append: append))
        }
    }

    func close(_ fd: Int32) -> Sys.Outcome<Int32> {
        guard let descriptor = descriptors.withLock({ $0.open.removeValue(forKey: fd) }) else { return .failure(Sys.Errno(code: EBADF)) }
        return outcome {
            guard let handle = descriptor.handle else {
                self.fs.releaseDirectory(descriptor.inode)
                return 0
            }
            // close(2) answers with flush's outcome; the release follows it.
            var flushFailure: (any Error)?
            do { try await self.fs.flush(handle: handle) } catch { flushFailure = error }
            try await self.fs.release(handle: handle)
            if let flushFailure { throw flushFailure }
            return 0
        }
    }

    func pwrite(_ fd: Int32, _ bytes: [UInt8], at offset: Int64) -> Sys.Outcome<Int> {
        withDescriptor(fd) { descriptor in
            guard descriptor.writable, let handle = descriptor.handle else { throw Sys.Errno(code: EBADF) }
            // Linux appends whatever pwrite's offset says, at the size the kernel knows.
            let at = descriptor.append ? try self.fs.node(descriptor.inode).size : offset
            return try await self.write(handle, bytes, at: at)
        }
    }

    /// A write as the adapter makes it: answered at once when it can be, else waited for.
    private func write(_ handle: UInt64, _ bytes: [UInt8], at offset: Int64) async throws -> Int {
        if let written = try bytes.withUnsafeBytes({ try self.fs.tryWrite(handle: handle, $0, at: offset) }) { return written }
        return try await fs.write(handle: handle, bytes, at: offset)
    }

    func pread(_ fd: Int32, count: Int, at offset: Int64) -> Sys.Outcome<[UInt8]> {
        withDescriptor(fd) { descriptor in
            guard descriptor.readable else { throw Sys.Errno(code: EBADF) }
            guard let handle = descriptor.handle else { throw Sys.Errno(code: EISDIR) }
            var bytes: [UInt8] = []
            while bytes.count < count {
                let part = try await self.read(handle, at: offset + Int64(bytes.count), size: count - bytes.count)
                if part.isEmpty { break }
                bytes += part
            }
            return bytes
        }
    }

    /// One read as the adapter answers it: a span of a cached block's file (which the kernel
    /// would splice), or bytes.
    private func read(_ handle: UInt64, at offset: Int64, size: Int) async throws -> [UInt8] {
        if let span = fs.cachedSpan(handle: handle, offset: offset, size: size),
           let bytes = withExtendedLifetime(span.holder, { Self.bytes(of: (span.file, span.offset, span.length)) }) {
            return bytes
        }
        switch try await fs.answerRead(handle: handle, offset: offset, size: size) {
        case .span(let file, let spanOffset, let length):
            if let bytes = Self.bytes(of: (file, spanOffset, length)) { return bytes }
            return try await fs.read(handle: handle, offset: offset, size: size)
        case .bytes(let bytes):
            return bytes
        }
    }

    private static func bytes(of span: (file: String, offset: Int64, length: Int)) -> [UInt8]? {
        guard case .success(let fd) = Sys.open(span.file, O_RDONLY) else { return nil }  // evicted since
        defer { _ = Sys.close(fd) }
        return try? Sys.pread(fd, count: span.length, at: span.offset).get()
    }

    /// copy_file_range as the kernel makes it of a FUSE filesystem, from both descriptors'
    /// offsets (0: they are fresh): clamped to the source's size as the kernel knows it
    /// (nothing past it is asked for; an overlap within one file is EINVAL), then the
    /// filesystem's own copy, or, when it says EOPNOTSUPP, reads and writes through it.
    func copyAll(_ source: Int32, to target: Int32) -> Sys.Outcome<Int64> {
        guard let from = descriptors.withLock({ $0.open[source] }), let to = descriptors.withLock({ $0.open[target] }),
              from.readable, to.writable else { return .failure(Sys.Errno(code: EBADF)) }
        guard let sourceHandle = from.handle, let targetHandle = to.handle else { return .failure(Sys.Errno(code: EISDIR)) }
        return outcome {
            var total: Int64 = 0
            while true {
                let count = min(1 << 30, try self.fs.node(from.inode).size - total)
                if count <= 0 { return total }
                if from.inode == to.inode { throw Sys.Errno(code: EINVAL) }  // both at `total`: they overlap
                var copied: Int64
                do {
                    copied = try await self.fs.copyWholeFile(from: sourceHandle, offset: total, to: targetHandle, offset: total, length: count)
                } catch where Self.code(of: error) == EOPNOTSUPP {
                    let bytes = try await self.read(sourceHandle, at: total, size: Int(min(count, 1 << 20)))
                    copied = bytes.isEmpty ? 0 : Int64(try await self.write(targetHandle, bytes, at: total))
                }
                if copied == 0 { return total }
                total += copied
            }
        }
    }

    func ftruncate(_ fd: Int32, _ size: Int64) -> Sys.Outcome<Int32> {
        withDescriptor(fd) { descriptor in
            guard descriptor.writable, let handle = descriptor.handle else { throw Sys.Errno(code: EINVAL) }
            _ = try await self.fs.setAttributes(descriptor.inode, handle: handle, size: size, modified: nil)
            return 0
        }
    }

    func fallocate(_ fd: Int32, _ mode: Int32, _ offset: Int64, _ length: Int64) -> Sys.Outcome<Int32> {
        withDescriptor(fd) { descriptor in
            guard descriptor.writable, let handle = descriptor.handle else { throw Sys.Errno(code: EBADF) }
            try await self.fs.allocate(descriptor.inode, handle: handle, mode: mode, offset: offset, length: length)
            return 0
        }
    }

    /// What the kernel makes of stores through a shared mapping: the checks mmap makes, then
    /// the pages written back as writes at their own offsets (never at the end, whatever
    /// O_APPEND says), and an fsync for msync(MS_SYNC).
    func mapWrite(_ fd: Int32, _ bytes: [UInt8], at offset: Int64, sync: Bool) -> Sys.Outcome<Int> {
        withDescriptor(fd) { descriptor in
            // do_mmap checks the descriptor's access before asking whether the file maps.
            guard descriptor.readable && descriptor.writable else { throw Sys.Errno(code: EACCES) }
            guard let handle = descriptor.handle else { throw Sys.Errno(code: ENODEV) }
            let count = Int(max(0, min(Int64(bytes.count), try self.fs.node(descriptor.inode).size - offset)))
            if count > 0 { _ = try await self.write(handle, Array(bytes[..<count]), at: offset) }
            if sync { try await self.fs.sync(descriptor.inode, handle: handle) }
            return count
        }
    }

    func fsync(_ fd: Int32) -> Sys.Outcome<Int32> {
        withDescriptor(fd) { descriptor in
            guard let handle = descriptor.handle else {
                try await self.fs.syncFolder(descriptor.inode)  // fsyncdir
                return 0
            }
            try await self.fs.sync(descriptor.inode, handle: handle)
            return 0
        }
    }

    func fdatasync(_ fd: Int32) -> Sys.Outcome<Int32> { fsync(fd) }

    func fstat(_ fd: Int32) -> Sys.Outcome<Sys.Status> {
        withDescriptor(fd) { descriptor in self.status(descriptor.inode, try self.fs.node(descriptor.inode)) }
    }

    // MARK: Paths

    func truncate(_ path: String, _ size: Int64) -> Sys.Outcome<Int32> {
        outcome {
            let (inode, node) = try await self.resolve(path)
            if node.isFolder { throw Sys.Errno(code: EISDIR) }
            _ = try await self.fs.setAttributes(inode, handle: nil, size: size, modified: nil)
            return 0
        }
    }

    func rename(_ from: String, _ to: String) -> Sys.Outcome<Int32> {
        outcome {
            // Both folders first, then the names in them (do_renameat2's order).
            let (parent, name) = try await self.resolveParent(from)
            let (newParent, newName) = try await self.resolveParent(to)
            let (source, sourceNode) = try await self.fs.lookup(parent: parent, name: name)
            let target = try? await self.fs.lookup(parent: newParent, name: newName)
            // A name that is an ancestor of the other (lock_rename's "trap").
            if to.hasPrefix(from + "/") { throw Sys.Errno(code: EINVAL) }
            if target != nil && from.hasPrefix(to + "/") { throw Sys.Errno(code: ENOTEMPTY) }
            if let (target, targetNode) = target {
                if target == source { return 0 }  // the same file under both names: the VFS does nothing
                if sourceNode.isFolder && !targetNode.isFolder { throw Sys.Errno(code: ENOTDIR) }
                if !sourceNode.isFolder && targetNode.isFolder { throw Sys.Errno(code: EISDIR) }
            }
            try await self.fs.rename(parent: parent, name: name, newParent: newParent, newName: newName, noReplace: false)
            return 0
        }
    }

    func unlink(_ path: String) -> Sys.Outcome<Int32> { remove(path, folder: false) }
    func rmdir(_ path: String) -> Sys.Outcome<Int32> { remove(path, folder: true) }

    private func remove(_ path: String, folder: Bool) -> Sys.Outcome<Int32> {
        outcome {
            let (_, node) = try await self.resolve(path)
            if node.isFolder != folder { throw Sys.Errno(code: folder ? ENOTDIR : EISDIR) }
            let (parent, name) = try await self.resolveParent(path)
            // As the FUSE adapter does: answered at once when nothing needs Dropbox.
            if try self.fs.removeWithoutWaiting(parent: parent, name: name, folder: folder) { return 0 }
            try await self.fs.remove(parent: parent, name: name, folder: folder)
            return 0
        }
    }

    func mkdir(_ path: String) -> Sys.Outcome<Int32> {
        outcome {
            let (parent, name) = try await self.resolveParent(path)
            if (try? await self.fs.lookup(parent: parent, name: name)) != nil { throw Sys.Errno(code: EEXIST) }
            _ = try await self.fs.makeDirectory(parent: parent, name: name, mode: UInt32(0o755 & ~Sys.processUmask))
            return 0
        }
    }

    func stat(_ path: String) -> Sys.Outcome<Sys.Status> {
        outcome {
            let (inode, node) = try await self.resolve(path)
            return self.status(inode, node)
        }
    }

    /// setattr of the times alone, answered as the FUSE adapter does (now: the adapter's clock).
    func setTimes(_ path: String, _ time: timespec?) -> Sys.Outcome<Int32> {
        outcome {
            let (inode, _) = try await self.resolve(path)
            var now = timespec()
            clock_gettime(CLOCK_REALTIME, &now)
            _ = try self.fs.setAttributesWithoutWaiting(inode, modified: time ?? now)
            return 0
        }
    }

    /// setattr of the mode alone, answered as the FUSE adapter does.
    func chmod(_ path: String, _ mode: mode_t) -> Sys.Outcome<Int32> {
        outcome {
            let (inode, _) = try await self.resolve(path)
            _ = try self.fs.setAttributesWithoutWaiting(inode, modified: nil, mode: UInt32(mode))
            return 0
        }
    }

    func setAttribute(_ path: String, _ name: String, _ value: [UInt8]?) -> Sys.Outcome<Int32> {
        outcome {
            let (inode, _) = try await self.resolve(path)
            if let value { try self.fs.setExtendedAttribute(inode, name: name, value: value) } else { try self.fs.removeExtendedAttribute(inode, name: name) }
            return 0
        }
    }

    func attributes(_ path: String) -> Sys.Outcome<[String]> {
        outcome {
            let (inode, _) = try await self.resolve(path)
            return try self.fs.extendedAttributeNames(inode).map { name in
                Sys.described(attribute: name, try self.fs.extendedAttribute(inode, name: name))
            }.sorted()
        }
    }

    /// setattr of the owner or group, answered as the FUSE adapter does; the kernel marks a
    /// chown as one that clears set-ID bits (root's too, as `chown_common` does).
    func chown(_ path: String, _ owner: UInt32?, _ group: UInt32?) -> Sys.Outcome<Int32> {
        outcome {
            let (inode, _) = try await self.resolve(path)
            _ = try self.fs.clearSetIDBits(inode, callerInGroup: { _ in true })
            _ = try self.fs.setAttributesWithoutWaiting(inode, modified: nil, uid: owner, gid: group)
            return 0
        }
    }

    func list(_ path: String) -> Sys.Outcome<[String]> {
        outcome {
            let (inode, node) = try await self.resolve(path)
            if !node.isFolder { throw Sys.Errno(code: ENOTDIR) }
            return try await self.names(in: inode)
        }
    }

    /// A folder's entry names, sorted, as an opendir and readdirs until the end give them.
    private func names(in folder: UInt64) async throws -> [String] {
        let children = try await fs.openDirectory(folder)
        fs.releaseDirectory(folder)
        return children.map(\.name).sorted()
    }

    /// A held folder read from its start: as it is now (the core keeps no snapshot for a
    /// descriptor; a rewound handle lists the folder as it is). A folder removed since lists
    /// nothing, as on a disk.
    func list(descriptor fd: Int32) -> Sys.Outcome<[String]> {
        withDescriptor(fd) { descriptor in
            guard descriptor.handle == nil else { throw Sys.Errno(code: ENOTDIR) }
            return try await self.names(in: descriptor.inode)
        }
    }

    // MARK: The VFS's part

    /// Walks a path from the root, a lookup per name, as the kernel does when it knows none.
    private func resolve(_ path: String) async throws -> (UInt64, Node) {
        var inode = InodeTable.root
        var node = try fs.node(inode)
        for name in path.split(separator: "/") {
            guard node.isFolder else { throw Sys.Errno(code: ENOTDIR) }
            (inode, node) = try await fs.lookup(parent: inode, name: String(name))
        }
        return (inode, node)
    }

    /// The folder a path's last name is in, and that name.
    private func resolveParent(_ path: String) async throws -> (UInt64, String) {
        let (parent, node) = try await resolve(PathText.parent(path))
        guard node.isFolder else { throw Sys.Errno(code: ENOTDIR) }
        return (parent, PathText.last(path))
    }

    private func add(_ descriptor: Descriptor) -> Int32 {
        descriptors.withLock { state in
            let fd = state.next
            state.next += 1
            state.open[fd] = descriptor
            return fd
        }
    }

    private func withDescriptor<T: Sendable>(_ fd: Int32, _ body: @escaping @Sendable (Descriptor) async throws -> T) -> Sys.Outcome<T> {
        guard let descriptor = descriptors.withLock({ $0.open[fd] }) else { return .failure(Sys.Errno(code: EBADF)) }
        return outcome { try await body(descriptor) }
    }

    private func status(_ inode: UInt64, _ node: Node) -> Sys.Status {
        Sys.status(fs.attributes(inode, node))
    }

    /// Runs a call to the core from this blocking thread; its error as the errno the adapter
    /// would answer.
    private func outcome<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) -> Sys.Outcome<T> {
        do {
            return .success(try blocking { try await body() })
        } catch {
            return .failure(Sys.Errno(code: Self.code(of: error)))
        }
    }

    private static func code(of error: any Error) -> Int32 {
        if let error = error as? Sys.Errno { return error.code }
        return ErrnoMapping.errno(ErrnoMapping.fsError(error))
    }
}
