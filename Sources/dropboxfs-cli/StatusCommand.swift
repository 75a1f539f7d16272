import ArgumentParser
import DropboxAPI
import Foundation

struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "Show dropboxfs mounts: account, offline or not, cache, requests, pending uploads and their failures.")

    @Argument(help: "Only this mountpoint.")
    var mountpoint: String?

    func run() async throws {
        try await reportingErrors("status") {
            let wanted = mountpoint.map { MountTable.canonical($0) }
            let mounts = MountTable.entries().filter { $0.type == "fuse.dropboxfs" && (wanted == nil || $0.mountpoint == wanted) }
            if mounts.isEmpty {
                if wanted != nil { throw ClientError.local("\(wanted!) is not a dropboxfs mount") }
                print("No dropboxfs mounts.")
                return
            }
            for mount in mounts {
                print(mount.mountpoint)
                guard let file = StatusDirectory.existingFile(for: mount.mountpoint), let data = FileManager.default.contents(atPath: file),
                      let report = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
                    print("  (no status: the filesystem process is not answering; 'dropboxfs unmount' recovers)")
                    continue
                }
                let int = { (key: String) in (report[key] as? NSNumber)?.int64Value ?? 0 }
                print("  account     \(report["account"] as? String ?? "?") (\(report["api"] as? String ?? "?"))")
                if let since = report["offline_since"] as? String {
                    let waiting = int("uploads_pending") + int("folders_queued") + int("deletes_queued") + int("renames_queued")
                    print("  offline     since \(since): Dropbox is out of reach; \(waiting) change(s) wait to be sent")
                }
                print("  cache       \(ByteFormat.string(int("cache_bytes"))) of \(ByteFormat.string(int("cache_limit"))) in \(report["cache_dir"] as? String ?? "?")")
                print("  hit rate    \(String(format: "%.1f%%", ((report["cache_hit_rate"] as? NSNumber)?.doubleValue ?? 0) * 100))")
                if let pins = report["pins"] as? [String], !pins.isEmpty {
                    let missing = int("pinned_missing_bytes")
                    var line = "  pinned      \(ByteFormat.string(int("pinned_bytes"))) in \(int("pinned_files")) file(s) under \(pins.joined(separator: ", ")); "
                    line += missing > 0 ? "\(ByteFormat.string(missing)) still to download" : "all downloaded"
                    if report["pinned_over_limit"] as? Bool == true { line += "; more than the cache limit (all kept)" }
                    print(line)
                }
                print("  downloaded  \(ByteFormat.string(int("downloaded_bytes")))")
                print("  requests    \(int("requests"))")
                print("  inodes      \(int("inodes")) known to the kernel")
                let uploads = report["uploads"] as? [[String: Any]] ?? []
                print("  uploads     \(int("uploads_pending")) pending (\(ByteFormat.string(int("uploads_pending_bytes")))), \(int("uploaded_files")) done")
                for upload in uploads {
                    let number = { (key: String) in (upload[key] as? NSNumber)?.int64Value ?? 0 }
                    var line = "    \(upload["path"] as? String ?? "?")  \(upload["state"] as? String ?? "?")"
                    if upload["state"] as? String == "uploading" { line += " \(ByteFormat.string(number("sent"))) of \(ByteFormat.string(number("size")))" }
                    if upload["on_disk"] as? Bool == true { line += ", on disk" }
                    if let failure = upload["failure"] as? String { line += ": \(failure)" }
                    print(line)
                }
                if int("uploads_pending") > uploads.count { print("    and \(int("uploads_pending") - Int64(uploads.count)) more") }
                print("  new folders \(int("folders_queued")) not yet made on Dropbox")
                print("  removals    \(int("deletes_queued")) not yet sent to Dropbox")
                print("  renames     \(int("renames_queued")) not yet made on Dropbox")
                for line in report["set_aside"] as? [String] ?? [] { print("  set aside   \(line)") }
            }
        }
    }
}
