import CFuseShim
import Foundation

/// System calls as tests make them: each returns its value or the errno it failed with, so a
/// test compares outcomes (the mount's with a local directory's) rather than catching.
/// A call on the mount may wait for the daemon, which may wait for the emulator running in
/// this test process: run them through `offPool`, never on Swift's cooperative threads (two
/// suites that each blocked one of this machine's two, in a lookup that needed the
/// emulator, hung the test run).
public enum Sys {
    public struct Errno: Error, Equatable, Hashable, CustomStringConvertible {
        public let code: Int32
        public init(code: Int32) { self.code = code }
        public var description: String { Self.names[code] ?? "errno \(code)" }
        public static let names: [Int32: String] = [
            ENOENT: "ENOENT", EEXIST: "EEXIST", ENOTDIR: "ENOTDIR", EISDIR: "EISDIR", ENOTEMPTY: "ENOTEMPTY", EINVAL: "EINVAL",
            EBADF: "EBADF", ENAMETOOLONG: "ENAMETOOLONG", EFBIG: "EFBIG", EIO: "EIO", EACCES: "EACCES", EPERM: "EPERM",
            ENOSPC: "ENOSPC", EBUSY: "EBUSY", EXDEV: "EXDEV", EROFS: "EROFS", EOPNOTSUPP: "EOPNOTSUPP",
            ENETUNREACH: "ENETUNREACH",
        ]
    }

    public typealias Outcome<T> = Result<T, Errno>

    public static func check(_ value: Int32) -> Outcome<Int32> { value < 0 ? .failure(Errno(code: errno)) : .success(value) }
    public static func check(_ value: Int) -> Outcome<Int> { value < 0 ? .failure(Errno(code: errno)) : .success(value) }

    public static func open(_ path: String, _ flags: Int32, _ mode: mode_t = 0o644) -> Outcome<Int32> {
        check(Glibc.open(path, flags | O_CLOEXEC, mode))
    }

    public static func close(_ fd: Int32) -> Outcome<Int32> { check(Glibc.close(fd)) }

