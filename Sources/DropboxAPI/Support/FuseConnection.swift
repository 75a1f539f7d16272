import Foundation

/// A FUSE mount's connection to its daemon, as the kernel's control filesystem shows it: the
/// daemon's `mount` and `unmount` and the tests that kill daemons read it alike.
public enum FuseConnection {
    public static let controlDirectory = "/sys/fs/fuse/connections"

    /// The connection's number: the minor device number of the mount at `mountpoint` (major
    /// 0), as /proc/self/mountinfo gives it (the last mount on that path: the one on top).
    public static func number(of mountpoint: String) -> String? {
        guard let text = KernelText.read("/proc/self/mountinfo") else { return nil }
        var found: String?
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count > 4, KernelText.unescapeMountField(String(fields[4])) == mountpoint else { continue }
            let device = fields[2].split(separator: ":")
            found = device.count == 2 && device[0] == "0" ? String(device[1]) : nil
        }
        return found
    }

    /// Aborts connection `number`: every call waiting on it fails (ENOTCONN), as at its
    /// daemon's exit. Returns whether the abort was written.
    @discardableResult
    public static func abort(_ number: String) -> Bool {
        let abort = "\(controlDirectory)/\(number)/abort"
        if !FileManager.default.fileExists(atPath: abort) {
            // Not mounted yet (systemd mounts it at boot; a container may not have): root may.
            _ = Foundation.mount("fusectl", controlDirectory, "fusectl", 0, nil)
        }
        let fd = open(abort, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return write(fd, "1", 1) == 1
    }
}

/// A process's (or one of its threads') command name and state letter, from /proc.
public enum ProcessStatus {
    public static func of(_ pid: Int32, thread: Int32? = nil) -> (command: Substring, state: Character)? {
        let path = thread.map { "/proc/\(pid)/task/\($0)/stat" } ?? "/proc/\(pid)/stat"
        guard let stat = KernelText.read(path), let open = stat.firstIndex(of: "("),
              let close = stat.lastIndex(of: ")"), let state = stat[close...].dropFirst(2).first else { return nil }
        return (stat[stat.index(after: open)..<close], state)
    }
}

extension KernelText {
    /// /proc/mounts and mountinfo escape space, tab, newline and backslash as octal.
    public static func unescapeMountField(_ text: String) -> String {
        text.replacingOccurrences(of: "\\040", with: " ").replacingOccurrences(of: "\\011", with: "\t")
            .replacingOccurrences(of: "\\012", with: "\n").replacingOccurrences(of: "\\134", with: "\\")
    }
}
