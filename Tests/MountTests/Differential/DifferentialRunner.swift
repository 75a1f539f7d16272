import DropboxAPI
import Foundation
import Synchronization

/// Runs one sequence of operations side by side on a folder of the mount and on a local
/// folder (the reference: what any POSIX filesystem does) and compares every outcome:
/// return values, errnos, bytes read, sizes, listings. At the end it closes everything,
/// compares the two trees byte for byte, waits for the uploads and compares Dropbox with the
/// local folder. The first difference ends the run and is returned, with the steps so far.
/// Blocking: run it off Swift's cooperative threads (`offPool`).
struct DifferentialRunner {
    let mountRoot: String
    let localRoot: String
    /// The same folder as Dropbox sees it (for another client's writes and the final check).
    let remoteRoot: String
    let client: DropboxClient

    struct Difference: Error, CustomStringConvertible {
        var step: Int
        var operation: String
        var mount: String
        var local: String
        var description: String { "step \(step) \(operation): mount gave \(mount), local disk gave \(local)" }
    }

    /// Descriptors open on both sides, in the order they were opened.
    private var open: [(mount: Int32, local: Int32, path: Int)] = []

    init(mountRoot: String, localRoot: String, remoteRoot: String, client: DropboxClient) {
        self.mountRoot = mountRoot
        self.localRoot = localRoot
        self.remoteRoot = remoteRoot
        self.client = client
    }

    /// Runs `operations` in a new folder `name` of the mount's `/base` and of `localBase`,
    /// off Swift's cooperative threads; the difference, if any, is the failure.
    static func run(_ operations: [Operation], named name: String, base: String, localBase: String,
                    on m: MountFixture) async throws -> Result<Void, any Error> {
        let runner = DifferentialRunner(mountRoot: m.mountpoint + base + "/" + name, localRoot: localBase + "/" + name,
                                        remoteRoot: base + "/" + name, client: m.client)
        return try await offPool {
            _ = try Sys.mkdir(runner.mountRoot).value("mkdir \(name) on the mount")
            _ = try Sys.mkdir(runner.localRoot).value("mkdir \(name) locally")
            var running = runner
            return Result { try running.run(operations) }
        }
    }

    mutating func run(_ operations: [Operation]) throws {
        defer { closeAll() }
        for (index, operation) in operations.enumerated() {
            let (mount, local) = try perform(operation)
            if mount != local { throw Difference(step: index, operation: operation.description, mount: mount, local: local) }
        }
        let end = operations.count
        for descriptor in open {
            let (mount, local) = (describe(Sys.close(descriptor.mount)), describe(Sys.close(descriptor.local)))
            if mount != local { throw Difference(step: end, operation: "close at the end", mount: mount, local: local) }
        }
        open = []
        let (mountTree, localTree) = (tree(mountRoot), tree(localRoot))
        if mountTree != localTree { throw Difference(step: end, operation: "compare trees", mount: mountTree, local: localTree) }
        settle()
        let remote = remoteTree()
        if remote != localFiles() { throw Difference(step: end, operation: "compare Dropbox after the uploads", mount: remote, local: localFiles()) }
    }

    private mutating func closeAll() {
        for descriptor in open {
            _ = Sys.close(descriptor.mount)
            _ = Sys.close(descriptor.local)
        }
        open = []
    }

    private func paths(_ index: Int) -> (mount: String, local: String) {
        let relative = index < 0 ? "" : "/" + Operation.paths[index]
        return (mountRoot + relative, localRoot + relative)
    }

    /// The descriptor pair a slot picks, if any is open.
    private func descriptor(_ slot: Int) -> (mount: Int32, local: Int32, path: Int)? {
        open.isEmpty ? nil : open[slot % open.count]
    }

