import Foundation

/// The daemon's error log: one line each, on stderr (the log file `dropboxfs.log` in the
/// cache directory when mounted in the background). Used by the whole core, not only the
/// FUSE adapter.
///
/// Logging must never take the daemon down: the log usually lives on the cache disk, which
/// may be full exactly when errors happen. Foundation's `FileHandle.write(_:)` traps on a
/// failed write (a full cache disk killed the mount that way), so this writes with write(2)
/// and drops what cannot be written.
public enum FuseLog {
    public static func error(_ message: String) { write("dropboxfs: error: \(message)\n") }

    /// Whether `DROPBOXFS_TRACE` is set: the daemon then logs its decisions about the
    /// kernel's caches (which inodes it detaches, which inodes it found gone, whether an
    /// inode's pages stay), for finding races, and the steps of uploads and fsyncs (a batch
    /// taken, its bytes staged, its commit answered, the store caught up; an fsync's wait),
    /// for finding where an fsync's time goes. Off by default: the lines cost time on hot paths.
    public static let tracing = ProcessInfo.processInfo.environment["DROPBOXFS_TRACE"].map { !$0.isEmpty } ?? false

    public static func trace(_ message: @autoclosure () -> String) {
        if tracing { write("dropboxfs: trace: \(Date().timeIntervalSince1970) \(message())\n") }
    }

    /// Writes text to stderr as it is, dropping what cannot be written.
    public static func write(_ text: String) {
        let line = Array(text.utf8)
        line.withUnsafeBytes { bytes in
            var done = 0
            while done < bytes.count {
                let n = Glibc.write(STDERR_FILENO, bytes.baseAddress! + done, bytes.count - done)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return }  // full disk, closed stderr: the line is lost, not the mount
                done += n
            }
        }
    }
}
