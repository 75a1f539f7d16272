import DropboxAPI
import Foundation

/// Which daemon serves a cache directory, and over which FUSE connection: written by the
/// daemon once mounted, read by a later mount that finds the cache in use.
///
/// A daemon killed while one of its threads waits in the kernel (an invalidation waiting for
/// a folder's lock held for a call the daemon never answered) stays a zombie: it keeps its
/// FUSE connection and its cache's SQLite lock. Unmounted lazily, the mountpoint no longer
/// leads to that connection, so only this file does; aborting the connection fails the
/// waiting call, the stuck thread ends, and the cache is free.
enum CacheOwner {
    static let fileName = "daemon"

    /// Records this process and the connection of its mount at `mountpoint`.
    static func record(cacheRoot: String, mountpoint: String) {
        guard let connection = FuseConnection.number(of: mountpoint) else { return }
        try? "\(getpid()) \(connection)\n".write(toFile: cacheRoot + "/" + fileName, atomically: true, encoding: .utf8)
    }

    /// At a clean end: a record left behind would name a pid and a connection number that
    /// other processes and mounts may be given later.
    static func forget(cacheRoot: String) {
        let path = cacheRoot + "/" + fileName
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
              text.split(whereSeparator: \.isWhitespace).first == Substring(String(getpid())) else { return }
        unlink(path)
    }

    /// Whether the daemon recorded for `cacheRoot` is a zombie, whose cache is free once its
    /// last thread ends; its connection is aborted if still open (it is then still the
    /// zombie's own: the zombie holds it). A daemon still running, or gone altogether, is
    /// left alone: the number of a connection that ended may be another mount's now.
    static func freeIfZombie(cacheRoot: String) -> Bool {
        guard let text = try? String(contentsOfFile: cacheRoot + "/" + fileName, encoding: .utf8) else { return false }
        let fields = text.split(whereSeparator: \.isWhitespace)
        guard fields.count == 2, let pid = Int32(fields[0]), Int(fields[1]) != nil,
              isZombieDaemon(pid) else { return false }
        // Aborted already (by this mount's last try, or through the mountpoint), the
        // connection's control folder may be gone while its threads still end.
        FuseConnection.abort(String(fields[1]))
        return true
    }

    /// A zombie whose command is dropboxfs (not another process given the pid since).
    private static func isZombieDaemon(_ pid: Int32) -> Bool {
        guard let process = ProcessStatus.of(pid) else { return false }
        return process.command.hasPrefix("dropboxfs") && process.state == "Z"
    }
}
