import ArgumentParser
import CFuseShim
import DropboxAPI
import DropboxFS
import Foundation

/// `dropboxfs pin PATH…` and `unpin PATH…`: files and folders of a mount kept fully
/// downloaded, never evicted, and current (doc/SEMANTICS.md, "Pinned files"). They set and
/// remove the mount's `user.dropbox.pinned` attribute, which `getfattr -n` shows too.
struct PinCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pin", abstract: "Keep files or folders of a mount downloaded, for use offline.",
        discussion: """
            A pinned folder covers everything below it, files added later included. The download \
            runs in the background: 'dropboxfs status' shows how much is left. Pinned files are \
            never evicted, even past the cache limit (status says so).
            """)

    @Argument(help: "Files or folders inside a dropboxfs mount.")
    var paths: [String]

    func run() throws {
        try PinAttribute.apply(to: paths, pinned: true)
    }
}

struct UnpinCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unpin", abstract: "Let pinned files or folders be evicted from the cache again.")

    @Argument(help: "Files or folders pinned with 'dropboxfs pin'.")
    var paths: [String]

    func run() throws {
        try PinAttribute.apply(to: paths, pinned: false)
    }
}

enum PinAttribute {
    static let name = "user.dropbox.pinned"

    /// Sets or removes the attribute on each path; says what failed, one line a path, and
    /// fails if any did.
    static func apply(to paths: [String], pinned: Bool) throws {
        var failed = false
        for path in paths {
            // A local disk that takes user attributes would take this one too, and the
            // command would say it pinned what no mount serves.
            guard (try? TargetPath.resolve(path))?.mount != nil else {
                failed = true
                FuseLog.write("dropboxfs: \(pinned ? "pin" : "unpin") \(path): not inside a dropboxfs mount\n")
                continue
            }
            let result = pinned ? setxattr(path, name, "1", 1, 0) : removexattr(path, name)
            guard result != 0 else { continue }
            failed = true
            let error = errno
            let reason: String
            switch error {
            case ENOTSUP:
                reason = "not inside a dropboxfs mount (or one mounted with -o noxattr)"
            case ENODATA:
                var buffer = [UInt8](repeating: 0, count: 8)
                let inherited = getxattr(path, name, &buffer, buffer.count) > 0
                reason = inherited ? "pinned through a folder above it: unpin that folder" : "not pinned"
            default:
                reason = String(cString: strerror(error))
            }
            FuseLog.write("dropboxfs: \(pinned ? "pin" : "unpin") \(path): \(reason)\n")
        }
        if failed { throw ExitCode(1) }
    }
}
