import DropboxAPI
import Foundation

/// A mount whose daemon is gone while the kernel keeps its FUSE connection, because
/// something still holds the daemon's /dev/fuse descriptor (a thread of the daemon that
/// could not end, a process that got a copy of it). Every call on the mountpoint, `stat`
/// included, then waits for an answer nobody will give, and an unmount leaves the waiting
/// calls hung. Aborting the connection through the FUSE control filesystem fails them
/// (ENOTCONN), as a daemon's exit would have.
enum OrphanedConnection {
    static let controlDirectory = "/sys/fs/fuse/connections"

    /// Aborts the connection of the mount at `mountpoint` if the daemon its status report
    /// names has ended (or is a zombie). Returns whether it did.
    @discardableResult
    static func abortIfDaemonGone(_ mountpoint: String) -> Bool {
        guard let report = StatusReport.read(mountpoint), !isRunning(report.pid),
              let connection = connectionNumber(of: mountpoint) else { return false }
        return abort(connection: connection)
    }

    /// Aborts FUSE connection number `connection`: every call waiting on it fails.
    static func abort(connection: String) -> Bool {
        let abort = "\(controlDirectory)/\(connection)/abort"
        if !FileManager.default.fileExists(atPath: abort) {
            // Not mounted yet (systemd mounts it at boot; a container may not have): root may.
            _ = Foundation.mount("fusectl", controlDirectory, "fusectl", 0, nil)
        }
        let fd = open(abort, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return write(fd, "1", 1) == 1
    }

    /// Alive and not a zombie: a killed daemon stays a zombie while one of its threads
    /// cannot end.
    static func isRunning(_ pid: Int32) -> Bool {
        guard kill(pid, 0) == 0 || errno == EPERM, let state = processState(pid)?.state else { return false }
        return state != "Z" && state != "X"
    }

    /// A process's command name and state letter, from /proc/PID/stat.
    static func processState(_ pid: Int32) -> (command: Substring, state: Character)? {
        guard let stat = KernelText.read("/proc/\(pid)/stat"), let open = stat.firstIndex(of: "("),
              let close = stat.lastIndex(of: ")"), let state = stat[close...].dropFirst(2).first else { return nil }
        return (stat[stat.index(after: open)..<close], state)
    }

    /// The FUSE connection's number: the minor device number of its mount (major 0), as
    /// /proc/self/mountinfo gives it (the last mount on that path: the one on top).
    static func connectionNumber(of mountpoint: String) -> String? {
        guard let text = KernelText.read("/proc/self/mountinfo") else { return nil }
        var found: String?
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count > 4, MountTable.unescape(String(fields[4])) == mountpoint else { continue }
            let device = fields[2].split(separator: ":")
            found = device.count == 2 && device[0] == "0" ? String(device[1]) : nil
        }
        return found
    }
}
