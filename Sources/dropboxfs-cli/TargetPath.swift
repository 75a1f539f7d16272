import DropboxAPI
import Foundation

/// What a command's PATH argument names: a place inside a dropboxfs mount (then the command
/// uses that mount's account and server, and shows results as paths of the mount), or a
/// Dropbox path (`/Docs/a.txt`, with `--account`/`--api-url` like `get` and `put`).
///
/// A path is the mount's when, made absolute from the working directory, it lies inside a
/// mounted dropboxfs; any other path starting with `/` is a Dropbox path. A relative path
/// outside every mount is refused: it names neither.
struct TargetPath {
    /// The Dropbox path ("" for the root).
    let remote: String
    /// The mount it was found in.
    let mount: MountInfo?

    struct MountInfo {
        let mountpoint: String
        let accountName: String?
        let api: String?
        /// The namespace the mount shows (`MountRoot.Resolved.name`): paths are relative to it.
        let root: String?

        /// The mount path of a Dropbox path inside this mount. Dropbox promises the casing of
        /// a `path_display`'s last component only, and names in the mount are case-sensitive:
        /// a folder above that is not found as cased is looked for by its folded name.
        func local(_ remote: String) -> String {
            let direct = mountpoint + remote
            var parent = (direct as NSString).deletingLastPathComponent
            if access(parent, F_OK) == 0 { return direct }
            parent = mountpoint
            let parts = remote.split(separator: "/").map(String.init)
            for part in parts.dropLast() {
                if access(parent + "/" + part, F_OK) == 0 { parent += "/" + part; continue }
                let names = (try? FileManager.default.contentsOfDirectory(atPath: parent)) ?? []
                parent += "/" + (names.first { CaseFolding.fold($0) == CaseFolding.fold(part) } ?? part)
            }
            return parent + "/" + (parts.last ?? "")
        }
    }

    /// How a Dropbox path is shown: as the mount's path when the target was one.
    func shown(_ remote: String) -> String { mount?.local(remote) ?? remote }

    static func resolve(_ text: String) throws -> TargetPath {
        let absolute = text.hasPrefix("/") ? text : FileManager.default.currentDirectoryPath + "/" + text
        let canonical = Self.canonical(absolute)
        let mounts = MountTable.entries().filter { $0.type == "fuse.dropboxfs" }
        if let found = mounts.filter({ canonical == $0.mountpoint || canonical.hasPrefix($0.mountpoint == "/" ? "/" : $0.mountpoint + "/") })
            .max(by: { $0.mountpoint.count < $1.mountpoint.count }) {
            let inside = String(canonical.dropFirst(found.mountpoint == "/" ? 0 : found.mountpoint.count))
            return TargetPath(remote: remotePath(inside), mount: info(found.mountpoint))
        }
        guard text.hasPrefix("/") else {
            throw ClientError.local("\(text): not inside a dropboxfs mount; give a Dropbox path starting with /")
        }
        return TargetPath(remote: remotePath(text), mount: nil)
    }

    /// The client for this target: the mount's credentials, or the options' for a Dropbox path.
    func client(_ connection: ConnectionOptions) throws -> DropboxClient {
        guard let mount else { return try connection.client() }
        if connection.account != nil || connection.apiURL != nil {
            throw ClientError.local("--account and --api-url are for Dropbox paths; \(mount.mountpoint) uses its own account")
        }
        return try AccountStore().client(account: mount.accountName, apiURL: mount.api).withPathRoot(PathRoot.fromStatus(mount.root))
    }

    /// Symlinks resolved through the deepest folder that exists (the path itself may be gone:
    /// a deleted file to restore), `.` and `..` taken out.
    static func canonical(_ path: String) -> String {
        var url = URL(fileURLWithPath: path).standardizedFileURL
        var rest: [String] = []
        while url.path != "/" {
            if let resolved = realpath(url.path, nil) {
                defer { free(resolved) }
                let base = String(cString: resolved)
                return ([base == "/" ? "" : base] + rest.reversed()).joined(separator: "/")
            }
            rest.append(url.lastPathComponent)
            url = url.deletingLastPathComponent()
        }
        return "/" + rest.reversed().joined(separator: "/")
    }

    /// What the mount's status file says of its account (nil fields: the defaults).
    private static func info(_ mountpoint: String) -> MountInfo {
        let report = StatusReport.read(mountpoint)
        // Dropbox's own hosts are the default: naming them would refuse a saved account.
        let api = report?.api.flatMap { $0 == Endpoints.dropbox.api ? nil : $0 }
        return MountInfo(mountpoint: mountpoint, accountName: report?.accountName, api: api, root: report?.root)
    }
}