    /// Performs one operation on both sides; returns what each side gave, as text.
    private mutating func perform(_ operation: Operation) throws -> (String, String) {
        switch operation {
        case .open(let path, let mode):
            let (m, l) = paths(path)
            let (mount, local) = (Sys.open(m, mode.flags), Sys.open(l, mode.flags))
            if case .success(let mfd) = mount, case .success(let lfd) = local {
                open.append((mfd, lfd, path))
            } else {
                if case .success(let fd) = mount { _ = Sys.close(fd) }
                if case .success(let fd) = local { _ = Sys.close(fd) }
            }
            return (describe(mount.map { _ in 0 }), describe(local.map { _ in 0 }))
        case .close(let slot):
            guard let index = open.isEmpty ? nil : slot % open.count else { return ("none open", "none open") }
            let descriptor = open.remove(at: index)
            return (describe(Sys.close(descriptor.mount)), describe(Sys.close(descriptor.local)))
        case .write(let slot, let offset, let length, let fill):
            guard let d = descriptor(slot) else { return ("none open", "none open") }
            let bytes = Self.bytes(length, fill: fill, offset: offset)
            return (describe(Sys.pwrite(d.mount, bytes, at: offset)), describe(Sys.pwrite(d.local, bytes, at: offset)))
        case .read(let slot, let offset, let length):
            guard let d = descriptor(slot) else { return ("none open", "none open") }
            return (describe(Sys.pread(d.mount, count: length, at: offset)), describe(Sys.pread(d.local, count: length, at: offset)))
        case .ftruncate(let slot, let size):
            guard let d = descriptor(slot) else { return ("none open", "none open") }
            return (describe(Sys.ftruncate(d.mount, size)), describe(Sys.ftruncate(d.local, size)))
        case .fsync(let slot):
            guard let d = descriptor(slot) else { return ("none open", "none open") }
            return (describe(Sys.fsync(d.mount)), describe(Sys.fsync(d.local)))
        case .fdatasync(let slot):
            guard let d = descriptor(slot) else { return ("none open", "none open") }
            return (describe(Sys.fdatasync(d.mount)), describe(Sys.fdatasync(d.local)))
        case .fstat(let slot):
            guard let d = descriptor(slot) else { return ("none open", "none open") }
            return (describe(Sys.fstat(d.mount)), describe(Sys.fstat(d.local)))
        case .truncate(let path, let size):
            let (m, l) = paths(path)
            return (describe(Sys.truncate(m, size)), describe(Sys.truncate(l, size)))
        case .rename(let from, let to):
            let (mf, lf) = paths(from), (mt, lt) = paths(to)
            return (describe(Sys.rename(mf, mt)), describe(Sys.rename(lf, lt)))
        case .caseRename(let path):
            let (m, l) = paths(path)
            let upper = { (p: String) in Node.parent(p) + "/" + Node.last(p).uppercased() }
            let there = (describe(Sys.rename(m, upper(m))), describe(Sys.rename(l, upper(l))))
            let listed = (describe(Sys.list(Node.parent(m))), describe(Sys.list(Node.parent(l))))
            let back = (describe(Sys.rename(upper(m), m)), describe(Sys.rename(upper(l), l)))
            return ("\(there.0); \(listed.0); \(back.0)", "\(there.1); \(listed.1); \(back.1)")
        case .unlink(let path):
            let (m, l) = paths(path)
            return (describe(Sys.unlink(m)), describe(Sys.unlink(l)))
        case .mkdir(let path):
            let (m, l) = paths(path)
            return (describe(Sys.mkdir(m)), describe(Sys.mkdir(l)))
        case .rmdir(let path):
            let (m, l) = paths(path)
            return (describe(Sys.rmdir(m)), describe(Sys.rmdir(l)))
        case .stat(let path):
            let (m, l) = paths(path)
            return (describe(Sys.stat(m)), describe(Sys.stat(l)))
        case .list(let path):
            let (m, l) = paths(path)
            return (describe(Sys.list(m)), describe(Sys.list(l)))
        case .remoteWrite(let path, let length, let fill):
            return try remoteWrite(path, length: length, fill: fill)
        case .settle:
            settle()
            return ("settled", "settled")
        }
    }

    /// Another client replaces a closed file on Dropbox; the mount must show the new bytes
    /// (awaited: the change travels through longpoll), and the local folder takes them too.
    private func remoteWrite(_ path: Int, length: Int, fill: UInt8) throws -> (String, String) {
        let (m, l) = paths(path)
        // Only a closed file: another client's write to a file open here is a conflict by
        // design (the local bytes go to a conflicted copy), which no local disk models. Open
        // is judged by inode: a rename may have given an open file this name.
        guard case .success(let status) = Sys.stat(l), !status.isDirectory,
              !open.contains(where: { (try? Sys.fstat($0.local).get())?.inode == status.inode }) else {
            return ("skipped", "skipped")
        }
        // Our own pending upload first: otherwise the two writes race (a conflict, by design).
        if case .success(let fd) = Sys.open(m, O_RDONLY) {
            _ = Sys.fsync(fd)
            _ = Sys.close(fd)
        }
        let bytes = Self.bytes(length, fill: fill, offset: 0)
        let file = NSTemporaryDirectory() + "remote-" + UUID().uuidString
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        defer { unlink(file) }
        let client = self.client, remote = remoteRoot + "/" + Operation.paths[path]
        try blocking { _ = try await client.uploadFile(file, to: CommitInfo(path: remote, mode: .overwrite)) }
        try Data(bytes).write(to: URL(fileURLWithPath: l))
        // A bound against a hang, not a timing assertion: the change travels through longpoll
        // and a listing, which a loaded machine may take many seconds over.
        let deadline = Date().addingTimeInterval(300)
        while Date() < deadline {
            if case .success(let seen) = Sys.contents(m), seen == bytes { return ("seen", "seen") }
            usleep(20_000)
        }
        return ("never showed the remote change: \(describe(Sys.contents(m)))", "seen")
    }

