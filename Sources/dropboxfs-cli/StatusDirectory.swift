import DropboxAPI
import DropboxFS
import Foundation

/// Where a mount's daemon writes its status file (its pid, figures and uploads), which
/// `status` reads and `unmount --no-wait` trusts for the pid it signals. Never a predictable
/// shared path: `$XDG_RUNTIME_DIR/dropboxfs` when the session has one, else `status` in the
/// default cache directory. Each must be a real directory of this user that nobody else may
/// write; anything else is refused. Readers look in every candidate: a daemon started by
/// `mount -a` or systemd may not see the same `XDG_RUNTIME_DIR` as a login shell.
enum StatusDirectory {
    static var candidates: [String] {
        var paths: [String] = []
        if let runtime = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            paths.append(runtime + "/dropboxfs")
        }
        paths.append(MountDaemon.defaultCacheDirectory() + "/status")
        return paths
    }

    /// The directory the daemon writes to, created 0700 if missing.
    static func forWriting() throws -> String {
        let path = candidates[0]
        if mkdir(path, 0o700) != 0 && errno != EEXIST {
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            guard mkdir(path, 0o700) == 0 || errno == EEXIST else {
                throw ClientError.local("cannot create status directory \(path): \(String(cString: strerror(errno)))")
            }
        }
        try checkTrusted(path)
        return path
    }

    /// A status file of `mountpoint` in a directory that passes the checks, if any.
    static func existingFile(for mountpoint: String) -> String? {
        for directory in candidates where (try? checkTrusted(directory)) != nil {
            let file = directory + "/" + name(for: mountpoint)
            if access(file, R_OK) == 0 { return file }
        }
        return nil
    }

    static func name(for mountpoint: String) -> String { MountDaemon.sanitize(mountpoint) + ".json" }

    /// Refuses a path that is not a directory (a symlink counts as not), belongs to another
    /// user, or is open to writes by others.
    static func checkTrusted(_ path: String) throws {
        var info = stat()
        guard lstat(path, &info) == 0 else { throw ClientError.local("status directory \(path): \(String(cString: strerror(errno)))") }
        guard info.st_mode & S_IFMT == S_IFDIR else { throw ClientError.local("status directory \(path) is not a directory: refused") }
        guard info.st_uid == getuid() else {
            throw ClientError.local("status directory \(path) belongs to uid \(info.st_uid), not to you: refused")
        }
        guard info.st_mode & 0o022 == 0 else {
            throw ClientError.local("status directory \(path) can be written by others (mode \(String(info.st_mode & 0o777, radix: 8))): refused")
        }
    }
}
