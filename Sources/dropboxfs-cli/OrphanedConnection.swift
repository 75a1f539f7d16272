import DropboxAPI
import Foundation

/// A mount whose daemon is gone while the kernel keeps its FUSE connection, because
/// something still holds the daemon's /dev/fuse descriptor (a thread of the daemon that
/// could not end, a process that got a copy of it). Every call on the mountpoint, `stat`
/// included, then waits for an answer nobody will give, and an unmount leaves the waiting
/// calls hung. Aborting the connection through the FUSE control filesystem fails them
/// (ENOTCONN), as a daemon's exit would have.
enum OrphanedConnection {
    /// Aborts the connection of the mount at `mountpoint` if the daemon its status report
    /// names has ended (or is a zombie). Returns whether it did.
    @discardableResult
    static func abortIfDaemonGone(_ mountpoint: String) -> Bool {
        guard let report = StatusReport.read(mountpoint), !isRunning(report.pid),
              let connection = FuseConnection.number(of: mountpoint) else { return false }
        return FuseConnection.abort(connection)
    }

    /// Alive and not a zombie: a killed daemon stays a zombie while one of its threads
    /// cannot end.
    static func isRunning(_ pid: Int32) -> Bool {
        guard kill(pid, 0) == 0 || errno == EPERM, let state = ProcessStatus.of(pid)?.state else { return false }
        return state != "Z" && state != "X"
    }
}