    /// Waits until every file under the mount's folder is on Dropbox (fsync of each, found
    /// by walking the tree: renames put files at paths no operation names).
    private func settle() {
        func walk(_ path: String) {
            for name in (try? Sys.list(path).get()) ?? [] {
                let child = path + "/" + name
                if (try? Sys.stat(child).get())?.isDirectory == true { walk(child); continue }
                guard case .success(let fd) = Sys.open(child, O_RDONLY) else { continue }
                _ = Sys.fsync(fd)
                _ = Sys.close(fd)
            }
        }
        walk(mountRoot)
    }

    /// Every entry below a root: name, type, size, and a hash of each file's bytes.
    private func tree(_ root: String) -> String {
        var lines: [String] = []
        func walk(_ relative: String) {
            guard case .success(let names) = Sys.list(root + relative) else { return lines.append("\(relative): unlistable") }
            for name in names {
                let path = relative + "/" + name
                switch Sys.stat(root + path) {
                case .success(let status) where status.isDirectory:
                    lines.append("\(path)/")
                    walk(path)
                case .success(let status):
                    lines.append("\(path) \(status.size) \(describe(Sys.contents(root + path)))")
                case .failure(let error):
                    lines.append("\(path) \(error)")
                }
            }
        }
        walk("")
        return lines.joined(separator: "\n")
    }

    /// The local folder's files as Dropbox names them (lower-case paths) with content hashes.
    private func localFiles() -> String {
        var lines: [String] = []
        func walk(_ relative: String) {
            for name in (try? Sys.list(localRoot + relative).get()) ?? [] {
                let path = relative + "/" + name
                if (try? Sys.stat(localRoot + path).get())?.isDirectory == true {
                    walk(path)
                } else {
                    lines.append("\(path.lowercased()) \((try? ContentHasher.hash(file: localRoot + path)) ?? "?")")
                }
            }
        }
        walk("")
        return lines.sorted().joined(separator: "\n")
    }

    /// Dropbox's files below the remote root, listed the same way.
    private func remoteTree() -> String {
        let client = self.client, root = remoteRoot
        let entries = (try? blocking { try await client.listAll(root, recursive: true) }) ?? []
        var lines: [String] = []
        for case .file(let file) in entries {
            lines.append("\(file.pathLower!.dropFirst(root.count)) \(file.contentHash ?? "?")")
        }
        return lines.sorted().joined(separator: "\n")
    }

    /// Bytes a write puts: each tells its own offset, so a byte in the wrong place shows.
    static func bytes(_ count: Int, fill: UInt8, offset: Int64) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: (Int64($0) + offset) &* 31 &+ Int64(fill)) }
    }
}

/// An outcome as text: the errno, or what succeeded (bytes by length and hash).
private func describe<T>(_ outcome: Sys.Outcome<T>) -> String {
    switch outcome {
    case .failure(let error): return error.description
    case .success(let value as [UInt8]): return "\(value.count) bytes \(ContentHasher.hash(value).prefix(12))"
    case .success(let value as [String]): return value.joined(separator: ",")
    case .success(let value): return "ok \(value)"
    }
}

/// Path helpers for the runner (plain strings, no Foundation path semantics).
private enum Node {
    static func parent(_ path: String) -> String { String(path[..<path.lastIndex(of: "/")!]) }
    static func last(_ path: String) -> String { String(path[path.index(after: path.lastIndex(of: "/")!)...]) }
}

/// Awaits async work from a blocking thread (the runner's), never from a cooperative one.
func blocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let done = DispatchSemaphore(value: 0)
    let result = Mutex<Result<T, any Error>?>(nil)
    Task {
        let outcome: Result<T, any Error>
        do { outcome = .success(try await body()) } catch { outcome = .failure(error) }
        result.withLock { $0 = outcome }
        done.signal()
    }
    done.wait()
    return try result.withLock { $0! }.get()
}
