import DropboxAPI
import DropboxFS
import Foundation

/// `-o` options of `dropboxfs mount` (and of fstab lines, through mount.fuse3): ours are
/// taken out, fstab-only words are dropped, and the rest goes to FUSE.
struct MountOptions {
    var account: String?
    var apiURL: String?
    var cacheDir: String?
    var cacheSize: Int64?
    /// nil: the team space for an account that has one, else the home.
    var root: MountRoot?
    /// `-o timeout=SECONDS`: how long a request to Dropbox may go silent before it is
    /// given up (after a second such try Dropbox counts as out of reach).
    var requestTimeout: Int?
    var fs = DropboxFileSystem.Options()
    /// `default_permissions` joins them unless only root can reach the mount (`init`).
    var fuse: [String] = ["fsname=dropboxfs", "subtype=dropboxfs"]

    /// Words that only mean something to mount(8) or systemd.
    static let ignored: Set<String> = ["_netdev", "auto", "noauto", "user", "nouser", "users", "nofail", "defaults", "rw", "exec",
                                       "noexec", "suid", "nosuid", "dev", "nodev", "atime", "noatime", "relatime"]

    init(_ lists: [String]) throws {
        for option in lists.flatMap({ $0.split(separator: ",").map(String.init) }) where !option.isEmpty {
            let parts = option.split(separator: "=", maxSplits: 1).map(String.init)
            let key = parts[0]
            let value = parts.count > 1 ? parts[1] : nil
            func required() throws -> String {
                guard let value, !value.isEmpty else { throw ClientError.local("mount option \(key) needs a value (\(key)=…)") }
                return value
            }
            switch key {
            case "account": account = try required()
            case "api_url": apiURL = try required()
            case "cache_dir": cacheDir = try required()
            case "root": root = try MountRoot.parse(try required())
            case "cache_size":
                guard let size = ByteSize.parse(try required()) else { throw ClientError.local("cache_size=\(value ?? ""): not a size (e.g. 10G)") }
                cacheSize = size
            case "uid":
                guard let id = UInt32(try required()) else { throw ClientError.local("uid=\(value ?? ""): not a number") }
                fs.uid = id
            case "gid":
                guard let id = UInt32(try required()) else { throw ClientError.local("gid=\(value ?? ""): not a number") }
                fs.gid = id
            case "umask":
                guard let mask = UInt32(try required(), radix: 8) else { throw ClientError.local("umask=\(value ?? ""): not octal") }
                fs.umask = mask & 0o777
            case "ro":
                fuse.append("ro")
                fs.readOnly = true
            case "noxattr": fs.noExtendedAttributes = true
            case "timeout":
                guard let seconds = Int(try required()), (1...3600).contains(seconds) else {
                    throw ClientError.local("timeout=\(value ?? ""): not a number of seconds from 1 to 3600")
                }
                requestTimeout = seconds
            case "max_inodes":
                guard let count = Int(try required()), count >= 1_000 else { throw ClientError.local("max_inodes=\(value ?? ""): not a count of at least 1000") }
                fs.inodeLimit = count
            case _ where Self.ignored.contains(key) || key.hasPrefix("x-systemd.") || key.hasPrefix("x-"): continue
            default: fuse.append(option)
            }
        }
        // The kernel checks the shown modes itself (`default_permissions`) wherever a caller
        // other than root may come. Root's mount without allow_other admits root alone (the
        // kernel turns away any other uid or gid), and root passes every check but execute,
        // which the kernel makes without the option too (`access(2)` it leaves to the mount:
        // `DropboxFileSystem.checkAccess`). With the option, every create, mkdir or removal
        // cost one more round trip, the folder's attributes refreshed for the next check: a
        // tenth of the time of `cp -r`, `tar x` and 5,000 creates (A/B, 6 to 8 rounds each).
        if !Self.onlyRootReaches(fuse), !fuse.contains("default_permissions") { fuse.append("default_permissions") }
    }

    /// Whether a mount with these FUSE options admits root alone: made by root, shared with no one.
    static func onlyRootReaches(_ fuse: [String]) -> Bool {
        getuid() == 0 && !fuse.contains("allow_other") && !fuse.contains("allow_root")
    }
}

enum ByteSize {
    static func parse(_ text: String) -> Int64? {
        let units: [Character: Int64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40]
        var digits = text.uppercased()
        if digits.hasSuffix("IB") { digits.removeLast(2) } else if digits.hasSuffix("B") { digits.removeLast() }
        var multiplier: Int64 = 1
        if let last = digits.last, let unit = units[last] {
            multiplier = unit
            digits.removeLast()
        }
        guard let value = Int64(digits), value > 0 else { return nil }
        return value * multiplier
    }
}
