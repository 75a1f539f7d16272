import Foundation

/// Computes a file's content hash on its own thread while the file is being written,
/// reading from the page cache just behind the writer. A download then hashes on the
/// second core instead of between network reads, with no copies and one small buffer.
final class FollowingHasher: @unchecked Sendable {
    private let fd: Int32
    private let condition = NSCondition()
    // Guarded by `condition`:
    private var written: Int64 = 0
    private var finished = false
    private var restart = false
    private var result: Result<String, any Error>?
    private var stopped = false

    /// Reads through its own duplicate of `fd`, closed when its thread ends, so the caller
    /// may close the original at any time.
    init(fd: Int32) {
        self.fd = dup(fd)
        let thread = Thread { [self] in follow() }
        thread.name = "dropboxfs-hash"
        thread.start()
    }

    /// The writer has written everything before `offset`.
    func advance(to offset: Int64) {
        condition.withLock {
            written = offset
            condition.signal()
        }
    }

    /// Bytes from `offset` on were thrown away: hash again from the start (rare; failures only).
    func rewind(to offset: Int64) {
        condition.withLock {
            written = offset
            restart = true
            condition.signal()
        }
    }

    /// Stops the thread without waiting for it (after a failed download): it reads no more.
    func abandon() {
        condition.withLock {
            stopped = true
            finished = true
            condition.broadcast()
        }
    }

    /// Waits for the hash of everything written.
    func finish() throws -> String {
        condition.lock()
        defer { condition.unlock() }
        finished = true
        condition.broadcast()
        while result == nil { condition.wait() }
        return try result!.get()
    }

    private func follow() {
        defer { close(fd) }
        var hasher = ContentHasher()
        var hashed: Int64 = 0
        var buffer = [UInt8](repeating: 0, count: 4 << 20)
        while true {
            condition.lock()
            while !restart && hashed >= written && !finished { condition.wait() }
            if restart {
                restart = false
                hasher = ContentHasher()
                hashed = 0
            }
            let target = written
            if stopped {
                condition.unlock()
                return
            }
            let done = finished && hashed >= target
            if done { result = .success(hasher.finish()); condition.broadcast() }
            condition.unlock()
            if done { return }
            let want = Int(min(Int64(buffer.count), target - hashed))
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, want, off_t(hashed)) }
            if n <= 0 {
                condition.withLock {
                    result = .failure(ClientError.local("hashing the download failed: \(String(cString: strerror(errno)))"))
                    condition.broadcast()
                }
                return
            }
            buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
            hashed += Int64(n)
        }
    }
}
