import Foundation

/// Small POSIX helpers for transfers: files are read and written by offset, never loaded whole.
public enum FileIO {
    static func openForReading(_ path: String) throws -> (fd: Int32, size: Int64) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ClientError.local("cannot open \(path): \(String(cString: strerror(errno)))") }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            close(fd)
            throw ClientError.local("cannot stat \(path): \(String(cString: strerror(errno)))")
        }
        return (fd, Int64(info.st_size))
    }

    /// The first `length` bytes of `fd` (a small file's), in memory; fails if it has fewer.
    public static func read(_ fd: Int32, length: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: length)
        var done = 0
        while done < length {
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, length - done, off_t(done)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw ClientError.local("read failed: \(n == 0 ? "the file is shorter" : String(cString: strerror(errno)))") }
            done += n
        }
        return bytes
    }

    /// Hashes `length` bytes of `fd` from `offset` (block digests; 1 MiB reads).
    static func blockDigests(_ fd: Int32, offset: Int64, length: Int64) throws -> [UInt8] {
        let hasher = ContentHasher()
        try feed(fd, offset: offset, length: length, into: hasher)
        return hasher.finishBlockDigests()
    }

    /// `blockDigests` from async code: past 1 MiB the hashing runs on a thread of its own
    /// (`OwnThread`), not on Swift's cooperative threads; below, a thread costs more than it saves.
    static func blockDigestsOffPool(_ fd: Int32, offset: Int64, length: Int64) async throws -> [UInt8] {
        if length <= 1 << 20 { return try blockDigests(fd, offset: offset, length: length) }
        return try await OwnThread.run { try blockDigests(fd, offset: offset, length: length) }
    }

    /// Feeds `length` bytes of `fd` from `offset` to `hasher`.
    static func feed(_ fd: Int32, offset: Int64 = 0, length: Int64, into hasher: ContentHasher) throws {
        guard length > 0 else { return }
        // As large as the bytes, up to 1 MiB: a zeroed 1 MiB buffer for each 4 KiB file of a
        // batch was 8 % of the daemon's CPU (memset, and page faults on a fresh mapping).
        var buffer = [UInt8](repeating: 0, count: Int(min(length, 1 << 20)))
        var done: Int64 = 0
        while done < length {
            let want = Int(min(Int64(buffer.count), length - done))
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, want, off_t(offset + done)) }
            if n < 0 && errno == EINTR { continue }
            // Short: the file shrank since its length was taken (a truncate while it uploads).
            guard n > 0 else { throw ClientError.local("read failed: \(n == 0 ? "the file is shorter" : String(cString: strerror(errno)))") }
            buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
            done += Int64(n)
        }
    }

    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        let failure = PositionalWrite.all(fd, bytes, at: offset)
        if failure != 0 { throw ClientError.local("write failed: \(String(cString: strerror(failure)))") }
    }
}

/// `pwrite` until every byte is written (short writes and EINTR go on), for callers that
/// map the failure their own way (ENOSPC is a different answer for each of them).
public enum PositionalWrite {
    /// 0 when all was written, else the errno.
    public static func all(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int64) -> Int32 {
        var done = 0
        while done < bytes.count {
            let n = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            if n < 0 {
                if errno == EINTR { continue }
                return errno
            }
            done += n
        }
        return 0
    }
}