    public static func pwrite(_ fd: Int32, _ bytes: [UInt8], at offset: Int64) -> Outcome<Int> {
        check(bytes.withUnsafeBytes { Glibc.pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) })
    }

    public static func write(_ fd: Int32, _ bytes: [UInt8]) -> Outcome<Int> {
        check(bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) })
    }

    public static func pread(_ fd: Int32, count: Int, at offset: Int64) -> Outcome<[UInt8]> {
        var buffer = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = buffer.withUnsafeMutableBytes { Glibc.pread(fd, $0.baseAddress! + done, count - done, off_t(offset) + off_t(done)) }
            if n < 0 { return .failure(Errno(code: errno)) }
            if n == 0 { break }
            done += n
        }
        return .success(Array(buffer[..<done]))
    }

    public static func ftruncate(_ fd: Int32, _ size: Int64) -> Outcome<Int32> { check(Glibc.ftruncate(fd, off_t(size))) }
    public static func fallocate(_ fd: Int32, _ mode: Int32, _ offset: Int64, _ length: Int64) -> Outcome<Int32> {
        check(fallocateCall(fd, mode, off_t(offset), off_t(length)))
    }

    /// Stores `bytes` at `offset` through a shared mapping of the file, as a program that
    /// maps it does, as many of them as lie inside the file (a store past its end faults:
    /// the rest is dropped), then with `sync` msync(MS_SYNC), then munmap. Returns how many
    /// bytes were stored. The mapping is made even when none lie inside, so a descriptor that
    /// cannot be mapped for writing fails (EACCES) whatever the offset.
    public static func mapWrite(_ fd: Int32, _ bytes: [UInt8], at offset: Int64, sync: Bool) -> Outcome<Int> {
        var info = Glibc.stat()
        guard Glibc.fstat(fd, &info) == 0 else { return .failure(Errno(code: errno)) }
        let page = Int64(sysconf(Int32(_SC_PAGESIZE)))
        let start = offset / page * page
        let count = Int(max(0, min(Int64(bytes.count), Int64(info.st_size) - offset)))
        let length = Int(offset - start) + max(count, 1)
        guard let base = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off_t(start)), base != MAP_FAILED else {
            return .failure(Errno(code: errno))
        }
        defer { munmap(base, length) }
        bytes.withUnsafeBytes { (base + Int(offset - start)).copyMemory(from: $0.baseAddress!, byteCount: count) }
        if sync && msync(base, length, MS_SYNC) != 0 { return .failure(Errno(code: errno)) }
        return .success(count)
    }

    /// The C library's fallocate(2), which Swift's Glibc module leaves out (a GNU extension).
    private static let fallocateCall = unsafeBitCast(dlsym(nil, "fallocate"), to: (@convention(c) (Int32, Int32, off_t, off_t) -> Int32).self)
    public static func truncate(_ path: String, _ size: Int64) -> Outcome<Int32> { check(Glibc.truncate(path, off_t(size))) }
    public static func fsync(_ fd: Int32) -> Outcome<Int32> { check(Glibc.fsync(fd)) }

    /// glibc's copy_file_range, which Swift's Glibc module leaves out (it needs _GNU_SOURCE).
    private typealias CopyFileRange = @convention(c) (Int32, UnsafeMutablePointer<off_t>?, Int32, UnsafeMutablePointer<off_t>?, Int, UInt32) -> Int
    private static let copyFileRange = unsafeBitCast(dlsym(nil, "copy_file_range")!, to: CopyFileRange.self)

    /// copy_file_range(2) from `source`'s offset to `target`'s until it copies nothing, as
    /// `cp` does; the bytes copied.
    public static func copyAll(_ source: Int32, to target: Int32) -> Outcome<Int64> {
        var total: Int64 = 0
        while true {
            let copied = copyFileRange(source, nil, target, nil, 1 << 30, 0)
            if copied < 0 { return .failure(Errno(code: errno)) }
            if copied == 0 { return .success(total) }
            total += Int64(copied)
        }
    }
    public static func fdatasync(_ fd: Int32) -> Outcome<Int32> { check(Glibc.fdatasync(fd)) }
    public static func unlink(_ path: String) -> Outcome<Int32> { check(Glibc.unlink(path)) }
    public static func mkdir(_ path: String) -> Outcome<Int32> { check(Glibc.mkdir(path, 0o755)) }
    public static func rmdir(_ path: String) -> Outcome<Int32> { check(Glibc.rmdir(path)) }
    public static func rename(_ from: String, _ to: String) -> Outcome<Int32> { check(Glibc.rename(from, to)) }

    /// What a test compares of a stat: type, permission bits, owner and group, size, and (for
    /// files) the modification time.
    public struct Status: Equatable, Sendable, CustomStringConvertible {
        public var isDirectory: Bool
        public var size: Int64
        public var inode: UInt64
        public var modified: timespec
        /// The mode's permission bits (`st_mode & 0o7777`).
        public var permissions: UInt32
        /// Hard links (`st_nlink`): 0 for a file unlinked while a descriptor holds it.
        public var links: UInt64 = 1
        /// `st_uid`, `st_gid`.
        public var owner: UInt32 = 0
        public var group: UInt32 = 0
        public init(isDirectory: Bool, size: Int64, inode: UInt64, modified: timespec, permissions: UInt32) {
            self.isDirectory = isDirectory
            self.size = size
            self.inode = inode
            self.modified = modified
            self.permissions = permissions
        }
        public static func == (a: Status, b: Status) -> Bool {
            a.isDirectory == b.isDirectory && a.permissions == b.permissions && a.owner == b.owner && a.group == b.group
                && (a.isDirectory || (a.size == b.size && a.setTime?.seconds == b.setTime?.seconds && a.setTime?.nanos == b.setTime?.nanos))
        }
        public var description: String {
            let mode = String(permissions, radix: 8) + (owner == 0 && group == 0 ? "" : " \(owner):\(group)")
            return isDirectory ? "dir \(mode)" : "file(\(size), \(mode)\(setTime.map { ", mtime \($0.seconds).\($0.nanos)" } ?? ""))"
        }
        /// A file's modification time when it is one set on purpose (utimensat to a time
        /// before 2001, as the differential steps do): such a time must read back exactly,
        /// nanoseconds too, until something writes the file. A time the file got from a
        /// write is "now" on each side, and not compared.
        public var setTime: (seconds: Int, nanos: Int)? {
            modified.tv_sec < Self.setTimesBefore ? (modified.tv_sec, modified.tv_nsec) : nil
        }
        public static let setTimesBefore = 1_000_000_000
    }

    public static func status(_ info: stat) -> Status {
        var status = Status(isDirectory: info.st_mode & S_IFMT == S_IFDIR, size: Int64(info.st_size), inode: UInt64(info.st_ino),
                            modified: info.st_mtim, permissions: UInt32(info.st_mode) & 0o7777)
        status.links = UInt64(info.st_nlink)
        status.owner = info.st_uid
        status.group = info.st_gid
        return status
    }

    public static func chmod(_ path: String, _ mode: mode_t) -> Outcome<Int32> { check(Glibc.chmod(path, mode)) }
    /// chown(2); nil leaves the id as it is (-1).
    public static func chown(_ path: String, _ owner: UInt32?, _ group: UInt32?) -> Outcome<Int32> {
        check(Glibc.chown(path, owner ?? UInt32.max, group ?? UInt32.max))
    }

    /// setxattr(2) of `name` to `value`, or (nil) removexattr(2).
    public static func setAttribute(_ path: String, _ name: String, _ value: [UInt8]?) -> Outcome<Int32> {
        guard let value else { return check(removexattr(path, name)) }
        return check(value.withUnsafeBytes { setxattr(path, name, $0.baseAddress, $0.count, 0) })
    }

    /// Every `user.` attribute listxattr(2) names, with its value, as `name=byte,byte`,
    /// sorted (listxattr's order is the filesystem's; a disk may list `security.selinux`).
    public static func attributes(_ path: String) -> Outcome<[String]> {
        userAttributes(path).map { $0.map { described(attribute: $0.name, $0.value) }.sorted() }
    }

    /// Every `user.` attribute listxattr(2) names, with its value, in listxattr's order.
    public static func userAttributes(_ path: String) -> Outcome<[(name: String, value: [UInt8])]> {
        var names = [CChar](repeating: 0, count: 4096)
        let count = listxattr(path, &names, names.count)
        guard count >= 0 else { return .failure(Errno(code: errno)) }
        var listed: [(name: String, value: [UInt8])] = []
        for name in names[0..<count].split(separator: 0).map({ String(decoding: $0.map(UInt8.init(bitPattern:)), as: UTF8.self) })
        where name.hasPrefix("user.") {
            var value = [UInt8](repeating: 0, count: 4096)
            let size = getxattr(path, name, &value, value.count)
            guard size >= 0 else { return .failure(Errno(code: errno)) }
            listed.append((name, Array(value[0..<size])))
        }
        return .success(listed)
    }

    /// An attribute as differential runs compare it: `name=byte,byte`.
    public static func described(attribute name: String, _ value: some Collection<UInt8>) -> String {
        name + "=" + value.map(String.init).joined(separator: ",")
    }

    /// This process's umask, read without setting it (umask(2) sets it, for every thread).
    public static let processUmask: mode_t = {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("Umask:") }
        return line.flatMap { mode_t($0.dropFirst("Umask:".count).trimmingCharacters(in: .whitespaces), radix: 8) } ?? 0o022
    }()

    public static func stat(_ path: String) -> Outcome<Status> {
        var info = Glibc.stat()
        return statPath(path, &info) == 0 ? .success(status(info)) : .failure(Errno(code: errno))
    }

    public static func fstat(_ fd: Int32) -> Outcome<Status> {
        var info = Glibc.stat()
        return Glibc.fstat(fd, &info) == 0 ? .success(status(info)) : .failure(Errno(code: errno))
    }

    /// utimensat of both times: to `time`, or (nil) to now.
    public static func setTimes(_ path: String, _ time: timespec?) -> Outcome<Int32> {
        let set = time ?? timespec(tv_sec: 0, tv_nsec: (1 << 30) - 1)  // UTIME_NOW
        var times = [set, set]
        return check(utimensat(AT_FDCWD, path, &times, 0))
    }

    public static func setModified(_ path: String, seconds: Int) -> Outcome<Int32> {
        setTimes(path, timespec(tv_sec: seconds, tv_nsec: 0))
    }

    /// O_PATH and AT_EMPTY_PATH (<fcntl.h>, behind _GNU_SOURCE: Swift's Glibc module leaves
    /// them out).
    public static let openPath: Int32 = 0o10_000_000
    public static let atEmptyPath: Int32 = 0x1000

    /// A folder's entry names, sorted.
    public static func list(_ path: String) -> Outcome<[String]> {
        guard let dir = opendir(path) else { return .failure(Errno(code: errno)) }
        return .success(names(of: dir))
    }

    /// The entry names of the folder open as `fd`, sorted; `fd` is closed.
    public static func list(descriptor fd: Int32) -> Outcome<[String]> {
        guard let dir = fdopendir(fd) else {
            let failure = Errno(code: errno)
            Glibc.close(fd)
            return .failure(failure)
        }
        return .success(names(of: dir))
    }

    /// Reads and closes `dir`.
    private static func names(of dir: OpaquePointer) -> [String] {
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    /// The whole content of a file (sized by fstat; a read past it shows any bytes beyond).
    public static func contents(_ path: String) -> Outcome<[UInt8]> {
        open(path, O_RDONLY).flatMap { fd in
            defer { _ = close(fd) }
            return fstat(fd).flatMap { pread(fd, count: Int($0.size) + 1, at: 0) }
        }
    }
}

/// stat(2) (inside `Sys`, the name means `Sys.stat`).
private func statPath(_ path: String, _ info: inout stat) -> Int32 { stat(path, &info) }

/// Runs blocking work on a thread of its own and awaits it.
public func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

extension Result {
    /// The value, or a test failure naming what was attempted.
    public func value(_ what: @autoclosure () -> String) throws -> Success {
        switch self {
        case .success(let value): return value
        case .failure(let error): throw TestFailure(message: "\(what()) failed: \(error)")
        }
    }
}

/// A test step that could not be done (not a difference found: the test itself failed).
public struct TestFailure: Error, CustomStringConvertible {
    public var message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}
